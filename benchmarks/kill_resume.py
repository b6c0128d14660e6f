"""Kill `train-lstm_lm` half-way, rerun it, and compare with an uninterrupted run.

Usage: python benchmarks/kill_resume.py [--data DIR] [--fraction F] [--epochs N]
                                        [--checkpoint-steps S | --checkpoint-minutes M]
                                        [--kill-at 0.5] [--signal KILL]
In a scratch project it runs the real stage scripts three times: `train.py lstm_lm` to the end
(the reference), then `train.py lstm_lm` killed (SIGKILL by default) at `--kill-at` of the
reference's wall time, then `train.py lstm_lm` again, which resumes from checkpoints/lstm_lm.
Each finished run is scored with `evaluate.py lstm_lm`. It prints the wall time lost to the
kill (killed run + resumed run - reference), the checkpoint interval and start-up time it
should be compared with, and the test perplexity of both runs.

`--data` is a `data/vocab/lm` folder (default: built with the corpus/prepare/vocab stages from
Brown; set NLPZOO_DATA_MIRROR to read Brown from a local mirror). `--fraction` keeps the first
fraction of every split, `--epochs` overrides lstm_lm's max_epochs: both shrink the run for a
quick measurement; the model is params.yaml's lstm_lm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
RUN = "lstm_lm"


def stage(project: Path, name: str, *args: str, **popen) -> subprocess.Popen:
    cmd = [sys.executable, str(ROOT / "stages" / f"{name}.py"), *args]
    env = dict(os.environ, NLPZOO_LOG_LEVEL="WARNING")
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'mlflow.db'}")
    return subprocess.Popen(cmd, cwd=project, env=env, stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen, t0: float, check: bool = True) -> tuple[float, float]:
    """(wall seconds since t0, CPU seconds of the process) once it has ended. CPU time is the
    steadier measure on a machine shared with other work."""
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if check and proc.returncode:
        sys.exit(f"{proc.args} failed:\n{err[-3000:]}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def run(project: Path, name: str, *args: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    return finish(stage(project, name, *args), t0)


def build_brown(work: Path) -> Path:
    """data/vocab/lm of Brown, through the real corpus/prepare/vocab stages."""
    project = work / "brown"
    project.mkdir()
    shutil.copy(ROOT / "params.yaml", project / "params.yaml")
    for name, args in (("corpus", ["lm"]), ("prepare", ["lm"]), ("vocab", ["lm"])):
        run(project, name, *args)
    return project / "data" / "vocab" / "lm"


def make_project(path: Path, data: Path, fraction: float, trainer: dict) -> Path:
    vocab = path / "data" / "vocab" / "lm"
    vocab.mkdir(parents=True)
    shutil.copy(data / "vocab.txt", vocab / "vocab.txt")
    for split in ("train", "valid", "test"):
        stream = np.load(data / f"{split}.npy")
        np.save(vocab / f"{split}.npy", stream[: int(len(stream) * fraction)])
    raw = path / "data" / "raw" / "eval"
    raw.mkdir(parents=True)
    mirror = Path(os.environ.get("NLPZOO_DATA_MIRROR", ROOT.parent / "shared" / "datasets"))
    for name in ("questions-words.txt", "wordsim353.tsv", "simlex999.txt"):
        shutil.copy(mirror / name, raw / name)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for other in set(params["models"]) - {RUN}:  # this project trains lstm_lm only
        params.pop(other, None)
    params["models"] = {RUN: params["models"][RUN]}
    params[RUN].setdefault("trainer", {}).update(trainer)
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a data/vocab/lm folder (default: build Brown)")
    parser.add_argument("--fraction", type=float, default=1.0, help="of every split to keep")
    parser.add_argument("--epochs", type=int, help="override lstm_lm's trainer.max_epochs")
    parser.add_argument("--checkpoint-steps", type=int, default=0)
    parser.add_argument("--checkpoint-minutes", type=float, default=None)
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of the reference")
    parser.add_argument("--signal", default="KILL", help="KILL, TERM or INT")
    args = parser.parse_args()
    trainer = {"checkpoint_every_steps": args.checkpoint_steps}
    if args.checkpoint_minutes is not None:
        trainer["checkpoint_every_minutes"] = args.checkpoint_minutes
    if args.epochs:
        trainer["max_epochs"] = args.epochs
    with tempfile.TemporaryDirectory(prefix="nlpzoo-kill-") as tmp:
        work = Path(tmp)
        data = args.data or build_brown(work)
        project = make_project(work / "project", data, args.fraction, trainer)
        n_train = len(np.load(project / "data" / "vocab" / "lm" / "train.npy"))
        metrics = project / "metrics" / f"{RUN}.json"

        reference, reference_cpu = run(project, "train", RUN)
        stats = json.loads((project / "models" / RUN / "train_stats.json").read_text())
        run(project, "evaluate", RUN)
        ref = json.loads(metrics.read_text())
        shutil.rmtree(project / "models" / RUN)

        t0 = time.perf_counter()
        proc = stage(project, "train", RUN)
        time.sleep(args.kill_at * reference)
        proc.send_signal(getattr(signal, f"SIG{args.signal}"))
        killed_after, killed_cpu = finish(proc, t0, check=False)
        ckpt = project / "checkpoints" / RUN / "resume.ckpt"
        resumed_from = "-"
        if ckpt.is_file():
            import torch

            blob = torch.load(ckpt, map_location="cpu", weights_only=True)
            resumed_from = f"step {blob['global_step']} (epoch {blob['epoch']})"
        resumed, resumed_cpu = run(project, "train", RUN)
        run(project, "evaluate", RUN)
        res = json.loads(metrics.read_text())

    # optimizer steps of the reference: BPTT windows per epoch (batch_size rows, bptt long)
    section = yaml.safe_load((ROOT / "params.yaml").read_text())[RUN]
    rows = n_train // section["batch_size"]
    steps = stats["epochs"] * -(-(rows - 1) // section["bptt"])
    per_step = stats["fit_seconds"] / steps
    every = args.checkpoint_steps
    lost = killed_after + resumed - reference
    lost_cpu = killed_cpu + resumed_cpu - reference_cpu
    startup = reference - stats["fit_seconds"]
    print(f"run {RUN}: fraction {args.fraction} of each split, trainer overrides {trainer}")
    print(
        f"uninterrupted train          {reference:8.1f} s  (fit {stats['fit_seconds']:.1f} s,"
        f" start-up and saving {startup:.1f} s, {stats['epochs']} epochs)"
    )
    print(
        f"killed (SIG{args.signal}) after       {killed_after:8.1f} s  resumed from {resumed_from}"
    )
    print(f"resumed train                {resumed:8.1f} s")
    print(f"wall time lost to the kill   {lost:8.1f} s")
    print(
        f"CPU time: uninterrupted {reference_cpu:.1f} s, killed {killed_cpu:.1f} s + resumed"
        f" {resumed_cpu:.1f} s: lost {lost_cpu:.1f} s"
    )
    if every:
        print(f"checkpoint interval          {every * per_step:8.1f} s  ({every} steps)")
    print(f"test ppl uninterrupted       {ref['test_ppl']:10.3f}")
    print(f"test ppl resumed             {res['test_ppl']:10.3f}")
    print(f"valid ppl uninterrupted / resumed  {ref['valid_ppl']:.3f} / {res['valid_ppl']:.3f}")


if __name__ == "__main__":
    main()
