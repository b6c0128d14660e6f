import json
import sys
import time
from datetime import datetime

import pytest

from nlpzoo import cli
from nlpzoo.cli import root
from nlpzoo.errors import ConfigError
from nlpzoo.pipeline import stage_name
from nlpzoo.tracking import tracking_uri


def test_a_queued_experiment_writes_in_its_copy_and_logs_to_the_parent(tmp_path, monkeypatch):
    """DVC runs a queued experiment in a temporary copy with DVC_ROOT set to the parent repo:
    outputs belong to the copy (the working directory), the MLflow database to the parent."""
    copy, parent = tmp_path / "copy", tmp_path / "parent"
    copy.mkdir()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("DVC_ROOT", str(parent))
    monkeypatch.chdir(copy)
    assert root() == copy.resolve()
    assert tracking_uri() == f"sqlite:///{parent.resolve()}/mlflow.db"


@pytest.mark.parametrize(
    ("argv", "stage"),
    [
        (["stages/corpus.py", "lm"], "corpus@lm"),
        (["stages/prepare.py", "lm"], "prepare@lm"),
        (["/abs/stages/vocab.py", "mt"], "vocab@mt"),
        (["stages/cooccur.py"], "cooccur"),
        (["stages/train.py", "nnlm"], "train-nnlm"),
        (["stages/evaluate.py", "svd"], "evaluate-svd"),
        (["stages/mixture.py"], "mixture"),
        (["stages/report.py"], "report"),
    ],
)
def test_stage_name_is_the_dvc_stage(argv, stage):
    assert stage_name(argv) == stage


def test_a_stage_records_its_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["stages/train.py", "nnlm"])
    seen = []
    before = time.time()
    cli.run_stage(seen.append)
    assert seen == [["nnlm"]]
    record = json.loads((tmp_path / "timings" / "train-nnlm.json").read_text())
    assert record["stage"] == "train-nnlm"
    # since this (pytest) process started: positive, and no more than its whole life so far
    started = datetime.fromisoformat(record["started"]).timestamp()
    assert 0 < record["seconds"] <= time.time() - started + 0.1
    assert started <= before and record["finished"] >= record["started"]
    assert record["cpu_seconds"] > 0
    torch = sys.modules.get("torch")  # only counted when the stage loaded it
    assert record["threads"] == (torch.get_num_threads() if torch else None)
    assert len(record["load_average"]) == 3
    assert sorted(p.name for p in (tmp_path / "timings").iterdir()) == ["train-nnlm.json"]


def test_a_failed_stage_records_nothing(tmp_path, monkeypatch, capsys):
    def main(argv):
        raise ConfigError("bad params")

    def crash(argv):
        raise RuntimeError("boom")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["stages/corpus.py", "lm"])
    with pytest.raises(SystemExit):
        cli.run_stage(main)
    with pytest.raises(RuntimeError):
        cli.run_stage(crash)
    assert not (tmp_path / "timings").exists()
