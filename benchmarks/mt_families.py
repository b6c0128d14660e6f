"""The translation families side by side: quality, decoding speed and training throughput.

Usage: python benchmarks/mt_families.py [--decode N]
Reads `metrics/RUN.json` of every translation run in params.yaml (so run
`dvc repro evaluate@seq2seq evaluate@attention evaluate@transformer evaluate@decoder_mt` first)
and prints, per run: Multi30k-style BLEU (tokenized lowercase) with beam search, sacreBLEU and
chrF, the issue's target and the published tutorial figure for the family (bentrevett's PyTorch
seq2seq series, word-level, de→en test_2016_flickr), decoding speed (sentences/s, beam) and
training throughput (target pieces/s). With `--decode N` the decoding speed is measured again
here on the first N test sentences, greedy and beam, from models/RUN/.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = {"seq2seq": 13.8, "attention": 28.3, "transformer": 36.5}  # tutorial BLEU
TARGET = {"seq2seq": 12.0, "attention": 25.0, "transformer": 30.0}  # CPU defaults, ≤ 15 min


def _measure(run: str, spec: dict, n: int) -> tuple[float, float]:
    from nlpzoo.data.mt import Codec, load_split
    from nlpzoo.evaluation.decoding import translate_batches
    from nlpzoo.mt_runner import load_mt_model

    model = load_mt_model(ROOT / "models" / run)
    codec = Codec(ROOT / "models" / run / "spm.model")
    sources = load_split(ROOT / "data" / spec["data"], "test", codec).src[:n]
    cfg = model.config
    speeds = []
    for beam in (1, cfg.beam_size):
        t0 = time.time()
        translate_batches(model, sources, 64, beam, cfg.length_penalty, cfg.max_len_ratio)
        speeds.append(len(sources) / (time.time() - t0))
    return speeds[0], speeds[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", type=int, default=0, help="re-measure decoding on N sentences")
    args = parser.parse_args()
    from nlpzoo.models import TASKS

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    head = (
        f"{'run':<12} {'family':<11} {'params':>9} {'ep':>3} {'train s':>8} {'tgt tok/s':>9} "
        f"{'BLEU tok-lc':>11} {'target':>6} {'pub.':>5} {'sacreBLEU':>9} {'chrF':>5} "
        f"{'greedy s/s':>10} {'beam s/s':>8}"
    )
    print(head)
    print("-" * len(head))
    for run, spec in params["models"].items():
        family = spec["family"]
        if TASKS.get(family) != "mt":
            continue
        path = ROOT / "metrics" / f"{run}.json"
        if not path.is_file():
            print(f"{run:<12} {family:<11} (no metrics: dvc repro evaluate@{run})")
            continue
        m = json.loads(path.read_text())
        greedy, beam = m.get("decode_sents_per_s_greedy"), m.get("decode_sents_per_s_beam")
        if args.decode:
            greedy, beam = _measure(run, spec, args.decode)
        print(
            f"{run:<12} {family:<11} {m.get('params', 0):>9,} {m.get('epochs', 0):>3} "
            f"{m.get('train_seconds', 0):>8.0f} {m.get('train_tokens_per_s', 0):>9.0f} "
            f"{m.get('bleu_tok_lc_beam', float('nan')):>11.1f} "
            f"{TARGET.get(family, float('nan')):>6.1f} {PUBLISHED.get(family, float('nan')):>5.1f} "
            f"{m.get('bleu_beam', float('nan')):>9.1f} {m.get('chrf_beam', float('nan')):>5.1f} "
            f"{greedy or 0:>10.1f} {beam or 0:>8.1f}"
        )
    print(
        "\nBLEU tok-lc: Moses-tokenized lowercase BLEU with beam search (the Multi30k convention);"
    )
    print(
        "target: the default-params goal on a 2-core CPU; pub.: bentrevett's tutorial (word-level)."
    )


if __name__ == "__main__":
    main()
