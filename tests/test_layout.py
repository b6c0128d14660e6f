"""The project's paths have one home (`nlpzoo.layout`): no module builds one by hand, the runs'
folders, dvc.yaml and the report agree, and renaming a folder is one edit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nlpzoo import layout
from nlpzoo.layout import Layout
from nlpzoo.pipeline import stages
from nlpzoo.tasks import Run

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    layout.DATA,
    layout.MODELS,
    layout.CHECKPOINTS,
    layout.PLOTS,
    layout.EVAL,
    layout.METRICS,
    layout.REGISTRY,
    layout.REPORTS,
    layout.TIMINGS,
}


def _hand_built(tree: ast.AST) -> list[int]:
    """Lines joining a project folder's name onto a path (`root / "models"`) or writing one as
    the start of a path string (`f"metrics/{name}.json"`)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if isinstance(node.right, ast.Constant) and node.right.value in FOLDERS:
                lines.append(node.lineno)
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            text = head.value if isinstance(head, ast.Constant) else None
            if isinstance(text, str) and "/" in text and text.split("/")[0] in FOLDERS:
                lines.append(node.lineno)
    return lines


def _code_files() -> list[Path]:
    src = sorted((ROOT / "src" / "nlpzoo").rglob("*.py"))
    return [p for p in src if p.name != "layout.py"] + sorted((ROOT / "stages").glob("*.py"))


def test_no_module_builds_a_project_path_by_hand():
    found = {
        str(p.relative_to(ROOT)): lines
        for p in _code_files()
        if (lines := _hand_built(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_the_scan_catches_a_hand_built_path():
    assert _hand_built(ast.parse('x = root / "metrics" / f"{name}.json"')) == [1]
    assert _hand_built(ast.parse('x = f"models/{name}"')) == [1]
    assert _hand_built(ast.parse('x = root / "vocab.txt"; y = f"{a}/models"')) == []


def test_a_runs_folders_are_the_layouts(tmp_path):
    params = {"models": {"r": {"family": "nnlm", "data": "vocab/lm"}}}
    run = Run.of(params, "r", tmp_path)
    where = Layout(tmp_path)
    assert run.data_dir == where.data("vocab/lm") == tmp_path / "data" / "vocab" / "lm"
    assert run.model_dir == where.model("r") == tmp_path / "models" / "r"
    assert run.eval_dir == where.evaluation("r") == tmp_path / "eval" / "r"
    assert run.ckpt_dir == where.checkpoints("r") == tmp_path / "checkpoints" / "r"
    assert run.plots_path == where.curve("r") == tmp_path / "plots" / "r.csv"
    assert where.metrics("r") == tmp_path / "metrics" / "r.json"
    assert where.timing("train-r") == tmp_path / "timings" / "train-r.json"
    assert str(Layout().metrics("r")) == "metrics/r.json"  # relative, as dvc.yaml writes it


def _paths(stage: dict) -> list[str]:
    out = []
    for key in ("deps", "outs", "metrics", "plots"):
        for item in stage.get(key, []):
            out.extend(item if isinstance(item, dict) else [item])
    return [str(p) for p in out]


def test_renaming_a_folder_is_one_edit(monkeypatch):
    """With `layout.METRICS` renamed, dvc.yaml's evaluate, report and register stages and a
    run's metrics file all move with it."""
    params = {"models": {"r": {"family": "nnlm", "data": "vocab/lm"}}}
    before = stages(params, ROOT)
    assert "metrics/r.json" in _paths(before["evaluate-r"])
    monkeypatch.setattr(layout, "METRICS", "scores")
    after = stages(params, ROOT)
    for name in ("evaluate-r", "report", "register-r"):
        assert "scores/r.json" in _paths(after[name]), name
        assert "metrics/r.json" not in _paths(after[name]), name
    assert Layout(Path("/p")).metrics("r") == Path("/p/scores/r.json")


@pytest.mark.parametrize("name", ["mixtures", "reports", "timings_dir", "cooccur", "eval_sets"])
def test_every_folder_is_under_the_root(tmp_path, name):
    assert getattr(Layout(tmp_path), name).is_relative_to(tmp_path)
