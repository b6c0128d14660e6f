"""Tests for nlpzoo.tracking (docs/design.md §5): tracking URI, one MLflow run spanning train and
evaluate, transient failures retried, and training that goes on, warned once, when the tracking
store cannot be reached."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
import warnings
from pathlib import Path

import pytest
from mlflow import MlflowClient

from nlpzoo import tracking
from nlpzoo.tracking import RUN_FILE, Tracker, retry, store, tracking_uri

REAL_GIT_COMMIT = store.git_commit
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
    monkeypatch.setattr(store, "git_commit", lambda root: "0123abcd")
    fast_retries(monkeypatch)


def fast_retries(monkeypatch) -> None:
    """Retries without the real waits, and no store remembered as down from another test."""
    monkeypatch.setattr(retry, "RETRY_BASE_S", 0.01)
    monkeypatch.setattr(retry, "RETRY_MAX_S", 0.02)
    monkeypatch.setattr(retry, "_down_until", {})
    monkeypatch.setattr(store, "_ready", set())


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
    # a server that does not answer is named as such; a local store that fails is "MLflow"
    head = (
        "MLflow tracking server unreachable at "
        if uri.startswith("http")
        else "MLflow unreachable at "
    )
    assert head + uri + " (" in msg and "\n" not in msg
    assert f"'{run}'" in msg
    assert sum("unreachable" in str(w.message) for w in caught) == 1


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


@pytest.mark.parametrize(
    "host, why",
    [
        ("127.0.0.1:{port}", "connection refused"),
        ("nlpzoo-no-such-host.invalid:5000", "unknown host"),
    ],
    ids=["refused", "unknown-host"],
)
def test_unreachable_server(monkeypatch, tmp_path, host, why):
    uri = "http://" + host.format(port=free_port())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker, caught = run_in_thread(lambda: Tracker.start("nnlm", "nnlm", PARAMS))
    assert isinstance(tracker, Tracker)
    assert not tracker.active
    assert_one_outage_warning(caught, uri, "nnlm")
    [warning] = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    expected = f"MLflow tracking server unreachable at {uri} ({why}; 5 tries); run 'nnlm' goes on"
    assert expected in str(warning.message)
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
    """The run is known but its store does not answer: one warning, the run stays open here, and
    its calls are kept (not tried again within the hold: no time lost per call)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    started = Tracker.start("nnlm", "nnlm", {})
    started.save(tmp_path / "run")
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracker, caught = run_in_thread(lambda: Tracker.resume(tmp_path / "run", "nnlm"))
    assert tracker.run_id == started.run_id and tracker.active
    assert_one_outage_warning(caught, uri, "nnlm")
    assert "5 tries" in str(caught[-1].message) and tracker.retries == tracking.RETRY_TRIES - 1
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in range(20):
            tracker.log_metrics({"test_ppl": 1.0}, step=step)
    assert time.monotonic() - t0 < 0.5  # within the hold: kept, not tried
    assert tracker.pending == 20


class Flaky:
    """A client whose `log_batch` goes to `broken` (raising, or a client of a dead server) for
    the calls listed in `fail`, counted from 0, and to the real client otherwise."""

    def __init__(self, real, broken, fail):
        self.real, self.broken, self.fail, self.calls = real, broken, set(fail), 0

    def log_batch(self, *args, **kwargs):
        n, self.calls = self.calls, self.calls + 1
        target = self.broken if n in self.fail else self.real.log_batch
        return target(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def _steps(uri: str, run_id: str, key: str = "train/loss") -> list[int]:
    history = MlflowClient(tracking_uri=uri).get_metric_history(run_id, key)
    return sorted(m.step for m in history)


def test_transient_failures_are_retried_and_the_run_ends_finished(monkeypatch, db, caplog):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    tracker = Tracker.start("rnn", "rnn_lm", {})

    def refused(*args, **kwargs):
        raise ConnectionError("[Errno 111] Connection refused")

    tracker.client = Flaky(tracker.client, refused, fail=[1, 2, 3, 6])  # 3 fails, then 1
    before = tracking.total_retries()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # retried and through: nothing to warn about
        for step in range(5):
            tracker.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step)
        with caplog.at_level(logging.INFO, logger="nlpzoo.tracking"):
            tracker.finish()
    assert tracker.retries == 4 and tracking.total_retries() - before == 4
    assert "FINISHED after 4 retries" in caplog.text
    run = MlflowClient(tracking_uri=db).get_run(tracker.run_id)
    assert run.info.status == "FINISHED"
    assert _steps(db, tracker.run_id) == [0, 1, 2, 3, 4]


def test_a_refused_connection_mid_run_loses_no_metric(monkeypatch, tmp_path, db):
    """The store refuses connections (a real MLflow client of a closed port) for longer than the
    retries last: one warning, the calls are kept, the next call within the hold is not tried,
    and once the store answers again every kept call is sent, in order: FINISHED, every step."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    monkeypatch.setattr(retry, "OUTAGE_HOLD_S", 0.5)
    tracker = Tracker.start("rnn", "rnn_lm", {})
    dead = MlflowClient(tracking_uri=f"http://127.0.0.1:{free_port()}")
    tries = tracking.RETRY_TRIES
    flaky = Flaky(tracker.client, dead.log_batch, fail=range(1, 1 + tries))
    tracker.client = flaky
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker.log_metrics({"train/loss": 1.0}, step=0)  # through
        tracker.log_metrics({"train/loss": 0.9}, step=1)  # refused `tries` times: kept
        assert flaky.calls == 1 + tries and tracker.pending == 1
        tracker.log_metrics({"train/loss": 0.8}, step=2)  # within the hold: kept, not tried
        assert flaky.calls == 1 + tries and tracker.pending == 2
        time.sleep(0.6)  # the hold is over, the store answers again
        tracker.log_metrics({"train/loss": 0.7}, step=3)  # sends 1 and 2, then 3
        tracker.log_metrics({"val/ppl": 9.0}, step=3)
        tracker.finish()
    assert_one_outage_warning(caught, db, "rnn")
    assert "Max retries exceeded" in str(caught[0].message)  # a real refused connection
    assert tracker.pending == 0 and tracker.retries == tries - 1
    assert MlflowClient(tracking_uri=db).get_run(tracker.run_id).info.status == "FINISHED"
    assert _steps(db, tracker.run_id) == [0, 1, 2, 3]
    assert _steps(db, tracker.run_id, "val/ppl") == [3]


def test_a_call_the_store_refuses_is_dropped_and_the_run_goes_on(monkeypatch, db):
    from mlflow.exceptions import MlflowException

    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    tracker = Tracker.start("rnn", "rnn_lm", {})

    def invalid(*args, **kwargs):
        raise MlflowException("Invalid metric name", error_code="INVALID_PARAMETER_VALUE")

    flaky = Flaky(tracker.client, invalid, fail=[0])
    tracker.client = flaky
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(3):
            tracker.log_metrics({"train/loss": 1.0}, step=step)
        tracker.finish()
    assert flaky.calls == 3  # not retried: it would be refused again
    assert_one_outage_warning(caught, db, "rnn")
    assert tracker.dropped == 1 and tracker.retries == 0 and tracker.active
    assert MlflowClient(tracking_uri=db).get_run(tracker.run_id).info.status == "FINISHED"
    assert _steps(db, tracker.run_id) == [1, 2]


def test_which_failures_are_transient():
    import requests
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException, RestException

    locked = sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database is locked"))
    wrapped = MlflowException(str(locked), error_code="TEMPORARILY_UNAVAILABLE")
    wrapped.__cause__ = locked
    assert tracking.is_transient(wrapped)
    assert tracking.is_transient(requests.exceptions.ConnectionError("refused"))
    assert tracking.is_transient(ConnectionRefusedError(111, "Connection refused"))
    assert tracking.is_transient(RestException({"error_code": "INTERNAL_ERROR", "message": "x"}))
    assert tracking.is_transient(RestException({"error_code": "TEMPORARILY_UNAVAILABLE"}))
    assert not tracking.is_transient(RestException({"error_code": "RESOURCE_DOES_NOT_EXIST"}))
    assert not tracking.is_transient(MlflowException("bad", error_code="INVALID_PARAMETER_VALUE"))
    assert not tracking.is_transient(ValueError("no"))
    unwritable = sqlalchemy.exc.OperationalError("x", {}, Exception("unable to open database file"))
    assert not tracking.is_transient(unwritable)


def test_retries_are_bounded_and_back_off(monkeypatch):
    monkeypatch.setattr(retry, "RETRY_BASE_S", 0.05)
    monkeypatch.setattr(retry, "RETRY_MAX_S", 0.1)
    sleeps = []
    monkeypatch.setattr(retry.time, "sleep", sleeps.append)
    calls = []

    def down():
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError) as info:
        tracking.with_retries(down)
    assert len(calls) == tracking.RETRY_TRIES == 5 and info.value.nlpzoo_tries == 5
    assert sleeps == [0.05, 0.1, 0.1, 0.1]  # doubling, capped
    # the defaults: at most about 3 s of waiting per call
    assert sum(min(2.0, 0.2 * 2**i) for i in range(4)) == pytest.approx(3.0)


# ---------------------------------------------------------------------------------- the store


def test_prepare_store_or_warn_with_the_server_down(monkeypatch):
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    result, caught = run_in_thread(lambda: tracking.prepare_store_or_warn("nlpzoo"))
    assert result is None
    [warning] = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert str(warning.message).startswith(
        f"MLflow tracking server unreachable at {uri} (connection refused); the pipeline goes on"
    )
    # the runs started next fail fast, each with its own warning
    t0 = time.monotonic()
    tracker, caught = run_in_thread(lambda: Tracker.start("nnlm", "nnlm", {}))
    assert time.monotonic() - t0 < 1 and not tracker.active
    assert_one_outage_warning(caught, uri, "nnlm")


def _log_from_a_process(uri, barrier, name, steps, out):
    import os

    os.environ["MLFLOW_TRACKING_URI"] = uri
    from nlpzoo import tracking as t
    from nlpzoo.tracking import store as s

    s.git_commit = lambda root: None
    barrier.wait()  # both create the store at the same moment
    t.prepare_store("nlpzoo")
    tracker = Tracker.start(name, "nnlm", {"steps": steps})
    for step in range(steps):
        tracker.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step)
    tracker.finish()
    out.put((name, tracker.run_id, tracker.retries, tracker.pending, tracker.dropped))


def test_two_processes_share_one_store(tmp_path, template_db):
    """Two runs logging to one sqlite store at once (`make repro` side by side, `dvc queue start
    -j 2`): both make the experiment and switch to WAL at the same moment, under the lock; both
    runs end FINISHED with every metric."""
    shutil.copy(template_db, tmp_path / "mlflow.db")  # tables made once: seconds otherwise
    uri = f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    from nlpzoo.io import global_rank

    global_rank()  # Lightning imported once, here, not in each process
    ctx = multiprocessing.get_context("fork")  # no new interpreter to import MLflow into
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_log_from_a_process, args=(uri, barrier, name, 30, out))
        for name in ("a", "b")
    ]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    client = MlflowClient(tracking_uri=uri)
    [exp] = [e for e in client.search_experiments() if e.name == "nlpzoo"]  # one experiment
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags["nlpzoo.run"] for r in runs) == ["a", "b"]
    for name, run_id, retries, pending, dropped in results:
        assert client.get_run(run_id).info.status == "FINISHED"
        assert _steps(uri, run_id) == list(range(30))
        assert client.get_run(run_id).data.params == {"steps": "30"}
        assert pending == 0 and dropped == 0
        print(f"run {name}: 30 steps, {retries} retries")
    con = sqlite3.connect(tmp_path / "mlflow.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


# ---------------------------------------------------------------------------------- the commit


def test_the_commit_tagged_is_the_working_directorys(monkeypatch, tmp_path, db):
    """A queued experiment runs in DVC's copy of the project (the working directory) while
    DVC_ROOT names the parent: the run is tagged with the copy's commit, logged to the parent."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
    }
    heads = {}
    for name in ("parent", "copy"):
        repo = tmp_path / name
        repo.mkdir()
        for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", name]):
            subprocess.run(["git", *cmd], cwd=repo, env=env, check=True)
        heads[name] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, env=env, capture_output=True, text=True
        ).stdout.strip()
    assert heads["parent"] != heads["copy"]
    monkeypatch.setattr(store, "git_commit", REAL_GIT_COMMIT)
    shutil.copy(db[len("sqlite:///") :], tmp_path / "parent" / "mlflow.db")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "parent"))
    monkeypatch.setenv("DVC_EXP_NAME", "queued-exp")
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", heads["parent"])
    monkeypatch.chdir(tmp_path / "copy")
    tracker = Tracker.start("nnlm", "nnlm", {})
    assert tracker.uri == f"sqlite:///{(tmp_path / 'parent').resolve()}/mlflow.db"
    tags = MlflowClient(tracking_uri=tracker.uri).get_run(tracker.run_id).data.tags
    assert tags["mlflow.source.git.commit"] == heads["copy"]
    assert tags["dvc.exp_name"] == "queued-exp"
    assert tags["dvc.baseline_rev"] == heads["parent"]


def test_the_dashboard_address_opens_the_experiments_runs(monkeypatch, tmp_path, db):
    """`make dashboard` prints it: MLflow's UI would open on its overview."""
    base = "http://127.0.0.1:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", db)
    assert tracking.experiment_url(base) == f"{base}/"  # no experiment yet
    tracking.prepare_store("other")
    exp_id = tracking.prepare_store("nlpzoo")
    assert exp_id != "0"
    url = tracking.experiment_url(base + "/")
    assert url == f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
    assert tracking.experiment_url(base, "other", db) != url
    missing = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    assert tracking.experiment_url(base, uri=missing) == f"{base}/"
    assert not (tmp_path / "none").exists()  # nothing made on the way
