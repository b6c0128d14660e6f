"""Same params, same seed, same threads -> the same results: two copies of a tiny project with a
run of every kind of code (the n-gram, torch LMs, the word2vec and GloVe kernels with one
thread, SVD, translation, the mixture), run side by side, must agree on every metric, every
curve value, every weight and every evaluation output but the timings."""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from toy import copy_code, pipeline_env, pipeline_params, run_checked

# Wall-clock measures and the MLflow run id: the only values allowed to differ between runs.
TIMING_KEYS = {
    "train_seconds",
    "fit_seconds",
    "eval_seconds",
    "train_tokens_per_s",
    "decode_sents_per_s_greedy",
    "decode_sents_per_s_beam",
    "mlflow_run_id",
}
TIMING_COLUMNS = {"seconds"}  # plots/RUN.csv
SKIPPED_FILES = {"mlflow_run.json"}  # the run's MLflow id and the project's path
OUTPUTS = ("data", "models", "eval", "metrics", "plots")  # all but timings/ and MLflow's store
WEIGHTS = (".pt", ".npz")
# one run of each kind of code; the other runs share their code with one of these
RUNS = {
    "ngram",
    "nnlm",
    "rnn_lm",
    "lstm_lm",  # adaptive softmax
    "transformer_lm",
    "cbow",  # the word2vec kernel, one thread
    "glove",  # the GloVe kernel, one thread
    "svd",
    "seq2seq",
    "transformer",
}


def _tiny_params(inputs: Path) -> dict:
    """The toy pipeline of RUNS on 1000 sentences, the user's files in `inputs`, one thread."""
    params = pipeline_params(
        inputs, RUNS, relative=False, sentences=1000, split_tokens=(5000, 1200)
    )
    params["mlflow"]["register"] = False  # the register stage is tested in test_pipeline.py
    params["trainer"]["threads"] = 1
    # trained enough to earn a weight in the mixture with the n-gram (λ > 0)
    params["nnlm"].update(
        context_size=2,
        emb_dim=8,
        hidden_dim=16,
        batch_size=32,
        lr=0.03,
        cutoffs=[30],  # a tail of the 7 rarest words: the head keeps the model's full width
        trainer={"max_epochs": 3},
    )
    params["rnn_lm"].update(emb_dim=16, hidden_dim=16, bptt=10, batch_size=8)
    params["rnn_lm"]["trainer"]["max_epochs"] = 2
    params["lstm_lm"].update(emb_dim=16, hidden_dim=16, bptt=10, batch_size=8, cutoffs=[10, 20])
    params["lstm_lm"]["trainer"]["max_epochs"] = 2
    params["transformer_lm"].update(
        d_model=16, heads=2, d_ff=32, block_size=16, batch_size=8, warmup_steps=10, cutoffs=[10, 20]
    )
    params["transformer_lm"]["trainer"] = {"max_epochs": 2}
    params["cbow"].update(dim=16, threads=1, trainer={"max_epochs": 2})
    params["glove"].update(dim=16, threads=1, trainer={"max_epochs": 3})
    params["svd"]["dim"] = 8
    params["transformer"].update(
        d_model=16, heads=2, num_layers=1, d_ff=32, batch_size=32, warmup_steps=10, beam_size=2
    )
    params["transformer"]["trainer"] = {"max_epochs": 2}
    params["seq2seq"].update(emb_dim=16, hidden_dim=16, num_layers=1, batch_size=32, beam_size=2)
    params["seq2seq"]["trainer"]["max_epochs"] = 2
    return params


# Every stage up to the mixture, in pipeline order, each by its script's own entry point as
# `dvc repro` runs it, but in one process per copy: a process per stage would cost ~10 s of
# imports and MLflow setup each, ~4 minutes per copy on two cores. Each stage starts with the
# process's default torch threads, as it would in a process of its own.
DRIVER = """
import runpy, sys, torch, yaml
from nlpzoo.pipeline import stage_order
runs = yaml.safe_load(open("params.yaml"))["models"]
threads = torch.get_num_threads()
for stage in stage_order(runs):
    script, _, arg = stage.replace("@", "-", 1).partition("-")
    sys.argv = [f"stages/{script}.py", *([arg] if arg else [])]
    torch.set_num_threads(threads)
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _make_project(repo: Path, params: dict) -> None:
    copy_code(repo)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _env(hash_seed: int) -> dict:
    # another set and dict-of-hash order in each copy
    return pipeline_env(PYTHONHASHSEED=str(hash_seed))


def _outputs(repo: Path) -> dict:
    """Every output of the stages, timings and MLflow's run ids left out: JSON without
    TIMING_KEYS, CSV without TIMING_COLUMNS, any other file's bytes."""
    out = {}
    for folder in OUTPUTS:
        for path in sorted(p for p in (repo / folder).rglob("*") if p.is_file()):
            if path.name in SKIPPED_FILES:
                continue
            if path.suffix == ".json":
                value = _drop_timings(json.loads(path.read_text()))
            elif path.suffix == ".csv":
                with path.open(newline="") as f:
                    rows = csv.DictReader(f)
                    value = [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]
            else:
                value = path.read_bytes()
            out[path.relative_to(repo).as_posix()] = value
    return out


def _drop_timings(value):
    if isinstance(value, dict):
        return {k: _drop_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    return value


def _same(x, y) -> bool:
    """Equal, NaN equal to NaN (a metric the tiny vocabulary cannot measure)."""
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(u, v) for u, v in zip(x, y, strict=True))
    return x == y


def test_same_params_same_outputs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _make_project(a, _tiny_params(tmp_path / "inputs"))
    run_checked([sys.executable, "-m", "nlpzoo", "pipeline"], a, _env(1))  # dvc.yaml for these runs
    shutil.copytree(a, b)
    # the two copies run side by side (as `make repro` trains two runs), each in its own process
    # and with its own hash seed
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(run_checked, [sys.executable, "-c", DRIVER], repo, _env(i))
            for i, repo in enumerate((a, b), 1)
        ]
        for job in jobs:
            job.result()

    got_a, got_b = _outputs(a), _outputs(b)
    metrics = {f"metrics/{r}.json" for r in RUNS} | {"metrics/mixtures.json"}
    assert metrics | {f"plots/{r}.csv" for r in RUNS} <= set(got_a)
    for run in RUNS:  # the trained weights or vectors are compared too
        assert any(f.startswith(f"models/{run}/") and f.endswith(WEIGHTS) for f in got_a), run
    assert got_a["metrics/mixtures.json"]["runs"]["nnlm"]["lambda"] > 0  # the mixture has work
    assert set(got_a) == set(got_b)
    differing = sorted(f for f in got_a if not _same(got_a[f], got_b[f]))
    shown = {f: (got_a[f], got_b[f]) for f in differing if f.startswith("metrics/")}
    assert not differing, (differing, shown)
