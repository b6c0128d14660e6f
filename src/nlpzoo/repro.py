"""`python -m nlpzoo repro` (`make repro`): the whole pipeline, as many runs side by side as the
machine takes.

A run's stages (`train-RUN`, `evaluate-RUN`, `register-RUN`) depend on the shared data stages
and on nothing of any other run, so once the data is built the runs are independent arms of the
graph. DVC runs independent arms in parallel when each arm is its own `dvc repro` process: it
holds the repository lock only between commands, never while a stage's command runs, and
`--wait-for-lock` makes a process wait for that short lock instead of failing.

    1. dvc --wait-for-lock repro corpus prepare vocab cooccur      the data, once
    2. JOBS workers, each taking the longest pending run whose kind of slot is free (longest by
       the wall times the stages recorded in timings/ in the last repro; when none is recorded,
       translation, then language models, then word vectors, more epochs first):
         dvc --wait-for-lock repro --single-item train-RUN evaluate-RUN register-RUN
    3. dvc --wait-for-lock repro --single-item mixture report ...  the rest

Slots. Each run is one process of one torch thread (`trainer.threads: 1`) that keeps one core
busy, on the CPU or feeding a GPU, so:
  - at most JOBS runs at once, GPU runs included (`--jobs`, env JOBS; by default the cores this
    process may use, its CPU affinity);
  - of them, at most GPU_SLOTS runs sharing one GPU, GPU_SLOTS x the GPUs of the machine in all
    (`--gpu-slots`, env GPU_SLOTS, default 2; GPUs counted by torch, an Apple GPU is one);
  - a run trains on a GPU when its placement says so (`nlpzoo.placement`); the CPU-only runs
    (n-gram, SVD, the numba word vectors, and every run on a machine without a GPU) fill the
    cores the GPU runs leave.
On two cores without a GPU that is two runs side by side, each of one thread: they do 1.6-2.3x
the work of one such run, one run with two threads 1.4-1.9x (docs/benchmarks.md, "Threads").

A failed run stops no other: every other run is trained, evaluated and registered, then step 3
reproduces the final stages that depend on no output of a failed run (by dvc.yaml's deps and
outs; the report depends on every run's metrics, so it waits for the failed run to be mended),
and the last line names the failed runs.

Each stage still decides for itself whether it must run (its deps, params and outs in
dvc.lock), so a second `make repro` does nothing, and a run whose params changed reruns
alone. `--jobs 1` is plain `dvc repro`, which stops at the first failed stage (add `--keep-going`
to go on past it).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import posixpath
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nlpzoo.errors import PROJECT_ERRORS, error_line
from nlpzoo.layout import Layout
from nlpzoo.params import parse_models
from nlpzoo.params_file import load_params as load_project_params
from nlpzoo.taskinfo import task_info

DATA_STAGES = ["corpus", "prepare", "vocab", "cooccur"]
ARM_STAGES = ("train", "evaluate", "register")  # a run's own stages, in order
GPU_SLOTS = 2  # runs sharing one GPU (the default)


def recorded_seconds(root: Path, run: str) -> float | None:
    """Wall seconds the run's two stages took in the last repro (timings/), if recorded."""
    total, found = 0.0, False
    for stage in (f"train-{run}", f"evaluate-{run}"):
        path = Layout(root).timing(stage)
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
        return (1, task_info(specs[run].task).rank, -epochs(run), order.index(run))

    return sorted(specs, key=key)


def default_jobs() -> int:
    """The cores this process may use: its CPU affinity, else every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


def run_device(params: dict, root: Path, name: str) -> str:
    """What run `name` trains on, as its placement resolves it: "cpu", "cuda" or "mps"."""
    from nlpzoo.placement import place
    from nlpzoo.tasks import Run

    return place(Run.of(params, name, root)).accelerator


def device_count(accelerator: str) -> int:
    """The GPUs of kind `accelerator` on this machine: torch's count of CUDA devices (at least
    one, as a run resolved to it); an Apple GPU (mps) is one."""
    if accelerator == "cuda":
        import torch

        return max(int(torch.cuda.device_count()), 1)
    return 1


@dataclass
class Plan:
    """The runs of step 2, longest first, each with its device, and the slots they share."""

    jobs: int  # runs at once, GPU runs included
    gpu_slots: int  # runs at once on one GPU
    runs: list[str] = field(default_factory=list)
    device: dict[str, str] = field(default_factory=dict)  # run -> "cpu", "cuda" or "mps"
    gpus: dict[str, int] = field(default_factory=dict)  # accelerator -> its GPUs

    def gpu_limit(self, accelerator: str) -> int:
        """Runs at once on the GPUs of `accelerator`: gpu_slots on each."""
        return self.gpu_slots * self.gpus[accelerator]

    def describe(self) -> str:
        """The slots in one line."""
        if not self.gpus:
            return f"{self.jobs} at a time, no run on a GPU"
        on = ", ".join(
            f"{self.gpu_limit(a)} on {n} {a} GPU{'s' * (n != 1)}" for a, n in self.gpus.items()
        )
        return f"{self.jobs} at a time, of them at most {on} ({self.gpu_slots} per GPU)"


def plan(
    params: dict, root: Path, jobs: int, gpu_slots: int, say: Callable[[str], None] = print
) -> Plan:
    """The runs of `schedule`, each with its device (`run_device`; a run whose placement fails
    is said so and counts as a CPU run: its train stage gives the error), and the GPUs counted
    where some run trains on one."""
    out = Plan(jobs, gpu_slots, schedule(params, root))
    for name in out.runs:
        try:
            device = run_device(params, root, name)
        except Exception as e:
            say(f"[{name}] placement failed ({type(e).__name__}: {e}); counted as a CPU run")
            device = "cpu"
        out.device[name] = device
        if device != "cpu" and device not in out.gpus:
            out.gpus[device] = device_count(device)
    return out


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


def dvc_stages(root: Path) -> dict:
    """The `stages:` mapping of `root`'s dvc.yaml, in its order (upstream first)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = (root / "dvc.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=loader)["stages"]


def arm_stages(stages: dict, run: str) -> list[str]:
    """The stages one worker reproduces for `run`, in order: those of `ARM_STAGES` that
    dvc.yaml's `stages` has."""
    return [f"{stage}-{run}" for stage in ARM_STAGES if f"{stage}-{run}" in stages]


def final_stages(stages: dict, runs: Sequence[str]) -> list[str]:
    """The stages of dvc.yaml's `stages` (in its order, upstream first) that neither the data
    step nor the runs' arms reproduce: the final step reproduces exactly these, so that each
    stage runs once even under `--force`."""
    covered = set(DATA_STAGES) | {s for r in runs for s in arm_stages(stages, r)}
    return [name for name in stages if name not in covered]


def _paths(entries: Sequence) -> list[str]:
    """The paths of a dvc.yaml list (`deps`, `outs`, ...): each a path, or a path with options."""
    out: list[str] = []
    for entry in entries or []:
        out.extend([entry] if isinstance(entry, str) else entry)
    return [posixpath.normpath(path) for path in out]


def _overlap(a: str, b: str) -> bool:
    """Path `a` is path `b`, or one is a folder holding the other."""
    return a == b or a.startswith(f"{b}/") or b.startswith(f"{a}/")


def blocked_stages(stages: dict, final: Sequence[str], failed: Sequence[str]) -> list[str]:
    """The stages of `final` (in dvc.yaml's order, upstream first) that depend on an output of
    a failed run's arm (its outs, metrics and plots), directly or through an earlier one of
    them: reproduced now, they would find that output missing, or stale."""

    def outputs(name: str) -> list[str]:
        stage = stages[name]
        return [p for key in ("outs", "metrics", "plots") for p in _paths(stage.get(key))]

    missing = [p for run in failed for name in arm_stages(stages, run) for p in outputs(name)]
    blocked = []
    for name in final:
        deps = _paths(stages[name].get("deps"))
        if any(_overlap(dep, out) for dep in deps for out in missing):
            blocked.append(name)
            missing += outputs(name)
    return blocked


def _prepare_tracking(params: dict) -> None:
    from nlpzoo.config import build
    from nlpzoo.params import MlflowConfig
    from nlpzoo.tracking import prepare_store_or_warn

    prepare_store_or_warn(build(MlflowConfig, params.get("mlflow"), "mlflow").experiment)


def run(
    params: dict,
    root: Path,
    jobs: int,
    extra: Sequence[str] = (),
    gpu_slots: int = GPU_SLOTS,
) -> int:
    """The three steps above: 0 when every stage succeeded; 1 when a run failed, else the status
    of the `dvc repro` that failed; 128 + the signal's number when SIGINT, SIGTERM or SIGHUP
    stopped them."""
    with _Children() as children:
        status = _steps(params, root, jobs, gpu_slots, extra, children)
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


def _steps(
    params: dict,
    root: Path,
    jobs: int,
    gpu_slots: int,
    extra: Sequence[str],
    children: _Children,
) -> int:
    if jobs <= 1:
        return children.call(_dvc(extra), cwd=root)
    started = time.monotonic()
    status = children.call(_dvc([*extra, *DATA_STAGES]), cwd=root)
    if status or children.signum is not None:
        return status or 1
    _prepare_tracking(params)
    console = _Console()
    runs = plan(params, root, jobs, gpu_slots, console.say)
    order = ", ".join(f"{r} ({d})" if d != "cpu" else r for r, d in runs.device.items())
    console.say(f"runs, {runs.describe()}, longest first: {order}")
    stages = dvc_stages(root)
    failed, most = _arms(stages, runs, console, extra, children)
    if children.signum is not None:
        return 1
    final = final_stages(stages, runs.runs)
    blocked = blocked_stages(stages, final, failed)
    final = [name for name in final if name not in blocked]
    if final:
        status = children.call(_dvc(["--single-item", *extra, *final]), cwd=root)
    minutes = (time.monotonic() - started) / 60
    console.say(f"repro finished in {minutes:.1f} min, up to {most} runs side by side")
    if not failed:
        return status
    if blocked:
        console.say(
            f"not reproduced by DVC: {', '.join(blocked)}, which depend"
            f"{'s' * (len(blocked) == 1)} on the failed runs' outputs (`make repro` builds them "
            "once those runs succeed)"
        )
        if "report" in blocked and children.signum is None:
            # DVC reproduces no stage whose deps are missing; the report is written outside it
            # (not recorded in dvc.lock, so the next `make repro` writes it again), naming each
            # run without metrics in its "Missing or incomplete" footer
            cmd = [sys.executable, str(root / "stages" / "report.py")]
            if children.call(cmd, cwd=root) == 0:
                console.say("wrote reports/ outside DVC: its footer names the missing runs")
    its = "its output" if len(failed) == 1 else "their output"
    final_failed = "; the final step failed too (its output above)" if status else ""
    console.say(
        f"error: failed: {', '.join(failed)} ({its} above, prefixed "
        f"{', '.join(f'[{r}]' for r in failed)}); every other run finished{final_failed}"
    )
    return 1


def _arms(
    stages: dict, runs: Plan, console: _Console, extra: Sequence[str], children: _Children
) -> tuple[list[str], int]:
    """Step 2: every run's arm, `runs.jobs` at a time, each worker taking the first run of the
    queue whose device has a free slot. Returns the failed runs (in the order they failed) and
    the most runs that ran side by side."""
    queue = list(runs.runs)
    busy: dict[str, int] = {}  # device -> its runs running
    failed: list[str] = []
    most = 0
    slots = threading.Condition()

    def free(name: str) -> bool:
        device = runs.device[name]
        return device == "cpu" or busy.get(device, 0) < runs.gpu_limit(device)

    def worker() -> None:
        nonlocal most
        while True:
            with slots:
                while True:
                    if not queue or children.signum is not None:
                        return  # an interrupt stops the handing out
                    name = next((r for r in queue if free(r)), None)
                    if name is not None:
                        break
                    slots.wait(0.2)  # every GPU slot busy: wait for a GPU run to end
                queue.remove(name)
                device = runs.device[name]
                busy[device] = busy.get(device, 0) + 1
                most = max(most, sum(busy.values()))
            try:
                code = _run_arm(name, console, extra, children, arm_stages(stages, name))
            except Exception as e:  # a failed worker is a failed run
                console.say(f"[{name}] error: {type(e).__name__}: {e}")
                code = 1
            with slots:
                busy[device] -= 1
                if code:
                    failed.append(name)
                slots.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(runs.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return failed, most


def _count(text: str, what: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of {what} >= 1, got {text!r}")
    return value


def _jobs(text: str) -> int:
    return _count(text, "runs")


def _gpu_slots(text: str) -> int:
    return _count(text, "runs per GPU")


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    import argparse

    paragraphs = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(
        prog="nlpzoo repro",
        description=paragraphs[0],
        epilog="\n\n".join(
            [
                *(p for p in paragraphs if p.startswith(("Slots.", "A failed"))),
                "Any other option goes to each `dvc repro` (e.g. --force).",
            ]
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        help="runs side by side, GPU runs included (env JOBS; default: the cores this process "
        f"may use, {default_jobs()} here; 1: plain `dvc repro`)",
    )
    parser.add_argument(
        "--gpu-slots",
        type=_gpu_slots,
        default=None,
        help=f"runs sharing one GPU (env GPU_SLOTS; default {GPU_SLOTS})",
    )
    parser.add_argument(
        "--dry", action="store_true", help="print the plan (slots, runs in order, devices) only"
    )
    args, extra = parser.parse_known_args(argv)
    for name, env, parse in (("jobs", "JOBS", _jobs), ("gpu_slots", "GPU_SLOTS", _gpu_slots)):
        if getattr(args, name) is None:
            text = os.environ.get(env, "")
            try:
                value = parse(text) if text.strip() else None
            except argparse.ArgumentTypeError as e:
                print(f"error: {env} {e}", file=sys.stderr)
                return 1
            setattr(args, name, value)
    jobs = args.jobs or default_jobs()
    gpu_slots = args.gpu_slots or GPU_SLOTS
    root = (root or Path.cwd()).resolve()
    try:
        params = load_project_params(root / "params.yaml")
    except PROJECT_ERRORS as e:
        print(f"error: {error_line(e, root)}", file=sys.stderr)
        return 1
    if args.dry:
        return _dry(params, root, jobs, gpu_slots)
    return run(params, root, jobs, extra, gpu_slots)


def _dry(params: dict, root: Path, jobs: int, gpu_slots: int) -> int:
    """The plan: the slots, then each run (longest first) with its device and last time."""
    if jobs <= 1:
        print("jobs: 1 (plain `dvc repro`: one stage at a time)")
        return 0
    runs = plan(params, root, jobs, gpu_slots)
    print(f"jobs: {jobs} runs side by side at most, GPU runs included")
    gpus = ", ".join(
        f"{n} {a} GPU{'s' * (n != 1)}: {runs.gpu_limit(a)} GPU runs at once"
        for a, n in runs.gpus.items()
    )
    print(f"gpu slots: {gpu_slots} runs sharing one GPU ({gpus or 'no run on a GPU'})")
    for name in runs.runs:
        seconds = recorded_seconds(root, name)
        last = "" if seconds is None else f"{seconds:.0f} s last time"
        print(f"{name}\t{runs.device[name]}\t{last}".rstrip())
    return 0
