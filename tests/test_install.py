"""`make install`: the PyTorch requirement and its wheel index reach pip as separate arguments.
A stand-in `python` in a throwaway venv folder records what make asks of it; nothing is
downloaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RECORDER = """#!/bin/sh
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$(dirname "$0")/calls"
"""


MAKE_VARS = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH", "TORCH_INDEX"}


def pip_calls(tmp_path: Path, *args: str) -> list[list[str]]:
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
        ["make", "-C", str(ROOT), "-B", "install", f"VENV={venv}", *args],
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
    assert "torch" in installs[1] and installs[-1][-2:] == ["-e", ".[dev]"]
