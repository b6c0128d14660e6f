"""Tokenize, normalise and split one corpus.

Usage: python stages/prepare.py {lm|mt}
Reads data/raw/ROLE/ and params `lm` or `mt`; writes data/prepared/ROLE/.
"""

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.config import build
from nlpzoo.data.prepare import prepare_lm, prepare_mt, raw_dir_for
from nlpzoo.layout import Layout
from nlpzoo.params_data import LMDataConfig, MTDataConfig


def main(argv: list[str]) -> None:
    (role,) = argv
    params = load_params()
    lm = build(LMDataConfig, params.get("lm"), "lm")
    mt = build(MTDataConfig, params.get("mt"), "mt")
    raw = raw_dir_for(role, lm, mt, Layout(root()).raw())
    out = Layout(root()).prepared(role)
    if role == "lm":
        prepare_lm(lm, raw_dir=raw, out_dir=out)
    else:
        prepare_mt(mt, raw_dir=raw, out_dir=out)


if __name__ == "__main__":
    run_stage(main)
