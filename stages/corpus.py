"""Fetch the raw sources one corpus role needs, verified by SHA-256.

Usage: python stages/corpus.py {lm|mt|eval}
Reads params `lm`, `mt`; writes data/raw/ROLE/. Set NLPZOO_DATA_MIRROR to copy from a local mirror.
"""

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.config import build
from nlpzoo.data.prepare import fetch_corpus
from nlpzoo.data.sources import mirror_from_env
from nlpzoo.layout import Layout
from nlpzoo.params_data import LMDataConfig, MTDataConfig


def main(argv: list[str]) -> None:
    (role,) = argv
    params = load_params()
    fetch_corpus(
        role,
        lm=build(LMDataConfig, params.get("lm"), "lm"),
        mt=build(MTDataConfig, params.get("mt"), "mt"),
        raw_root=Layout(root()).raw(),
        mirror=mirror_from_env(),
    )


if __name__ == "__main__":
    run_stage(main)
