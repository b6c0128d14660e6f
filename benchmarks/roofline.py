"""The machine's one-thread matrix-product peak, and each run's share of it.

Usage: python benchmarks/roofline.py [--out benchmarks/results/roofline.json] [--seconds 1.5]
       python benchmarks/roofline.py --markdown [--out ...]   (the tables of a saved result)

1. Peak. With `torch.set_num_threads(1)`, it times `a @ b` in fp32 and in bf16 at the shapes
   the runs multiply (a batch of 1,024 rows: 64 sentences x 16 pieces, or 32 x 32 tokens):
       output layers   1024x128 @ 128x4000 (MT), 1024x200 @ 200x13192 (LM, full softmax)
       FFN             1024x128 @ 128x512, 1024x512 @ 512x128
       recurrent step  64x256 @ 256x1024 (an LSTM's four gates, one time step of a batch)
       square          1024^3
   FLOPs are 2mnk; each shape is run for `--seconds` after a warm-up and the best of three
   such windows is kept. The peak is the largest fp32 (and bf16) figure: what one core does
   on a plain matrix product of the sizes these models have.
2. Runs (printed, from metrics/, not saved: the saved peaks are an input of the report stage,
   which computes the same shares). For each run's metrics/RUN.json (its recorded
   `cost_per_token` Q, the multiply-adds of one forward pass per token, `train_tokens_per_s` and
   `precision`), the achieved training FLOP/s is 6 x Q x tokens/s (forward 2Q FLOPs, backward
   about twice that) and its share of the peak of the precision it trained in (bf16 for
   bf16-mixed); the pipeline's floor is its training FLOPs at those peaks on every core, beside
   the fitting time the runs recorded.

The result (JSON) names the machine (CPU model, flags that matter: avx2, avx512f,
avx512_bf16, amx_bf16), torch's version, the threads and the load average before and after;
the report's cost section reads it (docs/benchmarks.md, "Roofline"). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "roofline.json"
SHAPES = {  # name -> (m, k, n): (m x k) @ (k x n)
    "output_mt": (1024, 128, 4000),
    "output_lm": (1024, 200, 13192),
    "ffn_up": (1024, 128, 512),
    "ffn_down": (1024, 512, 128),
    "lstm_step": (64, 256, 1024),
    "square": (1024, 1024, 1024),
}
FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def machine() -> dict:
    import torch

    model, flags = platform.processor(), set()
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        info = []
    for line in info:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            model = value.strip()
        if key.strip() == "flags":
            flags = set(value.split())
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "flags": {f: f in flags for f in FLAGS},
        "torch": torch.__version__,
        "threads": 1,
    }


def time_gemm(m: int, k: int, n: int, dtype, seconds: float) -> float:
    """GFLOP/s of (m x k) @ (k x n) in `dtype`, the best of three windows of `seconds`."""
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randn(k, n, generator=g).to(dtype)
    out = torch.empty(m, n, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    best = 0.0
    for _ in range(3):
        count, t0 = 0, time.perf_counter()
        while True:
            torch.matmul(a, b, out=out)
            count += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        best = max(best, 2.0 * m * k * n * count / elapsed / 1e9)
    return best


def peaks(seconds: float) -> dict:
    import torch

    torch.set_num_threads(1)
    table = {}
    for name, (m, k, n) in SHAPES.items():
        table[name] = {
            "shape": [m, k, n],
            "fp32_gflops": round(time_gemm(m, k, n, torch.float32, seconds), 1),
            "bf16_gflops": round(time_gemm(m, k, n, torch.bfloat16, seconds), 1),
        }
    return table


def runs(peak_fp32: float, peak_bf16: float, cores: int) -> dict:
    """Each run's achieved training FLOP/s (6 Q tokens/s) and its share of the one-thread peak of
    the precision it trained in (metrics `precision`: bf16-mixed against the bf16 peak, anything
    else against fp32), from metrics/RUN.json; the pipeline's floor from the FLOPs it trained,
    each run's at its own precision's peak, on every core."""
    out, total_flops, total_seconds, floor_seconds = {}, 0.0, 0.0, 0.0
    for path in sorted((ROOT / "metrics").glob("*.json")):
        m = json.loads(path.read_text())
        q, rate, fit = m.get("cost_per_token"), m.get("train_tokens_per_s"), m.get("fit_seconds")
        if not (q and rate and fit) or m.get("task") == "vectors" or m.get("family") == "ngram":
            continue  # the count and closed-form runs and word2vec do no matrix products here
        precision = str(m.get("precision", "32-true"))
        peak = peak_bf16 if precision.startswith("bf16") else peak_fp32
        achieved = 6.0 * q * rate / 1e9
        flops = 6.0 * q * rate * fit
        total_flops += flops
        total_seconds += fit
        floor_seconds += flops / (peak * 1e9)
        out[path.stem] = {
            "family": m.get("family"),
            "precision": precision,
            "cost_per_token": q,
            "train_tokens_per_s": rate,
            "fit_seconds": fit,
            "training_tflop": round(flops / 1e12, 2),
            "achieved_gflops": round(achieved, 1),
            "share_of_peak": round(achieved / peak, 3),
        }
    return {
        "runs": out,
        "training_tflop": round(total_flops / 1e12, 1),
        "training_minutes_recorded": round(total_seconds / 60, 1),
        "floor_minutes_at_peak_all_cores": round(floor_seconds / cores / 60, 1),
    }


def markdown(result: dict) -> str:
    mach = result["machine"]
    lines = [
        f"Machine: {mach['cpu']}, {mach['cores']} cores, torch {mach['torch']}, one thread; "
        f"flags: {', '.join(f for f, on in mach['flags'].items() if on) or 'none of interest'}; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        f"({result['date']}).",
        "",
        "| shape | m×k @ k×n | fp32 GFLOP/s | bf16 GFLOP/s | bf16 / fp32 |",
        "|---|---|---|---|---|",
    ]
    for name, row in result["peaks"].items():
        m, k, n = row["shape"]
        ratio = row["bf16_gflops"] / row["fp32_gflops"] if row["fp32_gflops"] else float("nan")
        lines.append(
            f"| {name} | {m}×{k} @ {k}×{n} | {row['fp32_gflops']} | {row['bf16_gflops']} | "
            f"{ratio:.2f} |"
        )
    lines += [
        "",
        f"fp32 peak {result['peak_fp32_gflops']} GFLOP/s, bf16 peak {result['peak_bf16_gflops']}.",
        "",
    ]
    r = runs(result["peak_fp32_gflops"], result["peak_bf16_gflops"], mach["cores"])
    if not r["runs"]:
        return "\n".join(lines)
    lines += [
        "| run | precision | Q per token | tokens/s | training TFLOP | achieved GFLOP/s "
        "| share of its precision's peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in r["runs"].items():
        lines.append(
            f"| `{name}` | {row['precision']} | {row['cost_per_token']:,} | "
            f"{row['train_tokens_per_s']:,} | {row['training_tflop']} | "
            f"{row['achieved_gflops']} | {row['share_of_peak']:.0%} |"
        )
    lines += [
        "",
        f"All: {r['training_tflop']} TFLOP in {r['training_minutes_recorded']} min of training "
        f"stages; at each run's peak on all {mach['cores']} cores: "
        f"{r['floor_minutes_at_peak_all_cores']} min.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--markdown", action="store_true", help="print the saved result's tables")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    before = [round(x, 2) for x in os.getloadavg()]
    table = peaks(args.seconds)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "peaks": table,
        "peak_fp32_gflops": max(r["fp32_gflops"] for r in table.values()),
        "peak_bf16_gflops": max(r["bf16_gflops"] for r in table.values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
