"""BLEU and chrF for translations (docs/design.md §4), two conventions side by side.

* sacreBLEU (Post 2018): detokenized, cased hypotheses against the raw references, the metric's
  own 13a tokenization; comparable across papers only through its signature, which is reported.
* "Tokenized lowercase" BLEU, the convention of the Multi30k literature (multi-bleu.perl on
  Moses-tokenized, lowercased text): both sides are Moses-normalised (punctuation), Moses-tokenized
  and lowercased here, then scored with sacreBLEU's `tokenize="none"`, so the n-gram statistics are
  those of multi-bleu.perl. It runs higher than sacreBLEU on the same output (e.g. "man's" gives
  two tokens), which is why published tables must be compared in their own convention.
* chrF (Popović 2015): character n-gram F-score, β = 2, sacreBLEU's implementation.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4)
def _moses(lang: str):
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    return MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)


def moses_tokenize_lower(lines: list[str], lang: str = "en") -> list[str]:
    """Moses punctuation normalisation, Moses tokenization (no escaping), lowercase."""
    norm, tok = _moses(lang)
    return [" ".join(tok.tokenize(norm.normalize(line), escape=False)).lower() for line in lines]


def score(hypotheses: list[str], references: list[str], lang: str = "en") -> dict:
    """Corpus scores of detokenized `hypotheses` against one reference each.

    Returns `bleu` (sacreBLEU), `bleu_tok_lc` (Multi30k convention), `chrf`, and the two
    signatures `bleu_signature`, `chrf_signature`.
    """
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    tok_lc = BLEU(tokenize="none", force=True)  # text already tokenized: do not re-tokenize
    return {
        "bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "bleu_tok_lc": round(
            tok_lc.corpus_score(
                moses_tokenize_lower(hypotheses, lang), [moses_tokenize_lower(references, lang)]
            ).score,
            2,
        ),
        "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }
