"""Render the report from metrics/, plots/, eval/ and the runs' word vectors.

Usage: python stages/report.py
Writes reports/report.md, reports/index.html (one self-contained file) and reports/figures/.
"""

import hashlib
import json
import os
import subprocess

import yaml

from nlpzoo.cli import root, run_stage
from nlpzoo.config import build
from nlpzoo.params import ReportConfig
from nlpzoo.report.build import build_report
from nlpzoo.report.inputs import Provenance, load_json


def git_revision(base) -> str:
    res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=base, capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else ""


def main(argv: list[str]) -> None:
    base = root()
    # read, not validated here: the training stages validate every run (and importing the model
    # code for that would double this stage's time); the report renders whatever exists
    with open(base / "params.yaml", encoding="utf-8") as f:
        params = yaml.safe_load(f) or {}
    provenance = Provenance(
        git_rev=git_revision(base),
        exp_name=os.environ.get("DVC_EXP_NAME", ""),
        params_hash=hashlib.sha256(
            json.dumps(params, sort_keys=True, default=str).encode()
        ).hexdigest()[:12],
        data={"lm": params.get("lm"), "mt": params.get("mt")},
        vocab={t: load_json(base / "data" / "vocab" / t / "stats.json") for t in ("lm", "mt")},
    )
    build_report(
        metrics_dir=base / "metrics",
        plots_dir=base / "plots",
        eval_dir=base / "eval",
        models_dir=base / "models",
        out_dir=base / "reports",
        runs={
            name: (entry or {}).get("family", "?")
            for name, entry in params.get("models", {}).items()
        },
        params=params,
        config=build(ReportConfig, params.get("report"), "report"),
        provenance=provenance,
        mlflow=True,  # each run's figures as artifacts of its MLflow run
    )


if __name__ == "__main__":
    run_stage(main)
