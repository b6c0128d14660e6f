"""DVC's run cache on toy projects. The data stages keep it (a corpus stage restored after params
A -> B -> A), keyed on the user's corpus files, which are deps of their corpus stage when they
lie in the project (an edited file reruns it, and params back to A bring no older copy); a file
outside the project makes the corpus stages always run. The train, evaluate and register stages
never come from the run cache (their timing file is `persist: true`, pipeline.py): what they stand
for is also in MLflow, which a restored copy does not bring back, so after the outputs and
mlflow.db are deleted (`make clean`) a repro trains, evaluates and registers again, and
`models:/nlpzoo-RUN@champion` resolves. A repro with nothing changed runs none of them."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from nlpzoo.params import SECTIONS
from toy import PARAMS, copy_code, init_dvc, pipeline_env, run_checked, write_lm_data


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A git + DVC project with the code, the toy LM data and the report's roofline, without a
    dvc.yaml (each repro writes its own); each test changes a copy of it."""
    repo = copy_code(tmp_path_factory.mktemp("run-cache") / "project")
    (repo / "dvc.yaml").unlink()
    write_lm_data(repo)
    return init_dvc(repo, pipeline_env(), git=True)


def _project(tmp_path: Path, template: Path) -> tuple[Path, dict]:
    """A copy of `template` in `tmp_path`: (root, env)."""
    repo = shutil.copytree(template, tmp_path / "project", symlinks=True)
    return repo, pipeline_env(NLPZOO_MLFLOW_CACHE=str(tmp_path / "mlflow-cache"))


def _params(order: int = 2, lm: dict | None = None) -> dict:
    params = {k: v for k, v in PARAMS.items() if k in SECTIONS}
    params["models"] = {"ngram": {"family": "ngram", "data": "vocab/lm"}}
    params["ngram"] = {"order": order}
    if lm is not None:
        params["lm"] = {**params.get("lm", {}), **lm}
    return params


def _repro(repo: Path, env: dict, params: dict, *stages: str) -> tuple[set, set, str]:
    """params.yaml, dvc.yaml from it, then `dvc repro --single-item STAGES`: (stages run, stages
    restored from the run cache, the output)."""
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_checked([sys.executable, "-m", "nlpzoo", "pipeline"], repo, env)
    out = run_checked(["dvc", "repro", "--single-item", *stages], repo, env)
    ran = set(re.findall(r"Running stage '([^']+)'", out))
    cached = set(re.findall(r"Stage '([^']+)' is cached - skipping run", out))
    return ran, cached, out


def _mlflow(repo: Path) -> tuple[list, Path]:
    """The MLflow runs of run ngram in the project's mlflow.db, and the folder its champion
    version's files download to."""
    from mlflow import MlflowClient

    from nlpzoo.tracking import fetch_run_dir, process_tracking_uri

    uri = f"sqlite:///{repo / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string="tags.`nlpzoo.run` = 'ngram'")
    with process_tracking_uri(uri):
        folder = fetch_run_dir("models:/nlpzoo-ngram@champion")
    return runs, folder


RUN_STAGES = ["train-ngram", "evaluate-ngram", "register-ngram"]


def test_a_clean_project_trains_evaluates_and_registers_again_in_mlflow(tmp_path, template):
    repo, env = _project(tmp_path, template)
    ran, cached, _ = _repro(repo, env, _params(), *RUN_STAGES)
    assert ran == set(RUN_STAGES) and cached == set()
    first = json.loads((repo / "registry" / "ngram.json").read_text())
    assert first["registered"]  # (MLflow is read once the store is the last one: in-process
    # clients keep their connection to a deleted mlflow.db)
    # nothing changed: no stage runs
    ran, cached, _ = _repro(repo, env, _params(), *RUN_STAGES)
    assert ran == set() and cached == set()
    # `make clean`: the outputs and the MLflow store go, DVC's cache stays
    for name in ("models", "checkpoints", "eval", "metrics", "plots", "registry", "mlruns"):
        shutil.rmtree(repo / name, ignore_errors=True)
    (repo / "mlflow.db").unlink()
    ran, cached, _ = _repro(repo, env, _params(), *RUN_STAGES)
    assert cached == set(), "restored from DVC's cache: MLflow has none of it"
    assert ran == set(RUN_STAGES)
    runs, folder = _mlflow(repo)
    record = json.loads((repo / "registry" / "ngram.json").read_text())
    run_id = json.loads((repo / "models" / "ngram" / "mlflow_run.json").read_text())["run_id"]
    assert [r.info.run_id for r in runs] == [run_id]
    assert runs[0].data.metrics.get("test_ppl") is not None  # evaluate logged to it
    assert record["registered"] and record["version"] == first["version"] == 1
    assert json.loads((folder / "config.json").read_text())["run"] == "ngram"
    # params A -> B -> A: the run is trained again (a new MLflow run), never restored
    for order in (3, 2):
        ran, cached, _ = _repro(repo, env, _params(order), *RUN_STAGES)
        assert ran == set(RUN_STAGES) and cached == set()
    runs, _ = _mlflow(repo)
    assert len(runs) == 3


def test_corpus_files_in_the_project_are_deps_and_key_the_run_cache(tmp_path, template):
    repo, env = _project(tmp_path, template)
    corpus = repo / "corpus" / "all.txt"
    corpus.parent.mkdir()
    corpus.write_text("The cat sees a dog .\n")
    raw = repo / "data" / "raw" / "lm" / "all.txt"

    def lm(lowercase: bool) -> dict:
        return {"source": "text", "files": {"all": "corpus/all.txt"}, "lowercase": lowercase}

    ran, _, _ = _repro(repo, env, _params(lm=lm(True)), "corpus@lm")
    assert ran == {"corpus@lm"}
    stage = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]["corpus"]
    assert stage["foreach"]["lm"]["file1"] == "corpus/all.txt"
    assert "${item.file1}" in stage["do"]["deps"] and "always_changed" not in stage["do"]
    ran, cached, _ = _repro(repo, env, _params(lm=lm(True)), "corpus@lm")
    assert ran == set() and cached == set()
    ran, _, _ = _repro(repo, env, _params(lm=lm(False)), "corpus@lm")
    assert ran == {"corpus@lm"}
    corpus.write_text("A dog likes the bread .\n")  # edited: the stage is out of date
    ran, _, _ = _repro(repo, env, _params(lm=lm(False)), "corpus@lm")
    assert ran == {"corpus@lm"} and raw.read_text() == corpus.read_text()
    # params back to A: the copy of A's params and the edited file, not A's older copy
    ran, cached, _ = _repro(repo, env, _params(lm=lm(True)), "corpus@lm")
    assert ran == {"corpus@lm"} and cached == set()
    assert raw.read_text() == corpus.read_text()
    # and on to B again: the data stages keep DVC's run cache
    ran, cached, _ = _repro(repo, env, _params(lm=lm(False)), "corpus@lm")
    assert ran == set() and cached == {"corpus@lm"}
    assert raw.read_text() == corpus.read_text()


def test_corpus_files_outside_the_project_make_the_corpus_stages_always_run(tmp_path, template):
    repo, env = _project(tmp_path, template)
    outside = tmp_path / "elsewhere" / "all.txt"
    outside.parent.mkdir()
    outside.write_text("The cat sees a dog .\n")
    params = _params(lm={"source": "text", "files": {"all": str(outside)}})
    raw = repo / "data" / "raw" / "lm" / "all.txt"
    for text in ("The cat sees a dog .\n", "The cat sees a dog .\n", "She eats it .\n"):
        outside.write_text(text)
        ran, cached, out = _repro(repo, env, params, "corpus@lm")
        assert ran == {"corpus@lm"} and cached == set()
        said = [line for line in out.splitlines() if "outside the project" in line]
        assert len(said) == 1 and str(outside) in said[0], out
        assert raw.read_text() == text
    stage = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]["corpus"]
    assert stage["do"]["always_changed"] is True
    assert str(outside) not in (repo / "dvc.yaml").read_text()  # no path of this machine
