"""Tiny projects and in-process runs that tests in several folders share: an encoded language-model
corpus and a translation corpus laid out as the data stages lay them out, an MLflow tracker that
records nothing, and the command line called in process."""

from __future__ import annotations

import contextlib
import io
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from nlpzoo.__main__ import main
from nlpzoo.data.vocab import Vocab, build_mt_vocab
from nlpzoo.params import MTVocabConfig


def make_project(root: Path, n_train: int = 250) -> Path:
    """A tiny encoded corpus at `root/data/vocab/lm` (about 25 batches per epoch here)."""
    rng = np.random.default_rng(0)
    words = ["the cat", "a dog", "she", "he", "sees", "likes", "eats", "a ball", "the bread", "."]

    def lines(n: int) -> list[str]:
        return [" ".join(rng.choice(words, size=rng.integers(3, 8))) for _ in range(n)]

    splits = {"train": lines(n_train), "valid": lines(30), "test": lines(30)}
    vocab = Vocab.build(Counter(w for line in splits["train"] for w in line.split()), 1)
    out = root / "data" / "vocab" / "lm"
    out.mkdir(parents=True, exist_ok=True)
    vocab.save(out / "vocab.txt")
    for split, text in splits.items():
        np.save(out / f"{split}.npy", vocab.encode_lines(text).astype(np.int32))
    return root


def inactive(cls, run, *args, **kwargs):
    """A stand-in for `Tracker.start` (monkeypatched as a classmethod): a tracker of `run` that
    records nothing, for tests that do not look at MLflow."""
    return cls(None, None, "-", run)


WORDS = {"hund": "dog", "katze": "cat", "haus": "house", "baum": "tree", "rot": "red"}


def make_mt_project(root: Path) -> Path:
    """A tiny translation corpus, encoded at `root/data/vocab/mt` (50 training pairs)."""
    prepared = root / "prepared"
    prepared.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 50), ("valid", 8), ("test", 8)):
        src, tgt = [], []
        for _ in range(n):
            ks = list(rng.choice(sorted(WORDS), 3, replace=False))
            src.append("der " + " ".join(ks))
            tgt.append("the " + " ".join(WORDS[k] for k in ks))
        (prepared / f"{split}.src").write_text("\n".join(src) + "\n")
        (prepared / f"{split}.tgt").write_text("\n".join(tgt) + "\n")
    build_mt_vocab(MTVocabConfig(vocab_size=40), prepared, root / "data" / "vocab" / "mt")
    return root


# the translation families at toy size: each key replaces the run's own where its section has it
TINY_MT = {
    "emb_dim": 16,
    "hidden_dim": 32,
    "attn_dim": 16,
    "d_model": 32,
    "heads": 2,
    "num_layers": 1,
    "d_ff": 64,
    "batch_size": 10,
    "warmup_steps": 5,
    "lr": 0.01,
    "dropout": 0.0,
}


def tiny_mt_params(run: str) -> dict:
    """params.yaml with translation run `run` at toy size: 4 epochs on the CPU, beam 3."""
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    section = params[run]
    section.update({k: v for k, v in TINY_MT.items() if k in section or k == "dropout"})
    section["beam_size"] = 3
    section["trainer"] = {
        "max_epochs": 4,
        "accelerator": "cpu",
        "devices": 1,
        "early_stopping_patience": 0,
        "max_time": None,
    }
    return params


@contextlib.contextmanager
def trained(root: Path, params: dict, runs, register: bool = False):
    """Trains and evaluates each of `runs` in `root` (and registers it, with `register`), all
    logging to `root`'s own MLflow store; yields `root` with that store still set."""
    import pytest

    from nlpzoo import lifecycle, registry

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        mp.setenv("NLPZOO_MLFLOW_CACHE", str(root / "mlflow-cache"))
        for run in runs:
            lifecycle.train(params, run, root)
            lifecycle.evaluate(params, run, root)
            if register:
                registry.register(params, run, root)
        yield root


def cli(project: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    """`python -m nlpzoo ARGS --root PROJECT`: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*args, "--root", str(project)])
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()
