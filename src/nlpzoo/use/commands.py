"""The five commands, each read top to bottom: resolve the run, check it does what the command
asks, load what it needs, compute with the code the evaluation uses, print."""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

from nlpzoo.use.run import (
    load_codec,
    load_model,
    load_vectors,
    load_vocab,
    lookup,
    need_lm,
    need_mt,
    need_vectors,
    project_params,
    resolve,
)
from nlpzoo.use.text import UseError, input_lines, note, print_json, read_input


def generate(args: argparse.Namespace) -> None:
    from nlpzoo.generation import samples_record

    t = resolve(args)
    need_lm(t, "generate")
    vocab = load_vocab(t)
    t0 = time.perf_counter()
    model = load_model(t)
    load_seconds = time.perf_counter() - t0
    record = samples_record(
        t.family,
        model,
        vocab,
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
    import numpy as np

    from nlpzoo.tasks import task_of

    t = resolve(args)
    need_lm(t, "score")
    vocab = load_vocab(t)
    lines = _sentences(read_input(args.input), vocab)
    if not lines:
        raise UseError("no sentences to score (the input has no non-empty line)")
    model = load_model(t)
    task = task_of(t.family)
    if args.separate:
        scored = [task.log_probs(model, np.asarray(ids), model.config) for _, ids, _ in lines]
    else:  # one text, as the evaluation reads a split
        stream = np.concatenate([np.asarray(ids, dtype=np.int64) for _, ids, _ in lines])
        every = task.log_probs(model, stream, model.config)  # (tokens,)
        ends = np.cumsum([len(ids) for _, ids, _ in lines])
        scored = np.split(every, ends[:-1])
    rows = [
        _score_row(number, ids, unknown, lp, vocab)
        for (number, ids, unknown), lp in zip(lines, scored, strict=True)
    ]
    log_prob = float(sum(np.sum(lp, dtype=np.float64) for lp in scored))
    tokens = sum(r["tokens"] for r in rows)
    total = {"lines": len(rows), "tokens": tokens, "log_prob": log_prob}
    total["ppl"] = math.exp(-log_prob / tokens)
    unknown = sum(len(r["unknown"]) for r in rows)
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
    print(f"total\t{log_prob:.4f}\t{tokens}\t{total['ppl']:.4f}\t{len(rows)} lines")


def _sentences(text: str, vocab: Any) -> list[tuple[int, list[int], list[str]]]:
    """(line number, ids with the closing </s>, words read as <unk>) of each line that has a
    token: as the corpus is prepared, a line without one is no sentence."""
    from nlpzoo.data.vocab import EOS
    from nlpzoo.generation import tokenize

    lines = []
    for number, line in enumerate(input_lines(text), start=1):
        if line.split():
            ids, unknown = tokenize(line, vocab)
            lines.append((number, [*ids, EOS], unknown))
    return lines


def _score_row(number: int, ids: list[int], unknown: list[str], lp: Any, vocab: Any) -> dict:
    import numpy as np

    total = float(np.sum(lp, dtype=np.float64))
    return {
        "line": number,
        "text": " ".join(vocab.words[i] for i in ids[:-1]),
        "tokens": len(ids),
        "log_prob": total,
        "ppl": math.exp(-total / len(ids)),
        "unknown": unknown,
    }


def neighbours(args: argparse.Namespace) -> None:
    from nlpzoo.evaluation.vectors import nearest_neighbours

    t = resolve(args)
    need_vectors(t, "neighbours")
    words, vectors = load_vectors(t)
    probes = [lookup(t, words, w) for w in args.words]
    found = nearest_neighbours(words, vectors, probes, k=args.k)
    if args.json:
        table = {w: [[n, round(c, 6)] for n, c in found[w]] for w in probes}
        print_json({"run": t.name, "k": args.k, "neighbours": table})
        return
    for w in probes:
        for n, c in found[w]:
            print(f"{w}\t{n}\t{c:.4f}")


def analogy(args: argparse.Namespace) -> None:
    from nlpzoo.config import build
    from nlpzoo.evaluation.analogy import Analogies
    from nlpzoo.params import EvaluationConfig

    t = resolve(args)
    need_vectors(t, "analogy")
    words, vectors = load_vectors(t)
    question = [lookup(t, words, w) for w in (args.a, args.b, args.c)]
    restrict = args.restrict_vocab
    if restrict is None:
        section = project_params(t.root).get("evaluation")
        restrict = build(EvaluationConfig, section, "evaluation").restrict_vocab
    solver = Analogies(words, vectors, restrict_vocab=restrict)
    for w in question:
        if solver.position(w) is None:
            raise UseError(
                f"word '{w}' is not among the {restrict:,} most frequent words the analogies "
                "search (params evaluation.restrict_vocab; --restrict-vocab N)"
            )
    answers = solver.answers(*question, k=args.k, method=args.method)
    if args.json:
        found = [[w, round(s, 6)] for w, s in answers]
        print_json({"run": t.name, "question": question, "method": args.method, "answers": found})
        return
    for w, s in answers:
        print(f"{w}\t{s:.4f}")


def translate(args: argparse.Namespace) -> None:
    """`nlpzoo.tasks.mt.translate`, with the model and its SentencePiece model loaded by the
    hardened loaders, so that a damaged file is one clear error."""
    from nlpzoo.tasks.mt import translate as translate_lines

    t = resolve(args)
    need_mt(t, "translate")
    lines = input_lines(read_input(args.input))
    model = load_model(t)
    codec = load_codec(t)
    if not lines:  # an empty file translates to an empty output
        return
    beam = args.beam or model.config.beam_size
    try:
        out = translate_lines(model, codec, lines, beam_size=beam)
    except ValueError as e:
        if "max_positions" not in str(e):
            raise
        longest = max(range(len(lines)), key=lambda i: len(lines[i].split()))
        raise UseError(
            f"run '{t.name}' cannot translate this input: {e}. Its longest line is line "
            f"{longest + 1} ({len(lines[longest].split())} words): split long lines"
        ) from None
    if args.json:
        print_json({"run": t.name, "beam": beam, "translations": out})
        return
    for line in out:
        print(line)
