"""The `transformer_lm` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass, field

from nlpzoo.config import require
from nlpzoo.families import Family
from nlpzoo.families.common import (
    DEFAULT_CUTOFFS,
    AdamSettings,
    check_adam,
    check_output,
    fit_cutoffs,
)


@dataclass
class TransformerLMConfig(AdamSettings):
    d_model: int = 256  # C, model width (paper base: 512)
    heads: int = 4  # h, attention heads; d_k = d_model / heads = 64 as in the paper (base: 8)
    num_layers: int = 4  # L, decoder blocks (paper base: N = 6)
    d_ff: int = 1024  # inner FFN size, 4·d_model as in the paper (base: 2048)
    dropout: float = 0.1  # P_drop on sub-layer outputs and embedding sums (paper base: 0.1)
    block_size: int = 128  # T, the training context length; longest input accepted
    positions: str = "sinusoidal"  # sinusoidal (the paper) | learned (Radford et al. 2018)
    norm: str = "post"  # post (the paper: LN(x + Sublayer(x))) | pre (x + Sublayer(LN(x)))
    # softmax: the full softmax tied to the embedding (Press & Wolf 2017), as in the paper;
    # adaptive (Grave et al. 2017; Baevski & Auli 2019 for Transformer LMs) | hierarchical:
    # their own output weights, exact normalised probabilities at a fraction of C×V per token
    output: str = "softmax"
    cutoffs: list[int] = field(
        default_factory=lambda: list(DEFAULT_CUTOFFS)
    )  # adaptive: cluster bounds
    div_value: float = 4.0  # adaptive: tail i projects to d_model / div_value^(i+1)
    batch_size: int = 16  # blocks of block_size tokens per step: 2048 tokens
    optimizer: str = "adam"  # adam (the paper) | sgd
    lr: float = 1e-3  # peak learning rate, reached after warmup_steps
    lr_decay: float = 0.0  # sgd's ε_0 / (1 + r t); 0 when the warm-up schedule is used
    warmup_steps: int = 200  # linear warm-up, then ∝ 1/√step (paper: 4000 of 100k steps)
    weight_decay: float = 0.0  # the paper uses none

    def __post_init__(self) -> None:
        check_adam(self)
        for key in ("d_model", "heads", "num_layers", "d_ff", "block_size", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(
            self.d_model % self.heads == 0,
            "heads",
            f"must divide d_model ({self.d_model}), got {self.heads}",
        )
        require(
            self.positions in ("sinusoidal", "learned"),
            "positions",
            f"must be sinusoidal or learned, got {self.positions!r}",
        )
        require(
            self.positions != "sinusoidal" or self.d_model % 2 == 0,
            "d_model",
            f"must be even for sinusoidal positions (sin/cos pairs), got {self.d_model}",
        )
        require(self.norm in ("post", "pre"), "norm", f"must be post or pre, got {self.norm!r}")
        check_output(self)
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.warmup_steps >= 0, "warmup_steps", "must be >= 0")
        require(
            not (self.lr_decay and self.warmup_steps),
            "lr_decay",
            "must be 0 when warmup_steps > 0 (the warm-up schedule already decays as 1/√step)",
        )
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")

    def fit_to_vocab(self, vocab_size: int, run: str = "") -> TransformerLMConfig:
        """This config with the default adaptive cut-offs fitted to the vocabulary (common.py)."""
        return fit_cutoffs(self, vocab_size, run)


FAMILY = Family(
    "transformer_lm",
    TransformerLMConfig,
    "nlpzoo.models.transformer_lm:TransformerLM",
    task="lm",
    input="stream",
    fit="lightning",
    vectors=True,
)
