"""Typed configuration from plain params dicts (docs/design.md §1, §7).

Every params section becomes a dataclass through `build(cls, section, where=...)`, which rejects,
before any work starts: unknown keys (naming the closest valid key), values of the wrong type, and
impossible values (each dataclass checks its own fields in `__post_init__` by raising
`ConfigError` or `ValueError`). Every message names the section (the run) and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Literal, TypeVar, Union

from nlpzoo.errors import ConfigError

T = TypeVar("T")


def closest(key: str, valid: typing.Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
    return matches[0] if matches else None


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        return f"list of {_type_name(inner)}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _matches(value: Any, tp: Any) -> bool:
    """Whether a YAML-loaded value fits the annotation (bool is not an int; an int is a float)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(tp))
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(_matches(v, inner) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    return isinstance(value, tp)


def _wants_float(value: Any, tp: Any) -> bool:
    """An int given where the annotation admits float but not int (e.g. `float | None`)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    if tp is float:
        return True
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = typing.get_args(tp)
        return float in args and int not in args
    return False


def build(
    cls: type[T], section: dict[str, Any] | None, where: str, ignore: tuple[str, ...] = ()
) -> T:
    """Build dataclass `cls` from `section`, validating keys, types and values.

    `where` names the section in messages (e.g. "run 'nnlm'"); keys in `ignore` are skipped
    (they belong to another dataclass built from the same section).
    """
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: expected a mapping of settings, got {type(section).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in section.items():
        if key in ignore:
            continue
        if key not in fields:
            hint = closest(key, fields | set(ignore))
            suggestion = f"; did you mean '{hint}'?" if hint else ""
            valid = ", ".join(sorted(fields))
            raise ConfigError(f"{where}: unknown key '{key}'{suggestion} (valid keys: {valid})")
        if not _matches(value, hints[key]):
            raise ConfigError(
                f"{where}: key '{key}' must be {_type_name(hints[key])}, got {value!r} "
                f"({type(value).__name__})"
            )
        kwargs[key] = float(value) if _wants_float(value, hints[key]) else value
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def require(condition: bool, key: str, message: str) -> None:
    """Raise a ConfigError naming `key` unless `condition` holds (for `__post_init__` checks)."""
    if not condition:
        raise ConfigError(f"key '{key}' {message}")
