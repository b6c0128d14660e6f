"""Word vectors as the evaluations see them: a frequency-sorted `words` list with a `(V, d)` array.

Ids 0..3 are the specials `<unk> <s> </s> <pad>` (`nlpzoo.data.vocab`). They are never a candidate,
an answer or a neighbour; they are recognised by name, so a table read back from a word2vec file
(which keeps `<unk> <s> </s>` but drops `<pad>`, see `write_word2vec_text`) is treated the same.

Also here: the word2vec text format (Mikolov et al. 2013's `-binary 0` output) and nearest
neighbours by cosine. Symbols: V rows, R searched rows, P probes, d dimension.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from nlpzoo.data.vocab import SPECIALS
from nlpzoo.errors import DataError
from nlpzoo.io import atomic_open

log = logging.getLogger(__name__)

PAD_WORD = SPECIALS[3]


def check_vectors(words: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    """`vectors` as an array, after checking it has one row per word and no word repeats."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"{len(words)} words but vectors of shape {vectors.shape}")
    if len(set(words)) != len(words):
        raise ValueError("a word appears twice in `words`")
    return vectors


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm, in float64. A zero row stays zero (cosine 0 with everything)
    instead of the NaN that x / ‖x‖ would give."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)  # (V, 1)
    return v / np.where(norms > 0, norms, 1.0)


def case_key(lowercase: bool) -> Callable[[str], str]:
    """How words are compared. Case-insensitive means `str.upper`, because that is what gensim's
    `case_insensitive=True` does (`k.upper()`, `word.upper()` in `evaluate_word_analogies` and
    `evaluate_word_pairs`); it differs from `lower` only for letters such as ß."""
    return str.upper if lowercase else str


def restricted_vocab(
    words: Sequence[str], restrict_vocab: int | None, key: Callable[[str], str]
) -> tuple[np.ndarray, dict[str, int], np.ndarray]:
    """The searched words: the first `restrict_vocab` non-special words, in vocabulary order.

    Returns `rows` (R,) their row numbers in `words`; `index` mapping a word's key to the position
    in `rows` of its first, i.e. most frequent, spelling (gensim builds `{k.upper(): index for k in
    reversed(index_to_key[:restrict_vocab])}`, so the first variant wins); and `first` (R,), the
    position of the first spelling of each row's key (`first[p] == p` for the first spelling).
    """
    if restrict_vocab is not None and restrict_vocab < 0:
        raise ValueError(f"restrict_vocab must be >= 0, got {restrict_vocab}")
    rows = [i for i, w in enumerate(words) if w not in SPECIALS]
    if restrict_vocab is not None:
        rows = rows[:restrict_vocab]
    index: dict[str, int] = {}
    first = np.empty(len(rows), dtype=np.int64)
    for p, i in enumerate(rows):
        first[p] = index.setdefault(key(words[i]), p)
    return np.asarray(rows, dtype=np.int64), index, first


def write_word2vec_text(path: Path, words: Sequence[str], vectors: np.ndarray) -> None:
    """Write the word2vec text format: a `V d` header line, then `word v1 ... vd` per row.

    Every row is written, in vocabulary order, except `<pad>`: it only fills batches, is never
    trained (often an all-zero row, whose cosine is undefined in other tools), and is not a token
    of any text. `<unk> <s> </s>` stay because they are trained tokens, so the file is the whole
    trained table and rows 0..2 keep their ids (later rows move up by one). Values are stored as
    float32 with 9 significant digits, which reads back to the identical float32 (gensim and
    word2vec hold float32 too).
    """
    vectors = check_vectors(words, vectors)
    keep = [i for i, w in enumerate(words) if w != PAD_WORD]
    for i in keep:
        if not words[i] or len(words[i].split()) != 1:
            raise ValueError(f"word {words[i]!r} cannot be written: it is empty or has whitespace")
    table = vectors[keep].astype(np.float32)  # (V', d)
    with atomic_open(Path(path)) as f:
        f.write(f"{len(keep)} {table.shape[1]}\n")
        for i, row in zip(keep, table, strict=True):
            f.write(words[i] + " " + " ".join(f"{x:.9g}" for x in row.tolist()) + "\n")
    log.info("wrote %d x %d vectors to %s", len(keep), table.shape[1], path)


def read_word2vec_text(path: Path) -> tuple[list[str], np.ndarray]:
    """Read the word2vec text format into `(words, vectors)` with float32 vectors."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        header = f.readline().split()
        if len(header) != 2 or not all(h.isdigit() for h in header):
            raise DataError(f"{path}: first line must be 'V d', got {' '.join(header)!r}")
        n, d = int(header[0]), int(header[1])
        words: list[str] = []
        vectors = np.empty((n, d), dtype=np.float32)
        for line_no, line in enumerate(f, start=2):
            if len(words) == n:
                if line.strip():
                    raise DataError(f"{path}:{line_no}: more rows than the {n} in the header")
                continue
            parts = line.rstrip().split(" ")
            if len(parts) != d + 1:
                raise DataError(f"{path}:{line_no}: expected a word and {d} numbers")
            try:
                vectors[len(words)] = np.array(parts[1:], dtype=np.float32)
            except ValueError as e:
                raise DataError(f"{path}:{line_no}: {e}") from None
            words.append(parts[0])
    if len(words) != n:
        raise DataError(f"{path}: header says {n} rows, found {len(words)}")
    return words, vectors


def nearest_neighbours(
    words: Sequence[str], vectors: np.ndarray, probes: Sequence[str], k: int = 10
) -> dict[str, list[tuple[str, float]]]:
    """The `k` words of highest cosine to each probe, best first (ties: the more frequent word).

    Every non-special word is a candidate except the probe itself. Probes are matched exactly
    (case-sensitive); a probe that is not in `words`, or is a special, gets an empty list.
    """
    vectors = check_vectors(words, vectors)
    rows, _, _ = restricted_vocab(words, None, str)
    position = {words[i]: p for p, i in enumerate(rows)}  # word -> position in rows
    found = [w for w in dict.fromkeys(probes) if w in position]
    out: dict[str, list[tuple[str, float]]] = {w: [] for w in probes}
    k = min(k, len(rows) - 1)
    if not found or k < 1:
        return out
    unit = unit_rows(vectors[rows])  # (R, d)
    at = np.array([position[w] for w in found])  # (P,)
    sims = unit[at] @ unit.T  # (P, R)
    sims[np.arange(len(at)), at] = -np.inf  # the probe is not its own neighbour
    order = np.arange(len(rows))
    for w, s in zip(found, sims, strict=True):
        top = np.lexsort((order, -s))[:k]  # (k,) by cosine, ties by frequency rank
        out[w] = [(words[rows[p]], float(s[p])) for p in top]
    return out
