"""Where the project's files are: every path the stages write or read, in one place.

    data/raw/ROLE/           corpus@ROLE: the downloaded (or mirrored) corpus; ROLE eval: the
                             evaluation sets
    data/prepared/ROLE/      prepare@ROLE: the splits
    data/vocab/ROLE/         vocab@ROLE: the vocabulary (and stats.json)
    data/cooccur/            cooccur: co-occurrence counts
    models/RUN/              train-RUN: the trained run
    checkpoints/RUN/         train-RUN: resume checkpoints (stale/ keeps other settings' sets)
    plots/RUN.csv            train-RUN: the learning curve
    eval/RUN/                evaluate-RUN: the evaluation's files
    metrics/RUN.json         evaluate-RUN: the run's metrics
    metrics/mixtures.json    mixture
    registry/RUN.json        register-RUN
    reports/                 report
    timings/STAGE.json       each stage's wall and CPU time

`Layout(root)` gives them under a project's root; `Layout()` gives them relative to it, as
dvc.yaml writes them. Renaming a folder is one edit here. No imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = "data"
MODELS = "models"
CHECKPOINTS = "checkpoints"
PLOTS = "plots"
EVAL = "eval"
METRICS = "metrics"
REGISTRY = "registry"
REPORTS = "reports"
TIMINGS = "timings"


@dataclass(frozen=True)
class Layout:
    root: Path = Path()

    # the data stages' folders, by role (lm, mt; eval for the evaluation sets' raw files)
    def raw(self, role: str = "") -> Path:
        return self.root / DATA / "raw" / role

    def prepared(self, role: str) -> Path:
        return self.root / DATA / "prepared" / role

    def vocab(self, role: str) -> Path:
        return self.root / DATA / "vocab" / role

    @property
    def cooccur(self) -> Path:
        return self.root / DATA / "cooccur"

    @property
    def eval_sets(self) -> Path:
        return self.raw("eval")

    def data(self, folder: str = "") -> Path:
        """A run's data folder, `models.RUN.data` (e.g. "vocab/lm"); data/ itself by default."""
        return self.root / DATA / folder

    # a run's outputs
    def model(self, run: str) -> Path:
        return self.root / MODELS / run

    def checkpoints(self, run: str) -> Path:
        return self.root / CHECKPOINTS / run

    def curve(self, run: str) -> Path:
        return self.root / PLOTS / f"{run}.csv"

    def evaluation(self, run: str) -> Path:
        return self.root / EVAL / run

    def metrics(self, run: str) -> Path:
        return self.root / METRICS / f"{run}.json"

    def registry(self, run: str) -> Path:
        return self.root / REGISTRY / f"{run}.json"

    def timing(self, stage: str) -> Path:
        return self.root / TIMINGS / f"{stage}.json"

    @property
    def mixtures(self) -> Path:
        return self.root / METRICS / "mixtures.json"

    # whole folders (the report reads them)
    @property
    def models_dir(self) -> Path:
        return self.root / MODELS

    @property
    def metrics_dir(self) -> Path:
        return self.root / METRICS

    @property
    def plots_dir(self) -> Path:
        return self.root / PLOTS

    @property
    def eval_dir(self) -> Path:
        return self.root / EVAL

    @property
    def reports(self) -> Path:
        return self.root / REPORTS

    @property
    def timings_dir(self) -> Path:
        return self.root / TIMINGS
