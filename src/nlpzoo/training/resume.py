"""What resuming an interrupted run needs (docs/design.md §8): the RNG states, the resume
checkpoint callback, the run's fingerprint and the choice between resuming and a fresh start."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import signal
import threading
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

    During the fit, SIGINT (Ctrl-C) and SIGTERM stop the run at the next optimizer step's end:
    the checkpoint of that step is written as the periodic one is (same hook, same writer, the
    loader's position within the epoch included), then the run raises KeyboardInterrupt
    (Lightning exits with status 1) or SIGTERMException (the stage exits with 143). A signal
    that comes during the epoch's last batch, its validation or the epoch-end hooks is taken
    at the epoch end, with the epoch-end checkpoint. A second signal of the same kind acts at
    once, as it would without this callback (the last checkpoint written stays). With several
    processes, the ranks agree after every step whether any got a signal, and save together.
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
        self._signal: int | None = None  # SIGINT or SIGTERM received, not yet acted on
        self._handlers: dict[int, Any] = {}  # the handlers replaced while fitting

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

    @property
    def path(self) -> Path:
        return self.dirpath / self.FILE

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_time = time.monotonic()
        self._last_step = trainer.global_step
        if self.stopped:  # every rank loaded the same checkpoint: all stop
            log.info("the checkpoint resumed from ends the training: nothing left to train")
            trainer.should_stop = True
        self._catch_signals()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step:  # no optimizer step yet (gradient accumulation)
            return
        received = self._received(trainer)
        if received is not None and not _last_batch(trainer):
            self._last_step = step
            self._stop(trainer, received)
        due = bool(self.every_steps) and step % self.every_steps == 0
        if self.every_minutes:
            late = time.monotonic() - self._last_time >= 60 * self.every_minutes
            due = due or bool(trainer.strategy.broadcast(late))  # every rank must agree
        self._last_step = step
        if due:
            self.save(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.save(trainer)
        received = self._received(trainer)
        if received is not None:
            self._stop(trainer, received, save=False)

    def save(self, trainer: pl.Trainer) -> None:
        trainer.save_checkpoint(self.path)  # every rank takes part; rank 0 writes
        self._last_time = time.monotonic()

    # ------------------------------------------------------------- SIGINT and SIGTERM

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def _catch_signals(self) -> None:
        """While fitting, SIGINT and SIGTERM only note that the run must stop (taken after the
        step in flight); Python lets only the main thread set handlers."""
        self._signal = None
        if threading.current_thread() is not threading.main_thread() or self._handlers:
            return
        for signum in self.SIGNALS:
            self._handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._signal is None:
            log.warning(
                "%s: stopping after the step in flight, with a resume checkpoint (%s again to "
                "stop at once)",
                signal.Signals(signum).name,
                "Ctrl-C" if signum == signal.SIGINT else "SIGTERM",
            )
        self._signal = max(self._signal or 0, signum)  # SIGTERM's status wins over Ctrl-C's
        self._release(signum)  # the same signal again: what it did before the fit

    def _release(self, *signums: int) -> None:
        """Put back the handlers replaced for `signums` (all of them when none named)."""
        for signum in signums or list(self._handlers):
            if signum not in self._handlers:
                continue
            handler = self._handlers.pop(signum)  # None: not set from Python
            if signal.getsignal(signum) == self._on_signal:  # not replaced since (Lightning
                # ignores SIGINT while it shuts down after a KeyboardInterrupt)
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def _received(self, trainer: pl.Trainer) -> int | None:
        """The signal this process, or with several processes any of them, received."""
        received = self._signal
        if trainer.world_size > 1:  # every rank must save and stop at the same step
            code = torch.tensor(float(received or 0), device=trainer.strategy.root_device)
            received = int(trainer.strategy.reduce(code, reduce_op="max").item()) or None
        return received

    def _stop(self, trainer: pl.Trainer, signum: int, save: bool = True) -> None:
        """Write the checkpoint of the last completed step and end the fit as `signum` asks."""
        from pytorch_lightning.utilities import rank_zero_only
        from pytorch_lightning.utilities.exceptions import SIGTERMException

        if save:
            self.save(trainer)
        self._release()
        self._signal = None
        if rank_zero_only.rank == 0:
            log.warning(
                "interrupted after step %d: saved %s; rerun the stage to resume from there",
                trainer.global_step,
                self.path,
            )
        if signum == signal.SIGTERM:
            raise SIGTERMException
        raise KeyboardInterrupt(f"interrupted after step {trainer.global_step}")

    def on_train_end(self, trainer, pl_module) -> None:
        trainer.callback_metrics[self.METRIC] = torch.tensor(
            self.seconds_before, dtype=torch.float64
        )
        received = self._received(trainer)
        if received is not None:  # came after the last epoch end: its checkpoint is the last
            self._stop(trainer, received)
        self._release()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._release()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._release()


def _last_batch(trainer: pl.Trainer) -> bool:
    """Whether the batch just trained is the epoch's last (validation and the epoch-end
    checkpoint follow)."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    return bool(progress.is_last_batch) or progress.current.ready >= trainer.num_training_batches


def fingerprint(settings: dict, arrays: list[np.ndarray]) -> str:
    """SHA-256 of a run's settings (JSON) and its data (the token streams' bytes)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8).data)
    return h.hexdigest()


# the one line naming where a set went
_KEPT = "%s: the checkpoints of its earlier settings moved to %s/%s/%s (see fingerprint.json there)"
STALE = "stale"  # checkpoints/RUN/stale/<fingerprint[:12]>/: sets written for other settings
KEEP_STALE = 3  # the newest sets kept there


def prepare_resume(
    ckpt_dir: Path,
    run_fingerprint: str,
    parts: dict | None = None,
    check: Callable[[dict], Any] | None = None,
    abandon: Callable[[], Any] | None = None,
    fresh: str | None = None,
) -> Path | None:
    """The checkpoint to resume from, or None to start fresh.

    `ckpt_dir/fingerprint` records what the checkpoints belong to: the hash of the run's params,
    data, code and versions; `ckpt_dir/fingerprint.json` keeps `parts` (the params, the code
    files' hashes, the versions) to name what changed. A checkpoint is used only if it matches,
    loads (`weights_only=True`) and passes `check` (e.g. its weights fit the model).

    Checkpoints of another fingerprint are moved aside, not deleted: to
    `ckpt_dir/stale/<fingerprint[:12]>/` (their fingerprint.json beside them says what they were
    trained with), the newest `KEEP_STALE` sets kept; one log line says what changed and where
    they went. When the run's fingerprint is that of a set kept there (a change reverted), the
    set is moved back and resumed. A checkpoint that does not load is removed, as are all of
    them when `fresh` (the reason, logged) asks for a fresh start. `abandon` is called (rank 0:
    end the interrupted run's MLflow run) when the checkpoints of an earlier run are not
    resumed. Only rank 0 changes the folder.
    """
    from pytorch_lightning.utilities import rank_zero_only

    ckpt_dir = Path(ckpt_dir)
    where = f"{ckpt_dir.parent.name}/{ckpt_dir.name}"
    path = ckpt_dir / ResumeCheckpoint.FILE
    stamp = ckpt_dir / "fingerprint"
    rank0 = rank_zero_only.rank == 0
    if rank0 and fresh is None and _stamp(ckpt_dir) != run_fingerprint:
        _restore_stale(ckpt_dir, run_fingerprint, where, abandon)
    matches = _stamp(ckpt_dir) == run_fingerprint
    if fresh is not None and matches:
        log.warning("%s: %s; training from the start", where, fresh)
    elif matches and path.is_file():
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
    elif stamp.is_file() and not matches:
        reason, kept = _what_changed(ckpt_dir, parts), None
        if rank0:
            if abandon is not None:
                abandon()
            abandon = None
            kept = _set_aside(ckpt_dir)
        log.warning("%s: %s; training from the start", where, reason)
        if rank0 and kept is not None:
            log.warning(_KEPT, where, where, STALE, kept.name)
    if rank0:
        if stamp.is_file() and abandon is not None:
            abandon()
        _clear(ckpt_dir)
        if parts is not None:
            (ckpt_dir / "fingerprint.json").write_text(
                json.dumps(parts, sort_keys=True, default=str) + "\n"
            )
        (ckpt_dir / "fingerprint").write_text(run_fingerprint + "\n")
    return None


def _stamp(folder: Path) -> str | None:
    """The fingerprint recorded in `folder`, or None."""
    try:
        return (Path(folder) / "fingerprint").read_text().strip()
    except OSError:
        return None


def _clear(ckpt_dir: Path) -> None:
    """Empty `ckpt_dir` (created if absent), all but the sets kept in `stale/`."""
    stale = ckpt_dir / STALE
    if not stale.is_dir():
        remove_checkpoints(ckpt_dir)  # refuses any path not directly inside checkpoints/
        ckpt_dir.mkdir(parents=True)
        return
    keep = ckpt_dir.parent / f".{ckpt_dir.name}.keep"
    remove_checkpoints(keep)  # a leftover of a kill
    os.replace(stale, keep)
    try:
        remove_checkpoints(ckpt_dir)
    finally:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        os.replace(keep, stale)


def _set_aside(ckpt_dir: Path) -> Path | None:
    """Move the checkpoints of `ckpt_dir` (with their fingerprint, fingerprint.json and MLflow
    run record) to `stale/<fingerprint[:12]>/`; keep the newest `KEEP_STALE` sets there. None
    when the folder held no checkpoint (nothing worth keeping)."""
    fp = _stamp(ckpt_dir)
    files = [p for p in ckpt_dir.iterdir() if p.name != STALE and not p.name.startswith(".")]
    if not fp or not any(p.suffix == ".ckpt" for p in files):
        return None
    dest = ckpt_dir / STALE / fp[:12]
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in files:
        os.replace(f, dest / f.name)
    now = time.time()
    os.utime(dest, (now, now))
    sets = sorted((d for d in dest.parent.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime)
    for old in sets[:-KEEP_STALE]:
        shutil.rmtree(old, ignore_errors=True)
    return dest


def _restore_stale(
    ckpt_dir: Path, run_fingerprint: str, where: str, abandon: Callable[[], Any] | None
) -> None:
    """Move back the set kept in `stale/` for `run_fingerprint`, if any; what `ckpt_dir` held
    goes aside in its place."""
    kept = ckpt_dir / STALE / run_fingerprint[:12]
    if _stamp(kept) != run_fingerprint:
        return
    restoring = ckpt_dir / ".restoring"  # out of stale/ first: it is not trimmed away
    if restoring.exists():
        shutil.rmtree(restoring)
    os.replace(kept, restoring)
    if _stamp(ckpt_dir) is not None:
        if abandon is not None:
            abandon()
        aside = _set_aside(ckpt_dir)
        if aside is not None:
            log.warning(_KEPT, where, where, STALE, aside.name)
    for f in ckpt_dir.iterdir():
        if f.name not in (STALE, restoring.name):
            f.unlink() if f.is_file() else shutil.rmtree(f)
    for f in restoring.iterdir():
        os.replace(f, ckpt_dir / f.name)
    restoring.rmdir()
    log.info("%s: checkpoints of these settings restored from %s/%s", where, STALE, kept.name)


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
    if before.get("params") == _plain(parts.get("params")) and before.get("data") != parts.get(
        "data"
    ):
        return "written for other data"
    return "written for other params or data"


def _plain(tree: Any) -> Any:
    """`tree` as it reads back from fingerprint.json."""
    return json.loads(json.dumps(tree, sort_keys=True, default=str))
