"""Render the report from metrics/, plots/, eval/ and the runs' word vectors.

Usage: python stages/report.py
Reads timings/STAGE.json of the stages before it. Writes reports/report.md, reports/index.html
(one self-contained file) and reports/figures/.
"""

import os

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.report.build import report_project


def main(argv: list[str]) -> None:
    base = root()
    report_project(
        load_params(base / "params.yaml"),  # validated; imports no torch
        root=base,
        exp_name=os.environ.get("DVC_EXP_NAME", ""),
    )


if __name__ == "__main__":
    run_stage(main)
