"""The encoder–decoder Transformer (nlpzoo.models.transformer); its blocks, attention included,
are tested with the other families' in test_transformer_blocks.py."""

from __future__ import annotations

import torch


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
