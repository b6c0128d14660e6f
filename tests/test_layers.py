"""The modules of src/nlpzoo import only their own layer or a lower one, and never in a circle
(the layers table of docs/design.md §1)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "nlpzoo"
DESIGN = ROOT / "docs" / "design.md"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layers(text: str) -> list[list[str]]:
    """The module patterns of each row `| N | modules | what |` of the layers table, in order."""
    rows = re.findall(r"^\| (\d+) \| (.*?) \| .* \|$", text, flags=re.M)
    assert rows, "no layers table in docs/design.md §1"
    assert [int(n) for n, _ in rows] == list(range(1, len(rows) + 1)), "layers numbered 1, 2, ..."
    return [re.findall(r"`([\w.*]+)`", cells) for _, cells in rows]


def layer_of(table: list[list[str]]) -> dict[str, int]:
    """module -> its layer: an exact name, else the nearest `package.*` above it."""
    out = {}
    for module in MODULES:
        found = [i for i, row in enumerate(table) if module in row]
        if not found:
            parts = module.split(".")
            for k in range(len(parts) - 1, 0, -1):
                star = ".".join(parts[:k]) + ".*"
                found = [i for i, row in enumerate(table) if star in row]
                if found:
                    break
        assert len(found) == 1, f"{module} is in {len(found)} rows of the layers table"
        out[module] = found[0] + 1
    return out


def imports(module: str) -> set[str]:
    """The nlpzoo modules `module` imports anywhere in it (top level or in a function):
    `from pkg import name` is the submodule pkg.name when there is one, else pkg."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "nlpzoo"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "nlpzoo":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & set(MODULES)
            found |= subs
            if len(subs) < len(node.names):  # a name defined in the module itself
                found.add(target)
    found.discard(module)
    unknown = found - set(MODULES)
    assert not unknown, f"{module} imports modules that do not exist: {sorted(unknown)}"
    return found


def graph() -> dict[str, set[str]]:
    return {m: imports(m) for m in MODULES}


def upward(edges: dict[str, set[str]], layer: dict[str, int]) -> list[str]:
    return sorted(
        f"{a} (layer {layer[a]}) imports {b} (layer {layer[b]})"
        for a, targets in edges.items()
        for b in targets
        if layer[b] > layer[a]
    )


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


TABLE = layers(DESIGN.read_text(encoding="utf-8"))


def test_every_module_has_one_layer_and_the_table_names_only_modules():
    layer_of(TABLE)  # one row per module
    for row in TABLE:
        for pattern in row:
            base = pattern.removesuffix(".*")
            assert base in MODULES, f"the layers table names {pattern}, which is no module"


def test_no_module_imports_a_higher_layer():
    assert upward(graph(), layer_of(TABLE)) == []


def test_the_modules_import_each_other_in_no_circle():
    assert cycle(graph()) is None


def test_the_checks_catch_an_upward_import_and_a_circle():
    """What a wrong tree would get wrong: an import of a higher layer, a circle."""
    layer = layer_of(TABLE)
    edges = graph()
    edges["nlpzoo.errors"] = edges["nlpzoo.errors"] | {"nlpzoo.pipeline"}
    assert upward(edges, layer) == [
        f"nlpzoo.errors (layer 1) imports nlpzoo.pipeline (layer {layer['nlpzoo.pipeline']})"
    ]
    found = cycle(edges)
    assert found is not None and found[0] == found[-1] and "nlpzoo.errors" in found
    # the same layer, in a circle: no upward import, still refused
    edges = graph()
    edges["nlpzoo.use.answers"] = edges["nlpzoo.use.answers"] | {"nlpzoo.use.limits"}
    edges["nlpzoo.use.limits"] = edges["nlpzoo.use.limits"] | {"nlpzoo.use.answers"}
    assert upward(edges, layer) == []
    assert set(cycle(edges) or []) == {"nlpzoo.use.answers", "nlpzoo.use.limits"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    from nlpzoo.pipeline import package_dir\n", {"nlpzoo.pipeline"}),
        ("from nlpzoo.use import commands\n", {"nlpzoo.use.commands"}),
        ("from . import vocab\nfrom .mt import Codec\n", {"nlpzoo.data.vocab", "nlpzoo.data.mt"}),
    ],
)
def test_imports_are_read_inside_functions_and_relative_ones_resolved(
    tmp_path, monkeypatch, source, expected
):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "nlpzoo.data.probe", path)
    assert imports("nlpzoo.data.probe") == expected
