"""Interrupts of `python -m nlpzoo repro --jobs 2` with the real `dvc repro` children, on a
pipeline of the project's shape (data stages, two runs' arms, mixture and report) whose stages
are a small script: SIGINT, SIGTERM, SIGHUP and SIGKILL of the parent while one run's training
stage runs end every child process group within seconds, and the next repro finishes with the
outputs of an uninterrupted one without rerunning a stage that had finished."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RUNS = ("b", "a")  # the queue: b (the slow one) first, so both arms start together

STEP = r'''
"""One stage: its output is a digest of its name and its deps; the stage named by SLOW_STAGE
waits (a training run) until it ends or a Ctrl-C reaches it."""
import hashlib, json, os, sys, time
from pathlib import Path

name, deps = sys.argv[1], sys.argv[2:]
log = Path("log")
log.mkdir(exist_ok=True)
(log / f"{name}.pids").write_text(json.dumps({"pid": os.getpid(), "pgid": os.getpgrp()}))
with open(log / f"{name}.runs", "a") as f:
    f.write("start\n")
try:
    if os.environ.get("SLOW_STAGE") == name:
        (log / f"{name}.started").write_text("")
        time.sleep(120)
except KeyboardInterrupt:
    with open(log / f"{name}.runs", "a") as f:
        f.write("interrupted\n")
    sys.exit(130)
digest = hashlib.sha256(name.encode())
for dep in deps:
    digest.update(Path(dep).read_bytes())
out = Path("out") / name
out.parent.mkdir(exist_ok=True)
out.write_text(json.dumps({"stage": name, "digest": digest.hexdigest()}))
'''

DRIVER = (
    "import sys; from pathlib import Path; from nlpzoo import repro; "
    f"repro.schedule = lambda params, root: list({RUNS!r}); "
    "repro._prepare_tracking = lambda params: None; "
    "repro.run_device = lambda params, root, name: 'cpu'; "
    "sys.exit(repro.run({}, Path.cwd(), 2))"
)


def _stages() -> dict:
    chain = [("corpus", []), ("prepare", ["corpus"]), ("vocab", ["prepare"])]
    chain += [("cooccur", ["vocab"])]
    for run in sorted(RUNS):
        chain += [(f"train-{run}", ["cooccur"]), (f"evaluate-{run}", [f"train-{run}"])]
    chain += [("mixture", [f"evaluate-{r}" for r in sorted(RUNS)]), ("report", ["mixture"])]
    stages = {}
    for name, deps in chain:
        paths = [f"out/{d}" for d in deps]
        stages[name] = {
            "cmd": " ".join([sys.executable, "step.py", name, *paths]),
            "deps": ["step.py", *paths],
            "outs": [f"out/{name}"],
        }
    return {"stages": stages}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    return env


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The stand-in pipeline, DVC initialised, never reproduced: each test reproduces a copy."""
    path = tmp_path_factory.mktemp("signals") / "p"
    path.mkdir()
    (path / "step.py").write_text(textwrap.dedent(STEP))
    (path / "dvc.yaml").write_text(yaml.safe_dump(_stages(), sort_keys=False))
    for cmd in (["dvc", "init", "-q", "--no-scm"], ["dvc", "config", "core.analytics", "false"]):
        subprocess.run(cmd, cwd=path, env=_env(), check=True, capture_output=True)
    return path


def _project(path: Path, template: Path) -> Path:
    """A copy of the stand-in pipeline at `path`."""
    return Path(shutil.copytree(template, path, symlinks=True))


def _repro(root: Path, **env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        cwd=root,
        env={**_env(), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(root: Path) -> str:
    proc = _repro(root)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return out


def _outputs(root: Path) -> dict:
    return {p.name: p.read_text() for p in sorted((root / "out").iterdir())}


def _runs(root: Path, stage: str) -> list[str]:
    path = root / "log" / f"{stage}.runs"
    return path.read_text().split() if path.exists() else []


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, template) -> dict:
    root = _project(tmp_path_factory.mktemp("plain") / "p", template)
    _finish(root)
    return _outputs(root)


def _interrupt(root: Path, sig: int) -> tuple[subprocess.Popen, float]:
    """Starts repro with train-b slow, sends `sig` once train-b runs and run a has finished;
    returns the parent and the seconds from the
    signal until every one of them was gone."""
    proc = _repro(root, SLOW_STAGE="train-b")
    log = root / "log"

    def ready() -> bool:
        assert proc.poll() is None, proc.communicate()[0]
        if not (log / "train-b.started").exists() or not (root / "out" / "evaluate-a").exists():
            return False
        return not _alive(json.loads((log / "evaluate-a.pids").read_text())["pgid"])

    _wait_for(ready, 60, "train-b to run and run a to finish")
    pids = [json.loads(p.read_text()) for p in log.glob("*.pids")]
    groups = sorted({p["pgid"] for p in pids})
    slow = json.loads((log / "train-b.pids").read_text())
    assert slow["pgid"] != os.getpgrp() and slow["pgid"] != proc.pid  # its own group
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    _wait_for(lambda: not any(_alive(g) for g in groups), 20, "the child groups to end")
    return proc, time.monotonic() - sent


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name
)
def test_a_signal_stops_every_child_and_the_next_repro_continues(
    tmp_path, template, uninterrupted, sig
):
    root = _project(tmp_path / "p", template)
    proc, seconds = _interrupt(root, sig)
    out, _ = proc.communicate(timeout=30)
    print(f"{signal.Signals(sig).name}: every child group gone {seconds:.2f} s after the signal")
    assert seconds < 10
    assert proc.returncode == 128 + sig, out
    name = signal.Signals(sig).name
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"interrupted ({name}): stopped 1 running stage;"), out
    assert "Traceback" not in out, out
    # SIGINT reached the training stage, which stopped on its own (a run saves its checkpoint)
    assert _runs(root, "train-b") == ["start", "interrupted"]

    again = _finish(root)
    assert _outputs(root) == uninterrupted
    for stage in ("corpus", "prepare", "vocab", "cooccur", "train-a", "evaluate-a"):
        assert _runs(root, stage) == ["start"], (stage, again)  # nothing finished reran
        assert f"Running stage '{stage}'" not in again
    assert _runs(root, "train-b") == ["start", "interrupted", "start"]
    assert "Running stage 'train-b'" in again and "Running stage 'report'" in again


def test_the_children_end_when_the_parent_is_killed(tmp_path, template, uninterrupted):
    root = _project(tmp_path / "p", template)
    proc, seconds = _interrupt(root, signal.SIGKILL)
    proc.communicate(timeout=30)
    print(f"SIGKILL: every child group gone {seconds:.2f} s after the signal")
    assert seconds < 10 and proc.returncode == -signal.SIGKILL
    assert _runs(root, "train-b") == ["start", "interrupted"]  # the watchdog's SIGINT
    _finish(root)
    assert _outputs(root) == uninterrupted
    assert _runs(root, "train-a") == ["start"]


def test_every_stage_runs_once_under_force(tmp_path, template, uninterrupted):
    root = _project(tmp_path / "p", template)
    _finish(root)
    shutil.rmtree(root / "log")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER.replace(
                "repro.run({}, Path.cwd(), 2)", "repro.run({}, Path.cwd(), 2, ['--force'])"
            ),
        ],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for stage in _stages()["stages"]:
        assert _runs(root, stage) == ["start"], stage
    assert _outputs(root) == uninterrupted


# The stage command: Python's own SIGINT handler (KeyboardInterrupt, and an exit by SIGINT when it
# goes unhandled) is in place before its code runs, and the handler is set again explicitly before
# it says it is ready; "ready" is written atomically (a rename), so the test never sends SIGINT to
# a command still starting up (a KeyboardInterrupt during start-up exits 1, not by SIGINT).
COMMAND = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
ready = sys.argv[1]
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(ready + ".tmp", ready)
time.sleep(60)
"""

# The dvc process leading the group: its SIGINT handler is set before it starts the command, and
# it waits on the command until the command ends.
LEADER = r"""
import signal, subprocess, sys
from pathlib import Path
out = Path(sys.argv[1])
signal.signal(signal.SIGINT, lambda *_: (out / "leader-sigint").write_text(""))
cmd = subprocess.Popen([sys.executable, "-c", sys.argv[2], str(out / "ready")])
(out / "command").write_text(str(cmd.wait()))  # as dvc: the command's end ends it
"""


def test_an_interrupt_reaches_the_stage_command_not_the_dvc_process(tmp_path):
    """dvc writes dvc.lock without protection from SIGINT (it ignores it only while a command
    runs), so stop_groups interrupts the command and lets dvc exit on its own."""
    from nlpzoo.repro import stop_groups

    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER, str(tmp_path), COMMAND], start_new_session=True
    )
    _wait_for(lambda: (tmp_path / "ready").exists(), 30, "the stage command to be ready")
    t0 = time.monotonic()
    stop_groups([leader.pid], poll=leader.poll)
    assert time.monotonic() - t0 < 3  # no SIGTERM or SIGKILL was needed
    assert leader.wait(timeout=5) == 0
    assert (tmp_path / "command").read_text() == str(-signal.SIGINT)  # the command: SIGINT
    assert not (tmp_path / "leader-sigint").exists()  # the leader: none
