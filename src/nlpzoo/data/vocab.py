"""Word vocabulary built from the training split only (docs/design.md §2, `vocab` stage).

Ids 0..3 are the specials `<unk> <s> </s> <pad>`; then words by descending training frequency
(ties broken alphabetically, so the file is reproducible). A word seen fewer than `min_count`
times in training maps to `<unk>` (Bengio et al. 2003 merge words of frequency <= 3: min_count 4).

A language-model split is encoded as one token stream: each sentence's ids followed by `</s>`,
sentences concatenated in file order. Every LM family is scored on exactly this stream.
"""

from __future__ import annotations

import itertools
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nlpzoo.errors import DataError
from nlpzoo.io import atomic_write_text
from nlpzoo.params_data import LMVocabConfig, MTVocabConfig

UNK, BOS, EOS, PAD = 0, 1, 2, 3
SPECIALS = ("<unk>", "<s>", "</s>", "<pad>")
SEP = 4  # `<sep>`, the first user-defined SentencePiece symbol: source/target boundary
IGNORE = -100  # label of a position the loss skips (padding; the prompt of decoder-only MT)


@dataclass
class Vocab:
    """Word <-> id mapping with training counts (count 0 for specials)."""

    words: list[str]
    counts: list[int]

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        return self.index.get(word, UNK)

    @classmethod
    def build(cls, counter: Counter, min_count: int = 1) -> Vocab:
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        kept = sorted(
            ((w, c) for w, c in counter.items() if c >= min_count and w not in SPECIALS),
            key=lambda wc: (-wc[1], wc[0]),
        )
        unk = sum(c for w, c in counter.items() if c < min_count and w not in SPECIALS)
        words = list(SPECIALS) + [w for w, _ in kept]
        counts = [unk, 0, 0, 0] + [c for _, c in kept]
        return cls(words, counts)

    def save(self, path: Path) -> None:
        atomic_write_text(
            path, "".join(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts, strict=True))
        )

    @classmethod
    def load(cls, path: Path) -> Vocab:
        words, counts = [], []
        if not Path(path).is_file():
            raise DataError(f"vocabulary not found: {path} (run the vocab stage)")
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                try:
                    w, c = line.rstrip("\n").split("\t")
                    counts.append(int(c))
                except ValueError:
                    raise DataError(f"{path}:{lineno}: expected 'word<TAB>count'") from None
                words.append(w)
        if tuple(words[:4]) != SPECIALS:
            raise DataError(f"{path}: not an nlpzoo vocabulary (first entries must be {SPECIALS})")
        return cls(words, counts)

    def encode_lines(self, lines: Iterable[str]) -> np.ndarray:
        """Encode sentences (space-separated tokens) as one stream with `</s>` after each."""
        index = self.index
        ids: list[int] = []
        for line in lines:
            ids.extend(index.get(w, UNK) for w in line.split())
            ids.append(EOS)
        return np.asarray(ids, dtype=np.int64)


ENCODE_LINES = 50_000  # sentences encoded at a time when a split is streamed to disk


def save_stream(vocab: Vocab, lines: Iterable[str], path: Path) -> tuple[int, int]:
    """Encode `lines` as `encode_lines` does, straight into an int32 `.npy` at `path`.

    A block of sentences at a time goes to a raw body file; the `.npy` header (which needs the
    length) is written last, then the body is copied after it. Memory stays flat however long
    the split is. Returns (tokens, tokens that are `<unk>`).
    """
    path = Path(path)
    body = path.with_name(f".{path.name}.body")
    n = unk = 0
    with open(body, "wb") as f:
        block: list[str] = []
        for line in itertools.chain(lines, [None]):
            if line is not None:
                block.append(line)
            if len(block) == ENCODE_LINES or (line is None and block):
                ids = vocab.encode_lines(block).astype("<i4")  # (tokens in the block,)
                f.write(ids.tobytes())
                n, unk = n + ids.size, unk + int(np.count_nonzero(ids == UNK))
                block = []
    header = {"descr": "<i4", "fortran_order": False, "shape": (n,)}
    with open(path, "wb") as out, open(body, "rb") as f:
        np.lib.format.write_array_header_1_0(out, header)  # the header np.save writes
        shutil.copyfileobj(f, out, 1 << 20)
    body.unlink()
    return n, unk


def count_words(lines: Iterable[str]) -> Counter:
    counter: Counter = Counter()
    for line in lines:
        counter.update(line.split())
    return counter


def read_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")


# --------------------------------------------------------------------------- the `vocab` stage


def build_lm_vocab(config: LMVocabConfig, prepared_dir: Path, out_dir: Path) -> dict:
    """Vocabulary from `train.txt` only; every split encoded as a `</s>`-terminated id stream.

    Output: `vocab.txt` (word TAB training count), `train|valid|test.npy` (int32 streams),
    `stats.json`.
    """
    from nlpzoo.io import atomic_dir, atomic_write_json

    for split in ("train", "valid", "test"):
        if not (prepared_dir / f"{split}.txt").is_file():
            name = "training" if split == "train" else split
            raise DataError(f"prepared {name} split not found: {prepared_dir / f'{split}.txt'}")
    train = prepared_dir / "train.txt"
    counter = count_words(read_lines(train))
    vocab = Vocab.build(counter, config.min_count)
    # `</s>` is predicted once per sentence: its count matters to frequency-based output layers
    vocab.counts[EOS] = sum(1 for _ in read_lines(train))
    stats: dict = {"vocab_size": len(vocab), "min_count": config.min_count}
    with atomic_dir(out_dir) as tmp:
        vocab.save(tmp / "vocab.txt")
        for split in ("train", "valid", "test"):
            lines = read_lines(prepared_dir / f"{split}.txt")
            n, unk = save_stream(vocab, lines, tmp / f"{split}.npy")  # streamed: flat memory
            stats[f"{split}_tokens"] = n  # words + one </s> per sentence
            stats[f"{split}_unk_rate"] = unk / n if n else 0.0
        atomic_write_json(tmp / "stats.json", stats)
    return stats


def load_stream(vocab_dir: Path, split: str) -> np.ndarray:
    path = Path(vocab_dir) / f"{split}.npy"
    if not path.is_file():
        raise DataError(f"encoded {split} split not found: {path} (run the vocab stage)")
    return np.load(path, allow_pickle=False).astype(np.int64)


def build_mt_vocab(config: MTVocabConfig, prepared_dir: Path, out_dir: Path, seed: int = 0) -> dict:
    """Joint SentencePiece model on the MT training split (source and target lines).

    Trained from an in-memory iterator with one thread and a fixed seed, so the model's bytes
    depend only on the data and these settings (no file paths are stored in it). Ids follow the
    word vocabulary's specials: 0 <unk>, 1 <s>, 2 </s>, 3 <pad>; `<sep>` is reserved for
    decoder-only translation. The raw split files are copied alongside as BLEU references.
    """
    import io
    import shutil

    import sentencepiece as spm

    from nlpzoo.io import atomic_dir, atomic_write_json

    lines = []
    for side in ("src", "tgt"):
        path = prepared_dir / f"train.{side}"
        if not path.is_file():
            raise DataError(f"prepared MT training split not found: {path}")
        lines.extend(read_lines(path))
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        _train_sentencepiece(spm, lines, model, config)
    except RuntimeError as e:  # SentencePiece's trainer: a size this text cannot give
        if "vocabulary size" not in str(e).lower():
            raise
        reason = str(e).strip().splitlines()[-1]
        raise DataError(
            f"vocab.mt.vocab_size {config.vocab_size} does not fit the training text "
            f"(SentencePiece: {reason}); change vocab.mt.vocab_size, or lower "
            "vocab.mt.character_coverage to map rare characters to <unk>"
        ) from None
    with atomic_dir(out_dir) as tmp:
        (tmp / "spm.model").write_bytes(model.getvalue())
        for name in sorted(p.name for p in prepared_dir.iterdir() if p.suffix in (".src", ".tgt")):
            shutil.copyfile(prepared_dir / name, tmp / name)
        stats = {"vocab_size": config.vocab_size, "model_type": config.model_type}
        atomic_write_json(tmp / "stats.json", stats)
    return stats


def _train_sentencepiece(spm, lines: list[str], model, config: MTVocabConfig) -> None:
    """One SentencePiece model from `lines` into the file object `model`."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=config.vocab_size,
        model_type=config.model_type,
        character_coverage=config.character_coverage,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        pad_id=PAD,
        user_defined_symbols=["<sep>"],
        num_threads=1,
        hard_vocab_limit=False,  # small corpora: vocab_size is an upper bound, not an error
        minloglevel=2,
    )
