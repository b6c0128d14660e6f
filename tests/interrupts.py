"""Callbacks that interrupt a training run and record where a fit starts, for the resume tests."""

from __future__ import annotations

import pytorch_lightning as pl


class KillAt(pl.Callback):
    """Interrupts the run as a Ctrl-C would, right after optimizer step `at_step`."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.at_step:
            raise KeyboardInterrupt(f"simulated kill at step {self.at_step}")


class FirstChunk(pl.Callback):
    """Records (global step, chunk) of the first batch of each fit (the kernels' chunk loaders)."""

    def __init__(self, starts: list) -> None:
        self.starts, self.first = starts, True

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.first:
            self.starts.append((trainer.global_step, batch["chunk"]))
            self.first = False
