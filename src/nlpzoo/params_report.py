"""The report's params section (`report:`) as a typed config. No torch."""

from __future__ import annotations

from dataclasses import dataclass

from nlpzoo.config import require


@dataclass
class ReportConfig:
    """The `report:` params section."""

    projection: str = "pca"  # pca | tsne: the 2-D map of probe words and their neighbours
    neighbours: int = 5  # nearest neighbours per probe word, in the table and on the map
    samples: int = 3  # sample translations shown per MT run
    attention_sentences: int = 2  # attention heatmaps per MT run
    seed: int = 0  # t-SNE's random state

    def __post_init__(self) -> None:
        require(self.projection in ("pca", "tsne"), "projection", "must be pca or tsne")
        require(self.neighbours >= 1, "neighbours", "must be >= 1")
        require(self.samples >= 0, "samples", "must be >= 0")
        require(self.attention_sentences >= 0, "attention_sentences", "must be >= 0")
