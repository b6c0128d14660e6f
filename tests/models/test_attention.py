"""Bahdanau attention: the additive score and the masked softmax, written against the equations."""

from __future__ import annotations

import torch

from nlpzoo.models.attention import AdditiveAttention


def test_additive_attention_follows_the_equations():
    torch.manual_seed(0)
    att = AdditiveAttention(state_dim=6, annotation_dim=10, attn_dim=4)
    s_prev, h = torch.randn(2, 6), torch.randn(2, 5, 10)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    context, alpha = att(s_prev, att.keys(h), h, mask)
    for b in range(2):
        n = int(mask[b].sum())
        e = torch.stack(
            [
                att.v_a.weight[0] @ torch.tanh(att.W_a(s_prev[b]) + att.U_a(h[b, j]))
                for j in range(n)
            ]
        )  # e_bj = v_aᵀ tanh(W_a s + U_a h_j)
        a = torch.softmax(e, 0)
        torch.testing.assert_close(alpha[b, :n], a)
        torch.testing.assert_close(context[b], (a[:, None] * h[b, :n]).sum(0))
    assert torch.all(alpha[1, 3:] == 0)
