"""What a run does that depends on its task, behind one small protocol (`Task`).

The run lifecycle (`nlpzoo.lifecycle`) is written once; for the parts that differ between
language models (`lm.py`), word vectors (`vectors.py`) and translation (`mt.py`) it asks the
run's task:

    load(run)                       the run's data from its data folder, checked (clear errors)
    fingerprint(data)               what identifies that data, for resuming (settings, arrays)
    datamodule(run, data)           the Lightning data module (families fitted by Lightning)
    predictions(batch)              predictions a training batch holds (loss weights, throughput)
    validation_nll(batch, out)      Σ NLL of a validation batch, exact (val/loss, val/ppl)
    fit_arrays(data)                what a count or closed-form model's `fit` takes
    validation_ppl(model, data)     such a model's validation perplexity (one curve row), or None
    fit_stats(data, fitted)         throughput of the training run (train_stats.json)
    save(run, data, model, folder)  the task's outputs beside the model in models/RUN/
    evaluate(run, model)            metrics, and the files of eval/RUN/

A task module `nlpzoo/tasks/NAME.py` defines `TASK`, its `Task` subclass. `task_of(family)`
imports it by the family record's `task` when a run needs it, so a run executes (and its DVC
stage depends on) the code of its own task only.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlpzoo.errors import DataError
from nlpzoo.families import FAMILIES, Family
from nlpzoo.layout import Layout
from nlpzoo.params import RunSpec, TrainerConfig, run_configs


@dataclass
class Run:
    """One run of `models:`: its validated sections, and where its files are."""

    spec: RunSpec
    family: Family
    config: Any  # the family's config dataclass, from the run's params section
    trainer: TrainerConfig
    params: dict  # the whole params file (the tasks read their shared sections from it)
    root: Path

    @classmethod
    def of(cls, params: dict, name: str, root: Path) -> Run:
        spec, cfg, trainer_cfg = run_configs(params, name)
        return cls(spec, FAMILIES[spec.family], cfg, trainer_cfg, params, Path(root))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def seed(self) -> int:
        return int(self.params.get("seed", 0))

    @property
    def layout(self) -> Layout:
        return Layout(self.root)

    @property
    def data_dir(self) -> Path:
        return self.layout.data(self.spec.data)

    @property
    def model_dir(self) -> Path:
        return self.layout.model(self.name)

    @property
    def eval_dir(self) -> Path:
        return self.layout.evaluation(self.name)

    @property
    def plots_path(self) -> Path:
        return self.layout.curve(self.name)

    @property
    def ckpt_dir(self) -> Path:
        return self.layout.checkpoints(self.name)


@dataclass
class Data:
    """What a run trains on; each task adds its own fields."""

    vocab_size: int
    counts: list[int] | None = None  # training count of every id, for models that need them


@dataclass
class Fitted:
    """How a training run went, for the task's throughput statistics."""

    epochs: int
    seconds: float  # fitting time
    world_size: int = 1
    fraction: float = 1.0  # of each epoch's training batches run (trainer.limit_train_batches)
    predictions: int = 0  # predictions trained on, over all ranks (counted by the module)
    datamodule: Any = None


@dataclass
class Scores:
    """What a task's evaluation gives the lifecycle."""

    metrics: dict[str, Any]
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)  # eval/RUN/NAME
    artifacts: tuple[str, ...] = ()  # those of `files` logged to the run's MLflow run
    tags: dict[str, str] = field(default_factory=dict)  # logged as MLflow params


class Task(ABC):
    """One task's part of the lifecycle for runs of `family` (see the module docstring)."""

    # a held-out objective: val/ppl every epoch, early stopping, and the best epoch's weights
    validates: bool = True

    def __init__(self, family: Family) -> None:
        self.family = family

    @abstractmethod
    def load(self, run: Run) -> Data: ...

    @abstractmethod
    def fingerprint(self, data: Data) -> tuple[dict, list]: ...

    @abstractmethod
    def datamodule(self, run: Run, data: Data) -> Any: ...

    def predictions(self, batch: Any) -> int:
        """Batches are (inputs..., targets): every target is one prediction."""
        return batch[-1].numel()

    def validation_nll(self, batch: Any, logits: Any, loss: Any) -> tuple[Any, int]:
        """(Σ NLL as a float64 tensor, predictions): the loss is the exact mean NLL."""
        n = self.predictions(batch)
        return loss.detach().double() * n, n

    def fit_arrays(self, data: Data) -> tuple:
        raise NotImplementedError(f"family '{self.family.name}': no count or closed-form fit")

    def validation_ppl(self, model: Any, data: Data) -> float | None:
        return None

    @abstractmethod
    def fit_stats(self, data: Data, fitted: Fitted) -> dict: ...

    @abstractmethod
    def save(self, run: Run, data: Data, model: Any, folder: Path) -> None:
        """The task's outputs beside the model in models/RUN/."""

    @abstractmethod
    def evaluate(self, run: Run, model: Any) -> Scores: ...


def task_of(family: Family) -> Task:
    """The task of `family`'s runs: module `nlpzoo.tasks.<family.task>`, imported on first use."""
    module = importlib.import_module(f"{__name__}.{family.task}")
    return module.TASK(family)


def load_model(run_dir: Path, device: str = "cpu") -> Any:
    """The trained model of the run in `run_dir` (models/RUN/), any family, in eval mode: a
    neural one on `device` (a torch device: "cpu", "cuda", "cuda:1", "mps"); a count or
    closed-form one (numpy) ignores it."""
    run_dir = Path(run_dir)
    path = run_dir / "config.json"
    if not path.is_file():
        hint = f"run `dvc repro train-{run_dir.name}`"
        raise DataError(f"trained model not found: {run_dir} ({hint})")
    family_name = json.loads(path.read_text())["family"]
    if family_name not in FAMILIES:
        raise DataError(f"{path}: unknown family '{family_name}'")
    family = FAMILIES[family_name]
    if not family.neural:
        return family.model_class().load(run_dir / "model.npz")
    import torch

    blob = torch.load(run_dir / "model.pt", map_location=device, weights_only=True)
    config = family.config(**blob["config"])
    model = family.model_class()(config, blob["vocab_size"], counts=blob.get("counts"))
    model.to(device)  # its buffers too, those the state dict does not hold
    model.load_state_dict(blob["state_dict"])
    return model.eval()
