"""A report's input folders and what the runs write into them, made by hand: for the tests of the
report (test_build.py) and of its page in a browser (test_html.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nlpzoo.report.build import build_report

CURVE = "epoch,step,train_loss,val_loss,val_ppl,seconds\n0,10,5,4.9,134,1\n1,20,4.8,4.87,130,2\n"
VECTORS = {
    "analogy_acc": 0.05,
    "analogy_sem_acc": 0.02,
    "analogy_syn_acc": 0.07,
    "analogy_coverage": 0.5,
    "ws353_rho": 0.2,
    "ws353_coverage": 0.7,
    "simlex_rho": 0.1,
    "simlex_coverage": 0.9,
}
PROBES = ["king", "city", "war"]


def report_dirs(tmp_path: Path) -> dict[str, Path]:
    """metrics/, plots/, eval/ and models/ made in `tmp_path`, and reports/ (not made)."""
    dirs = {k: tmp_path / k for k in ("metrics", "plots", "eval", "models", "reports")}
    for k, d in dirs.items():
        if k != "reports":
            d.mkdir()
    return dirs


def write_json(path: Path, obj) -> None:
    """`obj` as JSON at `path`, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def vector_run(dirs: dict[str, Path], name: str, seed: int) -> None:
    """neighbours.json and vectors.txt for probe words and 3 neighbours each."""
    rng = np.random.default_rng(seed)
    words = [*PROBES] + [f"{p}_n{i}" for p in PROBES for i in range(3)]
    write_json(
        dirs["eval"] / name / "neighbours.json",
        {p: [[f"{p}_n{i}", 0.9 - 0.1 * i] for i in range(3)] for p in PROBES},
    )
    lines = [f"{len(words)} 4"] + [
        w + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for w in words
    ]
    (dirs["models"] / name).mkdir(parents=True)
    (dirs["models"] / name / "vectors.txt").write_text("\n".join(lines) + "\n")


def render(dirs, runs, **kw) -> str:
    """The report of `runs` from the folders `dirs` (`report_dirs`), written to reports/."""
    return build_report(
        metrics_dir=dirs["metrics"],
        plots_dir=dirs["plots"],
        eval_dir=dirs["eval"],
        models_dir=dirs["models"],
        out_dir=dirs["reports"],
        runs=runs,
        **kw,
    )
