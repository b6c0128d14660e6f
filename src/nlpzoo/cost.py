"""Training cost as the papers count it: Q, the multiply-adds per training token.

Every model states its own cost, `model.cost(vocab_size) -> Cost | None`, with the sizes of its
config; the run writes `cost.as_stats()` into its stats (and so into `metrics/RUN.json`), and the
report shows what the run wrote. Mikolov et al. (2013a) compare architectures by Q:

    NNLM       Q = N×D + N×D×H + H×V          (hierarchical softmax: H×log₂V for the last term)
    CBOW       Q = N×D + D×log₂V              (N context words)
    skip-gram  Q = C×(D + D×log₂V)            (C the largest distance of a context word)

with negative sampling, log₂V becomes K + 1 (K noise words and the target). The other families
count the matrix products of one forward pass per predicted token the same way (biases,
nonlinearities and look-ups left out); translation models count per target token, with attention
spans of S = T = `MT_SPAN` pieces. A model without a per-token cost (a count table, a closed-form
factorisation) returns None. This module imports no torch: the report reads costs without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# S = T: pieces per side of a typical Multi30k sentence, for the attention terms of translation
MT_SPAN = 16


@dataclass(frozen=True)
class Cost:
    """One run's Q: the formula as the paper writes it, its symbols' values, and the number."""

    formula: str  # symbolic, e.g. "N×D + N×D×H + H×V"
    terms: str  # the symbols' values for this run, e.g. "N=4, D=60, H=100, V=13,192"
    multiply_adds: float | None  # Q per token (per `unit`); None: not countable for this model
    unit: str = "token"  # what Q is counted per: token, or entry (GloVe's non-zero X_ij)

    def as_stats(self) -> dict[str, Any]:
        """The keys a run writes into its stats (train_stats.json, then metrics/RUN.json)."""
        stats: dict[str, Any] = {
            "cost_formula": self.formula,
            "cost_terms": self.terms,
            "cost_per_token": _number(self.multiply_adds),
        }
        if self.unit != "token":
            stats["cost_unit"] = self.unit
        return stats


def _number(q: float | None) -> int | float | None:
    if q is None:
        return None
    q = round(float(q), 2)
    return int(q) if q.is_integer() else q


def output_term(
    width: int, symbol: str, kind: str, vocab_size: int, counted: float | None = None
) -> tuple[float | None, str]:
    """The output layer's term of Q for an input `width` wide (named `symbol` in the formula).

    softmax: width×V; hierarchical: width×log₂V (a balanced tree; a Huffman tree's mean path is a
    little shorter); adaptive: the layer's own expected count over the training counts, `counted`
    (it depends on the cut-offs and the word frequencies, so only the model can count it)."""
    if kind == "hierarchical":
        return width * math.log2(vocab_size), f"{symbol}×log₂V"
    if kind == "adaptive":
        return counted, f"adaptive({symbol}, V)"
    return width * vocab_size, f"{symbol}×V"
