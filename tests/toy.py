"""The toy corpora, toy params and toy projects that the tests share (one module for all of them).

Corpora:
- `write_lm_data`: a 10-phrase grammar laid out as the data stages lay out the LM data (text,
  vocabulary, id streams, co-occurrence counts, the word-vector benchmarks);
- `make_project`: an encoded LM corpus of random phrases only (`data/vocab/lm`);
- `make_mt_project`: a German-English word-list translation corpus (`data/vocab/mt`);
- `copy_and_shift_pairs`: id pairs of a copy-and-shift translation task, for the decoders;
- `tiny_corpus` and `tiny_parallel`: the user's text and parallel files of a toy pipeline.

Params: `tiny_params` shrinks the project's params.yaml to toy runs (the one way every test
shrinks a run), `pipeline_params` is params.yaml for a toy pipeline on `tiny_corpus`.

Runs: `trained` trains and evaluates runs in process, `inactive` is a tracker that records
nothing, `cli` is the command line in process; `copy_code`, `pipeline_env`, `run_checked`,
`stages_ran`, `write_pipeline` and `copy_project` make, drive and copy a toy pipeline (the
real `dvc`); `reference_params` are the params of the reference toy pipeline."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import yaml

from nlpzoo.__main__ import main
from nlpzoo.data.cooccur import count_cooccurrences
from nlpzoo.data.mt import collate
from nlpzoo.data.vocab import Vocab, build_mt_vocab
from nlpzoo.families import FAMILIES
from nlpzoo.params_data import CooccurConfig, MTVocabConfig
from nlpzoo.pipeline import ROOFLINE

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
BENCHMARKS = ("questions-words.txt", "wordsim353.tsv", "simlex999.txt")  # data/raw/eval

# ---------------------------------------------------------------------------- the LM grammar

SPLITS = (("train", 1500), ("valid", 100), ("test", 100))  # sentences per split


def grammar_sentences(rng: np.random.Generator, n: int) -> list[str]:
    """n sentences 'subject verb object .' of a 10-phrase grammar."""
    subj, verb, obj = (
        ["the cat", "a dog", "she", "he"],
        ["sees", "likes", "eats"],
        ["a ball", "the bread", "it"],
    )
    return [f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)} ." for _ in range(n)]


def write_benchmarks(root: Path) -> Path:
    """`root/data/raw/eval`: the word-vector benchmarks (from the data mirror) that the evaluation
    of an LM or vector run reads."""
    raw = root / "data" / "raw" / "eval"
    raw.mkdir(parents=True)
    for name in BENCHMARKS:
        shutil.copy(Path(os.environ["NLPZOO_DATA_MIRROR"]) / name, raw / name)
    return root


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
    write_benchmarks(root)
    return vocab


# ------------------------------------------------------------------- the encoded corpora only


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


# German -> English: the word lists of every toy translation corpus
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


# ------------------------------------------------------------------ copy-and-shift translation


def copy_and_shift_pairs(
    n: int = 32, lengths: tuple[int, int] = (2, 7), seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n` pairs: a source of ids in [5, 20) with a length drawn from [lengths), and its target,
    each id shifted by one within [5, 20). A model trained on them for a few steps gives
    non-degenerate outputs, whose sentences end at different steps (the decoding tests)."""
    rng = np.random.default_rng(seed)
    return [
        (s, (s + 1) % 15 + 5)
        for s in (rng.integers(5, 20, rng.integers(*lengths)) for _ in range(n))
    ]


def train_on(model: torch.nn.Module, pairs, lr: float, steps: int = 30) -> torch.nn.Module:
    """`steps` Adam steps on the whole batch of `pairs`; returns the model in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr)
    for _ in range(steps):
        _, loss = model(*collate(pairs))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


# ------------------------------------------------------------- the user's files of a pipeline


def tiny_corpus(path: Path, n_sentences: int, seed: int) -> None:
    """Sentences from a small grammar (about 37 words): enough structure for a model to learn
    something. The text corpus of the toy pipelines."""
    rng = random.Random(seed)
    subj = ["the cat", "a dog", "the old man", "my friend", "she", "he", "the children"]
    verb = ["sees", "likes", "finds", "eats", "reads", "wants"]
    obj = ["the ball", "a book", "some bread", "the red car", "an apple", "the river"]
    tail = ["", "today", "again", "in the park", "at night"]
    lines = [
        " ".join(
            filter(
                None, [rng.choice(subj), rng.choice(verb), rng.choice(obj), rng.choice(tail), "."]
            )
        )
        for _ in range(n_sentences)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tiny_parallel(folder: Path) -> dict:
    """Aligned German-English word lists, 300 / 20 / 20 pairs, in `folder`: `mt.files` of a
    parallel source (absolute paths)."""
    rng = random.Random(0)
    files = {}
    for split, n in (("train", 300), ("valid", 20), ("test", 20)):
        src, tgt = [], []
        for _ in range(n):
            ks = rng.sample(sorted(WORDS), 3)
            src.append("der " + " ".join(ks))
            tgt.append("the " + " ".join(WORDS[k] for k in ks))
        (folder / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        files[split] = [str(folder / f"{split}.de"), str(folder / f"{split}.en")]
    return files


# ---------------------------------------------------------------------------------- params

# tiny sizes for whatever keys a language-model or vector family has; everything else keeps the
# project's value
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
# the translation families at toy size: each key replaces the run's own where its section has it
# (dropout is set in every translation run)
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


def tiny_params(*runs: str, params: dict | None = None) -> dict:
    """A copy of `params` (the project's params.yaml) whose `runs` are at toy size on the CPU,
    without early stopping: a language-model or vector run takes the TINY sizes it has keys for
    and trains 2 epochs; a translation run takes TINY_MT, beam 3, and trains 4 epochs without a
    time limit."""
    params = yaml.safe_load(yaml.safe_dump(PARAMS if params is None else params))
    for run in runs:
        section = params.get(run) or {}
        trainer = {"accelerator": "cpu", "devices": 1, "early_stopping_patience": 0}
        if FAMILIES[params["models"][run]["family"]].task == "mt":
            section.update({k: v for k, v in TINY_MT.items() if k in section or k == "dropout"})
            section["beam_size"] = 3
            section["trainer"] = {"max_epochs": 4, **trainer, "max_time": None}
        else:
            section.update({k: v for k, v in TINY.items() if k in section})
            section["trainer"] = {"max_epochs": 2, **trainer}
        params[run] = section
    return params


def pipeline_params(
    inputs: Path,
    runs,
    *,
    relative: bool = True,
    sentences: int = 1500,
    split_tokens: tuple[int, int] = (9000, 2000),
) -> dict:
    """params.yaml of a toy pipeline that keeps only `runs` (each at the project's sizes: the
    caller shrinks them), on the CPU, 2 epochs: the text corpus `tiny_corpus` of `sentences`
    sentences (split at `split_tokens`) and the parallel files of `tiny_parallel`, written to
    `inputs`; the LM vocabulary of the words seen twice, a 40-piece translation vocabulary, a
    co-occurrence window of 3. With `relative` the files are
    named relative to `inputs`' parent (the project, as a user writes them: a queued experiment's
    copy of the project finds them in its own inputs/), else by their absolute paths."""
    params = yaml.safe_load(yaml.safe_dump(PARAMS))
    inputs.mkdir(parents=True, exist_ok=True)
    tiny_corpus(inputs / "corpus.txt", sentences, seed=1)
    parallel = tiny_parallel(inputs)

    def name(path: str) -> str:
        return Path(path).relative_to(inputs.parent).as_posix() if relative else str(path)

    params["lm"].update(source="text", files={"all": name(str(inputs / "corpus.txt"))})
    params["lm"]["split_tokens"] = list(split_tokens)
    params["mt"].update(
        source="parallel", files={k: [name(f) for f in v] for k, v in parallel.items()}
    )
    params["vocab"]["lm"]["min_count"] = 2
    params["vocab"]["mt"]["vocab_size"] = 40
    params["cooccur"]["window"] = 3
    params["trainer"].update(accelerator="cpu", devices=1, max_epochs=2)
    for other in set(params["models"]) - set(runs):
        del params["models"][other], params[other]
    return params


# the runs of the resume tests (tests/training): each trains alone in a project of its own
RESUME_RUNS = {
    # a recurrent run: BPTT windows in order, hidden state carried across batches, dropout
    "lstm_lm": {
        "family": "rnn_lm",
        "cell": "lstm",
        "emb_dim": 16,
        "hidden_dim": 16,
        "num_layers": 2,
        "dropout": 0.3,
        "bptt": 8,
        "batch_size": 8,
        "lr": 0.01,
    },
    # a window run: shuffled batches, SGD with a per-step learning-rate schedule
    "nnlm": {
        "family": "nnlm",
        "context_size": 2,
        "emb_dim": 8,
        "hidden_dim": 16,
        "batch_size": 64,
        "optimizer": "sgd",
        "lr": 0.1,
        "lr_decay": 0.001,
    },
}


def resume_params(run: str, **trainer) -> dict:
    """params.yaml of `run` of RESUME_RUNS alone: 2 epochs on the CPU, a resume checkpoint every
    10 steps, 32-true; `trainer` over that."""
    section = dict(RESUME_RUNS[run])
    section["trainer"] = {
        "max_epochs": 2,
        "accelerator": "cpu",
        "devices": 1,
        "early_stopping_patience": 0,
        "checkpoint_every_steps": 10,
        "checkpoint_every_minutes": 0,
        "precision": "32-true",  # the stage's subprocess too, whatever the CPU (conftest.py)
        **trainer,
    }
    models = {run: {"family": section["family"], "data": "vocab/lm"}}
    return {"seed": 7, "models": models, run: section}


# -------------------------------------------------------------------------- in-process runs


def inactive(cls, run, *args, **kwargs):
    """A stand-in for `Tracker.start` (monkeypatched as a classmethod): a tracker of `run` that
    records nothing, for tests that do not look at MLflow."""
    return cls(None, None, "-", run)


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


# --------------------------------------------------------------------- toy pipelines (DVC)


def copy_code(repo: Path) -> Path:
    """The project's pipeline in `repo`: dvc.yaml, .dvcignore, .gitignore, stages/ and src/ as
    they are in the working tree, and the roofline the report reads (its machine's peak)."""
    repo.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    for folder in ("stages", "src"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ROOFLINE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / ROOFLINE, repo / ROOFLINE)
    return repo


def pipeline_env(**extra: str) -> dict:
    """The environment of a toy pipeline's commands: this one without MLflow's and DVC's
    variables, this Python's scripts (dvc) first on PATH, nlpzoo's log at WARNING; and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NLPZOO_LOG_LEVEL"] = "WARNING"
    return {**env, **extra}


def run_checked(cmd: list[str], cwd: Path, env: dict, timeout: float = 900) -> str:
    """Runs `cmd` in `cwd`; asserts it succeeds and returns its stdout and stderr."""
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-6000:]}"
    return out


def stages_ran(output: str) -> set[str]:
    """The stages DVC says it ran in `output` ("Running stage 'NAME'")."""
    import re

    return set(re.findall(r"Running stage '([^']+)'", output))


def init_dvc(repo: Path, env: dict, git: bool = False) -> Path:
    """`dvc init` in `repo` (after `git init`, with `git`; else without git), analytics off."""
    if git:
        run_checked(["git", "init", "-q"], repo, env)
        run_checked(["git", "config", "user.email", "test@example.invalid"], repo, env)
        run_checked(["git", "config", "user.name", "test"], repo, env)
    run_checked(["dvc", "init", "-q", *([] if git else ["--no-scm"])], repo, env)
    run_checked(["dvc", "config", "core.analytics", "false"], repo, env)
    return repo


def copy_project(src: Path, dest: Path) -> Path:
    """A copy of the toy project `src` at `dest` that is a project of its own: its files, git
    repository and DVC cache, and its MLflow store (`mlflow.db`) with the paths that named
    `src` (the artifact locations beside the store) renamed to `dest`. The runs' mlflow_run.json
    (DVC outputs, left as they are) still name `src`'s store, but a stage reads only the run's
    id from them and logs to the project's own store (`nlpzoo.tracking.tracking_uri`)."""
    shutil.copytree(src, dest, symlinks=True)
    db = dest / "mlflow.db"
    if db.exists():
        old, new = str(src.resolve()), str(dest.resolve())
        with contextlib.closing(sqlite3.connect(db)) as con, con:
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                for _, column, kind, *_ in con.execute(f'PRAGMA table_info("{table}")'):
                    if kind.upper().startswith(("VARCHAR", "TEXT")):
                        con.execute(
                            f'UPDATE "{table}" SET "{column}" = replace("{column}", ?, ?) '
                            f'WHERE "{column}" LIKE ?',
                            (old, new, f"%{old}%"),
                        )
    return dest


# ------------------------------------------------------------- the reference toy pipeline

# the runs of the reference toy pipeline (tests/pipeline/conftest.py): two language models, so
# the mixture has its inputs, and SVD, which keeps the co-occurrence stage in the graph
REFERENCE_RUNS = ("ngram", "nnlm", "svd")


def reference_params(inputs: Path, *, relative: bool = True) -> dict:
    """params.yaml of the reference toy pipeline, its user's files written to `inputs`
    (`pipeline_params`; with `relative`, `inputs` is in the project, where DVC watches the files:
    outside, the corpus stages would run on every repro, tests/pipeline/test_run_cache.py):
    ngram, a small nnlm (2 epochs of about 560 batches: a Ctrl-C sent at the end of its first
    epoch finds it training) and an 8-dimensional SVD, each registered in MLflow."""
    params = pipeline_params(inputs, REFERENCE_RUNS, relative=relative)
    params["svd"]["dim"] = 8
    params["nnlm"].update(
        context_size=2,
        emb_dim=8,
        hidden_dim=16,
        batch_size=16,
        cutoffs=[10, 20],  # the adaptive output's clusters, within the 37-word vocabulary
        trainer={"max_epochs": 2},
    )
    return params


def write_pipeline(repo: Path, params: dict, env: dict, *, git: bool = False) -> Path:
    """A toy pipeline in `repo`: the project's code (`copy_code`), `params` as params.yaml,
    dvc.yaml written for them (`python -m nlpzoo pipeline`) and DVC initialised (`init_dvc`;
    with `git`, in a git repository whose first commit holds all of it)."""
    copy_code(repo)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_checked([sys.executable, "-m", "nlpzoo", "pipeline"], repo, env)
    init_dvc(repo, env, git=git)
    if git:
        run_checked(["git", "add", "-A"], repo, env)
        run_checked(["git", "commit", "-qm", "tiny project"], repo, env)
    return repo
