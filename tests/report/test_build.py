"""The report renders any subset of runs and lists what is missing instead of failing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from report_inputs import CURVE, VECTORS, render, report_dirs, vector_run, write_json

from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.params_report import ReportConfig
from nlpzoo.report.inputs import Provenance, attention_maps


def _rows(text: str, section: str) -> dict[str, str]:
    part = text.split(section, 1)[1].split("\n## ", 1)[0]
    return {
        line.split("|")[1].strip(): line
        for line in part.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    }


def test_empty_project_renders_and_lists_every_missing_run(tmp_path):
    dirs = report_dirs(tmp_path)
    text = render(dirs, {"ngram": "ngram", "seq2seq": "seq2seq"})
    assert "No language-model runs yet" in text and "No translation runs yet" in text
    assert "`ngram`: no metrics/ngram.json" in text
    assert "`seq2seq`: no metrics/seq2seq.json" in text
    assert (dirs["reports"] / "index.html").is_file()


def test_full_lm_and_vectors_report(tmp_path):
    dirs = report_dirs(tmp_path)
    base = {"task": "lm", "params": 10, "train_seconds": 1.0, "train_tokens_per_s": 1e6}
    write_json(
        dirs["metrics"] / "ngram.json",
        {**base, "family": "ngram", "valid_ppl": 160.0, "test_ppl": 150.0},
    )
    write_json(
        dirs["metrics"] / "nnlm.json",
        {
            **base,
            **VECTORS,
            "family": "nnlm",
            "valid_ppl": 130.0,
            "test_ppl": 120.0,
            "params": 2000,
            "train_tokens_per_s": 5000.0,
            "cost_formula": "N×D + N×D×H + H×V",
            "cost_terms": "N=4, D=60, H=100, V=13,192",
            "cost_per_token": 1343440,
        },
    )
    write_json(
        dirs["metrics"] / "mixtures.json",
        {"baseline": "ngram", "runs": {"nnlm": {"lambda": 0.6, "test_ppl_mix": 112.5}}},
    )
    (dirs["plots"] / "nnlm.csv").write_text(CURVE)
    (dirs["plots"] / "ngram.csv").write_text(
        "epoch,step,train_loss,val_loss,val_ppl,seconds\n0,0,,5.07,160,0.5\n"
    )
    vector_run(dirs, "nnlm", 0)
    params = {"nnlm": {"context_size": 4, "emb_dim": 60, "hidden_dim": 100}}
    prov = Provenance(
        git_rev="0123456789abcdef",
        exp_name="wider-nnlm",
        params_hash="cafe",
        data={"lm": {"source": "brown", "lowercase": True}},
        vocab={"lm": {"vocab_size": 13192, "train_tokens": 800000, "min_count": 4}},
    )
    text = render(dirs, {"ngram": "ngram", "nnlm": "nnlm"}, params=params, provenance=prov)
    assert (dirs["reports"] / "report.md").read_text() == text
    assert "`0123456789ab`" in text and "`wider-nnlm`" in text and "`cafe`" in text
    assert "13,192 words" in text and "800,000" in text

    lm = _rows(text, "## 1. Language modelling")
    assert "0.800" in lm["nnlm"]  # 120 / 150
    assert "112.5 (0.60)" in lm["nnlm"] and "0.750" in lm["nnlm"]  # mixture and its ratio
    assert "1.000" in lm["ngram"]
    paper = [k for k in lm if "paper, different preprocessing" in k]
    assert paper and "0.76" in lm[paper[0]]
    assert "mixtures" not in lm  # the mixtures file is not a run

    vec = _rows(text, "## 2. Word vectors")
    assert "2.0 / 7.0 / 5.0" in vec["nnlm"] and "0.200 (70)" in vec["nnlm"]
    assert "ngram" not in vec  # no vectors
    assert "king_n0, king_n1, king_n2" in vec["**king**"]
    assert (dirs["reports"] / "figures" / "projection_nnlm.png").stat().st_size > 0

    cost = _rows(text, "## 4. Cost")
    # the cost the run wrote: 4·60 + 4·60·100 + 100·13192
    assert "N=4, D=60, H=100, V=13,192" in cost["nnlm"] and "1,343,440" in cost["nnlm"]
    assert "| 200 |" in cost["nnlm"]  # µs per token at 5,000 tokens/s
    assert "0.149" in cost["nnlm"]  # ns per multiply-add: 200 µs / 1,343,440

    assert (dirs["reports"] / "figures" / "curves_lm.png").stat().st_size > 0
    assert "![Learning curves, language models](figures/curves_lm.png)" in text
    assert "Nothing: every enabled run" in text


def test_one_lm_run_only(tmp_path):
    dirs = report_dirs(tmp_path)
    write_json(
        dirs["metrics"] / "nnlm.json",
        {"family": "nnlm", "task": "lm", "valid_ppl": 130.0, "test_ppl": 120.0},
    )
    text = render(dirs, {"ngram": "ngram", "nnlm": "nnlm", "cbow": "word2vec"})
    lm = _rows(text, "## 1. Language modelling")
    assert "120.0" in lm["nnlm"] and "| – |" in lm["nnlm"]  # no n-gram: no ratio
    assert "`ngram`: no metrics/ngram.json" in text and "`cbow`: no metrics/cbow.json" in text
    assert "`nnlm`: metrics lack `params`, `train_seconds`, `train_tokens_per_s`" in text
    assert "`nnlm`: no learning curve plots/nnlm.csv" in text
    assert "No ratios and no mixtures" not in text  # the baseline is enabled, not yet scored
    text = render(dirs, {"nnlm": "nnlm"})  # the baseline switched off
    assert "No ratios and no mixtures: the baseline `ngram` (params `mixture.baseline`)" in text


def test_a_metrics_file_missing_a_key_and_a_broken_one(tmp_path):
    dirs = report_dirs(tmp_path)
    m = {"family": "word2vec", "task": "vectors", **VECTORS}
    del m["simlex_rho"]
    write_json(dirs["metrics"] / "cbow.json", m)
    (dirs["metrics"] / "glove.json").write_text("{not json")
    write_json(dirs["metrics"] / "old_run.json", {"family": "nnlm", "test_ppl": 99.0})
    text = render(dirs, {"cbow": "word2vec", "glove": "glove"})
    vec = _rows(text, "## 2. Word vectors")
    assert "– (90)" in vec["cbow"]  # SimLex ρ missing, its coverage shown
    assert "`cbow`: metrics lack `simlex_rho`" in text
    assert "`cbow`: no eval/cbow/neighbours.json" in text
    assert "`glove`: metrics/glove.json unreadable" in text
    assert (
        "`metrics/old_run.json` present but `old_run` is not an enabled run in `models:`; "
        "ignored" in text
    )


def test_only_mt_runs(tmp_path):
    dirs = report_dirs(tmp_path)
    for name, family, bleu in (("seq2seq", "seq2seq", 11.0), ("attention", "attention", 26.0)):
        write_json(
            dirs["metrics"] / f"{name}.json",
            {
                "family": family,
                "task": "mt",
                "bleu": bleu,
                "bleu_beam": bleu + 1,
                "bleu_tok_lc": bleu + 2,
                "bleu_tok_lc_beam": bleu + 3,
                "chrf": 40.0,
                "chrf_beam": 41.0,
                "test_ppl": 9.5,
                "params": 1000,
                "decode_sents_per_s_greedy": 55.0,
                "decode_sents_per_s_beam": 12.5,
                "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.0",
            },
        )
        (dirs["plots"] / f"{name}.csv").write_text(CURVE)
    write_json(
        dirs["eval"] / "attention" / "samples.json",
        [
            {"source": f"ein hund {i}", "reference": f"a dog {i}", "greedy": "a dog", "beam": "a"}
            for i in range(10)
        ],
    )
    write_json(
        dirs["eval"] / "attention" / "attention.json",
        [
            {  # as tasks/mt.py writes it: pieces on the axes, the text beside them
                "index": i,
                "source_text": "ein hund",
                "translation": "a dog",
                "source_tokens": ["▁ein", "▁hu", "nd", "</s>"],
                "target_tokens": ["▁a", "▁dog", "</s>"],
                "weights": np.full((3, 4), 0.25).tolist(),
            }
            for i in range(2)
        ],
    )
    text = render(dirs, {"seq2seq": "seq2seq", "attention": "attention"})
    assert "No language-model runs yet" in text and "No runs with word vectors yet" in text
    mt = _rows(text, "## 3. Translation")
    assert "tutorial seq2seq (word-level, published)" in mt
    assert "36.5" in mt["tutorial transformer (word-level, published)"]
    part = text.split("## 3. Translation", 1)[1].split("\n## ", 1)[0]
    assert "| seq2seq | seq2seq | greedy | 11.0 | 13.0 | 40.0 | 55.0 |" in part
    assert "| seq2seq | seq2seq | beam | 12.0 | 14.0 | 41.0 | 12.5 |" in part
    assert "tok:13a" in part
    assert part.count("| ein hund") == 3  # three samples
    for fig in ("attention_attention_1.png", "attention_attention_2.png", "curves_mt.png"):
        assert (dirs["reports"] / "figures" / fig).stat().st_size > 0
    assert "`seq2seq`: no sample translations in eval/seq2seq/" in text
    ((src, out, weights), _) = attention_maps(dirs["eval"], "attention")
    assert src == ["▁ein", "▁hu", "nd", "</s>"] and out == ["▁a", "▁dog", "</s>"]
    assert weights.shape == (3, 4)


def test_tsne_projection_and_bad_config(tmp_path):
    dirs = report_dirs(tmp_path)
    write_json(dirs["metrics"] / "cbow.json", {"family": "word2vec", "task": "vectors", **VECTORS})
    vector_run(dirs, "cbow", 1)
    render(dirs, {"cbow": "word2vec"}, config=ReportConfig(projection="tsne"))
    assert (dirs["reports"] / "figures" / "projection_cbow.png").stat().st_size > 0
    with pytest.raises(ConfigError, match="projection"):
        build(ReportConfig, {"projection": "umap"}, "report")


def test_figures_reach_each_runs_mlflow_run(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from nlpzoo.tracking import Tracker

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    dirs = report_dirs(tmp_path)
    tracker = Tracker.start("cbow", "word2vec", {"dim": 4})
    tracker.save(dirs["eval"] / "cbow")
    tracker.finish()
    write_json(dirs["metrics"] / "cbow.json", {"family": "word2vec", "task": "vectors", **VECTORS})
    vector_run(dirs, "cbow", 0)
    (dirs["plots"] / "cbow.csv").write_text(CURVE)
    render(dirs, {"cbow": "word2vec"}, mlflow=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    listed = {a.path for a in client.list_artifacts(tracker.run_id, "figures")}
    assert listed == {"figures/projection_cbow.png", "figures/curves_vectors.png"}
    assert client.get_run(tracker.run_id).info.status == "FINISHED"


def _lm_metrics(family: str, test_ppl: float, **extra) -> dict:
    return {
        "family": family,
        "task": "lm",
        "valid_ppl": test_ppl + 5,
        "test_ppl": test_ppl,
        "params": 1000,
        "train_seconds": 1.0,
        "train_tokens_per_s": 1e5,
        **extra,
    }


def test_only_the_enabled_runs_of_models_are_reported(tmp_path, monkeypatch):
    """A user's corpus with three runs kept: the metrics of earlier runs (Brown's LSTM,
    Transformer, a word2vec run) and of a disabled run are in no table, figure or section, only
    in the footer."""
    from nlpzoo.report import figures

    dirs = report_dirs(tmp_path)
    params = {
        "lm": {"source": "text"},
        "models": {
            "ngram": {"family": "ngram", "data": "vocab/lm"},
            "nnlm": {"family": "nnlm", "data": "vocab/lm"},
            "rnn_lm": {"family": "rnn_lm", "data": "vocab/lm", "enabled": False},
            "svd": {"family": "svd", "data": "cooccur"},
        },
    }
    cost = {"cost_formula": "Q_FORMULA", "cost_terms": "sizes", "cost_per_token": 10}
    write_json(dirs["metrics"] / "ngram.json", _lm_metrics("ngram", 300.0))
    write_json(dirs["metrics"] / "nnlm.json", _lm_metrics("nnlm", 270.0, **VECTORS, **cost))
    write_json(dirs["metrics"] / "svd.json", {"family": "svd", "task": "vectors", **VECTORS})
    stale = {
        "rnn_lm": _lm_metrics("rnn_lm", 258.0, **cost),  # disabled
        "lstm_lm": _lm_metrics("rnn_lm", 242.0, **VECTORS, **cost),
        "transformer_lm": _lm_metrics("transformer_lm", 249.0, **cost),
        "cbow": {"family": "word2vec", "task": "vectors", **VECTORS, **cost},
    }
    for name, m in stale.items():
        write_json(dirs["metrics"] / f"{name}.json", m)
        vector_run(dirs, name, 1)
    write_json(
        dirs["metrics"] / "mixtures.json",
        {
            "baseline": "ngram",
            "runs": {
                "nnlm": {"lambda": 0.5, "test_ppl_mix": 240.0},
                **{name: {"lambda": 0.5, "test_ppl_mix": 200.0} for name in stale},
            },
        },
    )
    for name in ("ngram", "nnlm", "svd", *stale):
        (dirs["plots"] / f"{name}.csv").write_text(CURVE)
    vector_run(dirs, "nnlm", 0)
    vector_run(dirs, "svd", 2)
    drawn: list[str] = []  # the runs every figure was drawn from
    curves, projection = figures.learning_curves, figures.projection

    def spy_curves(task, by_run, path):
        drawn.extend(by_run)
        return curves(task, by_run, path)

    def spy_projection(run, *args, **kw):
        drawn.append(run)
        return projection(run, *args, **kw)

    monkeypatch.setattr(figures, "learning_curves", spy_curves)
    monkeypatch.setattr(figures, "projection", spy_projection)
    prov = Provenance(data={"lm": params["lm"], "mt": {"source": "multi30k"}})
    text = render(dirs, None, params=params, provenance=prov)

    body, footer = text.split("## Missing or incomplete", 1)
    for name in stale:
        assert f"`{name}`" not in body and f"| {name} |" not in body, name
        assert (
            f"`metrics/{name}.json` present but `{name}` is not an enabled run in `models:`; "
            "ignored" in footer
        )
    assert set(drawn) == {"ngram", "nnlm", "svd"}
    lm = _rows(text, "## 1. Language modelling")
    assert set(lm) == {"run", "ngram", "nnlm"}  # no paper row: not Brown
    assert "0.900" in lm["nnlm"] and "240.0 (0.50)" in lm["nnlm"]  # 270 / 300; its mixture
    vec = _rows(text, "## 2. Word vectors")
    assert {"nnlm", "svd"} <= set(vec) and "cbow" not in vec["probe"]
    assert set(_rows(text, "## 4. Cost")) == {"run", "nnlm", "ngram"}
    assert "SentencePiece" not in text  # no translation run: no translation data in the header
    assert "No translation runs yet" in text
    assert len(footer.strip().splitlines()) == len(stale)  # nothing else is missing


def test_a_stale_metrics_file_of_another_family_is_not_used(tmp_path):
    dirs = report_dirs(tmp_path)
    write_json(dirs["metrics"] / "nnlm.json", _lm_metrics("rnn_lm", 120.0))
    text = render(dirs, {"nnlm": "nnlm"})
    assert "No language-model runs yet" in text
    assert "`nnlm`: metrics/nnlm.json is of family `rnn_lm` but `models:` says `nnlm`" in text


def test_the_cost_table_shows_what_the_run_wrote(tmp_path):
    """The formula, sizes and Q come verbatim from metrics/RUN.json; the report computes none
    (not even from the run's params section)."""
    dirs = report_dirs(tmp_path)
    write_json(
        dirs["metrics"] / "nnlm.json",
        _lm_metrics(
            "nnlm",
            120.0,
            cost_formula="Q = 7×FAKE + ω",
            cost_terms="FAKE=3, ω=2",
            cost_per_token=23,
            train_tokens_per_s=1e6,
        ),
    )
    write_json(
        dirs["metrics"] / "glove.json",
        {
            "family": "glove",
            "task": "vectors",
            **VECTORS,
            "cost_formula": "2D per non-zero X_ij",
            "cost_terms": "D=100",
            "cost_per_token": 200,
            "cost_unit": "entry",
        },
    )
    write_json(dirs["metrics"] / "ngram.json", _lm_metrics("ngram", 150.0))  # no cost: speed only
    params = {"nnlm": {"context_size": 9, "emb_dim": 11, "hidden_dim": 13}}
    prov = Provenance(vocab={"lm": {"vocab_size": 13192}})
    text = render(
        dirs, {"nnlm": "nnlm", "glove": "glove", "ngram": "ngram"}, params=params, provenance=prov
    )
    cost = _rows(text, "## 4. Cost")
    assert "| `Q = 7×FAKE + ω` | FAKE=3, ω=2 | 23 |" in cost["nnlm"]
    assert "| 1 |" in cost["nnlm"] and "43.478" in cost["nnlm"]  # 1 µs per token / 23
    assert "N×D" not in text.split("## 4. Cost", 1)[1].split("|", 1)[1]  # nothing computed
    assert "| `2D per non-zero X_ij` | D=100 | 200 per entry |" in cost["glove"]
    assert "| ngram | ngram | – | – | – | 10 |" in cost["ngram"]


def test_the_prose_takes_its_numbers_from_params_and_cost(tmp_path, monkeypatch):
    """The analogy search size is params' `evaluation.restrict_vocab`, the attention span of the
    translation costs `nlpzoo.cost.MT_SPAN`: the prose follows either when it changes."""
    from nlpzoo import cost
    from nlpzoo.params_eval import EvaluationConfig

    dirs = report_dirs(tmp_path)
    q = {"cost_formula": "N×D", "cost_terms": "N=1, D=2", "cost_per_token": 2}
    write_json(
        dirs["metrics"] / "cbow.json", {"family": "word2vec", "task": "vectors", **VECTORS, **q}
    )
    default = render(dirs, {"cbow": "word2vec"})
    searched = f"answers searched among the {EvaluationConfig().restrict_vocab:,} most frequent"
    assert searched in default
    assert f"attention spans S = T = {cost.MT_SPAN} pieces" in default

    monkeypatch.setattr(cost, "MT_SPAN", 24)
    params = {"evaluation": {"restrict_vocab": 12345}}
    text = render(dirs, {"cbow": "word2vec"}, params=params)
    assert "answers searched among the 12,345 most frequent words" in text
    assert searched not in text
    assert "attention spans S = T = 24 pieces" in text


def test_a_family_added_to_the_registry_is_reported(tmp_path, monkeypatch):
    """The report knows no family by name: a family registered elsewhere shows in its task's
    table."""
    from dataclasses import dataclass

    from nlpzoo.families import Family, register, unregister

    @dataclass
    class ToyConfig:
        width: int = 3

    register(Family("toy_lm", ToyConfig, object, "lm", "stream", "lightning"))
    try:
        dirs = report_dirs(tmp_path)
        write_json(dirs["metrics"] / "toy.json", _lm_metrics("toy_lm", 99.0))
        params = {"models": {"toy": {"family": "toy_lm", "data": "vocab/lm"}}}
        text = render(dirs, None, params=params)
    finally:
        unregister("toy_lm")
    assert "99.0" in _rows(text, "## 1. Language modelling")["toy"]
    assert "| toy | toy_lm |" in text.split("## 4. Cost", 1)[1]  # its speed
    assert "`toy`: no learning curve plots/toy.csv" in text


def test_the_published_bleu_rows_come_from_the_family_records(tmp_path):
    """A row per family with `tutorial_bleu`, lowest first, on Multi30k's test set only."""
    from dataclasses import dataclass

    from nlpzoo.families import FAMILIES, Family, register, unregister

    @dataclass
    class ToyConfig:
        width: int = 3

    register(Family("toy_mt", ToyConfig, object, "mt", "parallel", "lightning", tutorial_bleu=20.5))
    try:
        dirs = report_dirs(tmp_path)
        write_json(
            dirs["metrics"] / "toy.json", {"family": "toy_mt", "bleu": 7.0, "bleu_beam": 8.0}
        )
        text = render(dirs, {"toy": "toy_mt"})
        other = Provenance(data={"mt": {"source": "multi30k", "test_set": "test_2017_flickr"}})
        elsewhere = render(dirs, {"toy": "toy_mt"}, provenance=other)
        records = [FAMILIES[name] for name in FAMILIES]
    finally:
        unregister("toy_mt")
    expected = sorted((f for f in records if f.tutorial_bleu), key=lambda f: f.tutorial_bleu)
    assert {"seq2seq", "attention", "transformer", "toy_mt"} <= {f.name for f in expected}
    mt = _rows(text, "## 3. Translation")
    published = [run for run in mt if run.startswith("tutorial ")]
    assert published == [f"tutorial {f.name} (word-level, published)" for f in expected]
    for f in expected:
        row = mt[f"tutorial {f.name} (word-level, published)"]
        assert f"| {f.tutorial_bleu:.1f} |" in row
    assert "tutorial toy_mt (word-level, published)" in published
    assert "| toy_mt | – | – | 20.5 | – |" in mt["tutorial toy_mt (word-level, published)"]
    assert "| toy | toy_mt | greedy | 7.0 |" in text and "| toy | toy_mt | beam | 8.0 |" in text
    assert not [run for run in _rows(elsewhere, "## 3. Translation") if "tutorial" in run]


def _samples(text: str, n: int = 1) -> dict:
    """eval/RUN/samples.json as nlpzoo.generation.samples_record writes it."""
    return {
        "prompt": "The city",
        "prompt_tokens": ["the", "city"],
        "unknown": [],
        "tokens": 5,
        "temperature": 1.0,
        "top_k": 0,
        "seed": 0,
        "samples": [{"text": f"{text} {i}", "log_prob": -10.0 - i} for i in range(n)],
    }


def _analogies(answers: dict[str, str]) -> list[dict]:
    """eval/RUN/analogies.json: question "a b c" -> the best 3CosAdd answer (3CosMul: "x")."""
    out = []
    for question, best in answers.items():
        a, b, c, expected = question.split()
        found = None if best is None else [[best, 0.5], ["other", 0.4]]
        mul = None if best is None else [[expected if best == expected else "x", 1.1]]
        out.append({"question": [a, b, c], "expected": expected, "3cosadd": found, "3cosmul": mul})
    return out


def test_lm_samples_side_by_side_and_the_analogy_table(tmp_path):
    dirs = report_dirs(tmp_path)
    for name, family, ppl in (("ngram", "ngram", 150.0), ("lstm", "rnn_lm", 110.0)):
        write_json(dirs["metrics"] / f"{name}.json", _lm_metrics(family, ppl))
    write_json(dirs["eval"] / "ngram" / "samples.json", _samples("of the county", 2))
    write_json(dirs["eval"] / "lstm" / "samples.json", _samples("was | built"))
    write_json(dirs["metrics"] / "svd.json", {"family": "svd", "task": "vectors", **VECTORS})
    write_json(dirs["metrics"] / "glove.json", {"family": "glove", "task": "vectors", **VECTORS})
    questions = {"man woman king queen": "queen", "go went come came": "went"}
    write_json(dirs["eval"] / "svd" / "analogies.json", _analogies(questions))
    questions = {"man woman king queen": "prince", "go went come came": None}
    write_json(dirs["eval"] / "glove" / "analogies.json", _analogies(questions))
    runs = {"ngram": "ngram", "lstm": "rnn_lm", "svd": "svd", "glove": "glove"}
    text = render(dirs, runs)
    lm = text.split("## 1. Language modelling", 1)[1].split("\n## ", 1)[0]
    assert "after the prompt **the city**: 5 tokens sampled at temperature 1.0, seed 0" in lm
    assert "| ngram #1 | of the county 0 | -10.0 |" in lm
    assert "| ngram #2 | of the county 1 | -11.0 |" in lm
    assert "| lstm | was \\| built 0 | -10.0 |" in lm  # a | in the text is escaped
    vec = _rows(text, "## 2. Word vectors")
    assert vec["man : woman :: king : ?"].split("|")[2:5] == [" queen ", " queen ✓ ", " prince "]
    assert vec["go : went :: come : ?"].split("|")[2:5] == [" came ", " went ", " – "]
    # 3CosAdd right once for svd; 3CosMul (here "x" unless 3CosAdd is right) as often
    assert vec["**correct** (3CosAdd / 3CosMul)"].split("|")[3:5] == [" 1 / 1 ", " 0 / 0 "]
    html = (dirs["reports"] / "index.html").read_text()
    assert "of the county 1" in html and "queen ✓" in html
    # runs evaluated before samples and analogies existed: no table, and nothing to fix
    for name in ("ngram", "lstm", "svd", "glove"):
        for f in (dirs["eval"] / name).iterdir():
            f.unlink()
    text = render(dirs, runs)
    assert "after the prompt" not in text and "king : ?" not in text
    assert "samples.json" not in text and "analogies.json" not in text


def test_rendering_imports_no_torch(tmp_path):
    dirs = report_dirs(tmp_path)
    write_json(dirs["metrics"] / "nnlm.json", _lm_metrics("nnlm", 120.0, **VECTORS))
    vector_run(dirs, "nnlm", 0)
    write_json(dirs["eval"] / "nnlm" / "samples.json", _samples("the jury"))
    write_json(dirs["eval"] / "nnlm" / "analogies.json", _analogies({"a b c d": "d"}))
    (dirs["plots"] / "nnlm.csv").write_text(CURVE)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from nlpzoo.report.build import build_report\n"
        f"d = Path({str(tmp_path)!r})\n"
        "build_report(metrics_dir=d / 'metrics', plots_dir=d / 'plots', eval_dir=d / 'eval',\n"
        "    models_dir=d / 'models', out_dir=d / 'reports', runs={'nnlm': 'nnlm'})\n"
        "print(sorted(m for m in ('torch', 'lightning', 'mlflow') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"
    assert (dirs["reports"] / "figures" / "projection_nnlm.png").is_file()


def test_time_per_stage_with_the_sum_the_span_and_what_is_missing(tmp_path):
    """timings/STAGE.json of every stage before the report (nlpzoo.cli.write_timing), in
    pipeline order; a missing or broken file is "not recorded"."""
    dirs = report_dirs(tmp_path)
    timings = tmp_path / "timings"
    order = [
        *("corpus@lm", "corpus@mt", "corpus@eval", "prepare@lm", "prepare@mt"),
        *("vocab@lm", "vocab@mt", "cooccur"),
        *("train-nnlm", "evaluate-nnlm", "train-ngram", "evaluate-ngram", "mixture"),
    ]
    t0 = datetime(2025, 1, 2, 10, 0, tzinfo=timezone.utc)
    for i, stage in enumerate(order):
        if stage == "evaluate-nnlm":
            continue  # never ran
        start = t0 + timedelta(seconds=30 * i)  # 75 s each, every 30 s: they overlap
        write_json(
            timings / f"{stage}.json",
            {
                "stage": stage,
                "seconds": 75.4,
                "cpu_seconds": 150.0 if stage.startswith("train") else 60.0,
                "system_seconds": 20.0 if stage.startswith("train") else 1.0,
                "threads": 8 if stage.startswith(("train", "evaluate")) else None,
                "load_average": [1.25, 1.0, 0.5],
                "started": start.isoformat(),
                "finished": (start + timedelta(seconds=75.4)).isoformat(),
            },
        )
    (timings / "cooccur.json").write_text("{not json")
    write_json(timings / "report.json", {"stage": "report", "seconds": 9999})  # not shown
    text = render(dirs, {"nnlm": "nnlm", "ngram": "ngram"}, timings_dir=timings)

    section = "## 6. Time per stage (last `dvc repro`)"
    assert section in text and text.index(section) < text.index("## Missing or incomplete")
    rows = _rows(text, section)
    assert [k.strip("`") for k in rows][1 : len(order) + 1] == order  # after the header
    assert rows["`corpus@lm`"] == "| `corpus@lm` | 1:15 | 1:00 | 0:01 | – | 1.25 |"
    assert rows["`train-nnlm`"] == "| `train-nnlm` | 1:15 | 2:30 | 0:20 | 8 | 1.25 |"
    assert "not recorded" in rows["`evaluate-nnlm`"] and "not recorded" in rows["`cooccur`"]
    assert "report" not in "".join(rows)
    # 11 recorded stages of 75.4 s; two train stages at 150 s CPU, nine at 60 s
    assert rows["**sum of the stages**"].split("|")[2:5] == [" 13:49 ", " 14:00 ", " 0:49 "]
    # the first starts at 10:00:00, the last (mixture, 13th) finishes at 10:07:15.4
    assert rows["**elapsed**, first start to last finish"].split("|")[2] == " 7:15 "
    assert rows["**of which a stage running**"].split("|")[2] == " 7:15 "  # no gap between them
    html = (dirs["reports"] / "index.html").read_text()
    assert "<td><code>train-nnlm</code></td><td>1:15</td>" in html


def test_time_per_stage_when_nothing_was_recorded(tmp_path):
    dirs = report_dirs(tmp_path)
    text = render(dirs, {"svd": "svd"}, timings_dir=tmp_path / "timings")
    rows = _rows(text, "## 6. Time per stage")
    assert list(rows)[-3:] == ["`train-svd`", "`evaluate-svd`", "`mixture`"]
    assert all("not recorded" in r for k, r in rows.items() if k != "stage")
    assert "## 6." not in render(dirs, {"svd": "svd"})  # no timings_dir: no section


def test_time_per_stage_counts_the_gaps_between_reruns(tmp_path):
    """Two stages an hour apart, one overlapping a third: the span holds the gap, the time with
    a stage running does not."""
    dirs = report_dirs(tmp_path)
    timings = tmp_path / "timings"
    t0 = datetime(2025, 1, 2, 10, 0, tzinfo=timezone.utc)
    for stage, start, seconds in (
        ("corpus@lm", 0, 60),
        ("prepare@lm", 30, 60),  # overlaps corpus@lm: 90 s together
        ("vocab@lm", 3600, 120),  # an hour later
    ):
        began = t0 + timedelta(seconds=start)
        write_json(
            timings / f"{stage}.json",
            {
                "stage": stage,
                "seconds": seconds,
                "started": began.isoformat(),
                "finished": (began + timedelta(seconds=seconds)).isoformat(),
            },
        )
    rows = _rows(render(dirs, {}, timings_dir=timings), "## 6. Time per stage")
    assert rows["**sum of the stages**"].split("|")[2] == " 4:00 "
    assert rows["**elapsed**, first start to last finish"].split("|")[2] == " 1:02:00 "
    assert rows["**of which a stage running**"].split("|")[2] == " 3:30 "


def test_provenance_names_the_commit_the_params_and_the_vocabularies(tmp_path):
    from nlpzoo.report.inputs import read_provenance

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    commit = [*git, "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"]
    subprocess.run(commit, check=True)
    head = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    write_json(tmp_path / "data" / "vocab" / "lm" / "stats.json", {"vocab_size": 7})
    params = {"lm": {"source": "brown"}, "seed": 1}
    prov = read_provenance(tmp_path, params, "exp-1")
    assert prov.git_rev == head and prov.exp_name == "exp-1"
    assert prov.vocab == {"lm": {"vocab_size": 7}, "mt": None}
    assert prov.data == {"lm": {"source": "brown"}, "mt": None}
    assert len(prov.params_hash) == 12
    assert read_provenance(tmp_path, {**params, "seed": 2}).params_hash != prov.params_hash
    assert read_provenance(tmp_path / "data", params).git_rev == head  # inside the work tree


def _roofline(path: Path) -> None:
    """A roofline.json as benchmarks/roofline.py writes it (no top-level peaks: the report takes
    the largest figure over the shapes itself)."""
    write_json(
        path,
        {
            "date": "2026-12-04T02:54:22+00:00",
            "machine": {
                "cpu": "Test CPU 9000",
                "cores": 2,
                "flags": {"avx2": True, "fma": True, "avx512_bf16": False, "amx_bf16": False},
                "torch": "9.9.9+cpu",
                "threads": 1,
            },
            "peaks": {
                "small": {"shape": [64, 256, 1024], "fp32_gflops": 40.0, "bf16_gflops": 90.0},
                "large": {"shape": [1024, 200, 13192], "fp32_gflops": 60.0, "bf16_gflops": 120.0},
                "ffn": {"shape": [1024, 128, 512], "fp32_gflops": 50.0, "bf16_gflops": 100.0},
            },
        },
    )


def test_the_cost_table_holds_each_runs_precision_flops_and_share_of_its_precisions_peak(tmp_path):
    """Training GFLOP/s = 6 Q tokens/s; the share is of the one-thread peak (the largest over the
    shapes) of the run's own precision, bf16's for a bf16-mixed run; no share for word vectors;
    the machine and torch version of the peaks are named."""
    dirs = report_dirs(tmp_path)
    q = {"cost_formula": "Q", "cost_terms": "-", "cost_per_token": 1_000_000}
    write_json(
        dirs["metrics"] / "nnlm.json", _lm_metrics("nnlm", 120.0, **q, train_tokens_per_s=1e3)
    )
    bf16 = {**q, "cost_per_token": 2_000_000, "train_tokens_per_s": 1e3, "precision": "bf16-mixed"}
    bf16.update(device="cuda", devices=2)
    write_json(dirs["metrics"] / "tlm.json", _lm_metrics("transformer_lm", 110.0, **bf16))
    fp32 = {**q, "train_tokens_per_s": 2e3, "precision": "32-true"}
    write_json(dirs["metrics"] / "lstm.json", _lm_metrics("rnn_lm", 115.0, **fp32))
    write_json(
        dirs["metrics"] / "cbow.json",
        {"family": "word2vec", "task": "vectors", **VECTORS, **q, "train_tokens_per_s": 1e3},
    )
    write_json(dirs["metrics"] / "ngram.json", _lm_metrics("ngram", 150.0))
    runs = {"nnlm": "nnlm", "tlm": "transformer_lm", "lstm": "rnn_lm", "cbow": "word2vec"}
    runs["ngram"] = "ngram"
    _roofline(tmp_path / "roofline.json")
    text = render(dirs, runs, roofline=tmp_path / "roofline.json")
    cost = _rows(text, "## 4. Cost")
    assert list(cost["run"].replace(" ", "").split("|")[-5:-1]) == [
        "device",
        "precision",
        "trainingGFLOP/s",
        "shareofone-threadpeak",
    ]
    # 6 × 1e6 × 1e3 / 1e9 = 6 GFLOP/s of the fp32 peak 60 (a run that recorded no precision)
    assert cost["nnlm"].endswith("| fp32 | 6.00 | 10% |")
    # 6 × 2e6 × 1e3 / 1e9 = 12 GFLOP/s of the bf16 peak 120, not of the fp32 one
    assert cost["tlm"].endswith("| cuda ×2 | bf16-mixed | 12.00 | 10% |")
    assert cost["nnlm"].endswith("| cpu | fp32 | 6.00 | 10% |")  # no device recorded: the CPU
    assert cost["lstm"].endswith("| fp32 | 12.00 | 20% |")
    assert cost["cbow"].endswith("| fp32 | 6.00 | – |")  # the kernels: no matrix products
    assert cost["ngram"].endswith("| – | – | – |")
    section = text.split("## 4. Cost", 1)[1].split("\n## ", 1)[0]
    assert "fp32 60.0 GFLOP/s, bf16 120.0 GFLOP/s" in section
    assert "**Test CPU 9000** (flags avx2, fma; not avx512_bf16, amx_bf16)" in section
    assert "torch 9.9.9+cpu" in section

    without = render(dirs, runs, roofline=tmp_path / "absent.json")
    assert _rows(without, "## 4. Cost")["nnlm"].endswith("| fp32 | 6.00 | – |")
    assert "No share of the peak" in without and "(not found)" in without


def test_quality_against_compute_from_the_committed_metrics_and_curves(tmp_path, monkeypatch):
    """One figure per task with a validation perplexity, every neural run of the task on it (the
    n-gram states no Q and is left out): each epoch's val_ppl of plots/RUN.csv at 6 × Q × the
    tokens trained on up to that epoch, an epoch's tokens being the run's training tokens over
    its epochs (translation: target pieces, `train_target_tokens`)."""
    import pandas as pd
    import yaml

    from nlpzoo.report import figures

    root = Path(__file__).resolve().parents[2]
    params = yaml.safe_load((root / "params.yaml").read_text())
    drawn: dict[str, dict] = {}
    draw = figures.quality_against_compute

    def keep(task, curves, out):
        drawn[task] = curves
        return draw(task, curves, out)

    monkeypatch.setattr(figures, "quality_against_compute", keep)
    dirs = report_dirs(tmp_path)
    text = render(
        {**dirs, "metrics": root / "metrics", "plots": root / "plots", "eval": root / "eval"},
        None,
        params=params,
    )
    neural = {"lm": ["lstm_lm", "nnlm", "rnn_lm", "transformer_lm"]}
    neural["mt"] = ["attention", "decoder_mt", "seq2seq", "transformer"]
    assert {task: sorted(curves) for task, curves in drawn.items()} == neural
    for task, curves in drawn.items():
        for run, points in curves.items():
            m = json.loads((root / "metrics" / f"{run}.json").read_text())
            curve = pd.read_csv(root / "plots" / f"{run}.csv")
            if task == "mt":
                tokens = m["train_target_tokens"]
            else:  # recorded as train_tokens from now on; these metrics predate it
                tokens = m.get("train_tokens", m["train_tokens_per_s"] * m["fit_seconds"])
            per_epoch = 6 * m["cost_per_token"] * tokens / m["epochs"]
            assert len(points) == len(curve) == m["epochs"], run
            expected = per_epoch * (curve["epoch"].to_numpy() + 1)
            np.testing.assert_allclose(points["flops"], expected, rtol=1e-3, err_msg=run)
            np.testing.assert_allclose(points["val_ppl"], curve["val_ppl"], err_msg=run)
            assert points["flops"].iloc[-1] == pytest.approx(6 * m["cost_per_token"] * tokens)
    figs = dirs["reports"] / "figures"
    assert (figs / "compute_lm.png").is_file() and (figs / "compute_mt.png").is_file()
    assert "![Validation perplexity against training FLOPs, translation]" in text
    assert "per SentencePiece piece of the shared vocabulary" in text
    html = (dirs["reports"] / "index.html").read_text()
    assert html.count('alt="Validation perplexity against training FLOPs') == 2


def test_the_report_stage_reads_the_projects_roofline(tmp_path):
    """`report_project` (the stage) takes the peaks and the machine from the project's
    benchmarks/results/roofline.json, the file dvc.yaml makes it depend on."""
    from nlpzoo.pipeline import ROOFLINE
    from nlpzoo.report.build import report_project

    q = {"cost_formula": "Q", "cost_per_token": 1_000_000, "train_tokens_per_s": 1e3}
    write_json(tmp_path / "metrics" / "nnlm.json", _lm_metrics("nnlm", 120.0, **q))
    params = {"models": {"nnlm": {"family": "nnlm", "data": "vocab/lm"}}}
    assert "No share of the peak" in report_project(params, root=tmp_path)
    _roofline(tmp_path / ROOFLINE)
    text = report_project(params, root=tmp_path)
    assert "**Test CPU 9000**" in text and _rows(text, "## 4. Cost")["nnlm"].endswith("| 10% |")
