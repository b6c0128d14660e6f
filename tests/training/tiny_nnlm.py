"""A tiny NNLM on random token streams, for the tests of the training loop (test_training.py)
and of its progress lines (test_progress.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

from nlpzoo.data.lm import ContextWindows, collate_batched
from nlpzoo.data.vocab import EOS
from nlpzoo.params import TrainerConfig

V = 17  # the vocabulary
N1 = 2  # context size of the tiny models
BATCH = 16


def stream(seed: int, n: int) -> np.ndarray:
    """`n` random ids in [4, V), every 7th an end of sentence."""
    s = np.random.default_rng(seed).integers(4, V, size=n)
    s[::7] = EOS
    return s


def loader(tokens: np.ndarray, shuffle: bool, batch_size: int = BATCH) -> DataLoader:
    """The context windows of `tokens` in batches."""
    return DataLoader(
        ContextWindows(tokens, N1),
        batch_size=batch_size,
        shuffle=shuffle,
        collate_fn=collate_batched,
    )


def tiny_config(**kw) -> dict:
    """The tiny NNLM's config, `kw` over it."""
    cfg = {"context_size": N1, "emb_dim": 4, "hidden_dim": 6, "batch_size": BATCH, "lr": 1e-2}
    cfg.update(kw)
    return cfg


def trainer_config(**kw) -> TrainerConfig:
    """2 epochs on the CPU, a log line every step, no early stopping; `kw` over it."""
    base = {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": 2,
        "early_stopping_patience": 0,
        "log_every_n_steps": 1,
    }
    base.update(kw)
    return TrainerConfig(**base)


def read_curve(path: Path) -> tuple[list[str], list[dict]]:
    """A learning curve's CSV: (its columns, its rows)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)
