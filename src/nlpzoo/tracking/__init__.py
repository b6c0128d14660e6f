"""MLflow tracking (docs/design.md §5): one MLflow run per model run, across `train` and
`evaluate`; MLflow is the dashboard, DVC metrics files are the record.

* `store`: where the store is (`tracking_uri`: `MLFLOW_TRACKING_URI`, else
  `sqlite:///<DVC_ROOT or cwd>/mlflow.db`), MLflow's settings put in the environment when a
  store is first opened (`apply_mlflow_settings`; importing this package changes nothing), the
  store made ready once under a file lock and in WAL mode (`prepare_store`), the dashboard's
  address (`experiment_url`) and MLflow's process URI for a while (`process_tracking_uri`).
* `retry`: which failures are transient, retries with bounded backoff (`with_retries`), the
  hold after a connection failure, and one line naming what went wrong (`store_failure`).
* `tracker`: `Tracker`, the failure-tolerant handle on one MLflow run (rank 0 only); calls a
  store that is down missed are kept and sent, in order, when it answers.
* `fetch`: `fetch_run_dir`, a trained run's files downloaded from its MLflow model (by run id
  or registered version) into a local cache folder.

The names below are the package's API; import them from `nlpzoo.tracking`.
"""

from nlpzoo.tracking.fetch import (
    CACHE_ENV,
    MODEL,
    MODEL_FILES,
    RUN_DIR,
    cache_root,
    fetch_run_dir,
    uri_key,
)
from nlpzoo.tracking.retry import (
    OUTAGE_HOLD_S,
    RETRY_BASE_S,
    RETRY_MAX_S,
    RETRY_TRIES,
    brief,
    error_chain,
    is_connection_failure,
    is_transient,
    store_failure,
    total_retries,
    with_retries,
)
from nlpzoo.tracking.store import (
    MLFLOW_SETTINGS,
    apply_mlflow_settings,
    experiment_url,
    git_commit,
    mlflow_client,
    prepare_store,
    prepare_store_or_warn,
    process_tracking_uri,
    project_root,
    source_root,
    store_lock,
    tracking_uri,
)
from nlpzoo.tracking.tracker import PENDING_MAX, RUN_FILE, Tracker

__all__ = [
    "CACHE_ENV",
    "MLFLOW_SETTINGS",
    "MODEL",
    "MODEL_FILES",
    "OUTAGE_HOLD_S",
    "PENDING_MAX",
    "RETRY_BASE_S",
    "RETRY_MAX_S",
    "RETRY_TRIES",
    "RUN_DIR",
    "RUN_FILE",
    "Tracker",
    "apply_mlflow_settings",
    "brief",
    "cache_root",
    "error_chain",
    "experiment_url",
    "fetch_run_dir",
    "git_commit",
    "is_connection_failure",
    "is_transient",
    "mlflow_client",
    "prepare_store",
    "prepare_store_or_warn",
    "process_tracking_uri",
    "project_root",
    "source_root",
    "store_failure",
    "store_lock",
    "total_retries",
    "tracking_uri",
    "uri_key",
    "with_retries",
]
