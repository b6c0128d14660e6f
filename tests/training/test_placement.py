"""Where each run trains (nlpzoo.placement), with the accelerator faked: one CUDA GPU, several,
Apple's GPU, none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nlpzoo import placement
from nlpzoo.errors import ConfigError
from nlpzoo.params_file import load_params
from nlpzoo.placement import place
from nlpzoo.tasks import Run
from nlpzoo.tracking import Tracker
from toy import inactive, make_project

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
RUNS = list(PARAMS["models"])
# the runs whose kernel runs only on the CPU at the default params: counts, closed form, numba
CPU_KERNELS = {"ngram", "svd", "cbow", "skipgram", "glove"}


def fake_machine(monkeypatch, gpus: int = 0, mps: bool = False, bf16: bool = True) -> None:
    monkeypatch.setattr(placement, "cuda_available", lambda: gpus > 0)
    monkeypatch.setattr(placement, "mps_available", lambda: mps)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)


def run_of(name: str, params: dict = PARAMS) -> Run:
    return Run.of(params, name, ROOT)


def test_the_default_params_name_thirteen_runs_and_the_cpu_kernels_among_them():
    assert len(RUNS) == 13 and set(RUNS) > CPU_KERNELS


@pytest.mark.parametrize("name", RUNS)
def test_with_one_gpu_each_run_goes_where_its_kernel_runs(monkeypatch, name):
    fake_machine(monkeypatch, gpus=1)
    where = place(run_of(name))
    if name in CPU_KERNELS:
        assert (where.accelerator, where.devices, where.cpu_kernel) == ("cpu", 1, True)
        assert where.deterministic is False
    else:
        assert (where.accelerator, where.devices, where.cpu_kernel) == ("cuda", 1, False)
        asked = run_of(name).trainer.precision  # lstm_lm's params pin 32-true
        assert where.precision == ("bf16-mixed" if asked == "auto" else asked)
        assert where.deterministic == "warn"
    if run_of(name).family.neural:  # what Lightning is given
        trainer = where.trainer(run_of(name).trainer)
        assert trainer.accelerator == ("cpu" if name in CPU_KERNELS else "gpu")


@pytest.mark.parametrize("name", RUNS)
def test_on_apple_silicon_the_same_rule_picks_mps(monkeypatch, name):
    fake_machine(monkeypatch, mps=True)
    where = place(run_of(name))
    assert where.accelerator == ("cpu" if name in CPU_KERNELS else "mps")
    if name not in CPU_KERNELS:  # no native bf16 asked of MPS: float32
        assert where.precision == "32-true" and where.torch_device() == "mps"


@pytest.mark.parametrize("name", RUNS)
def test_without_an_accelerator_every_run_is_on_the_cpu_as_before(monkeypatch, name):
    fake_machine(monkeypatch)
    where = place(run_of(name))
    assert (where.accelerator, where.devices, where.deterministic) == ("cpu", 1, False)


@pytest.mark.parametrize("name", RUNS)
def test_four_gpus_train_each_run_on_one_unless_asked(monkeypatch, name):
    fake_machine(monkeypatch, gpus=4)
    assert place(run_of(name)).world_size() == 1


def with_trainer(name: str, **trainer) -> dict:
    params = json.loads(json.dumps(PARAMS))
    params.setdefault(name, {}).setdefault("trainer", {}).update(trainer)
    return params


def test_several_gpus_when_asked(monkeypatch):
    fake_machine(monkeypatch, gpus=4)
    where = place(run_of("transformer", with_trainer("transformer", devices=4, strategy="ddp")))
    assert (where.accelerator, where.world_size(), where.strategy) == ("cuda", 4, "ddp")


@pytest.mark.parametrize(
    "name, section, match",
    [
        ("skipgram", {"backend": "torch"}, "word2vec's torch path has sparse"),
        ("glove", {"backend": "torch"}, r"sparse_grad: true .*set sparse_grad: false"),
    ],
)
def test_sparse_gradients_over_several_gpus_are_refused_in_one_line(
    monkeypatch, name, section, match
):
    fake_machine(monkeypatch, gpus=4)
    for devices in (2, "auto", [0, 1]):
        params = with_trainer(name, devices=devices)
        params[name].update(section)
        with pytest.raises(ConfigError, match=match) as err:
            place(run_of(name, params))
        assert "\n" not in str(err.value) and "devices: 1" in str(err.value)


def test_dense_glove_and_one_gpu_word2vec_are_accepted(monkeypatch):
    fake_machine(monkeypatch, gpus=4)
    params = with_trainer("glove", devices=2)
    params["glove"].update(backend="torch", sparse_grad=False)
    assert place(run_of("glove", params)).world_size() == 2
    params = with_trainer("skipgram", devices=1)
    params["skipgram"]["backend"] = "torch"
    assert place(run_of("skipgram", params)).accelerator == "cuda"


def test_a_numba_run_asked_for_several_gpus_trains_in_one_cpu_process(monkeypatch):
    fake_machine(monkeypatch, gpus=4)
    where = place(run_of("cbow", with_trainer("cbow", devices=4, strategy="ddp")))
    assert (where.accelerator, where.devices, where.strategy) == ("cpu", 1, "auto")


def test_cpu_ddp_named_by_the_user_stays_as_set(monkeypatch):
    fake_machine(monkeypatch, gpus=1)
    params = with_trainer("cbow", accelerator="cpu", devices=2, strategy="ddp_spawn")
    where = place(run_of("cbow", params))
    assert (where.accelerator, where.devices, where.strategy) == ("cpu", 2, "ddp_spawn")


def test_an_explicit_deterministic_and_precision_are_kept(monkeypatch):
    fake_machine(monkeypatch, gpus=1)
    params = with_trainer("seq2seq", deterministic=True, precision="32-true")
    where = place(run_of("seq2seq", params))
    assert (where.deterministic, where.precision) == (True, "32-true")


WORD2VEC = {
    "family": "word2vec",
    "model": "cbow",
    "dim": 8,
    "window": 2,
    "negative": 2,
    "min_count": 1,
}


def test_with_a_gpu_faked_a_numba_run_trains_on_the_cpu_and_records_it(tmp_path, monkeypatch):
    """The whole train stage of a numba word2vec run, `accelerator: auto` on a machine that
    says it has a GPU: it trains (the numba kernel refuses any other device) and its stats
    record where."""
    fake_machine(monkeypatch, gpus=1)
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    root = make_project(tmp_path)
    section = {k: v for k, v in WORD2VEC.items() if k != "min_count"}
    section["trainer"] = {"max_epochs": 1, "accelerator": "auto", "precision": "auto"}
    params = {"seed": 3, "models": {"cbow": {"family": "word2vec", "data": "vocab/lm"}}}
    params["cbow"] = section
    from nlpzoo import lifecycle

    stats = lifecycle.train(params, "cbow", root)
    saved = json.loads((root / "models" / "cbow" / "train_stats.json").read_text())
    for record in (stats, saved):
        assert record["device"] == "cpu" and record["devices"] == 1
        assert record["precision"] == "32-true" and record["deterministic"] == "false"
