"""The names tests/tracking and tests/test_design_doc.py import from here, until they import them
from toy.py, the one module of the tests' toy corpora, params and projects (this file goes then).
"""

from __future__ import annotations

from toy import TINY_MT, WORDS, cli, inactive, make_mt_project, make_project, tiny_params, trained

__all__ = [
    "TINY_MT",
    "WORDS",
    "cli",
    "inactive",
    "make_mt_project",
    "make_project",
    "tiny_mt_params",
    "trained",
]


def tiny_mt_params(run: str) -> dict:
    """`toy.tiny_params(run)` of translation run `run`."""
    return tiny_params(run)
