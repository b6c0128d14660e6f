"""Lightning glue shared by every neural family, by responsibility: `module` (the optimizer and
`FamilyModule`), `callbacks` (non-finite loss, learning curve, progress), `resume` (RNG states,
the resume checkpoint, fingerprint), `checkpoint_io` (the checkpoint writer), `trainer`
(`make_trainer`).

A neural family is a plain `nn.Module` called on a batch, `model(*batch) -> (logits, loss)` (a
recurrent one takes and returns its carried state too). `FamilyModule` wraps any of them: one
`_step` for training and validation, `train/loss`, and over the whole validation split `val/loss`
and `val/ppl` (exact: Σ NLL over every prediction of every rank / their number, from the run's
task, `nlpzoo.tasks`). What differs between families comes from their record
(`nlpzoo.families.Family`): the carried state (`stateful`), the model's own optimizer
(`own_optimizer`), and its own in-place update in one process (`manual_step`).
"""

from nlpzoo.params import TrainerConfig
from nlpzoo.training.callbacks import UNITS, CurveWriter, NonFiniteLoss, Progress, hms
from nlpzoo.training.checkpoint_io import LocalCheckpointIO
from nlpzoo.training.module import FamilyModule, make_optimizer
from nlpzoo.training.resume import (
    ResumeCheckpoint,
    fingerprint,
    prepare_resume,
    remove_checkpoints,
    rng_state,
    set_rng_state,
)
from nlpzoo.training.trainer import make_trainer

__all__ = [
    "UNITS",
    "CurveWriter",
    "FamilyModule",
    "LocalCheckpointIO",
    "NonFiniteLoss",
    "Progress",
    "ResumeCheckpoint",
    "TrainerConfig",
    "fingerprint",
    "hms",
    "make_optimizer",
    "make_trainer",
    "prepare_resume",
    "remove_checkpoints",
    "rng_state",
    "set_rng_state",
]
