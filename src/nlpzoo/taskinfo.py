"""What each task is, in one place: the record every table, figure, command and served model
reads for the task of a run (`TASK_INFO[family.task]`, or `task_info(name)`).

    title          how people read the task's name ("Language models"), headings and figures
    noun           the same before "run" ("a language-model run"), in messages
    main_metric    the test metric that ranks its runs (the registry's champion), and whether
                   higher is better
    required       the metrics its report table needs; a run without one is listed as lacking it
    curves         the learning-curve columns, best first: the report draws the first one a run
                   has values for, and `dvc plots` shows the first
    unit           what its perplexity is counted in ("" for words)
    params         the params of its served model, with their types
    defaults       what a request or a command gets for a param it leaves out; a param without
                   one (a translation's beam size and length penalty) is the run's own setting
    modes          the answers its served model gives, the default first
    example        the input example logged with its served model ("" for the most frequent
                   word of the run's vocabulary)
    evaluation     whether its evaluation reads the `evaluation:` section and the evaluation
                   sets (data/raw/eval: word-vector results, samples, analogies)
    rank           `make repro` starts runs of a lower rank first when no timing is recorded
                   (translation runs take longest)

This module is torch-free and imports only the family registry, for its task names. It is not
part of `nlpzoo.families` on purpose: every stage depends on the registry, and a reworded title
must not rerun a training stage (docs/design.md §6); the stages that read these facts (report,
register) and the commands depend on this module alone. Adding a task is one entry here and one
task module (`nlpzoo/tasks/`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nlpzoo.errors import ConfigError
from nlpzoo.families import TASKS


@dataclass(frozen=True)
class Curve:
    column: str  # of plots/RUN.csv (nlpzoo.curves.CURVE_FIELDS)
    label: str
    log_scale: bool = False


@dataclass(frozen=True)
class TaskInfo:
    name: str
    title: str
    noun: str
    main_metric: str
    higher_is_better: bool
    required: tuple[str, ...]
    curves: tuple[Curve, ...]
    params: MappingProxyType
    defaults: MappingProxyType
    modes: tuple[str, ...] = ()
    example: str = ""
    evaluation: bool = True
    unit: str = ""
    rank: int = 9
    # anything a new task adds without a new field here
    extra: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def heading(self) -> str:
        """The title inside a sentence or after a comma ("language models")."""
        return self.title[0].lower() + self.title[1:]

    @property
    def curve(self) -> Curve:
        return self.curves[0]

    def plot_title(self) -> str:
        """`dvc plots`' title of the task's learning curves."""
        unit = f" ({self.unit})" if self.unit else ""
        return f"{self.title}, {self.curve.label} per epoch{unit}"


_PERPLEXITY = (
    Curve("val_ppl", "validation perplexity", log_scale=True),
    Curve("val_loss", "validation loss"),
)


def _record(**fields: Any) -> TaskInfo:
    for key in ("params", "defaults", "extra"):
        fields[key] = MappingProxyType(dict(fields.get(key, {})))
    return TaskInfo(**fields)


TASK_INFO: dict[str, TaskInfo] = {
    "lm": _record(
        name="lm",
        title="Language models",
        noun="language-model",
        main_metric="test_ppl",
        higher_is_better=False,
        required=("valid_ppl", "test_ppl", "params", "train_seconds", "train_tokens_per_s"),
        curves=_PERPLEXITY,
        params={
            "mode": str,
            "tokens": int,
            "temperature": float,
            "top_k": int,
            "seed": int,
            "k": int,
        },
        defaults={
            "mode": "generate",
            "tokens": 30,
            "temperature": 1.0,
            "top_k": 0,
            "seed": 0,
            "k": 10,
        },
        modes=("generate", "score", "neighbours", "analogy"),
        rank=1,
    ),
    "vectors": _record(
        name="vectors",
        title="Word vectors",
        noun="word-vector",
        main_metric="ws353_rho",
        higher_is_better=True,
        required=(
            "analogy_acc",
            "analogy_sem_acc",
            "analogy_syn_acc",
            "analogy_coverage",
            "ws353_rho",
            "simlex_rho",
        ),
        curves=(Curve("train_loss", "training loss"), Curve("val_loss", "validation loss")),
        params={"mode": str, "k": int},
        defaults={"mode": "neighbours", "k": 10},
        modes=("neighbours", "analogy"),
        rank=2,
    ),
    "mt": _record(
        name="mt",
        title="Translation",
        noun="translation",
        main_metric="bleu_beam",
        higher_is_better=True,
        required=("bleu", "chrf", "test_ppl"),
        curves=_PERPLEXITY,
        params={"beam_size": int, "length_penalty": float},
        defaults={},  # the run's own beam size and length penalty (its config.json)
        example="Ein Hund läuft über die Wiese.",
        evaluation=False,
        unit="per SentencePiece piece",
        rank=0,
    ),
}

if set(TASK_INFO) != set(TASKS):  # pragma: no cover - a task added to one list only
    raise ConfigError(f"tasks {sorted(TASKS)} and their records {sorted(TASK_INFO)} differ")


def task_info(task: str) -> TaskInfo:
    try:
        return TASK_INFO[task]
    except KeyError:
        raise ConfigError(f"unknown task {task!r} (tasks: {', '.join(TASK_INFO)})") from None
