"""Evaluate one trained run with the shared protocol (perplexity, and more as the family allows).

Usage: python stages/evaluate.py RUN
Reads models/RUN/ and data/<models.RUN.data>/; writes metrics/RUN.json and models/RUN/eval/,
and logs the metrics to the run's MLflow run.
"""

from nlpzoo import runner
from nlpzoo.cli import load_params, root, run_stage


def main(argv: list[str]) -> None:
    (run,) = argv
    runner.evaluate(load_params(), name=run, root=root())


if __name__ == "__main__":
    run_stage(main)
