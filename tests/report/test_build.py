"""The report renders any subset of runs and lists what is missing instead of failing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.params import ReportConfig
from nlpzoo.report.build import _mt_attention, build_report
from nlpzoo.report.inputs import Provenance

CURVE = "epoch,step,train_loss,val_loss,val_ppl,seconds\n0,10,5,4.9,134,1\n1,20,4.8,4.87,130,2\n"
VECTORS = {
    "analogy_acc": 0.05,
    "analogy_sem_acc": 0.02,
    "analogy_syn_acc": 0.07,
    "analogy_coverage": 0.5,
    "ws353_rho": 0.2,
    "ws353_coverage": 0.7,
    "simlex_rho": 0.1,
    "simlex_coverage": 0.9,
}
PROBES = ["king", "city", "war"]


def _project(tmp_path: Path) -> dict[str, Path]:
    dirs = {k: tmp_path / k for k in ("metrics", "plots", "eval", "models", "reports")}
    for k, d in dirs.items():
        if k != "reports":
            d.mkdir()
    return dirs


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def _vector_run(dirs: dict[str, Path], name: str, seed: int) -> None:
    """neighbours.json and vectors.txt for probe words and 3 neighbours each."""
    rng = np.random.default_rng(seed)
    words = [*PROBES] + [f"{p}_n{i}" for p in PROBES for i in range(3)]
    _write(
        dirs["eval"] / name / "neighbours.json",
        {p: [[f"{p}_n{i}", 0.9 - 0.1 * i] for i in range(3)] for p in PROBES},
    )
    lines = [f"{len(words)} 4"] + [
        w + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for w in words
    ]
    (dirs["models"] / name).mkdir(parents=True)
    (dirs["models"] / name / "vectors.txt").write_text("\n".join(lines) + "\n")


def _render(dirs, runs, **kw) -> str:
    return build_report(
        metrics_dir=dirs["metrics"],
        plots_dir=dirs["plots"],
        eval_dir=dirs["eval"],
        models_dir=dirs["models"],
        out_dir=dirs["reports"],
        runs=runs,
        **kw,
    )


def _rows(text: str, section: str) -> dict[str, str]:
    part = text.split(section, 1)[1].split("\n## ", 1)[0]
    return {
        line.split("|")[1].strip(): line
        for line in part.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    }


def test_empty_project_renders_and_lists_every_missing_run(tmp_path):
    dirs = _project(tmp_path)
    text = _render(dirs, {"ngram": "ngram", "seq2seq": "seq2seq"})
    assert "No language-model runs yet" in text and "No translation runs yet" in text
    assert "`ngram`: no metrics/ngram.json" in text
    assert "`seq2seq`: no metrics/seq2seq.json" in text
    assert (dirs["reports"] / "index.html").is_file()


def test_full_lm_and_vectors_report(tmp_path):
    dirs = _project(tmp_path)
    base = {"task": "lm", "params": 10, "train_seconds": 1.0, "train_tokens_per_s": 1e6}
    _write(
        dirs["metrics"] / "ngram.json",
        {**base, "family": "ngram", "valid_ppl": 160.0, "test_ppl": 150.0},
    )
    _write(
        dirs["metrics"] / "nnlm.json",
        {
            **base,
            **VECTORS,
            "family": "nnlm",
            "valid_ppl": 130.0,
            "test_ppl": 120.0,
            "params": 2000,
            "train_tokens_per_s": 5000.0,
            "cost_per_token": 1343440,
        },
    )
    _write(
        dirs["metrics"] / "mixtures.json",
        {"baseline": "ngram", "runs": {"nnlm": {"lambda": 0.6, "test_ppl_mix": 112.5}}},
    )
    (dirs["plots"] / "nnlm.csv").write_text(CURVE)
    (dirs["plots"] / "ngram.csv").write_text(
        "epoch,step,train_loss,val_loss,val_ppl,seconds\n0,0,,5.07,160,0.5\n"
    )
    _vector_run(dirs, "nnlm", 0)
    params = {"nnlm": {"context_size": 4, "emb_dim": 60, "hidden_dim": 100}}
    prov = Provenance(
        git_rev="0123456789abcdef",
        exp_name="wider-nnlm",
        params_hash="cafe",
        data={"lm": {"source": "brown", "lowercase": True}},
        vocab={"lm": {"vocab_size": 13192, "train_tokens": 800000, "min_count": 4}},
    )
    text = _render(dirs, {"ngram": "ngram", "nnlm": "nnlm"}, params=params, provenance=prov)
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
    # the formula with this run's sizes gives the model's own count: 4·60 + 4·60·100 + 100·13192
    assert "N=4, D=60, H=100, V=13,192" in cost["nnlm"] and "1,343,440" in cost["nnlm"]
    assert "| 200 |" in cost["nnlm"]  # µs per token at 5,000 tokens/s
    assert "0.149" in cost["nnlm"]  # ns per multiply-add: 200 µs / 1,343,440

    assert (dirs["reports"] / "figures" / "curves_lm.png").stat().st_size > 0
    assert "![Learning curves, language models](figures/curves_lm.png)" in text
    assert "Nothing: every run" in text


def test_one_lm_run_only(tmp_path):
    dirs = _project(tmp_path)
    _write(
        dirs["metrics"] / "nnlm.json",
        {"family": "nnlm", "task": "lm", "valid_ppl": 130.0, "test_ppl": 120.0},
    )
    text = _render(dirs, {"ngram": "ngram", "nnlm": "nnlm", "cbow": "word2vec"})
    lm = _rows(text, "## 1. Language modelling")
    assert "120.0" in lm["nnlm"] and "| – |" in lm["nnlm"]  # no n-gram: no ratio
    assert "`ngram`: no metrics/ngram.json" in text and "`cbow`: no metrics/cbow.json" in text
    assert "`nnlm`: metrics lack `params`, `train_seconds`, `train_tokens_per_s`" in text
    assert "`nnlm`: no learning curve plots/nnlm.csv" in text


def test_a_metrics_file_missing_a_key_and_a_broken_one(tmp_path):
    dirs = _project(tmp_path)
    m = {"family": "word2vec", "task": "vectors", **VECTORS}
    del m["simlex_rho"]
    _write(dirs["metrics"] / "cbow.json", m)
    (dirs["metrics"] / "glove.json").write_text("{not json")
    _write(dirs["metrics"] / "old_run.json", {"family": "nnlm", "test_ppl": 99.0})
    text = _render(dirs, {"cbow": "word2vec", "glove": "glove"})
    vec = _rows(text, "## 2. Word vectors")
    assert "– (90)" in vec["cbow"]  # SimLex ρ missing, its coverage shown
    assert "`cbow`: metrics lack `simlex_rho`" in text
    assert "`cbow`: no eval/cbow/neighbours.json" in text
    assert "`glove`: metrics/glove.json unreadable" in text
    assert "`old_run`: not in params.yaml" in text


def test_only_mt_runs(tmp_path):
    dirs = _project(tmp_path)
    for name, family, bleu in (("seq2seq", "seq2seq", 11.0), ("attention", "attention", 26.0)):
        _write(
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
    _write(
        dirs["eval"] / "attention" / "samples.json",
        [
            {"source": f"ein hund {i}", "reference": f"a dog {i}", "greedy": "a dog", "beam": "a"}
            for i in range(10)
        ],
    )
    _write(
        dirs["eval"] / "attention" / "attention.json",
        [
            {  # as mt_runner writes it: pieces on the axes, the text beside them
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
    text = _render(dirs, {"seq2seq": "seq2seq", "attention": "attention"})
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
    ((src, out, weights), _) = _mt_attention(dirs["eval"] / "attention")
    assert src == ["▁ein", "▁hu", "nd", "</s>"] and out == ["▁a", "▁dog", "</s>"]
    assert weights.shape == (3, 4)


def test_tsne_projection_and_bad_config(tmp_path):
    dirs = _project(tmp_path)
    _write(dirs["metrics"] / "cbow.json", {"family": "word2vec", "task": "vectors", **VECTORS})
    _vector_run(dirs, "cbow", 1)
    _render(dirs, {"cbow": "word2vec"}, config=ReportConfig(projection="tsne"))
    assert (dirs["reports"] / "figures" / "projection_cbow.png").stat().st_size > 0
    with pytest.raises(ConfigError, match="projection"):
        build(ReportConfig, {"projection": "umap"}, "report")


def test_figures_reach_each_runs_mlflow_run(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from nlpzoo.tracking import Tracker

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    dirs = _project(tmp_path)
    tracker = Tracker.start("cbow", "word2vec", {"dim": 4})
    tracker.save(dirs["eval"] / "cbow")
    tracker.finish()
    _write(dirs["metrics"] / "cbow.json", {"family": "word2vec", "task": "vectors", **VECTORS})
    _vector_run(dirs, "cbow", 0)
    (dirs["plots"] / "cbow.csv").write_text(CURVE)
    _render(dirs, {"cbow": "word2vec"}, mlflow=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    listed = {a.path for a in client.list_artifacts(tracker.run_id, "figures")}
    assert listed == {"figures/projection_cbow.png", "figures/curves_vectors.png"}
    assert client.get_run(tracker.run_id).info.status == "FINISHED"
