"""GloVe co-occurrence counting: exact counts vs a naive loop, spill/merge, atomicity."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from nlpzoo.data import cooccur
from nlpzoo.data.cooccur import count_cooccurrences, load_cooccurrences
from nlpzoo.data.vocab import SPECIALS
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.params_data import CooccurConfig


def _vocab(words: list[str]) -> dict[str, int]:
    return {w: i for i, w in enumerate(list(SPECIALS) + words)}


def _naive(lines, word_to_id, window, weighting, bounded, keep_unk=False):
    """Plain double loop over the filtered stream; X[a,b] and X[b,a] each get the weight."""
    sents = []
    for line in lines:
        ids = []
        for w in line.split():
            i = word_to_id.get(w)
            if i is None:
                if keep_unk:
                    ids.append(0)
            elif i >= 4 or (keep_unk and i == 0):
                ids.append(i)
        sents.append(ids)
    if not bounded:
        sents = [[i for s in sents for i in s]]
    X = defaultdict(float)
    for s in sents:
        for p in range(len(s)):
            for q in range(p + 1, min(p + window, len(s) - 1) + 1):
                w = 1.0 / (q - p) if weighting else 1.0
                X[s[p], s[q]] += w
                X[s[q], s[p]] += w
    return X


def _dense(path: Path) -> np.ndarray:
    rows, cols, vals, V = load_cooccurrences(path)
    X = np.zeros((V, V))
    X[rows, cols] = vals
    return X


def _random_corpus(seed: int = 0, n: int = 200):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    oov = ["oov1", "oov2", "<s>", "<unk>"]  # unknown words, plus tokens naming specials
    lines = []
    for _ in range(n):
        k = rng.randint(0, 14)  # includes empty lines
        toks = [rng.choice(oov) if rng.random() < 0.15 else rng.choice(words) for _ in range(k)]
        lines.append(" ".join(toks))
    return lines, _vocab(words)


@pytest.mark.parametrize("window", [1, 3, 5])
@pytest.mark.parametrize("weighting", [True, False])
@pytest.mark.parametrize("bounded", [True, False])
@pytest.mark.parametrize("chunked", [False, True])
def test_matches_naive_double_loop(tmp_path, monkeypatch, window, weighting, bounded, chunked):
    lines, w2i = _random_corpus()
    V = len(w2i)
    cfg = CooccurConfig(window=window, distance_weighting=weighting, sentence_bounded=bounded)
    kw = {"_max_pairs": 300, "_batch_lines": 7} if chunked else {}
    if chunked:  # merge at most 3 runs at once: intermediate merge levels are exercised
        monkeypatch.setattr(cooccur, "_MAX_FANIN", 3)
    out = tmp_path / "x.npz"
    stats = count_cooccurrences(iter(lines), w2i, V, out, cfg, **kw)
    if chunked:
        assert stats["chunks"] > 3
    else:
        assert stats["chunks"] == 1

    expected = np.zeros((V, V))
    for (a, b), w in _naive(lines, w2i, window, weighting, bounded).items():
        expected[a, b] = w
    got = _dense(out)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    rows, cols, _, _ = load_cooccurrences(out)
    assert stats["nonzeros"] == rows.size == np.count_nonzero(expected)
    assert stats["total_weight"] == pytest.approx(expected.sum())
    assert stats["tokens"] == sum(1 for line in lines for t in line.split() if w2i.get(t, 0) >= 4)
    assert rows.size == 0 or (rows.min() >= 4 and cols.min() >= 4)  # specials never counted


def test_keep_unk_counts_unknown_as_unk(tmp_path):
    lines, w2i = _random_corpus(seed=1)
    V = len(w2i)
    cfg = CooccurConfig(window=2, keep_unk=True)
    out = tmp_path / "x.npz"
    count_cooccurrences(lines, w2i, V, out, cfg, _max_pairs=200, _batch_lines=5)
    expected = np.zeros((V, V))
    for (a, b), w in _naive(lines, w2i, 2, True, True, keep_unk=True).items():
        expected[a, b] = w
    got = _dense(out)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[0].sum() > 0  # <unk> row is populated
    assert got[1:4].sum() == 0 and got[:, 1:4].sum() == 0  # <s> </s> <pad> never


def test_worked_example(tmp_path):
    lines = ["I like deep learning .", "I like NLP .", "I enjoy learning ."]
    words = ["I", "like", "deep", "learning", "NLP", "enjoy"]  # no "." -> dropped
    w2i = _vocab(words)
    V = len(w2i)
    out = tmp_path / "x.npz"
    count_cooccurrences(lines, w2i, V, out, CooccurConfig(window=1, distance_weighting=False))
    expected = np.zeros((V, V))
    for a, b, c in [
        ("I", "like", 2),
        ("I", "enjoy", 1),
        ("like", "deep", 1),
        ("like", "NLP", 1),
        ("deep", "learning", 1),
        ("enjoy", "learning", 1),
    ]:
        expected[w2i[a], w2i[b]] = expected[w2i[b], w2i[a]] = c
    np.testing.assert_array_equal(_dense(out), expected)


def test_self_pair_counts_twice_on_diagonal(tmp_path):
    w2i = _vocab(["a"])
    out = tmp_path / "x.npz"
    count_cooccurrences(["a a"], w2i, len(w2i), out, CooccurConfig(window=2))
    rows, cols, vals, _ = load_cooccurrences(out)
    assert rows.tolist() == [4] and cols.tolist() == [4] and vals.tolist() == [2.0]


def test_output_sorted_symmetric_and_scratch_removed(tmp_path):
    lines, w2i = _random_corpus(seed=2, n=300)
    scratch = tmp_path / "scratch"
    out = tmp_path / "out" / "x.npz"
    stats = count_cooccurrences(
        lines, w2i, len(w2i), out, CooccurConfig(window=4), scratch, _max_pairs=500
    )
    assert stats["chunks"] > 3
    rows, cols, vals, V = load_cooccurrences(out)
    assert rows.dtype == np.int32 and cols.dtype == np.int32 and vals.dtype == np.float64
    assert len(w2i) == V
    keys = rows.astype(np.int64) * V + cols
    assert np.all(np.diff(keys) > 0)  # sorted by (row, col), no duplicates
    assert np.all(vals > 0)
    X = _dense(out)
    np.testing.assert_array_equal(X, X.T)
    assert list(scratch.iterdir()) == []
    assert sorted(p.name for p in out.parent.iterdir()) == ["x.npz"]
    with np.load(out) as z:
        assert z["vocab_size"].dtype == np.int64 and z["vocab_size"].shape == ()


def test_error_midway_leaves_nothing(tmp_path):
    lines, w2i = _random_corpus(seed=3)

    def failing():
        yield from lines
        raise RuntimeError("disk on fire")

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    spilled = []
    out = tmp_path / "out" / "x.npz"
    with pytest.raises(RuntimeError, match="disk on fire"):
        # small buffer and batches: several runs are on disk when the error hits
        count_cooccurrences(
            _watch(failing(), scratch, spilled),
            w2i,
            len(w2i),
            out,
            CooccurConfig(window=3),
            scratch,
            _max_pairs=200,
            _batch_lines=5,
        )
    assert max(spilled) > 0  # the error really came after spilling
    assert not out.exists()
    assert list(scratch.iterdir()) == []
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def _watch(lines, scratch: Path, seen: list[int]):
    """Pass lines through, recording how many run files exist in the scratch tree."""
    for line in lines:
        seen.append(sum(1 for _ in scratch.rglob("run*.keys")))
        yield line


def test_error_on_existing_output_keeps_old_file(tmp_path):
    w2i = _vocab(["a", "b"])
    out = tmp_path / "x.npz"
    count_cooccurrences(["a b"], w2i, len(w2i), out, CooccurConfig(window=1))
    before = out.read_bytes()

    def failing():
        yield "a b a"
        raise ValueError("boom")

    with pytest.raises(ValueError):
        count_cooccurrences(failing(), w2i, len(w2i), out, CooccurConfig(window=1))
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz"]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"window": 0}, "window"),
        ({"window": -3}, "window"),
        ({"window": 2.5}, "window"),
        ({"memory_mb": 0}, "memory_mb"),
        ({"distance_weighting": "yes"}, "distance_weighting"),
    ],
)
def test_config_validation(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        CooccurConfig(**kwargs)


def test_bad_ids_and_bad_file(tmp_path):
    with pytest.raises(DataError, match="outside"):
        count_cooccurrences(["a"], {"a": 9}, 5, tmp_path / "x.npz", CooccurConfig())
    bad = tmp_path / "bad.npz"
    np.savez(bad, rows=np.zeros(1, np.int32))
    with pytest.raises(DataError, match="missing"):
        load_cooccurrences(bad)
    with pytest.raises(DataError, match="not found"):
        load_cooccurrences(tmp_path / "nope.npz")


def test_empty_corpus(tmp_path):
    w2i = _vocab(["a"])
    out = tmp_path / "x.npz"
    stats = count_cooccurrences(["", "zzz"], w2i, len(w2i), out, CooccurConfig())
    rows, cols, vals, V = load_cooccurrences(out)
    assert rows.size == cols.size == vals.size == 0 and V == 5
    assert stats["nonzeros"] == 0 and stats["tokens"] == 0
