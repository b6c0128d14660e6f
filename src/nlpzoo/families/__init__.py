"""The model families: one record per family, with the family's params section (its config).

Each family has one module here, `nlpzoo/families/NAME.py`, holding its config dataclass (the
run's own section of params.yaml, with its checks) and `FAMILY = Family(...)`: its model class,
the task it is scored on, the input its loader yields and how it is fitted. These modules import
no torch, so `nlpzoo validate` and the data stages check every section without loading a
deep-learning library; the model class is imported on first use (`Family.model_class()`).

Family modules are found by name and imported when first asked for, never all at once: a stage
imports the code of the families it runs and nothing else (what `dvc.yaml` lists as its
dependencies, docs/design.md §6). A family defined elsewhere (a test, a plug-in) is added with
`register(Family(...))`.

Adding a family: its model file under `nlpzoo/models/`, its record here, and its params section
(docs/design.md §3 walks through an example).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlpzoo.errors import ConfigError

TASKS = ("lm", "vectors", "mt")
INPUTS = ("counts", "window", "stream", "pairs", "cooccur", "parallel")
FITS = ("count", "lightning", "closed_form")
# modules of this package that are not families
_SHARED = {"common", "translation"}


@dataclass(frozen=True)
class Family:
    """What the shared lifecycle (`nlpzoo.lifecycle`) needs to know of a family.

    `model` is "module:Class", imported by `model_class()` on first use (so this registry stays
    free of torch); a class may be given directly (e.g. a family defined in a test). The flags
    say which optional parts of the model contract (`nlpzoo.models`) the model class has; the
    lifecycle calls exactly those, and never asks the model what it has.
    """

    name: str
    config: type  # dataclass built from the run's params section
    model: Any  # "module:Class" or the class itself
    task: str  # lm | vectors | mt: the data it trains on and how it is scored
    input: str  # counts | window | stream | pairs | cooccur | parallel: what its loader yields
    fit: str  # count | lightning | closed_form
    stateful: bool = False  # recurrent: the state is carried across BPTT blocks
    vectors: bool = False  # embeddings() -> (V, d) word vectors: vectors.txt and their protocol
    # manual_step(batch, progress, progress_end): its own update, in one process (the fraction
    # of the run done before and after the step)
    manual_step: bool = False
    own_optimizer: bool = False  # configure_optimizers(total_steps) instead of the config's
    attention_maps: bool = False  # cross_attention(src, tgt_in) -> (B, T, S): eval's heatmaps
    tutorial_bleu: float | None = None  # published word-level BLEU, Multi30k de→en (the report)

    def __post_init__(self) -> None:
        for key, allowed in (("task", TASKS), ("input", INPUTS), ("fit", FITS)):
            if getattr(self, key) not in allowed:
                raise ConfigError(
                    f"family '{self.name}': {key} must be one of {allowed}, got "
                    f"{getattr(self, key)!r}"
                )
        lightning_only = ("stateful", "manual_step", "own_optimizer")
        if self.fit != "lightning" and any(getattr(self, key) for key in lightning_only):
            raise ConfigError(
                f"family '{self.name}': {', '.join(lightning_only)} need fit 'lightning'"
            )
        if self.attention_maps and self.task != "mt":
            raise ConfigError(f"family '{self.name}': attention_maps is for task 'mt'")

    @property
    def neural(self) -> bool:
        return self.fit == "lightning"

    def model_class(self) -> type:
        if not isinstance(self.model, str):
            return self.model
        module, _, attr = self.model.partition(":")
        return getattr(importlib.import_module(module), attr)


class _Registry(Mapping):
    """name -> Family; the modules of this package are imported when their family is asked for."""

    def __init__(self) -> None:
        self._loaded: dict[str, Family] = {}

    def _names(self) -> list[str]:
        here = [
            m.name
            for m in pkgutil.iter_modules([str(Path(__file__).parent)])
            if m.name not in _SHARED and not m.name.startswith("_")
        ]
        return sorted(set(here) | set(self._loaded))

    def __getitem__(self, name: str) -> Family:
        if name not in self._loaded:
            if not isinstance(name, str) or name not in self._names():
                raise KeyError(name)
            module = importlib.import_module(f"{__name__}.{name}")
            self._loaded[name] = module.FAMILY
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def add(self, family: Family) -> None:
        self._loaded[family.name] = family

    def remove(self, name: str) -> None:
        self._loaded.pop(name, None)


FAMILIES = _Registry()


def register(family: Family) -> Family:
    """Add (or replace) a family in the registry; returns it."""
    FAMILIES.add(family)
    return family


def unregister(name: str) -> None:
    """Forget a family added with `register` (tests)."""
    FAMILIES.remove(name)
