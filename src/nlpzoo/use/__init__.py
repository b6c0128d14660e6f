"""Use a trained run from the command line: `generate` and `score` (language models), `neighbours`
and `analogy` (any run with word vectors, the language models' embeddings included), `translate`
(translation runs).

    python -m nlpzoo generate --run lstm_lm --prompt "the jury said" --tokens 20 --seed 1
    python -m nlpzoo score --run ngram sentences.txt
    python -m nlpzoo neighbours --run svd city king -k 5
    python -m nlpzoo analogy --run svd man king woman --method 3cosmul
    echo "ein hund läuft" | python -m nlpzoo translate --run transformer

A run is named by `--run RUN`, its folder models/RUN/ in the project (`--root`, default the working
directory), or by `--mlflow-run ID`, the files of that MLflow run's model (logged by the register
stage), or of a registered version (`models:/nlpzoo-RUN@champion`, `models:/nlpzoo-RUN/VERSION`;
`nlpzoo.tracking.fetch_run_dir`). Text is read as the run's corpus was prepared
(`nlpzoo.generation.tokenize`: whitespace tokens, lowercased when the run's vocabulary is, `<unk>`
for a word outside it). Output: one result per line, tab-separated fields; `--json` prints one JSON
document instead. A problem (unknown run, run not trained or its files damaged, run of the wrong
task, word not in the vocabulary, input that is not UTF-8 text, a sentence longer than the model
takes, a request over one of `nlpzoo.use.limits.COMMAND_LINE`) prints one line `error: ...` on
stderr and exits with status 1.

Which family does what comes from its registry record (`nlpzoo.families.Family`: `task`,
`vectors`); the scores are those of the evaluation protocol (`nlpzoo.tasks.lm`), the answers those
of `nlpzoo.evaluation.analogy` and `nlpzoo.evaluation.vectors`.

The package: `arguments` (the parsers), `run` (resolving a run, loading its files), `text` (input
and output), `answers` (what a run answers, for the commands and the MLflow model), `limits` (the
budgets of a request: the commands' are larger than a server's), `commands` (the five
commands); `run_command` runs one with one-line errors.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys

from nlpzoo.errors import PROJECT_ERRORS, error_line
from nlpzoo.use import commands
from nlpzoo.use.arguments import add_commands
from nlpzoo.use.run import (
    TrainedRun,
    load_codec,
    load_model,
    load_vectors,
    load_vocab,
    need_lm,
    need_mt,
    need_vectors,
    project_params,
    resolve,
)
from nlpzoo.use.text import UseError, decode, input_lines, read_input

__all__ = [
    "TrainedRun",
    "UseError",
    "add_commands",
    "commands",
    "decode",
    "input_lines",
    "load_codec",
    "load_model",
    "load_vectors",
    "load_vocab",
    "need_lm",
    "need_mt",
    "need_vectors",
    "project_params",
    "read_input",
    "resolve",
    "run_command",
]


def run_command(args: argparse.Namespace) -> int:
    """Run the command `args` were parsed for; one line `error: ...` and status 1 on a problem."""
    if sys.stdout is None:
        print("error: standard output is closed: nowhere to write the result", file=sys.stderr)
        return 1
    try:
        args.handler(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not after the exit
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, with the shell's status for it
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        _drop_output()  # no second error when Python flushes stdout
    except PROJECT_ERRORS as e:  # a user error, a file of the run unreadable, a full disk
        print(f"error: {error_line(e, whose='the run')}", file=sys.stderr)
        if isinstance(e, OSError) and e.errno in (
            errno.ENOSPC,
            errno.EIO,
            errno.EFBIG,
            errno.EDQUOT,
        ):
            _drop_output()  # writing stdout failed
        return 1
    return 0


def _drop_output() -> None:
    """Point stdout at /dev/null, so that what could not be written is not tried again (with a
    second error) when Python flushes stdout at the exit."""
    with contextlib.suppress(OSError, ValueError):  # stdout is no file: a test's buffer
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
