"""Evaluate one trained run with its task's protocol (nlpzoo.tasks: perplexity, the word-vector
protocol, BLEU and chrF, as the run's task and family allow).

Usage: python stages/evaluate.py RUN
Reads models/RUN/ and data/<models.RUN.data>/; writes metrics/RUN.json and eval/RUN/, and logs
the metrics to the run's MLflow run.
"""

from nlpzoo import lifecycle
from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.params import check_run_name


def main(argv: list[str]) -> None:
    (run,) = argv
    check_run_name(run)  # before anything names a folder after it
    lifecycle.evaluate(load_params(), name=run, root=root())


if __name__ == "__main__":
    run_stage(main)
