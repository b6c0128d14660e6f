"""Register one trained and evaluated run in MLflow's Model Registry (nlpzoo.registry): its files
as a text-in/text-out MLflow model of its own MLflow run, a new version of `nlpzoo-RUN`, and the
`champion` alias on the version of best test metric.

Usage: python stages/register.py RUN
Reads models/RUN/ and metrics/RUN.json; writes registry/RUN.json.
"""

from nlpzoo import registry
from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.params import check_run_name


def main(argv: list[str]) -> None:
    (run,) = argv
    check_run_name(run)  # before anything names a file after it
    registry.register(load_params(), name=run, root=root())


if __name__ == "__main__":
    run_stage(main)
