"""Checks shared by the translation families' configs."""

from __future__ import annotations

from typing import Any

from nlpzoo.config import require


def check_mt_config(cfg: Any) -> None:
    """Checks of the keys every translation family's config has (training, decoding)."""
    for key in ("batch_size", "beam_size"):
        require(getattr(cfg, key) >= 1, key, f"must be >= 1, got {getattr(cfg, key)}")
    require(cfg.max_len >= 0, "max_len", "must be >= 0 (0: keep every pair)")
    require(0.0 <= cfg.dropout < 1.0, "dropout", f"must be in [0, 1), got {cfg.dropout}")
    require(cfg.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
    require(cfg.lr > 0, "lr", f"must be positive, got {cfg.lr}")
    require(cfg.lr_decay >= 0, "lr_decay", "must be >= 0")
    require(cfg.warmup_steps >= 0, "warmup_steps", "must be >= 0")
    require(not (cfg.lr_decay and cfg.warmup_steps), "lr_decay", "must be 0 with warmup_steps")
    require(cfg.weight_decay >= 0, "weight_decay", "must be >= 0")
    require(0.0 <= cfg.label_smoothing < 1.0, "label_smoothing", "must be in [0, 1)")
    require(cfg.length_penalty >= 0, "length_penalty", "must be >= 0")
    require(cfg.max_len_ratio > 0, "max_len_ratio", "must be positive")


def check_sizes(c: Any) -> None:
    """The size checks shared by the Transformer configs (encoder-decoder and decoder-only)."""
    for key in ("d_model", "heads", "num_layers", "d_ff", "max_positions"):
        require(getattr(c, key) >= 1, key, f"must be >= 1, got {getattr(c, key)}")
    require(c.d_model % c.heads == 0, "heads", f"must divide d_model ({c.d_model}), got {c.heads}")
    require(c.d_model % 2 == 0, "d_model", "must be even (sin/cos position pairs)")
    require(c.norm in ("post", "pre"), "norm", f"must be post or pre, got {c.norm!r}")
