"""A trained run, as the commands find it: `resolve` the run `--run` or `--mlflow-run` names,
check it does what the command asks (`need_lm`, `need_vectors`, `need_mt`), and load its files
with one clear error for each way they can be missing or damaged (`load_vocab`, `load_model`,
`load_codec`, `load_vectors`). `project_params` is the one read of the project's params.yaml."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlpzoo.errors import NlpzooError
from nlpzoo.layout import Layout
from nlpzoo.taskinfo import task_info
from nlpzoo.use.text import UseError, decode


@dataclass
class TrainedRun:
    """A trained run: its name, folder and config.json, and the project it belongs to."""

    name: str
    folder: Path
    config: dict
    root: Path
    mlflow: bool = False  # fetched from MLflow (folder: the local copy of its files)

    @property
    def family(self) -> Any:
        from nlpzoo.families import FAMILIES

        return FAMILIES[self.config["family"]]


def project_params(root: Path) -> dict:
    """The project's params.yaml, read without validating it (a trained run stays usable while
    params are being edited): {} when it is missing, unreadable or not a mapping."""
    from nlpzoo.params import read_params

    try:
        params = read_params(root / "params.yaml")
    except (NlpzooError, OSError):
        return {}
    return params if isinstance(params, dict) else {}


def _models(root: Path) -> dict[str, dict]:
    """The runs of the project's params.yaml `models:` (name -> entry)."""
    models = project_params(root).get("models")
    if not isinstance(models, dict):  # not a mapping: no run named there (validate says why)
        return {}
    return {str(k): v for k, v in models.items() if isinstance(v, dict)}


def load_config(folder: Path, what: str) -> dict:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:  # ValueError: not JSON, or not UTF-8
        raise UseError(f"{what}: {folder / 'config.json'} unreadable ({e})") from None
    from nlpzoo.families import FAMILIES

    if not isinstance(config, dict):
        raise UseError(f"{what}: {folder / 'config.json'} is not a run's config (a JSON object)")
    if config.get("family") not in FAMILIES:
        raise UseError(f"{what}: unknown family '{config.get('family')}' in {folder}/config.json")
    return config


def resolve(args: argparse.Namespace) -> TrainedRun:
    """The run `--run` or `--mlflow-run` names, trained (clear errors otherwise)."""
    root = args.root
    if args.mlflow_run is not None:  # "" too (an unset shell variable): refused by name
        from nlpzoo.tracking import fetch_run_dir

        folder = fetch_run_dir(args.mlflow_run)
        config = load_config(folder, f"MLflow run {args.mlflow_run}")
        return TrainedRun(str(config.get("run", args.mlflow_run)), folder, config, root, True)
    name = args.run
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise UseError(f"--run takes a run's name (models/RUN/), not a path: got {name!r}")
    models = _models(root)
    trained_runs = getattr(args, "models", None) or Layout(root).models_dir
    folder = trained_runs / name
    trained = (folder / "config.json").is_file()
    if name not in models and not trained:
        from nlpzoo.config import closest

        known = sorted(models) or sorted(
            p.name for p in trained_runs.glob("*") if (p / "config.json").is_file()
        )
        hint = closest(name, known)
        raise UseError(
            f"unknown run '{name}'"
            + (f"; did you mean '{hint}'?" if hint else "")
            + (f" (runs: {', '.join(known)})" if known else f" (no {root / 'params.yaml'})")
        )
    if not trained or not any((folder / f).is_file() for f in ("model.pt", "model.npz")):
        if getattr(args, "models", None) is not None:  # a folder of the user's: say which
            raise UseError(f"no trained run '{name}' in {trained_runs} (no model in {folder})")
        if models.get(name, {}).get("enabled", True) is False:
            raise UseError(
                f"run '{name}' is not trained yet, and disabled in params.yaml (`enabled: "
                f"false`): enable it, then `python -m nlpzoo pipeline && dvc repro train-{name}`"
            )
        raise UseError(f"run '{name}' is not trained yet: run `dvc repro train-{name}`")
    what = f"run '{name}' (`dvc repro train-{name}` remakes it)"
    return TrainedRun(name, folder, load_config(folder, what), root)


def _runs_for(t: TrainedRun, wanted: Any) -> str:
    """The project's runs whose family passes `wanted`, for an error message."""
    from nlpzoo.families import FAMILIES

    names = [
        n for n, e in _models(t.root).items() if e.get("family") in FAMILIES and wanted(e["family"])
    ]
    return ", ".join(names) if names else "none in params.yaml"


def need_lm(t: TrainedRun, command: str) -> None:
    family = t.family
    if family.task == "lm":
        return
    from nlpzoo.families import FAMILIES

    what = task_info(family.task).noun
    extra = f"; translate with `python -m nlpzoo translate --run {t.name}`"
    raise UseError(
        f"run '{t.name}' is a {what} run (family {family.name}); `{command}` takes a "
        f"language-model run: {_runs_for(t, lambda f: FAMILIES[f].task == 'lm')}"
        + (extra if family.task == "mt" else "")
    )


def _has_vectors(family: Any) -> bool:
    return family.task == "vectors" or family.vectors


def need_vectors(t: TrainedRun, command: str) -> None:
    if _has_vectors(t.family):
        return
    from nlpzoo.families import FAMILIES

    what = task_info(t.family.task).noun
    raise UseError(
        f"run '{t.name}' ({what} run, family {t.family.name}) has no word vectors; `{command}` "
        f"takes a run with vectors: {_runs_for(t, lambda f: _has_vectors(FAMILIES[f]))}"
    )


def need_mt(t: TrainedRun, command: str) -> None:
    if t.family.task == "mt":
        return
    from nlpzoo.families import FAMILIES

    what = task_info(t.family.task).noun
    raise UseError(
        f"run '{t.name}' is a {what} run (family {t.family.name}); `{command}` takes a "
        f"translation run: {_runs_for(t, lambda f: FAMILIES[f].task == 'mt')}"
    )


def load_vocab(t: TrainedRun) -> Any:
    """The run's vocabulary: in its folder (a run fetched from MLflow), else its data folder;
    it must have the size the run was trained with."""
    from nlpzoo.data.vocab import Vocab

    places = [t.folder / "vocab.txt"]
    if t.config.get("data"):
        places.append(Layout(t.root).data(str(t.config["data"])) / "vocab.txt")
    path = next((p for p in places if p.is_file()), None)
    if path is None:
        raise UseError(
            f"run '{t.name}': its vocabulary is not found ({' or '.join(map(str, places))}); "
            f"run `dvc repro train-{t.name}`"
        )
    data = path.read_bytes()
    decode(data, f"run '{t.name}': {path}")  # a clear error for another tool's
    check_vocabulary(t, path, data)
    vocab = Vocab.load(path)
    trained_on = t.config.get("vocab_size")
    if trained_on is not None and not isinstance(trained_on, int):
        raise UseError(
            f"run '{t.name}': {t.folder / 'config.json'} has vocab_size {trained_on!r}, not a "
            f"number of words; {_remake(t)}"
        )
    if trained_on is not None and len(vocab) != trained_on:
        raise UseError(
            f"run '{t.name}': {path} has {len(vocab):,} words but the run was trained on "
            f"{trained_on:,}: the data changed since; run `dvc repro train-{t.name}`"
        )
    return vocab


# config.json's key for the SHA-256 of each vocabulary file, written at training time
# (`nlpzoo.lifecycle.VOCABULARY_HASHES`)
VOCABULARY_HASHES = {"vocab.txt": "vocab_sha256", "spm.model": "spm_sha256"}


def check_vocabulary(t: TrainedRun, path: Path, data: bytes) -> None:
    """Refuse a vocabulary file (`vocab.txt`, `spm.model`) other than the one run `t` was
    trained on: the same size is no proof, a vocabulary rebuilt from another corpus maps the
    ids to other words. A run trained before config.json recorded the hash is not checked."""
    import hashlib

    key = VOCABULARY_HASHES[path.name]
    recorded = t.config.get(key)
    if recorded is None or hashlib.sha256(data).hexdigest() == recorded:
        return
    if t.mlflow:
        fix = (
            f"its files in MLflow are not those it was trained with; run `dvc repro train-{t.name}`"
        )
    else:
        fix = f"the vocabulary was rebuilt since; run `dvc repro train-{t.name}`"
    raise UseError(
        f"run '{t.name}': {path} is not the vocabulary it was trained on ({key} in "
        f"{t.folder / 'config.json'} differs): {fix}"
    )


def _first_line(e: BaseException) -> str:
    """An exception as `Type: its first line`, for a one-line error."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else 'no detail'}"


def _remake(t: TrainedRun) -> str:
    """How to get a run's files anew."""
    if t.mlflow:
        return f"delete {t.folder} (the local copy of the MLflow run's files) and try again"
    return f"run `dvc repro train-{t.name}`"


def load_model(t: TrainedRun) -> Any:
    """The run's model; a clear error when its file cannot be read or does not fit the code
    (damaged, cut short, or written by another version: retraining remakes it)."""
    import pickle
    import zipfile

    from nlpzoo.tasks import load_model as load

    try:
        model = load(t.folder)
    except NlpzooError:
        raise
    except OSError as e:
        if e.errno is not None and e.filename:  # permissions, a folder: not the file's content
            raise UseError(f"run '{t.name}': cannot read {e.filename}: {e.strerror}") from e
        raise UseError(
            f"run '{t.name}': its model in {t.folder} cannot be loaded ({_first_line(e)}): the "
            f"file is damaged, cut short or written by other code; {_remake(t)}"
        ) from e
    except (EOFError, RuntimeError, ValueError, KeyError, TypeError, pickle.PickleError,
            zipfile.BadZipFile) as e:  # fmt: skip
        why = _first_line(e)
        if "Weights only load failed" in why:  # torch's advice to unpickle it is not for us
            why = "not a checkpoint of this project: torch's safe loader refuses it"
        raise UseError(
            f"run '{t.name}': its model in {t.folder} cannot be loaded ({why}): the "
            f"file is damaged, cut short or written by other code; {_remake(t)}"
        ) from e
    import torch

    if isinstance(model, torch.nn.Module):
        _check_finite(t, "weights", all(bool(p.isfinite().all()) for p in model.parameters()))
    return model


def _check_finite(t: TrainedRun, what: str, finite: bool) -> None:
    """A run whose numbers are NaN or infinite answers nothing meaningful: one clear error."""
    if not finite:
        raise UseError(
            f"run '{t.name}': its {what} hold NaN or infinite values (training diverged, or the "
            f"files were changed); {_remake(t)}"
        )


def load_codec(t: TrainedRun) -> Any:
    """A translation run's SentencePiece model (models/RUN/spm.model)."""
    from nlpzoo.data.mt import Codec

    path = t.folder / "spm.model"
    if not path.is_file():
        raise UseError(f"run '{t.name}': {path} is missing; {_remake(t)}")
    check_vocabulary(t, path, path.read_bytes())
    try:
        return Codec(path)
    except NlpzooError as e:  # a SentencePiece model of another vocabulary
        raise UseError(f"run '{t.name}': {e}; {_remake(t)}") from e
    except (OSError, RuntimeError, ValueError, IndexError) as e:  # SentencePiece's errors
        raise UseError(
            f"run '{t.name}': {path} cannot be loaded ({_first_line(e)}); {_remake(t)}"
        ) from e


def load_vectors(t: TrainedRun) -> tuple[list[str], Any]:
    """(words, (V, d) vectors): models/RUN/vectors.txt, or the model's own embeddings (a run
    fetched from MLflow holds no vectors.txt)."""
    import numpy as np

    from nlpzoo.evaluation.vectors import read_word2vec_text

    path = t.folder / "vectors.txt"
    if path.is_file():
        decode(path.read_bytes(), f"run '{t.name}': {path}")
        words, vectors = read_word2vec_text(path)
        _check_finite(t, "vectors", bool(np.isfinite(vectors).all()))
        return words, vectors
    from nlpzoo.tasks.words import as_array

    vocab = load_vocab(t)
    return vocab.words, as_array(load_model(t).embeddings())


def lookup(t: TrainedRun, words: list[str], word: str) -> str:
    """`word` as the run's vocabulary spells it (lowercased if the vocabulary is); a clear error
    if it is not there."""
    from nlpzoo.data.vocab import SPECIALS
    from nlpzoo.generation import lowercases

    w = word.lower() if lowercases(words) else word
    if w in SPECIALS:
        raise UseError(f"'{word}' is a special token, not a word")
    if w not in set(words):
        import difflib

        shown = word if len(word) <= 60 else f"{word[:57]}..."  # a line of a request, maybe long
        close = difflib.get_close_matches(w, words, n=3, cutoff=0.75) if len(w) <= 60 else []
        hint = f"; close: {', '.join(close)}" if close else ""
        size = sum(v not in SPECIALS for v in words)
        raise UseError(
            f"word '{shown}' is not in the vocabulary of run '{t.name}' ({size:,} words){hint}"
        )
    return w
