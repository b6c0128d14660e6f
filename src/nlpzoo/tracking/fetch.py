"""A logged run, locally (docs/design.md §5).

A trained run's files (`models/RUN/`: the model, config.json, train_stats.json, the
vocabulary) are stored once, as the `run` artifact of the MLflow model that the register stage
(`nlpzoo.registry`) logs to the run and registers. `fetch_run_dir(<id>)`, or
`fetch_run_dir("models:/nlpzoo-RUN@champion")` (or `/VERSION`), downloads them into a local
folder that `nlpzoo.lifecycle.load_model` and the commands read as they read `models/RUN/`.
Runs logged before the models held the files have them under artifact path `run_dir/`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlpzoo.errors import DataError
from nlpzoo.tracking.retry import brief, is_connection_failure, store_failure, with_retries
from nlpzoo.tracking.store import mlflow_client, process_tracking_uri, tracking_uri

RUN_DIR = "run_dir"  # artifact path of a run's files in runs logged before its model held them
MODEL = "model"  # name of a run's MLflow model (the register stage logs it)
MODEL_FILES = "artifacts/run"  # where that model keeps the run's files (its `run` artifact)
CACHE_ENV = "NLPZOO_MLFLOW_CACHE"  # where fetch_run_dir keeps downloaded runs


def cache_root() -> Path:
    """Where downloaded runs are kept: `NLPZOO_MLFLOW_CACHE`, else nlpzoo/mlflow/ in the user's
    cache folder (`XDG_CACHE_HOME`, else ~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nlpzoo" / "mlflow"


def uri_key(uri: str) -> str:
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
        folder = cache_root() / uri_key(uri) / ref
        if (folder / "config.json").is_file():
            return folder
    client = _client(uri, ref)
    if version is None:
        run = _ask(uri, ref, lambda: client.get_run(ref), f"MLflow run {ref} not found")
        location = _files_of_run(client, uri, run)
        _download(uri, location, folder, f"MLflow run {ref}", legacy_run=location == RUN_DIR)
        return folder
    model_id, location = _files_of_version(client, uri, ref, version)
    folder = cache_root() / uri_key(uri) / model_id
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
    return mlflow_client(uri)


def _ask(uri: str, ref: str, fn: Callable[[], Any], missing: str) -> Any:
    """`fn()` against the store, retried; a store that does not answer, or answers that it
    holds no such thing (`missing`), is one clear error."""
    try:
        return with_retries(fn)[0]
    except Exception as err:
        if is_connection_failure(err):
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
                client = mlflow_client(uri)
                with_retries(lambda: client.download_artifacts(folder.name, location, str(into)))
            else:
                import mlflow.artifacts

                with process_tracking_uri(uri):
                    with_retries(
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
