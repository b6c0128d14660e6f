import json
import runpy
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from nlpzoo import cli
from nlpzoo.__main__ import main as nlpzoo_main
from nlpzoo.cli import root
from nlpzoo.errors import ConfigError
from nlpzoo.params import SECTIONS
from nlpzoo.params_file import load_params
from nlpzoo.pipeline import stage_name
from nlpzoo.tracking import tracking_uri

ROOT = Path(__file__).resolve().parents[1]


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
    assert record["user_seconds"] > 0 and record["system_seconds"] >= 0
    # the two parts add up to the total (each rounded to 0.01 s)
    assert abs(record["user_seconds"] + record["system_seconds"] - record["cpu_seconds"]) <= 0.02
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


BAD_NAMES = ["..", "a b", "x;y", "$(id)", "", "1st", "a/b"]


def _bad_name_project(tmp_path: Path, name: str) -> Path:
    """A project whose params.yaml has a run called `name` beside a good `ngram`, and files in
    the folders a run's name would lead to (a bad name must delete none of them)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = {
        "ngram": {"family": "ngram", "data": "vocab/lm"},
        name: params["models"]["ngram"],
    }
    params = {k: v for k, v in params.items() if k in SECTIONS or k == "ngram"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    for folder in ("", "models", "checkpoints", "eval", ".git"):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "keep.txt").write_text("keep")
    return tmp_path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", BAD_NAMES)
def test_validate_refuses_a_bad_run_name(tmp_path, name, capsys):
    project = _bad_name_project(tmp_path, name)
    assert nlpzoo_main(["validate", str(project / "params.yaml")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: run name {name!r} is not allowed: a run's name starts with a letter and holds "
        "only letters, digits, '_' and '-' (it names the run's folders and dvc.yaml stages)\n"
    )


@pytest.mark.parametrize("name", BAD_NAMES[:4])
@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_a_stage_refuses_a_bad_run_name_and_deletes_nothing(
    tmp_path, monkeypatch, capsys, name, script
):
    project = _bad_name_project(tmp_path, name)
    before = _files(project)
    monkeypatch.chdir(project)
    for argv in ([name], ["ngram"]):  # on the command line; in params.yaml only
        monkeypatch.setattr(sys, "argv", [f"stages/{script}.py", *argv])
        with pytest.raises(SystemExit) as code:
            runpy.run_path(str(ROOT / "stages" / f"{script}.py"), run_name="__main__")
        assert code.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: run name {name!r} is not allowed") and err.count("\n") == 1
        assert _files(project) == before


def test_a_params_file_not_utf8_is_one_line_from_the_loader_a_stage_and_validate(
    tmp_path, monkeypatch, capsys
):
    path = tmp_path / "params.yaml"
    path.write_bytes(
        "models:\n  ngram: {family: ngram, data: vocab/lm}\n# Grüße\n".encode("latin-1")
    )
    with pytest.raises(ConfigError) as err:
        load_params(path)
    assert str(err.value) == f"{path} is not UTF-8 text (invalid start byte)"
    monkeypatch.chdir(tmp_path)
    assert nlpzoo_main(["validate", "params.yaml"]) == 1
    from_validate = capsys.readouterr().err
    assert from_validate == "error: params.yaml is not UTF-8 text (invalid start byte)\n"
    monkeypatch.setattr(sys, "argv", ["stages/mixture.py"])
    with pytest.raises(SystemExit) as code:
        runpy.run_path(str(ROOT / "stages" / "mixture.py"), run_name="__main__")
    assert code.value.code == 1
    assert capsys.readouterr().err == from_validate


FAULTS = r"""
import resource, sys
import torch
if sys.argv[1] == "keep":
    from nlpzoo.cli import keep_freed_memory
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    a = torch.ones(59 * 2**20 // 4)  # 59 MB (rnn_lm's logits), over glibc's largest mmap threshold
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_keeping_freed_memory_stops_a_large_block_faulting_in_every_time():
    """59 MB allocated and freed 30 times: by default 30 fresh mmaps of 15,104 pages each; kept
    in the heap, the pages are faulted in a few times at the start (2 to 5 here), not each time."""

    def faults(variant: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", FAULTS, variant], capture_output=True, text=True, check=True
        )
        return int(out.stdout.strip())

    pages = 59 * 2**20 // 4096
    default, kept = faults("default"), faults("keep")
    assert default >= 27 * pages
    assert kept <= 8 * pages


def test_train_and_evaluate_stages_keep_freed_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append(1) or True)
    for argv, kept in ((["stages/train.py", "nnlm"], 1), (["stages/vocab.py", "lm"], 0)):
        calls.clear()
        monkeypatch.setattr(sys, "argv", argv)
        cli.run_stage(lambda args: None)
        assert len(calls) == kept, argv
