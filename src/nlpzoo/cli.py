"""Shared start-up of the stage scripts: logging, params loading and validation, clean errors."""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlpzoo.errors import NlpzooError, error_line
from nlpzoo.params_file import load_params as load_params  # the stages' params loader


def root() -> Path:
    """Where a stage reads and writes: the working directory, which DVC sets to the stage's own
    copy of the project. Not `DVC_ROOT`: for a queued or `--temp` experiment DVC points that at
    the parent repository (so MLflow logs there, see tracking.py) while the stage runs in a
    temporary copy, and writing outputs to the parent would leave the copy without them."""
    return Path.cwd().resolve()


def run_stage(main: Callable[[list[str]], Any]) -> None:
    """Run a stage's `main(argv)`; a user error prints one clear line and exits with status 1."""
    logging.basicConfig(
        level=os.environ.get("NLPZOO_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    # a deprecation inside Lightning itself, printed once per process; nothing a user can act on
    warnings.filterwarnings("ignore", message=r".*treespec.*LeafSpec.*")
    for noisy in ("alembic", "mlflow", "pytorch_lightning", "lightning", "lightning_fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from nlpzoo.pipeline import stage_name, timing_file

    stage = stage_name(sys.argv)
    if stage.startswith(("train-", "evaluate-")):  # the same large tensors every step
        keep_freed_memory()
    trace = os.environ.get("NLPZOO_TRACE_MODULES")
    if trace:  # tests: which nlpzoo modules a stage loaded (checked against dvc.yaml's deps)
        import atexit

        atexit.register(_write_loaded_modules, Path(trace) / f"{stage}.txt")
    try:
        main(sys.argv[1:])
        write_timing(root() / timing_file(stage), stage)
    except NlpzooError as e:
        print(f"error: {error_line(e, root())}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit as e:
        # Lightning stops training on SIGTERM by raising SIGTERMException, a SystemExit with
        # status 0: a stage cut short must fail (and its checkpoint lets a rerun resume)
        if type(e).__name__ != "SIGTERMException":
            raise
        print("terminated; rerun the stage to resume from its checkpoint", file=sys.stderr)
        sys.exit(128 + 15)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # outputs are written under a temporary name and renamed at the end, so nothing half
        # written is left; but `dvc repro` removed the stage's outputs before running it
        print(
            f"error: disk full while writing {e.filename or 'an output'} ({e.strerror}); no "
            "partial output is left, and the stage's outputs were removed by DVC before it ran; "
            "free some space and rerun",
            file=sys.stderr,
        )
        sys.exit(1)


def write_timing(path: Path, stage: str) -> dict[str, Any]:
    """Record how long this process (the stage) ran: wall seconds since the process started,
    CPU seconds (user + system, and each apart), torch's thread count when torch is loaded (else
    None), the load average at the end, and the start and end times (UTC). Written atomically."""
    import json

    import psutil

    from nlpzoo.io import atomic_write_text

    proc = psutil.Process()
    started = proc.create_time()
    finished = time.time()
    cpu = proc.cpu_times()
    torch = sys.modules.get("torch")
    record = {
        "stage": stage,
        "seconds": round(finished - started, 2),
        "cpu_seconds": round(cpu.user + cpu.system, 2),
        "user_seconds": round(cpu.user, 2),
        "system_seconds": round(cpu.system, 2),  # the kernel's share: page faults, I/O
        "threads": torch.get_num_threads() if torch is not None else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "started": _utc(started),
        "finished": _utc(finished),
    }
    atomic_write_text(Path(path), json.dumps(record, indent=2) + "\n")
    return record


def keep_freed_memory() -> bool:
    """Have glibc's malloc serve every block from the heap and keep freed memory for reuse.

    A training step's largest tensors (e.g. `rnn_lm`'s 59 MB logits and their gradient) are over
    glibc's largest mmap threshold (32 MB): by default each is a fresh mmap, zero-filled page by
    page in the kernel, and unmapped when freed — every step (benchmarks/page_faults.py). With
    mmap off and a trim threshold of 1 GiB, a freed block stays in the heap for the next step.
    Linux with glibc only; elsewhere (or when the call fails) nothing changes. True when set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # <malloc.h>
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_max, 0))


def _utc(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def _write_loaded_modules(path: Path) -> None:
    files = sorted(
        str(Path(m.__file__).resolve())
        for name, m in list(sys.modules.items())
        if name.split(".")[0] == "nlpzoo" and getattr(m, "__file__", None)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join(files) + "\n")
