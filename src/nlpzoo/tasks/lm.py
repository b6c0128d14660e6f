"""Language models (task `lm`): trained on the token streams of `vocab/lm`, scored by perplexity.

Every family is scored on the identical streams (docs/design.md §4): the per-token
log-probabilities of the valid and test splits go to `eval/RUN/logprobs.npz` (the mixtures reuse
them without rescoring), their perplexities to the metrics; a model with input embeddings
(`Family.vectors`) also writes `vectors.txt` and goes through the word-vector protocol. Each
run also writes `eval/RUN/samples.json`: text it generates from params' `evaluation.sample_prompt`
(`nlpzoo.generation`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nlpzoo.config import build
from nlpzoo.data.vocab import load_stream
from nlpzoo.errors import DataError
from nlpzoo.evaluation.perplexity import perplexity
from nlpzoo.io import atomic_write_json
from nlpzoo.lm_inputs import LMInput, lm_input
from nlpzoo.params_eval import EvaluationConfig
from nlpzoo.tasks import Fitted, Run, Scores, Task
from nlpzoo.tasks import words as W

SPLITS = ("valid", "test")


class LMTask(Task):
    def load(self, run: Run) -> W.WordData:
        vocab = W.load_vocab(run)
        data = W.word_data(vocab, W.load_streams(run, ("train", "valid")))
        if self.family.neural:
            kind = lm_input(self.family)
            context, rows = kind.context_of(run.config)
            for split in ("train", "valid"):
                _check_context(data.arrays[split], context, split, run.name, rows, kind)
        return data

    def fingerprint(self, data: W.WordData) -> tuple[dict, list]:
        return W.fingerprint(data)

    def datamodule(self, run: Run, data: W.WordData) -> Any:
        from nlpzoo.data.lm import LMDataModule

        return LMDataModule(
            self.family,
            run.config,
            data.arrays["train"],
            data.arrays["valid"],
            num_workers=run.trainer.num_workers,
            seed=run.seed,
        )

    def fit_arrays(self, data: W.WordData) -> tuple:
        return (data.arrays["train"],)

    def validation_ppl(self, model: Any, data: W.WordData) -> float:
        return perplexity(model.log_probs(data.arrays["valid"]))

    def fit_stats(self, data: W.WordData, fitted: Fitted) -> dict:
        """train_tokens (every epoch's, the report's compute axis) and train_tokens_per_s."""
        tokens = int(data.arrays["train"].size)
        return {"train_tokens": W.units_seen(tokens, fitted), **W.throughput(tokens, fitted)}

    def save(self, run: Run, data: W.WordData, model: Any, folder) -> None:
        if self.family.vectors:
            W.save_vectors(data, model, folder)

    def log_probs(self, model: Any, stream: np.ndarray, cfg: Any) -> np.ndarray:
        """log p of every token of `stream`, by the input kind of the family (`lm_inputs`)."""
        return lm_input(self.family).log_probs(model, stream, cfg)

    def evaluate(self, run: Run, model: Any) -> Scores:
        metrics: dict[str, Any] = {}
        logprobs = {}
        for split in SPLITS:
            stream = load_stream(run.data_dir, split)
            logprobs[split] = self.log_probs(model, stream, run.config)
            metrics[f"{split}_ppl"] = round(perplexity(logprobs[split]), 4)
            metrics[f"{split}_tokens"] = int(stream.size)

        def write_logprobs(path):
            arrays = {k: v.astype(np.float32) for k, v in logprobs.items()}
            np.savez_compressed(path, **arrays)

        samples = self.samples(run, model)
        scores = Scores(
            metrics,
            files={
                "logprobs.npz": write_logprobs,
                "samples.json": lambda path: atomic_write_json(path, samples),
            },
            artifacts=("samples.json",),
        )
        if self.family.vectors:
            files = W.score_vectors(run, model, metrics)
            scores.files.update(files)
            scores.artifacts += tuple(files)
        return scores

    def samples(self, run: Run, model: Any) -> dict:
        """eval/RUN/samples.json: text the model writes after params' `evaluation.sample_prompt`,
        the same prompt, length, seed and sampling for every run (the report's side by side)."""
        from nlpzoo.generation import samples_record

        ev = build(EvaluationConfig, run.params.get("evaluation"), "evaluation")
        return samples_record(
            self.family,
            model,
            W.load_vocab(run),
            ev.sample_prompt,
            ev.sample_tokens,
            temperature=ev.sample_temperature,
            top_k=ev.sample_top_k,
            seed=ev.sample_seed,
            samples=ev.sample_count,
        )


def _check_context(
    stream: np.ndarray, context: int, split: str, run: str, rows: int, kind: LMInput
) -> None:
    """A split must hold one example: `context` + 1 tokens, in each of the `rows` parallel rows
    a recurrent model cuts the stream into (its batch_size)."""
    if stream.size < rows * (context + 1):
        need = f"{rows} rows x ({context} + 1)" if rows > 1 else f"{context} + 1"
        smaller = f"{kind.rows} or {kind.context}" if rows > 1 else "context"
        raise DataError(
            f"run '{run}': the {split} split has {stream.size} tokens, fewer than the model's "
            f"context of {need} tokens; use a larger split or a smaller {smaller}"
        )


TASK = LMTask
