"""What the `train`, `evaluate` and `report` stages do for one run (DESIGN §1, §5, §6).

Layout written for run RUN (every path relative to the project root):

    models/RUN/            model.pt (or ngram.npz), config.json, train_stats.json, mlflow_run.json
    eval/RUN/              evaluation artifacts (a sibling of models/RUN, which DVC tracks whole)
    plots/RUN.csv          learning curve (epoch, step, train_loss, val_loss, val_ppl, seconds)
    metrics/RUN.json       flat metrics, the same keys that go to MLflow
    checkpoints/RUN/       Lightning checkpoints while training; removed when the run finishes
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlpzoo.config import build, closest
from nlpzoo.data.vocab import LMVocabConfig, MTVocabConfig, load_stream
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.io import atomic_dir, atomic_write_json
from nlpzoo.models import FAMILIES, NEURAL, TASKS
from nlpzoo.training import TrainerConfig

log = logging.getLogger(__name__)

# top-level params sections other than the runs themselves
SECTIONS = (
    "seed",
    "models",
    "corpus",
    "lm",
    "mt",
    "vocab",
    "cooccur",
    "trainer",
    "mlflow",
    "report",
)


@dataclass
class RunSpec:
    """One entry of `models:` — the run's family and the data folder (under `data/`) it reads."""

    name: str
    family: str
    data: str


@dataclass
class MlflowConfig:
    experiment: str = "nlpzoo"


def parse_models(params: dict) -> dict[str, RunSpec]:
    models = params.get("models")
    if not isinstance(models, dict) or not models:
        raise ConfigError("params: `models` must map each run name to {family: ..., data: ...}")
    specs = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or set(entry) != {"family", "data"}:
            raise ConfigError(
                f"run '{name}': models.{name} must be {{family: NAME, data: FOLDER}}, got {entry!r}"
            )
        family = entry["family"]
        if family not in FAMILIES:
            hint = closest(str(family), FAMILIES)
            raise ConfigError(
                f"run '{name}': unknown family '{family}'"
                + (f"; did you mean '{hint}'?" if hint else "")
                + f" (families: {', '.join(sorted(FAMILIES))})"
            )
        specs[name] = RunSpec(name, family, entry["data"])
    return specs


def run_configs(params: dict, name: str) -> tuple[RunSpec, Any, TrainerConfig]:
    """Validate one run's sections: its `models:` entry, its own section, the trainer settings."""
    specs = parse_models(params)
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
    cfg_cls, _ = FAMILIES[spec.family]
    cfg = build(cfg_cls, section, f"run '{name}'", ignore=("family", "trainer"))
    for where, value in (
        ("trainer", params.get("trainer")),
        (f"{name}.trainer", section.get("trainer")),
    ):
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"run '{name}': section `{where}` must be a mapping, got {value!r}")
    trainer_section = dict(params.get("trainer") or {})
    trainer_section.update(section.get("trainer") or {})
    trainer_cfg = build(TrainerConfig, trainer_section, f"run '{name}' (trainer)")
    return spec, cfg, trainer_cfg


def validate_params(params: dict) -> None:
    """Check the whole params file before any stage does work."""
    if not isinstance(params, dict):
        raise ConfigError("params.yaml must be a mapping of sections")
    specs = parse_models(params)
    for key in params:
        if key not in SECTIONS and key not in specs:
            hint = closest(key, list(SECTIONS) + list(specs))
            raise ConfigError(
                f"params: unknown section '{key}'"
                + (f"; did you mean '{hint}'?" if hint else "")
                + " (a run's section needs an entry in `models:`)"
            )
    seed = params.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError("params: key 'seed' must be an integer")
    for name in specs:
        run_configs(params, name)
    build(MlflowConfig, params.get("mlflow"), "mlflow")
    vocab = params.get("vocab") or {}
    build(LMVocabConfig, vocab.get("lm"), "vocab.lm")
    build(MTVocabConfig, vocab.get("mt"), "vocab.mt")


# --------------------------------------------------------------------------- train


def _params_for_tracking(spec: RunSpec, cfg: Any, trainer_cfg: TrainerConfig, seed: int) -> dict:
    out = {"run": spec.name, "family": spec.family, "data": spec.data, "seed": seed}
    out.update(asdict(cfg))
    if spec.family in NEURAL:
        out["trainer"] = asdict(trainer_cfg)
    return out


def train(params: dict, name: str, root: Path) -> dict:
    """Train run `name`; writes `models/NAME/` and `plots/NAME.csv`."""
    from nlpzoo.tracking import Tracker

    spec, cfg, trainer_cfg = run_configs(params, name)
    seed = int(params.get("seed", 0))
    data_dir = root / "data" / spec.data
    if TASKS[spec.family] == "lm":
        train_stream = load_stream(data_dir, "train")
        valid_stream = load_stream(data_dir, "valid")
        vocab_size = _vocab_size(data_dir)
    else:  # pragma: no cover - other tasks arrive with their families
        raise ConfigError(f"run '{name}': task {TASKS[spec.family]} is not supported yet")

    mlflow_cfg = build(MlflowConfig, params.get("mlflow"), "mlflow")
    tracker = Tracker.start(
        name,
        spec.family,
        _params_for_tracking(spec, cfg, trainer_cfg, seed),
        experiment=mlflow_cfg.experiment,
    )
    out_dir = root / "models" / name
    plots_path = root / "plots" / f"{name}.csv"
    t0 = time.time()
    try:
        with atomic_dir(out_dir) as tmp:
            if spec.family == "ngram":
                stats = _train_ngram(cfg, vocab_size, train_stream, valid_stream, tmp, plots_path)
            else:
                stats = _train_neural(
                    spec,
                    cfg,
                    trainer_cfg,
                    vocab_size,
                    train_stream,
                    valid_stream,
                    tmp,
                    plots_path,
                    root,
                    tracker,
                    seed,
                )
            stats["train_seconds"] = round(time.time() - t0, 2)
            stats["train_tokens_per_s"] = round(
                stats.pop("tokens_seen") / max(stats["fit_seconds"], 1e-9), 1
            )
            atomic_write_json(
                tmp / "config.json",
                {
                    "run": name,
                    "family": spec.family,
                    "data": spec.data,
                    "vocab_size": vocab_size,
                    "config": asdict(cfg),
                    "seed": seed,
                },
            )
            atomic_write_json(tmp / "train_stats.json", stats)
            tracker.save(tmp)
    except BaseException:
        tracker.finish("FAILED")
        raise
    tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, (int, float))})
    tracker.log_artifact(plots_path)
    tracker.finish()
    return stats


def _vocab_size(data_dir: Path) -> int:
    stats_path = data_dir / "stats.json"
    if not stats_path.is_file():
        raise DataError(f"vocabulary statistics not found: {stats_path} (run the vocab stage)")
    return int(json.loads(stats_path.read_text())["vocab_size"])


def _train_ngram(cfg, vocab_size, train_stream, valid_stream, out_dir, plots_path) -> dict:
    from nlpzoo.io import atomic_open
    from nlpzoo.models.ngram import KneserNey

    t0 = time.time()
    model = KneserNey(cfg, vocab_size).fit(train_stream)
    fit_seconds = time.time() - t0
    model.save(out_dir / "ngram.npz")
    val_ppl = model.perplexity(valid_stream)
    with atomic_open(plots_path) as f:  # a count model has one point on its "curve"
        f.write("epoch,step,train_loss,val_loss,val_ppl,seconds\n")
        f.write(f"0,0,,{math.log(val_ppl):.6f},{val_ppl:.4f},{fit_seconds:.2f}\n")
    return {
        "params": model.num_parameters(),
        "fit_seconds": round(fit_seconds, 2),
        "tokens_seen": int(train_stream.size),
        "epochs": 1,
    }


def _check_context(stream: np.ndarray, context: int, split: str, run: str) -> None:
    if stream.size <= context:
        raise DataError(
            f"run '{run}': the {split} split has {stream.size} tokens, fewer than the model's "
            f"context of {context} + 1"
        )


def _train_neural(
    spec,
    cfg,
    trainer_cfg,
    vocab_size,
    train_stream,
    valid_stream,
    out_dir,
    plots_path,
    root,
    tracker,
    seed,
) -> dict:
    import torch
    from torch.utils.data import DataLoader

    from nlpzoo.data.lm import ContextWindows, collate_batched
    from nlpzoo.training import FamilyModule, make_trainer

    for split, stream in (("train", train_stream), ("valid", valid_stream)):
        _check_context(stream, cfg.context_size, split, spec.name)
    train_ds = ContextWindows(train_stream, cfg.context_size)
    valid_ds = ContextWindows(valid_stream, cfg.context_size)
    loader = lambda ds, shuffle: DataLoader(  # noqa: E731
        ds,
        batch_size=cfg.batch_size,
        shuffle=shuffle,
        collate_fn=collate_batched,
        num_workers=trainer_cfg.num_workers,
        persistent_workers=trainer_cfg.num_workers > 0,
    )
    module = FamilyModule(spec.family, asdict(cfg), vocab_size, run=spec.name)
    ckpt_dir = root / "checkpoints" / spec.name
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    trainer = make_trainer(trainer_cfg, spec.name, plots_path, ckpt_dir, tracker, seed)
    t0 = time.time()
    trainer.fit(module, loader(train_ds, True), loader(valid_ds, False))
    fit_seconds = time.time() - t0
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best and Path(best).is_file():
        state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
        module.load_state_dict(state)
    torch.save(
        {
            "family": spec.family,
            "config": asdict(cfg),
            "vocab_size": vocab_size,
            "state_dict": module.model.state_dict(),
        },
        out_dir / "model.pt",
    )
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # a finished run leaves no scratch behind
    epochs = trainer.current_epoch
    n_params = sum(p.numel() for p in module.model.parameters())
    stats = {
        "params": int(n_params),
        "fit_seconds": round(fit_seconds, 2),
        "epochs": int(epochs),
        "tokens_seen": int(
            len(train_ds) * epochs * _fraction(trainer_cfg, len(train_ds), cfg.batch_size)
        ),
    }
    if hasattr(module.model, "cost_per_token"):
        stats["cost_per_token"] = int(module.model.cost_per_token(vocab_size))
    return stats


def _fraction(trainer_cfg: TrainerConfig, n: int, batch_size: int) -> float:
    limit = trainer_cfg.limit_train_batches
    batches = math.ceil(n / batch_size)
    if isinstance(limit, float):
        return min(limit, 1.0)
    return min(limit, batches) / batches


# --------------------------------------------------------------------------- evaluate


def load_neural(run_dir: Path):
    import torch

    blob = torch.load(run_dir / "model.pt", map_location="cpu", weights_only=True)
    cfg_cls, model_cls = FAMILIES[blob["family"]]
    model = model_cls(cfg_cls(**blob["config"]), blob["vocab_size"])
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def evaluate(params: dict, name: str, root: Path) -> dict:
    """Score run `name` on valid and test; write `metrics/NAME.json` and log to its MLflow run."""
    from nlpzoo.evaluation.perplexity import perplexity, window_log_probs
    from nlpzoo.tracking import Tracker

    spec, cfg, _ = run_configs(params, name)
    run_dir = root / "models" / name
    data_dir = root / "data" / spec.data
    tracker = Tracker.resume(run_dir, name)
    metrics: dict[str, Any] = {}
    t0 = time.time()
    if spec.family == "ngram":
        from nlpzoo.models.ngram import KneserNey

        model = KneserNey.load(run_dir / "ngram.npz")
        score = model.log_probs
    else:
        model = load_neural(run_dir)
        score = lambda s: window_log_probs(model, s, cfg.context_size)  # noqa: E731
    for split in ("valid", "test"):
        stream = load_stream(data_dir, split)
        lp = score(stream)
        metrics[f"{split}_ppl"] = round(perplexity(lp), 4)
        metrics[f"{split}_tokens"] = int(stream.size)
    metrics["eval_seconds"] = round(time.time() - t0, 2)
    train_stats = json.loads((run_dir / "train_stats.json").read_text())
    metrics.update(train_stats)
    metrics["mlflow_run_id"] = tracker.run_id
    metrics["family"] = spec.family
    with atomic_dir(root / "eval" / name) as tmp:
        atomic_write_json(tmp / "summary.json", {"run": name, "family": spec.family})
    metrics_path = root / "metrics" / f"{name}.json"
    atomic_write_json(metrics_path, metrics)
    tracker.log_metrics({k: v for k, v in metrics.items() if k != "mlflow_run_id"})
    tracker.log_artifact(metrics_path)
    tracker.finish()
    return metrics
