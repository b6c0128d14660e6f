"""A user's parallel corpus: empty and over-long pairs are dropped from training (counted, the
first ones named) and refused in valid and test (file and line), all before any training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from nlpzoo import lifecycle
from nlpzoo.data.mt import (
    MTDataModule,
    ParallelSplit,
    check_scored,
    collate,
    position_limits,
)
from nlpzoo.data.prepare import copy_user_files, prepare_mt
from nlpzoo.errors import DataError, TrainingError
from nlpzoo.evaluation.decoding import EXTRA
from nlpzoo.families import FAMILIES
from nlpzoo.params_data import MTDataConfig
from nlpzoo.tracking import Tracker
from nlpzoo.training.callbacks import NonFiniteLoss
from nlpzoo.use.answers import longest_source
from toy import inactive, make_mt_project, tiny_params


def write(path: Path, lines: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def user_corpus(tmp_path: Path, **edits: dict[int, tuple[str, str]]) -> dict[str, list[str]]:
    """Parallel files of 6 / 3 / 3 pairs; `edits[split][i] = (src, tgt)` replaces pair i."""
    files = {}
    for split, n in (("train", 6), ("valid", 3), ("test", 3)):
        pairs = [(f"Ein Satz {i} .", f"A sentence {i} .") for i in range(n)]
        for i, pair in edits.get(split, {}).items():
            pairs[i] = pair
        files[split] = [
            write(tmp_path / "user" / f"{split}.{lang}", [p[k] for p in pairs])
            for k, lang in enumerate(("de", "en"))
        ]
    return files


def prepare(tmp_path: Path, files: dict) -> dict:
    raw = tmp_path / "raw"
    copy_user_files(files, raw, "parallel")
    return prepare_mt(MTDataConfig(source="parallel", files=files), raw, tmp_path / "prepared")


# --------------------------------------------------------------------------- prepare


def test_train_pairs_with_an_empty_side_are_dropped_counted_and_named(tmp_path, caplog):
    files = user_corpus(tmp_path, train={1: ("", "A lone target ."), 4: ("Ein Satz .", "  ")})
    with caplog.at_level(logging.WARNING, logger="nlpzoo.data.prepare"):
        stats = prepare(tmp_path, files)
    assert stats["train"] == 4 and stats["train_empty_pairs_dropped"] == 2
    out = tmp_path / "prepared"
    assert json.loads((out / "stats.json").read_text()) == stats
    src = (out / "train.src").read_text().splitlines()
    tgt = (out / "train.tgt").read_text().splitlines()
    assert src == ["Ein Satz 0 .", "Ein Satz 2 .", "Ein Satz 3 .", "Ein Satz 5 ."]
    assert tgt == ["A sentence 0 .", "A sentence 2 .", "A sentence 3 .", "A sentence 5 ."]
    (line,) = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert "dropped 2 pair(s)" in line
    assert f"{files['train'][0]}:2" in line and f"{files['train'][1]}:5" in line


def test_clean_corpus_stats_are_as_before(tmp_path):
    stats = prepare(tmp_path, user_corpus(tmp_path))
    assert stats == {"src": "de", "tgt": "en", "train": 6, "valid": 3, "test": 3}


@pytest.mark.parametrize("split", ["valid", "test"])
@pytest.mark.parametrize(("pair", "side"), [(("", "A ."), 0), (("Ein .", ""), 1)])
def test_an_empty_valid_or_test_pair_is_refused_naming_file_and_line(tmp_path, split, pair, side):
    files = user_corpus(tmp_path, **{split: {2: pair}})
    with pytest.raises(DataError, match=f"{split} pair at line 3") as err:
        prepare(tmp_path, files)
    assert f"{files[split][side]}:3" in str(err.value)
    assert "never dropped" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "prepared").exists()


# --------------------------------------------------------------------------- positions


def test_position_limits_match_what_the_models_take():
    transformer = FAMILIES["transformer"].config()
    decoder = FAMILIES["decoder_mt"].config()
    # docs/design.md §7: 164 pieces translate with the encoder–decoder, 98 with decoder-only
    assert position_limits(transformer, EXTRA) == (255, 164)
    assert position_limits(decoder, EXTRA) == (127, 98)
    assert position_limits(FAMILIES["attention"].config(), EXTRA) is None


@pytest.mark.parametrize("family", ["transformer", "decoder_mt"])
def test_pairs_at_the_limits_fit_the_model_and_one_more_piece_does_not(family):
    """A batch of pairs whose sides are at the limit runs, one piece more does not; the longest
    source translated is the serving limit's."""
    cfg = FAMILIES[family].config(
        d_model=8, heads=2, num_layers=1, d_ff=8, max_positions=24, dropout=0.0
    )
    side, translated = position_limits(cfg, EXTRA)
    model = FAMILIES[family].model_class()(cfg, 30).eval()
    src, tgt = np.full(side, 7), np.full(side, 8)
    batch = collate([(src, tgt), (src[:1], tgt), (src, tgt[:1])])
    _, loss = model(*batch)
    assert torch.isfinite(loss)
    with pytest.raises(ValueError, match="max_positions"):
        model(*collate([(src, np.full(side + 1, 8))]))  # a target piece more
    assert translated == longest_source(model)  # what a served model translates


def split_of(lengths: list[tuple[int, int]], path: Path) -> ParallelSplit:
    src = [np.full(n, 7) for n, _ in lengths]
    tgt = [np.full(m, 8) for _, m in lengths]
    return ParallelSplit([""] * len(src), [""] * len(tgt), src, tgt, (path, path))


@pytest.mark.parametrize(
    ("lengths", "why"),
    [
        ([(3, 3), (0, 4)], "no SentencePiece piece"),
        ([(3, 3), (4, 21)], "target 21"),  # a side beyond the table
        ([(3, 3), (15, 3)], "source 15 pieces"),  # scored, but not translated
    ],
)
def test_a_valid_pair_the_model_cannot_score_is_refused_with_file_and_line(lengths, why):
    limits = (20, 14)
    with pytest.raises(
        DataError, match=f"valid pair at data/valid.src:2 cannot be scored: .*{why}"
    ):
        check_scored(split_of(lengths, Path("data/valid.src")), "valid", limits)
    check_scored(split_of([(14, 20)], Path("v")), "valid", limits)  # at the limits: kept


def test_datamodule_drops_unfit_training_pairs_and_checks_valid_and_test(caplog):
    train = split_of([(3, 3), (0, 3), (21, 3), (20, 20), (5, 2)], Path("data/train.src"))
    valid = split_of([(2, 2)], Path("data/valid.src"))
    with caplog.at_level(logging.WARNING, logger="nlpzoo.data.mt"):
        dm = MTDataModule(train, valid, 2, max_len=0, limits=(20, 14), test=valid)
    assert [len(s) for s in dm.train_ds.src] == [3, 20, 5]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "dropped 2 pair(s)" in line and "data/train.src:2, data/train.src:3" in line
    bad_test = split_of([(2, 2), (2, 2), (30, 2)], Path("data/test.src"))
    with pytest.raises(DataError, match=r"test pair at data/test\.src:3"):
        MTDataModule(train, valid, 2, limits=(20, 14), test=bad_test)


def test_a_run_refuses_an_over_long_test_pair_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr(Tracker, "start", classmethod(inactive))
    root = make_mt_project(tmp_path)
    test = root / "data" / "vocab" / "mt" / "test.src"
    lines = test.read_text().splitlines()
    lines[5] = " ".join(["der hund katze haus baum rot"] * 8)
    test.write_text("\n".join(lines) + "\n")
    params = tiny_params("transformer")
    params["transformer"]["max_positions"] = 40

    def no_training(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(pl.Trainer, "fit", no_training)
    with pytest.raises(DataError, match=f"test pair at {test}:6 cannot be scored"):
        lifecycle.train(params, "transformer", root)


# --------------------------------------------------------------------------- non-finite loss


class _Module:
    def __init__(self, family: str) -> None:
        self.family = FAMILIES[family]


class _Trainer:
    global_step, current_epoch = 7, 0

    def __init__(self) -> None:
        self.optimizers = [torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)]


@pytest.mark.parametrize("empty", [True, False])
def test_a_nan_loss_blames_empty_sources_not_the_learning_rate(empty):
    pairs = [(np.array([5, 6]), np.array([7])), (np.array([], dtype=np.int64), np.array([8]))]
    batch = collate(pairs if empty else pairs[:1])
    with pytest.raises(TrainingError) as err:
        NonFiniteLoss("tr").on_train_batch_end(
            _Trainer(), _Module("transformer"), torch.tensor(float("nan")), batch, 3
        )
    msg = str(err.value)
    assert "run 'tr'" in msg and "step 7" in msg
    if empty:
        assert "1 pair(s) with an empty source" in msg and "learning rate" not in msg
    else:
        assert "learning rate (lr=0.5)" in msg and "empty" not in msg
