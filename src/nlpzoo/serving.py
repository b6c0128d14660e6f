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

Every request is bounded (`nlpzoo.use.limits`; docs/design.md §7 has the table): at most 64
lines and 1 MiB, 2,000 words a prompt or scored line, 200 pieces a source line, beam 16, 100,000
decoding steps, 1,000 new tokens a prompt and 2,000 a request, k 100, checked before any work;
30 seconds of work, after which the decoding stops between two steps; 4 requests answered at
once, one more refused at once. Each is settable when the server starts, by an environment
variable (`NLPZOO_MAX_BEAM=8 mlflow models serve ...`) or the model config
(`model_config={"max_beam": 8}`).

A bad request (not a list of strings, an empty line, a text that is not Unicode, an unknown
param or one of the wrong type or out of the commands' range, a request over a limit or past
its time, a body that is not JSON) is one clear error, `BadRequest`: the server answers HTTP 400
with `{"error_code": "INVALID_PARAMETER_VALUE", "message": "<one line>"}`, never the request
itself; a request while the server is answering as many as it may is HTTP 429 (`busy`, too
many requests: retry later); a failure of the model itself is HTTP 500 with one line, its
traceback in the server's log only.
The signature names the params and not the input: with an input schema of strings MLflow would
turn any JSON value into a string (3 into "3", null into "None") before the model could refuse
it, so the model checks the input itself. MLflow checks the params against the signature before
the model sees them, dropping an unknown one with a warning and answering a wrong type with the
whole request over several lines, and turns `["a", 3]` into `["a", "3"]`; so the model reads
a JSON body itself and wraps MLflow's check of the params with its own, run first, and makes
MLflow's own refusals one line (`_guard_mlflow`).
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import mlflow.models
import mlflow.pyfunc
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    RESOURCE_EXHAUSTED,
)

from nlpzoo.taskinfo import task_info

log = logging.getLogger(__name__)


def default_params(config: dict, family: Any) -> dict[str, Any]:
    """The params of the run's signature, with the defaults the commands use: the task's
    (`TaskInfo.defaults`), and the run's own setting (its config.json, else its family's
    default) for a param the task gives none (a translation's beam size and length penalty)."""
    info = task_info(family.task)
    run_config = config.get("config", {})
    out = {}
    for name, kind in info.params.items():
        if name in info.defaults:
            out[name] = info.defaults[name]
        else:
            out[name] = kind(run_config.get(name, getattr(family.config, name)))
    return out


def input_example(folder: Path, family: Any) -> list[str]:
    """The example logged with the model (MLflow runs it once): the task's (a German sentence
    for a translation run), else the most frequent word of the run's vocabulary."""
    example = task_info(family.task).example
    if example:
        return [example]
    from nlpzoo.data.vocab import SPECIALS

    words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    word = next(w.split("\t")[0] for w in words if w and w.split("\t")[0] not in SPECIALS)
    return [word]


class BadRequest(MlflowException):
    """A request the run does not answer, as the scoring server returns it: HTTP 400 (the status
    of its error code otherwise: 429 busy, 500 the model's own failure) and the one-line
    message. The server would prefix the message with the request's whole data, over many
    lines; `serialize_as_json` is what it sends."""

    def __init__(self, message: str, error_code: int = INVALID_PARAMETER_VALUE) -> None:
        super().__init__(message, error_code=error_code)
        self.line = " ".join(message.split())

    def serialize_as_json(self) -> str:
        return json.dumps({"error_code": self.error_code, "message": self.line})


class RunModel(mlflow.pyfunc.PythonModel):
    """A trained run answering lists of strings (the module docstring says how)."""

    def load_context(self, context: Any) -> None:
        from nlpzoo.use.answers import Answerer
        from nlpzoo.use.limits import serving_limits

        limits = serving_limits(config=getattr(context, "model_config", None))
        self.answerer = Answerer.open(Path(context.artifacts["run"]), limits)
        self.answerer.preload()
        self.slots = threading.BoundedSemaphore(limits.concurrent or 1)
        _guard_mlflow(self)

    # no type hints: MLflow would infer the signature from them and drop its params
    def predict(self, context, model_input, params=None):
        from nlpzoo.use.limits import variable

        if not self.slots.acquire(blocking=False):
            concurrent = self.answerer.limits.concurrent
            raise BadRequest(
                f"busy: the server is answering {concurrent} requests, as many as it may at "
                f"once ({variable('concurrent')}); try again shortly",
                RESOURCE_EXHAUSTED,
            )
        try:
            return self._answer(model_input, params)
        finally:
            self.slots.release()

    def _answer(self, model_input: Any, params: dict | None) -> Any:
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

    def check_params(self, params: Any) -> None:
        """A request's params checked as `answer` checks them (names and types), before MLflow
        fills in the defaults and drops unknown names; a `BadRequest` otherwise."""
        from nlpzoo.use.answers import check_params
        from nlpzoo.use.text import UseError

        try:
            check_params(params, self.answerer.run.family.task)
        except UseError as e:
            raise BadRequest(str(e)) from None


def _guard_mlflow(model: RunModel) -> None:
    """Wrap two functions of MLflow, once in a process, so that a request reaches the model's
    own checks first and MLflow's refusals are one line without the request:

    `mlflow.pyfunc._enforce_params_schema`  for a params schema of the names of a loaded
        RunModel's task, that model's `check_params` runs first, and MLflow's own refusal
        becomes one BadRequest line; any other schema is checked by MLflow alone.
    `mlflow.pyfunc.scoring_server.invocations`  for a RunModel served, a body of more than its
        `request_bytes` is refused before it is read; a JSON body is read here (`_read_json`:
        not JSON, not UTF-8, not an object, no `inputs`, a line that is no string are one
        BadRequest line each) and MLflow is given the object; MLflow's own refusals become
        one BadRequest line, the request left out, and so does a body MLflow fails to read
        (a table it cannot convert), not a server error.

    Functions MLflow no longer has are left alone (the model then answers as MLflow does)."""
    import mlflow.pyfunc

    from nlpzoo.use.answers import PARAMS

    try:
        from mlflow.pyfunc import scoring_server
    except ImportError:  # MLflow without its server's requirements: nothing served here
        scoring_server = None

    names = frozenset(PARAMS[model.answerer.run.family.task])
    enforce = getattr(mlflow.pyfunc, "_enforce_params_schema", None)
    if enforce is not None:
        if not hasattr(enforce, "nlpzoo_models"):
            enforce = _checked_params(enforce)
            mlflow.pyfunc._enforce_params_schema = enforce
        enforce.nlpzoo_models[names] = model
    invocations = getattr(scoring_server, "invocations", None) if scoring_server else None
    if invocations is not None and not hasattr(invocations, "nlpzoo_guarded"):
        scoring_server.invocations = _one_line_refusals(invocations)


def _checked_params(enforce: Any) -> Any:
    def checked(params, schema, *args, **kwargs):
        names = frozenset(p.name for p in schema.params) if schema is not None else None
        model = checked.nlpzoo_models.get(names)
        if model is None:
            return enforce(params, schema, *args, **kwargs)
        model.check_params(params if params is not None else {})
        try:
            return enforce(params, schema, *args, **kwargs)
        except MlflowException as e:
            raise BadRequest(f"params: {_first_line(e.message)}") from None

    checked.nlpzoo_models = {}
    return checked


def _one_line_refusals(invocations: Any) -> Any:
    def guarded(data, content_type, model, *args, **kwargs):
        ours = _run_model(model)
        if ours is None:
            return invocations(data, content_type, model, *args, **kwargs)
        limit = ours.answerer.limits.request_bytes
        if limit is not None and len(data) > limit:
            from nlpzoo.use.limits import variable

            raise BadRequest(
                f"request body: at most {limit:,} bytes ({variable('request_bytes')}), got "
                f"{len(data):,}; split it"
            )
        if not content_type:
            raise BadRequest("the request has no Content-Type: send application/json")
        mime, *options = (part.strip().lower() for part in content_type.split(";"))
        if mime == "application/json" and set(options) <= {"charset=utf-8"}:
            data = _read_json(data)  # read once, here; MLflow takes the object as it is
        try:
            return invocations(data, content_type, model, *args, **kwargs)
        except BadRequest:
            raise
        except MlflowException as e:
            if hasattr(e, "line"):  # another load's BadRequest: one line already
                raise
            from mlflow.protos.databricks_pb2 import ErrorCode

            status = e.get_http_status_code()
            code = INVALID_PARAMETER_VALUE if status == 400 else ErrorCode.Value(e.error_code)
            raise BadRequest(_first_line(e.message), code) from None
        except Exception as e:  # MLflow's reading of a body it could not make sense of
            log.warning("a request body MLflow could not read", exc_info=True)
            raise BadRequest(
                f"the request could not be read ({type(e).__name__}: {_first_line(str(e))})"
            ) from None

    guarded.nlpzoo_guarded = True
    return guarded


def _read_json(data: Any) -> dict:
    """A JSON request body as the object it holds, its lines checked to be strings before
    MLflow makes one array of them (where `["a", 3]` becomes `["a", "3"]`); one BadRequest
    line otherwise, the body left out."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError is a ValueError
        raise BadRequest(_body_problem(data)) from None
    except RecursionError:  # nested deeper than Python reads
        raise BadRequest("the request body is nested too deeply to be read") from None
    if not isinstance(doc, dict):
        raise BadRequest(
            'the request body is a JSON object, {"inputs": [...], "params": {...}}, got '
            f"{_json_type(doc)}"
        )
    formats = ("inputs", "instances", "dataframe_split", "dataframe_records")
    if not any(key in doc for key in formats):
        raise BadRequest(
            'the request body has no "inputs": {"inputs": ["a line", ...], "params": {...}}'
        )
    for key in ("inputs", "instances"):
        if isinstance(doc.get(key), list):
            for i, line in enumerate(doc[key]):
                if not isinstance(line, str):
                    raise BadRequest(f"input {i} is {type(line).__name__}, not a string")
    return doc


def _json_type(value: Any) -> str:
    """The name of a JSON value's type."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else "?")


def _run_model(model: Any) -> RunModel | None:
    """The RunModel a served pyfunc model wraps (any load's copy of the class), else None."""
    try:
        inner = model.unwrap_python_model()
    except Exception:
        return None
    return inner if hasattr(inner, "answerer") and hasattr(inner, "check_params") else None


def _body_problem(data: Any) -> str:
    """Why a request body is no JSON text, in one line without the body."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            return f"the request body is not UTF-8 text (byte {e.start}: {data[e.start]:#04x})"
    try:
        json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as e:
        return f"the request body is not JSON ({e.msg}: line {e.lineno}, column {e.colno})"
    except (ValueError, RecursionError):
        pass
    return "the request body is not JSON"


def _first_line(message: str) -> str:
    """MLflow's message without the request it quotes: the part after "Error: " when the
    server prefixed the data, then its first line, at most 300 characters."""
    if message.startswith("Failed to predict data") and "\nError: " in message:
        message = message.split("\nError: ", 1)[1]
    lines = message.strip().splitlines()
    line = " ".join(lines[0].split()) if lines else "no detail"
    return line if len(line) <= 300 else f"{line[:297]}..."


# models from code: MLflow loads a run's model by running this file (nothing is unpickled); on
# an ordinary import this only names the model MLflow would load
mlflow.models.set_model(RunModel())
