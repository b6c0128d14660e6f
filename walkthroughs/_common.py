"""Helpers shared by the walkthrough pages: printing, code references, the committed full runs.

A page names the code that implements each equation with `code(path, qualname)`; the reference is
checked against the source tree (the file exists and defines that class, function or method) and
recorded in `REFERENCES`, which the page re-exports so that the tests can check it again.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCES: list[tuple[str, str]] = []

np.set_printoptions(precision=4, suppress=True, floatmode="maxprec")


def defines(path: str, qualname: str) -> bool:
    """Whether the Python file `path` (relative to the repository) defines `qualname`
    (`name`, `Class.method`), at module level or as a class member."""
    file = ROOT / path
    if not file.is_file():
        return False
    body = ast.parse(file.read_text(encoding="utf-8")).body
    for part in qualname.split("."):
        found = None
        for node in body:
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            if isinstance(node, kinds) and node.name == part:
                found = node
                break
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def code(path: str, qualname: str) -> str:
    """`path: qualname`, after checking that the file defines it; recorded in REFERENCES."""
    if not defines(path, qualname):
        raise LookupError(f"{path} defines no {qualname}")
    if (path, qualname) not in REFERENCES:
        REFERENCES.append((path, qualname))
    return f"{path}: {qualname}"


def show(label: str, value) -> np.ndarray:
    """Print a named number, vector or matrix (torch tensors too) and return it as numpy."""
    arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
    text = np.array2string(np.round(arr, 4), separator=", ")
    if "\n" in text:
        print(f"{label} =\n{text}")
    else:
        print(f"{label} = {text}")
    return arr


def curve_summary(run: str) -> dict:
    """First, last and best epoch of `plots/RUN.csv`: validation perplexity where the run has
    one, else the training loss (word vectors). Prints one line per row and the summary."""
    path = ROOT / "plots" / f"{run}.csv"
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))

    def number(text: str) -> float:
        return float(text) if text not in ("", None) else math.nan

    column = "val_ppl" if any(math.isfinite(number(r["val_ppl"])) for r in rows) else "train_loss"
    values = [(int(r["epoch"]), number(r[column]), number(r["seconds"])) for r in rows]
    values = [v for v in values if math.isfinite(v[1])]
    if not values:
        print(f"plots/{run}.csv: no curve (a closed-form fit has no epochs)")
        return {"column": None, "epochs": 0}
    best = min(values, key=lambda v: v[1])
    summary = {
        "column": column,
        "epochs": len(values),
        "first": values[0][1],
        "last": values[-1][1],
        "best": best[1],
        "best_epoch": best[0],
        "seconds": values[-1][2],
    }
    print(
        f"plots/{run}.csv: {column} over {len(values)} epoch(s): first {summary['first']:.4g}, "
        f"last {summary['last']:.4g}, best {summary['best']:.4g} (epoch {best[0]}), "
        f"{summary['seconds']:.0f} s of training"
    )
    return summary


def full_run(run: str, keys: list[str]) -> dict:
    """Print the chosen entries of the committed `metrics/RUN.json` and the learning curve of
    `plots/RUN.csv`; return both (metrics under their keys, the curve under "curve")."""
    metrics = json.loads((ROOT / "metrics" / f"{run}.json").read_text(encoding="utf-8"))
    print(f"metrics/{run}.json")
    out: dict = {"run": run}
    for key in keys:
        value = metrics.get(key)
        out[key] = value
        shown = f"{value:.4g}" if isinstance(value, float) else value
        print(f"  {key:<18} {shown}")
    out["curve"] = curve_summary(run)
    folder = ROOT / "models" / run
    if folder.is_dir():
        names = sorted(p.name for p in folder.iterdir())[:8]
        print(f"models/{run}/ holds a trained model: {', '.join(names)}")
    else:
        print(f"(models/{run}/ is not here: `make repro` trains it)")
    return out


def neighbours(run: str, words: list[str], k: int = 5) -> dict[str, list[str]]:
    """Nearest neighbours by cosine in `models/RUN/vectors.txt` (word2vec text format), or {}
    when the trained run is not here."""
    path = ROOT / "models" / run / "vectors.txt"
    if not path.is_file():
        return {}
    vocab, rows = [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip().split(" ")
            if len(parts) < 3:
                continue  # the "count dim" header
            vocab.append(parts[0])
            rows.append(np.asarray(parts[1:], dtype=np.float32))
    mat = np.stack(rows)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True) + 1e-12
    index = {w: i for i, w in enumerate(vocab)}
    found = {}
    for w in words:
        if w in index:
            sims = mat @ mat[index[w]]
            order = [i for i in np.argsort(-sims) if i != index[w]][:k]
            found[w] = [vocab[i] for i in order]
            print(f"  {w}: {', '.join(found[w])}")
    return found
