"""`python -m nlpzoo repro --jobs N`: the order of the runs and the three steps (no real DVC)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
import yaml

from nlpzoo import repro

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def _record(root: Path, stage: str, seconds: float) -> None:
    (root / "timings").mkdir(exist_ok=True)
    (root / "timings" / f"{stage}.json").write_text(json.dumps({"seconds": seconds}))


def test_schedule_without_records_puts_translation_first_then_lms(params, tmp_path):
    order = repro.schedule(params, tmp_path)
    tasks = [repro.parse_models(params)[r].task for r in order]
    assert tasks == sorted(tasks, key=repro.TASK_ORDER.get)
    assert set(order) == set(repro.parse_models(params))
    params["attention"]["trainer"]["max_epochs"] = 99  # more epochs: earlier among its task
    assert repro.schedule(params, tmp_path)[0] == "attention"


def test_schedule_uses_the_recorded_wall_times_longest_first(params, tmp_path):
    _record(tmp_path, "train-svd", 500)
    _record(tmp_path, "evaluate-svd", 100)
    _record(tmp_path, "train-nnlm", 550)
    _record(tmp_path, "train-seq2seq", 20)
    order = repro.schedule(params, tmp_path)
    assert order[:3] == ["svd", "nnlm", "seq2seq"]  # 600, 550, 20 s; unrecorded runs after
    assert repro.recorded_seconds(tmp_path, "svd") == 600
    assert repro.recorded_seconds(tmp_path, "glove") is None
    for bad in (float("nan"), float("inf"), -5):  # a hand-edited record is no record
        _record(tmp_path, "train-glove", bad)
        assert repro.recorded_seconds(tmp_path, "glove") is None


def test_schedule_skips_disabled_runs(params, tmp_path):
    params["models"]["svd"]["enabled"] = False
    assert "svd" not in repro.schedule(params, tmp_path)


def _fake_steps(monkeypatch, root: Path, arm) -> list[list[str]]:
    """run() with the dvc commands recorded instead of run and `arm` as each run's arm."""
    shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
    calls: list[list[str]] = []
    monkeypatch.setattr(repro._Children, "call", lambda self, cmd, cwd=None: calls.append(cmd) or 0)
    monkeypatch.setattr(repro, "_prepare_tracking", lambda params: None)
    monkeypatch.setattr(repro, "_run_arm", arm)
    return calls


def test_run_builds_data_first_then_runs_side_by_side_then_the_rest(params, tmp_path, monkeypatch):
    together = threading.Barrier(2, timeout=10)  # the first two arms must run at the same time
    lock = threading.Lock()

    def arm(run, console, extra, children, stages):
        with lock:
            first_two = len([c for c in calls if c[0] == "arm"]) < 2
            calls.append(["arm", run])
        if first_two:
            together.wait()  # run one at a time, this raises: a failed run
        assert stages == [f"train-{run}", f"evaluate-{run}", f"register-{run}"]
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=2) == 0
    assert calls[0] == ["dvc", "--wait-for-lock", "repro", *repro.DATA_STAGES]
    # each run's register stage is in its arm: the final step is what no arm reproduces
    assert calls[-1] == ["dvc", "--wait-for-lock", "repro", "--single-item", "mixture", "report"]
    arms = [c[1] for c in calls if c[0] == "arm"]
    assert sorted(arms) == sorted(repro.parse_models(params))


def test_force_reaches_each_stage_once(params, tmp_path, monkeypatch):
    def arm(run, console, extra, children, stages):
        calls.append(repro._dvc(["--single-item", *extra, *stages]))
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=2, extra=["--force"]) == 0
    assert all("--force" in c for c in calls)
    # the data step's targets bring no other stage (they are the graph's roots and their chain);
    # every other command reproduces its targets alone
    assert all("--single-item" in c for c in calls[1:])
    targets = [t for c in calls for t in c[3:] if not t.startswith("-")]
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    assert sorted(targets) == sorted(stages)  # each once: none forced twice, none left out


def test_a_failed_run_stops_the_queue_and_the_final_step(params, tmp_path, monkeypatch):
    ran: list[str] = []
    first, second = repro.schedule(params, tmp_path)[:2]

    def arm(run, console, extra, children, stages):
        ran.append(run)
        if run == first:  # the first in the queue fails at once; the other worker is busy
            return 1
        time.sleep(0.2)
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=1 + 1) == 1
    assert first in ran and set(ran) <= {first, second}  # at most the other worker's run began
    assert calls == [["dvc", "--wait-for-lock", "repro", *repro.DATA_STAGES]]


def test_a_worker_that_raises_is_a_failed_run(params, tmp_path, monkeypatch, capsys):
    def arm(run, console, extra, children, stages):
        if run == "seq2seq":
            raise RuntimeError("pipe broke")
        time.sleep(0.2)
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=2) == 1
    assert len(calls) == 1  # no final step
    out = capsys.readouterr().out
    assert "[seq2seq] error: RuntimeError: pipe broke" in out and "failed: seq2seq" in out


def test_one_job_is_plain_dvc_repro(params, tmp_path, monkeypatch):
    calls = _fake_steps(monkeypatch, tmp_path, None)
    assert repro.run(params, tmp_path, jobs=1, extra=["-f"]) == 0
    assert calls == [["dvc", "--wait-for-lock", "repro", "-f"]]
