"""Tests for nlpzoo.data.prepare: Brown reading, the Bengio split, text/parallel sources, checks."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from nlpzoo.config import build
from nlpzoo.data.prepare import brown_sentences, copy_user_files, prepare_lm, prepare_mt
from nlpzoo.data.sources import SOURCES
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.params_data import LMDataConfig, MTDataConfig

# --------------------------------------------------------------------------- helpers

# Two Brown files in the NLTK layout: a leading tab, `word/tag` tokens, blank lines between
# sentences. `1/2/cd` is a word containing a slash.
CA01 = (
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd ./.\n"
    "\n\n\tIt/pps cost/vbd 1/2/cd dollar/nn ./.\n\n"
)
CA02 = "\n\n\tNew/jj-tl York/np-tl wins/vbz ./.\n\n"
CB01 = "\n\tEditorial/nn-tl page/nn ./.\n"
IGNORED = {
    "brown/README": "BROWN CORPUS/nn readme/nn text/nn\n",
    "brown/cats.txt": "ca01 news\nca02 news\ncb01 editorial\n",
    "brown/CONTENTS": "Contents/nn of/in the/at corpus/nn\n",
}


def make_brown_zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("brown/", "")
        for name, text in members.items():
            zf.writestr(name, text.encode("utf-8"))
    return path


# Sentences of lengths 4, 4, 4, 3, 3, 4, 2 (24 tokens); token j of sentence i is `s{i}w{j}`.
LENGTHS = [4, 4, 4, 3, 3, 4, 2]
SENTENCES = [[f"s{i}w{j}" for j in range(n)] for i, n in enumerate(LENGTHS)]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_split(out: Path, split: str) -> list[str]:
    return (out / f"{split}.txt").read_text(encoding="utf-8").splitlines()


def text_raw(tmp_path: Path, lines: list[str]) -> Path:
    """A raw dir as `copy_user_files` leaves it for a `text` source with `{all: path}`."""
    user = write_lines(tmp_path / "user" / "corpus.txt", lines)
    raw = tmp_path / "raw"
    copy_user_files({"all": str(user)}, raw, "text")
    return raw


def text_config(**kw) -> LMDataConfig:
    kw.setdefault("files", {"all": "corpus.txt"})
    return LMDataConfig(source="text", **kw)


# --------------------------------------------------------------------------- brown_sentences


def test_brown_sentences_drops_tags_keeps_file_order_and_ignores_metadata(tmp_path):
    # members written out of order: the reader must sort them into genre order ca01, ca02, cb01
    zpath = make_brown_zip(
        tmp_path / "brown.zip",
        {"brown/cb01": CB01, **IGNORED, "brown/ca02": CA02, "brown/ca01": CA01},
    )
    sents = list(brown_sentences(zpath, lowercase=False, max_line_bytes=1000))
    assert sents == [
        ["The", "Fulton", "County", "Grand", "Jury", "said", "."],
        ["It", "cost", "1/2", "dollar", "."],
        ["New", "York", "wins", "."],
        ["Editorial", "page", "."],
    ]


@pytest.mark.parametrize(
    ("lowercase", "first"),
    [
        (True, ["the", "fulton", "county", "grand", "jury", "said", "."]),
        (False, ["The", "Fulton", "County", "Grand", "Jury", "said", "."]),
    ],
)
def test_brown_sentences_lowercase_switch(tmp_path, lowercase, first):
    zpath = make_brown_zip(tmp_path / "brown.zip", {"brown/ca01": CA01, "brown/ca02": CA02})
    sents = list(brown_sentences(zpath, lowercase=lowercase, max_line_bytes=1000))
    assert sents[0] == first
    assert sents[1][2] == "1/2"
    assert len(sents) == 3


def test_brown_sentences_refuses_archive_without_brown_files(tmp_path):
    zpath = make_brown_zip(tmp_path / "brown.zip", IGNORED)
    with pytest.raises(DataError, match="brown/cXNN"):
        list(brown_sentences(zpath, lowercase=True, max_line_bytes=1000))


def test_brown_sentences_missing_archive_names_path(tmp_path):
    missing = tmp_path / "nowhere" / "brown.zip"
    with pytest.raises(DataError, match="not found") as err:
        list(brown_sentences(missing, lowercase=True, max_line_bytes=1000))
    assert str(missing) in str(err.value)


def test_brown_sentences_invalid_utf8_names_member_and_offset(tmp_path):
    good = "\tThe/at jury/nn ./.\n\n"
    bad = b"\tA/at caf\xff/nn ./.\n"
    with zipfile.ZipFile(tmp_path / "brown.zip", "w") as zf:
        zf.writestr("brown/ca01", (good.encode() + bad))
    offset = len(good.encode()) + len(b"\tA/at caf")
    with pytest.raises(DataError) as err:
        list(brown_sentences(tmp_path / "brown.zip", lowercase=True, max_line_bytes=1000))
    assert "brown/ca01" in str(err.value)
    assert f"byte offset {offset} " in str(err.value)


def test_prepare_lm_brown_writes_lowercased_untagged_splits(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    make_brown_zip(raw / "brown.zip", {"brown/ca01": CA01, "brown/ca02": CA02, **IGNORED})
    # 7 + 5 + 4 tokens: train takes sentence 1 (crosses 3), valid sentence 2 (crosses 8)
    stats = prepare_lm(LMDataConfig(split_tokens=[3, 5]), raw, tmp_path / "out")
    out = tmp_path / "out"
    assert read_split(out, "train") == ["the fulton county grand jury said ."]
    assert read_split(out, "valid") == ["it cost 1/2 dollar ."]
    assert read_split(out, "test") == ["new york wins ."]
    assert stats["train"] == {"sentences": 1, "tokens": 7}
    assert stats["test"] == {"sentences": 1, "tokens": 4}


# --------------------------------------------------------------------------- prepare_lm: split


@pytest.mark.parametrize(
    ("split_tokens", "expected"),
    [
        # sentence starts 0 4 8 12 15 18 22: sentence 2 (8..11) crosses 10, sentence 3 (12..14)
        # crosses 14; both stay in the earlier split
        ([10, 4], {"train": [0, 1, 2], "valid": [3], "test": [4, 5, 6]}),
        # boundaries exactly between sentences: nothing crosses, nothing moves
        ([8, 7], {"train": [0, 1], "valid": [2, 3], "test": [4, 5, 6]}),
        # boundaries are absolute positions in the token stream (3 and 5): sentence 1 starts at 4
        ([3, 2], {"train": [0], "valid": [1], "test": [2, 3, 4, 5, 6]}),
    ],
)
def test_prepare_lm_splits_by_tokens_at_sentence_crossing_boundary(
    tmp_path, split_tokens, expected
):
    raw = text_raw(tmp_path, [" ".join(s) for s in SENTENCES])
    out = tmp_path / "prepared"
    stats = prepare_lm(text_config(split_tokens=split_tokens), raw, out)
    for split, idx in expected.items():
        assert read_split(out, split) == [" ".join(SENTENCES[i]) for i in idx]
        want = {"sentences": len(idx), "tokens": sum(LENGTHS[i] for i in idx)}
        assert stats[split] == want
    assert json.loads((out / "stats.json").read_text()) == stats
    names = sorted(p.name for p in out.iterdir())
    assert names == ["stats.json", "test.txt", "train.txt", "valid.txt"]


def test_prepare_lm_normalises_whitespace_and_drops_blank_lines(tmp_path):
    lines = ["  The   Cat\tsat  ", "", "   ", "A dog .", "Z z", "Last one"]
    raw = text_raw(tmp_path, lines)
    out = tmp_path / "prepared"
    stats = prepare_lm(text_config(split_tokens=[3, 3]), raw, out)
    assert read_split(out, "train") == ["the cat sat"]
    assert read_split(out, "valid") == ["a dog ."]
    assert read_split(out, "test") == ["z z", "last one"]
    assert stats["test"] == {"sentences": 2, "tokens": 4}
    # one sentence per line, single spaces, a final newline
    for split in ("train", "valid", "test"):
        text = (out / f"{split}.txt").read_text(encoding="utf-8")
        assert text.endswith("\n") and "  " not in text and "\t" not in text


def test_prepare_lm_lowercase_off_keeps_case(tmp_path):
    raw = text_raw(tmp_path, ["The Cat", "A Dog", "Big Fish"])
    out = tmp_path / "prepared"
    prepare_lm(text_config(split_tokens=[2, 2], lowercase=False), raw, out)
    assert read_split(out, "train") == ["The Cat"]
    assert read_split(out, "test") == ["Big Fish"]


@pytest.mark.parametrize(
    ("split_tokens", "empty"),
    [
        ([100, 5], "valid"),
        ([20, 10], "test"),
        ([10, 14], "test"),
        ([1, 1], "valid"),  # sentence 0 (4 tokens) crosses both boundaries
    ],
)
def test_prepare_lm_empty_split_raises_and_leaves_no_output(tmp_path, split_tokens, empty):
    raw = text_raw(tmp_path, [" ".join(s) for s in SENTENCES])
    parent = tmp_path / "data"
    parent.mkdir()
    out = parent / "prepared"
    with pytest.raises(DataError, match=f"the {empty} split is empty") as err:
        prepare_lm(text_config(split_tokens=split_tokens), raw, out)
    assert "24 tokens" in str(err.value)
    assert not out.exists()
    assert list(parent.iterdir()) == []  # no temp dir left behind either


def test_prepare_lm_failure_keeps_previous_output(tmp_path):
    raw = text_raw(tmp_path, [" ".join(s) for s in SENTENCES])
    out = tmp_path / "prepared"
    good = prepare_lm(text_config(split_tokens=[10, 4]), raw, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(DataError, match="empty"):
        prepare_lm(text_config(split_tokens=[1000, 4]), raw, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads((out / "stats.json").read_text()) == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared", "raw", "user"]


def test_prepare_lm_rewrites_output_completely(tmp_path):
    raw = text_raw(tmp_path, [" ".join(s) for s in SENTENCES])
    out = tmp_path / "prepared"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    prepare_lm(text_config(split_tokens=[10, 4]), raw, out)
    assert not (out / "stale.txt").exists()
    assert (out / "train.txt").is_file()


def test_prepare_lm_text_source_with_three_files(tmp_path):
    user = tmp_path / "user"
    files = {
        "train": write_lines(user / "tr.txt", ["One Two three", "four five"]),
        "valid": write_lines(user / "va.txt", ["Six seven"]),
        "test": write_lines(user / "te.txt", ["eight", "", "nine ten"]),
    }
    raw = tmp_path / "raw"
    copied = copy_user_files({k: str(v) for k, v in files.items()}, raw, "text")
    assert sorted(p.name for p in copied) == ["test.txt", "train.txt", "valid.txt"]
    out = tmp_path / "prepared"
    # split_tokens do not apply to pre-split files
    stats = prepare_lm(
        LMDataConfig(
            source="text", files={k: str(v) for k, v in files.items()}, split_tokens=[1, 1]
        ),
        raw,
        out,
    )
    assert read_split(out, "train") == ["one two three", "four five"]
    assert read_split(out, "valid") == ["six seven"]
    assert read_split(out, "test") == ["eight", "nine ten"]
    assert stats == {
        "train": {"sentences": 2, "tokens": 5},
        "valid": {"sentences": 1, "tokens": 2},
        "test": {"sentences": 2, "tokens": 3},
    }


def test_prepare_lm_text_source_with_empty_split_file_raises(tmp_path):
    raw = tmp_path / "raw"
    write_lines(raw / "train.txt", ["a b c"])
    write_lines(raw / "valid.txt", ["", "  "])
    write_lines(raw / "test.txt", ["d e"])
    out = tmp_path / "prepared"
    cfg = LMDataConfig(source="text", files={"train": "a", "valid": "b", "test": "c"})
    with pytest.raises(DataError, match="the valid split is empty"):
        prepare_lm(cfg, raw, out)
    assert not out.exists()


# --------------------------------------------------------------------------- input checks


def test_invalid_utf8_reports_exact_byte_offset(tmp_path):
    line1 = b"good line here\n"
    line2 = "café über\n".encode()  # valid multi-byte UTF-8 before the bad line
    line3 = b"bad \xe2\x82x euro\n"  # truncated 3-byte sequence starting at byte 4 of the line
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "all.txt").write_bytes(line1 + line2 + line3 + b"more text\n")
    offset = len(line1) + len(line2) + 4
    out = tmp_path / "prepared"
    with pytest.raises(DataError) as err:
        prepare_lm(text_config(split_tokens=[1, 1]), raw, out)
    msg = str(err.value)
    assert f"invalid UTF-8 at byte offset {offset} " in msg
    assert "line 3" in msg
    assert str(raw / "all.txt") in msg
    assert not out.exists()


def test_invalid_utf8_on_first_byte_is_offset_zero(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "all.txt").write_bytes(b"\xffabc\n")
    with pytest.raises(DataError, match=r"byte offset 0 \(line 1\)"):
        prepare_lm(text_config(), raw, tmp_path / "prepared")


def test_huge_line_without_newlines_is_refused(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "all.txt").write_bytes(b"short line\n" + b"x" * 10_000_000)
    out = tmp_path / "prepared"
    with pytest.raises(DataError, match="line 2 is over 1,000,000 bytes long") as err:
        prepare_lm(text_config(), raw, out)
    assert str(raw / "all.txt") in str(err.value)
    assert not out.exists()


def test_huge_line_is_refused_without_reading_it_whole(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "all.txt").write_bytes(b"a b\n" + b"x" * 30_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="line 2 is over 1,000,000 bytes long"):
            prepare_lm(text_config(), raw, tmp_path / "prepared")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000  # a few times the limit, not the 30 MB line


def test_huge_line_in_brown_member_is_refused(tmp_path):
    zpath = make_brown_zip(tmp_path / "brown.zip", {"brown/ca01": CA01 + "x/nn " * 100})
    with pytest.raises(DataError, match=r"brown/ca01: line 8 is over 300 bytes long"):
        list(brown_sentences(zpath, lowercase=True, max_line_bytes=300))


@pytest.mark.parametrize(("limit", "ok"), [(12, True), (11, False)])
def test_max_line_bytes_limit_counts_the_whole_line(tmp_path, limit, ok):
    # the limit applies to the raw line including its newline: "abcde fghij\n" is 12 bytes
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "all.txt").write_bytes(b"a b\nabcde fghij\nc d\n")
    cfg = text_config(split_tokens=[2, 1], max_line_bytes=limit)
    if ok:
        prepare_lm(cfg, raw, tmp_path / "prepared")
        assert read_split(tmp_path / "prepared", "valid") == ["abcde fghij"]
    else:
        with pytest.raises(DataError, match=r"line 2 is over 11 bytes long"):
            prepare_lm(cfg, raw, tmp_path / "prepared")


def test_missing_text_file_names_path(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(DataError, match="not found") as err:
        prepare_lm(text_config(), raw, tmp_path / "prepared")
    assert str(raw / "all.txt") in str(err.value)
    assert not (tmp_path / "prepared").exists()


def test_copy_user_files_missing_file_names_split_and_path(tmp_path):
    present = write_lines(tmp_path / "a.txt", ["x"])
    missing = tmp_path / "nope" / "b.txt"
    raw = tmp_path / "raw"
    files = {"train": str(present), "valid": str(missing), "test": str(present)}
    with pytest.raises(DataError, match="valid file not found") as err:
        copy_user_files(files, raw, "text")
    assert str(missing) in str(err.value)
    assert not raw.exists()


# --------------------------------------------------------------------------- prepare_mt


def parallel_files(tmp_path: Path, counts: dict[str, tuple[int, int]]) -> dict[str, list[str]]:
    files = {}
    for split, (n_src, n_tgt) in counts.items():
        src = write_lines(
            tmp_path / "user" / f"{split}.de", [f"Ein Satz {split} {i} ." for i in range(n_src)]
        )
        tgt = write_lines(
            tmp_path / "user" / f"{split}.en", [f"A sentence {split} {i} ." for i in range(n_tgt)]
        )
        files[split] = [str(src), str(tgt)]
    return files


def test_prepare_mt_parallel_writes_aligned_raw_lines(tmp_path):
    files = parallel_files(tmp_path, {"train": (4, 4), "valid": (2, 2), "test": (3, 3)})
    # untokenized, cased text and spacing stay as they are (BLEU references)
    write_lines(Path(files["test"][0]), ["Zwei  Hunde, laufen!", " Ja ", "Ärger."])
    write_lines(Path(files["test"][1]), ["Two  dogs, run!", " Yes ", "Trouble."])
    raw = tmp_path / "raw"
    copy_user_files(files, raw, "parallel")
    assert sorted(p.name for p in raw.iterdir()) == [
        "test.src",
        "test.tgt",
        "train.src",
        "train.tgt",
        "valid.src",
        "valid.tgt",
    ]
    cfg = MTDataConfig(source="parallel", src="de", tgt="en", files=files)
    out = tmp_path / "prepared"
    stats = prepare_mt(cfg, raw, out)
    assert stats == {"src": "de", "tgt": "en", "train": 4, "valid": 2, "test": 3}
    assert json.loads((out / "stats.json").read_text()) == stats
    assert (out / "train.src").read_text(encoding="utf-8").splitlines()[3] == "Ein Satz train 3 ."
    assert (out / "train.tgt").read_text(encoding="utf-8").splitlines()[3] == "A sentence train 3 ."
    assert (out / "test.src").read_text(encoding="utf-8") == "Zwei  Hunde, laufen!\n Ja \nÄrger.\n"
    assert (out / "test.tgt").read_text(encoding="utf-8") == "Two  dogs, run!\n Yes \nTrouble.\n"
    for split in ("train", "valid", "test"):
        src = (out / f"{split}.src").read_text(encoding="utf-8").splitlines()
        tgt = (out / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
        assert len(src) == len(tgt) == stats[split]


def test_prepare_mt_misaligned_files_report_both_counts(tmp_path):
    files = parallel_files(tmp_path, {"train": (4, 4), "valid": (7, 5), "test": (3, 3)})
    raw = tmp_path / "raw"
    copy_user_files(files, raw, "parallel")
    out = tmp_path / "prepared"
    cfg = MTDataConfig(source="parallel", files=files)
    with pytest.raises(DataError, match="valid files are not aligned") as err:
        prepare_mt(cfg, raw, out)
    msg = str(err.value)
    assert f"{raw / 'valid.src'} has 7 lines" in msg
    assert f"{raw / 'valid.tgt'} has 5" in msg
    assert not out.exists()


def test_prepare_mt_empty_split_raises(tmp_path):
    files = parallel_files(tmp_path, {"train": (4, 4), "valid": (2, 2), "test": (0, 0)})
    raw = tmp_path / "raw"
    copy_user_files(files, raw, "parallel")
    with pytest.raises(DataError, match="test files are empty"):
        prepare_mt(MTDataConfig(source="parallel", files=files), raw, tmp_path / "prepared")
    assert not (tmp_path / "prepared").exists()


def test_prepare_mt_invalid_utf8_reports_offset(tmp_path):
    files = parallel_files(tmp_path, {"train": (2, 2), "valid": (1, 1), "test": (1, 1)})
    raw = tmp_path / "raw"
    copy_user_files(files, raw, "parallel")
    first = (raw / "train.tgt").read_bytes().split(b"\n")[0] + b"\n"
    (raw / "train.tgt").write_bytes(first + b"ok \x80 no\n")
    with pytest.raises(DataError, match=f"byte offset {len(first) + 3} "):
        prepare_mt(MTDataConfig(source="parallel", files=files), raw, tmp_path / "prepared")


def test_prepare_mt_multi30k_reads_gzipped_train_val_and_test_set(tmp_path):
    raw = tmp_path / "multi30k"
    raw.mkdir()
    for name, n in (("train", 3), ("val", 2), ("test_2017_flickr", 1)):
        for lang, word in (("fr", "Une phrase"), ("en", "A sentence")):
            lines = "".join(f"{word} {name} {i}\n" for i in range(n))
            with gzip.open(raw / f"{name}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write(lines)
    cfg = MTDataConfig(src="fr", tgt="en", test_set="test_2017_flickr")
    out = tmp_path / "prepared"
    stats = prepare_mt(cfg, raw, out)
    assert stats == {"src": "fr", "tgt": "en", "train": 3, "valid": 2, "test": 1}
    assert (out / "valid.src").read_text(encoding="utf-8") == "Une phrase val 0\nUne phrase val 1\n"
    assert (out / "test.tgt").read_text(encoding="utf-8") == "A sentence test_2017_flickr 0\n"


@pytest.mark.parametrize(
    ("src", "tgt", "expected"),
    [
        (
            "de",
            "en",
            [
                "train.de.gz",
                "train.en.gz",
                "val.de.gz",
                "val.en.gz",
                "test_2016_flickr.de.gz",
                "test_2016_flickr.en.gz",
            ],
        ),
        (
            "fr",
            "en",
            [
                "train.fr.gz",
                "train.en.gz",
                "val.fr.gz",
                "val.en.gz",
                "test_2016_flickr.fr.gz",
                "test_2016_flickr.en.gz",
            ],
        ),
    ],
)
def test_multi30k_files_for_language_pair(src, tgt, expected):
    names = MTDataConfig(src=src, tgt=tgt).multi30k_files()
    assert names == expected
    registered = {Path(f.path).name for f in SOURCES["multi30k"]}
    assert set(names) <= registered


# --------------------------------------------------------------------------- config validation


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"source": "wikipedia"}, "source"),
        ({"split_tokens": [10]}, "split_tokens"),
        ({"split_tokens": [10, 5, 5]}, "split_tokens"),
        ({"split_tokens": [10, 0]}, "split_tokens"),
        ({"split_tokens": [-1, 5]}, "split_tokens"),
        ({"split_tokens": [10, 2.5]}, "split_tokens"),
        ({"split_tokens": "10,5"}, "split_tokens"),
        ({"max_line_bytes": 0}, "max_line_bytes"),
        ({"lowercase": "yes"}, "lowercase"),
        ({"source": "text"}, "files"),
        ({"source": "text", "files": {"train": "a", "valid": "b"}}, "files"),
        ({"source": "text", "files": {"all": "a", "train": "b"}}, "files"),
    ],
)
def test_lm_data_config_rejects_bad_values(section, key):
    with pytest.raises(ConfigError) as err:
        build(LMDataConfig, section, "lm")
    msg = str(err.value)
    assert msg.startswith("lm: ")
    assert f"'{key}'" in msg


def test_lm_data_config_unknown_key_suggests_closest():
    with pytest.raises(ConfigError, match="unknown key 'split_token'; did you mean 'split_tokens'"):
        build(LMDataConfig, {"split_token": [1, 2]}, "lm")


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"source": "europarl"}, "source"),
        ({"src": "en", "tgt": "en"}, "tgt"),
        ({"source": "parallel"}, "files"),
        ({"source": "parallel", "files": {"train": ["a", "b"], "valid": ["c", "d"]}}, "files"),
        (
            {
                "source": "parallel",
                "files": {"train": ["a", "b"], "valid": ["c"], "test": ["e", "f"]},
            },
            "files",
        ),
        ({"max_line_bytes": "big"}, "max_line_bytes"),
        ({"tgt_lang": "fr"}, "tgt_lang"),
    ],
)
def test_mt_data_config_rejects_bad_values(section, key):
    with pytest.raises(ConfigError) as err:
        build(MTDataConfig, section, "mt")
    msg = str(err.value)
    assert msg.startswith("mt: ")
    assert f"'{key}'" in msg


def test_data_configs_accept_valid_sections():
    lm = build(
        LMDataConfig, {"source": "text", "files": {"all": "c.txt"}, "split_tokens": [3, 2]}, "lm"
    )
    assert (lm.source, lm.split_tokens) == ("text", [3, 2])
    mt = build(
        MTDataConfig,
        {
            "source": "parallel",
            "src": "fr",
            "tgt": "en",
            "files": {s: ["x", "y"] for s in ("train", "valid", "test")},
        },
        "mt",
    )
    assert (mt.src, mt.tgt, mt.source) == ("fr", "en", "parallel")
