"""Word2vec on Brown: nlpzoo's CBOW and skip-gram against gensim 4, side by side in one run.

Usage: python benchmarks/word2vec_vs_gensim.py [path/to/brown.zip] [--threads 1,2] [--epochs 5]
           [--variants cbow-ns,sg-ns,cbow-hs,sg-hs] [--seeds 3] [--train-tokens 800000]
           [--init-scale 1.0] [--torch] [--out benchmarks/results/word2vec_vs_gensim.json]

Both train on the same text with the same settings: the Bengio split's first 800,000 tokens of
Brown, lowercased, one vocabulary (min_count 5), dim 100, window 5, sample 1e-3, 5 negatives or
hierarchical softmax, word2vec.c's starting rates (0.025 skip-gram, 0.05 CBOW) decaying to 1e-4 of
that, the same number of worker threads (gensim's `workers`, the kernel's `threads`), and the
same starting range of the input vectors: gensim 4 draws them uniform in [−1/d, 1/d), twice
word2vec.c's range (the pipeline's default, `init_scale: 0.5`), so ours runs with `--init-scale`
(default 1.0, gensim's; 0.5 compares the two tools as each comes, and the difference between the
two runs is what the range is worth).

Ours is trained through the pipeline's own entry point, `nlpzoo.lifecycle.train`, on a project
folder holding that vocabulary and stream: the `word2vec` family with its default backend (the
compiled kernel, one Lightning step per chunk of the stream), its Trainer, callbacks, resume
checkpoints and MLflow logging (to a database in the temporary folder), exactly as `dvc repro`
runs it; the time is the run's `fit_seconds` (Trainer.fit). `--torch` adds the same runs with
`backend: torch` (the batched PyTorch steps, the path for DDP and GPUs). The kernel is compiled
(or its cache loaded) by a tiny warm-up run before anything is timed.

words/s is gensim's convention: raw corpus words (before sub-sampling and before unknown words
are dropped) times epochs, per second of training; vocabulary building is not timed. The two take
turns seed by seed (gensim, then ours, then the next seed), so that a slow spell of the machine
slows both. Quality uses one protocol for both models' vectors: nlpzoo.evaluation (WordSim-353
Spearman ρ, 3CosAdd analogy accuracy over the 30,000 most frequent words). Speed is the median
over seeds (every seed's words/s is kept too), quality the mean.

The result goes to `--out` as JSON: one entry per variant and thread count, with both words/s,
speed_ratio (ours / gensim, of the medians) and the per-seed ratios (each seed's two runs back to
back): their median, range, and geometric mean with a 95 % interval (`*_paired_ci95`, Student's t
on the log ratios), which says whether a difference is larger than the machine's noise; the
words/s of our kernel's calls alone (kernel_speed_ratio against gensim's run, and the same
per-seed statistics) and the median share of our run's time spent outside them; both analogy
accuracies (%) and ρ (and ρ of every seed: one seed's ρ varies by about 0.02, so a mean over 3
seeds is uncertain by about ±0.012; ws353_gap_se is the standard error of ours − gensim); the
threads, and the 1-minute load average before and after the variant (a busy machine makes the
speeds meaningless).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from nlpzoo.data.prepare import brown_sentences
from nlpzoo.data.vocab import EOS, Vocab
from nlpzoo.models.word2vec import Config

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / ".." / "shared" / "datasets"
VARIANTS = {  # name → (model, objective)
    "cbow-ns": ("cbow", "negative"),
    "sg-ns": ("skipgram", "negative"),
    "cbow-hs": ("cbow", "hierarchical"),
    "sg-hs": ("skipgram", "hierarchical"),
}
TRAIN_TOKENS = 800_000  # Bengio et al. (2003)'s training split
MIN_COUNT = 5


def load_brown(zip_path: Path, train_tokens: int) -> tuple[list[list[str]], Vocab, np.ndarray]:
    """Training sentences (lowercased), their vocabulary and the `</s>`-terminated id stream."""
    sentences, seen = [], 0
    for sent in brown_sentences(zip_path, lowercase=True, max_line_bytes=10**6):
        if seen >= train_tokens:  # the sentence that crosses the boundary stays in train
            break
        sentences.append(sent)
        seen += len(sent)
    vocab = Vocab.build(Counter(w for s in sentences for w in s), MIN_COUNT)
    vocab.counts[EOS] = len(sentences)
    stream = vocab.encode_lines(" ".join(s) for s in sentences)
    return sentences, vocab, stream


def _paired(ours: list[float], gensim: list[float], key: str = "speed_ratio") -> dict:
    """The per-seed speed ratios ours / gensim (each seed's two runs back to back): their
    median, lowest and highest, and their geometric mean with a 95 % interval (Student's t on
    the log ratios; none with one seed)."""
    from scipy import stats

    ratios = np.asarray(sorted(o / g for o, g in zip(ours, gensim, strict=True)))
    logs = np.log(ratios)
    out = {
        f"{key}_paired_median": round(float(np.median(ratios)), 3),
        f"{key}_paired_min": round(float(ratios[0]), 3),
        f"{key}_paired_max": round(float(ratios[-1]), 3),
        f"{key}_paired_geomean": round(float(np.exp(logs.mean())), 3),
    }
    if len(logs) > 1:
        half = stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs))
        out[f"{key}_paired_ci95"] = [
            round(float(np.exp(logs.mean() - half)), 3),
            round(float(np.exp(logs.mean() + half)), 3),
        ]
    return out


def quality(words: list[str], vectors: np.ndarray, datasets: Path) -> dict[str, float]:
    """WordSim-353 ρ and analogy accuracy, the same protocol for every model's vectors."""
    from nlpzoo.evaluation.analogy import evaluate_analogies
    from nlpzoo.evaluation.similarity import evaluate_similarity

    ws, qw = datasets / "wordsim353.tsv", datasets / "questions-words.txt"
    return {
        "ws353": evaluate_similarity(words, vectors, ws, "ws353")["ws353_rho"],
        "analogy": evaluate_analogies(words, vectors, qw, restrict_vocab=30000)["analogy_acc"],
    }


def train_gensim(sentences, model: str, objective: str, threads: int, epochs: int, seed: int):
    """(seconds, words, vectors) of gensim's Word2Vec with the same settings."""
    from gensim.models import Word2Vec as GensimWord2Vec

    lr = Config(model=model).lr
    g = GensimWord2Vec(
        vector_size=100,
        window=5,
        min_count=MIN_COUNT,
        sample=1e-3,
        sg=int(model == "skipgram"),
        hs=int(objective == "hierarchical"),
        negative=5 if objective == "negative" else 0,
        alpha=lr,
        min_alpha=lr * 1e-4,
        workers=threads,
        seed=seed,
    )
    g.build_vocab(sentences)
    t0 = time.perf_counter()
    g.train(sentences, total_examples=g.corpus_count, epochs=epochs)
    seconds = time.perf_counter() - t0
    return seconds, list(g.wv.index_to_key), g.wv.vectors


def make_project(root: Path, vocab: Vocab, stream: np.ndarray) -> Path:
    """What the vocab stage writes: `data/vocab/lm/{vocab.txt, train.npy}`."""
    out = root / "data" / "vocab" / "lm"
    out.mkdir(parents=True, exist_ok=True)
    vocab.save(out / "vocab.txt")
    np.save(out / "train.npy", stream.astype(np.int32))
    return root


def train_pipeline(
    root: Path,
    model: str,
    objective: str,
    threads: int,
    epochs: int,
    seed: int,
    backend: str,
    init_scale: float = 0.5,
) -> tuple[float, np.ndarray, float, float]:
    """(fit seconds, vectors, last epoch's training loss, seconds inside the compiled kernel) of
    one run through the pipeline's entry point, `nlpzoo.lifecycle.train`. The kernel's seconds
    are those of its calls (`word2vec_threads.train_tokens`, one per Lightning step), timed
    around each call; 0 for the torch backend."""
    from nlpzoo import lifecycle
    from nlpzoo.models import word2vec_threads

    name = f"{model}_{objective}_{backend}_{threads}_{seed}"
    params = {
        "seed": seed,
        "models": {name: {"family": "word2vec", "data": "vocab/lm"}},
        name: {
            "model": model,
            "objective": objective,
            "dim": 100,
            "window": 5,
            "negative": 5,
            "sample": 1e-3,
            "backend": backend,
            "threads": threads,
            "init_scale": init_scale,
            "trainer": {
                "max_epochs": epochs,
                "accelerator": "cpu",
                "devices": 1,
                "threads": threads,  # torch's intra-op threads (the torch backend)
            },
        },
    }
    kernel = word2vec_threads.train_tokens
    inside = [0.0]

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return kernel(*args, **kwargs)
        finally:
            inside[0] += time.perf_counter() - t0

    word2vec_threads.train_tokens = timed  # looked up at each step (nlpzoo.models.word2vec)
    try:
        stats = lifecycle.train(params, name, root)
    finally:
        word2vec_threads.train_tokens = kernel
    blob = torch.load(root / "models" / name / "model.pt", map_location="cpu", weights_only=True)
    vectors = blob["state_dict"]["W_in"].numpy()
    curve = (root / "plots" / f"{name}.csv").read_text().split()
    header, last = curve[0].split(","), curve[-1].split(",")
    loss = float(last[header.index("train_loss")] or "nan")
    return float(stats["fit_seconds"]), vectors, loss, inside[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("zip", nargs="?", type=Path, default=DATASETS / "brown.zip")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seeds", type=int, default=3, help="seeds 1..N; quality is their mean")
    ap.add_argument("--train-tokens", type=int, default=TRAIN_TOKENS)
    ap.add_argument(
        "--init-scale",
        type=float,
        default=1.0,
        help="ours: input vectors uniform in [-s/d, s/d) (1.0 gensim 4, 0.5 word2vec.c)",
    )
    ap.add_argument("--torch", action="store_true", help="also time backend: torch")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/word2vec_vs_gensim.json")
    args = ap.parse_args()
    datasets = args.zip.parent
    sentences, vocab, stream = load_brown(args.zip, args.train_tokens)
    words = sum(len(s) for s in sentences)  # the words/s numerator, per epoch
    seeds = list(range(1, args.seeds + 1))
    print(
        f"Brown train: {len(sentences):,} sentences, {words:,} words, V = {len(vocab):,} "
        f"(min_count {MIN_COUNT}, lowercased); {args.epochs} epochs; {args.seeds} seeds "
        f"(quality: mean; words/s: median); load average {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} CPUs"
    )
    print(
        "| variant | threads | trainer | words/s | vs gensim | WS-353 ρ | analogy % | final loss |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp), vocab, stream)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        # compile the kernel (or load its cache) outside any timing
        warm = make_project(Path(tmp) / "warm", vocab, stream[: min(len(stream), 20_000)])
        train_pipeline(warm, "skipgram", "negative", 1, 1, 0, "numba")

        def summary(runs) -> dict:  # [(seconds, words, vectors, loss[, kernel s])] over seeds
            per_seed = [words * args.epochs / r[0] for r in runs]
            qs = [quality(r[1], r[2], datasets) for r in runs]
            kernel = [r[4] for r in runs if len(r) > 4 and r[4] > 0]
            extra = {}
            if kernel:  # ours: the kernel's own speed, and the share of the run outside it
                extra = {
                    "kernel_words_per_s_seeds": [words * args.epochs / k for k in kernel],
                    "kernel_words_per_s": float(
                        np.median([words * args.epochs / k for k in kernel])
                    ),
                    "outside_kernel_share": float(
                        np.median([1 - r[4] / r[0] for r in runs if len(r) > 4 and r[4] > 0])
                    ),
                }
            return {
                **extra,
                "words_per_s": float(np.median(per_seed)),
                "words_per_s_seeds": [round(r) for r in per_seed],
                "ws353": float(np.mean([q["ws353"] for q in qs])),
                "ws353_seeds": [round(float(q["ws353"]), 4) for q in qs],
                # standard error of the mean ρ (0 with one seed)
                "ws353_se": float(np.std([q["ws353"] for q in qs], ddof=1) / np.sqrt(len(qs)))
                if len(qs) > 1
                else 0.0,
                "analogy": 100 * float(np.mean([q["analogy"] for q in qs])),
                "loss": float(np.mean([r[3] for r in runs])),
            }

        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            for name in args.variants.split(","):
                model, objective = VARIANTS[name]
                load_before = os.getloadavg()[0]
                backends = ["numba"] + ["torch"] * args.torch
                runs: dict[str, list] = {"gensim": [], **{b: [] for b in backends}}
                # the tools take turns seed by seed: a slow spell of the machine (whose speed
                # varies by up to 2x from minute to minute with two threads) hits both alike
                for s in seeds:
                    gensim_run = train_gensim(sentences, model, objective, threads, args.epochs, s)
                    runs["gensim"].append((*gensim_run, 0.0))
                    for backend in backends:
                        sec, vec, loss, kernel_s = train_pipeline(
                            root,
                            model,
                            objective,
                            threads,
                            args.epochs,
                            s,
                            backend,
                            args.init_scale,
                        )
                        runs[backend].append((sec, vocab.words, vec, loss, kernel_s))
                g = summary(runs["gensim"])
                print(
                    f"| {name} | {threads} | gensim {__import__('gensim').__version__} "
                    f"| {g['words_per_s'] / 1e6:.3f} M | 1.00 | {g['ws353']:.3f} "
                    f"| {g['analogy']:.2f} | - |",
                    flush=True,
                )
                ours = {}
                for backend in backends:
                    ours[backend] = o = summary(runs[backend])
                    print(
                        f"| {name} | {threads} | nlpzoo pipeline ({backend}) "
                        f"| {o['words_per_s'] / 1e6:.3f} M "
                        f"| {o['words_per_s'] / g['words_per_s']:.2f} "
                        f"| {o['ws353']:.3f} ({o['ws353'] - g['ws353']:+.3f}) "
                        f"| {o['analogy']:.2f} ({o['analogy'] - g['analogy']:+.2f}) "
                        f"| {o['loss']:.3f} |",
                        flush=True,
                    )
                o = ours["numba"]
                entry = {
                    "variant": name,
                    "threads": threads,
                    "gensim_words_per_s": round(g["words_per_s"]),
                    "nlpzoo_words_per_s": round(o["words_per_s"]),
                    "speed_ratio": round(o["words_per_s"] / g["words_per_s"], 3),
                    # ours / gensim seed by seed (the two ran back to back): the median and the
                    # range, less moved by a slow spell of the machine than the medians' ratio
                    **_paired(o["words_per_s_seeds"], g["words_per_s_seeds"]),
                    # the compiled kernel's calls alone (the rest of the run: Lightning's loop,
                    # the epoch-end resume checkpoints, the curve's MLflow rows)
                    "nlpzoo_kernel_words_per_s": round(o["kernel_words_per_s"]),
                    "kernel_speed_ratio": round(o["kernel_words_per_s"] / g["words_per_s"], 3),
                    # our kernel's calls alone against gensim's run of the same seed
                    **_paired(
                        o["kernel_words_per_s_seeds"], g["words_per_s_seeds"], "kernel_speed_ratio"
                    ),
                    "nlpzoo_outside_kernel_share": round(o["outside_kernel_share"], 3),
                    "gensim_analogy": round(g["analogy"], 2),
                    "nlpzoo_analogy": round(o["analogy"], 2),
                    "gensim_ws353": round(g["ws353"], 4),
                    "nlpzoo_ws353": round(o["ws353"], 4),
                    # ρ ours − gensim, and its standard error over the seeds
                    "ws353_gap": round(o["ws353"] - g["ws353"], 4),
                    "ws353_gap_se": round(float(np.hypot(o["ws353_se"], g["ws353_se"])), 4),
                    "gensim_words_per_s_seeds": g["words_per_s_seeds"],
                    "nlpzoo_words_per_s_seeds": o["words_per_s_seeds"],
                    "gensim_ws353_seeds": g["ws353_seeds"],
                    "nlpzoo_ws353_seeds": o["ws353_seeds"],
                    "nlpzoo_train_loss": round(o["loss"], 4),
                    "load_average_before": round(load_before, 2),
                    "load_average_after": round(os.getloadavg()[0], 2),
                }
                for key in ("speed_ratio", "kernel_speed_ratio"):
                    if f"{key}_paired_ci95" in entry:
                        lo, hi = entry[f"{key}_paired_ci95"]
                        mean = entry[f"{key}_paired_geomean"]
                        print(
                            f"  {name}, {threads} threads, {key} per seed: geometric mean "
                            f"{mean:.3f} (95 % interval {lo:.3f}–{hi:.3f})",
                            flush=True,
                        )
                if "torch" in ours:
                    entry["torch_words_per_s"] = round(ours["torch"]["words_per_s"])
                    entry["torch_ws353"] = round(ours["torch"]["ws353"], 4)
                    entry["torch_analogy"] = round(ours["torch"]["analogy"], 2)
                results.append(entry)
    out = {
        "benchmark": "word2vec_vs_gensim",
        "corpus": f"Brown, first {args.train_tokens:,} tokens, lowercased, min_count {MIN_COUNT}",
        "words_per_epoch": words,
        "epochs": args.epochs,
        "seeds": args.seeds,
        "nlpzoo_init_scale": args.init_scale,
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
