"""docs/design.md says what the code does: its names are checked, and its worked example runs.

Names (tests/test_docs.py checks the rest):

- in every doc (README.md, docs/*.md), a module path in backticks exists: `src/nlpzoo/x.py`,
  `nlpzoo/placement.py`, `tasks/lm.py` (a path with a folder, under the repository, `src/` or
  `src/nlpzoo/`), a bare `serving.py` (somewhere in the repository's code); upper-case segments
  (RUN, FAMILY) stand for any name;
- in docs/design.md, a dotted name in backticks whose first part is `nlpzoo` or a module of
  the package (`nlpzoo.io.remove_checkpoints`, `training.resume.KEEP_STALE`) imports, or is a
  string the code writes (the MLflow tags `nlpzoo.run`, `nlpzoo.family`); one whose first part
  is a section of params.yaml (`trainer.max_epochs`, `vocab.lm.min_count`) is a key that
  `validate_params` knows (or a library's name, `mlflow.pyfunc.load_model`).

Signatures (docs/design.md only): a function of the package's API is written in full, module
and parameters, in backticks or in a code block: `nlpzoo.lifecycle.train(params, name, root)`,
`nlpzoo.tasks.load_model(run_dir, device="cpu")`, `nlpzoo.report.build.report_project(params,
*, root, exp_name="")`. The parameters must be those of the code, in order and of the same kind
(`inspect.signature`), each with a default where the doc gives one (the same value, when it is
a literal); `nlpzoo.x.f(...)` names the function without its parameters. A function renamed,
or one that gains or loses a parameter, fails here.

The worked example of §3 (adding a family) is run from the doc's own text: its code blocks are
written where the doc says into a copy of the package, its params block is merged into a toy
project, and the new family goes through the stages the doc names; every result the doc
promises is checked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml

from nlpzoo.errors import ConfigError
from nlpzoo.params_file import validate_params

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "src" / "nlpzoo"

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
# a module path: `src/nlpzoo/...`, `nlpzoo/...`, or anything ending in .py
MODULE_PATH = re.compile(r"(?<![\w./-])((?:src/)?nlpzoo/[\w./*-]*|[\w./*-]*\w\.py)(?![\w/])")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_][\w-]*)+")
# `nlpzoo.module.function(parameters)`: one level of parentheses inside (a default `()`)
SIGNATURE = re.compile(r"\b(nlpzoo(?:\.\w+)+)\(((?:[^()`]|\([^()`]*\))*)\)")
# the folders whose files a bare `name.py` may be
CODE_TREES = ("src", "stages", "tests", "benchmarks", "walkthroughs", ".ci")
FILE_SUFFIXES = {"py", "md", "txt", "json", "csv", "yaml", "yml", "toml", "lock", "db", "npz"}
FILE_SUFFIXES |= {"npy", "pt", "ckpt", "model", "html", "png", "tsv", "gz", "zip", "cfg", "sh"}


def _text(doc: Path) -> str:
    return doc.read_text(encoding="utf-8")


def _spans(text: str) -> list[str]:
    """The inline code spans of a markdown text (fenced blocks left out)."""
    return SPAN.findall(FENCE.sub("", text))


def _blocks(text: str) -> list[str]:
    return [body for _, body in FENCE.findall(text)]


# --------------------------------------------------------------------------- module paths


def _placeholders(rel: str) -> str:
    """`families/FAMILY.py` -> `families/*.py`: an upper-case segment stands for any name."""
    return "/".join(re.sub(r"^[A-Z][A-Z_]*(?=\.|$)", "*", s) for s in rel.split("/"))


def _path_exists(rel: str) -> bool:
    pattern = _placeholders(rel.rstrip("/"))
    if "/" in pattern:
        return any(list(base.glob(pattern)) for base in (ROOT, ROOT / "src", PACKAGE))
    return any(next((ROOT / tree).rglob(pattern), None) for tree in CODE_TREES)


def missing_paths(text: str, new_files: frozenset[str] = frozenset()) -> list[str]:
    """The module paths named in `text`'s code spans that do not exist (the names in
    `new_files`, the files the worked example adds, excepted)."""
    named = {m for span in _spans(text) for m in MODULE_PATH.findall(span)}
    return sorted(p for p in named if Path(p).name not in new_files and not _path_exists(p))


# --------------------------------------------------------------------------- dotted names


def _resolve(dotted: str) -> tuple[object, object] | None:
    """(the object `dotted` names, its parent), importing the longest module prefix; None if
    there is no such thing."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            # what a library says on import, dropped (MLflow's pyfunc sets its own filter)
            with warnings.catch_warnings(record=True):
                obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        parent = None
        for name in parts[i:]:
            if not hasattr(obj, name):
                return None
            parent, obj = obj, getattr(obj, name)
        return obj, parent
    return None


def _package_modules() -> set[str]:
    """The modules and packages directly in src/nlpzoo: `training`, `pipeline`, ..."""
    return {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }


def _written_strings() -> str:
    return "\n".join(_text(p) for p in PACKAGE.rglob("*.py"))


def _params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def _params_sections(params: dict) -> set[str]:
    return {k for k, v in params.items() if isinstance(v, dict)}


def params_key_known(dotted: str, params: dict) -> bool:
    """Whether `validate_params` knows key `a.b.c`: it is in params.yaml, or setting it there
    draws no "unknown key" (a wrong type or value is fine: the key exists)."""
    params = json.loads(json.dumps(params))
    *path, last = dotted.split(".")
    node = params
    for part in path:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if last in node:
        return True
    node[last] = "<the doc's key>"
    try:
        validate_params(params)
    except ConfigError as e:
        return "unknown key" not in str(e)
    return True


def unknown_names(text: str) -> list[str]:
    """Dotted names in `text`'s code spans (a whole span each) that name nothing: a package
    name not importable nor written by the code, a params key `validate_params` refuses."""
    params = _params()
    sections, modules = _params_sections(params), _package_modules()
    written = None
    unknown = []
    for span in sorted(set(_spans(text))):
        span = re.sub(r": .*", "", span)  # `trainer.precision: auto`: the key
        if not DOTTED.fullmatch(span) or "-" in span:
            continue
        parts = span.split(".")
        if parts[-1] in FILE_SUFFIXES or parts[0].isupper():
            continue  # a file (`params.yaml`), a placeholder (`RUN.KEY`)
        if parts[0] in sections:  # a params key, or a library's name (`mlflow.pyfunc`)
            if not params_key_known(span, params) and _resolve(span) is None:
                unknown.append(f"params key {span}")
        elif parts[0] == "nlpzoo":
            if _resolve(span) is None:
                written = _written_strings() if written is None else written
                if f'"{span}"' not in written:
                    unknown.append(span)
        elif parts[0] in modules and _resolve(f"nlpzoo.{span}") is None:
            unknown.append(span)
    return unknown


# --------------------------------------------------------------------------- signatures


def documented_signatures(text: str) -> list[tuple[str, str]]:
    """(dotted name, parameter text) of every `nlpzoo.x.f(...)` in the code spans and code
    blocks of `text`."""
    found = []
    for chunk in [*_spans(text), *_blocks(text)]:
        found += SIGNATURE.findall(chunk)
    return found


def _documented_parameters(params: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter of a documented parameter list; the default is
    `inspect.Parameter.empty` when none is written, the literal's value when it is a literal,
    else `...`. Raises SyntaxError when the text is no parameter list."""
    args = ast.parse(f"def f({params}): pass").body[0].args
    empty = inspect.Parameter.empty

    def value(node: ast.expr | None) -> object:
        if node is None:
            return empty
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ...

    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [
        (a.arg, "POSITIONAL_ONLY" if a in args.posonlyargs else "POSITIONAL_OR_KEYWORD", value(d))
        for a, d in zip(positional, defaults, strict=True)
    ]
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", empty))
    out += [
        (a.arg, "KEYWORD_ONLY", value(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", empty))
    return out


def _code_parameters(obj: object, parent: object) -> list[tuple[str, str, object]]:
    params = list(inspect.signature(obj).parameters.values())
    method = inspect.isclass(parent) and inspect.isfunction(obj)  # named through its class
    if method and params[:1] and params[0].name in ("self", "cls"):
        params = params[1:]
    return [(p.name, p.kind.name, p.default) for p in params]


def _render(params: list[tuple[str, str, object]]) -> str:
    out, star = [], False
    for name, kind, default in params:
        if kind == "KEYWORD_ONLY" and not star:
            out.append("*")
            star = True
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind, "")
        star = star or kind == "VAR_POSITIONAL"
        shown = "" if default is inspect.Parameter.empty else f"={default!r}"
        out.append(f"{prefix}{name}{shown}")
    return f"({', '.join(out)})"


def _same_default(doc: object, code: object) -> bool:
    empty = inspect.Parameter.empty
    if doc is empty or code is empty:
        return doc is code
    if doc is ... or not isinstance(code, (int, float, str, bool, tuple, list, dict, type(None))):
        return True  # an expression, or a default no literal can equal (a Path): one is given
    return doc == code and type(doc) is type(code)


def signature_errors(text: str) -> list[str]:
    """What is wrong with each documented signature of `text`: a name the code does not
    define, or parameters other than the code's."""
    errors = []
    for name, params in documented_signatures(text):
        written = f"{name}({params})"
        found = _resolve(name)
        if found is None:
            errors.append(f"{written}: the code has no {name}")
            continue
        obj, parent = found
        if params.strip() == "...":
            continue
        try:
            documented = _documented_parameters(params)
        except SyntaxError:
            errors.append(f"{written}: not a parameter list (names, `=default`, `*`)")
            continue
        try:
            actual = _code_parameters(obj, parent)
        except (TypeError, ValueError):
            errors.append(f"{written}: {name} is not callable")
            continue
        same = len(documented) == len(actual) and all(
            d[:2] == a[:2] and _same_default(d[2], a[2])
            for d, a in zip(documented, actual, strict=True)
        )
        if not same:
            errors.append(f"{written}: the code has {name}{_render(actual)}")
    return errors


# --------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_module_paths_exist(doc: Path) -> None:
    missing = missing_paths(_text(doc), worked_example(_text(DESIGN)).new_files)
    assert not missing, f"{doc.name} names module paths that do not exist: {missing}"


def test_the_path_check_finds_the_design_docs_paths() -> None:
    named = {m for span in _spans(_text(DESIGN)) for m in MODULE_PATH.findall(span)}
    assert {"src/nlpzoo/lifecycle.py", "tasks/lm.py", "nlpzoo/placement.py"} <= named
    assert len(named) > 50


def test_named_code_and_params_keys_exist() -> None:
    unknown = unknown_names(_text(DESIGN))
    assert not unknown, f"design.md names what the code and params do not have: {unknown}"


def test_design_signatures_are_the_codes() -> None:
    text = _text(DESIGN)
    assert len(documented_signatures(text)) >= 10, "the signature convention found too few"
    errors = signature_errors(text)
    assert not errors, "docs/design.md documents signatures the code does not have:\n" + (
        "\n".join(errors)
    )


def test_the_checks_see_a_doc_that_drifted() -> None:
    """The design doc changed in memory: each change is reported."""
    text = _text(DESIGN)
    train = "`nlpzoo.lifecycle.train(params, name, root)`"
    assert train in text
    assert signature_errors(text.replace(train, train.replace(".train(", ".train_run("), 1)) == [
        "nlpzoo.lifecycle.train_run(params, name, root): the code has no nlpzoo.lifecycle.train_run"
    ]
    for wrong in ("(params, name)", "(params, name, root, seed)", "(params, run, root)"):
        (error,) = signature_errors(
            text.replace(train, train.replace("(params, name, root)", wrong), 1)
        )
        assert error.endswith("the code has nlpzoo.lifecycle.train(params, name, root)")
    load = '`nlpzoo.tasks.load_model(run_dir, device="cpu")`'
    assert load in text
    for wrong in ('device="cuda"', "device"):
        (error,) = signature_errors(text.replace(load, load.replace('device="cpu"', wrong), 1))
        assert error.endswith("the code has nlpzoo.tasks.load_model(run_dir, device='cpu')")
    assert missing_paths("`src/nlpzoo/life_cycle.py` and `tasks/lm.py`") == [
        "src/nlpzoo/life_cycle.py"
    ]
    assert missing_paths("`tasks/lm.py`, `use/runs.py`, `trackings.py`") == [
        "trackings.py",
        "use/runs.py",
    ]
    spans = "`nlpzoo.io.remove_checkpoint`, `trainer.max_epoch`, `training.resume.KEEP`"
    assert unknown_names(spans) == [
        "nlpzoo.io.remove_checkpoint",
        "params key trainer.max_epoch",
        "training.resume.KEEP",
    ]
    assert unknown_names("`nlpzoo.run`, `trainer.max_epochs`, `vocab.lm.min_count`") == []


def test_the_checks_see_code_that_drifted(monkeypatch) -> None:
    """The code changed under the doc: a parameter more, a parameter less, a function gone."""
    from nlpzoo import lifecycle, tasks

    text = _text(DESIGN)
    monkeypatch.setattr(lifecycle, "train", lambda params, name, root, seed=0: None)
    monkeypatch.setattr(tasks, "load_model", lambda run_dir: None)
    errors = signature_errors(text)
    assert "the code has nlpzoo.lifecycle.train(params, name, root, seed=0)" in "\n".join(errors)
    assert "the code has nlpzoo.tasks.load_model(run_dir)" in "\n".join(errors)
    monkeypatch.delattr(lifecycle, "evaluate")
    assert any(
        e.endswith("the code has no nlpzoo.lifecycle.evaluate") for e in signature_errors(text)
    )


def _section(text: str, number: int) -> str:
    start = text.index(f"\n## §{number} ")
    end = text.find("\n## §", start + 1)
    return text[start : end if end > 0 else None]


def test_section_3_tables_every_field_of_the_family_record() -> None:
    from dataclasses import fields

    from nlpzoo.families import Family

    section = _section(_text(DESIGN), 3)
    table = section[section.index("| field | meaning |") :].split("\n\n", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert documented == [f.name for f in fields(Family)]


def test_section_6_names_every_driver_module() -> None:
    """Each module of `DRIVERS` (left out of the stages' deps) is named in §6: its file, or its
    folder when every module of that folder is a driver."""
    from nlpzoo.pipeline import DRIVERS, module_path

    named = set(_spans(_section(_text(DESIGN), 6)))
    missing = []
    for module in DRIVERS:
        rel = module_path(module, PACKAGE).relative_to(PACKAGE).as_posix()
        folder = rel.split("/")[0] + "/" if "/" in rel else None
        whole = folder is not None and all(
            f"nlpzoo.{folder[:-1]}" + ("" if p.stem == "__init__" else f".{p.stem}") in DRIVERS
            for p in (PACKAGE / folder).glob("*.py")
        )
        if rel not in named and not (whole and folder in named):
            missing.append(rel)
    assert not missing, f"§6 does not name the driver modules {missing}"


# --------------------------------------------------------------------------- the worked example


class WorkedExample:
    """§3's "Adding a family: a worked example", read from the doc: the files it adds
    (repository path -> code), the params it adds, and the run's name."""

    def __init__(self, files: dict[str, str], params: dict) -> None:
        self.files = files
        self.params = params
        (self.run,) = params["models"]
        self.family = params["models"][self.run]["family"]

    @property
    def new_files(self) -> frozenset[str]:
        return frozenset(Path(p).name for p in self.files)


def worked_example(text: str) -> WorkedExample:
    """Each python block of the example is the file its step names just before it, as "`NAME.py`
    in `src/nlpzoo/FOLDER/`"; the yaml block is what params.yaml gains."""
    section = text[text.index("\n## §3") : text.index("\n## §4")]
    example = section[section.index("\n### Adding a family") :]
    files, params, start = {}, None, 0
    for m in FENCE.finditer(example):
        lang, body = m.groups()
        before = example[start : m.start()]
        start = m.end()
        if lang == "python":
            where = re.findall(r"`(\w+\.py)` in `(src/nlpzoo/[\w/]+/)`", before)
            assert where, f"the step before this block names no file: {before.strip()[-200:]}"
            name, folder = where[-1]
            files[folder + name] = body
        elif lang == "yaml":
            params = yaml.safe_load(body)
    assert files and params, "the worked example has no python or no yaml block"
    return WorkedExample(files, params)


def _merge(into: dict, new: dict) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


# runs in the copied project, with the copied package first on the path: what the doc's steps
# do (the commands, then each stage's `main` as `dvc repro` would call it, in one process)
DRIVER = """
import contextlib, io, json, runpy, sys
from nlpzoo.__main__ import main
from nlpzoo.tracking import Tracker
from toy import cli, inactive

Tracker.start = classmethod(inactive)  # MLflow is not what this test is about
run, results = sys.argv[1:]
out = {}
for name, argv in (("pipeline", ["pipeline"]), ("validate", ["validate", "params.yaml"])):
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        out[name] = [main(argv), text.getvalue()]
for stage, argv in (("train", ["ngram"]), ("evaluate", ["ngram"]), ("train", [run]),
                    ("evaluate", [run]), ("mixture", []), ("report", [])):
    runpy.run_path(f"stages/{stage}.py", run_name="stage")["main"](argv)
out["generate"] = cli(".", "generate", "--run", run, "--prompt", "the cat", "--tokens", "5")
with open(results, "w") as f:
    json.dump(out, f)
"""


def _example_project(root: Path, example: WorkedExample) -> None:
    """A toy project: the package, the stages and the roofline the report reads (tests/toy.py's
    `copy_code`), the example's files added to the package, the grammar's LM data, and
    params.yaml with the n-gram and the example's run, on the CPU."""
    from toy import copy_code, tiny_params, write_lm_data

    copy_code(root)
    for rel, code in example.files.items():
        assert not (root / rel).exists(), f"the example's {rel} is not a new file"
        (root / rel).write_text(code, encoding="utf-8")
    write_lm_data(root)

    params = tiny_params("ngram")
    for run in set(params["models"]) - {"ngram"}:
        del params["models"][run]
        params.pop(run, None)
    params["trainer"].update(
        accelerator="cpu", devices=1, precision="32-true", early_stopping_patience=0, threads=1
    )
    params["evaluation"].update(
        probes=["cat", "dog", "bread"], sample_prompt="the cat"
    )  # words it has
    _merge(params, example.params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _report_section(report: str, title: str) -> str:
    return report.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_the_worked_example_of_section_3_runs(tmp_path) -> None:
    """What §3 promises of a new family: `python -m nlpzoo validate` checks its section,
    `python -m nlpzoo pipeline` adds `train-RUN` and `evaluate-RUN` with exactly its code as
    deps; training and evaluation give its model, curve, perplexity, cost, word vectors and
    samples; the mixture with the n-gram; the report's language-model, word-vector, cost and
    curve sections; and `python -m nlpzoo generate --run RUN`."""
    example = worked_example(_text(DESIGN))
    run = example.run
    root = tmp_path / "project"
    _example_project(root, example)
    from toy import pipeline_env, run_checked

    env = pipeline_env(
        PYTHONPATH=os.pathsep.join([str(root / "src"), str(ROOT / "tests")]),
        MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}",  # never opened
    )
    results = tmp_path / "results.json"
    t0 = time.time()
    run_checked([sys.executable, "-c", DRIVER, run, str(results)], root, env, timeout=600)
    print(f"the worked example's stages: {time.time() - t0:.1f} s")
    out = json.loads(results.read_text())

    assert out["pipeline"][0] == 0, out["pipeline"][1]
    assert out["validate"][0] == 0 and run in out["validate"][1], out["validate"][1]
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    own = {f"src/{rel}" if not rel.startswith("src/") else rel for rel in example.files}
    for stage in (f"train-{run}", f"evaluate-{run}"):
        deps = set(stages[stage]["deps"])
        assert own <= deps, f"{stage} does not depend on the example's files"
        other = {
            d
            for d in deps
            if re.fullmatch(r"src/nlpzoo/(models|families|tasks)/[a-z]\w*\.py", d) and d not in own
        }
        # the example's config imports the shared checks; the task module and its helpers
        shared = {f"src/nlpzoo/{m}.py" for m in ("families/common", "tasks/lm", "tasks/words")}
        assert other <= shared, f"{stage} depends on other families' code: {other - shared}"

    model = root / "models" / run
    for name in ("model.pt", "config.json", "train_stats.json", "vectors.txt"):
        assert (model / name).is_file(), f"models/{run}/{name} missing"
    curve = (root / "plots" / f"{run}.csv").read_text().splitlines()
    epochs = example.params[run]["trainer"]["max_epochs"]
    assert len(curve) == 1 + epochs, "one curve row per epoch"
    metrics = json.loads((root / "metrics" / f"{run}.json").read_text())
    assert metrics["family"] == example.family and metrics["task"] == "lm"
    for key in ("valid_ppl", "test_ppl", "cost_formula", "cost_per_token"):
        assert key in metrics, f"metrics/{run}.json has no {key}"
    for key in ("analogy_acc", "analogy_coverage", "ws353_rho", "simlex_rho"):  # word vectors
        assert key in metrics, f"metrics/{run}.json has no {key} (word vectors)"
    for name in ("logprobs.npz", "samples.json", "neighbours.json", "analogies.json"):
        assert (root / "eval" / run / name).is_file(), f"eval/{run}/{name} missing"
    mixtures = json.loads((root / "metrics" / "mixtures.json").read_text())
    assert "test_ppl_mix" in mixtures["runs"][run], mixtures

    report = (root / "reports" / "report.md").read_text()
    for title in ("1. Language modelling", "2. Word vectors", "4. Cost"):
        assert f"| {run} |" in _report_section(report, title), f"the report's {title} lacks {run}"
    figures = root / "reports" / "figures"
    for name in ("curves_lm.png", "compute_lm.png", f"projection_{run}.png"):
        assert (figures / name).is_file(), f"reports/figures/{name} missing"

    code, text, err = out["generate"]
    assert code == 0 and text.startswith("the cat"), err
