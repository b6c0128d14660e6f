"""The data stages' params sections as typed configs: `lm` and `mt` (the corpora, prepared by
`corpus` and `prepare`), `vocab` and `cooccur`; and the user's own corpus files they name.
No torch (docs/design.md §1); `nlpzoo.params` says where the other sections are."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nlpzoo.config import require
from nlpzoo.errors import ConfigError

SPLITS = ("train", "valid", "test")

# Bytes of memory per buffered co-occurrence pair, worst case (all pairs distinct): 16 for the
# buffer itself (int64 key + float64 weight), ~42 to aggregate it (argsort order, sorted keys and
# weights, flags, run starts) and ~70 to mirror the u <= n unique pairs (keys and sums,
# transposed copies, their concatenation and its sort order).
COOCCUR_BYTES_PER_PAIR = 128


@dataclass
class LMDataConfig:
    source: str = "brown"  # brown | text
    files: dict = field(default_factory=dict)  # text: {train, valid, test} or {all}: paths
    lowercase: bool = True
    split_tokens: list[int] = field(default_factory=lambda: [800_000, 200_000])  # train, valid
    max_line_bytes: int = 1_000_000  # longer lines are refused (not a sentence-per-line file)

    def __post_init__(self) -> None:
        require(
            self.source in ("brown", "text"),
            "source",
            f"must be brown or text, got {self.source!r}",
        )
        require(
            len(self.split_tokens) == 2 and all(n > 0 for n in self.split_tokens),
            "split_tokens",
            "must be two positive token counts [train, valid]",
        )
        require(self.max_line_bytes > 0, "max_line_bytes", "must be positive")
        if self.source == "text":
            keys = set(self.files)
            require(
                keys in ({"all"}, set(SPLITS)),
                "files",
                "must be {all: path} or {train: path, valid: path, test: path} for source text",
            )


@dataclass
class MTDataConfig:
    source: str = "multi30k"  # multi30k | parallel
    src: str = "de"
    tgt: str = "en"
    test_set: str = "test_2016_flickr"  # multi30k test set used as `test`
    files: dict = field(
        default_factory=dict
    )  # parallel: {train: [src, tgt], valid: [...], test: [...]}
    max_line_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        require(self.source in ("multi30k", "parallel"), "source", "must be multi30k or parallel")
        require(self.src != self.tgt, "tgt", f"must differ from src ({self.src!r})")
        require(self.max_line_bytes > 0, "max_line_bytes", "must be positive")
        if self.source == "parallel":
            require(set(self.files) == set(SPLITS), "files", "needs train, valid and test pairs")
            for split, pair in self.files.items():
                require(
                    isinstance(pair, list) and len(pair) == 2,
                    "files",
                    f"entry {split!r} must be [src_path, tgt_path]",
                )

    def multi30k_files(self) -> list[str]:
        """Basenames of the Multi30k task-1 files this configuration reads."""
        sets = ("train", "val", self.test_set)
        return [f"{s}.{lang}.gz" for s in sets for lang in (self.src, self.tgt)]


@dataclass
class LMVocabConfig:
    min_count: int = 4  # Bengio et al. 2003 merge words seen <= 3 times into one symbol

    def __post_init__(self) -> None:
        require(self.min_count >= 1, "min_count", f"must be >= 1, got {self.min_count}")


@dataclass
class MTVocabConfig:
    vocab_size: int = 8000  # one SentencePiece vocabulary shared by source and target
    model_type: str = "unigram"  # unigram | bpe
    character_coverage: float = 1.0

    def __post_init__(self) -> None:
        require(self.vocab_size >= 16, "vocab_size", f"must be >= 16, got {self.vocab_size}")
        require(self.model_type in ("unigram", "bpe"), "model_type", "must be unigram or bpe")
        require(0 < self.character_coverage <= 1, "character_coverage", "must be in (0, 1]")


@dataclass
class CooccurConfig:
    """Settings of the `cooccur` stage (see the module docstring for their meaning)."""

    window: int = 10
    distance_weighting: bool = True  # weight 1/d for a pair at distance d, else 1
    sentence_bounded: bool = True  # windows do not cross sentence (line) boundaries
    keep_unk: bool = False  # count unknown words as <unk> instead of dropping them
    memory_mb: int = 512  # cap for the in-memory pair buffer (and its sort scratch)

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ConfigError(f"key 'window' must be an integer >= 1, got {self.window!r}")
        mem = self.memory_mb
        if isinstance(mem, bool) or not isinstance(mem, (int, float)) or not mem >= 1:
            raise ConfigError(f"key 'memory_mb' must be a number >= 1, got {mem!r}")
        for key in ("distance_weighting", "sentence_bounded", "keep_unk"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"key '{key}' must be true or false, got {getattr(self, key)!r}")

    def max_pairs(self) -> int:
        """Pairs the in-memory buffer holds."""
        return max(1, int(self.memory_mb * 2**20) // COOCCUR_BYTES_PER_PAIR)


# ------------------------------------------------- the user's own corpus files (corpus stages)


def user_files(role: str, lm: LMDataConfig, mt: MTDataConfig) -> list[str]:
    """The user's own files that `corpus@role` copies, as params.yaml writes them, in a fixed
    order: `lm.files` for `lm.source: text`, `mt.files` for `mt.source: parallel`; else []."""
    if role == "lm" and lm.source == "text":
        return [str(lm.files[split]) for split in sorted(lm.files)]
    if role == "mt" and mt.source == "parallel":
        return [str(path) for split in sorted(mt.files) for path in mt.files[split]]
    return []


def inside_project(path: str, root: Path) -> str | None:
    """`path` (relative to the project root, where the stages run, or absolute; `~` expanded)
    as a project-relative POSIX path when it lies inside the project at `root`, links
    followed; None when it lies outside (DVC then cannot depend on it portably)."""
    p = Path(path).expanduser()
    full = (p if p.is_absolute() else root / p).resolve()
    try:
        return full.relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
