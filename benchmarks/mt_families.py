"""The translation families side by side: quality, decoding speed and training throughput.

Usage: python benchmarks/mt_families.py [--decode N [--untrained] [--threads T]]
Reads `metrics/RUN.json` of every translation run in params.yaml (so run
`dvc repro evaluate-seq2seq evaluate-attention evaluate-transformer evaluate-decoder_mt` first)
and prints, per run: Multi30k-style BLEU (tokenized lowercase) with beam search, sacreBLEU and
chrF, the default params' goal and the published tutorial figure for the family (bentrevett's
PyTorch seq2seq series, word-level, de→en test_2016_flickr), decoding speed (sentences/s, beam) and
training throughput (target pieces/s). With `--decode N` the decoding speed is measured again
here on the first N test sentences, greedy and beam, from models/RUN/ (with `--untrained`, runs
without a trained model use a fixed random initialisation of their params.yaml config, seed 0: it
seldom says `</s>`, so every sentence runs to its length limit), twice: stepping every row until
the batch is done, and dropping each sentence from the batch once it is done (what evaluation
does); both must give the same translations.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = {"seq2seq": 13.8, "attention": 28.3, "transformer": 36.5}  # tutorial BLEU
# the default params' goal: at least the tutorial's figure (the decoder-only translator has none)
TARGET = {**PUBLISHED, "decoder_mt": 30.0}


def _model(run: str, spec: dict, params: dict, untrained: bool):
    """models/RUN/'s model and its codec; with `untrained` and no model.pt, a seed-0 random
    initialisation of the run's params.yaml config (None where there is neither)."""
    import torch

    from nlpzoo.data.mt import Codec
    from nlpzoo.families import FAMILIES
    from nlpzoo.lifecycle import load_model

    run_dir = ROOT / "models" / run
    if (run_dir / "model.pt").is_file():
        return load_model(run_dir), Codec(run_dir / "spm.model"), "trained"
    spm = ROOT / "data" / spec["data"] / "spm.model"
    if not untrained or not spm.is_file():
        return None, None, ""
    codec = Codec(spm)
    family = FAMILIES[spec["family"]]
    section = {k: v for k, v in (params.get(run) or {}).items() if k != "trainer"}
    torch.manual_seed(0)
    model = family.model_class()(family.config(**section), len(codec))
    return model.eval(), codec, "untrained"


def _measure(model, codec, spec: dict, n: int) -> dict:
    """Sentences/s on the first n test sentences (batches of 64, as evaluation decodes), greedy
    and beam, stepping every row (`all`) or only the sentences not yet done (`active`)."""
    from nlpzoo.data.mt import load_split
    from nlpzoo.evaluation.decoding import translate_batches

    sources = load_split(ROOT / "data" / spec["data"], "test", codec).src[:n]
    cfg = model.config
    out: dict = {"same": True}
    for search, beam in (("greedy", 1), ("beam", cfg.beam_size)):
        ids = {}
        for rows, drop in (("all", False), ("active", True)):
            t0 = time.perf_counter()
            ids[rows] = translate_batches(
                model,
                sources,
                64,
                beam,
                cfg.length_penalty,
                cfg.max_len_ratio,
                drop_finished=drop,
            )
            out[search, rows] = len(sources) / (time.perf_counter() - t0)
        out["same"] &= ids["all"] == ids["active"]
        lengths = [len(s) for s in ids["active"]]
        out[search, "length"] = sum(lengths) / max(len(lengths), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", type=int, default=0, help="re-measure decoding on N sentences")
    parser.add_argument(
        "--untrained", action="store_true", help="--decode: random-init model where none trained"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from nlpzoo.families import FAMILIES

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
        if FAMILIES[family].task != "mt":
            continue
        path = ROOT / "metrics" / f"{run}.json"
        if not path.is_file():
            print(f"{run:<12} {family:<11} (no metrics: dvc repro evaluate-{run})")
            continue
        m = json.loads(path.read_text())
        greedy, beam = m.get("decode_sents_per_s_greedy"), m.get("decode_sents_per_s_beam")
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
        "target: the default params' goal (at least the tutorial's figure); pub.: bentrevett's "
        "tutorial (word-level)."
    )
    if args.decode:
        _decode_table(params, args.decode, args.untrained)


def _decode_table(params: dict, n: int, untrained: bool) -> None:
    from nlpzoo.families import FAMILIES

    print(f"\nDecoding the first {n} test sentences, sentences/s (all rows -> active rows only):")
    head = (
        f"{'run':<12} {'model':<9} {'greedy':>15} {'x':>5} {'beam':>15} {'x':>5} "
        f"{'len g/b':>9} {'same':>5}"
    )
    print(head)
    print("-" * len(head))
    for run, spec in params["models"].items():
        if FAMILIES[spec["family"]].task != "mt":
            continue
        model, codec, kind = _model(run, spec, params, untrained)
        if model is None:
            print(f"{run:<12} (no models/{run}/model.pt; --untrained measures a random init)")
            continue
        r = _measure(model, codec, spec, n)
        cells = [
            f"{r[s, 'all']:>6.1f} -> {r[s, 'active']:>5.1f} {r[s, 'active'] / r[s, 'all']:>5.2f}"
            for s in ("greedy", "beam")
        ]
        print(
            f"{run:<12} {kind:<9} {cells[0]} {cells[1]} "
            f"{r['greedy', 'length']:>4.1f}/{r['beam', 'length']:<4.1f} {r['same']!s:>5}"
        )
    print("len g/b: mean translation length in pieces, greedy/beam; same: identical translations.")


if __name__ == "__main__":
    main()
