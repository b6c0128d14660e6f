"""Bahdanau attention: the additive score and the masked softmax, written against the equations."""

from __future__ import annotations

import pytest
import torch

from nlpzoo.data.mt import IGNORE
from nlpzoo.models import attention
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


@pytest.mark.parametrize(("cell", "maxout"), [("gru", 0), ("lstm", 6)])
def test_training_loss_and_gradients_equal_those_of_the_output_layer_inside_the_loop(cell, maxout):
    """The output layer reads [E y_{i−1}; s_i; c_i] and nothing of step i + 1, so training applies
    it once, after the loop, at the labelled positions alone: the same loss and gradients as the
    output layer at every step inside the loop with the padding masked, for its multiply-adds at
    the B·T − N unlabelled positions less."""
    from mt_exact import V, assert_same_loss_and_gradients, masked_mean_loss, padded_batch

    torch.manual_seed(0)
    cfg = attention.Config(
        emb_dim=8,
        hidden_dim=12,
        attn_dim=6,
        cell=cell,
        maxout=maxout,
        dropout=0.0,
        label_smoothing=0.1,
    )
    model = attention.Bahdanau(cfg, V)

    def old_loss(model, src, tgt_in, labels):
        state = model.encode(src)
        s, c = state["s"], state.get("cell")
        logits = []
        for i in range(tgt_in.shape[1]):  # the output layer inside the loop, every position
            emb = model.drop(model.tgt_emb(tgt_in[:, i]))
            context, _ = model.attention(s, state["keys"], state["ann"], state["mask"])
            rnn_in = torch.cat([emb, context], -1)
            if cell == "lstm":
                s, c = model.cell(rnn_in, (s, c))
            else:
                s = model.cell(rnn_in, s)
            t = torch.cat([emb, s, context], -1)
            if maxout:
                t = model.deep_out(t).view(t.shape[0], -1, 2).amax(-1)
            logits.append(model.out(model.drop(t)))
        return masked_mean_loss(torch.stack(logits, 1), labels, cfg.label_smoothing)

    calls = []
    hook = model.out.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[0]))
    src, tgt_in, labels = padded_batch()
    model.train()(src, tgt_in, labels)
    assert calls == [int((labels != IGNORE).sum())]  # once, at the N labelled positions
    hook.remove()
    width = cfg.emb_dim + 3 * cfg.hidden_dim
    per_row = width * 2 * maxout + maxout * V if maxout else width * V
    assert_same_loss_and_gradients(model, old_loss, tgt_in.numel(), per_row)
