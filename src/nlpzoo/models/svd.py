"""PPMI + truncated SVD word vectors, the count-based baseline of Levy, Goldberg & Dagan (TACL 2015,
"Improving distributional similarity with lessons learned from word embeddings").

GloVe's paper (§3, §5) relates its objective to factorising a log-count matrix; this family does
that factorisation in closed form on the same co-occurrence matrix X (nlpzoo.data.cooccur):

    P(i, j)  = X_ij / Σ X                                  joint
    P(i)     = Σ_j X_ij / Σ X                              word marginal
    P_α(j)   = (Σ_i X_ij)^α / Σ_c (Σ_i X_ic)^α              smoothed context marginal (`cds` α)
    PMI(i,j) = log P(i, j) / (P(i) P_α(j))
             = log X_ij − log Σ_j X_ij − α log Σ_i X_ij + log Σ_c (Σ_i X_ic)^α    (Σ X cancels)
    M_ij     = max(PMI(i, j) − log k, 0)                   shifted PPMI (`neg` k; k = 1: PPMI)

Context-distribution smoothing (α = 0.75, Levy et al. §3.2) raises rare contexts' probability,
which lowers PMI's bias towards rare words. Pairs with X_ij = 0 have PMI −∞ → 0, so M keeps X's
sparsity (or less): it is built and factorised without ever forming a dense V×V matrix.

    M ≈ U_d Σ_d V_dᵀ           truncated SVD, the d = `dim` largest singular values
    word vectors = U_d Σ_d^p   eigenvalue weighting p = `eig` (Levy et al. §3.3):
                               1 the classic SVD, 0 U alone, 0.5 the symmetric split they recommend

Singular vectors are defined up to sign; each column of U is flipped so that its entry of largest
magnitude is positive, and ARPACK starts from a seeded vector, so a fit is deterministic.

Symbols: V vocabulary size, d = `dim`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from nlpzoo.errors import ConfigError, DataError
from nlpzoo.families.svd import SVDConfig
from nlpzoo.io import atomic_open

logger = logging.getLogger(__name__)

_FORMAT_VERSION = 1


Config = SVDConfig  # the `svd` params section (nlpzoo.families)


def ppmi(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    vocab_size: int,
    cds: float = 0.75,
    neg: float = 1.0,
) -> sp.csr_matrix:
    """Shifted positive PMI with context-distribution smoothing, (V, V) sparse (float64).

    Only the non-zero counts are visited; duplicate (i, j) entries are summed first.
    """
    V = vocab_size
    X = sp.coo_matrix(
        (np.asarray(vals, dtype=np.float64), (np.asarray(rows), np.asarray(cols))), shape=(V, V)
    ).tocsr()  # (V, V), duplicates summed
    X.eliminate_zeros()
    if X.nnz == 0:
        raise DataError("svd: the co-occurrence matrix has no non-zero entry")
    if X.data.min() < 0:
        raise DataError("svd: co-occurrence counts must be non-negative")
    word = np.asarray(X.sum(axis=1)).ravel()  # (V,) Σ_j X_ij
    ctx = np.asarray(X.sum(axis=0)).ravel()  # (V,) Σ_i X_ij
    ctx_a = ctx**cds  # (V,) (Σ_i X_ij)^α, 0 for unseen contexts
    i = np.repeat(np.arange(V), np.diff(X.indptr))  # (nnz,) row of each stored entry
    j = X.indices  # (nnz,) column of each stored entry
    # log [P(i,j) / (P(i) P_α(j))] = log X_ij − log Σ_j X_ij − α log Σ_i X_ij + log Σ_c X_c^α
    pmi = np.log(X.data) - np.log(word[i]) - cds * np.log(ctx[j]) + np.log(ctx_a.sum())
    data = np.maximum(pmi - np.log(neg), 0.0)  # (nnz,) shifted PPMI
    M = sp.csr_matrix((data, j.copy(), X.indptr.copy()), shape=(V, V))
    M.eliminate_zeros()
    return M


def truncated_svd(
    M: sp.spmatrix, k: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k largest singular triplets of M, descending: U (V, k), s (k,), Vt (k, V); each
    column of U is sign-fixed (largest-magnitude entry positive, Vt's row flipped with it)."""
    n = min(M.shape)
    if k > n:
        raise ConfigError(f"key 'dim' {k} exceeds the matrix size {n}")
    if k < n - 1:  # ARPACK needs k < min(shape); start from a seeded vector for determinism
        v0 = np.random.default_rng(seed).uniform(-1.0, 1.0, size=n)
        U, s, Vt = svds(M.astype(np.float64), k=k, v0=v0, solver="arpack")
    else:  # (almost) every singular value: a dense SVD is exact and cheap at this size
        U, s, Vt = np.linalg.svd(M.toarray() if sp.issparse(M) else M, full_matrices=False)
        U, s, Vt = U[:, :k], s[:k], Vt[:k]
    order = np.argsort(-s, kind="stable")  # svds returns ascending
    U, s, Vt = U[:, order], s[order], Vt[order]
    big = np.abs(U).argmax(axis=0)  # (k,) row of each column's largest-magnitude entry
    signs = np.sign(U[big, np.arange(k)])  # (k,)
    signs[signs == 0] = 1.0
    return U * signs, s, Vt * signs[:, None]


class PPMISVD:
    """Word vectors U_d Σ_d^p of the shifted, smoothed PPMI matrix (not Lightning: closed form)."""

    def __init__(self, config: Config, vocab_size: int) -> None:
        if config.dim > vocab_size:
            raise ConfigError(f"key 'dim' {config.dim} exceeds the vocabulary size {vocab_size}")
        self.config = config
        self.vocab_size = vocab_size
        self.U: np.ndarray | None = None  # (V, d) left singular vectors
        self.s: np.ndarray | None = None  # (d,) singular values, descending

    def fit(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> PPMISVD:
        c = self.config
        M = ppmi(rows, cols, vals, self.vocab_size, cds=c.cds, neg=c.neg)  # (V, V)
        logger.info("svd: PPMI matrix %d x %d, %d non-zeros", *M.shape, M.nnz)
        U, s, _ = truncated_svd(M, c.dim, seed=c.seed)  # (V, d) (d,)
        self.U, self.s = U, s
        return self

    def embeddings(self) -> np.ndarray:
        """U_d Σ_d^p, (V, d) float32 (rows of words that never co-occur are zero)."""
        self._check_fitted()
        return (self.U * self.s**self.config.eig).astype(np.float32)

    def num_parameters(self) -> int:
        """Numbers in the word vectors, V·d (the factorisation keeps no other trained weight)."""
        return self.vocab_size * self.config.dim

    def cost(self, vocab_size: int) -> None:
        """No per-token cost: one truncated SVD of the PPMI matrix, nothing per training token."""
        return None

    def save(self, path: Path) -> None:
        """U, s and the config as JSON in one .npz (written atomically, loads without pickle)."""
        self._check_fitted()
        meta = {"config": asdict(self.config), "vocab_size": self.vocab_size}
        meta["format"] = _FORMAT_VERSION
        with atomic_open(Path(path), "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta, sort_keys=True)), U=self.U, s=self.s)

    @classmethod
    def load(cls, path: Path) -> PPMISVD:
        with np.load(Path(path), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format") != _FORMAT_VERSION:
                raise DataError(f"{path}: unsupported svd model format {meta.get('format')!r}")
            model = cls(Config(**meta["config"]), meta["vocab_size"])
            model.U, model.s = z["U"], z["s"]
        return model

    def _check_fitted(self) -> None:
        if self.U is None or self.s is None:
            raise RuntimeError("svd: call fit() first")
