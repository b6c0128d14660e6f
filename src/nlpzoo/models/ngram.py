"""Interpolated modified Kneser-Ney n-gram language model, exact and vectorized (numpy).

Model: Chen & Goodman (1998), "An empirical study of smoothing techniques for language
modeling", Harvard TR-10-98, the interpolated version of modified Kneser-Ney smoothing.

For a history h of k-1 words and its shortened history h' (h without its first word)

    p_KN(w|h) = max(c(hw) − D(c(hw)), 0) / Σ_w' c(hw')  +  γ(h) p_KN(w|h')

    γ(h) = (D1 N1(h•) + D2 N2(h•) + D3+ N3+(h•)) / Σ_w' c(hw')

where
    c(hw)      the count of the k-gram hw: the raw training count at the highest order, and the
               continuation count N1+(•hw) = |{v : c(vhw) > 0}| (number of distinct words seen
               immediately left of hw) at every lower order, the unigram level included;
    D(c)       0 if c = 0, D1 if c = 1, D2 if c = 2, D3+ if c >= 3 (one triple per order);
    Nr(h•)     the number of words w with c(hw) = r (N3+: with c(hw) >= 3).

The discounts of each order come from the count-of-counts n_r of that order's counts (the same
raw or continuation counts the order uses):

    Y = n1 / (n1 + 2 n2),  D1 = 1 − 2Y n2/n1,  D2 = 2 − 3Y n3/n2,  D3+ = 3 − 4Y n4/n3.

Degenerate discounts: a discount whose formula has a zero denominator, or whose value falls
outside the open interval (0, c) of the smallest count it discounts (D1 in (0, 1), D2 in (0, 2),
D3+ in (0, 3)), is replaced by the fallback 0.5, 1.0, 1.5 respectively (KenLM's
`--discount_fallback` defaults) and a warning is logged. Every discount is thus > 0 and
< the count it discounts, so each seen k-gram keeps positive mass and γ(h) > 0.

The recursion ends at the uniform distribution over the predicted vocabulary: p_KN(w|ε) is
interpolated with 1/|W|, W = every id in [0, V) except BOS and PAD (UNK and EOS included).
A history never seen in training (Σ_w c(hw) = 0) backs off fully: γ(h) = 1, first term 0.
BOS and PAD get probability 0; every id in W gets a positive probability; each distribution
sums to 1 exactly up to float rounding.

Data convention: a stream is the concatenation of sentences, each its word ids followed by EOS.
Contexts are sentence-bounded: a sentence's context is left-padded with order-1 BOS, so the
first word of a sentence sees only BOS even though the previous EOS precedes it in the stream.
Every word and every EOS is predicted (training counts every position). With full padding
every lower-order k-gram of a training position has a left extension, so continuation counts
need no special case for BOS. Tokens after the last EOS form an unfinished last sentence.

Implementation: for each order, k-grams and contexts are keyed as int64 (context id * V + word),
context ids are dense (np.unique), counts come from np.unique(return_counts) and lookups use
np.searchsorted, so fitting and scoring loop over orders only, never over tokens or n-grams.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nlpzoo.data.vocab import BOS, EOS, PAD
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.families.ngram import NgramConfig
from nlpzoo.io import atomic_open

logger = logging.getLogger(__name__)

# Used for D1, D2, D3+ when the count-of-counts formula is undefined or out of (0, c).
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
_FORMAT_VERSION = 1
_TABLE_FIELDS = ("keys", "counts", "total", "gamma", "discounts")


Config = NgramConfig  # the `ngram` params section (nlpzoo.families)


def estimate_discounts(counts: np.ndarray) -> np.ndarray:
    """(D1, D2, D3+) from the count-of-counts of `counts` (one order's n-gram counts).

    Chen & Goodman's estimates; a discount that is undefined or outside (0, c) is replaced by
    its entry of FALLBACK_DISCOUNTS (see the module docstring).
    """
    n1, n2, n3, n4 = (int(np.count_nonzero(counts == r)) for r in (1, 2, 3, 4))
    y = n1 / (n1 + 2 * n2) if n1 + 2 * n2 > 0 else None
    # None marks a zero denominator.
    raw = (
        1 - 2 * y * n2 / n1 if y is not None and n1 > 0 else None,
        2 - 3 * y * n3 / n2 if y is not None and n2 > 0 else None,
        3 - 4 * y * n4 / n3 if y is not None and n3 > 0 else None,
    )
    out = np.empty(3, dtype=np.float64)
    replaced = []
    for i, d in enumerate(raw):
        c = i + 1  # smallest count this discount applies to
        if d is not None and 0.0 < d < c:
            out[i] = d
        else:
            out[i] = FALLBACK_DISCOUNTS[i]
            replaced.append(f"{('D1', 'D2', 'D3+')[i]}={'undefined' if d is None else f'{d:.4g}'}")
    if replaced:
        logger.warning(
            "modified KN: discount(s) %s undefined or outside (0, c) (n1..n4 = %d %d %d %d); "
            "using fallback %s",
            ", ".join(replaced),
            n1,
            n2,
            n3,
            n4,
            FALLBACK_DISCOUNTS,
        )
    return out


@dataclass
class _OrderTable:
    """Everything needed to evaluate one order k (history of k-1 words).

    keys:      (G,) sorted int64 k-gram keys, context_id * V + word
    counts:    (G,) int64, raw counts at the highest order, continuation counts below
    total:     (C,) float64, Σ_w c(hw) per context id (C = number of distinct contexts)
    gamma:     (C,) float64, γ(h) per context id
    discounts: (3,) float64, D1, D2, D3+
    """

    keys: np.ndarray
    counts: np.ndarray
    total: np.ndarray
    gamma: np.ndarray
    discounts: np.ndarray


def _check_stream(stream: np.ndarray, vocab_size: int, what: str) -> np.ndarray:
    arr = np.asarray(stream)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{what}: expected a 1-D integer token stream, got {arr.dtype} {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise DataError(f"{what}: token ids must lie in [0, {vocab_size})")
    if np.any((arr == BOS) | (arr == PAD)):
        raise DataError(f"{what}: BOS and PAD must not occur in a token stream")
    return arr


def _sentence_contexts(stream: np.ndarray, width: int) -> np.ndarray:
    """(L, width) int64: column j-1 holds the word j positions back, BOS before sentence start."""
    n = stream.shape[0]
    pos = np.arange(n, dtype=np.int64)
    # A sentence starts right after an EOS; start[t] = first position of t's sentence.
    starts_here = np.zeros(n, dtype=bool)
    starts_here[1:] = stream[:-1] == EOS
    start = np.maximum.accumulate(np.where(starts_here, pos, 0)) if n else pos
    offset = pos - start
    ctx = np.full((n, width), BOS, dtype=np.int64)
    for j in range(1, width + 1):
        inside = offset >= j
        ctx[inside, j - 1] = stream[pos[inside] - j]
    return ctx


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of each key in `sorted_keys` (sorted, unique), -1 where absent."""
    if sorted_keys.size == 0:
        return np.full(keys.shape, -1, dtype=np.int64)
    idx = np.searchsorted(sorted_keys, keys)
    safe = np.minimum(idx, sorted_keys.shape[0] - 1)
    return np.where(sorted_keys[safe] == keys, safe, -1)


class KneserNey:
    """Interpolated modified Kneser-Ney LM over word ids [0, vocab_size)."""

    def __init__(self, config: Config, vocab_size: int) -> None:
        if vocab_size <= max(BOS, EOS, PAD):
            raise ConfigError(f"ngram: vocab_size must exceed the special ids, got {vocab_size}")
        self.config = config
        self.order = config.order
        self.vocab_size = int(vocab_size)
        # Predicted vocabulary W: all ids but BOS and PAD.
        self._predicted = np.ones(self.vocab_size, dtype=bool)
        self._predicted[[BOS, PAD]] = False
        self._num_predicted = int(self._predicted.sum())
        # _context_keys[m-1]: sorted keys (id of the m-1 nearest words) * V + word m back, whose
        # index is the dense id of that length-m history; the empty history has id 0.
        self._context_keys: list[np.ndarray] = []
        # _tables[k-1]: the order-k table (history of k-1 words).
        self._tables: list[_OrderTable] = []

    # ------------------------------------------------------------------ fitting

    def fit(self, stream: np.ndarray) -> KneserNey:
        """Count all orders on a training stream and estimate discounts."""
        stream = _check_stream(stream, self.vocab_size, "ngram fit")
        if stream.size == 0:
            raise DataError("ngram fit: the training stream is empty")
        n, v = self.order, self.vocab_size
        ctx = _sentence_contexts(stream, n - 1)

        # cids[m]: (L,) dense id of each position's history of length m.
        cids = [np.zeros(stream.shape[0], dtype=np.int64)]
        self._context_keys = []
        for m in range(1, n):
            keys, inverse = np.unique(cids[-1] * v + ctx[:, m - 1], return_inverse=True)
            self._context_keys.append(keys)
            cids.append(inverse.reshape(-1).astype(np.int64))

        # gram_keys[k-1]: (L,) key of the k-gram ending at each position.
        gram_keys = [cids[k - 1] * v + stream for k in range(1, n + 1)]
        self._tables = []
        for k in range(1, n + 1):
            if k == n:
                keys, counts = np.unique(gram_keys[k - 1], return_counts=True)
            else:
                # Continuation count of a k-gram = number of distinct (k+1)-grams ending in it;
                # a (k+1)-gram type fixes its k-gram suffix, so take one position per type.
                _, first = np.unique(gram_keys[k], return_index=True)
                keys, counts = np.unique(gram_keys[k - 1][first], return_counts=True)
            num_contexts = 1 if k == 1 else self._context_keys[k - 2].shape[0]
            self._tables.append(self._make_table(keys, counts.astype(np.int64), num_contexts))
            logger.info(
                "ngram order %d: %d n-grams, %d contexts, D = %s",
                k,
                keys.shape[0],
                num_contexts,
                np.round(self._tables[-1].discounts, 4),
            )
        return self

    def _make_table(self, keys: np.ndarray, counts: np.ndarray, num_contexts: int) -> _OrderTable:
        discounts = estimate_discounts(counts)
        context = keys // self.vocab_size
        total = np.bincount(context, weights=counts, minlength=num_contexts).astype(np.float64)
        nr = [
            np.bincount(context[sel], minlength=num_contexts)
            for sel in (counts == 1, counts == 2, counts >= 3)
        ]
        mass = discounts[0] * nr[0] + discounts[1] * nr[1] + discounts[2] * nr[2]
        # Every stored context has total > 0; the guard keeps γ = 1 (full back-off) otherwise.
        gamma = np.divide(mass, total, out=np.ones(num_contexts), where=total > 0)
        return _OrderTable(keys, counts, total, gamma, discounts)

    # ------------------------------------------------------------------ scoring

    def _check_fitted(self) -> None:
        if not self._tables:
            raise RuntimeError("KneserNey: call fit() (or load()) before scoring")

    def _context_ids(self, ctx: np.ndarray) -> list[np.ndarray]:
        """Dense history ids of lengths 0..order-1 for (N, order-1) contexts; -1 = never seen."""
        cid = np.zeros(ctx.shape[0], dtype=np.int64)
        cids = [cid]
        for m in range(1, self.order):
            found = _lookup(self._context_keys[m - 1], cid * self.vocab_size + ctx[:, m - 1])
            # A history whose shorter suffix is unseen is unseen too.
            cid = np.where(cid >= 0, found, -1)
            cids.append(cid)
        return cids

    def _probs(self, cids: list[np.ndarray], words: np.ndarray) -> np.ndarray:
        """(N,) p_KN(word | history) for per-row history ids `cids` (from _context_ids)."""
        v = self.vocab_size
        # Order 0: uniform over the predicted vocabulary, 0 for BOS/PAD (their counts are 0 at
        # every order, so they stay 0).
        p = np.where(self._predicted[words], 1.0 / self._num_predicted, 0.0)
        for k, table in enumerate(self._tables, start=1):
            cid = cids[k - 1]
            seen = cid >= 0
            safe = np.where(seen, cid, 0)
            idx = _lookup(table.keys, safe * v + words)
            c = np.where(seen & (idx >= 0), table.counts[np.maximum(idx, 0)], 0)
            # D(c): 0 for c = 0, else D1, D2, D3+.
            d = np.concatenate(([0.0], table.discounts))[np.minimum(c, 3)]
            total = table.total[safe]
            higher = np.divide(c - d, total, out=np.zeros_like(total), where=total > 0)
            p = np.where(seen & (total > 0), higher + table.gamma[safe] * p, p)
        return p

    def log_probs(self, stream: np.ndarray) -> np.ndarray:
        """(L,) float64 natural-log probability of every token of `stream`, sentence-bounded."""
        self._check_fitted()
        stream = _check_stream(stream, self.vocab_size, "ngram log_probs")
        ctx = _sentence_contexts(stream, self.order - 1)
        return np.log(self._probs(self._context_ids(ctx), stream))

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        """(V,) float64 p(·|context); the last order-1 ids are used, BOS-padded on the left.

        The context is taken as given: an EOS inside it is not treated as a sentence boundary.
        """
        self._check_fitted()
        width = self.order - 1
        ids = [int(i) for i in context][-width:]
        if any(not 0 <= i < self.vocab_size for i in ids):
            raise DataError(f"ngram distribution: context ids must lie in [0, {self.vocab_size})")
        padded = [BOS] * (width - len(ids)) + ids
        # Column j-1 = word j positions back; one row per vocabulary entry.
        row = np.asarray(padded[::-1], dtype=np.int64)
        ctx = np.broadcast_to(row, (self.vocab_size, width))
        return self._probs(self._context_ids(ctx), np.arange(self.vocab_size, dtype=np.int64))

    def perplexity(self, stream: np.ndarray) -> float:
        """exp(−mean log p) over every token of `stream`."""
        lp = self.log_probs(stream)
        if lp.size == 0:
            raise DataError("ngram perplexity: the stream is empty")
        return float(np.exp(-lp.mean()))

    # ------------------------------------------------------------------ reporting / io

    @property
    def discounts(self) -> dict[int, tuple[float, float, float]]:
        """Order -> (D1, D2, D3+) as used."""
        self._check_fitted()
        return {k: tuple(float(d) for d in t.discounts) for k, t in enumerate(self._tables, 1)}

    def num_parameters(self) -> int:
        """Number of stored n-gram entries over all orders."""
        return int(sum(t.keys.shape[0] for t in self._tables))

    def cost(self, vocab_size: int) -> None:
        """No multiply-adds per token: the model counts n-grams and reads its tables."""
        return None

    def save(self, path: Path) -> None:
        """Write every table to one .npz file (atomically) with the config as JSON."""
        self._check_fitted()
        meta = {
            "config": asdict(self.config),
            "vocab_size": self.vocab_size,
            "format": _FORMAT_VERSION,
        }
        arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps(meta, sort_keys=True))}
        for m, keys in enumerate(self._context_keys, start=1):
            arrays[f"context_keys_{m}"] = keys
        for k, t in enumerate(self._tables, start=1):
            for name in _TABLE_FIELDS:
                arrays[f"{name}_{k}"] = getattr(t, name)
        with atomic_open(Path(path), "wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> KneserNey:
        with np.load(Path(path), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format") != _FORMAT_VERSION:
                raise DataError(f"{path}: unsupported ngram model format {meta.get('format')!r}")
            model = cls(Config(**meta["config"]), meta["vocab_size"])
            n = model.order
            model._context_keys = [z[f"context_keys_{m}"] for m in range(1, n)]
            model._tables = [
                _OrderTable(*(z[f"{name}_{k}"] for name in _TABLE_FIELDS)) for k in range(1, n + 1)
            ]
        return model
