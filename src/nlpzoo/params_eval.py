"""The evaluation's params sections as typed configs: `evaluation` (the word-vector protocol,
the samples and analogies shown) and `mixture` (the n-gram interpolation). No torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from nlpzoo.config import require


@dataclass
class MixtureConfig:
    baseline: str = "ngram"  # the run every other LM run is interpolated with


@dataclass
class EvaluationConfig:
    """The `evaluation:` section: settings of the word-vector protocol (docs/design.md §4), and
    what the report shows of each run: the language models' samples (eval/RUN/samples.json,
    the same prompt, length and seed for every run) and the answers of every run with vectors
    to a few analogy questions (eval/RUN/analogies.json)."""

    restrict_vocab: int = 30000  # analogy answers searched among the most frequent words
    neighbours: int = 10  # nearest neighbours listed per probe word
    probes: list[str] = field(
        default_factory=lambda: ["king", "money", "city", "war", "good", "said", "three", "water"]
    )
    sample_prompt: str = "the president said that"  # read as the run's corpus was (lowercased)
    sample_tokens: int = 30  # new tokens per sample, sentence ends `</s>` included
    sample_count: int = 2  # samples per run
    sample_seed: int = 0
    sample_temperature: float = 1.0  # 0: always the most probable word
    sample_top_k: int = 0  # sample among the k most probable words; 0: all of them
    # "a b c d": a is to b as c is to d, d the expected answer (all in Brown's vocabulary)
    analogies: list[str] = field(
        default_factory=lambda: [
            "man woman king queen",
            "he she his her",
            "father mother son daughter",
            "man men woman women",
            "france paris england london",
            "good better bad worse",
            "go went come came",
        ]
    )

    def __post_init__(self) -> None:
        require(self.restrict_vocab >= 1, "restrict_vocab", "must be >= 1")
        require(self.neighbours >= 1, "neighbours", "must be >= 1")
        require(self.sample_tokens >= 1, "sample_tokens", "must be >= 1")
        require(self.sample_count >= 0, "sample_count", "must be >= 0")
        require(self.sample_temperature >= 0, "sample_temperature", "must be >= 0")
        require(self.sample_top_k >= 0, "sample_top_k", "must be >= 0")
        for q in self.analogies:
            require(
                isinstance(q, str) and len(q.split()) == 4,
                "analogies",
                f"entries must be four words 'a b c d' (a is to b as c is to d), got {q!r}",
            )
