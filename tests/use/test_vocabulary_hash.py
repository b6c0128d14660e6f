"""A run answers only with the vocabulary it was trained on: config.json records the SHA-256 of
its `vocab.txt` (a translation run's `spm.model`), and the commands, the served model and the
register stage refuse another file of the same size, a run trained before the hash was recorded
still answers."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from nlpzoo import lifecycle, registry
from nlpzoo.data.vocab import build_mt_vocab
from nlpzoo.errors import NlpzooError
from nlpzoo.params_data import MTVocabConfig
from nlpzoo.use.answers import Answerer
from nlpzoo.use.run import VOCABULARY_HASHES, TrainedRun, load_codec
from nlpzoo.use.text import UseError
from toy import cli, make_mt_project, tiny_params, trained, write_lm_data


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab-hash")
    write_lm_data(root)
    params = tiny_params("ngram")
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with trained(root, params, ["ngram"]):
        yield root, params


def _rebuilt(vocab: Path) -> bytes:
    """`vocab`'s bytes with two of its words swapped: the same size, other ids."""
    original = vocab.read_bytes()
    lines = original.decode().split("\n")
    i, j = len(lines) // 2, len(lines) // 2 + 1  # two words, past the specials
    lines[i], lines[j] = lines[j], lines[i]
    swapped = "\n".join(lines).encode()
    assert swapped != original and len(swapped) == len(original)
    return swapped


def test_the_hash_of_the_vocabulary_is_in_the_runs_config(project):
    root, _ = project
    config = json.loads((root / "models" / "ngram" / "config.json").read_text())
    assert config["vocab_sha256"] == _sha256(root / "data" / "vocab" / "lm" / "vocab.txt")
    assert "spm_sha256" not in config
    assert lifecycle.VOCABULARY_HASHES == VOCABULARY_HASHES


def test_a_rebuilt_vocabulary_of_the_same_size_is_refused(project):
    root, params = project
    vocab = root / "data" / "vocab" / "lm" / "vocab.txt"
    config_path = root / "models" / "ngram" / "config.json"
    original, config_text = vocab.read_bytes(), config_path.read_text()
    args = ("generate", "--run", "ngram", "--prompt", "she", "--tokens", "5")
    code, before, err = cli(root, *args)
    assert code == 0, err
    try:
        vocab.write_bytes(_rebuilt(vocab))
        for command in (
            args,
            ("score", "--run", "ngram", str(root / "data" / "prepared" / "lm" / "valid.txt")),
        ):
            code, out, err = cli(root, *command)
            assert code == 1 and out == "" and err.count("\n") == 1, err
            assert "run 'ngram'" in err and "not the vocabulary it was trained on" in err, err
            assert "`dvc repro train-ngram`" in err, err
        # the register stage logs no model of it
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
            with pytest.raises(NlpzooError, match="not the vocabulary it was trained on"):
                registry.register(params, "ngram", root)
        assert not (root / "registry" / "ngram.json").exists()
        # a run trained before config.json held the hash: checked by size only, as before
        config = json.loads(config_text)
        del config["vocab_sha256"]
        config_path.write_text(json.dumps(config))
        code, _, err = cli(root, *args)
        assert code == 0, err
    finally:
        vocab.write_bytes(original)
        config_path.write_text(config_text)
    code, after, err = cli(root, *args)
    assert code == 0 and after == before, err


def test_the_served_model_refuses_another_vocabulary(project, tmp_path):
    """The MLflow model's `run` folder (what `Answerer.open` loads when it is served)."""
    root, _ = project
    folder = tmp_path / "run"
    shutil.copytree(root / "models" / "ngram", folder)
    vocab = root / "data" / "vocab" / "lm" / "vocab.txt"
    (folder / "vocab.txt").write_bytes(vocab.read_bytes())
    assert Answerer.open(folder).vocab is not None
    (folder / "vocab.txt").write_bytes(_rebuilt(vocab))
    with pytest.raises(UseError, match=r"run 'ngram': .* not the vocabulary it was trained on"):
        Answerer.open(folder).preload()


def test_a_translation_run_records_and_checks_its_sentencepiece_model(tmp_path):
    data = make_mt_project(tmp_path / "mt") / "data" / "vocab" / "mt"
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copyfile(data / "spm.model", folder / "spm.model")
    run = SimpleNamespace(data_dir=data)
    hashes = lifecycle._vocabulary_hashes(run, folder)
    assert hashes["spm_sha256"] == _sha256(data / "spm.model")
    config = {"run": "tmt", "family": "transformer", "data": "vocab/mt", **hashes}
    t = TrainedRun("tmt", folder, config, tmp_path)
    assert load_codec(t) is not None
    prepared = tmp_path / "mt" / "prepared"  # the corpus edited, the model rebuilt
    with open(prepared / "train.src", "a") as f:
        f.write("die grüne katze schläft unter dem tisch\n" * 20)
    with open(prepared / "train.tgt", "a") as f:
        f.write("the green cat sleeps under the table\n" * 20)
    other = tmp_path / "other"
    build_mt_vocab(MTVocabConfig(vocab_size=40), prepared, other)
    shutil.copyfile(other / "spm.model", folder / "spm.model")
    assert _sha256(folder / "spm.model") != hashes["spm_sha256"]
    with pytest.raises(UseError, match=r"run 'tmt': .*spm_sha256.*`dvc repro train-tmt`"):
        load_codec(t)
    del config["spm_sha256"]  # trained before the hash: loads
    assert load_codec(TrainedRun("tmt", folder, config, tmp_path)) is not None
