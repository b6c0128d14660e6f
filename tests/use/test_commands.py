"""The project's own commands (`validate`, `pipeline`, `repro`) on a project whose files are
broken the ways a user breaks them: each gives one line `error: ...` and status 1 (2 for an
option the parser refuses), naming the file at fault."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from nlpzoo.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path):
    """A copy of the project's params.yaml, dvc.yaml, stages/ and src/: dvc.yaml is current."""
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("stages", "src"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def run(project: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if args[0] == "validate":
            code = main([*args, str(project / "params.yaml")])
        elif args[0] == "repro":
            from nlpzoo import repro

            code = repro.main(list(args[1:]), root=project)
        else:
            code = main([*args, "--root", str(project)])
    return code, out.getvalue(), err.getvalue()


COMMANDS = [("validate",), ("pipeline", "--check"), ("repro", "--dry")]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_current_project_passes(project, command):
    code, out, err = run(project, *command)
    assert code == 0 and err == "", err
    assert out.strip()


BROKEN_DVC_YAML = [
    ("<<<<<<< HEAD\nstages:\n", "dvc.yaml is not valid YAML (line 2): rewrite it with"),
    ("- a\n", "dvc.yaml is not a DVC pipeline (a mapping with `stages:`)"),
    ("stages: 5\n", "dvc.yaml is not a DVC pipeline (a mapping with `stages:`)"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("text", "message"), BROKEN_DVC_YAML, ids=["conflict", "list", "int"])
def test_a_broken_dvc_yaml_is_named_with_its_remedy(project, command, text, message):
    (project / "dvc.yaml").write_text(text)
    code, out, err = run(project, *command)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: ") and message in err and "nlpzoo pipeline" in err
    if command == ("pipeline", "--check"):  # writing it anew mends it
        assert run(project, "pipeline")[0] == 0 and run(project, *command)[0] == 0


@pytest.mark.parametrize("command", [*COMMANDS, ("pipeline",)], ids=" ".join)
def test_code_that_does_not_parse_is_named_by_file_and_line(project, command):
    stage = project / "stages" / "cooccur.py"
    lines = stage.read_text().count("\n")
    stage.write_text(stage.read_text() + "def broken(:\n")
    code, out, err = run(project, *command)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert f"{stage}:{lines + 1}: invalid syntax" in err


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("culprit", ["dvc.yaml", "stages/vocab.py", "params.yaml"])
def test_the_file_that_is_not_utf8_is_the_one_named(project, command, culprit):
    path = project / culprit
    path.write_bytes(path.read_bytes() + b"\n# \xff\xfe\n")
    code, out, err = run(project, *command)
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert f"{path} is not UTF-8 text" in err


def test_validate_names_a_params_file_of_another_name(project):
    other = project / "experiment.yaml"
    other.write_bytes((project / "params.yaml").read_bytes() + b"\n# \xff\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["validate", str(other)])
    assert code == 1 and f"{other} is not UTF-8 text" in err.getvalue(), err.getvalue()


def test_a_yaml_error_in_params_is_one_line(project):
    (project / "params.yaml").write_text("models: [\n")
    code, _, err = run(project, "validate")
    assert code == 1 and err.count("\n") == 1 and "is not valid YAML" in err, err


@pytest.mark.parametrize("jobs", ["0", "-3", "two", "²"])
def test_repro_refuses_a_number_of_jobs_below_one(project, monkeypatch, jobs):
    from nlpzoo import repro

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        repro.main(["--dry", "--jobs", jobs], root=project)
    assert e.value.code == 2 and "must be a whole number of runs >= 1" in err.getvalue()
    monkeypatch.setenv("JOBS", jobs)
    code, _, message = run(project, "repro", "--dry")
    assert code == 1 and "JOBS must be a whole number of runs >= 1" in message


@pytest.mark.parametrize("command", [("pipeline",), ("pipeline", "--check")], ids=" ".join)
@pytest.mark.parametrize("missing", ["params.yaml", "stages", "src/nlpzoo"])
def test_pipeline_outside_a_project_says_what_is_missing(project, command, missing):
    path = project / missing
    path.unlink() if path.is_file() else shutil.rmtree(path)
    code, out, err = run(project, *command)
    assert code == 1 and out == "" and "is not an nlpzoo project" in err, err
