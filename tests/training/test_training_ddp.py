"""Distributed data-parallel training on CPU: `ddp_spawn`, 2 processes, gloo (docs/design.md §9).

For a language model and a translation model alike: the ranks end with identical weights, the
logged validation perplexity is the perplexity of the whole validation split (each token counted
once across ranks), and only rank 0 writes outputs and talks to MLflow.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from nlpzoo import lifecycle, training
from nlpzoo.data.mt import Codec, load_split
from nlpzoo.evaluation.perplexity import lm_log_probs, perplexity
from nlpzoo.families import FAMILIES
from nlpzoo.params import run_configs
from nlpzoo.tasks import mt
from toy import make_mt_project, make_project

RUN = "nnlm"
SECTION = {
    "family": "nnlm",
    "context_size": 2,
    "emb_dim": 8,
    "hidden_dim": 16,
    "batch_size": 32,
    "dropout": 0.0,
    "lr": 0.01,
}


class RanksAgree(pl.Callback):
    """At the end of training every rank sends its flattened weights to every other; rank 0
    records the largest difference."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def on_train_end(self, trainer, pl_module) -> None:
        flat = torch.cat([p.detach().flatten() for p in pl_module.parameters()])
        every = pl_module.all_gather(flat)  # (world, P)
        if trainer.is_global_zero:
            diff = (every - every[0]).abs().max().item()
            self.out.write_text(f"{trainer.world_size} {diff}\n")


def _ddp_trainer(monkeypatch, agree: Path) -> None:
    make = training.make_trainer

    def with_check(*args, **kwargs):
        trainer = make(*args, **kwargs)
        trainer.callbacks.insert(0, RanksAgree(agree))
        return trainer

    monkeypatch.setattr(training, "make_trainer", with_check)


DDP_TRAINER = {
    "accelerator": "cpu",
    "devices": 2,
    "strategy": "ddp_spawn",
    "max_epochs": 1,
    "early_stopping_patience": 0,
    "checkpoint_every_minutes": 0,
}


def _ddp_params(run: str, family: str, data: str, section: dict) -> dict:
    return {
        "seed": 3,
        "models": {run: {"family": family, "data": data}},
        run: {**section, "trainer": dict(DDP_TRAINER)},
    }


def _train_ddp(monkeypatch, tmp_path, root: Path, params: dict, run: str):
    """Trains `run` on 2 processes; checks that both ranks end with the same weights and that
    the curve has one row. Returns (train stats, the logged validation perplexity)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    agree = tmp_path / "agree.txt"
    _ddp_trainer(monkeypatch, agree)
    stats = lifecycle.train(params, run, root)
    world, diff = agree.read_text().split()
    assert int(world) == 2 and float(diff) == 0.0  # both ranks hold the same weights
    rows = (root / "plots" / f"{run}.csv").read_text().split()
    assert len(rows) == 2, rows  # header + one epoch, written once (rank 0)
    return stats, float(rows[1].split(",")[4])


def _rank_zero_alone_wrote(tmp_path, root: Path, run: str, logged: float) -> None:
    """The run's outputs and its one MLflow run, finished, with the logged perplexity; its
    checkpoints (rank 0's, kept until the evaluate stage) in checkpoints/RUN only."""
    from mlflow import MlflowClient

    assert sorted(p.name for p in (root / "models").iterdir()) == [run]
    assert [p.name for p in (root / "checkpoints").iterdir()] == [run]
    assert (root / "checkpoints" / run / "resume.ckpt").is_file()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("nlpzoo").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    history = client.get_metric_history(runs[0].info.run_id, "val/ppl")
    assert [m.value for m in history] == pytest.approx([logged], rel=1e-6)


def test_ddp_spawn_two_processes_agree_and_count_every_token_once(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj", n_train=200)
    params = _ddp_params(RUN, "nnlm", "vocab/lm", SECTION)
    stats, logged = _train_ddp(monkeypatch, tmp_path, root, params, RUN)
    # the logged val/ppl is the single-process perplexity of the same weights on the whole split
    model = lifecycle.load_model(root / "models" / RUN)
    valid = np.load(root / "data" / "vocab" / "lm" / "valid.npy").astype(np.int64)
    cfg = run_configs(params, RUN)[1]
    single = perplexity(lm_log_probs(FAMILIES["nnlm"], model, valid, cfg))
    assert logged == pytest.approx(single, rel=1e-4)
    assert math.isfinite(stats["params"])

    _rank_zero_alone_wrote(tmp_path, root, RUN, logged)


MT_RUN = "transformer"
MT_SECTION = {
    "family": "transformer",
    "d_model": 16,
    "heads": 2,
    "num_layers": 1,
    "d_ff": 32,
    "dropout": 0.0,
    "batch_size": 8,
    "warmup_steps": 2,
    "lr": 0.01,
}


def test_translation_run_under_ddp_spawn(tmp_path, monkeypatch):
    """One translation run on 2 processes: 50 pairs in 7 batches of 8, so the last batch is
    split for the ranks to step together; every pair of the 8 validation pairs counts once."""
    root = make_mt_project(tmp_path / "proj")
    params = _ddp_params(MT_RUN, "transformer", "vocab/mt", MT_SECTION)
    stats, logged = _train_ddp(monkeypatch, tmp_path, root, params, MT_RUN)
    # the logged val/ppl is the single-process perplexity of the same weights on the whole split
    model = lifecycle.load_model(root / "models" / MT_RUN)
    data = root / "data" / "vocab" / "mt"
    codec = Codec(data / "spm.model")
    assert logged == pytest.approx(mt.perplexity(model, load_split(data, "valid", codec)), rel=1e-4)
    # the target pieces of both ranks, each training pair once
    train = load_split(data, "train", codec)
    assert stats["train_target_tokens"] == sum(len(t) + 1 for t in train.tgt)

    # rank 0 alone wrote the outputs and the one MLflow run
    _rank_zero_alone_wrote(tmp_path, root, MT_RUN, logged)
    assert sorted(p.name for p in (root / "models" / MT_RUN).iterdir()) == [
        "config.json",
        "mlflow_run.json",
        "model.pt",
        "spm.model",
        "train_stats.json",
    ]


@pytest.mark.parametrize("run", ["ngram", MT_RUN])
def test_other_ranks_write_nothing_when_every_rank_runs_the_stage(tmp_path, monkeypatch, run):
    """torchrun / SLURM start the stage once per rank: ranks other than 0 keep their outputs in
    a throwaway folder and never open MLflow (a count model; a translation run, trained)."""
    from pytorch_lightning.utilities import rank_zero_only

    if run == MT_RUN:
        root = make_mt_project(tmp_path / "proj")
        section = dict(MT_SECTION, trainer={"accelerator": "cpu", "devices": 1, "max_epochs": 1})
        params = {"models": {run: {"family": "transformer", "data": "vocab/mt"}}, run: section}
    else:
        root = make_project(tmp_path / "proj", n_train=50)
        params = {"models": {run: {"family": "ngram", "data": "vocab/lm"}}, run: {"order": 2}}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    stats = lifecycle.train(params, run, root)
    assert stats["params"] > 0
    assert not (root / "models").exists() or not any((root / "models").iterdir())
    assert not (tmp_path / "mlflow.db").exists()
