"""Tests for Bengio et al.'s (2003) neural probabilistic LM (nlpzoo.models.nnlm) and its windows
over the token stream (nlpzoo.data.lm.ContextWindows)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from nlpzoo.config import build
from nlpzoo.data.lm import ContextWindows, collate_batched
from nlpzoo.data.vocab import EOS
from nlpzoo.errors import ConfigError
from nlpzoo.models.nnlm import NNLM, Config

V = 23  # vocabulary size of the toy models


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_model(direct: bool, seed: int = 0, **kw) -> NNLM:
    torch.manual_seed(seed)
    cfg = Config(context_size=3, emb_dim=5, hidden_dim=7, direct=direct, **kw)
    model = NNLM(cfg, V)
    # non-zero everywhere (PyTorch's default init already is, but make the biases matter too)
    with torch.no_grad():
        model.H.bias.uniform_(-0.5, 0.5)
        model.U.bias.uniform_(-0.5, 0.5)
    return model


def random_batch(seed: int, batch: int = 6, context: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, V, (batch, context), generator=g)
    return ctx, torch.randint(0, V, (batch,), generator=g)


def hand_logits(model: NNLM, ctx: torch.Tensor, direct: bool | None = None) -> torch.Tensor:
    """y = b + W x + U tanh(d + H x), x = (C[ctx_0], C[ctx_1], ...) with loops and matmuls only."""
    C = model.C.weight
    Hw, d = model.H.weight, model.H.bias
    Uw, b = model.U.weight, model.U.bias
    rows = []
    for i in range(ctx.shape[0]):
        x = torch.cat([C[int(w)] for w in ctx[i]])  # oldest context word first
        y = b + Uw @ torch.tanh(d + Hw @ x)
        if model.W is not None if direct is None else direct:
            y = y + model.W.weight @ x
        rows.append(y)
    return torch.stack(rows)


# ---------------------------------------------------------------------------------- forward


@pytest.mark.parametrize("direct", [False, True])
def test_forward_is_b_plus_Wx_plus_U_tanh_d_plus_Hx(direct):
    model = make_model(direct)
    ctx, tgt = random_batch(1)
    with torch.no_grad():
        logits, loss = model(ctx, tgt)
        expected = hand_logits(model, ctx)
    assert logits.shape == (6, V)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-6)
    assert (model.W is not None) == direct
    # the loss is the mean cross-entropy, written out: −mean(y_t − log Σ_j exp y_j)
    nll = -(expected[torch.arange(6), tgt] - torch.logsumexp(expected, dim=1)).mean()
    torch.testing.assert_close(loss, nll, rtol=1e-5, atol=1e-6)
    assert model(ctx)[1] is None  # no targets, no loss


def test_direct_connections_change_the_output():
    """W is really added: zeroing it recovers the model without direct connections."""
    model = make_model(direct=True)
    ctx, _ = random_batch(2)
    with torch.no_grad():
        with_w, _ = model(ctx)
        torch.testing.assert_close(with_w, hand_logits(model, ctx), rtol=1e-5, atol=1e-6)
        model.W.weight.zero_()
        without_w, _ = model(ctx)
    assert not torch.allclose(with_w, without_w, atol=1e-3)
    expected = hand_logits(model, ctx, direct=False)
    torch.testing.assert_close(without_w, expected, rtol=1e-5, atol=1e-6)


def test_context_order_matters():
    """The concatenation keeps positions apart: reversing the context changes the prediction."""
    model = make_model(direct=True)
    ctx, _ = random_batch(3)
    with torch.no_grad():
        a, _ = model(ctx)
        b, _ = model(ctx.flip(1))
    assert not torch.allclose(a, b, atol=1e-4)


def test_dropout_is_off_in_eval_mode():
    model = make_model(direct=True, dropout=0.5).eval()
    ctx, _ = random_batch(4)
    with torch.no_grad():
        torch.testing.assert_close(model(ctx)[0], hand_logits(model, ctx), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("direct", [False, True])
def test_log_probs_are_normalised_and_gathered(direct):
    model = make_model(direct)
    ctx, tgt = random_batch(5, batch=9)
    with torch.no_grad():
        lp = model.log_probs(ctx, tgt)
        full = torch.log_softmax(hand_logits(model, ctx).double(), dim=1)
    assert lp.shape == (9,)
    # each distribution over all V words sums to one
    torch.testing.assert_close(
        torch.logsumexp(full, dim=1), torch.zeros(9, dtype=torch.float64), atol=1e-9, rtol=0
    )
    torch.testing.assert_close(lp.double(), full[torch.arange(9), tgt], rtol=1e-5, atol=1e-5)
    assert (lp < 0).all()
    # the mean of −log_probs is the loss
    torch.testing.assert_close(-lp.mean(), model(ctx, tgt)[1].detach(), rtol=1e-5, atol=1e-6)


def test_embeddings_are_C():
    model = make_model(direct=False)
    emb = model.embeddings()
    assert emb.shape == (V, 5)
    assert torch.equal(emb, model.C.weight)
    assert not emb.requires_grad


# ---------------------------------------------------------------------------------- size and cost


@pytest.mark.parametrize(
    ("n1", "m", "h", "vocab"), [(4, 60, 100, 50), (2, 3, 11, 17), (1, 8, 5, 9)]
)
def test_parameter_count_matches_the_paper(n1, m, h, vocab):
    """Bengio et al. (2003), section 2: |V|(1 + n·m + h) + h(1 + (n−1)·m) with direct connections.

    C is V×m, H is h×(n−1)m plus d (h), U is V×h plus b (V), W is V×(n−1)m.
    """
    n = n1 + 1
    for direct in (True, False):
        model = NNLM(Config(context_size=n1, emb_dim=m, hidden_dim=h, direct=direct), vocab)
        count = sum(p.numel() for p in model.parameters())
        if direct:
            expected = vocab * (1 + n * m + h) + h * (1 + (n - 1) * m)
        else:  # without W: V(1 + m + h) + h(1 + (n−1)m)
            expected = vocab * (1 + m + h) + h * (1 + (n - 1) * m)
        assert count == expected


@pytest.mark.parametrize("direct", [False, True])
def test_cost_per_token(direct):
    n1, m, h = 3, 5, 7
    model = make_model(direct)
    expected = n1 * m * h + h * V + (n1 * m * V if direct else 0)
    assert model.cost_per_token(V) == expected
    # one multiply-add per weight of H, U (and W): C is a lookup, biases are adds
    weights = model.H.weight.numel() + model.U.weight.numel()
    weights += model.W.weight.numel() if direct else 0
    assert model.cost_per_token(V) == weights
    assert model.cost_per_token(2 * V) > model.cost_per_token(V)


# ---------------------------------------------------------------------------------- smoke training


def test_learns_a_repeating_sequence():
    torch.manual_seed(0)
    period = [4, 5, 6, 7, 8, 9, 10, EOS]
    stream = np.array(period * 30, dtype=np.int64)
    ds = ContextWindows(stream, context_size=3)
    ctx, tgt = ds.__getitems__(list(range(len(ds))))
    model = NNLM(Config(context_size=3, emb_dim=8, hidden_dim=16, direct=True), 12)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(100):
        idx = torch.randint(0, len(ds), (32,), generator=g)
        _, loss = model(ctx[idx], tgt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses)
    assert losses[0] > 0.8 * math.log(12)  # starts near uniform
    with torch.no_grad():
        _, final = model(ctx, tgt)
    # the sequence is deterministic given 3 previous tokens: the loss must collapse
    assert final.item() < 0.2 * losses[0]
    assert final.item() < 0.3


# ---------------------------------------------------------------------------------- ContextWindows


def windows_by_hand(stream: list[int], n1: int) -> list[tuple[list[int], int]]:
    out = []
    for t, tok in enumerate(stream):
        prev = stream[max(0, t - n1) : t]
        out.append(([EOS] * (n1 - len(prev)) + prev, tok))
    return out


@pytest.mark.parametrize("n1", [1, 2, 4, 9])
def test_context_windows_items(n1):
    rng = np.random.default_rng(n1)
    stream = rng.integers(0, 30, size=7).tolist()
    ds = ContextWindows(np.array(stream), n1)
    assert len(ds) == len(stream)
    for t, (ctx, tgt) in enumerate(windows_by_hand(stream, n1)):
        c, y = ds[t]
        assert c.dtype == torch.int64 and c.shape == (n1,)
        assert c.tolist() == ctx, t
        assert int(y) == tgt == stream[t]


def test_context_windows_first_item_is_all_padding():
    ds = ContextWindows(np.array([11, 12, 13]), 3)
    c, y = ds[0]
    assert c.tolist() == [EOS, EOS, EOS] and int(y) == 11
    c, y = ds[2]
    assert c.tolist() == [EOS, 11, 12] and int(y) == 13


def test_getitems_equals_stacked_getitem():
    rng = np.random.default_rng(1)
    ds = ContextWindows(rng.integers(0, 50, size=40), 4)
    idx = [39, 0, 5, 5, 17, 3, 38]
    ctx, tgt = ds.__getitems__(idx)
    assert ctx.shape == (7, 4) and tgt.shape == (7,)
    assert torch.equal(ctx, torch.stack([ds[i][0] for i in idx]))
    assert torch.equal(tgt, torch.stack([ds[i][1] for i in idx]))


def test_every_token_is_a_target_exactly_once():
    rng = np.random.default_rng(2)
    stream = rng.integers(0, 50, size=53)
    ds = ContextWindows(stream, 3)
    _, tgt = ds.__getitems__(list(range(len(ds))))
    assert tgt.tolist() == stream.tolist()
    # the same through a DataLoader with the batched fetch, shuffled, batch size not dividing 53
    loader = DataLoader(ds, batch_size=7, shuffle=True, collate_fn=collate_batched)
    seen = []
    for ctx, y in loader:
        assert ctx.shape == (y.shape[0], 3)
        seen.extend(zip(map(tuple, ctx.tolist()), y.tolist(), strict=True))
    expected = [(tuple(c), y) for c, y in windows_by_hand(stream.tolist(), 3)]
    assert sorted(seen) == sorted(expected)


# ---------------------------------------------------------------------------------- config


def test_default_config_builds():
    cfg = build(Config, {}, where="run 'nnlm'")
    assert (cfg.context_size, cfg.output, cfg.direct) == (4, "softmax", False)


@pytest.mark.parametrize("output", ["hierarchical", "adaptive", "sigmoid"])
def test_output_other_than_softmax_is_refused(output):
    with pytest.raises(ConfigError) as e:
        build(Config, {"output": output}, where="run 'nnlm'")
    assert "run 'nnlm'" in str(e.value)
    assert "'output'" in str(e.value)


@pytest.mark.parametrize("key", ["context_size", "emb_dim", "hidden_dim", "batch_size"])
@pytest.mark.parametrize("value", [-3, 0])
def test_non_positive_sizes_are_refused(key, value):
    with pytest.raises(ConfigError) as e:
        build(Config, {key: value}, where="run 'my_nnlm'")
    msg = str(e.value)
    assert "run 'my_nnlm'" in msg
    assert f"'{key}'" in msg
    assert str(value) in msg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dropout", 1.0),
        ("dropout", -0.1),
        ("lr", 0.0),
        ("lr_decay", -1.0),
        ("weight_decay", -1e-4),
        ("optimizer", "adagrad"),
    ],
)
def test_impossible_values_are_refused(key, value):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        build(Config, {key: value}, where="run 'nnlm'")


def test_wrong_type_and_unknown_key_are_refused():
    with pytest.raises(ConfigError, match="'emb_dim'"):
        build(Config, {"emb_dim": 6.5}, where="run 'nnlm'")
    with pytest.raises(ConfigError, match="did you mean 'hidden_dim'"):
        build(Config, {"hiden_dim": 6}, where="run 'nnlm'")
