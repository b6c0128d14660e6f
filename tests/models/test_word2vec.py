"""Tests for word2vec (nlpzoo.models.word2vec): noise distribution, the two objectives written
out by hand, CBOW's mean, sparse updates, the manual step against autograd SGD, the schedule, and
a smoke test of the four variants on a corpus with structure."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from nlpzoo.config import build
from nlpzoo.data.vocab import EOS
from nlpzoo.data.word2vec import Word2VecPairs
from nlpzoo.errors import ConfigError
from nlpzoo.models.outputs import huffman_tree
from nlpzoo.models.word2vec import Config, Word2Vec

# specials (never trained) then 20 words, frequency-sorted
COUNTS = [50, 0, 30, 0, 900, 600, 400, 300, 250, 200, 160, 120, 100, 80, 60, 40, 30, 20, 15, 10]
COUNTS += [8, 5, 3, 2]
V = len(COUNTS)
VARIANTS = [(m, o) for m in ("skipgram", "cbow") for o in ("negative", "hierarchical")]


pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(model="skipgram", objective="negative", seed=0, random_out=True, **kw) -> Word2Vec:
    torch.manual_seed(seed)
    cfg = Config(model=model, objective=objective, **{"dim": 6, "batch_size": 4, **kw})
    m = Word2Vec(cfg, V, COUNTS)
    if random_out:  # the output vectors start at zero; make every score non-trivial
        with torch.no_grad():
            m.W_out.normal_(0, 0.5)
            m.W_in.normal_(0, 0.5)
    return m


def batch(seed: int = 1, n: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """inputs (n, 4) context ids with −1 gaps (at least one context per row), targets (n,)."""
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(4, V, (n,), generator=g)
    ctx = torch.randint(4, V, (n, 4), generator=g)
    ctx[torch.rand(n, 4, generator=g) < 0.4] = -1
    ctx[:, 1] = torch.randint(4, V, (n,), generator=g)
    return ctx, targets


def noise_for(m: Word2Vec, x: torch.Tensor, seed: int = 3) -> torch.Tensor:
    """Fixed noise words: one row per pair (CBOW: per centre; skip-gram: per present context)."""
    pairs = x.shape[0] if m.config.model == "cbow" else int((x >= 0).sum())
    return torch.randint(4, V, (pairs, 5), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------- config


def test_config_defaults_follow_word2vec_c_and_bad_values_are_named():
    assert Config(model="skipgram").lr == 0.025 and Config(model="cbow").lr == 0.05
    assert Config(model="cbow", lr=0.01).lr == 0.01
    # batch size: per variant unless given (hierarchical softmax needs smaller steps)
    assert Config(objective="hierarchical").batch_size < Config(objective="negative").batch_size
    assert Config(model="cbow", batch_size=7).batch_size == 7
    with pytest.raises(ConfigError, match="objective"):
        Config(objective="softmax")
    with pytest.raises(ConfigError, match="window"):
        Config(window=0)
    with pytest.raises(ConfigError, match="min_count"):  # a vocabulary setting, not the model's
        build(Config, {"min_count": 5}, where="run 'cbow'")


def test_input_vectors_start_uniform_within_init_scale_over_d():
    """word2vec.c's syn0 is uniform in [-0.5/d, 0.5/d) (init_scale 0.5, the default); init_scale
    widens it (gensim 4: 1.0); the output vectors start at zero."""
    V, d = 2000, 50
    counts = np.arange(V) + 1
    for scale in (0.5, 1.0):
        torch.manual_seed(0)
        m = Word2Vec(Config(dim=d, init_scale=scale), V, counts)
        w = m.W_in.detach()
        assert float(w.abs().max()) < scale / d
        assert float(w.max()) > 0.99 * scale / d and float(w.min()) < -0.99 * scale / d
        assert abs(float(w.mean())) < 0.01 * scale / d  # centred
        assert abs(float(w.var()) - (scale / d) ** 2 / 3) < 0.02 * (scale / d) ** 2  # uniform
        assert not m.W_out.detach().any()
    torch.manual_seed(0)  # the default is word2vec.c's formula, float for float
    default = Word2Vec(Config(dim=d), V, counts).W_in.detach()
    torch.manual_seed(0)
    assert torch.equal(default, (torch.rand(V, d) - 0.5) / d)
    with pytest.raises(ConfigError, match="init_scale"):
        Config(init_scale=0.0)


def test_counts_are_required():
    with pytest.raises(ConfigError, match="counts"):
        Word2Vec(Config(), V, None)


# ---------------------------------------------------------------------------------- sampling


def test_noise_words_follow_unigram_to_the_075():
    m = make_model()
    torch.manual_seed(123)
    n = 400_000
    draws = m.sample_noise((n,))
    observed = torch.bincount(draws, minlength=V).numpy()
    assert observed[:4].sum() == 0  # specials are never noise words
    c = np.array(COUNTS[4:], dtype=float)
    p = c**0.75 / (c**0.75).sum()
    assert chisquare(observed[4:], n * p).pvalue > 0.01
    unigram = c / c.sum()
    assert chisquare(observed[4:], n * unigram).pvalue < 1e-12  # clearly not plain unigram
    torch.testing.assert_close(m.noise_probs[4:], torch.as_tensor(p), rtol=1e-9, atol=0)


# ---------------------------------------------------------------------------------- objectives


def test_negative_sampling_loss_by_hand():
    m = make_model(batch_size=1)
    v, u = m.W_in.detach(), m.W_out.detach()
    # one centre (5) with one context (7): the pair h = v_7 predicts 5, as in word2vec.c
    contexts, centre = torch.tensor([[-1, 7, -1, -1]]), torch.tensor([5])
    noise = torch.tensor([[9, 5, 12]])  # the middle one equals the target: skipped (word2vec.c)
    _, loss = m(contexts, centre, noise=noise)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    dot = lambda a, b: float(u[a] @ v[b])  # noqa: E731
    expected = -math.log(sig(dot(5, 7))) - math.log(sig(-dot(9, 7))) - math.log(sig(-dot(12, 7)))
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    # the loss is summed over pairs and divided by batch_size (centres per step); every pair has
    # its own noise words: a second context 8 of the same centre with noise (4, 6, 5)
    m4 = make_model(batch_size=4)
    noise2 = torch.tensor([[9, 5, 12], [4, 6, 5]])
    _, loss4 = m4(torch.tensor([[-1, 7, 8, -1]]), centre, noise=noise2)
    second = -math.log(sig(dot(5, 8))) - math.log(sig(-dot(4, 8))) - math.log(sig(-dot(6, 8)))
    assert loss4.item() == pytest.approx((expected + second) / 4, rel=1e-5)


def path_probabilities(m: Word2Vec, h: torch.Tensor) -> torch.Tensor:
    """p(w | h) for every word, as a product of sigmoids along its path, with Python loops."""
    tree = huffman_tree(np.array([0, 0, 0, 0, *COUNTS[4:]]))
    probs = []
    for w in range(V):
        p = 1.0
        for n, c in zip(
            tree.points[w, : tree.lengths[w]], tree.codes[w, : tree.lengths[w]], strict=True
        ):
            s = float(m.W_out[int(n)] @ h)
            p *= 1 / (1 + math.exp(-s)) if c == 0 else 1 / (1 + math.exp(s))  # bit 0: σ(s)
        probs.append(p)
    return torch.tensor(probs, dtype=torch.float64)


def test_hierarchical_probabilities_sum_to_one_and_loss_is_minus_log():
    m = make_model(objective="hierarchical", batch_size=1)
    assert m.W_out.shape == (V - 1, 6)  # one vector per inner node
    with torch.no_grad():
        h = m.W_in[9]
        probs = path_probabilities(m, h)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-9)
    assert m.lengths[:4].min() > m.lengths[4:].max()  # specials (count 0) sit below every word
    for target in (4, 11, V - 1):
        _, loss = m(torch.tensor([[9, -1]]), torch.tensor([target]))  # skip-gram: h = v_9
        assert loss.item() == pytest.approx(-math.log(float(probs[target])), rel=1e-5)
    # several contexts share the centre's path: the loss is the sum over the pairs
    with torch.no_grad():
        expected = sum(-math.log(float(path_probabilities(m, m.W_in[c])[6])) for c in (9, 4, 11))
    _, loss = m(torch.tensor([[9, 4, -1, 11]]), torch.tensor([6]))
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_cbow_hidden_is_the_mean_of_present_contexts():
    m = make_model(model="cbow", batch_size=1)
    ctx = torch.tensor([[5, -1, 9, -1], [-1, -1, 6, -1]])
    h = m.hidden(ctx)
    W = m.W_in.detach()
    torch.testing.assert_close(h, torch.stack([(W[5] + W[9]) / 2, W[6]]))
    # padding is ignored whatever row 0 holds
    with torch.no_grad():
        m.W_in[0] += 100.0
    torch.testing.assert_close(m.hidden(ctx), h)
    # the NS loss of the first row uses that mean
    _, loss = m(ctx[:1], torch.tensor([12]), noise=torch.tensor([[4, 8]]).repeat(1, 3)[:, :5])
    u = m.W_out.detach()
    hh = (W[5] + W[9]) / 2
    noise = [4, 8, 4, 8, 4]
    expected = -torch.nn.functional.logsigmoid(u[12] @ hh)
    expected -= sum(torch.nn.functional.logsigmoid(-(u[k] @ hh)) for k in noise)
    assert loss.item() == pytest.approx(float(expected), rel=1e-5)


def test_cbow_gives_every_context_the_whole_error_as_word2vec_c():
    m = make_model(model="cbow", batch_size=1)
    ctx, target, noise = torch.tensor([[5, 9, -1, 7]]), torch.tensor([12]), torch.tensor([[4] * 5])
    before = m.W_in.detach().clone()
    h = (before[5] + before[9] + before[7]) / 3
    u = m.W_out.detach().clone()
    lr = 0.1
    # neu1e = Σ g·u with g = (label − σ(u·h))·α, added undivided to each context vector
    g_t = (1 - torch.sigmoid(u[12] @ h)) * lr
    g_n = (0 - torch.sigmoid(u[4] @ h)) * lr
    neu1e = g_t * u[12] + 5 * g_n * u[4]
    m.train_step(ctx, target, lr, noise=noise)
    for w in (5, 9, 7):
        torch.testing.assert_close(m.W_in.detach()[w], before[w] + neu1e)


# ---------------------------------------------------------------------------------- updates


def touched_rows(m: Word2Vec, inputs, targets, noise) -> tuple[set, set]:
    ins = set(inputs[inputs >= 0].tolist())  # the present contexts
    if m.hierarchical:
        outs = {int(n) for t in targets for n in m.points[t, : m.lengths[t]]}
    else:
        outs = set(targets.tolist()) | set(noise.flatten().tolist())
    return ins, outs


def changed(a: torch.Tensor, b: torch.Tensor) -> set:
    return set((a != b).any(1).nonzero().flatten().tolist())


@pytest.mark.parametrize(("model", "objective"), VARIANTS)
@pytest.mark.parametrize("path", ["manual", "autograd"])
def test_a_step_changes_only_the_rows_of_the_batch(model, objective, path):
    m = make_model(model, objective)
    x, y = batch()
    noise = noise_for(m, x)
    w_in, w_out = m.W_in.detach().clone(), m.W_out.detach().clone()
    if path == "manual":
        m.train_step(x, y, 0.1, noise=noise)
    else:
        opt = m.configure_optimizers(total_steps=10)["optimizer"]
        _, loss = m(x, y, noise=noise)
        loss.backward()
        assert m.W_in.grad.is_sparse and m.W_out.grad.is_sparse
        opt.step()
    ins, outs = touched_rows(m, x, y, noise)
    assert changed(w_in, m.W_in.detach()) == ins  # the batch's input rows, and only those
    assert changed(w_out, m.W_out.detach()) == outs  # targets + noise words, or path nodes
    assert len(ins) < V - 4 and len(outs) < m.W_out.shape[0]  # the test is not vacuous


@pytest.mark.parametrize(("model", "objective"), VARIANTS)
def test_manual_step_equals_an_sgd_step_on_the_autograd_loss(model, objective):
    a = make_model(model, objective, seed=4)
    b = make_model(model, objective, seed=4)
    x, y = batch(seed=2, n=7)
    noise = noise_for(a, x, seed=5)
    sched_cfg = b.configure_optimizers(total_steps=10)
    opt, sched = sched_cfg["optimizer"], sched_cfg["lr_scheduler"]["scheduler"]
    for step in range(3):
        loss_a = a.train_step(x, y, a.lr_at(step, 10), noise=noise)
        opt.zero_grad()
        _, loss_b = b(x, y, noise=noise)
        loss_b.backward()
        opt.step()
        sched.step()
        torch.testing.assert_close(loss_a, loss_b.detach())
        torch.testing.assert_close(a.W_in, b.W_in.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a.W_out, b.W_out.detach(), rtol=1e-5, atol=1e-6)
    assert not torch.equal(a.W_in, make_model(model, objective, seed=4).W_in)


def test_learning_rate_falls_linearly_to_the_floor():
    m = make_model(lr=0.02, min_lr_ratio=0.05, batch_size=8)
    sc = m.configure_optimizers(total_steps=100)
    opt, sched = sc["optimizer"], sc["lr_scheduler"]["scheduler"]
    assert sc["lr_scheduler"]["interval"] == "step"
    seen = []
    for _ in range(101):
        seen.append(opt.param_groups[0]["lr"] / 8)  # per pair: the loss is divided by batch_size
        opt.step()
        sched.step()
    expected = [0.02 * max(1 - t / 100, 0.05) for t in range(101)]
    assert seen == pytest.approx(expected)
    assert seen[50] == pytest.approx(0.01) and seen[90] == pytest.approx(0.002)
    assert seen[96] == seen[100] == pytest.approx(0.001)  # the floor lr·min_lr_ratio
    assert [m.lr_at(t, 100) for t in range(101)] == pytest.approx(seen)


# ---------------------------------------------------------------------------------- smoke


def grouped_corpus(groups: int = 8, size: int = 4, sentences: int = 1500, seed: int = 0):
    """Each sentence draws 6 words from one group: words of a group always co-occur."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(sentences):
        k = rng.integers(groups)
        parts.append(np.append(4 + k * size + rng.integers(0, size, 6), EOS))
    stream = np.concatenate(parts)
    counts = np.bincount(stream, minlength=4 + groups * size)
    counts[EOS] = sentences
    return stream, counts, groups, size


@pytest.mark.parametrize(("model", "objective"), VARIANTS)
def test_smoke_loss_falls_and_co_occurring_words_end_up_similar(model, objective):
    stream, counts, groups, size = grouped_corpus()
    cfg = Config(model=model, objective=objective, dim=16, window=3, sample=0.0, batch_size=64)
    torch.manual_seed(0)
    m = Word2Vec(cfg, len(counts), counts)
    ds = Word2VecPairs(stream, cfg.window, cfg.sample, cfg.batch_size, counts)
    epochs = 4
    total, step, means = epochs * len(ds), 0, []
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        losses = []
        for i in range(len(ds)):
            x, y = ds[i]
            losses.append(float(m.train_step(x, y, m.lr_at(step, total))))
            step += 1
        means.append(np.mean(losses))
    assert all(np.isfinite(means))
    assert means[-1] < 0.9 * means[0]
    E = torch.nn.functional.normalize(m.embeddings()[4:], dim=1)
    cos = E @ E.T
    group = torch.arange(groups * size) // size
    same = (group[:, None] == group[None, :]) & ~torch.eye(groups * size, dtype=torch.bool)
    other = group[:, None] != group[None, :]
    assert cos[same].mean() > cos[other].mean() + 0.3, (cos[same].mean(), cos[other].mean())


def test_smoke_autograd_path_learns_too():
    stream, counts, groups, size = grouped_corpus()
    cfg = Config(model="skipgram", dim=16, window=3, sample=0.0, batch_size=64)
    torch.manual_seed(0)
    m = Word2Vec(cfg, len(counts), counts)
    ds = Word2VecPairs(stream, cfg.window, cfg.sample, cfg.batch_size, counts)
    sc = m.configure_optimizers(total_steps=3 * len(ds))
    opt, sched = sc["optimizer"], sc["lr_scheduler"]["scheduler"]
    for epoch in range(3):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            opt.zero_grad()
            _, loss = m(*ds[i])
            loss.backward()
            opt.step()
            sched.step()
    E = torch.nn.functional.normalize(m.embeddings()[4:], dim=1)
    group = torch.arange(groups * size) // size
    cos = E @ E.T
    assert cos[group[:, None] == group[None, :]].mean() > cos[group[:, None] != group].mean() + 0.3
