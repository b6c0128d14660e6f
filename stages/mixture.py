"""Interpolate every neural LM run with the n-gram baseline (Bengio et al. 2003).

Usage: python stages/mixture.py
Reads eval/*/logprobs.npz and params `mixture`, `models`; writes metrics/mixtures.json and logs
`test_ppl_mix` to each run's MLflow run.
"""

from nlpzoo import runner
from nlpzoo.cli import load_params, root, run_stage


def main(argv: list[str]) -> None:
    runner.mixtures(load_params(), root=root())


if __name__ == "__main__":
    run_stage(main)
