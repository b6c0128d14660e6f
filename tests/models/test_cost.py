"""Each model states its own cost, Q: the formula it writes agrees with the model's own
multiply-add count and with torch's FLOP counter, with the sizes of params.yaml's runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from nlpzoo.cost import MT_SPAN, Cost, output_term
from nlpzoo.families import FAMILIES

V = 500
COUNTS = list(range(V, 0, -1))  # a Zipf-like frequency order (Huffman tree, adaptive shares)

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _model(run: str, overrides: dict | None = None, vocab_size: int = V):
    """The model of params.yaml's run `run` (its own section, with `overrides`)."""
    family = FAMILIES[PARAMS["models"][run]["family"]]
    section = {**(PARAMS.get(run) or {}), **(overrides or {})}
    fields = {k: v for k, v in section.items() if k in family.config.__dataclass_fields__}
    counts = COUNTS if vocab_size == V else list(range(vocab_size, 0, -1))
    cls = family.model_class()
    try:
        return cls(family.config(**fields), vocab_size, counts=counts)
    except TypeError:  # count-based models take no counts
        return cls(family.config(**fields), vocab_size)


def test_every_registered_family_states_its_cost():
    for name in FAMILIES:
        assert callable(getattr(FAMILIES[name].model_class(), "cost", None)), name


@pytest.mark.parametrize(
    ("run", "overrides"),
    [
        ("nnlm", {}),
        ("nnlm", {"output": "hierarchical"}),
        ("nnlm", {"direct": True}),
        ("nnlm", {"output": "adaptive", "cutoffs": [50, 200]}),
        ("rnn_lm", {}),
        ("lstm_lm", {"cutoffs": [50, 200]}),  # adaptive: the model's expected count
        ("lstm_lm", {"output": "softmax", "tie_weights": True}),
        ("lstm_lm", {"output": "softmax", "tie_weights": False, "emb_dim": 100}),
        ("transformer_lm", {}),
    ],
)
def test_lm_formula_matches_the_models_count(run, overrides):
    model = _model(run, overrides)
    cost = model.cost(V)
    assert isinstance(cost, Cost) and cost.multiply_adds is not None
    assert cost.multiply_adds == pytest.approx(model.cost_per_token(V), abs=1.0)
    assert f"V={V:,}" in cost.terms


def test_nnlm_states_mikolovs_formula_with_the_runs_sizes():
    n, d, h = 4, 60, 100
    section = {"context_size": n, "emb_dim": d, "hidden_dim": h}
    cost = _model("nnlm", section, vocab_size=13192).cost(13192)
    assert cost.formula == "N×D + N×D×H + H×V"
    assert cost.terms == "N=4, D=60, H=100, V=13,192"
    assert cost.multiply_adds == n * d + n * d * h + h * 13192 == 1_343_440
    assert cost.as_stats() == {
        "cost_formula": "N×D + N×D×H + H×V",
        "cost_terms": "N=4, D=60, H=100, V=13,192",
        "cost_per_token": 1_343_440,
    }
    hier = _model("nnlm", {**section, "output": "hierarchical"}).cost(1024)
    assert hier.formula == "N×D + N×D×H + H×log₂V"
    assert hier.multiply_adds == n * d + n * d * h + h * 10
    direct = _model("nnlm", {**section, "direct": True}).cost(V)
    assert direct.formula == "N×D + N×D×H + (H + N×D)×V"
    adaptive = _model("nnlm", {**section, "output": "adaptive", "cutoffs": [50, 200]}).cost(V)
    assert adaptive.formula == "N×D + N×D×H + adaptive(H, V)"
    assert adaptive.multiply_adds < n * d + n * d * h + h * V  # the head is 50 + 2 wide


def test_nnlm_softmax_against_a_flop_count():
    """The FLOP counter sees the hidden and output layers (N×D×H + H×V); the projection N×D is
    a look-up and copy, which Mikolov et al. count and the counter does not."""
    model = _model("nnlm").eval()
    c = model.config
    context = torch.randint(4, V, (8, c.context_size))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.log_prob_all(context)
    counted = counter.get_total_flops() / 2 / 8
    assert model.cost(V).multiply_adds == counted + c.context_size * c.emb_dim


def test_word2vec_formulas_are_mikolovs():
    v = 2**14
    base = {"model": "skipgram", "objective": "hierarchical", "dim": 100, "window": 5}
    sg_hs = _model("skipgram", base, vocab_size=v).cost(v)
    assert sg_hs.formula == "C×(D + D×log₂V)"
    assert sg_hs.multiply_adds == 5 * (100 + 100 * 14)
    cbow = _model("cbow", {**base, "model": "cbow"}, vocab_size=v).cost(v)
    assert cbow.formula == "N×D + D×log₂V" and cbow.terms == "N=10, D=100, V=16,384"
    assert cbow.multiply_adds == 10 * 100 + 100 * math.log2(v)
    neg = _model("skipgram", {**base, "objective": "negative", "negative": 5}).cost(V)
    assert neg.formula == "C×(D + D×(K+1))" and neg.terms == "C=5, D=100, K=5"
    assert neg.multiply_adds == 5 * (100 + 100 * 6)  # K + 1 for log₂V


def test_glove_counts_per_entry_and_count_models_state_none():
    glove = _model("glove", {"dim": 50}).cost(V)
    assert glove.multiply_adds == 100 and glove.unit == "entry"
    assert glove.as_stats()["cost_unit"] == "entry"
    assert _model("ngram").cost(V) is None
    assert _model("svd").cost(V) is None


def test_output_term():
    assert output_term(10, "H", "softmax", 64) == (640, "H×V")
    assert output_term(10, "H", "hierarchical", 64) == (60.0, "H×log₂V")
    assert output_term(10, "H", "adaptive", 64) == (None, "adaptive(H, V)")
    assert output_term(10, "H", "adaptive", 64, counted=123.0) == (123.0, "adaptive(H, V)")
    assert Cost("x", "y", 1155499.9999).as_stats()["cost_per_token"] == 1155500
    assert Cost("x", "y", 2.5).as_stats()["cost_per_token"] == 2.5
    assert Cost("x", "y", None).as_stats()["cost_per_token"] is None


def test_transformer_lm_against_a_flop_count():
    """One forward pass over a full block of T = block_size tokens, per token."""
    model = _model("transformer_lm", {"block_size": 32}).eval()
    x = torch.randint(4, V, (1, 32))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(x)
    counted = counter.get_total_flops() / 2 / 32
    assert model.cost(V).multiply_adds == pytest.approx(counted)


@pytest.mark.parametrize(
    ("run", "tolerance"), [("transformer", 0.0), ("attention", 0.01), ("decoder_mt", 0.05)]
)
def test_translation_formulas_against_a_flop_count(run, tolerance):
    """Multiply-adds of one teacher-forced forward pass over S = T = MT_SPAN pieces, counted by
    torch's FLOP counter (2 FLOPs per multiply-add), per target token. (The counter does not see
    inside nn.LSTM, so seq2seq is left out.)"""
    model = _model(run).eval()
    src = torch.randint(4, V, (1, MT_SPAN))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(src, src.clone())
    counted = counter.get_total_flops() / 2 / MT_SPAN
    assert model.cost(V).multiply_adds == pytest.approx(counted, rel=tolerance)


def test_seq2seq_formula():
    cost = _model("seq2seq", {"emb_dim": 8, "hidden_dim": 16, "num_layers": 2}).cost(V)
    assert cost.formula == "2 Σ_l 4H×(in_l + H) + H×V"
    assert cost.multiply_adds == 2 * (4 * 16 * (8 + 16) + 4 * 16 * (16 + 16)) + 16 * V
