"""The `report` stage: `reports/report.md`, `reports/index.html` (same content, figures embedded)
and `reports/figures/*.png` from the pipeline's metrics, curves and evaluation artifacts.

Sections: header (data, vocabularies, params hash, git revision, DVC experiment), 1 language
modelling (with each model's samples from one prompt), 2 word vectors (with a small analogy
table), 3 translation, 4 cost, 5 learning curves, 6 time per stage (timings/, when given), and a
footer listing the runs that are missing or incomplete. Any subset of runs renders; what is
absent is listed, not fatal.

The runs shown are exactly the enabled runs of params' `models:` (`build_report(runs=...)`), each
in the section of its family's task (`nlpzoo.families`); metrics files of other runs are only
listed in the footer. Nothing here knows a family by name, and nothing here imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nlpzoo import cost
from nlpzoo.config import build
from nlpzoo.families import FAMILIES, TASKS
from nlpzoo.io import atomic_dir, atomic_write_text
from nlpzoo.layout import Layout
from nlpzoo.params import parse_models
from nlpzoo.params_eval import EvaluationConfig, MixtureConfig
from nlpzoo.params_report import ReportConfig
from nlpzoo.pipeline import ROOFLINE, stage_order
from nlpzoo.report import figures, inputs, tables
from nlpzoo.report.document import (
    Block,
    Bullets,
    Figure,
    Heading,
    Para,
    Table,
    to_html,
    to_markdown,
)
from nlpzoo.report.inputs import (
    Provenance,
    Run,
    load_curve,
    load_runs,
    load_timings,
    read_provenance,
    task_of,
)
from nlpzoo.taskinfo import task_info

log = logging.getLogger(__name__)

TITLE = "nlpzoo report"
# A project whose root holds this file is the tour (`python -m nlpzoo tour`): its text opens the
# report, and the title says so.
TOUR_NOTE = "TOUR_NOTE"
TOUR_TITLE = "nlpzoo report: the tour (small sizes, not comparable)"


def report_project(params: dict[str, Any], *, root: Path, exp_name: str = "") -> str:
    """The `report` stage: `root/reports/` from the project's metrics/, plots/, eval/, models/,
    timings/ (each earlier stage's time) and benchmarks/results/roofline.json, for the enabled
    runs of `params`' `models:`, with each run's figures attached to its MLflow run;
    `exp_name` is the DVC experiment, if any."""
    root = Path(root)
    note, where = root / TOUR_NOTE, Layout(root)
    return build_report(
        metrics_dir=where.metrics_dir,
        plots_dir=where.plots_dir,
        eval_dir=where.eval_dir,
        models_dir=where.models_dir,
        out_dir=where.reports,
        timings_dir=where.timings_dir,
        roofline=root / ROOFLINE,
        params=params,
        config=build(ReportConfig, params.get("report"), "report"),
        provenance=read_provenance(root, params, exp_name),
        mlflow=True,
        tour_note=note.read_text(encoding="utf-8").strip() if note.is_file() else None,
    )


def build_report(
    *,
    metrics_dir: Path,
    plots_dir: Path,
    eval_dir: Path,
    models_dir: Path,
    out_dir: Path,
    timings_dir: Path | None = None,
    roofline: Path | None = None,
    runs: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    config: ReportConfig | None = None,
    provenance: Provenance | None = None,
    mlflow: bool = False,
    tour_note: str | None = None,
) -> str:
    """Render the report of `runs`, run -> family; by default the enabled runs of `params`'
    `models:` (`nlpzoo.params.parse_models`). Metrics files of other runs are only listed.
    With `timings_dir`, a last section shows each stage's time (timings/STAGE.json). With
    `roofline` (benchmarks/results/roofline.json), the cost section holds each run's training
    FLOP/s against one thread's matrix-product peak, and names the machine of that peak.

    Returns the Markdown text; writes `out_dir` as a whole (report.md, index.html, figures/).
    With `mlflow`, each run's figures are also attached to its MLflow run (the one recorded in
    `eval/RUN/mlflow_run.json`), so the dashboard shows them beside the run's metrics.
    With `tour_note`, the report is the tour's: its title says so and the note opens it."""
    cfg = config or ReportConfig()
    prov = provenance or Provenance()
    params = params or {}
    if runs is None:
        runs = {n: s.family for n, s in parse_models(params).items()} if "models" in params else {}
    runs = dict(runs)
    found, mixtures, missing, ignored = load_runs(Path(metrics_dir), runs)
    with atomic_dir(Path(out_dir)) as tmp:
        fig_dir = tmp / "figures"
        fig_dir.mkdir()
        ctx = _Context(cfg, prov, params, found, Path(plots_dir), Path(eval_dir), Path(models_dir))
        ctx.tasks = {task_of(family) for family in runs.values()}  # found or not
        ctx.enabled = runs
        ctx.roofline_path = Path(roofline) if roofline is not None else None
        ctx.roofline = inputs.load_roofline(roofline) if roofline is not None else None
        title = TITLE if tour_note is None else TOUR_TITLE
        blocks: list[Block] = [Heading(title, 1)]
        if tour_note is not None:
            blocks.append(Para(tour_note))
        blocks += _header(ctx)
        blocks += _language_models(ctx, mixtures)
        blocks += _word_vectors(ctx, fig_dir)
        blocks += _translation(ctx, fig_dir)
        blocks += _cost(ctx)
        blocks += _curves(ctx, fig_dir)
        if timings_dir is not None:
            blocks += _timings(load_timings(Path(timings_dir), stage_order(runs)))
        blocks += _footer(ctx, missing, ignored)
        text = to_markdown(blocks, tmp)
        atomic_write_text(tmp / "report.md", text)
        atomic_write_text(tmp / "index.html", to_html(blocks, title))
        figs = sorted(p.name for p in fig_dir.glob("*.png"))
    log.info("report: %d runs, %d figures (%s)", len(found), len(figs), ", ".join(figs))
    if mlflow:
        log_figures(Path(eval_dir), Path(out_dir) / "figures", found.values())
    return text


def log_figures(eval_dir: Path, fig_dir: Path, runs: Iterable[Run]) -> None:
    """Attach to each run's MLflow run its own figures and its task's learning curves."""
    from nlpzoo.tracking import Tracker

    for r in runs:
        figs = [
            *fig_dir.glob(f"projection_{r.name}.png"),
            *sorted(fig_dir.glob(f"attention_{r.name}_*.png")),
            *fig_dir.glob(f"curves_{r.task}.png"),
            *fig_dir.glob(f"compute_{r.task}.png"),
        ]
        if figs and inputs.has_mlflow_run(eval_dir, r.name):
            tracker = Tracker.resume(eval_dir / r.name, r.name)
            for path in figs:
                tracker.log_artifact(path, "figures")


class _Context:
    def __init__(self, cfg, prov, params, runs, plots_dir, eval_dir, models_dir) -> None:
        self.cfg: ReportConfig = cfg
        self.prov: Provenance = prov
        self.params: dict = params
        self.runs: dict[str, Run] = runs
        self.plots_dir, self.eval_dir, self.models_dir = plots_dir, eval_dir, models_dir
        self.notes: list[str] = []  # missing artifacts, for the footer
        self.tasks: set[str] = set()  # the tasks of the runs shown (data rows of the header)
        self.enabled: dict[str, str] = {}  # every run to report, found or not -> its family
        self.roofline: inputs.Roofline | None = None  # one thread's matrix-product peaks
        self.roofline_path: Path | None = None

    def of_task(self, task: str) -> list[Run]:
        return [r for r in self.runs.values() if r.task == task]

    def note(self, run: str, what: str) -> None:
        self.notes.append(f"`{run}`: {what}")


# --------------------------------------------------------------------------- header


def _header(ctx: _Context) -> list[Block]:
    p = ctx.prov
    exp = f"DVC experiment `{p.exp_name}`" if p.exp_name else "no DVC experiment (workspace run)"
    rev = f"git revision `{p.git_rev[:12]}`" if p.git_rev else "git revision unknown"
    phash = f"params hash `{p.params_hash}`" if p.params_hash else "params hash unknown"
    blocks: list[Block] = [Para(f"Produced from {rev}, {exp}, {phash}.")]
    rows = []
    lm, mt = p.data.get("lm") or {}, p.data.get("mt") or {}
    lm_stats, mt_stats = p.vocab.get("lm") or {}, p.vocab.get("mt") or {}
    if (lm or lm_stats) and ctx.tasks & {"lm", "vectors"}:
        splits = " / ".join(
            tables.fmt(lm_stats.get(f"{s}_tokens"), ",.0f") for s in ("train", "valid", "test")
        )
        rows.append(
            {
                "task": "language models, word vectors",
                "data": str(lm.get("source", "?"))
                + (", lowercased" if lm.get("lowercase") else ""),
                "train / valid / test": f"{splits} tokens",
                "vocabulary": (
                    f"{tables.fmt(lm_stats.get('vocab_size'), ',.0f')} words "
                    f"(count ≥ {lm_stats.get('min_count', '?')}; test <unk> rate "
                    f"{tables.fmt(lm_stats.get('test_unk_rate'), '.1f', 100)} %)"
                ),
            }
        )
    if (mt or mt_stats) and "mt" in ctx.tasks:
        splits = " / ".join(
            tables.fmt(mt_stats.get(f"{s}_sentences"), ",.0f") for s in ("train", "valid", "test")
        )
        rows.append(
            {
                "task": "translation",
                "data": (
                    f"{mt.get('source', '?')} {mt.get('src', '?')}→{mt.get('tgt', '?')}, "
                    f"test set {mt.get('test_set', '?')}"
                ),
                "train / valid / test": f"{splits} sentence pairs" if "–" not in splits else "–",
                "vocabulary": (
                    f"{tables.fmt(mt_stats.get('vocab_size'), ',.0f')} SentencePiece pieces "
                    f"({mt_stats.get('model_type', '?')}, shared by source and target)"
                ),
            }
        )
    if rows:
        blocks.append(Table(pd.DataFrame(rows), "Data"))
    return blocks


# --------------------------------------------------------------------------- 1 language models


def _language_models(ctx: _Context, mixtures: dict) -> list[Block]:
    blocks: list[Block] = [Heading("1. Language modelling")]
    runs = ctx.of_task("lm")
    if not runs:
        return [*blocks, Para("No language-model runs yet.")]
    baseline = build(MixtureConfig, ctx.params.get("mixture"), "mixture").baseline
    blocks += [
        Para(
            "Perplexity = exp(mean negative log-likelihood per token) over every token of the "
            "split, each sentence's `</s>` and `<unk>` included; every run scores the identical "
            "token stream, so the ratios are fair. "
            + _split_note(ctx)
            + f"The ratios are to the baseline run `{baseline}` (params `mixture.baseline`); "
            "the mixture interpolates a run with it, λ chosen on the validation split, as the "
            "paper does with the n-gram."
        ),
        Table(tables.lm_table(runs, mixtures, baseline, paper=_on_brown(ctx))),
    ]
    if baseline not in ctx.enabled or task_of(ctx.enabled[baseline]) != "lm":
        blocks.append(
            Para(
                f"No ratios and no mixtures: the baseline `{baseline}` (params "
                "`mixture.baseline`) is not an enabled language-model run of `models:`."
            )
        )
    if _on_brown(ctx):
        blocks.append(
            Para(
                "The last row is the paper's own result, **paper, different preprocessing**: "
                "Bengio et al. (2003) report their best neural model mixed with the trigram 24 % "
                "below the best n-gram in test perplexity (vocabulary 16,383 words, frequency "
                "≤ 3 merged); compare the ratio, not the perplexities."
            )
        )
    return blocks + _lm_samples(ctx, runs)


def _lm_samples(ctx: _Context, runs: list[Run]) -> list[Block]:
    """Each run's samples (eval/RUN/samples.json), side by side when the runs share the prompt
    and sampling settings (params `evaluation.sample_*`), as they do in one pipeline. A run
    without the file (evaluated by an earlier version) is left out of the table only."""
    found: dict[str, dict] = {}
    for r in runs:
        record = inputs.lm_samples(ctx.eval_dir, r.name)
        if record is not None:
            found[r.name] = record
    if not found:
        return []
    settings = ("prompt_tokens", "tokens", "temperature", "top_k", "seed")
    groups: dict[tuple, dict[str, dict]] = {}
    for name, record in found.items():
        key = tuple(str(record.get(k)) for k in settings)
        groups.setdefault(key, {})[name] = record
    blocks: list[Block] = []
    for records in groups.values():
        first = next(iter(records.values()))
        prompt = " ".join(str(w) for w in first.get("prompt_tokens") or []) or "(none)"
        top_k = first.get("top_k") or 0
        cut = f", the {top_k} most probable words" if top_k else ""
        blocks += [
            Para(
                f"What each model writes after the prompt **{prompt}**: "
                f"{first.get('tokens', '?')} tokens sampled at temperature "
                f"{first.get('temperature', '?')}{cut}, seed {first.get('seed', '?')} (params "
                "`evaluation.sample_*`; `</s>` ends a sentence; log p is the model's own "
                "log-probability of the continuation). The same with any prompt: "
                "`python -m nlpzoo generate --run RUN --prompt TEXT`."
            ),
            Table(tables.samples_table(records)),
        ]
    return blocks


def _on_brown(ctx: _Context) -> bool:
    return (ctx.prov.data.get("lm") or {}).get("source", "brown") == "brown"


def _split_note(ctx: _Context) -> str:
    if not _on_brown(ctx):
        return ""
    return (
        "Brown is split as in Bengio et al. (2003): first 800,000 tokens train, next 200,000 "
        "valid, the rest test (at sentence boundaries). Brown is stored in genre order, so the "
        "test genres differ from most of the training text. "
    )


# --------------------------------------------------------------------------- 2 word vectors


def _word_vectors(ctx: _Context, fig_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading("2. Word vectors")]
    runs = [r for r in ctx.runs.values() if r.task == "vectors" or FAMILIES[r.family].vectors]
    if not runs:
        return [*blocks, Para("No runs with word vectors yet.")]
    searched = build(EvaluationConfig, ctx.params.get("evaluation"), "evaluation").restrict_vocab
    blocks += [
        Para(
            "Every run with word vectors, the language models' input embeddings included "
            "(a family without embeddings has no row). Analogy: `questions-words.txt`, 3CosAdd "
            f"on unit vectors, answers searched among the {searched:,} most frequent words, "
            "questions with an unknown word skipped (coverage = answered / 19,544). Similarity: "
            "Spearman ρ between cosine and human scores, pairs with an unknown word skipped. "
            "The training text has "
            f"{tables.fmt((ctx.prov.vocab.get('lm') or {}).get('train_tokens'), ',.0f')} "
            "tokens, far from the papers' billions, so absolute numbers are low."
        ),
        Table(tables.vectors_table(runs)),
    ]
    neighbours = {}
    for r in runs:
        n = inputs.neighbours(ctx.eval_dir, r.name)
        if n is not None:
            neighbours[r.name] = n
        else:
            ctx.note(r.name, f"no eval/{r.name}/neighbours.json")
    if neighbours:
        k = ctx.cfg.neighbours
        blocks += [
            Para(f"Nearest neighbours (cosine) of the probe words, {k} per run, best first."),
            Table(tables.neighbours_table(neighbours, k)),
        ]
    blocks += _analogies(ctx, runs)
    maps: list[Block] = []
    for name, n in neighbours.items():
        path = _projection(ctx, name, n, fig_dir)
        if path:
            maps.append(
                Figure(
                    path,
                    f"{name}: probe words and their neighbours, 2-D "
                    f"{ctx.cfg.projection.upper()} of the unit vectors",
                    half=True,
                )
            )
    if maps:
        blocks += [
            Para(
                f"Each probe word (bold) with its {ctx.cfg.neighbours} nearest neighbours, "
                f"projected to 2-D by {ctx.cfg.projection.upper()} per run (params "
                "`report.projection`: pca | tsne)."
            ),
            *maps,
        ]
    return blocks


def _analogies(ctx: _Context, runs: list[Run]) -> list[Block]:
    """Each run's answers to a few well-known analogies (eval/RUN/analogies.json; a run without
    the file is left out of the table only)."""
    answers: dict[str, list[dict]] = {}
    for r in runs:
        found = inputs.analogies(ctx.eval_dir, r.name)
        if found is not None:
            answers[r.name] = found
    table = tables.analogy_table(answers) if answers else pd.DataFrame()
    if table.empty:
        return []
    return [
        Para(
            "A few well-known analogies (params `evaluation.analogies`), a : b :: c : ?, "
            "answered by 3CosAdd as in the analogy score (✓: the expected word); the last row "
            "counts the correct answers of 3CosAdd and of 3CosMul (Levy & Goldberg 2014). Ask "
            "your own: `python -m nlpzoo analogy --run RUN A B C`."
        ),
        Table(table),
    ]


def _projection(ctx: _Context, run: str, neighbours: dict, fig_dir: Path) -> Path | None:
    k = ctx.cfg.neighbours
    group: dict[str, str] = {}
    for probe, found in neighbours.items():
        if not found:
            continue
        group.setdefault(probe, probe)
        for w in found[:k]:
            group.setdefault(str(w[0]), probe)
    vecs = inputs.probe_vectors(ctx.models_dir, run, set(group))
    if vecs is None:
        ctx.note(run, f"no models/{run}/vectors.txt: no projection")
        return None
    words = [w for w in group if w in vecs]
    if len(words) < 3:
        return None
    return figures.projection(
        run,
        words,
        np.stack([vecs[w] for w in words]),
        [group[w] for w in words],
        fig_dir / f"projection_{run}.png",
        method=ctx.cfg.projection,
        seed=ctx.cfg.seed,
    )


# --------------------------------------------------------------------------- 3 translation


def _translation(ctx: _Context, fig_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading("3. Translation")]
    runs = ctx.of_task("mt")
    if not runs:
        return [*blocks, Para("No translation runs yet.")]
    mt = ctx.prov.data.get("mt") or {}
    blocks += [
        Para(
            f"{mt.get('source', 'Multi30k')} {mt.get('src', 'de')}→{mt.get('tgt', 'en')}, "
            f"test set `{mt.get('test_set', 'test_2016_flickr')}`. sacreBLEU is cased and "
            "detokenized against the raw references; *BLEU tok. lowercase* follows the Multi30k "
            "literature (Moses-normalised, tokenized, lowercased)"
            + (
                " and is the column to hold against the published tutorial numbers (word-level "
                "models, last rows)."
                if _on_multi30k(ctx)
                else "."
            )
        ),
        Table(tables.mt_table(runs, tutorial=_tutorial_bleu() if _on_multi30k(ctx) else ())),
    ]
    sigs = tables.mt_signatures(runs)
    if sigs:
        blocks += [Para("sacreBLEU signatures:"), Bullets(sigs)]
    for r in runs:
        samples = inputs.mt_samples(ctx.eval_dir, r.name)
        if samples is None:
            ctx.note(r.name, f"no sample translations in eval/{r.name}/")
        elif ctx.cfg.samples:
            table = tables.mt_samples_table(samples).head(ctx.cfg.samples)
            blocks += [Table(table, f"{r.name}: sample translations")]
        maps = inputs.attention_maps(ctx.eval_dir, r.name)
        if not maps and FAMILIES[r.family].attention_maps:
            ctx.note(r.name, f"no attention arrays in eval/{r.name}/")
        for i, (src, tgt, w) in enumerate(maps[: ctx.cfg.attention_sentences]):
            path = figures.attention_heatmap(
                w,
                src,
                tgt,
                f"{r.name}: attention, sentence {i + 1}",
                fig_dir / f"attention_{r.name}_{i + 1}.png",
            )
            if path:
                blocks.append(
                    Figure(
                        path,
                        f"{r.name}: attention weights, sentence {i + 1} "
                        "(rows: output tokens, columns: source tokens)",
                        half=True,
                    )
                )
    return blocks


def _tutorial_bleu() -> list[tuple[str, float]]:
    """(family, its published word-level BLEU on Multi30k, `Family.tutorial_bleu`), lowest
    first."""
    published = [(name, FAMILIES[name].tutorial_bleu) for name in FAMILIES]
    return sorted(((n, b) for n, b in published if b is not None), key=lambda nb: nb[1])


def _on_multi30k(ctx: _Context) -> bool:
    mt = ctx.prov.data.get("mt") or {}
    return (mt.get("source", "multi30k"), mt.get("test_set", "test_2016_flickr")) == (
        "multi30k",
        "test_2016_flickr",
    )


# --------------------------------------------------------------------------- 4 cost


def _cost(ctx: _Context) -> list[Block]:
    blocks: list[Block] = [Heading("4. Cost")]
    table = tables.cost_table(list(ctx.runs.values()), ctx.roofline)
    if table.empty:
        return [*blocks, Para("No run reports its cost or training speed yet.")]
    blocks += [
        Para(
            "Q is the work per training token as Mikolov et al. (2013) count it — multiply-adds "
            "of one forward pass, e.g. NNLM `N×D + N×D×H + H×V` (hierarchical softmax: "
            "`H×log₂V`), CBOW `N×D + D×log₂V`, skip-gram `C×(D + D×log₂V)` (negative "
            "sampling: `K+1` for `log₂V`). Each model states its own formula and evaluates it "
            "with its run's sizes (translation: per target token, attention spans "
            f"S = T = {cost.MT_SPAN} pieces; adaptive outputs counted over the training "
            "frequencies); the run records it in its metrics, shown here as written. Measured "
            "time per token is wall-clock training time over tokens seen (forward, backward "
            "and update, so about 3 Q of work); the ratio of the two is the time per "
            "multiply-add each implementation achieves on this machine."
        ),
        Para(
            "Device is where each run trained (metrics `device`: a run whose kernel runs "
            "only on the CPU, n-gram, SVD and the numba word vectors, trains there whatever "
            "the accelerator). "
            "Precision is the one each neural run trained in (metrics `precision`, "
            "`trainer.precision` as resolved: `auto` is bf16-mixed where the machine has native "
            "bf16, fp32 otherwise; fp32 for a run that recorded none). Training GFLOP/s = "
            "6 × Q × training tokens per second / 10⁹ (forward 2Q FLOPs, backward about twice "
            "that). " + _peak_note(ctx)
        ),
        Table(table),
    ]
    return blocks


def _peak_note(ctx: _Context) -> str:
    """Where the peaks of the cost table's last column come from: the machine, or how to
    measure them."""
    rf = ctx.roofline
    if rf is None:
        where = f"`{ROOFLINE}`" if ctx.roofline_path is None else f"`{ROOFLINE}` (not found)"
        return (
            f"No share of the peak: it needs one thread's matrix-product peak, {where}; "
            '`python benchmarks/roofline.py` measures it (docs/benchmarks.md, "Roofline").'
        )
    peaks = ", ".join(
        f"{k} {rf.peak_gflops[k]:,.1f} GFLOP/s" for k in ("fp32", "bf16") if k in rf.peak_gflops
    )
    on = [f for f, present in rf.flags.items() if present]
    off = [f for f, present in rf.flags.items() if not present]
    flags = ", ".join(on) or "none of those looked at"
    if off:
        flags += f"; not {', '.join(off)}"
    threads = f"{rf.threads} threads" if rf.threads and rf.threads > 1 else "one thread"
    return (
        "The share is of one thread's matrix-product peak in the run's precision (bf16's for "
        "the bf16 runs, fp32's otherwise), the largest figure over the runs' matrix shapes "
        f"(`{ROOFLINE}`, `python benchmarks/roofline.py`): {peaks}, measured with "
        f"{threads} on **{rf.cpu}** (flags {flags}) with "
        f"torch {rf.torch}" + (f", {rf.date[:10]}" if rf.date else "") + ". Each run trains on "
        "one thread (`trainer.threads`); the share means something when the runs trained on "
        "that machine. Word-vector runs update through their own kernels, not matrix "
        "products: no share."
    )


# --------------------------------------------------------------------------- 5 learning curves


def _curves(ctx: _Context, fig_dir: Path) -> list[Block]:
    blocks: list[Block] = [Heading("5. Learning curves")]
    by_task: dict[str, dict[str, pd.DataFrame]] = {}
    for r in ctx.runs.values():
        df = load_curve(ctx.plots_dir / f"{r.name}.csv")
        if df is None:
            ctx.note(r.name, f"no learning curve plots/{r.name}.csv")
            continue
        by_task.setdefault(r.task, {})[r.name] = df
    figs: list[Block] = []
    for task in (*TASKS, *sorted(set(by_task) - set(TASKS))):
        if task not in by_task:
            continue
        path = figures.learning_curves(task, by_task[task], fig_dir / f"curves_{task}.png")
        if path:
            figs.append(Figure(path, f"Learning curves, {task_info(task).heading}"))
    if not figs:
        return [*blocks, Para("No learning curves yet.")]
    blocks += [
        Para(
            "One point per epoch (after the epoch); runs fitted in one pass (n-gram) are a "
            "dashed level line. The same curves are DVC plots: `dvc plots show`, "
            "`dvc plots diff main`."
        ),
        *figs,
    ]
    return blocks + _compute_curves(ctx, by_task, fig_dir)


def _compute_curves(ctx: _Context, by_task: dict[str, dict], fig_dir: Path) -> list[Block]:
    """Quality against compute, one figure per task with a validation perplexity (language
    models, translation): each neural run's curve against the training FLOPs spent."""
    figs: list[Block] = []
    for task in ("lm", "mt"):
        found = {}
        for name, df in by_task.get(task, {}).items():
            run = ctx.runs[name]
            if FAMILIES[run.family].neural:
                points = tables.flops_curve(run.metrics, df)
                if points is not None:
                    found[name] = points
        path = figures.quality_against_compute(task, found, fig_dir / f"compute_{task}.png")
        if path:
            title = task_info(task).heading
            figs.append(Figure(path, f"Validation perplexity against training FLOPs, {title}"))
    if not figs:
        return []
    return [
        Para(
            "Quality against compute: each neural run's validation perplexity after every "
            "epoch against the training FLOPs it had spent by then, 6 × Q × the tokens trained "
            "on up to that epoch (an epoch's tokens: the run's training tokens over its epochs; "
            "Q as in the cost section), both axes logarithmic. A curve further left reaches "
            "the same perplexity with less arithmetic, a lower one is better at the same cost; "
            "the n-gram, which states no Q, is not drawn. Translation perplexity is per "
            "SentencePiece piece of the shared vocabulary: comparable between the translation "
            "runs, not with the language models'."
        ),
        *figs,
    ]


# --------------------------------------------------------------------------- 6 time per stage


def _timings(timings: dict[str, dict | None]) -> list[Block]:
    return [
        Heading("6. Time per stage (last `dvc repro`)"),
        Para(
            "Each stage records its own time when it succeeds (`timings/STAGE.json`): the "
            "process's wall time, its CPU time (user + system, all threads), torch's thread "
            "count where it loads torch, and the 1-minute load average at its end; a stage DVC "
            "did not rerun keeps the record of its last run. The elapsed time, from the first "
            "start to the last finish, is shorter than the sum of the stages when stages ran in "
            "parallel, and longer when time passed between them (stages rerun later); the last "
            "row leaves out the time with no stage running."
        ),
        Table(tables.timings_table(timings)),
    ]


# --------------------------------------------------------------------------- footer


def _footer(
    ctx: _Context, missing: list[tuple[str, str]], ignored: list[tuple[str, str]]
) -> list[Block]:
    items = [f"`{name}`: {why}" for name, why in missing]
    items += [f"`{r.name}`: {p}" for r in ctx.runs.values() for p in r.problems]
    items += ctx.notes
    items += [why for _, why in ignored]
    blocks: list[Block] = [Heading("Missing or incomplete")]
    if not items:
        return [
            *blocks,
            Para("Nothing: every enabled run of params.yaml `models:` reported every metric."),
        ]
    return [*blocks, Bullets(items)]
