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
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler


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
            rng = np.random.default_rng([self.seed, epoch])
            self._order = (epoch, torch.as_tensor(rng.permutation(len(self.vals))))
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


class EpochSampler(Sampler):
    """Yields (epoch, k) for k = 0 .. len - 1. Lightning calls `set_epoch` on a DataLoader's
    sampler (never on its dataset) at the start of each epoch; this passes it on."""

    def __init__(self, dataset: CooccurBatches) -> None:
        self.dataset = dataset
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((self.epoch, k) for k in range(len(self.dataset)))


def cooccur_dataloader(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    batch_size: int,
    rank: int = 0,
    world: int = 1,
    seed: int = 0,
    num_workers: int = 0,
) -> DataLoader:
    """This rank's shuffled GloVe batches, a fresh order each epoch, for a Lightning Trainer."""
    ds = CooccurBatches(rows, cols, vals, batch_size, rank=rank, world=world, seed=seed)
    return DataLoader(
        ds,
        batch_size=None,
        sampler=EpochSampler(ds),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


__all__ = ["CooccurBatches", "EpochSampler", "cooccur_dataloader"]
