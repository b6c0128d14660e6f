"""Tests for the interpolated modified Kneser-Ney n-gram LM (nlpzoo.models.ngram)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from nlpzoo.data.vocab import BOS, EOS, PAD, UNK
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.models.ngram import Config, KneserNey

# Words of the random corpora: UNK and ids 4..V-1 (never BOS, EOS or PAD inside a sentence).


def random_stream(rng: np.random.Generator, vocab_size: int, n_tokens: int) -> np.ndarray:
    """Sentences of skewed random words, each closed by EOS; `n_tokens` tokens in all."""
    words = np.array([UNK, *range(4, vocab_size)])
    weights = 1.0 / np.arange(1, words.size + 1)  # Zipf-like, so counts 1..4 all occur
    tokens = rng.choice(words, size=n_tokens, p=weights / weights.sum())
    tokens[rng.random(n_tokens) < 0.2] = EOS
    tokens[-1] = EOS
    return tokens.astype(np.int64)


def split_sentences(stream) -> list[list[int]]:
    """Sentences of the stream, each ending in EOS (a trailing unfinished one kept as is)."""
    sentences, current = [], []
    for tok in stream:
        current.append(int(tok))
        if tok == EOS:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return sentences


def contexts_of(stream, order: int) -> list[list[int]]:
    """Sentence-bounded, BOS-padded context (order-1 ids) of every token, by plain loops."""
    out = []
    for sentence in split_sentences(stream):
        history = [BOS] * (order - 1)
        for tok in sentence:
            out.append(history[len(history) - (order - 1) :])
            history = [*history, tok]
    return out


class NaiveKneserNey:
    """Loop-and-dict reference, straight from Chen & Goodman's interpolated modified KN."""

    def __init__(self, stream, vocab_size: int, order: int) -> None:
        self.v, self.n = vocab_size, order
        self.predicted = [w for w in range(vocab_size) if w not in (BOS, PAD)]
        # raw[g]: count of the n-gram g; left[g]: distinct words seen left of the k-gram g.
        raw: dict[tuple, int] = defaultdict(int)
        left: dict[tuple, set] = defaultdict(set)
        for sentence in split_sentences(stream):
            padded = [BOS] * (order - 1) + sentence
            for i in range(order - 1, len(padded)):
                raw[tuple(padded[i - order + 1 : i + 1])] += 1
                for k in range(1, order):
                    left[tuple(padded[i - k + 1 : i + 1])].add(padded[i - k])
        # counts[k][g] for k-grams g: raw at the top order, continuation counts below.
        self.counts: dict[int, dict[tuple, int]] = {order: dict(raw)}
        for k in range(1, order):
            self.counts[k] = {g: len(s) for g, s in left.items() if len(g) == k}
        self.discounts = {k: self.estimate(list(c.values())) for k, c in self.counts.items()}
        # Per history: total count and number of continuations with count 1, 2, >= 3.
        self.total: dict[tuple, int] = defaultdict(int)
        self.nr: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
        for c in self.counts.values():
            for g, cnt in c.items():
                self.total[g[:-1]] += cnt
                self.nr[g[:-1]][min(cnt, 3) - 1] += 1

    @staticmethod
    def estimate(counts: list[int]) -> tuple[float, float, float]:
        n = {r: sum(1 for c in counts if c == r) for r in (1, 2, 3, 4)}
        fallback = (0.5, 1.0, 1.5)
        if n[1] + 2 * n[2] == 0:
            return fallback
        y = n[1] / (n[1] + 2 * n[2])
        d1 = 1 - 2 * y * n[2] / n[1] if n[1] else None
        d2 = 2 - 3 * y * n[3] / n[2] if n[2] else None
        d3 = 3 - 4 * y * n[4] / n[3] if n[3] else None
        return tuple(
            d if d is not None and 0 < d < c else f
            for d, c, f in zip((d1, d2, d3), (1, 2, 3), fallback, strict=True)
        )

    def prob(self, word: int, history: tuple) -> float:
        """p_KN(word | history) at order len(history)+1, recursing to the uniform level."""
        if word not in self.predicted:
            return 0.0
        lower = self.prob(word, history[1:]) if history else 1.0 / len(self.predicted)
        total = self.total.get(history, 0)
        if total == 0:
            return lower  # unseen history: γ = 1, no higher-order term
        k = len(history) + 1
        d1, d2, d3 = self.discounts[k]
        c = self.counts[k].get((*history, word), 0)
        d = (0.0, d1, d2, d3)[min(c, 3)]
        n1, n2, n3 = self.nr[history]
        gamma = (d1 * n1 + d2 * n2 + d3 * n3) / total
        return max(c - d, 0.0) / total + gamma * lower

    def log_probs(self, stream) -> list[float]:
        return [
            math.log(self.prob(int(w), tuple(ctx)))
            for w, ctx in zip(stream, contexts_of(stream, self.n), strict=True)
        ]


@pytest.fixture
def small_corpus() -> tuple[np.ndarray, int]:
    vocab_size = 12
    stream = random_stream(np.random.default_rng(7), vocab_size - 1, 300)  # id 11 never occurs
    return stream, vocab_size


@pytest.mark.parametrize("order", [2, 3, 4, 5])
def test_distribution_normalised_and_positive(order, small_corpus):
    stream, v = small_corpus
    model = KneserNey(Config(order=order), v).fit(stream)
    rng = np.random.default_rng(order)
    pool = [UNK, BOS, EOS, *range(4, v)]
    contexts = [[], [BOS], [11], [11, UNK], [UNK] * 6, [PAD, 5], [4, 11, 5, 6]]
    contexts += [list(rng.choice(pool, size=rng.integers(1, 7))) for _ in range(13)]
    seen = {tuple(c) for c in contexts_of(stream, order)}
    n_unseen = sum(
        tuple(([BOS] * order + [int(i) for i in c])[-(order - 1) :]) not in seen for c in contexts
    )
    assert n_unseen >= 3
    for ctx in contexts:
        p = model.distribution(ctx)
        assert p.shape == (v,) and p.dtype == np.float64
        assert abs(p.sum() - 1.0) < 1e-9, ctx
        assert p[BOS] == 0.0 and p[PAD] == 0.0
        predicted = np.ones(v, dtype=bool)
        predicted[[BOS, PAD]] = False
        assert np.all(p[predicted] > 0.0), ctx


@pytest.mark.parametrize("order", [2, 3, 5])
def test_log_probs_match_distribution(order, small_corpus):
    stream, v = small_corpus
    model = KneserNey(Config(order=order), v).fit(stream)
    test = random_stream(np.random.default_rng(99), v, 120)
    test = test[:-1]  # unfinished last sentence
    lp = model.log_probs(test)
    assert lp.shape == test.shape and lp.dtype == np.float64
    for i, (w, ctx) in enumerate(zip(test, contexts_of(test, order), strict=True)):
        assert lp[i] == pytest.approx(math.log(model.distribution(ctx)[w]), abs=1e-12)
    # The first word of a sentence does not see the previous sentence's EOS.
    j = int(np.argmax(test == EOS)) + 1
    assert lp[j] == pytest.approx(math.log(model.distribution([])[test[j]]), abs=1e-12)
    assert lp[j] != pytest.approx(math.log(model.distribution(list(test[:j]))[test[j]]))


@pytest.mark.parametrize("order", [2, 3, 4])
def test_matches_naive_reference(order):
    rng = np.random.default_rng(order + 10)
    v = 14
    train = random_stream(rng, v - 1, 1500)
    test = random_stream(rng, v, 300)
    model = KneserNey(Config(order=order), v).fit(train)
    ref = NaiveKneserNey(train, v, order)
    for k in range(1, order + 1):
        assert model.discounts[k] == pytest.approx(ref.discounts[k], abs=1e-12)
    # The discount formula itself (not only the fallback) must be exercised.
    assert any(d not in (0.5, 1.0, 1.5) for ds in ref.discounts.values() for d in ds)
    np.testing.assert_allclose(model.log_probs(test), ref.log_probs(test), rtol=0, atol=1e-9)
    for ctx in ([], [UNK], [4, 5], [13, 4, 4], [BOS, 4]):
        full = tuple(([BOS] * order + ctx)[-(order - 1) :])
        expected = [ref.prob(w, full) for w in range(v)]
        np.testing.assert_allclose(model.distribution(ctx), expected, rtol=0, atol=1e-9)
    ppl = math.exp(-sum(ref.log_probs(test)) / len(test))
    assert model.perplexity(test) == pytest.approx(ppl, rel=1e-9)


def test_hand_computed_bigram_perplexity():
    # V = 7: 0 <unk>, 1 <s>, 2 </s>, 3 <pad>, 4 a, 5 b, 6 c. Predicted vocabulary W has 5 ids.
    a, b, c, e = 4, 5, 6, EOS
    train = [a, b, e, a, b, e, a, b, c, e, a, c, e, UNK, e]  # 15 tokens, 5 sentences
    # Bigram counts (context <s> = S): (S,a)=4 (a,b)=3 (b,e)=2 (c,e)=2
    #   (b,c)=1 (a,c)=1 (S,unk)=1 (unk,e)=1  -> n1=4 n2=2 n3=1 n4=1
    #   Y = 4/(4+4) = 0.5, D1 = 1-2*.5*2/4 = 0.5, D2 = 2-3*.5*1/2 = 1.25, D3+ = 3-4*.5*1/1 = 1
    # Unigram continuation counts (distinct left words): a=1 {S}, b=1 {a}, unk=1 {S},
    #   c=2 {a,b}, e=3 {b,c,unk}; total 8 -> n1=3 n2=1 n3=1 n4=0
    #   Y = 3/5 = 0.6, D1 = 1-2*.6*1/3 = 0.6, D2 = 2-3*.6*1/1 = 0.2,
    #   D3+ = 3-4*.6*0/1 = 3, not < 3 -> fallback 1.5
    # γ(ε) = (0.6*3 + 0.2*1 + 1.5*1)/8 = 0.4375; uniform 1/5 -> γ(ε)/5 = 0.0875
    p1 = {a: 0.4 / 8 + 0.0875, b: 0.4 / 8 + 0.0875, UNK: 0.4 / 8 + 0.0875}  # 0.1375 each
    p1[c] = 1.8 / 8 + 0.0875  # 0.3125
    p1[e] = 1.5 / 8 + 0.0875  # 0.275
    # Bigram histories: S: total 5, N1=1 N3+=1 -> γ = (0.5+1)/5 = 0.3
    #   a: total 4, N1=1 N3+=1 -> γ = 1.5/4 = 0.375;  b: total 3, N1=1 N2=1 -> γ = 1.75/3
    #   c: total 2, N2=1 -> γ = 1.25/2 = 0.625;        unk: total 1, N1=1 -> γ = 0.5
    test = [a, b, e, a, c, c, e, b, UNK, e]
    expected = [
        (4 - 1) / 5 + 0.3 * p1[a],  # a|S    = 0.64125
        (3 - 1) / 4 + 0.375 * p1[b],  # b|a    = 0.5515625
        (2 - 1.25) / 3 + 1.75 / 3 * p1[e],  # e|b = 0.41041666...
        (4 - 1) / 5 + 0.3 * p1[a],  # a|S
        (1 - 0.5) / 4 + 0.375 * p1[c],  # c|a    = 0.2421875
        0.625 * p1[c],  # c|c unseen bigram  = 0.1953125
        (2 - 1.25) / 2 + 0.625 * p1[e],  # e|c = 0.546875
        0.3 * p1[b],  # b|S unseen bigram    = 0.04125
        1.75 / 3 * p1[UNK],  # unk|b unseen  = 0.0802083...
        (1 - 0.5) / 1 + 0.5 * p1[e],  # e|unk = 0.6375
    ]
    assert expected[:3] == pytest.approx([0.64125, 0.5515625, 1.23125 / 3])
    assert sum(p1.values()) == pytest.approx(1.0)

    model = KneserNey(Config(order=2), 7).fit(np.array(train))
    assert model.discounts[2] == pytest.approx((0.5, 1.25, 1.0))
    assert model.discounts[1] == pytest.approx((0.6, 0.2, 1.5))
    lp = model.log_probs(np.array(test))
    np.testing.assert_allclose(np.exp(lp), expected, rtol=1e-12)
    mean_nll = -sum(math.log(p) for p in expected) / len(expected)
    assert model.perplexity(np.array(test)) == pytest.approx(math.exp(mean_nll), rel=1e-12)


def test_save_load_roundtrip(tmp_path, small_corpus):
    stream, v = small_corpus
    model = KneserNey(Config(order=4), v).fit(stream)
    path = tmp_path / "kn.npz"
    model.save(path)
    loaded = KneserNey.load(path)
    assert loaded.config == model.config and loaded.vocab_size == v
    assert loaded.num_parameters() == model.num_parameters() > 0
    test = random_stream(np.random.default_rng(3), v, 200)
    np.testing.assert_array_equal(loaded.log_probs(test), model.log_probs(test))


@pytest.mark.parametrize("order", [0, 1, 6, 2.5, True])
def test_config_rejects_bad_order(order):
    with pytest.raises(ConfigError, match="order"):
        Config(order=order)


def test_rejects_bad_streams(small_corpus):
    stream, v = small_corpus
    model = KneserNey(Config(), v)
    with pytest.raises(RuntimeError):
        model.log_probs(stream)
    with pytest.raises(DataError):
        model.fit(np.array([4, BOS, 5, EOS]))
    with pytest.raises(DataError):
        model.fit(np.array([4, v, EOS]))
    model.fit(stream)
    with pytest.raises(DataError):
        model.log_probs(np.array([4, PAD, EOS]))


@pytest.mark.parametrize("order", [3, 5])
def test_large_zipfian_stream_runs(order):
    rng = np.random.default_rng(0)
    v = 5000
    tokens = np.minimum(rng.zipf(1.3, size=200_000) + 3, v - 1)
    tokens[rng.random(tokens.size) < 0.05] = EOS
    tokens[-1] = EOS
    model = KneserNey(Config(order=order), v).fit(tokens[:150_000])
    lp = model.log_probs(tokens[150_000:])
    assert lp.shape == (50_000,) and np.all(np.isfinite(lp)) and np.all(lp < 0)
    assert 1.0 < model.perplexity(tokens[150_000:]) < v
    assert abs(model.distribution([4, 5]).sum() - 1.0) < 1e-9
