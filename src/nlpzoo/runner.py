"""What the `train`, `evaluate` and `report` stages do for one run (docs/design.md §2, §4, §5).

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
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from nlpzoo.config import build
from nlpzoo.data.vocab import Vocab, load_stream
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.io import atomic_dir, atomic_write_json, rank_zero_dir
from nlpzoo.models import FAMILIES, NEURAL, TASKS
from nlpzoo.params import (
    EvaluationConfig,
    MixtureConfig,
    MlflowConfig,
    RunSpec,
    TrainerConfig,
    parse_models,
    run_configs,
)

log = logging.getLogger(__name__)


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
    if TASKS[spec.family] == "mt":  # translation: its own data, module and metrics
        from nlpzoo.mt_runner import train_mt

        return train_mt(params, spec, cfg, trainer_cfg, root)
    seed = int(params.get("seed", 0))
    data_dir = root / "data" / spec.data
    task = TASKS[spec.family]
    if task not in ("lm", "vectors"):  # pragma: no cover - every family names a known task
        raise ConfigError(f"run '{name}': task {task} is not supported")
    data = _training_data(spec, data_dir)
    vocab = Vocab.load(data_dir / "vocab.txt")
    vocab_size = len(vocab)

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
        with rank_zero_dir(out_dir) as tmp:
            if spec.family == "ngram":
                stats = _train_ngram(cfg, vocab_size, data["train"], data["valid"], tmp, plots_path)
            elif spec.family not in NEURAL:
                stats = _train_closed_form(spec, cfg, vocab, data, tmp, plots_path)
            else:
                stats = _train_neural(
                    spec, cfg, trainer_cfg, vocab, data, tmp, plots_path, root, tracker, seed
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


def _training_data(spec: RunSpec, data_dir: Path) -> dict[str, Any]:
    """What the run's family trains on, from its data folder: the token streams (`train`,
    `valid`) of `vocab/lm`, or the co-occurrence entries (`rows`, `cols`, `vals`) of `cooccur`."""
    _, model_cls = FAMILIES[spec.family]
    kind = getattr(model_cls, "INPUT", "stream")
    if not (data_dir / "vocab.txt").is_file():
        raise DataError(
            f"run '{spec.name}': {data_dir / 'vocab.txt'} not found; models.{spec.name}.data "
            f"must name a data folder with a vocabulary (vocab/lm or cooccur)"
        )
    if kind == "cooccur":
        from nlpzoo.data.cooccur import load_cooccurrences

        rows, cols, vals, vocab_size = load_cooccurrences(data_dir / "cooccur.npz")
        n_words = len(Vocab.load(data_dir / "vocab.txt"))
        if vocab_size != n_words:
            raise DataError(
                f"run '{spec.name}': {data_dir / 'cooccur.npz'} is for {vocab_size} words but "
                f"{data_dir / 'vocab.txt'} has {n_words}; rerun the cooccur stage"
            )
        if vals.size == 0:
            raise DataError(f"run '{spec.name}': the co-occurrence matrix is empty")
        return {"rows": rows, "cols": cols, "vals": vals}
    if not (data_dir / "train.npy").is_file():
        raise DataError(
            f"run '{spec.name}': family {spec.family} trains on a token stream, but "
            f"{data_dir} has none (models.{spec.name}.data should be vocab/lm)"
        )
    out = {"train": load_stream(data_dir, "train")}
    if TASKS[spec.family] == "lm":
        out["valid"] = load_stream(data_dir, "valid")
    return out


def _train_closed_form(spec: RunSpec, cfg, vocab: Vocab, data: dict, out_dir, plots_path):
    """Families fit without gradient steps (PPMI-SVD): fit, save `model.npz`, one curve row."""
    from nlpzoo.evaluation.vectors import write_word2vec_text
    from nlpzoo.io import atomic_open

    _, model_cls = FAMILIES[spec.family]
    t0 = time.time()
    model = model_cls(cfg, len(vocab)).fit(data["rows"], data["cols"], data["vals"])
    fit_seconds = time.time() - t0
    model.save(out_dir / "model.npz")
    write_word2vec_text(out_dir / "vectors.txt", vocab.words, model.embeddings())
    with atomic_open(plots_path) as f:
        f.write("epoch,step,train_loss,val_loss,val_ppl,seconds\n")
        f.write(f"0,0,,,,{fit_seconds:.2f}\n")
    return {
        "params": model.num_parameters(),
        "fit_seconds": round(fit_seconds, 2),
        "tokens_seen": int(data["vals"].size),
        "epochs": 1,
    }


def _check_context(stream: np.ndarray, context: int, split: str, run: str, rows: int = 1) -> None:
    """A split must hold one example: `context` + 1 tokens, in each of the `rows` parallel rows
    a recurrent model cuts the stream into (its batch_size)."""
    if stream.size < rows * (context + 1):
        need = f"{rows} rows x ({context} + 1)" if rows > 1 else f"{context} + 1"
        smaller = "batch_size or bptt" if rows > 1 else "context"
        raise DataError(
            f"run '{run}': the {split} split has {stream.size} tokens, fewer than the model's "
            f"context of {need} tokens; use a larger split or a smaller {smaller}"
        )


def _rows_of(model_cls, cfg) -> int:
    """Parallel rows of the stream: batch_size for recurrent models (BPTTBlocks), else 1."""
    return cfg.batch_size if getattr(model_cls, "STATEFUL", False) else 1


def _context_of(cfg) -> int:
    """Tokens one training example spans: the window, the BPTT length or the block."""
    for key in ("context_size", "bptt", "block_size"):
        if hasattr(cfg, key):
            return getattr(cfg, key)
    return 1


def _train_neural(
    spec, cfg, trainer_cfg, vocab, data, out_dir, plots_path, root, tracker, seed
) -> dict:
    import torch

    from nlpzoo.training import FamilyModule, fingerprint, make_trainer, prepare_resume

    _, model_cls = FAMILIES[spec.family]
    stream_rows = _rows_of(model_cls, cfg)
    is_lm = TASKS[spec.family] == "lm"
    if is_lm:
        for split in ("train", "valid"):
            _check_context(data[split], _context_of(cfg), split, spec.name, stream_rows)
    torch.manual_seed(seed)  # the initial weights follow the params' seed
    module = FamilyModule(spec.family, asdict(cfg), len(vocab), run=spec.name, counts=vocab.counts)
    datamodule = _datamodule(model_cls, cfg, data, vocab, trainer_cfg.num_workers, seed)
    ckpt_dir = root / "checkpoints" / spec.name
    # resume an interrupted run of the same params and data (docs/design.md §8), else start fresh
    settings = {
        "run": spec.name,
        "family": spec.family,
        "config": asdict(cfg),
        "trainer": trainer_cfg.result_settings(),
        "seed": seed,
        "counts": list(vocab.counts),
    }
    arrays = [np.asarray(data[k]) for k in sorted(data)]
    resume = prepare_resume(ckpt_dir, fingerprint(settings, arrays))
    trainer = make_trainer(
        trainer_cfg, spec.name, plots_path, ckpt_dir, tracker, seed, validate=is_lm
    )
    t0 = time.time()
    trainer.fit(module, ckpt_path=resume, weights_only=True, datamodule=datamodule)
    fit_seconds = time.time() - t0
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best and Path(best).is_file():
        state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
        module.load_state_dict(state)
    torch.save(
        {
            "family": spec.family,
            "config": asdict(cfg),
            "vocab_size": len(vocab),
            "counts": list(vocab.counts),
            "state_dict": module.model.state_dict(),
        },
        out_dir / "model.pt",
    )
    if hasattr(module.model, "embeddings"):  # loadable by gensim and the original word2vec tools
        from nlpzoo.evaluation.vectors import write_word2vec_text

        vectors = module.model.embeddings().float().cpu().numpy()
        write_word2vec_text(out_dir / "vectors.txt", vocab.words, vectors)
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # a finished run leaves no scratch behind
    epochs = trainer.current_epoch
    train_batches = len(datamodule.loaders[0]) if datamodule.loaders else 0
    # what one epoch runs through: the training tokens, or GloVe's non-zero entries
    units = data["vals"] if "vals" in data else data["train"]
    tokens_per_epoch = int(units.size) // max(trainer.world_size, 1)
    limit = trainer_cfg.limit_train_batches
    fraction = (
        min(limit, 1.0)
        if isinstance(limit, float)
        else min(limit, train_batches) / max(train_batches, 1)
    )
    stats = {
        "params": int(sum(p.numel() for p in module.model.parameters())),
        "fit_seconds": round(fit_seconds, 2),
        "epochs": int(epochs),
        "tokens_seen": int(tokens_per_epoch * trainer.world_size * epochs * fraction),
    }
    if hasattr(module.model, "cost_per_token"):
        stats["cost_per_token"] = int(module.model.cost_per_token(len(vocab)))
    return stats


def _datamodule(model_cls, cfg, data: dict, vocab: Vocab, num_workers: int, seed: int):
    """The Lightning data module for the family's INPUT: LM streams and windows, word2vec's
    (contexts, centre) batches, or GloVe's co-occurrence entries."""
    from nlpzoo.data.lm import LMDataModule, TrainOnlyDataModule

    kind = getattr(model_cls, "INPUT", "stream")
    if kind == "pairs":
        from nlpzoo.data.word2vec import word2vec_dataloader

        def make(rank: int, world: int):
            return word2vec_dataloader(
                cfg, data["train"], vocab.counts, rank, world, seed, num_workers
            )

        return TrainOnlyDataModule(make)
    if kind == "cooccur":
        from nlpzoo.data.glove import cooccur_dataloader

        def make(rank: int, world: int):
            return cooccur_dataloader(
                data["rows"],
                data["cols"],
                data["vals"],
                cfg.batch_size,
                rank,
                world,
                seed,
                num_workers,
            )

        return TrainOnlyDataModule(make)
    return LMDataModule(
        model_cls, cfg, data["train"], data["valid"], num_workers=num_workers, seed=seed
    )


# --------------------------------------------------------------------------- evaluate


def load_neural(run_dir: Path):
    import torch

    blob = torch.load(run_dir / "model.pt", map_location="cpu", weights_only=True)
    cfg_cls, model_cls = FAMILIES[blob["family"]]
    model = model_cls(cfg_cls(**blob["config"]), blob["vocab_size"], counts=blob.get("counts"))
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def _vocab_words(data_dir: Path) -> list[str]:
    return Vocab.load(data_dir / "vocab.txt").words


def evaluate(params: dict, name: str, root: Path) -> dict:
    """Score run `name` with every part of the protocol its family allows; write
    `metrics/NAME.json` and `eval/NAME/`, and log to the run's MLflow run.

    Language models: valid/test perplexity, with per-token log-probabilities kept in
    `eval/NAME/logprobs.npz` so that mixtures with the n-gram need no rescoring. Every run with
    word vectors (the LMs' input embeddings included): analogy, similarity, nearest neighbours.
    """
    from nlpzoo.tracking import Tracker

    spec, cfg, _ = run_configs(params, name)
    if TASKS[spec.family] == "mt":
        from nlpzoo.mt_runner import evaluate_mt

        return evaluate_mt(params, spec, cfg, root)
    ev = build(EvaluationConfig, params.get("evaluation"), "evaluation")
    run_dir = root / "models" / name
    data_dir = root / "data" / spec.data
    tracker = Tracker.resume(run_dir, name)
    metrics: dict[str, Any] = {}
    t0 = time.time()
    model = _load_model(spec, run_dir)
    logprobs = _score_lm(model, spec, cfg, data_dir, metrics) if TASKS[spec.family] == "lm" else {}
    neighbours = None
    vectors = model.embeddings() if hasattr(model, "embeddings") else None
    if vectors is not None:
        words = _vocab_words(data_dir)
        neighbours = _score_vectors(words, np.asarray(vectors, dtype=np.float32), root, ev, metrics)
    metrics["eval_seconds"] = round(time.time() - t0, 2)
    metrics.update(json.loads((run_dir / "train_stats.json").read_text()))
    metrics.update(mlflow_run_id=tracker.run_id, family=spec.family, task=TASKS[spec.family])
    with atomic_dir(root / "eval" / name) as tmp:
        tracker.save(tmp)  # later stages (mixtures) reopen the run from here
        if logprobs:
            np.savez_compressed(
                tmp / "logprobs.npz", **{k: v.astype(np.float32) for k, v in logprobs.items()}
            )
        if neighbours is not None:
            atomic_write_json(tmp / "neighbours.json", neighbours)
    metrics_path = root / "metrics" / f"{name}.json"
    atomic_write_json(metrics_path, metrics)
    tracker.log_metrics({k: v for k, v in metrics.items() if k != "mlflow_run_id"})
    tracker.log_artifact(metrics_path)
    if neighbours is not None:
        tracker.log_artifact(root / "eval" / name / "neighbours.json")
    tracker.finish()
    return metrics


def _load_model(spec: RunSpec, run_dir: Path):
    if spec.family == "ngram":
        from nlpzoo.models.ngram import KneserNey

        return KneserNey.load(run_dir / "ngram.npz")
    if spec.family not in NEURAL:
        _, model_cls = FAMILIES[spec.family]
        return model_cls.load(run_dir / "model.npz")
    return load_neural(run_dir)


def _score_lm(model, spec: RunSpec, cfg, data_dir: Path, metrics: dict) -> dict:
    from nlpzoo.evaluation.perplexity import lm_log_probs, perplexity

    logprobs = {}
    for split in ("valid", "test"):
        stream = load_stream(data_dir, split)
        if spec.family == "ngram":
            logprobs[split] = model.log_probs(stream)
        else:
            logprobs[split] = lm_log_probs(model, stream, cfg)
        metrics[f"{split}_ppl"] = round(perplexity(logprobs[split]), 4)
        metrics[f"{split}_tokens"] = int(stream.size)
    return logprobs


def _score_vectors(words, vectors, root: Path, ev: EvaluationConfig, metrics: dict) -> dict:
    """Analogy (3CosAdd) and similarity (Spearman ρ) on the sets fetched by `corpus@eval`."""
    from nlpzoo.evaluation.analogy import evaluate_analogies
    from nlpzoo.evaluation.similarity import evaluate_similarity
    from nlpzoo.evaluation.vectors import nearest_neighbours

    raw = root / "data" / "raw" / "eval"
    for name in ("questions-words.txt", "wordsim353.tsv", "simlex999.txt"):
        if not (raw / name).is_file():
            raise DataError(f"evaluation set not found: {raw / name} (run `dvc repro corpus@eval`)")
    analogy = evaluate_analogies(
        words, vectors, raw / "questions-words.txt", restrict_vocab=ev.restrict_vocab
    )
    metrics.update({k: v for k, v in analogy.items() if not isinstance(v, dict)})
    metrics.update(evaluate_similarity(words, vectors, raw / "wordsim353.tsv", "ws353"))
    metrics.update(evaluate_similarity(words, vectors, raw / "simlex999.txt", "simlex"))
    return nearest_neighbours(words, vectors, ev.probes, k=ev.neighbours)


# --------------------------------------------------------------------------- mixtures


def mixtures(params: dict, root: Path) -> dict:
    """Bengio et al. (2003) mixtures: p = λ p_run + (1 − λ) p_baseline for every other LM run,
    λ chosen on the validation split; written to `metrics/mixtures.json` and to each run's
    MLflow run as `test_ppl_mix`."""
    from nlpzoo.evaluation.mixture import choose_lambda, mix_log_probs
    from nlpzoo.evaluation.perplexity import perplexity
    from nlpzoo.tracking import Tracker

    cfg = build(MixtureConfig, params.get("mixture"), "mixture")
    specs = parse_models(params)
    out: dict[str, Any] = {}
    base_path = root / "eval" / cfg.baseline / "logprobs.npz"
    if cfg.baseline in specs and base_path.is_file():
        base = np.load(base_path)
        for name, spec in specs.items():
            path = root / "eval" / name / "logprobs.npz"
            if name == cfg.baseline or TASKS[spec.family] != "lm" or not path.is_file():
                continue
            lp = np.load(path)
            lam = choose_lambda(lp["valid"].astype(np.float64), base["valid"].astype(np.float64))
            mixed = {
                s: mix_log_probs(lp[s].astype(np.float64), base[s].astype(np.float64), lam)
                for s in ("valid", "test")
            }
            out[name] = {
                "lambda": round(float(lam), 4),
                "valid_ppl_mix": round(perplexity(mixed["valid"]), 4),
                "test_ppl_mix": round(perplexity(mixed["test"]), 4),
            }
            tracker = Tracker.resume(root / "eval" / name, name)
            tracker.log_metrics(
                {
                    "test_ppl_mix": out[name]["test_ppl_mix"],
                    "valid_ppl_mix": out[name]["valid_ppl_mix"],
                    "mix_lambda": out[name]["lambda"],
                }
            )
    atomic_write_json(root / "metrics" / "mixtures.json", {"baseline": cfg.baseline, "runs": out})
    return out
