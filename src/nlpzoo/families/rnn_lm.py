"""The `rnn_lm` family: its params section and its registry record."""

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
class RNNLMConfig(AdamSettings):
    cell: str = "lstm"  # rnn (Elman tanh) | lstm
    emb_dim: int = 200  # d, size of the input word vectors E w
    hidden_dim: int = 200  # h, units per recurrent layer
    num_layers: int = 2  # L, stacked recurrent layers (Zaremba: 2)
    dropout: float = 0.2  # on embeddings, between layers, before the output (Zaremba medium: 0.5)
    tie_weights: bool = True  # output matrix U = input embedding E (needs emb_dim == hidden_dim)
    bptt: int = 35  # T, truncated back-propagation length (tokens per block)
    batch_size: int = 20  # B, parallel streams (Zaremba: 20)
    optimizer: str = "adam"  # adam | sgd (papers: sgd, lr 1 with clip 5, or lr 20 with clip 0.25)
    lr: float = 1e-3
    lr_decay: float = 0.0  # r in ε_t = ε_0 / (1 + r t), sgd only (Zaremba: ÷2 per epoch instead)
    weight_decay: float = 0.0  # dropout is the regulariser here, as in Zaremba
    # softmax (full, over V) | adaptive (Grave et al. 2017: frequency clusters) | hierarchical
    # (Huffman tree, Morin & Bengio 2005 / Mikolov 2013); all give exact normalised probabilities
    output: str = "softmax"
    cutoffs: list[int] = field(
        default_factory=lambda: list(DEFAULT_CUTOFFS)
    )  # adaptive: cluster bounds
    div_value: float = 4.0  # adaptive: tail i projects to hidden_dim / div_value^(i+1)
    init_range: float = 0.1  # every parameter ~ U(-r, r) (Zaremba: 0.1 small, 0.05 medium)

    def __post_init__(self) -> None:
        check_adam(self)
        require(self.cell in ("rnn", "lstm"), "cell", f"must be rnn or lstm, got {self.cell!r}")
        for key in ("emb_dim", "hidden_dim", "num_layers", "bptt", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(
            not self.tie_weights or self.emb_dim == self.hidden_dim,
            "tie_weights",
            f"needs emb_dim == hidden_dim (the output matrix is the embedding), got "
            f"emb_dim {self.emb_dim} and hidden_dim {self.hidden_dim}",
        )
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        check_output(self)
        require(
            not self.tie_weights or self.output == "softmax",
            "tie_weights",
            f"ties the embedding to a full softmax only; set tie_weights: false with output "
            f"{self.output!r}",
        )
        require(self.init_range > 0, "init_range", f"must be positive, got {self.init_range}")

    def fit_to_vocab(self, vocab_size: int, run: str = "") -> RNNLMConfig:
        """This config with the default adaptive cut-offs fitted to the vocabulary (common.py)."""
        return fit_cutoffs(self, vocab_size, run)


FAMILY = Family(
    "rnn_lm",
    RNNLMConfig,
    "nlpzoo.models.rnn_lm:RNNLM",
    task="lm",
    input="stream",
    fit="lightning",
    stateful=True,
    vectors=True,
)
