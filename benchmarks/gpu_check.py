"""What a pipeline run left, in one JSON document and one Markdown table: the machine, each
stage's wall seconds, each run's device, precision and main metric, and which quality floors hold.
benchmarks/gpu_check.sh runs it after the pipeline on a GPU machine; on any project folder it
summarises the metrics/ and timings/ there (the committed run, for one).

Usage: python benchmarks/gpu_check.py [--root PROJECT] [--since EPOCH_SECONDS]
           [--out-json PATH] [--out-md PATH] [--pipeline-rc N] [--pipeline-seconds S]
           [--limit S] [--total-seconds S] [--pytest-junit XML] [--pytest-rc N]

Read from PROJECT (default: this repository):
    params.yaml          the runs (`models:`, those enabled)
    timings/STAGE.json   each stage's wall seconds (`seconds`), written by the stage itself
    metrics/RUN.json     `device`, `devices`, `precision`, `epochs` and the scores
    metrics/mixtures.json, reports/report.md
A file older than `--since` (seconds since the epoch: when the pipeline started) is left from an
earlier run: it counts as not written by this one (`stale`), and its numbers are not used.

Main metric of each task (the report's columns): language models `test_ppl` (and its ratio to
the n-gram's), translation `bleu_tok_lc_beam` (tokenised lowercase BLEU, beam; with sacreBLEU
`bleu_beam` and `chrf_beam`), word vectors `analogy_acc` (with `ws353_rho`, `simlex_rho`).
The floors are those of docs/benchmarks.md ("Minutes per run against its metric").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# run -> (what is compared, "<=" or ">=", bound): docs/benchmarks.md, "Minutes per run against
# its metric". The language models' ratios are test perplexities over the n-gram's (`nnlm`: its
# mixture with the n-gram); translation's is tokenised lowercase BLEU with beam search.
FLOORS = {
    "nnlm": ("mixture / n-gram test ppl", "<=", 0.78),
    "rnn_lm": ("test ppl / n-gram", "<=", 0.83),
    "lstm_lm": ("test ppl / n-gram", "<=", 0.73),
    "transformer_lm": ("test ppl / n-gram", "<=", 0.76),
    "seq2seq": ("bleu_tok_lc_beam", ">=", 16.0),
    "attention": ("bleu_tok_lc_beam", ">=", 30.0),
    "transformer": ("bleu_tok_lc_beam", ">=", 36.5),
    "decoder_mt": ("bleu_tok_lc_beam", ">=", 31.5),
}
MAIN = {"lm": "test_ppl", "mt": "bleu_tok_lc_beam", "vectors": "analogy_acc"}
EXTRA = {
    "lm": ("valid_ppl",),
    "mt": ("bleu_beam", "chrf_beam", "test_ppl"),
    "vectors": ("ws353_rho", "simlex_rho"),
}
BASELINE = "ngram"  # the language models' ratios are to its test perplexity


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _fresh(path: Path, since: float | None, finished: str | None = None) -> bool:
    """Written by the run that started at `since` (always, without `since`): by the stage's own
    `finished` time where it recorded one, else by the file's modification time."""
    if since is None:
        return True
    if finished:
        try:
            return datetime.fromisoformat(finished).timestamp() >= since - 1
        except ValueError:
            pass
    try:
        return path.stat().st_mtime >= since - 1
    except OSError:
        return False


# --------------------------------------------------------------------------- the environment

# modules the pipeline and the CUDA tests import, with the distribution each comes from
MODULES = {
    "torch": "torch",
    "pytorch_lightning": "pytorch-lightning",
    "dvc.repo": "dvc",
    "mlflow": "mlflow",
    "pandas": "pandas",
    "numpy": "numpy",
    "numba": "numba",
    "scipy": "scipy",
    "sklearn": "scikit-learn",
    "sentencepiece": "sentencepiece",
    "sacrebleu": "sacrebleu",
    "sacremoses": "sacremoses",
    "matplotlib": "matplotlib",
    "yaml": "pyyaml",
    "psutil": "psutil",
    "tqdm": "tqdm",
    "pytest": "pytest",
    "nlpzoo.repro": "nlpzoo (src/ on PYTHONPATH)",
}


def project_requirements(root: Path) -> list[str]:
    """pyproject.toml's `dependencies`, and pytest for the tests."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import re

        block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
        deps = re.findall(r'"([^"]+)"', block.group(1)) if block else []
    else:
        deps = tomllib.loads(text)["project"]["dependencies"]
    return [*deps, "pytest>=8"]


def check_environment(root: Path, site: Path | None) -> tuple[list[str], list[str]]:
    """(missing, warnings). Missing: a project requirement, or a requirement of a distribution
    installed in `site` (the wheels carried along), that no distribution provides, and a module
    of MODULES that does not import. Warnings: an installed version outside the range asked."""
    import importlib
    from importlib import metadata

    missing, warnings = [], []
    try:
        from packaging.requirements import Requirement
    except ImportError:  # no versions to check: the imports only
        missing.append("packaging (to read the requirements)")
        site, requirements = None, []
    else:
        requirements = project_requirements(root)
    wanted = [(Requirement(r), "nlpzoo") for r in requirements]
    if site is not None and site.is_dir():
        for dist in metadata.distributions(path=[str(site)]):
            for line in dist.requires or []:
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    wanted.append((req, dist.metadata["Name"]))
    for req, by in wanted:
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{req.name} (required by {by}: {req})")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            warnings.append(f"{req.name} {version} installed; {by} requires {req}")
    for module, dist in MODULES.items():
        try:
            importlib.import_module(module)
        except Exception as e:
            missing.append(f"{dist}: import {module} failed ({type(e).__name__}: {e})")
    return sorted(set(missing)), sorted(set(warnings))


# --------------------------------------------------------------------------- the machine


def _run(cmd: list[str]) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def machine() -> dict:
    """The CPU, the GPUs (torch's view and nvidia-smi's), and the software versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    out: dict = {
        "host": platform.node(),
        "cpu": cpu,
        "cores": cores,
        "python": platform.python_version(),
    }
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        out["cudnn"] = (
            torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        )
        out["cuda_available"] = bool(torch.cuda.is_available())
        if torch.cuda.is_available():
            out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            out["bf16"] = bool(torch.cuda.is_bf16_supported())
    except Exception as e:  # no torch, or a broken CUDA set-up: the rest still counts
        out["torch_error"] = f"{type(e).__name__}: {e}"
    smi = _run(
        [
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ]
    )
    if smi:
        out["nvidia_smi"] = smi.splitlines()
    return out


# --------------------------------------------------------------------------- stages and runs


def stages(root: Path, since: float | None) -> dict[str, dict]:
    """timings/STAGE.json of every stage: its wall seconds, CPU seconds and whether it is
    fresh, by stage name."""
    out = {}
    for path in sorted((root / "timings").glob("*.json")):
        t = _load(path)
        if not isinstance(t, dict):
            continue
        name = str(t.get("stage") or path.stem)
        out[name] = {
            "seconds": _number(t.get("seconds")),
            "cpu_seconds": _number(t.get("cpu_seconds")),
            "finished": t.get("finished"),
            "stale": not _fresh(path, since, t.get("finished")),
        }
    return out


def enabled_runs(root: Path) -> dict[str, str]:
    """Run -> family, for the enabled runs of params.yaml's `models:`."""
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8")) or {}
    out = {}
    for name, spec in (params.get("models") or {}).items():
        spec = spec or {}
        if spec.get("enabled", True) is not False:
            out[name] = str(spec.get("family", ""))
    return out


def planned_devices(root: Path, names: list[str]) -> dict[str, str]:
    """Where each run trains on this machine, as `nlpzoo.placement` resolves it ({} where
    nlpzoo cannot be imported or the params do not load)."""
    try:
        from nlpzoo.params_file import load_params
        from nlpzoo.repro import run_device

        params = load_params(root / "params.yaml")
    except Exception:
        return {}
    out = {}
    for name in names:
        try:
            out[name] = run_device(params, root, name)
        except Exception as e:
            out[name] = f"error: {type(e).__name__}"
    return out


def floor_of(name: str, m: dict, baseline: float | None, mixtures: dict) -> dict | None:
    """The run's quality floor, the value it is held against, and whether it holds (None where
    the value is missing)."""
    if name not in FLOORS:
        return None
    what, op, bound = FLOORS[name]
    if what.startswith("mixture"):
        mix = _number((mixtures.get(name) or {}).get("test_ppl_mix"))
        value = mix / baseline if mix is not None and baseline else None
    elif what.startswith("test ppl"):
        ppl = _number(m.get("test_ppl"))
        value = ppl / baseline if ppl is not None and baseline else None
    else:
        value = _number(m.get(what))
    holds = None
    if value is not None:
        holds = value <= bound if op == "<=" else value >= bound
    return {
        "metric": what,
        "op": op,
        "bound": bound,
        "value": None if value is None else round(value, 4),
        "holds": holds,
    }


def runs(root: Path, since: float | None, timing: dict[str, dict], plan: dict) -> list[dict]:
    """One record per enabled run: its status (ok, missing: no metrics, stale: metrics of an
    earlier run), where and how it trained, its main metric and its floor."""
    families = enabled_runs(root)
    metrics = {}
    for name in families:
        path = root / "metrics" / f"{name}.json"
        m = _load(path)
        if isinstance(m, dict):
            metrics[name] = (m, _fresh(path, since))
    mix_path = root / "metrics" / "mixtures.json"
    mix_doc = _load(mix_path) if _fresh(mix_path, since) else None
    mixtures = (mix_doc or {}).get("runs") or {}
    base, base_fresh = metrics.get(BASELINE, ({}, False))
    baseline = _number(base.get("test_ppl")) if base_fresh else None

    out = []
    for name, family in families.items():
        m, fresh = metrics.get(name, ({}, False))
        status = "ok" if m and fresh else ("stale" if m else "missing")
        use = m if status == "ok" else {}
        task = use.get("task") or m.get("task")
        record = {
            "run": name,
            "family": family,
            "task": task,
            "status": status,
            "device": use.get("device"),
            "devices": use.get("devices"),
            "device_planned": plan.get(name),
            "precision": use.get("precision"),
            "epochs": use.get("epochs"),
        }
        for stage in ("train", "evaluate", "register"):
            t = timing.get(f"{stage}-{name}") or {}
            record[f"{stage}_seconds"] = None if t.get("stale", True) else t.get("seconds")
        key = MAIN.get(task or "")
        record["metric"] = key
        record["value"] = _number(use.get(key)) if key else None
        record["extra"] = {k: _number(use.get(k)) for k in EXTRA.get(task or "", ())}
        if task == "lm" and name != BASELINE and record["value"] is not None and baseline:
            record["extra"]["test_ppl_over_ngram"] = round(record["value"] / baseline, 4)
            mix = _number((mixtures.get(name) or {}).get("test_ppl_mix"))
            if mix is not None:
                record["extra"]["test_ppl_mix"] = mix
        record["floor"] = floor_of(name, use, baseline, mixtures)
        out.append(record)
    return out


def pytest_summary(junit: Path | None, rc: int | None) -> dict | None:
    """Counts of a JUnit XML report (pytest --junitxml), with pytest's exit status."""
    if junit is None and rc is None:
        return None
    out: dict = {"rc": rc}
    if junit is not None:
        try:
            tree = ET.parse(junit).getroot()
        except (OSError, ET.ParseError) as e:
            out["error"] = f"{junit}: {e}"
            return out
        suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
        for key in ("tests", "failures", "errors", "skipped"):
            out[key] = sum(int(s.get(key, 0) or 0) for s in suites)
        out["passed"] = out["tests"] - out["failures"] - out["errors"] - out["skipped"]
        out["failed"] = [
            f"{case.get('classname', '')}::{case.get('name', '')}"
            for case in tree.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        ]
    return out


def summary(args: argparse.Namespace) -> dict:
    root = Path(args.root).resolve()
    timing = stages(root, args.since)
    names = list(enabled_runs(root))
    plan = planned_devices(root, names) if args.plan else {}
    records = runs(root, args.since, timing, plan)
    fresh = {k: v for k, v in timing.items() if not v["stale"]}
    report = root / "reports" / "report.md"
    floors = [r["floor"] for r in records if r["floor"] is not None]
    return {
        "root": str(root),
        "machine": machine(),
        "pytest_cuda": pytest_summary(args.pytest_junit, args.pytest_rc),
        "pipeline": {
            "rc": args.pipeline_rc,
            "timed_out": args.pipeline_rc == 124,
            "limit_seconds": args.limit,
            "wall_seconds": args.pipeline_seconds,
            "stage_seconds_sum": round(sum(v["seconds"] or 0.0 for v in fresh.values()), 2),
            "stages_run": len(fresh),
            "stages_stale": sorted(k for k, v in timing.items() if v["stale"]),
            "runs_complete": sum(r["status"] == "ok" for r in records),
            "runs": len(records),
            "report": report.is_file() and _fresh(report, args.since),
        },
        "floors": {
            "held": sum(f["holds"] is True for f in floors),
            "broken": [r["run"] for r in records if r["floor"] and r["floor"]["holds"] is False],
            "unknown": [r["run"] for r in records if r["floor"] and r["floor"]["holds"] is None],
        },
        "total_seconds": args.total_seconds,
        "stages": timing,
        "runs": records,
    }


# --------------------------------------------------------------------------- markdown


def _fmt(value, spec: str = ".1f") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def markdown(doc: dict) -> str:
    m, p = doc["machine"], doc["pipeline"]
    gpus = ", ".join(m.get("nvidia_smi") or m.get("gpus") or []) or "no GPU"
    lines = [
        "# GPU check",
        "",
        f"Machine: {gpus}; {m.get('cpu')}, {m.get('cores')} cores; Python {m.get('python')}, "
        f"torch {m.get('torch', '–')} (CUDA {m.get('torch_cuda') or '–'}).",
        "",
    ]
    t = doc.get("pytest_cuda")
    if t:
        if "tests" in t:
            failed = f" ({', '.join(t['failed'])})" if t.get("failed") else ""
            lines.append(
                f"CUDA tests (`pytest -m cuda`): {t['passed']} passed, "
                f"{t['failures'] + t['errors']} failed{failed}, {t['skipped']} skipped "
                f"(exit {t['rc']})."
            )
        else:
            lines.append(f"CUDA tests (`pytest -m cuda`): exit {t['rc']} {t.get('error', '')}")
    run = ""
    if p["wall_seconds"] is not None:
        limit = f" of a {p['limit_seconds']:.0f} s limit" if p["limit_seconds"] else ""
        run = f"{p['wall_seconds']:.0f} s{limit}, "
    if p["rc"] is not None:
        run += "stopped at the limit, " if p["timed_out"] else f"exit {p['rc']}, "
    lines += [
        f"Pipeline: {p['runs_complete']} of {p['runs']} runs complete, report "
        f"{'written' if p['report'] else 'not written'}; {run}"
        f"{p['stages_run']} stages ran, {p['stage_seconds_sum']:.0f} stage-seconds.",
    ]
    f = doc["floors"]
    broken = f", broken: {', '.join(f['broken'])}" if f["broken"] else ""
    unknown = f", not measured: {', '.join(f['unknown'])}" if f["unknown"] else ""
    lines.append(f"Floors held: {f['held']}{broken}{unknown}.")
    if doc.get("total_seconds") is not None:
        lines.append(f"Whole check: {doc['total_seconds']:.0f} s.")
    lines += [
        "",
        "| run | device | precision | epochs | train s | evaluate s | metric | value | floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        device = r["device"] or ("not recorded" if r["status"] == "ok" else r["status"])
        if r["device_planned"] and r["device_planned"] != r["device"]:
            device += f" (planned {r['device_planned']})"
        fl = r["floor"]
        floor = "–"
        if fl:
            verdict = {True: "holds", False: "broken", None: "–"}[fl["holds"]]
            floor = f"{fl['metric']} {_fmt(fl['value'], '.3f')} {fl['op']} {fl['bound']}: {verdict}"
        spec = ".3f" if r["task"] == "vectors" else ".2f"
        lines.append(
            f"| {r['run']} | {device} | {_fmt(r['precision'])} | {_fmt(r['epochs'])} "
            f"| {_fmt(r['train_seconds'])} | {_fmt(r['evaluate_seconds'])} "
            f"| {_fmt(r['metric'])} | {_fmt(r['value'], spec)} | {floor} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=str(ROOT), help="the project folder (default: here)")
    parser.add_argument("--since", type=float, help="epoch seconds the pipeline started at")
    parser.add_argument("--out-json", type=Path, default=RESULTS / "gpu_check.json")
    parser.add_argument("--out-md", type=Path, default=RESULTS / "gpu_check.md")
    parser.add_argument("--pipeline-rc", type=int, help="the pipeline's exit status (124: limit)")
    parser.add_argument("--pipeline-seconds", type=float, help="the pipeline's wall seconds")
    parser.add_argument("--limit", type=float, help="the pipeline's wall-clock limit, seconds")
    parser.add_argument("--total-seconds", type=float, help="the whole check's wall seconds")
    parser.add_argument("--pytest-junit", type=Path, help="JUnit XML of the CUDA tests")
    parser.add_argument("--pytest-rc", type=int, help="the CUDA tests' exit status")
    parser.add_argument(
        "--no-plan",
        dest="plan",
        action="store_false",
        help="do not ask nlpzoo.placement where each run would train here",
    )
    parser.add_argument(
        "--check-env",
        action="store_true",
        help="only check that the project's requirements (and those of the wheels installed in "
        "--site) are installed and import; exit 2 naming what is missing",
    )
    parser.add_argument("--site", type=Path, help="the folder the carried wheels went to")
    args = parser.parse_args(argv)
    if args.check_env:
        missing, warnings = check_environment(ROOT, args.site)
        for line in warnings:
            print(f"warning: {line}")
        for line in missing:
            print(f"missing: {line}")
        print("environment: " + ("incomplete" if missing else "complete"))
        return 2 if missing else 0
    doc = summary(args)
    text = markdown(doc)
    for path, content in ((args.out_json, json.dumps(doc, indent=1) + "\n"), (args.out_md, text)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
