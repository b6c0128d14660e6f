"""Translation quality against the shared SentencePiece vocabulary's size (and other settings).

Usage: python benchmarks/mt_vocab.py [--sizes 4000,6000,8000] [--runs seq2seq,transformer]
           [--set transformer.trainer.max_epochs=10 ...] [--precision bf16-mixed,32-true]
           [--accelerator cpu|gpu] [--jobs N] [--work DIR] [--out benchmarks/results/mt_vocab.json]
       python benchmarks/mt_vocab.py --markdown [--out ...]

The output layer and the loss over the V pieces are about half of each translation model's
work; a smaller V shortens that, at the price of longer sentences in pieces. For each size V
it builds the vocabulary as the `vocab@mt` stage does (params `vocab.mt`, vocab_size V) from
data/prepared/mt, then trains and evaluates each translation run on it as its train and
evaluate stages do (`nlpzoo.lifecycle`, params.yaml's settings, MLflow off), each in its own
process and folder under `--work`, `--jobs` of them at a time (on a GPU several share the
device; on a CPU use one per core). Each (V, run, precision) reports test BLEU (tokenized
lowercase, beam: `bleu_tok_lc_beam`; sacreBLEU `bleu_beam`), test perplexity (per piece: not
comparable across sizes), target pieces per sentence, epochs and the fitting seconds.

Quality figures from a GPU agree with the CPU's to within run-to-run noise, not to the digit
(other kernels); the pipeline's own figures are its CPU runs (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mt_vocab.json"
RUNS = ("seq2seq", "attention", "transformer", "decoder_mt")
KEYS = (
    "bleu_tok_lc_beam",
    "bleu_beam",
    "chrf_beam",
    "valid_bleu_tok_lc_beam",
    "test_ppl",
    "epochs",
    "fit_seconds",
    "train_tokens_per_s",
    "train_target_tokens",
    "cost_per_token",
)

CHILD = r"""
import json, sys, logging
from pathlib import Path
import yaml
logging.basicConfig(level=logging.WARNING)
from nlpzoo import lifecycle
root, run = Path(sys.argv[1]), sys.argv[2]
params = yaml.safe_load((root / "params.yaml").read_text())
lifecycle.train(params, run, root)
metrics = lifecycle.evaluate(params, run, root)
print("RESULT " + json.dumps(metrics))
"""


def _set(params: dict, dotted: str, value: object) -> None:
    *path, key = dotted.split(".")
    node = params
    for part in path:
        node = node.setdefault(part, {})
    node[key] = value


def build_vocab(size: int, params: dict, work: Path) -> Path:
    """data/vocab/mt of vocabulary size `size` under work/V<size>/ (built once)."""
    from nlpzoo.config import build
    from nlpzoo.data.vocab import build_mt_vocab
    from nlpzoo.params_data import MTVocabConfig

    project = work / f"V{size}"
    out = project / "data" / "vocab" / "mt"
    if (out / "stats.json").is_file():
        return project
    (project / "data" / "prepared").mkdir(parents=True, exist_ok=True)
    link = project / "data" / "prepared" / "mt"
    if not link.exists():
        link.symlink_to(ROOT / "data" / "prepared" / "mt")
    section = dict((params.get("vocab") or {}).get("mt") or {}, vocab_size=size)
    build_mt_vocab(
        build(MTVocabConfig, section, "vocab.mt"),
        prepared_dir=link,
        out_dir=out,
        seed=int(params.get("seed", 0)),
    )
    return project


def one(project: Path, run: str, params: dict, tag: str, log_dir: Path) -> dict:
    """Train and evaluate `run` in its own folder project/tag-run/, beside the shared data."""
    folder = project / f"{tag}-{run}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "data").exists():
        (folder / "data").symlink_to(project / "data")
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    t0 = time.time()
    log = log_dir / f"{project.name}-{tag}-{run}.log"
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), run],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=f,
            text=True,
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        tail = log.read_text().strip().splitlines()[-3:]
        return {"error": " | ".join(tail), "seconds": round(time.time() - t0, 1)}
    metrics = json.loads(lines[-1][len("RESULT ") :])
    out = {k: metrics.get(k) for k in KEYS}
    pairs = metrics.get("train_pairs") or 0
    if pairs:
        pieces = metrics["train_target_tokens"] / pairs / out["epochs"]
        out["pieces_per_sentence"] = round(pieces, 2)
    out["seconds"] = round(time.time() - t0, 1)
    return out


def markdown(result: dict) -> str:
    rows = [
        "| V | run | precision | BLEU tok-lc beam | sacreBLEU beam | chrF | pieces/sent. "
        "| epochs | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["results"]:
        m = r["metrics"]
        if "error" in m:
            rows.append(f"| {r['size']} | `{r['run']}` | {r['precision']} | error: {m['error']} |")
            continue
        rows.append(
            f"| {r['size']:,} | `{r['run']}` | {r['precision']} | {m['bleu_tok_lc_beam']} | "
            f"{m['bleu_beam']} | {m['chrf_beam']} | {m.get('pieces_per_sentence', '–')} | "
            f"{m['epochs']} | {m['fit_seconds']} |"
        )
    return f"{result['device']}, {result['date'][:10]}; settings {result['set']}\n\n" + "\n".join(
        rows
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4000,6000,8000")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--precision", default="32-true")
    ap.add_argument("--accelerator", default="cpu")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE (YAML), as dvc -S")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path("/tmp/nlpzoo-mt-vocab"))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    _set(params, "trainer.accelerator", args.accelerator)
    _set(params, "trainer.devices", 1)
    _set(params, "trainer.threads", 1)
    _set(params, "mlflow.register", False)
    for item in args.set:
        key, _, value = item.partition("=")
        _set(params, key, yaml.safe_load(value))
    sizes = [int(s) for s in args.sizes.split(",")]
    runs, precisions = args.runs.split(","), args.precision.split(",")
    args.work.mkdir(parents=True, exist_ok=True)
    projects = {size: build_vocab(size, params, args.work) for size in sizes}
    jobs = []
    for precision in precisions:
        for size in sizes:
            for run in runs:
                trial = json.loads(json.dumps(params))
                _set(trial, "vocab.mt.vocab_size", size)
                _set(trial, "trainer.precision", precision)
                jobs.append((size, run, precision, trial))
    device = args.accelerator
    if args.accelerator == "gpu":
        import torch

        device = f"gpu: {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": device,
        "set": args.set,
        "results": [],
    }
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            pool.submit(one, projects[s], r, t, p.replace("-", ""), args.work): (s, r, p)
            for s, r, p, t in jobs
        }
        for fut in cf.as_completed(futures):
            size, run, precision = futures[fut]
            metrics = fut.result()
            print(size, run, precision, metrics, flush=True)
            result["results"].append(
                {"size": size, "run": run, "precision": precision, "metrics": metrics}
            )
    result["results"].sort(key=lambda r: (r["run"], r["precision"], r["size"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
