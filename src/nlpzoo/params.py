"""Every section of params.yaml as a typed config, and the checks of the whole file.

This module imports no torch, Lightning or MLflow: `python -m nlpzoo validate` and every stage
check the whole params file in well under a second before any work starts. Each section becomes
a dataclass through `nlpzoo.config.build` (unknown keys, wrong types and impossible values are
refused with a message naming the section and the key); the runs' own sections are built from
their family's config (`nlpzoo.families`).
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

SPLITS = ("train", "valid", "test")

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

# Bytes of memory per buffered co-occurrence pair, worst case (all pairs distinct): 16 for the
# buffer itself (int64 key + float64 weight), ~42 to aggregate it (argsort order, sorted keys and
# weights, flags, run starts) and ~70 to mirror the u <= n unique pairs (keys and sums,
# transposed copies, their concatenation and its sort order).
COOCCUR_BYTES_PER_PAIR = 128


# --------------------------------------------------------------------------- data sections


@dataclass
class LMDataConfig:
    source: str = "brown"  # brown | text
    files: dict = field(default_factory=dict)  # text: {train, valid, test} or {all}: paths
    lowercase: bool = True
    split_tokens: list[int] = field(default_factory=lambda: [800_000, 200_000])  # train, valid
    max_line_bytes: int = 1_000_000  # longer lines are refused (not a sentence-per-line file)

    def __post_init__(self) -> None:
        require(
            self.source in ("brown", "text"),
            "source",
            f"must be brown or text, got {self.source!r}",
        )
        require(
            len(self.split_tokens) == 2 and all(n > 0 for n in self.split_tokens),
            "split_tokens",
            "must be two positive token counts [train, valid]",
        )
        require(self.max_line_bytes > 0, "max_line_bytes", "must be positive")
        if self.source == "text":
            keys = set(self.files)
            require(
                keys in ({"all"}, set(SPLITS)),
                "files",
                "must be {all: path} or {train: path, valid: path, test: path} for source text",
            )


@dataclass
class MTDataConfig:
    source: str = "multi30k"  # multi30k | parallel
    src: str = "de"
    tgt: str = "en"
    test_set: str = "test_2016_flickr"  # multi30k test set used as `test`
    files: dict = field(
        default_factory=dict
    )  # parallel: {train: [src, tgt], valid: [...], test: [...]}
    max_line_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        require(self.source in ("multi30k", "parallel"), "source", "must be multi30k or parallel")
        require(self.src != self.tgt, "tgt", f"must differ from src ({self.src!r})")
        require(self.max_line_bytes > 0, "max_line_bytes", "must be positive")
        if self.source == "parallel":
            require(set(self.files) == set(SPLITS), "files", "needs train, valid and test pairs")
            for split, pair in self.files.items():
                require(
                    isinstance(pair, list) and len(pair) == 2,
                    "files",
                    f"entry {split!r} must be [src_path, tgt_path]",
                )

    def multi30k_files(self) -> list[str]:
        """Basenames of the Multi30k task-1 files this configuration reads."""
        sets = ("train", "val", self.test_set)
        return [f"{s}.{lang}.gz" for s in sets for lang in (self.src, self.tgt)]


@dataclass
class LMVocabConfig:
    min_count: int = 4  # Bengio et al. 2003 merge words seen <= 3 times into one symbol

    def __post_init__(self) -> None:
        require(self.min_count >= 1, "min_count", f"must be >= 1, got {self.min_count}")


@dataclass
class MTVocabConfig:
    vocab_size: int = 8000  # one SentencePiece vocabulary shared by source and target
    model_type: str = "unigram"  # unigram | bpe
    character_coverage: float = 1.0

    def __post_init__(self) -> None:
        require(self.vocab_size >= 16, "vocab_size", f"must be >= 16, got {self.vocab_size}")
        require(self.model_type in ("unigram", "bpe"), "model_type", "must be unigram or bpe")
        require(0 < self.character_coverage <= 1, "character_coverage", "must be in (0, 1]")


@dataclass
class CooccurConfig:
    """Settings of the `cooccur` stage (see the module docstring for their meaning)."""

    window: int = 10
    distance_weighting: bool = True  # weight 1/d for a pair at distance d, else 1
    sentence_bounded: bool = True  # windows do not cross sentence (line) boundaries
    keep_unk: bool = False  # count unknown words as <unk> instead of dropping them
    memory_mb: int = 512  # cap for the in-memory pair buffer (and its sort scratch)

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ConfigError(f"key 'window' must be an integer >= 1, got {self.window!r}")
        mem = self.memory_mb
        if isinstance(mem, bool) or not isinstance(mem, (int, float)) or not mem >= 1:
            raise ConfigError(f"key 'memory_mb' must be a number >= 1, got {mem!r}")
        for key in ("distance_weighting", "sentence_bounded", "keep_unk"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"key '{key}' must be true or false, got {getattr(self, key)!r}")

    def max_pairs(self) -> int:
        """Pairs the in-memory buffer holds."""
        return max(1, int(self.memory_mb * 2**20) // COOCCUR_BYTES_PER_PAIR)


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


@dataclass
class MixtureConfig:
    baseline: str = "ngram"  # the run every other LM run is interpolated with


@dataclass
class EvaluationConfig:
    """The `evaluation:` section: settings of the word-vector protocol (docs/design.md §4), and
    what the report shows of each run: the language models' samples (eval/RUN/samples.json,
    the same prompt, length and seed for every run) and the answers of every run with vectors
    to a few analogy questions (eval/RUN/analogies.json)."""

    restrict_vocab: int = 30000  # analogy answers searched among the most frequent words
    neighbours: int = 10  # nearest neighbours listed per probe word
    probes: list[str] = field(
        default_factory=lambda: ["king", "money", "city", "war", "good", "said", "three", "water"]
    )
    sample_prompt: str = "the president said that"  # read as the run's corpus was (lowercased)
    sample_tokens: int = 30  # new tokens per sample, sentence ends `</s>` included
    sample_count: int = 2  # samples per run
    sample_seed: int = 0
    sample_temperature: float = 1.0  # 0: always the most probable word
    sample_top_k: int = 0  # sample among the k most probable words; 0: all of them
    # "a b c d": a is to b as c is to d, d the expected answer (all in Brown's vocabulary)
    analogies: list[str] = field(
        default_factory=lambda: [
            "man woman king queen",
            "he she his her",
            "father mother son daughter",
            "man men woman women",
            "france paris england london",
            "good better bad worse",
            "go went come came",
        ]
    )

    def __post_init__(self) -> None:
        require(self.restrict_vocab >= 1, "restrict_vocab", "must be >= 1")
        require(self.neighbours >= 1, "neighbours", "must be >= 1")
        require(self.sample_tokens >= 1, "sample_tokens", "must be >= 1")
        require(self.sample_count >= 0, "sample_count", "must be >= 0")
        require(self.sample_temperature >= 0, "sample_temperature", "must be >= 0")
        require(self.sample_top_k >= 0, "sample_top_k", "must be >= 0")
        for q in self.analogies:
            require(
                isinstance(q, str) and len(q.split()) == 4,
                "analogies",
                f"entries must be four words 'a b c d' (a is to b as c is to d), got {q!r}",
            )


@dataclass
class ReportConfig:
    """The `report:` params section."""

    projection: str = "pca"  # pca | tsne: the 2-D map of probe words and their neighbours
    neighbours: int = 5  # nearest neighbours per probe word, in the table and on the map
    samples: int = 3  # sample translations shown per MT run
    attention_sentences: int = 2  # attention heatmaps per MT run
    seed: int = 0  # t-SNE's random state

    def __post_init__(self) -> None:
        require(self.projection in ("pca", "tsne"), "projection", "must be pca or tsne")
        require(self.neighbours >= 1, "neighbours", "must be >= 1")
        require(self.samples >= 0, "samples", "must be >= 0")
        require(self.attention_sentences >= 0, "attention_sentences", "must be >= 0")


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


def validate_params(params: dict) -> None:
    """Check the whole params file, every section, before any stage does work."""
    if not isinstance(params, dict):
        raise ConfigError("params.yaml must be a mapping of sections")
    specs = parse_models(params, include_disabled=True)
    for key in params:
        if key not in SECTIONS and key not in specs:
            hint = closest(key, list(SECTIONS) + list(specs))
            raise ConfigError(
                f"params: unknown section '{key}'"
                + (f"; did you mean '{hint}'?" if hint else "")
                + " (a run's section needs an entry in `models:`; `enabled: false` there keeps "
                "a run's settings without running it)"
            )
    seed = params.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ConfigError(f"params: key 'seed' must be a whole number in [0, 2**32), got {seed!r}")
    for name in specs:
        run_configs(params, name)
    build(LMDataConfig, params.get("lm"), "lm")
    build(MTDataConfig, params.get("mt"), "mt")
    vocab = params.get("vocab") or {}
    if not isinstance(vocab, dict):
        raise ConfigError("vocab: expected a mapping with `lm` and `mt`")
    for key in vocab:
        if key not in ("lm", "mt"):
            raise ConfigError(f"vocab: unknown key '{key}' (valid keys: lm, mt)")
    build(LMVocabConfig, vocab.get("lm"), "vocab.lm")
    build(MTVocabConfig, vocab.get("mt"), "vocab.mt")
    build(CooccurConfig, params.get("cooccur"), "cooccur")
    build(TrainerConfig, params.get("trainer"), "trainer")
    build(MlflowConfig, params.get("mlflow"), "mlflow")
    mixture = build(MixtureConfig, params.get("mixture"), "mixture")
    build(EvaluationConfig, params.get("evaluation"), "evaluation")
    build(ReportConfig, params.get("report"), "report")
    base = parse_models(params, include_disabled=True).get(mixture.baseline)
    if base is not None and base.task != "lm":
        raise ConfigError(
            f"mixture: key 'baseline' must name a language-model run, got {mixture.baseline!r} "
            f"(family {base.family})"
        )


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


# ------------------------------------------------- the user's own corpus files (corpus stages)


def user_files(role: str, lm: LMDataConfig, mt: MTDataConfig) -> list[str]:
    """The user's own files that `corpus@role` copies, as params.yaml writes them, in a fixed
    order: `lm.files` for `lm.source: text`, `mt.files` for `mt.source: parallel`; else []."""
    if role == "lm" and lm.source == "text":
        return [str(lm.files[split]) for split in sorted(lm.files)]
    if role == "mt" and mt.source == "parallel":
        return [str(path) for split in sorted(mt.files) for path in mt.files[split]]
    return []


def inside_project(path: str, root: Path) -> str | None:
    """`path` (relative to the project root, where the stages run, or absolute; `~` expanded)
    as a project-relative POSIX path when it lies inside the project at `root`, links
    followed; None when it lies outside (DVC then cannot depend on it portably)."""
    p = Path(path).expanduser()
    full = (p if p.is_absolute() else root / p).resolve()
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
