"""Shared by the two tasks over a word vocabulary (`lm`, `vectors`): the data folder's vocabulary
and arrays, the word vectors a run writes (`vectors.txt`), and the word-vector protocol.

The protocol (docs/design.md §4) scores any (V, d) table of word vectors the same way: analogy
(3CosAdd) on questions-words.txt, Spearman ρ on WordSim-353 and SimLex-999, nearest neighbours of
the probe words; the evaluation sets are those `corpus@eval` fetched into data/raw/eval/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nlpzoo.config import build
from nlpzoo.data.vocab import Vocab, load_stream
from nlpzoo.errors import DataError
from nlpzoo.io import atomic_write_json
from nlpzoo.params_eval import EvaluationConfig
from nlpzoo.tasks import Data, Fitted, Run

EVAL_SETS = ("questions-words.txt", "wordsim353.tsv", "simlex999.txt")


@dataclass
class WordData(Data):
    """A vocabulary and the arrays a run trains on: token streams (`train`, `valid`) of
    `vocab/lm`, or the co-occurrence entries (`rows`, `cols`, `vals`) of `cooccur`."""

    vocab: Vocab | None = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def load_vocab(run: Run) -> Vocab:
    path = run.data_dir / "vocab.txt"
    if not path.is_file():
        raise DataError(
            f"run '{run.name}': {path} not found; models.{run.name}.data must name a data folder "
            f"with a vocabulary (vocab/lm or cooccur)"
        )
    return Vocab.load(path)


def load_streams(run: Run, splits: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The encoded token streams of `splits` (the first one must be there: the family trains on
    it)."""
    if not (run.data_dir / f"{splits[0]}.npy").is_file():
        raise DataError(
            f"run '{run.name}': family {run.spec.family} trains on a token stream, but "
            f"{run.data_dir} has none (models.{run.name}.data should be vocab/lm)"
        )
    return {split: load_stream(run.data_dir, split) for split in splits}


def word_data(vocab: Vocab, arrays: dict[str, np.ndarray]) -> WordData:
    return WordData(len(vocab), list(vocab.counts), vocab, arrays)


def fingerprint(data: WordData) -> tuple[dict, list]:
    """The vocabulary's counts and every array, in name order."""
    return {"counts": list(data.counts)}, [np.asarray(data.arrays[k]) for k in sorted(data.arrays)]


def units_seen(units_per_epoch: int, fitted: Fitted) -> int:
    """The units (tokens, or co-occurrence entries) of the epochs run, over every rank."""
    world = max(fitted.world_size, 1)
    return int(units_per_epoch // world * world * fitted.epochs * fitted.fraction)


def throughput(units_per_epoch: int, fitted: Fitted) -> dict:
    """train_tokens_per_s: the units (tokens, or co-occurrence entries) of the epochs run."""
    seen = units_seen(units_per_epoch, fitted)
    return {"train_tokens_per_s": round(seen / max(fitted.seconds, 1e-9), 1)}


def as_array(vectors: Any) -> np.ndarray:
    """A model's embeddings (a tensor or an array) as a float32 array on the CPU."""
    if isinstance(vectors, np.ndarray):
        return vectors
    return vectors.detach().float().cpu().numpy()


def save_vectors(data: WordData, model: Any, folder) -> None:
    """vectors.txt: the word2vec text format, loadable by gensim and the original tools."""
    from nlpzoo.evaluation.vectors import write_word2vec_text

    write_word2vec_text(folder / "vectors.txt", data.vocab.words, as_array(model.embeddings()))


def score_vectors(run: Run, model: Any, metrics: dict) -> dict[str, Callable[[Path], None]]:
    """The word-vector protocol on `model.embeddings()`: adds its metrics to `metrics`; returns
    the writers of eval/RUN/neighbours.json (the nearest neighbours of the probe words) and
    eval/RUN/analogies.json (params `evaluation.analogies` answered by 3CosAdd and 3CosMul)."""
    from nlpzoo.evaluation.analogy import answer_questions, evaluate_analogies
    from nlpzoo.evaluation.similarity import evaluate_similarity
    from nlpzoo.evaluation.vectors import nearest_neighbours

    ev = build(EvaluationConfig, run.params.get("evaluation"), "evaluation")
    raw = run.layout.eval_sets
    for name in EVAL_SETS:
        if not (raw / name).is_file():
            raise DataError(f"evaluation set not found: {raw / name} (run `dvc repro corpus@eval`)")
    words = Vocab.load(run.data_dir / "vocab.txt").words
    vectors = np.asarray(as_array(model.embeddings()), dtype=np.float32)  # on the CPU
    analogy = evaluate_analogies(
        words, vectors, raw / "questions-words.txt", restrict_vocab=ev.restrict_vocab
    )
    metrics.update({k: v for k, v in analogy.items() if not isinstance(v, dict)})
    metrics.update(evaluate_similarity(words, vectors, raw / "wordsim353.tsv", "ws353"))
    metrics.update(evaluate_similarity(words, vectors, raw / "simlex999.txt", "simlex"))
    neighbours = nearest_neighbours(words, vectors, ev.probes, k=ev.neighbours)
    analogies = answer_questions(words, vectors, ev.analogies, ev.restrict_vocab)
    return {
        "neighbours.json": lambda path: atomic_write_json(path, neighbours),
        "analogies.json": lambda path: atomic_write_json(path, analogies),
    }
