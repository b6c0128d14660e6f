"""Linear interpolation of two language models, as Bengio et al. (2003) mix the NNLM with the
trigram ("mixture of the neural network with the interpolated trigram", their Table 1):

    p(w_t | ·) = λ p_a(w_t | ·) + (1 − λ) p_b(w_t | ·)

λ is chosen on the validation stream, where both models give per-token log-probabilities of the
identical tokens, then applied unchanged to test. Everything is float64.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from nlpzoo.config import build, closest
from nlpzoo.io import atomic_write_json
from nlpzoo.layout import Layout
from nlpzoo.params import parse_models
from nlpzoo.params_eval import MixtureConfig
from nlpzoo.tracking import Tracker

log = logging.getLogger(__name__)


def _pair(lp_a: np.ndarray, lp_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(lp_a, dtype=np.float64)
    b = np.asarray(lp_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"log-probabilities of different streams: {a.shape} vs {b.shape}")
    if a.size == 0:
        raise ValueError("mixture of empty streams")
    return a, b


def mix_log_probs(lp_a: np.ndarray, lp_b: np.ndarray, lam: float) -> np.ndarray:
    """log(λ p_a + (1 − λ) p_b) per token = logaddexp(log λ + lp_a, log(1 − λ) + lp_b)."""
    a, b = _pair(lp_a, lp_b)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    with np.errstate(divide="ignore"):  # log 0 = −inf: λ = 0 or 1 gives one model exactly
        return np.logaddexp(np.log(lam) + a, np.log1p(-lam) + b)


def choose_lambda(lp_a_valid: np.ndarray, lp_b_valid: np.ndarray) -> float:
    """The λ in [0, 1] of maximum validation likelihood.

    L(λ) = Σ_t log(λ p_a + (1 − λ) p_b) is concave, so its maximum is where
    L'(λ) = Σ_t (p_a − p_b) / (λ p_a + (1 − λ) p_b) changes sign (L' is decreasing); bisection
    on L' finds it to machine precision. At that point λ = mean_t λ p_a / (λ p_a + (1 − λ) p_b),
    i.e. it is the fixed point of EM's update (Jelinek & Mercer's deleted interpolation), reached
    in a fixed 64 steps instead of EM's slow approach to a λ near 0 or 1.
    """
    a, b = _pair(lp_a_valid, lp_b_valid)

    def slope(lam: float) -> float:  # L'(λ), each term computed in log space
        mix = mix_log_probs(a, b, lam)
        return float(np.sum(np.exp(a - mix) - np.exp(b - mix)))

    if slope(0.0) <= 0.0:  # adding any of a lowers the likelihood
        return 0.0
    if slope(1.0) >= 0.0:  # adding any of b lowers the likelihood
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        if slope(mid) > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# --------------------------------------------------------------------------- the mixture stage


def mixtures(params: dict, root: Path) -> dict:
    """Bengio et al. (2003) mixtures: p = λ p_run + (1 − λ) p_baseline for every other enabled
    language-model run of `models:`, λ chosen on the validation split; written to
    `metrics/mixtures.json` and to each run's MLflow run as `test_ppl_mix`. Without the
    baseline (not an enabled run, or not evaluated) nothing is mixed: the file says why under
    `skipped`, and so does a warning."""
    cfg = build(MixtureConfig, params.get("mixture"), "mixture")
    specs = parse_models(params)  # the enabled runs only
    root = Path(root)
    out: dict[str, Any] = {}
    base_path = Layout(root).evaluation(cfg.baseline) / "logprobs.npz"
    skipped = _without_baseline(cfg.baseline, specs, base_path)
    if skipped:
        log.warning(skipped)
    else:
        base = np.load(base_path)
        for name, spec in specs.items():
            path = Layout(root).evaluation(name) / "logprobs.npz"
            if name == cfg.baseline or spec.task != "lm" or not path.is_file():
                continue
            lp = np.load(path)
            lam = choose_lambda(lp["valid"].astype(np.float64), base["valid"].astype(np.float64))
            mixed = {
                s: mix_log_probs(lp[s].astype(np.float64), base[s].astype(np.float64), lam)
                for s in ("valid", "test")
            }
            out[name] = {
                "lambda": round(float(lam), 4),
                "valid_ppl_mix": round(_perplexity(mixed["valid"]), 4),
                "test_ppl_mix": round(_perplexity(mixed["test"]), 4),
            }
            tracker = Tracker.resume(Layout(root).evaluation(name), name)
            tracker.log_metrics(
                {
                    "test_ppl_mix": out[name]["test_ppl_mix"],
                    "valid_ppl_mix": out[name]["valid_ppl_mix"],
                    "mix_lambda": out[name]["lambda"],
                }
            )
    record: dict[str, Any] = {"baseline": cfg.baseline, "runs": out}
    if skipped:
        record["skipped"] = skipped
    atomic_write_json(Layout(root).mixtures, record)
    return out


def _without_baseline(baseline: str, specs: dict, base_path: Path) -> str | None:
    """Why there can be no mixture with `baseline`, or None when there can."""
    if baseline not in specs or specs[baseline].task != "lm":
        runs = [n for n, s in specs.items() if s.task == "lm"]
        hint = closest(baseline, runs)
        return (
            f"no mixtures: the baseline {baseline!r} (params mixture.baseline) is not an "
            "enabled language-model run of models:"
            + (f"; did you mean {hint!r}?" if hint else f" ({', '.join(runs) or 'none'})")
        )
    if not base_path.is_file():
        return f"no mixtures: {base_path} is missing; run `dvc repro evaluate-{baseline}`"
    return None


def _perplexity(log_probs: np.ndarray) -> float:
    """exp(−mean log p), in float64 (as `nlpzoo.evaluation.perplexity.perplexity`)."""
    return math.exp(-np.asarray(log_probs, dtype=np.float64).mean())
