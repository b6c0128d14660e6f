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
