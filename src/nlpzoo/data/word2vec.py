"""Word2vec training examples drawn from the token stream with tensor operations (Mikolov et al.
2013a, b; the procedure of the reference tool, word2vec.c, and of gensim).

Each epoch, from the training stream (sentences' ids each followed by `</s>`, see
`nlpzoo.data.vocab`):

1. Sub-sampling of frequent words (Mikolov et al. 2013b §2.3). Token w is kept with probability

       p_keep(w) = (sqrt(f_w / (s·T)) + 1) · (s·T) / f_w          (≥ 1: always kept)

   f_w the training count of w, T the total count of the trainable words, s = `sample`. This is
   word2vec.c's (and gensim's) formula, not the paper's discard probability 1 − sqrt(t / f): with
   x = f / (s·T) it keeps sqrt(1/x) + 1/x of the tokens (the paper: sqrt(1/x)), so only words with
   f > 2.6·s·T lose anything. Discarded tokens are removed *before* windows are formed, as in the
   tool, so the window reaches past them. T counts the words only (ids >= 4), like gensim's
   `retain_total`; word2vec.c also counts one `</s>` per line (about 4 % more on Brown).
2. Specials: `<unk>`, `<s>`, `<pad>` are dropped like discarded words (the tools drop
   out-of-vocabulary words); `</s>` is never a centre or a context either: it ends the sentence,
   and no window crosses it. word2vec.c does the same (its ReadWordIndex turns the newline into
   `</s>`, which breaks the sentence and is not added to it); so does gensim (one sentence at a
   time).
3. Dynamic window (2013a §3.2, "we randomly sample R in the range <1; C>"): each centre draws
   b uniform in 1..window; its contexts are the tokens at offsets ±1..±b, within its sentence. A
   context at distance d is therefore used with probability (window − d + 1) / window.

How one batch is drawn (window = 2; x discarded by sub-sampling, | a sentence end):

    raw stream       the  cat  sat  </s>  a    dog  ran  fast  </s>
    kept (epoch e)   -    cat  sat  |     a    dog  -    fast  |       sentence: 0 0 1 1 1
    positions j           0    1          2    3         4
    chunk c          raw positions [c·R, (c+1)·R): one batch of about `batch_size` centres
    centre j=3 (dog), b=2:  offsets −2 −1 +1 +2 → positions 1 2 4 5 → keep 2 (a), 4 (fast)
                            (1 is in another sentence, 5 is past the end)
    batch row        inputs [-1, a, fast, -1]  (2·window slots, −1: no word)   target dog

Both models take this batch: CBOW averages a row's contexts to predict its centre; skip-gram
makes one pair (context, centre) of every present slot, the orientation of word2vec.c and gensim.
A chunk's windows reach into the neighbouring chunks, so the epoch's pairs do not depend on how
the stream is cut. Chunks are fixed ranges of the *raw* stream (R raw tokens, R ≈ batch_size /
expected keep rate), so the number of batches is the same every epoch (Lightning's schedulers
need it) and a step's share of the run is its share of the raw words, which is what word2vec.c's
learning-rate decay counts. Sub-sampling is seeded by (seed, epoch) and identical on every rank;
rank r of `world` trains chunks r, r + world, r + 2·world ... (the number of chunks is a multiple
of `world`, so every rank takes the same number of steps).

That is the batched PyTorch path (`backend: torch`, and any run of several processes). The
compiled kernel (`backend: numba`, nlpzoo.models.word2vec_kernel) does steps 1–3 itself, per
pair, as word2vec.c does; its loader (`Word2VecChunks`) only cuts the raw stream into chunks of
about `CHUNK_TOKENS` tokens, each ending at a sentence end, so no window is cut: one chunk is
one Lightning step. Chunk i of epoch e carries the seed of its random numbers, drawn from
(seed, e, i), so a chunk trains the same whenever it runs, and a run resumed after chunk i
continues as the uninterrupted run would (exactly so with one kernel thread).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from nlpzoo.data.lm import ResumableLoader
from nlpzoo.data.samplers import ChunkSampler, EpochSampler
from nlpzoo.data.vocab import EOS, SPECIALS

FIRST_WORD = len(SPECIALS)  # ids below this are specials, never centres or contexts


def keep_probability(counts: Sequence[int] | np.ndarray, sample: float) -> np.ndarray:
    """word2vec.c's p_keep per id, (V,) float64, capped at 1; specials 0; `sample` 0 keeps all.

    p_keep(w) = (sqrt(f_w / (s·T)) + 1)·(s·T) / f_w, T = Σ f over the words (ids >= 4).
    """
    f = np.asarray(counts, dtype=np.float64)
    p = np.ones_like(f)
    if sample > 0:
        st = sample * f[FIRST_WORD:].sum()  # s·T
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(f > 0, (np.sqrt(f / st) + 1) * st / f, 1.0)
        p = np.minimum(p, 1.0)
    p[:FIRST_WORD] = 0.0
    return p


def _seed(*parts: int) -> int:
    """A well-mixed 63-bit seed for torch.Generator from (seed, epoch, ...)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1, dtype=np.uint64)[0] >> 1)


def sentence_cuts(tokens: np.ndarray, parts: int) -> np.ndarray:
    """parts + 1 positions 0 = c_0 <= c_1 <= ... <= c_parts = len(tokens) cutting the stream
    right after a sentence end near every i·len/parts (or at the end if none follows)."""
    n = len(tokens)
    ends = np.flatnonzero(np.asarray(tokens) == EOS) + 1  # positions after each </s>
    cuts = [0]
    for i in range(1, parts):
        k = np.searchsorted(ends, i * n / parts)
        cuts.append(max(cuts[-1], int(ends[k]) if k < len(ends) else n))
    cuts.append(n)
    return np.asarray(cuts, dtype=np.int64)


class Word2VecPairs(Dataset):
    """Item i: one ready batch of this rank for the current epoch (see the module docstring):
    inputs (B, 2·window) context ids, −1 for no word, and targets (B,) the centres; centres
    without any context are left out (word2vec.c skips them too). Use with
    `DataLoader(batch_size=None)`; call `set_epoch(e)` before epoch e (or iterate with
    `EpochSampler`, which keys items by (epoch, i) and so also works with persistent workers).
    """

    BLOCK = 64  # batches drawn together (and cached) to keep the per-batch overhead small

    def __init__(
        self,
        stream: np.ndarray,
        window: int,
        sample: float,
        batch_size: int,
        counts: Sequence[int] | np.ndarray | None = None,
        rank: int = 0,
        world: int = 1,
        seed: int = 0,
    ) -> None:
        if window < 1 or batch_size < 1 or sample < 0:
            raise ValueError("window and batch_size must be >= 1 and sample >= 0")
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in 0..{world - 1}")
        s = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        if counts is None:
            counts = np.bincount(s.numpy(), minlength=int(s.max()) + 1 if s.numel() else 0)
        self.p_keep = torch.as_tensor(keep_probability(counts, sample), dtype=torch.float32)
        if s.numel() and int(s.max()) >= len(self.p_keep):
            raise ValueError(f"stream has id {int(s.max())} beyond the {len(counts)} counts")
        self.stream = s
        self.sentence = torch.cumsum(s == EOS, 0)  # (N,) sentence id of every raw token
        self.window, self.sample = window, sample
        self.batch_size, self.rank, self.world, self.seed = batch_size, rank, world, seed
        N = s.numel()
        kept = float(self.p_keep[s].sum()) if N else 0.0  # expected centres per epoch
        if kept < 1:
            raise ValueError(f"stream of {N} tokens has no trainable word (ids >= {FIRST_WORD})")
        R = max(1, round(batch_size * N / kept))  # raw tokens per chunk ≈ batch_size centres
        n_chunks = math.ceil(math.ceil(N / R) / world) * world  # a multiple of world
        self.chunk = math.ceil(N / n_chunks)  # raw tokens per chunk
        self.n_chunks = n_chunks
        self.epoch = 0
        self._stream: tuple | None = None  # (epoch, kept tokens, sentence ids, b, chunk starts)
        self._block: tuple | None = None  # (epoch, block, inputs, targets, item offsets)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n_chunks // self.world

    def epoch_stream(self, epoch: int) -> tuple[torch.Tensor, ...]:
        """This epoch's kept tokens (M,), their sentence ids (M,), each one's window b (M,), and
        the first kept position of every chunk (n_chunks + 1,)."""
        if self._stream is None or self._stream[0] != epoch:
            g = torch.Generator().manual_seed(_seed(self.seed, epoch))
            u = torch.rand(self.stream.numel(), generator=g)  # (N,)
            keep = u < self.p_keep[self.stream]  # (N,) specials have p_keep 0
            tok, sid = self.stream[keep], self.sentence[keep]  # (M,)
            b = torch.randint(1, self.window + 1, (tok.numel(),), generator=g)  # (M,)
            # chunk c starts at the first kept token whose raw position is >= c·R
            kept_before = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(keep, 0)])
            starts = (torch.arange(self.n_chunks + 1) * self.chunk).clamp(max=keep.numel())
            self._stream = (epoch, tok, sid, b, kept_before[starts])
            self._block = None
        return self._stream[1:]

    def _pairs(self, epoch: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """inputs, targets and per-item row offsets (G+1,) of block k: items [k·G, (k+1)·G).

        A block's pairs are drawn at once (a few dozen tensor operations for G batches)."""
        if self._block is not None and self._block[:2] == (epoch, k):
            return self._block[2:]
        tok, sid, b, first = self.epoch_stream(epoch)
        items = torch.arange(k * self.BLOCK, min((k + 1) * self.BLOCK, len(self)))
        c = self.rank + items * self.world  # (G,) chunks of the whole stream
        lo, n = first[c], first[c + 1] - first[c]  # (G,) first centre and centre count
        item_of = torch.repeat_interleave(torch.arange(items.numel()), n)  # (B·G,)
        j = lo[item_of] + torch.arange(item_of.numel()) - torch.cumsum(n, 0)[item_of] + n[item_of]
        M, W = tok.numel(), self.window
        off = torch.cat([torch.arange(-W, 0), torch.arange(1, W + 1)])  # (2W,)
        pos = j[:, None] + off  # (B·G, 2W)
        inside = (pos >= 0) & (pos < M)
        pos = pos.clamp(0, max(M - 1, 0))
        ok = (off.abs() <= b[j][:, None]) & inside & (sid[pos] == sid[j][:, None])  # (B·G, 2W)
        ctx, centre = tok[pos], tok[j]  # (B·G, 2W), (B·G,)
        has = ok.any(1)  # centres with at least one context
        inputs, targets = ctx.masked_fill(~ok, -1)[has], centre[has]
        per_item = torch.bincount(item_of[has], minlength=items.numel())
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(per_item, 0)])
        self._block = (epoch, k, inputs, targets, offsets)
        return inputs, targets, offsets

    def __getitem__(self, key: int | tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, i = key if isinstance(key, tuple) else (self.epoch, key)
        if not 0 <= i < len(self):
            raise IndexError(i)
        inputs, targets, offsets = self._pairs(epoch, i // self.BLOCK)
        a, z = int(offsets[i % self.BLOCK]), int(offsets[i % self.BLOCK + 1])
        return inputs[a:z], targets[a:z]


CHUNK_TOKENS = 200_000  # raw tokens per chunk of the numba path (one Lightning step)


class Word2VecChunks(Dataset):
    """Item (epoch, i): chunk i of the raw training stream for the compiled kernel, a dict

        tokens  (n,) int32 raw ids of the chunk (a view of the stream), ending with a `</s>`
                except where the stream does not have one
        seed    the chunk's seed, from (seed, epoch, i)
        epoch, chunk, start   where it comes from (start: its first raw position)

    The stream is cut into ⌈N / chunk_tokens⌉ chunks of nearly equal size, each cut right after
    a sentence end (`sentence_cuts`). One process only: the kernel
    shares the weights between threads, not processes.
    """

    def __init__(self, stream: np.ndarray, chunk_tokens: int = CHUNK_TOKENS, seed: int = 0) -> None:
        if chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
        self.stream = np.ascontiguousarray(stream, dtype=np.int32)
        if self.stream.size == 0:
            raise ValueError("the training stream is empty")
        n_chunks = math.ceil(self.stream.size / chunk_tokens)
        self.cuts = sentence_cuts(self.stream, n_chunks)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.cuts) - 1

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        epoch, i = key if isinstance(key, tuple) else (self.epoch, key)
        if not 0 <= i < len(self):
            raise IndexError(i)
        a, b = int(self.cuts[i]), int(self.cuts[i + 1])
        return {
            "tokens": torch.from_numpy(self.stream[a:b]),
            "seed": _seed(self.seed, epoch, i),
            "epoch": epoch,
            "chunk": i,
            "start": a,
        }


def word2vec_dataloader(
    cfg,
    stream: np.ndarray,
    counts: Sequence[int] | np.ndarray | None = None,
    rank: int = 0,
    world: int = 1,
    seed: int = 0,
    num_workers: int = 0,
    chunk_tokens: int | None = None,
) -> DataLoader:
    """The training loader of a word2vec run (`cfg`: the family's config).

    `backend: numba` in one process: chunks of the raw stream (`Word2VecChunks`), in a
    `ResumableLoader` (its `batches_done` tells a checkpoint how far the epoch got); otherwise
    one batch of (contexts, centres) per item (`Word2VecPairs`). `chunk_tokens`: None for
    CHUNK_TOKENS."""
    if getattr(cfg, "backend", "torch") == "numba" and world == 1:
        chunks = Word2VecChunks(stream, chunk_tokens or CHUNK_TOKENS, seed)
        # the chunks are views of one array: no worker processes, nothing to collate
        return ResumableLoader(chunks, ChunkSampler(chunks), batch_size=None)
    ds = Word2VecPairs(stream, cfg.window, cfg.sample, cfg.batch_size, counts, rank, world, seed)
    return DataLoader(
        ds,
        batch_size=None,
        sampler=EpochSampler(ds),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )
