"""Tests for nlpzoo.evaluation.mixture: Bengio et al.'s (2003) interpolation of two LMs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nlpzoo.evaluation.mixture import choose_lambda, mix_log_probs
from nlpzoo.evaluation.perplexity import perplexity


def two_models(seed: int, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    """Per-token log-probabilities of two imperfect models that are good on different tokens."""
    rng = np.random.default_rng(seed)
    good_a = rng.random(n) < 0.6  # a knows 60 % of the tokens well, b the others
    lp_a = np.where(good_a, np.log(rng.uniform(0.2, 0.9, n)), np.log(rng.uniform(1e-5, 1e-2, n)))
    lp_b = np.where(good_a, np.log(rng.uniform(1e-4, 0.05, n)), np.log(rng.uniform(0.1, 0.8, n)))
    return lp_a, lp_b


def likelihood(lp_a: np.ndarray, lp_b: np.ndarray, lam: float) -> float:
    """Σ log(λ p_a + (1 − λ) p_b), written with plain probabilities."""
    return float(np.sum(np.log(lam * np.exp(lp_a) + (1 - lam) * np.exp(lp_b))))


def test_mix_by_hand():
    lp_a = np.log([0.5, 0.01, 0.2])
    lp_b = np.log([0.1, 0.3, 0.2])
    got = mix_log_probs(lp_a, lp_b, 0.25)
    expected = np.log([0.25 * 0.5 + 0.75 * 0.1, 0.25 * 0.01 + 0.75 * 0.3, 0.2])
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert got.dtype == np.float64
    # float32 input is mixed in float64: the tiny probabilities of a long tail survive
    lp32 = np.array([-800.0, -2.0], dtype=np.float32)
    mixed = mix_log_probs(lp32, np.array([-801.0, -3.0], dtype=np.float32), 0.5)
    assert mixed.dtype == np.float64
    assert mixed[0] == pytest.approx(-800 + math.log(0.5 + 0.5 * math.exp(-1)), rel=1e-14)


def test_lambda_one_and_zero_give_one_model():
    lp_a, lp_b = two_models(0, n=50)
    np.testing.assert_array_equal(mix_log_probs(lp_a, lp_b, 1.0), lp_a)
    np.testing.assert_array_equal(mix_log_probs(lp_a, lp_b, 0.0), lp_b)


def test_mix_refuses_bad_input():
    with pytest.raises(ValueError, match="lambda"):
        mix_log_probs(np.zeros(3), np.zeros(3), 1.5)
    with pytest.raises(ValueError, match="different streams"):
        mix_log_probs(np.zeros(3), np.zeros(4), 0.5)
    with pytest.raises(ValueError, match="empty"):
        choose_lambda(np.zeros(0), np.zeros(0))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chosen_lambda_is_the_validation_optimum(seed):
    lp_a, lp_b = two_models(seed)
    lam = choose_lambda(lp_a, lp_b)
    assert 0.05 < lam < 0.95  # an interior optimum for these two models
    grid = np.linspace(1e-4, 1 - 1e-4, 9999)
    scores = np.array([likelihood(lp_a, lp_b, g) for g in grid])
    best = grid[scores.argmax()]
    assert abs(lam - best) < 2e-4
    assert likelihood(lp_a, lp_b, lam) >= scores.max() - 1e-9
    # the EM fixed point: λ equals the mean posterior responsibility of model a
    post = np.exp(np.log(lam) + lp_a - mix_log_probs(lp_a, lp_b, lam))
    assert post.mean() == pytest.approx(lam, abs=1e-9)


@pytest.mark.parametrize("seed", [1, 2])
def test_mixture_beats_both_models_on_validation(seed):
    lp_a, lp_b = two_models(seed)
    lam = choose_lambda(lp_a, lp_b)
    ppl_mix = perplexity(mix_log_probs(lp_a, lp_b, lam))
    assert ppl_mix <= perplexity(lp_a)
    assert ppl_mix <= perplexity(lp_b)
    # and clearly so here, each model covering the other's weak tokens
    assert ppl_mix < 0.8 * min(perplexity(lp_a), perplexity(lp_b))


def test_optimum_at_the_boundary():
    """A model better on every token takes all the weight; the mixture is then that model."""
    rng = np.random.default_rng(4)
    lp_a = np.log(rng.uniform(0.3, 0.9, 200))
    lp_b = lp_a - rng.uniform(1.0, 3.0, 200)  # b is worse everywhere
    assert choose_lambda(lp_a, lp_b) == 1.0
    assert choose_lambda(lp_b, lp_a) == 0.0
    np.testing.assert_array_equal(mix_log_probs(lp_a, lp_b, choose_lambda(lp_a, lp_b)), lp_a)
    # identical models: any λ is optimal, and every λ gives the same mixture
    lam = choose_lambda(lp_a, lp_a)
    np.testing.assert_allclose(mix_log_probs(lp_a, lp_a, lam), lp_a, rtol=1e-12)
