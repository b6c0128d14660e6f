"""Ctrl-C of the real `python -m nlpzoo repro --jobs 2` on a tiny project while a language model
trains: every child is gone within seconds, and the next repro retrains only the interrupted run,
from its checkpoint, to the metrics of an uninterrupted repro."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from nlpzoo.pipeline import ROOFLINE

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from test_pipeline import _tiny_corpus, _tiny_parallel  # noqa: E402

RUNS = ("ngram", "nnlm")
VOLATILE = ("seconds", "per_s", "mlflow_run_id")  # wall times and the MLflow run's id


def _project(repo: Path, inputs: Path) -> dict:
    repo.mkdir()
    inputs.mkdir()
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    for folder in ("stages", "src"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ROOFLINE).parent.mkdir(parents=True)
    shutil.copy(ROOT / ROOFLINE, repo / ROOFLINE)  # the report's machine peak
    _tiny_corpus(inputs / "corpus.txt", 1500, seed=1)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["mlflow"]["register"] = False  # the register stage is tested in test_pipeline.py
    params["lm"].update(
        source="text", files={"all": "inputs/corpus.txt"}, split_tokens=[9000, 2000]
    )
    # relative to the project, as a user writes them: a queued experiment's copy of the project
    # finds them in its own inputs/
    parallel = _tiny_parallel(inputs)
    params["mt"].update(
        source="parallel",
        files={k: [f"inputs/{Path(f).name}" for f in v] for k, v in parallel.items()},
    )
    params["vocab"]["lm"]["min_count"] = 2
    params["vocab"]["mt"]["vocab_size"] = 40
    params["trainer"].update(accelerator="cpu", devices=1, max_epochs=2)
    for run in set(params["models"]) - set(RUNS):
        del params["models"][run], params[run]
    params["nnlm"].update(
        context_size=2,
        emb_dim=8,
        hidden_dim=16,
        batch_size=16,
        cutoffs=[10, 20],  # the adaptive output's clusters, within the 37-word vocabulary
        trainer={"max_epochs": 3},
    )
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(repo / "src")
    env["NLPZOO_LOG_LEVEL"] = "WARNING"
    for cmd in (
        [sys.executable, "-m", "nlpzoo", "pipeline"],
        ["dvc", "init", "-q", "--no-scm"],
        ["dvc", "config", "core.analytics", "false"],
    ):
        subprocess.run(cmd, cwd=repo, env=env, check=True, capture_output=True)
    return env


def _repro(repo: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nlpzoo", "repro", "--jobs", "2"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(repo: Path, env: dict) -> str:
    proc = _repro(repo, env)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-6000:]
    return out


def _metrics(repo: Path) -> dict:
    return {
        run: {
            k: v
            for k, v in json.loads((repo / "metrics" / f"{run}.json").read_text()).items()
            if not k.endswith(VOLATILE)
        }
        for run in RUNS
    }


def _ran(out: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", out))


def _children(pid: int) -> list[int]:
    """Every process whose session is not ours but whose ancestry leads to `pid`'s children."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def test_ctrl_c_of_make_repro_then_the_next_one_resumes(tmp_path):
    plain, repo = tmp_path / "plain", tmp_path / "repo"
    env = _project(plain, plain / "inputs")  # inside the project, where DVC watches it
    _finish(plain, env)
    expected = _metrics(plain)

    env = _project(repo, repo / "inputs")
    proc = _repro(repo, env)
    ckpt = repo / "checkpoints" / "nnlm" / "resume.ckpt"
    deadline = time.monotonic() + 300
    while not ckpt.exists():  # the first epoch ended: nnlm trains its second
        assert proc.poll() is None, proc.communicate()[0][-6000:]
        assert time.monotonic() < deadline, "nnlm never saved a checkpoint"
        time.sleep(0.02)
    groups = [p for p in _children(proc.pid) if os.getpgid(p) == p]  # the dvc children
    assert groups
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)

    def alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True

    while any(alive(g) for g in groups):
        assert time.monotonic() - sent < 20, "a child group outlived the interrupt"
        time.sleep(0.05)
    print(f"SIGINT during train-nnlm: every child group gone {time.monotonic() - sent:.2f} s after")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out[-6000:]
    assert "interrupted (SIGINT)" in out.strip().splitlines()[-1]
    assert not (repo / "metrics" / "nnlm.json").exists()
    finished = set(yaml.safe_load((repo / "dvc.lock").read_text())["stages"])
    # the data stages ran before any run; the other arm (ngram) may or may not have finished
    assert {"corpus@lm", "prepare@lm", "vocab@lm"} <= finished

    again = _finish(repo, env)
    print(f"the next repro ran: {sorted(_ran(again))}")
    assert not _ran(again) & finished, again  # nothing that had finished reran
    assert {"train-nnlm", "evaluate-nnlm", "report"} <= _ran(again)
    assert "Restoring states from the checkpoint" in again, again  # nnlm resumed
    assert _metrics(repo) == expected
