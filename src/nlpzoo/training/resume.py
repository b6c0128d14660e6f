"""What resuming an interrupted run needs (docs/design.md §8): the RNG states, the resume
checkpoint callback, the run's fingerprint and the choice between resuming and a fresh start."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint

from nlpzoo.io import remove_checkpoints

__all__ = [
    "ResumeCheckpoint",
    "fingerprint",
    "prepare_resume",
    "remove_checkpoints",  # nlpzoo.io's (no torch: the evaluate stage removes the folder)
    "rng_state",
    "set_rng_state",
]

log = logging.getLogger("nlpzoo.training")  # the package's one logger


def rng_state() -> dict:
    """The torch, CUDA, numpy and Python RNG states as tensors and plain values (loadable with
    `weights_only=True`)."""
    _, key, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [torch.from_numpy(key.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state(("MT19937", key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class ResumeCheckpoint(Checkpoint):
    """Keeps `DIR/resume.ckpt`: all a killed run needs to continue where it stopped.

    Written at the end of every epoch, and after an optimizer step once `every_steps` steps or
    `every_minutes` minutes have passed since the last one; always to a temp file renamed into
    place (`LocalCheckpointIO`), so a kill while writing leaves the previous checkpoint intact.
    A `Checkpoint` subclass, so Lightning runs it after the other callbacks and it saves their
    updated states.

    The checkpoint also records whether training was told to stop (early stopping, `max_time`)
    when it was written: resumed from the last epoch's checkpoint of a run that stopped early,
    training stops again at once, as Lightning itself does for a run that reached
    `max_epochs`, instead of training another epoch (the train stage rerun after a kill that
    came once the run had finished, before DVC recorded its outputs).
    """

    FILE = "resume.ckpt"
    METRIC = "train/seconds_before"  # in callback_metrics once training ends (ddp_spawn too)

    def __init__(self, dirpath: Path, every_steps: int = 0, every_minutes: float = 0.0) -> None:
        self.dirpath = Path(dirpath)
        self.every_steps, self.every_minutes = every_steps, every_minutes
        self._last_time = time.monotonic()
        self._last_step = -1
        # fitting seconds of the processes before a resume (up to the checkpoint resumed from),
        # so that fit_seconds and the throughput cover the whole training
        self.seconds_before = 0.0
        self._fit_t0 = time.monotonic()
        self._trainer: pl.Trainer | None = None
        self.stopped = False  # the checkpoint resumed from was written after the last epoch

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._fit_t0 = time.monotonic()
        self._trainer = trainer

    def state_dict(self) -> dict:
        stopped = self._trainer is not None and bool(self._trainer.should_stop)
        return {
            "fit_seconds": self.seconds_before + time.monotonic() - self._fit_t0,
            "stopped": stopped,
        }

    def load_state_dict(self, state: dict) -> None:
        self.seconds_before = float(state.get("fit_seconds", 0.0))
        self.stopped = bool(state.get("stopped", False))

    def on_train_end(self, trainer, pl_module) -> None:
        trainer.callback_metrics[self.METRIC] = torch.tensor(
            self.seconds_before, dtype=torch.float64
        )

    @property
    def path(self) -> Path:
        return self.dirpath / self.FILE

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_time = time.monotonic()
        self._last_step = trainer.global_step
        if self.stopped:  # every rank loaded the same checkpoint: all stop
            log.info("the checkpoint resumed from ends the training: nothing left to train")
            trainer.should_stop = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step:  # no optimizer step yet (gradient accumulation)
            return
        due = bool(self.every_steps) and step % self.every_steps == 0
        if self.every_minutes:
            late = time.monotonic() - self._last_time >= 60 * self.every_minutes
            due = due or bool(trainer.strategy.broadcast(late))  # every rank must agree
        self._last_step = step
        if due:
            self.save(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.save(trainer)

    def save(self, trainer: pl.Trainer) -> None:
        trainer.save_checkpoint(self.path)  # every rank takes part; rank 0 writes
        self._last_time = time.monotonic()


def fingerprint(settings: dict, arrays: list[np.ndarray]) -> str:
    """SHA-256 of a run's settings (JSON) and its data (the token streams' bytes)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8).data)
    return h.hexdigest()


def prepare_resume(
    ckpt_dir: Path,
    run_fingerprint: str,
    parts: dict | None = None,
    check: Callable[[dict], Any] | None = None,
    abandon: Callable[[], Any] | None = None,
) -> Path | None:
    """The checkpoint to resume from, or None to start fresh.

    `ckpt_dir/fingerprint` records what the checkpoints belong to: the hash of the run's params,
    data, code and versions; `ckpt_dir/fingerprint.json` keeps `parts` (the code files' hashes,
    the versions) to name what changed. A checkpoint is used only if it matches, loads
    (`weights_only=True`) and passes `check` (e.g. its weights fit the model); otherwise one log
    line says why, `abandon` is called (rank 0: end the interrupted run's MLflow run) when the
    folder held an earlier run, the folder is emptied and the new fingerprint written. Only
    rank 0 changes the folder.
    """
    from pytorch_lightning.utilities import rank_zero_only

    ckpt_dir = Path(ckpt_dir)
    where = f"{ckpt_dir.parent.name}/{ckpt_dir.name}"
    path = ckpt_dir / ResumeCheckpoint.FILE
    stamp = ckpt_dir / "fingerprint"
    matches = stamp.is_file() and stamp.read_text().strip() == run_fingerprint
    if matches and path.is_file():
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            step = ckpt["global_step"]
            if check is not None:
                check(ckpt)
        except Exception as err:  # a truncated or foreign file, weights of another shape
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            log.warning("%s: cannot load %s (%s); training from the start", where, path.name, first)
        else:
            log.info("resuming from %s (step %d)", path, step)
            return path
    elif stamp.is_file():
        log.warning("%s: %s; training from the start", where, _what_changed(ckpt_dir, parts))
    if rank_zero_only.rank == 0:
        if stamp.is_file() and abandon is not None:
            abandon()
        remove_checkpoints(ckpt_dir)
        ckpt_dir.mkdir(parents=True)
        if parts is not None:
            (ckpt_dir / "fingerprint.json").write_text(json.dumps(parts, sort_keys=True) + "\n")
        (ckpt_dir / "fingerprint").write_text(run_fingerprint + "\n")
    return None


def _what_changed(ckpt_dir: Path, parts: dict | None) -> str:
    """What differs between the checkpoints' recorded parts and `parts`, in words."""
    try:
        before = json.loads((ckpt_dir / "fingerprint.json").read_text())
    except (OSError, ValueError):
        before = None
    if not isinstance(before, dict) or parts is None:
        return "written for other params, data or code"
    old, new = before.get("code", {}), parts.get("code", {})
    changed = sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))
    if changed:
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        return f"written by other code ({shown} changed)"
    old, new = before.get("versions", {}), parts.get("versions", {})
    changed = [f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(new) if old.get(k) != new.get(k)]
    if changed:
        return f"written with other versions ({', '.join(changed)})"
    return "written for other params or data"
