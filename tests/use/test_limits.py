"""The budgets of a request (nlpzoo.use.limits) and how the answers keep them: each limit is
refused with one line before any work, a deadline stops a decoding between two steps, params
of the wrong name, type or range are client errors, and the MLflow model refuses a request
beyond the ones it may answer at once. Small models built in the test (untrained: only what
runs and when matters), no project."""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from nlpzoo.data.vocab import EOS, Vocab
from nlpzoo.families import FAMILIES
from nlpzoo.use.answers import PARAMS, Answerer, check_params, longest_source, request_lines
from nlpzoo.use.limits import (
    COMMAND_LINE,
    SERVING,
    Deadline,
    Limits,
    OverBudget,
    serving_limits,
    variable,
)
from nlpzoo.use.run import TrainedRun
from nlpzoo.use.text import UseError

V = 12  # the toy translation vocabulary: specials, then word pieces 5..11


# --------------------------------------------------------------------------- the table


def test_serving_limits_come_from_the_environment_then_the_model_config():
    assert serving_limits({}) == SERVING
    environ = {"NLPZOO_MAX_BEAM": "8", "NLPZOO_REQUEST_SECONDS": "2.5", "NLPZOO_MAX_K": " 7 "}
    limits = serving_limits(environ, {"max_beam": 4, "max_inputs": 10})
    assert (limits.beam, limits.seconds, limits.k, limits.inputs) == (4, 2.5, 7, 10)
    assert limits.work == SERVING.work and limits.variables
    assert serving_limits({"NLPZOO_MAX_WORK": "1_000_000"}).work == 1_000_000
    assert variable("request_bytes") == "NLPZOO_MAX_REQUEST_BYTES"
    for environ, config, message in [
        ({"NLPZOO_MAX_BEAM": "0"}, None, "NLPZOO_MAX_BEAM must be a whole number >= 1, got 0"),
        ({"NLPZOO_MAX_INPUTS": "many"}, None, "must be a whole number >= 1, got 'many'"),
        ({"NLPZOO_REQUEST_SECONDS": "inf"}, None, "must be a number of seconds > 0, got inf"),
        ({}, {"max_beams": 3}, "model config key 'max_beams' is no limit; did you mean"),
        ({}, {"max_k": 2.5}, "model config key 'max_k' must be a whole number >= 1, got 2.5"),
        ({}, {"max_k": True}, "must be a whole number >= 1, got True"),
    ]:
        with pytest.raises(UseError) as caught:
            serving_limits(environ, config)
        assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_command_line_keeps_the_larger_limits_of_batch_use():
    from nlpzoo.use.arguments import MAX_BEAM, MAX_SAMPLES, MAX_TOKENS

    assert (MAX_TOKENS, MAX_SAMPLES, MAX_BEAM) == (100_000, 10_000, 100)
    assert COMMAND_LINE.inputs is None and COMMAND_LINE.seconds is None
    assert not COMMAND_LINE.variables


def test_the_params_are_those_of_the_models_signature():
    from nlpzoo.serving import default_params

    config = {"config": {"beam_size": 4, "length_penalty": 0.6}}
    for family in ("transformer", "lstm_lm", "svd"):
        task = FAMILIES[_family(family)].task
        defaults = default_params(config, FAMILIES[_family(family)])
        assert {k: type(v) for k, v in defaults.items()} == PARAMS[task]


def _family(run: str) -> str:
    return {"lstm_lm": "rnn_lm"}.get(run, run)


# --------------------------------------------------------------------------- toy runs


class Counting:
    """A translation model that counts its encoder and decoder calls and never ends a sentence
    before its limit (every step costs the most it can)."""

    START = 1  # <s>

    def __init__(self, max_positions: int | None = None) -> None:
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.config = type(
            "Config",
            (),
            {"beam_size": 2, "length_penalty": 0.6, "max_len_ratio": 1.5},
        )()
        if max_positions is not None:
            self.config.max_positions = max_positions
        self.calls = Counter()

    def parameters(self):
        yield self.weight

    def start(self, src):
        self.calls["start"] += 1
        return {"rows": torch.zeros(src.shape[0], 1)}

    def step(self, state, tokens):
        self.calls["step"] += 1
        lp = torch.full((tokens.shape[0], V), -5.0)
        lp[:, 5] = -0.1  # always the first word piece
        return lp.log_softmax(-1), state


class Pieces:
    """A SentencePiece stand-in: a piece per character but spaces."""

    def encode(self, lines):
        return [np.asarray([5 + ord(c) % 7 for c in line if not c.isspace()]) for line in lines]

    def decode(self, ids):
        return [" ".join(map(str, row)) for row in ids]


def _mt(limits: Limits = SERVING, max_positions: int | None = None) -> Answerer:
    run = TrainedRun("toy_mt", Path("."), {"family": "seq2seq"}, Path("."))
    answers = Answerer(run, limits)
    answers.__dict__.update(model=Counting(max_positions), codec=Pieces())
    return answers


class Spy(torch.nn.Module):
    """A language model that counts the tokens it is given."""

    def __init__(self, model) -> None:
        super().__init__()
        self.inner, self.config, self.calls = model, model.config, Counter()

    def log_prob_all(self, inputs, state=None):
        self.calls["tokens"] += inputs.numel()
        return self.inner.log_prob_all(inputs, state)

    def token_log_probs(self, inputs, targets, state=None):
        self.calls["tokens"] += inputs.numel()
        return self.inner.token_log_probs(inputs, targets, state)


WORDS = ["the", "cat", "dog", "sees", "a", "ball", "."]


def _lm(limits: Limits = SERVING) -> Answerer:
    family = FAMILIES["rnn_lm"]
    torch.manual_seed(0)
    vocab = Vocab.build(Counter(WORDS), 1)
    config = family.config(cell="lstm", emb_dim=8, hidden_dim=8, num_layers=1, output="softmax")
    model = Spy(family.model_class()(config, len(vocab)).eval())
    run = TrainedRun("toy_lm", Path("."), {"family": "rnn_lm"}, Path("."))
    answers = Answerer(run, limits)
    answers.__dict__.update(model=model, vocab=vocab)
    return answers


def _vectors(limits: Limits = SERVING) -> Answerer:
    words = ["<unk>", "<s>", "</s>", "<pad>", *(f"w{i}" for i in range(300))]
    vectors = np.random.default_rng(0).normal(size=(len(words), 8))
    run = TrainedRun("toy_svd", Path("."), {"family": "svd"}, Path("."))
    answers = Answerer(run, limits)
    answers.__dict__.update(vectors=(words, vectors))
    return answers


# --------------------------------------------------------------------------- each limit

SMALL = Limits(
    inputs=4,
    request_bytes=200,
    prompt_tokens=6,
    source_pieces=30,
    beam=3,
    work=600,
    tokens=8,
    new_tokens=12,
    k=5,
)
PROMPT = "the cat sees a ball"
OVER = [
    # (answers, inputs, params, what the line says)
    ("mt", ["ein hund"] * 5, {}, "lines per request: at most 4 (NLPZOO_MAX_INPUTS), got 5"),
    ("lm", ["x" * 120, "y" * 120], {}, "at most 200 (NLPZOO_MAX_REQUEST_BYTES), got 240"),
    ("lm", ["ä" * 101], {}, "bytes of input per request (UTF-8): at most 200"),
    ("lm", [PROMPT, "the " * 7], {}, "words of prompt 2: at most 6 (NLPZOO_MAX_PROMPT_TOKENS)"),
    ("lm", ["the " * 7], {"mode": "score"}, "words of line 1: at most 6"),
    ("mt", ["a" * 31], {}, "line 1 (1 words) is 31 pieces, more than the 30 a request's line"),
    ("mt", ["ab"], {"beam_size": 4}, "beam size: at most 3 (NLPZOO_MAX_BEAM), got 4"),
    ("mt", ["a" * 30] * 4, {"beam_size": 3}, "decoding steps per request"),
    ("lm", [PROMPT], {"tokens": 9}, "param 'tokens': at most 8 (NLPZOO_MAX_TOKENS), got 9"),
    ("lm", [PROMPT] * 2, {"tokens": 7}, "(prompts × tokens): at most 12 (NLPZOO_MAX_NEW_TOKENS)"),
    ("vectors", ["w1"], {"k": 6}, "neighbours per word (k): at most 5 (NLPZOO_MAX_K), got 6"),
    ("vectors", ["w1 w2 w3"], {"mode": "analogy", "k": 6}, "answers per analogy (k): at most 5"),
]


@pytest.mark.parametrize(("kind", "inputs", "params", "message"), OVER, ids=[m for *_, m in OVER])
def test_a_request_over_a_limit_is_refused_before_any_work(kind, inputs, params, message):
    answers = {"mt": _mt, "lm": _lm, "vectors": _vectors}[kind](SMALL)
    with pytest.raises(OverBudget) as caught:
        answers.answer(inputs, params)
    assert message in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    if kind == "mt":
        assert answers.model.calls == Counter()  # not one sentence encoded or stepped
    if kind == "lm":
        assert answers.model.calls == Counter()  # not one token fed to the model
    if kind == "vectors":
        assert answers._solvers == {}  # no analogy searched


def test_a_request_within_the_limits_is_answered():
    assert len(_mt(SMALL).answer(["ab", "abc"], {"beam_size": 3})) == 2
    assert len(_lm(SMALL).answer([PROMPT] * 2, {"tokens": 6, "seed": 1})[1].split()) == 6
    assert [len(found) for found in _vectors(SMALL).answer(["w1", "w2"], {"k": 5})] == [5, 5]


def test_an_over_long_line_is_refused_before_any_earlier_batch_is_decoded():
    answers = _mt(Limits(source_pieces=None, work=None, inputs=None), max_positions=40)
    assert longest_source(answers.model) == 20  # ⌈1.5 n⌉ + 10 <= 40
    lines = ["ab"] * 70 + ["a" * 21]  # three batches of 32; the long line sorts last
    with pytest.raises(OverBudget, match=r"line 71 \(1 words\) is 21 pieces, more than the 20 its"):
        answers.translate(lines)
    assert answers.model.calls == Counter()
    assert len(answers.translate([*lines[:-1], "a" * 20])) == 71  # at the limit: translated


@pytest.mark.parametrize("name", ["transformer", "decoder_mt"])
def test_the_longest_source_is_exactly_what_the_positions_table_takes(name):
    """At `longest_source` pieces an untrained model that never ends a sentence early decodes
    to its length limit without leaving its positions table; one piece more does not fit."""
    from nlpzoo.evaluation.decoding import greedy

    family = FAMILIES[name]
    torch.manual_seed(0)
    sizes = {"d_model": 16, "heads": 2, "num_layers": 1, "d_ff": 32, "max_positions": 48}
    model = family.model_class()(family.config(**sizes), V).eval()
    n = longest_source(model)
    assert n == (25 if name == "transformer" else 14)  # ⌈1.5 · 25⌉ + 10 <= 48; 14 + 21 + 10 <= 47

    class Endless:  # the model, never ending a sentence before its limit
        START, config = model.START, model.config

        def start(self, src):
            return model.start(src)

        def step(self, state, tokens):
            lp, state = model.step(state, tokens)
            lp[:, EOS] = -1e9
            return lp, state

    out = greedy(Endless(), torch.full((1, n), 7)).tokens[0][0]
    assert len(out) == math.ceil(1.5 * n) + 10 - 1  # to the limit, </s> forced there
    with pytest.raises(ValueError, match="max_positions"):
        greedy(Endless(), torch.full((1, n + 1), 7))


# --------------------------------------------------------------------------- the deadline


class Clock:
    """A clock that moves `tick` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_deadline_stops_a_translation_between_two_steps():
    answers = _mt(Limits(work=None))
    lines = ["abcdefgh"] * 3  # 22 steps each at most: one batch
    deadline = Deadline(10.0, Clock(1.0))  # made at 1; from 11 on, every check raises
    with pytest.raises(OverBudget, match=r"ran past its 10 s and was stopped"):
        answers.translate(lines, beam_size=2, check=deadline)
    assert answers.model.calls == Counter(start=1, step=8)  # checks at 2..9 passed, 10 raised
    answers = _mt(Limits(work=None))
    assert len(answers.translate(lines, beam_size=2, check=Deadline(100.0, Clock(1.0)))) == 3
    assert answers.model.calls["step"] == 22


def test_a_deadline_stops_generation_and_scoring_between_tokens_and_lines():
    answers = _lm(Limits(seconds=5.0))
    with pytest.raises(OverBudget, match="ran past its 5 s"):
        answers.generate(PROMPT, 50, check=Deadline(5.0, Clock(1.0)))
    assert answers.model.calls["tokens"] == 6 + 3  # the prompt and </s>, then three steps
    answers = _lm(Limits(seconds=5.0))
    with pytest.raises(OverBudget):
        answers.score([PROMPT] * 10, separate=True, check=Deadline(2.5, Clock(1.0)))
    assert answers.model.calls["tokens"] == 2 * 6  # two lines of five words and </s>


def test_the_request_deadline_starts_with_the_request():
    answers = _lm(Limits(seconds=1e-9))
    with pytest.raises(OverBudget, match=r"ran past its 1e-09 s \(NLPZOO_REQUEST_SECONDS\)"):
        answers.answer([PROMPT], {"tokens": 100})
    assert answers.model.calls["tokens"] < 6 + 99
    answers = _lm(Limits(seconds=None))
    assert len(answers.answer([PROMPT], {"tokens": 3})[0].split()) == 3


# --------------------------------------------------------------------------- params and inputs

BAD_PARAMS = [
    ("lm", {"seed": -1}, "param 'seed' is at least 0, got -1"),
    ("lm", {"seed": 1.5}, "param 'seed' is a whole number, got 1.5"),
    ("lm", {"tokens": "many"}, "param 'tokens' is a whole number, got 'many'"),
    ("lm", {"tokens": True}, "param 'tokens' is a whole number, got True"),
    ("lm", {"temperature": "hot"}, "param 'temperature' is a number, got 'hot'"),
    ("lm", {"temperature": float("nan")}, "param 'temperature' is a number, got nan"),
    ("lm", {"temperature": 1e-9}, "param 'temperature' is 0 (always the most probable)"),
    ("lm", {"mode": 3}, "param 'mode' is a string, got 3"),
    ("lm", {"mode": "sing"}, "unknown mode 'sing' for run 'toy_lm'"),
    ("lm", {"tokenz": 3}, "unknown param 'tokenz'; did you mean 'tokens'?"),
    ("lm", {"top_k": -2}, "param 'top_k' is at least 0, got -2"),
    ("lm", {"mode": ""}, "unknown mode '' for run 'toy_lm'"),
    ("lm", {"k": 0}, "param 'k' is at least 1, got 0"),  # in range whatever the mode uses
    ("mt", {"length_penalty": 5000, "beam_size": 2}, "param 'length_penalty' is at most 10"),
    ("mt", {"length_penalty": -1}, "param 'length_penalty' is not negative"),
    ("mt", {"beam_size": 0}, "param 'beam_size' is at least 1, got 0"),
    ("mt", {"mode": "score"}, "unknown param 'mode' (params: beam_size, length_penalty)"),
    ("mt", {"x" * 500: 1}, "unknown param 'xxxxx"),
    ("vectors", {"k": 0}, "param 'k' is at least 1, got 0"),
    ("vectors", {"mode": "generate"}, "unknown mode 'generate' for run 'toy_svd' (modes: ne"),
]


@pytest.mark.parametrize(("kind", "params", "message"), BAD_PARAMS, ids=[m for *_, m in BAD_PARAMS])
def test_bad_params_are_one_line_before_any_work(kind, params, message):
    answers = {"mt": _mt, "lm": _lm, "vectors": _vectors}[kind]()
    inputs = ["w1"] if kind == "vectors" else ["ein hund"]
    with pytest.raises(UseError) as caught:
        answers.answer(inputs, params)
    line = str(caught.value)
    assert message in line and "\n" not in line and len(line) < 300, line
    if kind != "vectors":
        assert answers.model.calls == Counter()


def test_params_that_are_no_mapping_and_inputs_that_are_no_text_are_refused():
    with pytest.raises(
        UseError, match="the params are a JSON object of names and values, got list"
    ):
        check_params([1, 2], "lm")
    check_params({"tokens": np.int64(3), "temperature": np.float32(0.5), "seed": None}, "lm")
    for inputs, message in [
        (["ok", "\ud800x"], "input 1 is not Unicode text (character 0: a lone surrogate"),
        (["ok", " \u3000 "], "input 1 is an empty string"),
        ([b"bytes"], "input 0 is bytes, not a string"),
    ]:
        with pytest.raises(UseError, match=message.replace("(", r"\(")):
            request_lines(inputs, SERVING)


def test_blank_and_normalised_away_lines_translate_to_empty_lines():
    answers = _mt()
    # the toy model writes piece 5 until the length limit: ⌈1.5 n⌉ + 10 pieces, </s> the last
    fives = [" ".join(["5"] * (math.ceil(1.5 * n) + 10 - 1)) for n in (2, 1)]
    assert answers.translate(["ab", "", "   ", "c"]) == [fives[0], "", "", fives[1]]
    assert answers.model.calls["start"] == 1  # the blank lines were not decoded
    assert _mt().translate(["", " "]) == ["", ""]


# --------------------------------------------------------------------------- the MLflow model


def test_the_model_refuses_a_request_beyond_those_it_may_answer_at_once():
    from nlpzoo.serving import BadRequest, RunModel

    started, release = threading.Event(), threading.Event()

    class Slow:
        limits = Limits(concurrent=1)
        run = TrainedRun("slow", Path("."), {"family": "svd"}, Path("."))

        def answer(self, inputs, params):
            started.set()
            release.wait(10)
            return ["done"]

    model = RunModel()
    model.answerer, model.slots = Slow(), threading.BoundedSemaphore(1)
    out = []
    first = threading.Thread(target=lambda: out.append(model.predict(None, ["a"])))
    first.start()
    assert started.wait(10)
    with pytest.raises(BadRequest) as caught:
        model.predict(None, ["b"])
    assert caught.value.error_code == "RESOURCE_EXHAUSTED"
    assert caught.value.get_http_status_code() == 429  # a client error: retry later
    assert caught.value.line.startswith("busy: the server is answering 1 requests")
    release.set()
    first.join(10)
    assert out == [["done"]] and model.predict(None, ["c"]) == ["done"]  # the slot is free


def test_the_model_maps_client_errors_to_400_and_its_own_failures_to_500():
    from nlpzoo.serving import BadRequest, RunModel

    model = RunModel()
    model.answerer, model.slots = _lm(SMALL), threading.BoundedSemaphore(1)
    for params in ({"seed": -1}, {"tokens": 100}, {"tokenz": 1}):
        with pytest.raises(BadRequest) as caught:
            model.predict(None, [PROMPT], params)
        assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
        assert caught.value.get_http_status_code() == 400
    with pytest.raises(BadRequest) as caught:
        model.check_params({"beam": 3})
    assert caught.value.line.startswith("unknown param 'beam'")

    def broken(*args):
        raise RuntimeError("out of memory\nat line 3")

    model.answerer.model.inner.log_prob_all = broken
    with pytest.raises(BadRequest) as caught:
        model.predict(None, [PROMPT], {"tokens": 2})
    assert caught.value.get_http_status_code() == 500 and "\n" not in caught.value.line
    assert "RuntimeError: out of memory at line 3" in caught.value.line


def test_a_json_body_is_read_once_and_refused_in_one_line_without_the_body():
    from nlpzoo.serving import BadRequest, _body_problem, _first_line, _read_json

    assert _read_json(b'{"inputs": ["a"], "params": {"k": 3}}') == {
        "inputs": ["a"],
        "params": {"k": 3},
    }
    assert _read_json('{"inputs": ["ä"]}'.encode("utf-16")) == {"inputs": ["ä"]}
    for data, message in [
        (b'{"inputs": ["a", 3]}', "input 1 is int, not a string"),  # MLflow would read "3"
        (b'{"instances": ["a", ["b"]]}', "input 1 is list, not a string"),
        (b"[1, 2]", 'the request body is a JSON object, {"inputs": [...], "params": {...}}, got'),
        (b'{"params": {}}', 'the request body has no "inputs"'),
        (b'{"inputs": [', "the request body is not JSON (Expecting value: line 1, column 13)"),
        (b'{"inputs": ["\xff"]}', "the request body is not UTF-8 text (byte 13: 0xff)"),
        (b"[" * 100_000 + b"]" * 100_000, "the request body is nested too deeply to be read"),
    ]:
        with pytest.raises(BadRequest) as caught:
            _read_json(data)
        assert caught.value.line.startswith(message), caught.value.line
    assert _body_problem(b"{}") == "the request body is not JSON"  # only asked of a bad body
    message = "Failed to predict data '['secret\\nError: x']'. \nError: Invalid params\nmore"
    assert _first_line(message) == "Invalid params"
    assert len(_first_line("x" * 1000)) == 300
