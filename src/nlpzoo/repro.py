"""`python -m nlpzoo repro --jobs N` (`make repro`): the whole pipeline with N runs side by side.

A run's two stages (`train-RUN`, `evaluate-RUN`) depend on the shared data stages and on
nothing of any other run, so once the data is built the runs are independent arms of the
graph. DVC runs independent arms in parallel when each arm is its own `dvc repro` process: it
holds the repository lock only between commands, never while a stage's command runs, and
`--wait-for-lock` makes a process wait for that short lock instead of failing.

    1. dvc --wait-for-lock repro corpus prepare vocab cooccur      the data, once
    2. N workers, each taking the next run from a queue (longest first, by the wall times the
       stages recorded in timings/ in the last repro; when none is recorded, translation,
       then language models, then word vectors, more epochs first):
         dvc --wait-for-lock repro --single-item train-RUN evaluate-RUN
    3. dvc --wait-for-lock repro                                   mixture, report, the rest

Each stage still decides for itself whether it must run (its deps, params and outs in
dvc.lock), so a second `make repro` does nothing, and a run whose params changed reruns
alone. On two cores, two runs of one torch thread each (`trainer.threads: 1`) do 1.6-2.3x the
work of one such run, one run with two threads 1.4-1.9x (docs/benchmarks.md, "Threads").
`--jobs 1` is plain `dvc repro`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from nlpzoo.errors import PROJECT_ERRORS, error_line
from nlpzoo.params import load_params as load_project_params
from nlpzoo.params import parse_models

DATA_STAGES = ["corpus", "prepare", "vocab", "cooccur"]
TASK_ORDER = {"mt": 0, "lm": 1, "vectors": 2}  # longest first when no timing is recorded


def recorded_seconds(root: Path, run: str) -> float | None:
    """Wall seconds the run's two stages took in the last repro (timings/), if recorded."""
    total, found = 0.0, False
    for stage in (f"train-{run}", f"evaluate-{run}"):
        path = root / "timings" / f"{stage}.json"
        try:
            seconds = float(json.loads(path.read_text(encoding="utf-8"))["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if math.isfinite(seconds) and seconds >= 0:  # a hand-edited file: no record
            total, found = total + seconds, True
    return total if found else None


def schedule(params: dict, root: Path) -> list[str]:
    """The enabled runs, longest first: by the recorded times; unrecorded runs after them, by
    task (translation, language models, word vectors), then more epochs first."""
    specs = parse_models(params)
    order = list(specs)
    shared = (params.get("trainer") or {}).get("max_epochs", 1)

    def epochs(run: str) -> int:
        own = (params.get(run) or {}).get("trainer") or {}
        return int(own.get("max_epochs", shared) or 1)

    def key(run: str) -> tuple:
        seconds = recorded_seconds(root, run)
        if seconds is not None:
            return (0, -seconds, order.index(run))
        return (1, TASK_ORDER.get(specs[run].task, 3), -epochs(run), order.index(run))

    return sorted(specs, key=key)


class _Console:
    """Lines of the workers' `dvc repro` processes, each prefixed with its run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def say(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)


def _dvc(args: Sequence[str]) -> list[str]:
    return ["dvc", "--wait-for-lock", "repro", *args]


def _run_arm(run: str, console: _Console, extra: Sequence[str]) -> int:
    cmd = _dvc(["--single-item", *extra, f"train-{run}", f"evaluate-{run}"])
    console.say(f"[{run}] $ {' '.join(cmd)}")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        console.say(f"[{run}] {line.rstrip()}")
    return proc.wait()


def run(params: dict, root: Path, jobs: int, extra: Sequence[str] = ()) -> int:
    """The three steps above; the status of the first that failed (0 when all succeeded)."""
    if jobs <= 1:
        return subprocess.call(_dvc(extra), cwd=root)
    started = time.monotonic()
    status = subprocess.call(_dvc([*extra, *DATA_STAGES]), cwd=root)
    if status:
        return status
    from nlpzoo.config import build
    from nlpzoo.params import MlflowConfig
    from nlpzoo.tracking import prepare_store

    prepare_store(build(MlflowConfig, params.get("mlflow"), "mlflow").experiment)
    queue = schedule(params, root)
    console = _Console()
    console.say(f"runs, {jobs} at a time, longest first: {', '.join(queue)}")
    failed: list[str] = []
    take = threading.Lock()

    def worker() -> None:
        while True:
            with take:
                if not queue or failed:
                    return  # a failed run stops the handing out, as `dvc repro` stops
                name = queue.pop(0)
            if _run_arm(name, console, extra):
                with take:
                    failed.append(name)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        console.say(f"error: failed: {', '.join(failed)} (its output above, prefixed [RUN])")
        return 1
    status = subprocess.call(_dvc(extra), cwd=root)
    minutes = (time.monotonic() - started) / 60
    console.say(f"repro finished in {minutes:.1f} min with {jobs} runs side by side")
    return status


def _jobs(text: str) -> int:
    import argparse

    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of runs >= 1, got {text!r}")
    return jobs


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="nlpzoo repro", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=_jobs, default=None, help="runs side by side (JOBS, 2)")
    parser.add_argument("--dry", action="store_true", help="print the order of the runs only")
    args, extra = parser.parse_known_args(argv)
    if args.jobs is None:
        try:
            args.jobs = _jobs(os.environ.get("JOBS", "2"))
        except argparse.ArgumentTypeError as e:
            print(f"error: JOBS {e}", file=sys.stderr)
            return 1
    root = (root or Path.cwd()).resolve()
    try:
        params = load_project_params(root / "params.yaml")
    except PROJECT_ERRORS as e:
        print(f"error: {error_line(e, root)}", file=sys.stderr)
        return 1
    if args.dry:
        for name in schedule(params, root):
            seconds = recorded_seconds(root, name)
            print(f"{name}\t{'' if seconds is None else f'{seconds:.0f} s last time'}")
        return 0
    return run(params, root, args.jobs, extra)
