"""`corpus` and `prepare` stages: raw sources → clean, split text (docs/design.md §2).

Language-model corpus (`lm`): one sentence per line, tokens separated by single spaces.
  * `brown`: the NLTK packaging (`brown/cXNN` files in genre order, one sentence per non-blank
    line, tokens `word/tag`); the tag is dropped. Split as in Bengio et al. (2003): the first
    800,000 tokens train, the next 200,000 valid, the rest test. The split falls after the sentence
    that crosses each boundary, so no sentence is cut.
  * `text`: the user's own UTF-8 files, either `{train, valid, test}` or one file `{all}` split by
    the same token counts.
Translation corpus (`mt`): aligned raw lines `train|valid|test.{src,tgt}`, kept untokenized so
they serve as BLEU references.
  * `multi30k`: task-1 raw files (`train`, `val`, a test set such as `test_2016_flickr`).
  * `parallel`: the user's own aligned files.

Everything streams line by line, so memory stays bounded for any corpus size.
"""

from __future__ import annotations

import gzip
import logging
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

from nlpzoo.errors import DataError
from nlpzoo.io import atomic_dir, atomic_write_json
from nlpzoo.params_data import SPLITS, LMDataConfig, MTDataConfig, inside_project, user_files

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- reading, with checks


def iter_checked_lines(raw: Iterator[bytes], name: str, max_line_bytes: int) -> Iterator[str]:
    """Decode byte lines as UTF-8, refusing invalid bytes (with the byte offset) and huge lines."""
    offset = 0
    for lineno, line in enumerate(raw, start=1):
        if len(line) > max_line_bytes:
            raise DataError(
                f"{name}: line {lineno} is over {max_line_bytes:,} bytes long (the limit); "
                "expected one sentence per line — is this the right file?"
            )
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(
                f"{name}: invalid UTF-8 at byte offset {offset + e.start} (line {lineno})"
            ) from None
        offset += len(line)
        yield text.rstrip("\r\n")


def _bounded_lines(f, max_line_bytes: int) -> Iterator[bytes]:
    """Byte lines of `f`, reading at most `max_line_bytes + 1` bytes at a time, so a file without
    newlines is refused by `iter_checked_lines` without ever being read into memory whole."""
    return iter(lambda: f.readline(max_line_bytes + 1), b"")


def _open_lines(path: Path, max_line_bytes: int) -> Iterator[str]:
    if not path.is_file():
        raise DataError(f"input file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        yield from iter_checked_lines(_bounded_lines(f, max_line_bytes), str(path), max_line_bytes)


def brown_sentences(zip_path: Path, lowercase: bool, max_line_bytes: int) -> Iterator[list[str]]:
    """Sentences of the NLTK Brown packaging, in file (genre) order, tags dropped."""
    if not zip_path.is_file():
        raise DataError(f"Brown archive not found: {zip_path}")
    try:
        zf = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile:
        raise DataError(f"{zip_path}: not a zip archive") from None
    with zf:
        members = sorted(
            n
            for n in zf.namelist()
            if n.startswith("brown/c") and n.rsplit("/", 1)[-1][1:].isalnum()
        )
        if not members:
            raise DataError(f"{zip_path}: no `brown/cXNN` files (not the NLTK Brown packaging)")
        for member in members:
            with zf.open(member) as f:
                raw = _bounded_lines(f, max_line_bytes)
                for line in iter_checked_lines(raw, member, max_line_bytes):
                    tokens = [tok.rsplit("/", 1)[0] for tok in line.split()]
                    if tokens:
                        yield [t.lower() for t in tokens] if lowercase else tokens


def text_sentences(path: Path, lowercase: bool, max_line_bytes: int) -> Iterator[list[str]]:
    for line in _open_lines(path, max_line_bytes):
        tokens = line.split()
        if tokens:
            yield [t.lower() for t in tokens] if lowercase else tokens


# --------------------------------------------------------------------------- the LM corpus


def prepare_lm(config: LMDataConfig, raw_dir: Path, out_dir: Path) -> dict:
    """Write `train|valid|test.txt` and `stats.json` into `out_dir` (replaced as a whole)."""
    read = lambda p: (  # noqa: E731
        brown_sentences(p, config.lowercase, config.max_line_bytes)
        if config.source == "brown"
        else text_sentences(p, config.lowercase, config.max_line_bytes)
    )
    stats = {split: {"sentences": 0, "tokens": 0} for split in SPLITS}
    with atomic_dir(out_dir) as tmp:
        files = {s: open(tmp / f"{s}.txt", "w", encoding="utf-8") for s in SPLITS}  # noqa: SIM115
        try:
            if config.source == "brown" or "all" in config.files:
                src = raw_dir / ("brown.zip" if config.source == "brown" else "all.txt")
                n_train, n_valid = config.split_tokens
                seen = 0
                for sent in read(src):
                    # the sentence that crosses a boundary stays in the earlier split
                    split = (
                        "train"
                        if seen < n_train
                        else "valid"
                        if seen < n_train + n_valid
                        else "test"
                    )
                    files[split].write(" ".join(sent) + "\n")
                    stats[split]["sentences"] += 1
                    stats[split]["tokens"] += len(sent)
                    seen += len(sent)
            else:
                for split in SPLITS:
                    for sent in read(raw_dir / f"{split}.txt"):
                        files[split].write(" ".join(sent) + "\n")
                        stats[split]["sentences"] += 1
                        stats[split]["tokens"] += len(sent)
        finally:
            for f in files.values():
                f.close()
        for split in SPLITS:
            if stats[split]["tokens"] == 0:
                total = sum(s["tokens"] for s in stats.values())
                raise DataError(
                    f"LM corpus: the {split} split is empty ({total:,} tokens in all; "
                    f"split_tokens={config.split_tokens}) — is the corpus empty or too small?"
                )
        atomic_write_json(tmp / "stats.json", stats)
    log.info("LM corpus: %s", {s: v["tokens"] for s, v in stats.items()})
    return stats


# --------------------------------------------------------------------------- the MT corpus


def prepare_mt(config: MTDataConfig, raw_dir: Path, out_dir: Path) -> dict:
    """Write aligned raw `SPLIT.src` / `SPLIT.tgt` lines (and `stats.json`) into `out_dir`."""
    if config.source == "multi30k":
        names = {"train": "train", "valid": "val", "test": config.test_set}
        pairs = {
            s: (raw_dir / f"{n}.{config.src}.gz", raw_dir / f"{n}.{config.tgt}.gz")
            for s, n in names.items()
        }
    else:
        pairs = {s: (raw_dir / f"{s}.src", raw_dir / f"{s}.tgt") for s in SPLITS}
    stats = {"src": config.src, "tgt": config.tgt}
    with atomic_dir(out_dir) as tmp:
        for split, (src_path, tgt_path) in pairs.items():
            src = list(_open_lines(src_path, config.max_line_bytes))
            tgt = list(_open_lines(tgt_path, config.max_line_bytes))
            if len(src) != len(tgt):
                raise DataError(
                    f"parallel {split} files are not aligned: {src_path} has {len(src):,} lines, "
                    f"{tgt_path} has {len(tgt):,}"
                )
            if not src:
                raise DataError(f"parallel {split} files are empty: {src_path}, {tgt_path}")
            names = _user_names(config, split, (src_path, tgt_path))
            src, tgt, dropped = _without_empty_pairs(split, src, tgt, names)
            if dropped:
                stats[f"{split}_empty_pairs_dropped"] = dropped
            (tmp / f"{split}.src").write_text("\n".join(src) + "\n", encoding="utf-8")
            (tmp / f"{split}.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
            stats[split] = len(src)
        atomic_write_json(tmp / "stats.json", stats)
    log.info("MT corpus %s→%s: %s", config.src, config.tgt, stats)
    return stats


def _user_names(config: MTDataConfig, split: str, paths: tuple[Path, Path]) -> tuple[str, str]:
    """The files to name in a message about `split`: the user's own for `parallel`."""
    if config.source == "parallel" and split in config.files:
        return tuple(str(Path(p).expanduser()) for p in config.files[split])
    return tuple(str(p) for p in paths)


def _without_empty_pairs(
    split: str, src: list[str], tgt: list[str], names: tuple[str, str]
) -> tuple[list[str], list[str], int]:
    """The pairs of `split` whose two sides both hold text, and how many were dropped.

    A pair with a blank side teaches nothing (an empty source leaves attention nothing to read
    and makes the loss NaN), so training pairs are dropped, counted and logged with the first
    lines. Valid and test pairs are scored as given, never dropped (that would change the BLEU
    of the split): one of them blank is refused, naming its file and line."""
    empty = [
        i for i, (s, t) in enumerate(zip(src, tgt, strict=True)) if not s.strip() or not t.strip()
    ]
    if not empty:
        return src, tgt, 0

    def where(i: int) -> str:
        return f"{names[0] if not src[i].strip() else names[1]}:{i + 1}"

    if split != "train":
        raise DataError(
            f"parallel {split} pair at line {empty[0] + 1} has an empty side ({where(empty[0])}"
            f"{f'; {len(empty)} such pairs' if len(empty) > 1 else ''}): valid and test pairs "
            "are scored as given, never dropped; remove or fill the pair"
        )
    log.warning(
        "parallel train: dropped %d pair(s) with an empty side, first %s",
        len(empty),
        ", ".join(where(i) for i in empty[:3]),
    )
    drop = set(empty)
    keep = [i for i in range(len(src)) if i not in drop]
    if not keep:
        raise DataError(f"parallel train files have no pair with text on both sides: {names[0]}")
    return [src[i] for i in keep], [tgt[i] for i in keep], len(empty)


def copy_user_files(files: dict, out_dir: Path, layout: str) -> list[Path]:
    """Copy the user's own `text` / `parallel` files into the raw folder under fixed names."""
    copied = []
    with atomic_dir(out_dir) as tmp:
        for split, value in sorted(files.items()):
            sources = value if layout == "parallel" else [value]
            suffixes = (".src", ".tgt") if layout == "parallel" else (".txt",)
            for src, suffix in zip(sources, suffixes, strict=True):
                src = Path(src).expanduser()
                if not src.is_file():
                    raise DataError(f"{layout} source: {split} file not found: {src}")
                shutil.copyfile(src, tmp / f"{split}{suffix}")
                copied.append(out_dir / f"{split}{suffix}")
    return copied


def _say_outside(role: str, files: list[str], root: Path) -> None:
    """One line when a role's files lie outside the project (its stage is `always_changed`)."""
    outside = [f for f in files if inside_project(f, root) is None]
    if outside:
        log.warning(
            "corpus@%s: %s outside the project, which DVC cannot watch: the corpus stages run "
            "on every `dvc repro` (move the files into the project to have them watched)",
            role,
            ", ".join(outside) + (" lies" if len(outside) == 1 else " lie"),
        )


# --------------------------------------------------------------------------- the `corpus` stage

EVAL_SOURCES = ("analogy", "wordsim353", "simlex999")


def fetch_corpus(
    role: str, lm: LMDataConfig, mt: MTDataConfig, raw_root: Path, mirror: Path | None
) -> list[Path]:
    """Fetch (or copy) what `prepare@role` reads into `raw_root/role` (replaced as a whole).

    lm → brown.zip or the user's text files; mt → the Multi30k files of the language pair (or the
    user's parallel files); eval → the analogy and similarity sets.
    """
    from nlpzoo.data.sources import fetch_sources

    out = raw_root / role
    _say_outside(role, user_files(role, lm, mt), raw_root.parent.parent)  # root/data/raw
    if role == "lm" and lm.source == "text":
        return copy_user_files(lm.files, out, "text")
    if role == "mt" and mt.source == "parallel":
        return copy_user_files(mt.files, out, "parallel")
    with atomic_dir(out) as tmp:
        if role == "lm":
            paths = fetch_sources(["brown"], tmp, mirror)
        elif role == "mt":
            paths = fetch_sources(
                ["multi30k"], tmp, mirror, files={"multi30k": mt.multi30k_files()}
            )
        elif role == "eval":
            paths = fetch_sources(list(EVAL_SOURCES), tmp, mirror)
        else:
            raise ValueError(f"unknown corpus role {role!r}")
    return [out / p.relative_to(tmp) for p in paths]


def raw_dir_for(role: str, lm: LMDataConfig, mt: MTDataConfig, raw_root: Path) -> Path:
    """Where `prepare@role` finds the files `fetch_corpus` wrote."""
    if role == "mt" and mt.source == "multi30k":
        return raw_root / "mt" / "multi30k"
    return raw_root / role
