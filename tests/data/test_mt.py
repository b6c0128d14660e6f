"""Parallel data: SentencePiece ids, padded batches, length-bucketed sampling."""

from __future__ import annotations

import numpy as np
import pytest

from nlpzoo.data.mt import IGNORE, SEP, Codec, LengthBatches, collate, load_split
from nlpzoo.data.vocab import BOS, EOS, PAD, build_mt_vocab
from nlpzoo.errors import DataError
from nlpzoo.params_data import MTVocabConfig


def test_collate_layout():
    src, tgt_in, labels = collate(
        [(np.array([7, 8, 9]), np.array([5])), (np.array([6]), np.array([5, 6]))]
    )
    assert src.tolist() == [[7, 8, 9], [6, PAD, PAD]]
    assert tgt_in.tolist() == [[BOS, 5, PAD], [BOS, 5, 6]]
    assert labels.tolist() == [[5, EOS, IGNORE], [5, 6, EOS]]


def test_length_batches_cover_every_pair_once_and_ranks_are_disjoint():
    lengths = np.random.default_rng(0).integers(1, 40, 1000)
    seen = []
    for rank in range(2):
        sampler = LengthBatches(lengths, 16, shuffle=True, seed=3, rank=rank, world=2)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        seen += [i for b in batches for i in b]
        # sorted pools: a batch spans a small length range compared with random batching
        spread = np.mean([np.ptp(lengths[b]) for b in batches])
        assert spread < 10
    assert sorted(seen) == list(range(1000))
    again = LengthBatches(lengths, 16, shuffle=True, seed=3)
    assert list(again) != list(again)  # a new order every epoch


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory):
    prepared = tmp_path_factory.mktemp("prepared")
    rng = np.random.default_rng(0)
    words = ["hund", "katze", "haus", "rot", "der", "die"]
    for split, n in (("train", 200), ("valid", 5), ("test", 5)):
        src = [" ".join(rng.choice(words, 4)) for _ in range(n)]
        (prepared / f"{split}.src").write_text("\n".join(src) + "\n")
        (prepared / f"{split}.tgt").write_text("\n".join(s.upper() for s in src) + "\n")
    out = tmp_path_factory.mktemp("vocab") / "mt"
    build_mt_vocab(MTVocabConfig(vocab_size=40), prepared, out)
    return out


def test_codec_has_the_fixed_special_ids_and_round_trips(vocab_dir):
    codec = Codec(vocab_dir / "spm.model")
    assert codec.sp.piece_to_id("<sep>") == SEP
    split = load_split(vocab_dir, "valid", codec)
    assert len(split) == 5
    assert codec.decode([list(split.src[0])]) == [split.src_text[0]]


def test_misaligned_split_is_refused(vocab_dir, tmp_path):
    codec = Codec(vocab_dir / "spm.model")
    (tmp_path / "valid.src").write_text("a\nb\n")
    (tmp_path / "valid.tgt").write_text("a\n")
    with pytest.raises(DataError, match="not aligned"):
        load_split(tmp_path, "valid", codec)
