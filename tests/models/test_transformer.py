"""The written-out attention of the encoder–decoder Transformer against PyTorch's own."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.models.transformer_blocks import MultiHeadAttention, attention, sinusoidal_positions


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


def test_training_loss_and_gradients_equal_those_of_the_logits_at_every_position():
    """In training the tied output layer runs at the labelled target positions alone: the same
    loss and gradients as the (B, T, V) logits with the padding masked, for (B·T − N)·C·V
    multiply-adds less."""
    from mt_exact import V, assert_same_loss_and_gradients, masked_mean_loss, padded_batch

    from nlpzoo.models import transformer

    torch.manual_seed(0)
    cfg = transformer.Config(
        d_model=16, heads=2, num_layers=2, d_ff=32, dropout=0.0, label_smoothing=0.1
    )
    model = transformer.Transformer(cfg, V)

    def old_loss(model, src, tgt_in, labels):
        logits, _ = model.decode_teacher_forced(src, tgt_in)  # (B, T, V): every position
        return masked_mean_loss(logits, labels, cfg.label_smoothing)

    rows = padded_batch()[1].numel()  # B·T
    assert_same_loss_and_gradients(model, old_loss, rows, cfg.d_model * V)
