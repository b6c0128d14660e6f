"""Kneser-Ney perplexity on Brown (Bengio split) across orders, casing and vocabulary cut-off.

Usage: python benchmarks/kneser_ney_brown.py path/to/brown.zip
Shows how much the preprocessing choices move the baseline that every neural LM is compared with.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from nlpzoo.data.prepare import brown_sentences
from nlpzoo.data.vocab import Vocab
from nlpzoo.models.ngram import Config, KneserNey


def main(zip_path: Path) -> None:
    print("| lowercase | min_count | V | order | valid ppl | test ppl | fit+score s |")
    print("|---|---|---|---|---|---|---|")
    for lower in (True, False):
        splits: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
        seen = 0
        for sent in brown_sentences(zip_path, lower, 10**6):
            key = "train" if seen < 800_000 else "valid" if seen < 1_000_000 else "test"
            splits[key].append(" ".join(sent))
            seen += len(sent)
        counts = Counter(w for s in splits["train"] for w in s.split())
        for min_count in (1, 2, 4):
            vocab = Vocab.build(counts, min_count)
            train, valid, test = (vocab.encode_lines(splits[k]) for k in ("train", "valid", "test"))
            for order in (2, 3, 4, 5):
                t0 = time.perf_counter()
                model = KneserNey(Config(order=order), len(vocab)).fit(train)
                v, t = model.perplexity(valid), model.perplexity(test)
                dt = time.perf_counter() - t0
                row = (lower, min_count, len(vocab), order, f"{v:.1f}", f"{t:.1f}", f"{dt:.1f}")
                print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
