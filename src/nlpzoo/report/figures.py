"""The report's figures: learning curves per task, quality against training compute per task,
2-D maps of probe words, attention heatmaps.

Figures are drawn on `matplotlib.figure.Figure` objects (the Agg canvas, no pyplot state), so the
report renders the same on a machine with or without a display.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

from nlpzoo.taskinfo import task_info

log = logging.getLogger(__name__)

DPI = 100


def _curve_column(task: str, curves: dict[str, pd.DataFrame]) -> tuple[str, str, bool] | None:
    """The task's curve column drawn (`TaskInfo.curves`): the first one a run has values for."""
    for c in task_info(task).curves:
        if any(c.column in df and df[c.column].notna().any() for df in curves.values()):
            return c.column, c.label, c.log_scale
    return None


def learning_curves(task: str, curves: dict[str, pd.DataFrame], out: Path) -> Path | None:
    """One figure for one task: the chosen column per epoch (epoch 1 = after the first epoch).

    A run with a single point (the n-gram, closed-form fits) is drawn as a dashed level line, the
    baseline a neural run's curve should cross."""
    chosen = _curve_column(task, curves)
    if chosen is None:
        return None
    column, label, log_scale = chosen
    fig = Figure(figsize=(7, 4.2), dpi=DPI)
    ax = fig.add_subplot()
    drawn = 0
    for name, df in sorted(curves.items()):
        if column not in df or df[column].notna().sum() == 0:
            continue
        d = df[df[column].notna()]
        if len(d) == 1:
            ax.axhline(float(d[column].iloc[0]), ls="--", lw=1.2, color="0.4", label=f"{name}")
        else:
            ax.plot(d["epoch"] + 1, d[column], marker="o", label=name)
        drawn += 1
    if not drawn:
        return None
    ax.set_xlabel("epoch")
    ax.set_ylabel(label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log_scale:  # log axis, plain numbers on it
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(MaxNLocator(nbins=8))
    ax.set_title(f"{task_info(task).title}: {label}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    return out


def quality_against_compute(task: str, curves: dict[str, pd.DataFrame], out: Path) -> Path | None:
    """One figure for one task: each run's validation perplexity after every epoch against the
    training FLOPs spent by then (`tables.flops_curve`: columns `flops`, `val_ppl`), both axes
    logarithmic, every run on the one axis."""
    drawn = {n: d for n, d in sorted(curves.items()) if d is not None and len(d)}
    if not drawn:
        return None
    fig = Figure(figsize=(7, 4.2), dpi=DPI)
    ax = fig.add_subplot()
    for name, d in drawn.items():
        ax.plot(d["flops"], d["val_ppl"], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())  # plain numbers on the perplexity axis
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(MaxNLocator(nbins=8))
    ax.set_xlabel("training FLOPs spent (6 × Q × tokens trained on)")
    info = task_info(task)
    ax.set_ylabel(f"validation perplexity{f' ({info.unit})' if info.unit else ''}")
    ax.set_title(f"{info.title}: quality against training compute")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    return out


def project_2d(vectors: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """(n, d) vectors → (n, 2) coordinates, on unit-normalised rows (cosine geometry)."""
    x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = max(2.0, min(10.0, (len(x) - 1) / 3))
        return TSNE(
            n_components=2, perplexity=perplexity, init="pca", random_state=seed, metric="cosine"
        ).fit_transform(x)
    from sklearn.decomposition import PCA

    return PCA(n_components=2, random_state=seed).fit_transform(x)


def projection(
    run: str,
    words: list[str],
    vectors: np.ndarray,
    groups: list[str],
    out: Path,
    method: str = "pca",
    seed: int = 0,
) -> Path | None:
    """Scatter of probe words (bold) and their nearest neighbours, coloured by probe."""
    if len(words) < 3:
        return None
    xy = project_2d(np.asarray(vectors, dtype=np.float64), method, seed)
    fig = Figure(figsize=(6.5, 5), dpi=DPI)
    ax = fig.add_subplot()
    cmap = {g: f"C{i % 10}" for i, g in enumerate(dict.fromkeys(groups))}
    for (x, y), word, group in zip(xy, words, groups, strict=True):
        probe = word == group
        ax.scatter([x], [y], s=40 if probe else 12, color=cmap[group], zorder=3 if probe else 2)
        ax.annotate(
            word,
            (x, y),
            fontsize=9 if probe else 7,
            fontweight="bold" if probe else "normal",
            color=cmap[group],
            xytext=(3, 2),
            textcoords="offset points",
        )
    ax.set_title(f"{run}: probe words and neighbours ({method.upper()})")
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(out)
    return out


def attention_heatmap(
    weights: np.ndarray, src: list[str], tgt: list[str], title: str, out: Path
) -> Path | None:
    """α_ij with target tokens i on the rows and source tokens j on the columns."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.size == 0:
        return None
    w = w[: len(tgt) or w.shape[0], : len(src) or w.shape[1]]
    fig = Figure(figsize=(0.45 * w.shape[1] + 2.2, 0.4 * w.shape[0] + 1.6), dpi=DPI)
    ax = fig.add_subplot()
    im = ax.imshow(w, cmap="Greys", vmin=0.0, vmax=max(float(w.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(w.shape[1]), src[: w.shape[1]], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(w.shape[0]), tgt[: w.shape[0]], fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(out)
    return out
