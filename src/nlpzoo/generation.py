"""Text from a trained language model, one token at a time: `python -m nlpzoo generate` and the
samples each run writes at evaluation (eval/RUN/samples.json).

A prompt is read as the run's corpus was prepared (`tokenize`): whitespace-separated tokens,
lowercased when the run's vocabulary is (params `lm.lowercase`, which leaves no upper-case word in
it), a word outside the vocabulary read as `<unk>`. Generation starts where every scored split
starts, right after a sentence end, and each family continues the text exactly as it scores a
stream (`nlpzoo.evaluation.perplexity`, the n-gram's own `log_probs`), so the distribution a token
is drawn from is the one the evaluation would give it. What differs is the input of the family,
read from its registry record (`nlpzoo.families.Family`) through its row in `nlpzoo.lm_inputs`:

    counts    n-gram        p_KN(· | the last order−1 words of the current sentence): a sentence
                            starts after `</s>`, its context padded with `<s>`
    window    NNLM          p(· | the last n−1 tokens), `</s>`-padded before the text
    stateful  RNN, LSTM     the recurrent state carried from token to token (`log_prob_all`);
                            a prompt is fed `PROMPT_CHUNK` tokens at a time, the state carried
                            from chunk to chunk (as the scoring's `recurrent_log_probs` does),
                            so a long prompt never holds a (1, T, V) tensor of T > the chunk
    stream    Transformer   p(· | the tokens of the current window), with a key/value cache
                            (`decode`): each new token costs one position, not the prefix. The
                            window holds at most block_size tokens (the prompt's last
                            block_size); when it is full it keeps its last block_size − stride
                            (stride = block_size / 2, as the scoring's sliding windows) and the
                            cache is rebuilt from them. Without the cache every step recomputes
                            the window with the model's plain `forward`: the same tokens.

Sampling: the log-probabilities are divided by the temperature (0: the most probable word is
taken), cut to the `top_k` most probable words (0: none cut) and never give `<s>` or `<pad>`;
`<unk>` and `</s>` are words like the others. One numpy Generator seeded with `seed` draws every
sample in turn, so the same seed gives the same text on any machine (up to float rounding of the
model), and sample i is the same whatever the number of samples asked. A caller with a time
budget passes `check`, called before the prompt is read and before each new token: it raises
to stop (`nlpzoo.use.limits.Deadline`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlpzoo.data.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab
from nlpzoo.errors import DataError
from nlpzoo.families import Family

NEVER = (BOS, PAD)  # ids never generated: they are not tokens of any text
PROMPT_CHUNK = 256  # tokens of a prompt a recurrent model reads at once (the scoring's chunk)


# --------------------------------------------------------------------------- tokenisation


def lowercases(words: Sequence[str]) -> bool:
    """Whether a vocabulary comes from lowercased text: none of its words has an upper-case
    letter (what `lm.lowercase: true` leaves; the run's folder does not record the setting)."""
    return all(w == w.lower() for w in words if w not in SPECIALS)


def tokenize(text: str, vocab: Vocab) -> tuple[list[int], list[str]]:
    """`text` as the corpus's sentences were prepared: whitespace-separated tokens, lowercased
    if the vocabulary is; returns the ids (`<unk>` for a word outside the vocabulary, and for
    `<s>` and `<pad>`, which no text holds) and the words read as `<unk>`, in order."""
    lower = lowercases(vocab.words)
    ids, unknown = [], []
    for word in text.split():
        w = word.lower() if lower else word
        i = vocab.index.get(w, UNK)
        if i in NEVER:
            i = UNK
        if i == UNK and w != SPECIALS[UNK]:
            unknown.append(word)
        ids.append(i)
    return ids, unknown


# --------------------------------------------------------------------------- decoders


class Decoder(ABC):
    """The next-token distribution of one family's model as a text grows."""

    @abstractmethod
    def start(self, ids: list[int]) -> np.ndarray:
        """log p(next | a sentence end, then `ids`), (V,) float64."""

    @abstractmethod
    def step(self, token: int) -> np.ndarray:
        """Append `token`; log p(next | everything so far), (V,) float64."""


class CountsDecoder(Decoder):
    """n-gram: the last order−1 words of the sentence in progress (`KneserNey.distribution`)."""

    def __init__(self, model: Any, cache: bool = True) -> None:
        self.model, self.width = model, model.config.order - 1
        self.sentence: list[int] = []

    def _next(self) -> np.ndarray:
        with np.errstate(divide="ignore"):  # <s> and <pad> have probability 0
            return np.log(self.model.distribution(self.sentence))

    def start(self, ids: list[int]) -> np.ndarray:
        self.sentence = []
        for i in ids:
            self._append(i)
        return self._next()

    def _append(self, token: int) -> None:
        self.sentence = [] if token == EOS else [*self.sentence, token][-self.width :]

    def step(self, token: int) -> np.ndarray:
        self._append(token)
        return self._next()


class _Neural(Decoder):
    def __init__(self, model: Any, cache: bool = True) -> None:
        import torch

        self.torch, self.model = torch, model
        self.device = next(model.parameters()).device

    def _ids(self, ids: list[int]) -> Any:
        return self.torch.tensor([ids], dtype=self.torch.long, device=self.device)  # (1, T)

    @staticmethod
    def _last(log_probs: Any) -> np.ndarray:
        return log_probs[0, -1].double().cpu().numpy()  # (V,) after the last input


class WindowDecoder(_Neural):
    """NNLM: the last n−1 tokens, `</s>` before the text (as `window_log_probs` pads)."""

    def __init__(self, model: Any, cache: bool = True) -> None:
        super().__init__(model)
        self.n1 = model.config.context_size
        self.history: list[int] = []

    def _next(self) -> np.ndarray:
        with self.torch.inference_mode():
            lp = self.model.log_prob_all(self._ids(self.history[-self.n1 :]))  # (1, V)
        return lp[0].double().cpu().numpy()

    def start(self, ids: list[int]) -> np.ndarray:
        self.history = [EOS] * self.n1 + list(ids)
        return self._next()

    def step(self, token: int) -> np.ndarray:
        self.history = [*self.history, token][-self.n1 :]
        return self._next()


class RecurrentDecoder(_Neural):
    """RNN, LSTM: the state after `</s>` + the prompt, read `PROMPT_CHUNK` tokens at a time,
    then one token at a time."""

    def _feed(self, ids: list[int]) -> np.ndarray:
        with self.torch.inference_mode():
            lp, self.state = self.model.log_prob_all(self._ids(ids), self.state)  # (1, T, V)
        return self._last(lp)

    def start(self, ids: list[int]) -> np.ndarray:
        self.state = None  # zeros, as the scoring starts
        text = [EOS, *ids]
        for at in range(0, len(text), PROMPT_CHUNK):
            lp = self._feed(text[at : at + PROMPT_CHUNK])
        return lp

    def step(self, token: int) -> np.ndarray:
        return self._feed([token])


class BlockDecoder(_Neural):
    """Transformer: the current window of at most block_size tokens (see the module docstring),
    extended through the key/value cache, or recomputed at every step without it."""

    def __init__(self, model: Any, cache: bool = True) -> None:
        super().__init__(model)
        self.block = model.config.block_size
        self.keep = max(self.block - max(self.block // 2, 1), 1)  # kept when the window is full
        self.use_cache = cache
        self.window: list[int] = []
        self.cache: Any = None

    def _run(self, new: list[int]) -> np.ndarray:
        """The window has just gained `new` (all of it when the cache was emptied)."""
        with self.torch.inference_mode():
            if not self.use_cache:
                logits, _ = self.model(self._ids(self.window))  # (1, T, V)
                return self._last(self.torch.log_softmax(logits.float(), dim=-1))
            lp, self.cache = self.model.decode(self._ids(new), self.cache)  # (1, T, V)
        return self._last(lp)

    def start(self, ids: list[int]) -> np.ndarray:
        self.window = [EOS, *ids][-self.block :]
        self.cache = None
        return self._run(self.window)

    def step(self, token: int) -> np.ndarray:
        self.window.append(token)
        if len(self.window) <= self.block:
            return self._run([token])
        self.window = self.window[-self.keep :]
        self.cache = None
        return self._run(self.window)


def decoder(family: Family, model: Any, cache: bool = True) -> Decoder:
    """The decoder of `family`'s trained `model` (eval mode), by its input kind
    (`nlpzoo.lm_inputs`); `cache`: the key/value cache, where the kind has one."""
    from nlpzoo.lm_inputs import lm_input

    if family.task != "lm":
        raise DataError(f"family '{family.name}' is not a language model: it cannot generate")
    return lm_input(family).decoder(model, cache)


# --------------------------------------------------------------------------- sampling


def sample_token(
    log_probs: np.ndarray, rng: np.random.Generator, temperature: float = 1.0, top_k: int = 0
) -> int:
    """One id drawn from softmax(log_probs / temperature) over the `top_k` most probable ids
    (0: all); <s> and <pad> never; temperature 0 takes the most probable id (no draw)."""
    z = np.array(log_probs, dtype=np.float64)  # (V,)
    z[list(NEVER)] = -np.inf
    if temperature == 0:
        return int(np.argmax(z))
    z /= temperature
    if 0 < top_k < z.size:
        z[np.argsort(-z, kind="stable")[top_k:]] = -np.inf  # ties: the lower id stays
    p = np.exp(z - z.max())
    cdf = np.cumsum(p)
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return i if i < z.size else int(np.flatnonzero(p)[-1])  # a rounding at the very top


@dataclass
class Sample:
    ids: list[int]  # the new tokens
    log_probs: list[float] = field(default_factory=list)  # log p of each under the model
    first_token_seconds: float = 0.0  # from the prompt to the first new token
    seconds: float = 0.0  # the whole sample

    @property
    def log_prob(self) -> float:
        return float(sum(self.log_probs))


def generate(
    family: Family,
    model: Any,
    prompt: list[int],
    tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    samples: int = 1,
    cache: bool = True,
    check: Callable[[], None] | None = None,
) -> list[Sample]:
    """`samples` continuations of `prompt` (ids), `tokens` new tokens each; `log_probs` are the
    model's own (temperature 1, nothing cut), as the evaluation would score those tokens.
    `check`, when given, is called before each sample's prompt and each new token."""
    if tokens < 1:
        raise DataError(f"tokens must be >= 1, got {tokens}")
    if temperature < 0 or top_k < 0:
        raise DataError("temperature and top_k must be >= 0")
    rng = np.random.default_rng(seed)
    dec = decoder(family, model, cache)
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        if check is not None:
            check()
        lp = dec.start(list(prompt))
        s = Sample([])
        for i in range(tokens):
            token = sample_token(lp, rng, temperature, top_k)
            s.ids.append(token)
            s.log_probs.append(float(lp[token]))
            if i == 0:
                s.first_token_seconds = time.perf_counter() - t0
            if i + 1 < tokens:
                if check is not None:
                    check()
                lp = dec.step(token)
        s.seconds = time.perf_counter() - t0
        out.append(s)
    return out


def samples_record(
    family: Family,
    model: Any,
    vocab: Vocab,
    prompt: str,
    tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    samples: int = 1,
    timing: bool = False,
    check: Callable[[], None] | None = None,
) -> dict:
    """What `generate --json` prints and eval/RUN/samples.json holds: the prompt as read (its
    tokens, `<unk>` included, and the words read as `<unk>`), the settings, and per sample its
    text and the model's log-probability of it; with `timing`, the time to the first token and
    the tokens per second (left out of eval/, whose files depend on the params only). `check`
    goes to `generate`."""
    ids, unknown = tokenize(prompt, vocab)
    found = generate(
        family,
        model,
        ids,
        tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        samples=samples,
        check=check,
    )
    record = {
        "prompt": prompt,
        "prompt_tokens": [vocab.words[i] for i in ids],
        "unknown": unknown,
        "tokens": tokens,
        "temperature": temperature,
        "top_k": top_k,
        "seed": seed,
        "samples": [
            {"text": " ".join(vocab.words[i] for i in s.ids), "log_prob": round(s.log_prob, 4)}
            for s in found
        ],
    }
    if timing and found:
        record["first_token_seconds"] = round(found[0].first_token_seconds, 4)
        record["tokens_per_second"] = round(
            tokens * len(found) / max(sum(s.seconds for s in found), 1e-9), 1
        )
    return record
