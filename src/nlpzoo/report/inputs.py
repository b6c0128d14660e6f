"""What the report reads, and what it notes as missing instead of failing.

metrics/RUN.json          flat metrics of one run (docs/design.md §4); metrics/mixtures.json
plots/RUN.csv             learning curve: epoch, step, train_loss, val_loss, val_ppl, seconds
eval/RUN/                 neighbours.json, MT samples and attention arrays
models/RUN/vectors.txt    word2vec text format; only the rows of the probe words are read
data/vocab/TASK/stats.json  vocabulary size and split sizes, for the header
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

# keys each task's table needs; a run without one of them is listed in the footer
REQUIRED = {
    "lm": ("valid_ppl", "test_ppl", "params", "train_seconds", "train_tokens_per_s"),
    "vectors": (
        "analogy_acc",
        "analogy_sem_acc",
        "analogy_syn_acc",
        "analogy_coverage",
        "ws353_rho",
        "simlex_rho",
    ),
    "mt": ("bleu", "chrf", "test_ppl"),
}


@dataclass
class Provenance:
    """What produced the page: shown in the header."""

    git_rev: str = ""
    exp_name: str = ""  # DVC experiment name, empty for a plain `dvc repro`
    params_hash: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # the params sections `lm` and `mt`
    vocab: dict[str, dict] = field(default_factory=dict)  # task -> data/vocab/TASK/stats.json


@dataclass
class Run:
    name: str
    family: str
    task: str
    metrics: dict[str, Any]
    expected: bool  # named in params' `models:`
    problems: list[str] = field(default_factory=list)


def infer_task(family: str, metrics: dict[str, Any]) -> str:
    if metrics.get("task"):
        return str(metrics["task"])
    try:
        from nlpzoo.models import TASKS
    except Exception:  # pragma: no cover - a broken model file must not stop the report
        TASKS = {}
    if family in TASKS:
        return TASKS[family]
    if any(k.startswith(("bleu", "sacrebleu", "chrf")) for k in metrics):
        return "mt"
    if "test_ppl" in metrics:
        return "lm"
    if "analogy_acc" in metrics:
        return "vectors"
    return "unknown"


def load_runs(metrics_dir: Path, expected: dict[str, str]) -> tuple[dict[str, Run], dict, list]:
    """Runs with a metrics file, in params order first; plus the mixtures and the missing runs.

    `expected` maps each run named in params to its family. Returns (runs, mixtures, missing)
    where missing lists (run, why) for expected runs without a readable metrics file."""
    runs: dict[str, Run] = {}
    mixtures: dict[str, Any] = {}
    missing: list[tuple[str, str]] = []
    files = {p.stem: p for p in sorted(Path(metrics_dir).glob("*.json"))}
    if "mixtures" in files:
        try:
            mixtures = json.loads(files.pop("mixtures").read_text())
        except json.JSONDecodeError:
            log.warning("metrics/mixtures.json is not valid JSON; mixtures left out")
    order = list(expected) + sorted(set(files) - set(expected))
    for name in order:
        path = files.get(name)
        if path is None:
            missing.append((name, f"no metrics/{name}.json (not run yet, or its stage failed)"))
            continue
        try:
            m = json.loads(path.read_text())
            if not isinstance(m, dict):
                raise ValueError("not a JSON object")
        except (json.JSONDecodeError, ValueError) as err:
            missing.append((name, f"metrics/{name}.json unreadable ({err})"))
            continue
        family = str(m.get("family") or expected.get(name) or "unknown")
        task = infer_task(family, m)
        run = Run(name, family, task, m, expected=name in expected)
        if not run.expected and expected:
            run.problems.append("not in params.yaml `models:` (a stale metrics file?)")
        lacking = [k for k in REQUIRED.get(task, ()) if m.get(k) is None]
        if lacking:
            run.problems.append("metrics lack " + ", ".join(f"`{k}`" for k in lacking))
        runs[name] = run
    return runs, mixtures.get("runs", {}) if isinstance(mixtures, dict) else {}, missing


def load_curve(path: Path) -> pd.DataFrame | None:
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    return df if "epoch" in df and len(df) else None


def read_vectors(path: Path, words: set[str]) -> dict[str, np.ndarray]:
    """The rows of `words` from a word2vec text file (first line: count and dimension)."""
    found: dict[str, np.ndarray] = {}
    with open(path, encoding="utf-8") as f:
        f.readline()
        for line in f:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word in words:
                found[word] = np.array(rest.split(), dtype=np.float64)
                if len(found) == len(words):
                    break
    return found


def load_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
