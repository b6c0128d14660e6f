"""Training throughput of each neural run under the ways of making a step cheaper, side by side.

Usage: python benchmarks/train_speed.py [--runs seq2seq,transformer] [--variants fp32,bf16]
                                        [--batches 60] [--out benchmarks/results/train_speed.json]
       python benchmarks/train_speed.py --markdown [--out ...]   (the table of a saved result)

Each (run, variant) trains the run as its train stage does (`nlpzoo.lifecycle.train`, the
project's data, params.yaml's settings, one torch thread) for `--batches` training batches of
one epoch, without validation, in a fresh process and a throwaway project folder beside the
data (MLflow off); the figure is the run's own `train_tokens_per_s`, which counts the fitting
time only (`fit_seconds`: Lightning's loop, the loaders and the optimizer included). The
variants are trainer settings, one `-S` away in params.yaml:

    fp32      trainer.precision 32-true (the fp32 default everywhere)
    bf16      trainer.precision bf16-mixed: torch.autocast on the CPU, bfloat16 matrix products
              (the CPU's own bf16 units where it has avx512_bf16 or AMX; emulated elsewhere)

Runs are timed one after the other, never side by side; the result names the machine, torch's
version and the load average before and after each. Run it on an idle machine, after the data
stages (`dvc repro prepare@lm vocab@lm vocab@mt`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "train_speed.json"
VARIANTS = {"fp32": {"precision": "32-true"}, "bf16": {"precision": "bf16-mixed"}}

CHILD = r"""
import json, sys, time
from pathlib import Path
import yaml
from nlpzoo import lifecycle
root, run = Path(sys.argv[1]), sys.argv[2]
params = yaml.safe_load((root / "params.yaml").read_text())
stats = lifecycle.train(params, run, root)
print("RESULT " + json.dumps(stats))
"""


def neural_runs(params: dict) -> list[str]:
    from nlpzoo.families import FAMILIES

    out = []
    for name, entry in params["models"].items():
        family = FAMILIES[entry["family"]]
        if entry.get("enabled", True) and family.neural and not family.manual_step:
            out.append(name)
    return out


def measure(run: str, variant: str, batches: int, params: dict) -> dict:
    trial = json.loads(json.dumps(params))
    section = trial.setdefault(run, {})
    trainer = section.setdefault("trainer", {})
    trainer.update(VARIANTS[variant])
    trainer.update(
        max_epochs=1,
        limit_train_batches=batches,
        limit_val_batches=0,
        early_stopping_patience=0,
        threads=1,
    )
    with tempfile.TemporaryDirectory(prefix="nlpzoo-speed-") as tmp:
        project = Path(tmp)
        (project / "data").symlink_to(ROOT / "data")
        (project / "params.yaml").write_text(yaml.safe_dump(trial))
        env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "NLPZOO_LOG_LEVEL": "WARNING",
        }
        load_before = os.getloadavg()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(project), run],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        load_after = os.getloadavg()
        shutil.rmtree(project / "checkpoints", ignore_errors=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail)}
    stats = json.loads(lines[-1][len("RESULT ") :])
    return {
        "tokens_per_s": stats.get("train_tokens_per_s"),
        "fit_seconds": stats.get("fit_seconds"),
        "cost_per_token": stats.get("cost_per_token"),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
    }


def markdown(result: dict) -> str:
    variants = result["variants"]
    head = "| run | " + " | ".join(f"{v} tokens/s" for v in variants)
    head += " | " + " | ".join(f"{v} / fp32" for v in variants if v != "fp32") + " |"
    rows = [head, "|" + "---|" * (1 + 2 * len(variants) - ("fp32" in variants))]
    for run, by in result["runs"].items():
        base = (by.get("fp32") or {}).get("tokens_per_s")
        cells = [str((by.get(v) or {}).get("tokens_per_s", "–")) for v in variants]
        ratios = []
        for v in variants:
            if v == "fp32":
                continue
            rate = (by.get(v) or {}).get("tokens_per_s")
            ratios.append(f"{rate / base:.2f}×" if rate and base else "–")
        rows.append(f"| `{run}` | " + " | ".join(cells + ratios) + " |")
    m = result["machine"]
    flags = ", ".join(k for k, v in m["flags"].items() if v)
    return (
        f"{m['cpu']} ({flags}), torch {m['torch']}, 1 thread, {result['batches']} batches per "
        f"figure, {result['date'][:10]}\n\n" + "\n".join(rows)
    )


def main() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from roofline import machine

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="")
    ap.add_argument("--variants", default="fp32,bf16")
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    runs = args.runs.split(",") if args.runs else neural_runs(params)
    variants = args.variants.split(",")
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "batches": args.batches,
        "variants": variants,
        "runs": {},
    }
    for run in runs:
        result["runs"][run] = {}
        for variant in variants:
            figure = measure(run, variant, args.batches, params)
            result["runs"][run][variant] = figure
            print(run, variant, figure, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
