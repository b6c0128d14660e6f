"""Text in and out of the commands: the user's input read as UTF-8 lines, notes on stderr, JSON
on stdout, and `UseError`, the one-line error a command reports."""

from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any

from nlpzoo.errors import NlpzooError


class UseError(NlpzooError):
    """What the user asked cannot be done: the message says why and what to run instead."""


def decode(data: bytes, where: str) -> str:
    """`data` as text, a UTF-8 byte-order mark (Windows editors write one) dropped; a clear error
    naming `where` and the first byte that is not UTF-8 (a file of another tool)."""
    body = data.removeprefix(codecs.BOM_UTF8)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        offset = e.start + len(data) - len(body)
        raise UseError(f"{where} is not UTF-8 text (byte {offset}: {data[offset]:#04x})") from None


def read_input(path: Path | None) -> str:
    """The text of `path`, or of standard input without one; a clear error when it cannot be read
    or is not UTF-8. A UTF-8 byte-order mark (Windows editors write one) is dropped."""
    where = str(path) if path is not None else "standard input"
    if path is None and sys.stdin is None:
        raise UseError("standard input is closed: name a file to read")
    if path is None and sys.stdin.isatty():
        note("reading lines from the terminal; end with Ctrl-D (or name a file)")
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


def note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))
