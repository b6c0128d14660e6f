"""Page faults and system time of `rnn_lm`'s training step under glibc's default allocator
settings and with the stage start-up's setting (`nlpzoo.cli.keep_freed_memory`).

Usage: python benchmarks/page_faults.py [--steps 30] [--out benchmarks/results/page_faults.json]

`rnn_lm` at its default params (full softmax over V = 13,192, batch 32 × bptt 35) makes logits
and their gradient of 59 MB each, over glibc's largest mmap threshold (32 MB): each such tensor
is a fresh mmap, zero-filled page by page, and unmapped when freed. Each variant runs in a fresh
process: one thread, synthetic ids, Adam, forward + backward + step; the figure is the minor page
faults and the user and system CPU seconds of the timed steps (after 3 warm-up steps). Page
fault counts do not depend on the machine's load; the seconds do: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "page_faults.json"

CHILD = r"""
import json, resource, sys, time
import torch
from nlpzoo.models.rnn_lm import RNNLM, Config
if sys.argv[2] == "keep":
    from nlpzoo.cli import keep_freed_memory
    keep_freed_memory()
torch.set_num_threads(1)
torch.manual_seed(0)
V, B, T = 13192, 32, 35
cfg = Config(cell="rnn", emb_dim=200, hidden_dim=200, num_layers=1, dropout=0.2, tie_weights=True,
             bptt=T, batch_size=B)
model = RNNLM(cfg, V)
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
x = torch.randint(0, V, (B, T)); y = torch.randint(0, V, (B, T))
def step():
    opt.zero_grad(set_to_none=True)
    _, loss, _ = model(x, y)
    loss.backward()
    opt.step()
for _ in range(3):
    step()
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for _ in range(int(sys.argv[1])):
    step()
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(json.dumps({"minor_faults": r1.ru_minflt - r0.ru_minflt, "wall_s": round(t1 - t0, 3),
                  "user_s": round(r1.ru_utime - r0.ru_utime, 3),
                  "system_s": round(r1.ru_stime - r0.ru_stime, 3)}))
"""


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = {
        "cpu": cpu_name(),
        "threads": 1,
        "steps": args.steps,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "variants": {},
    }
    for variant in ("default", "keep"):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.steps), variant],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rec = json.loads(out.strip().splitlines()[-1])
        rec["faults_per_step"] = round(rec["minor_faults"] / args.steps)
        result["variants"][variant] = rec
        print(variant, rec)
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
