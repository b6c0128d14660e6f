"""DVC's run cache on a toy project: params A -> B -> A trains A once. Every stage records its
time in timings/STAGE.json, a metric not cached (pipeline.py): a plain uncached out would keep
DVC from saving any stage to its run cache, and A would be trained again when it comes back."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from nlpzoo.params import SECTIONS
from nlpzoo.pipeline import ROOFLINE
from toy import PARAMS, write_lm_data

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, env: dict) -> str:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-6000:]}"
    return out


def _set_order(repo: Path, order: int) -> None:
    params = {k: v for k, v in PARAMS.items() if k in SECTIONS}
    params["models"] = {"ngram": {"family": "ngram", "data": "vocab/lm"}}
    params["ngram"] = {"order": order}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_params_a_then_b_then_a_again_comes_from_the_run_cache(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()
    for name in (".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    for folder in ("stages", "src"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ROOFLINE).parent.mkdir(parents=True)
    shutil.copy(ROOT / ROOFLINE, repo / ROOFLINE)  # the report's machine peak
    write_lm_data(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NLPZOO_LOG_LEVEL"] = "WARNING"
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "test@example.invalid"],
        ["git", "config", "user.name", "test"],
        ["dvc", "init", "-q"],
        ["dvc", "config", "core.analytics", "false"],
    ):
        _run(cmd, repo, env)

    stages = ["train-ngram", "evaluate-ngram"]
    seen = {}
    for step, order in enumerate((2, 3, 2)):
        _set_order(repo, order)
        _run([sys.executable, "-m", "nlpzoo", "pipeline"], repo, env)
        out = _run(["dvc", "repro", "--single-item", *stages], repo, env)
        ran = set(re.findall(r"Running stage '([^']+)'", out))
        cached = set(re.findall(r"Stage '([^']+)' is cached - skipping run", out))
        files = {
            str(p.relative_to(repo)): p.read_bytes()
            for folder in ("models", "eval", "metrics", "timings")
            for p in sorted((repo / folder).rglob("*"))
            if p.is_file()
        }
        seen[step] = (ran, cached, files)
    assert seen[0][0] == set(stages) and seen[1][0] == set(stages)
    assert seen[1][2]["metrics/ngram.json"] != seen[0][2]["metrics/ngram.json"]
    ran, cached, files = seen[2]
    assert ran == set(), "A came back and was run again"
    assert cached == set(stages)
    # A's outputs and A's own timing record, restored as they were
    assert files == seen[0][2]
    assert json.loads(files["timings/train-ngram.json"])["stage"] == "train-ngram"
    assert "timings/evaluate-ngram.json" in files and "models/ngram/config.json" in files
