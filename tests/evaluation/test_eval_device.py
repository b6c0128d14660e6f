"""Evaluation on the device the model is on (`load_model(run_dir, device)`): every path (the
perplexity of each input kind, the samples, the word-vector protocol, translation's perplexity,
greedy and beam decoding and attention maps) gives the model its inputs on the model's device
and brings the results back to the CPU, with the CPU's numbers.

Without an accelerator the move is simulated. `Moved` wraps a trained model whose parameters
then report the meta device (`THERE`); under `OnDevice`, a torch function mode, a tensor sent
there (`.to`, or made with `device=`) is a CPU tensor of class `There`, and so is every result
computed from one. Like an accelerator's, such tensors refuse an operation that mixes them with
CPU tensors and a numpy conversion before `.cpu()`; the wrapped model refuses an input left on
the CPU, and gives its outputs there."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from nlpzoo import lifecycle
from nlpzoo.families import FAMILIES
from nlpzoo.tasks import Run, load_model, task_of
from toy import make_mt_project, tiny_params, write_lm_data

pytestmark = pytest.mark.usefixtures("one_thread")

THERE = torch.device("meta")  # the device the moved model reports; no tensor really goes there
LM_RUNS = ("nnlm", "lstm_lm", "transformer_lm")  # the window, stateful and stream inputs
MT_RUNS = ("seq2seq", "attention", "transformer", "decoder_mt")
TIMINGS = ("decode_sents_per_s_greedy", "decode_sents_per_s_beam", "eval_seconds")


class There(torch.Tensor):
    """A CPU tensor standing for one on the model's device (`OnDevice` handles its operations)."""

    __torch_function__ = torch._C._disabled_torch_function_impl


def _map(fn, x):
    """`fn` on every tensor of a nest of dicts, lists and tuples."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map(fn, v) for v in x)
    return x


def _tensors(x) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    _map(found.append, x)
    return found


def _there(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(There)


def _here(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(torch.Tensor)


def _is_there(device) -> bool:
    return isinstance(device, (str, torch.device)) and torch.device(device) == THERE


class OnDevice(TorchFunctionMode):
    """`There` tensors behave as tensors on an accelerator (see the module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func == torch.Tensor.as_subclass:  # `_there` and `_here` themselves
            return func(*args, **kwargs)
        if func == torch.Tensor.device.__get__ and isinstance(args[0], There):
            return THERE
        if func in (torch.Tensor.numpy, torch.Tensor.__array__) and isinstance(args[0], There):
            raise TypeError("a tensor on the model's device goes to numpy through .cpu() only")
        if func == torch.Tensor.cpu:
            return _here(func(*args, **kwargs))
        if func == torch.Tensor.to:
            target = next((a for a in [*args[1:], kwargs.get("device")] if _is_there(a)), None)
            moved = [("cpu" if a is target else a) for a in args[1:]]
            if target is not None:  # to the model's device
                kwargs.pop("device", None)
                return _there(func(_here(args[0]), *moved, **kwargs))
            if any(isinstance(a, (str, torch.device)) for a in [*args[1:], kwargs.get("device")]):
                return _here(func(*args, **kwargs))  # to the CPU
        if _is_there(kwargs.get("device")):  # a tensor made on the model's device
            kwargs["device"] = "cpu"
            return _map(_there, func(*args, **kwargs))
        tensors = _tensors((args, kwargs))
        there = any(isinstance(t, There) for t in tensors)
        here = [t for t in tensors if not isinstance(t, There) and t.dim() > 0]
        if there and here:
            raise RuntimeError(
                f"{getattr(func, '__name__', func)}: tensors on the model's device and on the CPU"
            )
        out = func(*args, **kwargs)
        return _map(_there, out) if there else out


class Moved:
    """A model as if moved to `THERE`: each method takes its tensors there (an input left on
    the CPU fails the test) and gives its results there; it computes on the CPU underneath."""

    def __init__(self, model) -> None:
        self._model = model
        self.calls = 0

    def parameters(self):
        yield types.SimpleNamespace(device=THERE)

    def __call__(self, *args, **kwargs):
        return self._wrap(self._model)(*args, **kwargs)

    def __getattr__(self, name: str):
        attr = getattr(self._model, name)
        return self._wrap(attr) if callable(attr) and not isinstance(attr, type) else attr

    def _wrap(self, method):
        def on_device(*args, **kwargs):
            left = [t for t in _tensors((args, kwargs)) if not isinstance(t, There)]
            name = getattr(method, "__name__", type(method).__name__)
            assert not left, f"{name}: an input on the CPU, the model on {THERE}"
            self.calls += 1
            out = method(*_map(_here, args), **_map(_here, kwargs))
            return _map(_there, out)

        return on_device


# --------------------------------------------------------------------------- the toy runs


def _train(root: Path, params: dict, runs) -> dict:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        for run in runs:
            lifecycle.train(params, run, root)
    return params


@pytest.fixture(scope="module")
def lm_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    write_lm_data(root)
    return root, _train(root, tiny_params("ngram", *LM_RUNS), ("ngram", *LM_RUNS))


@pytest.fixture(scope="module")
def mt_project(tmp_path_factory):
    root = make_mt_project(tmp_path_factory.mktemp("mt"))
    params = tiny_params(*MT_RUNS)
    return root, _train(root, params, MT_RUNS)


def _scores(root: Path, params: dict, name: str, model, folder: Path) -> dict:
    """The task's metrics of `model` (timings left out) as JSON, and the bytes of the files it
    writes into `folder`."""
    run = Run.of(params, name, root)
    scores = task_of(run.family).evaluate(run, model)
    folder.mkdir(parents=True)
    for file_name, write in scores.files.items():
        write(folder / file_name)
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    return _json({k: v for k, v in scores.metrics.items() if k not in TIMINGS}), files


def _json(metrics: dict) -> str:
    """Metrics as metrics/RUN.json holds them (a NaN, of a set none of whose pairs is known,
    equal to itself)."""
    return json.dumps(metrics, sort_keys=True)


# --------------------------------------------------------------------------- the tests


def test_load_model_puts_a_neural_model_on_the_device_and_ignores_it_for_numpy_ones(lm_project):
    root, _ = lm_project
    cpu = load_model(root / "models" / "nnlm")
    same = load_model(root / "models" / "nnlm", device="cpu")
    assert not cpu.training and not same.training
    assert cpu.state_dict().keys() == same.state_dict().keys()
    for key, value in cpu.state_dict().items():
        assert value.device.type == "cpu" and torch.equal(value, same.state_dict()[key]), key
    meta = load_model(root / "models" / "nnlm", device="meta")  # shapes only, no numbers
    assert not meta.training
    assert {t.device.type for t in [*meta.parameters(), *meta.buffers()]} == {"meta"}
    # a count model is numpy's: any device, even one this machine lacks, is ignored
    ngram = load_model(root / "models" / "ngram", device="cuda")
    stream = np.load(root / "data" / "vocab" / "lm" / "valid.npy")
    expected = load_model(root / "models" / "ngram").log_probs(stream)
    np.testing.assert_array_equal(ngram.log_probs(stream), expected)


@pytest.mark.parametrize("run", LM_RUNS)
def test_lm_evaluation_on_the_models_device_gives_the_cpus_numbers(lm_project, run, tmp_path):
    root, params = lm_project
    model = load_model(root / "models" / run, device="cpu")
    expected = _scores(root, params, run, model, tmp_path / "cpu")
    moved = Moved(model)
    with OnDevice():
        got = _scores(root, params, run, moved, tmp_path / "moved")
    assert moved.calls > 0
    assert got == expected  # perplexities, vector metrics, logprobs.npz, samples, neighbours
    assert {"valid_ppl", "test_ppl", "ws353_rho"} <= set(json.loads(got[0]))
    assert {"logprobs.npz", "samples.json", "neighbours.json"} <= set(got[1])


@pytest.mark.parametrize("run", MT_RUNS)
def test_mt_evaluation_on_the_models_device_gives_the_cpus_numbers(mt_project, run, tmp_path):
    root, params = mt_project
    model = load_model(root / "models" / run, device="cpu")
    expected = _scores(root, params, run, model, tmp_path / "cpu")
    moved = Moved(model)
    with OnDevice():
        got = _scores(root, params, run, moved, tmp_path / "moved")
    assert moved.calls > 0
    assert got == expected  # perplexity, BLEU and chrF greedy and beam, hypotheses, samples
    assert {"test_ppl", "bleu", "bleu_beam"} <= set(json.loads(got[0]))
    assert ("attention.json" in got[1]) == FAMILIES[params["models"][run]["family"]].attention_maps


def test_the_evaluate_stage_loads_a_neural_run_on_its_placements_device(
    lm_project, mt_project, monkeypatch, tmp_path
):
    """`lifecycle.evaluate` asks the run's placement for the device of a neural run, and none
    for a count model; the metrics on that device are the CPU's."""
    asked: list[str] = []

    class Placement:
        def torch_device(self) -> str:
            return "meta"

    def place(run):
        asked.append(run.name)
        return Placement()

    monkeypatch.setattr(lifecycle, "place", place)
    loaded: list[tuple[str, str]] = []

    def load(run_dir: Path, device: str = "cpu"):
        loaded.append((Path(run_dir).name, device))
        model = load_model(run_dir)
        return Moved(model) if _is_there(device) else model

    monkeypatch.setattr(lifecycle, "load_model", load)
    for (root, params), run in ((lm_project, "transformer_lm"), (mt_project, "transformer")):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        with OnDevice():
            metrics = lifecycle.evaluate(params, run, root)
        expected = _scores(root, params, run, load_model(root / "models" / run), tmp_path / run)
        cpu = json.loads(expected[0])
        assert _json({k: metrics[k] for k in cpu}) == expected[0]
        saved = json.loads((root / "metrics" / f"{run}.json").read_text())
        assert saved["test_ppl"] == cpu["test_ppl"]
    root, params = lm_project
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
    lifecycle.evaluate(params, "ngram", root)
    assert asked == ["transformer_lm", "transformer"]
    assert loaded == [("transformer_lm", "meta"), ("transformer", "meta"), ("ngram", "cpu")]


def test_an_input_left_on_the_cpu_fails_the_simulation(lm_project):
    """The simulated device catches what a real one would: a CPU input to the moved model, a
    CPU tensor meeting one on the device, numpy before `.cpu()`."""
    root, _ = lm_project
    moved = Moved(load_model(root / "models" / "nnlm"))
    context = torch.tensor([[4, 5]])
    with torch.no_grad(), OnDevice():
        with pytest.raises(AssertionError, match="an input on the CPU"):
            moved.log_prob_all(context)
        lp = moved.log_prob_all(context.to(next(moved.parameters()).device))
        assert isinstance(lp, There) and lp.device == THERE
        with pytest.raises(RuntimeError, match="on the CPU"):
            lp + torch.zeros_like(_here(lp))
        with pytest.raises(TypeError, match="numpy"):
            np.asarray(lp)
        assert lp.cpu().numpy().shape == lp.shape
