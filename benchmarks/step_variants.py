"""One run's training step, eager against the variants that might make it cheaper.

Usage: python benchmarks/step_variants.py RUN [--variants base,compile,sdpa,fused]
                                          [--precision bf16] [--steps 25] [--warmup 5]

Builds RUN's model as its train stage does (params.yaml, the project's data; a Transformer LM
gets random blocks of its block size) and times `--steps` optimizer steps (forward, backward,
update; under `torch.autocast("cpu", bfloat16)` with `--precision bf16`) after `--warmup`
steps, each variant in a fresh process, one thread:

    base      the model as it is (foreach Adam)
    compile   torch.compile of the model (inductor); the warm-up steps include the compilation
    sdpa      the blocks' attention through F.scaled_dot_product_attention (no weights returned)
    fused     Adam with fused=True

Prints milliseconds per step and the warm-up's seconds. Run it on an idle machine, after the
data stages.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time
from dataclasses import asdict
from pathlib import Path
import torch, torch.nn.functional as F, yaml
root, run, precision, variant = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
steps, warmup = int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(1)
from nlpzoo import training
from nlpzoo.tasks import Run, task_of
import nlpzoo.models.transformer_blocks as blocks
if variant == "sdpa":
    def attention(q, k, v, mask=None, scale=True):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=None if scale else 1.0)
        return out, None
    blocks.attention = attention
params = yaml.safe_load((root / "params.yaml").read_text())
r = Run.of(params, run, root)
task = task_of(r.family)
data = task.load(r)
torch.manual_seed(0)
module = training.FamilyModule(r.spec.family, asdict(r.config), data.vocab_size, run=run,
                               counts=data.counts)
n = warmup + steps
if r.family.task == "lm":  # random blocks (the LM loaders need a trainer)
    g = torch.Generator().manual_seed(0)
    B, T = r.config.batch_size, getattr(r.config, "block_size", 0) or r.config.bptt
    x = torch.randint(4, data.vocab_size, (B, T + 1), generator=g)
    batches = [(x[:, :-1], x[:, 1:])] * n
else:
    dm = task.datamodule(r, data)
    dm.setup("fit")
    batches = [b for _, b in zip(range(n), dm.train_dataloader())]
opt = module.configure_optimizers()
opt = opt["optimizer"] if isinstance(opt, dict) else opt
if variant == "fused":
    opt = torch.optim.Adam(opt.param_groups, fused=True)
module.train()
if variant == "compile":
    module.model = torch.compile(module.model)
def step(batch):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        _, loss = module._forward(batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
t0 = time.perf_counter()
for b in batches[:warmup]:
    step(b)
t1 = time.perf_counter()
for b in batches[warmup:]:
    step(b)
t2 = time.perf_counter()
print(f"{run} {precision} {variant}: {(t2 - t1) / steps * 1000:.1f} ms/step, "
      f"warm-up {t1 - t0:.1f} s for {warmup} steps")
"""


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--variants", default="base,compile,sdpa,fused")
    ap.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for variant in args.variants.split(","):
        cmd = [sys.executable, "-c", CHILD, str(ROOT), args.run, args.precision, variant]
        cmd += [str(args.steps), str(args.warmup)]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
        lines = out.stdout.strip().splitlines()
        print(lines[-1] if lines else f"{variant}: failed: {out.stderr.strip()[-300:]}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
