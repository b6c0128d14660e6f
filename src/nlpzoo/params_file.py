"""The one params loader of the stages, `repro` and the commands: params.yaml read, checked as a
whole (`validate_params`: every section, and what holds between sections), and dvc.yaml checked
against it and the code.

A driver module (docs/design.md §6): it refuses or hands over params.yaml's mapping as YAML read
it, so no stage depends on it. It sits above `nlpzoo.pipeline`, whose checks it calls, which sits
above `nlpzoo.params` (docs/design.md §1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlpzoo.config import build, closest
from nlpzoo.errors import ConfigError
from nlpzoo.params import (
    SECTIONS,
    MlflowConfig,
    TrainerConfig,
    parse_models,
    read_params,
    run_configs,
)
from nlpzoo.params_data import (
    CooccurConfig,
    LMDataConfig,
    LMVocabConfig,
    MTDataConfig,
    MTVocabConfig,
)
from nlpzoo.params_eval import EvaluationConfig, MixtureConfig
from nlpzoo.params_report import ReportConfig
from nlpzoo.pipeline import check, check_dvc_yaml


def load_params(path: Path = Path("params.yaml"), pipeline: bool = True) -> dict[str, Any]:
    """Read and validate a params file: the one loader of the stages, `repro` and the commands.

    With `pipeline` (the default), also check, first, that the dvc.yaml beside it is a pipeline,
    and, once the params are valid, that it is current with them and the code
    (`nlpzoo.pipeline.check`); `python -m nlpzoo pipeline`, which writes it, skips that."""
    path = Path(path)
    root = path.resolve().parent
    if pipeline:
        check_dvc_yaml(root)
    params = read_params(path)
    validate_params(params)
    if pipeline:
        check(params, root)
    return params


def validate_params(params: dict) -> None:
    """Check the whole params file, every section, before any stage does work."""
    if not isinstance(params, dict):
        raise ConfigError("params.yaml must be a mapping of sections")
    specs = parse_models(params, include_disabled=True)
    for key in params:
        if key not in SECTIONS and key not in specs:
            hint = closest(key, list(SECTIONS) + list(specs))
            raise ConfigError(
                f"params: unknown section '{key}'"
                + (f"; did you mean '{hint}'?" if hint else "")
                + " (a run's section needs an entry in `models:`; `enabled: false` there keeps "
                "a run's settings without running it)"
            )
    seed = params.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ConfigError(f"params: key 'seed' must be a whole number in [0, 2**32), got {seed!r}")
    for name in specs:
        run_configs(params, name)
    build(LMDataConfig, params.get("lm"), "lm")
    build(MTDataConfig, params.get("mt"), "mt")
    vocab = params.get("vocab") or {}
    if not isinstance(vocab, dict):
        raise ConfigError("vocab: expected a mapping with `lm` and `mt`")
    for key in vocab:
        if key not in ("lm", "mt"):
            raise ConfigError(f"vocab: unknown key '{key}' (valid keys: lm, mt)")
    build(LMVocabConfig, vocab.get("lm"), "vocab.lm")
    build(MTVocabConfig, vocab.get("mt"), "vocab.mt")
    build(CooccurConfig, params.get("cooccur"), "cooccur")
    build(TrainerConfig, params.get("trainer"), "trainer")
    build(MlflowConfig, params.get("mlflow"), "mlflow")
    mixture = build(MixtureConfig, params.get("mixture"), "mixture")
    build(EvaluationConfig, params.get("evaluation"), "evaluation")
    build(ReportConfig, params.get("report"), "report")
    base = parse_models(params, include_disabled=True).get(mixture.baseline)
    if base is not None and base.task != "lm":
        raise ConfigError(
            f"mixture: key 'baseline' must name a language-model run, got {mixture.baseline!r} "
            f"(family {base.family})"
        )
