"""The pip requirements of a registered run's MLflow model (`nlpzoo.registry.requirements`):
derived from what the served code imports, so that `mlflow models serve` in a fresh environment
installs every distribution the packaged code imports; pinned to the installed versions, torch
without its local label. Nothing is downloaded."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from importlib.metadata import distributions, packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement

import nlpzoo
from nlpzoo import registry
from nlpzoo.families import FAMILIES


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions (canonical names) that installing `requirements` installs: each, and
    what it requires, transitively (as installed here; the requirements of extras left out)."""
    installed = {canonical(d.metadata["Name"]): d for d in distributions()}
    todo = [Requirement(r).name for r in requirements if r.strip() and not r.startswith("-")]
    seen: set[str] = set()
    while todo:
        name = canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in (installed[name].requires or []) if name in installed else []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def uncovered(modules: list[str], requirements: list[str]) -> dict[str, list[str]]:
    """Of the top-level modules `modules`, those of a third-party
    distribution that installing `requirements` does not install: {module: its distributions}.
    The standard library, nlpzoo (the model's own code) and modules of no distribution are no
    requirement."""
    owners = packages_distributions()
    covered = installed_by(requirements)
    out = {}
    for module in modules:
        if module in sys.stdlib_module_names or module == "nlpzoo":
            continue
        dists = sorted(set(owners.get(module, ())))
        if dists and not any(canonical(d) in covered for d in dists):
            out[module] = dists
    return out


# records the top-level modules that the package's own code imports (any copy of it: the
# project's, a logged model's `code/nlpzoo`, the model's `serving.py`); what a third-party
# package imports is its own requirement, or optional (lightning's `rich`, torch's `pydot`)
HOOK = """
import builtins, json, os, sys
_imported, _import = set(), builtins.__import__
def _record(name, globals=None, locals=None, fromlist=(), level=0):
    where = str((globals or {}).get("__file__") or "").replace(os.sep, "/").split("/")
    if level == 0 and ("nlpzoo" in where[:-1] or where[-1] == "serving.py"):
        _imported.add(name.split(".")[0])
    return _import(name, globals, locals, fromlist, level)
builtins.__import__ = _record
"""


def imported_by_package(script: str, *args: str) -> list[str]:
    """The top-level names of the modules that the package's code imports while `script` runs
    in a fresh Python (argv: `args`)."""
    script = HOOK + script + "\nprint(json.dumps(sorted(_imported)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def served_modules() -> list[str]:
    """The modules of `registry.served_files()`, by name."""
    package = Path(nlpzoo.__file__).resolve().parent
    names = []
    for path in registry.served_files():
        parts = path.relative_to(package).with_suffix("").parts
        names.append(".".join(["nlpzoo", *(p for p in parts if p != "__init__")]))
    return sorted(names)


def test_the_requirements_install_everything_the_served_code_imports():
    """Every served module imported, and what a served run loads by name (every family's
    model class and task, every language-model input's routines) loaded: each third-party
    module the package's code imports is of a required distribution or of one that a required
    distribution requires."""
    requirements = registry.requirements()
    script = textwrap.dedent(
        """
        import importlib, sys
        from nlpzoo.families import FAMILIES
        from nlpzoo.lm_inputs import LM_INPUTS, _resolve
        from nlpzoo.tasks import task_of
        for name in sys.argv[1:]:
            importlib.import_module(name)
        for name in FAMILIES:
            FAMILIES[name].model_class()
            task_of(FAMILIES[name])
        for row in LM_INPUTS.values():
            for ref in (row.loaders, row.log_probs_of, row.decoder_of):
                if ref:
                    _resolve(ref)
        """
    )
    modules = imported_by_package(script, *served_modules())
    assert {"torch", "mlflow", "pytorch_lightning"} <= set(modules)
    assert uncovered(modules, requirements) == {}


def test_the_requirements_are_pinned_to_the_installed_versions():
    requirements = registry.requirements()
    pins = dict(r.split("==") for r in requirements)
    assert len(pins) == len(requirements) and requirements == sorted(requirements, key=str.lower)
    for name, pinned in pins.items():
        assert pinned == version(name).split("+")[0], name
        assert "+" not in pinned  # PyPI's wheel: torch 2.x+cpu is torch==2.x
    # what the serving path imports (lightning through nlpzoo.data.lm and nlpzoo.data.mt), and
    # not what only the pipeline does (DVC, the report's figures)
    assert {"torch", "pytorch-lightning", "mlflow", "numpy", "sentencepiece", "PyYAML"} <= set(pins)
    assert not {"dvc", "matplotlib", "pandas"} & {canonical(n) for n in pins}


def test_the_served_files_hold_what_a_run_loads_by_name():
    """Modules imported by name (a family's model class, its task, a language model's input
    routines) are served, with what they import and every package above them; the report's
    and the training's are not."""
    served = set(served_modules())
    tasks = {f"nlpzoo.tasks.{FAMILIES[name].task}" for name in FAMILIES}
    classes = {FAMILIES[name].model.partition(":")[0] for name in FAMILIES}
    assert tasks | classes <= served
    routines = {"nlpzoo.data.lm", "nlpzoo.evaluation.perplexity", "nlpzoo.generation"}
    assert {"nlpzoo.serving", "nlpzoo.use.answers", "nlpzoo.data.mt"} | routines <= served
    assert {"nlpzoo", "nlpzoo.use", "nlpzoo.models", "nlpzoo.data"} <= served
    assert not {"nlpzoo.report.figures", "nlpzoo.training.trainer"} & served


def test_every_import_that_runs_is_seen(tmp_path):
    source = textwrap.dedent(
        """
        from __future__ import annotations
        import json
        from typing import TYPE_CHECKING
        import numpy as np
        from . import sibling
        from nlpzoo.io import atomic_write_json
        if TYPE_CHECKING:
            import pandas
        else:
            import yaml
        class Model:
            def load(self):
                import scipy.sparse
                try:
                    from sacremoses import MosesTokenizer
                except ImportError:
                    pass
                with open(self.path) as f:
                    import sentencepiece
        """
    )
    found = registry._third_party(ast.parse(source).body)
    assert found == {"numpy", "yaml", "scipy", "sacremoses", "sentencepiece"}


def test_a_distribution_required_by_a_required_one_is_installed_by_it():
    """The check itself: numpy comes with scipy, pytorch-lightning with nothing listed."""
    scipy = f"scipy=={version('scipy')}"
    assert uncovered(["numpy", "scipy", "json", "nlpzoo"], [scipy]) == {}
    assert uncovered(["pytorch_lightning"], [scipy]) == {"pytorch_lightning": ["pytorch-lightning"]}
