"""Callbacks that interrupt a training run and record where a fit starts, and a training run that
takes them, for the resume tests; and the kill-and-resume check of the compiled kernels."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytorch_lightning as pl

from nlpzoo import lifecycle, training


class KillAt(pl.Callback):
    """Stops the run right after optimizer step `at_step` as a kill that leaves it no time to save
    (SIGKILL, a lost machine, Ctrl-C pressed twice) would: a KeyboardInterrupt raised inside the
    loop, so the rerun resumes from the last periodic checkpoint. `InterruptAt` sends a real
    signal instead."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.at_step:
            raise KeyboardInterrupt(f"simulated kill at step {self.at_step}")


class InterruptAt(pl.Callback):
    """Sends this process `signum` (SIGINT as Ctrl-C does, or SIGTERM) while optimizer step
    `at_step` is in flight (at the start of its batch)."""

    def __init__(self, at_step: int, signum: int = signal.SIGINT) -> None:
        self.at_step, self.signum = at_step, signum

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.at_step - 1:
            os.kill(os.getpid(), self.signum)


class FirstChunk(pl.Callback):
    """Records (global step, chunk) of the first batch of each fit (the kernels' chunk loaders)."""

    def __init__(self, starts: list) -> None:
        self.starts, self.first = starts, True

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.first:
            self.starts.append((trainer.global_step, batch["chunk"]))
            self.first = False


class FirstStep(pl.Callback):
    """Records the step each fit starts from."""

    def __init__(self, starts: list[int]) -> None:
        self.starts = starts

    def on_train_start(self, trainer, pl_module) -> None:
        self.starts.append(trainer.global_step)


def train_with(monkeypatch, params: dict, run: str, root: Path, *extra: pl.Callback) -> dict:
    """`lifecycle.train(params, run, root)` with `extra` callbacks ahead of the trainer's own
    (a `KillAt` interrupts it, a `FirstStep` records where each fit starts); its stats."""
    make = training.make_trainer

    def with_extra(*args, **kwargs):
        trainer = make(*args, **kwargs)
        trainer.callbacks[:0] = list(extra)  # ahead of the checkpoint callbacks
        return trainer

    with monkeypatch.context() as m:
        m.setattr(training, "make_trainer", with_extra)
        return lifecycle.train(params, run, root)


def train_with_callbacks(monkeypatch, params: dict, run: str, root, callbacks, *patches) -> dict:
    """`train_with` of `run` with MLflow off; `patches` are (object, name, value) set for the run
    only. Returns the weights of the saved model.pt."""
    import torch

    from nlpzoo.tracking import Tracker
    from toy import inactive

    with monkeypatch.context() as m:
        m.setattr(Tracker, "start", classmethod(inactive))
        for obj, name, value in patches:
            m.setattr(obj, name, value)
        train_with(m, params, run, root, *callbacks)
    model = root / "models" / run / "model.pt"
    return torch.load(model, weights_only=True)["state_dict"]


def assert_kill_and_resume(
    monkeypatch, tmp_path, make_project, params: dict, run: str, *patches, kill_at: int, resumes_at
):
    """The kill-and-resume check of a run: `run` of `params` trained whole in one project made by
    `make_project(root)`, and in another killed right after step `kill_at` (as a Ctrl-C would),
    which must leave a resume checkpoint, then run again. The second fit must start at
    `resumes_at` (global step, chunk) and end with the very weights of the whole run (one kernel
    thread: a deterministic run). `patches` as in `train_with_callbacks`. Returns the root of the
    interrupted project."""
    import signal

    import pytest
    import torch

    reference = train_with_callbacks(
        monkeypatch, params, run, make_project(tmp_path / "a"), (), *patches
    )
    root = make_project(tmp_path / "b")
    starts: list[tuple[int, int]] = []
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        train_with_callbacks(
            monkeypatch, params, run, root, (KillAt(kill_at), FirstChunk(starts)), *patches
        )
    assert (root / "checkpoints" / run / "resume.ckpt").is_file()
    handler = signal.getsignal(signal.SIGINT)
    try:
        resumed = train_with_callbacks(
            monkeypatch, params, run, root, (FirstChunk(starts),), *patches
        )
    finally:
        signal.signal(signal.SIGINT, handler)  # Lightning ignores SIGINT after an interrupt
    assert starts == [(0, 0), tuple(resumes_at)]  # (global step, chunk) of each fit's first step
    for name, tensor in reference.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0, msg=name)
    return root
