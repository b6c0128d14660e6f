"""Tests for nlpzoo.training.checkpoint_io: a full disk while torch.save writes a checkpoint or
a model leaves the previous file intact and no temp file, and is reported in one line."""

from __future__ import annotations

import errno
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from nlpzoo import cli
from nlpzoo.training import checkpoint_io
from nlpzoo.training.checkpoint_io import LocalCheckpointIO, save_model


def _full_disk(monkeypatch) -> list[Path]:
    """torch.save, as the writers call it, writes part of its target and then really writes to
    /dev/full (ENOSPC on Linux): torch's own stream-writer failure. Returns the targets."""
    real = torch.save
    targets: list[Path] = []

    def failing(obj, f, *args, **kwargs):
        targets.append(Path(f))
        Path(f).write_bytes(b"\0" * 100)
        return real(obj, "/dev/full", *args, **kwargs)

    monkeypatch.setattr(checkpoint_io.torch, "save", failing)
    return targets


def _big() -> dict:
    return {"state_dict": {"w": torch.arange(100_000, dtype=torch.float32)}}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("writer", ["checkpoint", "model"])
def test_full_disk_keeps_the_previous_file_and_reports_one_line(
    tmp_path, monkeypatch, capsys, writer
):
    path = tmp_path / ("best.ckpt" if writer == "checkpoint" else "model.pt")

    def write(obj):
        if writer == "checkpoint":
            LocalCheckpointIO().save_checkpoint(obj, path)
        else:
            save_model(obj, path)

    write({"state_dict": {"w": torch.ones(3)}})
    before = path.read_bytes()
    targets = _full_disk(monkeypatch)
    with pytest.raises(OSError) as err:
        write(_big())
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert isinstance(err.value.__cause__, RuntimeError)  # torch's own failure, kept as cause
    assert targets and targets[0] != path  # torch wrote to a temp file, not over the old one
    assert path.read_bytes() == before
    assert _files(tmp_path) == [path.name]  # no temp file or folder left

    def main(argv):
        write(_big())

    monkeypatch.setattr(sys, "argv", ["stage"])
    with pytest.raises(SystemExit) as code:
        cli.run_stage(main)
    assert code.value.code == 1
    err_text = capsys.readouterr().err
    assert err_text.startswith(f"error: disk full while writing {path} (No space left on device)")
    assert err_text.count("\n") == 1 and "Traceback" not in err_text


def test_other_runtime_errors_pass_unchanged(tmp_path, monkeypatch):
    def failing(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"\0")
        raise RuntimeError("something else went wrong")

    monkeypatch.setattr(checkpoint_io.torch, "save", failing)
    with pytest.raises(RuntimeError, match="something else"):
        save_model({}, tmp_path / "model.pt")
    assert _files(tmp_path) == []


def test_model_file_has_the_bytes_of_a_plain_save(tmp_path, monkeypatch):
    synced: list[str] = []
    real = checkpoint_io.os.fsync
    monkeypatch.setattr(checkpoint_io.os, "fsync", lambda fd: synced.append(fd) or real(fd))
    blob = {"state_dict": {"w": torch.arange(5.0)}}
    save_model(blob, tmp_path / "model.pt")
    (tmp_path / "plain").mkdir()
    torch.save(blob, tmp_path / "plain" / "model.pt")
    assert (tmp_path / "model.pt").read_bytes() == (tmp_path / "plain" / "model.pt").read_bytes()
    assert zipfile.ZipFile(tmp_path / "model.pt").namelist()[0].startswith("model/")
    assert len(synced) == 2  # the file before the rename, its folder after
    assert _files(tmp_path) == ["model.pt", "plain", "plain/model.pt"]
