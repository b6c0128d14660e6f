"""Render the report from metrics/, plots/, eval/ and the runs' word vectors.

Usage: python stages/report.py
Reads timings/STAGE.json of the stages before it. Writes reports/report.md, reports/index.html
(one self-contained file) and reports/figures/.
"""

import hashlib
import json
import os
import subprocess

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.config import build
from nlpzoo.params import ReportConfig
from nlpzoo.report.build import build_report
from nlpzoo.report.inputs import Provenance, load_json


def git_revision(base) -> str:
    res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=base, capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else ""


def main(argv: list[str]) -> None:
    base = root()
    params = load_params(base / "params.yaml")  # validated; imports no torch
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
        timings_dir=base / "timings",  # each earlier stage's time (nlpzoo.cli.write_timing)
        params=params,  # its enabled runs of `models:`; other metrics files are only listed
        config=build(ReportConfig, params.get("report"), "report"),
        provenance=provenance,
        mlflow=True,  # each run's figures as artifacts of its MLflow run
    )


if __name__ == "__main__":
    run_stage(main)
