"""Parallel data for the translation families: SentencePiece ids, length-bucketed padded batches.

`vocab@mt` writes one SentencePiece model shared by source and target (`spm.model`) and the raw
aligned split files (`train|valid|test.{src,tgt}`). Every sentence is encoded once, up front, into
integer arrays; batches are cut from those arrays, never from text.

One batch of B sentence pairs, S source and T target positions (ids: 1 `<s>`, 2 `</s>`, 3 `<pad>`):

    src      x_1 .. x_n  <pad> ..          (B, S)   the source, no specials
    tgt_in   <s> y_1 .. y_m  <pad> ..      (B, T)   decoder input (teacher forcing)
    labels   y_1 .. y_m </s>  -100 ..      (B, T)   next-token targets; -100 is ignored by the loss

Batching by length (as in Vaswani et al. 2017 §5.1, "sentence pairs were batched together by
approximate sequence length"): the shuffled training pairs are cut into pools of 50 batches, each
pool is sorted by length and cut into batches, and the batches are shuffled again:

    shuffle ─► [pool 0: 50·B pairs] [pool 1] ...  ─► sort each pool by length ─► cut every B
           ─► shuffle batches                      (little padding, different batches each epoch)
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Sampler

from nlpzoo.data.vocab import BOS, EOS, IGNORE, PAD, SEP, read_lines
from nlpzoo.errors import DataError

log = logging.getLogger(__name__)


class Codec:
    """The shared SentencePiece model: text ↔ ids, with the project's fixed special ids."""

    def __init__(self, model_path: Path) -> None:
        import sentencepiece as spm

        if not Path(model_path).is_file():
            raise DataError(
                f"SentencePiece model not found: {model_path} (run `dvc repro vocab@mt`)"
            )
        self.sp = spm.SentencePieceProcessor(model_file=str(model_path))
        expected = {"<unk>": 0, "<s>": BOS, "</s>": EOS, "<pad>": PAD, "<sep>": SEP}
        for piece, i in expected.items():
            if self.sp.piece_to_id(piece) != i:
                raise DataError(
                    f"{model_path}: piece {piece} has id {self.sp.piece_to_id(piece)}, expected "
                    f"{i} (rebuild the vocabulary with `dvc repro vocab@mt`)"
                )

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, lines: list[str]) -> list[np.ndarray]:
        return [np.asarray(ids, dtype=np.int64) for ids in self.sp.encode(lines)]

    def decode(self, ids: list[list[int]]) -> list[str]:
        return self.sp.decode(ids)

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]


@dataclass
class ParallelSplit:
    """One split's raw lines and their ids."""

    src_text: list[str]
    tgt_text: list[str]
    src: list[np.ndarray]
    tgt: list[np.ndarray]
    paths: tuple[Path, Path] | None = None  # the files read (source, target), for messages

    def __len__(self) -> int:
        return len(self.src)

    def where(self, i: int) -> str:
        """Pair i's place: `file:line` of its source."""
        return f"{self.paths[0]}:{i + 1}" if self.paths else f"pair {i + 1}"


def load_split(data_dir: Path, split: str, codec: Codec) -> ParallelSplit:
    """Read `split.src` / `split.tgt` from `data_dir` and encode both sides."""
    paths = [Path(data_dir) / f"{split}.{side}" for side in ("src", "tgt")]
    for p in paths:
        if not p.is_file():
            raise DataError(f"MT {split} split not found: {p} (run `dvc repro vocab@mt`)")
    src_text, tgt_text = (list(read_lines(p)) for p in paths)
    if len(src_text) != len(tgt_text):
        raise DataError(
            f"MT {split} split is not aligned: {paths[0]} has {len(src_text):,} lines, "
            f"{paths[1]} has {len(tgt_text):,}"
        )
    if not src_text:
        raise DataError(f"MT {split} split is empty: {paths[0]}")
    return ParallelSplit(
        src_text, tgt_text, codec.encode(src_text), codec.encode(tgt_text), tuple(paths)
    )


def position_limits(config: Any, extra: int) -> tuple[int, int] | None:
    """What a translation model's positions table (`max_positions`) holds, in pieces: the longest
    side of a pair it trains on or scores (any batch of such pairs fits: an encoder–decoder
    takes the source and `<s> target`, a decoder-only model (`one_sequence`) `<s> source <sep>
    target`, each padded to the batch's longest), and the longest source it translates (with
    its longest translation, ⌈max_len_ratio · n⌉ + `extra` pieces). None without a table (the
    recurrent families)."""
    table = getattr(config, "max_positions", None)
    if table is None:
        return None
    one_sequence = getattr(config, "one_sequence", False)

    def translates(n: int) -> bool:
        out = math.ceil(config.max_len_ratio * n) + extra
        return n + out <= table - 1 if one_sequence else n <= table and out <= table

    n = 0
    while translates(n + 1):
        n += 1
    return ((table - 2) // 2 if one_sequence else table - 1), n


def check_scored(split: ParallelSplit, name: str, limits: tuple[int, int] | None) -> None:
    """Refuse a valid or test split (one line, the first pair's file and line) holding a pair
    without a source piece or beyond the model's positions (`position_limits`): those pairs are
    scored and translated as given, never dropped, so the BLEU is always of the whole split."""
    side, translated = limits or (math.inf, math.inf)
    for i, (s, t) in enumerate(zip(split.src, split.tgt, strict=True)):
        if len(s) == 0:
            why, fix = "its source has no SentencePiece piece (an empty line?)", "fill or remove"
        elif max(len(s), len(t)) > side or len(s) > translated:
            why = (
                f"source {len(s)} pieces, target {len(t)}, but max_positions holds sides of at "
                f"most {side} pieces and translates sources of at most {translated}"
            )
            fix = "raise max_positions or remove"
        else:
            continue
        raise DataError(
            f"MT {name} pair at {split.where(i)} cannot be scored: {why}; {fix} the pair "
            "(valid and test pairs are scored as given, never dropped)"
        )


def pad(seqs: list[np.ndarray] | list[list[int]], value: int) -> torch.Tensor:
    """Right-pad 1-D id sequences into one (B, max length) tensor (at least one column)."""
    width = max(1, max((len(s) for s in seqs), default=0))
    out = torch.full((len(seqs), width), value, dtype=torch.int64)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.int64)
    return out


def collate(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, ...]:
    """(src, tgt_in, labels) for a list of (source ids, target ids), as in the module diagram."""
    src = pad([s for s, _ in pairs], PAD)  # (B, S)
    tgt_in = pad([np.concatenate([[BOS], t]) for _, t in pairs], PAD)  # (B, T)
    labels = pad([np.concatenate([t, [EOS]]) for _, t in pairs], IGNORE)  # (B, T)
    return src, tgt_in, labels


class PairDataset(torch.utils.data.Dataset):
    def __init__(self, split: ParallelSplit, max_len: int = 0, side: float = math.inf) -> None:
        keep = range(len(split))
        if max_len:  # drop over-long training pairs (they would dominate a batch's padding)
            keep = [i for i in keep if max(len(split.src[i]), len(split.tgt[i])) <= max_len]
        # and those the model cannot take: no source piece, or a side beyond its positions
        unfit = [
            i
            for i in keep
            if not len(split.src[i]) or max(len(split.src[i]), len(split.tgt[i])) > side
        ]
        if unfit:
            log.warning(
                "MT train: dropped %d pair(s) with no source piece%s, first %s",
                len(unfit),
                "" if side == math.inf else f" or a side over max_positions' {side} pieces",
                ", ".join(split.where(i) for i in unfit[:3]),
            )
            keep = sorted(set(keep) - set(unfit))
        self.src = [split.src[i] for i in keep]
        self.tgt = [split.tgt[i] for i in keep]

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.src[i], self.tgt[i]

    def lengths(self) -> np.ndarray:
        return np.asarray([max(len(s), len(t)) for s, t in zip(self.src, self.tgt, strict=True)])


class LengthBatches(Sampler):
    """Batches of indices of similar length (module diagram); rank r of `world` takes every
    world-th batch, so the ranks see disjoint data. `shuffle=False`: sorted by length, in order.

    Every rank gets as many batches (DDP runs the ranks in lock-step): when their number is not
    a multiple of `world`, the last batches of the order are split in two until it is.
    """

    POOL = 50  # batches per sorting pool

    def __init__(
        self,
        lengths: np.ndarray,
        batch_size: int,
        shuffle: bool,
        seed: int = 0,
        rank: int = 0,
        world: int = 1,
    ) -> None:
        self.lengths, self.batch_size, self.shuffle = np.asarray(lengths), batch_size, shuffle
        self.seed, self.rank, self.world = seed, rank, world
        self.epoch = 0

    def _batches(self) -> list[np.ndarray]:
        n = len(self.lengths)
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            return [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        rng = np.random.default_rng((self.seed, self.epoch))
        order = rng.permutation(n)
        pool = self.POOL * self.batch_size
        batches = []
        for start in range(0, n, pool):
            chunk = order[start : start + pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches += [
                chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)
            ]
        return [batches[i] for i in rng.permutation(len(batches))]

    @property
    def sampler(self) -> LengthBatches:
        # Lightning calls `set_epoch` on `batch_sampler.sampler` (not on the batch sampler)
        return self

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls this before every epoch, so a resumed run draws the same order."""
        self.epoch = epoch

    def _mine(self) -> list[np.ndarray]:
        """This rank's batches."""
        batches = self._batches()
        i = len(batches) - 1
        while len(batches) % self.world and i >= 0:
            if len(batches[i]) > 1:
                half = len(batches[i]) // 2
                batches[i : i + 1] = [batches[i][:half], batches[i][half:]]
            i -= 1
        return batches[self.rank :: self.world]

    def __iter__(self):
        # a generator: the order is drawn at the first batch, after Lightning's set_epoch (on a
        # resume Lightning creates the iterator before it sets the epoch)
        batches = self._mine()
        self.epoch += 1
        yield from (b.tolist() for b in batches)

    def __len__(self) -> int:
        return len(self._mine())


class MTDataModule(pl.LightningDataModule):
    """Training and validation loaders; built in `setup`, once the rank is known."""

    def __init__(
        self,
        train: ParallelSplit,
        valid: ParallelSplit,
        batch_size: int,
        max_len: int = 0,
        num_workers: int = 0,
        seed: int = 0,
        limits: tuple[int, int] | None = None,
        test: ParallelSplit | None = None,
    ) -> None:
        # limits: the model's `position_limits`; valid and test are checked against them here,
        # before any training (test is only checked)
        super().__init__()
        for name, split in (("valid", valid), ("test", test)):
            if split is not None:
                check_scored(split, name, limits)
        self.train_ds = PairDataset(train, max_len, limits[0] if limits else math.inf)
        self.valid_ds = PairDataset(valid)
        if len(self.train_ds) == 0:
            raise DataError(f"no training pair is at most max_len={max_len} pieces long")
        self.batch_size, self.num_workers, self.seed = batch_size, num_workers, seed
        self.loaders: tuple[DataLoader, DataLoader] | None = None

    def setup(self, stage: str) -> None:
        rank = self.trainer.global_rank if self.trainer else 0
        world = self.trainer.world_size if self.trainer else 1
        extra = {"num_workers": self.num_workers, "persistent_workers": self.num_workers > 0}
        train = LengthBatches(
            self.train_ds.lengths(), self.batch_size, True, self.seed, rank, world
        )
        valid = LengthBatches(
            self.valid_ds.lengths(), self.batch_size, False, rank=rank, world=world
        )
        self.loaders = (
            DataLoader(self.train_ds, batch_sampler=train, collate_fn=collate, **extra),
            DataLoader(self.valid_ds, batch_sampler=valid, collate_fn=collate, **extra),
        )

    def train_dataloader(self) -> DataLoader:
        return self.loaders[0]

    def val_dataloader(self) -> DataLoader:
        return self.loaders[1]
