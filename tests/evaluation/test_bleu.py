"""BLEU wrapper: sacreBLEU parity and the Multi30k tokenized-lowercase convention."""

from __future__ import annotations

import sacrebleu

from nlpzoo.evaluation.bleu import moses_tokenize_lower, score

HYPS = ["A man's dog runs on the grass.", "Two kids play soccer in a park!"]
REFS = ["A man's dog is running on green grass.", "Two children are playing soccer in a park."]


def test_sacrebleu_and_chrf_agree_with_sacrebleu_itself():
    s = score(HYPS, REFS)
    assert s["bleu"] == round(sacrebleu.corpus_bleu(HYPS, [REFS]).score, 2)
    assert s["chrf"] == round(sacrebleu.corpus_chrf(HYPS, [REFS]).score, 2)
    assert s["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")


def test_tokenized_lowercase_bleu_is_the_multi30k_convention():
    assert moses_tokenize_lower(["A man's “hat”, isn't it?"]) == [
        "a man 's \" hat , \" isn 't it ?"  # Moses puts the comma inside quotes
    ]
    # case differences cost sacreBLEU points but not the lowercase convention
    s = score(["A DOG RUNS ON THE GREEN GRASS ."], ["a dog runs on the green grass."])
    assert s["bleu_tok_lc"] == 100.0 and s["bleu"] < 20
    # equals multi-bleu-style BLEU computed on the tokenized, lowercased text
    tok = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    expected = tok.corpus_score(moses_tokenize_lower(HYPS), [moses_tokenize_lower(REFS)]).score
    assert score(HYPS, REFS)["bleu_tok_lc"] == round(expected, 2)
