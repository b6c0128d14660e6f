"""The per-run MLflow handle (docs/design.md §5): one MLflow run per model run, across `train` and
`evaluate`.

* `train-RUN` opens the run (`Tracker.start`) and writes its id to `models/RUN/mlflow_run.json`
  (`RUN_FILE`); `evaluate-RUN` reopens it (`Tracker.resume`), so curves and final metrics live
  together. While it trains, the id is also kept in `checkpoints/RUN/`, so an interrupted run
  that resumes continues its own MLflow run (`Tracker.reopen`).
* Only rank 0 opens a run: when every rank runs the stage (torchrun, SLURM), the others log
  nothing.
* MLflow is the dashboard, DVC metrics files are the record, and a hiccup of the store costs
  neither: each call is retried (`retry.with_retries`); a call that still fails warns once per
  run and is kept, in order, to be sent with the next call that gets through; after a
  connection failure, calls within `retry.OUTAGE_HOLD_S` seconds are only kept (no minutes lost
  against a dead server), while `finish` always tries. A run whose store comes back ends
  FINISHED with every metric.
* The commit tagged on a run is the working directory's HEAD (a queued experiment's own
  workspace), with its name and baseline.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nlpzoo.tracking import store
from nlpzoo.tracking.retry import (
    check_not_held,
    held,
    hold,
    is_connection_failure,
    is_transient,
    store_failure,
    with_retries,
)
from nlpzoo.tracking.store import ensure_store, mlflow_client, tracking_uri

log = logging.getLogger("nlpzoo.tracking")  # one logger for the package's lines

RUN_FILE = "mlflow_run.json"
PENDING_MAX = 10_000  # calls kept for a store that is down, per run (the oldest dropped beyond)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


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
        if is_connection_failure(err):
            hold(self.uri)

    def _keep(self, fn: Callable[[], Any]) -> None:
        self._pending.append(fn)
        if len(self._pending) > PENDING_MAX:
            self._pending.pop(0)
            self.dropped += 1

    def _try(self, fn: Callable[[], Any]) -> Any:
        try:
            result, taken = with_retries(fn)
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
        if not final and held(self.uri):
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
        commit = store.git_commit(store.source_root())
        if commit:
            tags["mlflow.source.git.commit"] = commit

        def open_run() -> tuple[Any, str]:
            exp_id = ensure_store(uri, experiment)
            client = mlflow_client(uri)
            return client, client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id

        try:
            check_not_held(uri)
            tracker.client, tracker.run_id = tracker._try(open_run)
        except Exception as err:
            if is_connection_failure(err):
                hold(uri)
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
            tracker.client = mlflow_client(uri)
            check_not_held(uri)
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
