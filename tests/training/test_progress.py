"""Progress lines while training (nlpzoo.training.Progress): one per interval of an epoch or of
time, one per validation, plain log lines; with a fake clock every number on them is known."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
from pytorch_lightning.callbacks import ProgressBar
from tiny_nnlm import V, loader, read_curve, stream, tiny_config, trainer_config

from nlpzoo.errors import ConfigError
from nlpzoo.params import TrainerConfig
from nlpzoo.training import FamilyModule, Progress, hms, make_trainer

pytestmark = pytest.mark.usefixtures("one_thread", "unseeded")

SECONDS_PER_BATCH = 2.0
VALIDATION_SECONDS = 5.0
LINE = re.compile(
    r"^tiny: epoch (\d+)/2 (\d+)% \(batch (\d+)/7\), step (\d+)/14, train loss (\d+\.\d{4}), "
    r"([\d,]+) tok/s, ETA epoch (\d+:\d\d:\d\d), run (\d+:\d\d:\d\d)$"
)
VALIDATION = re.compile(
    r"^tiny: validation after epoch (\d)/2, step (\d+): val loss (\d+\.\d{4}), "
    r"val ppl (\d+\.\d{3}) \((\d+:\d\d:\d\d)\)$"
)


class Clock:
    """A fake monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tick(pl.Callback):
    """Advances the clock: each training batch takes 2 s, each validation 5 s (runs before
    Progress, which comes later in the callback list)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def on_train_batch_end(self, *args) -> None:
        self.clock.now += SECONDS_PER_BATCH

    def on_validation_end(self, *args) -> None:
        self.clock.now += VALIDATION_SECONDS


def train(tmp_path, caplog, **trainer_kw) -> tuple[list[str], list[dict]]:
    """Two epochs of the tiny NNLM under a fake clock; the progress lines and the curve."""
    module = FamilyModule("nnlm", tiny_config(), V, run="tiny")
    plots = tmp_path / "tiny.csv"
    cfg = trainer_config(**trainer_kw)
    trainer = make_trainer(cfg, "tiny", plots, tmp_path / "ckpt", None, seed=0)
    clock = Clock()
    (progress,) = [c for c in trainer.callbacks if isinstance(c, Progress)]
    progress.clock = clock
    trainer.callbacks.insert(0, Tick(clock))
    with caplog.at_level(logging.INFO, logger="nlpzoo.training"):
        trainer.fit(module, loader(stream(0, 100), True), loader(stream(1, 53), False))
    lines = [r.getMessage() for r in caplog.records if r.name == "nlpzoo.training"]
    return lines, read_curve(plots)[1]


def test_a_line_every_quarter_epoch_and_one_per_validation(tmp_path, caplog):
    lines, curve = train(tmp_path, caplog, progress_every_percent=25, progress_every_seconds=0)
    assert lines[0] == "tiny: training 2 epoch(s) of 7 batches, 14 optimizer steps on 1 process(es)"
    assert all("\r" not in line for line in lines)
    progress = [LINE.match(line) for line in lines[1:] if not VALIDATION.match(line)]
    assert all(progress), lines
    rows = [m.groups() for m in progress]
    # 25 % of 7 batches: after batches 2, 4, 6 and 7 of each epoch; the optimizer step so far
    assert [(int(r[0]), int(r[2]), int(r[3])) for r in rows] == [
        (epoch, batch, 7 * (epoch - 1) + batch) for epoch in (1, 2) for batch in (2, 4, 6, 7)
    ]
    assert [r[1] for r in rows] == ["29", "57", "86", "100"] * 2
    # tokens per second since the previous line: 16 per 2 s, then the last batch's 4 in 2 s
    assert [r[5] for r in rows] == ["8", "8", "8", "2"] * 2
    # ETAs at 2 s per batch; from the second epoch on, plus the 5 s a validation takes
    assert [(r[6], r[7]) for r in rows] == [
        ("0:00:10", "0:00:24"),
        ("0:00:06", "0:00:20"),
        ("0:00:02", "0:00:16"),
        ("0:00:00", "0:00:14"),
        ("0:00:10", "0:00:15"),
        ("0:00:06", "0:00:11"),
        ("0:00:02", "0:00:07"),
        ("0:00:00", "0:00:05"),
    ]
    # the running mean at the epoch's last batch is the epoch's training loss of the curve
    ends = [float(r[4]) for r in rows if r[2] == "7"]
    assert ends == pytest.approx([float(c["train_loss"]) for c in curve], abs=6e-5)

    validations = [VALIDATION.match(line).groups() for line in lines if VALIDATION.match(line)]
    assert [(v[0], v[1], v[4]) for v in validations] == [
        ("1", "7", "0:00:05"),
        ("2", "14", "0:00:05"),
    ]
    assert [float(v[2]) for v in validations] == pytest.approx(
        [float(c["val_loss"]) for c in curve], abs=6e-5
    )
    assert [float(v[3]) for v in validations] == pytest.approx(
        [float(c["val_ppl"]) for c in curve], abs=6e-4
    )
    # each validation's line comes right after the epoch's last progress line
    assert [i for i, line in enumerate(lines) if VALIDATION.match(line)] == [5, 10]


def test_a_line_every_few_seconds(tmp_path, caplog):
    lines, _ = train(tmp_path, caplog, progress_every_percent=0, progress_every_seconds=5)
    rows = [LINE.match(line).groups() for line in lines if LINE.match(line)]
    # 2 s per batch: 6 s have passed at batches 3 and 6 (the clock restarts with each epoch)
    assert [(r[2], r[3]) for r in rows] == [("3", "3"), ("6", "6"), ("3", "10"), ("6", "13")]
    assert [r[5] for r in rows] == ["8"] * 4  # 3 batches of 16 in 6 s


def test_both_intervals_off_leaves_the_start_and_the_validations(tmp_path, caplog):
    lines, _ = train(tmp_path, caplog, progress_every_percent=0, progress_every_seconds=0)
    assert len(lines) == 3 and lines[0].startswith("tiny: training 2 epoch(s)")
    assert all(VALIDATION.match(line) for line in lines[1:])


def test_other_ranks_print_nothing(caplog):
    progress = Progress("tiny", every_percent=1, every_seconds=1e-9)
    trainer = SimpleNamespace(is_global_zero=False, sanity_checking=False)
    with caplog.at_level(logging.INFO, logger="nlpzoo.training"):
        progress.on_train_start(trainer, None)
        progress.on_train_batch_end(trainer, None, None, None, 0)
        progress.on_validation_end(trainer, None)
    assert caplog.records == []


def test_eta_format():
    assert [hms(s) for s in (0, 59.4, 61, 3725, 100000, -3)] == [
        "0:00:00",
        "0:00:59",
        "0:01:01",
        "1:02:05",
        "27:46:40",
        "0:00:00",
    ]


def test_progress_settings_do_not_change_results_and_are_checked(tmp_path):
    base = TrainerConfig()
    assert (base.progress_every_percent, base.progress_every_seconds) == (10.0, 60.0)
    other = TrainerConfig(progress_every_percent=1, progress_every_seconds=0)
    assert base.result_settings() == other.result_settings()  # the resume fingerprint
    assert "progress_every_percent" not in base.result_settings()
    with pytest.raises(ConfigError, match="progress_every_percent"):
        TrainerConfig(progress_every_percent=150)
    with pytest.raises(ConfigError, match="progress_every_seconds"):
        TrainerConfig(progress_every_seconds=-1)
    # the settings reach the callback; Lightning's bar stays Lightning's
    cfg = trainer_config(enable_progress_bar=True, progress_every_percent=5)
    trainer = make_trainer(cfg, "tiny", tmp_path / "p.csv", tmp_path / "ckpt", None, seed=0)
    (progress,) = [c for c in trainer.callbacks if isinstance(c, Progress)]
    assert (progress.every_percent, progress.every_seconds) == (5, 60.0)
    assert isinstance(trainer.progress_bar_callback, ProgressBar)  # tqdm or rich
    quiet = make_trainer(trainer_config(), "tiny", tmp_path / "q.csv", tmp_path / "c2", None, 0)
    assert quiet.progress_bar_callback is None
