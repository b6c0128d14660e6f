"""A trained run in MLflow (docs/design.md §5): training logs no copy of the run's files; the
register stage logs them once, as the `run` artifact of the run's MLflow model (registered
or not, tests/tracking/test_registry.py for the registry itself), and `fetch_run_dir` brings a
run back from that model (or from a legacy `run_dir/`) as a folder that `load_model` reads as
it reads models/RUN/. Against the local sqlite store."""

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
from test_tracking import assert_one_outage_warning, fast_retries, free_port

from nlpzoo import lifecycle, registry, tracking
from nlpzoo.errors import DataError
from nlpzoo.evaluation.perplexity import window_log_probs
from nlpzoo.tracking import RUN_FILE, Tracker, fetch_run_dir
from projects import make_project

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
    monkeypatch.setattr(tracking.store, "git_commit", lambda root: None)
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


def _register(root: Path, run: str, register: bool = True) -> dict:
    """The register stage of `run`, with a stand-in test metric (what it reads of metrics/)."""
    (root / "metrics").mkdir(exist_ok=True)
    (root / "metrics" / f"{run}.json").write_text(json.dumps({"test_ppl": 12.5}))
    return registry.register({**PARAMS, "mlflow": {"register": register}}, run, root)


def _logged(uri: str, run_id: str, path: str | None = None) -> list[str]:
    return sorted(f.path for f in MlflowClient(tracking_uri=uri).list_artifacts(run_id, path))


def _stored(root: Path) -> dict[str, list[Path]]:
    """Every file under the store's artifact root, by name."""
    out: dict[str, list[Path]] = {}
    for path in sorted((root / "mlartifacts").rglob("*")):
        if path.is_file():
            out.setdefault(path.name, []).append(path)
    return out


def test_neural_run_logs_its_files_once_and_they_load_as_the_run(project, monkeypatch, tmp_path):
    run_id = _train(project, "nnlm")
    uri = f"sqlite:///{project / 'mlflow.db'}"
    model_dir = project / "models" / "nnlm"
    valid = np.load(project / "data" / "vocab" / "lm" / "valid.npy")
    expected = window_log_probs(lifecycle.load_model(model_dir), valid, 2)

    # training logs neither the run's files nor a model: before the register stage there is
    # nothing to fetch, and the error says which stage makes it
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_run(run_id).info.experiment_id
    assert list(client.search_logged_models(experiment_ids=[experiment])) == []
    assert _logged(uri, run_id) == ["nnlm.csv"]
    assert "model.pt" not in _stored(project)
    with pytest.raises(DataError, match=r"holds no model yet: .*`dvc repro register-nnlm`"):
        fetch_run_dir(run_id)
    assert not (tmp_path / "cache" / tracking.uri_key(uri) / run_id).exists()

    record = _register(project, "nnlm")
    assert record["registered"] is True
    # the weights are in the store once: the model's `run` artifact, byte for byte
    [stored] = _stored(project)["model.pt"]
    assert stored.read_bytes() == (model_dir / "model.pt").read_bytes()
    assert stored.parent.name == "run" and stored.parent.parent.name == "artifacts"
    [model] = client.search_logged_models(experiment_ids=[experiment])
    assert model.source_run_id == run_id and record["logged_model"] == f"models:/{model.model_id}"
    assert _logged(uri, run_id) == ["nnlm.csv"]  # nothing of the files among the run's own

    names = ["config.json", "model.pt", "train_stats.json", "vocab.txt"]
    folder = fetch_run_dir(run_id)
    assert folder == tmp_path / "cache" / tracking.uri_key(uri) / run_id
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
    # neither training nor registering changed the process's tracking URI
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", dead)
    assert mlflow.get_tracking_uri() == dead


def test_registering_again_reuses_the_runs_model(project, caplog):
    """The register stage run again for the same training with nothing changed (--force, a
    retry) reuses the model it logged and the version it registered: one copy of the weights,
    one version."""
    run_id = _train(project, "nnlm")
    first = _register(project, "nnlm")
    with caplog.at_level("INFO", logger="nlpzoo.registry"):
        second = _register(project, "nnlm")
    assert (first["version"], second["version"]) == (1, 1)
    assert second["logged_model"] == first["logged_model"]
    assert "is logged already" in caplog.text
    assert len(_stored(project)["model.pt"]) == 1
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    sources = {v.source for v in client.search_model_versions("name='nlpzoo-nnlm'")}
    assert sources == {first["logged_model"]}
    assert fetch_run_dir(run_id).is_dir()


def test_with_register_false_the_model_is_logged_and_not_registered(project, caplog):
    run_id = _train(project, "ngram")
    with caplog.at_level("INFO", logger="nlpzoo.registry"):
        record = _register(project, "ngram", register=False)
    assert record["logged"] is True and record["registered"] is False
    assert record["why"] == "params mlflow.register is false"
    assert "not registered (params mlflow.register is false)" in caplog.text
    assert json.loads((project / "registry" / "ngram.json").read_text()) == record
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    assert client.search_registered_models() == []
    assert len(_stored(project)["model.npz"]) == 1
    valid = np.load(project / "data" / "vocab" / "lm" / "valid.npy")
    expected = lifecycle.load_model(project / "models" / "ngram").log_probs(valid)
    np.testing.assert_array_equal(
        lifecycle.load_model(fetch_run_dir(run_id)).log_probs(valid), expected
    )


def test_the_fetch_cache_is_per_store_and_a_failed_download_caches_nothing(project, monkeypatch):
    run_id = _train(project, "ngram")
    _register(project, "ngram")
    first = fetch_run_dir(run_id)
    # the same run id in a copy of the store is a download of its own; a download that fails
    # is an error naming the store, and caches nothing
    other = project.parent / "copy"
    other.mkdir()
    with sqlite3.connect(project / "mlflow.db") as src, sqlite3.connect(other / "mlflow.db") as dst:
        src.backup(dst)  # with what the WAL file holds
    other_uri = f"sqlite:///{other / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", other_uri)
    with monkeypatch.context() as m:

        def broken(*args, **kwargs):
            raise OSError("artifact store went away")

        m.setattr(mlflow.artifacts, "download_artifacts", broken)
        with pytest.raises(DataError, match=f"downloading its files from {other_uri} failed"):
            fetch_run_dir(run_id)
    assert not (tracking.cache_root() / tracking.uri_key(other_uri) / run_id).exists()
    second = fetch_run_dir(run_id)
    assert second != first and second.parent.parent == first.parent.parent
    assert (second / "config.json").read_bytes() == (first / "config.json").read_bytes()


def test_a_run_logged_with_run_dir_is_still_fetched(project):
    """Runs logged before the register stage held the files have them under run_dir/."""
    run_id = _train(project, "ngram")
    uri = f"sqlite:///{project / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    run = SimpleNamespace(
        model_dir=project / "models" / "ngram", data_dir=project / "data" / "vocab" / "lm"
    )
    for path in lifecycle.run_files(run):
        client.log_artifact(run_id, str(path), "run_dir")
    folder = fetch_run_dir(run_id)
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.npz",
        "train_stats.json",
        "vocab.txt",
    ]
    valid = np.load(project / "data" / "vocab" / "lm" / "valid.npy")
    expected = lifecycle.load_model(project / "models" / "ngram").log_probs(valid)
    np.testing.assert_array_equal(lifecycle.load_model(folder).log_probs(valid), expected)


def test_fetch_run_dir_says_what_is_wrong(project, monkeypatch):
    with pytest.raises(DataError, match="not an MLflow run id, nor a registered model's version"):
        fetch_run_dir("../../etc")
    with pytest.raises(DataError, match="not an MLflow run id"):
        fetch_run_dir("models:/nlpzoo-x@")
    with pytest.raises(DataError, match=r"MLflow run 0123abcd not found at sqlite:///"):
        fetch_run_dir("0123abcd")
    with pytest.raises(DataError, match=r"models:/nlpzoo-x@champion not found at sqlite:///"):
        fetch_run_dir("models:/nlpzoo-x@champion")
    tracker = Tracker.start("bare", "nnlm", {})  # a run that logged no files
    with pytest.raises(DataError, match=r"holds no model yet: .*register-bare"):
        fetch_run_dir(tracker.run_id)
    assert not list(tracking.cache_root().glob(f"*/{tracker.run_id}"))  # nothing half-cached
    elsewhere = project.parent / "elsewhere"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{elsewhere / 'mlflow.db'}")
    with pytest.raises(DataError, match="no MLflow store at sqlite:///"):
        fetch_run_dir(tracker.run_id)
    assert not elsewhere.exists()  # no empty database made on the way


def test_a_failing_upload_warns_once_and_the_run_goes_on(project, monkeypatch):
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


def test_the_files_of_a_run_are_its_own_vocabulary_else_the_data_folders(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.txt").write_text("<unk>\n")
    model_dir = tmp_path / "models" / "run"
    model_dir.mkdir(parents=True)
    for name in ("model.npz", "config.json", "train_stats.json", "spm.model", "vectors.txt"):
        (model_dir / name).write_text("x")
    run = SimpleNamespace(model_dir=model_dir, data_dir=data)
    files = lifecycle.run_files(run)  # translation: its SentencePiece model, no other vocabulary
    assert sorted(p.name for p in files) == [
        "config.json",
        "model.npz",
        "spm.model",
        "train_stats.json",
    ]
    assert all(p.parent == model_dir for p in files)
    (model_dir / "spm.model").unlink()
    assert data / "vocab.txt" in lifecycle.run_files(run)  # a word vocabulary: the data folder's


@pytest.mark.parametrize(
    "host, why",
    [
        ("127.0.0.1:{port}", "connection refused"),
        ("nlpzoo-no-such-host.invalid:5000", "unknown host"),
    ],
    ids=["refused", "unknown-host"],
)
@pytest.mark.parametrize("ref", ["0123456789abcdef", "models:/nlpzoo-nnlm@champion"])
def test_the_commands_name_an_unreachable_server(project, monkeypatch, capsys, host, why, ref):
    from nlpzoo.__main__ import main

    uri = "http://" + host.format(port=free_port())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["generate", "--mlflow-run", ref, "--root", str(project)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(
        f"error: MLflow tracking server unreachable at {uri} ({why}): cannot fetch {ref}; start "
        "the server, or set MLFLOW_TRACKING_URI"
    ), err
