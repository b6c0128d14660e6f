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


# the adaptive outputs below, cut-offs [50, 200] over V = 500 and COUNTS: the shares of the
# training tokens that fall in tail 1 (ids 50..199) and tail 2 (ids 200..499)
_TOTAL = V * (V + 1) / 2
P_TAIL1 = sum(V - i for i in range(50, 200)) / _TOTAL
P_TAIL2 = sum(V - i for i in range(200, V)) / _TOTAL


def _adaptive(d: int) -> float:
    """Grave et al.'s count for a d-wide input: head (50 words + 2 tail tokens), then each tail's
    projection to d / 4^i and its softmax, weighted by the tail's share of tokens."""
    d1, d2 = d // 4, d // 16
    return d * 52 + P_TAIL1 * (d * d1 + d1 * 150) + P_TAIL2 * (d * d2 + d2 * 300)


# Q by hand, with params.yaml's sizes: nnlm N=4 D=60 H=100; rnn_lm a tied 1-layer tanh RNN of
# 200; lstm_lm 2 LSTM layers of 200 (g = 4); transformer_lm L=2 C=192 F=768 T=128
@pytest.mark.parametrize(
    ("run", "overrides", "expected"),
    [
        ("nnlm", {"output": "softmax"}, 4 * 60 + 4 * 60 * 100 + 100 * V),
        ("nnlm", {"output": "hierarchical"}, 4 * 60 + 4 * 60 * 100 + 100 * math.log2(V)),
        (
            "nnlm",
            {"output": "softmax", "direct": True},
            4 * 60 + 4 * 60 * 100 + (100 + 4 * 60) * V,
        ),
        (
            "nnlm",
            {"output": "adaptive", "cutoffs": [50, 200]},
            4 * 60 + 4 * 60 * 100 + _adaptive(100),
        ),
        ("rnn_lm", {}, 200 * (200 + 200) + 200 * V),
        (
            "rnn_lm",
            {"output": "hierarchical", "tie_weights": False},
            200 * 400 + 200 * math.log2(V),
        ),
        ("lstm_lm", {"cutoffs": [50, 200]}, 2 * 4 * 200 * 400 + _adaptive(200)),
        ("lstm_lm", {"output": "softmax", "tie_weights": True}, 2 * 4 * 200 * 400 + 200 * V),
        (
            "lstm_lm",
            {"output": "softmax", "tie_weights": False, "emb_dim": 100},
            4 * 200 * (100 + 200) + 4 * 200 * 400 + 200 * V,
        ),
        (
            "transformer_lm",
            {"output": "softmax"},
            2 * (4 * 192**2 + 2 * 192 * 768 + 2 * 128 * 192) + 192 * V,
        ),
        (
            "transformer_lm",
            {"output": "adaptive", "cutoffs": [50, 200]},
            2 * (4 * 192**2 + 2 * 192 * 768 + 2 * 128 * 192) + _adaptive(192),
        ),
        (
            "transformer_lm",
            {"output": "hierarchical"},
            2 * (4 * 192**2 + 2 * 192 * 768 + 2 * 128 * 192) + 192 * math.log2(V),
        ),
    ],
)
def test_lm_multiply_adds_per_token_by_hand(run, overrides, expected):
    cost = _model(run, overrides).cost(V)
    assert isinstance(cost, Cost) and cost.unit == "token"
    assert cost.multiply_adds == pytest.approx(expected, rel=1e-12)
    assert f"V={V:,}" in cost.terms
    assert cost.as_stats()["cost_per_token"] == pytest.approx(expected, abs=0.005)


@pytest.mark.parametrize(
    ("run", "key", "added"),
    [
        # one more word of context: its copy N×D, its D×H rows of the hidden layer
        ("nnlm", "context_size", lambda c: c.emb_dim + c.emb_dim * c.hidden_dim),
        # twice the hidden layer: N×D×H and H×V double
        (
            "nnlm",
            "hidden_dim",
            lambda c: c.context_size * c.emb_dim * c.hidden_dim + c.hidden_dim * V,
        ),
        # one more LSTM layer: g×H×(H + H)
        ("lstm_lm", "num_layers", lambda c: 4 * c.hidden_dim * 2 * c.hidden_dim),
        # twice the block: attention's 2×T×C per layer doubles, nothing else changes
        ("transformer_lm", "block_size", lambda c: c.num_layers * 2 * c.block_size * c.d_model),
    ],
)
def test_q_grows_as_the_formula_says_with_one_size(run, key, added):
    softmax = {"output": "softmax"}  # the default cut-offs lie beyond V
    base = _model(run, softmax)
    c = base.config
    step = 1 if key in ("context_size", "num_layers") else getattr(c, key)
    grown = _model(run, {**softmax, key: getattr(c, key) + step})
    assert grown.cost(V).multiply_adds - base.cost(V).multiply_adds == pytest.approx(added(c))


@pytest.mark.parametrize("run", sorted(PARAMS["models"]))
def test_every_run_of_params_yaml_states_its_q(run):
    """A count table and a closed-form factorisation have no per-token Q; every trained model
    states a positive one, which its stats carry (rounded to two decimals)."""
    v = 10_000  # above lstm_lm's cut-offs
    cost = _model(run, vocab_size=v).cost(v)
    if PARAMS["models"][run]["family"] in ("ngram", "svd"):
        assert cost is None
        return
    assert cost.multiply_adds > 0 and cost.formula and cost.terms
    assert cost.as_stats()["cost_per_token"] == pytest.approx(cost.multiply_adds, abs=0.005)


def test_nnlm_states_mikolovs_formula_with_the_runs_sizes():
    n, d, h = 4, 60, 100
    section = {"context_size": n, "emb_dim": d, "hidden_dim": h, "output": "softmax"}
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
    model = _model("nnlm", {"output": "softmax"}).eval()
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
    model = _model("transformer_lm", {"block_size": 32, "output": "softmax"}).eval()
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
