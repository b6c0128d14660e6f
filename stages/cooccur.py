"""Count GloVe word co-occurrences over the LM training split, in bounded memory.

Usage: python stages/cooccur.py
Reads data/prepared/lm/train.txt, data/vocab/lm/vocab.txt and params `cooccur`;
writes data/cooccur/ (cooccur.npz, a copy of vocab.txt, stats.json).
"""

import shutil

from nlpzoo.cli import load_params, root, run_stage
from nlpzoo.config import build
from nlpzoo.data.cooccur import count_cooccurrences
from nlpzoo.data.vocab import Vocab, read_lines
from nlpzoo.io import atomic_dir, atomic_write_json
from nlpzoo.layout import Layout
from nlpzoo.params_data import CooccurConfig


def main(argv: list[str]) -> None:
    params = load_params()
    cfg = build(CooccurConfig, params.get("cooccur"), "cooccur")
    where = Layout(root())
    vocab = Vocab.load(where.vocab("lm") / "vocab.txt")
    with atomic_dir(where.cooccur) as tmp:
        stats = count_cooccurrences(
            read_lines(where.prepared("lm") / "train.txt"),
            word_to_id=vocab.index,
            vocab_size=len(vocab),
            out_path=tmp / "cooccur.npz",
            config=cfg,
            scratch_dir=where.data(),
        )
        shutil.copyfile(where.vocab("lm") / "vocab.txt", tmp / "vocab.txt")
        atomic_write_json(tmp / "stats.json", stats)


if __name__ == "__main__":
    run_stage(main)
