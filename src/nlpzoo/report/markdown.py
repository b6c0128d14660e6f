"""The `report` stage: `metrics/*.json` and `plots/*.csv` → `reports/report.md` (+ figures).

It reads nothing else, renders whatever runs exist, and never fails because a run is missing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from nlpzoo.io import atomic_dir

log = logging.getLogger(__name__)

# Bengio et al. (2003) on Brown (their preprocessing: |V| = 16,383, words of frequency <= 3 merged):
# the best neural model, mixed with the trigram, has a test perplexity 24 % below the best n-gram.
PAPER_LM = [
    ("Bengio et al. 2003, Brown: best NNLM mixture vs best n-gram", "0.76"),
]


def load_metrics(metrics_dir: Path) -> pd.DataFrame:
    rows, mixes = [], {}
    for path in sorted(Path(metrics_dir).glob("*.json")):
        try:
            m = json.loads(path.read_text())
        except json.JSONDecodeError:
            log.warning("skipping unreadable metrics file %s", path)
            continue
        if path.name == "mixtures.json":
            mixes = m.get("runs", {})
            continue
        m["run"] = path.stem
        rows.append(m)
    for row in rows:
        row.update(mixes.get(row["run"], {}))
    return pd.DataFrame(rows)


def lm_table(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "test_ppl" not in df:
        return pd.DataFrame()
    lm = df[df["test_ppl"].notna()].copy()
    base = lm.loc[lm["family"] == "ngram", "test_ppl"]
    ref = float(base.min()) if len(base) else None
    table = pd.DataFrame(
        {
            "run": lm["run"],
            "family": lm["family"],
            "valid ppl": lm["valid_ppl"].map("{:.1f}".format),
            "test ppl": lm["test_ppl"].map("{:.1f}".format),
            "test ppl / n-gram": lm["test_ppl"].map(lambda v: f"{v / ref:.3f}" if ref else "–"),
            "mixed with n-gram: test ppl (λ)": [
                f"{r['test_ppl_mix']:.1f} ({r['lambda']:.2f})"
                if pd.notna(r.get("test_ppl_mix"))
                else "–"
                for _, r in lm.iterrows()
            ],
            "mixture / n-gram": [
                f"{r['test_ppl_mix'] / ref:.3f}" if ref and pd.notna(r.get("test_ppl_mix")) else "–"
                for _, r in lm.iterrows()
            ],
            "parameters": lm.get("params", pd.Series(index=lm.index, dtype=float)).map(
                lambda v: f"{int(v):,}" if pd.notna(v) else "–"
            ),
            "train s": lm.get("train_seconds", pd.Series(index=lm.index, dtype=float)).map(
                lambda v: f"{v:.0f}" if pd.notna(v) else "–"
            ),
            "tokens/s": lm.get("train_tokens_per_s", pd.Series(index=lm.index, dtype=float)).map(
                lambda v: f"{v:,.0f}" if pd.notna(v) else "–"
            ),
        }
    )
    return table.sort_values("test ppl", key=lambda s: s.astype(float))


def vectors_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every run with word vectors: analogy (3CosAdd) and similarity (Spearman ρ), with coverage."""
    if df.empty or "analogy_acc" not in df:
        return pd.DataFrame()
    v = df[df["analogy_acc"].notna()].copy()
    pct = lambda s: s.map(lambda x: f"{100 * x:.1f}" if pd.notna(x) else "–")  # noqa: E731
    rho = lambda s: s.map(lambda x: f"{x:.3f}" if pd.notna(x) else "–")  # noqa: E731
    table = pd.DataFrame(
        {
            "run": v["run"],
            "family": v["family"],
            "analogy % (sem / syn / all)": [
                f"{100 * a:.1f} / {100 * b:.1f} / {100 * c:.1f}"
                for a, b, c in zip(
                    v["analogy_sem_acc"], v["analogy_syn_acc"], v["analogy_acc"], strict=True
                )
            ],
            "analogy coverage %": pct(v["analogy_coverage"]),
            "WordSim-353 ρ": rho(v.get("ws353_rho", pd.Series(index=v.index, dtype=float))),
            "SimLex-999 ρ": rho(v.get("simlex_rho", pd.Series(index=v.index, dtype=float))),
        }
    )
    return table.sort_values("run")


def _markdown(df: pd.DataFrame) -> str:
    """A plain GitHub-flavoured Markdown table (no optional `tabulate` dependency)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def curves_figure(plots_dir: Path, out: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    for path in sorted(Path(plots_dir).glob("*.csv")):
        df = pd.read_csv(path)
        if len(df) > 1 and "val_ppl" in df:
            curves[path.stem] = df
    if not curves:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, df in curves.items():
        ax.plot(df["epoch"] + 1, df["val_ppl"], marker="o", label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def build_report(metrics_dir: Path, plots_dir: Path, out_dir: Path) -> str:
    df = load_metrics(metrics_dir)
    parts = ["# nlpzoo report", ""]
    with atomic_dir(out_dir) as tmp:
        parts += ["## Language modelling", ""]
        table = lm_table(df)
        if table.empty:
            parts += ["No language-model runs yet.", ""]
        else:
            parts += [
                "Perplexity per DESIGN §5: exp(mean NLL) over every token of the split, each "
                "sentence's `</s>` and `<unk>` included; every run scores the identical token "
                "stream, so the ratios are fair. Brown is split as in Bengio et al. (2003) — first "
                "800,000 tokens train, next 200,000 valid, rest test — and is stored in genre "
                "order, so the test genres differ from most of the training text.",
                "",
                _markdown(table),
                "",
                "Published, for orientation (different preprocessing, so not comparable "
                "digit for digit):",
                "",
                _markdown(pd.DataFrame(PAPER_LM, columns=["paper", "test ppl / n-gram"])),
                "",
            ]
        vt = vectors_table(df)
        if not vt.empty:
            parts += [
                "## Word vectors",
                "",
                "Every run with word vectors, the language models' input embeddings included. "
                "Analogy: `questions-words.txt`, 3CosAdd on unit vectors, answers among the 30,000 "
                "most frequent words, questions with an unknown word skipped (coverage = answered "
                "/ 19,544). Similarity: Spearman ρ between cosine and human scores, pairs with an "
                "unknown word skipped. Brown is small (1.2 M tokens), so absolute numbers are low.",
                "",
                _markdown(vt),
                "",
            ]
        if curves_figure(plots_dir, tmp / "curves.png"):
            parts += ["![validation perplexity by epoch](curves.png)", ""]
        text = "\n".join(parts)
        (tmp / "report.md").write_text(text, encoding="utf-8")
    return text
