"""Tests for nlpzoo.data.vocab: word vocabulary, LM id streams, the MT SentencePiece model."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nlpzoo.config import build
from nlpzoo.data.vocab import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    UNK,
    Vocab,
    build_lm_vocab,
    build_mt_vocab,
    count_words,
    load_stream,
)
from nlpzoo.errors import ConfigError, DataError
from nlpzoo.params_data import LMVocabConfig, MTVocabConfig

# --------------------------------------------------------------------------- Vocab


def test_special_ids():
    assert (UNK, BOS, EOS, PAD) == (0, 1, 2, 3)
    assert SPECIALS == ("<unk>", "<s>", "</s>", "<pad>")


def test_build_orders_specials_then_count_then_alphabet():
    counter = Counter({"b": 3, "a": 3, "zeta": 7, "c": 1, "the": 10, "d": 3})
    v = Vocab.build(counter)
    assert v.words == ["<unk>", "<s>", "</s>", "<pad>", "the", "zeta", "a", "b", "d", "c"]
    assert v.counts == [0, 0, 0, 0, 10, 7, 3, 3, 3, 1]
    assert len(v) == 10
    assert [v.id(w) for w in ("<unk>", "<s>", "</s>", "<pad>", "the", "c")] == [0, 1, 2, 3, 4, 9]


@pytest.mark.parametrize(
    ("min_count", "kept", "unk"),
    [
        (1, ["x", "y", "z", "w"], 0),
        (2, ["x", "y", "z"], 1),  # w (1)
        (3, ["x", "y"], 3),  # z (2) + w (1)
        (5, ["x"], 7),  # y (4) + z (2) + w (1)
        (10, [], 12),
    ],
)
def test_min_count_maps_rare_words_to_unk_with_summed_count(min_count, kept, unk):
    counter = Counter({"x": 5, "y": 4, "z": 2, "w": 1})
    v = Vocab.build(counter, min_count=min_count)
    assert v.words == [*SPECIALS, *kept]
    assert v.counts[0] == unk
    assert v.counts[1:4] == [0, 0, 0]
    for word in counter:
        assert (v.id(word) == UNK) == (word not in kept)


def test_build_rejects_min_count_below_one():
    with pytest.raises(ValueError, match="min_count"):
        Vocab.build(Counter({"a": 1}), min_count=0)


def test_special_tokens_in_corpus_are_not_duplicated():
    v = Vocab.build(Counter({"<pad>": 5, "</s>": 2, "cat": 3}))
    assert v.words == [*SPECIALS, "cat"]


def test_save_load_round_trip(tmp_path):
    v = Vocab.build(Counter({"über": 4, "naïve": 4, "cat": 9, "rare": 1}), min_count=2)
    path = tmp_path / "sub" / "vocab.txt"
    v.save(path)
    assert path.read_text(encoding="utf-8").splitlines()[:5] == [
        "<unk>\t1",
        "<s>\t0",
        "</s>\t0",
        "<pad>\t0",
        "cat\t9",
    ]
    loaded = Vocab.load(path)
    assert loaded.words == v.words == [*SPECIALS, "cat", "naïve", "über"]
    assert loaded.counts == v.counts
    assert loaded.id("über") == 6
    assert loaded.id("rare") == UNK


@pytest.mark.parametrize(
    "text",
    [
        "the\t5\ncat\t3\n",  # no specials at all
        "<s>\t0\n<unk>\t0\n</s>\t0\n<pad>\t0\nthe\t1\n",  # specials in the wrong order
        "<unk>\t0\n<s>\t0\n</s>\t0\n",  # <pad> missing
        "",
    ],
)
def test_load_without_specials_raises(tmp_path, text):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="not an nlpzoo vocabulary") as err:
        Vocab.load(path)
    assert str(path) in str(err.value)


def test_encode_lines_appends_eos_and_maps_unknown_to_unk():
    v = Vocab.build(Counter({"the": 3, "cat": 2, "sat": 1}))  # the 4, cat 5, sat 6
    stream = v.encode_lines(["the cat sat", "dog the", "", "cat  zebra"])
    assert stream.dtype == np.int64
    assert stream.tolist() == [4, 5, 6, EOS, UNK, 4, EOS, EOS, 5, UNK, EOS]


def test_count_words_splits_on_whitespace():
    assert count_words(["a b  a", "b\ta", ""]) == Counter({"a": 3, "b": 2})


# --------------------------------------------------------------------------- build_lm_vocab


def write_prepared(d: Path, splits: dict[str, list[str]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for split, lines in splits.items():
        (d / f"{split}.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return d


LM_SPLITS = {
    "train": ["the cat sat on the mat", "the dog sat", "a cat ran"],
    "valid": ["the cat barked", "validonly word"],
    "test": ["testonly the dog", "mat"],
}


def decode(vocab: Vocab, stream: np.ndarray) -> list[str]:
    """Split a `</s>`-terminated id stream back into sentences of words."""
    lines, cur = [], []
    for i in stream.tolist():
        if i == EOS:
            lines.append(" ".join(cur))
            cur = []
        else:
            cur.append(vocab.words[i])
    assert cur == []  # the stream ends with </s>
    return lines


def test_build_lm_vocab_uses_training_split_only(tmp_path):
    prepared = write_prepared(tmp_path / "prepared", LM_SPLITS)
    out = tmp_path / "vocab"
    stats = build_lm_vocab(LMVocabConfig(min_count=1), prepared, out)
    v = Vocab.load(out / "vocab.txt")
    # training counts: the 3, cat 2, sat 2, then a dog mat on ran with 1
    assert v.words == [*SPECIALS, "the", "cat", "sat", "a", "dog", "mat", "on", "ran"]
    assert v.counts[4:] == [3, 2, 2, 1, 1, 1, 1, 1]
    for word in ("validonly", "word", "testonly", "barked"):
        assert v.id(word) == UNK
    # every split decodes back to its text, words outside the training vocabulary as <unk>
    for split, lines in LM_SPLITS.items():
        stream = np.load(out / f"{split}.npy")
        assert stream.dtype == np.int32
        want = [" ".join(w if w in v.index else "<unk>" for w in line.split()) for line in lines]
        assert decode(v, stream) == want
        assert load_stream(out, split).dtype == np.int64
    assert decode(v, load_stream(out, "valid")) == ["the cat <unk>", "<unk> <unk>"]
    assert stats["vocab_size"] == 12 and stats["min_count"] == 1
    assert stats["train_tokens"] == 12 + 3  # words + one </s> per sentence
    assert stats["valid_tokens"] == 5 + 2
    assert stats["test_tokens"] == 4 + 2
    assert stats["train_unk_rate"] == 0.0
    assert stats["valid_unk_rate"] == pytest.approx(3 / 7)
    assert stats["test_unk_rate"] == pytest.approx(1 / 6)
    assert json.loads((out / "stats.json").read_text()) == stats


def test_build_lm_vocab_min_count_collapses_rare_training_words(tmp_path):
    prepared = write_prepared(tmp_path / "prepared", LM_SPLITS)
    out = tmp_path / "vocab"
    stats = build_lm_vocab(LMVocabConfig(min_count=2), prepared, out)
    v = Vocab.load(out / "vocab.txt")
    assert v.words == [*SPECIALS, "the", "cat", "sat"]
    assert v.counts[UNK] == 5  # a dog mat on ran
    assert decode(v, load_stream(out, "train")) == [
        "the cat sat <unk> the <unk>",
        "the <unk> sat",
        "<unk> cat <unk>",
    ]
    assert stats["train_unk_rate"] == pytest.approx(5 / 15)


def test_build_lm_vocab_missing_training_split_raises(tmp_path):
    prepared = write_prepared(tmp_path / "prepared", {"valid": ["a"], "test": ["b"]})
    with pytest.raises(DataError, match="training split not found") as err:
        build_lm_vocab(LMVocabConfig(), prepared, tmp_path / "vocab")
    assert str(prepared / "train.txt") in str(err.value)
    assert not (tmp_path / "vocab").exists()


def test_load_stream_missing_split_names_path(tmp_path):
    with pytest.raises(DataError, match="run the vocab stage") as err:
        load_stream(tmp_path, "valid")
    assert str(tmp_path / "valid.npy") in str(err.value)


@pytest.mark.parametrize(
    ("cls", "section", "key"),
    [
        (LMVocabConfig, {"min_count": 0}, "min_count"),
        (LMVocabConfig, {"min_count": 2.5}, "min_count"),
        (LMVocabConfig, {"min_cont": 2}, "min_cont"),
        (MTVocabConfig, {"vocab_size": 8}, "vocab_size"),
        (MTVocabConfig, {"model_type": "word"}, "model_type"),
        (MTVocabConfig, {"character_coverage": 0.0}, "character_coverage"),
        (MTVocabConfig, {"character_coverage": 1.5}, "character_coverage"),
    ],
)
def test_vocab_configs_reject_bad_values(cls, section, key):
    with pytest.raises(ConfigError) as err:
        build(cls, section, "vocab")
    assert f"'{key}'" in str(err.value)
    assert str(err.value).startswith("vocab: ")


# --------------------------------------------------------------------------- build_mt_vocab

SYLLABLES = ["ka", "ri", "to", "me", "su", "lo", "na", "pe", "di", "gu", "ba", "zo"]


def synthetic_parallel(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(150)})
    src, tgt = [], []
    for _ in range(n):
        sent = rng.choices(words, k=rng.randint(3, 9))
        src.append(" ".join(sent))
        tgt.append(" ".join(w[::-1].capitalize() for w in reversed(sent)) + " .")
    return src, tgt


def write_mt_prepared(d: Path) -> Path:
    d.mkdir(parents=True)
    for split, n, seed in (("train", 300, 0), ("valid", 20, 1), ("test", 20, 2)):
        src, tgt = synthetic_parallel(n, seed)
        (d / f"{split}.src").write_text("\n".join(src) + "\n", encoding="utf-8")
        (d / f"{split}.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    (d / "stats.json").write_text("{}")
    return d


@pytest.fixture(scope="module")
def mt_vocabs(tmp_path_factory):
    """The same corpus at two different absolute paths, each built into its own directory."""
    root = tmp_path_factory.mktemp("mt")
    first = write_mt_prepared(root / "a" / "prepared")
    second = root / "elsewhere" / "deeper" / "prep"
    second.mkdir(parents=True)
    for p in first.iterdir():
        (second / p.name).write_bytes(p.read_bytes())
    cfg = MTVocabConfig(vocab_size=80)
    out1, out2 = root / "a" / "vocab", root / "b" / "x" / "vocab_mt"
    stats1 = build_mt_vocab(cfg, first, out1)
    stats2 = build_mt_vocab(cfg, second, out2)
    return first, (out1, stats1), (out2, stats2)


def test_build_mt_vocab_is_byte_reproducible_across_paths(mt_vocabs):
    _, (out1, stats1), (out2, stats2) = mt_vocabs
    model = (out1 / "spm.model").read_bytes()
    assert len(model) > 0
    assert model == (out2 / "spm.model").read_bytes()
    assert stats1 == stats2 == {"vocab_size": 80, "model_type": "unigram"}
    for out in (out1, out2):  # no file path is stored in the model
        assert str(out.parent).encode() not in model


def test_build_mt_vocab_special_ids_and_sep(mt_vocabs):
    import sentencepiece as spm

    _, (out, _), _ = mt_vocabs
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    assert sp.get_piece_size() == 80
    assert [sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<s>", "</s>", "<pad>"]
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (UNK, BOS, EOS, PAD)
    sep = sp.piece_to_id("<sep>")
    assert sep not in (UNK, BOS, EOS, PAD)
    pieces = sp.encode("kari <sep> Irak", out_type=str)
    assert "<sep>" in pieces
    ids = sp.encode("kari <sep> Irak")
    assert ids.count(sep) == 1
    assert sp.decode(ids) == "kari <sep> Irak"


def test_build_mt_vocab_copies_raw_split_files(mt_vocabs):
    prepared, (out, _), _ = mt_vocabs
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "spm.model",
        "stats.json",
        "test.src",
        "test.tgt",
        "train.src",
        "train.tgt",
        "valid.src",
        "valid.tgt",
    ]
    for name in names[2:]:
        assert (out / name).read_bytes() == (prepared / name).read_bytes()


def test_build_mt_vocab_missing_training_split_raises(tmp_path):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "train.src").write_text("a b\n")
    with pytest.raises(DataError, match="training split not found") as err:
        build_mt_vocab(MTVocabConfig(vocab_size=20), prepared, tmp_path / "vocab")
    assert str(prepared / "train.tgt") in str(err.value)
    assert not (tmp_path / "vocab").exists()


def test_save_stream_writes_what_np_save_writes_block_by_block(tmp_path, monkeypatch):
    from nlpzoo.data import vocab as vocab_module

    v = Vocab.build(Counter(["the", "cat", "sat", "on", "the", "mat", "the", "end"]), 1)
    lines = ["the cat sat", "", "a zebra on the mat", "the end"] * 5
    monkeypatch.setattr(vocab_module, "ENCODE_LINES", 3)  # several blocks, a partial last one
    n, unk = vocab_module.save_stream(v, iter(lines), tmp_path / "s.npy")
    np.save(tmp_path / "ref.npy", v.encode_lines(lines).astype(np.int32))
    assert (tmp_path / "s.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes()
    assert (n, unk) == (v.encode_lines(lines).size, 2 * 5)  # "a" and "zebra" are unknown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.npy", "s.npy"]  # no body left
    assert np.load(tmp_path / "s.npy").dtype == np.int32
