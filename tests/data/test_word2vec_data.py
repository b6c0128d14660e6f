"""Word2vec training examples (nlpzoo.data.word2vec): sub-sampling, dynamic window, sentence
boundaries, batch formats and sharding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch.utils.data import DataLoader

from nlpzoo.data.vocab import EOS, UNK
from nlpzoo.data.word2vec import EpochSampler, Word2VecPairs, keep_probability

W = 5  # window


pytestmark = pytest.mark.usefixtures("one_thread")


def zipf_stream(n_words: int = 60, n_tokens: int = 400_000, seed: int = 0) -> np.ndarray:
    """Sentences of 1..30 Zipf-distributed words (ids 4..), each followed by </s>."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1)
    words = rng.choice(n_words, size=n_tokens, p=p / p.sum()) + 4
    ends = np.cumsum(rng.integers(1, 31, size=n_tokens))
    ends = ends[ends < n_tokens]
    return np.insert(words, ends, EOS)


def all_pairs(ds: Word2VecPairs) -> tuple[torch.Tensor, torch.Tensor]:
    """(centre, context) of every present context slot of every batch of the epoch."""
    xs, ys = zip(*(ds[i] for i in range(len(ds))), strict=True)
    ctx, centre = torch.cat(xs), torch.cat(ys)
    present = ctx >= 0
    return centre[present.nonzero(as_tuple=True)[0]], ctx[present]


# ---------------------------------------------------------------------------------- sub-sampling


def test_keep_probability_is_word2vec_c_formula_not_the_papers():
    counts = np.array([7, 0, 3, 0, 10_000, 1000, 100, 10, 1])
    s = 1e-2
    T = counts[4:].sum()  # the words only: specials are not counted
    p = keep_probability(counts, s)
    f = counts[4].astype(float)
    expected = (np.sqrt(f / (s * T)) + 1) * (s * T) / f
    assert p[4] == pytest.approx(expected)
    assert p[4] != pytest.approx(np.sqrt(s * T / f))  # the paper's 1 − P(discard)
    assert (p[6:] == 1.0).all()  # rare words: the formula gives >= 1, always kept
    assert (p[:4] == 0).all()  # specials are never trained
    assert (keep_probability(counts, 0.0)[4:] == 1).all()  # sample 0: keep everything


def test_empirical_keep_rate_matches_the_formula():
    stream = zipf_stream(n_words=300)
    counts = np.bincount(stream)
    sample = 1e-3
    ds = Word2VecPairs(stream, W, sample, 1000)
    p = keep_probability(counts, sample)
    raw = counts.astype(float)
    for epoch in (0, 1):
        kept = np.bincount(ds.epoch_stream(epoch)[0].numpy(), minlength=len(counts))
        frequent = np.nonzero(p[4:] < 0.9)[0] + 4
        assert len(frequent) >= 5  # the test covers heavily sub-sampled words
        for w in frequent:
            sd = np.sqrt(raw[w] * p[w] * (1 - p[w]))
            assert abs(kept[w] - raw[w] * p[w]) < 5 * sd + 1, (w, kept[w], raw[w] * p[w])
        rare = np.nonzero(p == 1.0)[0]
        assert len(rare) >= 5
        assert (kept[rare] == counts[rare]).all()  # p_keep >= 1: every occurrence kept
        assert kept[EOS] == 0 and kept[UNK] == 0


def test_discarded_tokens_are_removed_before_windows_are_formed():
    # x F F y </s> ...: with window 1, x and y can only be neighbours once both Fs are gone
    x, F_, y = 4, 5, 6
    stream = np.tile([x, F_, F_, y, EOS], 20_000)
    counts = np.array([0, 0, 20_000, 0, 20_000, 10**9, 20_000])  # F: a very frequent word
    ds = Word2VecPairs(stream, 1, 1e-3, 500, counts=counts)
    c, o = all_pairs(ds)
    xy = int(((c == x) & (o == y)).sum())
    p_f = keep_probability(counts, 1e-3)[F_]
    expected = 20_000 * (1 - p_f) ** 2  # both Fs discarded (window 1 always, b = 1)
    assert xy > 0.8 * expected


# ---------------------------------------------------------------------------------- windows


def test_dynamic_window_weights_offsets_by_window_minus_d_plus_one():
    # distinct ids (id − 4 = position), one long sentence, no sub-sampling
    n = 60_000
    stream = np.append(np.arange(4, n + 4), EOS)
    ds = Word2VecPairs(stream, W, 0.0, 2000)
    c, o = all_pairs(ds)
    interior = (c >= 4 + W) & (c < n + 4 - W)
    off = (o - c)[interior]
    assert int(off.abs().max()) == W and not (off == 0).any()
    d = off.abs()
    observed = torch.bincount(d, minlength=W + 1)[1:].numpy()
    weights = W - np.arange(1, W + 1) + 1  # (window − d + 1)
    expected = observed.sum() * weights / weights.sum()
    assert chisquare(observed, expected).pvalue > 0.01
    assert chisquare(observed, np.full(W, observed.sum() / W)).pvalue < 1e-6  # not uniform
    # left and right are symmetric
    assert abs(int((off > 0).sum()) - int((off < 0).sum())) < 4 * np.sqrt(off.numel())


def test_no_pair_crosses_a_sentence_end_and_specials_are_never_used():
    rng = np.random.default_rng(1)
    # sentence k uses only ids 4 + 10k .. 4 + 10k + 9, so a crossing pair is visible; <unk> too
    parts = []
    for k in range(300):
        words = 4 + 10 * k + rng.integers(0, 10, size=rng.integers(1, 12))
        words[rng.random(words.size) < 0.1] = UNK
        parts.append(np.append(words, EOS))
    stream = np.concatenate(parts)
    ds = Word2VecPairs(stream, W, 0.0, 64)
    x, y = all_pairs(ds)
    assert x.numel() > 1000
    assert (x >= 4).all() and (y >= 4).all()  # no </s>, <unk>, <s>, <pad>
    assert torch.equal((x - 4) // 10, (y - 4) // 10)  # same sentence


def test_rows_hold_exactly_the_kept_in_sentence_tokens_within_b():
    stream = zipf_stream(n_tokens=6_000)
    ds = Word2VecPairs(stream, W, 1e-3, 100, seed=3)
    ds.set_epoch(2)
    tok, sid, b, _ = (t.tolist() for t in ds.epoch_stream(2))
    expected = []  # written out with loops over the epoch's kept stream
    for j in range(len(tok)):
        row = [-1] * (2 * W)
        for slot, o in enumerate([*range(-W, 0), *range(1, W + 1)]):
            if abs(o) <= b[j] and 0 <= j + o < len(tok) and sid[j + o] == sid[j]:
                row[slot] = tok[j + o]
        if max(row) >= 0:
            expected.append((tok[j], row))
    got = []
    for i in range(len(ds)):
        ctx, centre = ds[i]
        assert ctx.shape[1] == 2 * W
        got += list(zip(centre.tolist(), ctx.tolist(), strict=True))
    assert got == expected


# ---------------------------------------------------------------------------------- batches


def test_batches_have_about_batch_size_centres_and_a_fixed_count_per_epoch():
    stream = zipf_stream(n_tokens=100_000)
    ds = Word2VecPairs(stream, W, 1e-3, 512)
    n = len(ds)
    sizes = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        assert len(ds) == n
        sizes += [ds[i][1].numel() for i in range(n - 1)]
    assert 0.9 * 512 < np.mean(sizes) < 1.1 * 512


def test_epochs_resample_and_are_reproducible():
    stream = zipf_stream(n_tokens=30_000)
    ds = Word2VecPairs(stream, W, 1e-3, 256, seed=7)
    a = ds[(0, 3)]
    b = ds[(1, 3)]
    again = Word2VecPairs(stream, W, 1e-3, 256, seed=7)[(0, 3)]
    assert torch.equal(a[0], again[0]) and torch.equal(a[1], again[1])
    assert a[0].numel() != b[0].numel() or not torch.equal(a[1], b[1])


def test_epoch_sampler_follows_set_epoch_through_a_dataloader():
    stream = zipf_stream(n_tokens=20_000)
    ds = Word2VecPairs(stream, W, 1e-3, 256)
    sampler = EpochSampler(ds)
    loader = DataLoader(ds, batch_size=None, sampler=sampler)
    sampler.set_epoch(4)  # what Lightning does at every epoch start
    got = list(loader)
    assert len(got) == len(ds)
    for i, (x, y) in enumerate(got):
        ex, ey = ds[(4, i)]
        assert torch.equal(x, ex) and torch.equal(y, ey)


def test_ranks_split_the_chunks_and_take_equal_steps():
    stream = zipf_stream(n_tokens=50_000)
    one = Word2VecPairs(stream, W, 1e-3, 256, seed=5)
    ranks = [Word2VecPairs(stream, W, 1e-3, 256, rank=r, world=3, seed=5) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1  # every rank the same number of steps
    assert sum(len(r) for r in ranks) == ranks[0].n_chunks
    # chunk c goes to rank c % world: with distinct ids (no sub-sampling) a batch's centres are
    # exactly the tokens of its chunk
    n = 20_000
    distinct = np.insert(np.arange(4, n + 4), np.arange(20, n, 20), EOS)  # sentences of 20
    shards = [Word2VecPairs(distinct, W, 0.0, 100, rank=r, world=3) for r in range(3)]
    raw = shards[0].chunk  # raw tokens per chunk
    for r, shard in enumerate(shards):
        for i in (0, 2, len(shard) - 1):
            c = r + 3 * i
            words = distinct[c * raw : (c + 1) * raw]
            assert torch.equal(shard[i][1], torch.as_tensor(words[words >= 4]))
    # the ranks together see exactly the pairs one process would (same epoch, same seed)
    parts = [all_pairs(r) for r in ranks]
    together = sorted(
        zip(
            torch.cat([p[0] for p in parts]).tolist(),
            torch.cat([p[1] for p in parts]).tolist(),
            strict=True,
        )
    )
    single = all_pairs(one)
    assert together == sorted(zip(single[0].tolist(), single[1].tolist(), strict=True))
