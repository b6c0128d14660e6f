"""Output layers of the language models: full softmax vs hierarchical vs adaptive, side by side.

Usage: python benchmarks/lm_outputs.py [--runs nnlm,lstm_lm,rnn_lm,transformer_lm] [--tokens 200000]
       [--threads 2] [--out benchmarks/results/lm_outputs.json]

For each run, the params.yaml sizes are kept and only `output` changes (the LSTM's tied softmax is
also trained untied, since the other outputs cannot be tied to the embedding). Every variant trains
on the same first `--tokens` training tokens of Brown (data/vocab/lm: run `dvc repro vocab@lm`
first) through the project's own Lightning module, then the whole validation split is scored
exactly. Printed per variant: measured training tokens/s, its speed-up over the run's softmax, the
model's multiply-adds per token (`cost_per_token`, the seeds' formula) and validation perplexity
after that much training. Variants run one after the other; on a busy machine compare ratios
from one invocation only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import torch
import yaml

from nlpzoo.config import build
from nlpzoo.data.lm import lm_dataloaders
from nlpzoo.data.vocab import Vocab, load_stream
from nlpzoo.evaluation.perplexity import lm_log_probs, perplexity
from nlpzoo.families import FAMILIES
from nlpzoo.params import TrainerConfig
from nlpzoo.training import FamilyModule, make_trainer
from roofline import machine  # this folder: the CPU, its flags and torch

ROOT = Path(__file__).resolve().parents[1]


def variants(run: str, family: str, section: dict) -> list[tuple[str, dict]]:
    """The run's sizes with each output layer; the softmax first (the speed-ups' base), tied to
    the embedding where the family can tie it (transformer_lm always ties its softmax)."""
    tieable = "tie_weights" in section
    tied = family == "transformer_lm" or (
        tieable and section.get("emb_dim") == section.get("hidden_dim")
    )
    out = [
        (
            "softmax (tied)" if tied else "softmax",
            {"output": "softmax", **({"tie_weights": True} if tied and tieable else {})},
        )
    ]
    untie = {"tie_weights": False} if tieable else {}
    if tied and tieable:
        out.append(("softmax (untied)", {"output": "softmax", **untie}))
    out.append(("hierarchical", {"output": "hierarchical", **untie}))
    out.append(("adaptive", {"output": "adaptive", **untie}))
    return out


def train_and_score(family, cfg, vocab, train, valid, tokens, clip, tmp: Path):
    torch.manual_seed(0)
    module = FamilyModule(family, dataclasses.asdict(cfg), len(vocab), "bench", vocab.counts)
    loader, _ = lm_dataloaders(FAMILIES[family], cfg, train, valid, seed=0)
    # tokens per step: B rows of a BPTT window or of a Transformer block; one per NNLM window
    per_step = cfg.batch_size * getattr(cfg, "bptt", getattr(cfg, "block_size", 1))
    steps = max(1, min(tokens // per_step, len(loader)))
    tcfg = TrainerConfig(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        max_steps=steps,
        gradient_clip_val=clip,
        early_stopping_patience=0,
    )
    trainer = make_trainer(tcfg, "bench", tmp / "curve.csv", tmp / "ckpt", None, 0, validate=False)
    t0 = time.perf_counter()
    trainer.fit(module, loader)
    seconds = time.perf_counter() - t0
    model = module.model.eval()
    ppl = perplexity(lm_log_probs(FAMILIES[family], model, valid, cfg))
    cost = model.cost(len(vocab)).multiply_adds
    return steps * per_step / seconds, cost, ppl, steps * per_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="nnlm,lstm_lm")
    ap.add_argument("--tokens", type=int, default=200_000, help="training tokens per variant")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="also write the rows here (JSON)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    data = ROOT / "data" / "vocab" / "lm"
    vocab = Vocab.load(data / "vocab.txt")
    train, valid = load_stream(data, "train"), load_stream(data, "valid")
    print(
        f"Brown, V = {len(vocab):,}; {args.tokens:,} training tokens per variant, whole "
        f"validation split scored; {args.threads} threads; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    rows = []
    print("| run | output | tokens/s | speed-up | cost/token (mult-adds) | valid ppl |")
    print("|---|---|---|---|---|---|")
    for run in args.runs.split(","):
        family = params["models"][run]["family"]
        section = {k: v for k, v in params[run].items() if k not in ("trainer", "family")}
        clip = (params[run].get("trainer") or {}).get("gradient_clip_val")
        base = None
        for label, change in variants(run, family, section):
            cfg = build(FAMILIES[family].config, {**section, **change}, run)
            with tempfile.TemporaryDirectory() as tmp:
                rate, cost, ppl, _ = train_and_score(
                    family, cfg, vocab, train, valid, args.tokens, clip, Path(tmp)
                )
            base = base or rate
            rows.append(
                {
                    "run": run,
                    "output": label,
                    "tokens_per_s": round(rate, 1),
                    "speedup": round(rate / base, 3),
                    "cost_per_token": round(cost),
                    "valid_ppl": round(ppl, 2),
                }
            )
            print(
                f"| {run} | {label} | {rate:,.0f} | {rate / base:.2f} | {cost:,.0f} | {ppl:.1f} |",
                flush=True,
            )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "threads": args.threads,
                    "tokens": args.tokens,
                    "load_average": os.getloadavg(),
                    "machine": {**machine(), "threads": args.threads},
                    "torch": torch.__version__,
                    "rows": rows,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
