"""The register stage: a trained and evaluated run as an MLflow model, in the Model Registry.

    register  the run's files (`lifecycle.run_files`: the model, config.json, train_stats.json,
              the vocabulary or SentencePiece model) -> an MLflow model named `model` of the
              run's own MLflow run (`nlpzoo.serving.RunModel`: text in, text out; the files are
              its `run` artifact, the one copy of the weights in the store; the nlpzoo package
              travels with it) -> a new version of registered model `nlpzoo-RUN`, tagged with
              the git revision, the params hash, the DVC experiment and the run's test metrics
              -> alias `champion` on the version whose main metric (`MAIN_METRIC`) is best ->
              registry/RUN.json

The model is logged whatever `mlflow.register` says (the commands' `--mlflow-run ID` read the
run's files from it); with `register: false` it is not registered, and the stage says so. A
stage run again for the same MLflow run (new metrics, `--force`) reuses the run's model when
its files, the package's code and the requirements are the same (`FINGERPRINT_TAG`), so the
weights are stored once.

A store that cannot register (unreachable, or without a registry) leaves the run's files and
metrics as they are: the stage says so in one line and records it in registry/RUN.json
(`registered: false`); `dvc repro --force register-RUN` tries again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from nlpzoo.config import build
from nlpzoo.io import atomic_write_json
from nlpzoo.params import MlflowConfig
from nlpzoo.tasks import Run

log = logging.getLogger(__name__)

PREFIX = "nlpzoo-"  # registered model of run RUN: nlpzoo-RUN
CHAMPION = "champion"
# the metric that picks the champion version, by task, and whether higher is better
MAIN_METRIC = {"lm": ("test_ppl", False), "mt": ("bleu_beam", True), "vectors": ("ws353_rho", True)}
METRIC_TAG = "nlpzoo.metric."  # a version's test metrics, as tags (versions have no metrics)
FINGERPRINT_TAG = "nlpzoo.fingerprint"  # a logged model's files, code and requirements (SHA-256)


def model_name(run: str) -> str:
    return f"{PREFIX}{run}"


def register(params: dict, name: str, root: Path) -> dict:
    """Log run `name` as an MLflow model and register it (the module docstring says how);
    writes registry/NAME.json."""
    from nlpzoo.tracking import store_failure, tracking_uri

    run = Run.of(params, name, root)
    metrics = json.loads((root / "metrics" / f"{name}.json").read_text())
    metric, higher = MAIN_METRIC[run.family.task]
    wanted = build(MlflowConfig, params.get("mlflow"), "mlflow").register
    record: dict[str, Any] = {"run": name, "model": model_name(name), "metric": metric}
    try:
        record.update(_publish(run, metrics, metric, higher, params, wanted))
    except Exception as err:
        if not _store_failure(err):
            raise
        why = store_failure(tracking_uri(), err, getattr(err, "nlpzoo_tries", None))
        msg = (
            f"run '{name}' not registered in MLflow: {why}; its files and metrics are intact; "
            f"`dvc repro --force register-{name}` tries again"
        )
        log.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        record.update(logged=False, registered=False, why=why)
    atomic_write_json(root / "registry" / f"{name}.json", record)
    return record


def _store_failure(err: BaseException) -> bool:
    """A failure of the store (unreachable, refused, no registry), not of this code."""
    from mlflow.exceptions import MlflowException

    from nlpzoo.tracking import _chain, _is_connection_failure

    return any(
        isinstance(e, (MlflowException, OSError)) or _is_connection_failure(e) for e in _chain(err)
    )


def _publish(
    run: Run, metrics: dict, metric: str, higher: bool, params: dict, wanted: bool
) -> dict:
    """Log the run's model (or find it logged already), then register it when `wanted`."""
    import mlflow
    from mlflow import MlflowClient

    from nlpzoo.tracking import RUN_FILE, _process_tracking_uri, _with_retries, tracking_uri

    uri = tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    run_id = json.loads((run.model_dir / RUN_FILE).read_text()).get("run_id")
    if not run_id:
        raise mlflow.exceptions.MlflowException(
            f"models/{run.name}/{RUN_FILE} names no MLflow run (the store was down in training)"
        )
    source = _with_retries(lambda: client.get_run(run_id))[0]
    with _process_tracking_uri(uri):
        model_id = _logged_model(client, run, source.info.experiment_id, run_id)
    logged = {"logged": True, "logged_model": f"models:/{model_id}", "mlflow_run_id": run_id}
    if not wanted:
        log.info(
            "run '%s': its MLflow model is logged to MLflow run %s (models:/%s) and not "
            "registered (params mlflow.register is false)",
            run.name,
            run_id,
            model_id,
        )
        return {**logged, "registered": False, "why": "params mlflow.register is false"}
    name = model_name(run.name)
    tags = _version_tags(run, source, params)
    with _process_tracking_uri(uri):
        version = _with_retries(
            lambda: mlflow.register_model(f"models:/{model_id}", name, tags=tags)
        )[0]
    for key, value in sorted(metrics.items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            client.set_model_version_tag(name, version.version, METRIC_TAG + key, str(value))
    champion = _champion(client, name, metric, higher)
    client.set_registered_model_alias(name, CHAMPION, champion)
    client.update_registered_model(
        name,
        description=f"nlpzoo run '{run.name}' (family {run.spec.family}); "
        f"alias {CHAMPION}: the version of best {metric}",
    )
    return {
        **logged,
        "registered": True,
        "version": int(version.version),
        "model_uri": f"models:/{name}/{version.version}",
        "champion": int(champion),
        metric: metrics.get(metric),
    }


def _logged_model(client: Any, run: Run, experiment_id: str, run_id: str) -> str:
    """The id of MLflow run `run_id`'s model of these files, code and requirements: the one
    logged already, else a new one."""
    from mlflow.entities import LoggedModelStatus

    from nlpzoo.tracking import MODEL, _with_retries

    files = _run_files(run)
    fingerprint = _fingerprint(files)
    found = _with_retries(
        lambda: client.search_logged_models(
            experiment_ids=[experiment_id], filter_string=f"source_run_id = '{run_id}'"
        )
    )[0]
    for model in found:
        if (
            model.name == MODEL
            and model.status == LoggedModelStatus.READY
            and model.tags.get(FINGERPRINT_TAG) == fingerprint
        ):
            log.info(
                "run '%s': its MLflow model models:/%s is logged already", run.name, model.model_id
            )
            return model.model_id
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        for path in files:
            shutil.copy2(path, folder / path.name)
        logged = client.create_logged_model(
            experiment_id, name=MODEL, source_run_id=run_id, tags={FINGERPRINT_TAG: fingerprint}
        )
        _log_pyfunc(folder, logged.model_id, run)
    return logged.model_id


def _fingerprint(files: list[Path]) -> str:
    """SHA-256 of what the logged model holds: the run's files, the package's code (what
    answers) and the pinned requirements."""
    import nlpzoo

    digest = hashlib.sha256()
    package = Path(nlpzoo.__file__).resolve().parent
    code = sorted(package.rglob("*.py"))
    for name, path in [(p.name, p) for p in files] + [
        (p.relative_to(package).as_posix(), p) for p in code
    ]:
        digest.update(f"{name}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    digest.update("\n".join(_requirements()).encode())
    return digest.hexdigest()


def _run_files(run: Run) -> list[Path]:
    from nlpzoo.lifecycle import run_files

    return run_files(run)


def _log_pyfunc(folder: Path, model_id: str, run: Run) -> Any:
    import mlflow.pyfunc
    from mlflow.models import ModelSignature
    from mlflow.types import DataType, ParamSchema, ParamSpec

    import nlpzoo
    from nlpzoo import serving
    from nlpzoo.serving import default_params, input_example

    config = json.loads((folder / "config.json").read_text())
    defaults = default_params(config, run.family)
    kinds = {
        bool: DataType.boolean,
        int: DataType.long,
        float: DataType.double,
        str: DataType.string,
    }
    # the params only: the model checks its input itself (nlpzoo.serving says why)
    signature = ModelSignature(
        params=ParamSchema([ParamSpec(k, kinds[type(v)], v) for k, v in defaults.items()]),
    )
    return mlflow.pyfunc.log_model(
        name="model",
        model_id=model_id,
        python_model=str(Path(serving.__file__).resolve()),  # models from code
        artifacts={"run": str(folder)},
        code_paths=[str(Path(nlpzoo.__file__).resolve().parent)],
        signature=signature,
        input_example=input_example(folder, run.family),
        pip_requirements=_requirements(),
    )


def _requirements() -> list[str]:
    """What loading the model needs, pinned to what trained it (no local label such as +cpu:
    installable from PyPI)."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in ("torch", "numpy", "sentencepiece", "mlflow", "pyyaml", "scipy", "numba"):
        try:
            out.append(f"{package}=={version(package).split('+')[0]}")
        except PackageNotFoundError:
            continue
    return out


def _version_tags(run: Run, source: Any, params: dict) -> dict[str, str]:
    tags = source.data.tags
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return {
        "nlpzoo.run": run.name,
        "nlpzoo.family": run.spec.family,
        "git_commit": tags.get("mlflow.source.git.commit", ""),
        "params_hash": hashlib.sha256(blob).hexdigest()[:12],
        "dvc.exp_name": tags.get("dvc.exp_name", ""),
    }


def _champion(client: Any, name: str, metric: str, higher: bool) -> str:
    """The version with the best `metric` tag (the newest among equals; the newest version
    when none has the metric)."""
    best: tuple[bool, float, int] | None = None
    for v in client.search_model_versions(f"name='{name}'"):
        value = v.tags.get(METRIC_TAG + metric)
        score = float(value) if value is not None else math.nan
        known = math.isfinite(score)  # a NaN metric (no pair in the vocabulary) is no score
        key = (known, (score if higher else -score) if known else 0.0, int(v.version))
        if best is None or key > best:
            best = key
    if best is None:
        raise LookupError(f"registered model {name} has no version")
    return str(best[2])
