"""Adding a family touches no file but its own: a family defined here (config, model, one
registry record) is trained, evaluated, mixed with the n-gram and reported through the shared
lifecycle (docs/design.md §3)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo import lifecycle
from nlpzoo.config import require
from nlpzoo.cost import Cost
from nlpzoo.data.vocab import Vocab
from nlpzoo.evaluation.mixture import mixtures
from nlpzoo.families import FAMILIES, Family, register, unregister
from nlpzoo.params_file import validate_params
from nlpzoo.params_report import ReportConfig
from nlpzoo.report.build import build_report
from nlpzoo.tracking import Tracker
from toy import inactive, make_project


@dataclass
class BigramConfig:
    """The toy family's params section."""

    emb_dim: int = 8
    context_size: int = 1  # the previous word only
    batch_size: int = 32
    optimizer: str = "adam"
    lr: float = 0.05
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8

    def __post_init__(self) -> None:
        require(self.emb_dim >= 1, "emb_dim", f"must be >= 1, got {self.emb_dim}")


class Bigram(nn.Module):
    """p(w_t | w_{t-1}) = softmax(U E[w_{t-1}] + b): the language-model contract at its smallest."""

    def __init__(self, config: BigramConfig, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = config
        self.E = nn.Embedding(vocab_size, config.emb_dim)
        self.U = nn.Linear(config.emb_dim, vocab_size)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.U(self.E(inputs[:, -1]))  # (B, V)
        loss = None if targets is None else F.cross_entropy(logits, targets)
        return logits, loss

    def token_log_probs(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.log_prob_all(inputs).gather(1, targets[:, None]).squeeze(1)

    def log_prob_all(self, inputs: torch.Tensor) -> torch.Tensor:
        return self(inputs)[0].log_softmax(-1)  # (B, V): what generation samples from

    def embeddings(self) -> torch.Tensor:
        return self.E.weight.detach()

    def cost(self, vocab_size: int) -> Cost:
        d = self.config.emb_dim
        return Cost("D×V", f"D={d}, V={vocab_size}", d * vocab_size)


TOY = Family(
    "bigram", BigramConfig, Bigram, task="lm", input="window", fit="lightning", vectors=True
)


@pytest.fixture
def toy_family():
    assert "bigram" not in FAMILIES
    register(TOY)
    yield TOY
    unregister("bigram")


def test_a_family_registered_here_is_trained_evaluated_and_reported(
    tmp_path, monkeypatch, toy_family
):
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))  # MLflow is not under test
    root = make_project(tmp_path / "proj")
    raw = root / "data" / "raw" / "eval"
    raw.mkdir(parents=True)
    for name in ("questions-words.txt", "wordsim353.tsv", "simlex999.txt"):
        shutil.copy(Path(os.environ["NLPZOO_DATA_MIRROR"]) / name, raw / name)
    trainer = {"accelerator": "cpu", "devices": 1, "max_epochs": 2, "early_stopping_patience": 0}
    params = {
        "seed": 0,
        "models": {
            "ngram": {"family": "ngram", "data": "vocab/lm"},
            "toy": {"family": "bigram", "data": "vocab/lm"},
        },
        "ngram": {"order": 2},
        "toy": {"emb_dim": 6, "trainer": trainer},
    }
    validate_params(params)  # its section is checked with its own config

    for run in ("ngram", "toy"):
        lifecycle.train(params, run, root)
        metrics = lifecycle.evaluate(params, run, root)
    vocab_size = len(Vocab.load(root / "data" / "vocab" / "lm" / "vocab.txt"))
    assert metrics["family"] == "bigram" and metrics["task"] == "lm"
    assert 1.0 < metrics["test_ppl"] < 0.8 * vocab_size  # learnt something
    assert metrics["epochs"] == 2 and metrics["params"] == 6 * vocab_size * 2 + vocab_size
    assert metrics["cost_formula"] == "D×V" and metrics["cost_per_token"] == 6 * vocab_size
    assert "ws353_rho" in metrics and 0.0 <= metrics["analogy_coverage"] <= 1.0  # vectors
    header = (root / "models" / "toy" / "vectors.txt").open().readline().split()
    assert header == [str(vocab_size - 1), "6"]  # every row but <pad>
    logprobs = np.load(root / "eval" / "toy" / "logprobs.npz")
    assert metrics["test_ppl"] == pytest.approx(np.exp(-logprobs["test"].mean()), rel=1e-4)
    assert isinstance(lifecycle.load_model(root / "models" / "toy"), Bigram)

    mixed = mixtures(params, root)
    assert set(mixed) == {"toy"} and mixed["toy"]["valid_ppl_mix"] <= metrics["valid_ppl"] + 1e-6

    text = build_report(
        metrics_dir=root / "metrics",
        plots_dir=root / "plots",
        eval_dir=root / "eval",
        models_dir=root / "models",
        out_dir=root / "reports",
        params=params,
        config=ReportConfig(),
    )
    lm_section = text.split("Language modelling", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in lm_section.splitlines() if "|" in line}
    saved = json.loads((root / "metrics" / "toy.json").read_text())
    assert "ngram" in rows and "| bigram |" in rows["toy"]
    assert f"| {saved['test_ppl']:.1f} |" in rows["toy"]  # its own metrics, in its task's table
