"""The bad inputs of docs/design.md §7 that no module test covers: a split smaller than the model's
context, and a disk that fills up while an output is written.

Each is refused with a message that names the problem, and leaves no partial output: outputs
are built under a temporary name and renamed at the end, so a failure keeps the previous good
output. (README "Troubleshooting" maps every case of the list to the test that covers it.)
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import numpy as np
import pytest

from nlpzoo import cli, io, lifecycle
from nlpzoo.data.vocab import build_lm_vocab
from nlpzoo.errors import DataError
from nlpzoo.params_data import LMVocabConfig
from toy import make_project


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path, no_tracking):  # MLflow is not under test
    return make_project(tmp_path)


@pytest.mark.parametrize(
    ("run", "section", "message"),
    [
        (
            "nnlm",
            {"family": "nnlm", "context_size": 40},
            "the valid split has 9 tokens, fewer than the model's context of 40 + 1 tokens",
        ),
        (
            "lstm_lm",
            {"family": "rnn_lm", "cell": "lstm", "bptt": 3, "batch_size": 4},
            "the valid split has 9 tokens, fewer than the model's context of 4 rows x (3 + 1)",
        ),
    ],
)
def test_split_smaller_than_the_context_is_refused(project, run, section, message):
    valid = project / "data" / "vocab" / "lm" / "valid.npy"
    np.save(valid, np.load(valid)[:9])
    params = {"models": {run: {"family": section["family"], "data": "vocab/lm"}}, run: section}
    with pytest.raises(DataError) as err:
        lifecycle.train(params, run, project)
    assert f"run '{run}': {message}" in str(err.value)
    assert not (project / "models").exists() or list((project / "models").iterdir()) == []


def _disk_full(monkeypatch, module, name: str, after: int = 0) -> None:
    """Make `module.name` (a writer) fail like a full disk on its call number `after` + 1,
    after writing part of its output."""
    real = getattr(module, name)
    calls = {"n": 0}

    def failing(target, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after:
            if isinstance(target, int):  # a file descriptor (os.fsync)
                io.os.write(target, b"\0" * 100)
            elif hasattr(target, "write"):
                target.write(b"\0" * 100)
            else:
                Path(target).write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(module, name, failing)


def test_disk_full_while_encoding_keeps_the_previous_vocabulary(tmp_path, monkeypatch):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for split, n in (("train", 50), ("valid", 5), ("test", 5)):
        (prepared / f"{split}.txt").write_text("the cat sat on the mat .\n" * n)
    out = tmp_path / "data" / "vocab"
    build_lm_vocab(LMVocabConfig(min_count=1), prepared, out)
    before = _snapshot(out)
    # train.npy written, then valid.npy fails
    _disk_full(monkeypatch, np.lib.format, "write_array_header_1_0", after=1)
    with pytest.raises(OSError, match="No space left"):
        build_lm_vocab(LMVocabConfig(min_count=2), prepared, out)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["vocab"]  # no temp folder left


def test_disk_full_while_saving_a_model_keeps_the_previous_one(project, monkeypatch):
    params = {"models": {"ngram": {"family": "ngram", "data": "vocab/lm"}}, "ngram": {"order": 2}}
    lifecycle.train(params, "ngram", project)
    before = _snapshot(project / "models")
    _disk_full(monkeypatch, io.os, "fsync")  # the first atomic write of the rerun fails
    params["ngram"]["order"] = 3
    with pytest.raises(OSError, match="No space left"):
        lifecycle.train(params, "ngram", project)
    assert _snapshot(project / "models") == before  # old model intact, no temp folder


def test_stage_reports_a_full_disk_in_one_line(monkeypatch, capsys):
    def main(argv):
        raise OSError(errno.ENOSPC, "No space left on device", "models/.lstm_lm.x1.tmp/model.pt")

    monkeypatch.setattr(sys, "argv", ["stage"])
    with pytest.raises(SystemExit) as code:
        cli.run_stage(main)
    assert code.value.code == 1
    err = capsys.readouterr().err
    assert "error: disk full while writing models/.lstm_lm.x1.tmp/model.pt" in err
    assert "the stage's outputs were removed by DVC before it ran; free some space and rerun" in err
    assert "unchanged" not in err and err.count("\n") == 1


def test_vocab_stage_names_a_vocabulary_size_the_text_cannot_give(tmp_path, monkeypatch):
    import runpy

    import yaml

    root = Path(__file__).resolve().parents[1]
    prepared = tmp_path / "data" / "prepared" / "mt"
    prepared.mkdir(parents=True)
    # 60 distinct characters: at character_coverage 1 every one needs a piece of its own
    text = "".join(
        "".join(chr(0x41 + (i * 7 + j) % 60) for j in range(12)) + "\n" for i in range(300)
    )
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            (prepared / f"{split}.{side}").write_text(text)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["vocab"]["mt"]["vocab_size"] = 16
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    stage = runpy.run_path(str(root / "stages" / "vocab.py"))
    with pytest.raises(DataError) as err:
        stage["main"](["mt"])
    message = str(err.value)
    assert message.startswith("vocab.mt.vocab_size 16 does not fit the training text")
    assert "smaller than required_chars. 16 vs 6" in message and "character_coverage" in message
    assert not (tmp_path / "data" / "vocab" / "mt" / "spm.model").exists()
