"""Each task's facts have one home (`nlpzoo.taskinfo`), and every reader agrees with it: the
served model's defaults are the commands', dvc.yaml's plots and the report draw its curve."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from nlpzoo.curves import CURVE_FIELDS
from nlpzoo.families import FAMILIES, TASKS
from nlpzoo.pipeline import plots
from nlpzoo.serving import default_params
from nlpzoo.taskinfo import TASK_INFO, task_info
from nlpzoo.use.answers import PARAMS
from nlpzoo.use.arguments import add_commands


def test_every_task_has_one_record_and_its_curves_are_curve_columns():
    assert set(TASK_INFO) == set(TASKS)
    for task, info in TASK_INFO.items():
        assert info.name == task
        assert info.curves and all(c.column in CURVE_FIELDS for c in info.curves)
        assert set(info.defaults) <= set(info.params)
        assert all(isinstance(info.defaults[k], info.params[k]) for k in info.defaults)
        assert not info.modes or info.defaults["mode"] == info.modes[0]
    with pytest.raises(Exception, match="unknown task 'speech'"):
        task_info("speech")


def test_the_served_models_params_are_the_records():
    assert {t: dict(p) for t, p in PARAMS.items()} == {
        t: dict(i.params) for t, i in TASK_INFO.items()
    }


def _parsed(*argv: str):
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    return parser.parse_args(list(argv))


def test_served_defaults_are_the_commands_defaults():
    served = default_params({}, FAMILIES["nnlm"])
    args = _parsed("generate", "--run", "nnlm")
    assert served["tokens"] == args.tokens == TASK_INFO["lm"].defaults["tokens"]
    assert served["temperature"] == args.temperature
    assert served["top_k"] == args.top_k
    assert served["seed"] == args.seed
    assert default_params({}, FAMILIES["svd"])["k"] == _parsed("neighbours", "--run", "svd", "w").k


def test_a_translations_served_defaults_are_the_runs_own_settings():
    fam = FAMILIES["transformer"]
    assert default_params({"config": {"beam_size": 3, "length_penalty": 0.2}}, fam) == {
        "beam_size": 3,
        "length_penalty": 0.2,
    }
    # a config.json without them: the family's defaults, as the `translate` command decodes
    assert default_params({}, fam) == {
        "beam_size": fam.config.beam_size,
        "length_penalty": fam.config.length_penalty,
    }


def test_dvc_plots_draw_each_tasks_first_curve_with_its_title():
    params = {
        "models": {
            "a": {"family": "nnlm", "data": "vocab/lm"},
            "b": {"family": "transformer", "data": "vocab/mt"},
            "c": {"family": "word2vec", "data": "vocab/lm"},
        }
    }
    got = {k: v for d in plots(params) for k, v in d.items()}
    for task, run in (("lm", "a"), ("mt", "b"), ("vectors", "c")):
        info = TASK_INFO[task]
        assert got[f"learning_curves_{task}"]["title"] == info.plot_title()
        assert got[f"learning_curves_{task}"]["y"] == {f"plots/{run}.csv": info.curve.column}


def test_the_record_is_torch_free():
    code = "import sys, nlpzoo.taskinfo; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
