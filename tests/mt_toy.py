"""A copy-and-shift translation task and a few Adam steps on it, for the decoding tests: a model
trained this way gives non-degenerate outputs, whose sentences end at different steps."""

from __future__ import annotations

import numpy as np
import torch

from nlpzoo.data.mt import collate


def copy_and_shift_pairs(
    n: int = 32, lengths: tuple[int, int] = (2, 7), seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n` pairs: a source of ids in [5, 20) with a length drawn from [lengths), and its target,
    each id shifted by one within [5, 20)."""
    rng = np.random.default_rng(seed)
    return [
        (s, (s + 1) % 15 + 5)
        for s in (rng.integers(5, 20, rng.integers(*lengths)) for _ in range(n))
    ]


def train_on(model: torch.nn.Module, pairs, lr: float, steps: int = 30) -> torch.nn.Module:
    """`steps` Adam steps on the whole batch of `pairs`; returns the model in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr)
    for _ in range(steps):
        _, loss = model(*collate(pairs))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()
