"""Test-only entry points of word2vec's kernel: explicit pairs with explicit noise words
(`fixed_pairs`, through the same per-pair step as `train_range`), and a one-thread run that
returns what the kernel drew (`record_tokens`, the kernel's record mode)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from nlpzoo.models.word2vec_kernel import _FAST, MAX_EXP, _output
from nlpzoo.models.word2vec_threads import Tables, _train_range, splitmix64


# not cached: numba's cache would not see a change of `_output` in the kernel's file
@njit(nogil=True, fastmath=_FAST)
def train_pairs(syn0, syn1, inputs, targets, noise, alphas, cbow, hs, points, codes, lengths,
                max_exp):  # fmt: skip
    """Trains on explicit pairs, in order, with the same per-pair step as `train_range`.

    Row r: inputs[r] the context ids (−1: none; CBOW averages the present ones, skip-gram makes
    one pair of each, left to right), targets[r] the centre, noise[0, r] its noise words
    (negative sampling; (1, R, 0) for hierarchical softmax), alphas[r] the rate. Returns the
    loss sum."""
    d = syn0.shape[1]
    neu1 = np.zeros((1, d), np.float32)
    neu1e = np.zeros(d, np.float32)
    loss = 0.0
    for r in range(targets.shape[0]):
        centre = targets[r]
        alpha = alphas[r]
        if cbow:
            cw = 0
            for c in range(d):
                neu1[0, c] = 0.0
                neu1e[c] = 0.0
            for s in range(inputs.shape[1]):
                if inputs[r, s] >= 0:
                    cw += 1
                    for c in range(d):
                        neu1[0, c] += syn0[inputs[r, s], c]
            if cw == 0:
                continue
            inv = np.float32(1.0 / cw)
            for c in range(d):
                neu1[0, c] *= inv
            loss += _output(
                neu1, 0, centre, neu1e, syn1, hs, points, codes, lengths, noise, 0, r, alpha,
                max_exp,
            )  # fmt: skip
            for s in range(inputs.shape[1]):
                if inputs[r, s] >= 0:
                    for c in range(d):
                        syn0[inputs[r, s], c] += neu1e[c]
        else:
            for s in range(inputs.shape[1]):
                ctx = inputs[r, s]
                if ctx < 0:
                    continue
                for c in range(d):
                    neu1e[c] = 0.0
                loss += _output(
                    syn0, ctx, centre, neu1e, syn1, hs, points, codes, lengths, noise, 0, r,
                    alpha, max_exp,
                )  # fmt: skip
                for c in range(d):
                    syn0[ctx, c] += neu1e[c]
    return loss


def record_tokens(
    tokens: np.ndarray,
    syn0: np.ndarray,
    syn1: np.ndarray,
    tables: Tables,
    alpha_start: float,
    alpha_end: float,
    min_alpha: float,
    seed: int,
    max_exp: float = MAX_EXP,
    pairs: bool = True,
) -> dict:
    """`train_tokens` with one thread in record mode: trains exactly the same, and returns what
    the kernel drew: inputs (R, 2·window), targets (R,), noise (R, negative), alpha (R,) per
    pair (CBOW: per centre; R = 0 unless `pairs`), kept (V,) tokens kept per word, loss and
    pairs."""
    tokens = np.ascontiguousarray(tokens)
    per_token = 1 if tables.cbow else 2 * tables.window
    rows = max(len(tokens) * per_token, 1) if pairs else 0
    inputs = np.full((rows, 2 * tables.window), -1, np.int64)
    targets = np.zeros(rows, np.int64)
    noise = np.zeros((rows, max(tables.negative, 1)), np.int64)
    alpha = np.zeros(rows, np.float64)
    kept = np.zeros(len(tables.p_keep), np.int64)
    loss, n_pairs, n, _ = _train_range(
        tokens, 0, len(tokens), syn0, syn1, tables, alpha_start, alpha_end, min_alpha, max_exp,
        splitmix64(int(seed)), (inputs, targets, noise, alpha, kept),
    )  # fmt: skip
    return {
        "inputs": inputs[:n],
        "targets": targets[:n],
        "noise": noise[:n, : tables.negative] if not tables.hs else noise[:n, :0],
        "alpha": alpha[:n],
        "kept": kept,
        "loss": float(loss),
        "pairs": int(n_pairs),
    }


def fixed_pairs(
    syn0: np.ndarray,
    syn1: np.ndarray,
    tables: Tables,
    inputs: np.ndarray,
    targets: np.ndarray,
    noise: np.ndarray | None,
    alphas: Sequence[float] | np.ndarray,
    max_exp: float = MAX_EXP,
) -> float:
    """`train_pairs` for these tables: explicit pairs with explicit noise words; the loss sum."""
    inputs = np.ascontiguousarray(inputs, dtype=np.int64)
    targets = np.ascontiguousarray(targets, dtype=np.int64)
    if noise is None:
        noise = np.zeros((len(targets), 0), np.int64)
    hs_noise = np.zeros((1, len(targets), 0), np.int64)
    return float(
        train_pairs(
            syn0,
            syn1,
            inputs,
            targets,
            np.ascontiguousarray(noise, dtype=np.int64)[None] if not tables.hs else hs_noise,
            np.ascontiguousarray(alphas, dtype=np.float64),
            tables.cbow,
            tables.hs,
            tables.points,
            tables.codes,
            tables.lengths,
            float(max_exp),
        )
    )
