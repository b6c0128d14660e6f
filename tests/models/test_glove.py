"""Tests for GloVe (nlpzoo.models.glove) and its batches of co-occurrence entries
(nlpzoo.data.glove)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlpzoo.config import build
from nlpzoo.data.glove import CooccurBatches, EpochSampler, cooccur_dataloader
from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from nlpzoo.models.glove import Config, Glove, SparseAdagrad, weighting

pytestmark = pytest.mark.usefixtures("one_thread")


# --------------------------------------------------------------------------- f(x)


def test_weighting_values():
    x_max, a = 10.0, 0.75
    x = torch.tensor([0.0, x_max, x_max / 2, 2 * x_max, 1.0], dtype=torch.float64)
    f = weighting(x, x_max, a)
    expected = [0.0, 1.0, 0.5**a, 1.0, (1 / 10) ** 0.75]
    assert f.tolist() == pytest.approx(expected, rel=1e-12, abs=0)
    # the paper's default: f(50) = 0.5^0.75 = 0.5946
    assert weighting(torch.tensor(50.0)).item() == pytest.approx(0.594604, rel=1e-5)


# --------------------------------------------------------------------------- loss and gradient

# A 3×3 toy: d = 2, x_max = 2, α = 0.75. X has f = 1 at 4 and 2 (= x_max), f < 1 at 1 and 0.5,
# and zeros that must not count.
X3 = [[0.0, 4.0, 1.0], [4.0, 2.0, 0.5], [1.0, 0.5, 0.0]]
W3 = [[0.1, 0.2], [0.3, -0.1], [0.0, 0.5]]
B3 = [0.1, -0.2, 0.3]
WC3 = [[0.2, 0.1], [-0.1, 0.4], [0.3, 0.3]]
BC3 = [0.0, 0.1, -0.1]


def toy_model(dtype=torch.float64) -> Glove:
    m = Glove(Config(dim=2, x_max=2.0, alpha=0.75), 3).to(dtype)
    with torch.no_grad():
        m.word.weight.copy_(
            torch.tensor([[*w, b] for w, b in zip(W3, B3, strict=True)], dtype=dtype)
        )
        m.context.weight.copy_(
            torch.tensor([[*w, b] for w, b in zip(WC3, BC3, strict=True)], dtype=dtype)
        )
    return m


def toy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    pairs = [(i, j) for i in range(3) for j in range(3) if X3[i][j] > 0]
    return torch.tensor(pairs), torch.tensor([X3[i][j] for i, j in pairs], dtype=torch.float64)


def test_loss_and_gradient_equal_hand_computation():
    # by hand: e_ij = w_i·w̃_j + b_i + b̃_j − log X_ij, cost ½ Σ f(X_ij) e_ij² over X_ij > 0
    def f(x):
        return 1.0 if x >= 2.0 else (x / 2.0) ** 0.75

    e, cost = {}, 0.0
    for i in range(3):
        for j in range(3):
            if X3[i][j] > 0:
                dot = W3[i][0] * WC3[j][0] + W3[i][1] * WC3[j][1]
                e[i, j] = dot + B3[i] + BC3[j] - math.log(X3[i][j])
                cost += 0.5 * f(X3[i][j]) * e[i, j] ** 2
    # one entry written out: (0, 1): 0.1·(−0.1) + 0.2·0.4 + 0.1 + 0.1 − log 4
    assert e[0, 1] == pytest.approx(-0.01 + 0.08 + 0.2 - 1.3862943611198906, abs=1e-15)
    # 7 non-zeros; J = 2 · cost in the paper's convention
    assert len(e) == 7
    # dJ/dw_0 = Σ_j f e_0j w̃_j,  dJ/db_0 = Σ_j f e_0j (entries (0, 1) and (0, 2))
    g_w0 = [f(4) * e[0, 1] * WC3[1][k] + f(1) * e[0, 2] * WC3[2][k] for k in range(2)]
    g_b0 = f(4) * e[0, 1] + f(1) * e[0, 2]
    # dJ/dw̃_1 = Σ_i f e_i1 w_i (entries (0, 1), (1, 1), (2, 1))
    g_wc1 = [
        f(4) * e[0, 1] * W3[0][k] + f(2) * e[1, 1] * W3[1][k] + f(0.5) * e[2, 1] * W3[2][k]
        for k in range(2)
    ]
    g_bc1 = f(4) * e[0, 1] + f(2) * e[1, 1] + f(0.5) * e[2, 1]

    model = toy_model()
    inputs, targets = toy_batch()
    logits, loss = model(inputs, targets)
    assert logits is None
    assert loss.item() == pytest.approx(cost / 7, rel=1e-12)  # the value: the mean
    loss.backward()
    gw = model.word.weight.grad.to_dense()
    gc = model.context.weight.grad.to_dense()
    assert gw[0, :2].tolist() == pytest.approx(g_w0, rel=1e-12)  # the gradient: the sum's
    assert gw[0, 2].item() == pytest.approx(g_b0, rel=1e-12)
    assert gc[1, :2].tolist() == pytest.approx(g_wc1, rel=1e-12)
    assert gc[1, 2].item() == pytest.approx(g_bc1, rel=1e-12)


def test_gradient_per_entry_independent_of_batch_size():
    model = toy_model()
    inputs, targets = toy_batch()
    model(inputs, targets)[1].backward()
    full = model.word.weight.grad.to_dense().clone()
    model.zero_grad()
    for k in range(len(targets)):  # one entry at a time: gradients add up to the full batch's
        model(inputs[k : k + 1], targets[k : k + 1])[1].backward()
    assert torch.allclose(model.word.weight.grad.to_dense(), full, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------- AdaGrad


def test_one_step_changes_only_batch_rows_and_starts_accumulator_at_one():
    torch.manual_seed(0)
    model = Glove(Config(dim=4, lr=0.05, adagrad="standard"), 10).double()
    before_w = model.word.weight.detach().clone()
    before_c = model.context.weight.detach().clone()
    opt = model.configure_optimizers(total_steps=1)
    assert isinstance(opt, SparseAdagrad)
    inputs = torch.tensor([[1, 2], [3, 2], [1, 7]])
    targets = torch.tensor([3.0, 0.5, 12.0], dtype=torch.float64)
    model(inputs, targets)[1].backward()
    g_w = model.word.weight.grad.to_dense().clone()  # summed over the batch per row
    g_c = model.context.weight.grad.to_dense().clone()
    opt.step()
    after_w, after_c = model.word.weight.detach(), model.context.weight.detach()
    changed_w = (after_w != before_w).any(1).nonzero().flatten().tolist()
    changed_c = (after_c != before_c).any(1).nonzero().flatten().tolist()
    assert changed_w == [1, 3]
    assert changed_c == [2, 7]
    # accumulator 1 + g²: the first update is lr · g / sqrt(1 + g²), row 2 with two entries' sum
    expect_w = before_w - 0.05 * g_w / torch.sqrt(1 + g_w**2)
    expect_c = before_c - 0.05 * g_c / torch.sqrt(1 + g_c**2)
    assert torch.allclose(after_w, expect_w, rtol=0, atol=1e-15)
    assert torch.allclose(after_c, expect_c, rtol=0, atol=1e-15)
    G = opt.state[model.word.weight]["sum"]
    assert torch.equal(G[0], torch.ones(5, dtype=torch.float64))
    assert torch.allclose(G[1], 1 + g_w[1] ** 2, rtol=1e-15, atol=0)


def test_tool_rule_accumulates_scaled_squares():
    torch.manual_seed(0)
    model = Glove(Config(dim=3, lr=0.05, adagrad="tool"), 6).double()
    opt = model.configure_optimizers(total_steps=1)
    inputs, targets = torch.tensor([[0, 4]]), torch.tensor([2.0], dtype=torch.float64)
    G = torch.ones(4, dtype=torch.float64)
    for _ in range(3):
        before = model.word.weight.detach().clone()
        opt.zero_grad()
        model(inputs, targets)[1].backward()
        g = model.word.weight.grad.to_dense()[0].clone()
        opt.step()
        # glove.c's scaling: G += (η g)², θ −= η g / sqrt(G)
        G = G + (0.05 * g) ** 2
        expect = before[0] - 0.05 * g / torch.sqrt(G)
        assert torch.allclose(model.word.weight[0].detach(), expect, rtol=0, atol=1e-15)
        assert torch.allclose(opt.state[model.word.weight]["sum"][0], G, rtol=1e-15, atol=0)
    assert (G > 1).all()  # every coordinate had a gradient


@pytest.mark.parametrize("rule", ["standard", "tool"])
def test_dense_gradients_give_the_same_updates(rule):
    models = []
    for sparse in (True, False):
        torch.manual_seed(0)
        models.append(Glove(Config(dim=4, adagrad=rule, sparse_grad=sparse), 10).double())
    opts = [m.configure_optimizers(0) for m in models]
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        inputs = torch.randint(0, 10, (6, 2), generator=g)
        targets = torch.rand(6, generator=g, dtype=torch.float64) * 20 + 0.5
        for m, opt in zip(models, opts, strict=True):
            opt.zero_grad()
            m(inputs, targets)[1].backward()
            opt.step()
    assert models[0].word.weight.grad.is_sparse and not models[1].word.weight.grad.is_sparse
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-15)


def test_output_w_plus_w_tilde():
    model = toy_model()
    assert torch.equal(
        model.embeddings(),
        torch.tensor(W3, dtype=torch.float64) + torch.tensor(WC3, dtype=torch.float64),
    )
    model.config.output = "W"
    assert torch.equal(model.embeddings(), torch.tensor(W3, dtype=torch.float64))
    assert model.embeddings().shape == (3, 2)


def test_init_like_the_tool():
    torch.manual_seed(0)
    model = Glove(Config(dim=50), 400)
    for table in (model.word.weight, model.context.weight):
        assert table.shape == (400, 51)
        assert table.abs().max() <= 0.5 / 50
        assert table.abs().max() > 0.45 / 50  # uniform over the whole range, biases included
    assert model.num_parameters() == 2 * 400 * 51


def low_rank_counts(V: int = 8, seed: int = 0) -> np.ndarray:
    """A symmetric matrix with log X = u_i·u_j + c_i + c_j (rank 2 + biases), X in [1, ~60]."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 0.6, (V, 2))
    c = rng.uniform(0.5, 1.5, V)
    return np.exp(u @ u.T + c[:, None] + c[None, :])


def test_training_fits_log_counts():
    X = low_rank_counts()
    rows, cols = np.nonzero(X)
    torch.manual_seed(0)
    model = Glove(Config(dim=4, x_max=1.0, lr=0.2, batch_size=16), 8)  # x_max 1: f = 1
    opt = model.configure_optimizers(total_steps=0)
    ds = CooccurBatches(rows, cols, X[rows, cols], batch_size=16, seed=1)
    pairs = torch.as_tensor(np.stack([rows, cols], 1))
    targets = torch.as_tensor(X[rows, cols], dtype=torch.float32)

    def J() -> float:
        with torch.no_grad():
            return model(pairs, targets)[1].item()

    first = J()
    for epoch in range(300):
        ds.set_epoch(epoch)
        for inputs, x in ds:
            opt.zero_grad()
            model(inputs, x)[1].backward()
            opt.step()
    assert J() < 1e-3 * first
    with torch.no_grad():
        e = model.residual(pairs, targets)
    assert e.abs().max().item() < 0.05  # w_iᵀw̃_j + b_i + b̃_j ≈ log X_ij everywhere


def test_config_validation():
    with pytest.raises(ConfigError, match="x_max"):
        build(Config, {"x_max": 0}, "run 'glove'")
    with pytest.raises(ConfigError, match="output"):
        build(Config, {"output": "W+C"}, "run 'glove'")
    with pytest.raises(ConfigError, match="adagrad"):
        build(Config, {"adagrad": "adam"}, "run 'glove'")
    with pytest.raises(ConfigError, match="did you mean 'x_max'"):
        build(Config, {"xmax": 10}, "run 'glove'")
    family = FAMILIES["glove"]  # what the pipeline reads about the model: its family record
    assert family.model_class() is Glove
    assert family.input == "cooccur" and family.stateful is False


# --------------------------------------------------------------------------- batches


def entries(n: int = 1000, V: int = 50, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, V, n).astype(np.int32)
    cols = rng.integers(0, V, n).astype(np.int32)
    vals = np.arange(1, n + 1, dtype=np.float64)  # distinct: identifies each entry
    return rows, cols, vals


def epoch_entries(ds: CooccurBatches) -> list[tuple[int, int, float]]:
    out = []
    for inputs, targets in ds:
        assert inputs.dtype == torch.int64 and inputs.shape == (targets.numel(), 2)
        out += [(int(i), int(j), float(x)) for (i, j), x in zip(inputs, targets, strict=True)]
    return out


def test_batches_cover_every_entry_once_per_epoch():
    rows, cols, vals = entries()
    ds = CooccurBatches(rows, cols, vals, batch_size=64, seed=3)
    assert len(ds) == 16  # ⌈1000 / 64⌉
    got = epoch_entries(ds)
    expected = list(zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True))
    assert sorted(got, key=lambda t: t[2]) == expected
    assert max(b[1].numel() for b in ds) <= 64
    ds.set_epoch(1)
    again = epoch_entries(ds)
    assert sorted(again, key=lambda t: t[2]) == expected
    assert [t[2] for t in again] != [t[2] for t in got]  # a fresh order
    ds.set_epoch(0)
    assert epoch_entries(ds) == got  # the order is a function of (seed, epoch)


@pytest.mark.parametrize("world", [2, 3])
def test_sharding_partitions_batches(world):
    rows, cols, vals = entries(n=1001)
    single = CooccurBatches(rows, cols, vals, batch_size=50, seed=5)
    shards = [
        CooccurBatches(rows, cols, vals, batch_size=50, rank=r, world=world, seed=5)
        for r in range(world)
    ]
    assert len({len(s) for s in shards}) == 1  # every rank runs the same number of steps
    for epoch in (0, 1):
        for s in shards:
            s.set_epoch(epoch)
        got = [x for s in shards for _, targets in s for x in targets.tolist()]
        assert sorted(got) == vals.tolist()  # a partition: each entry on exactly one rank
        # batch k of the epoch's order goes to rank k % world
        order = single.order(epoch)
        nb = shards[0].num_batches
        for k in range(nb):
            lo, hi = shards[0].bounds[k], shards[0].bounds[k + 1]
            want = vals[order[lo:hi].numpy()].tolist()
            assert shards[k % world][k // world][1].tolist() == want


def test_dataloader_follows_set_epoch_through_the_sampler():
    rows, cols, vals = entries()
    loader = cooccur_dataloader(rows, cols, vals, batch_size=100, seed=0)
    assert isinstance(loader.sampler, EpochSampler)
    first = [t.tolist() for _, t in loader]
    loader.sampler.set_epoch(1)  # what Lightning calls at the start of each epoch
    second = [t.tolist() for _, t in loader]
    assert len(first) == len(second) == 10
    assert first != second
    assert sorted(x for batch in second for x in batch) == vals.tolist()


def test_lightning_trains_with_the_sparse_optimizer(tmp_path):
    import pytorch_lightning as pl

    X = low_rank_counts(V=6, seed=2)
    rows, cols = np.nonzero(X)

    class Wrap(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = Glove(Config(dim=3, x_max=1.0, lr=0.1, batch_size=8), 6)
            self.losses: list[float] = []

        def training_step(self, batch, batch_idx):
            _, loss = self.model(*batch)
            self.losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            return self.model.configure_optimizers(self.trainer.estimated_stepping_batches)

    torch.manual_seed(0)
    module = Wrap()
    loader = cooccur_dataloader(rows, cols, X[rows, cols], batch_size=8)
    trainer = pl.Trainer(
        max_epochs=30,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, loader)
    n = len(loader)
    assert loader.sampler.epoch == 29  # Lightning reached the dataset through the sampler
    first, last = np.mean(module.losses[:n]), np.mean(module.losses[-n:])
    assert last < 0.1 * first
