"""The table of language-model input kinds (nlpzoo.lm_inputs): every LM family has a row, every
routine a row names exists, the stages that use it list its code in dvc.yaml, and the config
fields a row reads are fields of the families of its kind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from nlpzoo import lm_inputs, pipeline
from nlpzoo.errors import DataError
from nlpzoo.families import FAMILIES
from nlpzoo.lm_inputs import LM_INPUTS, lm_input

ROOT = Path(__file__).resolve().parents[2]
LM_FAMILIES = [name for name in FAMILIES if FAMILIES[name].task == "lm"]
EXPECTED = {"ngram": "counts", "nnlm": "window", "rnn_lm": "stateful", "transformer_lm": "stream"}


def _refs(row) -> list[str]:
    return [r for r in (row.loaders, row.log_probs_of, row.decoder_of) if r is not None]


def test_each_lm_family_has_the_row_of_its_input():
    assert sorted(LM_FAMILIES) == sorted(EXPECTED)
    for name, kind in EXPECTED.items():
        assert lm_input(FAMILIES[name]).kind == kind


def test_other_families_have_no_row():
    for name in ("word2vec", "glove", "transformer"):
        with pytest.raises(DataError, match="not a language model"):
            lm_input(FAMILIES[name])


@pytest.mark.parametrize("kind", sorted(LM_INPUTS))
def test_every_routine_a_row_names_exists(kind):
    for ref in _refs(LM_INPUTS[kind]):
        assert callable(lm_inputs._resolve(ref)), ref


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_config_fields_a_row_reads_are_the_familys(name):
    row = lm_input(FAMILIES[name])
    fields = {f.name for f in dataclasses.fields(FAMILIES[name].config)}
    assert row.context in fields
    assert row.rows is None or row.rows in fields
    context, rows = row.context_of(FAMILIES[name].config())
    assert context >= 1 and rows >= 1


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("stage", ["train", "evaluate"])
def test_an_lm_stage_lists_the_code_of_its_rows_routines(name, stage):
    """The rows name their routines as strings: the stage must import their modules itself."""
    deps = set(pipeline.run_code(ROOT, stage, name))
    assert "src/nlpzoo/lm_inputs.py" in deps
    for ref in _refs(lm_input(FAMILIES[name])):
        module = ref.partition(":")[0]
        assert f"src/{module.replace('.', '/')}.py" in deps, ref
