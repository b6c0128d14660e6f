"""Tests for nlpzoo.evaluation.perplexity (docs/design.md §4: exp of mean NLL over every token)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlpzoo.data.vocab import EOS
from nlpzoo.evaluation.perplexity import perplexity, window_log_probs
from nlpzoo.models.nnlm import NNLM, Config

pytestmark = pytest.mark.usefixtures("one_thread")


def test_perplexity_by_hand_on_20_tokens():
    probs = [0.5, 0.25, 0.1, 0.01, 0.9, 0.33, 0.05, 0.5, 0.002, 0.7,
             0.125, 0.6, 0.04, 0.3, 0.2, 0.08, 0.99, 0.015, 0.45, 0.0625]  # fmt: skip
    assert len(probs) == 20
    log_probs = np.log(np.array(probs))
    # exp(mean NLL) = (Π p)^(−1/N), the geometric mean of 1/p
    product = 1.0
    for p in probs:
        product *= p
    expected = product ** (-1 / 20)
    assert perplexity(log_probs) == pytest.approx(expected, rel=1e-12)
    assert perplexity(list(log_probs)) == pytest.approx(expected, rel=1e-12)
    # not exp of something else: the arithmetic mean of 1/p is larger
    assert expected < np.mean(1 / np.array(probs)) * 0.5


def test_perplexity_of_uniform_model_is_vocabulary_size():
    assert perplexity(np.full(20, -math.log(37.0))) == pytest.approx(37.0, rel=1e-12)
    assert perplexity(np.zeros(20)) == 1.0


def test_perplexity_accumulates_in_float64():
    """Float32 input, float64 sum: even a pairwise float32 mean is off by ~3e-7 here."""
    rng = np.random.default_rng(0)
    lp32 = (-rng.uniform(0.0, 12.0, size=200_001)).astype(np.float32)
    exact = math.exp(-math.fsum(float(x) for x in lp32) / lp32.size)
    assert perplexity(lp32) == pytest.approx(exact, rel=1e-10)


def test_perplexity_of_empty_stream_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        perplexity(np.array([]))


def one_by_one(model: NNLM, stream: np.ndarray, n1: int) -> np.ndarray:
    """log p(w_t | previous n1 tokens, EOS-padded) with one model call per position."""
    out = []
    for t in range(len(stream)):
        prev = [int(w) for w in stream[max(0, t - n1) : t]]
        ctx = torch.tensor([[EOS] * (n1 - len(prev)) + prev])
        out.append(float(model.token_log_probs(ctx, torch.tensor([int(stream[t])]))[0]))
    return np.array(out)


@pytest.mark.parametrize("direct", [False, True])
def test_window_log_probs_equals_position_by_position(direct):
    torch.manual_seed(3)
    n1, vocab = 3, 19
    model = NNLM(Config(context_size=n1, emb_dim=4, hidden_dim=6, direct=direct), vocab).eval()
    rng = np.random.default_rng(4)
    stream = rng.integers(0, vocab, size=30)  # 30 = 4·7 + 2: the last batch is short
    stream[[5, 17, 29]] = EOS
    with torch.no_grad():
        expected = one_by_one(model, stream, n1)
    got = window_log_probs(model, stream, n1, batch_size=7)
    assert got.dtype == np.float64
    assert got.shape == (30,)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # batching does not matter, including one batch for all and a batch per token
    np.testing.assert_allclose(window_log_probs(model, stream, n1), got, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        window_log_probs(model, stream, n1, batch_size=1), got, rtol=1e-6, atol=1e-6
    )
    assert perplexity(got) == pytest.approx(math.exp(-expected.mean()), rel=1e-5)
