"""Word2vec on Brown: nlpzoo's CBOW and skip-gram against gensim 4, side by side in one run.

Usage: python benchmarks/word2vec_vs_gensim.py [path/to/brown.zip] [--threads 2] [--epochs 5]
           [--variants cbow-ns,sg-ns,cbow-hs,sg-hs] [--seeds 3] [--plain] [--autograd]
           [--hogwild] [--batch-size N]

Both train on the same text with the same settings: the Bengio split's first 800,000 tokens of
Brown, lowercased, one vocabulary (min_count 5), dim 100, window 5, sample 1e-3, 5 negatives or
hierarchical softmax, word2vec.c's starting rates (0.025 skip-gram, 0.05 CBOW) decaying to 1e-4 of
that, and `--threads` worker threads (gensim) / intra-op threads (torch).

Ours is trained as the pipeline trains it: the Lightning module of the `cbow` / `skipgram` runs
(one process, `Word2Vec.train_step` per batch of nlpzoo.data.word2vec). `--plain` adds the same
steps in a plain loop, to show what the Trainer costs. `--autograd` adds forward, backward and
the SGD of `configure_optimizers` (what a DDP step does). `--hogwild` adds `--threads` processes of
one thread each sharing the weights without locks (Recht et al. 2011), the way gensim's and
word2vec.c's worker threads train; worker r takes the batches of rank r.

words/s is gensim's convention: raw corpus words (before sub-sampling and before unknown words
are dropped) times epochs, per second of training; vocabulary building is not timed. Quality uses
one protocol for both models' vectors: nlpzoo.evaluation (WordSim-353 Spearman ρ, 3CosAdd analogy
accuracy over the 30,000 most frequent words), or gensim's evaluators if nlpzoo's are missing.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from nlpzoo.data.prepare import brown_sentences
from nlpzoo.data.vocab import EOS, Vocab
from nlpzoo.data.word2vec import Word2VecPairs
from nlpzoo.models.word2vec import Config, Word2Vec

DATASETS = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
VARIANTS = {  # name → (model, objective)
    "cbow-ns": ("cbow", "negative"),
    "sg-ns": ("skipgram", "negative"),
    "cbow-hs": ("cbow", "hierarchical"),
    "sg-hs": ("skipgram", "hierarchical"),
}
TRAIN_TOKENS = 800_000  # Bengio et al. (2003)'s training split
MIN_COUNT = 5


def load_brown(zip_path: Path) -> tuple[list[list[str]], Vocab, np.ndarray]:
    """Training sentences (lowercased), their vocabulary and the `</s>`-terminated id stream."""
    sentences, seen = [], 0
    for sent in brown_sentences(zip_path, lowercase=True, max_line_bytes=10**6):
        if seen >= TRAIN_TOKENS:  # the sentence that crosses the boundary stays in train
            break
        sentences.append(sent)
        seen += len(sent)
    vocab = Vocab.build(Counter(w for s in sentences for w in s), MIN_COUNT)
    vocab.counts[EOS] = len(sentences)
    stream = vocab.encode_lines(" ".join(s) for s in sentences)
    return sentences, vocab, stream


def quality(words: list[str], vectors: np.ndarray) -> dict[str, float]:
    """WordSim-353 ρ and analogy accuracy, the same protocol for every model's vectors."""
    ws, qw = DATASETS / "wordsim353.tsv", DATASETS / "questions-words.txt"
    try:
        from nlpzoo.evaluation.analogy import evaluate_analogies
        from nlpzoo.evaluation.similarity import evaluate_similarity
    except ImportError:
        from gensim.models import KeyedVectors

        kv = KeyedVectors(vectors.shape[1])
        kv.add_vectors(words, vectors)
        return {
            "ws353": kv.evaluate_word_pairs(str(ws), case_insensitive=True)[1][0],
            "analogy": kv.evaluate_word_analogies(str(qw), restrict_vocab=30000)[0],
        }
    return {
        "ws353": evaluate_similarity(words, vectors, ws, "ws353")["ws353_rho"],
        "analogy": evaluate_analogies(words, vectors, qw, restrict_vocab=30000)["analogy_acc"],
    }


def train_gensim(
    sentences, model: str, objective: str, args
) -> tuple[float, list[str], np.ndarray]:
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
        workers=args.threads,
        seed=args.seed,
    )
    g.build_vocab(sentences)
    t0 = time.perf_counter()
    g.train(sentences, total_examples=g.corpus_count, epochs=args.epochs)
    seconds = time.perf_counter() - t0
    return seconds, list(g.wv.index_to_key), g.wv.vectors


def _hogwild_worker(rank: int, world: int, w2v: Word2Vec, stream, counts, args) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(args.seed + rank)  # each worker its own noise words
    cfg = w2v.config
    ds = Word2VecPairs(stream, cfg.window, cfg.sample, cfg.batch_size, counts, rank, world)
    total, step = args.epochs * len(ds), 0
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            # workers advance together, so a worker's share of its steps is the run's progress
            w2v.train_step(*ds[i], w2v.lr_at(step, total))
            step += 1


def train_hogwild(stream: np.ndarray, vocab: Vocab, cfg: Config, args) -> tuple[float, np.ndarray]:
    import torch.multiprocessing as mp

    torch.manual_seed(args.seed)
    w2v = Word2Vec(cfg, len(vocab), vocab.counts)
    w2v.share_memory()  # the workers update these very tensors in place
    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    workers = [
        ctx.Process(target=_hogwild_worker, args=(r, args.threads, w2v, stream, vocab.counts, args))
        for r in range(args.threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0, w2v.embeddings().numpy()


def train_ours(
    stream: np.ndarray, vocab: Vocab, cfg: Config, args, autograd: bool
) -> tuple[float, np.ndarray, float]:
    torch.manual_seed(args.seed)
    w2v = Word2Vec(cfg, len(vocab), vocab.counts)
    t0 = time.perf_counter()
    ds = Word2VecPairs(stream, cfg.window, cfg.sample, cfg.batch_size, vocab.counts)
    total, step, loss = args.epochs * len(ds), 0, float("nan")
    if autograd:
        sc = w2v.configure_optimizers(total)
        opt, sched = sc["optimizer"], sc["lr_scheduler"]["scheduler"]
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        losses = []
        for i in range(len(ds)):
            inputs, targets = ds[i]
            if autograd:
                opt.zero_grad()
                _, out = w2v(inputs, targets)
                out.backward()
                opt.step()
                sched.step()
                losses.append(out.detach())
            else:
                losses.append(w2v.train_step(inputs, targets, w2v.lr_at(step, total)))
            step += 1
        loss = float(torch.stack(losses).mean())
    seconds = time.perf_counter() - t0
    return seconds, w2v.embeddings().numpy(), loss


def train_lightning(
    stream: np.ndarray, vocab: Vocab, cfg: Config, args
) -> tuple[float, np.ndarray, float]:
    """The pipeline's path: FamilyModule (closed-form step in one process) under a Trainer."""
    import dataclasses
    import tempfile

    from nlpzoo.data.word2vec import word2vec_dataloader
    from nlpzoo.params import TrainerConfig
    from nlpzoo.training import FamilyModule, make_trainer

    torch.manual_seed(args.seed)
    module = FamilyModule("word2vec", dataclasses.asdict(cfg), len(vocab), "bench", vocab.counts)
    tcfg = TrainerConfig(accelerator="cpu", devices=1, max_epochs=args.epochs)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trainer = make_trainer(tcfg, "bench", tmp / "c.csv", tmp / "ck", None, args.seed, False)
        loader = word2vec_dataloader(cfg, stream, vocab.counts, seed=args.seed)
        t0 = time.perf_counter()
        trainer.fit(module, loader)
        seconds = time.perf_counter() - t0
    loss = float(trainer.callback_metrics["train/loss_epoch"])
    return seconds, module.model.embeddings().numpy(), loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("zip", nargs="?", type=Path, default=DATASETS / "brown.zip")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--autograd", action="store_true", help="also time the autograd path")
    ap.add_argument("--hogwild", action="store_true", help="also train in --threads processes")
    ap.add_argument("--plain", action="store_true", help="also time train_step in a plain loop")
    ap.add_argument("--batch-size", type=int, default=0, help="0: the Config default")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 1..N; quality is their mean")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sentences, vocab, stream = load_brown(args.zip)
    words = sum(len(s) for s in sentences)  # the words/s numerator, per epoch
    print(
        f"Brown train: {len(sentences):,} sentences, {words:,} words, V = {len(vocab):,} "
        f"(min_count {MIN_COUNT}, lowercased); {args.epochs} epochs, {args.threads} threads; "
        f"{args.seeds} seeds (quality: mean; words/s: median); load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(
        "| variant | trainer | batch | words/s | vs gensim | final loss "
        "| WS-353 ρ | vs gensim | analogy % | vs gensim |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    seeds = range(1, args.seeds + 1)

    def summary(results):  # [(seconds, words, vectors, loss)] over seeds
        rates = sorted(words * args.epochs / r[0] for r in results)
        qs = [quality(r[1], r[2]) for r in results]
        return (
            rates[len(rates) // 2],
            float(np.mean([q["ws353"] for q in qs])),
            100 * float(np.mean([q["analogy"] for q in qs])),
            float(np.mean([r[3] for r in results])),
        )

    for name in args.variants.split(","):
        model, objective = VARIANTS[name]
        runs = []
        for seed in seeds:
            args.seed = seed
            sec, gwords, gvec = train_gensim(sentences, model, objective, args)
            runs.append((sec, gwords, gvec, float("nan")))
        g_rate, g_ws, g_an, _ = summary(runs)
        print(
            f"| {name} | gensim {__import__('gensim').__version__} | - | {g_rate / 1e6:.3f} M "
            f"| 1.00 | - | {g_ws:.3f} | - | {g_an:.2f} | - |",
            flush=True,
        )
        extra = {"batch_size": args.batch_size} if args.batch_size else {}
        cfg = Config(model=model, objective=objective, **extra)
        trainers = (
            ["lightning"]
            + ["train_step"] * args.plain
            + ["autograd"] * args.autograd
            + ["hogwild"] * args.hogwild
        )
        labels = {
            "lightning": "nlpzoo (pipeline: Lightning)",
            "train_step": "nlpzoo train_step loop",
            "autograd": "nlpzoo autograd+SGD loop",
            "hogwild": f"nlpzoo train_step, {args.threads} processes",
        }
        for trainer in trainers:
            runs = []
            for seed in seeds:
                args.seed = seed
                if trainer == "hogwild":
                    sec, vec = train_hogwild(stream, vocab, cfg, args)
                    loss = float("nan")
                elif trainer == "lightning":
                    sec, vec, loss = train_lightning(stream, vocab, cfg, args)
                else:
                    sec, vec, loss = train_ours(stream, vocab, cfg, args, trainer == "autograd")
                runs.append((sec, vocab.words, vec, loss))
            rate, ws, an, loss = summary(runs)
            print(
                f"| {name} | {labels[trainer]} | {cfg.batch_size} | {rate / 1e6:.3f} M "
                f"| {rate / g_rate:.2f} | {loss:.3f} | {ws:.3f} | {ws - g_ws:+.3f} "
                f"| {an:.2f} | {an - g_an:+.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
