"""`make install`: the PyTorch requirement and its wheel index reach pip as separate arguments,
and the project is installed with the pipeline's packages only; `make test` adds the extra
`test`. A stand-in `python` in a throwaway venv folder records what make asks of it; nothing is
downloaded."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RECORDER = """#!/bin/sh
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$(dirname "$0")/calls"
"""


MAKE_VARS = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH", "TORCH_INDEX"}


def pip_calls(tmp_path: Path, *args: str, target: str = "install") -> list[list[str]]:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(RECORDER)
    python.chmod(0o755)
    # under `make test TORCH=...` the outer make's variables arrive in MAKEFLAGS; this make
    # must see only the arguments given here
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARS}
    subprocess.run(
        ["make", "-C", str(ROOT), "-B", target, f"VENV={venv}", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    lines = (venv / "bin" / "calls").read_text().splitlines()
    return [json.loads(line) for line in lines]


def torch_call(calls: list[list[str]]) -> list[str]:
    [call] = [c for c in calls if c[:2] == ["-m", "pip"] and "-e" not in c and "pip" not in c[2:]]
    return call[2:]


def test_the_default_is_pypis_torch(tmp_path):
    assert torch_call(pip_calls(tmp_path)) == ["install", "--quiet", "torch"]


def test_torch_index_cpu_takes_pytorchs_cpu_wheel_index(tmp_path):
    call = torch_call(pip_calls(tmp_path, "TORCH_INDEX=cpu", "TORCH=torch==2.13.0"))
    assert call == [
        "install",
        "--quiet",
        "torch==2.13.0",
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
    ]


def test_a_requirement_with_a_range_and_an_index_url_arrive_intact(tmp_path):
    url = "https://download.pytorch.org/whl/cu126"
    call = torch_call(pip_calls(tmp_path, f"TORCH_INDEX={url}", "TORCH=torch>=2.6,<3"))
    assert call == ["install", "--quiet", "torch>=2.6,<3", "--index-url", url]


def test_the_project_itself_is_installed_after_torch(tmp_path):
    calls = pip_calls(tmp_path, "TORCH_INDEX=cpu")
    installs = [c for c in calls if c[:3] == ["-m", "pip", "install"]]
    assert "torch" in installs[1] and installs[-1][-2:] == ["-e", "."]


def test_install_takes_the_pipelines_packages_only(tmp_path):
    calls = pip_calls(tmp_path)
    assert not [c for c in calls if any("[" in a for a in c)]  # no extra: no pytest, no gensim


def test_make_test_adds_the_test_extra_then_runs_pytest(tmp_path):
    calls = pip_calls(tmp_path, target="test")
    installs = [c for c in calls if c[:3] == ["-m", "pip", "install"]]
    assert installs[-2][-2:] == ["-e", "."]
    assert installs[-1][-2:] == ["-e", ".[test]"]
    assert calls[-1][:2] == ["-m", "pytest"]


def test_the_test_extra_holds_the_tests_tools_and_the_pipeline_none_of_them():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on Python 3.10
    [deps] = re.findall(r"(?ms)^dependencies = \[(.*?)^\]", text)
    [extra] = re.findall(r"(?m)^test = \[(.*)\]", text)
    requirement = r'"([A-Za-z0-9_.-]+)(?:>=([0-9]+))?[^"]*"'
    names = {name: floor for name, floor in re.findall(requirement, deps)}
    test = {name for name, _ in re.findall(requirement, extra)}
    assert {"pytest", "ruff", "gensim"} <= test
    assert not set(names) & test
    assert {"mlflow", "requests", "torch", "dvc"} <= set(names)
    assert int(names["mlflow"]) >= 3  # the logged-model API of the register stage
