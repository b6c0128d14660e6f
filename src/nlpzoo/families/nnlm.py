"""The `nnlm` family: its params section and its registry record."""

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
class NNLMConfig(AdamSettings):
    context_size: int = 4  # n-1 previous words (the paper's best Brown models: n = 5)
    emb_dim: int = 60  # m, size of the word feature vectors C(w)
    hidden_dim: int = 100  # h, tanh hidden units
    direct: bool = False  # direct connections W from features to outputs (paper: yes/no both tried)
    output: str = "softmax"  # softmax | hierarchical (Huffman tree) | adaptive (Grave et al. 2017)
    cutoffs: list[int] = field(
        default_factory=lambda: list(DEFAULT_CUTOFFS)
    )  # adaptive: cluster starts
    div_value: float = 4.0  # adaptive: tail i projects to size d / div_value^(i+1)
    dropout: float = 0.0  # not in the paper; 0 reproduces it
    batch_size: int = 256
    optimizer: str = "adam"  # adam | sgd (the paper: sgd with lr / (1 + lr_decay * step))
    lr: float = 1e-3
    lr_decay: float = 0.0  # r in ε_t = ε_0 / (1 + r t)
    weight_decay: float = 1e-5  # on weights, not biases (paper: 1e-4)

    def __post_init__(self) -> None:
        check_adam(self)
        for key in ("context_size", "emb_dim", "hidden_dim", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        check_output(self)
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")

    def fit_to_vocab(self, vocab_size: int, run: str = "") -> NNLMConfig:
        """This config with the default adaptive cut-offs fitted to the vocabulary (common.py)."""
        return fit_cutoffs(self, vocab_size, run)


FAMILY = Family(
    "nnlm",
    NNLMConfig,
    "nlpzoo.models.nnlm:NNLM",
    task="lm",
    input="window",
    fit="lightning",
    vectors=True,
)
