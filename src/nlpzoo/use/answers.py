"""What a trained run answers, computed once for the commands (`nlpzoo.use.commands`) and for
the MLflow model (`nlpzoo.serving`): translations, continuations, scores, neighbours and
analogies, with the run's files loaded once and checked by the hardened loaders."""

from __future__ import annotations

import math
from functools import cached_property
from pathlib import Path
from typing import Any

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

MAX_INPUTS = 1000  # lines of one MLflow request: more is refused, not left to hang a worker


class Answerer:
    """A trained run's answers; its model, vocabulary, SentencePiece model and vectors are
    loaded on first use."""

    def __init__(self, run: TrainedRun) -> None:
        self.run = run

    @classmethod
    def open(cls, folder: Path) -> Answerer:
        """The run whose files are in `folder` (an MLflow model's `run` artifact)."""
        config = load_config(folder, f"the run in {folder}")
        return cls(TrainedRun(str(config.get("run", folder.name)), folder, config, folder, True))

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

    # ------------------------------------------------------------------ the answers

    def translate(
        self, lines: list[str], beam_size: int | None = None, length_penalty: float | None = None
    ) -> list[str]:
        """`nlpzoo.tasks.mt.translate`; a sentence past the model's positions is a clear error."""
        from nlpzoo.tasks.mt import translate

        need_mt(self.run, "translate")
        model, codec = self.model, self.codec
        if not lines:
            return []
        try:
            return translate(
                model, codec, lines, beam_size=beam_size, length_penalty=length_penalty
            )
        except ValueError as e:
            if "max_positions" not in str(e):
                raise
            longest = max(range(len(lines)), key=lambda i: len(lines[i].split()))
            raise UseError(
                f"run '{self.run.name}' cannot translate this input: {e}. Its longest line is "
                f"line {longest + 1} ({len(lines[longest].split())} words): split long lines"
            ) from None

    def generate(self, prompt: str, tokens: int, **settings: Any) -> dict:
        """`nlpzoo.generation.samples_record` (settings: temperature, top_k, seed, samples,
        timing)."""
        from nlpzoo.generation import samples_record

        need_lm(self.run, "generate")
        vocab, model = self.vocab, self.model
        return samples_record(self.run.family, model, vocab, prompt, tokens, **settings)

    def score(self, lines: list[str], separate: bool) -> tuple[list[dict], dict, int]:
        """(a row per line that has a token, the total, how many words were read as <unk>):
        each line scored on its own (`separate`), or the lines as one text, as the evaluation
        reads a split."""
        import numpy as np

        from nlpzoo.tasks import task_of

        need_lm(self.run, "score")
        vocab = self.vocab
        sentences = _sentences(lines, vocab)
        if not sentences:
            raise UseError("no sentences to score (the input has no non-empty line)")
        model = self.model
        task = task_of(self.run.family)
        if separate:
            scored = [
                task.log_probs(model, np.asarray(ids), model.config) for _, ids, _ in sentences
            ]
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
        vocab_words, vectors = self.vectors
        probes = [lookup(self.run, vocab_words, w) for w in words]
        return nearest_neighbours(vocab_words, vectors, probes, k=k)

    def analogy(
        self, a: str, b: str, c: str, k: int, method: str = "3cosadd", restrict: int | None = None
    ) -> tuple[list[str], list[tuple[str, float]]]:
        """(the question as the vocabulary spells it, the k best answers d of a : b :: c : d)
        by `nlpzoo.evaluation.analogy.Analogies`, among the `restrict` most frequent words
        (params evaluation.restrict_vocab by default)."""
        from nlpzoo.config import build
        from nlpzoo.evaluation.analogy import Analogies
        from nlpzoo.params import EvaluationConfig

        need_vectors(self.run, "analogy")
        words, vectors = self.vectors
        question = [lookup(self.run, words, w) for w in (a, b, c)]
        if restrict is None:
            section = project_params(self.run.root).get("evaluation")
            restrict = build(EvaluationConfig, section, "evaluation").restrict_vocab
        solver = Analogies(words, vectors, restrict_vocab=restrict)
        for w in question:
            if solver.position(w) is None:
                raise UseError(
                    f"word '{w}' is not among the {restrict:,} most frequent words the analogies "
                    "search (params evaluation.restrict_vocab; --restrict-vocab N)"
                )
        return question, solver.answers(*question, k=k, method=method)

    # ------------------------------------------------------------------ one request

    def answer(self, inputs: Any, params: dict) -> list:
        """The MLflow model's answer to a list of strings (`nlpzoo.serving` says what each is
        read as): one result per input, in order. Params out of the commands' range are
        refused, and so is a request of more than `MAX_TOKENS` generated tokens in all."""
        from nlpzoo.use.arguments import MAX_BEAM, MAX_TOKENS, MIN_TEMPERATURE

        lines = request_lines(inputs)
        family = self.run.family
        if family.task == "mt":
            beam = _int(params, "beam_size", 1)
            if beam is not None and beam > MAX_BEAM:
                raise UseError(f"param 'beam_size' is at most {MAX_BEAM}, got {beam}")
            return self.translate(lines, beam, _float(params, "length_penalty"))
        default = "generate" if family.task == "lm" else "neighbours"
        mode = params.get("mode") or default
        if mode == "generate":
            temperature = _or(_float(params, "temperature"), 1.0)
            if 0 < temperature < MIN_TEMPERATURE:
                raise UseError(
                    f"param 'temperature' is 0 (always the most probable) or at least "
                    f"{MIN_TEMPERATURE:g}, got {temperature!r}"
                )
            settings = {
                "temperature": temperature,
                "top_k": _or(_int(params, "top_k", 0), 0),
                "seed": _or(_int(params, "seed", None), 0),
            }
            tokens = _or(_int(params, "tokens", 1), 20)
            if tokens * len(lines) > MAX_TOKENS:
                raise UseError(
                    f"at most {MAX_TOKENS:,} generated tokens per request, asked "
                    f"{len(lines):,} x {tokens:,}: fewer prompts or tokens"
                )
            return [self.generate(p, tokens, **settings)["samples"][0]["text"] for p in lines]
        if mode == "score":
            rows, _, _ = self.score(lines, separate=True)
            return [{k: r[k] for k in ("text", "log_prob", "tokens", "ppl")} for r in rows]
        k = _or(_int(params, "k", 1), 10)
        if mode == "neighbours":
            found = self.neighbours(lines, k)
            probes = [lookup(self.run, self.vectors[0], w) for w in lines]
            return [[[n, round(c, 6)] for n, c in found[w]] for w in probes]
        if mode == "analogy":
            out = []
            for line in lines:
                words = line.split()
                if len(words) != 3:
                    raise UseError(
                        f"an analogy is three words 'a b c' (a : b :: c : ?), got {line!r}"
                    )
                _, answers = self.analogy(*words, k=k)
                out.append([[w, round(s, 6)] for w, s in answers])
            return out
        modes = (
            "generate, score, neighbours, analogy" if family.task == "lm" else "neighbours, analogy"
        )
        raise UseError(f"unknown mode {mode!r} for run '{self.run.name}' (modes: {modes})")


def request_lines(inputs: Any) -> list[str]:
    """An MLflow request's input as a list of non-empty strings, at most `MAX_INPUTS` of them;
    a clear error otherwise. A one-column table (MLflow's reading of a list) is its column."""
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
    if len(inputs) > MAX_INPUTS:
        raise UseError(f"at most {MAX_INPUTS:,} lines per request, got {len(inputs):,}: split it")
    for i, line in enumerate(inputs):
        if not isinstance(line, str):
            raise UseError(f"input {i} is {type(line).__name__}, not a string")
        if not line.strip():
            raise UseError(f"input {i} is an empty string")
    return inputs


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _int(params: dict, key: str, least: int | None) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise UseError(f"param '{key}' is a whole number, got {value!r}")
    if least is not None and value < least:
        raise UseError(f"param '{key}' is at least {least}, got {value!r}")
    return int(value)


def _float(params: dict, key: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UseError(f"param '{key}' is a number, got {value!r}")
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
