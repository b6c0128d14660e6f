"""`python -m nlpzoo repro --jobs N` (`make repro`): the whole pipeline with N runs side by side.

A run's stages (`train-RUN`, `evaluate-RUN`, `register-RUN`) depend on the shared data stages
and on nothing of any other run, so once the data is built the runs are independent arms of the
graph. DVC runs independent arms in parallel when each arm is its own `dvc repro` process: it
holds the repository lock only between commands, never while a stage's command runs, and
`--wait-for-lock` makes a process wait for that short lock instead of failing.

    1. dvc --wait-for-lock repro corpus prepare vocab cooccur      the data, once
    2. N workers, each taking the next run from a queue (longest first, by the wall times the
       stages recorded in timings/ in the last repro; when none is recorded, translation,
       then language models, then word vectors, more epochs first):
         dvc --wait-for-lock repro --single-item train-RUN evaluate-RUN register-RUN
    3. dvc --wait-for-lock repro --single-item mixture report ...  the rest

Each stage still decides for itself whether it must run (its deps, params and outs in
dvc.lock), so a second `make repro` does nothing, and a run whose params changed reruns
alone. On two cores, two runs of one torch thread each (`trainer.threads: 1`) do 1.6-2.3x the
work of one such run, one run with two threads 1.4-1.9x (docs/benchmarks.md, "Threads").
`--jobs 1` is plain `dvc repro`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from nlpzoo.errors import PROJECT_ERRORS, error_line
from nlpzoo.params import load_params as load_project_params
from nlpzoo.params import parse_models

DATA_STAGES = ["corpus", "prepare", "vocab", "cooccur"]
ARM_STAGES = ("train", "evaluate", "register")  # a run's own stages, in order
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
        # no terminal any more (SIGHUP): the run goes on without its lines
        with self.lock, contextlib.suppress(OSError):
            print(line, flush=True)


# An interrupt of `python -m nlpzoo repro` (Ctrl-C, SIGTERM, SIGHUP) stops every `dvc repro` it
# started: SIGINT first to the stage's command (a training run saves its resume checkpoint), not
# to the dvc process itself, which ignores SIGINT only while a command runs: interrupted while it
# writes dvc.lock, it would leave that file empty. dvc sees its command fail and exits, writing
# nothing more; a command it starts meanwhile gets SIGINT too. Then SIGTERM, then SIGKILL, each to
# the child's whole process group (the dvc process and the stage's command).
INT_GRACE = 5.0  # seconds a stopped child has after SIGINT before SIGTERM
TERM_GRACE = 3.0  # and after SIGTERM before SIGKILL
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _members(pgid: int) -> list[int]:
    """The processes of group `pgid` but its leader (the dvc process): the stage's command."""
    import psutil

    out = []
    for proc in psutil.process_iter(["pid"]):
        pid = proc.info["pid"]
        if pid != pgid:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pgid:
                    out.append(pid)
    return out


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group's id was taken by another user's process: ours is gone
        return False
    return True


def stop_groups(groups: Sequence[int], poll: Callable[[], None] = lambda: None) -> None:
    """SIGINT to the stage commands of every process group of `groups` (not to the dvc process
    leading it), SIGTERM to the groups still alive INT_GRACE seconds later, SIGKILL to those
    alive TERM_GRACE seconds after that. `poll` (the parent's `Popen.poll` of each child) reaps
    the group leaders that have exited."""
    poll()
    alive = [g for g in groups if _alive(g)]
    interrupted: set[int] = set()
    deadline = time.monotonic() + INT_GRACE
    while alive and time.monotonic() < deadline:
        for pgid in alive:
            for pid in _members(pgid):
                if pid not in interrupted:
                    interrupted.add(pid)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGINT)
        time.sleep(0.05)
        poll()
        alive = [g for g in alive if _alive(g)]
    for sig, grace in ((signal.SIGTERM, TERM_GRACE), (None, 0.0)):
        poll()
        alive = [g for g in groups if _alive(g)]
        if not alive:
            return
        for pgid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig or signal.SIGKILL)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            time.sleep(0.05)
            poll()
            if not any(_alive(g) for g in alive):
                return


def _watch() -> None:
    """The watchdog (`python -c ...`): reads `+PGID` and `-PGID` lines from the parent; when its
    stdin ends without an `exit` line the parent died (SIGKILL), and it stops the groups left."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    groups: list[int] = []
    for line in sys.stdin:
        line = line.strip()
        if line == "exit":
            return
        if line.startswith("+"):
            groups.append(int(line[1:]))
        elif line.startswith("-") and int(line[1:]) in groups:
            groups.remove(int(line[1:]))
    stop_groups(groups)


class _Children:
    """The `dvc repro` processes of one `run`, each in its own process group (its own session),
    stopped together on SIGINT, SIGTERM or SIGHUP to this process, or by a watchdog process when
    this one is killed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen] = []
        self.signum: int | None = None
        self.stopped = 0  # children running when the signal came
        self.stopper: threading.Thread | None = None
        self.watchdog: subprocess.Popen | None = None

    def _tell(self, line: str) -> None:
        try:
            assert self.watchdog is not None and self.watchdog.stdin is not None
            self.watchdog.stdin.write(line + "\n")
            self.watchdog.stdin.flush()
        except (AssertionError, OSError, ValueError):
            pass

    def spawn(self, cmd: Sequence[str], **kwargs) -> subprocess.Popen | None:
        """`Popen(cmd)` in a new session; None once an interrupt came (nothing new starts)."""
        with self.lock:
            if self.signum is not None:
                return None
            proc = subprocess.Popen(list(cmd), start_new_session=True, **kwargs)
            self.procs.append(proc)
            self._tell(f"+{proc.pid}")
            return proc

    def done(self, proc: subprocess.Popen) -> None:
        with self.lock:
            if self.signum is None:  # when stopping, the group may outlive its leader
                self.procs.remove(proc)
                self._tell(f"-{proc.pid}")

    def call(self, cmd: Sequence[str], cwd: Path | None = None) -> int:
        """`subprocess.call` that an interrupt ends gracefully (SIGINT, not `call`'s SIGKILL)."""
        proc = self.spawn(cmd, cwd=cwd)
        if proc is None:
            return 1
        try:
            return proc.wait()
        finally:
            self.done(proc)

    def _poll(self) -> None:
        for proc in list(self.procs):
            proc.poll()

    def _stop(self) -> None:
        with self.lock:
            groups = [p.pid for p in self.procs]
        self._poll()
        self.stopped = sum(1 for g in groups if _alive(g))
        stop_groups(groups, self._poll)

    def _on_signal(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
            self.stopper = threading.Thread(target=self._stop, daemon=True)
            self.stopper.start()

    def __enter__(self) -> _Children:
        self.watchdog = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); "
                "from nlpzoo.repro import _watch; _watch()",
                str(Path(__file__).parents[1]),
            ],
            stdin=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.handlers: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self.handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and self.signum is None:  # an error here: stop the children too
            with self.lock:
                self.signum = -1
            self._stop()
        if self.stopper is not None:
            self.stopper.join()
        for sig, handler in self.handlers.items():
            signal.signal(sig, handler)
        self._tell("exit")
        assert self.watchdog is not None
        with contextlib.suppress(OSError):
            self.watchdog.stdin.close()  # type: ignore[union-attr]
        self.watchdog.wait()


def _dvc(args: Sequence[str]) -> list[str]:
    return ["dvc", "--wait-for-lock", "repro", *args]


def _run_arm(
    run: str, console: _Console, extra: Sequence[str], children: _Children, stages: Sequence[str]
) -> int:
    cmd = _dvc(["--single-item", *extra, *stages])
    console.say(f"[{run}] $ {' '.join(cmd)}")
    proc = children.spawn(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    if proc is None:
        return 1
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            console.say(f"[{run}] {line.rstrip()}")
        return proc.wait()
    finally:
        children.done(proc)


def _stage_names(root: Path) -> list[str]:
    import yaml

    return list(yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"])


def arm_stages(root: Path, run: str) -> list[str]:
    """The stages one worker reproduces for `run`, in order: those of `ARM_STAGES` that
    dvc.yaml has."""
    names = set(_stage_names(root))
    return [f"{stage}-{run}" for stage in ARM_STAGES if f"{stage}-{run}" in names]


def final_stages(root: Path, runs: Sequence[str]) -> list[str]:
    """The stages of dvc.yaml (in its order, upstream first) that neither the data step nor the
    runs' arms reproduce: the final step reproduces exactly these, so that each stage runs once
    even under `--force`."""
    covered = set(DATA_STAGES) | {s for r in runs for s in arm_stages(root, r)}
    return [name for name in _stage_names(root) if name not in covered]


def _prepare_tracking(params: dict) -> None:
    from nlpzoo.config import build
    from nlpzoo.params import MlflowConfig
    from nlpzoo.tracking import prepare_store_or_warn

    prepare_store_or_warn(build(MlflowConfig, params.get("mlflow"), "mlflow").experiment)


def run(params: dict, root: Path, jobs: int, extra: Sequence[str] = ()) -> int:
    """The three steps above; the status of the first that failed (0 when all succeeded), or
    128 + the signal's number when SIGINT, SIGTERM or SIGHUP stopped them."""
    with _Children() as children:
        status = _steps(params, root, jobs, extra, children)
    if children.signum is not None and children.signum > 0:
        name = signal.Signals(children.signum).name
        n = children.stopped
        with contextlib.suppress(OSError):
            print(
                f"interrupted ({name}): stopped {n} running stage{'s' * (n != 1)}; "
                "`make repro` continues where they stopped",
                file=sys.stderr,
                flush=True,
            )
        return 128 + children.signum
    return status


def _steps(params: dict, root: Path, jobs: int, extra: Sequence[str], children: _Children) -> int:
    if jobs <= 1:
        return children.call(_dvc(extra), cwd=root)
    started = time.monotonic()
    status = children.call(_dvc([*extra, *DATA_STAGES]), cwd=root)
    if status or children.signum is not None:
        return status or 1
    _prepare_tracking(params)
    queue = schedule(params, root)
    runs = list(queue)
    console = _Console()
    console.say(f"runs, {jobs} at a time, longest first: {', '.join(queue)}")
    failed: list[str] = []
    take = threading.Lock()

    def worker() -> None:
        while True:
            with take:
                if not queue or failed or children.signum is not None:
                    return  # a failed run stops the handing out, as `dvc repro` stops
                name = queue.pop(0)
            try:
                code = _run_arm(name, console, extra, children, arm_stages(root, name))
            except Exception as e:  # a failed worker is a failed run
                console.say(f"[{name}] error: {type(e).__name__}: {e}")
                code = 1
            if code:
                with take:
                    failed.append(name)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if children.signum is not None:
        return 1
    if failed:
        console.say(f"error: failed: {', '.join(failed)} (its output above, prefixed [RUN])")
        return 1
    status = children.call(_dvc(["--single-item", *extra, *final_stages(root, runs)]), cwd=root)
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
