"""`python -m nlpzoo tour`: the tour's params are valid and small, its project is written under
tour/ only, with its own DVC repository, MLflow experiment and store, and its report says it is
the tour."""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import subprocess
from pathlib import Path

import yaml

from nlpzoo import tour
from nlpzoo.__main__ import main
from nlpzoo.params import parse_models, read_params, run_configs
from nlpzoo.params_file import validate_params
from nlpzoo.report.build import build_report

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ("dvc.lock", "metrics", "plots", "reports", "timings", "registry")


def test_the_tour_params_are_valid_and_every_run_is_small() -> None:
    project = read_params(ROOT / "params.yaml")
    ours = tour.tour_params(project)
    validate_params(ours)
    assert parse_models(ours) == parse_models(project)  # the same runs, every family
    assert ours["mlflow"]["experiment"] == tour.EXPERIMENT != project["mlflow"]["experiment"]
    for name, spec in parse_models(ours).items():
        _, config, trainer = run_configs(ours, name)
        # a run's own `trainer:` (lstm_lm's 10 epochs) must not escape the tour's one epoch
        assert trainer.max_epochs == 1, name
        assert trainer.limit_train_batches == tour.TRAIN_BATCHES, name
        for key, value in tour.SIZES.get(spec.family, {}).items():
            assert getattr(config, key) == value, (name, key)
        if spec.task == "mt":
            assert config.beam_size == 1, name
    assert project == read_params(ROOT / "params.yaml")  # the project's own are left as they were


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` but tour/ -> the SHA-256 of its bytes."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] != tour.FOLDER
    }


def _copy_project(dest: Path) -> None:
    """The project's committed files, with src/ and stages/ as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for rel in (r.decode() for r in listed if r):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for tree in ("src", "stages"):
        shutil.copytree(ROOT / tree, dest / tree, ignore=ignore, dirs_exist_ok=True)


def test_prepare_writes_the_tour_project_under_tour_only(tmp_path, monkeypatch) -> None:
    _copy_project(tmp_path)
    before = _snapshot(tmp_path)
    assert all(any(k == c or k.startswith(c + "/") for k in before) for c in COMMITTED)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["tour", "--prepare-only"]) == 0
    assert _snapshot(tmp_path) == before  # dvc.lock, metrics/, ... and every other file
    dest = tmp_path / tour.FOLDER
    assert str(dest) in out.getvalue()
    # the stages load it as they load any project's params: valid, dvc.yaml current
    from nlpzoo.params_file import load_params

    params = load_params(dest / "params.yaml")
    assert params == tour.tour_params(read_params(tmp_path / "params.yaml"))
    assert yaml.safe_load((dest / "dvc.yaml").read_text())["stages"].keys() >= {
        f"train-{run}" for run in parse_models(params)
    }
    assert (dest / ".dvc").is_dir() and not (dest / ".dvc" / "cache").exists()
    assert "cache" not in (dest / ".dvc" / "config").read_text()  # its own cache, tour/.dvc
    assert "not comparable" in (dest / "TOUR_NOTE").read_text()
    env = tour.environment(dest)
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{dest / 'mlflow.db'}"
    # a second tour rewrites its project in place and still touches nothing else
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["tour", "--prepare-only"]) == 0
    assert _snapshot(tmp_path) == before


def test_the_tour_uses_its_own_mlflow_store_whatever_the_environment_says(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team-server:5000")
    monkeypatch.setenv("DVC_ROOT", str(ROOT))
    env = tour.environment(Path("/x/tour"))
    assert env["MLFLOW_TRACKING_URI"] == "sqlite:////x/tour/mlflow.db"
    assert "DVC_ROOT" not in env


def _report(tmp_path: Path, note: str | None) -> tuple[str, str]:
    dirs = {k: tmp_path / k for k in ("metrics", "plots", "eval", "models")}
    for d in dirs.values():
        d.mkdir(exist_ok=True)
    out = tmp_path / "reports"
    text = build_report(
        metrics_dir=dirs["metrics"],
        plots_dir=dirs["plots"],
        eval_dir=dirs["eval"],
        models_dir=dirs["models"],
        out_dir=out,
        runs={},
        tour_note=note,
    )
    return text, (out / "index.html").read_text(encoding="utf-8")


def test_the_tours_report_says_it_is_the_tour_and_the_projects_does_not(tmp_path) -> None:
    text, html = _report(tmp_path, tour.NOTE)
    assert text.splitlines()[0] == "# nlpzoo report: the tour (small sizes, not comparable)"
    assert "not comparable with the full pipeline" in text
    assert "the tour (small sizes" in html and "not comparable with the full" in html
    text, html = _report(tmp_path, None)
    assert text.splitlines()[0] == "# nlpzoo report"
    assert "tour" not in text and "tour" not in html
