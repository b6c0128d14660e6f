"""A toy language-model project for the end-to-end tests: a tiny grammar's text, laid out as the
data stages lay it out, and the real params.yaml shrunk to train on it in seconds."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from nlpzoo.data.cooccur import count_cooccurrences
from nlpzoo.data.vocab import Vocab
from nlpzoo.params import CooccurConfig

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())

# tiny sizes for whatever keys a family has; everything else keeps the project's value
TINY = {
    "emb_dim": 16,
    "hidden_dim": 16,
    "d_model": 16,
    "d_ff": 32,
    "heads": 2,
    "num_layers": 1,
    "block_size": 16,
    "bptt": 8,
    "batch_size": 16,
    "context_size": 2,
    "cutoffs": [10],
    "warmup_steps": 5,
    "lr": 0.01,
    "dim": 8,
}
SPLITS = (("train", 1500), ("valid", 100), ("test", 100))  # sentences per split


def grammar_sentences(rng: np.random.Generator, n: int) -> list[str]:
    """n sentences 'subject verb object .' of a 10-phrase grammar."""
    subj, verb, obj = (
        ["the cat", "a dog", "she", "he"],
        ["sees", "likes", "eats"],
        ["a ball", "the bread", "it"],
    )
    return [f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)} ." for _ in range(n)]


def write_lm_data(root: Path, seed: int = 0) -> Vocab:
    """What the data stages write for the LM runs, from the grammar's text: data/prepared/lm
    (text), data/vocab/lm (vocabulary, id streams, stats.json), data/cooccur (the GloVe and SVD
    counts, window 1) and data/raw/eval (the word-vector benchmarks, from the data mirror).
    Returns the vocabulary."""
    rng = np.random.default_rng(seed)
    splits = {s: grammar_sentences(rng, n) for s, n in SPLITS}
    prepared = root / "data" / "prepared" / "lm"
    prepared.mkdir(parents=True)
    for split, lines in splits.items():
        (prepared / f"{split}.txt").write_text("\n".join(lines) + "\n")
    vocab = Vocab.build(Counter(w for line in splits["train"] for w in line.split()), 1)
    out = root / "data" / "vocab" / "lm"
    out.mkdir(parents=True)
    vocab.save(out / "vocab.txt")
    for split, lines in splits.items():
        np.save(out / f"{split}.npy", vocab.encode_lines(lines).astype(np.int32))
    (out / "stats.json").write_text(json.dumps({"vocab_size": len(vocab)}))
    co = root / "data" / "cooccur"
    co.mkdir(parents=True)
    count_cooccurrences(
        splits["train"], vocab.index, len(vocab), co / "cooccur.npz", CooccurConfig(window=1), co
    )
    vocab.save(co / "vocab.txt")
    raw = root / "data" / "raw" / "eval"
    raw.mkdir(parents=True)
    for name in ("questions-words.txt", "wordsim353.tsv", "simlex999.txt"):
        shutil.copy(Path(os.environ["NLPZOO_DATA_MIRROR"]) / name, raw / name)
    return vocab


def tiny_params(*runs: str) -> dict:
    """A copy of params.yaml whose `runs` take the TINY sizes they have keys for and train 2
    epochs on the CPU, without early stopping."""
    params = yaml.safe_load(yaml.safe_dump(PARAMS))
    for run in runs:
        section = params.get(run) or {}
        for key, value in TINY.items():
            if key in section:
                section[key] = value
        section["trainer"] = {
            "max_epochs": 2,
            "accelerator": "cpu",
            "devices": 1,
            "early_stopping_patience": 0,
        }
        params[run] = section
    return params
