"""Tests for the recurrent language models (nlpzoo.models.rnn_lm): Elman tanh RNN and deep LSTM."""

from __future__ import annotations

import math

import pytest
import torch

from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.models.rnn_lm import RNNLM, Config

V = 17  # vocabulary size of the toy models
CELLS = ["rnn", "lstm"]


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(cell: str, seed: int = 0, **kw) -> RNNLM:
    torch.manual_seed(seed)
    settings = {"emb_dim": 6, "hidden_dim": 8, "num_layers": 2, "tie_weights": False}
    settings.update(kw)
    # init 0.5, not 0.1: larger weights make every position's influence visible in the tests
    return RNNLM(Config(cell=cell, init_range=0.5, **settings), V).eval()


def parts(state) -> tuple[torch.Tensor, ...]:
    """h, or (h, c), as a tuple."""
    return state if isinstance(state, tuple) else (state,)


def random_tokens(seed: int, batch: int = 3, time: int = 10) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (batch, time), generator=g)


def hand_logits(model: RNNLM, tokens: torch.Tensor) -> torch.Tensor:
    """The paper equations with loops and matmuls only, from zero state (eval mode, no dropout)."""
    c, r = model.config, model.rnn
    B, T = tokens.shape
    x = model.embed.weight[tokens]  # (B, T, d)
    for layer in range(c.num_layers):
        W_ih, W_hh = getattr(r, f"weight_ih_l{layer}"), getattr(r, f"weight_hh_l{layer}")
        b = getattr(r, f"bias_ih_l{layer}") + getattr(r, f"bias_hh_l{layer}")
        h = torch.zeros(B, c.hidden_dim)
        cell = torch.zeros(B, c.hidden_dim)
        outs = []
        for t in range(T):
            a = x[:, t] @ W_ih.T + h @ W_hh.T + b
            if c.cell == "rnn":  # Elman: h_t = tanh(W_ih x_t + W_hh h_{t-1} + b)
                h = torch.tanh(a)
            else:  # LSTM, gate rows in the order i, f, g, o
                i, f, g, o = a.chunk(4, dim=1)
                cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(cell)
            outs.append(h)
        x = torch.stack(outs, dim=1)  # (B, T, h), the input of the next layer
    return x @ model.out.weight.T + model.out.bias


# ---------------------------------------------------------------------------------- forward


@pytest.mark.parametrize("cell", CELLS)
def test_forward_is_the_written_out_recurrence(cell):
    model = make_model(cell)
    tokens, targets = random_tokens(1), random_tokens(2)
    with torch.no_grad():
        logits, loss, state = model(tokens, targets)
        expected = hand_logits(model, tokens)
    assert logits.shape == (3, 10, V)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    # the loss is the mean cross-entropy over all B·T targets, written out
    nll = -(expected.gather(-1, targets[..., None]).squeeze(-1) - expected.logsumexp(-1)).mean()
    torch.testing.assert_close(loss, nll, rtol=1e-5, atol=1e-6)
    h = state if cell == "rnn" else state[0]
    assert h.shape == (2, 3, 8)
    # the last layer's final h is the hidden vector the last logits were computed from
    torch.testing.assert_close(model.out(h[-1]), logits[:, -1], rtol=1e-5, atol=1e-6)
    assert model(tokens)[1] is None  # no targets, no loss


@pytest.mark.parametrize("cell", CELLS)
def test_changing_the_future_never_changes_the_past(cell):
    model = make_model(cell)
    tokens = random_tokens(3, time=12)
    with torch.no_grad():
        before, _, _ = model(tokens)
        for t in (0, 4, 10):
            changed = tokens.clone()
            changed[:, t + 1 :] = (changed[:, t + 1 :] + 1 + t) % V  # every token after t differs
            after, _, _ = model(changed)
            torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=0)
            # and the future really is read: the next position's prediction changes
            assert not torch.allclose(after[:, t + 1], before[:, t + 1], atol=1e-4)


@pytest.mark.parametrize("cell", CELLS)
def test_state_carried_across_blocks_equals_one_long_run(cell):
    """What truncated BPTT relies on: block 2 started from block 1's final state."""
    model = make_model(cell, dropout=0.3)  # eval mode: dropout off
    tokens, targets = random_tokens(4, time=14), random_tokens(5, time=14)
    with torch.no_grad():
        whole, _, final = model(tokens)
        lp_whole, _ = model.token_log_probs(tokens, targets)
        first, _, state = model(tokens[:, :6])
        second, _, final2 = model(tokens[:, 6:], None, state)
        lp1, s = model.token_log_probs(tokens[:, :6], targets[:, :6])
        lp2, _ = model.token_log_probs(tokens[:, 6:], targets[:, 6:], s)
        # restarting block 2 from zeros forgets block 1
        fresh, _, _ = model(tokens[:, 6:], None, model.init_state(3, "cpu"))
        lp_fresh, _ = model.token_log_probs(tokens[:, 6:], targets[:, 6:])
    torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.cat([lp1, lp2], 1), lp_whole, rtol=1e-5, atol=1e-6)
    assert len(parts(final)) == (2 if cell == "lstm" else 1)
    for a, b in zip(parts(final), parts(final2), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(fresh, whole[:, 6:], atol=1e-3)
    assert not torch.allclose(lp_fresh, lp_whole[:, 6:], atol=1e-3)
    # a state of None means zeros
    with torch.no_grad():
        torch.testing.assert_close(fresh, model(tokens[:, 6:])[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cell", CELLS)
def test_init_and_detach_state(cell):
    model = make_model(cell, num_layers=3)
    state = model.init_state(5, "cpu")
    assert isinstance(state, tuple) == (cell == "lstm")
    for s in parts(state):
        assert s.shape == (3, 5, 8) and not s.any()
    # after a forward pass the state is in the graph; detach cuts it but keeps the values
    model.train()
    _, _, state = model(random_tokens(6, batch=5), random_tokens(7, batch=5))
    assert all(s.requires_grad for s in parts(state))
    cut = model.detach_state(state)
    assert type(cut) is type(state)
    for s, d in zip(parts(state), parts(cut), strict=True):
        assert not d.requires_grad and torch.equal(s, d)


@pytest.mark.parametrize("cell", CELLS)
def test_dropout_only_in_training_mode(cell):
    model = make_model(cell, dropout=0.5)
    tokens = random_tokens(8)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[0], hand_logits(model, tokens), atol=1e-5, rtol=0)
        model.train()
        a, b = model(tokens)[0], model(tokens)[0]
    assert not torch.allclose(a, b, atol=1e-3)


# ---------------------------------------------------------------------------------- log-probs


@pytest.mark.parametrize("cell", CELLS)
def test_token_log_probs_are_normalised_and_gathered(cell):
    model = make_model(cell)
    tokens, targets = random_tokens(9), random_tokens(10)
    with torch.no_grad():
        logits, loss, _ = model(tokens, targets)
        lp, state = model.token_log_probs(tokens, targets)
    assert lp.shape == (3, 10) and lp.dtype == torch.float32
    full = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
    torch.testing.assert_close(lp.double(), full.gather(-1, targets[..., None]).squeeze(-1))
    # exp(log p) sums to one over the whole vocabulary at every position
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(3, 10, dtype=torch.float64))
    assert (lp < 0).all()
    torch.testing.assert_close(-lp.mean(), loss, rtol=1e-5, atol=1e-6)
    h = state if cell == "rnn" else state[0]
    assert h.shape == (2, 3, 8)


# ---------------------------------------------------------------------------------- weight tying


@pytest.mark.parametrize("cell", CELLS)
def test_weight_tying_shares_the_embedding(cell):
    tied = make_model(cell, emb_dim=8, tie_weights=True)
    untied = make_model(cell, emb_dim=8, tie_weights=False)
    assert tied.out.weight is tied.embed.weight
    assert tied.out.weight.data_ptr() == tied.embed.weight.data_ptr()
    assert untied.out.weight.data_ptr() != untied.embed.weight.data_ptr()
    n_tied = sum(p.numel() for p in tied.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_tied == V * 8
    # one parameter: a change to the embedding is a change to the output layer
    with torch.no_grad():
        tied.embed.weight[3].add_(1.0)
    torch.testing.assert_close(tied.out.weight[3], tied.embed.weight[3], rtol=0, atol=0)
    # and it receives the gradient of both uses
    tokens = random_tokens(11)
    _, loss, _ = tied.train()(tokens, random_tokens(12))
    loss.backward()
    unused = sorted(set(range(V)) - set(tokens.flatten().tolist()))
    assert unused, "the test needs a word that is never an input"
    assert tied.embed.weight.grad[unused].abs().sum() > 0  # output-layer gradient only


def test_tying_mismatched_sizes_is_refused():
    with pytest.raises(ConfigError) as e:
        build(Config, {"emb_dim": 100, "hidden_dim": 150, "tie_weights": True}, "run 'lstm_lm'")
    msg = str(e.value)
    assert "run 'lstm_lm'" in msg and "'tie_weights'" in msg
    assert "100" in msg and "150" in msg
    # untied, the sizes may differ
    build(Config, {"emb_dim": 100, "hidden_dim": 150, "tie_weights": False}, "run 'lstm_lm'")


# ---------------------------------------------------------------------------------- size and cost


@pytest.mark.parametrize("tie", [False, True])
def test_deep_lstm_parameter_count(tie):
    """nn.LSTM layer: 4·(h·(in + h) + 2h) (W_ih, W_hh, b_ih, b_hh); in = d, then h."""
    d = h = 7
    if not tie:
        d = 5
    model = RNNLM(Config(cell="lstm", emb_dim=d, hidden_dim=h, num_layers=3, tie_weights=tie), V)
    layers = 4 * (h * (d + h) + 2 * h) + 2 * 4 * (h * (h + h) + 2 * h)
    expected = V * d + layers + (0 if tie else V * h) + V  # E, 3 layers, U, b
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.rnn.num_layers == 3


def test_rnn_parameter_count():
    """Elman layer: h·(in + h) + 2h."""
    d, h = 5, 7
    model = RNNLM(Config(cell="rnn", emb_dim=d, hidden_dim=h, num_layers=2, tie_weights=False), V)
    expected = V * d + (h * (d + h) + 2 * h) + (h * (h + h) + 2 * h) + V * h + V
    assert sum(p.numel() for p in model.parameters()) == expected


@pytest.mark.parametrize("cell", CELLS)
def test_cost(cell):
    model = make_model(cell, num_layers=3)
    g = 1 if cell == "rnn" else 4
    expected = g * 8 * (6 + 8) + 2 * g * 8 * (8 + 8) + 8 * V
    assert model.cost(V).multiply_adds == expected
    # one multiply-add per weight of the recurrent layers and of U: E is a lookup
    weights = sum(p.numel() for n, p in model.rnn.named_parameters() if n.startswith("weight"))
    assert model.cost(V).multiply_adds == weights + model.out.weight.numel()


def test_embeddings_are_the_input_table():
    model = make_model("lstm")
    emb = model.embeddings()
    assert emb.shape == (V, 6)
    assert torch.equal(emb, model.embed.weight) and not emb.requires_grad


def test_uniform_init_range():
    model = RNNLM(Config(init_range=0.05, emb_dim=30, hidden_dim=30), 50)
    for name, p in model.named_parameters():
        assert p.abs().max() <= 0.05, name
        assert p.abs().max() > 0.03, name  # really drawn from the whole range


# ---------------------------------------------------------------------------------- smoke training


@pytest.mark.parametrize("cell", CELLS)
def test_learns_a_repeated_pattern_with_carried_state(cell):
    """Truncated BPTT on a stream cut into B rows, T tokens per step, state carried (detached).

    The pattern repeats the token 1, so the next token after 1 depends on the one before it:
    a bigram cannot get the loss to zero, a recurrent state can.
    """
    torch.manual_seed(0)
    pattern = [1, 2, 3, 1, 4, 5, 1]
    B, T, steps = 4, 8, 60
    n = steps * T + 1
    stream = torch.tensor(pattern * (B * n // len(pattern) + 1))[: B * n]
    rows = stream.view(B, n)  # rows start at different phases of the pattern
    cfg = Config(cell=cell, emb_dim=16, hidden_dim=16, num_layers=1, dropout=0.0, lr=3e-2)
    model = RNNLM(cfg, 8)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state = model.init_state(B, "cpu")
    losses = []
    for step in range(steps):
        x = rows[:, step * T : step * T + T]  # (B, T)
        y = rows[:, step * T + 1 : step * T + T + 1]  # (B, T), shifted by one
        _, loss, state = model(x, y, state)
        state = model.detach_state(state)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses)
    assert losses[0] > 0.8 * math.log(8)  # starts near uniform
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.25 * first
    # below what the best bigram model can do: after 1 the next token is 2, 4 or 1 (log 3 / 3)
    assert last < math.log(3) * 3 / 7 / 2


# ---------------------------------------------------------------------------------- config


def test_default_config_builds():
    cfg = build(Config, {}, "run 'lstm_lm'")
    assert (cfg.cell, cfg.output, cfg.bptt, cfg.init_range) == ("lstm", "softmax", 35, 0.1)
    assert cfg.tie_weights and cfg.emb_dim == cfg.hidden_dim  # the defaults can be tied
    cfg = build(Config, {"cell": "rnn", "num_layers": 1}, "run 'rnn_lm'")
    assert isinstance(RNNLM(cfg, V).rnn, torch.nn.RNN)
    assert RNNLM(cfg, V).rnn.nonlinearity == "tanh"
    assert isinstance(RNNLM(Config(cell="lstm"), V).rnn, torch.nn.LSTM)


@pytest.mark.parametrize("key", ["emb_dim", "hidden_dim", "num_layers", "bptt", "batch_size"])
@pytest.mark.parametrize("value", [-3, 0])
def test_non_positive_sizes_are_refused(key, value):
    with pytest.raises(ConfigError) as e:
        build(Config, {key: value, "tie_weights": False}, "run 'my_lstm'")
    msg = str(e.value)
    assert "run 'my_lstm'" in msg and f"'{key}'" in msg and str(value) in msg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cell", "gru"),
        ("cell", "LSTM"),
        ("dropout", 1.0),
        ("dropout", 1.5),
        ("dropout", -0.1),
        ("output", "sampled"),
        ("optimizer", "adagrad"),
        ("lr", 0.0),
        ("lr_decay", -1.0),
        ("weight_decay", -1e-4),
        ("init_range", 0.0),
    ],
)
def test_impossible_values_are_refused(key, value):
    with pytest.raises(ConfigError) as e:
        build(Config, {key: value}, "run 'x'")
    assert "run 'x'" in str(e.value) and f"'{key}'" in str(e.value)


def test_wrong_type_and_unknown_key_are_refused():
    with pytest.raises(ConfigError, match="'num_layers'"):
        build(Config, {"num_layers": 2.5}, "run 'x'")
    with pytest.raises(ConfigError, match="did you mean 'tie_weights'"):
        build(Config, {"tie_weight": True}, "run 'x'")


@pytest.mark.parametrize("output", ["adaptive", "hierarchical"])
def test_other_outputs_give_normalised_exact_log_probs(output):
    """Adaptive and hierarchical outputs: the log-probabilities of every word sum to 1, the
    loss is the mean of −log p(target), and the state carries on as with the softmax."""
    torch.manual_seed(0)
    counts = list(range(V, 0, -1))  # frequency-sorted ids, as the vocabulary stage writes them
    cfg = Config(
        cell="lstm",
        emb_dim=8,
        hidden_dim=8,
        num_layers=2,
        tie_weights=False,
        output=output,
        cutoffs=[5, 12],
        dropout=0.0,
    )
    model = RNNLM(cfg, V, counts=counts).eval()
    inputs, targets = random_tokens(3), random_tokens(4)
    lp, _ = model.token_log_probs(inputs, targets)
    assert lp.shape == targets.shape and bool((lp < 0).all())
    _, loss, _ = model(inputs, targets)
    torch.testing.assert_close(loss, -lp.mean())
    # every word's probability from the same hidden states: sums to 1 at every position
    with torch.no_grad():
        hs, _ = model.rnn(model.embed(inputs), model.init_state(inputs.shape[0]))
        all_lp = model.out.log_prob_all(hs.reshape(-1, 8))  # (B·T, V)
    total = all_lp.double().exp().sum(-1)
    torch.testing.assert_close(total, torch.ones_like(total), rtol=0, atol=1e-5)
    torch.testing.assert_close(all_lp.gather(1, targets.reshape(-1, 1)).view(-1), lp.view(-1))
    # the point of these outputs: fewer multiply-adds per token than h·V
    full = RNNLM(Config(cell="lstm", emb_dim=8, hidden_dim=8, num_layers=2), V)
    assert model.cost(V).multiply_adds < full.cost(V).multiply_adds


def test_tying_needs_the_full_softmax():
    with pytest.raises(ConfigError, match="tie_weights"):
        Config(output="adaptive", tie_weights=True)
    with pytest.raises(ConfigError, match="cutoffs"):
        RNNLM(Config(output="adaptive", tie_weights=False, cutoffs=[V + 5]), V)
