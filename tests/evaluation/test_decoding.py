"""Greedy and beam search (nlpzoo.evaluation.decoding) on hand-built and tiny trained models."""

from __future__ import annotations

import math

import pytest
import torch

from nlpzoo.data.mt import pad
from nlpzoo.data.vocab import BOS, EOS, PAD
from nlpzoo.evaluation.decoding import beam_search, greedy, length_penalty, max_lengths
from nlpzoo.models import transformer
from toy import copy_and_shift_pairs, train_on

A, B_ = 4, 5  # the toy model's two word pieces; with </s> its three tokens


class ToyMarkov:
    """p(next | last token) from a fixed table over {a, b, </s>}: a 3-token model.

    From <s>: a 0.5, b 0.4, </s> 0.1. After a: </s> 0.4, a 0.3, b 0.3. After b: </s> 0.9, a 0.05,
    b 0.05. Greedy takes a then </s> (0.5 · 0.4 = 0.20) and misses b </s> (0.4 · 0.9 = 0.36)."""

    START = BOS
    V = 6

    def __init__(self) -> None:
        table = torch.full((self.V, self.V), 1e-12)
        table[BOS, [A, B_, EOS]] = torch.tensor([0.5, 0.4, 0.1])
        table[A, [EOS, A, B_]] = torch.tensor([0.4, 0.3, 0.3])
        table[B_, [EOS, A, B_]] = torch.tensor([0.9, 0.05, 0.05])
        table[EOS, EOS] = 1.0
        self.log_table = (table / table.sum(1, keepdim=True)).log()

    def start(self, src):
        return {"rows": torch.zeros(src.shape[0], 1)}

    def step(self, state, tokens):
        return self.log_table[tokens], state


def test_beam_finds_the_best_sequence_that_greedy_misses():
    model, src = ToyMarkov(), torch.tensor([[7, 7, 7]])
    g = greedy(model, src)
    b = beam_search(model, src, beam_size=2, alpha=0.0)
    assert g.tokens[0][0] == [A]
    assert b.tokens[0][0] == [B_]
    assert b.log_probs[0, 0].item() == pytest.approx(math.log(0.36), abs=1e-5)
    assert b.tokens[0][1] == [A]  # the runner-up is greedy's answer
    assert b.log_probs[0, 1].item() == pytest.approx(math.log(0.20), abs=1e-5)


def test_max_length_forces_end_of_sentence():
    src = torch.tensor([[9, 9, PAD], [9, PAD, PAD]])
    assert max_lengths(src, 1.5, extra=0).tolist() == [3, 2]

    class Chatty(ToyMarkov):  # never wants to stop
        def step(self, state, tokens):
            lp = torch.full((tokens.shape[0], self.V), -1e9)
            lp[:, A] = 0.0
            return lp, state

    hyps = beam_search(Chatty(), src, beam_size=2, alpha=0.0, max_len_ratio=1.5, extra=0)
    assert hyps.tokens[0][0] == [A, A] and hyps.tokens[1][0] == [A]  # </s> ends each at limit
    assert greedy(Chatty(), src, 1.5, extra=0).tokens == [[[A, A]], [[A]]]


@pytest.fixture(scope="module")
def tiny_transformer():
    """A Transformer trained for a few steps to copy-and-shift: outputs are not degenerate."""
    torch.manual_seed(0)
    cfg = transformer.Config(d_model=32, heads=2, num_layers=1, d_ff=64, dropout=0.0)
    pairs = copy_and_shift_pairs(lengths=(2, 7))
    model = train_on(transformer.Transformer(cfg, 20), pairs, lr=3e-3)
    src = pad([p[0] for p in pairs[:6]], PAD)
    return model, src


def test_beam_one_equals_greedy(tiny_transformer):
    model, src = tiny_transformer
    g = greedy(model, src)
    b = beam_search(model, src, beam_size=1, alpha=0.6)
    assert b.tokens == g.tokens
    assert torch.allclose(b.log_probs, g.log_probs, atol=1e-4)


def test_beam_hypotheses_sorted_by_length_normalised_score(tiny_transformer):
    model, src = tiny_transformer
    alpha = 1.0
    hyps = beam_search(model, src, beam_size=4, alpha=alpha)
    assert torch.all(hyps.scores[:, :-1] >= hyps.scores[:, 1:])
    # every score is the model's own log-probability of the hypothesis (with </s>) over lp(|Y|)
    for i, sentence in enumerate(hyps.tokens):
        for k, ids in enumerate(sentence):
            y = torch.tensor([[*ids, EOS]])
            tgt_in = torch.tensor([[BOS, *ids]])
            logits, _ = model(src[i : i + 1], tgt_in)
            logp = torch.log_softmax(logits, -1).gather(-1, y[..., None]).sum().item()
            assert hyps.log_probs[i, k].item() == pytest.approx(logp, abs=1e-3)
            expected = logp / length_penalty(len(ids) + 1, alpha)
            assert hyps.scores[i, k].item() == pytest.approx(expected, abs=1e-3)


class Countdown(ToyMarkov):
    """Row i wants </s> once it has emitted |source_i| pieces (a 0.6, b 0.3, </s> 0.1 before
    then; </s> 0.9 after): the sentences of a batch finish at different steps. Records the rows
    of every step."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[int] = []
        self.go_on = torch.full((self.V,), 1e-12).index_put_(
            (torch.tensor([A, B_, EOS]),), torch.tensor([0.6, 0.3, 0.1])
        )
        self.go_on = (self.go_on / self.go_on.sum()).log()

    def start(self, src):
        return {"left": (src != PAD).sum(1), "pad": [torch.zeros(src.shape[0], 2, 3)]}

    def step(self, state, tokens):
        self.rows.append(tokens.shape[0])
        more = (state["left"] > 0)[:, None]
        log_p = torch.where(more, self.go_on, self.log_table[B_])  # (N, V)
        return log_p, dict(state, left=state["left"] - 1)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_dropping_finished_sentences_changes_nothing_but_the_rows_computed(search):
    src = torch.tensor([[9, 9, 9, 9], [9, PAD, PAD, PAD], [9, 9, 9, PAD], [9, 9, PAD, PAD]])
    runs = {}
    for drop in (True, False):
        model = Countdown()
        if search == "greedy":
            hyps = greedy(model, src, drop_finished=drop)
        else:
            hyps = beam_search(model, src, beam_size=2, alpha=0.6, drop_finished=drop)
        runs[drop] = hyps, model.rows
    (kept, rows_kept), (full, rows_full) = runs[True], runs[False]
    assert kept.tokens == full.tokens
    assert torch.equal(kept.scores, full.scores) and torch.equal(kept.log_probs, full.log_probs)
    if search == "greedy":  # a a a a </s>, a </s>, a a a </s>, a a </s>
        assert [h[0] for h in kept.tokens] == [[A] * 4, [A], [A] * 3, [A] * 2]
        assert rows_kept == [4, 4, 3, 2, 1] and rows_full == [4] * 5
    else:  # a sentence leaves with its K rows once done (K finished, none live can beat them)
        assert [h[0] for h in kept.tokens] == [[A] * 4, [A], [A] * 3, [A] * 2]
        assert rows_kept == [8, 8, 6, 4, 2] and rows_full == [8] * 5


class Tie(Countdown):
    """Countdown with a and b equally likely: hypotheses of exactly equal scores."""

    def __init__(self) -> None:
        super().__init__()
        go_on = torch.full((self.V,), 1e-12).index_put_(
            (torch.tensor([A, B_, EOS]),), torch.tensor([0.45, 0.45, 0.1])
        )
        self.go_on = (go_on / go_on.sum()).log()


@pytest.mark.parametrize("beam_size", [2, 4])
def test_equal_scores_keep_their_order_whatever_else_is_in_the_batch(beam_size):
    """A sentence's finished list is fixed once it is done: decoded alone, or in a batch whose
    other sentences run on (with or without its rows), ties come out in the same order."""
    src = torch.tensor([[9] * 6, [9, PAD, PAD, PAD, PAD, PAD], [9, 9, 9, PAD, PAD, PAD]])
    alone = beam_search(Tie(), src[1:2, :1], beam_size, alpha=0.6)
    for drop in (True, False):
        hyps = beam_search(Tie(), src, beam_size, alpha=0.6, drop_finished=drop)
        assert hyps.tokens[1] == alone.tokens[0]
        assert torch.equal(hyps.scores[1], alone.scores[0])
    assert alone.scores[0, 0] == alone.scores[0, 1]  # a tie indeed


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_check_that_raises_stops_the_decoding_between_two_steps(search):
    """`check` is called before the encoder and before every step; when it raises, no step
    follows. A check that never raises changes nothing."""
    src = torch.tensor([[9, 9, 9, 9], [9, 9, PAD, PAD]])
    calls = []

    def check():
        calls.append(len(model.rows))
        if len(calls) == 4:
            raise TimeoutError("past the deadline")

    def run(**kw):
        if search == "greedy":
            return greedy(model, src, **kw)
        return beam_search(model, src, beam_size=2, alpha=0.6, **kw)

    model = Countdown()
    with pytest.raises(TimeoutError):
        run(check=check)
    assert calls == [0, 0, 1, 2] and len(model.rows) == 2  # the encoder, then steps 1 and 2
    model = Countdown()
    quiet = run(check=lambda: None)
    model = Countdown()
    plain = run()
    assert quiet.tokens == plain.tokens and torch.equal(quiet.scores, plain.scores)
