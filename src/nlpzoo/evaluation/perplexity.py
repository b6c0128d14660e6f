"""Perplexity exactly as DESIGN §5: exp(mean NLL per token) over every token of a split's stream,
each sentence's `</s>` and every `<unk>` included, for every family on the identical stream."""

from __future__ import annotations

import math

import numpy as np
import torch


def perplexity(log_probs: np.ndarray) -> float:
    """exp(−mean log p), accumulated in float64."""
    lp = np.asarray(log_probs, dtype=np.float64)
    if lp.size == 0:
        raise ValueError("perplexity of an empty stream")
    return math.exp(-lp.mean())


@torch.no_grad()
def window_log_probs(
    model, stream: np.ndarray, context_size: int, batch_size: int = 2048
) -> np.ndarray:
    """log p(w_t | previous `context_size` tokens) for every t, for fixed-window models."""
    from nlpzoo.data.lm import ContextWindows

    ds = ContextWindows(stream, context_size)
    out = np.empty(len(ds), dtype=np.float64)
    device = next(model.parameters()).device
    for start in range(0, len(ds), batch_size):
        ctx, tgt = ds.__getitems__(list(range(start, min(start + batch_size, len(ds)))))
        lp = model.log_probs(ctx.to(device), tgt.to(device))
        out[start : start + len(tgt)] = lp.double().cpu().numpy()
    return out
