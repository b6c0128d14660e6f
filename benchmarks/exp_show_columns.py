"""How wide `dvc exp show` is after one `-S`: its columns in all, and with `--only-changed`.

A small project (two runs, `ngram` and `nnlm`, one short epoch; the data stages as they are) is
written in a temporary folder from the code of `--code` (a checkout of this project: its
params.yaml, stages/ and src/nlpzoo/, which the stages import there through PYTHONPATH), made a
git and DVC repository, reproduced and committed; then `dvc exp run -S nnlm.hidden_dim=40` runs
one experiment, and `dvc exp show --csv` is read with and without `--only-changed`.

    python benchmarks/exp_show_columns.py                      # this checkout
    python benchmarks/exp_show_columns.py --code /tmp/old --label before

Writes benchmarks/results/exp_show_columns_LABEL.json (the counts and the columns of
`--only-changed`). It counts columns, not time: the load of the machine does not change it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RUNS = ("ngram", "nnlm")
EXPERIMENT = ("nnlm.hidden_dim", 40)


def small_params(params: dict) -> dict:
    """The project's params with only RUNS enabled, one short epoch, small sizes."""
    for name, entry in params["models"].items():
        entry["enabled"] = name in RUNS
    params.setdefault("trainer", {}).update(
        max_epochs=1, limit_train_batches=20, limit_val_batches=5, log_every_n_steps=5
    )
    params.setdefault("nnlm", {}).update(emb_dim=16, hidden_dim=32)
    params.setdefault("nnlm", {}).pop("trainer", None)
    params.setdefault("vocab", {}).setdefault("mt", {})["vocab_size"] = 1000
    params.setdefault("evaluation", {}).update(sample_tokens=8, sample_count=1)
    params.setdefault("mlflow", {})["experiment"] = "exp-show-columns"
    return params


def run(cmd: list[str], cwd: Path, env: dict) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode:
        tail = out.stdout[-3000:] + out.stderr[-3000:]
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{tail}")
    return out.stdout


def columns(text: str) -> list[str]:
    return next(csv.reader(io.StringIO(text)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, default=HERE.parent, help="a checkout of the project")
    ap.add_argument("--label", default="after", help="names the results file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary project")
    args = ap.parse_args()
    code = args.code.resolve()
    where = Path(tempfile.mkdtemp(prefix="exp-show-"))
    proj = where / "project"
    proj.mkdir()
    for name in ("stages", "src/nlpzoo", "benchmarks/results/roofline.json"):
        src, dest = code / name, proj / name
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    params = small_params(yaml.safe_load((code / "params.yaml").read_text(encoding="utf-8")))
    (proj / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (proj / ".gitignore").write_text("mlflow.db\nmlruns/\n__pycache__/\n", encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(proj / "src")
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{proj / 'mlflow.db'}"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@nlpzoo.invalid"]
    run([sys.executable, "-m", "nlpzoo", "pipeline"], proj, env)
    run(["git", "init", "-q"], proj, env)
    run(["dvc", "init", "-q"], proj, env)
    run([*git, "add", "-A"], proj, env)
    run([*git, "commit", "-qm", "project"], proj, env)
    run(["dvc", "repro"], proj, env)
    run([*git, "add", "-A"], proj, env)
    run([*git, "commit", "-qm", "reproduced"], proj, env)
    key, value = EXPERIMENT
    run(["dvc", "exp", "run", "-S", f"{key}={value}"], proj, env)
    every = columns(run(["dvc", "exp", "show", "--csv"], proj, env))
    changed = columns(run(["dvc", "exp", "show", "--csv", "--only-changed"], proj, env))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=code, capture_output=True, text=True
    ).stdout.strip()
    result = {
        "code": commit or str(code),
        "experiment": f"-S {key}={value}",
        "runs": list(RUNS),
        "columns": len(every),
        "columns_only_changed": len(changed),
        "only_changed": changed,
    }
    out = HERE / "results" / f"exp_show_columns_{args.label}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "only_changed"}))
    print(f"wrote {out}")
    if not args.keep:
        shutil.rmtree(where, ignore_errors=True)
    else:
        print(f"kept {proj}")


if __name__ == "__main__":
    main()
