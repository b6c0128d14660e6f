"""What the report reads, and what it notes as missing instead of failing.

The report shows exactly the enabled runs of params' `models:`; each run's task comes from its
family's record (`nlpzoo.families`). Metrics files of other runs (left by an earlier pipeline, or
of a disabled run) are not read, only listed in the footer.

metrics/RUN.json          flat metrics of one run (docs/design.md §4), its cost included
                          (`cost_formula`, `cost_terms`, `cost_per_token`, as the model states
                          it); metrics/mixtures.json
plots/RUN.csv             learning curve: epoch, step, train_loss, val_loss, val_ppl, seconds
eval/RUN/                 neighbours.json, analogies.json, LM samples.json, MT samples and
                          attention arrays
models/RUN/vectors.txt    word2vec text format; only the rows of the probe words are read
data/vocab/TASK/stats.json  vocabulary size and split sizes, for the header
timings/STAGE.json        each stage's wall and CPU time (`nlpzoo.cli.write_timing`)
benchmarks/results/roofline.json  the one-thread fp32 and bf16 matrix-product peaks at the runs'
                          shapes and the machine they were measured on (benchmarks/roofline.py)
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nlpzoo.families import FAMILIES
from nlpzoo.layout import Layout
from nlpzoo.taskinfo import task_info
from nlpzoo.tracking import RUN_FILE, git_commit

log = logging.getLogger(__name__)


@dataclass
class Provenance:
    """What produced the page: shown in the header."""

    git_rev: str = ""
    exp_name: str = ""  # DVC experiment name, empty for a plain `dvc repro`
    params_hash: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # the params sections `lm` and `mt`
    vocab: dict[str, dict] = field(default_factory=dict)  # task -> data/vocab/TASK/stats.json


def read_provenance(root: Path, params: dict[str, Any], exp_name: str = "") -> Provenance:
    """The header's facts: the git revision of `root`, the DVC experiment `exp_name`, a hash of
    `params`, its data sections and each task's data/vocab/TASK/stats.json."""
    root = Path(root)
    return Provenance(
        git_rev=git_commit(root) or "",
        exp_name=exp_name,
        params_hash=hashlib.sha256(
            json.dumps(params, sort_keys=True, default=str).encode()
        ).hexdigest()[:12],
        data={"lm": params.get("lm"), "mt": params.get("mt")},
        vocab={t: load_json(Layout(root).vocab(t) / "stats.json") for t in ("lm", "mt")},
    )


@dataclass
class Run:
    name: str
    family: str
    task: str
    metrics: dict[str, Any]
    problems: list[str] = field(default_factory=list)


def task_of(family: str) -> str:
    """The task a family is scored on, from the family registry."""
    return FAMILIES[family].task if family in FAMILIES else "unknown"


def load_runs(
    metrics_dir: Path, runs: dict[str, str]
) -> tuple[dict[str, Run], dict, list[tuple[str, str]], list[tuple[str, str]]]:
    """The metrics of exactly the runs in `runs` (each enabled run of `models:` -> its family),
    in that order; metrics files of any other run are ignored, not read.

    Returns (runs, mixtures, missing, ignored): the runs with readable metrics, the mixtures of
    `metrics/mixtures.json` (run -> its mixture), (run, why) for each run without usable metrics,
    and (file's run name, why) for each metrics file left out."""
    found: dict[str, Run] = {}
    missing: list[tuple[str, str]] = []
    files = {p.stem: p for p in sorted(Path(metrics_dir).glob("*.json"))}
    mixtures = _mixtures(files.pop("mixtures", None), runs)
    ignored = [
        (
            name,
            f"`metrics/{name}.json` present but `{name}` is not an enabled run in `models:`; "
            "ignored",
        )
        for name in sorted(set(files) - set(runs))
    ]
    for name, family in runs.items():
        if family not in FAMILIES:
            missing.append((name, f"unknown family `{family}` (not in nlpzoo.families)"))
            continue
        path = files.get(name)
        if path is None:
            missing.append((name, f"no metrics/{name}.json (not run yet, or its stage failed)"))
            continue
        try:
            m = json.loads(path.read_text())
            if not isinstance(m, dict):
                raise ValueError("not a JSON object")
        except (json.JSONDecodeError, ValueError) as err:
            missing.append((name, f"{Layout().metrics(name)} unreadable ({err})"))
            continue
        if m.get("family") not in (None, family):
            missing.append(
                (
                    name,
                    f"{Layout().metrics(name)} is of family `{m['family']}` but `models:` says "
                    f"`{family}` (a stale file?); ignored",
                )
            )
            continue
        task = task_of(family)
        run = Run(name, family, task, m)
        lacking = [k for k in task_info(task).required if m.get(k) is None]
        if lacking:
            run.problems.append("metrics lack " + ", ".join(f"`{k}`" for k in lacking))
        found[name] = run
    return found, mixtures, missing, ignored


def _mixtures(path: Path | None, runs: dict[str, str]) -> dict[str, Any]:
    """run -> its mixture with the baseline, for the runs in `runs` only (and only when the
    baseline itself is one of them: a mixture with a run that is gone compares nothing)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        log.warning("metrics/mixtures.json is not valid JSON; mixtures left out")
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        return {}
    if data.get("baseline") is not None and data["baseline"] not in runs:
        return {}
    return {name: mix for name, mix in data["runs"].items() if name in runs}


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


def probe_vectors(models_dir: Path, run: str, words: set[str]) -> dict[str, np.ndarray] | None:
    """The rows of `words` from models/RUN/vectors.txt; None when the run has no such file."""
    path = Path(models_dir) / run / "vectors.txt"
    return read_vectors(path, words) if path.is_file() else None


# --------------------------------------------------------------------------- eval/RUN/


def lm_samples(eval_dir: Path, run: str) -> dict | None:
    """A language model's samples, `eval/RUN/samples.json` (`nlpzoo.generation.samples_record`):
    the prompt, the sampling settings and `samples`; None without samples."""
    record = load_json(Path(eval_dir) / run / "samples.json")
    return record if isinstance(record, dict) and record.get("samples") else None


def neighbours(eval_dir: Path, run: str) -> dict | None:
    """probe word -> [[neighbour, cosine], ...], best first (`eval/RUN/neighbours.json`)."""
    found = load_json(Path(eval_dir) / run / "neighbours.json")
    return found if isinstance(found, dict) and found else None


def analogies(eval_dir: Path, run: str) -> list[dict] | None:
    """The run's answers to the `evaluation.analogies` questions (`eval/RUN/analogies.json`)."""
    found = load_json(Path(eval_dir) / run / "analogies.json")
    if isinstance(found, list) and all(isinstance(q, dict) for q in found):
        return found
    return None


def mt_samples(eval_dir: Path, run: str) -> list[dict] | None:
    """Sample translations, `eval/RUN/samples.json`: a list of {source, reference, greedy,
    beam} (tasks/mt.py); None when there is none."""
    rows = load_json(Path(eval_dir) / run / "samples.json")
    if not isinstance(rows, list):
        return None
    return [row for row in rows if isinstance(row, dict)] or None


def attention_maps(eval_dir: Path, run: str) -> list[tuple[list[str], list[str], np.ndarray]]:
    """(source tokens, output tokens, weights (T, S)) per sentence of `eval/RUN/attention.json`
    (tasks/mt.py: Bahdanau's α, the Transformer's last-layer cross-attention)."""
    items = load_json(Path(eval_dir) / run / "attention.json")
    found = []
    for it in items if isinstance(items, list) else []:
        try:
            w = np.asarray(it["weights"], dtype=np.float64)
            found.append(
                ([str(t) for t in it["source_tokens"]], [str(t) for t in it["target_tokens"]], w)
            )
        except (KeyError, TypeError, ValueError):
            continue  # a malformed entry is skipped, the run's other maps still drawn
    return found


def has_mlflow_run(eval_dir: Path, run: str) -> bool:
    """Whether the run recorded its MLflow run (`eval/RUN/mlflow_run.json`, `nlpzoo.tracking`)."""
    return (Path(eval_dir) / run / RUN_FILE).is_file()


def load_timings(timings_dir: Path, stages: list[str]) -> dict[str, dict | None]:
    """stage -> its timings/STAGE.json record, in the order of `stages`; None where the file
    is missing or unreadable (not recorded)."""
    found: dict[str, dict | None] = {}
    for stage in stages:
        record = load_json(Path(timings_dir) / f"{stage}.json")
        found[stage] = record if isinstance(record, dict) else None
    return found


@dataclass
class Roofline:
    """What benchmarks/roofline.py measured: one thread's matrix-product peak in GFLOP/s per
    precision (the largest figure over the runs' shapes, as roofline.py takes it), and the
    machine: CPU model, the flags roofline.py looks at (flag -> present), torch's version."""

    peak_gflops: dict[str, float]  # "fp32", "bf16" -> GFLOP/s
    cpu: str = "?"
    flags: dict[str, bool] = field(default_factory=dict)
    torch: str = "?"
    threads: int | None = None
    date: str = ""


def load_roofline(path: Path) -> Roofline | None:
    """benchmarks/results/roofline.json as a `Roofline`; None when the file is missing,
    unreadable or holds no peak."""
    data = load_json(path)
    if not isinstance(data, dict):
        return None
    rows = data.get("peaks") if isinstance(data.get("peaks"), dict) else {}
    peaks = {}
    for kind in ("fp32", "bf16"):
        found = [_positive(r.get(f"{kind}_gflops")) for r in rows.values() if isinstance(r, dict)]
        found = [x for x in found if x is not None]
        best = max(found) if found else _positive(data.get(f"peak_{kind}_gflops"))
        if best is not None:
            peaks[kind] = best
    if not peaks:
        return None
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    flags = machine.get("flags") if isinstance(machine.get("flags"), dict) else {}
    threads = machine.get("threads")
    return Roofline(
        peak_gflops=peaks,
        cpu=str(machine.get("cpu") or "?"),
        flags={str(k): bool(v) for k, v in flags.items()},
        torch=str(machine.get("torch") or "?"),
        threads=threads if isinstance(threads, int) and not isinstance(threads, bool) else None,
        date=str(data.get("date") or ""),
    )


def _positive(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) and x > 0 else None
