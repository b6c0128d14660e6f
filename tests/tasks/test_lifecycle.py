"""Every run of params.yaml trains and is scored through the run lifecycle, at tiny sizes.

Parametrized over `models:` of the project's params.yaml, so a new run cannot be forgotten.
"""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from nlpzoo import lifecycle
from nlpzoo.data.vocab import Vocab
from nlpzoo.evaluation.mixture import mixtures
from nlpzoo.families import FAMILIES
from toy import PARAMS, tiny_params, write_lm_data


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    write_lm_data(root)
    return root


pytestmark = pytest.mark.usefixtures("project_tracking")  # tests/tasks/conftest.py


LM_RUNS = [r for r, e in PARAMS["models"].items() if FAMILIES[e["family"]].task == "lm"]


@pytest.mark.parametrize("run", LM_RUNS)
def test_every_lm_run_trains_and_scores_every_token(project, run):
    params = tiny_params(run)
    stats = lifecycle.train(params, run, project)
    metrics = lifecycle.evaluate(params, run, project)
    family = PARAMS["models"][run]["family"]
    vocab_size = len(Vocab.load(project / "data" / "vocab" / "lm" / "vocab.txt"))
    # a tiny grammar: a trained model must do far better than uniform over the vocabulary
    assert 1.0 < metrics["test_ppl"] < 0.6 * vocab_size, metrics
    lp = np.load(project / "eval" / run / "logprobs.npz")
    test_len = np.load(project / "data" / "vocab" / "lm" / "test.npy").size
    assert lp["test"].shape == (test_len,) and np.all(np.isfinite(lp["test"]))
    assert metrics["test_ppl"] == pytest.approx(
        math.exp(-lp["test"].astype(np.float64).mean()), rel=1e-4
    )
    files = {p.name for p in (project / "models" / run).iterdir()}
    model = {"model.pt", "vectors.txt"} if FAMILIES[family].neural else {"model.npz"}
    assert files == {"config.json", "train_stats.json", "mlflow_run.json"} | model
    if FAMILIES[family].neural:
        curve = (project / "plots" / f"{run}.csv").read_text().strip().splitlines()
        assert len(curve) == 1 + 2  # header + one row per epoch
        last = float(curve[-1].split(",")[4])
        assert last < 0.6 * vocab_size, curve  # validation perplexity well below uniform
        assert stats["epochs"] == 2 and stats["params"] > 0
        # every neural LM's input embeddings go through the word-vector protocol too
        assert 0.0 <= metrics["analogy_coverage"] <= 1.0 and "ws353_rho" in metrics
        header = (project / "models" / run / "vectors.txt").open().readline().split()
        assert int(header[0]) == vocab_size - 1  # every row but <pad>
    assert set(FAMILIES) >= {family}


def test_mixture_never_worse_than_its_parts_on_validation(project, caplog):
    params = tiny_params("nnlm")
    for run in ("ngram", "nnlm"):
        if not (project / "eval" / run / "logprobs.npz").is_file():
            lifecycle.train(params, run, project)
            lifecycle.evaluate(params, run, project)
    out = mixtures(params, project)
    nnlm = json.loads((project / "metrics" / "nnlm.json").read_text())
    ngram = json.loads((project / "metrics" / "ngram.json").read_text())
    assert 0.0 <= out["nnlm"]["lambda"] <= 1.0
    assert out["nnlm"]["valid_ppl_mix"] <= min(nnlm["valid_ppl"], ngram["valid_ppl"]) + 1e-6
    saved = json.loads((project / "metrics" / "mixtures.json").read_text())
    assert saved["runs"]["nnlm"] == out["nnlm"] and "ngram" not in saved["runs"]
    # the enabled runs of `models:` only: a run switched off is not mixed, whatever is on disk
    params["models"]["nnlm"]["enabled"] = False
    assert "nnlm" not in mixtures(params, project)
    # a baseline that is not an enabled run: nothing mixed, and the file and the log say why
    params["models"]["nnlm"]["enabled"] = True
    params["mixture"] = {**(params.get("mixture") or {}), "baseline": "ngramm"}
    with caplog.at_level(logging.WARNING, logger="nlpzoo.evaluation.mixture"):
        assert mixtures(params, project) == {}
    saved = json.loads((project / "metrics" / "mixtures.json").read_text())
    assert saved["runs"] == {} and "did you mean 'ngram'?" in saved["skipped"]
    assert saved["skipped"] in caplog.text
    params["mixture"]["baseline"] = "ngram"
    (project / "eval" / "ngram" / "logprobs.npz").rename(project / "eval" / "ngram" / "lp.npz")
    try:
        assert mixtures(params, project) == {}
        saved = json.loads((project / "metrics" / "mixtures.json").read_text())
        assert "run `dvc repro evaluate-ngram`" in saved["skipped"]
    finally:
        (project / "eval" / "ngram" / "lp.npz").rename(project / "eval" / "ngram" / "logprobs.npz")


VECTOR_RUNS = [r for r, e in PARAMS["models"].items() if FAMILIES[e["family"]].task == "vectors"]


@pytest.mark.parametrize("run", VECTOR_RUNS)
def test_every_vector_run_trains_and_goes_through_the_vector_protocol(project, run):
    params = tiny_params(run)
    family = PARAMS["models"][run]["family"]
    if family == "word2vec":
        params[run]["sample"] = 0.0  # a 15-word vocabulary: sub-sampling would drop most tokens
        params[run]["window"] = 1  # (a 5-word sentence is one window otherwise)
        params[run]["batch_size"] = 64
        params[run]["trainer"]["max_epochs"] = 4
    if family == "glove":
        params[run]["batch_size"] = 16  # the window-1 matrix has 56 non-zeros: 4 steps an epoch
        params[run]["lr"] = 0.05
        params[run]["trainer"]["max_epochs"] = 50
    stats = lifecycle.train(params, run, project)
    metrics = lifecycle.evaluate(params, run, project)
    vocab = Vocab.load(project / "data" / "vocab" / "lm" / "vocab.txt")
    assert "test_ppl" not in metrics and metrics["task"] == "vectors"
    assert 0.0 <= metrics["analogy_coverage"] <= 1.0 and "ws353_rho" in metrics
    lines = (project / "models" / run / "vectors.txt").read_text().splitlines()
    n, d = map(int, lines[0].split())
    assert d == 8 and n == len(lines) - 1 == len(vocab) - 1  # every row but <pad>
    vectors = {ln.split()[0]: np.array(ln.split()[1:], dtype=float) for ln in lines[1:]}
    assert all(np.isfinite(v).all() for v in vectors.values())

    # in the grammar "she" and "he" have the same neighbours (the verbs) and never meet, while
    # "she" is next to "sees" in a third of her sentences: with window 1, whatever the family,
    # the paradigmatic pair must be the closer one
    def cos(a, b):
        return vectors[a] @ vectors[b] / np.linalg.norm(vectors[a]) / np.linalg.norm(vectors[b])

    assert cos("she", "he") > cos("she", "sees"), (cos("she", "he"), cos("she", "sees"))
    if FAMILIES[family].neural:
        rows = (project / "plots" / f"{run}.csv").read_text().strip().splitlines()[1:]
        losses = [float(r.split(",")[2]) for r in rows]
        epochs = params[run]["trainer"]["max_epochs"]
        assert len(losses) == stats["epochs"] == epochs and losses[-1] < losses[0], losses
    neighbours = json.loads((project / "eval" / run / "neighbours.json").read_text())
    assert isinstance(neighbours, dict)


def test_both_curve_writers_use_the_one_list_of_columns(tmp_path):
    from nlpzoo.curves import CURVE_FIELDS
    from nlpzoo.training import CurveWriter

    assert ",".join(CURVE_FIELDS) + "\n" == lifecycle.CURVE_HEADER
    writer = CurveWriter(tmp_path / "c.csv")
    writer.write()
    assert (tmp_path / "c.csv").read_text().splitlines()[0] == ",".join(CURVE_FIELDS)
