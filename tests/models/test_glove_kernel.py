"""Tests for GloVe's compiled kernel (nlpzoo.models.glove_kernel) and its loader
(nlpzoo.data.glove.CooccurChunks): one entry's update by hand (both AdaGrad conventions), an
epoch against the torch path entry by entry, the epoch's order, threads, what a toy matrix
learns, and resuming mid-epoch (by hand and through the pipeline's lifecycle)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from interrupts import assert_kill_and_resume
from nlpzoo.data.glove import (
    ChunkSampler,
    CooccurBatches,
    CooccurChunks,
    cooccur_dataloader,
    shuffled_order,
)
from nlpzoo.errors import ConfigError
from nlpzoo.models.glove import Config, Glove
from nlpzoo.models.glove_kernel import check_ids, train_entries, train_order

pytestmark = pytest.mark.usefixtures("one_thread")


def random_tables(V: int = 5, d: int = 4, seed: int = 0) -> list[np.ndarray]:
    """word, context (V, d+1) ~ U(−0.5, 0.5) and their accumulators G (V, d+1), not all 1."""
    rng = np.random.default_rng(seed)
    word = (rng.random((V, d + 1)) - 0.5).astype(np.float32)
    context = (rng.random((V, d + 1)) - 0.5).astype(np.float32)
    gword = (1.0 + rng.random((V, d + 1))).astype(np.float32)
    gcontext = (1.0 + rng.random((V, d + 1))).astype(np.float32)
    return [word, context, gword, gcontext]


# --------------------------------------------------------------------------- one entry by hand


@pytest.mark.parametrize("rule", ["tool", "standard"])
@pytest.mark.parametrize("x", [3.0, 25.0])  # f < 1, and f = 1 (x >= x_max)
def test_one_entry_update_by_hand(rule, x):
    i, j, x_max, alpha, lr = 1, 3, 10.0, 0.75, 0.2
    tables = random_tables()
    before = [t.astype(np.float64) for t in tables]
    w, c, gw, gc = (before[0][i], before[1][j], before[2][i], before[3][j])
    d = len(w) - 1
    # by hand: e = w_i·w̃_j + b_i + b̃_j − log x, f = min(1, (x/x_max)^α)
    e = w[:d] @ c[:d] + w[d] + c[d] - math.log(x)
    f = min(1.0, (x / x_max) ** alpha)
    if x >= x_max:
        assert f == 1.0
    # gradients of ½ f e²: f e w̃_j for w_i, f e w_i for w̃_j, f e for both biases
    g_w = np.append(f * e * c[:d], f * e)
    g_c = np.append(f * e * w[:d], f * e)
    q2 = lr * lr if rule == "tool" else 1.0  # tool: G += (η g)²; standard: G += g²
    G_w, G_c = gw + q2 * g_w**2, gc + q2 * g_c**2  # added before the step
    w_new, c_new = w - lr * g_w / np.sqrt(G_w), c - lr * g_c / np.sqrt(G_c)

    rows, cols = np.array([i], np.int32), np.array([j], np.int32)
    vals, order = np.array([x], np.float32), np.array([0], np.int64)
    cost = train_entries(*tables, rows, cols, vals, order, 0, 1, x_max, alpha, lr, rule == "tool")
    assert cost == pytest.approx(0.5 * f * e * e, rel=1e-5)
    for got, want in ((tables[0][i], w_new), (tables[1][j], c_new)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tables[2][i], G_w, rtol=1e-6)
    np.testing.assert_allclose(tables[3][j], G_c, rtol=1e-6)
    # every other row, and the word row j / context row i, stay as they were
    for k, (t, row) in enumerate(zip(tables, (i, j, i, j), strict=True)):
        others = np.delete(np.arange(len(t)), row)
        assert np.array_equal(t[others], before[k][others].astype(np.float32))
    assert not np.allclose(tables[0][i], before[0][i])  # and the entry's rows did move


def test_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="cols"):
        check_ids(np.array([0, 4], np.int32), np.array([1, 5], np.int32), 5)
    with pytest.raises(ValueError, match="rows"):
        check_ids(np.array([-1], np.int32), np.array([1], np.int32), 5)
    tables = random_tables()
    with pytest.raises(TypeError, match="float32"):
        train_order(
            *[t.astype(np.float64) for t in tables],
            np.zeros(1, np.int32),
            np.zeros(1, np.int32),
            np.ones(1, np.float32),
            np.zeros(1, np.int64),
            10.0,
            0.75,
            0.1,
            True,
        )


# --------------------------------------------------------------------------- against torch


def sparse_counts(V: int = 14, seed: int = 0, density: float = 0.5):
    """A symmetric matrix with log X ≈ a rank-2 fit plus noise, about `density` non-zero, X in
    roughly [0.2, 60] (both sides of x_max = 10)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 0.7, (V, 2))
    b = rng.uniform(-0.5, 1.2, V)
    logx = u @ u.T + b[:, None] + b[None, :] + rng.normal(0, 0.3, (V, V))
    keep = rng.random((V, V)) < density
    keep = keep | keep.T
    X = np.where(keep, np.exp((logx + logx.T) / 2), 0.0)
    rows, cols = np.nonzero(X)
    return rows.astype(np.int32), cols.astype(np.int32), X[rows, cols]


@pytest.mark.parametrize("rule", ["tool", "standard"])
def test_an_epoch_with_one_thread_equals_the_torch_path_entry_by_entry(rule):
    """The same initial weights, the same entries in the same order (the epoch's permutation):
    the kernel over chunks and the torch path with one entry per mini-batch (SparseAdagrad)
    agree within float32 rounding, weights, accumulators and loss, over two epochs."""
    rows, cols, vals = sparse_counts()
    V = 14
    cfg = Config(dim=6, lr=0.3, adagrad=rule, threads=1, backend="numba")
    torch.manual_seed(0)
    kernel = Glove(cfg, V)
    torch.manual_seed(0)
    reference = Glove(Config(dim=6, lr=0.3, adagrad=rule, batch_size=1, backend="torch"), V)
    assert torch.equal(kernel.word.weight, reference.word.weight)
    chunks = cooccur_dataloader(rows, cols, vals, 1, seed=3, backend="numba", chunk_entries=17)
    batches = cooccur_dataloader(rows, cols, vals, 1, seed=3, backend="torch")
    assert isinstance(chunks.dataset, CooccurChunks)
    assert isinstance(batches.dataset, CooccurBatches)
    assert len(chunks) == math.ceil(len(vals) / 17) and len(batches) == len(vals)
    for epoch in range(2):
        chunks.sampler.set_epoch(epoch)
        batches.sampler.set_epoch(epoch)
        a = [kernel.manual_step(chunk) for chunk in chunks]
        b = [reference.manual_step(batch) for batch in batches]
        assert sum(n for _, n in a) == sum(n for _, n in b) == len(vals)
        assert sum(s for s, _ in a) == pytest.approx(sum(s for s, _ in b), rel=1e-5)
        for p, q in zip(kernel.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        for G, H in zip(kernel.accumulators(), reference.accumulators(), strict=True):
            torch.testing.assert_close(G, H, rtol=1e-5, atol=1e-6)
    # the weights moved: a kernel that did nothing would fail the comparisons only by luck
    torch.manual_seed(0)
    fresh = Glove(cfg, V)
    assert (kernel.word.weight - fresh.word.weight).abs().max() > 1e-2


# --------------------------------------------------------------------------- the epoch's order


def test_the_chunks_of_an_epoch_are_a_permutation_that_changes_with_the_epoch():
    rows, cols, vals = sparse_counts(V=30)
    n = len(vals)
    ds = CooccurChunks(rows, cols, vals, chunk_entries=50, seed=7)
    assert len(ds) == math.ceil(n / 50)

    def epoch_order(epoch: int) -> np.ndarray:
        items = [ds[(epoch, i)] for i in range(len(ds))]
        assert all(len(b["order"]) <= 50 for b in items)
        assert max(len(b["order"]) for b in items) - min(len(b["order"]) for b in items) <= 1
        assert all(b["vals"] is ds.vals and b["epoch"] == epoch for b in items)
        return np.concatenate([b["order"].numpy() for b in items])

    first, second = epoch_order(0), epoch_order(1)
    assert np.array_equal(np.sort(first), np.arange(n))  # every entry once
    assert np.array_equal(np.sort(second), np.arange(n))
    assert not np.array_equal(first, second)  # a fresh order each epoch
    assert np.array_equal(epoch_order(0), first)  # a function of (seed, epoch)
    assert np.array_equal(first, shuffled_order(n, 7, 0))  # the torch path's order too
    assert np.array_equal(CooccurBatches(rows, cols, vals, 8, seed=7).order(0).numpy(), first)
    assert not np.array_equal(shuffled_order(n, 8, 0), first)  # and the seed matters
    assert ds.vals.dtype == torch.float32 and ds.rows.dtype == torch.int32


def test_the_shuffle_draws_every_permutation_equally_often():
    """The compiled Fisher–Yates: all 24 orders of 4 entries, uniformly over epochs (a naive
    swap with any position, or Sattolo's cycles, fail this)."""
    from collections import Counter

    from scipy.stats import chisquare

    draws = Counter(tuple(shuffled_order(4, 11, epoch).tolist()) for epoch in range(12_000))
    assert len(draws) == 24
    assert chisquare(list(draws.values())).pvalue > 1e-4


def test_a_run_of_several_processes_keeps_the_torch_batches():
    rows, cols, vals = sparse_counts()
    loader = cooccur_dataloader(rows, cols, vals, 8, rank=1, world=2, backend="numba")
    inputs, targets = next(iter(loader))
    assert inputs.shape == (targets.numel(), 2)


# --------------------------------------------------------------------------- threads and model


def grouped_counts(groups: int = 4, size: int = 6, seed: int = 0):
    """Words of one group co-occur often (X in [5, 40]), words of different groups rarely (a
    third of the pairs, X in [0.3, 1])."""
    rng = np.random.default_rng(seed)
    V = groups * size
    group = np.arange(V) // size
    same = group[:, None] == group[None, :]
    X = np.where(same, rng.uniform(5, 40, (V, V)), rng.uniform(0.3, 1.0, (V, V)))
    X = np.where(same | (rng.random((V, V)) < 0.33), X, 0.0)
    X = np.triu(X) + np.triu(X, 1).T  # symmetric
    rows, cols = np.nonzero(X)
    return rows.astype(np.int32), cols.astype(np.int32), X[rows, cols], group


def train(cfg: Config, data, epochs: int, chunk_entries: int = 64, seed: int = 5):
    """The numba path as the pipeline drives it: the loader's chunks, one `manual_step` each."""
    rows, cols, vals = data[:3]
    torch.manual_seed(0)
    model = Glove(cfg, int(max(rows.max(), cols.max())) + 1)
    loader = cooccur_dataloader(
        rows, cols, vals, 1, seed=seed, backend="numba", chunk_entries=chunk_entries
    )
    curve = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        steps = [model.manual_step(batch) for batch in loader]
        assert sum(n for _, n in steps) == len(vals)  # every entry once, whatever the threads
        curve.append(sum(s for s, _ in steps) / len(vals))
    return model, curve


def test_toy_matrix_gives_each_word_the_neighbours_of_its_group():
    data = grouped_counts()
    group = data[3]
    model, curve = train(Config(dim=8, lr=0.2, threads=2), data, epochs=60)
    assert all(np.isfinite(curve)) and curve[-1] < 0.2 * curve[0], curve
    E = torch.nn.functional.normalize(model.embeddings(), dim=1)  # W + W̃
    sim = (E @ E.T).numpy()
    np.fill_diagonal(sim, np.nan)
    # every word is closer, on average, to the other words of its group than to any other group
    mean = np.stack([np.nanmean(sim[:, group == g], axis=1) for g in range(group.max() + 1)], 1)
    assert np.array_equal(mean.argmax(1), group)
    # and nearly every word's nearest neighbour is of its group (the fit follows the counts'
    # noise too: one word in 24 may be nearer to a word of another group)
    nearest = np.nanargmax(sim, axis=1)
    assert (group[nearest] == group).mean() >= 0.9


def test_one_thread_is_deterministic_and_two_threads_fit_as_well():
    data = grouped_counts(groups=6, size=8)
    one, curve1 = train(Config(dim=8, threads=1), data, epochs=5)
    again, _ = train(Config(dim=8, threads=1), data, epochs=5)
    assert torch.equal(one.word.weight, again.word.weight)
    other_seed, _ = train(Config(dim=8, threads=1), data, epochs=5, seed=6)
    assert not torch.equal(one.word.weight, other_seed.word.weight)  # the order matters
    _, curve2 = train(Config(dim=8, threads=2), data, epochs=5)
    assert curve2[-1] == pytest.approx(curve1[-1], rel=0.1)


def test_numba_refuses_a_gpu_model():
    model = Glove(Config(dim=4), 6).to("meta")  # a device other than the CPU
    rows, cols, vals = sparse_counts(V=6)
    chunk = CooccurChunks(rows, cols, vals)[0]
    with pytest.raises(ConfigError, match="backend: torch"):
        model.manual_step(chunk)


# --------------------------------------------------------------------------- resume


def test_resuming_after_a_chunk_continues_as_the_uninterrupted_run():
    """What a checkpoint holds, the weights, the optimizer's state (the accumulators G) and the
    loader's place: with one thread the resumed run ends with the very same weights."""
    data = grouped_counts()
    rows, cols, vals = data[:3]
    cfg = Config(dim=8, lr=0.2, threads=1)
    whole, _ = train(cfg, data, epochs=2, chunk_entries=40)

    def loader():
        return cooccur_dataloader(rows, cols, vals, 1, seed=5, backend="numba", chunk_entries=40)

    torch.manual_seed(0)
    m = Glove(cfg, len(data[3]))
    opt = m.configure_optimizers()
    first = loader()
    stop, step = len(first) + 2, 0  # interrupted after chunk 2 of epoch 1
    for epoch in range(2):
        first.sampler.set_epoch(epoch)
        for batch in first:
            if step == stop:
                break
            m.manual_step(batch)
            step += 1
    state = {k: v.clone() for k, v in m.state_dict().items()}
    opt_state = opt.state_dict()
    assert set(opt_state["state"]) == {0, 1}  # G of both tables is the optimizer's state

    torch.manual_seed(1)  # a fresh process: other initial weights, replaced by the checkpoint
    resumed = Glove(cfg, len(data[3]))
    resumed.load_state_dict(state)
    resumed.configure_optimizers().load_state_dict(opt_state)
    second = loader()
    assert isinstance(second.sampler, ChunkSampler)
    second.load_state_dict({"epoch": 1, "batches": 2})  # what ResumableLoader records
    for batch in second:
        resumed.manual_step(batch)
        step += 1
    assert step == 2 * len(first)
    assert torch.equal(resumed.word.weight, whole.word.weight)
    assert torch.equal(resumed.context.weight, whole.context.weight)


def _project(root: Path) -> Path:
    """A tiny project: a grouped co-occurrence matrix at `root/data/cooccur`."""
    from nlpzoo.data.vocab import Vocab

    rows, cols, vals, group = grouped_counts()
    words = [f"w{k}" for k in range(len(group) - 4)]
    vocab = Vocab.build({w: 10 for w in words}, 1)
    assert len(vocab) == len(group)  # 4 specials and the words
    out = root / "data" / "cooccur"
    out.mkdir(parents=True)
    vocab.save(out / "vocab.txt")
    np.savez(out / "cooccur.npz", rows=rows, cols=cols, vals=vals, vocab_size=len(vocab))
    return root


def _params() -> dict:
    """A tiny project's glove run (numba path, one kernel thread, a resume checkpoint every 4
    steps; 5 chunks an epoch with `_chunks()`)."""
    return {
        "seed": 3,
        "models": {"glove": {"family": "glove", "data": "cooccur"}},
        "glove": {
            "dim": 8,
            "threads": 1,
            "trainer": {
                "max_epochs": 3,
                "accelerator": "cpu",
                "devices": 1,
                "checkpoint_every_steps": 4,
                "checkpoint_every_minutes": 0,
            },
        },
    }


def _chunks() -> tuple:
    from nlpzoo.data import glove as data_glove

    return (data_glove, "CHUNK_ENTRIES", math.ceil(len(grouped_counts()[2]) / 5))


def test_a_killed_pipeline_run_resumes_mid_epoch_and_ends_as_the_uninterrupted_one(
    tmp_path, monkeypatch
):
    """Killed at step 9 (epoch 1, 5 chunks an epoch), the run resumes from its step-8 checkpoint
    at chunk 3 of epoch 1, with the accumulators it had, and, with one kernel thread, ends with
    the very weights of an uninterrupted run."""
    root = assert_kill_and_resume(
        monkeypatch, tmp_path, _project, _params(), "glove", _chunks(), kill_at=9,
        resumes_at=(8, 3),
    )  # fmt: skip
    curve = (root / "plots" / "glove.csv").read_text().strip().splitlines()
    assert len(curve) == 1 + 3  # header + one row per epoch, the interrupted one included
