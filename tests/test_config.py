"""Tests for nlpzoo.config.build and params validation of nlpzoo.params (docs/design.md §1, §7)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import pytest

from nlpzoo.config import build, closest, require
from nlpzoo.errors import ConfigError
from nlpzoo.models import ngram, nnlm
from nlpzoo.params import TrainerConfig, run_configs
from nlpzoo.params_data import CooccurConfig
from nlpzoo.params_file import validate_params

# --------------------------------------------------------------------------- small dataclasses


@dataclass
class Small:
    hidden_dim: int = 8
    rate: float = 0.5
    name: str = "small"
    limit: int | None = None
    clip: float | None = None
    mode: Literal["fast", "slow"] = "fast"
    sizes: list[int] = field(default_factory=lambda: [1, 2])
    flag: bool = False
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.hidden_dim >= 1, "hidden_dim", f"must be >= 1, got {self.hidden_dim}")
        if self.rate > 1:
            raise ValueError(f"key 'rate' must be <= 1, got {self.rate}")


@dataclass
class Required:
    size: int

    def __post_init__(self) -> None:
        require(self.size > 0, "size", "must be positive")


def test_build_defaults_and_none_section():
    assert build(Small, None, "s") == Small()
    assert build(Small, {}, "s") == Small()


def test_build_sets_values():
    cfg = build(
        Small,
        {
            "hidden_dim": 3,
            "rate": 0.25,
            "name": "n",
            "limit": 7,
            "mode": "slow",
            "sizes": [4, 5, 6],
            "flag": True,
            "extra": {"a": 1},
        },
        "s",
    )
    assert cfg == Small(3, 0.25, "n", 7, None, "slow", [4, 5, 6], True, {"a": 1})


def test_build_rejects_non_mapping_section():
    with pytest.raises(ConfigError, match="run 'x': expected a mapping of settings, got list"):
        build(Small, [1, 2], "run 'x'")


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("hiden_dim", "hidden_dim"), ("rates", "rate"), ("mdoe", "mode"), ("size", "sizes")],
)
def test_unknown_key_names_key_section_and_closest(key, suggestion):
    with pytest.raises(ConfigError) as err:
        build(Small, {key: 1}, "run 'mine'")
    msg = str(err.value)
    assert msg.startswith("run 'mine': ")
    assert f"unknown key '{key}'" in msg
    assert f"did you mean '{suggestion}'?" in msg
    assert "valid keys: clip, extra, flag, hidden_dim, limit, mode, name, rate, sizes" in msg


def test_unknown_key_without_close_match_has_no_suggestion():
    with pytest.raises(ConfigError, match="unknown key 'qqqqqqqq'") as err:
        build(Small, {"qqqqqqqq": 1}, "s")
    assert "did you mean" not in str(err.value)


def test_ignored_keys_are_skipped_and_suggested():
    assert build(Small, {"family": "x", "hidden_dim": 2}, "s", ignore=("family",)).hidden_dim == 2
    with pytest.raises(ConfigError, match="did you mean 'trainer'"):
        build(Small, {"trainr": {}}, "s", ignore=("family", "trainer"))


def test_closest():
    assert closest("hiden_dim", ["emb_dim", "hidden_dim", "lr"]) == "hidden_dim"
    assert closest("zzz", ["emb_dim", "hidden_dim"]) is None


@pytest.mark.parametrize(
    ("key", "value", "expected_type"),
    [
        ("hidden_dim", "8", "int"),  # string for int
        ("hidden_dim", True, "int"),  # bool is not an int
        ("hidden_dim", 8.0, "int"),  # float for int
        ("hidden_dim", None, "int"),  # null only where allowed
        ("rate", "0.5", "float"),
        ("rate", False, "float"),
        ("name", 3, "str"),
        ("limit", 2.5, "int | null"),
        ("limit", "3", "int | null"),
        ("mode", "medium", "'fast' | 'slow'"),
        ("mode", 1, "'fast' | 'slow'"),
        ("sizes", [1, "2"], "list of int"),
        ("sizes", [1, True], "list of int"),
        ("sizes", 3, "list of int"),
        ("flag", 1, "bool"),
        ("flag", "true", "bool"),
        ("extra", [], "dict"),
    ],
)
def test_wrong_type_names_key_and_expected_type(key, value, expected_type):
    with pytest.raises(ConfigError) as err:
        build(Small, {key: value}, "run 'mine'")
    msg = str(err.value)
    assert msg.startswith(f"run 'mine': key '{key}' must be {expected_type}, got {value!r}")


def test_int_for_float_is_accepted_and_converted():
    cfg = build(Small, {"rate": 1}, "s")
    assert cfg.rate == 1.0
    assert type(cfg.rate) is float


@pytest.mark.parametrize(
    ("key", "value"), [("limit", None), ("limit", 5), ("clip", None), ("clip", 0.5)]
)
def test_optional_accepts_null_and_value(key, value):
    assert getattr(build(Small, {key: value}, "s"), key) == value


def test_post_init_errors_become_config_errors_naming_section_and_key():
    with pytest.raises(ConfigError, match=r"^run 'mine': key 'hidden_dim' must be >= 1, got -3"):
        build(Small, {"hidden_dim": -3}, "run 'mine'")
    # a ValueError from __post_init__ is reported the same way
    with pytest.raises(ConfigError, match=r"^run 'mine': key 'rate' must be <= 1"):
        build(Small, {"rate": 2}, "run 'mine'")


def test_missing_required_field_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^req: .*size"):
        build(Required, {}, "req")
    assert build(Required, {"size": 3}, "req").size == 3


# --------------------------------------------------------------------------- real dataclasses


def test_nnlm_config_built_from_section():
    cfg = build(nnlm.Config, {"hidden_dim": 50, "lr": 1, "direct": True}, "run 'nnlm'")
    assert (cfg.hidden_dim, cfg.direct) == (50, True)
    assert cfg.lr == 1.0 and type(cfg.lr) is float


def test_nnlm_misspelled_key_suggests_hidden_dim():
    with pytest.raises(ConfigError) as err:
        build(nnlm.Config, {"hiden_dim": 50}, "run 'nnlm'")
    msg = str(err.value)
    assert "run 'nnlm'" in msg
    assert "unknown key 'hiden_dim'" in msg
    assert "did you mean 'hidden_dim'?" in msg


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"hidden_dim": -1}, "hidden_dim"),
        ({"emb_dim": 0}, "emb_dim"),
        ({"context_size": 0}, "context_size"),
        ({"batch_size": -256}, "batch_size"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"lr": 0}, "lr"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"weight_decay": -1e-5}, "weight_decay"),
        ({"hidden_dim": "100"}, "hidden_dim"),
        ({"direct": "no"}, "direct"),
    ],
)
def test_nnlm_impossible_values_name_run_and_key(section, key):
    with pytest.raises(ConfigError) as err:
        build(nnlm.Config, section, "run 'nnlm'")
    msg = str(err.value)
    assert msg.startswith("run 'nnlm': ")
    assert f"'{key}'" in msg


@pytest.mark.parametrize(
    ("cls", "section", "key"),
    [
        (CooccurConfig, {"window": 0}, "window"),
        (CooccurConfig, {"window": -2}, "window"),
        (CooccurConfig, {"memory_mb": 0}, "memory_mb"),
        (ngram.Config, {"order": 1}, "order"),
        (ngram.Config, {"order": 6}, "order"),
        (TrainerConfig, {"max_epochs": 0}, "max_epochs"),
        (TrainerConfig, {"num_workers": -1}, "num_workers"),
        (TrainerConfig, {"gradient_clip_val": 0.0}, "gradient_clip_val"),
        (TrainerConfig, {"gradient_clip_algorithm": "l2"}, "gradient_clip_algorithm"),
    ],
)
def test_other_impossible_values_name_key(cls, section, key):
    with pytest.raises(ConfigError) as err:
        build(cls, section, "sec")
    assert str(err.value).startswith("sec: ")
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("section", "attr", "expected"),
    [
        ({"devices": 4}, "devices", 4),
        ({"devices": "auto"}, "devices", "auto"),
        ({"devices": [0, 1]}, "devices", [0, 1]),
        ({"precision": 16}, "precision", 16),
        ({"precision": "bf16-mixed"}, "precision", "bf16-mixed"),
        ({"max_time": None}, "max_time", None),
        ({"max_time": "00:01:00:00"}, "max_time", "00:01:00:00"),
        ({"gradient_clip_val": 0.5}, "gradient_clip_val", 0.5),
        ({"gradient_clip_val": None}, "gradient_clip_val", None),
        ({"limit_train_batches": 10}, "limit_train_batches", 10),  # an int: number of batches
        ({"limit_train_batches": 0.25}, "limit_train_batches", 0.25),
    ],
)
def test_trainer_config_union_types(section, attr, expected):
    value = getattr(build(TrainerConfig, section, "trainer"), attr)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"devices": 1.5}, "devices"),
        ({"devices": [0, "1"]}, "devices"),
        ({"devices": True}, "devices"),
        ({"precision": 16.0}, "precision"),
        ({"max_epochs": 2.0}, "max_epochs"),
        ({"deterministic": "yes"}, "deterministic"),
        ({"limit_train_batches": "all"}, "limit_train_batches"),
    ],
)
def test_trainer_config_wrong_types(section, key):
    with pytest.raises(ConfigError, match=f"^trainer: key '{key}' must be"):
        build(TrainerConfig, section, "trainer")


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"max_steps": 0}, "max_steps"),  # Lightning would train nothing and say so quietly
        ({"max_steps": -2}, "max_steps"),
        ({"limit_train_batches": 0}, "limit_train_batches"),
        ({"limit_train_batches": 0.0}, "limit_train_batches"),
        ({"limit_train_batches": 1.5}, "limit_train_batches"),
        ({"limit_val_batches": -1}, "limit_val_batches"),
        ({"threads": -1}, "threads"),
    ],
)
def test_trainer_config_values_lightning_would_misuse(section, key):
    with pytest.raises(ConfigError, match=f"^trainer: key '{key}' "):
        build(TrainerConfig, section, "trainer")


def test_no_validation_is_fine_without_early_stopping():
    cfg = build(TrainerConfig, {"limit_val_batches": 0, "early_stopping_patience": 0}, "trainer")
    assert cfg.limit_val_batches == 0
    assert (
        build(TrainerConfig, {"max_steps": 1, "limit_train_batches": 1}, "trainer").max_steps == 1
    )


# --------------------------------------------------------------------------- runner params

PARAMS = {
    "seed": 7,
    "models": {
        "ngram": {"family": "ngram", "data": "vocab/lm"},
        "nnlm": {"family": "nnlm", "data": "vocab/lm"},
        "nnlm_big": {"family": "nnlm", "data": "vocab/lm"},
    },
    "trainer": {"accelerator": "cpu", "max_epochs": 5, "log_every_n_steps": 10},
    "mlflow": {"experiment": "tests"},
    "vocab": {"lm": {"min_count": 2}, "mt": {"vocab_size": 100}},
    "ngram": {"order": 4},
    "nnlm": {"family": "nnlm", "hidden_dim": 50, "trainer": {"max_epochs": 2}},
    "nnlm_big": {"hidden_dim": 200, "emb_dim": 100},
}


def params(**changes) -> dict:
    p = copy.deepcopy(PARAMS)
    p.update(changes)
    return p


def test_valid_params_pass():
    validate_params(params())


def test_run_configs_builds_family_config_and_merged_trainer():
    spec, cfg, trainer = run_configs(params(), "nnlm")
    assert (spec.name, spec.family, spec.data) == ("nnlm", "nnlm", "vocab/lm")
    assert isinstance(cfg, nnlm.Config)
    assert cfg.hidden_dim == 50
    assert trainer.max_epochs == 2  # the run's own trainer: wins
    assert trainer.accelerator == "cpu"  # global trainer: kept
    assert trainer.log_every_n_steps == 10


def test_run_without_trainer_override_uses_global_trainer():
    spec, cfg, trainer = run_configs(params(), "nnlm_big")
    assert spec.family == "nnlm"
    assert (cfg.hidden_dim, cfg.emb_dim) == (200, 100)
    assert trainer.max_epochs == 5
    # the override of one run does not leak into the shared params
    assert "max_epochs" in PARAMS["trainer"] and PARAMS["trainer"]["max_epochs"] == 5


def test_run_configs_ngram():
    _, cfg, _ = run_configs(params(), "ngram")
    assert isinstance(cfg, ngram.Config) and cfg.order == 4


def test_unknown_run_suggests_closest():
    with pytest.raises(ConfigError, match="unknown run 'nnml'; did you mean 'nnlm'") as err:
        run_configs(params(), "nnml")
    assert "ngram, nnlm, nnlm_big" in str(err.value)


def test_unknown_family_suggests_closest():
    p = params()
    p["models"]["nnlm_big"]["family"] = "nnlmm"
    with pytest.raises(ConfigError) as err:
        validate_params(p)
    msg = str(err.value)
    assert "run 'nnlm_big'" in msg
    assert "unknown family 'nnlmm'; did you mean 'nnlm'?" in msg


@pytest.mark.parametrize(
    ("section", "hint"), [("trainr", "trainer"), ("mlflw", "mlflow"), ("nnlm_bgi", "nnlm_big")]
)
def test_misspelled_top_level_section(section, hint):
    p = params()
    p[section] = p.pop(hint)
    with pytest.raises(ConfigError) as err:
        validate_params(p)
    msg = str(err.value)
    assert f"unknown section '{section}'" in msg
    assert f"did you mean '{hint}'?" in msg


def test_family_in_run_section_must_match_models():
    p = params()
    p["nnlm"]["family"] = "ngram"
    with pytest.raises(ConfigError) as err:
        run_configs(p, "nnlm")
    msg = str(err.value)
    assert msg.startswith("run 'nnlm': key 'family'")
    assert "'ngram'" in msg and "'nnlm'" in msg


def test_bad_key_in_run_section_names_run_and_key():
    p = params()
    p["nnlm_big"]["hiden_dim"] = p["nnlm_big"].pop("hidden_dim")
    with pytest.raises(ConfigError) as err:
        validate_params(p)
    msg = str(err.value)
    assert "run 'nnlm_big'" in msg
    assert "unknown key 'hiden_dim'; did you mean 'hidden_dim'?" in msg


def test_impossible_value_in_run_section_names_run_and_key():
    p = params()
    p["nnlm"]["dropout"] = 1.0
    with pytest.raises(ConfigError, match=r"^run 'nnlm': key 'dropout' must be in \[0, 1\)"):
        validate_params(p)


@pytest.mark.parametrize(
    ("trainer", "fragment"),
    [
        ({"max_epoch": 3}, "unknown key 'max_epoch'; did you mean 'max_epochs'?"),
        ({"max_epochs": 0}, "key 'max_epochs' must be >= 1"),
        ({"max_epochs": "3"}, "key 'max_epochs' must be int"),
    ],
)
def test_bad_key_in_run_trainer_names_run_and_key(trainer, fragment):
    p = params()
    p["nnlm"]["trainer"] = trainer
    with pytest.raises(ConfigError) as err:
        run_configs(p, "nnlm")
    msg = str(err.value)
    assert msg.startswith("run 'nnlm' (trainer): ")
    assert fragment in msg
    # the same error comes from validating the whole file
    with pytest.raises(ConfigError, match="run 'nnlm' \\(trainer\\)"):
        validate_params(p)


def test_bad_global_trainer_key_is_reported_for_the_run():
    p = params()
    p["trainer"]["acelerator"] = "gpu"
    with pytest.raises(ConfigError, match="unknown key 'acelerator'; did you mean 'accelerator'"):
        validate_params(p)


@pytest.mark.parametrize(
    "models",
    [
        {},
        None,
        {"nnlm": {"family": "nnlm"}},  # no data
        {"nnlm": {"family": "nnlm", "data": "vocab/lm", "extra": 1}},
        {"nnlm": "nnlm"},
    ],
)
def test_models_section_shape(models):
    p = params(models=models)
    with pytest.raises(ConfigError, match="models"):
        validate_params(p)


def test_bad_vocab_section_is_rejected():
    p = params()
    p["vocab"]["lm"] = {"min_count": 0}
    with pytest.raises(ConfigError, match=r"^vocab\.lm: key 'min_count'"):
        validate_params(p)


@pytest.mark.parametrize("seed", ["1234", True, -1, 2**32])
def test_bad_seed_is_rejected(seed):
    """numpy and seed_everything take seeds in [0, 2**32) only."""
    with pytest.raises(ConfigError, match=r"^params: key 'seed' must be a whole number in \[0"):
        validate_params(params(seed=seed))
    validate_params(params(seed=2**32 - 1))


def test_no_validation_with_early_stopping_is_refused_for_runs_that_validate():
    p = params()
    p["trainer"]["limit_val_batches"] = 0  # early stopping (patience 2) would watch nothing
    with pytest.raises(ConfigError, match=r"^run '\w+' \(trainer\): key 'limit_val_batches' is 0"):
        validate_params(p)
    p["trainer"]["early_stopping_patience"] = 0
    validate_params(p)
    # word vectors never validate: their runs take it with the shared patience
    p = params()
    p["models"]["vec"] = {"family": "word2vec", "data": "vocab/lm"}
    p["vec"] = {"trainer": {"limit_val_batches": 0}}
    validate_params(p)
    p["nnlm"]["trainer"] = {"limit_val_batches": 0}
    with pytest.raises(ConfigError, match=r"^run 'nnlm' \(trainer\): key 'limit_val_batches'"):
        validate_params(p)


def test_lightning_keys_are_the_trainer_settings_lightning_takes():
    import inspect

    import pytorch_lightning as pl

    from nlpzoo.params import LIGHTNING_KEYS, TrainerConfig

    takes = set(inspect.signature(pl.Trainer.__init__).parameters)
    names = [f.name for f in dataclasses.fields(TrainerConfig)]
    assert set(LIGHTNING_KEYS) == {n for n in names if n in takes}
    assert "early_stopping_patience" not in LIGHTNING_KEYS and "threads" not in LIGHTNING_KEYS


def test_result_settings_leave_out_checkpointing_logging_and_workers():
    from nlpzoo.params import TrainerConfig

    assert set(TrainerConfig().result_settings()) == {
        "accelerator", "devices", "strategy", "num_nodes", "precision", "max_epochs",
        "max_steps", "max_time", "gradient_clip_val", "gradient_clip_algorithm",
        "accumulate_grad_batches", "limit_train_batches", "limit_val_batches",
        "early_stopping_patience", "deterministic",
    }  # fmt: skip
