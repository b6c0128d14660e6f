"""The report's complexity formulas agree with the models' own multiply-add counts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from nlpzoo.models import FAMILIES
from nlpzoo.report.cost import cost_of

V = 500
COUNTS = list(range(V, 0, -1))  # a Zipf-like frequency order for the Huffman tree

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _model(family: str, section: dict):
    cfg_cls, model_cls = FAMILIES[family]
    fields = {k: v for k, v in section.items() if k not in ("family", "trainer")}
    return model_cls(cfg_cls(**fields), V, counts=COUNTS)


@pytest.mark.parametrize(
    ("run", "overrides"),
    [
        ("nnlm", {}),
        ("nnlm", {"output": "hierarchical"}),
        ("nnlm", {"direct": True}),
        ("rnn_lm", {}),
        ("lstm_lm", {"output": "softmax", "tie_weights": True}),  # the default is adaptive
        ("lstm_lm", {"output": "softmax", "tie_weights": False, "emb_dim": 100}),
        ("transformer_lm", {}),
    ],
)
def test_formula_matches_the_models_count(run, overrides):
    section = {**PARAMS[run], **overrides}
    family = PARAMS["models"][run]["family"]
    model = _model(family, section)
    cost = cost_of(family, section, V)
    assert cost is not None
    assert cost.q == pytest.approx(model.cost_per_token(V))


def test_word2vec_formulas_are_mikolovs():
    hs = {"model": "skipgram", "objective": "hierarchical", "dim": 100, "window": 5}
    assert cost_of("word2vec", hs, 2**14).q == 5 * (100 + 100 * 14)  # C×(D + D×log₂V)
    cbow = {**hs, "model": "cbow"}
    assert cost_of("word2vec", cbow, 2**14).q == 10 * 100 + 100 * math.log2(2**14)
    neg = {**hs, "objective": "negative", "negative": 5}
    assert cost_of("word2vec", neg, 2**14).q == 5 * (100 + 100 * 6)  # K + 1 for log₂V
    assert cost_of("svd", {}, 100) is None and cost_of("nnlm", {}, None) is None
    assert cost_of("rnn_lm", {"output": "adaptive"}, 100).q is None  # only the model counts it


@pytest.mark.parametrize(
    ("run", "tolerance"), [("transformer", 0.0), ("attention", 0.01), ("decoder_mt", 0.05)]
)
def test_translation_formulas_against_a_flop_count(run, tolerance):
    """Multiply-adds of one teacher-forced forward pass over S = T = MT_SPAN pieces, counted by
    torch's FLOP counter (2 FLOPs per multiply-add), per target token. (The counter does not see
    inside nn.LSTM, so seq2seq is left out.)"""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from nlpzoo.report.cost import MT_SPAN

    family = PARAMS["models"][run]["family"]
    section = PARAMS[run]
    cfg_cls, model_cls = FAMILIES[family]
    fields = {k: v for k, v in section.items() if k in cfg_cls.__dataclass_fields__}
    model = model_cls(cfg_cls(**fields), V).eval()
    src = torch.randint(4, V, (1, MT_SPAN))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(src, src.clone())
    counted = counter.get_total_flops() / 2 / MT_SPAN
    assert cost_of(family, section, V).q == pytest.approx(counted, rel=tolerance)
