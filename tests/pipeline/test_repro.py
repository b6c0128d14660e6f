"""`python -m nlpzoo repro`: the order of the runs, the slots they take, the three steps (no real
DVC), and one toy pipeline on every core with a run that fails (the real DVC)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from nlpzoo import repro
from nlpzoo.taskinfo import TASK_INFO
from toy import REFERENCE_RUNS, ROOT, reference_params, write_pipeline


@pytest.fixture()
def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def _record(root: Path, stage: str, seconds: float) -> None:
    (root / "timings").mkdir(exist_ok=True)
    (root / "timings" / f"{stage}.json").write_text(json.dumps({"seconds": seconds}))


def test_schedule_without_records_puts_translation_first_then_lms(params, tmp_path):
    order = repro.schedule(params, tmp_path)
    tasks = [repro.parse_models(params)[r].task for r in order]
    assert tasks == sorted(tasks, key=lambda t: TASK_INFO[t].rank)
    assert tasks[0] == "mt" and tasks[-1] == "vectors"  # translation takes longest
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
    monkeypatch.setattr(repro, "run_device", lambda params, root, name: "cpu")
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


def test_a_failed_run_stops_no_other_and_the_report_waits_for_it(
    params, tmp_path, monkeypatch, capsys
):
    ran: list[str] = []
    first = repro.schedule(params, tmp_path)[0]

    def arm(run, console, extra, children, stages):
        ran.append(run)
        if run in (first, "cbow"):  # the first in the queue fails at once, a vector run later
            return 1
        time.sleep(0.05)
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=2) == 1
    assert sorted(ran) == sorted(repro.parse_models(params))  # every run ran
    # the mixture reads only the language models' outputs; the report every run's metrics, so
    # DVC cannot reproduce it: it is written outside DVC, naming what is missing
    assert calls == [
        ["dvc", "--wait-for-lock", "repro", *repro.DATA_STAGES],
        ["dvc", "--wait-for-lock", "repro", "--single-item", "mixture"],
        [sys.executable, str(tmp_path / "stages" / "report.py")],
    ]
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3].startswith("not reproduced by DVC: report, which depends on the failed runs'")
    assert lines[-2].startswith("wrote reports/ outside DVC")
    assert lines[-1] == (
        f"error: failed: {first}, cbow (their output above, prefixed [{first}], [cbow]); "
        "every other run finished"
    )


def test_a_failed_language_model_leaves_no_final_stage_to_run(params, tmp_path, monkeypatch):
    calls = _fake_steps(monkeypatch, tmp_path, lambda run, *a: int(run == "nnlm"))
    assert repro.run(params, tmp_path, jobs=3) == 1
    # the data step, and no DVC stage after: mixture and report depend on eval/nnlm; the report
    # is written outside DVC
    assert [c[0] for c in calls] == ["dvc", sys.executable]
    stages, final = repro.dvc_stages(tmp_path), ["mixture", "report"]
    assert repro.blocked_stages(stages, final, ["nnlm"]) == ["mixture", "report"]
    assert repro.blocked_stages(stages, final, ["svd"]) == ["report"]
    assert repro.blocked_stages(stages, final, []) == []


def test_a_worker_that_raises_is_a_failed_run(params, tmp_path, monkeypatch, capsys):
    def arm(run, console, extra, children, stages):
        if run == "seq2seq":
            raise RuntimeError("pipe broke")
        time.sleep(0.05)
        return 0

    calls = _fake_steps(monkeypatch, tmp_path, arm)
    assert repro.run(params, tmp_path, jobs=2) == 1
    assert calls[-2] == ["dvc", "--wait-for-lock", "repro", "--single-item", "mixture"]
    assert calls[-1][-1].endswith("report.py")  # written outside DVC
    out = capsys.readouterr().out
    assert "[seq2seq] error: RuntimeError: pipe broke" in out
    assert out.strip().splitlines()[-1].startswith("error: failed: seq2seq (its output above")


def test_one_job_is_plain_dvc_repro(params, tmp_path, monkeypatch):
    calls = _fake_steps(monkeypatch, tmp_path, None)
    assert repro.run(params, tmp_path, jobs=1, extra=["-f"]) == 0
    assert calls == [["dvc", "--wait-for-lock", "repro", "-f"]]


class _Arms:
    """A stand-in for `_run_arm` that sleeps (`seconds` per device) and records, per device,
    how many arms ran at once."""

    def __init__(self, device: dict[str, str], seconds: dict[str, float]) -> None:
        self.device, self.seconds = device, seconds
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.most: dict[str, int] = {}  # device -> most arms at once; "all" -> of every device
        self.cpu_beside_gpu = False  # a CPU arm ran while a GPU arm did
        self.ran: list[str] = []

    def _count(self, device: str, step: int) -> None:
        with self.lock:
            self.now[device] = self.now.get(device, 0) + step
            for key, value in ((device, self.now[device]), ("all", sum(self.now.values()))):
                self.most[key] = max(self.most.get(key, 0), value)
            gpu = sum(n for d, n in self.now.items() if d != "cpu")
            self.cpu_beside_gpu |= gpu > 0 and self.now.get("cpu", 0) > 0

    def __call__(self, run, console, extra, children, stages) -> int:
        device = self.device[run]
        self._count(device, 1)
        time.sleep(self.seconds[device])
        self._count(device, -1)
        with self.lock:
            self.ran.append(run)
        return 0


def _cores(monkeypatch, n: int) -> None:
    monkeypatch.setattr(repro.os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)


def test_the_default_jobs_are_the_cores_this_process_may_use(params, tmp_path, monkeypatch, capsys):
    _cores(monkeypatch, 8)
    monkeypatch.delenv("JOBS", raising=False)
    assert repro.default_jobs() == 8
    device = {run: "cpu" for run in repro.parse_models(params)}
    arms = _Arms(device, {"cpu": 0.3})
    calls = _fake_steps(monkeypatch, tmp_path, arms)
    monkeypatch.setattr(repro, "load_project_params", lambda path: params)
    assert repro.main([], root=tmp_path) == 0
    assert arms.most["all"] == 8  # 13 runs: 8 at once, never more
    assert sorted(arms.ran) == sorted(device) and len(calls) == 2
    assert "runs, 8 at a time, no run on a GPU" in capsys.readouterr().out
    monkeypatch.setenv("JOBS", "3")  # JOBS, then --jobs, override the cores
    assert repro.main(["--dry"], root=tmp_path) == 0
    assert capsys.readouterr().out.startswith("jobs: 3 runs side by side at most")
    assert repro.main(["--dry", "--jobs", "5"], root=tmp_path) == 0
    assert capsys.readouterr().out.startswith("jobs: 5 runs side by side at most")
    monkeypatch.delattr(repro.os, "sched_getaffinity", raising=False)  # no affinity: every core
    monkeypatch.setattr(repro.os, "cpu_count", lambda: 6)
    assert repro.default_jobs() == 6


def _fake_gpu(monkeypatch, params: dict, gpus: int) -> dict[str, str]:
    """Every neural run (n-gram, SVD and the numba word vectors are not) trains on one of
    `gpus` CUDA devices."""
    cpu_only = {"ngram", "svd", "cbow", "skipgram", "glove"}
    device = {r: "cpu" if r in cpu_only else "cuda" for r in repro.parse_models(params)}
    monkeypatch.setattr(repro, "run_device", lambda params, root, name: device[name])
    monkeypatch.setattr(repro, "device_count", lambda accelerator: gpus)
    return device


@pytest.mark.parametrize(("gpus", "slots"), [(1, 2), (2, 1), (1, 3)])
def test_gpu_runs_share_their_slots_and_cpu_runs_fill_the_cores(
    params, tmp_path, monkeypatch, capsys, gpus, slots
):
    arms = _Arms({}, {"cuda": 0.3, "cpu": 0.1})
    calls = _fake_steps(monkeypatch, tmp_path, arms)
    arms.device = _fake_gpu(monkeypatch, params, gpus)
    assert repro.run(params, tmp_path, jobs=4, gpu_slots=slots) == 0
    assert sorted(arms.ran) == sorted(arms.device) and len(calls) == 2
    assert arms.most["cuda"] == slots * gpus  # the GPU slots filled, never more
    assert arms.most["all"] <= 4  # GPU runs take a core too
    assert arms.cpu_beside_gpu  # the CPU runs did not wait for the GPU ones
    out = capsys.readouterr().out
    assert f"of them at most {slots * gpus} on {gpus} cuda GPU" in out and "nnlm (cuda)" in out


def test_the_dry_plan_names_the_slots_and_each_runs_device(params, tmp_path, monkeypatch, capsys):
    _fake_gpu(monkeypatch, params, 1)
    monkeypatch.setattr(repro, "load_project_params", lambda path: params)
    monkeypatch.delenv("GPU_SLOTS", raising=False)
    assert repro.main(["--dry", "--jobs", "16"], root=tmp_path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "jobs: 16 runs side by side at most, GPU runs included",
        "gpu slots: 2 runs sharing one GPU (1 cuda GPU: 2 GPU runs at once)",
    ]
    assert dict(line.split("\t")[:2] for line in lines[2:]) == {
        **{r: "cuda" for r in ("seq2seq", "attention", "transformer", "decoder_mt")},
        **{r: "cuda" for r in ("nnlm", "rnn_lm", "lstm_lm", "transformer_lm")},
        **{r: "cpu" for r in ("ngram", "svd", "cbow", "skipgram", "glove")},
    }
    monkeypatch.setenv("GPU_SLOTS", "3")
    assert repro.main(["--dry", "--jobs", "4"], root=tmp_path) == 0
    assert "gpu slots: 3 runs sharing one GPU" in capsys.readouterr().out
    monkeypatch.setenv("GPU_SLOTS", "0")
    assert repro.main(["--dry"], root=tmp_path) == 1
    assert "GPU_SLOTS must be a whole number of runs per GPU >= 1" in capsys.readouterr().err


def test_gpus_are_counted_only_when_a_run_trains_on_one(params, tmp_path, monkeypatch):
    real = repro.device_count

    def count(accelerator):
        raise AssertionError("counted the GPUs of a machine no run uses")

    monkeypatch.setattr(repro, "run_device", lambda params, root, name: "cpu")
    monkeypatch.setattr(repro, "device_count", count)
    assert repro.plan(params, tmp_path, 2, 2).gpus == {}
    monkeypatch.setattr(repro, "run_device", lambda params, root, name: "mps")
    monkeypatch.setattr(repro, "device_count", real)
    runs = repro.plan(params, tmp_path, 2, 2)
    assert runs.gpus == {"mps": 1} and runs.gpu_limit("mps") == 2  # Apple's GPU is one


def test_a_run_whose_placement_fails_counts_as_a_cpu_run(params, tmp_path, monkeypatch):
    def device(params, root, name):
        if name == "nnlm":
            raise ValueError("no such device")
        return "cpu"

    said: list[str] = []
    monkeypatch.setattr(repro, "run_device", device)
    runs = repro.plan(params, tmp_path, 2, 2, said.append)
    assert runs.device["nnlm"] == "cpu"
    assert said == ["[nnlm] placement failed (ValueError: no such device); counted as a CPU run"]


def test_run_device_is_the_placement_of_the_run(params, tmp_path):
    params["trainer"]["accelerator"] = "cpu"
    assert repro.run_device(params, tmp_path, "nnlm") == "cpu"
    assert repro.run_device(params, tmp_path, "ngram") == "cpu"


VOLATILE = ("seconds", "per_s", "mlflow_run_id")  # wall times and the MLflow run's id


def _toy_metrics(repo: Path, runs) -> dict:
    def stable(value):
        if isinstance(value, dict):
            return {k: stable(v) for k, v in value.items() if not k.endswith(VOLATILE)}
        return value

    names = [*runs, "mixtures"]
    return {n: stable(json.loads((repo / "metrics" / f"{n}.json").read_text())) for n in names}


@pytest.mark.xdist_group("reference")
def test_a_toy_pipeline_on_every_core_keeps_going_past_a_failed_run(
    tmp_path, monkeypatch, capsys, reference
):
    """The real DVC: the reference toy pipeline's runs (tests/pipeline/conftest.py), its user's
    files outside the project, SVD's `dim` above the 37-word vocabulary, without the register
    stages; with 8 cores every run starts at once; SVD fails, the language models finish with
    the metrics of the reference's plain `dvc repro`, the mixture is made, and the report is
    written outside DVC, naming the missing run."""
    for name in [k for k in os.environ if k.startswith(("MLFLOW_", "DVC_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NLPZOO_LOG_LEVEL", "WARNING")
    monkeypatch.delenv("JOBS", raising=False)
    repo = tmp_path / "repo"
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))
    params = reference_params(tmp_path / "repo-inputs", relative=False)
    params["mlflow"]["register"] = False  # the register stage is tested in test_pipeline.py
    params["svd"]["dim"] = 1000
    write_pipeline(repo, params, dict(os.environ))

    _cores(monkeypatch, 8)
    arms = _Arms({}, {})
    real_arm = repro._run_arm

    def arm(run, *args):
        arms._count("cpu", 1)
        try:
            return real_arm(run, *args)
        finally:
            arms._count("cpu", -1)

    monkeypatch.setattr(repro, "_run_arm", arm)
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))
    monkeypatch.chdir(repo)
    started = time.monotonic()
    status = repro.main([], root=repo)
    out = capsys.readouterr().out
    print(f"8 cores, svd failing: {time.monotonic() - started:.0f} s, status {status}")
    assert status == 1, out[-6000:]
    assert arms.most["all"] == len(REFERENCE_RUNS)  # every run at once
    assert "key 'dim' 1000 exceeds the vocabulary size" in out
    assert out.strip().splitlines()[-1] == (
        "error: failed: svd (its output above, prefixed [svd]); every other run finished"
    )
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    assert {"train-ngram", "evaluate-ngram", "train-nnlm", "evaluate-nnlm", "mixture"} <= set(lock)
    # the report is not DVC's (the next `make repro` writes it again) but is there, and says
    # which run is missing
    assert "report" not in lock
    assert "`svd`: no metrics/svd.json" in (repo / "reports" / "report.md").read_text()
    assert _toy_metrics(repo, ["ngram", "nnlm"]) == _toy_metrics(reference.root, ["ngram", "nnlm"])
