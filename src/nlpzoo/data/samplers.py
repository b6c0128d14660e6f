"""Samplers of the word-vector loaders, whose datasets are keyed by (epoch, i).

The datasets (nlpzoo.data.word2vec's `Word2VecPairs` and `Word2VecChunks`, nlpzoo.data.glove's
`CooccurBatches` and `CooccurChunks`) build item i of an epoch from (seed, epoch, i), so a key
that carries its epoch gives the same item in the main process and in a worker process holding
an older copy of the dataset. Lightning calls `set_epoch` on a DataLoader's sampler (never on its
dataset) at every epoch start; both samplers pass it on.

    EpochSampler   every item of the epoch, in order
    ChunkSampler   the same, and `resume_at` for `ResumableLoader` (nlpzoo.data.lm): a run
                   resumed from a checkpoint taken after item i of an epoch starts at item i + 1
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from torch.utils.data import Sampler


class EpochDataset(Protocol):
    """What the samplers need of a dataset: a length and the epoch its items are drawn for."""

    def __len__(self) -> int: ...

    def set_epoch(self, epoch: int) -> None: ...


class EpochSampler(Sampler):
    """Yields (epoch, i) for i = 0 .. len − 1."""

    def __init__(self, dataset: EpochDataset) -> None:
        self.dataset, self.epoch = dataset, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter([(self.epoch, i) for i in range(len(self.dataset))])


class ChunkSampler(EpochSampler):
    """Yields (epoch, i) for the items of an epoch, in order; `resume_at` (through
    `ResumableLoader`'s state in Lightning's checkpoint) makes it start after the items an
    interrupted run had trained."""

    def __init__(self, dataset: EpochDataset) -> None:
        super().__init__(dataset)
        self.skip = 0

    def set_epoch(self, epoch: int) -> None:  # Lightning calls it at every epoch start
        if epoch != self.epoch:
            self.skip = 0
        super().set_epoch(epoch)

    def resume_at(self, epoch: int, batches: int) -> None:
        """Continue epoch `epoch` after its first `batches` items (the next epoch if done)."""
        if batches >= len(self):
            self.epoch, self.skip = epoch + 1, 0
        else:
            self.epoch, self.skip = epoch, batches
        self.dataset.set_epoch(self.epoch)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        skip, self.skip = self.skip, 0
        return iter([(self.epoch, i) for i in range(skip, len(self.dataset))])


__all__ = ["ChunkSampler", "EpochDataset", "EpochSampler"]
