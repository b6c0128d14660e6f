"""One training step of each translation family: the output layer at every position against the
output layer at the labelled positions alone.

Usage: python benchmarks/mt_step.py [--families seq2seq,attention,transformer,decoder_mt]
                                    [--steps 20] [--warmup 3] [--rounds 3] [--batches 8]
                                    [--out benchmarks/results/mt_step.json]

Each family is built from its params.yaml section (the run of that name: sizes, dropout, label
smoothing, optimizer, `trainer.gradient_clip_val`) with a vocabulary of 4,000 pieces, and trains
on synthetic batches shaped like Multi30k's: `batch_size` pairs drawn by the project's own
length-bucketed sampler (`nlpzoo.data.mt.LengthBatches`) from sentence lengths with the
corpus's mean of 16.3 target pieces, German sources about 8 % longer, pairs over `max_len`
skipped. One step is forward, backward, gradient clipping (where the run clips) and the
optimizer's update, in fp32 on one thread. Two ways of forming the loss are timed, each on its
own copy of the model, in alternating rounds of `--steps` steps after `--warmup` untimed ones:

    old   the computation before the change, kept here as a reference: the output layer at every
          target position (decoder_mt: at every position of `<s> x <sep> y`, and its (B, T, V)
          copy of the target logits), the loss masked; attention's output layer inside the loop
          over target steps
    new   the model's own training forward: the output layer at the labelled positions alone
          (attention's once, after the loop)

Both give the same loss and gradients (tests/models/test_*.py check it). The result has target
tokens per second of each (labelled positions: the pieces and </s>), their ratio, milliseconds
per step, the CPU's name, the thread count, torch's version and the load average before and
after. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import yaml

from nlpzoo.data.mt import IGNORE, LengthBatches, collate
from nlpzoo.data.vocab import PAD
from nlpzoo.families import FAMILIES
from nlpzoo.models import decoder_mt
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.params import run_configs
from nlpzoo.training.module import make_optimizer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mt_step.json"
FAMILY_RUNS = ("seq2seq", "attention", "transformer", "decoder_mt")
VOCAB = 4000
TARGET_MEAN = 16.3  # target pieces per sentence at 4,000 pieces (docs/benchmarks.md)
SOURCE_RATIO = 1.08  # German sources are a little longer than their English targets
FIRST_ID = 5  # ids below are <unk>, <s>, </s>, <pad>, <sep>


# ----------------------------------------------------------------- the computation before


def _old_seq2seq(model, src, tgt_in, labels):
    _, state = model.encode(src)
    s, _ = model.decoder(model.drop(model.tgt_emb(tgt_in)), state)
    logits = model.out(model.drop(s))  # (B, T, V): every target position
    return label_smoothed_loss(logits, labels, model.config.label_smoothing, IGNORE)


def _old_attention(model, src, tgt_in, labels):
    state = model.encode(src)
    s, c = state["s"], state.get("cell")
    logits = []
    for i in range(tgt_in.shape[1]):  # the output layer inside the loop, every step
        emb = model.drop(model.tgt_emb(tgt_in[:, i]))
        context, _ = model.attention(s, state["keys"], state["ann"], state["mask"])
        rnn_in = torch.cat([emb, context], -1)
        if model.config.cell == "lstm":
            s, c = model.cell(rnn_in, (s, c))
        else:
            s = model.cell(rnn_in, s)
        t = torch.cat([emb, s, context], -1)
        if model.deep_out is not None:
            t = model.deep_out(t).view(t.shape[0], -1, 2).amax(-1)
        logits.append(model.out(model.drop(t)))
    logits = torch.stack(logits, 1)  # (B, T, V)
    return label_smoothed_loss(logits, labels, model.config.label_smoothing, IGNORE)


def _old_transformer(model, src, tgt_in, labels):
    logits, _ = model.decode_teacher_forced(src, tgt_in)  # (B, T, V): every target position
    return label_smoothed_loss(logits, labels, model.config.label_smoothing, IGNORE)


def _old_decoder_mt(model, src, tgt_in, labels):
    inputs, seq_labels = decoder_mt.build_sequence(src, tgt_in, labels)
    logits = model.lm_logits(inputs)  # (B, P, V): prompt, target and padding
    n = (src != PAD).sum(1, keepdim=True)
    cols = n + 1 + torch.arange(tgt_in.shape[1])
    target_logits = logits.gather(1, cols[..., None].expand(-1, -1, logits.shape[-1]))
    del target_logits  # formed every step, read by no training step
    return model.loss(logits, seq_labels)


OLD = {
    "seq2seq": _old_seq2seq,
    "attention": _old_attention,
    "transformer": _old_transformer,
    "decoder_mt": _old_decoder_mt,
}


def _new(model, src, tgt_in, labels):
    return model(src, tgt_in, labels)[1]


# ----------------------------------------------------------------- batches and timing


def synthetic_batches(batch_size: int, max_len: int, count: int, seed: int = 0) -> list:
    """`count` batches of `batch_size` pairs, bucketed by length as in training."""
    rng = np.random.default_rng(seed)
    n = LengthBatches.POOL * batch_size
    tgt_len = rng.gamma(7.0, TARGET_MEAN / 7.0, n)  # mean 16.3, sd ≈ 6
    src_len = tgt_len * rng.normal(SOURCE_RATIO, 0.15, n)
    tgt_len = np.maximum(np.rint(tgt_len), 1).astype(int)
    src_len = np.maximum(np.rint(src_len), 1).astype(int)
    keep = (tgt_len <= max_len) & (src_len <= max_len) if max_len else np.ones(n, bool)
    pairs = [
        (rng.integers(FIRST_ID, VOCAB, s), rng.integers(FIRST_ID, VOCAB, t))
        for s, t in zip(src_len[keep], tgt_len[keep], strict=True)
    ]
    lengths = np.array([max(len(s), len(t)) for s, t in pairs])
    batches = list(LengthBatches(lengths, batch_size, shuffle=True, seed=seed))
    full = [b for b in batches if len(b) == batch_size][:count]
    return [collate([pairs[i] for i in b]) for b in full]


def _step(model, opt, loss_of, batch, clip: float | None) -> None:
    loss = loss_of(model, *batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


def _build(params: dict, run: str, seed: int):
    spec, cfg, trainer_cfg = run_configs(params, run)
    torch.manual_seed(seed)
    model = FAMILIES[spec.family].model_class()(cfg, VOCAB).train()
    opt = make_optimizer(model, cfg)
    opt = opt["optimizer"] if isinstance(opt, dict) else opt
    return model, opt, cfg, getattr(trainer_cfg, "gradient_clip_val", None)


def time_family(params: dict, run: str, args) -> dict:
    spec, cfg, _ = run_configs(params, run)
    batches = synthetic_batches(cfg.batch_size, getattr(cfg, "max_len", 0), args.batches)
    ways = {"old": OLD[spec.family], "new": _new}
    built = {way: _build(params, run, args.seed) for way in ways}
    seconds = dict.fromkeys(ways, 0.0)
    tokens = dict.fromkeys(ways, 0)
    steps = dict.fromkeys(ways, 0)
    for way, loss_of in ways.items():
        model, opt, _, clip = built[way]
        for i in range(args.warmup):
            _step(model, opt, loss_of, batches[i % len(batches)], clip)
    for _ in range(args.rounds):
        for way, loss_of in ways.items():
            model, opt, _, clip = built[way]
            start = time.perf_counter()
            for i in range(args.steps):
                batch = batches[i % len(batches)]
                _step(model, opt, loss_of, batch, clip)
                tokens[way] += int((batch[2] != IGNORE).sum())
            seconds[way] += time.perf_counter() - start
            steps[way] += args.steps
    rate = {way: tokens[way] / seconds[way] for way in ways}
    src_len = [float((b[0] != PAD).sum(1).float().mean()) for b in batches]
    tgt_len = [float((b[2] != IGNORE).sum(1).float().mean()) for b in batches]
    return {
        "family": spec.family,
        "batch_size": cfg.batch_size,
        "mean_source_pieces": round(float(np.mean(src_len)), 2),
        "mean_target_labels": round(float(np.mean(tgt_len)), 2),  # pieces + </s>
        "target_positions_per_label": round(
            float(np.mean([b[2].numel() / int((b[2] != IGNORE).sum()) for b in batches])), 3
        ),
        "old_tokens_per_s": round(rate["old"], 1),
        "new_tokens_per_s": round(rate["new"], 1),
        "ratio": round(rate["new"] / rate["old"], 3),
        "old_ms_per_step": round(1000 * seconds["old"] / steps["old"], 2),
        "new_ms_per_step": round(1000 * seconds["new"] / steps["new"], 2),
    }


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--families", default=",".join(FAMILY_RUNS), help="runs of params.yaml")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per round and way")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=8, help="distinct batches, cycled")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    params = yaml.safe_load(args.params.read_text())
    load_before = os.getloadavg()
    results = {}
    for run in args.families.split(","):
        results[run] = time_family(params, run, args)
        r = results[run]
        print(
            f"{run:12s} old {r['old_tokens_per_s']:9.1f} tok/s  new {r['new_tokens_per_s']:9.1f} "
            f"tok/s  ×{r['ratio']:.3f}  ({r['old_ms_per_step']} → {r['new_ms_per_step']} ms/step)",
            flush=True,
        )
    out = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "precision": "fp32",
        "vocab_size": VOCAB,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "batches": args.batches,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
