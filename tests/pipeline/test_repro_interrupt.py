"""Ctrl-C of the real `python -m nlpzoo repro --jobs 2` on a tiny project while a language model
trains: every child is gone within seconds, and the next repro retrains only the interrupted run,
from its checkpoint, to the metrics of an uninterrupted repro."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from toy import pipeline_env, reference_params, stages_ran, write_pipeline

RUNS = ("ngram", "nnlm")
VOLATILE = ("seconds", "per_s", "mlflow_run_id")  # wall times and the MLflow run's id

pytestmark = pytest.mark.xdist_group("reference")


def _project(repo: Path) -> dict:
    """The reference toy pipeline's ngram and nnlm (tests/pipeline/conftest.py), its user's files
    inside the project, without the register stages, ready to reproduce: its environment."""
    params = reference_params(repo / "inputs")
    params["mlflow"]["register"] = False  # the register stage is tested in test_pipeline.py
    for run in set(params["models"]) - set(RUNS):
        del params["models"][run], params[run]
    env = pipeline_env(PYTHONPATH=str(repo / "src"))
    write_pipeline(repo, params, env)
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


def test_ctrl_c_of_make_repro_then_the_next_one_resumes(tmp_path, reference):
    """The next repro ends with the metrics of the reference's uninterrupted plain `dvc repro`
    (tests/pipeline/conftest.py), whose ngram and nnlm these are."""
    expected = _metrics(reference.root)
    repo = tmp_path / "repo"
    env = _project(repo)
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
    print(f"the next repro ran: {sorted(stages_ran(again))}")
    assert not stages_ran(again) & finished, again  # nothing that had finished reran
    assert {"train-nnlm", "evaluate-nnlm", "report"} <= stages_ran(again)
    assert "Restoring states from the checkpoint" in again, again  # nnlm resumed
    assert _metrics(repo) == expected
