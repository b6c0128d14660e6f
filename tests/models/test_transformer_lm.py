"""Tests for the decoder-only Transformer LM (nlpzoo.models.transformer_lm): attention against
PyTorch's references, a worked example by hand, causality, positions, tying, exact
log-probabilities, config checks and a short training run."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.models.transformer_blocks import (
    Block,
    CausalSelfAttention,
    attention,
    causal_mask,
    sinusoidal_positions,
)
from nlpzoo.models.transformer_lm import Config, TransformerLM

V = 11  # vocabulary size of the toy models
TINY = dict(d_model=16, heads=4, num_layers=2, d_ff=32, block_size=12, dropout=0.0)


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(seed: int = 0, **kw) -> TransformerLM:
    torch.manual_seed(seed)
    model = TransformerLM(Config(**{**TINY, **kw}), V)
    # non-zero biases and LayerNorm gains everywhere, so a wrong wiring cannot hide behind zeros
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.empty_like(p).uniform_(-0.3, 0.3))
    return model.eval()


def random_ids(seed: int, batch: int = 3, length: int = 10) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (batch, length), generator=g)


# -------------------------------------------------------------------------------- attention


@pytest.mark.parametrize("scale", [True, False])
def test_causal_attention_equals_scaled_dot_product_attention(scale):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 5, generator=g) for _ in range(3))  # (B, h, T, d_k)
    out, weights = attention(q, k, v, causal_mask(7), scale=scale)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=None if scale else 1.0)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert weights.shape == (2, 3, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 7))
    assert (weights.triu(1) == 0).all()  # nothing above the diagonal: no look at the future


def test_float_mask_and_no_mask_equal_reference():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 3, generator=g)  # (B, T_q, d_k)
    k, v = torch.randn(2, 6, 3, generator=g), torch.randn(2, 6, 2, generator=g)  # T_k = 6
    bias = torch.randn(4, 6, generator=g)  # an additive float mask
    out, _ = attention(q, k, v, bias)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    out, _ = attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_worked_example_one_head_unscaled():
    # Unscaled causal scores s_ij = q_i·k_j, j ≤ i, by hand:
    #   row 1: q=[0.8,0.6]: k0 0.72+0.24=0.96, k1 0.56+0.30=0.86; e^0.1 = 1.10517,
    #          weights 1.10517/2.10517 = 0.52498 and 1/2.10517 = 0.47502
    #   row 2: q=[0.2,0.9]: k0 0.18+0.36=0.54, k1 0.14+0.45=0.59, k2 0.06+0.72=0.78;
    #          relative to 0.54: 1, e^0.05 = 1.05127, e^0.24 = 1.27125, sum 3.32252,
    #          weights 0.30097, 0.31641, 0.38261
    #   out row 0 = v0 = [0.2, 0.8] (only itself to attend to)
    #   out row 1 = 0.52498·[0.2,0.8] + 0.47502·[0.5,0.3] = [0.10500+0.23751, 0.41998+0.14251]
    #             = [0.34251, 0.56249]
    q = torch.tensor([[1.0, 0.5], [0.8, 0.6], [0.2, 0.9], [0.4, 0.7]])
    k = torch.tensor([[0.9, 0.4], [0.7, 0.5], [0.3, 0.8], [0.5, 0.6]])
    v = torch.tensor([[0.2, 0.8], [0.5, 0.3], [0.7, 0.1], [0.4, 0.6]])
    out, w = attention(q, k, v, causal_mask(4), scale=False)
    tol = dict(rtol=0, atol=1e-3)
    torch.testing.assert_close(w[0], torch.tensor([1.0, 0.0, 0.0, 0.0]), **tol)
    torch.testing.assert_close(w[1], torch.tensor([0.525, 0.475, 0.0, 0.0]), **tol)
    torch.testing.assert_close(w[2], torch.tensor([0.301, 0.316, 0.383, 0.0]), **tol)
    torch.testing.assert_close(out[0], torch.tensor([0.2, 0.8]), **tol)
    torch.testing.assert_close(out[1], torch.tensor([0.3425, 0.5625]), **tol)
    # with the 1/√d_k scale the same scores are flatter: row 1 = softmax([0.96, 0.86] / √2)
    _, w_scaled = attention(q, k, v, causal_mask(4))
    e = math.exp(0.1 / math.sqrt(2))
    assert w_scaled[1, 0].item() == pytest.approx(e / (1 + e), abs=1e-6)


def test_multi_head_module_equals_torch_multihead_attention():
    torch.manual_seed(0)
    C, h, T = 12, 3, 6
    ours = CausalSelfAttention(C, h)
    ref = nn.MultiheadAttention(C, h, batch_first=True)
    with torch.no_grad():
        for lin in (ours.W_q, ours.W_k, ours.W_v, ours.W_o):
            lin.bias.uniform_(-0.5, 0.5)
        ref.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        ref.out_proj.weight.copy_(ours.W_o.weight)
        ref.out_proj.bias.copy_(ours.W_o.bias)
        x = torch.randn(2, T, C)
        expected, _ = ref(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(T))
        torch.testing.assert_close(ours(x), expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------ blocks


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_block_is_add_and_norm_around_attention_and_ffn(norm):
    model = make_model(norm=norm)
    block = model.blocks[0]
    x = torch.randn(2, 5, 16)
    a, f, n1, n2 = block.attn, block.ffn, block.norm1, block.norm2

    def ffn(z):  # max(0, z W_1 + b_1) W_2 + b_2
        return torch.relu(z @ f.W_1.weight.T + f.W_1.bias) @ f.W_2.weight.T + f.W_2.bias

    with torch.no_grad():
        if norm == "post":  # LayerNorm(x + Sublayer(x)), the paper
            y = n1(x + a(x))
            expected = n2(y + ffn(y))
        else:  # x + Sublayer(LayerNorm(x))
            y = x + a(n1(x))
            expected = y + ffn(n2(y))
        torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
    assert isinstance(model.norm_f, nn.LayerNorm) == (norm == "pre")
    assert isinstance(block, Block)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_changing_the_future_never_changes_the_past(norm, positions):
    model = make_model(norm=norm, positions=positions)
    ids = random_ids(2)
    t = 4
    changed = ids.clone()
    changed[:, t + 1 :] = (ids[:, t + 1 :] + 1 + torch.arange(ids.shape[1] - t - 1)) % V
    with torch.no_grad():
        before, _ = model(ids)
        after, _ = model(changed)
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)
    # ...while the changed positions themselves do see their new tokens
    assert (after[:, t + 1 :] - before[:, t + 1 :]).abs().amax() > 1e-3


# --------------------------------------------------------------------- embeddings, positions


def test_sinusoidal_encoding_equals_the_formula():
    d = 16
    pe = sinusoidal_positions(50, d)
    assert pe.shape == (50, d)
    for pos, i in [(0, 0), (1, 0), (3, 2), (17, 5), (49, 7)]:
        angle = pos / 10000 ** (2 * i / d)
        assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_first_block_gets_scaled_embedding_plus_positions(positions):
    model = make_model(positions=positions)
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda mod, args: seen.update(x=args[0]))
    ids = random_ids(3, length=9)
    with torch.no_grad():
        model(ids)
    E = model.tok_emb.weight
    P = model.pe[:9] if positions == "sinusoidal" else model.pos_emb.weight[:9]
    if positions == "sinusoidal":
        torch.testing.assert_close(P, sinusoidal_positions(12, 16)[:9])
    expected = E[ids] * math.sqrt(16) + P  # √d_model · E[w] + PE (§3.4, §3.5)
    torch.testing.assert_close(seen["x"], expected.detach(), rtol=1e-5, atol=1e-6)


def test_output_layer_is_tied_to_the_embedding():
    model = make_model()
    assert model.lm_head.weight is model.tok_emb.weight
    # one copy in the parameters: E (V·C) counted once
    names = [n for n, _ in model.named_parameters() if "tok_emb" in n or "lm_head.weight" in n]
    assert names == ["tok_emb.weight"]
    # logits = x_L Eᵀ + b, x_L the output of the last block
    seen = {}
    model.blocks[-1].register_forward_hook(lambda mod, args, out: seen.update(x=out))
    with torch.no_grad():
        logits, _ = model(random_ids(4))
        expected = seen["x"] @ model.tok_emb.weight.T + model.lm_head.bias
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.embeddings(), model.tok_emb.weight.detach())
    assert model.embeddings().shape == (V, 16)


# ------------------------------------------------------------------------- probabilities


def test_token_log_probs_are_exact_and_normalised():
    model = make_model(norm="pre")
    ids = random_ids(5, length=8)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    with torch.no_grad():
        lp = model.token_log_probs(inputs, targets)
        logits, loss = model(inputs, targets)
        # every possible next token at every position: probabilities sum to 1 over V
        all_lp = torch.stack(
            [model.token_log_probs(inputs, torch.full_like(targets, w)) for w in range(V)]
        )  # (V, B, T)
    assert lp.shape == targets.shape
    expected = torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1)
    torch.testing.assert_close(lp, expected)
    torch.testing.assert_close(all_lp.exp().sum(0), torch.ones_like(lp, dtype=torch.float32))
    torch.testing.assert_close(loss, -lp.mean())
    assert model(inputs)[1] is None


def test_token_log_probs_from_a_start_position_are_the_tail_of_the_whole():
    model = make_model()
    ids = random_ids(3, length=9)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    with torch.no_grad():
        whole = model.token_log_probs(inputs, targets)  # (B, 8)
        tail = model.token_log_probs(inputs, targets, start=5)  # (B, 3): positions 5..7
    assert tail.shape == (3, 3)
    # the skipped positions still feed attention: the tail equals the whole run's last three
    torch.testing.assert_close(tail, whole[:, 5:])
    with torch.no_grad():
        cut = model.token_log_probs(inputs[:, 5:], targets[:, 5:])  # no context before 5
    assert not torch.allclose(cut, tail)


# ------------------------------------------------------------------ adaptive / hierarchical


def test_adaptive_without_tails_is_the_tied_softmax():
    """output: adaptive with cutoffs [] is one softmax over V: given E and b as its weights, the
    model scores, decodes and trains alike to the tied model (norm_f, blocks, embedding wired
    the same way)."""
    tied = make_model(norm="pre")
    adaptive = make_model(norm="pre", output="adaptive", cutoffs=[])
    state = {k: v for k, v in tied.state_dict().items() if not k.startswith("lm_head")}
    state["out.head.weight"] = tied.tok_emb.weight.detach().clone()
    state["out.head.bias"] = tied.lm_head.bias.detach().clone()
    adaptive.load_state_dict(state)
    ids = random_ids(7, length=9)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    with torch.no_grad():
        torch.testing.assert_close(
            adaptive.token_log_probs(inputs, targets), tied.token_log_probs(inputs, targets)
        )
        torch.testing.assert_close(adaptive(inputs, targets)[1], tied(inputs, targets)[1])
        torch.testing.assert_close(adaptive.decode(inputs)[0], tied.decode(inputs)[0])
    assert adaptive.lm_head is None and adaptive(inputs, targets)[0] is None


@pytest.mark.parametrize(
    "output, extra",
    [("adaptive", {"cutoffs": [3, 7]}), ("hierarchical", {})],
)
def test_own_output_layer_is_exact_normalised_and_untied(output, extra):
    torch.manual_seed(0)
    counts = list(range(V, 0, -1))  # frequency-sorted ids (the Huffman tree's counts)
    model = TransformerLM(Config(**{**TINY, "output": output, **extra}), V, counts=counts).eval()
    assert all(p is not model.tok_emb.weight for p in model.out.parameters())
    ids = random_ids(3, length=9)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    with torch.no_grad():
        lp = model.token_log_probs(inputs, targets)  # (B, T)
        _, loss = model(inputs, targets)
        full, cache = model.decode(inputs)  # (B, T, V) in one pass
        stepped = [model.decode(inputs[:, :1])]
        for t in range(1, inputs.shape[1]):  # one position at a time over the cache
            stepped.append(model.decode(inputs[:, t : t + 1], stepped[-1][1]))
        tail = model.token_log_probs(inputs, targets, start=5)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(inputs.shape))
    torch.testing.assert_close(full.gather(-1, targets[..., None]).squeeze(-1), lp)
    torch.testing.assert_close(torch.cat([s[0] for s in stepped], 1), full, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, -lp.mean())
    torch.testing.assert_close(tail, lp[:, 5:])
    assert len(cache) == TINY["num_layers"]
    with pytest.raises(ValueError, match="pass targets"):
        model(inputs)


def test_adaptive_output_trains():
    torch.manual_seed(0)
    cfg = Config(**{**TINY, "block_size": 16, "output": "adaptive", "cutoffs": [3, 7]})
    model = TransformerLM(cfg, V)
    stream = torch.tensor([1, 2, 3, 4, 5, 6, 7, 3, 2, 9] * 20)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for step in range(60):
        start = (step * 7) % (len(stream) - 17)
        block = stream[start : start + 17][None]
        _, loss = model(block[:, :-1], block[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


def test_adaptive_cutoffs_beyond_the_vocabulary_are_a_config_error():
    with pytest.raises(ConfigError, match="'cutoffs'"):
        TransformerLM(Config(**{**TINY, "output": "adaptive", "cutoffs": [4, V]}), V)
    with pytest.raises(ConfigError, match="counts="):
        TransformerLM(Config(**{**TINY, "output": "hierarchical"}), V)


def test_cost_counts_matmuls():
    model = make_model()
    c = model.config
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    # every Linear weight is one multiply-add per token; attention adds 2·T·C per layer
    assert model.cost(V).multiply_adds == linear + c.num_layers * 2 * c.block_size * c.d_model
    assert model.cost(V).multiply_adds == 2 * (4 * 16 * 16 + 2 * 16 * 32 + 2 * 12 * 16) + 16 * V


# ------------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "override, key",
    [
        ({"d_model": 18, "heads": 4}, "heads"),
        ({"d_model": -8}, "d_model"),
        ({"heads": 0}, "heads"),
        ({"num_layers": -1}, "num_layers"),
        ({"d_ff": 0}, "d_ff"),
        ({"block_size": 0}, "block_size"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"positions": "rotary"}, "positions"),
        ({"norm": "sandwich"}, "norm"),
        ({"d_model": 15, "heads": 1}, "d_model"),  # sinusoidal pairs need an even width
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"warmup_steps": 10, "lr_decay": 0.1}, "lr_decay"),
        ({"optimizer": "adagrad"}, "optimizer"),
        ({"lr": 0}, "lr"),
        ({"output": "sampled"}, "output"),
        ({"cutoffs": [10, 5]}, "cutoffs"),
        ({"div_value": 0.5}, "div_value"),
    ],
)
def test_config_rejects_impossible_values_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        build(Config, override, where="run 'transformer_lm'")


def test_config_defaults_are_valid():
    cfg = Config()
    assert cfg.d_model % cfg.heads == 0
    assert Config(d_model=15, heads=3, positions="learned").d_model == 15  # odd is fine if learned


def test_longer_than_block_size_is_a_clear_error():
    model = make_model()
    model(random_ids(6, length=12))  # T = block_size is fine
    with pytest.raises(ValueError, match="block_size 12"):
        model(random_ids(6, length=13))


# -------------------------------------------------------------------------------- smoke


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_smoke_training_loss_falls(norm):
    torch.manual_seed(0)
    model = TransformerLM(Config(**{**TINY, "dropout": 0.1, "norm": norm, "block_size": 16}), V)
    stream = torch.tensor([1, 2, 3, 4, 5, 6, 7, 3, 2, 9] * 20)  # a short repeating pattern
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(60):
        starts = torch.randint(0, len(stream) - 17, (4,), generator=g)
        block = torch.stack([stream[s : s + 17] for s in starts.tolist()])  # (B=4, T+1)
        _, loss = model(block[:, :-1], block[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses)
    assert losses[0] > math.log(V) - 1.0  # starts near uniform
    assert sum(losses[-5:]) / 5 < 0.4 * losses[0]  # and learns the pattern
