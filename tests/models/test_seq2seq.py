"""Sutskever et al. seq2seq: the reversed source and the final encoder states."""

from __future__ import annotations

import torch

from nlpzoo.data.vocab import PAD
from nlpzoo.models import seq2seq


def test_reverse_padded_reverses_only_the_words():
    x = torch.tensor([[5, 6, 7, PAD], [8, 9, PAD, PAD]])
    out = seq2seq.reverse_padded(x, torch.tensor([3, 2]))
    assert out.tolist() == [[7, 6, 5, PAD], [9, 8, PAD, PAD]]


def test_decoder_starts_from_the_state_after_the_first_source_word_when_reversed():
    torch.manual_seed(0)
    cfg = seq2seq.Config(emb_dim=8, hidden_dim=8, num_layers=2, dropout=0.0)
    model = seq2seq.Seq2Seq(cfg, 20).eval()
    src = torch.tensor([[5, 6, 7, PAD, PAD]])
    _, (h, c) = model.encode(src)
    # the same LSTM run by hand over x_3 x_2 x_1, no padding: its last state is the summary
    _, (h_ref, c_ref) = model.encoder(model.src_emb(torch.tensor([[7, 6, 5]])))
    torch.testing.assert_close(h, h_ref)
    torch.testing.assert_close(c, c_ref)
    state = model.start(src)
    assert state["h"].shape == (1, 2, 8)  # batch first for beam reordering


def test_training_loss_and_gradients_equal_those_of_the_logits_at_every_position():
    """In training the output layer runs at the labelled target positions alone: the same loss
    and gradients as the (B, T, V) logits with the padding masked, for (B·T − N)·H·V
    multiply-adds less."""
    from mt_exact import V, assert_same_loss_and_gradients, masked_mean_loss, padded_batch

    torch.manual_seed(0)
    cfg = seq2seq.Config(emb_dim=8, hidden_dim=12, num_layers=2, dropout=0.0, label_smoothing=0.1)
    model = seq2seq.Seq2Seq(cfg, V)

    def old_loss(model, src, tgt_in, labels):
        _, state = model.encode(src)
        s, _ = model.decoder(model.drop(model.tgt_emb(tgt_in)), state)
        logits = model.out(model.drop(s))  # (B, T, V): every position
        return masked_mean_loss(logits, labels, cfg.label_smoothing)

    rows = padded_batch()[1].numel()  # B·T
    assert_same_loss_and_gradients(model, old_loss, rows, cfg.hidden_dim * V)
