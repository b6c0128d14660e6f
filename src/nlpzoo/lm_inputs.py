"""The language-model input kinds, one row each: what a family's `input` (with `stateful`) means
for its training data, its scoring and its generation (docs/design.md §3).

    kind      families     context field  loaders (data.lm)  scoring (evaluation.perplexity)
    counts    n-gram       order          (none: counted)    the model's own log_probs
    window    NNLM         context_size   window_loaders     window_log_probs
    stateful  RNN, LSTM    bptt           bptt_loaders       recurrent_log_probs
    stream    Transformer  block_size     block_loaders      sliding_log_probs

and the decoder of each in `nlpzoo.generation` (CountsDecoder, WindowDecoder, RecurrentDecoder,
BlockDecoder).

A stateful family's `input` is "stream" too: it reads the stream as `batch_size` parallel rows
(`rows`) cut into BPTT windows, and carries its state from one window to the next. Each row names
its routines as "module:function", imported on first use (as `Family.model`), so this module
imports nothing: the data module of the word-vector families, which imports this one, does not
pull in the scoring or the generation code. Every language-model stage imports those modules
itself (`nlpzoo.tasks.lm`), so dvc.yaml lists them (a test checks it).

Adding an input kind: its row here, its routines where their kind lives, and the name in
`nlpzoo.families.INPUTS` when it is a new `Family.input`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from nlpzoo.errors import DataError


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class LMInput:
    """One input kind: the config fields it reads and the routines that serve it."""

    kind: str
    context: str  # the config field of the tokens one example spans (its context)
    rows: str | None  # the config field of the stream's parallel rows (None: one)
    loaders: str | None  # "module:function"(train, valid, context, batch_size, rank, world,
    #                      seed, extra) -> (training loader, validation loader); None: not loaded
    log_probs_of: str | None  # "module:function"(model, stream[, context]); None: model.log_probs
    scored_with_context: bool  # whether log_probs_of takes the context
    decoder_of: str  # "module:Class"(model, cache): the next-token distribution (generation)

    def context_of(self, cfg: Any) -> tuple[int, int]:
        """(tokens one example spans, parallel rows of the stream) in the run's config."""
        rows = getattr(cfg, self.rows) if self.rows else 1
        return getattr(cfg, self.context), rows

    def dataloaders(self, cfg: Any, train, valid, rank: int, world: int, seed: int, extra):
        """Training and validation loaders over the two streams (`extra()`: loader settings)."""
        if self.loaders is None:
            raise DataError(f"input '{self.kind}' is counted, not loaded")
        context, _ = self.context_of(cfg)
        build = _resolve(self.loaders)
        return build(train, valid, context, cfg.batch_size, rank, world, seed, extra)

    def log_probs(self, model: Any, stream, cfg: Any):
        """log p of every token of `stream` (float64), as docs/design.md §4 scores it."""
        if self.log_probs_of is None:
            return model.log_probs(stream)
        score = _resolve(self.log_probs_of)
        if self.scored_with_context:
            return score(model, stream, self.context_of(cfg)[0])
        return score(model, stream)

    def decoder(self, model: Any, cache: bool = True):
        """The family's `nlpzoo.generation.Decoder` over `model` (eval mode)."""
        return _resolve(self.decoder_of)(model, cache)


LM_INPUTS = {
    row.kind: row
    for row in (
        LMInput("counts", "order", None, None, None, False, "nlpzoo.generation:CountsDecoder"),
        LMInput(
            "window",
            "context_size",
            None,
            "nlpzoo.data.lm:window_loaders",
            "nlpzoo.evaluation.perplexity:window_log_probs",
            True,
            "nlpzoo.generation:WindowDecoder",
        ),
        LMInput(
            "stateful",
            "bptt",
            "batch_size",
            "nlpzoo.data.lm:bptt_loaders",
            "nlpzoo.evaluation.perplexity:recurrent_log_probs",
            False,
            "nlpzoo.generation:RecurrentDecoder",
        ),
        LMInput(
            "stream",
            "block_size",
            None,
            "nlpzoo.data.lm:block_loaders",
            "nlpzoo.evaluation.perplexity:sliding_log_probs",
            True,
            "nlpzoo.generation:BlockDecoder",
        ),
    )
}


def lm_input(family: Any) -> LMInput:
    """The row of a language-model family (`nlpzoo.families.Family`): its `input`, or
    `stateful` when it carries its state over a stream."""
    kind = "stateful" if family.stateful and family.input == "stream" else family.input
    if family.task != "lm" or kind not in LM_INPUTS:
        raise DataError(
            f"family '{family.name}' is not a language model over one of the inputs "
            f"{', '.join(LM_INPUTS)}: no loaders, scoring or generation for input '{family.input}'"
        )
    return LM_INPUTS[kind]
