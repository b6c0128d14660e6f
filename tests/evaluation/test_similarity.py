"""Tests for nlpzoo.evaluation.similarity: Spearman ρ equal to gensim's
`KeyedVectors.evaluate_word_pairs(path, case_insensitive=True)` (docs/design.md §4)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

from nlpzoo.data.vocab import SPECIALS
from nlpzoo.evaluation.similarity import evaluate_similarity

DATASETS = Path(os.environ["NLPZOO_DATA_MIRROR"])
FILES = {"ws353": (DATASETS / "wordsim353.tsv", 353), "simlex": (DATASETS / "simlex999.txt", 999)}


pytestmark = pytest.mark.usefixtures("one_thread")


def gensim_pairs(words, vectors, path, restrict_vocab=300000):
    """(ρ, pairs used) from gensim on the same vectors, specials left out."""
    keep = [i for i, w in enumerate(words) if w not in SPECIALS]
    kv = KeyedVectors(vectors.shape[1])
    kv.add_vectors([words[i] for i in keep], vectors[keep])
    _, spearman, oov_percent = kv.evaluate_word_pairs(
        str(path), restrict_vocab=restrict_vocab, case_insensitive=True
    )
    return spearman.statistic, oov_percent


# ---------------------------------------------------------------- a hand-made embedding

HAND_FILE = """\
# a comment line
Word 1\tWord 2\tHuman (mean)
cat\tdog\t9.0
Cat\tcar\t7.0
car\tdog\t5.0
dog\tsun\t3.0
cat\tunicorn\t10.0
"""


def hand_embedding() -> tuple[list[str], np.ndarray]:
    """Words at angles in a plane: cat 0°, dog 30°, car −60°, sun 100°, so the cosines are
    cat·dog 0.87, cat·car 0.5, car·dog 0, dog·sun 0.34. `Cat`, a rarer spelling of cat, is at
    120°: were it used, cat·dog would be 0 and cat·car −1."""

    def at(degrees: float, length: float = 1.0) -> np.ndarray:
        return length * np.array([np.cos(np.radians(degrees)), np.sin(np.radians(degrees))])

    words = [*SPECIALS, "cat", "dog", "car", "sun", "Cat"]
    vectors = np.array([at(45)] * 4 + [at(0, 2.0), at(30), at(-60, 3.0), at(100), at(120)])
    return words, vectors


def test_hand_embedding(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(HAND_FILE)
    words, vectors = hand_embedding()
    r = evaluate_similarity(words, vectors, path, "toy")
    # gold ranks 4 3 2 1 (cat-dog, cat-car, car-dog, dog-sun); cosine ranks 4 3 1 2:
    # ρ = 1 − 6 Σd² / (n (n² − 1)) = 1 − 6 (0 + 0 + 1 + 1) / 60 = 0.8
    assert r == {"toy_rho": pytest.approx(0.8), "toy_coverage": 0.8, "toy_pairs": 4}
    # the unicorn pair is skipped, not scored 0 (that would give another ρ)
    assert gensim_pairs(words, vectors, path) == (pytest.approx(0.8), pytest.approx(20.0))


def test_case_sensitive_misses_capitalised_words(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(HAND_FILE.replace("Cat\tcar", "CAT\tcar"))
    words, vectors = hand_embedding()
    r = evaluate_similarity(words, vectors, path, "toy", lowercase=False)
    assert r["toy_pairs"] == 3  # CAT is not `cat` (nor `Cat`) without case folding
    r = evaluate_similarity(words, vectors, path, "toy")
    assert r["toy_pairs"] == 4


def test_too_few_known_pairs_give_nan(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(HAND_FILE)
    words, vectors = hand_embedding()
    r = evaluate_similarity(words[:5], vectors[:5], path, "toy")  # only `cat` is known
    assert math.isnan(r["toy_rho"])
    assert (r["toy_coverage"], r["toy_pairs"]) == (0.0, 0)


# ---------------------------------------------------------- a random embedding on the real files


@pytest.fixture(scope="module")
def random_embedding() -> tuple[list[str], np.ndarray]:
    """~1,400 words of both files: 10 % left out, 20 % also in upper case with another vector
    (sometimes before the lower-case one), random order, random vectors."""
    rng = np.random.default_rng(7)
    pair_words = set()
    for path, _ in FILES.values():
        with open(path) as f:
            pair_words |= {w for line in f if line[0] != "#" for w in line.split("\t")[:2]}
    spellings: list[str] = []
    for w in sorted(pair_words):
        r = rng.random()
        if r < 0.1:
            continue
        spellings.append(w)
        if r > 0.8:
            spellings.append(w.upper())
    words = list(dict.fromkeys(spellings[i] for i in rng.permutation(len(spellings))))
    vectors = rng.standard_normal((4 + len(words), 50)).astype(np.float32)
    return list(SPECIALS) + words, vectors


@pytest.mark.parametrize("name", list(FILES))
@pytest.mark.parametrize("restrict_vocab", [300000, 400])
def test_real_files_match_gensim(random_embedding, name, restrict_vocab):
    words, vectors = random_embedding
    path, n_pairs = FILES[name]
    ours = evaluate_similarity(words, vectors, path, name, restrict_vocab=restrict_vocab)
    rho, oov_percent = gensim_pairs(words, vectors, path, restrict_vocab)
    assert ours[f"{name}_rho"] == pytest.approx(rho, abs=1e-12)
    assert ours[f"{name}_coverage"] == pytest.approx(1 - oov_percent / 100, abs=1e-12)
    assert ours[f"{name}_coverage"] == ours[f"{name}_pairs"] / n_pairs
    low, high = (0.7, 0.9) if restrict_vocab == 300000 else (0.02, 0.3)
    assert low < ours[f"{name}_coverage"] < high
