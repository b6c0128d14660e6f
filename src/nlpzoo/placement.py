"""Where each run trains and is evaluated: one rule for every machine (docs/scale-out.md).

    1. A run whose kernel runs only on the CPU trains on the CPU, in one process, whatever
       `trainer.accelerator` says: the count and closed-form families (ngram, svd) and the
       numba kernels of word2vec and GloVe (`backend: numba`, their default). Only where the
       user names `accelerator: cpu` do their `devices` and `strategy` stay as set (CPU DDP,
       which takes the families' torch path).
    2. Every other run trains on `trainer.accelerator`: `auto` is a CUDA GPU where torch sees one,
       else Apple's GPU (MPS) where there is one, else the CPU.
    3. `devices` is the user's (1 by default: several GPUs train one run only when asked);
       `precision: auto` is bf16-mixed where the device multiplies bf16 natively, else
       32-true; `deterministic: auto` is `warn` on a GPU (torch's deterministic kernels, a
       warning where an op has none) and false on the CPU, whose kernels are deterministic
       already.
    4. Sparse gradients cannot be all-reduced by NCCL: a run of several GPU processes with
       sparse gradients (word2vec's torch path, GloVe with `sparse_grad: true`) is refused with
       the setting to change.

`place(run)` gives the resolved `Placement`; the train stage trains with it and records it in
train_stats.json (`device`, `devices`, `precision`, `deterministic`), the evaluate stage
evaluates on its device, and `python -m nlpzoo repro` gives GPU runs their GPU slots.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from nlpzoo.errors import ConfigError

# the accelerator names Lightning takes, as the device types torch names them
_CUDA = ("gpu", "cuda")


@dataclass(frozen=True)
class Placement:
    """A run's resolved trainer settings: `accelerator` is "cpu", "cuda" or "mps"."""

    accelerator: str
    devices: Any  # an int, a list of device ids, or "auto" (Lightning's: every device)
    strategy: str
    precision: str | int
    deterministic: bool | str
    cpu_kernel: bool  # rule 1: the run's kernel runs only on the CPU

    def torch_device(self) -> str:
        """The torch device the run's model lives on in one process (its first device)."""
        if self.accelerator == "cpu":
            return "cpu"
        if isinstance(self.devices, list) and self.devices:
            return f"{self.accelerator}:{self.devices[0]}"
        return self.accelerator

    def world_size(self, num_nodes: int = 1) -> int | None:
        """Processes training the run (None where `devices` is "auto" or -1: every device)."""
        if isinstance(self.devices, list):
            return len(self.devices) * num_nodes
        if isinstance(self.devices, int) and self.devices >= 1:
            return self.devices * num_nodes
        if isinstance(self.devices, str) and self.devices.strip().isdigit():
            return int(self.devices) * num_nodes
        return None

    def record(self) -> dict:
        """What train_stats.json, the MLflow run and the report show of it."""
        return {
            "device": self.accelerator,
            "devices": self.devices if isinstance(self.devices, int) else str(self.devices),
            "precision": str(self.precision),
            "deterministic": str(self.deterministic).lower(),
        }

    def trainer(self, cfg: Any) -> Any:
        """The run's TrainerConfig with these settings in place of what params said."""
        accelerator = "gpu" if self.accelerator == "cuda" else self.accelerator
        return replace(
            cfg,
            accelerator=accelerator,
            devices=self.devices,
            strategy=self.strategy,
            precision=self.precision,
            deterministic=self.deterministic,
        )


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_accelerator(name: Any) -> str:
    """The device `trainer.accelerator` names: "cpu", "cuda" or "mps" (rule 2); others (tpu,
    a Lightning Accelerator object) by their name."""
    if not isinstance(name, str):
        return type(name).__name__.lower().replace("accelerator", "") or "cpu"
    name = name.lower()
    if name == "auto":
        if cuda_available():
            return "cuda"
        return "mps" if mps_available() else "cpu"
    return "cuda" if name in _CUDA else name


def cpu_kernel(family: Any, config: Any) -> bool:
    """Rule 1: the run's kernel runs only on the CPU (a family without Lightning, or one whose
    config says its `kernel_device()` is the CPU)."""
    if not family.neural:
        return True
    kernel_device = getattr(config, "kernel_device", None)
    return callable(kernel_device) and kernel_device() == "cpu"


def place(run: Any) -> Placement:
    """The placement of `run` (a `nlpzoo.tasks.Run`) on this machine, by the rule above."""
    return place_config(run.family, run.config, run.trainer, run.name)


def place_config(family: Any, config: Any, cfg: Any, name: str = "") -> Placement:
    """`place` from a run's family record, family config and TrainerConfig."""
    from nlpzoo.training.trainer import resolve_deterministic, resolve_precision

    kernel = cpu_kernel(family, config)
    if kernel:
        chosen = cfg.accelerator.lower() if isinstance(cfg.accelerator, str) else None
        if chosen == "cpu":
            devices, strategy = cfg.devices, cfg.strategy
        else:
            devices, strategy = 1, "auto"
        accelerator = "cpu"
    else:
        accelerator = resolve_accelerator(cfg.accelerator)
        devices, strategy = cfg.devices, cfg.strategy
    # `auto` made concrete for the resolved device
    precision = resolve_precision(replace(cfg, accelerator=accelerator))
    deterministic = resolve_deterministic(cfg.deterministic, accelerator)
    placement = Placement(accelerator, devices, strategy, precision, deterministic, kernel)
    if family.neural:
        _check_sparse(placement, config, cfg.num_nodes, name)
    return placement


def _check_sparse(placement: Placement, config: Any, num_nodes: int, name: str) -> None:
    """Rule 4: refuse a run of several CUDA processes whose gradients are sparse."""
    if placement.accelerator != "cuda":
        return  # gloo (CPU DDP) all-reduces sparse gradients
    world = placement.world_size(num_nodes)
    if world == 1:
        return
    sparse = getattr(config, "sparse_gradients", None)
    found = sparse() if callable(sparse) else None
    if found:
        reason, fix = found
        many = f"{world} GPU processes" if world else "every GPU (devices: auto)"
        raise ConfigError(
            f"run '{name}': {reason}, which NCCL cannot all-reduce across {many}; {fix}"
        )
