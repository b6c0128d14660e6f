"""Wall time of the default pipeline on this machine, measured in a fresh clone.

Usage: python benchmarks/pipeline_timing.py [--full]
Clones the committed project into a temporary folder and times, with the real `dvc repro`:
  1. the data stages (corpus → prepare → vocab → cooccur, Brown + Multi30k),
  2. with --full, the whole default pipeline (every run in params.yaml, then the report),
  3. a no-op `dvc repro` right after.
Set NLPZOO_DATA_MIRROR to read the data from a local mirror instead of downloading it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_STAGES = [
    "corpus@lm",
    "corpus@mt",
    "corpus@eval",
    "prepare@lm",
    "prepare@mt",
    "vocab@lm",
    "vocab@mt",
    "cooccur",
]


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also time the whole default pipeline")
    args = parser.parse_args()
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "nlpzoo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
        rows = [("data stages (corpus→cooccur)", timed(["dvc", "repro", *DATA_STAGES], repo, env))]
        if args.full:
            rows.append(("whole default pipeline (rest)", timed(["dvc", "repro"], repo, env)))
        rows.append(("no-op dvc repro", timed(["dvc", "repro"], repo, env)))
    for name, seconds in rows:
        print(f"{name:34s} {seconds:8.1f} s")


if __name__ == "__main__":
    main()
