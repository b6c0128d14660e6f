"""Datasets over a language-model token stream (see `nlpzoo.data.vocab` for the stream format).

Fixed-window models (Bengio's NNLM) predict token t from the n-1 tokens before it. The stream is
left-padded with `</s>` (a sentence end precedes the first sentence), and each item is a window:

    stream   </s> </s> | w0  w1  w2  </s> w3 ...
    item t   context = padded[t : t+n-1],  target = stream[t]        (n-1 = 2 shown)

Every token of the stream is a target exactly once, so summing the NLL over the dataset scores
exactly the tokens DESIGN §5 counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import Dataset

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


def lm_dataloaders(
    model_cls,
    cfg,
    train_stream: np.ndarray,
    valid_stream: np.ndarray,
    rank: int = 0,
    world: int = 1,
    num_workers: int = 0,
    seed: int = 0,
):
    """Training and validation loaders for an LM family, by the shape its `INPUT` asks for.

    Each rank gets its own shard (training and validation), so metrics summed over ranks count
    every token once.
    """
    from torch.utils.data import DataLoader, DistributedSampler

    kind = model_cls.INPUT
    extra = {"num_workers": num_workers, "persistent_workers": num_workers > 0}
    if kind == "window":
        train = ContextWindows(train_stream, cfg.context_size)
        valid = _Shard(ContextWindows(valid_stream, cfg.context_size), rank, world)
        sampler = (
            DistributedSampler(train, world, rank, shuffle=True, seed=seed) if world > 1 else None
        )
        return (
            DataLoader(
                train,
                batch_size=cfg.batch_size,
                shuffle=sampler is None,
                sampler=sampler,
                collate_fn=collate_batched,
                **extra,
            ),
            DataLoader(valid, batch_size=cfg.batch_size, collate_fn=collate_batched, **extra),
        )
    if getattr(model_cls, "STATEFUL", False):
        train = BPTTBlocks(train_stream, cfg.batch_size, cfg.bptt, rank, world)
        valid = BPTTBlocks(valid_stream, cfg.batch_size, cfg.bptt, rank, world)
        return DataLoader(train, batch_size=None, **extra), DataLoader(
            valid, batch_size=None, **extra
        )
    train = StreamBlocks(train_stream, cfg.block_size)
    valid = _Shard(StreamBlocks(valid_stream, cfg.block_size), rank, world)
    sampler = DistributedSampler(train, world, rank, shuffle=True, seed=seed) if world > 1 else None
    return (
        DataLoader(
            train, batch_size=cfg.batch_size, shuffle=sampler is None, sampler=sampler, **extra
        ),
        DataLoader(valid, batch_size=cfg.batch_size, **extra),
    )


class LMDataModule(pl.LightningDataModule):
    """Builds the loaders in `setup`, once the Trainer knows this process's rank and world size
    (with `ddp_spawn` that is only inside the spawned process)."""

    def __init__(
        self,
        model_cls,
        cfg,
        train_stream: np.ndarray,
        valid_stream: np.ndarray,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.args = (model_cls, cfg, train_stream, valid_stream)
        self.num_workers, self.seed = num_workers, seed
        self.loaders: tuple | None = None

    def setup(self, stage: str) -> None:
        rank, world = self.trainer.global_rank, self.trainer.world_size
        self.loaders = lm_dataloaders(
            *self.args, rank=rank, world=world, num_workers=self.num_workers, seed=self.seed
        )

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

    def train_dataloader(self):
        return self.loaders[0]
