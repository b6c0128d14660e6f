"""The real `dvc repro` / `dvc exp run` on tiny params in a temporary git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from toy import run_checked, stages_ran

pytestmark = pytest.mark.xdist_group("reference")


@pytest.fixture(scope="module")
def project(reference, tmp_path_factory) -> tuple[Path, dict]:
    """A copy of the reference toy pipeline after its `dvc repro` (tests/pipeline/conftest.py),
    changed by the tests of this module in their order: (root, environment)."""
    copy = reference.copy(tmp_path_factory.mktemp("pipeline") / "project")
    return copy.root, copy.env


def test_repro_end_to_end_then_noop(project, reference):
    repo, env = project
    out = reference.output  # the reference's `dvc repro` from nothing, before the copy
    assert {
        "train-ngram",
        "train-nnlm",
        "evaluate-ngram",
        "evaluate-nnlm",
        "cooccur",
        "train-svd",
        "evaluate-svd",
        "mixture",
        "report",
    } <= stages_ran(out)
    svd = json.loads((repo / "metrics" / "svd.json").read_text())
    assert svd["task"] == "vectors" and "test_ppl" not in svd and "analogy_coverage" in svd
    for run in ("ngram", "nnlm"):
        m = json.loads((repo / "metrics" / f"{run}.json").read_text())
        assert 1.0 < m["test_ppl"] < 200, m  # vocabulary of the tiny grammar is ~40 words
        assert m["valid_tokens"] > 0 and m["mlflow_run_id"]
        assert (repo / "plots" / f"{run}.csv").is_file()
    report = (repo / "reports" / "report.md").read_text()
    assert "| ngram |" in report and "| nnlm |" in report
    assert not (repo / "checkpoints" / "nnlm").exists(), "a finished run leaves no scratch"
    _check_loaded_code_is_in_the_deps(repo, env)

    again = run_checked(["dvc", "repro"], repo, env)
    assert stages_ran(again) == set(), again
    # an edit flags exactly the stages that run the edited code (`dvc status`)
    expected = {
        "src/nlpzoo/models/outputs.py": {"train-nnlm", "evaluate-nnlm"},  # nnlm's output layer
        # no translation run in this project: no stage runs the translation task
        "src/nlpzoo/tasks/mt.py": set(),
        # the served models' request limits: only the register stages
        "src/nlpzoo/use/limits.py": {f"register-{r}" for r in ("ngram", "nnlm", "svd")},
        "src/nlpzoo/models/svd.py": {"train-svd", "evaluate-svd"},
    }
    for path, stages in expected.items():
        source = repo / path
        text = source.read_text()
        try:
            source.write_text(text + "# an edit\n")
            status = json.loads(run_checked(["dvc", "status", "--json"], repo, env))
        finally:
            source.write_text(text)
        assert set(status) == stages, (path, status)
    run_checked(["git", "add", "-A"], repo, env)
    run_checked(["git", "commit", "-qm", "first repro"], repo, env)


# loaded by a driver at every stage's start-up, for checks that can stop a stage but change
# nothing it writes: the params file's validation as a whole (`params_file.validate_params`:
# every section's config) and dvc.yaml's check (`pipeline.check`: the plots' task records)
START_UP = {
    "src/nlpzoo/params_data.py",
    "src/nlpzoo/params_eval.py",
    "src/nlpzoo/params_report.py",
    "src/nlpzoo/taskinfo.py",
}


def _check_loaded_code_is_in_the_deps(repo: Path, env: dict) -> None:
    """Every nlpzoo module a stage process loaded is one of the stage's deps in dvc.yaml, except
    the config modules of other families and the other sections (loaded to validate params.yaml,
    `START_UP`) and the driver modules (docs/design.md §6)."""
    import nlpzoo

    package_root = Path(nlpzoo.__file__).resolve().parents[2]  # the installed source tree
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    traces = Path(env["NLPZOO_TRACE_MODULES"])
    for stage in ("train-nnlm", "evaluate-nnlm", "train-svd", "mixture"):
        trace = traces / f"{stage}.txt"
        assert trace.is_file(), sorted(p.name for p in traces.iterdir())
        loaded = {
            Path(line).relative_to(package_root).as_posix() for line in trace.read_text().split()
        }
        from nlpzoo.pipeline import DRIVERS, module_path

        drivers = {
            module_path(m, package_root / "src" / "nlpzoo").relative_to(package_root).as_posix()
            for m in DRIVERS
        }
        extra = {
            f
            for f in loaded - set(stages[stage]["deps"]) - drivers
            if not f.startswith("src/nlpzoo/families/") and f not in START_UP
        }
        assert not extra, f"{stage} ran code it does not depend on: {sorted(extra)}"


def test_exp_run_reruns_only_the_changed_run(project):
    repo, env = project
    out = run_checked(["dvc", "exp", "run", "-S", "nnlm.hidden_dim=24", "-n", "wider"], repo, env)
    ran = {"train-nnlm", "evaluate-nnlm", "mixture", "report", "register-nnlm"}
    assert stages_ran(out) == ran, out

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nlpzoo")
    runs = client.search_runs(
        [exp.experiment_id], "tags.`nlpzoo.run` = 'nnlm'", order_by=["attributes.start_time DESC"]
    )
    assert len(runs) == 2
    latest = runs[0]
    assert latest.data.params["hidden_dim"] == "24"
    assert latest.data.tags["dvc.exp_name"] == "wider"
    assert latest.data.tags["nlpzoo.family"] == "nnlm"
    assert "test_ppl" in latest.data.metrics and "valid_ppl" in latest.data.metrics
    assert "test_ppl_mix" in latest.data.metrics  # the mixture stage logs to the same run
    curve = client.get_metric_history(latest.info.run_id, "val/ppl")
    assert len(curve) == 2  # one point per epoch
    m = json.loads((repo / "metrics" / "nnlm.json").read_text())
    assert m["mlflow_run_id"] == latest.info.run_id
    assert latest.info.status == "FINISHED"
    # the experiment's model is a new version of nlpzoo-nnlm, from that run, named after it
    versions = client.search_model_versions("name='nlpzoo-nnlm'")
    newest = max(versions, key=lambda v: int(v.version))
    assert int(newest.version) == 2 and newest.run_id == latest.info.run_id
    assert newest.tags["dvc.exp_name"] == "wider"

    # what a user sees: the experiment's metrics differ from the baseline's, in every view
    base = json.loads(run_checked(["git", "show", "HEAD:metrics/nnlm.json"], repo, env))
    assert m["params"] > base["params"] and m["test_ppl"] != base["test_ppl"]
    header, *rows = run_checked(["dvc", "exp", "show", "--csv"], repo, env).splitlines()
    assert "nnlm.hidden_dim" in header and "test_ppl" in header
    assert any(row.startswith("wider,") and ",24," in row for row in rows), rows
    diff = json.loads(run_checked(["dvc", "metrics", "diff", "--json"], repo, env))
    assert "test_ppl" in diff["metrics/nnlm.json"], diff
    out = run_checked(["dvc", "plots", "diff", "HEAD", "wider", "--json"], repo, env)
    plots = json.JSONDecoder().raw_decode(out)[0]  # a warning may follow the JSON
    runs = set(yaml.safe_load((repo / "params.yaml").read_text())["models"])
    for e in plots.get("errors", []):  # the combined plots also name runs cut from this project
        assert e["type"] == "FileNotFoundError" and Path(e["source"]).stem not in runs, e
    revs = {r for p in plots["data"].get("plots/nnlm.csv", []) for r in p["revisions"]}
    assert revs == {"HEAD", "wider"}, plots["data"].keys()
    report = (repo / "reports" / "report.md").read_text()
    assert "DVC experiment `wider`" in report and "| nnlm |" in report


def test_queued_experiments_reach_the_project_database(project):
    """`dvc exp run --queue` twice, then `--run-all` (it starts the queue's worker like
    `dvc queue start` and follows it): each runs in a temporary copy of the project, and both
    log to the workspace's MLflow database, leaving the workspace's outputs alone."""
    repo, env = project
    before = (repo / "metrics" / "nnlm.json").read_text()
    queued = {"q-narrow": 12, "q-wide": 20}
    for name, hidden in queued.items():
        cmd = ["dvc", "exp", "run", "--queue", "-S", f"nnlm.hidden_dim={hidden}", "-n", name]
        run_checked(cmd, repo, env)
    try:
        run_checked(["dvc", "exp", "run", "--run-all"], repo, env)
    finally:
        run_checked(["dvc", "queue", "stop"], repo, env)  # the worker would otherwise idle on
    assert (repo / "metrics" / "nnlm.json").read_text() == before

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nlpzoo")
    runs = client.search_runs([exp.experiment_id], "tags.`nlpzoo.run` = 'nnlm'")
    by_exp = {r.data.tags.get("dvc.exp_name"): r for r in runs}
    for name, hidden in queued.items():
        run = by_exp[name]
        assert run.data.params["hidden_dim"] == str(hidden)
        assert run.info.status == "FINISHED" and "test_ppl" in run.data.metrics
    shown = run_checked(["dvc", "exp", "show", "--csv"], repo, env)
    assert all(name in shown for name in queued)


def test_bad_param_fails_before_work(project):
    repo, env = project
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["nnlm"]["hiden_dim"] = 10
    bad = repo / "params.yaml"
    original = bad.read_text()
    try:
        bad.write_text(yaml.safe_dump(params, sort_keys=False))
        res = subprocess.run(
            ["dvc", "repro", "train-nnlm"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode != 0
        err = res.stdout + res.stderr
        assert "run 'nnlm'" in err and "hiden_dim" in err and "hidden_dim" in err, err
    finally:
        bad.write_text(original)
