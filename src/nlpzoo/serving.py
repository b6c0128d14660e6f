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
same run and settings: both call the same functions (`nlpzoo.use.answers`).

    mlflow models serve -m models:/nlpzoo-RUN@champion --env-manager local --port 5001
    curl -s 127.0.0.1:5001/invocations -H 'Content-Type: application/json' \
         -d '{"inputs": ["the jury said"], "params": {"tokens": 10, "seed": 1}}'

A bad request (not a list of strings, an empty line, a sentence past the model's positions,
more lines than `nlpzoo.use.answers.MAX_INPUTS`, a param out of the commands' range) is one
clear error, `BadRequest`: the server answers HTTP 400 with `{"error_code": ..., "message":
"<one line>"}`; a failure of the model itself is HTTP 500 with one line, its traceback in the
server's log only. The signature names the params and not the input: with an input schema of
strings MLflow would turn any JSON value into a string (3 into "3", null into "None") before
the model could refuse it, so the model checks the input itself.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import mlflow.models
import mlflow.pyfunc
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE

log = logging.getLogger(__name__)


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


class BadRequest(MlflowException):
    """A request the run does not answer, as the scoring server returns it: HTTP 400 (500 for
    `INTERNAL_ERROR`) and the one-line message. The server would prefix the message with the
    request's whole data, over many lines; `serialize_as_json` is what it sends."""

    def __init__(self, message: str, error_code: int = INVALID_PARAMETER_VALUE) -> None:
        super().__init__(message, error_code=error_code)
        self.line = " ".join(message.split())

    def serialize_as_json(self) -> str:
        return json.dumps({"error_code": self.error_code, "message": self.line})


class RunModel(mlflow.pyfunc.PythonModel):
    """A trained run answering lists of strings (the module docstring says how)."""

    def load_context(self, context: Any) -> None:
        from nlpzoo.use.answers import Answerer

        self.answerer = Answerer.open(Path(context.artifacts["run"]))
        self.answerer.preload()

    # no type hints: MLflow would infer the signature from them and drop its params
    def predict(self, context, model_input, params=None):
        from nlpzoo.use.text import UseError

        try:
            return self.answerer.answer(model_input, params or {})
        except UseError as e:
            raise BadRequest(str(e)) from None
        except Exception as e:  # the model's own failure: one line out, the traceback logged
            log.exception("run '%s' failed on a request", self.answerer.run.name)
            text = " ".join(str(e).split())[:300] or "no detail"
            raise BadRequest(
                f"run '{self.answerer.run.name}' failed on this request ({type(e).__name__}: "
                f"{text}); the server's log has the traceback",
                INTERNAL_ERROR,
            ) from e


# models from code: MLflow loads a run's model by running this file (nothing is unpickled); on
# an ordinary import this only names the model MLflow would load
mlflow.models.set_model(RunModel())
