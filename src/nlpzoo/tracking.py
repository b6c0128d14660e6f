"""MLflow tracking (docs/design.md §5): one MLflow run per model run, across `train` and `evaluate`.

* Tracking URI: `MLFLOW_TRACKING_URI` if set, else `sqlite:///<root>/mlflow.db`, where root is
  `DVC_ROOT` when DVC sets it (so every experiment logs to the same database) or the working
  directory. MLflow's and Lightning's own defaults are never relied on.
* `train-RUN` opens the run and writes its id to `models/RUN/mlflow_run.json`; `evaluate-RUN`
  reopens it, so curves and final metrics live together. While it trains, the id is also kept in
  `checkpoints/RUN/`, so an interrupted run that resumes continues its own MLflow run.
* Only rank 0 opens a run: when every rank runs the stage (torchrun, SLURM), the others log
  nothing.
* MLflow is the dashboard, DVC metrics files are the record: if the tracking store cannot be
  reached, the run goes on, one warning says so, and every later call is a no-op.
* A trained run logs its files (`models/RUN/`: the model, config.json, train_stats.json, the
  vocabulary) under artifact path `run_dir/`, and a neural run also its model as an MLflow
  PyTorch model at `model`: `mlflow.pytorch.load_model("runs:/<id>/model")` gives the
  `nn.Module` (nlpzoo must be importable), and `fetch_run_dir(<id>)` downloads `run_dir/` into a
  local folder that `nlpzoo.lifecycle.load_model` and the commands read as they read
  `models/RUN/`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from nlpzoo.errors import DataError

log = logging.getLogger(__name__)

RUN_FILE = "mlflow_run.json"
RUN_DIR = "run_dir"  # artifact path of a run's files (those of models/RUN/ it is loaded from)
MODEL = "model"  # artifact path of a neural run's MLflow PyTorch model
CACHE_ENV = "NLPZOO_MLFLOW_CACHE"  # where fetch_run_dir keeps downloaded runs

# Bounded network behaviour for a remote server that is down (MLflow retries for minutes otherwise).
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
# downloads (fetch_run_dir) print no carriage-return progress bar into logs and pipes
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


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

    @property
    def active(self) -> bool:
        return self.client is not None and self.run_id is not None

    def _disable(self, err: BaseException) -> None:
        msg = (
            f"MLflow unreachable at {self.uri} ({type(err).__name__}: {str(err)[:200]}); run "
            f"'{self.run_name}' goes on without tracking; metrics/{self.run_name}.json is the "
            "record"
        )
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        self.client = None

    def _call(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        if not self.active:
            return None
        try:
            return getattr(self.client, fn_name)(self.run_id, *args, **kwargs)
        except Exception as err:  # any tracking failure must not stop training
            self._disable(err)
            return None

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
        try:
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=uri)
            exp_id = _experiment_id(client, uri, experiment)
            root = project_root()
            tags = {
                "nlpzoo.run": run_name,
                "nlpzoo.family": family,
                "dvc.exp_name": os.environ.get("DVC_EXP_NAME", ""),
                "dvc.baseline_rev": os.environ.get("DVC_EXP_BASELINE_REV", ""),
                "mlflow.runName": run_name,
            }
            commit = _git_commit(root)
            if commit:
                tags["mlflow.source.git.commit"] = commit
            run = client.create_run(exp_id, run_name=run_name, tags=tags)
            tracker.client, tracker.run_id = client, run.info.run_id
        except Exception as err:
            tracker._disable(err)
            return tracker
        tracker.log_params(params)
        return tracker

    @classmethod
    def resume(cls, run_dir: Path, run_name: str) -> Tracker:
        """Reopen the run that `train` recorded in `run_dir/mlflow_run.json`."""
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
            tracker.client.get_run(run_id)
        except Exception as err:
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

    def log_run_dir(self, files: Iterable[Path]) -> None:
        """`files` under artifact path `run_dir/` (what `fetch_run_dir` downloads)."""
        for path in files:
            self.log_artifact(path, RUN_DIR)

    def log_pytorch_model(self, model: Any) -> None:
        """`model` (an `nn.Module`, on the CPU) as an MLflow PyTorch model at artifact path
        `model`, pickled whole so that `mlflow.pytorch.load_model("runs:/<id>/model")` returns
        it. Nothing is inferred (no environment probing, no network): the requirements are the
        installed torch and cloudpickle."""
        if not self.active:
            return
        try:
            _log_pytorch_model(self.client, self.run_id, self.uri, model)
        except Exception as err:  # as any tracking failure: one warning, the run goes on
            self._disable(err)

    def finish(self, status: str = "FINISHED") -> None:
        self._call("set_terminated", status=status)


def _experiment_id(client: Any, uri: str, experiment: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return exp.experiment_id
    kwargs = {}
    if uri.startswith("sqlite:///"):
        # artifacts beside the database, not in MLflow's working-directory default
        kwargs["artifact_location"] = (Path(uri[10:]).parent / "mlartifacts").as_uri()
    return client.create_experiment(experiment, **kwargs)


def prepare_store(experiment: str = "nlpzoo") -> str:
    """Create the tracking database and the experiment now, in one process: runs started side
    by side (`python -m nlpzoo repro --jobs 2`) would otherwise race to create both."""
    from mlflow import MlflowClient

    uri = tracking_uri()
    return _experiment_id(MlflowClient(tracking_uri=uri), uri, experiment)


def _log_pytorch_model(client: Any, run_id: str, uri: str, model: Any) -> None:
    import cloudpickle
    import mlflow
    import mlflow.pytorch
    import torch

    requirements = [  # without a local label (+cpu, +cu121): installable from PyPI
        f"torch=={torch.__version__.split('+')[0]}",
        f"cloudpickle=={cloudpickle.__version__}",
    ]
    kwargs: dict[str, Any] = {"pip_requirements": requirements, "run_id": run_id}
    if int(mlflow.__version__.split(".")[0]) >= 3:
        # a logged model of the run's own experiment (`runs:/<id>/model` is looked up there),
        # pickled (MLflow 3's default, torch.export, needs an input example)
        experiment = client.get_run(run_id).info.experiment_id
        logged = client.create_logged_model(experiment, name=MODEL, source_run_id=run_id)
        kwargs.update(name=MODEL, model_id=logged.model_id, serialization_format="pickle")
    else:
        kwargs["artifact_path"] = MODEL
    # mlflow.pytorch warns on every pickled model that unpickling runs code: load models from
    # stores you trust (the pickle holds nlpzoo's classes by name, and the weights)
    quiet = logging.getLogger("mlflow.pytorch")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with _process_tracking_uri(uri):
            mlflow.pytorch.log_model(model, **kwargs)
    finally:
        quiet.setLevel(level)


@contextlib.contextmanager
def _process_tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's module-level functions (`mlflow.pytorch.log_model`) use the process's tracking
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


def fetch_run_dir(run_id: str) -> Path:
    """The files MLflow run `run_id` logged under `run_dir/` (the model, config.json,
    train_stats.json, the vocabulary), downloaded from the tracking store (`tracking_uri()`)
    into `cache_root()/<run_id>/` the first time; a folder `lifecycle.load_model` reads as it
    reads models/RUN/. A logged run's files never change, so a complete download is reused."""
    from nlpzoo.io import atomic_dir

    if not re.fullmatch(r"[0-9A-Za-z_-]+", run_id or ""):
        raise DataError(f"'{run_id}' is not an MLflow run id")
    folder = cache_root() / run_id
    if (folder / "config.json").is_file():
        return folder
    uri = tracking_uri()
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        # MLflow would create an empty database there
        raise DataError(
            f"no MLflow store at {uri} (MLflow run {run_id}); set MLFLOW_TRACKING_URI to the "
            "store that holds it, or run from the project that trained it"
        )
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        client.get_run(run_id)
        logged = client.list_artifacts(run_id, RUN_DIR)
    except Exception as err:
        raise DataError(
            f"MLflow run {run_id} not found at {uri} ({type(err).__name__}: {str(err)[:200]}); "
            "set MLFLOW_TRACKING_URI to the store that holds it"
        ) from err
    if not logged:
        raise DataError(
            f"MLflow run {run_id} at {uri} has no {RUN_DIR}/ artifacts (a run's `train` stage "
            "logs them when it completes)"
        )
    with atomic_dir(folder) as tmp:
        client.download_artifacts(run_id, RUN_DIR, dst_path=str(tmp))
        for path in (tmp / RUN_DIR).iterdir():
            os.replace(path, tmp / path.name)
        (tmp / RUN_DIR).rmdir()
        if not (tmp / "config.json").is_file():
            raise DataError(f"MLflow run {run_id}: {RUN_DIR}/ holds no config.json")
    return folder
