"""What resuming an interrupted run needs (docs/design.md §8): the RNG states, the resume
checkpoint callback, the run's fingerprint and the choice between resuming and a fresh start."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import time
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint

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
    """

    FILE = "resume.ckpt"

    def __init__(self, dirpath: Path, every_steps: int = 0, every_minutes: float = 0.0) -> None:
        self.dirpath = Path(dirpath)
        self.every_steps, self.every_minutes = every_steps, every_minutes
        self._last_time = time.monotonic()
        self._last_step = -1

    @property
    def path(self) -> Path:
        return self.dirpath / self.FILE

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_time = time.monotonic()
        self._last_step = trainer.global_step

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


def prepare_resume(ckpt_dir: Path, run_fingerprint: str) -> Path | None:
    """The checkpoint to resume from, or None to start fresh.

    `ckpt_dir/fingerprint` records what the checkpoints belong to: the hash of the run's params
    and data. A checkpoint is used only if it matches and loads (`weights_only=True`); otherwise
    the folder is emptied and the new fingerprint written. Only rank 0 changes the folder.
    """
    from pytorch_lightning.utilities import rank_zero_only

    ckpt_dir = Path(ckpt_dir)
    path = ckpt_dir / ResumeCheckpoint.FILE
    stamp = ckpt_dir / "fingerprint"
    matches = stamp.is_file() and stamp.read_text().strip() == run_fingerprint
    if matches and path.is_file():
        try:
            step = torch.load(path, map_location="cpu", weights_only=True)["global_step"]
        except Exception as err:  # a truncated or foreign file: start over
            log.warning("cannot read %s (%s); training starts fresh", path, err)
        else:
            log.info("resuming from %s (step %d)", path, step)
            return path
    elif stamp.is_file():
        log.info("checkpoints in %s are for other params or data; training starts fresh", ckpt_dir)
    if rank_zero_only.rank == 0:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        ckpt_dir.mkdir(parents=True)
        (ckpt_dir / "fingerprint").write_text(run_fingerprint + "\n")
    return None
