"""What the `train` and `evaluate` stages do for a translation run (docs/design.md §2, §4), and the
`translate` command.

Layout written for run RUN (relative to the project root), as for the language models:

    models/RUN/      model.pt, spm.model (a copy: the model needs nothing else), config.json,
                     train_stats.json, mlflow_run.json
    plots/RUN.csv    learning curve (val_ppl: exact per-piece perplexity of the references)
    metrics/RUN.json BLEU (sacreBLEU and tokenized lowercase), chrF, greedy and beam, valid and
                     test; perplexity; decoding speed; training throughput
    eval/RUN/        hypotheses.txt (beam, test), hypotheses_greedy.txt, samples.json (ten test
                     sentences with source, reference, greedy and beam output), attention.json
                     (cross-attention of a few fixed test sentences, for the report's heatmaps)
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from nlpzoo.data.mt import IGNORE, Codec, load_split
from nlpzoo.io import atomic_dir, atomic_write_json, atomic_write_text
from nlpzoo.models import FAMILIES

log = logging.getLogger(__name__)

ATTENTION_SENTENCES = (0, 1, 2, 3)  # test sentences whose attention maps are written
SAMPLES = 10  # sample translations written to samples.json


class MTModule(pl.LightningModule):
    """Wraps a translation family; built from plain values so the checkpoint rebuilds it.

    Logs `train/loss` (the training objective, label-smoothed where configured) and, over the
    whole validation split, `val/loss` and `val/ppl`: the exact mean negative log-likelihood per
    reference piece (`</s>` included), without smoothing, summed over ranks."""

    def __init__(self, family: str, config: dict, vocab_size: int, run: str = "") -> None:
        super().__init__()
        self.save_hyperparameters()
        cfg_cls, model_cls = FAMILIES[family]
        self.cfg = cfg_cls(**config)
        self.model = model_cls(self.cfg, vocab_size)
        self.run = run
        self.tokens_seen = 0  # target pieces trained on (throughput)
        self._val = torch.zeros(2, dtype=torch.float64)  # Σ NLL, number of pieces

    def forward(self, src, tgt_in, labels=None):
        return self.model(src, tgt_in, labels)

    def _step(self, batch, split: str) -> torch.Tensor:
        src, tgt_in, labels = batch
        logits, loss = self.model(src, tgt_in, labels)
        n = int((labels != IGNORE).sum())
        if split == "train":
            self.tokens_seen += n
            self.log("train/loss", loss, on_step=True, on_epoch=True, batch_size=n)
        else:
            nll = F.cross_entropy(
                logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE, reduction="sum"
            )
            self._val = self._val.to(loss.device) + torch.stack(
                [nll.detach().double(), torch.tensor(float(n), device=loss.device).double()]
            )
        return loss

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx: int) -> None:
        self._step(batch, "val")

    def on_validation_epoch_start(self) -> None:
        self._val = torch.zeros(2, dtype=torch.float64, device=self.device)

    def on_validation_epoch_end(self) -> None:
        total = self.trainer.strategy.reduce(self._val, reduce_op="sum")
        nll = (total[0] / total[1].clamp(min=1)).float()
        self.log("val/loss", nll, sync_dist=False, rank_zero_only=False)
        self.log("val/ppl", torch.exp(nll), sync_dist=False, prog_bar=True)

    # resume (docs/design.md §8): RNG states travel in the checkpoint, as in training.FamilyModule
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        from nlpzoo.training import rng_state

        checkpoint["nlpzoo"] = {"rng": rng_state()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._rng_to_restore = checkpoint.get("nlpzoo", {}).get("rng")

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if getattr(self, "_rng_to_restore", None) is not None:  # first step after a resume
            from nlpzoo.training import set_rng_state

            set_rng_state(self._rng_to_restore)
            self._rng_to_restore = None

    def configure_optimizers(self):
        from nlpzoo.training import make_optimizer

        out = make_optimizer(self.model, self.cfg)
        beta2 = getattr(self.cfg, "adam_beta2", None)
        opt = out["optimizer"] if isinstance(out, dict) else out
        if beta2 is not None and isinstance(opt, torch.optim.Adam):
            for group in opt.param_groups:  # Vaswani et al. §5.3: β_1 = 0.9, β_2 = 0.98
                group["betas"] = (0.9, beta2)
        return out


# --------------------------------------------------------------------------- train


def train_mt(params: dict, spec, cfg, trainer_cfg, root: Path) -> dict:
    """Train translation run `spec.name`; writes `models/RUN/` and `plots/RUN.csv`."""
    from nlpzoo.config import build
    from nlpzoo.params import MlflowConfig
    from nlpzoo.runner import _params_for_tracking
    from nlpzoo.tracking import Tracker

    seed = int(params.get("seed", 0))
    data_dir = root / "data" / spec.data
    codec = Codec(data_dir / "spm.model")
    train_split, valid_split = (load_split(data_dir, s, codec) for s in ("train", "valid"))
    mlflow_cfg = build(MlflowConfig, params.get("mlflow"), "mlflow")
    tracker = Tracker.start(
        spec.name,
        spec.family,
        _params_for_tracking(spec, cfg, trainer_cfg, seed),
        experiment=mlflow_cfg.experiment,
    )
    out_dir = root / "models" / spec.name
    plots_path = root / "plots" / f"{spec.name}.csv"
    t0 = time.time()
    try:
        with atomic_dir(out_dir) as tmp:
            stats = _fit(
                spec,
                cfg,
                trainer_cfg,
                codec,
                train_split,
                valid_split,
                tmp,
                plots_path,
                root,
                tracker,
                seed,
            )
            stats["train_seconds"] = round(time.time() - t0, 2)
            shutil.copyfile(data_dir / "spm.model", tmp / "spm.model")
            atomic_write_json(
                tmp / "config.json",
                {
                    "run": spec.name,
                    "family": spec.family,
                    "data": spec.data,
                    "vocab_size": len(codec),
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


def _fit(
    spec,
    cfg,
    trainer_cfg,
    codec,
    train_split,
    valid_split,
    out_dir,
    plots_path,
    root,
    tracker,
    seed,
) -> dict:
    from nlpzoo.data.mt import MTDataModule
    from nlpzoo.training import fingerprint, make_trainer, prepare_resume

    torch.manual_seed(seed)  # the initial weights follow the params' seed
    module = MTModule(spec.family, asdict(cfg), len(codec), run=spec.name)
    data = MTDataModule(
        train_split,
        valid_split,
        cfg.batch_size,
        max_len=cfg.max_len,
        num_workers=trainer_cfg.num_workers,
        seed=seed,
    )
    ckpt_dir = root / "checkpoints" / spec.name
    # resume an interrupted run of the same params and data (docs/design.md §8), else start fresh
    settings = {
        "run": spec.name,
        "family": spec.family,
        "config": asdict(cfg),
        "trainer": trainer_cfg.result_settings(),
        "seed": seed,
        "vocab_size": len(codec),
    }
    sides = [side for split in (train_split, valid_split) for side in (split.src, split.tgt)]
    arrays = [np.array([len(s) for s in side]) for side in sides]  # sentence lengths ...
    arrays += [np.concatenate(side) for side in sides]  # ... and their ids
    resume = prepare_resume(ckpt_dir, fingerprint(settings, arrays))
    trainer = make_trainer(trainer_cfg, spec.name, plots_path, ckpt_dir, tracker, seed)
    t0 = time.time()
    trainer.fit(module, ckpt_path=resume, weights_only=True, datamodule=data)
    fit_seconds = time.time() - t0
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best and Path(best).is_file():
        state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
        module.load_state_dict(state)
    torch.save(
        {
            "family": spec.family,
            "config": asdict(cfg),
            "vocab_size": len(codec),
            "state_dict": module.model.state_dict(),
        },
        out_dir / "model.pt",
    )
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # a finished run leaves no scratch behind
    tokens = module.tokens_seen * max(trainer.world_size, 1)
    return {
        "params": int(sum(p.numel() for p in module.model.parameters())),
        "fit_seconds": round(fit_seconds, 2),
        "epochs": int(trainer.current_epoch),
        "train_target_tokens": int(tokens),
        "train_tokens_per_s": round(tokens / max(fit_seconds, 1e-9), 1),  # target pieces/s
        "train_pairs": len(data.train_ds),
    }


# --------------------------------------------------------------------------- evaluate


def load_mt_model(run_dir: Path) -> torch.nn.Module:
    from nlpzoo.errors import DataError

    path = Path(run_dir) / "model.pt"
    if not path.is_file():
        raise DataError(f"trained model not found: {path} (run `dvc repro train@{run_dir.name}`)")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    cfg_cls, model_cls = FAMILIES[blob["family"]]
    model = model_cls(cfg_cls(**blob["config"]), blob["vocab_size"])
    model.load_state_dict(blob["state_dict"])
    return model.eval()


@torch.no_grad()
def perplexity(model, split, batch_size: int = 64) -> float:
    """exp(mean NLL per reference piece, `</s>` included), teacher forced, no smoothing."""
    import math

    from nlpzoo.data.mt import collate

    order = sorted(range(len(split)), key=lambda i: len(split.src[i]))
    total, count = 0.0, 0
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src, tgt_in, labels = collate([(split.src[i], split.tgt[i]) for i in chunk])
        logits, _ = model(src, tgt_in)
        total += float(
            F.cross_entropy(
                logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE, reduction="sum"
            )
        )
        count += int((labels != IGNORE).sum())
    return math.exp(total / max(count, 1))


def _decode(model, codec, sources, cfg, beam_size: int, batch_size: int) -> tuple[list, float]:
    from nlpzoo.evaluation.decoding import translate_batches

    t0 = time.time()
    ids = translate_batches(
        model, sources, batch_size, beam_size, cfg.length_penalty, cfg.max_len_ratio
    )
    seconds = time.time() - t0
    return ids, len(sources) / max(seconds, 1e-9)


def evaluate_mt(params: dict, spec, cfg, root: Path, batch_size: int = 64) -> dict:
    """Score run `spec.name` on the valid and test splits; write metrics and eval artifacts."""
    from nlpzoo.evaluation.bleu import score
    from nlpzoo.models import TASKS
    from nlpzoo.tracking import Tracker

    name = spec.name
    run_dir = root / "models" / name
    data_dir = root / "data" / spec.data
    tracker = Tracker.resume(run_dir, name)
    t0 = time.time()
    model = load_mt_model(run_dir)
    codec = Codec(run_dir / "spm.model")
    tgt_lang = str((params.get("mt") or {}).get("tgt", "en"))
    metrics: dict[str, Any] = {}
    outputs: dict[str, list[str]] = {}
    beam_ids: list[list[int]] = []  # test, beam: reused for the attention maps
    test = None
    for split_name in ("valid", "test"):
        split = load_split(data_dir, split_name, codec)
        prefix = "" if split_name == "test" else "valid_"
        metrics[f"{split_name}_ppl"] = round(perplexity(model, split, batch_size), 4)
        for search, beam in (("greedy", 1), ("beam", cfg.beam_size)):
            ids, speed = _decode(model, codec, split.src, cfg, beam, batch_size)
            hyps = codec.decode(ids)
            scores = score(hyps, split.tgt_text, lang=tgt_lang)
            suffix = "" if search == "greedy" else "_beam"
            for key in ("bleu", "bleu_tok_lc", "chrf"):
                metrics[f"{prefix}{key}{suffix}"] = scores[key]
            if split_name == "test":
                metrics[f"decode_sents_per_s_{search}"] = round(speed, 2)
                outputs[search] = hyps
                if search == "beam":
                    beam_ids = ids
                metrics["bleu_signature"] = scores["bleu_signature"]
                metrics["chrf_signature"] = scores["chrf_signature"]
        if split_name == "test":
            test = split
    metrics["beam_size"] = cfg.beam_size
    metrics["eval_seconds"] = round(time.time() - t0, 2)
    metrics.update(json.loads((run_dir / "train_stats.json").read_text()))
    metrics.update(mlflow_run_id=tracker.run_id, family=spec.family, task=TASKS[spec.family])
    samples = [
        {
            "source": test.src_text[i],
            "reference": test.tgt_text[i],
            "greedy": outputs["greedy"][i],
            "beam": outputs["beam"][i],
        }
        for i in range(min(SAMPLES, len(test)))
    ]
    attention = _attention_maps(model, codec, test, beam_ids)
    eval_dir = root / "eval" / name
    with atomic_dir(eval_dir) as tmp:
        tracker.save(tmp)
        atomic_write_text(tmp / "hypotheses.txt", "".join(h + "\n" for h in outputs["beam"]))
        atomic_write_text(
            tmp / "hypotheses_greedy.txt", "".join(h + "\n" for h in outputs["greedy"])
        )
        atomic_write_json(tmp / "samples.json", samples)
        if attention:
            atomic_write_json(tmp / "attention.json", attention)
    metrics_path = root / "metrics" / f"{name}.json"
    atomic_write_json(metrics_path, metrics)
    tracker.log_params(
        {"bleu_signature": metrics["bleu_signature"], "chrf_signature": metrics["chrf_signature"]}
    )
    tracker.log_metrics({k: v for k, v in metrics.items() if k != "mlflow_run_id"})
    tracker.log_artifact(metrics_path)
    for artifact in ("samples.json", "hypotheses.txt", "attention.json"):
        tracker.log_artifact(eval_dir / artifact)
    tracker.finish()
    return metrics


@torch.no_grad()
def _attention_maps(model, codec, split, beam_ids: list[list[int]]) -> list[dict]:
    """Cross-attention over the source for a few fixed test sentences, teacher-forcing the
    model's own beam translation (`beam_ids`, the one in hypotheses.txt, not decoded again):
    Bahdanau's α, or the Transformer's last decoder layer averaged over heads. Rows: target
    pieces (each row is the step that emits it); columns: source pieces."""
    from nlpzoo.data.mt import collate
    from nlpzoo.data.vocab import EOS

    if not hasattr(model, "cross_attention"):
        return []
    out = []
    for i in ATTENTION_SENTENCES:
        if i >= len(split):
            break
        ids = list(beam_ids[i])
        src, tgt_in, _ = collate([(split.src[i], np.asarray(ids, dtype=np.int64))])  # (1, S)
        weights = model.cross_attention(src, tgt_in)[0]  # (T, S)
        out.append(
            {
                "index": i,
                "source_text": split.src_text[i],
                "translation": codec.decode([ids])[0],
                "source_tokens": codec.pieces(split.src[i]),  # columns
                "target_tokens": codec.pieces(ids) + codec.pieces([EOS]),  # rows
                "weights": [[round(float(w), 5) for w in row] for row in weights.tolist()],
            }
        )
    return out


# --------------------------------------------------------------------------- translate


def translate_lines(
    run_dir: Path, lines: list[str], beam_size: int | None = None, batch_size: int = 32
) -> list[str]:
    """Translate raw source lines with the trained run in `run_dir` (the `translate` command)."""
    model = load_mt_model(run_dir)
    codec = Codec(Path(run_dir) / "spm.model")
    cfg = model.config
    from nlpzoo.evaluation.decoding import translate_batches

    ids = translate_batches(
        model,
        codec.encode(lines),
        batch_size,
        beam_size or cfg.beam_size,
        cfg.length_penalty,
        cfg.max_len_ratio,
    )
    return codec.decode(ids)
