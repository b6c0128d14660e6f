"""GloVe on Brown: the co-occurrence count and the epoch time, against the reference C tools.

Usage: python benchmarks/glove_timing.py [--epochs 3] [--threads 2] [--window 10]

Times, on the project's own data (run `dvc repro vocab@lm` first):
  cooccur   `count_cooccurrences` over data/prepared/lm/train.txt (what the cooccur stage does,
            window 10, 1/d weighting, sentence-bounded), best of --repeat runs;
  glove     seconds per epoch of the `glove` run (params.yaml sizes, d = 100) trained through the
            project's Lightning module over every non-zero entry, after one warm-up epoch.
The reference figures are the C implementation's (cooccur + glove, 2 threads, same machine, same
window and dimension): 1.6 s to count and 4.2 s per epoch. The C tools are not run here (they are
not part of this project); their times are the constants below.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import torch
import yaml

from nlpzoo.config import build
from nlpzoo.data.cooccur import count_cooccurrences
from nlpzoo.data.glove import cooccur_dataloader
from nlpzoo.data.vocab import Vocab, read_lines
from nlpzoo.models.glove import Config
from nlpzoo.params import CooccurConfig, TrainerConfig
from nlpzoo.training import FamilyModule, make_trainer

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_COOCCUR_S = 1.6
REFERENCE_EPOCH_S = 4.2


def time_cooccur(window: int, repeat: int, tmp: Path):
    vocab = Vocab.load(ROOT / "data" / "vocab" / "lm" / "vocab.txt")
    best, stats = float("inf"), None
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
    return best, stats, len(vocab)


class EpochTimer:
    """Seconds of each training epoch (a Lightning callback)."""

    def __init__(self) -> None:
        import pytorch_lightning as pl

        class _Timer(pl.Callback):
            def __init__(self, outer) -> None:
                self.outer = outer

            def on_train_epoch_start(self, trainer, pl_module) -> None:
                self.outer.t0 = time.perf_counter()

            def on_train_epoch_end(self, trainer, pl_module) -> None:
                self.outer.seconds.append(time.perf_counter() - self.outer.t0)

        self.seconds: list[float] = []
        self.t0 = 0.0
        self.callback = _Timer(self)


def time_glove(path: Path, vocab_size: int, epochs: int, tmp: Path) -> tuple[list[float], float]:
    from nlpzoo.data.cooccur import load_cooccurrences

    rows, cols, vals, _ = load_cooccurrences(path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    section = {k: v for k, v in params["glove"].items() if k not in ("trainer", "family")}
    cfg = build(Config, section, "glove")
    module = FamilyModule("glove", dataclasses.asdict(cfg), vocab_size, run="bench")
    timer = EpochTimer()
    tcfg = TrainerConfig(accelerator="cpu", devices=1, max_epochs=epochs + 1)
    trainer = make_trainer(tcfg, "bench", tmp / "c.csv", tmp / "ckpt", None, 0, validate=False)
    trainer.callbacks.append(timer.callback)
    loader = cooccur_dataloader(rows, cols, vals, cfg.batch_size)
    trainer.fit(module, loader)
    loss = float(trainer.callback_metrics["train/loss_epoch"])
    return timer.seconds[1:], loss  # the first epoch warms up allocations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        seconds, stats, V = time_cooccur(args.window, args.repeat, tmp)
        epochs, loss = time_glove(tmp / "cooccur.npz", V, args.epochs, tmp)
    per_epoch = min(epochs)
    print(
        f"Brown train split, V = {V:,}, window {args.window}: {stats['nonzeros']:,} non-zeros; "
        f"{args.threads} threads; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print("| step | nlpzoo s | reference C s | ratio (target) |")
    print("|---|---|---|---|")
    print(
        f"| co-occurrence count | {seconds:.1f} | {REFERENCE_COOCCUR_S} "
        f"| {seconds / REFERENCE_COOCCUR_S:.2f} (<= 3) |"
    )
    print(
        f"| GloVe epoch (d 100), best of {len(epochs)} | {per_epoch:.1f} | {REFERENCE_EPOCH_S} "
        f"| {per_epoch / REFERENCE_EPOCH_S:.2f} (<= 2) |"
    )
    print(f"epoch times: {', '.join(f'{s:.1f}' for s in epochs)}; final mean ½f·e²: {loss:.4f}")


if __name__ == "__main__":
    main()
