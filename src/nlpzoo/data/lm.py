"""Datasets over a language-model token stream (see `nlpzoo.data.vocab` for the stream format).

Fixed-window models (Bengio's NNLM) predict token t from the n-1 tokens before it. The stream is
left-padded with `</s>` (a sentence end precedes the first sentence), and each item is a window:

    stream   </s> </s> | w0  w1  w2  </s> w3 ...
    item t   context = padded[t : t+n-1],  target = stream[t]        (n-1 = 2 shown)

Every token of the stream is a target exactly once, so summing the NLL over the dataset scores
exactly the tokens docs/design.md §4 counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from nlpzoo.data.vocab import EOS


class ContextWindows(Dataset):
    """(context (n-1,), target) pairs for every position of a stream; batched fetch supported."""

    def __init__(self, stream: np.ndarray, context_size: int) -> None:
        s = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        pad = torch.full((context_size,), EOS, dtype=torch.int64)
        padded = torch.cat([pad, s])
        self.windows = padded.unfold(0, context_size + 1, 1)  # (N, n) view, no copy
        self.context_size = context_size

    def __len__(self) -> int:
        return self.windows.shape[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.windows[i]
        return w[:-1], w[-1]

    def __getitems__(self, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.windows[torch.as_tensor(idx)]  # (B, n)
        return w[:, :-1], w[:, -1]


def collate_batched(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """`__getitems__` already returns a batch; the DataLoader must pass it through unchanged."""
    return batch


class BPTTBlocks(Dataset):
    """Truncated-BPTT windows over a stream cut into B parallel rows, in order (stateful models).

    The stream is cut into `B · world` contiguous rows (the tail that does not fill a row is
    dropped); rank r owns rows [r·B, (r+1)·B). Window i holds columns [i·T, i·T + T]:

        row 0   w0  w1  w2 | w3  w4  w5 | w6 ...        inputs  = row[i·T : i·T+T]
        row 1   v0  v1  v2 | v3  v4  v5 | v6 ...        targets = row[i·T+1 : i·T+T+1]
                window 0     window 1

    so the hidden state left by window i is the right start for window i+1, and the target of
    the last position of a window is the first input of the next one. Iterate in order,
    `batch_size=None`.
    """

    def __init__(
        self, stream: np.ndarray, batch_size: int, bptt: int, rank: int = 0, world: int = 1
    ) -> None:
        s = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        rows = batch_size * world
        length = s.numel() // rows
        if length < 2:
            raise ValueError(f"stream of {s.numel()} tokens is too short for {rows} rows")
        data = s[: rows * length].view(rows, length)  # (B·world, L)
        self.data = data[rank * batch_size : (rank + 1) * batch_size]  # (B, L)
        self.bptt = bptt
        self.n = math.ceil((length - 1) / bptt)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i * self.bptt
        end = min(start + self.bptt, self.data.shape[1] - 1)
        return self.data[:, start:end], self.data[:, start + 1 : end + 1]  # (B, T) each


class StreamBlocks(Dataset):
    """Non-overlapping blocks of T+1 tokens (inputs = first T, targets = last T), for models
    without carried state (the Transformer LM); shuffled by the DataLoader."""

    def __init__(self, stream: np.ndarray, block_size: int) -> None:
        s = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        n = (s.numel() - 1) // block_size
        if n < 1:
            raise ValueError(
                f"stream of {s.numel()} tokens is shorter than a block of {block_size}"
            )
        idx = torch.arange(n)[:, None] * block_size + torch.arange(block_size + 1)  # (n, T+1)
        self.blocks = s[idx]

    def __len__(self) -> int:
        return self.blocks.shape[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.blocks[i]
        return b[:-1], b[1:]


class _Shard(Dataset):
    """Rank r of `world` sees items r, r + world, ... (no padding, so nothing is counted twice)."""

    def __init__(self, ds: Dataset, rank: int, world: int) -> None:
        self.ds, self.idx = ds, list(range(rank, len(ds), world))

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, i: int):
        return self.ds[self.idx[i]]

    def __getitems__(self, idx: list[int]):
        ids = [self.idx[i] for i in idx]
        batched = getattr(self.ds, "__getitems__", None)
        return batched(ids) if batched else [self.ds[i] for i in ids]


class ResumableSampler(Sampler[int]):
    """One rank's indices for one epoch, in an order fixed by (seed, epoch), able to start
    part-way through an epoch when training resumes from a checkpoint.

        order   shuffle: a permutation of range(n) from a generator seeded with seed + epoch
                else:    0, 1, ..., n-1
        rank r  keeps positions r, r + world, ... of the order, cut to n // world items so every
                rank runs the same number of batches (DDP steps in lock-step)
        resume  skips the first `batches · batch_size` items of the epoch the checkpoint was in

    Nothing here draws from the global RNG, so dropout noise after a resume is the same as in an
    uninterrupted run.
    """

    def __init__(
        self,
        n: int,
        shuffle: bool,
        seed: int = 0,
        rank: int = 0,
        world: int = 1,
        batch_size: int = 1,
    ) -> None:
        self.n, self.shuffle, self.seed = n, shuffle, seed
        self.rank, self.world, self.batch_size = rank, world, batch_size
        self.epoch = 0
        self.skip = 0  # items to skip at the start of the next pass (set by `resume_at`)

    def set_epoch(self, epoch: int) -> None:  # called by Lightning before each epoch
        if epoch != self.epoch:
            self.skip = 0
        self.epoch = epoch

    def resume_at(self, epoch: int, batches: int) -> None:
        """Continue epoch `epoch` after its first `batches` batches (the next epoch if done)."""
        per_epoch = -(-len(self) // self.batch_size)  # batches per epoch, last one partial
        if batches >= per_epoch:
            self.epoch, self.skip = epoch + 1, 0
        else:
            self.epoch, self.skip = epoch, batches * self.batch_size

    def __len__(self) -> int:
        return self.n // self.world

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.n, generator=g)  # (n,)
        else:
            order = torch.arange(self.n)  # (n,)
        mine = order[self.rank :: self.world][: len(self)]  # (n // world,)
        skip, self.skip = self.skip, 0
        return iter(mine[skip:].tolist())


class ResumableLoader(DataLoader):
    """A DataLoader whose place in the epoch goes into Lightning checkpoints: Lightning saves
    `state_dict()` with the loop state and hands it back to `load_state_dict()` on resume."""

    def __init__(self, dataset: Dataset, sampler: ResumableSampler, **kwargs) -> None:
        super().__init__(dataset, sampler=sampler, **kwargs)
        self.batches_done = lambda: 0  # set by LMDataModule: the trainer's count this epoch

    def state_dict(self) -> dict:
        return {"epoch": self.sampler.epoch, "batches": int(self.batches_done())}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.resume_at(int(state["epoch"]), int(state["batches"]))


def window_loaders(train_stream, valid_stream, context, batch_size, rank, world, seed, extra):
    """Fixed windows (`ContextWindows`), fetched a batch at a time, shuffled by (seed, epoch)."""
    train = ContextWindows(train_stream, context)
    valid = _Shard(ContextWindows(valid_stream, context), rank, world)
    batched = {"collate_fn": collate_batched}
    sampler = ResumableSampler(len(train), True, seed, rank, world, batch_size=batch_size)
    return (
        ResumableLoader(train, sampler, batch_size=batch_size, **batched, **extra()),
        DataLoader(valid, batch_size=batch_size, **batched, **extra()),
    )


def bptt_loaders(train_stream, valid_stream, context, batch_size, rank, world, seed, extra):
    """BPTT windows of `context` steps over `batch_size` rows, in order (`BPTTBlocks`)."""
    # BPTT rows are already split between ranks: every rank walks all windows of its rows
    train = BPTTBlocks(train_stream, batch_size, context, rank, world)
    valid = BPTTBlocks(valid_stream, batch_size, context, rank, world)
    sampler = ResumableSampler(len(train), shuffle=False)
    return (
        ResumableLoader(train, sampler, batch_size=None, **extra()),
        DataLoader(valid, batch_size=None, **extra()),
    )


def block_loaders(train_stream, valid_stream, context, batch_size, rank, world, seed, extra):
    """Blocks of `context` + 1 tokens (`StreamBlocks`), shuffled by (seed, epoch)."""
    train = StreamBlocks(train_stream, context)
    valid = _Shard(StreamBlocks(valid_stream, context), rank, world)
    sampler = ResumableSampler(len(train), True, seed, rank, world, batch_size=batch_size)
    return (
        ResumableLoader(train, sampler, batch_size=batch_size, **extra()),
        DataLoader(valid, batch_size=batch_size, **extra()),
    )


def lm_dataloaders(
    family,
    cfg,
    train_stream: np.ndarray,
    valid_stream: np.ndarray,
    rank: int = 0,
    world: int = 1,
    num_workers: int = 0,
    seed: int = 0,
):
    """Training and validation loaders for an LM family (its `nlpzoo.families.Family` record), by
    its input kind (`nlpzoo.lm_inputs`: windows, BPTT rows, or blocks).

    Each rank gets its own shard (training and validation), so metrics summed over ranks count
    every token once. The training loader is a `ResumableLoader`; every loader has its own
    generator, so creating its iterator does not draw from the global RNG.
    """
    from nlpzoo.lm_inputs import lm_input

    def extra() -> dict:
        return {
            "num_workers": num_workers,
            "persistent_workers": num_workers > 0,
            "generator": torch.Generator().manual_seed(seed),
        }

    return lm_input(family).dataloaders(cfg, train_stream, valid_stream, rank, world, seed, extra)


class LMDataModule(pl.LightningDataModule):
    """Builds the loaders in `setup`, once the Trainer knows this process's rank and world size
    (with `ddp_spawn` that is only inside the spawned process)."""

    def __init__(
        self,
        family,
        cfg,
        train_stream: np.ndarray,
        valid_stream: np.ndarray,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.args = (family, cfg, train_stream, valid_stream)
        self.num_workers, self.seed = num_workers, seed
        self.loaders: tuple | None = None

    def setup(self, stage: str) -> None:
        rank, world = self.trainer.global_rank, self.trainer.world_size
        self.loaders = lm_dataloaders(
            *self.args, rank=rank, world=world, num_workers=self.num_workers, seed=self.seed
        )
        progress = self.trainer.fit_loop.epoch_loop.batch_progress
        self.loaders[0].batches_done = lambda: progress.current.processed

    def train_dataloader(self):
        return self.loaders[0]

    def val_dataloader(self):
        return self.loaders[1]


class TrainOnlyDataModule(pl.LightningDataModule):
    """One training loader, built in `setup` from `make(rank, world)` once the Trainer knows this
    process's rank; for the families without a held-out objective (word2vec, GloVe)."""

    def __init__(self, make) -> None:
        super().__init__()
        self.make = make
        self.loaders: tuple | None = None

    def setup(self, stage: str) -> None:
        self.loaders = (self.make(self.trainer.global_rank, self.trainer.world_size),)
        if isinstance(self.loaders[0], ResumableLoader):  # word2vec's chunks resume mid-epoch
            progress = self.trainer.fit_loop.epoch_loop.batch_progress
            self.loaders[0].batches_done = lambda: progress.current.processed

    # the loader's place, through the data module's own checkpoint entry: Lightning restores it
    # before configure_optimizers, whose estimate of the steps (word2vec's schedule) sets the
    # loader up too early for the fit loop's own copy of the state to reach it
    def state_dict(self) -> dict:
        loader = self.loaders[0] if self.loaders else None
        return loader.state_dict() if isinstance(loader, ResumableLoader) else {}

    def load_state_dict(self, state: dict) -> None:
        if state and self.loaders and isinstance(self.loaders[0], ResumableLoader):
            self.loaders[0].load_state_dict(state)

    def train_dataloader(self):
        return self.loaders[0]
