"""Translation (task `mt`): trained on the sentence pairs of `vocab/mt`, scored by BLEU and chrF.

Outputs of run RUN, beside those every run has (docs/design.md §4):

    models/RUN/spm.model   a copy of the SentencePiece model: the run needs nothing else
    plots/RUN.csv          val_ppl: exact per-piece perplexity of the references
    metrics/RUN.json       BLEU (sacreBLEU and tokenized lowercase) and chrF: test greedy and
                           beam, valid beam; perplexity; decoding speed; training throughput
    eval/RUN/              hypotheses.txt (beam, test), hypotheses_greedy.txt, samples.json (ten
                           test sentences with source, reference, greedy and beam output),
                           attention.json (cross-attention of a few fixed test sentences, for the
                           report's heatmaps; families with `Family.attention_maps`)

Also here: `translate`, what `python -m nlpzoo translate` runs.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nlpzoo.config import build
from nlpzoo.data.mt import IGNORE, Codec, ParallelSplit, collate, load_split
from nlpzoo.io import atomic_write_json, atomic_write_text
from nlpzoo.params_data import MTDataConfig
from nlpzoo.tasks import Data, Fitted, Run, Scores, Task

ATTENTION_SENTENCES = (0, 1, 2, 3)  # test sentences whose attention maps are written
SAMPLES = 10  # sample translations written to samples.json
BATCH_SIZE = 64  # sentences per batch when scoring and decoding


@dataclass
class MTData(Data):
    codec: Codec | None = None
    train: ParallelSplit | None = None
    valid: ParallelSplit | None = None
    spm_path: Path | None = None


class MTTask(Task):
    def load(self, run: Run) -> MTData:
        spm = run.data_dir / "spm.model"
        codec = Codec(spm)
        train, valid = (load_split(run.data_dir, s, codec) for s in ("train", "valid"))
        return MTData(len(codec), None, codec, train, valid, spm)

    def fingerprint(self, data: MTData) -> tuple[dict, list]:
        sides = [side for split in (data.train, data.valid) for side in (split.src, split.tgt)]
        arrays = [np.array([len(s) for s in side]) for side in sides]  # sentence lengths ...
        arrays += [np.concatenate(side) for side in sides]  # ... and their ids
        return {"vocab_size": data.vocab_size}, arrays

    def datamodule(self, run: Run, data: MTData) -> Any:
        from nlpzoo.data.mt import MTDataModule, position_limits
        from nlpzoo.evaluation.decoding import EXTRA

        cfg = run.config
        return MTDataModule(
            data.train,
            data.valid,
            cfg.batch_size,
            max_len=cfg.max_len,
            num_workers=run.trainer.num_workers,
            seed=run.seed,
            limits=position_limits(cfg, EXTRA),  # valid and test checked before any training
            test=load_split(run.data_dir, "test", data.codec),
        )

    def predictions(self, batch: Any) -> int:
        """Batches are (src, tgt_in, labels): a prediction per label that is not padding."""
        return int((batch[-1] != IGNORE).sum())

    def validation_nll(self, batch: Any, logits: Any, loss: Any) -> tuple[Any, int]:
        """The loss may be label-smoothed: the exact NLL of the references, from the logits."""
        labels = batch[-1]
        nll = F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        return nll.detach().double(), self.predictions(batch)

    def fit_stats(self, data: MTData, fitted: Fitted) -> dict:
        tokens = fitted.predictions
        return {
            "train_target_tokens": int(tokens),
            "train_tokens_per_s": round(tokens / max(fitted.seconds, 1e-9), 1),  # pieces/s
            "train_pairs": len(fitted.datamodule.train_ds),
        }

    def save(self, run: Run, data: MTData, model: Any, folder) -> None:
        shutil.copyfile(data.spm_path, folder / "spm.model")

    def evaluate(self, run: Run, model: Any) -> Scores:
        cfg = run.config
        codec = Codec(run.model_dir / "spm.model")
        tgt_lang = build(MTDataConfig, run.params.get("mt"), "mt").tgt
        metrics: dict[str, Any] = {}
        outputs: dict[str, list[str]] = {}
        beam_ids: list[list[int]] = []  # test, beam: reused for the attention maps
        test = None
        for split_name in ("valid", "test"):
            split = load_split(run.data_dir, split_name, codec)
            prefix = "" if split_name == "test" else "valid_"
            metrics[f"{split_name}_ppl"] = round(perplexity(model, split, BATCH_SIZE), 4)
            # the test split both ways (the report's greedy-vs-beam columns); the valid split
            # by beam search only, the decoding a reader tunes against
            searches = (("greedy", 1), ("beam", cfg.beam_size))
            for search, beam in searches if split_name == "test" else searches[1:]:
                ids, speed = _decode(model, split.src, cfg, beam, BATCH_SIZE)
                hyps = codec.decode(ids)
                scores = _bleu(hyps, split.tgt_text, tgt_lang)
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
        samples = [
            {
                "source": test.src_text[i],
                "reference": test.tgt_text[i],
                "greedy": outputs["greedy"][i],
                "beam": outputs["beam"][i],
            }
            for i in range(min(SAMPLES, len(test)))
        ]
        files = {
            "hypotheses.txt": _lines_file(outputs["beam"]),
            "hypotheses_greedy.txt": _lines_file(outputs["greedy"]),
            "samples.json": lambda path: atomic_write_json(path, samples),
        }
        artifacts = ("samples.json", "hypotheses.txt")
        if self.family.attention_maps:
            attention = _attention_maps(model, codec, test, beam_ids)
            files["attention.json"] = lambda path: atomic_write_json(path, attention)
            artifacts += ("attention.json",)
        tags = {k: metrics[k] for k in ("bleu_signature", "chrf_signature")}
        return Scores(metrics, files, artifacts, tags)


def _lines_file(lines: list[str]):
    return lambda path: atomic_write_text(path, "".join(line + "\n" for line in lines))


def _bleu(hyps: list[str], refs: list[str], lang: str) -> dict:
    from nlpzoo.evaluation.bleu import score

    return score(hyps, refs, lang=lang)


@torch.no_grad()
def perplexity(model, split: ParallelSplit, batch_size: int = BATCH_SIZE) -> float:
    """exp(mean NLL per reference piece, `</s>` included), teacher forced, no smoothing."""
    order = sorted(range(len(split)), key=lambda i: len(split.src[i]))
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = collate([(split.src[i], split.tgt[i]) for i in chunk])
        src, tgt_in, labels = (t.to(device) for t in batch)
        logits, _ = model(src, tgt_in)
        total += float(
            F.cross_entropy(
                logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE, reduction="sum"
            )
        )
        count += int((labels != IGNORE).sum())
    return math.exp(total / max(count, 1))


def _decode(model, sources, cfg, beam_size: int, batch_size: int) -> tuple[list, float]:
    from nlpzoo.evaluation.decoding import translate_batches

    t0 = time.time()
    ids = translate_batches(
        model, sources, batch_size, beam_size, cfg.length_penalty, cfg.max_len_ratio
    )
    seconds = time.time() - t0
    return ids, len(sources) / max(seconds, 1e-9)


@torch.no_grad()
def _attention_maps(model, codec: Codec, split: ParallelSplit, beam_ids: list[list[int]]):
    """Cross-attention over the source for a few fixed test sentences, teacher-forcing the
    model's own beam translation (`beam_ids`, the one in hypotheses.txt, not decoded again):
    Bahdanau's α, or the Transformer's last decoder layer averaged over heads. Rows: target
    pieces (each row is the step that emits it); columns: source pieces."""
    from nlpzoo.data.vocab import EOS

    device = next(model.parameters()).device
    out = []
    for i in ATTENTION_SENTENCES:
        if i >= len(split):
            break
        ids = list(beam_ids[i])
        src, tgt_in, _ = collate([(split.src[i], np.asarray(ids, dtype=np.int64))])  # (1, S)
        weights = model.cross_attention(src.to(device), tgt_in.to(device))[0].cpu()  # (T, S)
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


def translate(
    model: Any,
    codec: Codec,
    lines: list[str],
    beam_size: int | None = None,
    batch_size: int = 32,
    length_penalty: float | None = None,
) -> list[str]:
    """Translate raw source lines with a trained translation model and its SentencePiece model
    (`load_model(models/RUN)`, `Codec(models/RUN/spm.model)`): beam search as the evaluation
    decodes, the run's beam size and length penalty unless `beam_size` or `length_penalty` is
    given."""
    from nlpzoo.evaluation.decoding import translate_batches

    cfg = model.config
    ids = translate_batches(
        model,
        codec.encode(lines),
        batch_size,
        beam_size or cfg.beam_size,
        cfg.length_penalty if length_penalty is None else length_penalty,
        cfg.max_len_ratio,
    )
    return codec.decode(ids)


TASK = MTTask
