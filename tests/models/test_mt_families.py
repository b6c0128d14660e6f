"""Properties every translation family must have (seq2seq, attention, transformer, decoder_mt)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlpzoo.data.mt import IGNORE, collate
from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from toy import copy_and_shift_pairs, train_on

V = 30
TINY = {
    "seq2seq": {"emb_dim": 8, "hidden_dim": 16, "num_layers": 2},
    "attention": {"emb_dim": 8, "hidden_dim": 16, "attn_dim": 8, "maxout": 6},
    "transformer": {"d_model": 16, "heads": 2, "num_layers": 2, "d_ff": 32},
    "decoder_mt": {"d_model": 16, "heads": 2, "num_layers": 2, "d_ff": 32},
}
MT_FAMILIES = sorted(f for f in FAMILIES if FAMILIES[f].task == "mt")


def test_every_mt_family_is_covered():
    assert set(MT_FAMILIES) == set(TINY)


def _model(family: str, **extra):
    torch.manual_seed(0)
    cfg_cls, model_cls = FAMILIES[family].config, FAMILIES[family].model_class()
    return model_cls(cfg_cls(**{**TINY[family], "dropout": 0.0, **extra}), V).eval()


def _pairs(n: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(5, V, rng.integers(1, 8)), rng.integers(5, V, rng.integers(1, 7)))
        for _ in range(n)
    ]


@pytest.mark.parametrize("family", MT_FAMILIES)
def test_padding_never_changes_a_result(family):
    """A sentence's logits (and encoder output, attention weights) alone = in a padded batch."""
    model, pairs = _model(family), _pairs()
    batch = collate(pairs)
    with torch.no_grad():
        logits, _ = model(*batch)
        for i, (s, t) in enumerate(pairs):
            alone = collate([(s, t)])
            one, _ = model(*alone)
            n, m = len(s), len(t) + 1
            torch.testing.assert_close(one[0, :m], logits[i, :m], atol=1e-5, rtol=1e-5)
            if family == "seq2seq":
                out_b, (h_b, _) = model.encode(batch[0])
                out_1, (h_1, _) = model.encode(alone[0])
                torch.testing.assert_close(out_1[0, :n], out_b[i, :n], atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(h_1[:, 0], h_b[:, i], atol=1e-5, rtol=1e-5)
            if family == "transformer":
                mem_b, _ = model.encode(batch[0])
                mem_1, _ = model.encode(alone[0])
                torch.testing.assert_close(mem_1[0], mem_b[i, :n], atol=1e-5, rtol=1e-5)
            if hasattr(model, "cross_attention"):
                w_b = model.cross_attention(batch[0], batch[1])  # (B, T, S)
                w_1 = model.cross_attention(alone[0], alone[1])
                torch.testing.assert_close(w_1[0, :m], w_b[i, :m, :n], atol=1e-5, rtol=1e-5)
                assert torch.all(w_b[i, :m, n:] == 0)  # no weight on padding
                torch.testing.assert_close(w_b.sum(-1), torch.ones(w_b.shape[:2]))


@pytest.mark.parametrize("family", MT_FAMILIES)
def test_incremental_decoding_matches_teacher_forcing(family):
    """start/step (encoder once, caches) gives the same log-probabilities as `forward`."""
    model, pairs = _model(family), _pairs(seed=1)
    src, tgt_in, labels = collate(pairs)
    with torch.no_grad():
        logits, _ = model(src, tgt_in)
        state, steps = model.start(src), []
        for t in range(tgt_in.shape[1]):
            tokens = torch.full_like(tgt_in[:, 0], model.START) if t == 0 else tgt_in[:, t]
            log_p, state = model.step(state, tokens)
            steps.append(log_p)
    real = labels != IGNORE
    torch.testing.assert_close(
        torch.stack(steps, 1)[real], torch.log_softmax(logits, -1)[real], atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("family", MT_FAMILIES)
def test_loss_is_mean_cross_entropy_over_real_targets(family):
    model, pairs = _model(family, label_smoothing=0.0), _pairs(seed=2)
    src, tgt_in, labels = collate(pairs)
    logits, loss = model(src, tgt_in, labels)
    real = labels != IGNORE
    manual = -torch.log_softmax(logits, -1)[real].gather(-1, labels[real][:, None]).mean()
    torch.testing.assert_close(loss, manual, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("family", "bad"),
    [
        ("transformer", {"d_model": 30, "heads": 4}),
        ("decoder_mt", {"d_model": 30, "heads": 4}),
        ("seq2seq", {"num_layers": 0}),
        ("attention", {"cell": "rnn"}),
        ("transformer", {"beam_size": 0}),
    ],
)
def test_impossible_configs_are_refused_with_the_key(family, bad):
    cfg_cls = FAMILIES[family].config
    with pytest.raises(ConfigError, match=f"'{next(iter(bad))}'|'heads'"):
        cfg_cls(**{**TINY[family], **bad})


@pytest.mark.parametrize("family", MT_FAMILIES)
def test_dropping_finished_sentences_keeps_every_hypothesis_and_score(family):
    """Decoding steps only the sentences not yet done (the state's rows are selected): the same
    hypotheses and scores as stepping every row to the end. A few training steps on a
    copy-and-shift task make the sentences end at different steps."""
    from nlpzoo.evaluation.decoding import beam_search, greedy

    pairs = copy_and_shift_pairs(lengths=(1, 9))
    model = train_on(_model(family).train(), pairs, lr=1e-2)
    src = collate(pairs[:8])[0]
    for decode in (
        lambda **kw: greedy(model, src, **kw),
        lambda **kw: beam_search(model, src, 3, **kw),
    ):
        kept, full = decode(drop_finished=True), decode(drop_finished=False)
        assert kept.tokens == full.tokens
        assert len({len(h[0]) for h in kept.tokens}) > 2  # sentences end at different steps
        # equal up to float rounding: a matrix product's rows may round differently by batch size
        torch.testing.assert_close(kept.scores, full.scores, rtol=1e-6, atol=1e-5)
        torch.testing.assert_close(kept.log_probs, full.log_probs, rtol=1e-6, atol=1e-5)
