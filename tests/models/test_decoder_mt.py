"""Decoder-only translation: the joined sequence and the prompt-masked loss."""

from __future__ import annotations

import torch

from nlpzoo.data.mt import IGNORE, SEP, collate
from nlpzoo.data.vocab import BOS, EOS, PAD
from nlpzoo.models import decoder_mt


def _batch():
    pairs = [
        (torch.tensor([10, 11, 12]).numpy(), torch.tensor([20, 21]).numpy()),
        (torch.tensor([13]).numpy(), torch.tensor([22, 23, 24]).numpy()),
    ]
    return collate(pairs)


def test_sequence_is_source_sep_target_with_labels_on_the_target_only():
    inputs, labels = decoder_mt.build_sequence(*_batch())
    assert inputs[0].tolist() == [BOS, 10, 11, 12, SEP, 20, 21, PAD]
    assert labels[0].tolist() == [IGNORE] * 4 + [20, 21, EOS, IGNORE]
    assert inputs[1].tolist() == [BOS, 13, SEP, 22, 23, 24, PAD, PAD]
    assert labels[1].tolist() == [IGNORE] * 2 + [22, 23, 24, EOS, IGNORE, IGNORE]


def test_loss_ignores_the_prompt_positions():
    torch.manual_seed(0)
    cfg = decoder_mt.Config(
        d_model=16, heads=2, num_layers=1, d_ff=32, dropout=0.0, label_smoothing=0.0
    )
    model = decoder_mt.DecoderMT(cfg, 30)
    src, tgt_in, labels = _batch()
    inputs, seq_labels = decoder_mt.build_sequence(src, tgt_in, labels)
    logits = model.lm_logits(inputs).detach().requires_grad_(True)
    loss = model.loss(logits, seq_labels)
    (grad,) = torch.autograd.grad(loss, logits)
    prompt = seq_labels == IGNORE
    # whatever the model predicts at a prompt position, the loss does not move
    assert torch.all(grad[prompt] == 0)
    assert torch.all(grad[~prompt].abs().sum(-1) > 0)
    # and it is the mean cross-entropy of the target tokens alone
    target_ce = -torch.log_softmax(logits, -1)[~prompt].gather(-1, seq_labels[~prompt][:, None])
    torch.testing.assert_close(loss, target_ce.mean())
    # changing a target label changes the loss; the shared forward gives the same loss
    changed = labels.clone()
    changed[0, 0] = 25
    _, loss_fwd = model(src, tgt_in, labels)
    _, loss_changed = model(src, tgt_in, changed)
    torch.testing.assert_close(loss_fwd, loss.detach())
    assert abs(loss_changed.item() - loss_fwd.item()) > 1e-4


def test_training_loss_and_gradients_equal_those_of_the_logits_at_every_position():
    """In training the output layer runs at the target positions alone, never at the prompt or
    the padding: the same loss and gradients as the full (B, P, V) logits with the prompt-masked
    loss, for (B·P − N)·C·V multiply-adds less."""
    from mt_exact import V, assert_same_loss_and_gradients, masked_mean_loss, padded_batch

    torch.manual_seed(0)
    cfg = decoder_mt.Config(
        d_model=16, heads=2, num_layers=2, d_ff=32, dropout=0.0, label_smoothing=0.1
    )
    model = decoder_mt.DecoderMT(cfg, V)

    def old_loss(model, src, tgt_in, labels):
        inputs, seq_labels = decoder_mt.build_sequence(src, tgt_in, labels)
        return masked_mean_loss(model.lm_logits(inputs), seq_labels, cfg.label_smoothing)

    src, tgt_in, _ = padded_batch()
    rows = src.shape[0] * (src.shape[1] + 1 + tgt_in.shape[1])  # B·P
    assert_same_loss_and_gradients(model, old_loss, rows, cfg.d_model * V)
