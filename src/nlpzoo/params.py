"""The params every run stage reads, as typed configs: the runs (`models:`, each run's own
section built from its family's config), the `trainer:` and `mlflow:` sections, and the params
file read as YAML.

The other sections live beside their readers, so that rewording one section's check reruns only
the stages that read it (docs/design.md §6): `params_data.py` the data stages' (`lm`, `mt`,
`vocab`, `cooccur`), `params_eval.py` the evaluation's and the mixtures' (`evaluation`,
`mixture`), `params_report.py` the report's; the check of the whole file is
`nlpzoo.params_file.validate_params`, a driver no stage depends on.

These modules import no torch, Lightning or MLflow: `python -m nlpzoo validate` and every stage
check the whole params file in well under a second before any work starts. Each section becomes
a dataclass through `nlpzoo.config.build` (unknown keys, wrong types and impossible values are
refused with a message naming the section and the key).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from nlpzoo.config import build, closest, require
from nlpzoo.errors import ConfigError, NlpzooError
from nlpzoo.families import FAMILIES

# top-level params sections other than the runs themselves
SECTIONS = (
    "seed",
    "models",
    "lm",
    "mt",
    "vocab",
    "cooccur",
    "trainer",
    "mlflow",
    "mixture",
    "evaluation",
    "report",
)

# what a run's name may be: it names folders (models/RUN, checkpoints/RUN, ...) and dvc.yaml
# stages (train-RUN), and is passed on the stages' command lines
RUN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


# --------------------------------------------------------------------------- run sections


# `trainer.precision`: auto (nlpzoo resolves it for the run's device), or what Lightning's Trainer
# takes (lightning_fabric.connector._PRECISION_INPUT)
PRECISIONS = (
    "auto",
    *("32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true"),
    *("transformer-engine", "transformer-engine-float16"),
    *(64, 32, 16, "64", "32", "16", "bf16"),
)

# TrainerConfig's fields: `lightning`, passed to Lightning's Trainer as they are (else nlpzoo's
# own setting); `result`, a run's result depends on it (else checkpointing, logging, workers)
_LIGHTNING = {"lightning": True, "result": True}
_LIGHTNING_DISPLAY = {"lightning": True, "result": False}
_OWN_RESULT = {"lightning": False, "result": True}
_OWN = {"lightning": False, "result": False}


@dataclass
class TrainerConfig:
    """The `trainer:` params section; a run may override any key in its own `trainer:` entry."""

    accelerator: str = field(default="auto", metadata=_LIGHTNING)  # cpu | gpu | auto ...
    # number of devices per node, device ids, or "auto" (Lightning's: every device): 1 by
    # default, so several GPUs train one run (DDP) only when asked (docs/scale-out.md)
    devices: int | str | list[int] = field(default=1, metadata=_LIGHTNING)
    strategy: str = field(default="auto", metadata=_LIGHTNING)  # auto | ddp | ddp_spawn | ...
    num_nodes: int = field(default=1, metadata=_LIGHTNING)
    # auto: bf16-mixed where the device multiplies bf16 natively, else 32-true (resolved once per
    # run by nlpzoo.training.trainer.resolve_precision; docs/design.md §9); or Lightning's own
    precision: str | int = field(default="auto", metadata=_LIGHTNING)
    max_epochs: int = field(default=5, metadata=_LIGHTNING)
    max_steps: int = field(default=-1, metadata=_LIGHTNING)
    max_time: str | None = field(default=None, metadata=_LIGHTNING)  # "DD:HH:MM:SS"
    gradient_clip_val: float | None = field(default=None, metadata=_LIGHTNING)
    gradient_clip_algorithm: str = field(default="norm", metadata=_LIGHTNING)
    accumulate_grad_batches: int = field(default=1, metadata=_LIGHTNING)
    limit_train_batches: int | float = field(default=1.0, metadata=_LIGHTNING)
    limit_val_batches: int | float = field(default=1.0, metadata=_LIGHTNING)
    log_every_n_steps: int = field(default=50, metadata=_LIGHTNING_DISPLAY)
    # epochs without val/ppl improvement; 0 disables
    early_stopping_patience: int = field(default=2, metadata=_OWN_RESULT)
    # true | false | warn, as Lightning takes them; auto: warn on a GPU, false on the CPU (whose
    # kernels are deterministic already); resolved by nlpzoo.placement
    deterministic: bool | str = field(default="auto", metadata=_LIGHTNING)
    enable_progress_bar: bool = field(default=False, metadata=_LIGHTNING_DISPLAY)
    num_workers: int = field(default=0, metadata=_OWN)  # DataLoader worker processes
    threads: int = field(default=0, metadata=_OWN)  # torch intra-op threads; 0 keeps the default
    # resume checkpoints (checkpoints/RUN/resume.ckpt): at every epoch end, and also every N
    # optimizer steps and/or every M minutes of training; 0 turns either one off
    checkpoint_every_steps: int = field(default=0, metadata=_OWN)
    checkpoint_every_minutes: float = field(default=10.0, metadata=_OWN)
    # progress lines in the log while training (rank 0): every N % of an epoch and/or every M
    # seconds, and one per validation; 0 turns either interval off
    progress_every_percent: float = field(default=10.0, metadata=_OWN)
    progress_every_seconds: float = field(default=60.0, metadata=_OWN)

    def __post_init__(self) -> None:
        require(
            self.precision in PRECISIONS,
            "precision",
            f"must be auto or one of Lightning's precisions (32-true, bf16-mixed, 16-mixed, "
            f"64-true, ...), got {self.precision!r}",
        )
        require(
            self.deterministic in (True, False, "warn", "auto"),
            "deterministic",
            f"must be true, false, warn or auto, got {self.deterministic!r}",
        )
        require(self.num_nodes >= 1, "num_nodes", "must be >= 1")
        require(self.max_epochs >= 1, "max_epochs", "must be >= 1")
        require(self.max_steps == -1 or self.max_steps >= 1, "max_steps", "must be -1 or >= 1")
        train, val = self.limit_train_batches, self.limit_val_batches
        require(
            train >= 1 if isinstance(train, int) else 0 < train <= 1,
            "limit_train_batches",
            "must be a whole number of batches >= 1 or a fraction in (0, 1]",
        )
        require(
            val >= 0 if isinstance(val, int) else 0 <= val <= 1,
            "limit_val_batches",
            "must be a whole number of batches >= 0 or a fraction in [0, 1]",
        )
        require(self.threads >= 0, "threads", "must be >= 0 (0 keeps torch's default)")
        require(self.accumulate_grad_batches >= 1, "accumulate_grad_batches", "must be >= 1")
        require(
            self.gradient_clip_val is None or self.gradient_clip_val > 0,
            "gradient_clip_val",
            "must be positive or null",
        )
        require(
            self.gradient_clip_algorithm in ("norm", "value"),
            "gradient_clip_algorithm",
            "must be norm or value",
        )
        require(self.early_stopping_patience >= 0, "early_stopping_patience", "must be >= 0")
        require(self.num_workers >= 0, "num_workers", "must be >= 0")
        require(self.checkpoint_every_steps >= 0, "checkpoint_every_steps", "must be >= 0")
        require(self.checkpoint_every_minutes >= 0, "checkpoint_every_minutes", "must be >= 0")
        require(
            0 <= self.progress_every_percent <= 100,
            "progress_every_percent",
            "must be between 0 and 100",
        )
        require(self.progress_every_seconds >= 0, "progress_every_seconds", "must be >= 0")

    def result_settings(self) -> dict:
        """The settings a run's result depends on (not checkpointing, logging, workers)."""
        return {k: v for k, v in asdict(self).items() if k in RESULT_KEYS}


# the trainer settings that are Lightning's Trainer arguments, and those a run's result depends on
LIGHTNING_KEYS = tuple(f.name for f in fields(TrainerConfig) if f.metadata["lightning"])
RESULT_KEYS = tuple(f.name for f in fields(TrainerConfig) if f.metadata["result"])


@dataclass
class MlflowConfig:
    experiment: str = "nlpzoo"
    # the register stage logs each run as a text-in/text-out MLflow model and registers it as
    # nlpzoo-RUN in the Model Registry (false: the stage records that it registered nothing)
    register: bool = True


# --------------------------------------------------------------------------- runs


@dataclass
class RunSpec:
    """One entry of `models:`: the run's family, the data folder (under `data/`) it reads, and
    whether the pipeline trains it (`enabled: false` keeps the run's settings without running it,
    and without showing it in the report or the mixtures)."""

    name: str
    family: str
    data: str
    enabled: bool = True

    @property
    def task(self) -> str:
        return FAMILIES[self.family].task


def check_run_name(name: Any) -> str:
    """`name` when it is a valid run name (RUN_NAME), else a ConfigError saying why."""
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
        raise ConfigError(
            f"run name {name!r} is not allowed: a run's name starts with a letter and holds "
            "only letters, digits, '_' and '-' (it names the run's folders and dvc.yaml stages)"
        )
    return name


def parse_models(params: dict, include_disabled: bool = False) -> dict[str, RunSpec]:
    """The runs of `models:`, in file order: the enabled ones, or all with `include_disabled`."""
    models = params.get("models")
    if not isinstance(models, dict) or not models:
        raise ConfigError("params: `models` must map each run name to {family: ..., data: ...}")
    specs = {}
    for name, entry in models.items():
        check_run_name(name)
        if (
            not isinstance(entry, dict)
            or not {"family", "data"} <= set(entry)
            or not set(entry) <= {"family", "data", "enabled"}
        ):
            raise ConfigError(
                f"run '{name}': models.{name} must be {{family: NAME, data: FOLDER}} (and "
                f"optionally enabled: false), got {entry!r}"
            )
        family = entry["family"]
        if family not in FAMILIES:
            hint = closest(str(family), FAMILIES)
            raise ConfigError(
                f"run '{name}': unknown family '{family}'"
                + (f"; did you mean '{hint}'?" if hint else "")
                + f" (families: {', '.join(sorted(FAMILIES))})"
            )
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"run '{name}': models.{name}.enabled must be true or false")
        if not isinstance(entry["data"], str) or not entry["data"]:
            raise ConfigError(f"run '{name}': models.{name}.data must name a folder under data/")
        specs[name] = RunSpec(name, family, entry["data"], enabled)
    if include_disabled:
        return specs
    return {name: spec for name, spec in specs.items() if spec.enabled}


def run_configs(params: dict, name: str) -> tuple[RunSpec, Any, TrainerConfig]:
    """Validate one run's sections: its `models:` entry, its own section, the trainer settings."""
    check_run_name(name)
    specs = parse_models(params, include_disabled=True)
    if name not in specs:
        hint = closest(name, specs)
        raise ConfigError(
            f"unknown run '{name}'"
            + (f"; did you mean '{hint}'?" if hint else "")
            + f" (runs in models: {', '.join(specs)})"
        )
    spec = specs[name]
    section = params.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"run '{name}': section `{name}` must be a mapping")
    if "family" in section and section["family"] != spec.family:
        raise ConfigError(
            f"run '{name}': key 'family' is {section['family']!r} but models.{name}.family is "
            f"{spec.family!r}"
        )
    cfg = build(
        FAMILIES[spec.family].config, section, f"run '{name}'", ignore=("family", "trainer")
    )
    for where, value in (
        ("trainer", params.get("trainer")),
        (f"{name}.trainer", section.get("trainer")),
    ):
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"run '{name}': section `{where}` must be a mapping, got {value!r}")
    trainer_section = dict(params.get("trainer") or {})
    trainer_section.update(section.get("trainer") or {})
    trainer_cfg = build(TrainerConfig, trainer_section, f"run '{name}' (trainer)")
    family = FAMILIES[spec.family]
    if (
        family.neural
        and family.task != "vectors"  # word vectors never validate (tasks/vectors.py)
        and trainer_cfg.limit_val_batches == 0
        and trainer_cfg.early_stopping_patience
    ):
        raise ConfigError(
            f"run '{name}' (trainer): key 'limit_val_batches' is 0 (no validation): set "
            "early_stopping_patience: 0 too, it watches val/ppl"
        )
    return spec, cfg, trainer_cfg


def read_params(path: Path) -> Any:
    """The YAML of a params file, not validated (`load_params` validates it; the commands read
    only the sections they need, so a trained run stays usable while params are edited)."""
    path = Path(path)
    if not path.is_file():
        raise NlpzooError(f"{path} not found: run the stages from the project root")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason})") from None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None
