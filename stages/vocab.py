"""Build the vocabulary of one corpus from its training split, and encode its splits.

Usage: python stages/vocab.py {lm|mt}
Reads data/prepared/ROLE/ and params `vocab.ROLE`; writes data/vocab/ROLE/.
"""

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.config import build
from nlpzoo.data.vocab import build_lm_vocab, build_mt_vocab
from nlpzoo.layout import Layout
from nlpzoo.params_data import LMVocabConfig, MTVocabConfig


def main(argv: list[str]) -> None:
    (role,) = argv
    params = load_params()
    section = (params.get("vocab") or {}).get(role)
    prepared, out = Layout(root()).prepared(role), Layout(root()).vocab(role)
    if role == "lm":
        build_lm_vocab(
            build(LMVocabConfig, section, "vocab.lm"), prepared_dir=prepared, out_dir=out
        )
    else:
        cfg = build(MTVocabConfig, section, "vocab.mt")
        build_mt_vocab(cfg, prepared_dir=prepared, out_dir=out, seed=int(params.get("seed", 0)))


if __name__ == "__main__":
    run_stage(main)
