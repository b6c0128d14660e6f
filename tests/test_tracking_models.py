"""A trained run in MLflow (docs/design.md §5): its files under `run_dir/` (the weights once: no
model of its own until the register stage logs one, tests/test_registry.py), and
`fetch_run_dir` bringing a run back as a folder that `load_model` reads as it reads
models/RUN/. Against the local sqlite store."""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from pathlib import Path
from types import SimpleNamespace

import mlflow.pytorch
import numpy as np
import pytest
from mlflow import MlflowClient

from nlpzoo import lifecycle, tracking
from nlpzoo.errors import DataError
from nlpzoo.evaluation.perplexity import window_log_probs
from nlpzoo.tracking import RUN_FILE, Tracker, fetch_run_dir
from test_tracking import assert_one_outage_warning, fast_retries, free_port
from test_training_resume import make_project

TRAINER = {"max_epochs": 1, "accelerator": "cpu", "devices": 1, "checkpoint_every_minutes": 0}
PARAMS = {
    "seed": 3,
    "models": {
        "nnlm": {"family": "nnlm", "data": "vocab/lm"},
        "ngram": {"family": "ngram", "data": "vocab/lm"},
    },
    "nnlm": {
        "family": "nnlm",
        "context_size": 2,
        "emb_dim": 8,
        "hidden_dim": 8,
        "batch_size": 64,
        "trainer": TRAINER,
    },
    "ngram": {"order": 3},
}


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def project(tmp_path, template_db, monkeypatch) -> Path:
    """A tiny corpus, a fresh sqlite store for MLflow, and a download cache of its own."""
    root = make_project(tmp_path / "proj")
    shutil.copy(template_db, root / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
    monkeypatch.setenv(tracking.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(tracking, "_git_commit", lambda root: None)
    fast_retries(monkeypatch)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
    return root


def _train(root: Path, run: str) -> str:
    """Train `run` with a healthy store (no warning of ours); returns its MLflow run id."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        lifecycle.train(PARAMS, run, root)
    run_id = json.loads((root / "models" / run / RUN_FILE).read_text())["run_id"]
    assert run_id
    return run_id


def _logged(uri: str, run_id: str, path: str | None = None) -> list[str]:
    return sorted(f.path for f in MlflowClient(tracking_uri=uri).list_artifacts(run_id, path))


def test_neural_run_logs_its_files_once_and_they_load_as_the_run(project, monkeypatch, tmp_path):
    run_id = _train(project, "nnlm")
    uri = f"sqlite:///{project / 'mlflow.db'}"
    model_dir = project / "models" / "nnlm"
    valid = np.load(project / "data" / "vocab" / "lm" / "valid.npy")
    expected = window_log_probs(lifecycle.load_model(model_dir), valid, 2)

    # training logs no model of its own: the weights are in the store once, under run_dir/
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_run(run_id).info.experiment_id
    assert list(client.search_logged_models(experiment_ids=[experiment])) == []

    # run_dir/: what load_model reads, the data folder's vocabulary included
    names = ["config.json", "model.pt", "train_stats.json", "vocab.txt"]
    assert _logged(uri, run_id, "run_dir") == [f"run_dir/{n}" for n in names]
    assert "run_dir" in _logged(uri, run_id)

    folder = fetch_run_dir(run_id)
    assert folder == tmp_path / "cache" / tracking._uri_key(uri) / run_id
    assert sorted(p.name for p in folder.iterdir()) == names
    assert (folder / "config.json").read_bytes() == (model_dir / "config.json").read_bytes()
    vocab = project / "data" / "vocab" / "lm" / "vocab.txt"
    assert (folder / "vocab.txt").read_bytes() == vocab.read_bytes()
    again = lifecycle.load_model(folder)
    np.testing.assert_array_equal(window_log_probs(again, valid, 2), expected)

    assert MlflowClient(tracking_uri=uri).get_run(run_id).info.status == "FINISHED"

    # downloaded once: the cache answers even with the store gone (same URI, no database)
    for name in ("mlflow.db", "mlflow.db-wal", "mlflow.db-shm"):
        if (project / name).exists():
            (project / name).rename(project / f"gone-{name}")
    assert fetch_run_dir(run_id) == folder
    # training left the process's tracking URI to MLFLOW_TRACKING_URI, as before
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", dead)
    assert mlflow.get_tracking_uri() == dead


def test_count_run_logs_its_files_and_no_model(project, monkeypatch):
    run_id = _train(project, "ngram")
    uri = f"sqlite:///{project / 'mlflow.db'}"
    names = ["config.json", "model.npz", "train_stats.json", "vocab.txt"]
    assert _logged(uri, run_id, "run_dir") == [f"run_dir/{n}" for n in names]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_run(run_id).info.experiment_id
    assert list(client.search_logged_models(experiment_ids=[experiment])) == []
    valid = np.load(project / "data" / "vocab" / "lm" / "valid.npy")
    expected = lifecycle.load_model(project / "models" / "ngram").log_probs(valid)
    fetched = lifecycle.load_model(fetch_run_dir(run_id))
    np.testing.assert_array_equal(fetched.log_probs(valid), expected)

    # the cache is keyed by store: the same run id in a copy of the store is a download of its
    # own; a download that fails is an error naming the store, and caches nothing
    first = fetch_run_dir(run_id)
    other = project.parent / "copy"
    other.mkdir()
    with sqlite3.connect(project / "mlflow.db") as src, sqlite3.connect(other / "mlflow.db") as dst:
        src.backup(dst)  # with what the WAL file holds
    other_uri = f"sqlite:///{other / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", other_uri)
    with monkeypatch.context() as m:

        def broken(*args, **kwargs):
            raise OSError("artifact store went away")

        m.setattr(MlflowClient, "download_artifacts", broken)
        with pytest.raises(DataError, match=f"downloading its run_dir/ from {other_uri} failed"):
            fetch_run_dir(run_id)
    assert not (tracking.cache_root() / tracking._uri_key(other_uri) / run_id).exists()
    second = fetch_run_dir(run_id)
    assert second != first and second.parent.parent == first.parent.parent
    assert (second / "config.json").read_bytes() == (first / "config.json").read_bytes()


def test_fetch_run_dir_says_what_is_wrong(project, monkeypatch):
    with pytest.raises(DataError, match="not an MLflow run id"):
        fetch_run_dir("../../etc")
    with pytest.raises(DataError, match=r"MLflow run 0123abcd not found at sqlite:///"):
        fetch_run_dir("0123abcd")
    tracker = Tracker.start("bare", "nnlm", {})  # a run that logged no files
    with pytest.raises(DataError, match="has no run_dir/ artifacts"):
        fetch_run_dir(tracker.run_id)
    assert not list(tracking.cache_root().glob(f"*/{tracker.run_id}"))  # nothing half-cached
    elsewhere = project.parent / "elsewhere"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{elsewhere / 'mlflow.db'}")
    with pytest.raises(DataError, match="no MLflow store at sqlite:///"):
        fetch_run_dir(tracker.run_id)
    assert not elsewhere.exists()  # no empty database made on the way


def test_a_failing_upload_of_the_runs_files_warns_once_and_the_run_goes_on(project, monkeypatch):
    calls = []

    def broken(self, *args):
        calls.append(args)
        raise ConnectionError("artifact store went away")

    monkeypatch.setattr(MlflowClient, "log_artifact", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = lifecycle.train(PARAMS, "nnlm", project)
    assert calls and stats["epochs"] == 1
    assert_one_outage_warning(caught, f"sqlite:///{project / 'mlflow.db'}", "nnlm")
    assert (project / "models" / "nnlm" / "model.pt").is_file()


class _Files:
    """Stands in for a Tracker: records the files the lifecycle logs under run_dir/."""

    active = True

    def __init__(self) -> None:
        self.files: list[Path] = []

    def log_run_dir(self, files) -> None:
        self.files.extend(files)


def test_the_vocabulary_logged_is_the_runs_own_else_the_data_folders(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.txt").write_text("<unk>\n")
    model_dir = tmp_path / "models" / "run"
    model_dir.mkdir(parents=True)
    for name in ("model.npz", "config.json", "train_stats.json", "spm.model", "vectors.txt"):
        (model_dir / name).write_text("x")
    run = SimpleNamespace(model_dir=model_dir, data_dir=data, family=SimpleNamespace(neural=False))
    files = _Files()
    lifecycle._log_model(run, files)  # translation: its SentencePiece model, no other vocabulary
    assert sorted(p.name for p in files.files) == [
        "config.json",
        "model.npz",
        "spm.model",
        "train_stats.json",
    ]
    assert all(p.parent == model_dir for p in files.files)
    (model_dir / "spm.model").unlink()
    files = _Files()
    lifecycle._log_model(run, files)  # a word vocabulary lives in the data folder
    assert data / "vocab.txt" in files.files
    files.active = False
    files.files.clear()
    lifecycle._log_model(run, files)  # an inactive tracker (rank > 0, an outage): nothing
    assert files.files == []
