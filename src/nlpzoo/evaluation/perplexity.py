"""Perplexity as docs/design.md §4: exp(mean NLL per token) over every token of a split's stream,
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
        lp = model.token_log_probs(ctx.to(device), tgt.to(device))
        out[start : start + len(tgt)] = lp.double().cpu().numpy()
    return out


def _shifted(stream: np.ndarray) -> torch.Tensor:
    """[</s>] + stream: position i is the input that predicts stream[i] (so every token is scored,
    the first one from a sentence end, as if a previous sentence had just finished)."""
    from nlpzoo.data.vocab import EOS

    return torch.cat([torch.tensor([EOS]), torch.as_tensor(np.asarray(stream, dtype=np.int64))])


@torch.no_grad()
def recurrent_log_probs(model, stream: np.ndarray, chunk: int = 256) -> np.ndarray:
    """log p(w_t | all previous tokens) for a stateful model: one pass over the whole stream,
    state carried from chunk to chunk (batch of one, so no token loses its history)."""
    x = _shifted(stream)
    n = len(stream)
    out = np.empty(n, dtype=np.float64)
    device = next(model.parameters()).device
    state = None
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        inputs = x[start:end][None].to(device)  # (1, T)
        targets = x[start + 1 : end + 1][None].to(device)  # (1, T)
        lp, state = model.token_log_probs(inputs, targets, state)
        out[start:end] = lp[0].double().cpu().numpy()
    return out


@torch.no_grad()
def sliding_log_probs(
    model, stream: np.ndarray, block_size: int, stride: int | None = None, batch_size: int = 16
) -> np.ndarray:
    """log p(w_t | up to `block_size` previous tokens) for a fixed-context model (Transformer).

    Windows of `block_size` inputs advance by `stride` (default block_size / 2); each window scores
    only its last `stride` positions, so every token is scored exactly once and, except in the
    first window, with at least block_size - stride tokens of context.
    """
    stride = stride or max(block_size // 2, 1)
    x = _shifted(stream)
    n = len(stream)
    out = np.empty(n, dtype=np.float64)
    device = next(model.parameters()).device
    ends = [*range(min(block_size, n), n, stride), n]
    # the first window scores everything up to its end; later ones their last `stride` or fewer
    spans = [(max(0, e - block_size), e, 0 if i == 0 else ends[i - 1]) for i, e in enumerate(ends)]
    full = [s for s in spans if s[1] - s[0] == block_size]
    short = [s for s in spans if s[1] - s[0] != block_size]
    for group in [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [
        [s] for s in short
    ]:
        inputs = torch.stack([x[a:e] for a, e, _ in group]).to(device)  # (b, T)
        targets = torch.stack([x[a + 1 : e + 1] for a, e, _ in group]).to(device)
        start = min(first - a for a, _, first in group)  # no window scores a position before
        lp = model.token_log_probs(inputs, targets, start).double().cpu().numpy()  # (b, T - start)
        for row, (a, e, first) in zip(lp, group, strict=True):
            out[first:e] = row[first - a - start :]
    return out


def lm_log_probs(family, model, stream: np.ndarray, cfg) -> np.ndarray:
    """Per-token log-probabilities of a split for any LM family, by its input kind
    (`nlpzoo.lm_inputs`: the routine above that serves it, or a count model's own)."""
    from nlpzoo.lm_inputs import lm_input

    return lm_input(family).log_probs(model, stream, cfg)
