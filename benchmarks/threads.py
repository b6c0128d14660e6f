"""Two cores: one run with 2 torch threads, or two runs side by side with 1 thread each?

Usage: python benchmarks/threads.py [--runs nnlm,lstm_lm] [--steps N] [--warmup 3]
                                    [--out benchmarks/results/threads.json]
       python benchmarks/threads.py --markdown [--out ...]   (the table of a saved result)

For each neural run of `params.yaml` (default: nnlm, rnn_lm, lstm_lm, transformer_lm, seq2seq,
attention, transformer, decoder_mt) it measures training throughput in three settings:

    (a) one process, torch.set_num_threads(1)
    (b) one process, 2 threads
    (c) two processes at once, 1 thread each, timing the same steps concurrently (they start
        their timed steps together, at a barrier); the total is the sum of their throughputs

What is timed is the pipeline's own training: the run is built as `nlpzoo.lifecycle` builds it
(`Run.of` on params.yaml, the task's `load` and `datamodule`, `training.FamilyModule` seeded with
the run's seed) and fitted by the pipeline's Trainer (`training.make_trainer`: the run's
`trainer:` section, so its precision, gradient clipping and callbacks, with validate=False), on
the CPU, with `max_steps` = warm-up + timed steps, no validation and no MLflow, checkpoints to a
temporary folder. A callback starts the clock at the first step after `--warmup` optimizer steps
and stops it after `--steps` more (forward, backward, clipping, optimizer and scheduler step,
the Lightning loop and the data loader between them). All settings train the same batches: the
first ones of the run's first epoch.

Units: predictions per second, as `train_tokens_per_s` in train_stats.json: for a language model
every target token; for translation the target pieces (labels that are not padding).
Translation runs also report `src_tgt_tokens_per_s`, counting the source pieces too.

Per run two processes (multiprocessing, spawn) load the data; the first times (a) and (b) while
the second waits idle, then both time (c); every fit builds a new model and Trainer. Results go
to `--out` (JSON: per run the three throughputs, the speedups of (b) and (c) over (a), seconds;
machine info: CPUs, torch version, load average before and after, date) and a markdown table is
printed. The default step counts
are per run, sized so that all eight runs take about 4 minutes on the 2-core machine of
docs/benchmarks.md; run it on an otherwise idle machine (the load average is recorded).
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "threads.json"
RUNS = (
    "nnlm",
    "rnn_lm",
    "lstm_lm",
    "transformer_lm",
    "seq2seq",
    "attention",
    "transformer",
    "decoder_mt",
)
# timed optimizer steps per run by default: about 3 s each at 1 thread on the 2-core machine
# (from the train_tokens_per_s of metrics/RUN.json), about 20-30 s per run in all
STEPS = {
    "nnlm": 80,
    "rnn_lm": 10,
    "lstm_lm": 24,
    "transformer_lm": 8,
    "seq2seq": 10,
    "attention": 8,
    "transformer": 16,
    "decoder_mt": 8,
}
WARMUP = 3


# --------------------------------------------------------------------------- worker side


def _clock_callback(warmup: int, steps: int, barrier, mt: bool):
    import pytorch_lightning as pl

    class Clock(pl.Callback):
        """Times optimizer steps warmup+1 .. warmup+steps, and the predictions they train on."""

        def __init__(self) -> None:
            self.t0 = self.t1 = None
            self.p0 = self.p1 = 0
            self.src = 0  # source pieces of the timed batches (translation)

        def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
            if self.t0 is None and trainer.global_step == warmup:
                if barrier is not None:
                    barrier.wait()  # setting (c): both processes start their timed steps together
                self.p0 = module.predictions
                self.t0 = time.monotonic()
            if self.t0 is not None and self.t1 is None and mt:
                from nlpzoo.data.vocab import PAD

                self.src += int((batch[0] != PAD).sum())

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            if self.t1 is None and trainer.global_step == warmup + steps:
                self.t1 = time.monotonic()
                self.p1 = module.predictions

    return Clock()


def _fit(run, task, data, threads: int, warmup: int, steps: int, barrier) -> dict:
    """One timed fit of `run` with `threads` torch threads (the pipeline's module and Trainer)."""
    import dataclasses
    import tempfile

    import torch

    from nlpzoo import training

    cfg = dataclasses.replace(
        run.trainer,
        accelerator="cpu",
        devices=1,
        strategy="auto",
        num_nodes=1,
        max_steps=warmup + steps,
        max_time=None,
        limit_val_batches=0,
        early_stopping_patience=0,
        threads=threads,
        checkpoint_every_steps=0,
        checkpoint_every_minutes=0.0,
        progress_every_percent=0.0,
        progress_every_seconds=0.0,
        enable_progress_bar=False,
    )
    torch.manual_seed(run.seed)  # as lifecycle._fit_lightning: the same initial weights
    module = training.FamilyModule(
        run.spec.family,
        dataclasses.asdict(run.config),
        data.vocab_size,
        run=run.name,
        counts=data.counts,
    )
    datamodule = task.datamodule(run, data)
    with tempfile.TemporaryDirectory(prefix="nlpzoo-threads-") as tmp:
        tmp = Path(tmp)
        trainer = training.make_trainer(
            cfg, run.name, tmp / "curve.csv", tmp / "ckpt", None, run.seed, validate=False
        )
        torch.set_num_threads(threads)
        clock = _clock_callback(warmup, steps, barrier, run.family.task == "mt")
        trainer.callbacks.append(clock)
        trainer.fit(module, datamodule=datamodule)
    if clock.t0 is None or clock.t1 is None:
        raise RuntimeError(f"{run.name}: fewer than {warmup + steps} steps in the first epoch")
    seconds = clock.t1 - clock.t0
    predictions = clock.p1 - clock.p0
    out = {
        "threads": torch.get_num_threads(),
        "steps": steps,
        "seconds": round(seconds, 3),
        "tokens": int(predictions),
        "tokens_per_s": round(predictions / seconds, 1),
        "start": clock.t0,
        "end": clock.t1,
    }
    if run.family.task == "mt":
        out["src_tgt_tokens_per_s"] = round((predictions + clock.src) / seconds, 1)
    return out


def worker(name: str, role: int, warmup: int, steps: int, barriers: tuple, queue) -> None:
    """Role 0 times (a) and (b), then (c) beside role 1; role 1 times (c) only.

    Both load the run's data first, so neither load overlaps a timed fit: `ready` once both have
    loaded, `go` once role 0 is done with (a) and (b), `timing` when both have warmed up for (c).
    """
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    ready, go, timing = barriers
    try:
        import pytorch_lightning
        import torch

        # Lightning sets its loggers' level when imported: quiet them afterwards
        for logger in ("pytorch_lightning", "lightning.pytorch", "lightning.fabric"):
            logging.getLogger(logger).setLevel(logging.ERROR)
        del pytorch_lightning

        torch.set_num_threads(1)
        from nlpzoo.params_file import load_params
        from nlpzoo.tasks import Run, task_of

        t0 = time.monotonic()
        run = Run.of(load_params(ROOT / "params.yaml"), name, ROOT)
        task = task_of(run.family)
        data = task.load(run)
        load_s = time.monotonic() - t0
        fits = []
        ready.wait()
        if role == 0:
            fits = [_fit(run, task, data, n, warmup, steps, None) for n in (1, 2)]
        go.wait()
        fits.append(_fit(run, task, data, 1, warmup, steps, timing))
        queue.put(
            {
                "ok": True,
                "role": role,
                "fits": fits,
                "load_s": round(load_s, 2),
                "torch": torch.__version__,
            }
        )
    except BaseException as err:  # reported by the parent
        for b in barriers:
            b.abort()
        queue.put({"ok": False, "role": role, "error": f"{type(err).__name__}: {err}"})


# --------------------------------------------------------------------------- parent side


def bench_run(ctx, name: str, warmup: int, steps: int) -> dict:
    """(a), (b) and (c) of run `name`, in two processes (see `worker`)."""
    t0 = time.monotonic()
    queue = ctx.Queue()
    barriers = tuple(ctx.Barrier(2, timeout=900) for _ in range(3))
    procs = [
        ctx.Process(target=worker, args=(name, role, warmup, steps, barriers, queue))
        for role in (0, 1)
    ]
    for p in procs:
        p.start()
    results = {}
    for _ in procs:
        r = queue.get()
        if not r["ok"]:
            for p in procs:
                p.terminate()
            raise SystemExit(f"{name}: {r['error']}")
        results[r["role"]] = r
    for p in procs:
        p.join()
    a, b, c0 = results[0]["fits"]
    pair = [c0, results[1]["fits"][0]]
    c_total = sum(f["tokens_per_s"] for f in pair)
    # the same over the wall time from the first start to the last end (both processes'
    # predictions): lower than the sum when one process finishes well before the other
    span = max(f["end"] for f in pair) - min(f["start"] for f in pair)
    c_wall = sum(f["tokens"] for f in pair) / span
    out = {
        "steps": steps,
        "warmup": warmup,
        "unit": None,
        "a_1proc_1thread": _clean(a),
        "b_1proc_2threads": _clean(b),
        "c_2procs_1thread": [_clean(f) for f in pair],
        "tokens_per_s": {
            "a": a["tokens_per_s"],
            "b": b["tokens_per_s"],
            "c_total": round(c_total, 1),
            "c_total_wall": round(c_wall, 1),
        },
        "speedup_b_over_a": round(b["tokens_per_s"] / a["tokens_per_s"], 3),
        "speedup_c_over_a": round(c_total / a["tokens_per_s"], 3),
        "data_load_s": results[0]["load_s"],
        "wall_s": round(time.monotonic() - t0, 1),
        "torch": results[0]["torch"],
    }
    if "src_tgt_tokens_per_s" in a:
        out["unit"] = "target pieces/s (src_tgt_*: source + target pieces/s)"
        out["src_tgt_tokens_per_s"] = {
            "a": a["src_tgt_tokens_per_s"],
            "b": b["src_tgt_tokens_per_s"],
            "c_total": round(sum(f["src_tgt_tokens_per_s"] for f in pair), 1),
        }
    else:
        out["unit"] = "tokens/s (every target token of the stream)"
    return out


def _clean(fit: dict) -> dict:
    return {k: v for k, v in fit.items() if k not in ("start", "end")}


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def markdown(result: dict) -> str:
    """The table of a result (what `--markdown` prints)."""
    m = result["machine"]
    lines = [
        f"{m['cpu_count']} CPUs, torch {m['torch']}, {m['date']}, load average "
        f"{m['loadavg_before'][0]:.2f} before / {m['loadavg_after'][0]:.2f} after; "
        "tokens/s of the training step (translation: target pieces/s)",
        "",
        "| run | steps | (a) 1 process, 1 thread | (b) 1 process, 2 threads | "
        "(c) 2 processes x 1 thread, total | b/a | c/a | better |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in result["runs"].items():
        t = r["tokens_per_s"]
        better = "two runs side by side" if t["c_total"] > t["b"] else "one run, 2 threads"
        lines.append(
            f"| `{name}` | {r['steps']} | {t['a']:,.0f} | {t['b']:,.0f} | {t['c_total']:,.0f} "
            f"| {r['speedup_b_over_a']:.2f} | {r['speedup_c_over_a']:.2f} | {better} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    parser.add_argument("--steps", type=int, default=0, help="timed steps (default: per run)")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed steps first")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--markdown", action="store_true", help="print the table of --out")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    os.chdir(ROOT)
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    ctx = mp.get_context("spawn")
    result = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": None,
            "loadavg_before": _loadavg(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        },
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "runs": {},
    }
    t0 = time.monotonic()
    for name in names:
        steps = args.steps or STEPS.get(name, 30)
        r = bench_run(ctx, name, args.warmup, steps)
        result["machine"]["torch"] = r.pop("torch")
        result["runs"][name] = r
        t = r["tokens_per_s"]
        print(
            f"{name}: a {t['a']:,.0f}  b {t['b']:,.0f}  c {t['c_total']:,.0f} tokens/s "
            f"(b/a {r['speedup_b_over_a']:.2f}, c/a {r['speedup_c_over_a']:.2f}; "
            f"{r['wall_s']:.0f} s)",
            flush=True,
        )
    result["machine"]["loadavg_after"] = _loadavg()
    result["wall_s"] = round(time.monotonic() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(markdown(result))
    print(f"\n{result['wall_s']:.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
