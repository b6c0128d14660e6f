"""Callbacks that interrupt a training run and record where a fit starts, and a training run that
takes them, for the resume tests."""

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


def train_with_callbacks(monkeypatch, params: dict, run: str, root, callbacks, *patches) -> dict:
    """`lifecycle.train` of `run` with `callbacks` placed ahead of the trainer's own (so the resume
    checkpoint saves after them) and MLflow off; `patches` are (object, name, value) set for the
    run only. Returns the weights of the saved model.pt."""
    import torch

    from nlpzoo import lifecycle, training
    from nlpzoo.tracking import Tracker

    make = training.make_trainer

    def with_callbacks(*args, **kwargs):
        trainer = make(*args, **kwargs)
        trainer.callbacks[:0] = list(callbacks)
        return trainer

    with monkeypatch.context() as m:
        m.setattr(
            Tracker, "start", classmethod(lambda cls, run, *a, **k: cls(None, None, "-", run))
        )
        m.setattr(training, "make_trainer", with_callbacks)
        for obj, name, value in patches:
            m.setattr(obj, name, value)
        lifecycle.train(params, run, root)
    model = root / "models" / run / "model.pt"
    return torch.load(model, weights_only=True)["state_dict"]
