"""Tests for nlpzoo.tracking (docs/design.md §5): tracking URI, one MLflow run spanning train and
evaluate, and training that goes on, warned once, when the tracking store cannot be reached."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import warnings
from pathlib import Path

import pytest
from mlflow import MlflowClient

from nlpzoo import tracking
from nlpzoo.tracking import RUN_FILE, Tracker, tracking_uri

PARAMS = {
    "run": {"family": "nnlm", "emb_dim": 60, "direct": False, "lr": 0.001},
    "trainer": {"max_epochs": 2, "precision": "32-true", "devices": [0, 1]},
    "seed": 0,
}
FLAT = {
    "run.family": "nnlm",
    "run.emb_dim": "60",
    "run.direct": "False",
    "run.lr": "0.001",
    "trainer.max_epochs": "2",
    "trainer.precision": "32-true",
    "trainer.devices": "[0, 1]",
    "seed": "0",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "DVC_EXP_NAME", "DVC_EXP_BASELINE_REV"):
        monkeypatch.delenv(key, raising=False)
    # never run git from the tests; a fixed commit also lets us check the tag
    monkeypatch.setattr(tracking, "_git_commit", lambda root: "0123abcd")


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    """An empty MLflow database, made once: creating the tables takes seconds, a copy does not."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    assert path.is_file()
    return path


@pytest.fixture
def db(template_db, tmp_path) -> str:
    """A fresh copy of the empty database at tmp_path/mlflow.db; returns its URI."""
    shutil.copy(template_db, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def free_port() -> int:
    """A local port with nothing listening on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------- tracking URI


def test_env_tracking_uri_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert tracking_uri() == "http://mlflow.example:5000"
    assert tracking_uri(tmp_path / "elsewhere") == "http://mlflow.example:5000"


def test_dvc_root_gives_sqlite_database_there(monkeypatch, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    other = tmp_path / "queue-temp"
    other.mkdir()
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.chdir(other)  # DVC runs queued experiments elsewhere; the database stays at root
    uri = tracking_uri()
    assert uri == f"sqlite:///{root.resolve()}/mlflow.db"
    assert uri.startswith("sqlite:////")  # an absolute path


def test_working_directory_without_dvc_root(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("DVC_ROOT", "")  # empty counts as unset
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    assert tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


# ---------------------------------------------------------------------------------- a real run


def test_start_save_resume_finish(monkeypatch, tmp_path, db):
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # no MLFLOW_TRACKING_URI: the database there
    monkeypatch.setenv("DVC_EXP_NAME", "brisk-bass")
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", "feedface")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # DVC_ROOT, not the working directory, decides
    uri = db

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a healthy store warns about nothing
        tracker = Tracker.start("nnlm_big", "nnlm", PARAMS, experiment="nlpzoo-test")
        assert tracker.active and tracker.uri == uri
        tracker.log_metrics({"train/loss": 3.5, "flag": True, "note": "x"}, step=10)
        tracker.log_metrics({"val/ppl": 250.0, "epoch": 0}, step=10)
        tracker.log_metrics({"val/ppl": 200.0, "epoch": 1}, step=20)
        run_dir = tmp_path / "models" / "nnlm_big"
        tracker.save(run_dir)
    saved = json.loads((run_dir / RUN_FILE).read_text())
    assert saved == {"run_id": tracker.run_id, "tracking_uri": uri}

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("nlpzoo-test")
    assert exp is not None
    assert exp.artifact_location == (tmp_path.resolve() / "mlartifacts").as_uri()
    run = client.get_run(tracker.run_id)
    assert run.info.experiment_id == exp.experiment_id
    assert run.info.status == "RUNNING"
    assert run.info.run_name == "nnlm_big"
    tags = run.data.tags
    assert tags["nlpzoo.run"] == "nnlm_big"
    assert tags["nlpzoo.family"] == "nnlm"
    assert tags["dvc.exp_name"] == "brisk-bass"
    assert tags["dvc.baseline_rev"] == "feedface"
    assert tags["mlflow.source.git.commit"] == "0123abcd"
    assert {k: v for k, v in run.data.params.items()} == FLAT
    assert run.data.metrics["train/loss"] == 3.5
    assert "flag" not in run.data.metrics and "note" not in run.data.metrics
    history = client.get_metric_history(tracker.run_id, "val/ppl")
    assert sorted((m.step, m.value) for m in history) == [(10, 250.0), (20, 200.0)]

    # evaluate-RUN: a new process reopens the same run
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        again = Tracker.resume(run_dir, "nnlm_big")
        assert again.active and again.run_id == tracker.run_id
        again.log_metrics({"test_ppl": 180.5, "valid_ppl": 200.0})
        again.finish()
    run = client.get_run(tracker.run_id)
    assert run.data.metrics["test_ppl"] == 180.5
    assert run.data.metrics["valid_ppl"] == 200.0
    assert run.info.status == "FINISHED"
    assert len(client.search_runs([exp.experiment_id])) == 1  # no second run was opened


def test_second_start_reuses_the_experiment(monkeypatch, db):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    a = Tracker.start("a", "nnlm", {}, experiment="shared")
    b = Tracker.start("b", "ngram", {"order": 3}, experiment="shared")
    assert a.active and b.active and a.run_id != b.run_id
    client = MlflowClient(tracking_uri=db)
    runs = client.search_runs([client.get_experiment_by_name("shared").experiment_id])
    assert sorted(r.data.tags["nlpzoo.run"] for r in runs) == ["a", "b"]
    assert client.get_run(b.run_id).data.params == {"order": "3"}
    assert client.get_run(a.run_id).data.tags["dvc.exp_name"] == ""


def test_resume_without_run_file_is_inactive(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tracker = Tracker.resume(tmp_path / "models" / "never_trained", "x")
        assert not tracker.active and tracker.run_id is None
        tracker.log_metrics({"test_ppl": 1.0})
        tracker.finish()


def test_reopen_continues_an_interrupted_run(monkeypatch, tmp_path, db):
    """What a resumed training run does with the id kept in checkpoints/RUN/: the same run,
    RUNNING again; nothing recorded: None (a new run is started); rank 1: inactive."""
    from pytorch_lightning.utilities import rank_zero_only

    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    ckpt = tmp_path / "checkpoints" / "run"
    assert Tracker.reopen(ckpt, "run") is None
    first = Tracker.start("run", "nnlm", PARAMS)
    first.save(ckpt)
    first.finish("FAILED")  # a kill caught by the stage
    again = Tracker.reopen(ckpt, "run")
    client = MlflowClient(tracking_uri=db)
    assert again.run_id == first.run_id and again.active
    assert client.get_run(first.run_id).info.status == "RUNNING"
    again.log_metrics({"val/ppl": 5.0}, step=7)
    again.finish()
    assert client.get_run(first.run_id).info.status == "FINISHED"
    assert len(client.search_runs([client.get_experiment_by_name("nlpzoo").experiment_id])) == 1
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    assert not Tracker.reopen(ckpt, "run").active


# ---------------------------------------------------------------------------------- outages


def run_in_thread(fn, timeout: float = 60.0):
    """Run `fn` in a thread, recording every warning; fail if it does not return in time."""
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as err:  # pragma: no cover - reported below
            result["error"] = err

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join(timeout)
        assert not thread.is_alive(), f"did not return within {timeout} s"
    if "error" in result:
        raise result["error"]
    return result["value"], list(caught)


def assert_one_outage_warning(caught, uri: str, run: str) -> None:
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in caught]
    msg = str(runtime[0].message)
    assert "MLflow unreachable" in msg
    assert uri in msg and f"'{run}'" in msg
    assert sum("MLflow unreachable" in str(w.message) for w in caught) == 1


def later_calls_are_silent_no_ops(tracker: Tracker, tmp_path: Path) -> None:
    artifact = tmp_path / "metrics.json"
    artifact.write_text("{}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tracker.log_metrics({"val/ppl": 1.0}, step=3) is None
        assert tracker.log_params({"a": 1}) is None
        assert tracker.log_artifact(artifact) is None
        assert tracker.finish() is None
        assert tracker.finish("FAILED") is None
    assert caught == []
    assert not tracker.active


def test_unreachable_server(monkeypatch, tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker, caught = run_in_thread(lambda: Tracker.start("nnlm", "nnlm", PARAMS))
    assert isinstance(tracker, Tracker)
    assert not tracker.active
    assert_one_outage_warning(caught, uri, "nnlm")
    later_calls_are_silent_no_ops(tracker, tmp_path)
    tracker.save(tmp_path / "run")  # the run file still records that there is no run
    assert json.loads((tmp_path / "run" / RUN_FILE).read_text())["run_id"] is None


def test_unwritable_sqlite_location(monkeypatch, tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where a directory should be")
    uri = f"sqlite:///{blocker}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker, caught = run_in_thread(lambda: Tracker.start("glove", "glove", PARAMS))
    assert not tracker.active
    assert_one_outage_warning(caught, uri, "glove")
    later_calls_are_silent_no_ops(tracker, tmp_path)
    assert blocker.read_text() == "a file where a directory should be"


def test_resume_while_server_is_down(monkeypatch, tmp_path, db):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    started = Tracker.start("nnlm", "nnlm", {})
    started.save(tmp_path / "run")
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker, caught = run_in_thread(lambda: Tracker.resume(tmp_path / "run", "nnlm"))
    assert tracker.run_id == started.run_id and not tracker.active
    assert_one_outage_warning(caught, uri, "nnlm")
    later_calls_are_silent_no_ops(tracker, tmp_path)


def test_failure_mid_run_warns_once_then_goes_quiet(monkeypatch, tmp_path, db):
    uri = db
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker = Tracker.start("rnn", "rnn_lm", {})
    assert tracker.active
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("database went away")

    monkeypatch.setattr(tracker.client, "log_batch", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            tracker.log_metrics({"train/loss": 1.0}, step=step)
        tracker.finish()
    assert len(calls) == 1  # the first failure disables the tracker
    assert_one_outage_warning(caught, uri, "rnn")
    assert "database went away" in str(caught[0].message)
    assert MlflowClient(tracking_uri=uri).get_run(tracker.run_id).info.status == "RUNNING"
