"""The MLflow store (docs/design.md §5): where it is, the process's MLflow settings, and the
store made ready once.

* Tracking URI (`tracking_uri`): `MLFLOW_TRACKING_URI` if set, else
  `sqlite:///<root>/mlflow.db`, where root is `DVC_ROOT` when DVC sets it (so every experiment
  logs to the same database) or the working directory. MLflow's and Lightning's own defaults
  are never relied on.
* MLflow's settings (`MLFLOW_SETTINGS`: bounded network behaviour, no progress bar) are put in
  the environment when a store is first opened (`apply_mlflow_settings`, called by
  `mlflow_client`, `prepare_store` and `process_tracking_uri`), never on import; a variable
  the user set is kept.
* A sqlite store is created once (database, tables, experiment) under a file lock beside it
  (`store_lock`) and put in WAL mode, so that side-by-side and queued runs (`dvc queue start -j
  2`, whose `DVC_ROOT` is the parent project) share one `mlflow.db`.
* `experiment_url`: the MLflow UI's page of an experiment's runs (`make dashboard`).
* `process_tracking_uri`: MLflow's module-level functions pointed at a store for a while.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nlpzoo.tracking.retry import (
    check_not_held,
    hold,
    is_connection_failure,
    store_failure,
    with_retries,
)

log = logging.getLogger("nlpzoo.tracking")  # one logger for the package's lines

# Bounded network behaviour for a remote server that is down (MLflow retries for minutes
# otherwise): the retries are ours (`retry.RETRY_TRIES`), MLflow's own request makes one try.
# Downloads (fetch_run_dir) print no carriage-return progress bar into logs and pipes.
MLFLOW_SETTINGS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}


def apply_mlflow_settings() -> None:
    """Put `MLFLOW_SETTINGS` in the environment, each unless already set (MLflow reads them at
    each request, and processes started later inherit them). Called where a store is opened."""
    for key, value in MLFLOW_SETTINGS.items():
        os.environ.setdefault(key, value)


def mlflow_client(uri: str) -> Any:
    """An `MlflowClient` of the store at `uri`, MLflow's settings applied first."""
    apply_mlflow_settings()
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def project_root() -> Path:
    return Path(os.environ.get("DVC_ROOT") or Path.cwd()).resolve()


def tracking_uri(root: Path | None = None) -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{(root or project_root()) / 'mlflow.db'}"


def source_root() -> Path:
    """Where the code of this run is checked out: the working directory. For a queued or
    `--temp` experiment that is DVC's copy of the project at the experiment's own commit, while
    `DVC_ROOT` (`project_root`, where MLflow logs) names the parent project, whose HEAD may have
    moved on since the experiment was queued."""
    return Path.cwd().resolve()


def git_commit(root: Path) -> str | None:
    """The HEAD commit of the git checkout at `root`, or None."""
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


# ---------------------------------------------------------------------- the store made ready


def _experiment_id(client: Any, uri: str, experiment: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return exp.experiment_id
    kwargs = {}
    if uri.startswith("sqlite:///"):
        # artifacts beside the database, not in MLflow's working-directory default
        kwargs["artifact_location"] = (Path(uri[10:]).parent / "mlartifacts").as_uri()
    try:
        return client.create_experiment(experiment, **kwargs)
    except Exception:  # created meanwhile by another process (a server store takes no lock)
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise
        return exp.experiment_id


@contextlib.contextmanager
def store_lock(db: Path) -> Iterator[None]:
    """An exclusive lock on `<db>-lock` beside the database, across processes (POSIX); not a
    lock on the database file itself, whose own locks sqlite keeps."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no cross-process lock
        yield
        return
    with open(f"{db}-lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _wal(db: Path) -> None:
    """Put the sqlite database at `db` in WAL mode (kept in the file): readers no longer block
    the writer, so two runs logging at once wait far less for each other."""
    import sqlite3

    con = sqlite3.connect(db, timeout=20)
    try:
        if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            con.execute("PRAGMA journal_mode=WAL")
    finally:
        con.close()


_ready: set[tuple[str, str]] = set()  # (uri, experiment) made ready by this process


def ensure_store(uri: str, experiment: str) -> str:
    """The id of `experiment` in the store at `uri`, creating both when missing. A sqlite store
    is created under a file lock (two processes starting at once make one database, with its
    tables, and one experiment) and in WAL mode."""
    if not uri.startswith("sqlite:///"):
        return _experiment_id(mlflow_client(uri), uri, experiment)
    db = Path(uri[len("sqlite:///") :])
    if (uri, experiment) in _ready:
        return _experiment_id(mlflow_client(uri), uri, experiment)
    with store_lock(db):
        _wal(db)
        exp_id = _experiment_id(mlflow_client(uri), uri, experiment)
    _ready.add((uri, experiment))
    return exp_id


def prepare_store(experiment: str = "nlpzoo") -> str:
    """Create the tracking database and the experiment now, once: runs started side by side
    (`python -m nlpzoo repro --jobs 2`, `dvc queue start -j 2`) then only open runs in it. Safe
    to call from several processes at once; transient failures are retried."""
    apply_mlflow_settings()
    uri = tracking_uri()
    check_not_held(uri)
    return with_retries(lambda: ensure_store(uri, experiment))[0]


def prepare_store_or_warn(experiment: str = "nlpzoo") -> str | None:
    """`prepare_store`, or None and one warning when the store cannot be reached: the pipeline
    goes on without tracking (each run then warns for itself), metrics files being the record."""
    uri = tracking_uri()
    try:
        return prepare_store(experiment)
    except Exception as err:
        if is_connection_failure(err):
            hold(uri)
        msg = (
            f"{store_failure(uri, err)}; the pipeline goes on, each run's metrics/RUN.json is "
            "its record"
        )
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return None


def experiment_url(base: str, experiment: str = "nlpzoo", uri: str | None = None) -> str:
    """The MLflow UI page of `experiment`'s runs in the store at `uri` (`tracking_uri()` by
    default), served at `base`: `base/#/experiments/ID/runs?workflowType=machine_learning`.
    MLflow 3's UI opens on its overview, in its GenAI view (kept in the browser's local
    storage); it reads the view from `workflowType` in the URL, and has no server setting for
    the page it opens on. `base/` when the store holds no such experiment."""
    import sqlite3

    uri = uri or tracking_uri()
    base = base.rstrip("/")
    if uri.startswith("sqlite:///"):  # read without MLflow: no database made, no migration
        db = Path(uri[len("sqlite:///") :])
        row = None
        if db.is_file():
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as con:
                row = con.execute(
                    "SELECT experiment_id FROM experiments WHERE name = ?", (experiment,)
                ).fetchone()
        experiment_id = None if row is None else str(row[0])
    else:
        found = mlflow_client(uri).get_experiment_by_name(experiment)
        experiment_id = None if found is None else found.experiment_id
    if experiment_id is None:
        return f"{base}/"
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


@contextlib.contextmanager
def process_tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's module-level functions (`mlflow.pyfunc.log_model`) use the process's tracking
    URI: `uri` while they run; afterwards the URI and `MLFLOW_TRACKING_URI` are as they were.
    MLflow's settings are applied first."""
    apply_mlflow_settings()
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    env = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        with _use_tracking_uri(uri):
            yield
    finally:
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env
