"""The report's tables, as pandas DataFrames of display strings ("–" where a value is missing)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pandas as pd

from nlpzoo.families import FAMILIES
from nlpzoo.report.inputs import Roofline, Run

DASH = "–"

# Bengio et al. (2003), Brown corpus, their preprocessing (|V| = 16,383: words of frequency <= 3
# merged): the best neural model mixed with the trigram has a test perplexity 24 % below the best
# n-gram.
PAPER_LM_MIX_RATIO = 0.76


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fmt(v: Any, spec: str = ".1f", scale: float = 1.0) -> str:
    x = _num(v)
    return DASH if x is None else format(x * scale, spec)


def lm_table(
    runs: list[Run], mixtures: dict[str, dict], baseline: str = "ngram", paper: bool = True
) -> pd.DataFrame:
    """Perplexities, the ratio to the baseline run (params `mixture.baseline`), the Bengio
    mixture, size and speed; with `paper`, a last row with the paper's ratio."""
    if not runs:
        return pd.DataFrame()
    base = next((r for r in runs if r.name == baseline), None)
    ref = _num(base.metrics.get("test_ppl")) if base else None
    ratio, mix_ratio = f"test ppl / {baseline}", f"mixture / {baseline}"
    mixed = f"mixed with {baseline}: test ppl (λ)"
    rows = []
    for r in sorted(runs, key=lambda r: _num(r.metrics.get("test_ppl")) or math.inf):
        m, mix = r.metrics, mixtures.get(r.name, {})
        test, test_mix = _num(m.get("test_ppl")), _num(mix.get("test_ppl_mix"))
        rows.append(
            {
                "run": r.name,
                "family": r.family,
                "valid ppl": fmt(m.get("valid_ppl")),
                "test ppl": fmt(test),
                ratio: f"{test / ref:.3f}" if ref and test else DASH,
                mixed: (f"{test_mix:.1f} ({fmt(mix.get('lambda'), '.2f')})" if test_mix else DASH),
                mix_ratio: f"{test_mix / ref:.3f}" if ref and test_mix else DASH,
                "parameters": fmt(m.get("params"), ",.0f"),
                "train s": fmt(m.get("train_seconds"), ".0f"),
                "tokens/s": fmt(m.get("train_tokens_per_s"), ",.0f"),
            }
        )
    if paper:
        rows.append(
            {
                "run": "Bengio et al. 2003, Brown (paper, different preprocessing)",
                "family": "nnlm + n-gram",
                **{k: DASH for k in ("valid ppl", "test ppl", ratio)},
                mixed: DASH,
                mix_ratio: f"{PAPER_LM_MIX_RATIO:.2f}",
                **{k: DASH for k in ("parameters", "train s", "tokens/s")},
            }
        )
    return pd.DataFrame(rows)


def vectors_table(runs: list[Run]) -> pd.DataFrame:
    """Analogy (3CosAdd) and similarity (Spearman ρ) with coverage, every run with vectors."""
    rows = []
    for r in runs:
        m = r.metrics
        rows.append(
            {
                "run": r.name,
                "family": r.family,
                "analogy % (sem / syn / all)": " / ".join(
                    fmt(m.get(k), ".1f", 100)
                    for k in ("analogy_sem_acc", "analogy_syn_acc", "analogy_acc")
                ),
                "analogy coverage %": fmt(m.get("analogy_coverage"), ".1f", 100),
                "WordSim-353 ρ (coverage %)": (
                    f"{fmt(m.get('ws353_rho'), '.3f')} ({fmt(m.get('ws353_coverage'), '.0f', 100)})"
                ),
                "SimLex-999 ρ (coverage %)": (
                    f"{fmt(m.get('simlex_rho'), '.3f')} "
                    f"({fmt(m.get('simlex_coverage'), '.0f', 100)})"
                ),
                "dim": fmt(m.get("dim") or m.get("emb_dim"), ".0f"),
            }
        )
    df = pd.DataFrame(rows)
    if not df.empty and (df["dim"] == DASH).all():
        df = df.drop(columns="dim")
    return df


def neighbours_table(neighbours: dict[str, dict[str, list]], k: int) -> pd.DataFrame:
    """Probe words down, runs across; each cell the run's k nearest neighbours, best first."""
    runs = list(neighbours)
    probes = list(dict.fromkeys(p for n in neighbours.values() for p in n))
    rows = []
    for p in probes:
        row = {"probe": f"**{p}**"}
        for run in runs:
            found = neighbours[run].get(p)
            row[run] = ", ".join(str(w[0]) for w in found[:k]) if found else DASH
        rows.append(row)
    return pd.DataFrame(rows)


def samples_table(samples: dict[str, dict]) -> pd.DataFrame:
    """Language-model samples side by side: one row per run and sample (eval/RUN/samples.json,
    `nlpzoo.generation.samples_record`), the text after the prompt and its log-probability."""
    rows = []
    for run, record in samples.items():
        items = [s for s in record.get("samples") or [] if isinstance(s, dict)]
        for i, sample in enumerate(items, start=1):
            rows.append(
                {
                    "run": run if len(items) == 1 else f"{run} #{i}",
                    "continuation": str(sample.get("text", DASH)),
                    "log p": fmt(sample.get("log_prob"), ".1f"),
                }
            )
    return pd.DataFrame(rows)


def analogy_table(answers: dict[str, list[dict]], method: str = "3cosadd") -> pd.DataFrame:
    """Analogy questions down, runs across; each cell the run's best answer by `method`
    (eval/RUN/analogies.json), ✓ when it is the expected word, "–" when a question word is not
    in the run's vocabulary; a last row counts the correct answers of both methods."""
    runs = list(answers)
    questions: dict[tuple, str] = {}
    for found in answers.values():
        for q in found:
            questions.setdefault(tuple(q.get("question", ())), str(q.get("expected", "")))
    rows = []
    correct = {run: {"3cosadd": 0, "3cosmul": 0} for run in runs}
    for question, expected in questions.items():
        if len(question) != 3:
            continue
        a, b, c = question
        row = {"question": f"{a} : {b} :: {c} : ?", "expected": expected}
        for run in runs:
            entry = next((q for q in answers[run] if tuple(q.get("question", ())) == question), {})
            for m in correct[run]:
                best = (entry.get(m) or [[None]])[0][0]
                correct[run][m] += best == expected
            best = (entry.get(method) or [[None]])[0][0]
            row[run] = DASH if best is None else f"{best} ✓" if best == expected else str(best)
        rows.append(row)
    if rows:
        total = {"question": "**correct** (3CosAdd / 3CosMul)", "expected": ""}
        for run in runs:
            total[run] = f"{correct[run]['3cosadd']} / {correct[run]['3cosmul']}"
        rows.append(total)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- translation

DECODINGS = ("greedy", "beam")
# column -> the test metric of greedy decoding; beam search's is KEY_beam (tasks/mt.py)
MT_SCORES = {"sacreBLEU": "bleu", "BLEU tok. lowercase": "bleu_tok_lc", "chrF": "chrf"}
MT_COLUMNS = (*MT_SCORES, "sentences/s")


def mt_values(m: dict[str, Any], decoding: str) -> dict[str, Any]:
    """One decoding's scores and speed (`decode_sents_per_s_DECODING`), column -> value."""
    suffix = "" if decoding == "greedy" else f"_{decoding}"
    values = {col: m.get(key + suffix) for col, key in MT_SCORES.items()}
    values["sentences/s"] = m.get(f"decode_sents_per_s_{decoding}")
    return values


def mt_table(runs: list[Run], tutorial: Iterable[tuple[str, float]] = ()) -> pd.DataFrame:
    """BLEU, chrF and decoding speed per run and decoding; then a row per (family, published
    word-level BLEU) of `tutorial`."""
    rows = []
    for r in runs:
        m = r.metrics
        for decoding in DECODINGS:
            values = mt_values(m, decoding)
            if all(v is None for v in values.values()):
                continue
            rows.append(
                {
                    "run": r.name,
                    "family": r.family,
                    "decoding": decoding,
                    **{
                        col: fmt(v, ".1f" if col != "sentences/s" else ",.1f")
                        for col, v in values.items()
                    },
                    "test ppl": fmt(m.get("test_ppl"), ".2f"),
                    "parameters": fmt(m.get("params"), ",.0f"),
                    "train s": fmt(m.get("train_seconds"), ".0f"),
                }
            )
    for family, bleu in tutorial:
        rows.append(
            {
                "run": f"tutorial {family} (word-level, published)",
                "family": family,
                "decoding": DASH,
                **dict.fromkeys(MT_COLUMNS, DASH),
                "BLEU tok. lowercase": f"{bleu:.1f}",
                "test ppl": DASH,
                "parameters": DASH,
                "train s": DASH,
            }
        )
    return pd.DataFrame(rows)


def mt_samples_table(rows: list[dict]) -> pd.DataFrame:
    """Sample translations (eval/RUN/samples.json): source, reference, greedy and beam output,
    "–" for a missing field."""
    cols = ("source", "reference", "greedy", "beam")
    return pd.DataFrame([{c: row.get(c) for c in cols} for row in rows]).fillna(DASH)


def mt_signatures(runs: list[Run]) -> list[str]:
    out = []
    for r in runs:
        out += [
            f"{r.name}, {k.replace('_signature', '')}: `{v}`"
            for k, v in sorted(r.metrics.items())
            if k.endswith("signature") and isinstance(v, str)
        ]
    return out


# --------------------------------------------------------------------------- cost


def precision_of(m: dict[str, Any]) -> str:
    """A run's training precision as its metrics record it (`precision`, as resolved from
    `trainer.precision`), fp32 for 32-true and for a run that recorded none."""
    value = m.get("precision")
    if value is None or str(value) in ("32-true", "32"):
        return "fp32"
    return str(value)


def device_of(m: dict[str, Any]) -> str:
    """Where a run trained, as its metrics record it (`device`, nlpzoo.placement: cpu, cuda or
    mps, with the number of devices when several); cpu for a run that recorded none."""
    device = str(m.get("device") or "cpu")
    devices = m.get("devices")
    return f"{device} ×{devices}" if isinstance(devices, int) and devices > 1 else device


def peak_kind(precision: str) -> str:
    """The peak a run of `precision` is held against: bf16's for the bf16 precisions
    (bf16-mixed multiplies in bf16), fp32's otherwise."""
    return "bf16" if "bf16" in precision else "fp32"


def training_gflops(m: dict[str, Any]) -> float | None:
    """Achieved training GFLOP/s: 6 × Q × training tokens per second / 1e9 (forward 2Q FLOPs
    per token, backward about twice that)."""
    q, tps = _num(m.get("cost_per_token")), _num(m.get("train_tokens_per_s"))
    return 6.0 * q * tps / 1e9 if q and tps else None


def train_tokens(m: dict[str, Any]) -> float | None:
    """The tokens a run trained on, every epoch's: `train_tokens` (language models),
    `train_target_tokens` (translation: target pieces, what its Q is counted per), else
    tokens per second × fitting seconds (metrics written before `train_tokens` was)."""
    for key in ("train_tokens", "train_target_tokens"):
        if _num(m.get(key)):
            return _num(m.get(key))
    tps, seconds = _num(m.get("train_tokens_per_s")), _num(m.get("fit_seconds"))
    return tps * seconds if tps and seconds else None


def flops_curve(m: dict[str, Any], curve: pd.DataFrame) -> pd.DataFrame | None:
    """A run's validation perplexity after each epoch (plots/RUN.csv) against the training
    FLOPs spent by then: 6 × Q × training tokens up to that epoch, the tokens of an epoch being
    the run's training tokens / its epochs. Columns `flops`, `val_ppl`; None for a run without
    Q, training tokens, epochs or validation perplexities."""
    q, tokens, epochs = _num(m.get("cost_per_token")), train_tokens(m), _num(m.get("epochs"))
    if not (q and tokens and epochs) or "val_ppl" not in curve or "epoch" not in curve:
        return None
    rows = curve[curve["val_ppl"].notna()]
    if rows.empty:
        return None
    flops = 6.0 * q * (tokens / epochs) * (rows["epoch"].astype(float) + 1.0)
    return pd.DataFrame({"flops": flops.to_numpy(), "val_ppl": rows["val_ppl"].to_numpy()})


def cost_table(runs: list[Run], roofline: Roofline | None = None) -> pd.DataFrame:
    """Each run's Q as its model states it (metrics `cost_formula`, `cost_terms`,
    `cost_per_token`, written by the run), the measured time per training token, and the time
    per multiply-add they give; for each neural run its precision, its achieved training
    GFLOP/s and, for the language and translation models (their work is matrix products), its
    share of one thread's matrix-product peak in that precision (`roofline`). Nothing is
    computed from the formulas here."""
    rows = []
    for r in runs:
        m = r.metrics
        q = _num(m.get("cost_per_token"))
        tps = _num(m.get("train_tokens_per_s"))
        formula, terms = m.get("cost_formula"), m.get("cost_terms")
        if q is None and tps is None and not formula:
            continue
        unit = m.get("cost_unit") or "token"
        per = f" per {unit}" if unit != "token" else ""
        seconds = 1.0 / tps if tps else None
        family = FAMILIES.get(r.family)
        neural = family is not None and family.neural
        precision = precision_of(m) if neural else DASH
        gflops = training_gflops(m) if neural else None
        peak = roofline.peak_gflops.get(peak_kind(precision)) if roofline else None
        matrix_work = neural and r.task in ("lm", "mt")
        rows.append(
            {
                "run": r.name,
                "family": r.family,
                "formula Q": f"`{formula}`" if formula else DASH,
                "sizes": str(terms) if terms else DASH,
                "Q (multiply-adds per token)": f"{q:,.0f}{per}" if q else DASH,
                "measured µs per training token": f"{seconds * 1e6:,.3g}" if seconds else DASH,
                "ns per multiply-add": f"{seconds / q * 1e9:.3f}" if seconds and q else DASH,
                "device": device_of(m),
                "precision": precision,
                "training GFLOP/s": f"{gflops:,.2f}" if gflops else DASH,
                "share of one-thread peak": (
                    f"{gflops / peak:.0%}" if gflops and peak and matrix_work else DASH
                ),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- time per stage


def duration(seconds: Any) -> str:
    """m:ss, or h:mm:ss from an hour on."""
    x = _num(seconds)
    if x is None:
        return DASH
    m, s = divmod(round(x), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _union_seconds(spans: list) -> float | None:
    """Seconds covered by at least one of the (start, end) spans."""
    if not spans:
        return None
    total, reach = 0.0, None
    for a, b in sorted(spans):
        if reach is None or a > reach:
            total += (b - a).total_seconds()
            reach = b
        elif b > reach:
            total += (b - reach).total_seconds()
            reach = b
    return total


def timings_table(timings: dict[str, dict | None]) -> pd.DataFrame:
    """One row per stage (timings/STAGE.json, in the given order; "not recorded" where there is
    none), then the sum of the stages' wall and CPU times, the elapsed span from the earliest
    start to the latest finish, and the part of it with at least one stage running (less than
    the span when some stages were rerun later)."""
    rows = []
    for stage, t in timings.items():
        if t is None:
            rows.append({"stage": f"`{stage}`", "wall time": "not recorded"})
            continue
        load = t.get("load_average")
        rows.append(
            {
                "stage": f"`{stage}`",
                "wall time": duration(t.get("seconds")),
                "CPU time": duration(t.get("cpu_seconds")),
                "of which system": duration(t.get("system_seconds")),
                "threads": fmt(t.get("threads"), ".0f"),
                "load (1 min)": fmt(load[0] if isinstance(load, list) and load else None, ".2f"),
            }
        )
    recorded = [t for t in timings.values() if t is not None]
    if recorded:
        wall = [_num(t.get("seconds")) for t in recorded]
        cpu = [_num(t.get("cpu_seconds")) for t in recorded]
        system = [_num(t.get("system_seconds")) for t in recorded]
        spans = [(_time(t.get("started")), _time(t.get("finished"))) for t in recorded]
        starts = [a for a, _ in spans if a is not None]
        ends = [b for _, b in spans if b is not None]
        span = (max(ends) - min(starts)).total_seconds() if starts and ends else None
        busy = _union_seconds([(a, b) for a, b in spans if a is not None and b is not None])
        rows.append(
            {
                "stage": "**sum of the stages**",
                "wall time": duration(sum(x for x in wall if x is not None)),
                "CPU time": duration(sum(x for x in cpu if x is not None)),
                "of which system": duration(sum(x for x in system if x is not None) or None),
            }
        )
        rows.append(
            {"stage": "**elapsed**, first start to last finish", "wall time": duration(span)}
        )
        rows.append({"stage": "**of which a stage running**", "wall time": duration(busy)})
    columns = ["stage", "wall time", "CPU time", "of which system", "threads", "load (1 min)"]
    return pd.DataFrame(rows, columns=columns).fillna(DASH)
