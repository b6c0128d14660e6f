"""The Python side of word2vec's compiled kernel (nlpzoo.models.word2vec_kernel): the tables it
reads, the pieces a token range is cut into, and the threads that train them.

Threads (`train_tokens`): with several threads the token range is cut at sentence ends into
pieces of up to PIECE_TOKENS raw tokens, smaller towards the range's end (guided
self-scheduling: a piece is at most 1/(2·threads) of what is left, down to MIN_PIECE_TOKENS), so
that the threads finish the range together; the pieces are handed out in order to whichever of
`threads` Python threads is free, each calling `train_range` (compiled with nogil, so threads run
in parallel) on the same weight arrays, without locks (Hogwild: Recht, Re, Wright & Niu 2011; the
way word2vec.c's and gensim's worker threads train). Two things follow, as in word2vec.c, where
every thread's α comes from the words done by all threads together: a piece's rate is the
range's linear rate at the piece's raw positions, wherever and whenever it is trained, so the
schedule is the one thread's; and a thread that is slowed down (another process on its core, a
piece with more work) takes fewer pieces instead of keeping the other waiting at the end of the
range. Each piece has its own generator, seeded from (seed, piece). One thread trains the range
as one piece: a deterministic run.

"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from nlpzoo.data.vocab import EOS
from nlpzoo.models.pools import thread_pool
from nlpzoo.models.word2vec_kernel import MAX_EXP, train_range


@dataclass
class Tables:
    """What the kernel reads besides the weights: the variant, sub-sampling and the output
    layer's tables (the unused objective's arrays are empty), in compact types: the kernel
    looks them up at random, so the smaller they are, the more of them stays in the caches."""

    cbow: bool
    hs: bool
    window: int
    negative: int
    p_keep: np.ndarray  # (V,) float32
    points: np.ndarray  # (V, L) int32, or (0, 0)
    codes: np.ndarray  # (V, L) int8, or (0, 0)
    lengths: np.ndarray  # (V,) int32, or (0,)
    threshold: np.ndarray  # (V,) float32 alias thresholds, or (0,)
    alias: np.ndarray  # (V,) int32, or (0,)


def make_tables(
    model: str,
    objective: str,
    window: int,
    negative: int,
    p_keep: np.ndarray,
    tree: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    noise: tuple[np.ndarray, np.ndarray] | None = None,
) -> Tables:
    """Tables for a variant: `tree` (points, codes, lengths) for hierarchical softmax, `noise`
    (threshold, alias) of the noise distribution for negative sampling."""
    hs = objective == "hierarchical"
    if hs and tree is None:
        raise ValueError("hierarchical softmax needs the Huffman tree (points, codes, lengths)")
    if not hs and noise is None:
        raise ValueError("negative sampling needs the noise alias table (threshold, alias)")

    def arr(a, dtype, empty_shape):
        return (
            np.ascontiguousarray(a, dtype=dtype) if a is not None else np.zeros(empty_shape, dtype)
        )

    tree = tree if hs else (None, None, None)
    noise = noise if not hs else (None, None)
    return Tables(
        cbow=model == "cbow",
        hs=hs,
        window=int(window),
        negative=int(negative) if not hs else 0,
        p_keep=np.ascontiguousarray(p_keep, dtype=np.float32),
        points=arr(tree[0], np.int32, (0, 0)),
        codes=arr(tree[1], np.int8, (0, 0)),
        lengths=arr(tree[2], np.int32, 0),
        threshold=arr(noise[0], np.float32, 0),
        alias=arr(noise[1], np.int32, 0),
    )


def _empty_records(window: int, negative: int) -> tuple[np.ndarray, ...]:
    return (
        np.zeros((0, 2 * window), np.int64),
        np.zeros(0, np.int64),
        np.zeros((0, max(negative, 1)), np.int64),
        np.zeros(0, np.float64),
        np.zeros(0, np.int64),
    )


def splitmix64(x: int) -> int:
    """A well-mixed 64-bit value of x (Steele, Lea & Flood 2014): thread seeds from one seed."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _train_range(
    tokens: np.ndarray,
    lo: int,
    hi: int,
    syn0: np.ndarray,
    syn1: np.ndarray,
    t: Tables,
    alpha_lo: float,
    alpha_hi: float,
    min_alpha: float,
    max_exp: float,
    seed: int,
    records: tuple[np.ndarray, ...],
) -> tuple[float, int, int, int]:
    """`train_range` on raw positions [lo, hi) with the tables `t`; `records`: the five record
    arrays (empty ones: no recording)."""
    return train_range(
        tokens, lo, hi, t.p_keep, syn0, syn1, t.points, t.codes, t.lengths, t.threshold,
        t.alias, t.cbow, t.hs, t.window, t.negative, float(alpha_lo), float(alpha_hi),
        float(min_alpha), float(max_exp), np.uint64(seed), *records,
    )  # fmt: skip


PIECE_TOKENS = 4096  # raw tokens a thread takes at a time when several threads share a range
MIN_PIECE_TOKENS = 512  # the smallest piece, at the range's end


def piece_plan(
    tokens: np.ndarray, alpha_start: float, alpha_end: float, threads: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """How `train_tokens` cuts its range: piece i is raw positions cuts[i]..cuts[i+1] (cut right
    after a sentence end) and its rate falls from alphas[i] to alphas[i+1], the range's linear
    rate at those two positions. One piece for one thread. With more, a piece starting at p
    ends at the first sentence end at or after p + size, size = min(PIECE_TOKENS,
    max(smallest, ⌈(len − p) / (2·threads)⌉)), smallest = min(MIN_PIECE_TOKENS, ⌈len /
    threads⌉): PIECE_TOKENS while much is left, then ever smaller pieces, so a thread that
    takes the last one keeps the other waiting for a few hundred tokens at most."""
    n = len(tokens)
    if threads <= 1 or n == 0:
        cuts = np.array([0, n], dtype=np.int64)
    else:
        ends = np.flatnonzero(np.asarray(tokens) == EOS) + 1  # positions after each </s>
        smallest = min(MIN_PIECE_TOKENS, -(-n // threads))
        cut = [0]
        while cut[-1] < n:
            size = min(PIECE_TOKENS, max(smallest, -(-(n - cut[-1]) // (2 * threads))))
            k = np.searchsorted(ends, cut[-1] + size)
            cut.append(int(ends[k]) if k < len(ends) else n)
        cuts = np.asarray(cut, dtype=np.int64)
    alphas = alpha_start + (alpha_end - alpha_start) * (cuts / max(n, 1))
    alphas[0], alphas[-1] = alpha_start, alpha_end  # exactly, without rounding
    return cuts, alphas


def train_tokens(
    tokens: np.ndarray,
    syn0: np.ndarray,
    syn1: np.ndarray,
    tables: Tables,
    alpha_start: float,
    alpha_end: float,
    min_alpha: float,
    seed: int,
    threads: int = 1,
    max_exp: float = MAX_EXP,
) -> tuple[float, int]:
    """Trains on all of `tokens` (raw ids, sentences ended by `</s>`) with `threads` Hogwild
    threads; α falls linearly from alpha_start to alpha_end with the raw position in `tokens`,
    whichever thread trains it, floored at min_alpha. The pieces of `piece_plan` go, in order,
    to whichever thread is free; piece i's generator starts at splitmix64(seed + i) (one piece
    with one thread). Returns (loss sum, pairs)."""
    if syn0.dtype != np.float32 or syn1.dtype != np.float32:
        raise TypeError("the kernel trains float32 weights")
    if not (syn0.flags.c_contiguous and syn1.flags.c_contiguous):
        raise ValueError("the weight arrays must be C-contiguous")
    tokens = np.ascontiguousarray(tokens)
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= len(tables.p_keep)):
        raise ValueError(
            f"token ids must be in 0..{len(tables.p_keep) - 1} (the vocabulary), got "
            f"{int(tokens.min())}..{int(tokens.max())}"
        )
    threads = max(int(threads), 1)
    cuts, alphas = piece_plan(tokens, float(alpha_start), float(alpha_end), threads)
    recs = _empty_records(tables.window, tables.negative)

    def piece(i: int) -> tuple[float, int]:
        loss, pairs, _, _ = _train_range(
            tokens, int(cuts[i]), int(cuts[i + 1]), syn0, syn1, tables, alphas[i],
            alphas[i + 1], min_alpha, max_exp, splitmix64(int(seed) + i), recs,
        )  # fmt: skip
        return loss, pairs

    n_pieces = len(cuts) - 1
    workers = min(threads, n_pieces)
    if workers == 1:
        results = [piece(i) for i in range(n_pieces)]
    else:
        queue = iter(range(n_pieces))
        lock = threading.Lock()

        def worker(_: int) -> tuple[float, int]:
            loss, pairs = 0.0, 0
            while True:
                with lock:
                    i = next(queue, None)
                if i is None:
                    return loss, pairs
                piece_loss, piece_pairs = piece(i)  # train_range runs without the GIL
                loss, pairs = loss + piece_loss, pairs + piece_pairs

        results = list(thread_pool("word2vec", workers).map(worker, range(workers)))
    return float(sum(r[0] for r in results)), int(sum(r[1] for r in results))
