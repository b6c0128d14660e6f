"""The five commands, each read top to bottom: resolve the run, check it does what the command
asks, compute with the code the MLflow model answers with (`nlpzoo.use.answers`), print."""

from __future__ import annotations

import argparse
import sys
import time

from nlpzoo.use.answers import Answerer
from nlpzoo.use.run import need_lm, need_mt, need_vectors, resolve
from nlpzoo.use.text import input_lines, note, print_json, read_input


def generate(args: argparse.Namespace) -> None:
    t = resolve(args)
    need_lm(t, "generate")
    answers = Answerer(t)
    answers.vocab  # noqa: B018 (a missing vocabulary is reported before the model loads)
    t0 = time.perf_counter()
    answers.model  # noqa: B018
    load_seconds = time.perf_counter() - t0
    record = answers.generate(
        args.prompt,
        args.tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
        samples=args.samples,
        timing=True,
    )
    if record["unknown"]:
        note(
            f"not in the vocabulary of run '{t.name}', read as <unk>: "
            + " ".join(record["unknown"])
        )
    if args.timing:
        print(
            f"model loaded in {load_seconds:.2f} s; time to first token "
            f"{record['first_token_seconds'] * 1000:.1f} ms; "
            f"{record['tokens_per_second']:,.1f} tokens/s",
            file=sys.stderr,
        )
    if args.json:
        print_json({"run": t.name, "family": t.family.name, **record})
        return
    prompt = " ".join(record["prompt_tokens"])
    for sample in record["samples"]:
        print(f"{prompt}\t{sample['text']}")


def score(args: argparse.Namespace) -> None:
    t = resolve(args)
    need_lm(t, "score")
    rows, total, unknown = Answerer(t).score(input_lines(read_input(args.input)), args.separate)
    if unknown:
        note(f"{unknown} word(s) not in the vocabulary of run '{t.name}', scored as <unk>")
    if args.json:
        mode = "separate" if args.separate else "in order"
        print_json(
            {"run": t.name, "family": t.family.name, "mode": mode, "lines": rows, "total": total}
        )
        return
    for r in rows:
        print(f"{r['line']}\t{r['log_prob']:.4f}\t{r['tokens']}\t{r['ppl']:.3f}\t{r['text']}")
    print(
        f"total\t{total['log_prob']:.4f}\t{total['tokens']}\t{total['ppl']:.4f}\t{len(rows)} lines"
    )


def neighbours(args: argparse.Namespace) -> None:
    t = resolve(args)
    need_vectors(t, "neighbours")
    answers = Answerer(t)
    found = answers.neighbours(args.words, args.k)
    probes = list(found)
    if args.json:
        table = {w: [[n, round(c, 6)] for n, c in found[w]] for w in probes}
        print_json({"run": t.name, "k": args.k, "neighbours": table})
        return
    for w in probes:
        for n, c in found[w]:
            print(f"{w}\t{n}\t{c:.4f}")


def analogy(args: argparse.Namespace) -> None:
    t = resolve(args)
    need_vectors(t, "analogy")
    question, answers = Answerer(t).analogy(
        args.a, args.b, args.c, k=args.k, method=args.method, restrict=args.restrict_vocab
    )
    if args.json:
        found = [[w, round(s, 6)] for w, s in answers]
        print_json({"run": t.name, "question": question, "method": args.method, "answers": found})
        return
    for w, s in answers:
        print(f"{w}\t{s:.4f}")


def translate(args: argparse.Namespace) -> None:
    """`nlpzoo.tasks.mt.translate`, with the model and its SentencePiece model loaded by the
    hardened loaders, so that a damaged file is one clear error."""
    t = resolve(args)
    need_mt(t, "translate")
    lines = input_lines(read_input(args.input))
    answers = Answerer(t)
    answers.model, answers.codec  # noqa: B018 (damaged files are reported for empty input too)
    beam = args.beam or answers.model.config.beam_size
    out = answers.translate(lines, beam_size=beam)
    if not lines:  # an empty file translates to an empty output
        return
    if args.json:
        print_json({"run": t.name, "beam": beam, "translations": out})
        return
    for line in out:
        print(line)
