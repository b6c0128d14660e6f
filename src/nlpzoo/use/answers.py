"""What a trained run answers, computed once for the commands (`nlpzoo.use.commands`) and for
the MLflow model (`nlpzoo.serving`): translations, continuations, scores, neighbours and
analogies, with the run's files loaded once and checked by the hardened loaders.

Every answer is bounded by the `Limits` it is made with (`nlpzoo.use.limits`: the commands'
`COMMAND_LINE` by default, the MLflow model's `serving_limits`): a request over one of them is
refused before any work, with one line, and a request made with a deadline stops between two
steps of its decoding once it has run past its time."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from nlpzoo.taskinfo import TASK_INFO, task_info
from nlpzoo.use.limits import COMMAND_LINE, Limits, OverBudget, deadline, refuse, variable
from nlpzoo.use.run import (
    TrainedRun,
    load_codec,
    load_config,
    load_model,
    load_vectors,
    load_vocab,
    lookup,
    need_lm,
    need_mt,
    need_vectors,
    project_params,
)
from nlpzoo.use.text import UseError

MIN_TEMPERATURE = 1e-6  # below it the scaled log-probabilities leave float range: use 0

# the params of the MLflow model, by the run's task, and the type each takes
PARAMS: dict[str, Mapping[str, type]] = {task: info.params for task, info in TASK_INFO.items()}
# α of lp(Y) = ((5 + |Y|) / 6)^α: at 10 a 300-piece translation's lp is about 1e17; at 5,000
# it leaves float range and every score is lost
MAX_LENGTH_PENALTY = 10.0
Check = Callable[[], None]  # called between steps; raises to stop the work


class Answerer:
    """A trained run's answers within `limits`; its model, vocabulary, SentencePiece model and
    vectors are loaded on first use."""

    def __init__(self, run: TrainedRun, limits: Limits = COMMAND_LINE) -> None:
        self.run, self.limits = run, limits
        self._solvers: dict[int, Any] = {}

    @classmethod
    def open(cls, folder: Path, limits: Limits = COMMAND_LINE) -> Answerer:
        """The run whose files are in `folder` (an MLflow model's `run` artifact)."""
        config = load_config(folder, f"the run in {folder}")
        run = TrainedRun(str(config.get("run", folder.name)), folder, config, folder, True)
        return cls(run, limits)

    def preload(self) -> None:
        """Load now what the run answers with (the MLflow model does so when it is loaded: a
        server is ready when it answers /ping, and its first request waits for no load)."""
        task = self.run.family.task
        if task == "mt":
            _ = (self.model, self.codec)
        elif task == "lm":
            _ = (self.model, self.vocab)
        if task == "vectors" or self.run.family.vectors:
            _ = self.vectors

    @cached_property
    def model(self) -> Any:
        return load_model(self.run)

    @cached_property
    def vocab(self) -> Any:
        return load_vocab(self.run)

    @cached_property
    def codec(self) -> Any:
        return load_codec(self.run)

    @cached_property
    def vectors(self) -> tuple[list[str], Any]:
        return load_vectors(self.run)

    @cached_property
    def restrict_vocab(self) -> int:
        """The most frequent words the analogies search: params evaluation.restrict_vocab."""
        from nlpzoo.config import build
        from nlpzoo.params_eval import EvaluationConfig

        section = project_params(self.run.root).get("evaluation")
        return build(EvaluationConfig, section, "evaluation").restrict_vocab

    # ------------------------------------------------------------------ the answers

    def translate(
        self,
        lines: list[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        check: Check | None = None,
    ) -> list[str]:
        """`nlpzoo.tasks.mt.translate`: beam search as the evaluation decodes, the run's beam
        size and length penalty unless given. Every line is split into pieces and checked first
        (its length, the request's work), so that a line too long is refused before any is
        decoded; a line of no piece (blank, or nothing after SentencePiece's normalisation)
        translates to an empty line. `check` is called between the steps of the decoding."""
        from nlpzoo.evaluation.decoding import translate_batches

        need_mt(self.run, "translate")
        model, codec = self.model, self.codec
        if not lines:
            return []
        cfg = model.config
        beam = beam_size or cfg.beam_size
        refuse(self.limits, "beam", "beam size", beam, "a smaller beam")
        sources = codec.encode(lines)
        self._check_sources(lines, sources, beam)
        todo = [i for i, s in enumerate(sources) if len(s)]
        ids = translate_batches(
            model,
            [sources[i] for i in todo],
            32,
            beam,
            cfg.length_penalty if length_penalty is None else length_penalty,
            cfg.max_len_ratio,
            check=check,
        )
        out = [""] * len(lines)
        for i, text in zip(todo, codec.decode(ids) if ids else [], strict=True):
            out[i] = text
        return out

    def _check_sources(self, lines: list[str], sources: list, beam: int) -> None:
        """Each line at most the pieces the limits and the model's positions allow, and the
        request's decoding work (beam × longest translation, summed) within its budget."""
        from nlpzoo.evaluation.decoding import EXTRA

        cfg = self.model.config
        bounds = []  # (pieces, why): the request's budget, the model's positions
        if self.limits.source_pieces is not None:
            named = f" ({variable('source_pieces')})" if self.limits.variables else ""
            bounds.append((self.limits.source_pieces, f"a request's line may have{named}"))
        positions = longest_source(self.model)
        if positions is not None:
            table = f"max_positions {cfg.max_positions}, with room for the translation"
            bounds.append((positions, f"its positions take ({table})"))
        if bounds:
            most, why = min(bounds)
            for number, (line, ids) in enumerate(zip(lines, sources, strict=True), start=1):
                if len(ids) > most:
                    raise OverBudget(
                        f"run '{self.run.name}' cannot translate this input: line {number} "
                        f"({len(line.split()):,} words) is {len(ids):,} pieces, more than the "
                        f"{most:,} {why}: split long lines"
                    )
        steps = [math.ceil(cfg.max_len_ratio * len(s)) + EXTRA for s in sources if len(s)]
        work = beam * sum(steps)
        refuse(
            self.limits,
            "work",
            "decoding steps per request (lines × beam × longest translation)",
            work,
            "fewer or shorter lines, or a smaller beam_size",
        )

    def generate(
        self, prompt: str, tokens: int, check: Check | None = None, **settings: Any
    ) -> dict:
        """`nlpzoo.generation.samples_record` (settings: temperature, top_k, seed, samples,
        timing) within the limits: the prompt's length, the new tokens per sample and in all;
        `check` is called before each new token."""
        from nlpzoo.generation import samples_record

        need_lm(self.run, "generate")
        samples = settings.get("samples", 1)
        limits = self.limits
        refuse(limits, "prompt_tokens", "words of the prompt", len(prompt.split()), "shorten it")
        refuse(limits, "tokens", "new tokens per sample", tokens, "fewer tokens")
        refuse(limits, "samples", "samples", samples, "fewer samples")
        refuse(limits, "new_tokens", "new tokens in all", tokens * samples, "fewer tokens")
        vocab, model = self.vocab, self.model
        return samples_record(
            self.run.family, model, vocab, prompt, tokens, check=check, **settings
        )

    def score(
        self, lines: list[str], separate: bool, check: Check | None = None
    ) -> tuple[list[dict], dict, int]:
        """(a row per line that has a token, the total, how many words were read as <unk>):
        each line scored on its own (`separate`), or the lines as one text, as the evaluation
        reads a split. Each line has at most `prompt_tokens` words; `check` is called between
        lines scored on their own."""
        import numpy as np

        from nlpzoo.tasks import task_of

        need_lm(self.run, "score")
        for number, line in enumerate(lines, start=1):
            refuse(
                self.limits,
                "prompt_tokens",
                f"words of line {number}",
                len(line.split()),
                "split long lines",
            )
        vocab = self.vocab
        sentences = _sentences(lines, vocab)
        if not sentences:
            raise UseError("no sentences to score (the input has no non-empty line)")
        model = self.model
        task = task_of(self.run.family)
        if separate:
            scored = []
            for _, ids, _ in sentences:
                if check is not None:
                    check()
                scored.append(task.log_probs(model, np.asarray(ids), model.config))
        else:
            stream = np.concatenate([np.asarray(ids, dtype=np.int64) for _, ids, _ in sentences])
            every = task.log_probs(model, stream, model.config)  # (tokens,)
            ends = np.cumsum([len(ids) for _, ids, _ in sentences])
            scored = np.split(every, ends[:-1])
        rows = [
            _score_row(number, ids, unknown, lp, vocab)
            for (number, ids, unknown), lp in zip(sentences, scored, strict=True)
        ]
        log_prob = float(sum(np.sum(lp, dtype=np.float64) for lp in scored))
        tokens = sum(r["tokens"] for r in rows)
        total = {"lines": len(rows), "tokens": tokens, "log_prob": log_prob}
        total["ppl"] = math.exp(-log_prob / tokens)
        return rows, total, sum(len(r["unknown"]) for r in rows)

    def neighbours(self, words: list[str], k: int) -> dict[str, list[tuple[str, float]]]:
        """`nlpzoo.evaluation.vectors.nearest_neighbours` of each word (as the vocabulary
        spells it)."""
        from nlpzoo.evaluation.vectors import nearest_neighbours

        need_vectors(self.run, "neighbours")
        refuse(self.limits, "k", "neighbours per word (k)", k, "a smaller k")
        vocab_words, vectors = self.vectors
        probes = [lookup(self.run, vocab_words, w) for w in words]
        return nearest_neighbours(vocab_words, vectors, probes, k=k)

    def question(self, a: str, b: str, c: str, restrict: int | None = None) -> list[str]:
        """The analogy a : b :: c : ? as the vocabulary spells it, each word among the
        `restrict` most frequent the analogies search; a clear error otherwise."""
        need_vectors(self.run, "analogy")
        words, _ = self.vectors
        question = [lookup(self.run, words, w) for w in (a, b, c)]
        restrict, solver = self._solver(restrict)
        for w in question:
            if solver.position(w) is None:
                raise UseError(
                    f"word '{w}' is not among the {restrict:,} most frequent words the analogies "
                    "search (params evaluation.restrict_vocab; --restrict-vocab N)"
                )
        return question

    def analogy(
        self, a: str, b: str, c: str, k: int, method: str = "3cosadd", restrict: int | None = None
    ) -> tuple[list[str], list[tuple[str, float]]]:
        """(the question as the vocabulary spells it, the k best answers d of a : b :: c : d)
        by `nlpzoo.evaluation.analogy.Analogies`, among the `restrict` most frequent words
        (params evaluation.restrict_vocab by default)."""
        refuse(self.limits, "k", "answers per analogy (k)", k, "a smaller k")
        question = self.question(a, b, c, restrict)
        _, solver = self._solver(restrict)
        return question, solver.answers(*question, k=k, method=method)

    def _solver(self, restrict: int | None) -> tuple[int, Any]:
        """(the number of words searched, the `Analogies` over them), made once per number."""
        from nlpzoo.evaluation.analogy import Analogies

        if restrict is None:
            restrict = self.restrict_vocab
        if restrict not in self._solvers:
            words, vectors = self.vectors
            self._solvers[restrict] = Analogies(words, vectors, restrict_vocab=restrict)
        return restrict, self._solvers[restrict]

    # ------------------------------------------------------------------ one request

    def answer(self, inputs: Any, params: dict, check: Check | None = None) -> list:
        """The MLflow model's answer to a list of strings (`nlpzoo.serving` says what each is
        read as): one result per input, in order. The input, the params (their names, types
        and ranges) and the request's budgets are checked before any work; the work stops
        once it has run past the limits' seconds (a deadline from now, unless `check` is
        given)."""
        lines = request_lines(inputs, self.limits)
        family = self.run.family
        check_params(params, family.task)
        if check is None:
            check = deadline(self.limits)
        if family.task == "mt":
            beam = _int(params, "beam_size", 1)
            penalty = _float(params, "length_penalty")
            if penalty is not None and penalty > MAX_LENGTH_PENALTY:
                raise UseError(
                    f"param 'length_penalty' is at most {MAX_LENGTH_PENALTY:g}, got {penalty!r}"
                )
            return self.translate(lines, beam, penalty, check)
        # every param in its range, whatever the mode uses
        info = task_info(family.task)
        modes, default = info.modes, info.defaults
        mode = _or(params.get("mode"), default["mode"])
        if mode not in modes:
            raise UseError(
                f"unknown mode {_shown(mode)} for run '{self.run.name}' (modes: {', '.join(modes)})"
            )
        k = _or(_int(params, "k", 1), default["k"])
        temperature = _or(_float(params, "temperature"), default.get("temperature", 1.0))
        if 0 < temperature < MIN_TEMPERATURE:
            raise UseError(
                f"param 'temperature' is 0 (always the most probable) or at least "
                f"{MIN_TEMPERATURE:g}, got {temperature!r}"
            )
        settings = {
            "temperature": temperature,
            "top_k": _or(_int(params, "top_k", 0), default.get("top_k", 0)),
            "seed": _or(_int(params, "seed", 0), default.get("seed", 0)),
        }
        tokens = _or(_int(params, "tokens", 1), default.get("tokens", 0))
        if mode == "generate":
            limits = self.limits
            for number, prompt in enumerate(lines, start=1):
                what = f"words of prompt {number}"
                refuse(limits, "prompt_tokens", what, len(prompt.split()), "a shorter prompt")
            refuse(limits, "tokens", "param 'tokens'", tokens, "fewer tokens")
            refuse(
                limits,
                "new_tokens",
                "generated tokens per request (prompts × tokens)",
                tokens * len(lines),
                "fewer prompts or tokens",
            )
            return [
                self.generate(p, tokens, check, **settings)["samples"][0]["text"] for p in lines
            ]
        if mode == "score":
            rows, _, _ = self.score(lines, separate=True, check=check)
            return [{k: r[k] for k in ("text", "log_prob", "tokens", "ppl")} for r in rows]
        if mode == "neighbours":
            found = self.neighbours(lines, k)
            probes = [lookup(self.run, self.vectors[0], w) for w in lines]
            return [[[n, round(c, 6)] for n, c in found[w]] for w in probes]
        refuse(self.limits, "k", "answers per analogy (k)", k, "a smaller k")
        questions = []
        for line in lines:  # every question checked before any is answered
            words = line.split()
            if len(words) != 3:
                raise UseError(
                    f"an analogy is three words 'a b c' (a : b :: c : ?), got {_shown(line)}"
                )
            questions.append(self.question(*words))
        out = []
        for question in questions:
            if check is not None:
                check()
            _, answers = self.analogy(*question, k=k)
            out.append([[w, round(s, 6)] for w, s in answers])
        return out


def longest_source(model: Any) -> int | None:
    """The most pieces of a source line that a translation model with a positions table
    (`max_positions`) can translate: the source and its longest translation (`max_lengths`:
    ⌈max_len_ratio · n⌉ + `EXTRA` pieces) must fit the table, the two sides each their own in
    an encoder–decoder, one after the other (`<s> source <sep> target`) in a decoder-only
    model. None for a model without one (the recurrent families)."""
    from nlpzoo.data.vocab import SEP
    from nlpzoo.evaluation.decoding import EXTRA

    cfg = model.config
    table = getattr(cfg, "max_positions", None)
    if table is None:
        return None

    def fits(n: int) -> bool:
        out = math.ceil(cfg.max_len_ratio * n) + EXTRA  # the steps of the decoding
        if getattr(model, "START", None) == SEP:  # positions 0..n the prompt, then n+1..n+out
            return n + out <= table - 1
        return n <= table and out <= table

    n = 0
    while fits(n + 1):
        n += 1
    return n


def check_params(params: Any, task: str) -> None:
    """The params of a request: a mapping of the MLflow model's params (`PARAMS`), each of its
    type (null: the default); one clear error otherwise. Their ranges are `answer`'s to check."""
    if not isinstance(params, dict):
        raise UseError(
            f"the params are a JSON object of names and values, got {type(params).__name__}"
        )
    known = PARAMS[task]
    for key, value in params.items():
        if key not in known:
            from nlpzoo.config import closest

            hint = closest(str(key), known)
            raise UseError(
                f"unknown param {_shown(str(key))}"
                + (f"; did you mean {hint!r}?" if hint else "")
                + f" (params: {', '.join(known)})"
            )
        if value is None:
            continue
        kind = known[key]
        if kind is int and not _whole(value):
            raise UseError(f"param '{key}' is a whole number, got {_shown(value)}")
        if kind is float and (not _number(value) or not math.isfinite(value)):
            raise UseError(f"param '{key}' is a number, got {_shown(value)}")
        if kind is str and not isinstance(value, str):
            raise UseError(f"param '{key}' is a string, got {_shown(value)}")


def _whole(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _number(value: Any) -> bool:
    import numpy as np

    return _whole(value) or isinstance(value, (float, np.floating))


def _shown(value: Any) -> str:
    """A value as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def request_lines(inputs: Any, limits: Limits = COMMAND_LINE) -> list[str]:
    """An MLflow request's input as a list of non-empty strings of Unicode text, within the
    limits' number of lines and bytes; a clear error otherwise. A one-column table (MLflow's
    reading of a list) is its column."""
    if hasattr(inputs, "columns"):  # a pandas DataFrame
        if len(inputs.columns) != 1:
            raise UseError(
                f"the input is a list of strings (one column), got {len(inputs.columns)} columns"
            )
        inputs = inputs.iloc[:, 0].tolist()
    elif hasattr(inputs, "tolist"):  # a numpy array or pandas Series
        inputs = inputs.tolist()
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list):
        raise UseError(f"the input is a list of strings, got {type(inputs).__name__}")
    refuse(limits, "inputs", "lines per request", len(inputs), "split it")
    size = 0
    for i, line in enumerate(inputs):
        if not isinstance(line, str):
            raise UseError(f"input {i} is {type(line).__name__}, not a string")
        if not line.strip():
            raise UseError(f"input {i} is an empty string")
        try:
            size += len(line.encode("utf-8"))
        except UnicodeEncodeError as e:  # a lone surrogate: JSON's "\ud800"
            raise UseError(
                f"input {i} is not Unicode text (character {e.start}: a lone surrogate "
                f"{line[e.start]!r})"
            ) from None
    refuse(limits, "request_bytes", "bytes of input per request (UTF-8)", size, "split it")
    return inputs


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _int(params: dict, key: str, least: int | None) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not _whole(value):
        raise UseError(f"param '{key}' is a whole number, got {_shown(value)}")
    if least is not None and value < least:
        raise UseError(f"param '{key}' is at least {least}, got {value!r}")
    return int(value)


def _float(params: dict, key: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if not _number(value) or not math.isfinite(value):
        raise UseError(f"param '{key}' is a number, got {_shown(value)}")
    if value < 0:
        raise UseError(f"param '{key}' is not negative, got {value!r}")
    return float(value)


def _sentences(lines: list[str], vocab: Any) -> list[tuple[int, list[int], list[str]]]:
    """(line number, ids with the closing </s>, words read as <unk>) of each line that has a
    token: as the corpus is prepared, a line without one is no sentence."""
    from nlpzoo.data.vocab import EOS
    from nlpzoo.generation import tokenize

    out = []
    for number, line in enumerate(lines, start=1):
        if line.split():
            ids, unknown = tokenize(line, vocab)
            out.append((number, [*ids, EOS], unknown))
    return out


def _score_row(number: int, ids: list[int], unknown: list[str], lp: Any, vocab: Any) -> dict:
    import numpy as np

    total = float(np.sum(lp, dtype=np.float64))
    return {
        "line": number,
        "text": " ".join(vocab.words[i] for i in ids[:-1]),
        "tokens": len(ids),
        "log_prob": total,
        "ppl": math.exp(-total / len(ids)),
        "unknown": unknown,
    }
