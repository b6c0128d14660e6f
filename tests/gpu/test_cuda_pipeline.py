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
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from nlpzoo.families import FAMILIES
from nlpzoo.pipeline import ROOFLINE
from projects import TINY_MT, WORDS
from toy import TINY

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROOT = Path(__file__).resolve().parents[2]
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


def _run(cmd: list[str], cwd: Path, env: dict) -> str:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-8000:]}"
    return out


def tiny_corpus(path: Path, n_sentences: int, seed: int) -> None:
    """Sentences from a small grammar (about 37 words): enough structure to learn something."""
    rng = random.Random(seed)
    subj = ["the cat", "a dog", "the old man", "my friend", "she", "he", "the children"]
    verb = ["sees", "likes", "finds", "eats", "reads", "wants"]
    obj = ["the ball", "a book", "some bread", "the red car", "an apple", "the river"]
    tail = ["", "today", "again", "in the park", "at night"]
    lines = [
        " ".join(
            filter(
                None, [rng.choice(subj), rng.choice(verb), rng.choice(obj), rng.choice(tail), "."]
            )
        )
        for _ in range(n_sentences)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tiny_parallel(folder: Path) -> dict:
    """Aligned German-English word lists, 300 / 20 / 20 pairs: `mt.files` of a parallel source."""
    rng = random.Random(0)
    files = {}
    for split, n in (("train", 300), ("valid", 20), ("test", 20)):
        src, tgt = [], []
        for _ in range(n):
            ks = rng.sample(sorted(WORDS), 3)
            src.append("der " + " ".join(ks))
            tgt.append("the " + " ".join(WORDS[k] for k in ks))
        (folder / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        files[split] = [str(folder / f"{split}.de"), str(folder / f"{split}.en")]
    return files


def tiny_project_params(inputs: Path, accelerator: str = "auto") -> dict:
    """The project's params.yaml on the tiny corpora of `inputs`, every run kept, each at toy
    sizes (tests/toy.py's TINY, translation tests/projects.py's TINY_MT) for one epoch, on
    `accelerator`, one device per run."""
    tiny_corpus(inputs / "corpus.txt", 1500, seed=1)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["lm"].update(
        source="text", files={"all": str(inputs / "corpus.txt")}, split_tokens=[9000, 2000]
    )
    params["mt"].update(source="parallel", files=tiny_parallel(inputs))
    params["vocab"]["lm"]["min_count"] = 2
    params["vocab"]["mt"]["vocab_size"] = 40
    params["cooccur"]["window"] = 3
    params["trainer"].update(accelerator=accelerator, devices=1, max_epochs=1)
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
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    for folder in ("stages", "src"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ROOFLINE).parent.mkdir(parents=True)
    shutil.copy(ROOT / ROOFLINE, repo / ROOFLINE)  # the report's machine peak
    params = tiny_project_params(inputs, accelerator)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(repo / "src"), env.get("PYTHONPATH", "")) if p
    )
    env["NLPZOO_LOG_LEVEL"] = "WARNING"
    _run([sys.executable, "-m", "nlpzoo", "pipeline"], repo, env)
    _run(["dvc", "init", "-q", "--no-scm"], repo, env)
    _run(["dvc", "config", "core.analytics", "false"], repo, env)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict, str]:
    """The tiny project after `python -m nlpzoo repro` (default jobs and GPU slots): its root,
    its params and the command's output."""
    repo = tmp_path_factory.mktemp("project")
    env = make_project(repo, tmp_path_factory.mktemp("inputs"))
    out = _run([sys.executable, "-m", "nlpzoo", "repro"], repo, env)
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
