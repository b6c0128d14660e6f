"""Every translation run of params.yaml trains, is scored and translates through the lifecycle,
at tiny sizes on 50 sentence pairs (the smoke test of each MT family)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from nlpzoo import lifecycle
from nlpzoo.data.mt import Codec, load_split
from nlpzoo.families import FAMILIES
from nlpzoo.tasks import load_model
from nlpzoo.tasks.mt import translate
from toy import make_mt_project, tiny_params

ROOT = Path(__file__).resolve().parents[2]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
MT_RUNS = [r for r, e in PARAMS["models"].items() if FAMILIES[e["family"]].task == "mt"]


def test_params_have_the_four_translation_families():
    families = {PARAMS["models"][r]["family"] for r in MT_RUNS}
    assert families == {"seq2seq", "attention", "transformer", "decoder_mt"}
    # the families whose evaluation writes the report's attention heatmaps
    assert {f for f in families if FAMILIES[f].attention_maps} == {"attention", "transformer"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_mt_project(tmp_path_factory.mktemp("mtproj"))


pytestmark = pytest.mark.usefixtures("project_tracking")  # tests/tasks/conftest.py


@pytest.mark.parametrize("run", MT_RUNS)
def test_every_mt_run_trains_scores_and_translates(project, run):
    params = tiny_params(run)
    stats = lifecycle.train(params, run, project)
    assert stats["epochs"] == 4 and stats["params"] > 0 and stats["train_tokens_per_s"] > 0
    data = project / "data" / "vocab" / "mt"
    train = load_split(data, "train", Codec(data / "spm.model"))
    # every target piece and its </s>, in each of the 4 epochs
    assert stats["train_target_tokens"] == 4 * sum(len(t) + 1 for t in train.tgt)
    assert stats["train_pairs"] == 50 and stats["cost_per_token"] > 0
    with open(project / "plots" / f"{run}.csv") as f:
        curve = list(csv.DictReader(f))
    losses = [float(row["train_loss"]) for row in curve]
    assert len(losses) == 4 and all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses  # learning, not just finite

    metrics = lifecycle.evaluate(params, run, project)
    for key in (
        "bleu",
        "bleu_beam",
        "bleu_tok_lc",
        "bleu_tok_lc_beam",
        "chrf",
        "chrf_beam",
        "valid_bleu_beam",
        "test_ppl",
        "valid_ppl",
        "decode_sents_per_s_beam",
    ):
        assert np.isfinite(metrics[key]), key
    # the valid split is decoded by beam search only
    assert not {"valid_bleu", "valid_bleu_tok_lc", "valid_chrf"} & set(metrics)
    assert metrics["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert 1.0 < metrics["test_ppl"] < 40  # well below uniform over the 40 pieces
    saved = json.loads((project / "metrics" / f"{run}.json").read_text())
    assert saved["bleu_beam"] == metrics["bleu_beam"]
    eval_dir = project / "eval" / run
    hyps = (eval_dir / "hypotheses.txt").read_text().splitlines()
    assert len(hyps) == 8
    samples = json.loads((eval_dir / "samples.json").read_text())
    assert {"source", "reference", "greedy", "beam"} <= set(samples[0])
    family = FAMILIES[PARAMS["models"][run]["family"]]
    assert (eval_dir / "attention.json").is_file() == family.attention_maps
    if family.attention_maps:
        maps = json.loads((eval_dir / "attention.json").read_text())
        w = np.asarray(maps[0]["weights"])
        assert w.shape == (len(maps[0]["target_tokens"]), len(maps[0]["source_tokens"]))
        np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-3)
    folder = project / "models" / run
    model, codec = load_model(folder), Codec(folder / "spm.model")
    out = translate(model, codec, ["der hund katze haus"], beam_size=2)
    assert len(out) == 1 and isinstance(out[0], str)


def test_translate_command(project, tmp_path, capsys):
    from nlpzoo.__main__ import main

    run = MT_RUNS[0]
    if not (project / "models" / run / "model.pt").is_file():
        lifecycle.train(tiny_params(run), run, project)
    lines = tmp_path / "in.txt"
    lines.write_text("der hund katze haus\nder baum rot haus\n")
    assert main(["translate", "--run", run, "--models", str(project / "models"), str(lines)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert (
        main(["translate", "--run", "missing", "--models", str(project / "models"), str(lines)])
        == 1
    )


def _translate(project: Path, *args: str) -> tuple[int, str, str]:
    """`python -m nlpzoo translate ARGS --models PROJECT/models`: (status, stdout, stderr)."""
    import contextlib
    import io

    from nlpzoo.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["translate", *args, "--models", str(project / "models")])
        except SystemExit as e:  # argparse refuses the arguments
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_translate_refuses_bad_input_with_one_line(project, tmp_path):
    run = "transformer"  # a positions table: sequences have a longest length
    if not (project / "models" / run / "model.pt").is_file():
        lifecycle.train(tiny_params(run), run, project)
    good = tmp_path / "good.txt"
    good.write_text("der hund katze haus\n")
    long = tmp_path / "long.txt"
    long.write_text("der hund\n" + " ".join(["der hund katze haus"] * 100) + "\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("der hund läuft\n".encode("latin-1"))
    (project / "models" / "an_lm").mkdir(exist_ok=True)
    (project / "models" / "an_lm" / "config.json").write_text('{"family": "ngram"}')
    (project / "models" / "an_lm" / "model.npz").write_bytes(b"")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert _translate(project, "--run", run, str(empty)) == (0, "", "")  # nothing in, nothing out
    cases = [
        ((run, str(long)), "split long lines"),
        ((run, str(latin1)), "is not UTF-8 text"),
        ((run, str(tmp_path / "absent.txt")), "cannot read"),
        ((run, str(tmp_path)), "cannot read"),
        (("an_lm", str(good)), "run 'an_lm' is a language-model run (family ngram)"),
    ]
    for (name, path), message in cases:
        code, out, err = _translate(project, "--run", name, path)
        assert code == 1 and out == "", (name, path, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert "line 2 (400 words)" in _translate(project, "--run", run, str(long))[2]
    damaged = project / "models" / "damaged"  # the run with its SentencePiece model cut short
    shutil.copytree(project / "models" / run, damaged, dirs_exist_ok=True)
    (damaged / "spm.model").write_bytes((damaged / "spm.model").read_bytes()[:100])
    code, out, err = _translate(project, "--run", "damaged", str(good))
    assert code == 1 and out == "" and err.count("\n") == 1, err
    # not the file it was trained on (config.json holds its SHA-256)
    assert "run 'damaged': " in err and "is not the vocabulary it was trained on" in err, err
    config = json.loads((damaged / "config.json").read_text())
    del config["spm_sha256"]  # a run trained before the hash was recorded: checked on loading
    (damaged / "config.json").write_text(json.dumps(config))
    code, out, err = _translate(project, "--run", "damaged", str(good))
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "run 'damaged': " in err and "spm.model cannot be loaded" in err, err
    (damaged / "spm.model").unlink()
    assert "spm.model is missing" in _translate(project, "--run", "damaged", str(good))[2]
    shutil.rmtree(damaged)
    for beam, message in (("0", "must be >= 1"), ("-1", "must be >= 1"), ("101", "<= 100")):
        code, _, err = _translate(project, "--run", run, "--beam", beam, str(good))  # no load
        assert code == 2 and message in err, err
    code, out, _ = _translate(project, "--run", run, "--beam", "1", "--json", str(good))
    assert code == 0 and len(json.loads(out)["translations"]) == 1
