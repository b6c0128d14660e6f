"""A trained run as an MLflow model that takes text and gives text (`mlflow.pyfunc`).

`RunModel` is what the register stage (`nlpzoo.registry`) logs: its one artifact, `run`, is the
run's folder as the commands read it (model.pt or model.npz, config.json, train_stats.json, the
vocabulary or SentencePiece model), and the nlpzoo package travels with it (`code_paths`), so
that `mlflow.pyfunc.load_model("models:/nlpzoo-RUN@champion")` and `mlflow models serve` need no
checkout. The input is a list of strings; what each is read as depends on the run's task and
the `mode` param:

    translation     source sentences -> their translations (params: beam_size, length_penalty;
                    the run's own settings by default)
    language model  mode "generate" (default): prompts -> continuations (tokens, temperature,
                    top_k, seed); mode "score": lines -> {log_prob, tokens, ppl} each, every
                    line scored on its own (`score --separate`)
    word vectors    mode "neighbours" (default): words -> their k nearest neighbours, each
                    [word, cosine]; mode "analogy": "a b c" -> the k best d of a : b :: c : d
                    (the language models' embeddings answer these too)

The answers are those of `python -m nlpzoo translate/generate/score/neighbours/analogy` for the
same run and settings: both call the same functions (`nlpzoo.use.answers`). A bad request (not
a list of strings, an empty line, a sentence past the model's positions, more lines than
`nlpzoo.use.answers.MAX_INPUTS`) is one clear error (`UseError`), which the server returns as
its message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.models
import mlflow.pyfunc


def default_params(config: dict, family: Any) -> dict[str, Any]:
    """The params of the run's signature, with the defaults the commands use."""
    if family.task == "mt":
        run_config = config.get("config", {})
        return {
            "beam_size": int(run_config.get("beam_size", 5)),
            "length_penalty": float(run_config.get("length_penalty", 0.0)),
        }
    if family.task == "lm":
        return {
            "mode": "generate",
            "tokens": 20,
            "temperature": 1.0,
            "top_k": 0,
            "seed": 0,
            "k": 10,
        }
    return {"mode": "neighbours", "k": 10}


def input_example(folder: Path, family: Any) -> list[str]:
    """The example logged with the model (MLflow runs it once): a German sentence for a
    translation run, else the most frequent word of the run's vocabulary."""
    if family.task == "mt":
        return ["Ein Hund läuft über die Wiese."]
    from nlpzoo.data.vocab import SPECIALS

    words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    word = next(w.split("\t")[0] for w in words if w and w.split("\t")[0] not in SPECIALS)
    return [word]


class RunModel(mlflow.pyfunc.PythonModel):
    """A trained run answering lists of strings (the module docstring says how)."""

    def load_context(self, context: Any) -> None:
        from nlpzoo.use.answers import Answerer

        self.answerer = Answerer.open(Path(context.artifacts["run"]))

    # no type hints: MLflow would infer the signature from them and drop its params
    def predict(self, context, model_input, params=None):
        return self.answerer.answer(model_input, params or {})


# models from code: MLflow loads a run's model by running this file (nothing is unpickled); on
# an ordinary import this only names the model MLflow would load
mlflow.models.set_model(RunModel())
