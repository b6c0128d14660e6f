"""The LightningModule of every neural family and the optimizer built from its config.

A neural family is a plain `nn.Module` called on a batch, `model(*batch) -> (logits, loss)` (a
recurrent one takes and returns its carried state too). `FamilyModule` wraps any of them: one
`_step` for training and validation, `train/loss`, and over the whole validation split `val/loss`
and `val/ppl` (exact: Σ NLL over every prediction of every rank / their number, from the run's
task, `nlpzoo.tasks`). What differs between families comes from their record
(`nlpzoo.families.Family`): the carried state (`stateful`), the model's own optimizer
(`own_optimizer`), and its own in-place update in one process (`manual_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytorch_lightning as pl
import torch

from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from nlpzoo.tasks import task_of
from nlpzoo.training.resume import rng_state, set_rng_state


def make_optimizer(model: torch.nn.Module, cfg: Any, total_steps: int | None = None):
    """Adam or SGD, from the family's config, with weight decay on weights only (biases are not
    penalised, as in Bengio 2003), and the learning-rate schedule the config names.

    Adam takes β₁, β₂ and ε from the config (`adam_beta1`, `adam_beta2`, `adam_eps`). The
    schedule (`schedule`, default `auto`) multiplies `lr` by a factor per optimizer step t:

    - `auto`: with `warmup_steps`, Vaswani et al.'s linear warm-up then 1/√step (`lr` is the
      peak); with `lr_decay`, SGD's ε_t = ε_0 / (1 + r t); with neither, constant.
    - `constant`, `linear`, `cosine`: a linear warm-up over `warmup_steps` (if any), then constant,
      linear decay to 0 at step `total_steps`, or half a cosine to 0 at `total_steps`.
    - `inverse_sqrt`: Vaswani et al.'s schedule, as `auto` with `warmup_steps`.

    `total_steps` (the run's optimizer steps, from the Trainer) is needed by `linear` and `cosine`.
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
    factor = lr_factor(cfg, total_steps)
    if factor is None:
        return opt
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def lr_factor(cfg: Any, total_steps: int | None = None) -> Callable[[int], float] | None:
    """The factor of `lr` at optimizer step t (counted from 0) under the config's schedule, or
    None for a constant rate without warm-up (see `make_optimizer`)."""
    settings = asdict(cfg)
    schedule = settings.get("schedule", "auto")
    warmup = settings.get("warmup_steps", 0)
    r = settings.get("lr_decay", 0.0)
    if schedule == "auto":
        if warmup:
            schedule = "inverse_sqrt"
        elif r:
            return lambda t: 1.0 / (1.0 + r * t)
        else:
            return None
    if schedule == "inverse_sqrt":
        # Vaswani et al. 2017 §5.3: linear warm-up, then decay with the inverse square root of
        # the step; `lr` is the peak, reached at step `warmup_steps`
        return lambda t: min((t + 1) / warmup, (warmup / (t + 1)) ** 0.5)
    if schedule == "constant" and not warmup:
        return None
    if schedule in ("linear", "cosine") and not total_steps:
        raise ValueError(f"schedule {schedule!r} needs the run's total number of steps")
    total = max(int(total_steps or 1), warmup + 1)

    def factor(t: int) -> float:
        if t < warmup:
            return (t + 1) / warmup
        if schedule == "constant":
            return 1.0
        done = min((t - warmup) / (total - warmup), 1.0)  # 0 after warm-up, 1 at the last step
        if schedule == "linear":
            return 1.0 - done
        return 0.5 * (1.0 + math.cos(math.pi * done))

    return factor


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

    @property
    def manual(self) -> bool:
        """Whether this run updates through its family's own in-place step (set at `setup`)."""
        return self._manual

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
        total = None
        if getattr(self.cfg, "schedule", "auto") in (
            "linear",
            "cosine",
        ):  # they end at the last step
            steps = float(self.trainer.estimated_stepping_batches)
            total = int(steps) if math.isfinite(steps) else None
        return make_optimizer(self.model, self.cfg, total)


def _state_batch(state: Any) -> int:
    h = state[0] if isinstance(state, tuple) else state
    return h.shape[1]  # (layers, B, hidden)
