"""`python -m nlpzoo tour` (`make tour`): every enabled run at a small size, through the project's
own stages and code, in about five minutes on two cores.

The tour is a second project in the git-ignored folder `tour/`: the pipeline's files (params.yaml,
stages/, src/nlpzoo/ as the stages' dependencies, benchmarks/results/roofline.json) copied there,
params.yaml overridden by `PROFILE` (one epoch over a few batches, small dimensions, greedy
decoding, a small translation vocabulary), dvc.yaml written from them by `nlpzoo.pipeline`, its
own DVC repository (`dvc init --no-scm`, its own cache), its own MLflow store `tour/mlflow.db`
(experiment `nlpzoo-tour`) and a note, `tour/TOUR_NOTE`, that makes the report say it is the tour.
Then `python -m nlpzoo repro` runs there: corpus, prepare, vocab, cooccur, every run's train,
evaluate and register stages, the mixture and the report, `tour/reports/index.html`. Nothing of
the project itself is written: not dvc.lock, metrics/, plots/, reports/, timings/, registry/, its
DVC cache nor its mlflow.db.

The data are the project's (Brown, Multi30k, the evaluation sets, downloaded or copied from
`NLPZOO_DATA_MIRROR`), the splits the same; the runs see only `TRAIN_BATCHES` training batches of
one epoch, so the tour's numbers say that every stage works, not what a model reaches: they are
not comparable with the full pipeline's or the papers'.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from nlpzoo.errors import PROJECT_ERRORS, NlpzooError, error_line
from nlpzoo.layout import Layout

FOLDER = "tour"  # the tour's project, under the project's root (git-ignored)
EXPERIMENT = "nlpzoo-tour"  # its MLflow experiment
TRAIN_BATCHES = 40  # training batches of each neural run's one epoch
VAL_BATCHES = 10  # validation batches at the end of it

# Deep-merged onto params.yaml. Sections of runs go by family (`SIZES`), so every run of a family
# (both runs of rnn_lm, a run a user added) is small too.
PROFILE: dict[str, Any] = {
    "vocab": {"mt": {"vocab_size": 1000}},
    "trainer": {
        "max_epochs": 1,
        "limit_train_batches": TRAIN_BATCHES,
        "limit_val_batches": VAL_BATCHES,
        "log_every_n_steps": 10,
    },
    "mlflow": {"experiment": EXPERIMENT},
    "evaluation": {"sample_tokens": 12, "sample_count": 1},
    "report": {"samples": 2, "attention_sentences": 1},
}
_MT = {"beam_size": 1, "batch_size": 32}  # greedy decoding: the evaluation's cheapest
_SMALL_TRANSFORMER = {"d_model": 32, "heads": 2, "d_ff": 64, "warmup_steps": TRAIN_BATCHES // 2}
SIZES: dict[str, dict[str, Any]] = {
    "nnlm": {"emb_dim": 16, "hidden_dim": 32},
    "rnn_lm": {"emb_dim": 32, "hidden_dim": 32, "bptt": 20},
    "transformer_lm": {
        **_SMALL_TRANSFORMER,
        "num_layers": 1,
        "block_size": 64,
    },
    "word2vec": {"dim": 20},
    "glove": {"dim": 20},
    "svd": {"dim": 20},
    "seq2seq": {"emb_dim": 32, "hidden_dim": 32, **_MT},
    "attention": {"emb_dim": 32, "hidden_dim": 32, "attn_dim": 16, **_MT},
    "transformer": {**_SMALL_TRANSFORMER, "num_layers": 1, **_MT},
    "decoder_mt": {**_SMALL_TRANSFORMER, "num_layers": 2, **_MT},
}

NOTE = (
    "This is the tour (`make tour`): every enabled run at a small size, one epoch of "
    f"{TRAIN_BATCHES} training batches, greedy decoding, on the project's data and through its "
    "stages. Its numbers show that each stage works; they are not comparable with the full "
    "pipeline's (`make repro`, reports/ at the project's root) nor with the papers'."
)

# what the tour's project is made of: copied from the project (folders whole)
COPIED = ("params.yaml", "stages", "src/nlpzoo", "benchmarks/results/roofline.json")


def merge(base: dict, over: dict) -> dict:
    """`base` with `over` merged in, mappings key by key (neither is changed)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def tour_params(params: dict) -> dict:
    """The project's params with the tour's profile: `PROFILE`, each run's section merged with
    its family's `SIZES`, and every run's own trainer held to the tour's epoch."""
    from nlpzoo.params import parse_models

    out = merge(params, PROFILE)
    for name, spec in parse_models(out, include_disabled=True).items():
        section = out.get(name) if isinstance(out.get(name), dict) else {}
        section = merge(section, SIZES.get(spec.family, {}))
        if isinstance(section.get("trainer"), dict):
            section["trainer"] = merge(section["trainer"], PROFILE["trainer"])
        out[name] = section
    return out


def _copy(src: Path, dest: Path) -> None:
    """`src` (a file or a folder) as `dest`, replacing what was there; no caches."""
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    elif dest.exists() or dest.is_symlink():
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        shutil.copy2(src, dest)


def environment(dest: Path) -> dict[str, str]:
    """The stages' environment in the tour: its own MLflow store, whatever MLFLOW_TRACKING_URI
    says, outside any DVC experiment of the project, the Python running this first on PATH."""
    env = dict(os.environ)
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{dest / 'mlflow.db'}"
    for name in ("DVC_ROOT", "DVC_EXP_NAME", "DVC_EXP_BASELINE_REV"):
        env.pop(name, None)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env


def prepare(root: Path, say=print) -> Path:
    """Write the tour's project `root/tour/` (no training): the copied files, the tour's
    params.yaml (validated), dvc.yaml, the report's note and a DVC repository of its own."""
    from nlpzoo import pipeline
    from nlpzoo.params_file import load_params, validate_params
    from nlpzoo.report.build import TOUR_NOTE

    root = root.resolve()
    dest = root / FOLDER
    params = load_params(root / "params.yaml", pipeline=False)
    ours = tour_params(params)
    validate_params(ours)
    dest.mkdir(exist_ok=True)
    for name in COPIED:
        if (root / name).exists():
            _copy(root / name, dest / name)
    text = "# The tour's params (python -m nlpzoo tour): params.yaml with nlpzoo.tour.PROFILE\n"
    (dest / "params.yaml").write_text(text + yaml.safe_dump(ours, sort_keys=False), "utf-8")
    (dest / TOUR_NOTE).write_text(NOTE + "\n", encoding="utf-8")
    pipeline.write(ours, dest)
    if not (dest / ".dvc").is_dir():
        subprocess.run(
            ["dvc", "init", "--no-scm", "--quiet"], cwd=dest, env=environment(dest), check=True
        )
    say(f"tour: project written at {dest} ({len(pipeline.parse_models(ours))} runs)")
    return dest


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="nlpzoo tour",
        description=__doc__.split("\n\n")[0],
        epilog="Any other option goes to `python -m nlpzoo repro` in tour/ (e.g. --jobs 1).",
    )
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="write the tour's project tour/ and stop (no data, no training)",
    )
    args, extra = parser.parse_known_args(argv)
    root = (root or Path.cwd()).resolve()
    try:
        if not (root / "params.yaml").is_file() or not (root / "stages").is_dir():
            raise NlpzooError(f"{root} is not an nlpzoo project: run the tour in its folder")
        dest = prepare(root)
    except (*PROJECT_ERRORS, subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"error: {error_line(e, root)}", file=sys.stderr)
        return 1
    if args.prepare_only:
        return 0
    code = subprocess.call(
        [sys.executable, "-m", "nlpzoo", "repro", *extra], cwd=dest, env=environment(dest)
    )
    report = Layout(dest).reports / "index.html"
    if code == 0 and report.is_file():
        print(f"tour: the report is {report} (and {report.with_name('report.md')}),")
        print("      marked as the tour: small sizes, not comparable with the full pipeline's")
        print(f"tour: its runs are MLflow experiment {EXPERIMENT} in {dest / 'mlflow.db'}:")
        print(f"      make dashboard EXPERIMENT={EXPERIMENT} STORE={dest / 'mlflow.db'}")
    else:
        print(f"tour: failed (exit {code}); the stages' lines above say why", file=sys.stderr)
    return code
