"""Settings and checks shared by the families' configs."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, replace
from typing import Any

from nlpzoo.config import require

log = logging.getLogger(__name__)

# output layers of the neural language models (nlpzoo.models.outputs)
KINDS = ("softmax", "hierarchical", "adaptive")
# the adaptive output's default cut-offs, chosen for Brown's vocabulary (about 16k words): a
# shortlist of the 2,000 most frequent words, then tails [2000, 6000) and [6000, V)
DEFAULT_CUTOFFS = (2000, 6000)
# learning-rate schedules of the shared optimizer (nlpzoo.training.module.make_optimizer)
SCHEDULES = ("auto", "constant", "linear", "cosine", "inverse_sqrt")


@dataclass
class AdamSettings:
    """Adam's constants (Kingma & Ba 2015), in every family trained with it."""

    adam_beta1: float = 0.9  # β_1
    adam_beta2: float = 0.999  # β_2 (Vaswani et al. 2017: 0.98)
    adam_eps: float = 1e-8  # ε (Vaswani et al. 2017: 1e-9)
    # the learning rate over training, after a linear warm-up of `warmup_steps` (where the family
    # has them): auto (1/√step with a warm-up, SGD's ε_0 / (1 + r t) with `lr_decay`, else
    # constant) | constant | linear (to 0 at the last step) | cosine (to 0) | inverse_sqrt
    schedule: str = "auto"


def check_adam(cfg: Any) -> None:
    require(0.0 <= cfg.adam_beta1 < 1.0, "adam_beta1", f"must be in [0, 1), got {cfg.adam_beta1}")
    require(0.0 <= cfg.adam_beta2 < 1.0, "adam_beta2", f"must be in [0, 1), got {cfg.adam_beta2}")
    require(cfg.adam_eps > 0, "adam_eps", f"must be positive, got {cfg.adam_eps}")
    require(
        cfg.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}, got {cfg.schedule!r}"
    )
    if cfg.schedule == "inverse_sqrt":
        require(
            getattr(cfg, "warmup_steps", 0) > 0,
            "schedule",
            "inverse_sqrt needs warmup_steps > 0 (the rate peaks there, then falls as 1/√step)",
        )
    if cfg.schedule != "auto":
        require(
            not getattr(cfg, "lr_decay", 0.0),
            "lr_decay",
            f"must be 0 with schedule {cfg.schedule!r} (lr_decay is the auto schedule's SGD decay)",
        )


def check_output(cfg: Any) -> None:
    """A language model's `output`, `cutoffs` and `div_value` (models/outputs.py); the cut-offs
    against the vocabulary size are checked when the model is built."""
    require(cfg.output in KINDS, "output", f"must be one of {KINDS}, got {cfg.output!r}")
    require(
        all(a < b for a, b in itertools.pairwise([0, *cfg.cutoffs])),
        "cutoffs",
        f"must be strictly increasing positive ids, got {cfg.cutoffs}",
    )
    require(cfg.div_value >= 1, "div_value", f"must be >= 1, got {cfg.div_value}")


def fit_cutoffs(cfg: Any, vocab_size: int, run: str = "") -> Any:
    """`cfg` with the default cut-offs fitted to a vocabulary of `vocab_size` words.

    Only the default list (`DEFAULT_CUTOFFS`, also params.yaml's value) is fitted: a cut-off at or
    beyond V would start an empty cluster, so it is dropped, and with none left the adaptive
    output is exactly a full softmax (Grave et al. 2017: the shortlist is the whole vocabulary).
    Any other list is the user's own and used as given (the model refuses it if impossible).
    On Brown's vocabulary the default fits as it is and `cfg` is returned unchanged."""
    if cfg.output != "adaptive" or list(cfg.cutoffs) != list(DEFAULT_CUTOFFS):
        return cfg
    kept = [c for c in cfg.cutoffs if c < vocab_size]
    if kept == list(cfg.cutoffs):
        return cfg
    log.info(
        "%sthe default cutoffs %s do not fit the vocabulary of %d words: using %s%s",
        f"run '{run}': " if run else "",
        list(cfg.cutoffs),
        vocab_size,
        kept,
        "" if kept else " (a full softmax)",
    )
    return replace(cfg, cutoffs=kept)
