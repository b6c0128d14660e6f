"""The run lifecycle: what the `train` and `evaluate` stages do, the same for every run (the
mixture stage is `nlpzoo.evaluation.mixture`).

    train     open the run's MLflow run (an interrupted run that resumes continues its own)
              -> build models/RUN/ under a temporary name (on rank 0; when every rank runs the
              stage, the others write to a throwaway folder) -> fit it as its family's record
              says (`count`, `closed_form`, or `lightning`) -> config.json, train_stats.json
              (the model's own cost included) and the task's outputs -> rename into place
              -> log its stats and curve to the MLflow run -> close the MLflow run
    evaluate  remove checkpoints/RUN/ (train's outputs are recorded by now) -> reopen the
              MLflow run -> the task's scores -> metrics/RUN.json, eval/RUN/

(The register stage, `nlpzoo.registry`, then logs the run's files as an MLflow model, their one
copy in the store, and registers it.)

What differs by task (data, loaders, scores, outputs) comes from `nlpzoo.tasks`, what differs by
family from its record (`nlpzoo.families.Family`): `train` and `evaluate` know no family and no
task by name.

Layout written for run RUN (every path relative to the project root):

    models/RUN/        model.pt (or model.npz: count and closed-form families), config.json,
                       train_stats.json, mlflow_run.json, and the task's own files
    eval/RUN/          evaluation outputs (a sibling of models/RUN, which DVC tracks whole)
    plots/RUN.csv      learning curve (epoch, step, train_loss, val_loss, val_ppl, seconds)
    metrics/RUN.json   flat metrics, the same keys that go to MLflow
    checkpoints/RUN/   Lightning checkpoints, the resume fingerprint and the MLflow run id:
                       written while training, kept after it (a rerun of `train` after a kill
                       before DVC recorded models/RUN resumes from them), removed when
                       `evaluate` starts
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nlpzoo.config import build
from nlpzoo.curves import CURVE_FIELDS
from nlpzoo.io import (
    atomic_dir,
    atomic_open,
    atomic_write_json,
    global_rank,
    rank_zero_dir,
    remove_checkpoints,
)
from nlpzoo.params import MlflowConfig
from nlpzoo.placement import Placement, place
from nlpzoo.tasks import Data, Fitted, Run, Task, load_model, task_of
from nlpzoo.tracking import Tracker

__all__ = ["evaluate", "load_model", "train"]

log = logging.getLogger(__name__)

CURVE_HEADER = ",".join(CURVE_FIELDS) + "\n"


# --------------------------------------------------------------------------- train


def train(params: dict, name: str, root: Path) -> dict:
    """Train run `name`; writes `models/NAME/` and `plots/NAME.csv`; returns its stats."""
    run = Run.of(params, name, root)
    task = task_of(run.family)
    _use_threads(run)
    placement = place(run)  # the device, precision and determinism, made concrete once
    if run.family.neural:  # for the fingerprint, Lightning and the stats
        run.trainer = placement.trainer(run.trainer)
    data = task.load(run)
    if hasattr(run.config, "fit_to_vocab"):  # defaults sized to the data (the LMs' cut-offs)
        run.config = run.config.fit_to_vocab(data.vocab_size, run.name)
    resume = _prepare_resume(run, task, data) if run.family.neural else None
    tracker = _open_tracker(run, resuming=resume is not None)
    t0 = time.time()
    try:
        with rank_zero_dir(run.model_dir) as tmp:
            if run.family.neural:
                model, stats = _fit_lightning(run, task, data, resume, tracker, tmp)
            else:
                model, stats = _fit_direct(run, task, data, tmp)
            task.save(run, data, model, tmp)
            cost = model.cost(data.vocab_size)
            if cost is not None:
                stats.update(cost.as_stats())
            stats["train_seconds"] = round(time.time() - t0, 2)
            stats.update(_placement_stats(placement, stats))
            config = {
                "run": name,
                "family": run.spec.family,
                "data": run.spec.data,
                "vocab_size": data.vocab_size,
                "config": asdict(run.config),
                "seed": run.seed,
                **_vocabulary_hashes(run, tmp),
            }
            atomic_write_json(tmp / "config.json", config)
            atomic_write_json(tmp / "train_stats.json", stats)
            tracker.save(tmp)
    except BaseException:
        tracker.finish("FAILED")
        raise
    # checkpoints/RUN stays until the evaluate stage: a kill before DVC has recorded models/RUN
    # reruns this stage, which resumes from the last checkpoint (docs/design.md §8); marked
    # finished, so that a forced rerun after DVC recorded the outputs trains afresh
    if run.family.neural and global_rank() == 0:
        _mark_finished(run)
    tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, (int, float))})
    tracker.log_artifact(run.plots_path)
    tracker.finish()
    return stats


# the files of models/RUN/ a run is loaded from (`load_model`, the commands): what the register
# stage logs to MLflow as its model's `run` artifact (`nlpzoo.tracking.fetch_run_dir` downloads
# them)
RUN_DIR_FILES = ("model.pt", "model.npz", "config.json", "train_stats.json")
VOCABULARIES = ("vocab.txt", "spm.model")  # a word vocabulary, or translation's SentencePiece


def _use_threads(run: Run) -> None:
    """torch threads from `trainer.threads` for every stage of the run, training and evaluation
    alike: `make repro` runs two runs side by side, one thread each."""
    if run.trainer.threads:
        import torch

        torch.set_num_threads(run.trainer.threads)


def run_files(run: Run) -> list[Path]:
    """The files a trained run is loaded from: those of models/RUN/ (`RUN_DIR_FILES`) and its
    vocabulary (the data folder's when models/RUN/ holds none)."""
    names = (*RUN_DIR_FILES, *VOCABULARIES)
    files = [run.model_dir / n for n in names if (run.model_dir / n).is_file()]
    if not any(f.name in VOCABULARIES for f in files) and (run.data_dir / "vocab.txt").is_file():
        files.append(run.data_dir / "vocab.txt")
    return files


def _tracking_params(run: Run) -> dict:
    out = {"run": run.name, "family": run.spec.family, "data": run.spec.data, "seed": run.seed}
    out.update(asdict(run.config))
    if run.family.neural:
        out["trainer"] = asdict(run.trainer)
    return out


def _open_tracker(run: Run, resuming: bool) -> Tracker:
    """The run's MLflow run: the one an interrupted run recorded in checkpoints/RUN/ when it
    resumes, else a new one (recorded there, for a later resume)."""
    if resuming:
        tracker = Tracker.reopen(run.ckpt_dir, run.name)
        if tracker is not None:
            return tracker
    experiment = build(MlflowConfig, run.params.get("mlflow"), "mlflow").experiment
    tracker = Tracker.start(run.name, run.spec.family, _tracking_params(run), experiment=experiment)
    if run.family.neural and global_rank() == 0:
        tracker.save(run.ckpt_dir)
    return tracker


def _prepare_resume(run: Run, task: Task, data: Data) -> Path | None:
    """The checkpoint of an interrupted run of the same params, data, code and versions to
    resume from (docs/design.md §8), or None: checkpoints/RUN/ is then emptied for a fresh start
    (and the interrupted run's MLflow run ended as KILLED). The code is the files DVC gives the
    run's train stage (`pipeline.run_code`); a checkpoint whose weights do not fit the model
    built from the run's config is not resumed either."""
    import pytorch_lightning
    import torch

    from nlpzoo.training import fingerprint, prepare_resume

    extra, arrays = task.fingerprint(data)
    parts = {
        "code": _code_hashes(run),
        "versions": {
            "torch": torch.__version__,
            "pytorch_lightning": pytorch_lightning.__version__,
        },
    }
    params = {
        "run": run.name,
        "family": run.spec.family,
        "config": asdict(run.config),
        "trainer": run.trainer.result_settings(),
        "seed": run.seed,
    }
    settings = {**params, **extra, **parts}
    # fingerprint.json keeps the params and a hash of the data (the task's own settings, e.g.
    # the vocabulary's counts, and its arrays) too: what a set of checkpoints moved aside was
    # trained with
    parts.update(params=params, data=fingerprint(extra, arrays))

    def check(ckpt: dict) -> None:  # the weights fit the model (raises otherwise)
        _new_module(run, data).load_state_dict(ckpt["state_dict"])

    finished = _finished_curve(run)
    fresh = None
    if os.environ.get("NLPZOO_FRESH", "").strip() not in ("", "0"):
        fresh = "NLPZOO_FRESH is set"
    elif finished is not None and _recorded_by_dvc(run, finished):
        fresh = "dvc.lock records the outputs its finished training wrote (a forced rerun)"
    return prepare_resume(
        run.ckpt_dir,
        fingerprint(settings, arrays),
        parts=parts,
        check=check,
        # a finished run's MLflow run is FINISHED and stays so
        abandon=None if finished is not None else (lambda: _end_abandoned_run(run)),
        fresh=fresh,
    )


FINISHED = "finished.json"  # in checkpoints/RUN/: the MD5 of the curve the finished run wrote


def _mark_finished(run: Run) -> None:
    """Record in checkpoints/RUN/ that its training finished and wrote its outputs: the MD5 of
    plots/RUN.csv (each training's curve has its own seconds), which dvc.lock holds once DVC
    has recorded the stage's outputs."""
    if not run.ckpt_dir.is_dir() or not run.plots_path.is_file():
        return
    digest = hashlib.md5(run.plots_path.read_bytes(), usedforsecurity=False).hexdigest()
    atomic_write_json(run.ckpt_dir / FINISHED, {"curve_md5": digest})


def _finished_curve(run: Run) -> str | None:
    """The curve's MD5 recorded by a finished training in checkpoints/RUN/, or None."""
    try:
        return str(json.loads((run.ckpt_dir / FINISHED).read_text())["curve_md5"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _recorded_by_dvc(run: Run, curve_md5: str) -> bool:
    """Whether the project's dvc.lock records plots/RUN.csv with the MD5 `curve_md5` (the
    outputs of that very training): DVC committed them, so this rerun was forced."""
    import yaml

    try:
        lock = yaml.safe_load((run.root / "dvc.lock").read_text())
        stages = lock["stages"].values()
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return False
    curve = run.plots_path.relative_to(run.root).as_posix()
    return any(
        isinstance(out, dict) and out.get("path") == curve and out.get("md5") == curve_md5
        for stage in stages
        if isinstance(stage, dict)
        for out in stage.get("outs") or []
    )


def _code_hashes(run: Run) -> dict[str, str]:
    """SHA-256 of each source file the run's train stage executes, by repository path: the
    stage's code deps in dvc.yaml (`pipeline.run_code`) of the checkout the code runs from;
    every file of the package when it runs from elsewhere (an installed copy) or when the
    family's model class is defined outside the package (its source file is then hashed too,
    by its absolute path)."""
    import inspect

    import nlpzoo
    from nlpzoo import pipeline

    pkg = Path(nlpzoo.__file__).resolve().parent
    code_root = pkg.parent.parent
    model = run.family.model
    in_checkout = pipeline.package_dir(code_root) == pkg
    if in_checkout and isinstance(model, str) and (code_root / "stages" / "train.py").is_file():
        files = pipeline.run_code(code_root, "train", run.spec.family)
        return {f: _hash_file(code_root / f) for f in files}
    hashes = {p.relative_to(code_root).as_posix(): _hash_file(p) for p in sorted(pkg.rglob("*.py"))}
    if not isinstance(model, str):
        source = inspect.getsourcefile(model)
        if source is not None:
            hashes[str(Path(source).resolve())] = _hash_file(Path(source))
    return hashes


def _hash_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# config.json's SHA-256 of the vocabulary file a run was trained on, by file name: the commands
# and the served model refuse another one (`nlpzoo.use.run.check_vocabulary`)
VOCABULARY_HASHES = {"vocab.txt": "vocab_sha256", "spm.model": "spm_sha256"}


def _vocabulary_hashes(run: Run, folder: Path) -> dict[str, str]:
    """SHA-256 of the run's vocabulary files, for config.json: each of `VOCABULARIES` the run's
    folder holds (a translation run's copy of its SentencePiece model), else the data folder's
    (a word vocabulary, read from there when the run is used)."""
    hashes = {}
    for name in VOCABULARIES:
        path = folder / name if (folder / name).is_file() else run.data_dir / name
        if path.is_file():
            hashes[VOCABULARY_HASHES[name]] = _hash_file(path)
    return hashes


def _end_abandoned_run(run: Run) -> None:
    """The MLflow run recorded in checkpoints/RUN/ (an interrupted run not resumed) ends as
    KILLED, not left RUNNING; an unreachable MLflow only warns."""
    from nlpzoo.tracking import RUN_FILE

    if not (run.ckpt_dir / RUN_FILE).is_file():
        return
    try:
        Tracker.resume(run.ckpt_dir, run.name).finish("KILLED")
    except Exception as err:  # an unreadable record: nothing to end
        log.warning("run '%s': cannot end the abandoned MLflow run (%s)", run.name, err)


def _new_module(run: Run, data: Data) -> Any:
    from nlpzoo import training

    return training.FamilyModule(
        run.spec.family, asdict(run.config), data.vocab_size, run=run.name, counts=data.counts
    )


def _fit_direct(run: Run, task: Task, data: Data, folder: Path) -> tuple[Any, dict]:
    """Count and closed-form families: `fit` on the task's arrays, `model.npz`, one curve row."""
    t0 = time.time()
    model = run.family.model_class()(run.config, data.vocab_size).fit(*task.fit_arrays(data))
    seconds = time.time() - t0
    model.save(folder / "model.npz")
    val_ppl = task.validation_ppl(model, data)
    with atomic_open(run.plots_path) as f:  # one point on its "curve"
        f.write(CURVE_HEADER)
        if val_ppl is None:
            f.write(f"0,0,,,,{seconds:.2f}\n")
        else:
            f.write(f"0,0,,{math.log(val_ppl):.6f},{val_ppl:.4f},{seconds:.2f}\n")
    stats = {
        "params": int(model.num_parameters()),
        "fit_seconds": round(seconds, 2),
        "epochs": 1,
        **task.fit_stats(data, Fitted(epochs=1, seconds=seconds)),
    }
    return model, stats


def _fit_lightning(
    run: Run, task: Task, data: Data, resume: Path | None, tracker: Tracker, folder: Path
) -> tuple[Any, dict]:
    """Neural families: the Trainer on the task's data module; the best epoch's weights (the
    last ones without a held-out objective) to `model.pt`."""
    import torch

    from nlpzoo import training
    from nlpzoo.training.checkpoint_io import save_model

    torch.manual_seed(run.seed)  # the initial weights follow the params' seed
    module = _new_module(run, data)
    datamodule = task.datamodule(run, data)
    trainer = training.make_trainer(
        run.trainer,
        run.name,
        run.plots_path,
        run.ckpt_dir,
        tracker,
        run.seed,
        validate=task.validates,
    )
    t0 = time.time()
    trainer.fit(module, ckpt_path=resume, weights_only=True, datamodule=datamodule)
    # over the whole training: this process's and those before a resume (their checkpoint's)
    seconds = time.time() - t0 + _seconds_before(trainer)
    world = max(trainer.world_size, 1)
    # every rank's; a run resumed after its last epoch trained nothing more
    predictions = int(trainer.callback_metrics.get("train/predictions", module.predictions))
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best and Path(best).is_file():
        state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
        module.load_state_dict(state)
    blob = {
        "family": run.spec.family,
        "config": asdict(run.config),
        "vocab_size": data.vocab_size,
        "counts": data.counts,
        "state_dict": module.model.state_dict(),
    }
    save_model(blob, folder / "model.pt")  # fsynced; a full disk: OSError(ENOSPC)
    fitted = Fitted(
        epochs=int(trainer.current_epoch),
        seconds=seconds,
        world_size=world,
        fraction=_fraction(run.trainer.limit_train_batches, datamodule),
        predictions=predictions,
        datamodule=datamodule,
    )
    stats = {
        "params": int(sum(p.numel() for p in module.model.parameters())),
        "fit_seconds": round(seconds, 2),
        "epochs": fitted.epochs,
        # as resolved (`auto` never stays); a family's own in-place kernel (word2vec, GloVe in one
        # process) computes in float32 whatever the Trainer's precision
        "precision": "32-true" if module.manual else str(run.trainer.precision),
        **task.fit_stats(data, fitted),
    }
    return module.model, stats


def _placement_stats(placement: Placement, stats: dict) -> dict:
    """Where the run trained (train_stats.json, the MLflow run, the report): the device, the
    devices and determinism as resolved; the precision the fit recorded (a family's own
    float32 kernel says 32-true), or the placement's."""
    record = placement.record()
    if "precision" not in stats:  # no Lightning (count, closed form): the device only
        return {"device": record["device"], "devices": 1}
    record["precision"] = stats["precision"]
    return record


def _seconds_before(trainer: Any) -> float:
    """Fitting seconds of the processes before a resume, from the checkpoint resumed from."""
    from nlpzoo.training import ResumeCheckpoint

    metric = trainer.callback_metrics.get(ResumeCheckpoint.METRIC)
    if metric is not None:
        return float(metric)
    cb = next((c for c in trainer.callbacks if isinstance(c, ResumeCheckpoint)), None)
    return cb.seconds_before if cb is not None else 0.0


def _fraction(limit: int | float, datamodule: Any) -> float:
    """The fraction of each epoch's training batches run (`limit_train_batches`)."""
    if isinstance(limit, float):
        return min(limit, 1.0)
    batches = len(datamodule.loaders[0]) if datamodule.loaders else 0
    return min(limit, batches) / max(batches, 1)


# --------------------------------------------------------------------------- evaluate


def evaluate(params: dict, name: str, root: Path) -> dict:
    """Score run `name` with its task's protocol; write `metrics/NAME.json` and `eval/NAME/`,
    and log both to the run's MLflow run."""
    run = Run.of(params, name, root)
    task = task_of(run.family)
    if run.family.neural and global_rank() == 0:
        # the train stage's outputs are recorded by now: its resume scratch goes (a path
        # outside checkpoints/ is refused)
        remove_checkpoints(run.ckpt_dir)
    _use_threads(run)
    tracker = Tracker.resume(run.model_dir, name)
    t0 = time.time()
    device = "cpu"  # count and closed-form families compute in numpy
    if run.family.neural:  # on the device the run trained on (its placement's first)
        device = place(run).torch_device()
    model = load_model(run.model_dir, device=device)
    scores = task.evaluate(run, model)
    metrics = scores.metrics
    metrics["eval_seconds"] = round(time.time() - t0, 2)
    metrics.update(json.loads((run.model_dir / "train_stats.json").read_text()))
    metrics.update(mlflow_run_id=tracker.run_id, family=run.spec.family, task=run.family.task)
    with atomic_dir(run.eval_dir) as tmp:
        tracker.save(tmp)  # later stages (mixtures) reopen the run from here
        for file_name, write in scores.files.items():
            write(tmp / file_name)
    metrics_path = run.layout.metrics(name)
    atomic_write_json(metrics_path, metrics)
    if scores.tags:
        tracker.log_params(scores.tags)
    tracker.log_metrics({k: v for k, v in metrics.items() if k != "mlflow_run_id"})
    tracker.log_artifact(metrics_path)
    for file_name in scores.artifacts:
        tracker.log_artifact(run.eval_dir / file_name)
    tracker.finish()
    return metrics
