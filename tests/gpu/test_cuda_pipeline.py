"""The whole pipeline on a CUDA GPU, at tiny sizes: every run of params.yaml trained, evaluated and
registered by `python -m nlpzoo repro` with its default slots, then the mixture and the report.

The project keeps all the runs of the project's params.yaml, each shrunk to toy sizes and one
epoch, with `trainer.accelerator: auto`: `nlpzoo.placement` puts the CPU-only kernels (n-gram,
SVD, the numba word2vec and GloVe) on the CPU and every other run on the GPU, and each run's
metrics record where it trained. A translation model trained on the GPU then scores the same
perplexity on the CPU as on the GPU, and as its evaluate stage recorded."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch
import yaml

from nlpzoo.families import FAMILIES
from toy import PARAMS, TINY, TINY_MT, pipeline_env, pipeline_params, run_checked, write_pipeline

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CPU_RUNS = ("ngram", "svd", "cbow", "skipgram", "glove")  # kernels that run only on the CPU
GPU_RUNS = (
    "nnlm",
    "rnn_lm",
    "lstm_lm",
    "transformer_lm",
    "seq2seq",
    "attention",
    "transformer",
    "decoder_mt",
)
MT_RUN = "transformer"  # the run scored again on both devices
TIMEOUT = 1200  # seconds for the whole `python -m nlpzoo repro`


def tiny_project_params(inputs: Path, accelerator: str = "auto") -> dict:
    """The project's params.yaml on the toy corpora written to `inputs` (`toy.pipeline_params`),
    every run kept, each at toy sizes (toy.py's TINY, translation TINY_MT) for one epoch, on
    `accelerator`, one device per run."""
    params = pipeline_params(inputs, PARAMS["models"], relative=False)
    params["trainer"].update(accelerator=accelerator, max_epochs=1)
    for run, spec in params["models"].items():
        section = params[run]
        mt = FAMILIES[spec["family"]].task == "mt"
        for key, value in (TINY_MT if mt else TINY).items():
            if key in section:
                section[key] = value
        if "cutoffs" in section:
            section["cutoffs"] = [10, 20]  # the adaptive output's clusters, within the vocabulary
        if "beam_size" in section:
            section["beam_size"] = 3
        if "trainer" in section:  # its own epochs, gradient clipping and precision
            section["trainer"]["max_epochs"] = 1
    return params


def make_project(repo: Path, inputs: Path, accelerator: str = "auto") -> dict:
    """A copy of the project's pipeline in `repo` on tiny data (DVC without git); returns the
    environment its commands run in."""
    pythonpath = os.pathsep.join(p for p in (str(repo / "src"), os.environ.get("PYTHONPATH")) if p)
    env = pipeline_env(PYTHONPATH=pythonpath)
    write_pipeline(repo, tiny_project_params(inputs, accelerator), env)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict, str]:
    """The tiny project after `python -m nlpzoo repro` (default jobs and GPU slots): its root,
    its params and the command's output."""
    repo = tmp_path_factory.mktemp("project")
    env = make_project(repo, tmp_path_factory.mktemp("inputs"))
    out = run_checked([sys.executable, "-m", "nlpzoo", "repro"], repo, env, timeout=TIMEOUT)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    return repo, params, out


def _metrics(repo: Path, run: str) -> dict:
    path = repo / "metrics" / f"{run}.json"
    assert path.is_file(), f"no {path.relative_to(repo)}"
    return json.loads(path.read_text())


def _precision(params: dict, run: str) -> str:
    """The precision a GPU run of `params` trains in: its own or the shared `trainer.precision`,
    `auto` as placement resolves it on this GPU."""
    own = (params[run].get("trainer") or {}).get("precision")
    chosen = own or params["trainer"]["precision"]
    if chosen != "auto":
        return str(chosen)
    return "bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true"


def test_the_project_keeps_every_run(project):
    _, params, _ = project
    assert set(params["models"]) == set(CPU_RUNS) | set(GPU_RUNS)
    assert params["trainer"]["accelerator"] == "auto"


def test_every_run_trains_on_its_device(project):
    repo, params, _ = project
    for run in (*CPU_RUNS, *GPU_RUNS):
        m = _metrics(repo, run)
        expected = "cuda" if run in GPU_RUNS else "cpu"
        assert m["device"] == expected, (run, m.get("device"))
        stats = json.loads((repo / "models" / run / "train_stats.json").read_text())
        assert stats["device"] == expected, run
        if run in GPU_RUNS:
            assert m["devices"] == 1 and m["precision"] == _precision(params, run), (run, m)
        for stage in ("train", "evaluate", "register"):
            assert (repo / "timings" / f"{stage}-{run}.json").is_file(), (stage, run)
        assert (repo / "registry" / f"{run}.json").is_file(), run
        if m["task"] == "lm":
            assert 1.0 < m["test_ppl"] < 1000 and math.isfinite(m["valid_ppl"]), (run, m)
        elif m["task"] == "mt":
            assert {"test_ppl", "bleu", "bleu_beam", "chrf_beam"} <= set(m), run
            assert math.isfinite(m["test_ppl"]), (run, m)
        else:
            assert 0.0 <= m["analogy_coverage"] <= 1.0 and "ws353_rho" in m, (run, m)


def test_the_scheduler_planned_the_gpu_runs_on_the_gpu(project):
    _, _, out = project
    lines = [line for line in out.splitlines() if "longest first:" in line]
    assert lines, out[-4000:]
    entries = lines[-1].split("longest first:", 1)[1].strip().split(", ")
    planned = {
        e.split(" (")[0]: e.split(" (")[1].rstrip(")") if " (" in e else "cpu" for e in entries
    }
    assert planned == {
        **dict.fromkeys(CPU_RUNS, "cpu"),
        **dict.fromkeys(GPU_RUNS, "cuda"),
    }, lines[-1]


def test_the_report_names_every_run(project):
    repo, _, _ = project
    report = (repo / "reports" / "report.md").read_text()
    for run in (*CPU_RUNS, *GPU_RUNS):
        assert f"| {run} |" in report, run
    assert "| cuda |" in report  # the cost table's device column
    mixtures = json.loads((repo / "metrics" / "mixtures.json").read_text())["runs"]
    assert set(mixtures) == {"nnlm", "rnn_lm", "lstm_lm", "transformer_lm"}


def test_a_gpu_trained_translation_model_scores_the_same_on_the_cpu(project):
    from nlpzoo.data.mt import Codec, load_split
    from nlpzoo.tasks import load_model
    from nlpzoo.tasks.mt import perplexity

    repo, params, _ = project
    run_dir = repo / "models" / MT_RUN
    codec = Codec(run_dir / "spm.model")
    test = load_split(repo / "data" / params["models"][MT_RUN]["data"], "test", codec)
    ppl = {}
    for device in ("cpu", "cuda"):
        model = load_model(run_dir, device=device)
        assert next(model.parameters()).device.type == device
        ppl[device] = perplexity(model, test)
    assert ppl["cuda"] == pytest.approx(ppl["cpu"], rel=1e-4)
    # the evaluate stage scored it on the GPU (metrics rounded to 4 decimals)
    recorded = _metrics(repo, MT_RUN)["test_ppl"]
    assert recorded == pytest.approx(ppl["cuda"], rel=1e-4, abs=1e-4)
