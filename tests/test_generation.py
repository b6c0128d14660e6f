"""Generation (nlpzoo.generation): sampling, and each input kind's decoder against the scoring of
the same text, on small models of every language-model family (their weights untrained: the
decoder must agree with the scoring whatever they are)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from nlpzoo.data.vocab import EOS
from nlpzoo.errors import DataError
from nlpzoo.families import FAMILIES
from nlpzoo.generation import decoder, generate, sample_token
from nlpzoo.tasks import task_of

V = 40
SIZES = {
    "ngram": ("ngram", {"order": 3}),
    "nnlm": ("nnlm", {"context_size": 3, "emb_dim": 8, "hidden_dim": 16}),
    "lstm_lm": (
        "rnn_lm",
        {"cell": "lstm", "emb_dim": 8, "hidden_dim": 8, "num_layers": 2, "output": "softmax"},
    ),
    "transformer_lm": (
        "transformer_lm",
        {"d_model": 16, "heads": 2, "num_layers": 2, "d_ff": 32, "block_size": 16},
    ),
}


def _model(run: str):
    name, sizes = SIZES[run]
    family = FAMILIES[name]
    torch.manual_seed(0)
    config = family.config(**sizes)
    if not family.neural:
        stream = np.random.default_rng(0).integers(4, V, 500)
        return family, family.model_class()(config, V).fit(stream)
    return family, family.model_class()(config, V).eval()


@pytest.mark.parametrize("run", sorted(SIZES))
def test_generation_draws_from_the_distribution_the_evaluation_scores(run):
    """The log p of each generated token is the one the scoring protocol gives the same text:
    the n-gram's sentence-bounded contexts, the NNLM's window, the LSTM's carried state, the
    Transformer's block, all from a sentence start."""
    family, model = _model(run)
    prompt = [7, 9]
    task = task_of(family)
    for sample in generate(family, model, prompt, 10, seed=5, samples=2):
        stream = np.asarray([*prompt, *sample.ids])  # 1 + 12 positions: one Transformer block
        scored = task.log_probs(model, stream, model.config)
        np.testing.assert_allclose(sample.log_probs, scored[len(prompt) :], atol=1e-4)
    # temperature 0 takes the most probable word: no draw, the seed does not matter
    greedy = [generate(family, model, prompt, 8, temperature=0, seed=s)[0].ids for s in (1, 2)]
    assert greedy[0] == greedy[1]
    # the same seed gives the same samples; sample 1 does not depend on how many follow it
    two = generate(family, model, prompt, 6, seed=3, samples=2)
    assert [s.ids for s in generate(family, model, prompt, 6, seed=3, samples=2)] == [
        s.ids for s in two
    ]
    assert generate(family, model, prompt, 6, seed=3)[0].ids == two[0].ids


def test_sampling_temperature_top_k_and_the_ids_never_drawn():
    logp = np.log(np.array([0.05, 0.3, 0.1, 0.3, 0.15, 0.1]))  # ids 1 (<s>) and 3 (<pad>)
    rng = np.random.default_rng(0)
    draws = Counter(sample_token(logp, rng) for _ in range(20000))
    assert set(draws) == {0, 2, 4, 5}  # never <s> or <pad>
    kept = 0.05 + 0.1 + 0.15 + 0.1
    for i, p in ((0, 0.05), (2, 0.1), (4, 0.15), (5, 0.1)):
        assert draws[i] / 20000 == pytest.approx(p / kept, abs=0.015)
    assert set(Counter(sample_token(logp, rng, top_k=1) for _ in range(100))) == {4}
    # the 2 most probable allowed ids: 4, then 2 and 5 tie and the lower id stays
    assert set(Counter(sample_token(logp, rng, top_k=2) for _ in range(2000))) == {2, 4}
    assert sample_token(logp, rng, temperature=0) == 4
    sharp = Counter(sample_token(logp, rng, temperature=0.1) for _ in range(2000))
    assert sharp[4] / 2000 > 0.95


def test_transformer_kv_cache_generation_equals_recomputing_the_window():
    family, model = _model("transformer_lm")
    prompt = [5, 6, 7]
    # 40 tokens with a block of 16: the window slides (the cache is rebuilt) twice or more
    cached = generate(family, model, prompt, 40, seed=11, samples=2, cache=True)
    plain = generate(family, model, prompt, 40, seed=11, samples=2, cache=False)
    for a, b in zip(cached, plain, strict=True):
        assert a.ids == b.ids
        np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-5)
    # decode in pieces over the cache gives the log-probabilities of one plain forward pass
    x = torch.tensor([[EOS, *prompt, 4, 5, 6, 7, 8, 9, 10, 11]])
    with torch.no_grad():
        whole = torch.log_softmax(model(x)[0].float(), dim=-1)
        first, cache = model.decode(x[:, :5])
        rest, cache = model.decode(x[:, 5:], cache)
    assert cache[0][0].shape[2] == x.shape[1]
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="block_size"):
        model.decode(
            torch.zeros(1, 1, dtype=torch.long), model.decode(torch.zeros(1, 16).long())[1]
        )


def test_only_a_language_model_generates_and_bad_settings_are_refused():
    with pytest.raises(DataError, match="not a language model"):
        decoder(FAMILIES["transformer"], None)
    family, model = _model("nnlm")
    with pytest.raises(DataError, match="tokens"):
        generate(family, model, [5], 0)
    with pytest.raises(DataError, match="temperature"):
        generate(family, model, [5], 3, temperature=-1)


def test_a_long_prompt_is_fed_to_a_recurrent_model_in_chunks_with_the_same_result(monkeypatch):
    """A prompt of 700 tokens, read PROMPT_CHUNK tokens at a time with the state carried, gives
    the distribution and the samples of reading it at once, and no call sees more than a chunk:
    the (1, T, V) tensor of a whole long prompt is never made."""
    import nlpzoo.generation as generation

    family, model = _model("lstm_lm")
    prompt = list(np.random.default_rng(1).integers(4, V, 700))
    seen = []
    feed = model.log_prob_all

    def spy(inputs, state=None):
        seen.append(inputs.shape[1])
        return feed(inputs, state)

    monkeypatch.setattr(model, "log_prob_all", spy)
    chunked = decoder(family, model).start(prompt)
    samples = generate(family, model, prompt, 5, seed=2)
    assert max(seen) == generation.PROMPT_CHUNK and len(seen) == 3 + 3 + 4  # 701 = 3 chunks
    monkeypatch.setattr(generation, "PROMPT_CHUNK", 10_000)
    seen.clear()
    whole = decoder(family, model).start(prompt)
    assert seen == [701]
    np.testing.assert_allclose(chunked, whole, atol=1e-5)
    again = generate(family, model, prompt, 5, seed=2)
    assert [s.ids for s in again] == [s.ids for s in samples]
    np.testing.assert_allclose(again[0].log_probs, samples[0].log_probs, atol=1e-5)
    # and the scoring of the same text gives the same next-token distribution
    stream = np.asarray([*prompt, samples[0].ids[0]])
    scored = task_of(family).log_probs(model, stream, model.config)
    assert scored[-1] == pytest.approx(samples[0].log_probs[0], abs=1e-4)


@pytest.mark.parametrize("run", sorted(SIZES))
def test_generation_stops_when_its_check_raises(run):
    family, model = _model(run)
    calls = []

    def check():
        calls.append(1)
        if len(calls) > 4:
            raise TimeoutError("past the deadline")

    with pytest.raises(TimeoutError):
        generate(family, model, [7, 9], 50, check=check)
    assert len(calls) == 5  # before the prompt, then before each of the first four steps
    assert len(generate(family, model, [7, 9], 3, check=lambda: None)[0].ids) == 3
