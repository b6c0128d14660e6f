"""The register stage: a trained and evaluated run as an MLflow model, in the Model Registry.

    register  the run's files (`lifecycle.run_files`: the model, config.json, train_stats.json,
              the vocabulary or SentencePiece model) -> an MLflow model named `model` of the
              run's own MLflow run (`nlpzoo.serving.RunModel`: text in, text out; the files are
              its `run` artifact, the one copy of the weights in the store; the nlpzoo package
              travels with it) -> a new version of registered model `nlpzoo-RUN`, tagged with
              the git revision, the params hash, the DVC experiment and the run's test metrics
              -> alias `champion` on the version whose main metric (`TaskInfo`) is best ->
              registry/RUN.json

The model is logged whatever `mlflow.register` says (the commands' `--mlflow-run ID` read the
run's files from it); with `register: false` it is not registered, and the stage says so. A
stage run again for the same MLflow run (new metrics, `--force`) reuses the run's model when
its files, the package's code and the requirements are the same (`FINGERPRINT_TAG`), so the
weights are stored once.

Registering is one unit, retried as a whole after a transient failure ("database is locked", a
refused connection): the version is created with every tag at once (its test metrics too), linked
to its logged model, and the alias set. It is idempotent: a version of the same logged model with
the same tags (an earlier try of this unit, or the stage run again with nothing changed) is that
version, not a new one. The champion is chosen under a file lock beside a sqlite store
(`mlflow.db-register-lock`: two registrations at once, `dvc queue start -j 2`, take turns) and, on
any store, by compare-and-set: the alias is read back after it is set, and set again while it is
not on the best version, so that two registrations racing leave it on the better one.

The model's pip requirements (`requirements()`) are derived from the code it runs: the imports of
`nlpzoo.serving` and of every module of the package a served run may execute (`served_files()`:
the families, their models and tasks, which a run imports by name, included), each third-party
module's distribution pinned to its installed version, so that `mlflow models serve` in a fresh
environment installs what the packaged code imports.

A store that cannot register (unreachable, or without a registry) leaves the run's files and
metrics as they are: the stage says so in one line and records it in registry/RUN.json
(`registered: false`); `dvc repro --force register-RUN` tries again.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import logging
import math
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nlpzoo.config import build
from nlpzoo.io import atomic_write_json
from nlpzoo.layout import Layout
from nlpzoo.params import MlflowConfig
from nlpzoo.taskinfo import task_info
from nlpzoo.tasks import Run

log = logging.getLogger(__name__)

PREFIX = "nlpzoo-"  # registered model of run RUN: nlpzoo-RUN
CHAMPION = "champion"
# the metric that picks the champion version, by task, and whether higher is better
METRIC_TAG = "nlpzoo.metric."  # a version's test metrics, as tags (versions have no metrics)
FINGERPRINT_TAG = "nlpzoo.fingerprint"  # a logged model's files, code and requirements (SHA-256)
CHAMPION_ROUNDS = 5  # compare-and-set rounds of the champion alias (one or two without a race)

SERVED = "nlpzoo.serving"  # the module MLflow runs to load a logged model


def model_name(run: str) -> str:
    return f"{PREFIX}{run}"


def register(params: dict, name: str, root: Path) -> dict:
    """Log run `name` as an MLflow model and register it (the module docstring says how);
    writes registry/NAME.json."""
    from nlpzoo.tracking import store_failure, tracking_uri

    run = Run.of(params, name, root)
    metrics = json.loads(run.layout.metrics(name).read_text())
    info = task_info(run.family.task)
    metric, higher = info.main_metric, info.higher_is_better
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
    atomic_write_json(run.layout.registry(name), record)
    return record


def _store_failure(err: BaseException) -> bool:
    """A failure of the store (unreachable, refused, no registry), not of this code."""
    from mlflow.exceptions import MlflowException

    from nlpzoo.tracking import error_chain, is_connection_failure

    return any(
        isinstance(e, (MlflowException, OSError)) or is_connection_failure(e)
        for e in error_chain(err)
    )


def _publish(
    run: Run, metrics: dict, metric: str, higher: bool, params: dict, wanted: bool
) -> dict:
    """Log the run's model (or find it logged already), then register it when `wanted`."""
    import mlflow

    from nlpzoo.tracking import (
        RUN_FILE,
        mlflow_client,
        process_tracking_uri,
        tracking_uri,
        with_retries,
    )

    uri = tracking_uri()
    client = mlflow_client(uri)
    run_id = json.loads((run.model_dir / RUN_FILE).read_text()).get("run_id")
    if not run_id:
        raise mlflow.exceptions.MlflowException(
            f"{Layout().model(run.name) / RUN_FILE} names no MLflow run (the store was down in "
            "training)"
        )
    source = with_retries(lambda: client.get_run(run_id))[0]
    with process_tracking_uri(uri):
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
    tags = {**_version_tags(run, source, params), **_metric_tags(metrics)}
    description = (
        f"nlpzoo run '{run.name}' (family {run.spec.family}); "
        f"alias {CHAMPION}: the version of best {metric}"
    )
    with process_tracking_uri(uri), _registry_lock(uri):
        version, champion = with_retries(
            lambda: _register_version(
                client, name, model_id, run_id, tags, description, metric, higher
            )
        )[0]
    return {
        **logged,
        "registered": True,
        "version": int(version),
        "model_uri": f"models:/{name}/{version}",
        "champion": int(champion),
        metric: metrics.get(metric),
    }


def _register_version(
    client: Any,
    name: str,
    model_id: str,
    run_id: str,
    tags: dict[str, str],
    description: str,
    metric: str,
    higher: bool,
) -> tuple[str, str]:
    """Logged model `model_id` as a version of registered model `name`, tagged with `tags`, and
    the champion alias on the best version: (the version, the champion). Idempotent, so that it
    is retried as a whole: a version of this model with these tags is reused, not made again."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import ALREADY_EXISTS, RESOURCE_ALREADY_EXISTS, ErrorCode

    try:
        client.create_registered_model(name)
    except MlflowException as err:  # registered before (or meanwhile, by another registration)
        if err.error_code not in (
            ErrorCode.Name(RESOURCE_ALREADY_EXISTS),
            ErrorCode.Name(ALREADY_EXISTS),
        ):
            raise
    source = f"models:/{model_id}"
    found = _existing_version(client, name, source, run_id, tags)
    if found is None:
        found = str(
            client.create_model_version(
                name, source, run_id=run_id, tags=tags, model_id=model_id
            ).version
        )
    _link(client, model_id, name, found)
    if client.get_registered_model(name).description != description:
        client.update_registered_model(name, description=description)
    return found, _set_champion(client, name, metric, higher)


def _existing_version(
    client: Any, name: str, source: str, run_id: str, tags: dict[str, str]
) -> str | None:
    """The newest version of `name` made from `source` (a logged model) of MLflow run `run_id`
    with every tag of `tags`, if any."""
    versions = [
        int(v.version)
        for v in client.search_model_versions(f"name='{name}'")
        if v.source == source
        and v.run_id == run_id
        and all(v.tags.get(key) == value for key, value in tags.items())
    ]
    return str(max(versions)) if versions else None


def _link(client: Any, model_id: str, name: str, version: str) -> None:
    """Name the version on its logged model (tag `mlflow.modelVersions`, which the UI shows), as
    `mlflow.register_model` does; once."""
    from mlflow.utils.mlflow_tags import MLFLOW_MODEL_VERSIONS

    linked = client.get_logged_model(model_id).tags.get(MLFLOW_MODEL_VERSIONS)
    versions = json.loads(linked) if linked else []
    if any(v.get("name") == name and str(v.get("version")) == version for v in versions):
        return
    versions.append({"name": name, "version": int(version)})
    client.set_logged_model_tags(model_id, {MLFLOW_MODEL_VERSIONS: json.dumps(versions)})


def _set_champion(client: Any, name: str, metric: str, higher: bool) -> str:
    """The champion alias on the version of best `metric` (`_champion`), by compare-and-set: set
    while it is not on the best version of a fresh read, so that of two registrations racing
    (on a store without a lock) the last to read leaves it on the best of every version."""
    best = _champion(client, name, metric, higher)
    for _ in range(CHAMPION_ROUNDS):
        if str(client.get_registered_model(name).aliases.get(CHAMPION)) == best:
            return best
        client.set_registered_model_alias(name, CHAMPION, best)
        best = _champion(client, name, metric, higher)
    log.warning(
        "registered model %s: alias %s kept moving (other registrations at once); set on "
        "version %s",
        name,
        CHAMPION,
        best,
    )
    return best


@contextlib.contextmanager
def _registry_lock(uri: str) -> Iterator[None]:
    """Across processes and threads, one registration at a time in the sqlite store at `uri`:
    a file lock beside the database (`<db>-register-lock`); nothing for another store, where
    `_set_champion` compares and sets."""
    from nlpzoo.tracking import store_lock

    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri[len("sqlite:///") :])
    with store_lock(db.with_name(f"{db.name}-register")):
        yield


def _logged_model(client: Any, run: Run, experiment_id: str, run_id: str) -> str:
    """The id of MLflow run `run_id`'s model of these files, code and requirements: the one
    logged already, else a new one."""
    from mlflow.entities import LoggedModelStatus

    from nlpzoo.tracking import MODEL, with_retries

    files = _run_files(run)
    _check_vocabulary(run, files)
    fingerprint = _fingerprint(files)
    found = with_retries(
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
    digest.update("\n".join(requirements()).encode())
    return digest.hexdigest()


def _check_vocabulary(run: Run, files: list[Path]) -> None:
    """Refuse to log a vocabulary other than the one the run was trained on (the data
    folder's, rebuilt since): the model would answer with other words."""
    from nlpzoo.use.run import VOCABULARY_HASHES, TrainedRun, check_vocabulary

    config = json.loads((run.model_dir / "config.json").read_text())
    trained = TrainedRun(run.name, run.model_dir, config, run.root)
    for path in files:
        if path.name in VOCABULARY_HASHES:
            check_vocabulary(trained, path, path.read_bytes())


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
        pip_requirements=requirements(),
    )


def requirements() -> list[str]:
    """The logged model's pip requirements: the distribution of every third-party module that
    the code a served run may execute imports (`served_imports`), pinned to the installed
    version without its local label (torch 2.x+cpu is torch==2.x: PyPI's wheel, installable
    anywhere), sorted. A module with no installed distribution is left out, with a warning."""
    from importlib.metadata import packages_distributions, version

    owners = packages_distributions()
    dists: set[str] = set()
    for module in sorted(served_imports()):
        found = sorted(set(owners.get(module, ())))
        if not found:
            log.warning("module %s, imported by the served code, is not installed", module)
            continue
        # a module several distributions provide (mlflow: mlflow, mlflow-skinny): the one of
        # its own name, else all of them
        own = [d for d in found if _canonical(d) == _canonical(module)]
        dists.update(own or found)
    return sorted((f"{d}=={version(d).split('+')[0]}" for d in dists), key=lambda r: r.lower())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def served_imports() -> set[str]:
    """The top-level names of the modules outside the package and the standard library that
    the files of `served_files()` import."""
    out: set[str] = set()
    for path in served_files():
        out |= _third_party(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    return out


def served_files() -> list[Path]:
    """The package's files that a served run may execute: `nlpzoo.serving` and what a run
    imports by name as its family says (the family's module, its model class, its task, a
    language model's input routines), with every module they import
    (`nlpzoo.pipeline.closure`)."""
    import nlpzoo
    from nlpzoo.families import FAMILIES
    from nlpzoo.lm_inputs import LM_INPUTS
    from nlpzoo.pipeline import closure, module_path

    package = Path(nlpzoo.__file__).resolve().parent
    entries = [SERVED]
    for name in FAMILIES:
        family = FAMILIES[name]
        entries += [f"nlpzoo.families.{name}", f"nlpzoo.tasks.{family.task}"]
        if isinstance(family.model, str):  # else a class defined outside the package
            entries.append(family.model.partition(":")[0])
    for row in LM_INPUTS.values():
        refs = (row.loaders, row.log_probs_of, row.decoder_of)
        entries += [ref.partition(":")[0] for ref in refs if ref]
    found = [m for m in dict.fromkeys(entries) if module_path(m, package) is not None]
    return sorted(closure([], found, package))


def _third_party(body: list[ast.stmt]) -> set[str]:
    """The top-level names of the modules outside the package and the standard library that
    statements `body` import, nested ones included (in a function, a `try`), those under
    `if TYPE_CHECKING:` left out (they never run)."""
    out: set[str] = set()
    for node in body:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for top in (name.split(".")[0] for name in names):
            if top != "nlpzoo" and top not in sys.stdlib_module_names:
                out.add(top)
        typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if inner and not (typing_only and field == "body"):
                out |= _third_party(inner)
    return out


def _metric_tags(metrics: dict) -> dict[str, str]:
    """A version's test metrics, as tags (versions have no metrics)."""
    return {
        METRIC_TAG + key: str(value)
        for key, value in sorted(metrics.items())
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


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
