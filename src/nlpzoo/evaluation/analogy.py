"""Word-analogy accuracy on Mikolov et al. (2013)'s `questions-words.txt` (docs/design.md §4).

For a question "a is to b as c is to d" the answer is found by 3CosAdd (vector offset):

    answer = argmax_{x ∉ {a, b, c}} cos(x, b̂ − â + ĉ),    x̂ = x / ‖x‖

searched over the first `restrict_vocab` words of the frequency-sorted vocabulary (specials
excluded). A question with any of its four words outside those words is skipped; coverage is
answered / all questions in the file. Sections are `: name` lines; those named `gram*` are
syntactic, the others semantic.

The result is that of gensim 4's `KeyedVectors.evaluate_word_analogies(path, restrict_vocab,
case_insensitive)` (the parity tests in tests/evaluation/test_analogy.py hold us to it), including
its rules for case (`_questions`) and for which of the top candidates is the answer (`_answers`).
Symbols: Q questions, B a batch of them, R searched words, d dimension.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nlpzoo.errors import DataError
from nlpzoo.evaluation.vectors import case_key, check_vectors, restricted_vocab, unit_rows

log = logging.getLogger(__name__)

TOPN = 5  # gensim's `most_similar(..., topn=5)`: only the 5 best candidates can be the answer


@dataclass
class _Questions:
    sections: list[str]  # section names in file order
    total: int  # questions in the file (lines of four words), answered or not
    section: np.ndarray  # (Q,) section number of each answerable question
    abcd: np.ndarray  # (Q, 4) positions in the searched words of a, b, c, d


def _questions(path: Path, key: Callable[[str], str], index: dict[str, int]) -> _Questions:
    """Parse the file as gensim does: `: ` starts a section, named by `line.lstrip(': ').strip()`;
    a line that does not split into four words is ignored (not counted); every word goes through
    `key` and must be in `index`, else the question is counted but not answerable."""
    sections: list[str] = []
    section: list[int] = []
    abcd: list[tuple[int, int, int, int]] = []
    total = 0
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.startswith(": "):
                sections.append(line.lstrip(": ").strip())
                continue
            if not sections:
                raise DataError(f"{path}:{line_no}: a question before the first ': section' line")
            question = line.split()
            if len(question) != 4:
                continue
            total += 1
            at = [index.get(key(w)) for w in question]
            if None not in at:
                section.append(len(sections) - 1)
                abcd.append(tuple(at))
    return _Questions(
        sections,
        total,
        np.array(section, dtype=np.int64),
        np.array(abcd, dtype=np.int64).reshape(-1, 4),
    )


def _answers(unit: np.ndarray, first: np.ndarray, abc: np.ndarray) -> np.ndarray:
    """The predicted word (as the position of its first spelling) for each question, -1 for none.

    gensim's rule (`evaluate_word_analogies` with `most_similar`): rank every searched word by
    cosine to b̂ + ĉ − â, drop the three question words' own rows, keep the best `TOPN`; the answer
    is the first of those whose key is none of a, b, c (with case folding, another spelling of a
    question word, e.g. `Paris` for `paris`, is still a candidate row but cannot be the answer);
    if all of them are, the answer is the last of them. Only the ranking matters, so neither the
    mean's 1/3 nor its normalisation is applied.
    """
    ar = np.arange(len(abc))  # (B,)
    query = unit[abc[:, 1]] + unit[abc[:, 2]] - unit[abc[:, 0]]  # (B, d)
    scores = query @ unit.T  # (B, R)
    scores[ar[:, None], abc] = -np.inf  # the question's own rows are never candidates
    k = min(TOPN, unit.shape[0])
    top = np.empty((len(abc), k), dtype=np.int64)  # (B, k) the k best, best first
    valid = np.empty((len(abc), k), dtype=bool)  # (B, k) False once no word is left
    for j in range(k):  # k argmax passes: far cheaper than a sort or argpartition of (B, R)
        top[:, j] = scores.argmax(1)  # ties go to the more frequent word
        valid[:, j] = np.isfinite(scores[ar, top[:, j]])
        scores[ar, top[:, j]] = -np.inf
    spelling = first[top]  # (B, k) each candidate's first spelling
    allowed = valid & (spelling != first[abc[:, :1]]) & (spelling != first[abc[:, 1:2]])
    allowed &= spelling != first[abc[:, 2:3]]
    pick = np.where(allowed.any(1), allowed.argmax(1), valid.sum(1) - 1)  # (B,)
    return np.where(pick >= 0, spelling[ar, np.maximum(pick, 0)], -1)


def evaluate_analogies(
    words: Sequence[str],
    vectors: np.ndarray,
    path: Path,
    restrict_vocab: int | None = 30000,
    lowercase: bool = True,
    batch_size: int = 256,
) -> dict:
    """3CosAdd accuracy on an analogy file; flat `analogy_*` keys plus per-section accuracy.

    `lowercase` makes the comparison case-insensitive (gensim's `case_insensitive`; a word is
    represented by its most frequent spelling). An accuracy over no answered question is 0.0, as
    in gensim; `analogy_answered` tells the two apart.
    """
    vectors = check_vectors(words, vectors)
    key = case_key(lowercase)
    rows, index, first = restricted_vocab(words, restrict_vocab, key)
    q = _questions(Path(path), key, index)
    if q.total == 0:
        raise DataError(f"{path}: no analogy questions")
    unit = unit_rows(vectors[rows])  # (R, d)
    correct = np.zeros(len(q.abcd), dtype=bool)  # (Q,)
    for start in range(0, len(q.abcd), batch_size):
        abcd = q.abcd[start : start + batch_size]  # (B, 4)
        correct[start : start + len(abcd)] = _answers(unit, first, abcd[:, :3]) == abcd[:, 3]

    def accuracy(mask: np.ndarray) -> float:
        return float(correct[mask].mean()) if mask.any() else 0.0

    syntactic = np.array([name.startswith("gram") for name in q.sections], dtype=bool)
    syn = syntactic[q.section]  # (Q,)
    numbers: dict[str, list[int]] = {}  # section name -> its section numbers (names may repeat)
    for i, name in enumerate(q.sections):
        numbers.setdefault(name, []).append(i)
    result = {
        "analogy_acc": accuracy(np.ones_like(correct)),
        "analogy_sem_acc": accuracy(~syn),
        "analogy_syn_acc": accuracy(syn),
        "analogy_coverage": len(correct) / q.total,
        "analogy_answered": len(correct),
        "sections": {name: accuracy(np.isin(q.section, i)) for name, i in numbers.items()},
    }
    log.info(
        "analogies: %.4f accuracy (semantic %.4f, syntactic %.4f) on %d of %d questions",
        result["analogy_acc"],
        result["analogy_sem_acc"],
        result["analogy_syn_acc"],
        len(correct),
        q.total,
    )
    return result


# --------------------------------------------------------------------------- single questions

METHODS = ("3cosadd", "3cosmul")
MUL_EPSILON = 1e-3  # Levy & Goldberg (2014)'s ε: keeps the 3CosMul quotient finite


class Analogies:
    """Answers to single questions "a is to b as c is to ?" (`python -m nlpzoo analogy`, and
    eval/RUN/analogies.json), over the same searched words and with the same case rule as
    `evaluate_analogies`.

    3cosadd   the evaluation's rule: candidates ranked by cos(x, b̂ − â + ĉ), the three question
              words' rows never candidates, another spelling of one of them never an answer, a
              word named by its most frequent spelling; the first answer is the one `_answers`
              gives (when one of its `TOPN` best is allowed, which is always the case without
              case folding).
    3cosmul   Levy & Goldberg (2014), "Linguistic regularities in sparse and explicit word
              representations": argmax_x cos'(x, b) · cos'(x, c) / (cos'(x, a) + ε), with the
              cosines shifted to [0, 1] as cos' = (cos + 1) / 2 and ε = 0.001; same candidates.
    """

    def __init__(
        self,
        words: Sequence[str],
        vectors: np.ndarray,
        restrict_vocab: int | None = 30000,
        lowercase: bool = True,
    ) -> None:
        vectors = check_vectors(words, vectors)
        self.words = list(words)
        self.key = case_key(lowercase)
        self.rows, self.index, self.first = restricted_vocab(words, restrict_vocab, self.key)
        self.unit = unit_rows(vectors[self.rows])  # (R, d)

    def position(self, word: str) -> int | None:
        """The word's position among the searched words (its most frequent spelling), or None."""
        return self.index.get(self.key(word))

    def answers(
        self, a: str, b: str, c: str, k: int = 1, method: str = "3cosadd"
    ) -> list[tuple[str, float]]:
        """The `k` best answers, best first, each with its score (3cosadd: the cosine to
        b̂ − â + ĉ; 3cosmul: the quotient). A word not searched raises KeyError (the word)."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        at = []
        for w in (a, b, c):
            p = self.position(w)
            if p is None:
                raise KeyError(w)
            at.append(p)
        ua, ub, uc = self.unit[at]  # (d,) each
        if method == "3cosadd":
            query = ub + uc - ua  # (d,), ranked as `_answers` ranks
            scores = self.unit @ query  # (R,)
            norm = float(np.linalg.norm(query))
            scale = 1.0 / norm if norm > 0 else 1.0  # shown as a cosine; the order is the same
        else:
            shifted = (self.unit @ np.stack([ua, ub, uc]).T + 1.0) / 2.0  # (R, 3) in [0, 1]
            scores = shifted[:, 1] * shifted[:, 2] / (shifted[:, 0] + MUL_EPSILON)  # (R,)
            scale = 1.0
        scores[at] = -np.inf  # the question's own rows are never candidates
        order = np.lexsort((np.arange(len(scores)), -scores))  # best first; ties: more frequent
        banned, out = set(at), []
        for p in order:
            if len(out) == k or not np.isfinite(scores[p]):
                break
            spelling = int(self.first[p])
            if spelling in banned:
                continue
            banned.add(spelling)  # each word once, under its most frequent spelling
            out.append((self.words[self.rows[spelling]], float(scores[p] * scale)))
        return out


def answer_questions(
    words: Sequence[str],
    vectors: np.ndarray,
    questions: Sequence[str],
    restrict_vocab: int | None = 30000,
    k: int = 3,
) -> list[dict]:
    """Each question "a b c d" (d the expected answer) answered by both methods: a list of
    {question: [a, b, c], expected: d, 3cosadd: [[word, score], ...], 3cosmul: [...]}, the
    answers None when a question word is not searched (eval/RUN/analogies.json)."""
    solver = Analogies(words, vectors, restrict_vocab)
    out = []
    for q in questions:
        a, b, c, expected = q.split()
        row: dict = {"question": [a, b, c], "expected": expected}
        for method in METHODS:
            try:
                row[method] = [list(x) for x in solver.answers(a, b, c, k, method)]
            except KeyError:
                row[method] = None
        out.append(row)
    return out
