"""Interpolate every enabled language-model run of `models:` with the baseline run (the n-gram;
Bengio et al. 2003).

Usage: python stages/mixture.py
Reads eval/RUN/logprobs.npz and params `mixture`, `models`; writes metrics/mixtures.json and logs
`test_ppl_mix` to each run's MLflow run.
"""

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.evaluation.mixture import mixtures


def main(argv: list[str]) -> None:
    mixtures(load_params(), root=root())


if __name__ == "__main__":
    run_stage(main)
