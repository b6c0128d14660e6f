"""Neural probabilistic language model (Bengio, Ducharme, Vincent & Jauvin, JMLR 2003).

The probability of the next word given the previous n-1 words is a softmax over the vocabulary:

    x = (C(w_{t-n+1}), ..., C(w_{t-2}), C(w_{t-1}))      concatenated feature vectors, (n-1)·m
    y = b + W x + U tanh(d + H x)                         unnormalised log-probabilities, V
    P(w_t = i | context) = exp(y_i) / Σ_j exp(y_j)

Symbols: V vocabulary size, m = `emb_dim` (feature vector size), h = `hidden_dim`, n-1 =
`context_size`, B batch. C is a V×m table of word feature vectors shared by all positions;
H (h×(n-1)m) and d the hidden layer; U (V×h) the hidden-to-output weights; W (V×(n-1)m) the
optional direct connections from the features to the output (`direct`), and b the output biases.

Output layer `U` (`output`, see models/outputs.py; every kind gives exact normalised probabilities):
  softmax       the paper's: U (V×h) and b, a full softmax; W a separate V×(n-1)m matrix.
  hierarchical  a path of sigmoids over a binary Huffman tree of the training counts (Morin &
                Bengio 2005, the paper's own sequel); needs `counts`.
  adaptive      Grave et al. 2017: a head softmax over ids [0, cutoffs[0]) plus one token per
                tail cluster [cutoffs[i], cutoffs[i+1]); `cutoffs: []` is a full softmax.
Direct connections for every kind: the output layer reads z = [tanh(d + H x); x], h + (n-1)m
wide. For the softmax this is exactly b + W x + U tanh(d + H x) with [U W] its weight, which is how
it is written below; for the other kinds the tree nodes (or head and tail projections) see x too.

Training maximises the penalised log-likelihood (weight decay on every weight except the biases,
10^-4 in the paper). The paper trains by stochastic gradient ascent with learning rate
ε_t = ε_0 / (1 + r t); that is `optimizer: sgd` with `lr_decay: r` here. The default `adam`
reaches a useful model in a few CPU epochs.

Cost per token of the output layer dominates the full softmax: |V|·(1 + n·m + h) parameters, so
W (the direct connections) more than doubles the time of a forward pass when (n-1)·m > h. The
hierarchical and adaptive layers cut the h·V term to about h·log₂V and h·(cutoffs[0] + tails).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.cost import Cost, output_term
from nlpzoo.errors import ConfigError
from nlpzoo.families.nnlm import NNLMConfig
from nlpzoo.models.outputs import make_output

Config = NNLMConfig  # the `nnlm` params section (nlpzoo.families)


def _at_least_f32(t: torch.Tensor) -> torch.Tensor:
    """Half-precision scores are normalised in float32; float64 stays float64."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class NNLM(nn.Module):
    """y = b + W x + U tanh(d + H x), x the concatenated context features (softmax output); the
    other outputs give log p(w | z), z = tanh(d + H x), or [tanh(d + H x); x] with `direct`."""

    def __init__(
        self, config: Config, vocab_size: int, counts: Sequence[int] | np.ndarray | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size
        n1, m, h = config.context_size, config.emb_dim, config.hidden_dim
        self.softmax = config.output == "softmax"
        if config.output == "adaptive" and config.cutoffs and config.cutoffs[-1] >= vocab_size:
            raise ConfigError(
                f"key 'cutoffs' must be below the vocabulary size {vocab_size} (ids are "
                f"frequency-sorted; each cut-off starts a tail cluster), got {config.cutoffs}"
            )
        if config.output == "hierarchical" and counts is None:
            raise ConfigError(
                "key 'output' hierarchical builds a Huffman tree from the training count of "
                "each word: construct the model with counts= (the vocabulary's counts)"
            )
        if counts is not None and len(counts) != vocab_size:
            raise ValueError(f"counts has {len(counts)} entries for a vocabulary of {vocab_size}")
        self.C = nn.Embedding(vocab_size, m)  # word feature vectors, V×m
        self.H = nn.Linear(n1 * m, h)  # hidden layer; its bias is d
        # U is the output layer. Softmax: the paper's U (V×h) with bias b, W its own matrix.
        # Hierarchical / adaptive: the layer that replaces the V×h matrix; it reads
        # z = [tanh(d + H x); x] when direct, so their input is h + (n-1)m wide
        d_out = h + n1 * m if config.direct and not self.softmax else h
        self.U = make_output(
            config.output, d_out, vocab_size, counts, config.cutoffs, config.div_value
        )
        direct_w = config.direct and self.softmax
        self.W = nn.Linear(n1 * m, vocab_size, bias=False) if direct_w else None
        self.drop = nn.Dropout(config.dropout)
        nn.init.uniform_(self.C.weight, -0.1, 0.1)

    def _hidden(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, (n-1)·m), the concatenated features, and a = tanh(d + H x) (B, h)."""
        B = context.shape[0]
        x = self.C(context).reshape(B, -1)  # (B, (n-1)·m), oldest word first
        a = torch.tanh(self.H(self.drop(x)))  # (B, h)
        return x, a

    def _logits(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Softmax output only: y = b + W x + U tanh(d + H x), (B, V)."""
        y = self.U(self.drop(a))  # (B, V) = b + U tanh(d + H x)
        if self.W is not None:
            y = y + self.W(x)  # + W x, the direct connections
        return y

    def _z(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Hierarchical / adaptive input: z = [a; x] with direct connections, else a."""
        a = self.drop(a)
        return torch.cat([a, x], dim=1) if self.config.direct else a  # (B, h [+ (n-1)·m])

    def forward(
        self, context: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """context (B, n-1) ids, oldest first; targets (B,). Returns (logits (B, V), mean NLL) for
        the softmax; (None, mean NLL) for the other outputs, which never form all V scores."""
        x, a = self._hidden(context)
        if self.softmax:
            y = self._logits(x, a)
            return y, F.cross_entropy(y, targets) if targets is not None else None
        if targets is None:
            return None, None
        return None, -self.U.log_prob(self._z(x, a), targets).mean()

    def token_log_probs(self, context: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Natural-log probability of each target, (B,), exact for every output kind."""
        x, a = self._hidden(context)
        if self.softmax:
            logp = torch.log_softmax(_at_least_f32(self._logits(x, a)), dim=-1)  # (B, V)
            return logp.gather(1, targets[:, None]).squeeze(1)
        return _at_least_f32(self.U.log_prob(self._z(x, a), targets))

    def log_prob_all(self, context: torch.Tensor) -> torch.Tensor:
        """The whole next-word distribution, log p(· | context), (B, V)."""
        x, a = self._hidden(context)
        if self.softmax:
            return torch.log_softmax(_at_least_f32(self._logits(x, a)), dim=-1)
        return _at_least_f32(self.U.log_prob_all(self._z(x, a)))

    def embeddings(self) -> torch.Tensor:
        """The feature vectors C, (V, m): the word representations the paper learns."""
        return self.C.weight.detach()

    def cost(self, vocab_size: int) -> Cost:
        """Mikolov et al. (2013a)'s Q for the NNLM with this run's sizes."""
        c = self.config
        n, d, h = c.context_size, c.emb_dim, c.hidden_dim
        width = h + (n * d if c.direct else 0)
        counted = self.U.num_ops_per_token() if c.output == "adaptive" else None
        last, symbol = output_term(
            width, "(H + N×D)" if c.direct else "H", c.output, vocab_size, counted
        )
        q = None if last is None else n * d + n * d * h + last
        return Cost(f"N×D + N×D×H + {symbol}", f"N={n}, D={d}, H={h}, V={vocab_size:,}", q)
