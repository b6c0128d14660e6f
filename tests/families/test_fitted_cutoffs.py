"""The adaptive softmax's default cut-offs fitted to a user's vocabulary; a user's own kept."""

from __future__ import annotations

import json

import pytest
import torch

from nlpzoo import lifecycle
from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from nlpzoo.families.common import DEFAULT_CUTOFFS, fit_cutoffs
from nlpzoo.tracking import Tracker
from toy import inactive, make_project, tiny_params

LMS = ("nnlm", "rnn_lm", "transformer_lm")
SMALL = {
    "nnlm": {"context_size": 2, "emb_dim": 4, "hidden_dim": 4},
    "rnn_lm": {"emb_dim": 4, "hidden_dim": 4, "num_layers": 1, "tie_weights": False},
    "transformer_lm": {"d_model": 8, "heads": 2, "num_layers": 1, "d_ff": 8, "block_size": 8},
}


def adaptive(family: str, **kw):
    return FAMILIES[family].config(output="adaptive", **SMALL[family], **kw)


@pytest.mark.parametrize(
    ("vocab_size", "fitted"),
    [
        (16_000, [2000, 6000]),  # Brown's size: as it is
        (6001, [2000, 6000]),
        (6000, [2000]),  # a cut-off at V would start an empty cluster
        (5399, [2000]),
        (2001, [2000]),
        (2000, []),  # none left: a full softmax
        (37, []),
    ],
)
@pytest.mark.parametrize("family", LMS)
def test_default_cutoffs_keep_those_below_the_vocabulary(family, vocab_size, fitted):
    cfg = adaptive(family)
    assert cfg.cutoffs == list(DEFAULT_CUTOFFS) == [2000, 6000]
    out = cfg.fit_to_vocab(vocab_size)
    assert out.cutoffs == fitted
    assert cfg.cutoffs == [2000, 6000]  # the config it came from is left alone
    model = FAMILIES[family].model_class()(out, vocab_size, counts=list(range(vocab_size, 0, -1)))
    layer = model.U if family == "nnlm" else model.out
    assert layer.bounds == [0, *fitted, vocab_size]


def test_brown_sized_vocabulary_keeps_the_very_same_config():
    cfg = adaptive("nnlm")
    assert fit_cutoffs(cfg, 16_383) is cfg


@pytest.mark.parametrize("family", LMS)
def test_a_users_own_cutoffs_are_used_as_given_and_refused_if_impossible(family):
    cfg = adaptive(family, cutoffs=[100, 6000])
    assert cfg.fit_to_vocab(5399) is cfg
    with pytest.raises(ConfigError, match=r"'cutoffs'.*5399"):
        FAMILIES[family].model_class()(cfg, 5399, counts=[1] * 5399)


@pytest.mark.parametrize("family", LMS)
def test_other_outputs_are_left_alone(family):
    extra = {"tie_weights": False} if family == "rnn_lm" else {}
    cfg = FAMILIES[family].config(output="hierarchical", **extra)
    assert cfg.fit_to_vocab(50) is cfg and cfg.cutoffs == [2000, 6000]


def test_no_cutoff_left_is_exactly_a_full_softmax():
    torch.manual_seed(0)
    model = FAMILIES["nnlm"].model_class()(adaptive("nnlm").fit_to_vocab(30), 30)
    h = torch.randn(5, 4)
    lp = model.U.log_prob_all(h)
    assert torch.allclose(lp, torch.log_softmax(model.U.head(h), -1))
    assert torch.allclose(lp.exp().sum(1), torch.ones(5))


@pytest.mark.parametrize("run", ["nnlm", "lstm_lm", "transformer_lm"])
def test_a_small_vocabulary_trains_with_the_default_and_records_the_cutoffs_used(
    tmp_path, monkeypatch, run
):
    """A corpus of a dozen words trains with params.yaml's cut-offs [2000, 6000]; config.json,
    model.pt and the MLflow params hold the cut-offs used ([]: a full softmax)."""
    logged = {}

    def start(cls, name, family, params, *args, **kwargs):
        logged.update(params)
        return inactive(cls, name)

    monkeypatch.setattr(Tracker, "start", classmethod(start))
    root = make_project(tmp_path, n_train=60)
    params = tiny_params(run)
    section = params[run]
    assert section["output"] == "adaptive" and section.get("cutoffs") == [10]  # toy.TINY
    section["cutoffs"] = [2000, 6000]  # the shipped default, as params.yaml has it
    section["trainer"]["max_epochs"] = 1
    lifecycle.train(params, run, root)
    config = json.loads((root / "models" / run / "config.json").read_text())
    assert config["vocab_size"] < 2000
    assert config["config"]["cutoffs"] == [] and config["config"]["output"] == "adaptive"
    assert logged["cutoffs"] == []
    blob = torch.load(root / "models" / run / "model.pt", weights_only=True)
    assert blob["config"]["cutoffs"] == []
