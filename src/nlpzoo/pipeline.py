"""`dvc.yaml` from params.yaml and the code: every stage depends on exactly the code it runs.

A stage's code is the import closure of its entry points inside `src/nlpzoo`, read from the
source with `ast` (nothing is imported): every `import nlpzoo.x` / `from nlpzoo.x import y`
anywhere in a module (top level or inside a function) makes `x` (and `x.y` when that is a module)
part of it, together with the `__init__.py` of each package on the way, which Python runs first.
The entry points of `train-RUN` and `evaluate-RUN` are the stage script, the run's family record
(`nlpzoo/families/FAMILY.py`), its model module and its task module (`nlpzoo/tasks/TASK.py`):
the lifecycle reaches those through the registry (`importlib`), so the code of other families
and other tasks is never part of a run's closure. Checking the rest of params.yaml when a stage
starts imports the other families' config modules too; that can stop a stage but never change
what it writes, so it is not a dependency.

The closure neither includes nor follows the driver modules (`DRIVERS`): code that reports,
refuses or drives (error messages, argument parsing, this generator, MLflow) and never computes
what a stage writes, so that rewording a message reruns no stage. A computing module may import
from a driver module only the names of `DRIVER_NAMES`, each with the reason it changes no result
(docs/design.md §6).

`python -m nlpzoo pipeline` writes dvc.yaml; every stage checks at start that dvc.yaml is what
the generator would write now (`check`), so a stale dependency list cannot go unnoticed.
"""

from __future__ import annotations

import ast
import functools
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from nlpzoo.errors import ConfigError
from nlpzoo.families import FAMILIES
from nlpzoo.layout import Layout
from nlpzoo.params import parse_models
from nlpzoo.taskinfo import TASK_INFO, task_info

HEADER = (
    "# Generated from params.yaml and the code by `python -m nlpzoo pipeline` (`make pipeline`):\n"
    "# rerun it after changing `models:` or an import; every stage checks that this file is\n"
    "# current. Each train-RUN / evaluate-RUN stage depends on exactly the code it runs\n"
    "# (docs/design.md §6).\n"
)
DATA_ROLES = {"corpus": ["lm", "mt", "eval"], "prepare": ["lm", "mt"], "vocab": ["lm", "mt"]}
# the project's paths relative to its root, as dvc.yaml names them (nlpzoo.layout)
REL = Layout()
# where the evaluation sets of the word-vector protocol live (corpus@eval)
EVAL_SETS = str(REL.eval_sets)


def stage_name(argv: list[str]) -> str:
    """The dvc.yaml stage a stage script's command line runs: `stages/corpus.py lm` ->
    `corpus@lm` (a foreach stage), `stages/train.py RUN` -> `train-RUN` (and so evaluate and
    register), `stages/mixture.py` -> `mixture`."""
    script = Path(argv[0]).stem
    if script in ("train", "evaluate", "register") and len(argv) > 1:
        return f"{script}-{argv[1]}"
    if script in DATA_ROLES and len(argv) > 1:
        return f"{script}@{argv[1]}"
    return script


def timing_file(stage: str) -> str:
    """Where stage `stage` records its time, relative to the project root."""
    return str(REL.timing(stage))


def stage_order(runs: Iterable[str]) -> list[str]:
    """Every stage before `report`, in pipeline order: the data stages, then train-RUN and
    evaluate-RUN per run of `runs` (the enabled runs of `models:`, in order), then mixture."""
    data = [f"{stage}@{role}" for stage, roles in DATA_ROLES.items() for role in roles]
    per_run = [f"{k}-{name}" for name in runs for k in ("train", "evaluate")]
    return [*data, "cooccur", *per_run, "mixture"]


# Modules that only report, refuse or drive: no stage depends on them (docs/design.md §6). Each
# reason says why an edit to the module cannot change what a stage writes.
DRIVERS = {
    "nlpzoo.errors": "exception classes (raising one stops a stage) and the one-line message "
    "of an error (`error_line`)",
    "nlpzoo.cli": "the stages' start-up: logging, argv, one-line errors, timing records, the "
    "malloc setting",
    "nlpzoo.params_file": "reads params.yaml, refuses an invalid file or a stale dvc.yaml, and "
    "hands the stage the file's mapping as YAML read it",
    "nlpzoo.pipeline": "this generator of dvc.yaml and its code closure",
    # the tracking package, each of its modules (the closure skips a module by its own name)
    **{
        f"nlpzoo.tracking{sub}": "MLflow: records what a run computed (params, metrics, "
        "files), computes none of it"
        for sub in ("", ".store", ".retry", ".tracker", ".fetch")
    },
    "nlpzoo.use": "the commands' front end: argument parsing, one-line errors",
    "nlpzoo.use.arguments": "the commands' argument parsers",
    "nlpzoo.use.commands": "the commands: read input, print answers",
}

# The only names a computing module (anything a stage depends on) may import from a driver
# module, with the reason using each changes no result. tests/pipeline/test_pipeline_deps.py
# holds every import of a computing module to this list.
DRIVER_NAMES = {
    "nlpzoo.errors": {
        name: "an exception class: raising it stops the stage, nothing is written"
        for name in ("NlpzooError", "ConfigError", "DataError", "ChecksumError", "TrainingError")
    },
    "nlpzoo.cli": {
        "root": "the working directory, where DVC runs the stage",
        "run_stage": "runs the stage's main with logging and one-line errors",
        "load_params": "params.yaml's mapping as YAML read it, once checked",
    },
    "nlpzoo.pipeline": {
        "package_dir": "the resume fingerprint: whether an interrupted run resumes, not what "
        "it computes",
        "run_code": "the resume fingerprint's files, as above",
        "ROOFLINE": "a file the report reads, written into the report stage's deps by the "
        "generator: a change to it changes the stage",
        "stage_order": "the timing files the report reads, written into the report stage's "
        "deps: a change to it changes the stage",
        "closure": "the files whose third-party imports are the registered model's "
        "requirements: the register stage's record is the registry's answer",
        "module_path": "as `closure`",
    },
    "nlpzoo.tracking": {
        "Tracker": "the MLflow run: logs what the stage computed",
        "RUN_FILE": "the file in which the MLflow run's id is kept, written and read by "
        "tracking's own calls",
        "fetch_run_dir": "downloads a registered run's files from the store",
        "git_commit": "the commit the report names, read from git",
        **{
            name: "the MLflow client of the register stage: where the store is, how a call is "
            "retried, locked or refused"
            for name in (
                "MODEL",
                "error_chain",
                "is_connection_failure",
                "mlflow_client",
                "process_tracking_uri",
                "store_lock",
                "with_retries",
                "store_failure",
                "tracking_uri",
            )
        },
    },
}


def package_dir(root: Path) -> Path:
    """The `nlpzoo` source folder of the project at `root` (`src/nlpzoo`)."""
    return root / "src" / "nlpzoo"


def module_path(module: str, pkg: Path) -> Path | None:
    """File of module `nlpzoo.a.b` under `pkg` (the nlpzoo folder), or None if there is none."""
    parts = module.split(".")
    if parts[0] != "nlpzoo":
        return None
    base = pkg.joinpath(*parts[1:])
    if base.with_suffix(".py").is_file() and parts[1:]:
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _module_of(path: Path, pkg: Path) -> str:
    rel = path.relative_to(pkg).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["nlpzoo", *parts])


def imported_modules(path: Path, pkg: Path) -> set[str]:
    """The nlpzoo modules a source file imports, anywhere in it."""
    stat = path.stat()
    return set(_imported_modules(path, pkg, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4096)
def _imported_modules(path: Path, pkg: Path, mtime_ns: int, size: int) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_of(path, pkg) if path.is_relative_to(pkg) else ""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "nlpzoo")
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = here.split(".") if is_package else here.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "nlpzoo":
                continue
            found.add(module)
            for alias in node.names:  # `from nlpzoo.x import y` where y is a module
                if module_path(f"{module}.{alias.name}", pkg) is not None:
                    found.add(f"{module}.{alias.name}")
    return frozenset(found)


def _statements(body: list[ast.stmt]):
    """Every statement, nested ones included (imports are statements: expressions need no
    visit, which keeps reading the whole package well under a second)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if inner:
                yield from _statements(inner)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def closure(
    entry_files: list[Path], entry_modules: list[str], pkg: Path, drivers: Iterable[str] = ()
) -> set[Path]:
    """Every file under `pkg` that running the entry points executes (by static imports), less
    the modules of `drivers` and what only they import (a stage's code: `drivers=DRIVERS`)."""
    skip = set(drivers)
    todo: list[Path] = list(entry_files)
    for module in entry_modules:
        for name in _with_parents(module):
            if name in skip:
                continue
            p = module_path(name, pkg)
            if p is None and name == module:
                raise ConfigError(f"module {module} not found under {pkg}")
            if p is not None:
                todo.append(p)
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in imported_modules(path, pkg):
            for name in _with_parents(module):
                if name in skip:
                    continue
                p = module_path(name, pkg)
                if p is not None and p not in seen:
                    todo.append(p)
    return seen


def _model_module(family: str) -> str:
    model = FAMILIES[family].model
    if not isinstance(model, str):
        raise ConfigError(
            f"family '{family}' is defined outside the nlpzoo package; the pipeline needs its "
            "model as a 'module:Class' string"
        )
    return model.partition(":")[0]


def run_code(root: Path, stage: str, family: str) -> list[str]:
    """Repository-relative files a `train`/`evaluate` stage of a run of `family` executes."""
    pkg = package_dir(root)
    fam = FAMILIES[family]
    files = closure(
        [root / "stages" / f"{stage}.py"],
        [f"nlpzoo.families.{family}", _model_module(family), f"nlpzoo.tasks.{fam.task}"],
        pkg,
        DRIVERS,
    )
    return _relative(files, root)


def script_code(root: Path, script: str) -> list[str]:
    """Repository-relative files a stage script executes (data stages, mixture, report)."""
    files = closure([root / "stages" / f"{script}.py"], [], package_dir(root), DRIVERS)
    return _relative(files, root)


def _relative(files: set[Path], root: Path) -> list[str]:
    def key(p: str) -> tuple:
        return (not p.startswith("stages/"), p)

    return sorted((p.relative_to(root).as_posix() for p in files), key=key)


# --------------------------------------------------------------------------- dvc.yaml


def stages(params: dict, root: Path) -> dict[str, Any]:
    """The `stages:` mapping of dvc.yaml for `params` and the code under `root`."""
    specs = parse_models(params)
    out: dict[str, Any] = {}
    out["corpus"] = _corpus(params, root)
    out["prepare"] = {
        "foreach": DATA_ROLES["prepare"],
        "do": {
            "cmd": "python stages/prepare.py ${item}",
            "deps": [*script_code(root, "prepare"), str(REL.raw("${item}"))],
            "params": ["${item}"],
            "outs": [str(REL.prepared("${item}"))],
            "metrics": [_timing("prepare@${item}")],
        },
    }
    out["vocab"] = {
        "foreach": DATA_ROLES["vocab"],
        "do": {
            "cmd": "python stages/vocab.py ${item}",
            "deps": [*script_code(root, "vocab"), str(REL.prepared("${item}"))],
            "params": ["vocab.${item}", *_present(params, "seed")],
            "outs": [str(REL.vocab("${item}"))],
            "metrics": [_timing("vocab@${item}")],
        },
    }
    out["cooccur"] = {
        "cmd": "python stages/cooccur.py",
        "deps": [*script_code(root, "cooccur"), str(REL.prepared("lm")), str(REL.vocab("lm"))],
        "params": _present(params, "cooccur"),
        "outs": [str(REL.cooccur)],
        "metrics": [_timing("cooccur")],
    }
    run_params = {}
    for name in specs:
        own = [name] if name in params else []
        run_params[name] = [*own, f"models.{name}"]
    for name, spec in specs.items():
        model, data, curve = str(REL.model(name)), str(REL.data(spec.data)), str(REL.curve(name))
        out[f"train-{name}"] = {
            "cmd": f"python stages/train.py {shlex.quote(name)}",
            "deps": [*run_code(root, "train", spec.family), data],
            "params": [*run_params[name], *_present(params, "trainer", "seed")],
            "outs": [model, _timing(f"train-{name}", run_cache=False)],
            "plots": [{curve: {"cache": False, "x": "epoch", "y": _curve_y(spec)}}],
        }
    for name, spec in specs.items():
        extra = [EVAL_SETS] if task_info(spec.task).evaluation else []
        out[f"evaluate-{name}"] = {
            "cmd": f"python stages/evaluate.py {shlex.quote(name)}",
            "deps": [
                *run_code(root, "evaluate", spec.family),
                str(REL.model(name)),
                str(REL.data(spec.data)),
                *extra,
            ],
            "params": [
                *run_params[name],
                *_present(params, "trainer", *(["evaluation"] if extra else [])),
            ],
            "outs": [str(REL.evaluation(name)), _timing(f"evaluate-{name}", run_cache=False)],
            "metrics": [{str(REL.metrics(name)): {"cache": False}}],
        }
    lms = [name for name, spec in specs.items() if spec.task == "lm"]
    out["mixture"] = {
        "cmd": "python stages/mixture.py",
        "deps": [*script_code(root, "mixture"), *(str(REL.evaluation(name)) for name in lms)],
        "params": [*_present(params, "mixture"), *(f"models.{name}" for name in lms)],
        "outs": [_timing("mixture", run_cache=False)],
        "metrics": [{str(REL.mixtures): {"cache": False}}],
    }
    out["report"] = {
        "cmd": "python stages/report.py",
        "deps": [
            *script_code(root, "report"),
            str(REL.mixtures),
            *(str(REL.metrics(name)) for name in specs),
            *(str(REL.curve(name)) for name in specs),
            *(str(REL.evaluation(name)) for name in specs),
            *(str(REL.model(name)) for name, s in specs.items() if s.task != "mt"),
            str(REL.vocab("lm") / "stats.json"),
            str(REL.vocab("mt") / "stats.json"),
            ROOFLINE,  # the machine's matrix-product peak (benchmarks/roofline.py)
            *(timing_file(stage) for stage in stage_order(specs)),  # not its own
        ],
        "params": [{"params.yaml": None}],
        "outs": [{str(REL.reports): {"cache": False}}, _timing("report", run_cache=False)],
    }
    for name in specs:  # after the report: a store without a registry never holds it up
        out[f"register-{name}"] = {
            "cmd": f"python stages/register.py {shlex.quote(name)}",
            "deps": [
                *script_code(root, "register"),
                str(REL.model(name)),
                str(REL.metrics(name)),
            ],
            "params": [*run_params[name], *_present(params, "mlflow")],
            "outs": [_timing(f"register-{name}", run_cache=False)],
            "metrics": [{str(REL.registry(name)): {"cache": False}}],
        }
    return out


ROOFLINE = "benchmarks/results/roofline.json"


def _timing(stage: str, run_cache: bool = True) -> dict:
    """A stage's timing file, not cached (git keeps it, like metrics/): a stage that is not rerun
    keeps the time of its last run.

    With `run_cache` (the data stages) it is declared a metric: DVC saves a stage to its run
    cache only when every uncached out is a metric or a plot (`Stage.run` in DVC 3), and the run
    cache is what brings back params A's outputs, and A's time, after A -> B -> A. Without
    (train-RUN, evaluate-RUN, register-RUN, mixture, report) it is a plain out, `persist: true`:
    DVC neither saves a stage with a persistent out to its run cache nor restores one from it,
    or from dvc.lock and its cache (`_can_hash` in `dvc/stage/cache.py`), so these stages
    always run when they are out of date. Their outputs stand for an MLflow run and a
    registered model version that a restored copy would not bring back (a new mlflow.db, a
    new tracking server). Persisting the file changes nothing else: the stage rewrites it. Not
    a metric, so `dvc exp show` holds the runs' own metrics and not the time of every stage an
    experiment reran (docs/design.md §5)."""
    spec: dict[str, Any] = {"cache": False}
    if not run_cache:
        spec["persist"] = True
    return {timing_file(stage): spec}


# where an unused slot of a corpus stage's user files points: a file it depends on anyway
_NO_FILE = "stages/corpus.py"


def _corpus(params: dict, root: Path) -> dict[str, Any]:
    """The `corpus` foreach stage. The user's own corpus files (`lm.files` with `lm.source:
    text`, `mt.files` with `mt.source: parallel`) that lie inside the project are deps of
    their role's stage, so an edited file reruns it (and the run cache keys on its content).
    DVC's templating cannot give each item its own list of deps, so the items become a mapping
    of fixed slots `file1..fileN`, each role's files, the unused slots `_NO_FILE` (a dep of
    every role anyway). A file outside the project is no dep: dvc.yaml would then name a path
    of one machine (`~/corpus.txt`), and dvc.yaml is committed; it makes the stage
    `always_changed` instead, and DVC's templating cannot set that per item, so every corpus
    role reruns on each `dvc repro` (`fetch_corpus` says so in one line)."""
    from nlpzoo.config import build
    from nlpzoo.params_data import LMDataConfig, MTDataConfig, inside_project, user_files

    lm = build(LMDataConfig, params.get("lm"), "lm")
    mt = build(MTDataConfig, params.get("mt"), "mt")
    roles = DATA_ROLES["corpus"]
    inside: dict[str, list[str]] = {}
    outside = False
    for role in roles:
        where = [inside_project(f, root) for f in user_files(role, lm, mt)]
        inside[role] = list(dict.fromkeys(w for w in where if w is not None))
        outside = outside or None in where
    slots = max(len(files) for files in inside.values())
    name = "${key}" if slots else "${item}"  # a mapping's items are `key`, a list's `item`
    do: dict[str, Any] = {
        "cmd": f"python stages/corpus.py {name}",
        "deps": [
            *script_code(root, "corpus"),
            *(f"${{item.file{i}}}" for i in range(1, slots + 1)),
        ],
        "params": _present(params, "lm", "mt"),
        "outs": [str(REL.raw(name))],
        "metrics": [_timing(f"corpus@{name}")],
    }
    if outside:
        do["always_changed"] = True
    if not slots:
        return {"foreach": roles, "do": do}
    items = {
        role: {
            f"file{i}": (files[i - 1] if i <= len(files) else _NO_FILE) for i in range(1, slots + 1)
        }
        for role, files in inside.items()
    }
    return {"foreach": items, "do": do}


def _present(params: dict, *sections: str) -> list[str]:
    """The sections params.yaml has (DVC refuses a params dependency on a missing key; an
    absent section means its defaults, which live in the code the stage depends on)."""
    return [s for s in sections if s in params]


def _curve_y(spec) -> str:
    return task_info(spec.task).curve.column


def plots(params: dict) -> list[dict]:
    """The top-level plots: one figure per task with every enabled run's curve."""
    specs = parse_models(params)
    out = []
    for task, info in TASK_INFO.items():
        key, title = f"learning_curves_{task}", info.plot_title()
        runs = [
            n
            for n, s in specs.items()
            if s.task == task and not (task == "vectors" and FAMILIES[s.family].fit != "lightning")
        ]
        if runs:
            y = {str(REL.curve(n)): _curve_y(specs[n]) for n in runs}
            out.append({key: {"title": title, "template": "linear", "x": "epoch", "y": y}})
    return out


def render(params: dict, root: Path) -> str:
    doc = {"stages": stages(params, root), "plots": plots(params)}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(doc, Dumper=dumper, sort_keys=False, width=100, default_flow_style=False)
    return HEADER + body.replace("- params.yaml: null", "- params.yaml:")


def write(params: dict, root: Path) -> Path:
    from nlpzoo.io import atomic_write_text

    path = root / "dvc.yaml"
    atomic_write_text(path, render(params, root))
    return path


def check_dvc_yaml(root: Path) -> None:
    """A clear error when the project's dvc.yaml exists but is no pipeline: not YAML (a merge
    that left its conflict markers) or not a mapping with `stages:`. Rewriting it mends both."""
    path = root / "dvc.yaml"
    if not path.is_file():
        return
    fix = "rewrite it with `python -m nlpzoo pipeline`"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{path} is not valid YAML{where}: {fix}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stages"), dict):
        raise ConfigError(f"{path} is not a DVC pipeline (a mapping with `stages:`): {fix}")


def check(params: dict, root: Path) -> None:
    """Refuse to run when dvc.yaml is not what `render` gives now (stale runs or code deps)."""
    path = root / "dvc.yaml"
    if not path.is_file() or not package_dir(root).is_dir():
        return  # not a project checkout (e.g. a stage run by hand elsewhere)
    text = path.read_text(encoding="utf-8")
    wanted_text = render(params, root)
    if text == wanted_text:
        return
    check_dvc_yaml(root)  # a file that is no pipeline: its own message
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    current = yaml.load(text, Loader=loader) or {}
    wanted = yaml.load(wanted_text, Loader=loader)
    if current.get("stages") == wanted["stages"]:
        return  # the same stages, written differently
    have, want = set(current.get("stages") or {}), set(wanted["stages"])
    details = []
    if want - have:
        details.append(f"missing stages {', '.join(sorted(want - have))}")
    if have - want:
        details.append(f"stages of no enabled run {', '.join(sorted(have - want))}")
    changed = [s for s in sorted(have & want) if current["stages"][s] != wanted["stages"][s]]
    if changed:
        details.append(f"other deps or params in {', '.join(changed)}")
    raise ConfigError(
        f"dvc.yaml is out of date with params.yaml and the code ({'; '.join(details)}); "
        "run `python -m nlpzoo pipeline` (or `make pipeline`) and commit dvc.yaml"
    )
