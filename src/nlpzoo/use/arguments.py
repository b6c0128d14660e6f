"""The commands' command line: the argument types that refuse out-of-range values with one line,
and `add_commands`, the parsers of `generate`, `score`, `neighbours`, `analogy`, `translate`."""

from __future__ import annotations

import argparse
import math
import textwrap
from pathlib import Path
from typing import Any

from nlpzoo.taskinfo import TASK_INFO
from nlpzoo.use import commands
from nlpzoo.use.answers import MIN_TEMPERATURE
from nlpzoo.use.limits import COMMAND_LINE


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None


def _count(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _at_most(limit: int):
    """A count (>= 1) of at most `limit`: the larger ones would run for hours or fill memory."""

    def count(text: str) -> int:
        value = _count(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be <= {limit:,}, got {value:,}")
        return value

    return count


# the commands' limits (`nlpzoo.use.limits.COMMAND_LINE`), refused by the parser before any load
MAX_TOKENS = COMMAND_LINE.tokens  # new tokens per sample
MAX_SAMPLES = COMMAND_LINE.samples
MAX_BEAM = COMMAND_LINE.beam
LM = TASK_INFO["lm"].defaults  # the served model's defaults too (nlpzoo.serving)


def _natural(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    if 0 < value < MIN_TEMPERATURE:
        raise argparse.ArgumentTypeError(
            f"must be 0 (always the most probable) or at least {MIN_TEMPERATURE:g}, got {text}"
        )
    return value


def add_commands(sub: Any) -> None:
    """Add `generate`, `score`, `neighbours`, `analogy` and `translate` to `python -m nlpzoo`'s
    subparsers; each parser's `handler` runs its command."""
    common = argparse.ArgumentParser(add_help=False)
    which = common.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a run of params.yaml's `models:`, trained into models/RUN/")
    which.add_argument(
        "--mlflow-run",
        metavar="ID",
        help="instead of --run: the MLflow run ID, or a registered version "
        "models:/nlpzoo-RUN@champion or models:/nlpzoo-RUN/VERSION (the files the register stage "
        "logged; tracking URI as for the pipeline, or MLFLOW_TRACKING_URI)",
    )
    common.add_argument("--root", type=Path, default=Path("."), help="the project (default: .)")
    common.add_argument("--json", action="store_true", help="print one JSON document")

    def parser(name: str, summary: str, description: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            parents=[common],
            help=summary,
            description=textwrap.fill(description, 80),
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    g = parser(
        "generate",
        "sample text from a language-model run",
        "Continue a prompt with a language-model run (any family, the n-gram included). One "
        "sample per line: the prompt as the model read it (<unk> for words outside its "
        "vocabulary), a tab, the new tokens (</s> ends a sentence).",
        'python -m nlpzoo generate --run transformer_lm --prompt "the city" --tokens 20 '
        "--seed 1 --samples 3",
    )
    g.add_argument("--prompt", default="", help="text to continue (default: none, a new text)")
    g.add_argument(
        "--tokens",
        type=_at_most(MAX_TOKENS),
        default=LM["tokens"],
        metavar="N",
        help=f"new tokens per sample, up to {MAX_TOKENS:,} ({LM['tokens']})",
    )
    g.add_argument(
        "--temperature",
        type=_temperature,
        default=LM["temperature"],
        metavar="T",
        help="divides the log-probabilities (1: the model's own; 0: always the most probable)",
    )
    g.add_argument(
        "--top-k",
        type=_natural,
        default=LM["top_k"],
        metavar="K",
        help="sample among the K most probable (0: all)",
    )
    g.add_argument(
        "--seed",
        type=_natural,
        default=LM["seed"],
        metavar="S",
        help=f"the same seed gives the same text ({LM['seed']})",
    )
    g.add_argument(
        "--samples",
        type=_at_most(MAX_SAMPLES),
        default=1,
        metavar="M",
        help=f"samples to draw, up to {MAX_SAMPLES:,} (1)",
    )
    g.add_argument(
        "--timing",
        action="store_true",
        help="also print to stderr the time to the first token and tokens per second",
    )
    g.set_defaults(handler=commands.generate)

    s = parser(
        "score",
        "log-probability and perplexity of sentences under a language-model run",
        "Score sentences, one per line, exactly as the evaluation scores a split: each line's "
        "words and its </s>, <unk> for words outside the vocabulary, the lines read in order as "
        "one text (so the test split's file gives the run's test_ppl). One line per sentence: "
        "its line number, log-probability (natural log), tokens (</s> included), perplexity "
        "and the text as read; then a `total` line over every sentence.",
        "python -m nlpzoo score --run lstm_lm data/prepared/lm/test.txt | tail -1",
    )
    s.add_argument("input", nargs="?", type=Path, help="sentences, one per line (default: stdin)")
    s.add_argument(
        "--separate",
        action="store_true",
        help="score each line on its own, from a sentence start (default: in order, each line "
        "in the context of the lines before it, as the evaluation reads a split)",
    )
    s.set_defaults(handler=commands.score)

    n = parser(
        "neighbours",
        "nearest neighbours of words in a run's word vectors",
        "The K words of highest cosine to each WORD (every word of the vocabulary but the "
        "specials searched, ties to the more frequent word, as the evaluation's probe words). "
        "One line per neighbour: the word, the neighbour, the cosine.",
        "python -m nlpzoo neighbours --run svd city king -k 5",
    )
    n.add_argument("words", nargs="+", metavar="WORD")
    k = TASK_INFO["vectors"].defaults["k"]
    n.add_argument("-k", type=_count, default=k, metavar="K", help=f"neighbours per word ({k})")
    n.set_defaults(handler=commands.neighbours)

    a = parser(
        "analogy",
        "A is to B as C is to ? with a run's word vectors",
        "Answer the analogy A : B :: C : ? by 3CosAdd (the evaluation's: argmax cos(x, "
        "B - A + C) over unit vectors, the three words excluded) or 3CosMul (Levy & Goldberg "
        "2014: cos'(x, B) cos'(x, C) / (cos'(x, A) + 0.001), cos' = (cos + 1) / 2), among the "
        "most frequent words the evaluation searches. One line per answer, best first: the word "
        "and its score.",
        "python -m nlpzoo analogy --run svd man king woman -k 3",
    )
    for name, what in (("A", "is to"), ("B", "as"), ("C", "is to ?")):
        a.add_argument(name.lower(), metavar=name, help=f"{name} {what}")
    a.add_argument("--method", choices=("3cosadd", "3cosmul"), default="3cosadd", help="(3cosadd)")
    a.add_argument("-k", type=_count, default=1, metavar="K", help="answers, best first (1)")
    a.add_argument(
        "--restrict-vocab",
        type=_count,
        default=None,
        metavar="N",
        help="search the N most frequent words (default: params evaluation.restrict_vocab)",
    )
    a.set_defaults(handler=commands.analogy)

    tr = parser(
        "translate",
        "translate source lines with a translation run",
        "Translate source sentences, one per line (German for the default runs), with a trained "
        "translation run: the run's own SentencePiece model splits them, beam search decodes as "
        "the evaluation does (the run's beam size, length penalty and length limit). One "
        "translation per line, in the order of the input.",
        "python -m nlpzoo translate --run transformer sentences.de --beam 1",
    )
    tr.add_argument("input", nargs="?", type=Path, help="source lines (default: stdin)")
    tr.add_argument(
        "--beam",
        type=_at_most(MAX_BEAM),
        default=None,
        metavar="B",
        help=f"beam size, 1 (greedy) to {MAX_BEAM} (default: the run's)",
    )
    tr.add_argument(
        "--models",
        type=Path,
        default=None,
        help="the folder of the trained runs (default: ROOT/models)",
    )
    tr.set_defaults(handler=commands.translate)
