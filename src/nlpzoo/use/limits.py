"""What one request may ask of a trained run: the budgets checked before any work, and the
deadline checked while it works.

`Limits` is the one table. `SERVING` holds the MLflow model's defaults (`nlpzoo.serving`), each
settable when the server starts by an environment variable (`NLPZOO_MAX_BEAM=8`) or a key of the
model config (`mlflow.pyfunc.load_model(uri, model_config={"max_beam": 8})`, which wins):
`serving_limits`. `COMMAND_LINE` holds the `python -m nlpzoo` commands' larger ones: a command
reads a whole file (a test split to translate or score) and stops at Ctrl-C, so it has no bound
on lines, bytes, work or time, only on what would fill memory or run for hours by mistake
(`--tokens 10000000`). None: no limit of its own. docs/design.md §7 has the table and why each
default.

A request over a budget is refused with one line naming the limit and, when serving, its
variable; a request that runs past its time is stopped between two steps of its decoding
(`Deadline`, `OverBudget`).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from nlpzoo.use.text import UseError


@dataclass(frozen=True)
class Limits:
    """The budgets of one request (one command run), None for none."""

    inputs: int | None = 64  # lines of one request: prompts, sentences, words, questions
    request_bytes: int | None = 1_048_576  # a request's body (in process: its lines' UTF-8)
    prompt_tokens: int | None = 2_000  # words of one prompt, or of one line to score
    source_pieces: int | None = 200  # SentencePiece pieces of one line to translate
    beam: int | None = 16  # beam size
    work: int | None = 100_000  # Σ over the lines of beam × longest translation (pieces)
    tokens: int | None = 1_000  # new tokens per prompt (per sample on the command line)
    samples: int | None = 1  # samples per prompt (the MLflow model draws one)
    new_tokens: int | None = 2_000  # new tokens of one request, every prompt and sample
    k: int | None = 100  # neighbours of a word, answers of an analogy
    seconds: float | None = 30.0  # time from the start of the work to the answer
    concurrent: int | None = 4  # requests answered at once; one more is refused, not queued
    variables: bool = True  # messages name the environment variable that sets a limit


SERVING = Limits()
COMMAND_LINE = Limits(
    inputs=None,
    request_bytes=None,
    prompt_tokens=100_000,
    source_pieces=1_000,
    beam=100,  # wider beams cost memory in proportion and do not translate better
    work=None,
    tokens=100_000,
    samples=10_000,
    new_tokens=None,
    k=None,
    seconds=None,
    concurrent=None,
    variables=False,
)

# the limits a server may set: the environment variable, the model config key
SETTABLE = (
    "inputs",
    "request_bytes",
    "prompt_tokens",
    "source_pieces",
    "beam",
    "work",
    "tokens",
    "new_tokens",
    "k",
    "seconds",
    "concurrent",
)


def variable(name: str) -> str:
    """The environment variable of limit `name`: NLPZOO_MAX_BEAM, NLPZOO_REQUEST_SECONDS."""
    return "NLPZOO_REQUEST_SECONDS" if name == "seconds" else f"NLPZOO_MAX_{name.upper()}"


def config_key(name: str) -> str:
    """The model config key of limit `name`: max_beam, request_seconds."""
    return variable(name).removeprefix("NLPZOO_").lower()


def serving_limits(
    environ: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None
) -> Limits:
    """`SERVING`, each limit replaced by its environment variable, then by its model config key;
    one clear error for a value that is not a positive number or a key that is no limit."""
    environ = os.environ if environ is None else environ
    keys = {config_key(name): name for name in SETTABLE}
    changes: dict[str, Any] = {}
    for name in SETTABLE:
        if environ.get(variable(name), "").strip():
            changes[name] = _positive(name, environ[variable(name)], variable(name))
    for key, value in (config or {}).items():
        if key not in keys:
            from nlpzoo.config import closest

            hint = closest(str(key), keys)
            raise UseError(
                f"model config key {key!r} is no limit"
                + (f"; did you mean {hint!r}?" if hint else f" (limits: {', '.join(keys)})")
            )
        changes[keys[key]] = _positive(keys[key], value, f"model config key {key!r}")
    return replace(SERVING, **changes)


def _positive(name: str, value: Any, where: str) -> int | float:
    """A limit's value: a whole number >= 1 (seconds: any number > 0)."""
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        with contextlib.suppress(ValueError):
            value = int(text) if name != "seconds" else float(text)
    whole = isinstance(value, int) and not isinstance(value, bool)
    number = whole or (isinstance(value, float) and name == "seconds" and math.isfinite(value))
    if not number or value <= 0:
        what = "a number of seconds > 0" if name == "seconds" else "a whole number >= 1"
        raise UseError(f"{where} must be {what}, got {value!r}")
    return value


def refuse(limits: Limits, name: str, what: str, got: int, advice: str) -> None:
    """One line when `got` is over limit `name` (nothing when it has none): `what` is what the
    limit counts ("lines per request"), `advice` what to ask instead ("split it")."""
    limit = getattr(limits, name)
    if limit is None or got <= limit:
        return
    where = f" ({variable(name)})" if limits.variables and name in SETTABLE else ""
    raise OverBudget(f"{what}: at most {limit:,}{where}, got {got:,}; {advice}")


class OverBudget(UseError):
    """A request over one of its limits, or one that ran past its time."""


class Deadline:
    """A request's time budget, called between the steps of its work: from the
    `seconds`-th second after it was made, the call raises `OverBudget`. `clock`: the time in
    seconds (time.monotonic by default; a test passes its own); `what`: words after the
    seconds in the message (the variable that sets them)."""

    def __init__(
        self, seconds: float | None, clock: Callable[[], float] | None = None, what: str = ""
    ) -> None:
        self.seconds, self.clock, self.what = seconds, clock or time.monotonic, what
        self.end = None if seconds is None else self.clock() + seconds

    def __call__(self) -> None:
        if self.end is not None and self.clock() >= self.end:
            raise OverBudget(
                f"the request ran past its {self.seconds:g} s{self.what} and was stopped: ask "
                "for less at once (fewer lines, fewer tokens, a smaller beam)"
            )


def deadline(limits: Limits, clock: Callable[[], float] | None = None) -> Deadline | None:
    """The deadline of a request that starts now under `limits` (None: no limit)."""
    if limits.seconds is None:
        return None
    where = f" ({variable('seconds')})" if limits.variables else ""
    return Deadline(limits.seconds, clock, where)
