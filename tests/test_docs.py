"""The README and docs/ name only things that exist.

Every repository path they name (`src/...`, `stages/...`, `tests/...`, `benchmarks/...`, `docs/...`,
markdown links to local files), every `python -m nlpzoo COMMAND`, `make TARGET` and DVC stage
(`train-nnlm`, `corpus@lm`) exists; every "docs/design.md §N" cited anywhere resolves to a
section of docs/design.md; the source tree of docs/design.md §1 lists exactly the modules of
src/nlpzoo.
Pipeline outputs (data/, models/, eval/, metrics/, plots/, reports/, checkpoints/, ...) are not
checked: a fresh clone does not have them yet.
"""

from __future__ import annotations

import contextlib
import glob
import io
import re
from pathlib import Path

import pytest
import yaml

from nlpzoo.__main__ import main as nlpzoo_main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# trees whose files the docs cite; other trees are pipeline outputs
CHECKED = ("src", "stages", "tests", "benchmarks", "docs", ".ci")
TOP_LEVEL = ("Makefile", "dvc.yaml", "params.yaml", "pyproject.toml", "README.md")
PATH = re.compile(
    r"(?<![\w./${'-])(?:\.ci|src|stages|tests|benchmarks|docs)/[\w./*-]*[\w/*](?:::\w+)?"
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"python -m nlpzoo ([a-z][\w-]*)")
MAKE = re.compile(r"(?:^|[\s;&|(])make ([a-z][\w-]*)")
DESIGN_CITE = re.compile(r"design\.md\)?((?:,? §\d+)+)")
SECTION = re.compile(r"^## §(\d+)\b", re.M)
STAGE = re.compile(r"\b(corpus|prepare|vocab|train|evaluate)([@-])(\{[\w,]+\}|[A-Za-z]\w*)")


def _text(doc: Path) -> str:
    return doc.read_text(encoding="utf-8")


def _code(text: str) -> list[str]:
    """Inline code spans and fenced blocks (comments after `#` dropped from the blocks)."""
    blocks = [
        "\n".join(line.split(" #")[0] for line in b.splitlines()) for b in FENCE.findall(text)
    ]
    rest = FENCE.sub("", text)
    return blocks + CODE_SPAN.findall(rest)


def _exists(rel: str) -> bool:
    """A repository path; upper-case segments (RUN, FAMILY, ROLE) and `*` stand for any name."""
    rel = rel.split("::")[0].rstrip("/.")
    pattern = "/".join(re.sub(r"^[A-Z][A-Z_]*(?=\.|$)", "*", s) for s in rel.split("/"))
    return bool(glob.glob(str(ROOT / pattern)))


def _test_function(node: str) -> bool:
    """`tests/x.py::test_name` names a function defined in that file."""
    path, _, name = node.partition("::")
    text = (ROOT / path).read_text(encoding="utf-8")
    return re.search(rf"^\s*(?:async )?def {re.escape(name)}\(", text, re.M) is not None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_named_paths_exist(doc: Path) -> None:
    text = _text(doc)
    missing = []
    for rel in sorted(set(PATH.findall(text))):
        if not _exists(rel) or ("::" in rel and not _test_function(rel)):
            missing.append(rel)
    for code in _code(text):
        for name in TOP_LEVEL:
            if re.search(rf"(?<![\w/.]){re.escape(name)}\b", code) and not (ROOT / name).exists():
                missing.append(name)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:|#", target):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            missing.append(f"link {target}")
    assert not missing, f"{doc.name} names what does not exist: {missing}"


def _subcommand_exists(name: str) -> bool:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            nlpzoo_main([name, "--help"])
        except SystemExit as e:
            return e.code == 0
    return False


def test_named_commands_exist() -> None:
    named = {c for doc in DOCS for code in _code(_text(doc)) for c in COMMAND.findall(code)}
    assert {"validate", "translate"} <= named  # the pattern finds what the README shows
    missing = sorted(c for c in named if not _subcommand_exists(c))
    assert not missing, f"`python -m nlpzoo` has no subcommand {missing}"


def _make_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.\- ]+):(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    return targets


def test_named_make_targets_exist() -> None:
    named = {t for doc in DOCS for code in _code(_text(doc)) for t in MAKE.findall(code)}
    assert {"repro", "test", "dashboard"} <= named
    missing = sorted(named - _make_targets())
    assert not missing, f"the Makefile has no target {missing}"


def _stages() -> set[str]:
    """Every stage of dvc.yaml, `foreach` stages expanded to NAME@ITEM."""
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    names = set()
    for name, stage in dvc["stages"].items():
        items = stage.get("foreach") if isinstance(stage, dict) else None
        if items is None:
            names.add(name)
            continue
        if isinstance(items, str):  # "${models}": a params key
            items = params[items.strip("${}")]
        names.update(f"{name}@{item}" for item in items)
    return names


def test_named_stages_exist() -> None:
    """`train-nnlm`, `corpus@{lm,mt}`, `evaluate-RUN` (RUN, ROLE: any) name stages of dvc.yaml."""
    stages = _stages()
    runs = set(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["models"])
    missing = set()
    for doc in DOCS:
        for stage, sep, what in STAGE.findall(_text(doc)):
            if sep == "-" and what not in runs and not what.isupper():
                continue  # prose ("train-time"); a hyphenated name is checked for runs only
            for item in what.strip("{}").split(","):
                name = f"{stage}{sep}{item}"
                if item.isupper():
                    if not any(s.startswith(f"{stage}{sep}") for s in stages):
                        missing.add(name)
                elif name not in stages:
                    missing.add(name)
    assert not missing, f"stages not in dvc.yaml: {sorted(missing)}"


def _cited_files() -> list[Path]:
    files = [*DOCS]
    for tree in ("src", "stages", "tests", "benchmarks"):
        files += [p for p in (ROOT / tree).rglob("*") if p.is_file() and _is_source(p)]
    return files


def _is_source(p: Path) -> bool:
    skip = ("__pycache__", ".pytest_cache")
    return not any(part in skip or part.endswith(".egg-info") for part in p.parts) and (
        p.suffix in (".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".sh", "")
    )


def test_no_reference_to_a_document_outside_the_repository() -> None:
    banned = "DESIGN" + " §"
    found = [
        p.relative_to(ROOT).as_posix()
        for p in _cited_files()
        if banned in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert not found, f"{banned!r} (a document a clone does not contain) in {found}"


def test_design_citations_resolve() -> None:
    sections = {int(n) for n in SECTION.findall(_text(ROOT / "docs" / "design.md"))}
    assert sections == set(range(1, len(sections) + 1)), "design.md numbers its sections §1..§N"
    bad = []
    for p in _cited_files():
        text = p.read_text(encoding="utf-8", errors="replace")
        cites = [int(n) for m in DESIGN_CITE.findall(text) for n in re.findall(r"\d+", m)]
        if p.name == "design.md":
            cites += [int(n) for n in re.findall(r"§(\d+)", text)]
        bad += [f"{p.relative_to(ROOT).as_posix()}: §{n}" for n in cites if n not in sections]
    assert not bad, f"citations of sections design.md does not have: {bad}"


def _layout_modules() -> set[str]:
    """The .py files the source tree of docs/design.md §1 lists under `src/nlpzoo/`, relative
    to it."""
    design = _text(ROOT / "docs" / "design.md")
    section = design[design.index("## §1") : design.index("## §2")]
    block = next(b for b in FENCE.findall(section) if "\nsrc/nlpzoo/\n" in b)
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("src/nlpzoo/"))
    names, folder = set(), ""
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        tokens = line.split()
        if re.fullmatch(r"[a-z_]+/", tokens[0]):
            folder = tokens[0]
        elif line.startswith("  ") and not line.startswith("   "):
            folder = ""
        names.update(folder + t for t in tokens if re.fullmatch(r"[\w]+\.py", t))
    return names


def test_design_source_tree_lists_every_module() -> None:
    listed = _layout_modules()
    pkg = ROOT / "src" / "nlpzoo"
    on_disk = {
        p.relative_to(pkg).as_posix()
        for p in pkg.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    assert len(listed) > 20, "the source tree was not found or not parsed"
    assert not listed - on_disk, f"design.md §1 lists missing modules {sorted(listed - on_disk)}"
    assert not on_disk - listed, f"design.md §1 omits modules {sorted(on_disk - listed)}"


# A documented call `name(a, b[, c])` in design.md: the code span's name and its parameters.
SIGNATURE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([a-z_]\w*)\(([\w, \[\]=]*)\)")


def _defined_signatures() -> dict[str, list[list[str]]]:
    """Every function and method of src/nlpzoo by name -> the positional parameters of each
    definition (`self` left out), read with `ast`."""
    import ast

    found: dict[str, list[list[str]]] = {}
    for path in sorted((ROOT / "src" / "nlpzoo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                found.setdefault(node.name, []).append([a for a in args if a != "self"])
    return found


def _documented_signatures(text: str) -> list[tuple[str, list[str]]]:
    """(name, parameters) of each call written in a code span, optional `[...]` parts dropped."""
    calls = []
    for span in CODE_SPAN.findall(text):
        m = SIGNATURE.match(span)
        if m is None:
            continue
        name, params = m.groups()
        params = re.sub(r"\[[^\]]*\]", "", params)
        calls.append((name, [p.split("=")[0].strip() for p in params.split(",") if p.strip()]))
    return calls


def test_design_signatures_match_the_code() -> None:
    """Each function design.md writes with its parameters (`manual_step(batch, progress,
    progress_end)`, `build(cls, section, where)`, ...) is defined in src/nlpzoo with those leading
    parameters, by at least one definition of that name; names the project does not define (a
    library's) are left out."""
    defined = _defined_signatures()
    calls = _documented_signatures(_text(ROOT / "docs" / "design.md"))
    checked, wrong = 0, []
    for name, params in calls:
        if name not in defined:
            continue
        checked += 1
        if not any(d[: len(params)] == params for d in defined[name]):
            wrong.append(f"{name}({', '.join(params)}): defined as {defined[name][:3]}")
    assert checked >= 10, "the signature pattern found too few documented calls"
    assert not wrong, "design.md documents signatures the code does not have:\n" + "\n".join(wrong)


def test_the_signature_check_sees_a_wrong_signature() -> None:
    defined = _defined_signatures()
    ((name, params),) = _documented_signatures("`manual_step(batch, progress)` and `x` alone")
    assert (name, params) == ("manual_step", ["batch", "progress"])
    assert any(d[:2] == params for d in defined[name])  # a prefix is accepted
    ((name, params),) = _documented_signatures("`manual_step(batch, step, progress_end)`")
    assert not any(d[: len(params)] == params for d in defined[name])
