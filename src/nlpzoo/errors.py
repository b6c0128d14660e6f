"""Errors that carry a message meant for the user; stages print them and exit non-zero.

`error_line` is the one mapping from an error to the line `error: ...` that the stages
(`nlpzoo.cli.run_stage`), `python -m nlpzoo repro` and the commands print."""

from __future__ import annotations

from pathlib import Path


class NlpzooError(Exception):
    """Base class: the message says what is wrong and, where possible, how to fix it."""


class ConfigError(NlpzooError):
    """A params.yaml section is invalid (unknown key, wrong type, impossible value)."""


class DataError(NlpzooError):
    """An input file is missing, corrupt or unusable (checksum, encoding, alignment, size)."""


class ChecksumError(DataError):
    """A downloaded or mirrored file does not match its registered SHA-256."""


class TrainingError(NlpzooError):
    """Training cannot go on (for example a non-finite loss)."""


def error_line(
    e: BaseException,
    root: Path | None = None,
    params: Path | None = None,
    whose: str = "the project",
) -> str:
    """One line for an error of PROJECT_ERRORS: a user error's message (YAML's spans three
    lines), the code file that does not parse, the file that is not UTF-8 text (searched among
    the params file `params`, default root/params.yaml, dvc.yaml and the code of the project at
    `root`, when given; else "a file of WHOSE"), or the file that cannot be read or written."""
    if isinstance(e, SyntaxError):
        return (
            f"{e.filename}:{e.lineno}: {e.msg} (dvc.yaml is made from the code, which must parse)"
        )
    if isinstance(e, UnicodeDecodeError):
        if root is not None:
            files = [params or root / "params.yaml", root / "dvc.yaml"]
            files += sorted(root.glob("stages/*.py"))
            files += sorted((root / "src").rglob("*.py"))  # the package: src/nlpzoo
            for path in files:
                try:
                    path.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    return f"{path} is not UTF-8 text ({e.reason})"
                except OSError:
                    continue
        return f"a file of {whose} is not UTF-8 text ({e.reason})"
    if isinstance(e, OSError):
        return f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}"
    return " ".join(str(e).split())


# what a command or stage reports in one line (error_line) instead of a traceback
PROJECT_ERRORS = (NlpzooError, SyntaxError, UnicodeDecodeError, OSError)
