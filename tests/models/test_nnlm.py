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
from nlpzoo.evaluation.perplexity import perplexity, window_log_probs
from nlpzoo.models.nnlm import NNLM, Config

V = 23  # vocabulary size of the toy models
# training counts of the toy vocabulary: frequency-sorted after the specials, some zero
COUNTS = [40, 0, 30, 0, 90, 55, 31, 20, 20, 14, 9, 8, 7, 5, 5, 4, 3, 2, 2, 1, 1, 0, 0]


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(direct: bool, seed: int = 0, counts=None, **kw) -> NNLM:
    torch.manual_seed(seed)
    cfg = Config(context_size=3, emb_dim=5, hidden_dim=7, direct=direct, **kw)
    model = NNLM(cfg, V, counts=counts)
    # non-zero everywhere (PyTorch's default init already is, but make the biases matter too)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
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
def test_token_log_probs_are_normalised_and_gathered(direct):
    model = make_model(direct)
    ctx, tgt = random_batch(5, batch=9)
    with torch.no_grad():
        lp = model.token_log_probs(ctx, tgt)
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


KINDS = [
    ("softmax", {}),
    ("hierarchical", {"counts": COUNTS}),
    ("adaptive", {"cutoffs": [4, 12]}),
    ("adaptive", {"cutoffs": [2, 5, 20], "counts": COUNTS}),
]


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize(("output", "kw"), KINDS)
def test_every_output_is_normalised(output, kw, direct):
    model = make_model(direct, output=output, **kw).double()
    ctx, tgt = random_batch(6, batch=11)
    with torch.no_grad():
        full = model.log_prob_all(ctx).double()  # (11, V)
        lp = model.token_log_probs(ctx, tgt)
        logits, loss = model(ctx, tgt)
    assert full.shape == (11, V) and lp.shape == (11,)
    torch.testing.assert_close(
        full.exp().sum(1), torch.ones(11, dtype=torch.float64), atol=1e-9, rtol=0
    )
    assert full.exp().max() > 1.5 / V  # not uniform
    torch.testing.assert_close(lp, full[torch.arange(11), tgt], atol=1e-10, rtol=0)
    torch.testing.assert_close(-lp.mean(), loss, atol=1e-10, rtol=0)
    assert (logits is None) == (output != "softmax")  # only the softmax forms all V scores
    no_logits, no_loss = model(ctx)
    assert no_loss is None and (no_logits is None) == (logits is None)


def features_by_hand(model: NNLM, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x = (C[ctx_0], C[ctx_1], ...) and a = tanh(d + H x), one row at a time."""
    xs = torch.stack([torch.cat([model.C.weight[int(w)] for w in row]) for row in ctx])
    return xs, torch.tanh(model.H.bias + xs @ model.H.weight.T)


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize(("output", "kw"), KINDS[1:3])
def test_direct_feeds_the_features_to_the_output_layer(output, kw, direct):
    """Hierarchical and adaptive outputs with direct connections read z = [tanh(d + H x); x]."""
    model = make_model(direct, output=output, **kw).double()
    assert model.W is None  # no separate W: the output layer itself sees x
    n1m = 3 * 5
    assert model.U.in_features == 7 + (n1m if direct else 0)
    ctx, tgt = random_batch(7, batch=5)
    with torch.no_grad():
        x, a = features_by_hand(model, ctx)
        z = torch.cat([a, x], dim=1) if direct else a
        torch.testing.assert_close(model.token_log_probs(ctx, tgt), model.U.log_prob(z, tgt))
        if direct:  # x really matters: zeroing the columns that read it changes the answer
            before = model.token_log_probs(ctx, tgt)
            weights = model.U.weight if output == "hierarchical" else model.U.head.weight
            weights[:, 7:] = 0
            assert not torch.allclose(model.token_log_probs(ctx, tgt), before, atol=1e-4)


def test_adaptive_without_cutoffs_has_the_softmax_perplexity():
    """NNLM(adaptive, cutoffs []) with the softmax NNLM's weights scores the same stream alike."""
    softmax = make_model(direct=False, seed=8).eval()
    adaptive = NNLM(
        Config(context_size=3, emb_dim=5, hidden_dim=7, output="adaptive", cutoffs=[]), V
    )
    state = softmax.state_dict()
    state["U.head.weight"] = state.pop("U.weight")
    state["U.head.bias"] = state.pop("U.bias")
    adaptive.load_state_dict(state)
    adaptive.eval()
    stream = np.random.default_rng(9).integers(0, V, size=41)
    lp_soft = window_log_probs(softmax, stream, 3, batch_size=16)
    lp_adapt = window_log_probs(adaptive, stream, 3, batch_size=16)
    np.testing.assert_allclose(lp_adapt, lp_soft, rtol=1e-6, atol=1e-6)
    assert perplexity(lp_adapt) == pytest.approx(perplexity(lp_soft), rel=1e-6)
    assert perplexity(lp_soft) > 5  # a real, untrained model, not a degenerate one


def test_hierarchical_round_trips_through_the_state_dict():
    model = make_model(direct=True, output="hierarchical", counts=COUNTS)
    other = NNLM(model.config, V, counts=list(reversed(COUNTS)))  # another tree, loaded over
    other.load_state_dict(model.state_dict())
    ctx, tgt = random_batch(10)
    with torch.no_grad():
        torch.testing.assert_close(other.token_log_probs(ctx, tgt), model.token_log_probs(ctx, tgt))
    # the parameters: C, H and d, one vector and bias per inner node (h + (n−1)m wide with direct)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == V * 5 + (7 * 15 + 7) + (V - 1) * (7 + 15 + 1)


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
def test_cost_softmax(direct):
    """Mikolov et al. (2013): Q = N·D + N·D·H + H·V, plus N·D·V for the direct connections."""
    N, D, H = 3, 5, 7
    model = make_model(direct)
    expected = N * D + N * D * H + H * V + (N * D * V if direct else 0)
    assert model.cost(V).multiply_adds == expected
    # beyond the N·D copy of the context vectors, one multiply-add per weight of H, U (and W)
    weights = model.H.weight.numel() + model.U.weight.numel()
    weights += model.W.weight.numel() if direct else 0
    assert model.cost(V).multiply_adds == N * D + weights
    assert model.cost(2 * V).multiply_adds > model.cost(V).multiply_adds


@pytest.mark.parametrize("direct", [False, True])
def test_cost_hierarchical_and_adaptive(direct):
    N, D, H = 3, 5, 7
    d_out = H + (N * D if direct else 0)  # direct: the output layer reads [tanh(d + Hx); x]
    hier = make_model(direct, output="hierarchical", counts=COUNTS)
    assert hier.cost(V).multiply_adds == pytest.approx(N * D + N * D * H + d_out * math.log2(V))
    assert hier.cost(1024).multiply_adds == pytest.approx(N * D + N * D * H + d_out * 10)
    # the Huffman tree's measured path is shorter than log₂V (skewed counts)
    assert hier.U.num_ops_per_token() < d_out * math.log2(V)
    adaptive = make_model(direct, output="adaptive", cutoffs=[4, 12], counts=COUNTS)
    out = adaptive.U.num_ops_per_token()
    assert adaptive.cost(V).multiply_adds == pytest.approx(N * D + N * D * H + out)
    assert d_out * (4 + 2) < out < d_out * V


# ---------------------------------------------------------------------------------- smoke training


@pytest.mark.parametrize(
    ("output", "direct"),
    [("softmax", True), ("softmax", False), ("hierarchical", True), ("hierarchical", False),
     ("adaptive", True), ("adaptive", False)],
)  # fmt: skip
def test_learns_a_repeating_sequence(output, direct):
    torch.manual_seed(0)
    period = [4, 5, 6, 7, 8, 9, 10, EOS]
    stream = np.array(period * 30, dtype=np.int64)
    ds = ContextWindows(stream, context_size=3)
    ctx, tgt = ds.__getitems__(list(range(len(ds))))
    counts = np.bincount(stream, minlength=12)  # ids 0, 1, 3, 11 never occur: zero counts
    cfg = Config(
        context_size=3, emb_dim=8, hidden_dim=16, direct=direct, output=output, cutoffs=[6, 9]
    )
    model = NNLM(cfg, 12, counts=counts)
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
    assert losses[0] > 0.8 * math.log(8)  # starts far from the answer
    with torch.no_grad():
        _, final = model(ctx, tgt)
        lp = model.token_log_probs(ctx, tgt)
    # the sequence is deterministic given 3 previous tokens: the loss must collapse
    assert final.item() < 0.2 * losses[0]
    assert final.item() < 0.3
    torch.testing.assert_close(-lp.mean(), final, rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("output", ["sigmoid", "Softmax", "nce"])
def test_unknown_output_is_refused(output):
    with pytest.raises(ConfigError) as e:
        build(Config, {"output": output}, where="run 'nnlm'")
    assert "run 'nnlm'" in str(e.value)
    assert "'output'" in str(e.value)


@pytest.mark.parametrize("output", ["softmax", "hierarchical", "adaptive"])
def test_every_output_kind_builds(output):
    cfg = build(Config, {"output": output, "cutoffs": [100]}, where="run 'nnlm'")
    assert (cfg.output, cfg.cutoffs) == (output, [100])
    assert Config().cutoffs == [2000, 6000] and Config().cutoffs is not Config().cutoffs


@pytest.mark.parametrize("cutoffs", [[6000, 2000], [5, 5], [0, 10], [-1]])
def test_cutoffs_not_increasing_are_refused(cutoffs):
    with pytest.raises(ConfigError, match="'cutoffs'"):
        build(Config, {"output": "adaptive", "cutoffs": cutoffs}, where="run 'nnlm'")


def test_cutoffs_beyond_the_vocabulary_are_refused_at_build_time():
    cfg = Config(context_size=2, emb_dim=3, hidden_dim=4, output="adaptive", cutoffs=[5, 23])
    with pytest.raises(ConfigError, match=r"'cutoffs'.*23"):
        NNLM(cfg, V)
    NNLM(Config(context_size=2, emb_dim=3, hidden_dim=4, output="adaptive", cutoffs=[5, 22]), V)
    # the softmax ignores the (default) cut-offs whatever V is
    NNLM(Config(context_size=2, emb_dim=3, hidden_dim=4), V)


def test_hierarchical_needs_counts():
    cfg = Config(context_size=2, emb_dim=3, hidden_dim=4, output="hierarchical")
    with pytest.raises(ConfigError, match="counts"):
        NNLM(cfg, V)
    with pytest.raises(ValueError, match="counts has 22 entries"):
        NNLM(cfg, V, counts=COUNTS[:-1])


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
