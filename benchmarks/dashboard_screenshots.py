"""Screenshots of the MLflow dashboard of a project's store: the experiment's runs and the
registered models (the README's pictures).

Usage: python benchmarks/dashboard_screenshots.py [--store mlflow.db] [--experiment nlpzoo]
                                                  [--out docs] [--chromium chromium]

Starts `mlflow ui` on the store (sqlite) on a free port of 127.0.0.1, in its own process group,
waits until it answers, takes headless Chromium screenshots of

    OUT/dashboard.png   the experiment's runs, in the "Model training" view
                        (`nlpzoo.tracking.experiment_url`)
    OUT/models.png      the Model Registry (nlpzoo-RUN, one per registered run)

and stops the server, whatever happened. Run it on the store of a project that has run the
pipeline (`make repro`); Chromium: `apt-get install -y chromium`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_S = 90.0  # the server answers within this
SHOT_S = 120.0  # one screenshot takes at most this
SIZE = (1400, 900)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_ui(store: Path, log: Path) -> Iterator[str]:
    """`mlflow ui` of the sqlite store `store`; yields its base URL once it answers."""
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    command = [str(mlflow) if mlflow.exists() else "mlflow", "ui", "--backend-store-uri",
               f"sqlite:///{store.resolve()}", "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1"]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"mlflow ui exited ({proc.returncode}): {log.read_text()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{base}/health", timeout=2) as answer,
            ):
                if answer.status == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"mlflow ui not up in {START_S:.0f} s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # the workers, and a leader that lingers
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def screenshot(chromium: str, url: str, path: Path) -> None:
    """Headless Chromium's picture of `url` (after 15 s of the page's own time) at `path`."""
    with tempfile.TemporaryDirectory(prefix="nlpzoo-chromium-") as profile:
        done = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={profile}", f"--window-size={SIZE[0]},{SIZE[1]}",
             "--virtual-time-budget=15000", f"--screenshot={path}", url],
            capture_output=True, text=True, timeout=SHOT_S,
        )  # fmt: skip
    if done.returncode != 0 or not path.is_file():
        raise SystemExit(f"chromium failed on {url} ({done.returncode}): {done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, default=ROOT / "mlflow.db", help="sqlite store")
    parser.add_argument("--experiment", default="nlpzoo", help="the experiment (nlpzoo)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder of the PNGs")
    parser.add_argument("--chromium", default="chromium", help="Chromium's command")
    args = parser.parse_args(argv)
    if not args.store.is_file():
        raise SystemExit(f"no MLflow store at {args.store}: run the pipeline first (make repro)")
    if shutil.which(args.chromium) is None:
        raise SystemExit(f"{args.chromium} not found: apt-get install -y chromium")
    sys.path.insert(0, str(ROOT / "src"))
    from nlpzoo.tracking import experiment_url

    args.out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="nlpzoo-ui-") as tmp,
        mlflow_ui(args.store, Path(tmp) / "mlflow-ui.log") as base,
    ):
        runs = experiment_url(base, args.experiment, uri=f"sqlite:///{args.store.resolve()}")
        if runs == f"{base}/":
            raise SystemExit(f"no experiment '{args.experiment}' in {args.store}")
        pages = {
            "dashboard.png": runs,
            "models.png": f"{base}/#/models?workflowType=machine_learning",
        }
        for name, url in pages.items():
            screenshot(args.chromium, url, args.out / name)
            print(f"{args.out / name}: {url.removeprefix(base)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
