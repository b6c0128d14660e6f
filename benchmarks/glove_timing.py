"""GloVe on Brown: the co-occurrence count and the epoch time, against the reference C tools.

Usage: python benchmarks/glove_timing.py [--epochs 4] [--threads 1,2] [--torch] [--no-cooccur]
           [--window 10] [--repeat 2] [--out benchmarks/results/glove_timing.json]

Times, on the project's own data (run `dvc repro cooccur` first):
  cooccur   `count_cooccurrences` over data/prepared/lm/train.txt (what the cooccur stage does,
            window 10, 1/d weighting, sentence-bounded), best of --repeat runs;
  glove     seconds per epoch of the `glove` run trained through the pipeline's own entry point,
            `nlpzoo.lifecycle.train`, on data/cooccur/ (linked into a temporary project folder):
            params.yaml's `glove:` section (d 100, x_max 10, η 0.2, ...) with `backend: numba`
            (the compiled per-entry kernel, one Lightning step per chunk of entries) and each
            --threads count; its Trainer, callbacks, epoch-end resume checkpoints and MLflow
            logging (to a database in the temporary folder), exactly as `dvc repro` runs it.
            An epoch's seconds are read where the pipeline writes them, the `seconds` column of
            plots/RUN.csv (time since training started, at each epoch's end): the differences
            of consecutive rows, so the first epoch (Trainer start-up) is not counted. --torch
            adds the same run with `backend: torch` (mini-batches and SparseAdagrad, the path
            for DDP and GPUs; torch's intra-op threads = the thread count).
The kernel is compiled (or its cache loaded) by a one-epoch warm-up run on a small matrix before
anything is timed.

The reference figures are the C implementation's (cooccur + glove, 2 threads, same machine, same
window and dimension): 1.6 s to count and 4.2 s per epoch. The C tools are not part of this
project and are not run here: their times are the constants below. Targets: the count within 3
times the tool's, an epoch within the tool's time (ratio <= 1).

The result goes to --out as JSON: per backend and thread count the epoch seconds (all, and their
median), the ratio to the reference, the last epoch's training loss (mean ½ f e² per entry), and
the 1-minute load average before and after (a busy machine makes the times meaningless).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from nlpzoo.data.cooccur import count_cooccurrences, load_cooccurrences
from nlpzoo.data.vocab import Vocab, read_lines
from nlpzoo.params_data import CooccurConfig

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_COOCCUR_S = 1.6
REFERENCE_EPOCH_S = 4.2


def time_cooccur(window: int, repeat: int, tmp: Path) -> tuple[float, dict]:
    vocab = Vocab.load(ROOT / "data" / "vocab" / "lm" / "vocab.txt")
    best, stats = float("inf"), {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        stats = count_cooccurrences(
            read_lines(ROOT / "data" / "prepared" / "lm" / "train.txt"),
            word_to_id=vocab.index,
            vocab_size=len(vocab),
            out_path=tmp / "cooccur.npz",
            config=CooccurConfig(window=window),
            scratch_dir=tmp,
        )
        best = min(best, time.perf_counter() - t0)
    return best, stats


def make_project(root: Path, data: Path) -> Path:
    """A project folder whose data/cooccur/ holds (links to) the cooccur stage's outputs."""
    out = root / "data" / "cooccur"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("cooccur.npz", "vocab.txt"):
        (out / name).symlink_to((data / name).resolve())
    return root


def small_project(root: Path, data: Path, entries: int = 20_000) -> Path:
    """The first `entries` non-zeros of the matrix, for the warm-up run."""
    rows, cols, vals, vocab_size = load_cooccurrences(data / "cooccur.npz")
    out = root / "data" / "cooccur"
    out.mkdir(parents=True, exist_ok=True)
    np.savez(
        out / "cooccur.npz",
        rows=rows[:entries],
        cols=cols[:entries],
        vals=vals[:entries],
        vocab_size=vocab_size,
    )
    (out / "vocab.txt").symlink_to((data / "vocab.txt").resolve())
    return root


def train_pipeline(root: Path, backend: str, threads: int, epochs: int, seed: int) -> dict:
    """One `glove` run through `nlpzoo.lifecycle.train`: its epoch seconds (plots/RUN.csv),
    fit seconds and last training loss."""
    from nlpzoo import lifecycle

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    section = {k: v for k, v in (params.get("glove") or {}).items() if k != "trainer"}
    name = f"glove_{backend}_{threads}"
    run = {
        "seed": seed,
        "models": {name: {"family": "glove", "data": "cooccur"}},
        name: {
            **section,
            "backend": backend,
            "threads": threads,
            "trainer": {
                "max_epochs": epochs,
                "accelerator": "cpu",
                "devices": 1,
                "threads": threads,  # torch's intra-op threads (the torch backend)
            },
        },
    }
    stats = lifecycle.train(run, name, root)
    lines = (root / "plots" / f"{name}.csv").read_text().split()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    at = [float(r["seconds"]) for r in rows]  # since training started, at each epoch's end
    return {
        "epoch_seconds": [round(b - a, 3) for a, b in itertools.pairwise(at)],
        "first_epoch_seconds": round(at[0], 3),
        "fit_seconds": float(stats["fit_seconds"]),
        "train_loss": round(float(rows[-1]["train_loss"]), 5),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (the first untimed)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--torch", action="store_true", help="also time backend: torch")
    ap.add_argument("--no-cooccur", action="store_true", help="skip the co-occurrence count")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/glove_timing.json")
    args = ap.parse_args()
    if args.epochs < 2:
        raise SystemExit("--epochs must be >= 2 (the first epoch is not timed)")
    data = ROOT / "data" / "cooccur"
    rows, _, _, vocab_size = load_cooccurrences(data / "cooccur.npz")
    nonzeros = int(rows.size)
    threads = [int(t) for t in args.threads.split(",")]
    backends = ["numba", "torch"] if args.torch else ["numba"]
    print(
        f"Brown train split (data/cooccur), V = {vocab_size:,}: {nonzeros:,} non-zeros; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    out: dict = {
        "benchmark": "glove_timing",
        "matrix": {
            "path": "data/cooccur/cooccur.npz",
            "vocab_size": vocab_size,
            "nonzeros": nonzeros,
        },
        "epochs_per_run": args.epochs,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "reference": {
            "epoch_s": REFERENCE_EPOCH_S,
            "cooccur_s": REFERENCE_COOCCUR_S,
            "threads": 2,
            "note": "the reference C tools (cooccur, glove), measured on this machine with the "
            "same window and d; constants here, the tools are not run",
        },
        "results": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp / 'mlflow.db'}"
        if not args.no_cooccur:
            (tmp / "count").mkdir()
            load = os.getloadavg()[0]
            seconds, stats = time_cooccur(args.window, args.repeat, tmp / "count")
            out["cooccur"] = {
                "seconds": round(seconds, 3),
                "ratio_to_reference": round(seconds / REFERENCE_COOCCUR_S, 3),
                "window": args.window,
                "nonzeros": int(stats["nonzeros"]),
                "load_average_before": round(load, 2),
            }
            print(
                f"co-occurrence count: {seconds:.2f} s (reference {REFERENCE_COOCCUR_S} s, "
                f"ratio {seconds / REFERENCE_COOCCUR_S:.2f}, target <= 3)"
            )
        # compile the kernel (or load its cache) outside any timing
        train_pipeline(small_project(tmp / "warm", data), "numba", 1, 1, args.seed)
        project = make_project(tmp / "project", data)
        print("| backend | threads | s/epoch (median) | epochs timed | vs reference | loss |")
        print("|---|---|---|---|---|---|")
        for backend in backends:
            for t in threads:
                before = os.getloadavg()[0]
                r = train_pipeline(project, backend, t, args.epochs, args.seed)
                per_epoch = statistics.median(r["epoch_seconds"])
                entry = {
                    "backend": backend,
                    "threads": t,
                    "epoch_s": round(per_epoch, 3),
                    "ratio_to_reference": round(per_epoch / REFERENCE_EPOCH_S, 3),
                    "entries_per_s": round(nonzeros / per_epoch),
                    **r,
                    "load_average_before": round(before, 2),
                    "load_average_after": round(os.getloadavg()[0], 2),
                }
                out["results"].append(entry)
                print(
                    f"| {backend} | {t} | {per_epoch:.2f} | {len(r['epoch_seconds'])} | "
                    f"{per_epoch / REFERENCE_EPOCH_S:.2f} (<= 1) | {r['train_loss']:.4f} |",
                    flush=True,
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"load average after: {os.getloadavg()[0]:.2f}; written to {args.out}")


if __name__ == "__main__":
    main()
