"""Peak resident memory of the data stages on Brown and on a corpus ten times its size.

Usage: python benchmarks/data_memory.py [--scale 10] [--workdir DIR] [--keep]
Runs the real stage scripts `corpus lm`, `prepare lm`, `vocab lm` and `cooccur` (default params)
in two scratch projects, each stage under `/usr/bin/time -v` (or, where that is missing,
`resource.getrusage(RUSAGE_CHILDREN)`), and prints each stage's peak RSS on Brown, on the
synthetic corpus, and their ratio (docs/design.md §9: streaming stages stay within 1.5x).

The synthetic corpus is Brown's prepared text repeated `--scale` times as a `text` source
(`lm.files: {all: ...}`) with `split_tokens` scaled alike, so every split and every stage sees
`--scale` times the tokens (the vocabulary is the same: this measures growth with corpus length).
Set NLPZOO_DATA_MIRROR to read Brown from a local mirror instead of downloading it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGES = [("corpus", ["lm"]), ("prepare", ["lm"]), ("vocab", ["lm"]), ("cooccur", [])]
TIME = Path("/usr/bin/time")


def run_stage(project: Path, stage: str, args: list[str]) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of one stage script run in `project`."""
    cmd = [sys.executable, str(ROOT / "stages" / f"{stage}.py"), *args]
    env = dict(os.environ, NLPZOO_LOG_LEVEL="WARNING")
    t0 = time.perf_counter()
    if TIME.is_file():
        res = subprocess.run(
            [str(TIME), "-v", *cmd], cwd=project, env=env, capture_output=True, text=True
        )
        if res.returncode:
            sys.exit(f"{stage} failed:\n{res.stderr[-3000:]}")
        kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", res.stderr).group(1))
    else:  # peak of the largest child so far: run each stage in its own helper process
        probe = (
            "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        res = subprocess.run(
            [sys.executable, "-c", probe, *cmd],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        kib = int(res.stdout.split()[-1])
    return kib / 1024, time.perf_counter() - t0


def project(path: Path, lm: dict) -> Path:
    path.mkdir(parents=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["lm"].update(lm)
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def measure(path: Path) -> dict[str, tuple[float, float]]:
    return {stage: run_stage(path, stage, args) for stage, args in STAGES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10, help="synthetic corpus = Brown x SCALE")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch projects")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nlpzoo-mem-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        brown = project(work / "brown", {"source": "brown"})
        small = measure(brown)
        corpus = work / f"brown_x{args.scale}.txt"
        with open(corpus, "w", encoding="utf-8") as out:
            for _ in range(args.scale):
                for split in ("train", "valid", "test"):
                    with open(brown / "data" / "prepared" / "lm" / f"{split}.txt") as f:
                        shutil.copyfileobj(f, out)
        split_tokens = [
            n * args.scale
            for n in yaml.safe_load((ROOT / "params.yaml").read_text())["lm"]["split_tokens"]
        ]
        big_project = project(
            work / f"x{args.scale}",
            {"source": "text", "files": {"all": str(corpus)}, "split_tokens": split_tokens},
        )
        big = measure(big_project)
        size = corpus.stat().st_size / 2**20
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    tool = "/usr/bin/time -v" if TIME.is_file() else "getrusage(RUSAGE_CHILDREN)"
    print(f"peak RSS per stage ({tool}); synthetic corpus: Brown x {args.scale} = {size:.0f} MiB")
    print(
        f"{'stage':10s} {'Brown MiB':>10s} {'x' + str(args.scale) + ' MiB':>10s} {'ratio':>7s}"
        f" {'Brown s':>8s} {'x' + str(args.scale) + ' s':>8s}"
    )
    for stage, _ in STAGES:
        (m1, t1), (m2, t2) = small[stage], big[stage]
        print(f"{stage:10s} {m1:10.0f} {m2:10.0f} {m2 / m1:7.2f} {t1:8.1f} {t2:8.1f}")


if __name__ == "__main__":
    main()
