"""Mini-batches of co-occurrence entries for GloVe (see `nlpzoo.models.glove`).

GloVe visits the non-zero entries X_ij of the co-occurrence matrix, in a random order, once per
epoch. The matrix is stored symmetrically (nlpzoo.data.cooccur), so each unordered pair {a, b}
appears twice, as (a, b) and (b, a), and is visited twice per epoch, as in the reference tool
(whose `cooccur` also writes both orders).

Each epoch the N entries are put in a fresh random order (a permutation seeded by
(seed, epoch)) and cut into nb nearly equal consecutive batches; batch k goes to rank k % world:

    order    e7 e2 e9 | e0 e5 e4 | e1 e8 e3 | e6 ...       (N entries, nb batches of ≤ B)
    batch       0          1          2         3
    rank        0          1          0         1           (world = 2)

nb = ⌈N / B⌉ rounded up to a multiple of `world`, so every rank runs the same number of steps
(DDP needs that) and no entry is dropped or repeated: over the ranks, every non-zero is in exactly
one batch per epoch. Batches hold ⌊N/nb⌋ or ⌈N/nb⌉ entries, never more than B.

That is the torch path (`backend: torch`, and any run of several processes). The compiled kernel
(`backend: numba`, nlpzoo.models.glove_kernel) trains one entry at a time; its loader
(`CooccurChunks`) cuts the same epoch order into ⌈N / CHUNK_ENTRIES⌉ consecutive chunks, one
Lightning step each:

    order    e7 e2 e9 e0 e5 e4 | e1 e8 e3 e6 ...     (the permutation of (seed, epoch) above)
    chunk              0               1

A chunk is the slice of the order and views of the whole matrix (nothing is copied); the kernel
reads the entries through the order. A run resumed after chunk i of an epoch continues with chunk
i + 1 of the same order (`ChunkSampler.resume_at`, from the loader's place in the checkpoint).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit
from torch.utils.data import DataLoader, Dataset

from nlpzoo.data.lm import ResumableLoader
from nlpzoo.data.samplers import ChunkSampler, EpochSampler

CHUNK_ENTRIES = 1 << 18  # non-zero entries per chunk of the numba path (one Lightning step)

# splitmix64 (Steele, Lea & Flood 2014): the generator of the shuffle
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31 = np.uint64(11), np.uint64(27), np.uint64(30), np.uint64(31)
_INV53 = 1.0 / 9007199254740992.0  # 2^-53


@njit(nogil=True, cache=True)
def _fisher_yates(n, state):
    """A uniform permutation of range(n), int32 (Fisher–Yates, Knuth's Algorithm P), drawn
    with splitmix64 from `state`; j is ⌊u·(i+1)⌋ for a 53-bit uniform u."""
    out = np.arange(n, dtype=np.int32)
    for i in range(n - 1, 0, -1):
        state += _GOLDEN
        z = state
        z = (z ^ (z >> _S30)) * _MIX1
        z = (z ^ (z >> _S27)) * _MIX2
        z = z ^ (z >> _S31)
        j = np.int64(np.float64(z >> _S11) * _INV53 * (i + 1))
        t = out[i]
        out[i] = out[j]
        out[j] = t
    return out


def shuffled_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order in which epoch `epoch` visits the n entries, (n,) int32: a permutation of
    range(n) drawn from (seed, epoch), the same on every rank and for both paths. Compiled (a
    few tens of ms for Brown's 2.9 M entries, a quarter of NumPy's permutation)."""
    if not 0 <= n < 2**31:
        raise ValueError(f"{n} entries: the order is int32 (at most 2^31 − 1)")
    state = np.random.SeedSequence([seed % 2**64, epoch]).generate_state(1, np.uint64)[0]
    return _fisher_yates(n, state)


class CooccurBatches(Dataset):
    """Ready batches (inputs (B, 2) int64 pairs (i, j), targets (B,) float32 X_ij) of one rank.

    Item k is this rank's k-th batch of the current epoch (`set_epoch`); an item may also be
    keyed `(epoch, k)`, which is what `EpochSampler` yields, so worker processes that hold a copy
    of the dataset still follow the epoch. Use with `DataLoader(batch_size=None)`.
    """

    def __init__(
        self,
        rows: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray,
        batch_size: int,
        rank: int = 0,
        world: int = 1,
        seed: int = 0,
    ) -> None:
        if not len(rows) == len(cols) == len(vals):
            raise ValueError(
                f"rows, cols, vals differ in length: {len(rows)} {len(cols)} {len(vals)}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in [0, {world})")
        n = len(vals)
        if n < world:
            raise ValueError(f"{n} non-zero entries cannot fill a batch on each of {world} ranks")
        self.rows = torch.as_tensor(np.asarray(rows, dtype=np.int64))  # (N,)
        self.cols = torch.as_tensor(np.asarray(cols, dtype=np.int64))  # (N,)
        self.vals = torch.as_tensor(np.asarray(vals, dtype=np.float32))  # (N,)
        self.rank, self.world, self.seed = rank, world, seed
        self.num_batches = math.ceil(math.ceil(n / batch_size) / world) * world  # nb, all ranks
        # batch k is order[bounds[k] : bounds[k+1]]
        self.bounds = [k * n // self.num_batches for k in range(self.num_batches + 1)]
        self.epoch = 0
        self._order: tuple[int, torch.Tensor] | None = None  # (epoch, permutation) cache

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self, epoch: int) -> torch.Tensor:
        """The permutation of the N entries used in `epoch`, (N,); the same on every rank."""
        if self._order is None or self._order[0] != epoch:
            order = torch.from_numpy(shuffled_order(len(self.vals), self.seed, epoch))
            self._order = (epoch, order.long())
        return self._order[1]

    def __len__(self) -> int:
        return self.num_batches // self.world

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, k = key if isinstance(key, tuple) else (self.epoch, key)
        if not 0 <= k < len(self):
            raise IndexError(f"batch {k} out of range for {len(self)} batches")
        b = k * self.world + self.rank  # the global batch number
        idx = self.order(epoch)[self.bounds[b] : self.bounds[b + 1]]  # (B,) entry numbers
        inputs = torch.stack((self.rows[idx], self.cols[idx]), dim=1)  # (B, 2) pairs (i, j)
        return inputs, self.vals[idx]


class CooccurChunks(Dataset):
    """Item (epoch, i): chunk i of epoch `epoch` for the compiled kernel, a dict

        order               (n,) int32 entry numbers, the chunk's slice of the epoch's order
        rows, cols, vals    (N,) int32, int32, float32: the whole matrix (the same tensors in
                            every chunk), entry k being X[rows[k], cols[k]] = vals[k]
        epoch, chunk        where it comes from

    The epoch's order is cut into ⌈N / chunk_entries⌉ nearly equal chunks. One process only: the
    kernel shares the weights between threads, not processes.
    """

    def __init__(
        self,
        rows: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray,
        chunk_entries: int = CHUNK_ENTRIES,
        seed: int = 0,
    ) -> None:
        if not len(rows) == len(cols) == len(vals):
            raise ValueError(
                f"rows, cols, vals differ in length: {len(rows)} {len(cols)} {len(vals)}"
            )
        if chunk_entries < 1:
            raise ValueError(f"chunk_entries must be >= 1, got {chunk_entries}")
        n = len(vals)
        if n == 0:
            raise ValueError("the co-occurrence matrix has no non-zero entry")
        ids = np.concatenate([np.asarray(rows).ravel(), np.asarray(cols).ravel()])
        if int(ids.min()) < 0 or int(ids.max()) >= np.iinfo(np.int32).max:
            raise ValueError("row and column ids must be in 0 .. 2^31 − 2")
        self.rows = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.int32))  # (N,)
        self.cols = torch.from_numpy(np.ascontiguousarray(cols, dtype=np.int32))  # (N,)
        self.vals = torch.from_numpy(np.ascontiguousarray(vals, dtype=np.float32))  # (N,)
        self.seed = seed
        n_chunks = math.ceil(n / chunk_entries)
        self.bounds = [k * n // n_chunks for k in range(n_chunks + 1)]  # chunk k: [b_k, b_k+1)
        self.epoch = 0
        self._order: tuple[int, torch.Tensor] | None = None  # (epoch, permutation) cache

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self, epoch: int) -> torch.Tensor:
        """The permutation of the N entries used in `epoch`, (N,) int32 (`shuffled_order`)."""
        if self._order is None or self._order[0] != epoch:
            self._order = (
                epoch,
                torch.from_numpy(shuffled_order(len(self.vals), self.seed, epoch)),
            )
        return self._order[1]

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        epoch, i = key if isinstance(key, tuple) else (self.epoch, key)
        if not 0 <= i < len(self):
            raise IndexError(f"chunk {i} out of range for {len(self)} chunks")
        return {
            "order": self.order(epoch)[self.bounds[i] : self.bounds[i + 1]],
            "rows": self.rows,
            "cols": self.cols,
            "vals": self.vals,
            "epoch": epoch,
            "chunk": i,
        }


def cooccur_dataloader(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    batch_size: int,
    rank: int = 0,
    world: int = 1,
    seed: int = 0,
    num_workers: int = 0,
    backend: str = "torch",
    chunk_entries: int | None = None,
) -> DataLoader:
    """This rank's shuffled GloVe entries, a fresh order each epoch, for a Lightning Trainer.

    `backend: numba` in one process: chunks of the epoch's order (`CooccurChunks`, about
    `chunk_entries` entries each; None: CHUNK_ENTRIES) in a `ResumableLoader` (its place in the
    epoch goes into checkpoints); otherwise mini-batches of `batch_size` entries
    (`CooccurBatches`)."""
    if backend == "numba" and world == 1:
        chunks = CooccurChunks(rows, cols, vals, chunk_entries or CHUNK_ENTRIES, seed)
        # views of one matrix: no worker processes, nothing to collate
        return ResumableLoader(chunks, ChunkSampler(chunks), batch_size=None)
    ds = CooccurBatches(rows, cols, vals, batch_size, rank=rank, world=world, seed=seed)
    return DataLoader(
        ds,
        batch_size=None,
        sampler=EpochSampler(ds),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


__all__ = [
    "CHUNK_ENTRIES",
    "ChunkSampler",
    "CooccurBatches",
    "CooccurChunks",
    "EpochSampler",
    "cooccur_dataloader",
    "shuffled_order",
]
