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
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RUN_FILE = "mlflow_run.json"

# Bounded network behaviour for a remote server that is down (MLflow retries for minutes otherwise).
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


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
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                kwargs = {}
                if uri.startswith("sqlite:///"):
                    # artifacts beside the database, not in MLflow's working-directory default
                    kwargs["artifact_location"] = (Path(uri[10:]).parent / "mlartifacts").as_uri()
                exp_id = client.create_experiment(experiment, **kwargs)
            else:
                exp_id = exp.experiment_id
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

    def finish(self, status: str = "FINISHED") -> None:
        self._call("set_terminated", status=status)
