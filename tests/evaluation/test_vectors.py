"""Tests for nlpzoo.evaluation.vectors: the word2vec text format (read back by us and by gensim)
and nearest neighbours."""

from __future__ import annotations

import numpy as np
import pytest
from gensim.models import KeyedVectors

from nlpzoo.data.vocab import SPECIALS
from nlpzoo.errors import DataError
from nlpzoo.evaluation.vectors import nearest_neighbours, read_word2vec_text, write_word2vec_text


def table(n_words: int = 50, dim: int = 8, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    words = [*SPECIALS, "Straße", "naïve", "x"] + [f"w{i}" for i in range(n_words - 7)]
    vectors = rng.standard_normal((n_words, dim)) * 10.0 ** rng.integers(-8, 4, (n_words, 1))
    vectors[3] = 0.0  # <pad>
    return words, vectors.astype(np.float32)


def test_round_trip_is_exact_and_drops_pad(tmp_path):
    words, vectors = table()
    path = tmp_path / "vectors.txt"
    write_word2vec_text(path, words, vectors)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"{len(words) - 1} 8"
    assert [line.split(" ")[0] for line in lines[1:4]] == ["<unk>", "<s>", "</s>"]
    assert all(not line.startswith("<pad> ") for line in lines)
    back_words, back_vectors = read_word2vec_text(path)
    keep = [i for i, w in enumerate(words) if w != "<pad>"]
    assert back_words == [words[i] for i in keep]
    assert back_vectors.dtype == np.float32
    np.testing.assert_array_equal(back_vectors, vectors[keep])  # bit for bit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.txt"]  # no temp file left


def test_float64_input_is_stored_as_float32(tmp_path):
    words, vectors = table()
    vectors64 = vectors.astype(np.float64) + 1e-12  # not representable in float32
    write_word2vec_text(tmp_path / "v.txt", words, vectors64)
    _, back = read_word2vec_text(tmp_path / "v.txt")
    keep = [i for i, w in enumerate(words) if w != "<pad>"]
    np.testing.assert_array_equal(back, vectors64[keep].astype(np.float32))


def test_gensim_reads_our_file_and_we_read_gensims(tmp_path):
    words, vectors = table()
    ours = tmp_path / "ours.txt"
    write_word2vec_text(ours, words, vectors)
    kv = KeyedVectors.load_word2vec_format(str(ours), binary=False)
    keep = [i for i, w in enumerate(words) if w != "<pad>"]
    assert kv.index_to_key == [words[i] for i in keep]
    np.testing.assert_array_equal(kv.vectors, vectors[keep])

    theirs = tmp_path / "theirs.txt"
    kv.save_word2vec_format(str(theirs), binary=False)
    back_words, back_vectors = read_word2vec_text(theirs)
    assert back_words == kv.index_to_key
    np.testing.assert_array_equal(back_vectors, kv.vectors)


def test_words_that_cannot_be_written(tmp_path):
    words, vectors = table()
    for bad in ["two words", "tab\there", ""]:
        with pytest.raises(ValueError, match="cannot be written"):
            write_word2vec_text(tmp_path / "v.txt", [*words[:-1], bad], vectors)
    assert not (tmp_path / "v.txt").exists()
    with pytest.raises(ValueError, match="shape"):
        write_word2vec_text(tmp_path / "v.txt", words[:-1], vectors)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2 3\na 1 2 3\n", "found 1"),
        ("1 3\na 1 2 3\nb 4 5 6\n", "more rows"),
        ("2 3\na 1 2 3\nb 4 5\n", "expected a word and 3"),
        ("1 2\na 1 x\n", "could not convert"),
        ("a 1 2\n", "first line"),
    ],
)
def test_damaged_files(tmp_path, text, message):
    path = tmp_path / "v.txt"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_word2vec_text(path)


def test_nearest_neighbours_by_hand():
    def at(degrees: float, length: float = 1.0) -> list[float]:
        return [length * np.cos(np.radians(degrees)), length * np.sin(np.radians(degrees))]

    words = [*SPECIALS, "cat", "dog", "lion", "car", "truck", "Cat"]
    # every special points exactly at cat; lengths differ so only cosine orders them
    vectors = np.array(
        [at(0)] * 4 + [at(0, 3.0), at(20, 0.5), at(10, 7.0), at(90), at(80, 2.0), at(-55)]
    )
    nn = nearest_neighbours(words, vectors, ["cat", "truck", "unicorn", "<unk>", "Cat"], k=3)
    assert [w for w, _ in nn["cat"]] == ["lion", "dog", "Cat"]
    assert [c for _, c in nn["cat"]] == pytest.approx(
        [np.cos(np.radians(10)), np.cos(np.radians(20)), np.cos(np.radians(55))]
    )
    assert [w for w, _ in nn["truck"]] == ["car", "dog", "lion"]
    assert nn["unicorn"] == [] and nn["<unk>"] == []  # not a word / a special
    assert [w for w, _ in nn["Cat"]] == ["cat", "lion", "dog"]  # probes are case-sensitive
    everything = nearest_neighbours(words, vectors, ["dog"], k=100)["dog"]
    assert [w for w, _ in everything] == ["lion", "cat", "truck", "car", "Cat"]  # 5 = all but dog


def test_neighbours_of_a_table_read_back_skip_specials(tmp_path):
    words, vectors = table()
    vectors[:3] = vectors[5]  # <unk> <s> </s> identical to the probe
    write_word2vec_text(tmp_path / "v.txt", words, vectors)
    back_words, back_vectors = read_word2vec_text(tmp_path / "v.txt")
    nn = nearest_neighbours(back_words, back_vectors, [words[5]], k=10)[words[5]]
    assert len(nn) == 10
    assert not {w for w, _ in nn} & set(SPECIALS)
    assert nn == nearest_neighbours(words, vectors, [words[5]], k=10)[words[5]]
