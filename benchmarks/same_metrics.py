"""Do two revisions of the code give the same metrics? Each revision is cloned into a scratch
folder, the data stages run once (in the first clone, copied to the second), and each named run is
trained and evaluated there through its stages with the same params; the metrics files are compared
key by key (timings, MLflow ids and keys only one side records are listed apart).

    python benchmarks/same_metrics.py --old 4c25b2d --new HEAD \\
        --run skipgram --run nnlm:max_epochs=1,limit_train_batches=300 \\
        --out benchmarks/results/same_metrics.json

`RUN:key=value,...` sets keys of the run's own `trainer:` section (a slice of its training).
Needs NLPZOO_DATA_MIRROR (or network access) and the project's venv on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# keys that differ between any two runs of the same code (timings, ids)
VOLATILE = ("seconds", "tokens_per_s", "mlflow_run_id")


def _value(text: str):
    return yaml.safe_load(text)


def parse_run(text: str) -> tuple[str, dict]:
    name, _, rest = text.partition(":")
    trainer = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        trainer[key] = _value(value)
    return name, trainer


def clone(rev: str, dest: Path) -> str:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", rev], check=True)
    out = subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def run_in(folder: Path, runs: list[tuple[str, dict]]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(folder / "src"), NLPZOO_LOG_LEVEL="WARNING")
    env = {k: v for k, v in env.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    params = yaml.safe_load((folder / "params.yaml").read_text())
    for name, trainer in runs:
        params.setdefault(name, {}).setdefault("trainer", {}).update(trainer)
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = {}
    for name, _ in runs:
        for stage in ("train", "evaluate"):
            cmd = [sys.executable, f"stages/{stage}.py", name]
            subprocess.run(cmd, cwd=folder, env=env, check=True, capture_output=True)
        out[name] = json.loads((folder / "metrics" / f"{name}.json").read_text())
    return out


def compare(old: dict, new: dict) -> dict:
    same, differ, only = [], {}, {}
    for key in sorted(set(old) | set(new)):
        if any(v in key for v in VOLATILE):
            continue
        if key not in old or key not in new:
            only[key] = {"old": old.get(key), "new": new.get(key)}
        elif old[key] == new[key]:
            same.append(key)
        else:
            differ[key] = {"old": old[key], "new": new[key]}
    return {"same": len(same), "differ": differ, "only_one_side": only}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--run", action="append", required=True, help="RUN[:key=value,...]")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    runs = [parse_run(r) for r in args.run]
    with tempfile.TemporaryDirectory(prefix="same-metrics-") as tmp:
        old_dir, new_dir = Path(tmp) / "old", Path(tmp) / "new"
        revs = {"old": clone(args.old, old_dir), "new": clone(args.new, new_dir)}
        env = dict(os.environ, PYTHONPATH=str(old_dir / "src"))
        data = ["dvc", "repro", "corpus", "prepare", "vocab", "cooccur"]
        subprocess.run(data, cwd=old_dir, env=env, check=True, capture_output=True)
        shutil.copytree(old_dir / "data", new_dir / "data")
        metrics = {"old": run_in(old_dir, runs), "new": run_in(new_dir, runs)}
    result = {
        "revisions": revs,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "cpu_model": _cpu_model(),
        "runs": {
            name: {"trainer": trainer, **compare(metrics["old"][name], metrics["new"][name])}
            for name, trainer in runs
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if all(not r["differ"] for r in result["runs"].values()) else 1


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
