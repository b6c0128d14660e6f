"""MLflow outage during a run (docs/design.md §5): with the tracking server down, or a tracking
path that cannot be written, `train` and `evaluate` complete in bounded time, the metrics file
is the same as without tracking, and the run says once that MLflow was unreachable."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from test_tracking import assert_one_outage_warning, free_port, run_in_thread

from nlpzoo import lifecycle
from nlpzoo.tracking import Tracker
from projects import inactive, make_project

RUN = "nnlm"
PARAMS = {
    "seed": 1,
    "models": {RUN: {"family": "nnlm", "data": "vocab/lm"}},
    RUN: {
        "family": "nnlm",
        "context_size": 2,
        "emb_dim": 8,
        "hidden_dim": 8,
        "batch_size": 64,
        "trainer": {"max_epochs": 1, "accelerator": "cpu", "devices": 1},
    },
}


def _project(root: Path) -> Path:
    make_project(root)
    raw = root / "data" / "raw" / "eval"
    raw.mkdir(parents=True)
    mirror = Path(os.environ["NLPZOO_DATA_MIRROR"])
    for name in ("questions-words.txt", "wordsim353.tsv", "simlex999.txt"):
        shutil.copy(mirror / name, raw / name)
    return root


def _train_and_evaluate(root: Path) -> dict:
    lifecycle.train(PARAMS, RUN, root)
    return lifecycle.evaluate(PARAMS, RUN, root)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The metrics of the same run with tracking switched off (no MLflow at all)."""
    root = _project(tmp_path_factory.mktemp("untracked"))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Tracker, "start", classmethod(inactive))
        return _train_and_evaluate(root)


def _dead_server(tmp_path: Path) -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def _unwritable(tmp_path: Path) -> str:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the database's folder should be")
    return f"sqlite:///{blocker}/mlflow.db"


@pytest.mark.parametrize("make_uri", [_dead_server, _unwritable], ids=["server-down", "unwritable"])
def test_outage_costs_nothing_but_one_warning(tmp_path, monkeypatch, reference, make_uri):
    uri = make_uri(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    root = _project(tmp_path / "proj")
    t0 = time.monotonic()
    metrics, caught = run_in_thread(lambda: _train_and_evaluate(root), timeout=120)
    assert time.monotonic() - t0 < 120
    assert_one_outage_warning(caught, uri, RUN)  # one for train and evaluate together

    written = json.loads((root / "metrics" / f"{RUN}.json").read_text())
    assert json.dumps(written, sort_keys=True) == json.dumps(metrics, sort_keys=True)
    assert written["mlflow_run_id"] is None
    timing = {"mlflow_run_id", "eval_seconds", "train_seconds", "fit_seconds", "train_tokens_per_s"}
    same = {k: v for k, v in written.items() if k not in timing}
    expected = {k: v for k, v in reference.items() if k not in timing}
    assert json.dumps(same, sort_keys=True) == json.dumps(expected, sort_keys=True)  # NaN-safe
    assert (root / "models" / RUN / "model.pt").is_file()
    assert len((root / "plots" / f"{RUN}.csv").read_text().split()) == 2  # header + 1 epoch
