"""The training loss of a translation family against the formula that forms every logit: a padded
batch, and the check that the training path gives the same loss and the same gradient of every
parameter while its output layer runs at the labelled positions alone."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from nlpzoo.data.mt import IGNORE, collate

V = 40


def padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Six pairs of different lengths on both sides: every row but the longest is padded."""
    rng = np.random.default_rng(0)
    lengths = [(1, 7), (6, 1), (3, 4), (8, 2), (2, 6), (5, 5)]
    pairs = [(rng.integers(5, V, n), rng.integers(5, V, m)) for n, m in lengths]
    return collate(pairs)


def masked_mean_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    """The formula the families trained with: logits at every position (..., V), the mean
    label-smoothed cross-entropy over the positions whose label is not −100."""
    return F.cross_entropy(
        logits.flatten(0, -2), labels.flatten(), ignore_index=IGNORE, label_smoothing=smoothing
    )


def _grads(model: torch.nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    pairs = zip(named, grads, strict=True)
    return {k: torch.zeros_like(p) if g is None else g for (k, p), g in pairs}


def assert_same_loss_and_gradients(
    model: torch.nn.Module,
    reference: Callable[..., torch.Tensor],
    full_rows: int,
    saved_per_row: int,
) -> None:
    """`model` in training mode (dropout off) on `padded_batch()` gives None for logits and the
    loss and parameter gradients of `reference(model, src, tgt_in, labels)` (the output layer at
    every one of `full_rows` positions) in fp32, to rounding; and its forward pass costs exactly
    the output layer's `saved_per_row` multiply-adds less at each unlabelled position."""
    torch.manual_seed(0)
    model.train()
    src, tgt_in, labels = padded_batch()
    real = int((labels != IGNORE).sum())
    assert real < full_rows  # there is padding (and, for decoder_mt, a prompt) to skip
    with FlopCounterMode(display=False) as new_flops:
        logits, loss = model(src, tgt_in, labels)
    assert logits is None  # training forms no (B, T, V) logits
    with FlopCounterMode(display=False) as old_flops:
        expected = reference(model, src, tgt_in, labels)
    # a mean over every position, padding included, would be a different number
    assert not torch.allclose(expected * real / full_rows, expected)
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    got, want = _grads(model, loss), _grads(model, expected)
    assert got.keys() == want.keys()
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    assert any(bool(g.abs().sum() > 0) for g in want.values())
    saved = old_flops.get_total_flops() - new_flops.get_total_flops()
    assert saved == 2 * (full_rows - real) * saved_per_row  # 2 FLOPs per multiply-add
