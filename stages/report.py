"""Render the report from metrics/*.json and plots/*.csv only.

Usage: python stages/report.py
Writes reports/report.md (and its figures).
"""

from nlpzoo.cli import root, run_stage
from nlpzoo.report.markdown import build_report


def main(argv: list[str]) -> None:
    base = root()
    build_report(base / "metrics", base / "plots", base / "reports")


if __name__ == "__main__":
    run_stage(main)
