"""Tests for the PPMI + truncated SVD baseline (nlpzoo.models.svd)."""

from __future__ import annotations

import numpy as np
import pytest

from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.models.svd import PPMISVD, Config, ppmi, truncated_svd

# A 5-word count matrix, not symmetric, with zeros, a word that never occurs (row/column 4) and
# a skewed context distribution so smoothing matters.
X5 = np.array(
    [
        [0.0, 12.0, 1.0, 0.5, 0.0],
        [10.0, 2.0, 0.0, 3.0, 0.0],
        [1.5, 0.0, 0.0, 1.0, 0.0],
        [0.5, 4.0, 2.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ]
)


def coo(X: np.ndarray):
    rows, cols = np.nonzero(X)
    return rows.astype(np.int32), cols.astype(np.int32), X[rows, cols]


def dense_ppmi(X: np.ndarray, alpha: float, k: float) -> np.ndarray:
    """The formula on a dense matrix: max(log P(i,j) / (P(i) P_α(j)) − log k, 0), 0 where X = 0."""
    total = X.sum()
    P = X / total
    Pi = X.sum(1) / total
    ca = X.sum(0) ** alpha
    Pc = ca / ca.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(P / (Pi[:, None] * Pc[None, :]))
    out = np.maximum(pmi - np.log(k), 0.0)
    return np.where(X > 0, out, 0.0)


@pytest.mark.parametrize(("alpha", "k"), [(1.0, 1.0), (0.75, 1.0), (0.75, 5.0), (0.5, 2.0)])
def test_ppmi_equals_dense_formula(alpha, k):
    M = ppmi(*coo(X5), vocab_size=5, cds=alpha, neg=k)
    assert M.shape == (5, 5)
    np.testing.assert_allclose(M.toarray(), dense_ppmi(X5, alpha, k), rtol=1e-13, atol=1e-13)
    assert (M.data > 0).all()  # no stored zeros


def test_ppmi_worked_entry_and_options_matter():
    # entry (0, 1) by hand without smoothing: log(12 · 37.5 / (13.5 · 18)) (Σ X = 37.5)
    M1 = ppmi(*coo(X5), vocab_size=5, cds=1.0).toarray()
    assert M1[0, 1] == pytest.approx(np.log(12 * 37.5 / (13.5 * 18)), rel=1e-13)
    M75 = ppmi(*coo(X5), vocab_size=5, cds=0.75).toarray()
    M75k = ppmi(*coo(X5), vocab_size=5, cds=0.75, neg=5.0).toarray()
    assert not np.allclose(M1, M75)  # smoothing changes the values
    assert (M75k <= M75).all() and (M75k < M75).any()  # the shift lowers and clips
    # duplicates are summed: the same counts split into two entries give the same matrix
    r, c, v = coo(X5)
    dup = ppmi(np.r_[r, r], np.r_[c, c], np.r_[v / 2, v / 2], vocab_size=5, cds=0.75)
    np.testing.assert_allclose(dup.toarray(), M75, rtol=1e-13)


def random_counts(V: int = 30, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.poisson(1.5, (V, V)).astype(np.float64) * rng.uniform(0.2, 1.0, (V, V))
    return X + X.T


def sign_fixed_dense_svd(M: np.ndarray, k: int):
    U, s, _ = np.linalg.svd(M)
    U, s = U[:, :k], s[:k]
    for c in range(k):
        if U[np.abs(U[:, c]).argmax(), c] < 0:
            U[:, c] = -U[:, c]
    return U, s


@pytest.mark.parametrize("eig", [0.0, 0.5, 1.0])
def test_embeddings_reproduce_truncated_svd(eig):
    X = random_counts()
    d = 6
    model = PPMISVD(Config(dim=d, eig=eig), 30).fit(*coo(X))
    M = dense_ppmi(X, 0.75, 1.0)
    U, s = sign_fixed_dense_svd(M, d)
    np.testing.assert_allclose(model.s, s, rtol=1e-8)
    E = model.embeddings()
    assert E.shape == (30, d) and E.dtype == np.float32
    np.testing.assert_allclose(E, U * s**eig, rtol=1e-4, atol=1e-5)


def test_eig_weighting_behaves_as_documented():
    X = random_counts(seed=1)
    fits = {p: PPMISVD(Config(dim=5, eig=p), 30).fit(*coo(X)) for p in (0.0, 0.5, 1.0)}
    s = fits[1.0].s
    assert (np.diff(s) <= 0).all() and s[-1] > 0  # descending singular values
    E0, E5, E1 = (fits[p].embeddings().astype(np.float64) for p in (0.0, 0.5, 1.0))
    np.testing.assert_allclose(E0.T @ E0, np.eye(5), atol=1e-5)  # U alone: orthonormal
    np.testing.assert_allclose(E5.T @ E5, np.diag(s), rtol=1e-4, atol=1e-5)  # U Σ^½
    np.testing.assert_allclose(E1.T @ E1, np.diag(s**2), rtol=1e-4, atol=1e-4)  # U Σ
    # U Σ Vᵀ is the best rank-5 approximation of M: its error is the tail of the spectrum
    M = dense_ppmi(X, 0.75, 1.0)
    _, Vt_s, _ = np.linalg.svd(M)
    U, sv, Vt = truncated_svd(ppmi(*coo(X), vocab_size=30), 5)
    err = np.linalg.norm(M - (U * sv) @ Vt)
    assert err == pytest.approx(np.sqrt((Vt_s[5:] ** 2).sum()), rel=1e-8)


def test_deterministic_and_sign_fixed():
    X = random_counts(seed=2)
    a = PPMISVD(Config(dim=4, seed=0), 30).fit(*coo(X)).embeddings()
    b = PPMISVD(Config(dim=4, seed=0), 30).fit(*coo(X)).embeddings()
    c = PPMISVD(Config(dim=4, seed=7), 30).fit(*coo(X)).embeddings()  # another ARPACK start
    assert np.array_equal(a, b)
    np.testing.assert_allclose(a, c, atol=1e-5)  # same vectors, same signs
    big = np.abs(a).argmax(axis=0)
    assert (a[big, np.arange(4)] > 0).all()


def test_two_clusters_are_separated():
    # words 0-5 co-occur among themselves, words 6-11 among themselves, a little noise across
    rng = np.random.default_rng(3)
    V = 12
    same = (np.arange(V)[:, None] < 6) == (np.arange(V)[None, :] < 6)
    X = np.where(same, rng.uniform(5, 15, (V, V)), rng.uniform(0, 0.6, (V, V)))
    X = X + X.T
    E = PPMISVD(Config(dim=2), V).fit(*coo(X)).embeddings()
    E = E / np.linalg.norm(E, axis=1, keepdims=True)
    cos = E @ E.T
    within = cos[same & ~np.eye(V, dtype=bool)]
    between = cos[~same]
    assert within.min() > between.max()
    assert within.mean() > 0.9 and between.mean() < 0.3


def test_unseen_words_get_zero_vectors():
    E = PPMISVD(Config(dim=2), 5).fit(*coo(X5)).embeddings()
    assert np.array_equal(E[4], np.zeros(2, dtype=np.float32))


def test_save_load_roundtrip(tmp_path):
    X = random_counts(seed=4)
    model = PPMISVD(Config(dim=3, eig=1.0, neg=2.0), 30).fit(*coo(X))
    path = tmp_path / "svd.npz"
    model.save(path)
    with np.load(path, allow_pickle=False) as z:
        assert set(z.files) == {"meta", "U", "s"}
    back = PPMISVD.load(path)
    assert back.config == model.config and back.vocab_size == 30
    assert np.array_equal(back.embeddings(), model.embeddings())
    assert back.num_parameters() == model.num_parameters() == 30 * 3


def test_config_validation_and_errors():
    with pytest.raises(ConfigError, match="cds"):
        build(Config, {"cds": 0}, "run 'svd'")
    with pytest.raises(ConfigError, match="neg"):
        build(Config, {"neg": 0.5}, "run 'svd'")
    with pytest.raises(ConfigError, match="eig"):
        build(Config, {"eig": -1}, "run 'svd'")
    with pytest.raises(ConfigError, match="did you mean 'dim'"):
        build(Config, {"dims": 10}, "run 'svd'")
    with pytest.raises(ConfigError, match="dim"):
        PPMISVD(Config(dim=10), 5)
    with pytest.raises(RuntimeError, match="fit"):
        PPMISVD(Config(dim=2), 5).embeddings()
