"""Word similarity (docs/design.md §4): Spearman ρ between human scores and the cosine of two words'
vectors, over the pairs of WordSim-353 (Finkelstein et al. 2002) or SimLex-999 (Hill et al. 2015)
whose two words are both in the vocabulary; the other pairs are skipped and coverage reports them.

The result is that of gensim 4's `KeyedVectors.evaluate_word_pairs(path, restrict_vocab=300000,
case_insensitive=True, dummy4unknown=False)` (tests/evaluation/test_similarity.py checks it):
the same lines are read (`_pairs`), a word stands for its most frequent spelling, and ρ is
`scipy.stats.spearmanr` (average ranks for ties) as gensim computes it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from nlpzoo.errors import DataError
from nlpzoo.evaluation.vectors import case_key, check_vectors, restricted_vocab, unit_rows

log = logging.getLogger(__name__)


def _pairs(path: Path, key: Callable[[str], str]) -> list[tuple[str, str, float]]:
    """Every `word1<TAB>word2<TAB>score` line, words through `key`. As gensim: a line starting
    with `#` is a comment; a line without exactly three tab-separated fields, or whose score is
    not a number (a header), is ignored; the words are not stripped."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                continue
            try:
                score = float(fields[2])
            except ValueError:
                continue
            pairs.append((key(fields[0]), key(fields[1]), score))
    return pairs


def evaluate_similarity(
    words: Sequence[str],
    vectors: np.ndarray,
    path: Path,
    name: str,
    restrict_vocab: int | None = 300000,
    lowercase: bool = True,
) -> dict[str, float | int]:
    """`{name}_rho` (Spearman ρ), `{name}_coverage` (pairs used / pairs in the file) and
    `{name}_pairs` (pairs used). Only the first `restrict_vocab` non-special words count as known.

    Where fewer than two pairs are known, ρ is NaN (gensim raises instead; a tiny smoke-test model
    should still get its other metrics).
    """
    vectors = check_vectors(words, vectors)
    rows, index, _ = restricted_vocab(words, restrict_vocab, case_key(lowercase))
    pairs = _pairs(Path(path), case_key(lowercase))
    if not pairs:
        raise DataError(f"{path}: no word pairs")
    known = [(index[a], index[b], s) for a, b, s in pairs if a in index and b in index]
    rho = math.nan
    if len(known) >= 2:
        at = np.array([(a, b) for a, b, _ in known], dtype=np.int64)  # (N, 2) positions in rows
        unit = unit_rows(vectors[rows[at.ravel()]]).reshape(len(known), 2, -1)  # (N, 2, d)
        cosine = np.einsum("nd,nd->n", unit[:, 0], unit[:, 1])  # (N,)
        rho = float(stats.spearmanr([s for _, _, s in known], cosine).statistic)
    else:
        log.warning("%s: only %d of %d pairs in the vocabulary, no ρ", path, len(known), len(pairs))
    log.info("%s: Spearman ρ %.4f on %d of %d pairs", name, rho, len(known), len(pairs))
    return {
        f"{name}_rho": rho,
        f"{name}_coverage": len(known) / len(pairs),
        f"{name}_pairs": len(known),
    }
