"""dvc.yaml lists, for every stage, exactly the code the stage runs, less the driver modules
(docs/design.md §6)."""

from __future__ import annotations

import ast
import modulefinder
from pathlib import Path

import pytest
import yaml

from nlpzoo import pipeline
from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from nlpzoo.params import parse_models
from nlpzoo.params_file import load_params

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _dvc_stages() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def _code_deps(stage: dict) -> set[str]:
    return {d for d in stage["deps"] if d.startswith(("src/", "stages/"))}


class _StopAtDrivers(modulefinder.ModuleFinder):
    """Finds a driver module but does not read its code: what only drivers import is found
    only when computing code imports it too."""

    def scan_code(self, co, m):
        if m.__name__ not in pipeline.DRIVERS:
            super().scan_code(co, m)


DRIVER_FILES = {
    pipeline.module_path(m, SRC / "nlpzoo").relative_to(ROOT).as_posix() for m in pipeline.DRIVERS
}


def _found_by_modulefinder(script: Path, modules: list[str]) -> set[str]:
    """The nlpzoo files Python's own static import scanner (bytecode of every function
    included) finds from a stage script and the modules the registry loads by name, not
    following the driver modules."""
    finder = _StopAtDrivers(path=[str(SRC)])  # nothing outside src/ is followed
    finder.run_script(str(script))
    for module in modules:
        finder.import_hook(module)
    files = {script.relative_to(ROOT).as_posix()}
    for name, mod in finder.modules.items():
        if name.split(".")[0] == "nlpzoo" and mod.__file__:
            files.add(Path(mod.__file__).resolve().relative_to(ROOT).as_posix())
    return files


def _model_module(family: str) -> str:
    return FAMILIES[family].model.partition(":")[0]


PARAMS = load_params(ROOT / "params.yaml")
RUNS = parse_models(PARAMS)


def test_committed_dvc_yaml_is_what_the_generator_writes():
    pipeline.check(PARAMS, ROOT)  # raises with the stale stages named


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("stage", ["train", "evaluate"])
def test_run_stage_deps_are_its_import_closure_both_ways(run, stage):
    spec = RUNS[run]
    family = FAMILIES[spec.family]
    listed = _code_deps(_dvc_stages()[f"{stage}-{run}"])
    found = _found_by_modulefinder(
        ROOT / "stages" / f"{stage}.py",
        [
            f"nlpzoo.families.{spec.family}",
            _model_module(spec.family),
            f"nlpzoo.tasks.{family.task}",
        ],
    )
    assert listed - found == set(), f"listed but never imported: {sorted(listed - found)}"
    # the driver modules a stage imports are no dependency
    assert found - listed - DRIVER_FILES == set(), f"imported, not listed: {sorted(found - listed)}"
    assert not listed & DRIVER_FILES, sorted(listed & DRIVER_FILES)


@pytest.mark.parametrize("script", ["corpus", "prepare", "vocab", "cooccur", "mixture", "report"])
def test_other_stage_deps_are_their_import_closure(script):
    stage = _dvc_stages()[script]
    listed = _code_deps(stage.get("do", stage))
    found = _found_by_modulefinder(ROOT / "stages" / f"{script}.py", [])
    assert listed == found - DRIVER_FILES


def _computing_files() -> set[str]:
    """Every code file some stage depends on, for any family."""
    files = {f for s in pipeline.stages(PARAMS, ROOT).values() for f in _code_deps(s.get("do", s))}
    for family in FAMILIES:
        for stage in ("train", "evaluate"):
            files |= set(pipeline.run_code(ROOT, stage, family))
    return files


def _driver_names_used(path: Path) -> set[tuple[str, str]]:
    """(driver module, name) for every name the file imports from a driver module, anywhere in
    it; for a driver module imported whole (`from nlpzoo import pipeline`), the attributes the
    file reads of it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used: set[tuple[str, str]] = set()
    whole: dict[str, str] = {}  # local name -> driver module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in pipeline.DRIVERS:
                    whole[alias.asname or alias.name] = full
                elif node.module in pipeline.DRIVERS:
                    used.add((node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name not in pipeline.DRIVERS, f"{path}: import {alias.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in whole
        ):
            used.add((whole[node.value.id], node.attr))
    return used


def test_computing_code_uses_of_the_driver_modules_only_their_allowed_names():
    """A driver module must define nothing a stage computes its outputs with: a computing
    module (one a stage depends on) imports from a driver only the names of DRIVER_NAMES."""
    computing = _computing_files()
    assert not computing & DRIVER_FILES
    found = set()
    for rel in sorted(computing):
        for driver, name in _driver_names_used(ROOT / rel):
            found.add((driver, name))
            allowed = pipeline.DRIVER_NAMES.get(driver, {})
            assert name in allowed, f"{rel} uses {driver}.{name}, which no stage depends on"
    declared = {(d, n) for d, names in pipeline.DRIVER_NAMES.items() for n in names}
    stale = {(d, n) for d, n in declared - found if d != "nlpzoo.errors"}
    assert not stale, f"allowed but used by no computing module: {sorted(stale)}"
    assert all(reason for names in pipeline.DRIVER_NAMES.values() for reason in names.values())
    assert all(reason for reason in pipeline.DRIVERS.values())


def test_the_rule_catches_a_computing_use_of_a_driver(tmp_path):
    """What a wrong tree gets wrong: a message helper or a module's own attribute used."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from nlpzoo import pipeline\nfrom nlpzoo.errors import DataError, error_line\n"
        "def f(root):\n    return pipeline.stages({}, root)\n",
        encoding="utf-8",
    )
    assert _driver_names_used(probe) == {
        ("nlpzoo.pipeline", "stages"),
        ("nlpzoo.errors", "DataError"),
        ("nlpzoo.errors", "error_line"),
    }


def test_no_training_stage_depends_on_the_messages_start_up_or_tracking():
    stages = pipeline.stages(PARAMS, ROOT)
    training = [s for name, s in stages.items() if name.startswith(("train-", "evaluate-"))]
    assert training
    for name in ("errors", "cli", "tracking", "pipeline", "params_file"):
        assert not [s for s in training if f"src/nlpzoo/{name}.py" in s["deps"]], name


def test_no_run_depends_on_the_code_of_another_task_or_family():
    stages = _dvc_stages()
    for run, spec in RUNS.items():
        deps = _code_deps(stages[f"train-{run}"])
        for other in FAMILIES:
            if other == spec.family:
                continue
            assert f"src/nlpzoo/families/{other}.py" not in deps, (run, other)
            own = _model_module(spec.family).rsplit(".", 1)[-1]
            theirs = _model_module(other).rsplit(".", 1)[-1]
            if theirs != own and f"src/nlpzoo/models/{theirs}.py" in deps:
                # only a building block the run's own model is made of may appear
                assert theirs in ("transformer", "outputs"), (run, theirs)
        for task in {"lm", "vectors", "mt"} - {spec.task}:
            assert f"src/nlpzoo/tasks/{task}.py" not in deps, (run, task)
        if spec.task != "mt":
            assert "src/nlpzoo/data/mt.py" not in deps, run


def test_an_edit_to_the_output_layers_flags_only_the_runs_that_use_them():
    """What `dvc status` reports after a change to models/outputs.py: the stages listing it."""
    stages = _dvc_stages()
    flagged = {
        name for name, s in stages.items() if "src/nlpzoo/models/outputs.py" in s.get("deps", [])
    }
    # the output layers of the neural LMs, and word2vec's Huffman tree
    users = {
        n for n, s in RUNS.items() if s.family in ("nnlm", "rnn_lm", "transformer_lm", "word2vec")
    }
    assert flagged == {f"{k}-{n}" for n in users for k in ("train", "evaluate")}


def test_stale_dvc_yaml_is_refused_naming_the_fix(tmp_path):
    for folder in ("src", "stages"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    pipeline.write(params, tmp_path)
    pipeline.check(params, tmp_path)  # fresh: fine
    params["models"]["nnlm"]["enabled"] = False
    with pytest.raises(
        ConfigError, match=r"stages of no enabled run .*train-nnlm.*nlpzoo pipeline"
    ):
        pipeline.check(params, tmp_path)
    params["models"]["nnlm"]["enabled"] = True
    params["models"]["nnlm2"] = {"family": "nnlm", "data": "vocab/lm"}
    missing = r"missing stages evaluate-nnlm2, register-nnlm2, train-nnlm2"
    with pytest.raises(ConfigError, match=missing):
        pipeline.check(params, tmp_path)


@pytest.mark.parametrize(
    "text",
    ["<<<<<<< HEAD\nstages: {}\n=======\nstages: {}\n>>>>>>> other\n", "- a\n", "stages: 5\n"],
)
def test_a_dvc_yaml_that_is_no_pipeline_stops_a_stage_with_the_fix(tmp_path, text):
    """What every stage runs first: one error naming the remedy, not a traceback."""
    for folder in ("src", "stages"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    (tmp_path / "dvc.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"dvc\.yaml is not .*python -m nlpzoo pipeline"):
        pipeline.check(params, tmp_path)


def test_disabled_runs_get_no_stages():
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["models"]["glove"]["enabled"] = False
    stages = pipeline.stages(params, ROOT)
    assert "train-glove" not in stages and "evaluate-glove" not in stages
    assert "train-svd" in stages and "metrics/glove.json" not in stages["report"]["deps"]


def test_every_stage_records_its_time_and_the_report_reads_the_others():
    stages = pipeline.stages(PARAMS, ROOT)
    timing = {"cache": False}
    for name, stage in stages.items():
        body = stage.get("do", stage)
        own = f"timings/{name}@${{item}}.json" if "foreach" in stage else f"timings/{name}.json"
        # the data stages': a metric, since a plain uncached out would keep DVC from saving
        # the stage to its run cache; the stages of a run, the mixture and the report: a plain
        # persistent out, never from the run cache (test_run_cache.py) and no metric, so that
        # `dvc exp show` is not flooded with the times of the stages an experiment reran
        own_spec = {own: {**timing, "persist": True}}
        if name.startswith(("train-", "evaluate-", "register-")) or name in ("mixture", "report"):
            assert own_spec in body["outs"], name
            assert all(own not in m for m in body.get("metrics", [])), name
        else:
            assert {own: timing} in body["metrics"], name
            assert all(
                not isinstance(o, dict) or o.get("cache", True) for o in body.get("outs", [])
            ), name
    deps = [d for d in stages["report"]["deps"] if d.startswith("timings/")]
    data = [f"{s}@{r}" for s, roles in pipeline.DATA_ROLES.items() for r in roles]
    runs = [f"{k}-{n}" for n in RUNS for k in ("train", "evaluate")]
    assert deps == [f"timings/{s}.json" for s in [*data, "cooccur", *runs, "mixture"]]
    assert "timings/report.json" not in stages["report"]["deps"]
    # the committed dvc.yaml too, and DVC expands the foreach names as the stages write them
    committed = _dvc_stages()
    assert {"timings/corpus@${item}.json": timing} in committed["corpus"]["do"]["metrics"]
    assert [d for d in committed["report"]["deps"] if d.startswith("timings/")] == deps


def test_the_report_depends_on_the_roofline_it_reads():
    """The report's cost section reads benchmarks/results/roofline.json (the peaks, the
    machine; tests/report/test_build.py): a new measurement reruns the report."""
    assert pipeline.ROOFLINE == "benchmarks/results/roofline.json"
    assert pipeline.ROOFLINE in pipeline.stages(PARAMS, ROOT)["report"]["deps"]
    assert pipeline.ROOFLINE in _dvc_stages()["report"]["deps"]
    assert (ROOT / pipeline.ROOFLINE).is_file()


def test_timings_are_not_git_ignored():
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert not {"timings", "timings/", "/timings", "/timings/"} & set(ignored)
