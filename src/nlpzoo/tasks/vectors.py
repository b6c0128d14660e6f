"""Word vectors (task `vectors`): trained on the token stream of `vocab/lm` (input `pairs`:
word2vec) or on the co-occurrence entries of `cooccur` (input `cooccur`: GloVe, PPMI-SVD), scored
by the word-vector protocol only (no held-out objective)."""

from __future__ import annotations

from typing import Any

from nlpzoo.errors import DataError
from nlpzoo.tasks import Fitted, Run, Scores, Task
from nlpzoo.tasks import words as W


class VectorsTask(Task):
    validates = False  # the last weights are the result

    def load(self, run: Run) -> W.WordData:
        vocab = W.load_vocab(run)
        if self.family.input != "cooccur":
            return W.word_data(vocab, W.load_streams(run, ("train",)))
        from nlpzoo.data.cooccur import load_cooccurrences

        path = run.data_dir / "cooccur.npz"
        rows, cols, vals, vocab_size = load_cooccurrences(path)
        if vocab_size != len(vocab):
            raise DataError(
                f"run '{run.name}': {path} is for {vocab_size} words but "
                f"{run.data_dir / 'vocab.txt'} has {len(vocab)}; rerun the cooccur stage"
            )
        if vals.size == 0:
            raise DataError(f"run '{run.name}': the co-occurrence matrix is empty")
        return W.word_data(vocab, {"rows": rows, "cols": cols, "vals": vals})

    def fingerprint(self, data: W.WordData) -> tuple[dict, list]:
        return W.fingerprint(data)

    def datamodule(self, run: Run, data: W.WordData) -> Any:
        from nlpzoo.data.lm import TrainOnlyDataModule

        cfg, seed, workers = run.config, run.seed, run.trainer.num_workers
        arrays = data.arrays
        if self.family.input == "cooccur":
            from nlpzoo.data.glove import cooccur_dataloader

            def make(rank: int, world: int):
                rows, cols, vals = arrays["rows"], arrays["cols"], arrays["vals"]
                return cooccur_dataloader(
                    rows, cols, vals, cfg.batch_size, rank, world, seed, workers, cfg.backend
                )

        else:
            from nlpzoo.data.word2vec import word2vec_dataloader

            def make(rank: int, world: int):
                return word2vec_dataloader(
                    cfg, arrays["train"], data.counts, rank, world, seed, workers
                )

        return TrainOnlyDataModule(make)

    def fit_arrays(self, data: W.WordData) -> tuple:
        return data.arrays["rows"], data.arrays["cols"], data.arrays["vals"]

    def fit_stats(self, data: W.WordData, fitted: Fitted) -> dict:
        # what one epoch runs through: the training tokens, or the non-zero entries
        units = data.arrays["vals"] if self.family.input == "cooccur" else data.arrays["train"]
        return W.throughput(int(units.size), fitted)

    def save(self, run: Run, data: W.WordData, model: Any, folder) -> None:
        W.save_vectors(data, model, folder)

    def evaluate(self, run: Run, model: Any) -> Scores:
        metrics: dict[str, Any] = {}
        files = W.score_vectors(run, model, metrics)
        return Scores(metrics, files=files, artifacts=tuple(files))


TASK = VectorsTask
