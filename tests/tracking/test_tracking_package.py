"""The tracking package (docs/design.md §5): importing it changes no environment variable;
MLflow's settings (`store.MLFLOW_SETTINGS`) are put in the environment when a run or a store is
opened, a value the user set kept; and every module of the package is a driver module, which no
stage depends on (docs/design.md §6)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient
from test_tracking import fast_retries

from nlpzoo import pipeline, tracking
from nlpzoo.errors import DataError
from nlpzoo.tracking import Tracker, store

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = tuple(store.MLFLOW_SETTINGS)
PACKAGE = ROOT / "src" / "nlpzoo" / "tracking"


def test_importing_the_package_leaves_the_environment_as_it_was():
    """A fresh interpreter: every module of the package imported, `os.environ` unchanged."""
    modules = ", ".join(f"nlpzoo.tracking.{p.stem}" for p in sorted(PACKAGE.glob("[!_]*.py")))
    code = (
        "import json, os\n"
        "before = dict(os.environ)\n"
        f"import nlpzoo.tracking, {modules}\n"
        "after = dict(os.environ)\n"
        "changed = {k: [before.get(k), after.get(k)] for k in set(before) | set(after)\n"
        "           if before.get(k) != after.get(k)}\n"
        "print(json.dumps(changed))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}  # none set beforehand
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == {}


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def db(template_db, tmp_path, monkeypatch) -> str:
    """A fresh store as the tracking URI, and none of MLflow's settings in the environment."""
    shutil.copy(template_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr(store, "git_commit", lambda root: None)
    fast_retries(monkeypatch)
    for key in SETTINGS:
        monkeypatch.delenv(key, raising=False)
    return uri


def _settings() -> dict[str, str | None]:
    return {key: os.environ.get(key) for key in SETTINGS}


def _resume(tmp_path: Path) -> Tracker:
    tracker = Tracker.start("nnlm", "nnlm", {})
    tracker.save(tmp_path / "run")
    for key in SETTINGS:
        del os.environ[key]  # the monkeypatch of `db` restores the environment afterwards
    return Tracker.resume(tmp_path / "run", "nnlm")


def _fetch(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        tracking.fetch_run_dir("0123abcd")


def _process_uri(tmp_path: Path) -> None:
    with tracking.process_tracking_uri(tracking.tracking_uri()):
        pass


OPENERS = {
    "Tracker.start": lambda tmp_path: Tracker.start("nnlm", "nnlm", {}),
    "Tracker.resume": _resume,
    "prepare_store": lambda tmp_path: tracking.prepare_store(),
    "fetch_run_dir": _fetch,
    "process_tracking_uri": _process_uri,
    "mlflow_client": lambda tmp_path: tracking.mlflow_client(tracking.tracking_uri()),
}


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_opening_a_run_or_the_store_applies_mlflows_settings(db, tmp_path, opener):
    assert _settings() == dict.fromkeys(SETTINGS)
    opener(tmp_path)
    assert _settings() == store.MLFLOW_SETTINGS


def test_a_setting_the_user_made_is_kept(db, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "42")
    tracker = Tracker.start("nnlm", "nnlm", {})
    assert tracker.active
    assert _settings() == {**store.MLFLOW_SETTINGS, "MLFLOW_HTTP_REQUEST_TIMEOUT": "42"}


def test_every_module_of_the_package_is_a_driver():
    """The dependency closure skips a module by its own name: each module of the package is
    listed in `pipeline.DRIVERS`, so that no stage depends on any file of tracking/."""
    modules = {"nlpzoo.tracking"} | {
        f"nlpzoo.tracking.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"
    }
    assert len(modules) > 1
    assert modules <= set(pipeline.DRIVERS)
    assert not {m for m in pipeline.DRIVERS if m.startswith("nlpzoo.tracking.")} - modules
