"""Tests for word2vec's compiled kernel (nlpzoo.models.word2vec_kernel, its threads in
nlpzoo.models.word2vec_threads): one pair's update by hand
(negative sampling and hierarchical softmax, skip-gram and CBOW), a whole stream against the
PyTorch closed-form step pair by pair, the kernel's own sampling (sub-sampling, dynamic window,
noise words, sentence ends, the rate), threads, and training through the model's step."""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from word2vec_harness import fixed_pairs, record_tokens

from interrupts import assert_kill_and_resume, train_with_callbacks
from nlpzoo.data import word2vec as data_w2v
from nlpzoo.data.vocab import EOS, UNK, Vocab
from nlpzoo.data.word2vec import (
    ChunkSampler,
    Word2VecChunks,
    keep_probability,
    sentence_cuts,
    word2vec_dataloader,
)
from nlpzoo.models import word2vec_threads
from nlpzoo.models.outputs import huffman_tree
from nlpzoo.models.word2vec import Config, Word2Vec, alias_table
from nlpzoo.models.word2vec_kernel import MAX_EXP, _sigmoid_softplus
from nlpzoo.models.word2vec_threads import (
    MIN_PIECE_TOKENS,
    PIECE_TOKENS,
    make_tables,
    piece_plan,
    splitmix64,
    train_tokens,
)

VARIANTS = [(m, o) for m in ("skipgram", "cbow") for o in ("negative", "hierarchical")]
# specials (never trained) then 20 words
COUNTS = np.array([50, 0, 30, 0, 900, 600, 400, 300, 250, 200, 160, 120, 100, 80, 60, 40, 30, 20])
V = len(COUNTS)


pytestmark = pytest.mark.usefixtures("one_thread")


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def tables_for(model: str, objective: str, counts=COUNTS, window: int = 2, negative: int = 3,
               sample: float = 0.0):  # fmt: skip
    words = np.asarray(counts, dtype=np.float64).copy()
    words[:4] = 0
    t = huffman_tree(words)
    return make_tables(
        model,
        objective,
        window,
        negative,
        keep_probability(counts, sample),
        (t.points, t.codes, t.lengths),
        alias_table(words**0.75),
    )


def random_weights(rows_out: int, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    syn0 = rng.normal(0, 0.5, (V, d)).astype(np.float32)
    syn1 = rng.normal(0, 0.5, (rows_out, d)).astype(np.float32)
    return syn0, syn1


# ---------------------------------------------------------------------------------- one pair


def test_sigmoid_and_log_sigmoid_tables_are_within_1e_6_everywhere():
    xs = np.concatenate([np.linspace(-12, 12, 20_001), [-8.0, 8.0, -7.99999, 7.99999, 0.0]])
    got = np.array([_sigmoid_softplus(float(x)) for x in xs])
    sig = 1 / (1 + np.exp(-xs))
    assert np.abs(got[:, 0] - sig).max() < 1e-6
    assert np.abs(got[:, 1] - np.log1p(np.exp(-xs))).max() < 1e-6  # −log σ(x)


def by_hand(h, rows, labels, syn1, alpha, skip_beyond=0.0):
    """word2vec.c's pair in float64: rows scored in order, each updated at once; returns
    (neu1e, loss) and updates syn1 (float64) in place."""
    neu1e, loss = np.zeros_like(h), 0.0
    for r, label in zip(rows, labels, strict=True):
        f = float(syn1[r] @ h)
        loss += -math.log(sig(f)) if label else -math.log(sig(-f))
        if skip_beyond and abs(f) >= skip_beyond:
            continue
        g = (label - sig(f)) * alpha
        neu1e += g * syn1[r]
        syn1[r] += g * h
    return neu1e, loss


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_negative_sampling_pair_by_hand(model):
    t = tables_for(model, "negative", negative=4)
    syn0, syn1 = random_weights(V)
    s0, s1 = syn0.astype(np.float64), syn1.astype(np.float64)
    centre, alpha = 5, 0.3
    contexts = [7, 9] if model == "cbow" else [7]
    # noise: 9, the centre (skipped, word2vec.c), 12, then 9 again: its second update starts
    # from the vector the first one left (rows are updated one by one, in order)
    noise = [9, 5, 12, 9]
    inputs = np.array([[7, -1, 9, -1]]) if model == "cbow" else np.array([[-1, 7, -1, -1]])
    loss = fixed_pairs(syn0, syn1, t, inputs, [centre], np.array([noise]), [alpha])
    h = s0[contexts].mean(0)
    neu1e, expected = by_hand(h, [5, 9, 12, 9], [1, 0, 0, 0], s1, alpha)
    for c in contexts:
        s0[c] += neu1e  # CBOW: every context gets the whole neu1e, not its share of the mean
    assert loss == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(syn1, s1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(syn0, s0, rtol=1e-5, atol=1e-6)
    assert not np.allclose(s1[9], random_weights(V)[1][9])  # the rows did move


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_hierarchical_softmax_pair_by_hand(model):
    t = tables_for(model, "hierarchical")
    syn0, syn1 = random_weights(V - 1)
    centre, alpha = 11, 0.4
    path = t.points[centre, : t.lengths[centre]]
    labels = 1 - t.codes[centre, : t.lengths[centre]]  # bit 0: label 1, σ(u·h) (word2vec.c)
    assert len(path) >= 3 and labels.min() == 0 and labels.max() == 1
    contexts = [4, 6, 8] if model == "cbow" else [8]
    h0 = syn0[contexts].astype(np.float64).mean(0)
    # one node far beyond MAX_EXP: word2vec.c leaves it (and its share of neu1e) out
    syn1[path[1]] = (MAX_EXP + 3) * h0 / float(h0 @ h0)
    far = syn1[path[1]].copy()
    s0, s1 = syn0.astype(np.float64), syn1.astype(np.float64)
    inputs = np.array([[*contexts, -1, -1, -1][:4]])
    loss = fixed_pairs(syn0, syn1, t, inputs, [centre], None, [alpha])
    neu1e, expected = by_hand(h0, path, labels, s1, alpha, skip_beyond=MAX_EXP)
    for c in contexts:
        s0[c] += neu1e
    assert loss == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(syn1, s1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(syn0, s0, rtol=1e-5, atol=1e-6)
    assert np.array_equal(syn1[path[1]], far)  # not updated
    # the probabilities along the paths of all words sum to one: the tree is the model's
    probs = []
    for w in range(V):
        p = 1.0
        for n, lab in zip(t.points[w, : t.lengths[w]], 1 - t.codes[w, : t.lengths[w]], strict=True):
            f = float(s1[n] @ h0)
            p *= sig(f) if lab else sig(-f)
        probs.append(p)
    assert sum(probs) == pytest.approx(1.0, abs=1e-9)


# ---------------------------------------------------------------------------------- a stream


def grouped_corpus(groups: int = 6, size: int = 4, sentences: int = 400, seed: int = 0):
    """Each sentence draws 2..8 words from one group; a few <unk> in between."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(sentences):
        k = rng.integers(groups)
        words = 4 + k * size + rng.integers(0, size, rng.integers(2, 9))
        words[rng.random(words.size) < 0.05] = UNK
        parts.append(np.append(words, EOS))
    stream = np.concatenate(parts)
    counts = np.bincount(stream, minlength=4 + groups * size)
    counts[EOS] = sentences
    return stream, counts


@pytest.mark.parametrize(("model", "objective"), VARIANTS)
def test_a_stream_trains_as_the_pytorch_step_does_pair_by_pair(model, objective):
    """One thread over a toy corpus against Word2Vec.train_step on the very pairs, noise words
    and rates the kernel drew, one pair per step (one centre for CBOW), in the same order.

    One noise word per pair: with more, a noise word drawn twice for one pair is updated twice
    in a row by the kernel (word2vec.c), but from the same start by a batched step."""
    stream, counts = grouped_corpus()
    cfg = Config(model=model, objective=objective, dim=8, window=3, negative=1, sample=1e-2,
                 batch_size=1, backend="torch")  # fmt: skip
    torch.manual_seed(0)
    ref = Word2Vec(cfg, len(counts), counts)
    with torch.no_grad():
        ref.W_out.normal_(0, 0.1)  # every score non-trivial from the first pair
    syn0, syn1 = ref.W_in.detach().numpy().copy(), ref.W_out.detach().numpy().copy()
    t = ref.kernel_tables()
    rec = record_tokens(stream, syn0, syn1, t, 0.05, 0.01, 0.0, seed=3, max_exp=0.0)
    n = len(rec["targets"])
    assert n == rec["pairs"] > 500
    # the same run without recording trains the same, bit for bit
    a0, a1 = ref.W_in.detach().numpy().copy(), ref.W_out.detach().numpy().copy()
    loss, pairs = train_tokens(stream, a0, a1, t, 0.05, 0.01, 0.0, seed=3, max_exp=0.0)
    assert pairs == n and loss == rec["loss"]
    assert np.array_equal(a0, syn0) and np.array_equal(a1, syn1)
    total = 0.0
    for r in range(n):
        x = torch.as_tensor(rec["inputs"][r : r + 1])
        y = torch.as_tensor(rec["targets"][r : r + 1])
        noise = torch.as_tensor(rec["noise"][r : r + 1]) if objective == "negative" else None
        total += float(ref.train_step(x, y, float(rec["alpha"][r]), noise=noise))
    assert rec["loss"] == pytest.approx(total, rel=1e-5)
    np.testing.assert_allclose(syn0, ref.W_in.detach().numpy(), rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(syn1, ref.W_out.detach().numpy(), rtol=1e-4, atol=2e-6)


# ---------------------------------------------------------------------------------- sampling


def zipf_stream(n_words: int = 300, n_tokens: int = 300_000, seed: int = 0) -> np.ndarray:
    """Sentences of 1..30 Zipf-distributed words (ids 4..), each followed by </s>."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1)
    words = rng.choice(n_words, size=n_tokens, p=p / p.sum()) + 4
    ends = np.cumsum(rng.integers(1, 31, size=n_tokens))
    return np.insert(words, ends[ends < n_tokens], EOS)


def record(stream, counts, model="skipgram", objective="negative", window=5, negative=5,
           sample=0.0, seed=1, alphas=(0.025, 0.025, 0.0), pairs=True):  # fmt: skip
    t = tables_for(model, objective, counts, window, negative, sample)
    rows = len(counts) if objective == "negative" else len(counts) - 1
    syn0 = np.zeros((len(counts), 4), np.float32)  # zero weights: recording is what counts here
    syn1 = np.zeros((rows, 4), np.float32)
    return record_tokens(stream, syn0, syn1, t, *alphas, seed=seed, pairs=pairs)


def test_sub_sampling_keeps_word2vec_c_share_of_every_word():
    stream = zipf_stream()
    counts = np.bincount(stream)
    sample = 1e-3
    p = keep_probability(counts, sample)
    frequent = np.nonzero(p[4:] < 0.9)[0] + 4
    rare = np.nonzero(p == 1.0)[0]
    assert len(frequent) >= 5 and len(rare) >= 5  # both kinds are covered
    for seed in (1, 2):
        kept = record(stream, counts, sample=sample, seed=seed, pairs=False)["kept"]
        for w in frequent:
            sd = math.sqrt(counts[w] * p[w] * (1 - p[w]))
            assert abs(kept[w] - counts[w] * p[w]) < 5 * sd + 1, (w, kept[w], counts[w] * p[w])
        assert (kept[rare] == counts[rare]).all()  # p_keep >= 1: every occurrence
        assert kept[EOS] == 0 and kept[UNK] == 0
    # all the frequent words together: a chi-square over their kept counts
    observed = record(stream, counts, sample=sample, seed=3, pairs=False)["kept"][frequent]
    assert chisquare(observed, observed.sum() * p[frequent] * counts[frequent] /
                     (p[frequent] * counts[frequent]).sum()).pvalue > 0.001  # fmt: skip


def test_discarded_tokens_are_removed_before_windows_are_formed():
    # x F F y </s>: with window 1, x and y can be neighbours only once both Fs are gone
    x, F_, y = 4, 5, 6
    stream = np.tile([x, F_, F_, y, EOS], 20_000)
    counts = np.array([0, 0, 20_000, 0, 20_000, 10**9, 20_000])
    rec = record(stream, counts, window=1, sample=1e-3)
    ctx = rec["inputs"].max(1)  # skip-gram: one context per row
    xy = int(((rec["targets"] == x) & (ctx == y)).sum())
    p_f = keep_probability(counts, 1e-3)[F_]
    expected = 20_000 * (1 - p_f) ** 2  # both Fs discarded
    assert abs(xy - expected) < 5 * math.sqrt(expected) + 5


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_dynamic_window_weights_distance_d_by_window_minus_d_plus_one(model):
    W = 5
    n = 40_000
    stream = np.append(np.arange(4, n + 4), EOS)  # one sentence, id − 4 = position
    counts = np.ones(n + 4, dtype=np.int64)
    counts[:4] = 0
    rec = record(stream, counts, model=model, objective="hierarchical", window=W)
    slots = np.concatenate([np.arange(-W, 0), np.arange(1, W + 1)])  # slot → offset
    rows, cols = np.nonzero(rec["inputs"] >= 0)
    centre = rec["targets"][rows]
    # the context in slot s is the word at offset slots[s] from the centre
    assert np.array_equal(rec["inputs"][rows, cols] - centre, slots[cols])
    interior = (centre >= 4 + W) & (centre < n + 4 - W)
    d = np.abs(slots[cols])[interior]
    observed = np.bincount(d, minlength=W + 1)[1:]
    weights = W - np.arange(1, W + 1) + 1.0
    assert chisquare(observed, observed.sum() * weights / weights.sum()).pvalue > 0.001
    assert chisquare(observed, np.full(W, observed.sum() / W)).pvalue < 1e-6  # not uniform
    if model == "cbow":  # b per centre: a centre's contexts are exactly the offsets 1..b
        reach = np.abs(np.where(rec["inputs"] >= 0, slots, 0)).max(1)
        full = (rec["inputs"] >= 0).sum(1) == 2 * reach
        assert full[(rec["targets"] >= 4 + W) & (rec["targets"] < n + 4 - W)].all()


def test_noise_words_follow_unigram_to_the_075():
    stream = zipf_stream(n_words=40, n_tokens=60_000)
    counts = np.bincount(stream)
    rec = record(stream, counts, negative=5)
    observed = np.bincount(rec["noise"].ravel(), minlength=len(counts))
    assert observed[:4].sum() == 0  # specials are never noise words
    c = counts[4:].astype(float)
    n = observed.sum()
    assert chisquare(observed[4:], n * c**0.75 / (c**0.75).sum()).pvalue > 0.001
    assert chisquare(observed[4:], n * c / c.sum()).pvalue < 1e-12  # not the plain unigram


def test_no_pair_crosses_a_sentence_end_and_specials_are_never_used():
    rng = np.random.default_rng(1)
    parts = []
    for k in range(300):  # sentence k uses ids 4 + 10k .. 4 + 10k + 9 only, and some <unk>
        words = 4 + 10 * (k % 30) + rng.integers(0, 10, rng.integers(1, 12))
        words[rng.random(words.size) < 0.1] = UNK
        parts.append(np.append(words, EOS))
    stream = np.concatenate(parts)
    counts = np.bincount(stream)
    for model in ("skipgram", "cbow"):
        rec = record(stream, counts, model=model, window=8)
        rows, cols = np.nonzero(rec["inputs"] >= 0)
        ctx, centre = rec["inputs"][rows, cols], rec["targets"][rows]
        assert ((ctx - 4) // 10 == (centre - 4) // 10).all()
        assert ctx.min() >= 4 and centre.min() >= 4


def test_the_rate_falls_linearly_over_the_range_and_stops_at_the_floor():
    stream = zipf_stream(n_tokens=50_000)
    counts = np.bincount(stream)
    rec = record(stream, counts, alphas=(0.05, 0.01, 0.0))
    a = rec["alpha"]
    assert (np.diff(a) <= 0).all() and a[0] == pytest.approx(0.05, rel=1e-3)
    assert a[-1] == pytest.approx(0.01, rel=0.01)
    # linear in the raw position: halfway through the pairs is halfway down
    assert a[len(a) // 2] == pytest.approx(0.03, abs=0.001)
    floored = record(stream, counts, alphas=(0.05, -0.05, 0.02))["alpha"]
    assert floored.min() == 0.02 and (floored == 0.02).mean() == pytest.approx(0.7, abs=0.02)


# ---------------------------------------------------------------------------------- threads


def test_ids_outside_the_vocabulary_are_refused_before_any_update():
    t = tables_for("skipgram", "negative")
    syn0, syn1 = random_weights(V)
    before = syn0.copy()
    with pytest.raises(ValueError, match="vocabulary"):
        train_tokens(np.array([4, 5, V, EOS]), syn0, syn1, t, 0.1, 0.1, 0.0, seed=1)
    assert np.array_equal(syn0, before)


def test_sentence_cuts_fall_right_after_sentence_ends():
    stream = zipf_stream(n_tokens=10_000)
    cuts = sentence_cuts(stream, 4)
    assert cuts[0] == 0 and cuts[-1] == len(stream) and (np.diff(cuts) > 0).all()
    assert (stream[cuts[1:-1] - 1] == EOS).all()
    assert np.abs(np.diff(cuts) - len(stream) / 4).max() < 40  # sentences are < 32 tokens


def test_one_thread_is_deterministic_and_two_threads_train_as_much():
    stream, counts = grouped_corpus(sentences=3000)
    t = tables_for("skipgram", "negative", counts, window=3, negative=5)

    def run(seed, threads):
        syn0 = np.random.default_rng(0).normal(0, 0.1, (len(counts), 16)).astype(np.float32)
        syn1 = np.zeros((len(counts), 16), np.float32)
        loss, pairs = train_tokens(stream, syn0, syn1, t, 0.025, 0.0001, 0.0, seed, threads)
        return syn0, loss, pairs

    a, b, c = run(7, 1), run(7, 1), run(8, 1)
    assert np.array_equal(a[0], b[0]) and a[1] == b[1]
    assert not np.array_equal(a[0], c[0])  # the seed matters
    two = run(7, 2)
    assert abs(two[2] - a[2]) < 0.02 * a[2]  # the same amount of work, split between threads
    assert two[1] / two[2] == pytest.approx(a[1] / a[2], rel=0.05)  # and the same loss


def test_one_thread_trains_the_range_as_one_piece():
    stream = zipf_stream(n_tokens=20_000)
    cuts, alphas = piece_plan(stream, 0.05, 0.01, threads=1)
    assert cuts.tolist() == [0, len(stream)] and alphas.tolist() == [0.05, 0.01]
    # a range smaller than threads · MIN_PIECE_TOKENS still gives every thread a piece
    assert len(piece_plan(stream[:700], 0.05, 0.01, threads=2)[0]) - 1 >= 2


def test_threads_take_pieces_in_order_each_at_the_rate_of_its_own_position(monkeypatch):
    """Two threads: every piece (cut after a sentence end) is trained once, with the range's
    linear rate at the piece's own raw positions, as word2vec.c's α follows the words done by
    all threads (a thread does not run the schedule over a part of its own), and with its own
    generator; a thread held up on a piece leaves every other piece to the free thread."""
    stream = zipf_stream(n_tokens=60_000)
    n = len(stream)
    t = tables_for("skipgram", "negative", np.bincount(stream))
    calls, rest_done = [], threading.Event()
    expected_pieces = len(piece_plan(stream, 0.05, 0.01, threads=2)[0]) - 1

    def fake_range(tokens, lo, hi, *args):
        alpha_lo, alpha_hi, seed = args[12], args[13], args[16]
        if lo == 0:
            rest_done.wait(timeout=20)  # the first piece is slow until all the others are done
        calls.append((lo, hi, alpha_lo, alpha_hi, int(seed), threading.get_ident()))
        if len(calls) == expected_pieces - 1 and lo != 0:
            rest_done.set()
        return 0.5, hi - lo, 0, seed

    monkeypatch.setattr(word2vec_threads, "train_range", fake_range)
    syn0, syn1 = random_weights(V)
    loss, pairs = train_tokens(stream, syn0, syn1, t, 0.05, 0.01, 0.0, seed=7, threads=2)
    assert rest_done.is_set()  # the free thread did every other piece while one was held up
    calls.sort()
    lo, hi = np.array([c[0] for c in calls]), np.array([c[1] for c in calls])
    assert len(calls) == expected_pieces and pairs == n and loss == 0.5 * len(calls)
    assert lo[0] == 0 and hi[-1] == n and np.array_equal(lo[1:], hi[:-1])  # each token once
    assert (stream[hi[:-1] - 1] == EOS).all()
    # guided: PIECE_TOKENS while much is left, then a quarter of what is left (2 threads), down
    # to MIN_PIECE_TOKENS; each cut at the first sentence end after it (sentences < 32 tokens)
    size = np.clip(-(-(n - lo) // 4), MIN_PIECE_TOKENS, PIECE_TOKENS)
    assert (hi - lo >= np.minimum(size, n - lo)).all() and (hi - lo < size + 32).all()
    assert (hi - lo)[0] >= PIECE_TOKENS and (hi - lo)[-2] < MIN_PIECE_TOKENS + 32
    rate_lo, rate_hi = 0.05 - 0.04 * lo / n, 0.05 - 0.04 * hi / n  # the range's linear rate
    np.testing.assert_allclose([c[2] for c in calls], rate_lo, rtol=1e-12)
    np.testing.assert_allclose([c[3] for c in calls], rate_hi, rtol=1e-12)
    assert [c[4] for c in calls] == [splitmix64(7 + i) for i in range(len(calls))]
    held = calls[0][5]
    assert [c[5] for c in calls].count(held) == 1  # the held-up thread took the first only


# ---------------------------------------------------------------------------------- the model


def grammar_stream(n_sentences: int = 1500, seed: int = 0):
    """`the cat` / `a dog` / `she` / `he`, a verb, an object: she and he never meet but share
    every neighbour."""
    rng = np.random.default_rng(seed)
    vocab = ["the", "cat", "a", "dog", "she", "he", "sees", "likes", "eats", "ball", "bread", "it"]
    ids = {w: 4 + i for i, w in enumerate(vocab)}
    subj = [["the", "cat"], ["a", "dog"], ["she"], ["he"]]
    verb, obj = ["sees", "likes", "eats"], [["a", "ball"], ["the", "bread"], ["it"]]
    parts = []
    for _ in range(n_sentences):
        words = [*subj[rng.integers(4)], verb[rng.integers(3)], *obj[rng.integers(3)]]
        parts.append([ids[w] for w in words] + [EOS])
    stream = np.concatenate(parts)
    counts = np.bincount(stream, minlength=4 + len(vocab))
    return stream, counts, ids


def train_model(cfg: Config, stream, counts, epochs: int, chunk_tokens: int = 3000):
    """The numba path as the pipeline drives it: the loader's chunks, one `manual_step` each."""
    torch.manual_seed(0)
    model = Word2Vec(cfg, len(counts), counts)
    loader = word2vec_dataloader(cfg, stream, counts, seed=5, chunk_tokens=chunk_tokens)
    total, step, curve = epochs * len(loader), 0, []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        losses = []
        for batch in loader:
            losses.append(model.manual_step(batch, step / total, (step + 1) / total))
            step += 1
        curve.append(sum(a for a, _ in losses) / sum(n for _, n in losses))
    return model, curve


@pytest.mark.parametrize(("model", "objective"), VARIANTS)
def test_the_model_step_learns_paradigmatic_neighbours(model, objective):
    stream, counts, ids = grammar_stream()
    cfg = Config(model=model, objective=objective, dim=8, window=1, sample=0.0, threads=2)
    m, curve = train_model(cfg, stream, counts, epochs=4)
    assert all(np.isfinite(curve)) and curve[-1] < 0.9 * curve[0]
    E = torch.nn.functional.normalize(m.embeddings(), dim=1)

    def cos(a: str, b: str) -> float:
        return float(E[ids[a]] @ E[ids[b]])

    # she and he share their neighbours (the verbs) and never meet; she is next to sees often
    assert cos("she", "he") > cos("she", "sees"), (cos("she", "he"), cos("she", "sees"))


def test_chunks_end_at_sentence_ends_and_carry_their_seed():
    stream = grammar_stream()[0]
    ds = Word2VecChunks(stream, chunk_tokens=2000, seed=3)
    assert len(ds) == math.ceil(len(stream) / 2000)
    items = [ds[(1, i)] for i in range(len(ds))]
    assert np.array_equal(np.concatenate([b["tokens"].numpy() for b in items]), stream)
    assert all(int(b["tokens"][-1]) == EOS for b in items)
    assert len({b["seed"] for b in items}) == len(ds)  # every chunk its own random numbers
    assert ds[(1, 2)]["seed"] == items[2]["seed"] != ds[(2, 2)]["seed"]  # and every epoch


def test_resuming_after_a_chunk_continues_as_the_uninterrupted_run():
    """ChunkSampler.resume_at (what a checkpoint's loader state calls) skips the chunks already
    trained: with one thread the resumed run ends with the very same weights."""
    stream, counts, _ = grammar_stream()
    cfg = Config(model="skipgram", dim=8, window=2, sample=1e-2, threads=1)
    whole, _ = train_model(cfg, stream, counts, epochs=2, chunk_tokens=2000)

    torch.manual_seed(0)
    m = Word2Vec(cfg, len(counts), counts)
    loader = word2vec_dataloader(cfg, stream, counts, seed=5, chunk_tokens=2000)
    per_epoch = len(loader)
    total, stop = 2 * per_epoch, per_epoch + 2  # interrupted after chunk 2 of epoch 1
    step = 0
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            if step == stop:
                break
            m.manual_step(batch, step / total, (step + 1) / total)
            step += 1
    state = {k: v.clone() for k, v in m.state_dict().items()}
    loader_state = {"epoch": 1, "batches": 2}  # what ResumableLoader.state_dict() records

    torch.manual_seed(1)  # a fresh process: other initial weights, replaced by the checkpoint
    resumed = Word2Vec(cfg, len(counts), counts)
    resumed.load_state_dict(state)
    loader = word2vec_dataloader(cfg, stream, counts, seed=5, chunk_tokens=2000)
    assert isinstance(loader.sampler, ChunkSampler)
    loader.load_state_dict(loader_state)
    for batch in loader:
        resumed.manual_step(batch, step / total, (step + 1) / total)
        step += 1
    assert step == total
    assert torch.equal(resumed.W_in, whole.W_in) and torch.equal(resumed.W_out, whole.W_out)


def test_the_torch_backend_keeps_its_batches():
    stream, counts, _ = grammar_stream()
    loader = word2vec_dataloader(Config(backend="torch"), stream, counts)
    inputs, targets = next(iter(loader))
    assert inputs.ndim == 2 and targets.ndim == 1
    # and so does a run of several processes, whatever the backend says
    inputs, targets = next(iter(word2vec_dataloader(Config(), stream, counts, rank=1, world=2)))
    assert targets.ndim == 1


# ---------------------------------------------------------------------------------- the pipeline


def _params(**trainer) -> dict:
    """A tiny project's skipgram run (numba path, one kernel thread, 5 chunks an epoch with
    `_CHUNKS`, a resume checkpoint every 4 steps); `trainer`: more trainer settings."""
    return {
        "seed": 3,
        "models": {"skipgram": {"family": "word2vec", "data": "vocab/lm"}},
        "skipgram": {
            "model": "skipgram",
            "dim": 8,
            "window": 2,
            "sample": 0.0,
            "threads": 1,
            "trainer": {
                "max_epochs": 2,
                "accelerator": "cpu",
                "devices": 1,
                "checkpoint_every_steps": 4,
                "checkpoint_every_minutes": 0,
                **trainer,
            },
        },
    }


_CHUNKS = (data_w2v, "CHUNK_TOKENS", 1700)


def _project(root: Path) -> Path:
    """A tiny project: the grammar's sentences at `root/data/vocab/lm` (about 10,000 tokens)."""
    stream, _, ids = grammar_stream(n_sentences=1500)
    words = {i: w for w, i in ids.items()}
    lines = [
        " ".join(words[int(t)] for t in s[:-1])
        for s in np.split(stream, np.flatnonzero(stream == EOS)[:-1] + 1)
    ]
    vocab = Vocab.build(Counter(w for line in lines for w in line.split()), 1)
    out = root / "data" / "vocab" / "lm"
    out.mkdir(parents=True)
    vocab.save(out / "vocab.txt")
    np.save(out / "train.npy", vocab.encode_lines(lines).astype(np.int32))
    return root


@pytest.mark.parametrize(
    ("setting", "value"), [("accumulate_grad_batches", 2), ("gradient_clip_val", 1.0)]
)
def test_settings_of_gradient_training_stop_the_in_place_update(
    tmp_path, monkeypatch, setting, value
):
    """Lightning would ignore them once the module switches to its own update (and
    accumulation would run the rate's decay past zero); the params check lets them through,
    as they apply when several processes train through autograd."""
    from nlpzoo.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^run 'skipgram' \\(trainer\\): key '{setting}' does"):
        train_with_callbacks(
            monkeypatch, _params(**{setting: value}), "skipgram", _project(tmp_path), (), _CHUNKS
        )
    assert not (tmp_path / "models" / "skipgram").exists()


def test_a_killed_pipeline_run_resumes_mid_epoch_and_ends_as_the_uninterrupted_one(
    tmp_path, monkeypatch
):
    """Killed at step 9 (epoch 1, 5 chunks an epoch), the run resumes from its step-8
    checkpoint at chunk 3 of epoch 1 (the loader's place is in the checkpoint) and, with one
    kernel thread, ends with the very weights of an uninterrupted run."""
    assert_kill_and_resume(
        monkeypatch, tmp_path, _project, _params(), "skipgram", _CHUNKS, kill_at=9,
        resumes_at=(8, 3),
    )  # fmt: skip
