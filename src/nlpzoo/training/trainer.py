"""The Trainer factory: the `trainer:` section of params, callbacks, the checkpoint writer, and
the precision `auto` resolves to on the run's device."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from nlpzoo.params import LIGHTNING_KEYS, TrainerConfig
from nlpzoo.training.callbacks import CurveWriter, NonFiniteLoss, Progress
from nlpzoo.training.checkpoint_io import LocalCheckpointIO
from nlpzoo.training.resume import ResumeCheckpoint


def local_checkpoint_io(strategy: Any, accelerator: Any = "auto") -> bool:
    """Whether checkpoints go through `LocalCheckpointIO`: only in one process or under DDP
    (rank 0 writes the whole state). Sharded or XLA strategies (fsdp, deepspeed, xla) save
    through their own writers and get no checkpoint plugin."""
    from pytorch_lightning.strategies import (
        DDPStrategy,
        DeepSpeedStrategy,
        SingleDeviceStrategy,
        SingleDeviceXLAStrategy,
        StrategyRegistry,
        XLAStrategy,
    )

    if isinstance(strategy, str):
        if strategy == "auto":
            return not (isinstance(accelerator, str) and accelerator in ("tpu", "xla"))
        if strategy not in StrategyRegistry:
            return False
        cls = StrategyRegistry[strategy]["strategy"]
    else:
        cls = type(strategy)
    own_writer = issubclass(cls, (XLAStrategy, SingleDeviceXLAStrategy, DeepSpeedStrategy))
    return issubclass(cls, (DDPStrategy, SingleDeviceStrategy)) and not own_writer


def on_gpu(accelerator: Any) -> bool:
    """Whether the run's accelerator resolves to a CUDA GPU ("gpu", "cuda", or "auto" on a
    machine with one)."""
    from pytorch_lightning.accelerators import CUDAAccelerator

    if isinstance(accelerator, CUDAAccelerator):
        return True
    if isinstance(accelerator, str):
        name = accelerator.lower()
        return name in ("gpu", "cuda") or (name == "auto" and torch.cuda.is_available())
    return False


# CPU flags of native bf16 arithmetic (Linux /proc/cpuinfo): AVX-512 BF16 (Cooper Lake, Zen 4 and
# later), AMX (Sapphire Rapids and later)
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (the first `flags` line of /proc/cpuinfo); none where the file
    is absent (not Linux)."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return set()
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def resolve_precision(
    cfg: TrainerConfig, flags: Iterable[str] | None = None, cuda_bf16: bool | None = None
) -> str | int:
    """The precision a run trains with: `cfg.precision` unless it is `auto`, which is
    `bf16-mixed` where the device multiplies bf16 natively and `32-true` elsewhere
    (docs/design.md §9): on a CUDA GPU, when `torch.cuda.is_bf16_supported()`; on a CPU, when
    it has one of `BF16_CPU_FLAGS`; on any other accelerator, `32-true`.

    `flags` (the CPU's, default `cpu_flags()`) and `cuda_bf16` (default torch's answer) are
    there for tests."""
    if cfg.precision != "auto":
        return cfg.precision
    if on_gpu(cfg.accelerator):
        native = cuda_supports_bf16() if cuda_bf16 is None else cuda_bf16
    elif on_cpu(cfg.accelerator):
        native = bool(set(BF16_CPU_FLAGS) & set(cpu_flags() if flags is None else flags))
    else:
        native = False
    return "bf16-mixed" if native else "32-true"


def resolve_deterministic(value: bool | str, accelerator: str) -> bool | str:
    """`deterministic` as Lightning takes it (`nlpzoo.placement`, rule 3): `auto` is `warn` on
    an accelerator and false on the CPU; true, false and warn stay as set."""
    if value == "auto":
        return False if accelerator == "cpu" else "warn"
    return value


def cuda_supports_bf16() -> bool:
    """`torch.cuda.is_bf16_supported()`; False where CUDA cannot be asked (a CPU build of
    torch: Lightning then refuses the GPU accelerator itself)."""
    try:
        return bool(torch.cuda.is_bf16_supported())
    except (AssertionError, RuntimeError):
        return False


def on_cpu(accelerator: Any) -> bool:
    """Whether the run's accelerator resolves to the CPU ("cpu", or "auto" on a machine with
    no CUDA GPU and no Apple GPU)."""
    from pytorch_lightning.accelerators import CPUAccelerator

    if isinstance(accelerator, CPUAccelerator):
        return True
    if isinstance(accelerator, str):
        name = accelerator.lower()
        if name == "auto":
            mps = getattr(torch.backends, "mps", None)
            return not torch.cuda.is_available() and not (mps is not None and mps.is_available())
        return name == "cpu"
    return False


class BestCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint` (keeps `best.ckpt`) whose state in a checkpoint names its
    files relative to its own folder: a project moved (or checked out elsewhere) between a kill
    and the resume keeps the best score and `best.ckpt`. Lightning's own records absolute paths
    and drops the best score when the folder differs, so that any next epoch would count as the
    best."""

    PATHS = ("best_model_path", "kth_best_model_path", "last_model_path")

    def _relative(self, path: Any) -> Any:
        if not path or self.dirpath is None:
            return path
        try:
            return Path(path).relative_to(self.dirpath).as_posix()
        except ValueError:  # not in the folder: kept as it is
            return path

    def _absolute(self, path: Any) -> Any:
        if not path or self.dirpath is None or Path(path).is_absolute():
            return path
        return str(Path(self.dirpath) / path)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        for key in self.PATHS:
            state[key] = self._relative(state.get(key))
        state["best_k_models"] = {
            self._relative(k): v for k, v in state.get("best_k_models", {}).items()
        }
        state["dirpath"] = "."
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        if state.get("dirpath") == ".":  # relative (an absolute one is Lightning's own)
            for key in self.PATHS:
                if key in state:
                    state[key] = self._absolute(state[key])
            state["best_k_models"] = {
                self._absolute(k): v for k, v in state.get("best_k_models", {}).items()
            }
            state["dirpath"] = self.dirpath
        super().load_state_dict(state)


def make_trainer(
    cfg: TrainerConfig,
    run: str,
    plots_path: Path,
    ckpt_dir: Path,
    tracker: Any,
    seed: int,
    validate: bool = True,
) -> pl.Trainer:
    """A Trainer from the `trainer:` section; DDP settings reach Lightning unchanged.

    `validate=False` for families without a held-out objective (word vectors): no early
    stopping, and the last weights are the result. `deterministic` reaches Lightning as set;
    `auto` is `warn` on an accelerator (torch's deterministic kernels, a warning where an op
    has none) and false on the CPU.
    """
    from pytorch_lightning.callbacks import EarlyStopping

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    # the folder holds the resume fingerprint (and, when resuming, the earlier checkpoints)
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    pl.seed_everything(seed, workers=True, verbose=False)
    callbacks: list[pl.Callback] = [
        NonFiniteLoss(run),
        CurveWriter(plots_path, tracker),
        BestCheckpoint(
            dirpath=ckpt_dir,
            filename="best",
            monitor="val/ppl" if validate else None,
            mode="min",
            save_top_k=1 if validate else 0,  # 0: saves nothing (the last weights are kept)
            save_last=False,  # resume.ckpt holds the last state already
        ),
        ResumeCheckpoint(ckpt_dir, cfg.checkpoint_every_steps, cfg.checkpoint_every_minutes),
        Progress(run, cfg.progress_every_percent, cfg.progress_every_seconds),
    ]
    if validate and cfg.early_stopping_patience:
        callbacks.append(
            EarlyStopping(monitor="val/ppl", mode="min", patience=cfg.early_stopping_patience)
        )
    kwargs = {k: v for k, v in asdict(cfg).items() if k in LIGHTNING_KEYS}
    # `auto` is nlpzoo's, not Lightning's (nlpzoo.placement resolves it once per run)
    kwargs["precision"] = resolve_precision(cfg)
    kwargs["deterministic"] = resolve_deterministic(
        cfg.deterministic, "cpu" if on_cpu(cfg.accelerator) else "accelerator"
    )
    plugins = [LocalCheckpointIO()] if local_checkpoint_io(cfg.strategy, cfg.accelerator) else []
    # Lightning sets CUBLAS_WORKSPACE_CONFIG=:4096:8 whenever `deterministic` is true or warn,
    # over any value of the user's; a value set before (e.g. :16:8) is put back, cuBLAS not
    # having started yet
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    trainer = pl.Trainer(
        **kwargs,
        callbacks=callbacks,
        logger=False,  # MLflow is driven by nlpzoo.tracking; Lightning's loggers stay off
        enable_model_summary=False,
        use_distributed_sampler=False,  # nlpzoo.data.lm shards by rank itself (BPTT rows)
        num_sanity_val_steps=0,
        default_root_dir=str(ckpt_dir),
        plugins=plugins or None,
    )
    if cublas is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas
    return trainer
