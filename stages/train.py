"""Train one run named in `models:`.

Usage: python stages/train.py RUN
Reads data/<models.RUN.data>/ and params `RUN`, `models.RUN`, `trainer`, `seed`;
writes models/RUN/ and plots/RUN.csv, and opens the run's MLflow run.
"""

from nlpzoo import lifecycle
from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.params import check_run_name


def main(argv: list[str]) -> None:
    (run,) = argv
    check_run_name(run)  # before anything names a folder after it
    lifecycle.train(load_params(), name=run, root=root())


if __name__ == "__main__":
    run_stage(main)
