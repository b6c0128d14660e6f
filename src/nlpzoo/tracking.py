"""MLflow tracking (docs/design.md §5): one MLflow run per model run, across `train` and `evaluate`.

* Tracking URI: `MLFLOW_TRACKING_URI` if set, else `sqlite:///<root>/mlflow.db`, where root is
  `DVC_ROOT` when DVC sets it (so every experiment logs to the same database) or the working
  directory. MLflow's and Lightning's own defaults are never relied on.
* `train-RUN` opens the run and writes its id to `models/RUN/mlflow_run.json`; `evaluate-RUN`
  reopens it, so curves and final metrics live together. While it trains, the id is also kept in
  `checkpoints/RUN/`, so an interrupted run that resumes continues its own MLflow run.
* Only rank 0 opens a run: when every rank runs the stage (torchrun, SLURM), the others log
  nothing.
* MLflow is the dashboard, DVC metrics files are the record, and a hiccup of the store costs
  neither: a transient failure ("database is locked", a refused connection, an HTTP 5xx) is
  retried with bounded exponential backoff (`RETRY_TRIES`, `RETRY_BASE_S`; `total_retries()`
  counts them). A call that still fails warns once per run and is kept, in order, to be sent
  with the next call that gets through; after a connection failure, calls within
  `OUTAGE_HOLD_S` seconds are only kept (no minutes lost against a dead server), while `finish`
  always tries. A run whose store comes back ends FINISHED with every metric.
* A sqlite store is created once (database, tables, experiment) under a file lock beside it and
  put in WAL mode, so that side-by-side and queued runs (`dvc queue start -j 2`, whose
  `DVC_ROOT` is the parent project) share one `mlflow.db`. The commit tagged on a run is the
  working directory's HEAD (a queued experiment's own workspace), with its name and baseline.
* A trained run's files (`models/RUN/`: the model, config.json, train_stats.json, the
  vocabulary) are stored once, as the `run` artifact of the MLflow model that the register stage
  (`nlpzoo.registry`) logs to the run and registers. `fetch_run_dir(<id>)`, or
  `fetch_run_dir("models:/nlpzoo-RUN@champion")` (or `/VERSION`), downloads them into a local
  folder that `nlpzoo.lifecycle.load_model` and the commands read as they read `models/RUN/`.
  Runs logged before the models held the files have them under artifact path `run_dir/`.
* A tracking server that does not answer (a refused connection, an unknown host, a time-out)
  is named as such in every message: `MLflow tracking server unreachable at URI (why)`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from nlpzoo.errors import DataError

log = logging.getLogger(__name__)

RUN_FILE = "mlflow_run.json"
RUN_DIR = "run_dir"  # artifact path of a run's files in runs logged before its model held them
MODEL = "model"  # name of a run's MLflow model (the register stage logs it)
MODEL_FILES = "artifacts/run"  # where that model keeps the run's files (its `run` artifact)
CACHE_ENV = "NLPZOO_MLFLOW_CACHE"  # where fetch_run_dir keeps downloaded runs

# Bounded network behaviour for a remote server that is down (MLflow retries for minutes
# otherwise): the retries are ours (RETRY_TRIES below), MLflow's own request makes one try.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
# downloads (fetch_run_dir) print no carriage-return progress bar into logs and pipes
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# Our own retries of a transient failure: RETRY_TRIES attempts, sleeping RETRY_BASE_S, twice that,
# ... (at most RETRY_MAX_S) in between: 0.2 + 0.4 + 0.8 + 1.6 = 3 s of waiting at most per call.
RETRY_TRIES = 5
RETRY_BASE_S = 0.2
RETRY_MAX_S = 2.0
# after a call gave up on a connection failure, later calls to that URI within this many seconds
# are kept for later without trying (finish still tries)
OUTAGE_HOLD_S = 30.0
PENDING_MAX = 10_000  # calls kept for a store that is down, per run (the oldest dropped beyond)

_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "connection refused",
    "failed to establish a new connection",
    "max retries exceeded",
    "connection reset",
    "connection aborted",
    "remote end closed",
    "temporarily unavailable",
    "timed out",
    "timeout",
    "too many 5",  # urllib3: "too many 500 error responses"
    "bad gateway",
    "service unavailable",
)
_CONNECTION = (
    "connection refused",
    "failed to establish a new connection",
    "max retries exceeded",
    "timed out",
    "timeout",
    "connection reset",
    "connection aborted",
    "remote end closed",
)
_retries = 0  # retries taken by this process (total_retries())
_down_until: dict[str, float] = {}  # tracking URI -> time.monotonic() before which calls wait


def total_retries() -> int:
    """How many times this process retried a tracking call after a transient failure."""
    return _retries


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while err is not None and id(err) not in seen and len(seen) < 8:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _is_connection_failure(err: BaseException) -> bool:
    from requests.exceptions import ConnectionError as RequestsConnectionError
    from requests.exceptions import Timeout

    for e in _chain(err):
        if isinstance(e, (ConnectionError, TimeoutError, RequestsConnectionError, Timeout)):
            return True
        if any(m in str(e).lower() for m in _CONNECTION):
            return True
    return False


# what a failed connection to a server says, in the words a user knows (first match wins)
_REASONS = (
    ("connection refused", "connection refused"),
    ("failed to resolve", "unknown host"),
    ("name or service not known", "unknown host"),
    ("nodename nor servname", "unknown host"),
    ("name resolution", "unknown host"),
    ("no route to host", "no route to host"),
    ("network is unreachable", "network unreachable"),
    ("timed out", "timed out"),
    ("timeout", "timed out"),
    ("connection reset", "connection reset"),
    ("remote end closed", "connection closed by the server"),
)


def brief(err: BaseException) -> str:
    """An exception as one short line: `Type: its text`, whitespace collapsed, 200 characters
    at most."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200] if text else 'no detail'}"


def _is_server(uri: str) -> bool:
    return uri.split(":", 1)[0].lower() in ("http", "https")


def store_failure(uri: str, err: BaseException, tries: int | None = None) -> str:
    """One line saying what went wrong with the store at `uri`: `MLflow tracking server
    unreachable at URI (connection refused)` when a server did not answer (a refused
    connection, an unknown host, a time-out), else `MLflow unreachable at URI (Type: text)`."""
    count = "" if tries is None else f"; {tries} {'try' if tries == 1 else 'tries'}"
    if _is_server(uri) and _is_connection_failure(err):
        texts = " ".join(str(e).lower() for e in _chain(err))
        why = next((reason for key, reason in _REASONS if key in texts), brief(err))
        return f"MLflow tracking server unreachable at {uri} ({why}{count})"
    return f"MLflow unreachable at {uri} ({brief(err)}{count})"


def is_transient(err: BaseException) -> bool:
    """A failure worth retrying: a locked sqlite database, a refused or broken connection, a
    time-out, an HTTP 429 or 5xx answer of the server."""
    if _is_connection_failure(err):
        return True
    for e in _chain(err):
        if type(e).__name__ == "RestException":  # an answer of the server: its HTTP status
            with contextlib.suppress(Exception):
                status = e.get_http_status_code()
                if status == 429 or status >= 500:
                    return True
        if any(m in str(e).lower() for m in _TRANSIENT):
            return True
    return False


def _with_retries(fn: Callable[[], Any], tries: int | None = None) -> tuple[Any, int]:
    """`fn()`, tried again after a transient failure with exponential backoff; the result and
    the retries taken. The last error is raised when every try failed (a non-transient one at
    once)."""
    global _retries
    tries = max(1, RETRY_TRIES if tries is None else tries)
    taken = 0
    while True:
        try:
            return fn(), taken
        except Exception as err:
            if taken + 1 >= tries or not is_transient(err):
                err.nlpzoo_tries = taken + 1  # type: ignore[attr-defined]
                raise
            time.sleep(min(RETRY_MAX_S, RETRY_BASE_S * 2**taken))
            taken += 1
            _retries += 1


def project_root() -> Path:
    return Path(os.environ.get("DVC_ROOT") or Path.cwd()).resolve()


def tracking_uri(root: Path | None = None) -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{(root or project_root()) / 'mlflow.db'}"


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def source_root() -> Path:
    """Where the code of this run is checked out: the working directory. For a queued or
    `--temp` experiment that is DVC's copy of the project at the experiment's own commit, while
    `DVC_ROOT` (`project_root`, where MLflow logs) names the parent project, whose HEAD may have
    moved on since the experiment was queued."""
    return Path.cwd().resolve()


def _git_commit(root: Path) -> str | None:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


class Tracker:
    """A thin, failure-tolerant handle on one MLflow run. Only rank 0 should create one."""

    def __init__(self, run_id: str | None, client: Any | None, uri: str, run_name: str) -> None:
        self.run_id = run_id
        self.client = client
        self.uri = uri
        self.run_name = run_name
        self.retries = 0  # retries this run's calls took after a transient failure
        self.dropped = 0  # calls given up for good (the store refused them, or too many kept)
        self._pending: list[Callable[[], Any]] = []  # calls that failed, to send in order
        self._warned = False

    @property
    def active(self) -> bool:
        return self.client is not None and self.run_id is not None

    @property
    def pending(self) -> int:
        """Calls kept for a store that did not answer, sent with the next call that gets through."""
        return len(self._pending)

    def _warn(self, err: BaseException, goes_on: str) -> None:
        if self._warned:
            return
        self._warned = True
        msg = (
            f"{store_failure(self.uri, err, getattr(err, 'nlpzoo_tries', 1))}; run "
            f"'{self.run_name}' goes on {goes_on}; metrics/{self.run_name}.json is the record"
        )
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)

    def _disable(self, err: BaseException) -> None:
        """No run to log to (it could not be opened, or the store does not hold it)."""
        self._warn(err, "without tracking")
        self.client = None

    def _failed(self, err: BaseException) -> None:
        self._warn(err, "and its tracking calls are sent when the store answers")
        if _is_connection_failure(err):
            _down_until[self.uri] = time.monotonic() + OUTAGE_HOLD_S

    def _keep(self, fn: Callable[[], Any]) -> None:
        self._pending.append(fn)
        if len(self._pending) > PENDING_MAX:
            self._pending.pop(0)
            self.dropped += 1

    def _try(self, fn: Callable[[], Any]) -> Any:
        try:
            result, taken = _with_retries(fn)
        except Exception as err:
            self.retries += max(0, getattr(err, "nlpzoo_tries", 1) - 1)
            raise
        self.retries += taken
        return result

    def _attempt(self, fn: Callable[[], Any], final: bool = False) -> Any:
        """`fn()` against the store, after the calls kept from before; a failure never reaches
        the caller. Within the hold after a connection failure the call is only kept, unless
        `final` (the run's last call)."""
        if not self.active:
            return None
        if not final and time.monotonic() < _down_until.get(self.uri, 0.0):
            self._keep(fn)
            return None
        while self._pending:
            try:
                self._try(self._pending[0])
            except Exception as err:  # any tracking failure must not stop training
                if is_transient(err):
                    self._failed(err)
                    self._keep(fn)
                    return None
                self._warn(err, "without this call")
                self.dropped += 1
            self._pending.pop(0)
        try:
            return self._try(fn)
        except Exception as err:
            if is_transient(err):
                self._failed(err)
                self._keep(fn)
            else:  # the store answered and refused it: sending it again would not help
                self._warn(err, "without this call")
                self.dropped += 1
            return None

    def _call(self, fn_name: str, *args: Any, final: bool = False, **kwargs: Any) -> Any:
        return self._attempt(
            lambda: getattr(self.client, fn_name)(self.run_id, *args, **kwargs), final=final
        )

    # ------------------------------------------------------------------ opening a run

    @classmethod
    def start(
        cls, run_name: str, family: str, params: Mapping[str, Any], experiment: str = "nlpzoo"
    ) -> Tracker:
        from nlpzoo.io import global_rank

        uri = tracking_uri()
        tracker = cls(None, None, uri, run_name)
        if global_rank() != 0:  # every rank runs the stage (torchrun, SLURM): rank 0 logs
            return tracker
        tags = {
            "nlpzoo.run": run_name,
            "nlpzoo.family": family,
            "dvc.exp_name": os.environ.get("DVC_EXP_NAME", ""),
            "dvc.baseline_rev": os.environ.get("DVC_EXP_BASELINE_REV", ""),
            "mlflow.runName": run_name,
        }
        commit = _git_commit(source_root())
        if commit:
            tags["mlflow.source.git.commit"] = commit

        def open_run() -> tuple[Any, str]:
            from mlflow import MlflowClient

            exp_id = _ensure_store(uri, experiment)
            client = MlflowClient(tracking_uri=uri)
            return client, client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id

        try:
            _check_not_held(uri)
            tracker.client, tracker.run_id = tracker._try(open_run)
        except Exception as err:
            if _is_connection_failure(err):
                _down_until[uri] = time.monotonic() + OUTAGE_HOLD_S
            tracker._disable(err)
            return tracker
        tracker.log_params(params)
        return tracker

    @classmethod
    def resume(cls, run_dir: Path, run_name: str) -> Tracker:
        """Reopen the run that `train` recorded in `run_dir/mlflow_run.json`. While the store
        does not answer, the run stays open here and its calls are kept for when it does."""
        uri = tracking_uri()
        path = Path(run_dir) / RUN_FILE
        if not path.is_file():
            return cls(None, None, uri, run_name)
        run_id = json.loads(path.read_text())["run_id"]
        tracker = cls(run_id, None, uri, run_name)
        if run_id is None:
            return tracker
        try:
            from mlflow import MlflowClient

            tracker.client = MlflowClient(tracking_uri=uri)
            _check_not_held(uri)
            tracker._try(lambda: tracker.client.get_run(run_id))
        except Exception as err:
            if tracker.client is not None and is_transient(err):
                tracker._failed(err)  # the run is there, the store is not (yet)
            else:
                tracker._disable(err)
        return tracker

    @classmethod
    def reopen(cls, folder: Path, run_name: str) -> Tracker | None:
        """Continue the run recorded in `folder/mlflow_run.json` (an interrupted training run's
        checkpoints): back to RUNNING, so its curves go on where they stopped. None when nothing
        is recorded there; on ranks other than 0, an inactive tracker."""
        from nlpzoo.io import global_rank

        if global_rank() != 0:
            return cls(None, None, tracking_uri(), run_name)
        path = Path(folder) / RUN_FILE
        if not path.is_file() or json.loads(path.read_text()).get("run_id") is None:
            return None
        tracker = cls.resume(folder, run_name)
        tracker._call("update_run", status="RUNNING")
        return tracker

    def save(self, run_dir: Path) -> None:
        from nlpzoo.io import atomic_write_json

        atomic_write_json(
            Path(run_dir) / RUN_FILE, {"run_id": self.run_id, "tracking_uri": self.uri}
        )

    # ------------------------------------------------------------------ logging

    def log_params(self, params: Mapping[str, Any]) -> None:
        if not self.active:
            return
        from mlflow.entities import Param

        flat = _flatten(params)
        batch = [Param(k, str(v)[:6000]) for k, v in sorted(flat.items())]
        for i in range(0, len(batch), 100):
            self._call("log_batch", params=batch[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if not self.active:
            return
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        batch = [
            Metric(k, float(v), ts, step or 0)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if batch:
            self._call("log_batch", metrics=batch)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if Path(path).exists():
            self._call("log_artifact", str(path), artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        """End the run as `status`, after every call kept for the store (tried even within the
        hold after a connection failure); one log line gives the retries it took."""
        if not self.active:
            return
        self._call("set_terminated", status=status, final=True)
        if self.retries or self._pending or self.dropped:
            log.info(
                "MLflow run %s ('%s'): %s after %d retries; %d calls unsent, %d dropped",
                self.run_id,
                self.run_name,
                status if not self._pending else "not ended",
                self.retries,
                len(self._pending),
                self.dropped,
            )


def _check_not_held(uri: str) -> None:
    """Fail fast for a URI whose store just gave up on a connection failure."""
    left = _down_until.get(uri, 0.0) - time.monotonic()
    if left > 0:
        err = ConnectionError(f"gave up on this store {OUTAGE_HOLD_S - left:.0f} s ago")
        err.nlpzoo_tries = 0  # type: ignore[attr-defined]
        raise err


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
def _store_lock(db: Path) -> Iterator[None]:
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


def _ensure_store(uri: str, experiment: str) -> str:
    """The id of `experiment` in the store at `uri`, creating both when missing. A sqlite store
    is created under a file lock (two processes starting at once make one database, with its
    tables, and one experiment) and in WAL mode."""
    from mlflow import MlflowClient

    if not uri.startswith("sqlite:///"):
        return _experiment_id(MlflowClient(tracking_uri=uri), uri, experiment)
    db = Path(uri[len("sqlite:///") :])
    if (uri, experiment) in _ready:
        return _experiment_id(MlflowClient(tracking_uri=uri), uri, experiment)
    with _store_lock(db):
        _wal(db)
        exp_id = _experiment_id(MlflowClient(tracking_uri=uri), uri, experiment)
    _ready.add((uri, experiment))
    return exp_id


def prepare_store(experiment: str = "nlpzoo") -> str:
    """Create the tracking database and the experiment now, once: runs started side by side
    (`python -m nlpzoo repro --jobs 2`, `dvc queue start -j 2`) then only open runs in it. Safe
    to call from several processes at once; transient failures are retried."""
    uri = tracking_uri()
    _check_not_held(uri)
    return _with_retries(lambda: _ensure_store(uri, experiment))[0]


def prepare_store_or_warn(experiment: str = "nlpzoo") -> str | None:
    """`prepare_store`, or None and one warning when the store cannot be reached: the pipeline
    goes on without tracking (each run then warns for itself), metrics files being the record."""
    uri = tracking_uri()
    try:
        return prepare_store(experiment)
    except Exception as err:
        if _is_connection_failure(err):
            _down_until[uri] = time.monotonic() + OUTAGE_HOLD_S
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
        from mlflow import MlflowClient

        found = MlflowClient(tracking_uri=uri).get_experiment_by_name(experiment)
        experiment_id = None if found is None else found.experiment_id
    if experiment_id is None:
        return f"{base}/"
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


@contextlib.contextmanager
def _process_tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's module-level functions (`mlflow.pyfunc.log_model`) use the process's tracking
    URI: `uri` while they run; afterwards the URI and `MLFLOW_TRACKING_URI` are as they were."""
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


# ---------------------------------------------------------------------- a logged run, locally


def cache_root() -> Path:
    """Where downloaded runs are kept: `NLPZOO_MLFLOW_CACHE`, else nlpzoo/mlflow/ in the user's
    cache folder (`XDG_CACHE_HOME`, else ~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nlpzoo" / "mlflow"


def _uri_key(uri: str) -> str:
    """The download cache's folder for the store at `uri`."""
    return hashlib.sha256(uri.encode()).hexdigest()[:16]


_RUN_ID = re.compile(r"[0-9A-Za-z_-]+")
# a registered model's version: models:/NAME@ALIAS or models:/NAME/VERSION
_VERSION_URI = re.compile(
    r"models:/(?P<name>[\w][\w.-]*)(?:@(?P<alias>[\w-]+)|/(?P<version>[0-9]+))"
)


def fetch_run_dir(ref: str) -> Path:
    """The files of a trained run (the model, config.json, train_stats.json, the vocabulary)
    as a local folder that `lifecycle.load_model` and the commands read as they read
    models/RUN/. `ref` is an MLflow run id, or a version of a registered model:
    `models:/nlpzoo-RUN@ALIAS` or `models:/nlpzoo-RUN/VERSION`.

    The files are those the register stage logged as the `run` artifact of the run's MLflow
    model (a version's own model, for a version); a run logged before its model held them has
    them under `run_dir/`. They are downloaded from the tracking store (`tracking_uri()`) into
    `cache_root()/<hash of the tracking URI>/<run id or model id>/` the first time (two stores
    may hold runs of the same id); logged files never change, so a complete download is
    reused (a run id's without asking the store)."""
    uri = tracking_uri()
    version = _VERSION_URI.fullmatch(ref or "")
    if version is None and not _RUN_ID.fullmatch(ref or ""):
        raise DataError(
            f"'{ref}' is not an MLflow run id, nor a registered model's version "
            "(models:/NAME@ALIAS, models:/NAME/VERSION)"
        )
    if version is None:
        folder = cache_root() / _uri_key(uri) / ref
        if (folder / "config.json").is_file():
            return folder
    client = _client(uri, ref)
    if version is None:
        run = _ask(uri, ref, lambda: client.get_run(ref), f"MLflow run {ref} not found")
        location = _files_of_run(client, uri, run)
        _download(uri, location, folder, f"MLflow run {ref}", legacy_run=location == RUN_DIR)
        return folder
    model_id, location = _files_of_version(client, uri, ref, version)
    folder = cache_root() / _uri_key(uri) / model_id
    if not (folder / "config.json").is_file():
        _download(uri, location, folder, ref)
    return folder


def _client(uri: str, ref: str) -> Any:
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        # MLflow would create an empty database there
        raise DataError(
            f"no MLflow store at {uri} ({ref}); set MLFLOW_TRACKING_URI to the store that holds "
            "it, or run from the project that trained it"
        )
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _ask(uri: str, ref: str, fn: Callable[[], Any], missing: str) -> Any:
    """`fn()` against the store, retried; a store that does not answer, or answers that it
    holds no such thing (`missing`), is one clear error."""
    try:
        return _with_retries(fn)[0]
    except Exception as err:
        if _is_connection_failure(err):
            raise DataError(
                f"{store_failure(uri, err)}: cannot fetch {ref}; start the server, or set "
                "MLFLOW_TRACKING_URI to the store that holds it"
            ) from err
        raise DataError(
            f"{missing} at {uri} ({brief(err)}); set MLFLOW_TRACKING_URI to the store that holds it"
        ) from err


def _files_of_run(client: Any, uri: str, run: Any) -> str:
    """Where run `run`'s files are: the artifact URI of the `run` folder of its newest
    complete model, else (a run logged before its model held them) `RUN_DIR`."""
    from mlflow.entities import LoggedModelStatus

    run_id = run.info.run_id
    models = _ask(
        uri,
        run_id,
        lambda: client.search_logged_models(
            experiment_ids=[run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
        ),
        f"the models of MLflow run {run_id} not found",
    )
    ready = [m for m in models if m.name == MODEL and m.status == LoggedModelStatus.READY]
    if ready:
        newest = max(ready, key=lambda m: m.creation_timestamp or 0)
        return f"{newest.artifact_location.rstrip('/')}/{MODEL_FILES}"
    legacy = _ask(
        uri,
        run_id,
        lambda: client.list_artifacts(run_id, RUN_DIR),
        f"the artifacts of MLflow run {run_id} not found",
    )
    if legacy:
        return RUN_DIR
    name = run.data.tags.get("nlpzoo.run") or "RUN"
    raise DataError(
        f"MLflow run {run_id} at {uri} holds no model yet: the register stage logs the run's "
        f"files as its MLflow model (`dvc repro register-{name}`)"
    )


def _files_of_version(client: Any, uri: str, ref: str, match: re.Match) -> tuple[str, str]:
    """(the model id of the version `ref` names, the artifact URI of its `run` folder)."""
    name, alias, number = match["name"], match["alias"], match["version"]
    if alias is not None:
        version = _ask(
            uri, ref, lambda: client.get_model_version_by_alias(name, alias), f"{ref} not found"
        )
    else:
        version = _ask(uri, ref, lambda: client.get_model_version(name, number), f"{ref} not found")
    source = str(version.source or "")
    if re.fullmatch(r"models:/[\w-]+", source):  # a logged model: its own artifact location
        model_id = source[len("models:/") :]
        model = _ask(uri, ref, lambda: client.get_logged_model(model_id), f"{source} not found")
        return model_id, f"{model.artifact_location.rstrip('/')}/{MODEL_FILES}"
    # a version registered from a path: that path is the model's folder
    return f"{name}-v{version.version}", f"{source.rstrip('/')}/{MODEL_FILES}"


def _download(uri: str, location: str, folder: Path, what: str, legacy_run: bool = False) -> None:
    """The run's files at artifact URI `location` (`legacy_run`: at artifact path `location` of
    MLflow run `folder.name`) into `folder`, as a whole or not at all."""
    from nlpzoo.io import atomic_dir

    with atomic_dir(folder) as tmp:
        into = tmp / ".download"
        into.mkdir()
        try:
            if legacy_run:
                from mlflow import MlflowClient

                client = MlflowClient(tracking_uri=uri)
                _with_retries(lambda: client.download_artifacts(folder.name, location, str(into)))
            else:
                import mlflow.artifacts

                with _process_tracking_uri(uri):
                    _with_retries(
                        lambda: mlflow.artifacts.download_artifacts(
                            artifact_uri=location, dst_path=str(into), tracking_uri=uri
                        )
                    )
        except Exception as err:
            raise DataError(
                f"{what}: downloading its files from {uri} failed ({brief(err)}); nothing was "
                "cached, try again"
            ) from err
        got = into / location.rstrip("/").rsplit("/", 1)[-1]
        if not got.is_dir():
            raise DataError(f"{what}: its files at {uri} are not a folder ({location})")
        for path in got.iterdir():
            os.replace(path, tmp / path.name)
        shutil.rmtree(into)
        if not (tmp / "config.json").is_file():
            raise DataError(f"{what}: its files at {uri} hold no config.json")
