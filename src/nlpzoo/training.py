"""Lightning glue shared by every neural family: the module, the optimizer, the Trainer factory,
callbacks, and what resuming needs.

A neural family is a plain `nn.Module` called on a batch, `model(*batch) -> (logits, loss)` (a
recurrent one takes and returns its carried state too). `FamilyModule` wraps any of them: one
`_step` for training and validation, `train/loss`, and over the whole validation split `val/loss`
and `val/ppl` (exact: Σ NLL over every prediction of every rank / their number, from the run's
task, `nlpzoo.tasks`). What differs between families comes from their record
(`nlpzoo.families.Family`): the carried state (`stateful`), the model's own optimizer
(`own_optimizer`), and its own in-place update in one process (`manual_step`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
import random
import shutil
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint, Timer
from pytorch_lightning.plugins import TorchCheckpointIO

from nlpzoo.errors import ConfigError, TrainingError
from nlpzoo.families import FAMILIES
from nlpzoo.params import LIGHTNING_KEYS, TrainerConfig
from nlpzoo.tasks import task_of

log = logging.getLogger(__name__)


def make_optimizer(model: torch.nn.Module, cfg: Any):
    """Adam or SGD, from the family's config, with weight decay on weights only (biases are not
    penalised, as in Bengio 2003).

    Adam takes β₁, β₂ and ε from the config (`adam_beta1`, `adam_beta2`, `adam_eps`). Two keys
    are optional: `warmup_steps` (Vaswani et al.'s warm-up then 1/√step) and `lr_decay` (SGD's
    ε_t = ε_0 / (1 + r t)); a config without them has neither schedule.
    """
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if name.endswith("bias") else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=cfg.lr)
    else:
        # Adam's weight_decay adds λ·θ to the gradient: the L2 penalty of the paper's objective
        betas = (cfg.adam_beta1, cfg.adam_beta2)
        opt = torch.optim.Adam(groups, lr=cfg.lr, betas=betas, eps=cfg.adam_eps)
    settings = asdict(cfg)
    warmup = settings.get("warmup_steps", 0)
    if warmup:
        # Vaswani et al. 2017 §5.3: linear warm-up, then decay with the inverse square root of
        # the step; `lr` is the peak, reached at step `warmup_steps`
        def schedule(t: int) -> float:
            t = t + 1
            return min(t / warmup, (warmup / t) ** 0.5)

        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
    r = settings.get("lr_decay", 0.0)
    if r:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1.0 + r * t))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
    return opt


class FamilyModule(pl.LightningModule):
    """Wraps one family's `nn.Module`; built from plain values so the checkpoint rebuilds it."""

    def __init__(
        self, family: str, config: dict, vocab_size: int, run: str = "", counts: list | None = None
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.family = FAMILIES[family]
        self.task = task_of(self.family)  # what a batch holds and how it is scored
        self.cfg = self.family.config(**config)
        self.model = self.family.model_class()(self.cfg, vocab_size, counts=counts)
        self.run = run
        # predictions trained on by this rank (rank 0: with those before a resume); all ranks'
        # sum is `train/predictions` in the trainer's callback metrics once training ends
        self.predictions = 0
        self._state: Any = None  # a recurrent model's state, carried from batch to batch
        self._train_state: Any = None  # ... put aside while validating
        self._val = torch.zeros(2, dtype=torch.float64)  # Σ NLL, predictions
        self._rng_to_restore: dict | None = None
        self._manual = False
        # the epoch's Σ loss and count (on_train_epoch_start resets them; a run resumed
        # mid-epoch starts without that call)
        self._epoch_loss, self._epoch_count = 0.0, 0

    def forward(self, *args: Any) -> Any:
        return self.model(*args)

    def _forward(self, batch: Any) -> tuple[Any, torch.Tensor]:
        if not self.family.stateful:
            return self.model(*batch)
        if self._state is not None and _state_batch(self._state) != batch[0].shape[0]:
            self._state = None  # a shorter last batch (never with BPTTBlocks)
        logits, loss, state = self.model(*batch, self._state)
        self._state = self.model.detach_state(state)
        return logits, loss

    def setup(self, stage: str) -> None:
        # a family's own in-place update (word2vec's closed-form SGD step, no autograd graph) is
        # its fast path in one process; under DDP the autograd path lets the strategy all-reduce
        self._manual = (
            self.family.manual_step
            and stage == "fit"
            and self.trainer is not None
            and self.trainer.world_size == 1
        )
        self.automatic_optimization = not self._manual
        if self._manual:
            # Lightning checks these against automatic optimization, before this switch, and
            # would ignore them; accumulation would also stretch the rate's decay past the end
            clip, accumulate = self.trainer.gradient_clip_val, self.trainer.accumulate_grad_batches
            if accumulate != 1 or clip:
                key = "accumulate_grad_batches" if accumulate != 1 else "gradient_clip_val"
                raise ConfigError(
                    f"run '{self.run}' (trainer): key '{key}' does not apply to family "
                    f"{self.family.name} in one process (it updates its weights in place, with "
                    "no gradients); remove it, or train with several devices (DDP)"
                )

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self._manual:
            return self._manual_step(batch, batch_idx)
        _, loss = self._forward(batch)
        n = self.task.predictions(batch)
        self.predictions += n
        # sync_dist: the epoch mean is over every rank's predictions (a no-op in one process)
        self.log("train/loss", loss, on_step=True, on_epoch=True, batch_size=n, sync_dist=True)
        return loss

    def _manual_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        # the fraction of the whole run done before this step and after it (the rate's linear
        # decay: word2vec's numba kernel lowers it across its chunk, pair by pair)
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        step = self.trainer.global_step
        loss_sum, n = self.model.manual_step(batch, step / total, (step + 1) / total)
        # no gradients, so this SGD step changes nothing; it advances Lightning's step count
        # (max_steps, checkpoints, curves) as an automatic step would
        self.optimizers().step()
        self.predictions += n
        # the epoch's mean loss, logged once at its last batch: `self.log` every step costs as
        # much as the step itself at word2vec's batch sizes
        self._epoch_loss += loss_sum
        self._epoch_count += n
        if batch_idx + 1 >= self.trainer.num_training_batches:
            mean = torch.tensor(self._epoch_loss / max(self._epoch_count, 1), dtype=torch.float32)
            self.log("train/loss_epoch", mean, on_step=True, on_epoch=False)
        return torch.tensor(loss_sum / max(n, 1))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        logits, loss = self._forward(batch)
        nll, n = self.task.validation_nll(batch, logits, loss)
        step = torch.stack([nll, torch.tensor(float(n), dtype=torch.float64, device=nll.device)])
        self._val = self._val.to(nll.device) + step

    def on_train_epoch_start(self) -> None:
        self._state = None
        self._epoch_loss, self._epoch_count = 0.0, 0

    def on_validation_epoch_start(self) -> None:
        self._train_state, self._state = self._state, None
        self._val = torch.zeros(2, dtype=torch.float64, device=self.device)

    def on_validation_epoch_end(self) -> None:
        self._state = self._train_state  # validation runs inside an epoch
        total = self.trainer.strategy.reduce(self._val, reduce_op="sum")
        nll = (total[0] / total[1].clamp(min=1)).float()
        self.log("val/loss", nll, sync_dist=False, rank_zero_only=False)
        self.log("val/ppl", torch.exp(nll), sync_dist=False, prog_bar=True)

    # ------------------------------------------------------------ resume (docs/design.md §8)
    # Lightning's checkpoint holds weights, optimizer, scheduler, loop counters, callback states
    # and (via ResumableLoader) the data position; these hooks add the RNG states and the hidden
    # state a recurrent model carries between BPTT windows, so a resumed run repeats an
    # uninterrupted one exactly.

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        extra: dict[str, Any] = {"rng": rng_state(), "predictions": self._all_predictions()}
        if self.family.stateful and self._state is not None:
            # every rank carries the state of its own rows: gather all (collective, all ranks)
            parts = self._state if isinstance(self._state, tuple) else (self._state,)
            world = self.trainer.world_size if self._trainer is not None else 1
            gathered = [self.all_gather(t) if world > 1 else t.unsqueeze(0) for t in parts]
            extra["state"] = [t.detach().cpu() for t in gathered]  # each (world, layers, B, H)
            extra["state_is_tuple"] = isinstance(self._state, tuple)
        checkpoint["nlpzoo"] = extra

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        extra = checkpoint.get("nlpzoo", {})
        self._rng_to_restore = extra.get("rng")
        first = self._trainer is None or self.trainer.global_rank == 0
        self.predictions = int(extra.get("predictions", 0)) if first else 0
        if "state" in extra:  # reset again by on_train_epoch_start unless resuming mid-epoch
            rank = self.trainer.global_rank if self._trainer is not None else 0
            parts = tuple(t[rank] for t in extra["state"])
            self._state = parts if extra["state_is_tuple"] else parts[0]

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self._rng_to_restore is not None:  # right before the first step after a resume
            set_rng_state(self._rng_to_restore)
            self._rng_to_restore = None
        if self._state is not None:
            parts = self._state if isinstance(self._state, tuple) else (self._state,)
            moved = tuple(t.to(self.device) for t in parts)
            self._state = moved if isinstance(self._state, tuple) else moved[0]

    def on_train_end(self) -> None:
        # callback metrics travel back to the main process with `ddp_spawn`
        total = torch.tensor(self._all_predictions(), dtype=torch.float64)
        self.trainer.callback_metrics["train/predictions"] = total

    def _all_predictions(self) -> int:
        """Predictions trained on by all ranks (collective: every rank calls it)."""
        if self._trainer is None or self.trainer.world_size == 1:
            return self.predictions
        mine = torch.tensor(float(self.predictions), dtype=torch.float64, device=self.device)
        return int(self.trainer.strategy.reduce(mine, reduce_op="sum"))

    def configure_optimizers(self):
        if self.family.own_optimizer:  # its own rule and schedule (word2vec, GloVe)
            return self.model.configure_optimizers(int(self.trainer.estimated_stepping_batches))
        return make_optimizer(self.model, self.cfg)


def _state_batch(state: Any) -> int:
    h = state[0] if isinstance(state, tuple) else state
    return h.shape[1]  # (layers, B, hidden)


class NonFiniteLoss(pl.Callback):
    """Stop at once, naming run, step and a hint, when the training loss is NaN or infinite."""

    def __init__(self, run: str) -> None:
        self.run = run

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not torch.isfinite(loss).all():
            lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")
            raise TrainingError(
                f"run '{self.run}': training loss is {loss.item()} at step {trainer.global_step} "
                f"(epoch {trainer.current_epoch}, batch {batch_idx}); hint: lower the learning "
                f"rate (lr={lr:g}) or set trainer.gradient_clip_val"
            )


class CurveWriter(pl.Callback):
    """Per-epoch learning curve to `plots/RUN.csv` (rewritten each epoch) and to MLflow (rank 0)."""

    FIELDS = ("epoch", "step", "train_loss", "val_loss", "val_ppl", "seconds")

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


def make_trainer(
    cfg: TrainerConfig,
    run: str,
    plots_path: Path,
    ckpt_dir: Path,
    tracker: Any,
    seed: int,
    validate: bool = True,
) -> pl.Trainer:
    """A Trainer from the `trainer:` section; DDP settings reach Lightning unchanged.

    `validate=False` for families without a held-out objective (word vectors): no early
    stopping, and the last weights are the result.
    """
    from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    # the folder holds the resume fingerprint (and, when resuming, the earlier checkpoints)
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    pl.seed_everything(seed, workers=True, verbose=False)
    callbacks: list[pl.Callback] = [
        NonFiniteLoss(run),
        CurveWriter(plots_path, tracker),
        ModelCheckpoint(
            dirpath=ckpt_dir,
            filename="best",
            monitor="val/ppl" if validate else None,
            mode="min",
            save_top_k=1 if validate else 0,  # 0: saves nothing (the last weights are kept)
            save_last=False,  # resume.ckpt holds the last state already
        ),
        ResumeCheckpoint(ckpt_dir, cfg.checkpoint_every_steps, cfg.checkpoint_every_minutes),
        Progress(run, cfg.progress_every_percent, cfg.progress_every_seconds),
    ]
    if validate and cfg.early_stopping_patience:
        callbacks.append(
            EarlyStopping(monitor="val/ppl", mode="min", patience=cfg.early_stopping_patience)
        )
    kwargs = {k: v for k, v in asdict(cfg).items() if k in LIGHTNING_KEYS}
    return pl.Trainer(
        **kwargs,
        callbacks=callbacks,
        logger=False,  # MLflow is driven by nlpzoo.tracking; Lightning's loggers stay off
        enable_model_summary=False,
        use_distributed_sampler=False,  # nlpzoo.data.lm shards by rank itself (BPTT rows)
        num_sanity_val_steps=0,
        default_root_dir=str(ckpt_dir),
        plugins=[LocalCheckpointIO()],
    )


# --------------------------------------------------------------------------- resume


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


class LocalCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint with `torch.save` straight to a temp file beside it, then renames it
    into place: a kill while writing leaves the previous checkpoint intact. Lightning's own
    writer serialises into memory first and copies through fsspec, which for local files only
    adds time (a third of a word-vector run's time outside its kernel)."""

    def save_checkpoint(self, checkpoint: dict, path: Any, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError("LocalCheckpointIO takes no storage_options")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            torch.save(checkpoint, tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


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
