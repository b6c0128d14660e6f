"""Callbacks of every neural run: a non-finite loss stops it, the learning curve, progress lines."""

from __future__ import annotations

import csv
import logging
import math
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Timer

from nlpzoo.curves import CURVE_FIELDS
from nlpzoo.errors import TrainingError

log = logging.getLogger("nlpzoo.training")  # the package's one logger


class NonFiniteLoss(pl.Callback):
    """Stop at once, naming run, step and a hint, when the training loss is NaN or infinite."""

    def __init__(self, run: str) -> None:
        self.run = run

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not torch.isfinite(loss).all():
            lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")
            empty = _empty_sources(pl_module, batch)
            hint = (
                f"the batch holds {empty} pair(s) with an empty source (nothing to attend to); "
                "remove them from the training data (prepare drops empty lines of a parallel "
                "corpus)"
                if empty
                else f"hint: lower the learning rate (lr={lr:g}) or set trainer.gradient_clip_val"
            )
            raise TrainingError(
                f"run '{self.run}': training loss is {loss.item()} at step {trainer.global_step} "
                f"(epoch {trainer.current_epoch}, batch {batch_idx}); {hint}"
            )


def _empty_sources(pl_module: Any, batch: Any) -> int:
    """Rows of a translation batch (src, tgt_in, labels) whose source is all padding."""
    if getattr(getattr(pl_module, "family", None), "input", None) != "parallel":
        return 0
    from nlpzoo.data.vocab import PAD

    src = batch[0]
    return int((src == PAD).all(dim=1).sum()) if src.dim() == 2 else 0


class CurveWriter(pl.Callback):
    """Per-epoch learning curve to `plots/RUN.csv` (rewritten each epoch) and to MLflow (rank 0)."""

    FIELDS = CURVE_FIELDS

    def __init__(self, path: Path, tracker: Any = None) -> None:
        self.path = Path(path)
        self.tracker = tracker
        self.rows: list[dict] = []
        self.t0 = time.time()
        self._seconds_before = 0.0  # of the run before a resume

    def on_train_start(self, trainer, pl_module) -> None:
        self.t0 = time.time() - self._seconds_before

    def state_dict(self) -> dict:  # a resumed run keeps the earlier epochs' rows and clock
        return {"rows": self.rows, "seconds": time.time() - self.t0}

    def load_state_dict(self, state: dict) -> None:
        self.rows = [dict(r) for r in state["rows"]]
        self._seconds_before = float(state["seconds"])

    def on_validation_end(self, trainer, pl_module) -> None:
        # not on_validation_epoch_end: Lightning runs callback hooks before the module's, so
        # val/loss and val/ppl (logged in FamilyModule.on_validation_epoch_end) exist only now
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        m = trainer.callback_metrics
        row = {
            "epoch": trainer.current_epoch,
            "step": trainer.global_step,
            "train_loss": float(m["train/loss_epoch"]) if "train/loss_epoch" in m else math.nan,
            "val_loss": float(m["val/loss"]),
            "val_ppl": float(m["val/ppl"]),
            "seconds": round(time.time() - self.t0, 2),
        }
        self.rows.append(row)
        self.write()
        if self.tracker is not None:
            self.tracker.log_metrics(
                {"val/loss": row["val_loss"], "val/ppl": row["val_ppl"], "epoch": row["epoch"]},
                step=row["step"],
            )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        every = max(trainer.log_every_n_steps, 1)
        if self.tracker is not None and trainer.is_global_zero and trainer.global_step % every == 0:
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            self.tracker.log_metrics({"train/loss": float(loss)}, step=trainer.global_step)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        # the epoch's mean training loss is known only now: complete this epoch's row (or add
        # one, for families without a validation split)
        if not trainer.is_global_zero or "train/loss_epoch" not in trainer.callback_metrics:
            return
        loss = float(trainer.callback_metrics["train/loss_epoch"])
        if self.rows and self.rows[-1]["epoch"] == trainer.current_epoch:
            self.rows[-1]["train_loss"] = loss
        else:
            self.rows.append(
                {
                    "epoch": trainer.current_epoch,
                    "step": trainer.global_step,
                    "train_loss": loss,
                    "val_loss": math.nan,
                    "val_ppl": math.nan,
                    "seconds": round(time.time() - self.t0, 2),
                }
            )
            if self.tracker is not None:
                self.tracker.log_metrics({"train/loss_epoch": loss}, step=trainer.global_step)
        self.write()

    def on_fit_end(self, trainer, pl_module) -> None:
        # a run resumed from its last checkpoint trains nothing and calls no hook above: its
        # curve (restored from the checkpoint) is written here
        if trainer.is_global_zero and self.rows:
            self.write()

    def write(self) -> None:
        from nlpzoo.io import atomic_open

        with atomic_open(self.path) as f:
            w = csv.DictWriter(f, fieldnames=self.FIELDS)
            w.writeheader()
            w.writerows(self.rows)


# what one prediction of a task is, for the throughput in the progress lines
UNITS = {"lm": "tok", "mt": "tok"}


def hms(seconds: float) -> str:
    """A duration as H:MM:SS (hours unbounded): the one format of every ETA."""
    s = max(round(seconds), 0)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress(pl.Callback):
    """Plain log lines while training, on rank 0, readable in a `dvc repro` log (no carriage
    returns; Lightning's bar is `trainer.enable_progress_bar`).

    One line when training starts; one every `every_percent` % of an epoch and/or every
    `every_seconds` seconds (0 turns either off): epoch, position in the epoch, optimizer step,
    the epoch's running mean training loss (weighted by predictions, as `train/loss_epoch`),
    throughput in predictions per second over all ranks (tokens for language models and
    translation) since the previous line, and the ETAs of the epoch and of the run (the remaining
    batches at this epoch's pace, plus the remaining validations at the last one's duration;
    at most what `trainer.max_time` leaves); and one line per validation (val loss, val ppl,
    its duration). `clock` is a monotonic clock in seconds (a test passes a fake one).
    """

    def __init__(
        self,
        run: str,
        every_percent: float = 10.0,
        every_seconds: float = 60.0,
        clock: Any = time.monotonic,
    ) -> None:
        self.run = run
        self.every_percent, self.every_seconds = every_percent, every_seconds
        self.clock = clock
        self._val_seconds = 0.0  # the last validation's duration
        self._val_t0 = 0.0
        self._reset(None)

    def _reset(self, pl_module: Any) -> None:
        """A new epoch (or a run resumed inside one) starts now."""
        self._epoch_t0 = self._last_t = self.clock()
        self._batches = self._last_batches = 0  # batches of the epoch run by this process
        self._count = self._last_count = getattr(pl_module, "predictions", 0)
        self._loss_sum: Any = 0.0  # Σ loss x predictions over the epoch (a tensor: no sync)
        self._loss_n = 0
        self._mark = 1  # the next percent mark of the epoch

    @staticmethod
    def _unit(pl_module: Any) -> str:
        if not hasattr(pl_module, "predictions"):
            return "batch"
        return UNITS.get(getattr(getattr(pl_module, "family", None), "task", None), "pred")

    def on_train_start(self, trainer, pl_module) -> None:
        self._reset(pl_module)  # after a resume, `predictions` holds the earlier ones
        if not trainer.is_global_zero:
            return
        batches, steps = trainer.num_training_batches, trainer.estimated_stepping_batches
        log.info(
            "%s: training %d epoch(s) of %s batches%s on %d process(es)%s",
            self.run,
            trainer.max_epochs,
            int(batches) if math.isfinite(batches) else "?",
            f", {int(steps)} optimizer steps" if math.isfinite(steps) else "",
            trainer.world_size,
            f", resumed at step {trainer.global_step}" if trainer.global_step else "",
        )

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._reset(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.is_global_zero:
            return
        self._batches += 1
        count = getattr(pl_module, "predictions", 0)
        n, self._count = count - self._count, count
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and n > 0:
            self._loss_sum = self._loss_sum + loss.detach().double() * n
            self._loss_n += n
        now = self.clock()
        done, total = batch_idx + 1, trainer.num_training_batches
        due = bool(self.every_seconds) and now - self._last_t >= self.every_seconds
        if self.every_percent and math.isfinite(total) and total > 0:
            # every mark passed since the last line (a resumed epoch starts past some)
            while done >= math.ceil(self._mark * self.every_percent / 100 * total - 1e-9):
                self._mark += 1
                due = True
        if due:
            self._line(trainer, pl_module, done, total, now)

    def _line(self, trainer, pl_module, done: int, total: float, now: float) -> None:
        where = f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}"
        if math.isfinite(total):
            where += f" {100 * done / max(total, 1):.0f}% (batch {done}/{int(total)})"
        steps = trainer.estimated_stepping_batches
        step = f"step {trainer.global_step}" + (f"/{int(steps)}" if math.isfinite(steps) else "")
        loss = float(self._loss_sum) / self._loss_n if self._loss_n else math.nan
        seconds = max(now - self._last_t, 1e-9)
        unit = self._unit(pl_module)
        if unit == "batch":
            rate = (self._batches - self._last_batches) / seconds
        else:
            rate = (self._count - self._last_count) * max(trainer.world_size, 1) / seconds
        self._last_t, self._last_count, self._last_batches = now, self._count, self._batches
        eta_epoch, eta_run = self._eta(trainer, done, total, now)
        log.info(
            "%s: %s, %s, train loss %.4f, %s %s/s, ETA epoch %s, run %s",
            self.run,
            where,
            step,
            loss,
            f"{rate:,.0f}",
            unit,
            eta_epoch,
            eta_run,
        )

    def _eta(self, trainer, done: int, total: float, now: float) -> tuple[str, str]:
        if not math.isfinite(total):
            return "?", "?"
        per_batch = (now - self._epoch_t0) / max(self._batches, 1)
        left = max(int(total) - done, 0)  # in this epoch
        later = max(trainer.max_epochs - trainer.current_epoch - 1, 0) * int(total)
        if trainer.max_steps is not None and trainer.max_steps > 0:
            steps_left = max(trainer.max_steps - trainer.global_step, 0)
            later = min(later, max(steps_left * trainer.accumulate_grad_batches - left, 0))
        validations = 1 + math.ceil(later / max(total, 1))  # this epoch's and the later ones
        run_eta = (left + later) * per_batch + validations * self._val_seconds
        timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        remaining = timer.time_remaining() if timer is not None else None
        if remaining is not None:
            run_eta = min(run_eta, max(remaining, 0.0))
        return hms(left * per_batch), hms(run_eta)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val_t0 = self.clock()

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self._val_seconds = self.clock() - self._val_t0
        m = trainer.callback_metrics
        if "val/loss" not in m:
            return
        log.info(
            "%s: validation after epoch %d/%d, step %d: val loss %.4f, val ppl %.3f (%s)",
            self.run,
            trainer.current_epoch + 1,
            trainer.max_epochs,
            trainer.global_step,
            float(m["val/loss"]),
            float(m["val/ppl"]),
            hms(self._val_seconds),
        )
