"""`trainer.precision: auto`: bf16-mixed where the device multiplies bf16 natively, else
32-true; the resolved value trains, is recorded, and is part of the resume fingerprint."""

from __future__ import annotations

import json
import signal

import pytest
import pytorch_lightning as pl
import torch

from interrupts import FirstStep, KillAt, train_with
from nlpzoo import lifecycle
from nlpzoo.config import build
from nlpzoo.errors import ConfigError
from nlpzoo.params import TrainerConfig
from nlpzoo.tracking import Tracker
from nlpzoo.training import trainer as trainer_module
from nlpzoo.training.trainer import cpu_flags, resolve_precision
from toy import (
    inactive,
    make_project,
    resume_params,
    tiny_params,
    write_benchmarks,
    write_lm_data,
)

CPU = TrainerConfig(accelerator="cpu")
ZEN3 = {"fpu", "sse4_2", "avx", "avx2", "fma"}  # an AMD EPYC Zen 3: AVX2, no AVX-512


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (ZEN3 | {"avx512f", "avx512_bf16"}, "bf16-mixed"),  # Cooper Lake, Zen 4
        (ZEN3 | {"amx_tile", "amx_bf16"}, "bf16-mixed"),  # Sapphire Rapids
        (ZEN3, "32-true"),
        (ZEN3 | {"avx512f", "avx512bw"}, "32-true"),  # AVX-512 without its bf16 extension
        (set(), "32-true"),  # no /proc/cpuinfo
    ],
)
def test_auto_on_a_cpu_follows_its_native_bf16_flags(flags, expected):
    assert CPU.precision == "auto"  # the default
    assert resolve_precision(CPU, flags=flags) == expected


def test_auto_on_a_gpu_asks_cuda_and_ignores_the_cpu():
    gpu = TrainerConfig(accelerator="gpu")
    assert resolve_precision(gpu, flags=ZEN3, cuda_bf16=True) == "bf16-mixed"
    assert resolve_precision(gpu, flags={"avx512_bf16"}, cuda_bf16=False) == "32-true"


def test_auto_on_a_gpu_that_cuda_cannot_be_asked_about_is_32_true(monkeypatch):
    def no_cuda():
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", no_cuda)
    assert resolve_precision(TrainerConfig(accelerator="gpu")) == "32-true"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_precision(TrainerConfig(accelerator="gpu")) == "bf16-mixed"


@pytest.mark.parametrize("value", ["32-true", "bf16-mixed", "16-mixed", 16])
def test_an_explicit_precision_is_kept(value):
    for flags in (ZEN3, {"amx_bf16"}):
        cfg = TrainerConfig(accelerator="cpu", precision=value)
        assert resolve_precision(cfg, flags=flags) == value
    assert resolve_precision(TrainerConfig(accelerator="gpu", precision=value), cuda_bf16=True) == (
        value
    )


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu avx2 avx512_bf16\n"
    )
    assert cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "absent") == set()


def test_validate_takes_auto_and_refuses_a_precision_lightning_does_not_know():
    assert build(TrainerConfig, {"precision": "auto"}, "trainer").precision == "auto"
    assert build(TrainerConfig, {}, "trainer").precision == "auto"
    with pytest.raises(ConfigError, match=r"^trainer: key 'precision' must be auto or one of"):
        build(TrainerConfig, {"precision": "bf16-mixd"}, "trainer")


def _bf16_cpu(monkeypatch) -> None:
    monkeypatch.setattr(trainer_module, "cpu_flags", lambda cpuinfo=None: ZEN3 | {"avx512_bf16"})


def test_a_run_trains_records_and_logs_the_resolved_precision(tmp_path, monkeypatch):
    """On a CPU with native bf16, `auto` trains in bf16-mixed (Lightning's precision), the run's
    stats and metrics say so and its MLflow params hold the resolved value; the weights saved
    stay float32 and the evaluation scores them in float32."""
    run = "nnlm"
    root = make_project(tmp_path)
    params = resume_params(run, precision="auto", max_epochs=1)
    logged, seen = {}, {}

    def start(cls, name, family, tracking_params, **kwargs):
        logged.update(tracking_params)
        return cls(None, None, "-", name)

    class Precision(pl.Callback):  # records the precision the Trainer runs under
        def on_train_start(self, trainer, pl_module) -> None:
            seen["precision"] = trainer.precision

    monkeypatch.setattr(Tracker, "start", classmethod(start))
    _bf16_cpu(monkeypatch)
    stats = train_with(monkeypatch, params, run, root, Precision())
    assert seen["precision"] == "bf16-mixed"
    assert stats["precision"] == "bf16-mixed"
    assert json.loads((root / "models" / run / "train_stats.json").read_text())["precision"] == (
        "bf16-mixed"
    )
    assert logged["trainer"]["precision"] == "bf16-mixed"
    blob = torch.load(root / "models" / run / "model.pt", weights_only=True)
    assert {t.dtype for t in blob["state_dict"].values()} == {torch.float32}

    write_benchmarks(root)
    metrics = lifecycle.evaluate(params, run, root)
    assert metrics["precision"] == "bf16-mixed"
    assert json.loads((root / "metrics" / f"{run}.json").read_text())["precision"] == "bf16-mixed"


def test_an_fp32_checkpoint_is_not_resumed_in_bf16(tmp_path, monkeypatch, caplog):
    """The fingerprint holds the resolved precision: a run killed while training in 32-true, then
    rerun with `auto` on a CPU where it resolves to bf16-mixed, starts again; rerun where it
    resolves to 32-true, it resumes (as a run that said 32-true would)."""
    run = "nnlm"
    params = resume_params(run, precision="auto")
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    for resolved, expected in (("bf16-mixed", [0, 0]), ("32-true", [0, 40])):
        root = make_project(tmp_path / resolved)
        starts: list[int] = []
        handler = signal.getsignal(signal.SIGINT)
        with pytest.raises((KeyboardInterrupt, SystemExit)):  # auto -> 32-true (conftest.py)
            train_with(monkeypatch, params, run, root, KillAt(47), FirstStep(starts))
        signal.signal(signal.SIGINT, handler)
        with monkeypatch.context() as m:
            if resolved == "bf16-mixed":
                _bf16_cpu(m)
            with caplog.at_level("WARNING"):
                stats = train_with(monkeypatch, params, run, root, FirstStep(starts))
        assert starts == expected, resolved
        assert stats["precision"] == resolved
    assert "written for other params or data; training from the start" in caplog.text


def test_a_run_on_its_own_kernel_records_float32(tmp_path, monkeypatch):
    """word2vec's in-place kernel computes in float32: its run says 32-true even where `auto`
    resolves to bf16-mixed for the runs that train through autograd."""
    run = "cbow"
    write_lm_data(tmp_path)
    params = tiny_params(run)
    params[run]["trainer"].update(precision="auto", max_epochs=1)
    monkeypatch.setattr(
        Tracker, "start", classmethod(lambda cls, name, *a, **k: cls(None, None, "-", name))
    )
    _bf16_cpu(monkeypatch)
    assert resolve_precision(TrainerConfig(accelerator="cpu", precision="auto")) == "bf16-mixed"
    stats = lifecycle.train(params, run, tmp_path)
    assert stats["precision"] == "32-true"
