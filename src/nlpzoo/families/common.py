"""Settings and checks shared by the families' configs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from nlpzoo.config import require

# output layers of the neural language models (nlpzoo.models.outputs)
KINDS = ("softmax", "hierarchical", "adaptive")
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
