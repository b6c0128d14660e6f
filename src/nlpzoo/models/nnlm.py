"""Neural probabilistic language model (Bengio, Ducharme, Vincent & Jauvin, JMLR 2003).

The probability of the next word given the previous n-1 words is a softmax over the vocabulary:

    x = (C(w_{t-n+1}), ..., C(w_{t-2}), C(w_{t-1}))      concatenated feature vectors, (n-1)·m
    y = b + W x + U tanh(d + H x)                         unnormalised log-probabilities, V
    P(w_t = i | context) = exp(y_i) / Σ_j exp(y_j)

Symbols: V vocabulary size, m = `emb_dim` (feature vector size), h = `hidden_dim`, n-1 =
`context_size`, B batch. C is a V×m table of word feature vectors shared by all positions;
H (h×(n-1)m) and d the hidden layer; U (V×h) the hidden-to-output weights; W (V×(n-1)m) the
optional direct connections from the features to the output (`direct`), and b the output biases.

Training maximises the penalised log-likelihood (weight decay on every weight except the biases,
10^-4 in the paper). The paper trains by stochastic gradient ascent with learning rate
ε_t = ε_0 / (1 + r t); that is `optimizer: sgd` with `lr_decay: r` here. The default `adam`
reaches a useful model in a few CPU epochs.

Cost per token of the output layer dominates: |V|·(1 + n·m + h) parameters, so W (the direct
connections) more than doubles the time of a forward pass when (n-1)·m > h.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.config import require


@dataclass
class Config:
    context_size: int = 4  # n-1 previous words (the paper's best Brown models: n = 5)
    emb_dim: int = 60  # m, size of the word feature vectors C(w)
    hidden_dim: int = 100  # h, tanh hidden units
    direct: bool = False  # direct connections W from features to outputs (paper: yes/no both tried)
    output: str = "softmax"  # full softmax over V
    dropout: float = 0.0  # not in the paper; 0 reproduces it
    batch_size: int = 256
    optimizer: str = "adam"  # adam | sgd (the paper: sgd with lr / (1 + lr_decay * step))
    lr: float = 1e-3
    lr_decay: float = 0.0  # r in ε_t = ε_0 / (1 + r t)
    weight_decay: float = 1e-5  # on weights, not biases (paper: 1e-4)

    def __post_init__(self) -> None:
        for key in ("context_size", "emb_dim", "hidden_dim", "batch_size"):
            require(getattr(self, key) >= 1, key, f"must be >= 1, got {getattr(self, key)}")
        require(self.output == "softmax", "output", f"must be softmax, got {self.output!r}")
        require(0.0 <= self.dropout < 1.0, "dropout", f"must be in [0, 1), got {self.dropout}")
        require(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        require(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        require(self.lr_decay >= 0, "lr_decay", "must be >= 0")
        require(self.weight_decay >= 0, "weight_decay", "must be >= 0")


class NNLM(nn.Module):
    """y = b + W x + U tanh(d + H x), x the concatenated context features."""

    def __init__(self, config: Config, vocab_size: int) -> None:
        super().__init__()
        self.config = config
        n1, m, h = config.context_size, config.emb_dim, config.hidden_dim
        self.C = nn.Embedding(vocab_size, m)  # word feature vectors, V×m
        self.H = nn.Linear(n1 * m, h)  # hidden layer; its bias is d
        self.U = nn.Linear(h, vocab_size)  # hidden→output; its bias is b
        self.W = nn.Linear(n1 * m, vocab_size, bias=False) if config.direct else None
        self.drop = nn.Dropout(config.dropout)
        nn.init.uniform_(self.C.weight, -0.1, 0.1)

    def forward(
        self, context: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """context (B, n-1) ids, oldest first; targets (B,). Returns logits (B, V), mean NLL."""
        B = context.shape[0]
        x = self.C(context).reshape(B, -1)  # (B, (n-1)·m)
        a = torch.tanh(self.H(self.drop(x)))  # (B, h) = tanh(d + H x)
        y = self.U(self.drop(a))  # (B, V) = b + U tanh(d + H x)
        if self.W is not None:
            y = y + self.W(x)  # + W x, the direct connections
        loss = F.cross_entropy(y, targets) if targets is not None else None
        return y, loss

    def log_probs(self, context: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Natural-log probability of each target, (B,)."""
        logits, _ = self.forward(context)
        return torch.log_softmax(logits.float(), dim=-1).gather(1, targets[:, None]).squeeze(1)

    def embeddings(self) -> torch.Tensor:
        """The feature vectors C, (V, m): the word representations the paper learns."""
        return self.C.weight.detach()

    def cost_per_token(self, vocab_size: int) -> int:
        """Multiply-adds per predicted token: (n-1)m·h + h·V, plus (n-1)m·V with direct links."""
        c = self.config
        nm = c.context_size * c.emb_dim
        return nm * c.hidden_dim + c.hidden_dim * vocab_size + (nm * vocab_size if c.direct else 0)
