"""Tests for nlpzoo.evaluation.analogy: 3CosAdd accuracy (docs/design.md §4) equal to gensim's
`KeyedVectors.evaluate_word_analogies(path, restrict_vocab, case_insensitive)`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

from nlpzoo.data.vocab import SPECIALS
from nlpzoo.errors import DataError
from nlpzoo.evaluation.analogy import evaluate_analogies

QUESTIONS = Path(os.environ["NLPZOO_DATA_MIRROR"]) / "questions-words.txt"
N_QUESTIONS = 19544


pytestmark = pytest.mark.usefixtures("one_thread")


def gensim_sections(words, vectors, path, restrict_vocab, case_insensitive=True):
    """{section: (correct, answered)} from gensim on the same vectors, specials left out."""
    keep = [i for i, w in enumerate(words) if w not in SPECIALS]
    kv = KeyedVectors(vectors.shape[1])
    kv.add_vectors([words[i] for i in keep], vectors[keep])
    _, sections = kv.evaluate_word_analogies(
        str(path), restrict_vocab=restrict_vocab, case_insensitive=case_insensitive
    )
    return {
        s["section"]: (len(s["correct"]), len(s["correct"]) + len(s["incorrect"]))
        for s in sections[:-1]  # the last one is gensim's "Total accuracy"
    }


def assert_same_as_gensim(ours: dict, theirs: dict[str, tuple[int, int]]) -> None:
    def pooled(names):
        correct = sum(theirs[n][0] for n in names)
        answered = sum(theirs[n][1] for n in names)
        return correct / answered if answered else 0.0

    assert set(ours["sections"]) == set(theirs)
    for name, (correct, answered) in theirs.items():
        assert ours["sections"][name] == pytest.approx(correct / answered if answered else 0.0)
    syntactic = [n for n in theirs if n.startswith("gram")]
    semantic = [n for n in theirs if not n.startswith("gram")]
    assert ours["analogy_answered"] == sum(a for _, a in theirs.values())
    assert ours["analogy_acc"] == pytest.approx(pooled(list(theirs)))
    assert ours["analogy_sem_acc"] == pytest.approx(pooled(semantic))
    assert ours["analogy_syn_acc"] == pytest.approx(pooled(syntactic))


# ---------------------------------------------------------------- a tiny hand-made embedding


SPELLINGS = ["Berlin", "BERLIN", "berliN", "bErlin", "beRlin"]  # five other spellings of berlin


def tiny_embedding() -> tuple[list[str], np.ndarray]:
    """Words on basis directions e_i, so that every cosine below is known by hand."""
    e = np.eye(16)
    table = {
        "the": e[10] + e[11],
        "king": e[0] + e[2],  # royal + male
        "man": e[1] + e[2],  # person + male
        "woman": e[1] + e[3],  # person + female
        "queen": e[0] + e[3],  # king − man + woman, exactly
        "Man": e[1] - e[2] + e[12],  # a rarer spelling of `man` with another vector
        "big": e[6],
        "bigger": e[6] + 1e-3 * e[7],  # bigger − big ≈ 0: the query is ≈ the third word
        "tokyo": e[8],
        "Tokyo": e[8] + 0.01 * e[9],  # another spelling, nearer than the answer
        "kyoto": e[8] + 0.3 * e[9],
        "berlin": e[4],
        **{s: e[4] + 0.01 * k * e[5] for k, s in enumerate(SPELLINGS, start=1)},
        "paris": e[4] + 0.3 * e[13],
        "straße": e[14],  # "straße".upper() == "STRASSE"
    }
    rng = np.random.default_rng(0)
    words = list(SPECIALS) + list(table)
    vectors = np.concatenate([rng.standard_normal((4, 16)), np.array(list(table.values()))])
    return words, vectors.astype(np.float32)


TINY_FILE = """\
: family
man king woman queen
Man King Woman Queen
man king woman empress
man king woman STRASSE
man king
: gram-cities
big bigger tokyo kyoto
big bigger berlin paris
"""


@pytest.fixture
def tiny_file(tmp_path) -> Path:
    path = tmp_path / "questions.txt"
    path.write_text(TINY_FILE)
    return path


def test_tiny_embedding_by_hand(tiny_file):
    words, vectors = tiny_embedding()
    r = evaluate_analogies(words, vectors, tiny_file)
    # family: king − man + woman = queen, also in capitals (read as `man`'s first spelling,
    # not `Man`); `empress` is unknown (skipped); STRASSE is straße (answered, wrong)
    assert r["sections"]["family"] == pytest.approx(2 / 3)
    # tokyo: `Tokyo` is nearest but is a question word, so kyoto; berlin: its five other
    # spellings fill the five candidates gensim looks at, so the last one is the answer (wrong)
    assert r["sections"]["gram-cities"] == pytest.approx(1 / 2)
    assert r["analogy_answered"] == 5
    assert r["analogy_coverage"] == pytest.approx(5 / 6)  # `man king` is not a question
    assert r["analogy_acc"] == pytest.approx(3 / 5)
    assert r["analogy_sem_acc"] == pytest.approx(2 / 3)
    assert r["analogy_syn_acc"] == pytest.approx(1 / 2)


def test_tiny_embedding_case_sensitive(tiny_file):
    words, vectors = tiny_embedding()
    r = evaluate_analogies(words, vectors, tiny_file, lowercase=False)
    # only the all-lowercase family question is known; `Tokyo` and `Berlin` are now other words
    assert r["analogy_answered"] == 3
    assert r["sections"] == {"family": 1.0, "gram-cities": 0.0}


@pytest.mark.parametrize(
    ("restrict_vocab", "lowercase"),
    [(30000, True), (30000, False), (12, True), (5, True), (4, True)],
)
def test_tiny_embedding_matches_gensim(tiny_file, restrict_vocab, lowercase):
    words, vectors = tiny_embedding()
    ours = evaluate_analogies(words, vectors, tiny_file, restrict_vocab, lowercase)
    assert_same_as_gensim(
        ours, gensim_sections(words, vectors, tiny_file, restrict_vocab, lowercase)
    )


def test_restricted_vocabulary_by_hand(tiny_file):
    words, vectors = tiny_embedding()
    # the first 5 words: the king man woman queen; only `the` and `queen` are left to choose from
    r = evaluate_analogies(words, vectors, tiny_file, restrict_vocab=5)
    assert r["analogy_answered"] == 2
    assert r["analogy_acc"] == 1.0
    # queen is the 6th word: no question can be answered any more
    r = evaluate_analogies(words, vectors, tiny_file, restrict_vocab=4)
    assert r["analogy_answered"] == 0
    assert r["analogy_coverage"] == 0.0
    assert r["analogy_acc"] == 0.0


def test_specials_are_never_the_answer(tmp_path):
    e = np.eye(6)
    words = [*SPECIALS, "king", "man", "woman", "queen"]
    # every special sits exactly on king − man + woman; queen only near it
    vectors = np.array([e[0] + e[3]] * 4 + [e[0] + e[2], e[1] + e[2], e[1] + e[3]])
    vectors = np.concatenate([vectors, [e[0] + e[3] + 0.1 * e[5]]])
    path = tmp_path / "q.txt"
    path.write_text(": family\nman king woman queen\n<unk> king woman queen\n")
    r = evaluate_analogies(words, vectors, path)
    assert r["analogy_acc"] == 1.0
    assert r["analogy_answered"] == 1  # a special is not a word: that question is skipped


def test_question_before_a_section_is_an_error(tmp_path):
    words, vectors = tiny_embedding()
    path = tmp_path / "q.txt"
    path.write_text("man king woman queen\n")
    with pytest.raises(DataError, match="before the first"):
        evaluate_analogies(words, vectors, path)


# ------------------------------------------------- a random embedding on the real question file


@pytest.fixture(scope="module")
def planted_embedding() -> tuple[list[str], np.ndarray]:
    """~2,000 words: 90 % of the question words (some lowercased, some with a second spelling
    whose vector is close) and random fillers, in random order, with random vectors in which
    every question pair (x, y) of a section gets y = x + that section's offset + noise. Pure
    noise would answer almost nothing right and could not tell a wrong rule from a right one;
    this answers about half right, with near misses and other spellings among the candidates."""
    rng = np.random.default_rng(1234)
    dim = 50
    pairs: dict[str, dict[tuple[str, str], None]] = {}
    with open(QUESTIONS) as f:
        for line in f:
            if line.startswith(":"):
                section = pairs.setdefault(line[2:].strip(), {})
            else:
                a, b, c, d = line.split()
                section[(a, b)] = section[(c, d)] = None
    question_words = sorted({w for section in pairs.values() for p in section for w in p})
    vec = {w: rng.standard_normal(dim) for w in question_words}
    for section in pairs.values():
        offset = rng.standard_normal(dim)
        for x, y in section:
            vec[y] = vec[x] + offset + 1.5 * rng.standard_normal(dim)
    table: dict[str, np.ndarray] = {}
    for w in question_words:
        r = rng.random()
        if r < 0.1:
            continue  # out of the vocabulary
        spelling = w.lower() if r < 0.45 else w
        table.setdefault(spelling, vec[w])
        if r > 0.8:
            other = w.upper() if spelling != w.upper() else w.lower()
            table.setdefault(other, vec[w] + 0.05 * rng.standard_normal(dim))
    for i in range(2000 - len(table)):
        table[f"filler{i}"] = 1.5 * rng.standard_normal(dim)
    order = rng.permutation(len(table))
    words = [list(table)[i] for i in order]
    vectors = np.array([table[w] for w in words])
    vectors = np.concatenate([rng.standard_normal((4, dim)), vectors]).astype(np.float32)
    return list(SPECIALS) + words, vectors


@pytest.mark.parametrize("restrict_vocab", [30000, 500])
def test_real_file_matches_gensim(planted_embedding, restrict_vocab):
    words, vectors = planted_embedding
    ours = evaluate_analogies(words, vectors, QUESTIONS, restrict_vocab=restrict_vocab)
    theirs = gensim_sections(words, vectors, QUESTIONS, restrict_vocab)
    assert_same_as_gensim(ours, theirs)
    assert len(ours["sections"]) == 14
    assert ours["analogy_coverage"] == ours["analogy_answered"] / N_QUESTIONS
    if restrict_vocab == 30000:  # the comparison means something: neither ~0 nor ~1
        assert 0.3 < ours["analogy_acc"] < 0.8
        assert 0.5 < ours["analogy_coverage"] < 0.9
    else:  # 500 of 2,000 words: far fewer questions are answerable
        assert 0 < ours["analogy_answered"] < 0.1 * N_QUESTIONS


def test_every_question_counts_in_coverage(planted_embedding):
    words, vectors = planted_embedding
    everything = evaluate_analogies(words, vectors, QUESTIONS, restrict_vocab=None)
    assert everything["analogy_coverage"] * N_QUESTIONS == pytest.approx(
        everything["analogy_answered"]
    )
    # with no word known, nothing is answered and coverage is 0, not an error
    r = evaluate_analogies(list(SPECIALS), np.ones((4, 3)), QUESTIONS)
    assert (r["analogy_answered"], r["analogy_coverage"], r["analogy_acc"]) == (0, 0.0, 0.0)
