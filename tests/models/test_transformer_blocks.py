"""The shared Transformer blocks (nlpzoo.models.transformer_blocks) and the three families built on
them. Attention against PyTorch's own (scaled dot-product and nn.MultiheadAttention), the
sinusoidal positions by their formula, attention and the label-smoothed loss by hand; the
key/value cache against the full forward;
for `transformer`, `decoder_mt` and `transformer_lm`: the parameter names a saved model carries,
the outputs against the computation each family did on its own before the blocks were shared,
written out below (`ref_*`), equal outputs where two families share a block, the initialisation
statistics, and the causal and padding masks."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.data.mt import IGNORE, collate
from nlpzoo.data.vocab import PAD
from nlpzoo.models import decoder_mt, transformer, transformer_lm
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.models.transformer_blocks import (
    Block,
    CausalSelfAttention,
    MultiHeadAttention,
    attention,
    causal_mask,
    sinusoidal_positions,
)

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------ attention


def test_attention_equals_scaled_dot_product_attention():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True  # every query may see at least one key
    out, weights = attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights[~mask.expand_as(weights)] == 0)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    out, _ = attention(k, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(k, k, v, is_causal=True))


def test_multi_head_attention_equals_nn_multihead_attention():
    """Same weights → same outputs and head-averaged weights, with a key padding mask."""
    torch.manual_seed(0)
    C, h = 16, 4
    ours, ref = MultiHeadAttention(C, h), nn.MultiheadAttention(C, h, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        ref.out_proj.weight.copy_(ours.W_o.weight)
        ref.out_proj.bias.copy_(ours.W_o.bias)
    x, mem = torch.randn(3, 5, C), torch.randn(3, 6, C)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 4:] = pad[2, 2:] = True  # True = padding, nn.MultiheadAttention's convention
    out, weights = ours(x, mem, (~pad)[:, None, None, :])
    ref_out, ref_weights = ref(x, mem, mem, key_padding_mask=pad, average_attn_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.mean(1), ref_weights, atol=1e-5, rtol=1e-5)


def test_sinusoidal_positions_follow_the_formula():
    pe = sinusoidal_positions(50, 16)
    pos, i = 7, 3
    assert pe[pos, 2 * i].item() == torch.sin(torch.tensor(pos / 10000 ** (2 * i / 16))).item()
    assert abs(pe[pos, 2 * i + 1].item() - torch.cos(torch.tensor(pos / 10000 ** (6 / 16)))) < 1e-6


def test_attention_equals_a_hand_computation_with_a_causal_mask():
    q = torch.tensor([[1.0, 0.0], [0.5, 1.0], [0.0, 2.0]])  # T = 3 queries, d_k = 2
    k = torch.tensor([[1.0, 1.0], [0.0, 1.0], [2.0, 0.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.0, 4.0]])
    out, w = attention(q, k, v, causal_mask(3))
    for i in range(3):
        scores = [
            sum(q[i, d].item() * k[j, d].item() for d in range(2)) / math.sqrt(2)
            for j in range(i + 1)
        ]
        e = [math.exp(s) for s in scores]  # key j > i is masked: weight 0
        expected_w = [x / sum(e) for x in e] + [0.0] * (2 - i)
        expected_out = [sum(expected_w[j] * v[j, d].item() for j in range(3)) for d in range(2)]
        assert w[i].tolist() == pytest.approx(expected_w, abs=1e-6)
        assert out[i].tolist() == pytest.approx(expected_out, abs=1e-6)
    # row 1 by hand: scores (1.5, 1.0)/√2, weights 1/(1 + e^{−0.5/√2}) = 0.58748, 0.41252
    assert w[1, 0].item() == pytest.approx(0.58748, abs=1e-5)


def test_causal_mask_lets_new_queries_see_every_cached_key():
    assert causal_mask(3).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # 2 cached positions, 2 new ones at positions 2 and 3
    assert causal_mask(2, past=2).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]


def test_cached_self_attention_equals_the_full_forward():
    """Feeding positions in chunks of 3, 1 and 3 with the cache = all 7 at once, with key
    padding too (the prompt padding that decoder_mt masks while it generates)."""
    torch.manual_seed(0)
    attn = CausalSelfAttention(8, 2)
    x = torch.randn(2, 7, 8)
    keep = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[1, ..., 1:3] = False  # row 1: positions 1 and 2 are padding
    for mask in (None, keep):
        with torch.no_grad():
            full, full_w, (K, V) = attn.self_attention(x, mask)
            outs, cache, t = [], None, 0
            for T in (3, 1, 3):
                m = None if mask is None else mask[..., : t + T]
                out, w, cache = attn.self_attention(x[:, t : t + T], m, cache)
                torch.testing.assert_close(w, full_w[:, :, t : t + T, : t + T])
                outs.append(out)
                t += T
        torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(cache[0], K)
        torch.testing.assert_close(cache[1], V)
        assert torch.all(full_w.triu(1) == 0)  # no weight on a later position
    assert torch.all(full_w[1, :, :, 1:3] == 0)  # nor on padding
    # the module's forward is the same self-attention, output only
    torch.testing.assert_close(attn(x), attn.self_attention(x)[0])


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_block_one_position_at_a_time_equals_the_full_forward(norm, cross):
    torch.manual_seed(1)
    block = Block(16, 2, 24, dropout=0.1, norm=norm, causal=True, cross=cross).eval()
    x, memory = torch.randn(3, 6, 16), torch.randn(3, 5, 16)
    memory_mask = torch.ones(3, 1, 1, 5, dtype=torch.bool)
    memory_mask[0, ..., 3:] = False  # padding in the encoder output of row 0
    kw = (
        dict(cross_kv=block.cross_attn.keys_values(memory), cross_mask=memory_mask) if cross else {}
    )
    with torch.no_grad():
        full, full_cache, full_cross = block.run(x, **kw)
        torch.testing.assert_close(block(x, **kw), full)
        cache, steps = None, []
        for t in range(6):
            y, cache, cross_w = block.run(x[:, t : t + 1], None, cache, **kw)
            steps.append(y)
            if cross:
                torch.testing.assert_close(cross_w, full_cross[:, :, t : t + 1])
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cache, full_cache)
    if cross:
        assert torch.all(full_cross[0, ..., 3:] == 0)
    else:
        assert full_cross is None


def test_only_a_causal_block_is_blind_to_later_positions():
    torch.manual_seed(2)
    x = torch.randn(1, 5, 16)
    changed = x.clone()
    changed[:, 4] += 1.0
    for causal in (False, True):
        block = Block(16, 2, 24, causal=causal).eval()
        with torch.no_grad():
            diff = (block(changed) - block(x))[:, :4].abs().max().item()
        assert (diff < 1e-6) if causal else (diff > 1e-3)


def test_a_cross_attention_block_needs_the_encoder_output():
    with pytest.raises(ValueError, match="keys and values"):
        Block(16, 2, 24, causal=True, cross=True)(torch.randn(1, 3, 16))


# ------------------------------------------------------------------------------------ loss


def hand_loss(logits: torch.Tensor, labels: torch.Tensor, eps: float) -> torch.Tensor:
    """Mean over labelled positions of (1 − ε)·(−log p_y) + ε·(1/V) Σ_v −log p_v."""
    keep = labels != IGNORE
    log_p = torch.log_softmax(logits[keep].double(), -1)  # (N, V)
    nll = -log_p.gather(-1, labels[keep][:, None])[:, 0]
    return ((1 - eps) * nll - eps * log_p.mean(-1)).mean().float()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_equals_the_formula(eps):
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 4, 6, generator=g) * 3
    labels = torch.tensor([[1, 5, IGNORE, IGNORE], [0, 2, 3, IGNORE]])
    loss = label_smoothed_loss(logits, labels, eps, IGNORE)
    torch.testing.assert_close(loss, hand_loss(logits, labels, eps))
    # the same as the cross-entropy against the smoothed target (1 − ε)·onehot(y) + ε/V
    keep = labels != IGNORE
    target = (1 - eps) * F.one_hot(labels[keep], 6) + eps / 6
    ce = -(target * torch.log_softmax(logits[keep], -1)).sum(-1).mean()
    torch.testing.assert_close(loss, ce)
    # a label's position counts; an ignored one does not
    assert (
        label_smoothed_loss(logits, labels.masked_fill(labels == 5, 4), eps).item() != loss.item()
    )
    other = logits.clone()
    other[0, 2] += 10.0
    torch.testing.assert_close(label_smoothed_loss(other, labels, eps), loss)


# ------------------------------------------------------------------------------ the families

V = 23
MT_SIZES = dict(d_model=16, heads=2, num_layers=2, d_ff=24, max_positions=32, dropout=0.1)
LM_SIZES = dict(d_model=16, heads=4, num_layers=2, d_ff=24, block_size=12, dropout=0.1)
FAMILIES = {
    "transformer": (transformer, "Transformer", MT_SIZES),
    "decoder_mt": (decoder_mt, "DecoderMT", MT_SIZES),
    "transformer_lm": (transformer_lm, "TransformerLM", LM_SIZES),
}
CASES = [(f, n) for f in FAMILIES for n in ("post", "pre")]
PAIRS = [([5, 6, 7, 8], [9, 10, 11]), ([12, 13], [14, 15, 16, 17, 18]), ([19, 20, 21], [22])]
LM_IDS = torch.tensor(
    [[3, 7, 1, 19, 4, 4, 22, 0, 9, 15, 2, 11, 6], [8, 8, 21, 5, 13, 17, 1, 0, 3, 20, 12, 7, 14]]
)


def build(family: str, norm: str, module=None):
    """The family's model with torch seed 0 (`module`: another implementation of the family)."""
    default, cls, sizes = FAMILIES[family]
    module = module or default
    torch.manual_seed(0)
    return getattr(module, cls)(module.Config(**sizes, norm=norm), V)


def mt_batch():
    return collate([(np.array(s), np.array(t)) for s, t in PAIRS])  # src, tgt_in, labels


def _share_blocks(source, target) -> None:
    """Copy `source`'s Transformer blocks (and final norm) into `target`'s, same sizes."""
    target.blocks.load_state_dict(source.blocks.state_dict())
    target.norm_f.load_state_dict(source.norm_f.state_dict())


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_mt_and_transformer_lm_share_one_causal_stack(norm):
    """The two decoder-only families run the same blocks: with the same parameters (the tied
    embedding, its output bias, the blocks) they give the same logits, in eval mode and in train
    mode under the same dropout draws, and the same gradients reach the blocks."""
    sizes = dict(d_model=16, heads=2, num_layers=2, d_ff=24, dropout=0.1, norm=norm)
    torch.manual_seed(0)
    mt = decoder_mt.DecoderMT(decoder_mt.Config(**sizes, max_positions=32), V)
    lm = transformer_lm.TransformerLM(transformer_lm.Config(**sizes, block_size=12), V)
    _share_blocks(mt, lm)
    with torch.no_grad():
        lm.tok_emb.weight.copy_(mt.emb.weight)  # the LM's output matrix is tied to it
        lm.lm_head.bias.copy_(mt.out_bias)
    inputs = LM_IDS[:, :12].clamp(min=1)  # no PAD id: decoder_mt's E has a zero PAD row
    with torch.no_grad():
        torch.testing.assert_close(lm.eval()(inputs)[0], mt.eval().lm_logits(inputs))
    train_logits, grads = [], []
    for model, logits_of in ((mt, mt.lm_logits), (lm, lambda x: lm(x)[0])):
        model.train()
        torch.manual_seed(1)  # the same dropout draws, in the same order
        logits = logits_of(inputs)
        logits.logsumexp(-1).sum().backward()
        train_logits.append(logits.detach())
        grads.append({k: p.grad for k, p in model.blocks.named_parameters()})
    torch.testing.assert_close(train_logits[1], train_logits[0])
    with torch.no_grad():  # dropout was on: train mode differs from eval mode
        assert not torch.allclose(train_logits[1], lm.eval()(inputs)[0])
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, msg=name)


@pytest.mark.parametrize(("family", "norm"), CASES)
def test_initialisation_statistics(family, norm):
    """Glorot-uniform projections, zero biases, unit LayerNorms, E ~ N(0, 1/C) (√C·E has unit
    scale), a zero output bias and a zero PAD row where the family pads."""
    _, cls, sizes = FAMILIES[family]
    module = FAMILIES[family][0]
    torch.manual_seed(0)
    vocab = 2000  # enough entries of E for its standard deviation to within a few per cent
    model = getattr(module, cls)(module.Config(**sizes, norm=norm), vocab)
    C = sizes["d_model"]
    emb = model.tok_emb.weight if family == "transformer_lm" else model.emb.weight
    rows = emb[1:] if family != "transformer_lm" else emb
    assert rows.std().item() == pytest.approx(C**-0.5, rel=0.05)
    assert abs(rows.mean().item()) < 0.01
    if family != "transformer_lm":
        assert torch.all(emb[PAD] == 0)
    out_bias = model.lm_head.bias if family == "transformer_lm" else model.out_bias
    assert torch.all(out_bias == 0)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    linears = [m for m in linears if m.weight is not emb]  # the tied output layer
    assert len(linears) >= 6 * sizes["num_layers"]
    for m in linears:
        fan_out, fan_in = m.weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        assert m.weight.abs().max().item() <= bound
        assert m.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.15)
        assert m.bias is None or torch.all(m.bias == 0)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(torch.all(m.weight == 1) and torch.all(m.bias == 0) for m in norms)


def _target_logits(model, family: str, src, tgt_in) -> torch.Tensor:
    with torch.no_grad():
        if family == "transformer_lm":
            return model(tgt_in)[0]
        return model(src, tgt_in)[0]


@pytest.mark.parametrize(("family", "norm"), CASES)
def test_a_later_token_never_changes_an_earlier_output(family, norm):
    model = build(family, norm).eval()
    src = torch.tensor([[5, 6, 7, 8]])
    tgt = (
        LM_IDS[:1, :8].clamp(min=3)
        if family == "transformer_lm"
        else torch.tensor([[1, 9, 10, 11, 12]])
    )
    before = _target_logits(model, family, src, tgt)
    t = tgt.shape[1] - 2
    changed = tgt.clone()
    changed[0, t] = 4 if int(tgt[0, t]) != 4 else 5
    after = _target_logits(model, family, src, changed)
    torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(after[:, t:], before[:, t:], atol=1e-4)


@pytest.mark.parametrize(("family", "norm"), [c for c in CASES if c[0] != "transformer_lm"])
def test_padding_does_not_reach_the_other_positions(family, norm):
    """Each pair's logits are those it gets alone: the batch's padding changes nothing; and a
    changed source word does change them (the source is read)."""
    model = build(family, norm).eval()
    src, tgt_in, _ = mt_batch()
    batched = _target_logits(model, family, src, tgt_in)
    for i, (s, t) in enumerate(PAIRS):
        one_src, one_tgt, _ = collate([(np.array(s), np.array(t))])
        alone = _target_logits(model, family, one_src, one_tgt)
        n = one_tgt.shape[1]
        torch.testing.assert_close(batched[i : i + 1, :n], alone, atol=1e-5, rtol=1e-5)
    other = src.clone()
    other[0, 0] = 4
    assert not torch.allclose(_target_logits(model, family, other, tgt_in)[0], batched[0])


MHA = ("W_q", "W_k", "W_v", "W_o")


def _wb(*names: str) -> list[str]:
    return [f"{n}.{t}" for n in names for t in ("weight", "bias")]


def names_before(family: str, norm: str, layers: int = 2) -> list[str]:
    """The state_dict keys, in order, of a model saved before the blocks were shared."""
    pre = norm == "pre"
    if family == "transformer":
        keys = ["out_bias", "emb.weight"]
        for i in range(layers):
            e = f"encoder.{i}"
            attn = (f"{e}.self_attn.{w}" for w in MHA)
            keys += _wb(*attn, f"{e}.ffn.W_1", f"{e}.ffn.W_2", f"{e}.sub1.norm", f"{e}.sub2.norm")
        for i in range(layers):
            d = f"decoder.{i}"
            attn = (f"{d}.{a}.{w}" for a in ("self_attn", "cross_attn") for w in MHA)
            norms = (f"{d}.sub{j}.norm" for j in (1, 2, 3))
            keys += _wb(*attn, f"{d}.ffn.W_1", f"{d}.ffn.W_2", *norms)
        return keys + (_wb("enc_norm", "dec_norm") if pre else [])
    if family == "decoder_mt":
        keys = ["out_bias", "emb.weight"]
        for i in range(layers):
            b = f"blocks.{i}"
            attn = (f"{b}.attn.{w}" for w in MHA)
            keys += _wb(*attn, f"{b}.W_1", f"{b}.W_2", f"{b}.norm1", f"{b}.norm2")
        return keys + (_wb("norm_f") if pre else [])
    keys = ["tok_emb.weight"]
    for i in range(layers):
        b = f"blocks.{i}"
        attn = (f"{b}.attn.{w}" for w in MHA)
        keys += _wb(*attn, f"{b}.ffn.W_1", f"{b}.ffn.W_2", f"{b}.norm1", f"{b}.norm2")
    return keys + (_wb("norm_f") if pre else []) + _wb("lm_head")


def old_name(family: str, key: str) -> str:
    """A parameter's name before the blocks were shared."""
    if family == "transformer":  # sub-layer wrappers held the norms; `self_attn`
        return re.sub(r"\.norm(\d)\.", r".sub\1.norm.", re.sub(r"\.attn\.", ".self_attn.", key))
    if family == "decoder_mt":  # the FFN was written inline in the block
        return key.replace(".ffn.W_", ".W_")
    return key


@pytest.mark.parametrize(("family", "norm"), CASES)
def test_parameter_names_map_one_to_one_onto_those_of_before(family, norm):
    model = build(family, norm)
    assert [old_name(family, k) for k in model.state_dict()] == names_before(family, norm)


@pytest.mark.parametrize(("family", "norm"), CASES)
def test_a_model_saved_under_the_old_names_loads(family, norm):
    saved = build(family, norm)
    with torch.no_grad():
        for p in saved.parameters():
            p.add_(torch.randn_like(p))  # unlike a fresh model's
    old = {old_name(family, k): v for k, v in saved.state_dict().items()}
    model = build(family, norm)
    model.load_state_dict(old)  # strict: every old key is used, every parameter is filled
    for (name, p), q in zip(model.state_dict().items(), saved.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


# the computation of before, written out from the parameters (old names), in eval mode


def _linear(p: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, p[f"{name}.weight"], p[f"{name}.bias"])


def _layer_norm(p: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], p[f"{name}.weight"], p[f"{name}.bias"])


def ref_attention(p: dict, name: str, x, memory, mask, heads: int):
    """softmax(Q Kᵀ / √d_k, masked) V per head, heads concatenated, then W^O."""
    B, T, C = x.shape
    d_k = C // heads

    def split(z):
        return z.view(B, -1, heads, d_k).transpose(1, 2)

    q = split(_linear(p, f"{name}.W_q", x))
    k, v = split(_linear(p, f"{name}.W_k", memory)), split(_linear(p, f"{name}.W_v", memory))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return _linear(p, f"{name}.W_o", out), scores.softmax(-1)


def ref_sublayer(p: dict, norm: str, x, f, pre: bool):
    """LN(x + f(x)) (post-norm) or x + f(LN(x)) (pre-norm); dropout is off in eval mode."""
    return x + f(_layer_norm(p, norm, x)) if pre else _layer_norm(p, norm, x + f(x))


def ref_ffn(p: dict, prefix: str, x):
    """max(0, x W_1 + b_1) W_2 + b_2 with the layer's `{prefix}W_1`, `{prefix}W_2`."""
    return _linear(p, f"{prefix}W_2", torch.relu(_linear(p, f"{prefix}W_1", x)))


def ref_positions(length: int, C: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    angle = pos / 10000.0 ** (torch.arange(0, C, 2, dtype=torch.float64) / C)
    return torch.stack([angle.sin(), angle.cos()], -1).flatten(1).float()  # sin, cos interleaved


def ref_causal_stack(p: dict, x, c, ffn: str):
    """The decoder-only blocks: masked self-attention, then the FFN (`blocks.i.{ffn}W_1`)."""
    pre, causal = c.norm == "pre", torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
    for i in range(c.num_layers):
        b = f"blocks.{i}."

        def attn(z, b=b):
            return ref_attention(p, f"{b}attn", z, z, causal, c.heads)[0]

        x = ref_sublayer(p, f"{b}norm1", x, attn, pre)
        x = ref_sublayer(p, f"{b}norm2", x, lambda z, b=b: ref_ffn(p, b + ffn, z), pre)
    return _layer_norm(p, "norm_f", x) if pre else x


def ref_transformer(p: dict, c, src, tgt_in, labels):
    pre, C = c.norm == "pre", c.d_model
    pe = ref_positions(c.max_positions, C)

    def embed(ids):
        return p["emb.weight"][ids] * math.sqrt(C) + pe[: ids.shape[1]]

    src_mask = (src != PAD)[:, None, None, :]
    x = embed(src)
    for i in range(c.num_layers):
        e = f"encoder.{i}."

        def self_attn(z, e=e):
            return ref_attention(p, f"{e}self_attn", z, z, src_mask, c.heads)[0]

        x = ref_sublayer(p, f"{e}sub1.norm", x, self_attn, pre)
        x = ref_sublayer(p, f"{e}sub2.norm", x, lambda z, e=e: ref_ffn(p, f"{e}ffn.", z), pre)
    memory = _layer_norm(p, "enc_norm", x) if pre else x
    causal = torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool).tril()
    y = embed(tgt_in)
    for i in range(c.num_layers):
        d = f"decoder.{i}."

        def masked(z, d=d):
            return ref_attention(p, f"{d}self_attn", z, z, causal, c.heads)[0]

        def cross(z, d=d):
            return ref_attention(p, f"{d}cross_attn", z, memory, src_mask, c.heads)[0]

        y = ref_sublayer(p, f"{d}sub1.norm", y, masked, pre)
        y = ref_sublayer(p, f"{d}sub2.norm", y, cross, pre)
        y = ref_sublayer(p, f"{d}sub3.norm", y, lambda z, d=d: ref_ffn(p, f"{d}ffn.", z), pre)
    y = _layer_norm(p, "dec_norm", y) if pre else y
    logits = y @ p["emb.weight"].T + p["out_bias"]
    return logits, hand_loss(logits, labels, c.label_smoothing)


def ref_decoder_mt(p: dict, c, src, tgt_in, labels):
    inputs, seq_labels = decoder_mt.build_sequence(src, tgt_in, labels)
    pe = ref_positions(c.max_positions, c.d_model)[: inputs.shape[1]]
    x = ref_causal_stack(p, p["emb.weight"][inputs] * math.sqrt(c.d_model) + pe, c, ffn="")
    logits = x @ p["emb.weight"].T + p["out_bias"]  # (B, P, V)
    cols = (src != PAD).sum(1, keepdim=True) + 1 + torch.arange(tgt_in.shape[1])  # where y is
    target_logits = logits.gather(1, cols[..., None].expand(-1, -1, V))
    return target_logits, hand_loss(logits, seq_labels, c.label_smoothing)


def ref_transformer_lm(p: dict, c, inputs, targets):
    pe = ref_positions(c.block_size, c.d_model)[: inputs.shape[1]]
    x = ref_causal_stack(p, p["tok_emb.weight"][inputs] * math.sqrt(c.d_model) + pe, c, "ffn.")
    logits = x @ p["tok_emb.weight"].T + p["lm_head.bias"]
    return logits, hand_loss(logits, targets, 0.0)


@pytest.mark.parametrize(("family", "norm"), CASES)
def test_forward_equals_the_computation_of_before(family, norm):
    model = build(family, norm).eval()
    p = {old_name(family, k): v for k, v in model.state_dict().items()}
    with torch.no_grad():
        if family == "transformer_lm":
            got = model(LM_IDS[:, :-1], LM_IDS[:, 1:])
            expected = ref_transformer_lm(p, model.config, LM_IDS[:, :-1], LM_IDS[:, 1:])
        else:
            got = model(*mt_batch())
            ref = ref_transformer if family == "transformer" else ref_decoder_mt
            expected = ref(p, model.config, *mt_batch())
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], expected[1], atol=1e-5, rtol=1e-5)
