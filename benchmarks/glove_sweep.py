"""GloVe settings sweep on the project's co-occurrence matrix, scored with the project's protocol.

Usage: python benchmarks/glove_sweep.py [SETTING ...] [--epochs 15] [--eval-at 5,10,15]
           [--seed 1234] [--threads 1] [--out benchmarks/results/glove_sweep.jsonl]
       python benchmarks/glove_sweep.py --table     (the results so far, as a Markdown table)

A SETTING is a comma-separated list of `glove` params overrides, e.g. `lr=0.1,batch_size=1024`
(no SETTING: the defaults of params.yaml's `glove:` section). Every setting is trained once from
the same seed, starting from params.yaml's `glove:` section with the overrides applied; the keys
are GloveConfig's (dim, x_max, alpha, lr, batch_size, output, adagrad, ...), plus
`init_scale=S`, which multiplies the model's initial vectors and biases by S after construction
(the model draws them from U(−0.5/d, 0.5/d), as the reference tool does), and `engine`:

What is trained is what the `glove` run trains: `nlpzoo.models.glove.Glove` with its own
optimizer (`configure_optimizers`, SparseAdagrad), on the batches of
`nlpzoo.data.glove.cooccur_dataloader` over data/cooccur/cooccur.npz (run the `cooccur` stage
first), weights seeded as the run seeds them. The steps are those of the run's Lightning module
(forward, backward, optimizer step), driven by a plain loop.

`engine=entry` instead trains the same initial weights with a per-entry loop (numba) written
here after the reference tool's update: for each entry in the epoch's order, the residual, then
every coordinate of w_i, w̃_j, b_i, b̃_j steps by η g / √G and only then adds (η g)² to G
(`adagrad` and `batch_size` are ignored). It is a yardstick for the mini-batch steps, not a
pipeline path.

After each epoch listed in --eval-at, the vectors are scored as the `evaluate` stage scores a
run: 3CosAdd analogy over the 30,000 most frequent words (`evaluate_analogies`), Spearman ρ on
WordSim-353 and SimLex-999 (`evaluate_similarity`), for the configured output and for the other
one (W alone, W + W̃). One JSON line per (setting, evaluated epoch) is appended to --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from nlpzoo.data.cooccur import load_cooccurrences
from nlpzoo.data.glove import cooccur_dataloader
from nlpzoo.data.vocab import Vocab
from nlpzoo.evaluation.analogy import evaluate_analogies
from nlpzoo.evaluation.similarity import evaluate_similarity
from nlpzoo.families.glove import GloveConfig
from nlpzoo.models.glove import Glove

ROOT = Path(__file__).resolve().parents[1]
OUT_NAME = "glove_sweep.jsonl"
RESTRICT_VOCAB = 30000  # the `evaluation.restrict_vocab` of params.yaml


def parse_setting(text: str) -> dict:
    """`lr=0.1,batch_size=1024` -> {"lr": 0.1, "batch_size": 1024} (values read as YAML)."""
    out = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"setting {text!r}: {item!r} is not KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


def score(words: list[str], vectors: np.ndarray, raw: Path) -> dict:
    """The vector part of the `evaluate` stage: analogy accuracy, WS-353 and SimLex ρ."""
    vectors = np.asarray(vectors, dtype=np.float32)
    a = evaluate_analogies(words, vectors, raw / "questions-words.txt", RESTRICT_VOCAB)
    ws = evaluate_similarity(words, vectors, raw / "wordsim353.tsv", "ws353")
    sl = evaluate_similarity(words, vectors, raw / "simlex999.txt", "simlex")
    return {
        "ws353": round(float(ws["ws353_rho"]), 4),
        "simlex": round(float(sl["simlex_rho"]), 4),
        "analogy": round(float(a["analogy_acc"]), 4),
        "analogy_sem": round(float(a["analogy_sem_acc"]), 4),
        "analogy_syn": round(float(a["analogy_syn_acc"]), 4),
    }


def _entry_epoch(word, context, gword, gcontext, rows, cols, vals, order, x_max, alpha, lr):
    """One epoch of the reference tool's per-entry AdaGrad over `order`; returns Σ ½ f e²."""
    d = word.shape[1] - 1
    cost = 0.0
    for k in range(order.shape[0]):
        a = order[k]
        i, j, x = rows[a], cols[a], vals[a]
        w, c, gw, gc = word[i], context[j], gword[i], gcontext[j]
        e = w[d] + c[d] - np.log(x)
        for t in range(d):
            e += w[t] * c[t]
        f = 1.0 if x > x_max else (x / x_max) ** alpha
        cost += 0.5 * f * e * e
        fe = lr * f * e
        for t in range(d):
            g1, g2 = fe * c[t], fe * w[t]  # η ∂/∂w_i, η ∂/∂w̃_j
            w[t] -= g1 / np.sqrt(gw[t])
            c[t] -= g2 / np.sqrt(gc[t])
            gw[t] += g1 * g1
            gc[t] += g2 * g2
        w[d] -= fe / np.sqrt(gw[d])
        c[d] -= fe / np.sqrt(gc[d])
        gw[d] += fe * fe
        gc[d] += fe * fe
    return cost


@functools.cache
def entry_kernel():
    """`_entry_epoch` compiled by numba (imported here: only `engine=entry` needs it)."""
    import numba

    return numba.njit(cache=True)(_entry_epoch)


def train_entry(model: Glove, data: tuple, dataset, epoch: int) -> float:
    """One epoch of `_entry_epoch` on the model's tables (float64 copies kept on the model)."""
    cfg = model.config
    if not hasattr(model, "_entry_state"):
        word = model.word.weight.detach().double().numpy().copy()
        context = model.context.weight.detach().double().numpy().copy()
        model._entry_state = (word, context, np.ones_like(word), np.ones_like(context))
    word, context, gword, gcontext = model._entry_state
    rows, cols, vals = data
    order = dataset.order(epoch).numpy()
    cost = entry_kernel()(
        word, context, gword, gcontext, rows, cols, vals, order, cfg.x_max, cfg.alpha, cfg.lr
    )
    with torch.no_grad():
        model.word.weight.copy_(torch.from_numpy(word))
        model.context.weight.copy_(torch.from_numpy(context))
    return cost


def state(model: Glove, opt: torch.optim.Optimizer | None, frequent: torch.Tensor) -> dict:
    """How far training has gone: the median ‖w_i‖ over all words, and the median √G of AdaGrad's
    accumulators of W over all words and over the 100 words with the most non-zero entries."""
    out = {"median_norm_w": round(float(model.W.detach().norm(dim=1).median()), 4)}
    if opt is not None and opt.state.get(model.word.weight):
        root = opt.state[model.word.weight]["sum"][:, :-1].sqrt()  # (V, d)
        out["median_sqrt_G"] = round(float(root.median()), 4)
        out["median_sqrt_G_frequent"] = round(float(root[frequent].median()), 4)
    return out


def run_setting(
    overrides: dict, base: dict, data: tuple, words: list[str], args: argparse.Namespace
) -> list[dict]:
    rows, cols, vals = data
    overrides = dict(overrides)
    engine = overrides.pop("engine", "torch")
    init_scale = float(overrides.pop("init_scale", 1.0))
    if engine not in ("torch", "entry"):
        raise SystemExit(f"engine must be torch or entry, got {engine!r}")
    cfg = GloveConfig(**{**base, **overrides})
    torch.manual_seed(args.seed)  # as the run: the initial weights follow the params' seed
    model = Glove(cfg, len(words))
    with torch.no_grad():
        for table in (model.word, model.context):
            table.weight.mul_(init_scale)
    opt = model.configure_optimizers()
    loader = cooccur_dataloader(rows, cols, vals, cfg.batch_size, seed=args.seed)
    other = "W" if cfg.output == "W+W~" else "W+W~"
    other_model = dataclasses.replace(cfg, output=other)
    raw = ROOT / "data" / "raw" / "eval"
    frequent = torch.as_tensor(np.argsort(-np.bincount(rows, minlength=len(words)))[:100])
    results, train_seconds = [], 0.0
    for epoch in range(max(args.eval_at)):
        loader.sampler.set_epoch(epoch)  # what Lightning does at each epoch start
        t0 = time.perf_counter()
        total, count = 0.0, 0
        if engine == "entry":
            total, count = train_entry(model, data, loader.dataset, epoch), len(vals)
        for inputs, targets in loader if engine == "torch" else ():
            _, loss = model(inputs, targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * targets.numel()
            count += targets.numel()
        train_seconds += time.perf_counter() - t0
        if not np.isfinite(total):
            print(f"{overrides}: non-finite loss in epoch {epoch + 1}", flush=True)
            break
        if epoch + 1 not in args.eval_at:
            continue
        with torch.no_grad():
            main = score(words, model.embeddings().numpy(), raw)
            model.config = other_model
            alt = score(words, model.embeddings().numpy(), raw)
            model.config = cfg
        line = {
            "settings": {
                **overrides,
                **({"engine": engine} if engine != "torch" else {}),
                **({"init_scale": init_scale} if init_scale != 1.0 else {}),
            },
            "config": dataclasses.asdict(cfg),
            "epochs": epoch + 1,
            **main,
            "other_output": {"output": other, **alt},
            "loss": round(total / max(count, 1), 5),
            "seconds": round(train_seconds, 1),
            "threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "seed": args.seed,
            **state(model, opt if engine == "torch" else None, frequent),
        }
        print(json.dumps(line), flush=True)
        results.append(line)
    return results


def table(path: Path) -> str:
    """The lines of `path` as a Markdown table: one row per (setting, seed), WS-353 ρ at each
    scored epoch, the other metrics at the last one."""
    runs: dict[tuple, list[dict]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(text)
        key = (json.dumps(r["config"], sort_keys=True), json.dumps(r["settings"]), r["seed"])
        runs.setdefault(key, []).append(r)
    out = [
        "| η | x_max | α | batch | other | seed | WS-353 ρ by epoch | epochs | WS-353 ρ | SimLex ρ "
        "| analogy % | other output: WS-353 / SimLex / analogy % | loss | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for lines in runs.values():
        r = lines[-1]
        c, o = r["config"], r["other_output"]
        rest = {k: v for k, v in r["settings"].items() if k not in ("lr", "x_max", "alpha")}
        rest.pop("batch_size", None)
        batch = "1 (per entry)" if rest.pop("engine", None) == "entry" else f"{c['batch_size']:,}"
        if c["adagrad"] != "tool":
            rest["adagrad"] = c["adagrad"]
        other = ", ".join(f"{k} {v}" for k, v in rest.items())
        curve = " ".join(f"{x['epochs']}: {x['ws353']:.3f}" for x in lines)
        out.append(
            f"| {c['lr']:g} | {c['x_max']:g} | {c['alpha']:g} | {batch} | {other} | {r['seed']} "
            f"| {curve} | {r['epochs']} | {r['ws353']:.3f} | {r['simlex']:.3f} | "
            f"{100 * r['analogy']:.1f} | {o['output']}: {o['ws353']:.3f} / {o['simlex']:.3f} / "
            f"{100 * o['analogy']:.1f} | {r['loss']:.4f} | {r['seconds']:.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("settings", nargs="*", help="KEY=VALUE,... overrides of the glove section")
    p.add_argument("--epochs", type=int, default=None, help="train this long (default: params)")
    p.add_argument("--eval-at", default="", help="epochs to score at, e.g. 5,10,15")
    p.add_argument("--seed", type=int, default=None, help="default: params.yaml's seed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--table", action="store_true", help="print --out as a table and stop")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / OUT_NAME)
    args = p.parse_args()
    if args.table:
        print(table(args.out))
        return
    torch.set_num_threads(args.threads)

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    section = dict(params.get("glove") or {})
    trainer = section.pop("trainer", {}) or {}
    epochs = args.epochs or int(trainer.get("max_epochs", 15))
    args.eval_at = sorted({int(e) for e in args.eval_at.split(",") if e} | {epochs})
    if args.seed is None:
        args.seed = int(params.get("seed", 0))

    data_dir = ROOT / "data" / "cooccur"
    rows, cols, vals, vocab_size = load_cooccurrences(data_dir / "cooccur.npz")
    words = Vocab.load(data_dir / "vocab.txt").words
    if len(words) != vocab_size:
        raise SystemExit(f"{data_dir}: vocabulary and matrix differ; rerun the cooccur stage")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    for text in args.settings or [""]:
        lines = run_setting(parse_setting(text), section, (rows, cols, vals), words, args)
        with open(args.out, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
