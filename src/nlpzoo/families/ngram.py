"""The `ngram` family: its params section and its registry record."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.errors import ConfigError
from nlpzoo.families import Family

MIN_ORDER, MAX_ORDER = 2, 5


@dataclass
class NgramConfig:
    """`ngram` section of params.yaml."""

    family: str = "ngram"
    order: int = 3

    def __post_init__(self) -> None:
        if self.family != "ngram":
            raise ConfigError(f"ngram: family must be 'ngram', got {self.family!r}")
        if (
            isinstance(self.order, bool)
            or not isinstance(self.order, int)
            or not MIN_ORDER <= self.order <= MAX_ORDER
        ):
            raise ConfigError(
                f"ngram: order must be an integer in [{MIN_ORDER}, {MAX_ORDER}], got {self.order!r}"
            )


FAMILY = Family(
    "ngram",
    NgramConfig,
    "nlpzoo.models.ngram:KneserNey",
    task="lm",
    input="counts",
    fit="count",
)
