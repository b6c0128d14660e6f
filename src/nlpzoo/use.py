"""Use a trained run from the command line: `generate` and `score` (language models), `neighbours`
and `analogy` (any run with word vectors, the language models' embeddings included), `translate`
(translation runs).

    python -m nlpzoo generate --run lstm_lm --prompt "the jury said" --tokens 20 --seed 1
    python -m nlpzoo score --run ngram sentences.txt
    python -m nlpzoo neighbours --run svd city king -k 5
    python -m nlpzoo analogy --run svd man king woman --method 3cosmul
    echo "ein hund läuft" | python -m nlpzoo translate --run transformer

A run is named by `--run RUN`, its folder models/RUN/ in the project (`--root`, default the
working directory), or by `--mlflow-run ID`, the files that run logged to MLflow
(`nlpzoo.tracking.fetch_run_dir`). Text is read as the run's corpus was prepared
(`nlpzoo.generation.tokenize`: whitespace tokens, lowercased when the run's vocabulary is, `<unk>`
for a word outside it). Output: one result per line, tab-separated fields; `--json` prints one
JSON document instead. A problem (unknown run, run not trained or its files damaged, run of the
wrong task, word not in the vocabulary, input that is not UTF-8 text, a sentence longer than the
model takes) prints one line `error: ...` on stderr and exits with status 1.

Which family does what comes from its registry record (`nlpzoo.families.Family`: `task`,
`vectors`); the scores are those of the evaluation protocol (`nlpzoo.tasks.lm`), the answers those
of `nlpzoo.evaluation.analogy` and `nlpzoo.evaluation.vectors`.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import json
import math
import os
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlpzoo.errors import PROJECT_ERRORS, NlpzooError, error_line

TASK_NAMES = {"lm": "language-model", "vectors": "word-vector", "mt": "translation"}


class UseError(NlpzooError):
    """What the user asked cannot be done: the message says why and what to run instead."""


# --------------------------------------------------------------------------- the parsers


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


MAX_TOKENS = 100_000  # new tokens per sample
MAX_SAMPLES = 10_000
MAX_BEAM = 100  # wider beams cost memory in proportion and do not translate better


def _natural(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


MIN_TEMPERATURE = 1e-6  # below it the scaled log-probabilities leave float range: use 0


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
    """Add `generate`, `score`, `neighbours` and `analogy` to `python -m nlpzoo`'s subparsers;
    each parser's `handler` runs its command."""
    common = argparse.ArgumentParser(add_help=False)
    which = common.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a run of params.yaml's `models:`, trained into models/RUN/")
    which.add_argument(
        "--mlflow-run",
        metavar="ID",
        help="instead of --run: the MLflow run ID (the files its training logged; tracking URI "
        "as for the pipeline, or MLFLOW_TRACKING_URI)",
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
        default=30,
        metavar="N",
        help=f"new tokens per sample, up to {MAX_TOKENS:,} (30)",
    )
    g.add_argument(
        "--temperature",
        type=_temperature,
        default=1.0,
        metavar="T",
        help="divides the log-probabilities (1: the model's own; 0: always the most probable)",
    )
    g.add_argument(
        "--top-k",
        type=_natural,
        default=0,
        metavar="K",
        help="sample among the K most probable (0: all)",
    )
    g.add_argument(
        "--seed",
        type=_natural,
        default=0,
        metavar="S",
        help="the same seed gives the same text (0)",
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
    g.set_defaults(handler=generate)

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
    s.set_defaults(handler=score)

    n = parser(
        "neighbours",
        "nearest neighbours of words in a run's word vectors",
        "The K words of highest cosine to each WORD (every word of the vocabulary but the "
        "specials searched, ties to the more frequent word, as the evaluation's probe words). "
        "One line per neighbour: the word, the neighbour, the cosine.",
        "python -m nlpzoo neighbours --run svd city king -k 5",
    )
    n.add_argument("words", nargs="+", metavar="WORD")
    n.add_argument("-k", type=_count, default=10, metavar="K", help="neighbours per word (10)")
    n.set_defaults(handler=neighbours)

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
    a.set_defaults(handler=analogy)

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
    tr.set_defaults(handler=translate)


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


def decode(data: bytes, where: str) -> str:
    """`data` as text, a UTF-8 byte-order mark (Windows editors write one) dropped; a clear error
    naming `where` and the first byte that is not UTF-8 (a file of another tool)."""
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        offset = e.start + len(data) - len(body)
        raise UseError(f"{where} is not UTF-8 text (byte {offset}: {data[offset]:#04x})") from None


# --------------------------------------------------------------------------- the run


@dataclass
class Trained:
    """A trained run: its name, folder and config.json, and the project it belongs to."""

    name: str
    folder: Path
    config: dict
    root: Path
    mlflow: bool = False  # fetched from MLflow (folder: the local copy of its files)

    @property
    def family(self) -> Any:
        from nlpzoo.families import FAMILIES

        return FAMILIES[self.config["family"]]


def _models(root: Path) -> dict[str, dict]:
    """The runs of the project's params.yaml `models:` (name -> entry), read without validating
    the rest of the file (a trained run stays usable while params are being edited)."""
    from nlpzoo.params import read_params

    try:
        params = read_params(root / "params.yaml")
    except (NlpzooError, OSError):
        return {}
    models = params.get("models") if isinstance(params, dict) else None
    if not isinstance(models, dict):  # not a mapping: no run named there (validate says why)
        return {}
    return {str(k): v for k, v in models.items() if isinstance(v, dict)}


def _load_config(folder: Path, what: str) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:  # ValueError: not JSON, or not UTF-8
        raise UseError(f"{what}: {folder / 'config.json'} unreadable ({e})") from None
    from nlpzoo.families import FAMILIES

    if not isinstance(config, dict):
        raise UseError(f"{what}: {folder / 'config.json'} is not a run's config (a JSON object)")
    if config.get("family") not in FAMILIES:
        raise UseError(f"{what}: unknown family '{config.get('family')}' in {folder}/config.json")
    return config


def resolve(args: argparse.Namespace) -> Trained:
    """The run `--run` or `--mlflow-run` names, trained (clear errors otherwise)."""
    root = args.root
    if args.mlflow_run is not None:  # "" too (an unset shell variable): refused by name
        from nlpzoo.tracking import fetch_run_dir

        folder = fetch_run_dir(args.mlflow_run)
        config = _load_config(folder, f"MLflow run {args.mlflow_run}")
        return Trained(str(config.get("run", args.mlflow_run)), folder, config, root, True)
    name = args.run
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise UseError(f"--run takes a run's name (models/RUN/), not a path: got {name!r}")
    models = _models(root)
    trained_runs = getattr(args, "models", None) or root / "models"
    folder = trained_runs / name
    trained = (folder / "config.json").is_file()
    if name not in models and not trained:
        from nlpzoo.config import closest

        known = sorted(models) or sorted(
            p.name for p in trained_runs.glob("*") if (p / "config.json").is_file()
        )
        hint = closest(name, known)
        raise UseError(
            f"unknown run '{name}'"
            + (f"; did you mean '{hint}'?" if hint else "")
            + (f" (runs: {', '.join(known)})" if known else f" (no {root / 'params.yaml'})")
        )
    if not trained or not any((folder / f).is_file() for f in ("model.pt", "model.npz")):
        if getattr(args, "models", None) is not None:  # a folder of the user's: say which
            raise UseError(f"no trained run '{name}' in {trained_runs} (no model in {folder})")
        if models.get(name, {}).get("enabled", True) is False:
            raise UseError(
                f"run '{name}' is not trained yet, and disabled in params.yaml (`enabled: "
                f"false`): enable it, then `python -m nlpzoo pipeline && dvc repro train-{name}`"
            )
        raise UseError(f"run '{name}' is not trained yet: run `dvc repro train-{name}`")
    what = f"run '{name}' (`dvc repro train-{name}` remakes it)"
    return Trained(name, folder, _load_config(folder, what), root)


def _runs_for(t: Trained, wanted: Any) -> str:
    """The project's runs whose family passes `wanted`, for an error message."""
    from nlpzoo.families import FAMILIES

    names = [
        n for n, e in _models(t.root).items() if e.get("family") in FAMILIES and wanted(e["family"])
    ]
    return ", ".join(names) if names else "none in params.yaml"


def need_lm(t: Trained, command: str) -> None:
    family = t.family
    if family.task == "lm":
        return
    from nlpzoo.families import FAMILIES

    what = TASK_NAMES.get(family.task, family.task)
    extra = f"; translate with `python -m nlpzoo translate --run {t.name}`"
    raise UseError(
        f"run '{t.name}' is a {what} run (family {family.name}); `{command}` takes a "
        f"language-model run: {_runs_for(t, lambda f: FAMILIES[f].task == 'lm')}"
        + (extra if family.task == "mt" else "")
    )


def _has_vectors(family: Any) -> bool:
    return family.task == "vectors" or family.vectors


def need_vectors(t: Trained, command: str) -> None:
    if _has_vectors(t.family):
        return
    from nlpzoo.families import FAMILIES

    what = TASK_NAMES.get(t.family.task, t.family.task)
    raise UseError(
        f"run '{t.name}' ({what} run, family {t.family.name}) has no word vectors; `{command}` "
        f"takes a run with vectors: {_runs_for(t, lambda f: _has_vectors(FAMILIES[f]))}"
    )


def load_vocab(t: Trained) -> Any:
    """The run's vocabulary: in its folder (a run fetched from MLflow), else its data folder;
    it must have the size the run was trained with."""
    from nlpzoo.data.vocab import Vocab

    places = [t.folder / "vocab.txt"]
    if t.config.get("data"):
        places.append(t.root / "data" / str(t.config["data"]) / "vocab.txt")
    path = next((p for p in places if p.is_file()), None)
    if path is None:
        raise UseError(
            f"run '{t.name}': its vocabulary is not found ({' or '.join(map(str, places))}); "
            f"run `dvc repro train-{t.name}`"
        )
    decode(path.read_bytes(), f"run '{t.name}': {path}")  # a clear error for another tool's
    vocab = Vocab.load(path)
    trained_on = t.config.get("vocab_size")
    if trained_on is not None and not isinstance(trained_on, int):
        raise UseError(
            f"run '{t.name}': {t.folder / 'config.json'} has vocab_size {trained_on!r}, not a "
            f"number of words; {_remake(t)}"
        )
    if trained_on is not None and len(vocab) != trained_on:
        raise UseError(
            f"run '{t.name}': {path} has {len(vocab):,} words but the run was trained on "
            f"{trained_on:,}: the data changed since; run `dvc repro train-{t.name}`"
        )
    return vocab


def _first_line(e: BaseException) -> str:
    """An exception as `Type: its first line`, for a one-line error."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else 'no detail'}"


def _remake(t: Trained) -> str:
    """How to get a run's files anew."""
    if t.mlflow:
        return f"delete {t.folder} (the local copy of the MLflow run's files) and try again"
    return f"run `dvc repro train-{t.name}`"


def load_model(t: Trained) -> Any:
    """The run's model; a clear error when its file cannot be read or does not fit the code
    (damaged, cut short, or written by another version: retraining remakes it)."""
    import pickle
    import zipfile

    from nlpzoo.tasks import load_model as load

    try:
        model = load(t.folder)
    except NlpzooError:
        raise
    except OSError as e:
        if e.errno is not None and e.filename:  # permissions, a folder: not the file's content
            raise UseError(f"run '{t.name}': cannot read {e.filename}: {e.strerror}") from e
        raise UseError(
            f"run '{t.name}': its model in {t.folder} cannot be loaded ({_first_line(e)}): the "
            f"file is damaged, cut short or written by other code; {_remake(t)}"
        ) from e
    except (EOFError, RuntimeError, ValueError, KeyError, TypeError, pickle.PickleError,
            zipfile.BadZipFile) as e:  # fmt: skip
        why = _first_line(e)
        if "Weights only load failed" in why:  # torch's advice to unpickle it is not for us
            why = "not a checkpoint of this project: torch's safe loader refuses it"
        raise UseError(
            f"run '{t.name}': its model in {t.folder} cannot be loaded ({why}): the "
            f"file is damaged, cut short or written by other code; {_remake(t)}"
        ) from e
    import torch

    if isinstance(model, torch.nn.Module):
        _check_finite(t, "weights", all(bool(p.isfinite().all()) for p in model.parameters()))
    return model


def _check_finite(t: Trained, what: str, finite: bool) -> None:
    """A run whose numbers are NaN or infinite answers nothing meaningful: one clear error."""
    if not finite:
        raise UseError(
            f"run '{t.name}': its {what} hold NaN or infinite values (training diverged, or the "
            f"files were changed); {_remake(t)}"
        )


def load_codec(t: Trained) -> Any:
    """A translation run's SentencePiece model (models/RUN/spm.model)."""
    from nlpzoo.data.mt import Codec

    path = t.folder / "spm.model"
    if not path.is_file():
        raise UseError(f"run '{t.name}': {path} is missing; {_remake(t)}")
    try:
        return Codec(path)
    except NlpzooError as e:  # a SentencePiece model of another vocabulary
        raise UseError(f"run '{t.name}': {e}; {_remake(t)}") from e
    except (OSError, RuntimeError, ValueError, IndexError) as e:  # SentencePiece's errors
        raise UseError(
            f"run '{t.name}': {path} cannot be loaded ({_first_line(e)}); {_remake(t)}"
        ) from e


def read_input(path: Path | None) -> str:
    """The text of `path`, or of standard input without one; a clear error when it cannot be read
    or is not UTF-8. A UTF-8 byte-order mark (Windows editors write one) is dropped."""
    where = str(path) if path is not None else "standard input"
    if path is None and sys.stdin is None:
        raise UseError("standard input is closed: name a file to read")
    if path is None and sys.stdin.isatty():
        _note("reading lines from the terminal; end with Ctrl-D (or name a file)")
    try:
        if path is not None:
            data = path.read_bytes()
        elif hasattr(sys.stdin, "buffer"):
            data = sys.stdin.buffer.read()
        else:  # a stream that is text already (an embedding program's)
            return sys.stdin.read().removeprefix("\ufeff")
    except OSError as e:
        raise UseError(f"cannot read {where}: {e.strerror or e}") from None
    return decode(data, where)


def input_lines(text: str) -> list[str]:
    """The lines of `text` as a file has them: cut at "\\n" only (str.splitlines also cuts at
    form feeds and Unicode line separators, and the line numbers would not be the file's), a
    "\\r" before it dropped, no empty line after a final newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))


# --------------------------------------------------------------------------- generate


def generate(args: argparse.Namespace) -> None:
    t = resolve(args)
    need_lm(t, "generate")
    vocab = load_vocab(t)
    t0 = time.perf_counter()
    model = load_model(t)
    load_seconds = time.perf_counter() - t0
    from nlpzoo.generation import samples_record

    record = samples_record(
        t.family,
        model,
        vocab,
        args.prompt,
        args.tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
        samples=args.samples,
        timing=True,
    )
    if record["unknown"]:
        _note(
            f"not in the vocabulary of run '{t.name}', read as <unk>: "
            + " ".join(record["unknown"])
        )
    if args.timing:
        print(
            f"model loaded in {load_seconds:.2f} s; time to first token "
            f"{record['first_token_seconds'] * 1000:.1f} ms; "
            f"{record['tokens_per_second']:,.1f} tokens/s",
            file=sys.stderr,
        )
    if args.json:
        _print_json({"run": t.name, "family": t.family.name, **record})
        return
    prompt = " ".join(record["prompt_tokens"])
    for sample in record["samples"]:
        print(f"{prompt}\t{sample['text']}")


# --------------------------------------------------------------------------- score


def score(args: argparse.Namespace) -> None:
    import numpy as np

    from nlpzoo.data.vocab import EOS
    from nlpzoo.generation import tokenize
    from nlpzoo.tasks import task_of

    t = resolve(args)
    need_lm(t, "score")
    vocab = load_vocab(t)
    text = read_input(args.input)
    # as the corpus is prepared: a line without a token is no sentence
    lines = []
    for number, line in enumerate(input_lines(text), start=1):
        if line.split():
            ids, unknown = tokenize(line, vocab)
            lines.append((number, [*ids, EOS], unknown))
    if not lines:
        raise UseError("no sentences to score (the input has no non-empty line)")
    model = load_model(t)
    task = task_of(t.family)
    if args.separate:
        scored = [task.log_probs(model, np.asarray(ids), model.config) for _, ids, _ in lines]
    else:
        stream = np.concatenate([np.asarray(ids, dtype=np.int64) for _, ids, _ in lines])
        every = task.log_probs(model, stream, model.config)  # (tokens,)
        ends = np.cumsum([len(ids) for _, ids, _ in lines])
        scored = np.split(every, ends[:-1])
    rows = []
    for (number, ids, unknown), lp in zip(lines, scored, strict=True):
        total = float(np.sum(lp, dtype=np.float64))
        rows.append(
            {
                "line": number,
                "text": " ".join(vocab.words[i] for i in ids[:-1]),
                "tokens": len(ids),
                "log_prob": total,
                "ppl": math.exp(-total / len(ids)),
                "unknown": unknown,
            }
        )
    log_prob = float(sum(np.sum(lp, dtype=np.float64) for lp in scored))
    tokens = sum(r["tokens"] for r in rows)
    total = {"lines": len(rows), "tokens": tokens, "log_prob": log_prob}
    total["ppl"] = math.exp(-log_prob / tokens)
    unknown = sum(len(r["unknown"]) for r in rows)
    if unknown:
        _note(f"{unknown} word(s) not in the vocabulary of run '{t.name}', scored as <unk>")
    if args.json:
        mode = "separate" if args.separate else "in order"
        _print_json(
            {"run": t.name, "family": t.family.name, "mode": mode, "lines": rows, "total": total}
        )
        return
    for r in rows:
        print(f"{r['line']}\t{r['log_prob']:.4f}\t{r['tokens']}\t{r['ppl']:.3f}\t{r['text']}")
    print(f"total\t{log_prob:.4f}\t{tokens}\t{total['ppl']:.4f}\t{len(rows)} lines")


# --------------------------------------------------------------------------- word vectors


def load_vectors(t: Trained) -> tuple[list[str], Any]:
    """(words, (V, d) vectors): models/RUN/vectors.txt, or the model's own embeddings (a run
    fetched from MLflow holds no vectors.txt)."""
    import numpy as np

    from nlpzoo.evaluation.vectors import read_word2vec_text

    path = t.folder / "vectors.txt"
    if path.is_file():
        decode(path.read_bytes(), f"run '{t.name}': {path}")
        words, vectors = read_word2vec_text(path)
        _check_finite(t, "vectors", bool(np.isfinite(vectors).all()))
        return words, vectors
    from nlpzoo.tasks.words import as_array

    vocab = load_vocab(t)
    return vocab.words, as_array(load_model(t).embeddings())


def _lookup(t: Trained, words: list[str], word: str) -> str:
    """`word` as the run's vocabulary spells it (lowercased if the vocabulary is); a clear error
    if it is not there."""
    from nlpzoo.data.vocab import SPECIALS
    from nlpzoo.generation import lowercases

    w = word.lower() if lowercases(words) else word
    if w in SPECIALS:
        raise UseError(f"'{word}' is a special token, not a word")
    if w not in set(words):
        import difflib

        close = difflib.get_close_matches(w, words, n=3, cutoff=0.75)
        hint = f"; close: {', '.join(close)}" if close else ""
        size = sum(v not in SPECIALS for v in words)
        raise UseError(
            f"word '{word}' is not in the vocabulary of run '{t.name}' ({size:,} words){hint}"
        )
    return w


def neighbours(args: argparse.Namespace) -> None:
    from nlpzoo.evaluation.vectors import nearest_neighbours

    t = resolve(args)
    need_vectors(t, "neighbours")
    words, vectors = load_vectors(t)
    probes = [_lookup(t, words, w) for w in args.words]
    found = nearest_neighbours(words, vectors, probes, k=args.k)
    if args.json:
        table = {w: [[n, round(c, 6)] for n, c in found[w]] for w in probes}
        _print_json({"run": t.name, "k": args.k, "neighbours": table})
        return
    for w in probes:
        for n, c in found[w]:
            print(f"{w}\t{n}\t{c:.4f}")


def analogy(args: argparse.Namespace) -> None:
    from nlpzoo.config import build
    from nlpzoo.evaluation.analogy import Analogies
    from nlpzoo.params import EvaluationConfig

    t = resolve(args)
    need_vectors(t, "analogy")
    words, vectors = load_vectors(t)
    question = [_lookup(t, words, w) for w in (args.a, args.b, args.c)]
    restrict = args.restrict_vocab
    if restrict is None:
        from nlpzoo.params import read_params

        try:
            params = read_params(t.root / "params.yaml")
        except (NlpzooError, OSError):
            params = {}
        section = params.get("evaluation") if isinstance(params, dict) else None
        restrict = build(EvaluationConfig, section, "evaluation").restrict_vocab
    solver = Analogies(words, vectors, restrict_vocab=restrict)
    for w in question:
        if solver.position(w) is None:
            raise UseError(
                f"word '{w}' is not among the {restrict:,} most frequent words the analogies "
                "search (params evaluation.restrict_vocab; --restrict-vocab N)"
            )
    answers = solver.answers(*question, k=args.k, method=args.method)
    if args.json:
        found = [[w, round(s, 6)] for w, s in answers]
        _print_json({"run": t.name, "question": question, "method": args.method, "answers": found})
        return
    for w, s in answers:
        print(f"{w}\t{s:.4f}")


# --------------------------------------------------------------------------- translate


def need_mt(t: Trained, command: str) -> None:
    if t.family.task == "mt":
        return
    from nlpzoo.families import FAMILIES

    what = TASK_NAMES.get(t.family.task, t.family.task)
    raise UseError(
        f"run '{t.name}' is a {what} run (family {t.family.name}); `{command}` takes a "
        f"translation run: {_runs_for(t, lambda f: FAMILIES[f].task == 'mt')}"
    )


def translate(args: argparse.Namespace) -> None:
    """As `nlpzoo.tasks.mt.translate`, with the model and its SentencePiece model loaded here so
    that a damaged file is one clear error."""
    from nlpzoo.evaluation.decoding import translate_batches

    t = resolve(args)
    need_mt(t, "translate")
    lines = input_lines(read_input(args.input))
    model = load_model(t)
    codec = load_codec(t)
    if not lines:  # an empty file translates to an empty output
        return
    cfg = model.config
    beam = args.beam or cfg.beam_size
    try:
        ids = translate_batches(  # 32 sentences a batch, as tasks.mt.translate
            model, codec.encode(lines), 32, beam, cfg.length_penalty, cfg.max_len_ratio
        )
    except ValueError as e:
        if "max_positions" not in str(e):
            raise
        longest = max(range(len(lines)), key=lambda i: len(lines[i].split()))
        raise UseError(
            f"run '{t.name}' cannot translate this input: {e}. Its longest line is line "
            f"{longest + 1} ({len(lines[longest].split())} words): split long lines"
        ) from None
    out = codec.decode(ids)
    if args.json:
        _print_json({"run": t.name, "beam": beam, "translations": out})
        return
    for line in out:
        print(line)
