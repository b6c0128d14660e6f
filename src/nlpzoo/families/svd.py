"""The `svd` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require
from nlpzoo.families import Family


@dataclass
class SVDConfig:
    dim: int = 100  # d, number of singular vectors kept
    cds: float = 0.75  # α, context-distribution smoothing exponent (1 = none; Levy et al.: 0.75)
    eig: float = 0.5  # p, eigenvalue weighting: vectors U Σ^p (1 classic, 0 U only)
    neg: float = 1.0  # k, the shift: max(PMI − log k, 0) (1 = plain PPMI; SGNS's k negatives)
    seed: int = 0  # ARPACK's starting vector

    def __post_init__(self) -> None:
        require(self.dim >= 1, "dim", f"must be >= 1, got {self.dim}")
        require(0 < self.cds <= 1, "cds", f"must be in (0, 1], got {self.cds}")
        require(self.eig >= 0, "eig", f"must be >= 0, got {self.eig}")
        require(self.neg >= 1, "neg", f"must be >= 1 (k in log k), got {self.neg}")


FAMILY = Family(
    "svd",
    SVDConfig,
    "nlpzoo.models.svd:PPMISVD",
    task="vectors",
    input="cooccur",
    fit="closed_form",
    vectors=True,
)
