"""What serving a registered run costs, beside the command that answers the same.

Usage: python benchmarks/serving.py [--root .] [--runs transformer transformer_lm svd]
                                    [--repeats 3] [--out benchmarks/results/serving.json]
                                    [--sentence TEXT] [--prompt TEXT] [--word WORD]
       python benchmarks/serving.py --markdown [--out ...]   (the table of a saved result)

For a project that has run the pipeline (models/, mlflow.db; `MLFLOW_TRACKING_URI` for another
store) and for each run named, in a fresh Python process each time (cold: imports, file cache
as the earlier repeats left it):

    load_model_s     `mlflow.pyfunc.load_model("models:/nlpzoo-RUN@champion")`, the call alone
    first_answer_s   its first `predict` of one input (a sentence to translate, a prompt to
                     continue with 20 tokens and seed 1, a word's 10 nearest neighbours)
    process_s        that whole process, start to exit
    command_s        the whole `python -m nlpzoo translate/generate/neighbours --run RUN` process
                     answering the same input (its first answer)

the median of `--repeats` processes (each figure's minimum beside it), whether both answered
the same, and what the run occupies in the store: bytes of artifacts of its MLflow run (curves,
metrics, evaluation outputs) and of its MLflow models (the `run` folder with the weights, the
packaged code, the rest), every logged model of the run counted. Writes
benchmarks/results/serving.json and prints a markdown table (docs/benchmarks.md, "Serving a
registered run").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "serving.json"
RUNS = ("transformer", "transformer_lm", "svd")
TOKENS, SEED, K = 20, 1, 10  # generate's and neighbours' settings, the same on both sides

# one process: load the champion, answer once, print the timings and the answer as JSON
PYFUNC = """
import json, sys, time
t0 = time.perf_counter()
import mlflow.pyfunc
t1 = time.perf_counter()
model = mlflow.pyfunc.load_model(sys.argv[1])
t2 = time.perf_counter()
answer = model.predict([sys.argv[2]], params=json.loads(sys.argv[3]))
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_model_s": t2 - t1, "first_answer_s": t3 - t2,
                  "answer": answer}))
"""


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{root / 'mlflow.db'}"


def task_of(root: Path, run: str) -> str:
    config = json.loads((root / "models" / run / "config.json").read_text())
    sys.path.insert(0, str(ROOT / "src"))
    from nlpzoo.families import FAMILIES

    return FAMILIES[config["family"]].task


def requests_for(task: str, run: str, args: argparse.Namespace) -> tuple[str, dict, list, str]:
    """(the one input, the model's params, the command's argv, the command's stdin)."""
    if task == "mt":
        return args.sentence, {}, ["translate", "--run", run], args.sentence + "\n"
    if task == "lm":
        argv = ["generate", "--run", run, "--prompt", args.prompt, "--tokens", str(TOKENS),
                "--seed", str(SEED)]  # fmt: skip
        return args.prompt, {"tokens": TOKENS, "seed": SEED}, argv, ""
    argv = ["neighbours", "--run", run, args.word, "-k", str(K), "--json"]
    return args.word, {"k": K}, argv, ""


def same(task: str, answer: list, stdout: str) -> bool:
    """Whether the model's answer is the command's output."""
    if task == "mt":
        return stdout.splitlines() == answer
    if task == "lm":
        return stdout.strip().split("\t")[-1] == answer[0]
    table = json.loads(stdout)["neighbours"]
    return [list(map(list, v)) for v in table.values()] == answer


def timed(argv: list[str], env: dict, stdin: str, cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(
        argv, env=env, input=stdin, capture_output=True, text=True, cwd=cwd, timeout=600
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout


def local_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri:
        return Path(uri)
    return None


def tree_bytes(client, list_fn, key: str, path: str | None = None) -> dict[str, int]:
    """{artifact path: bytes} of every file under `path`, through the store's own listing."""
    out: dict[str, int] = {}
    for info in list_fn(key, path):
        if info.is_dir:
            out.update(tree_bytes(client, list_fn, key, info.path))
        else:
            out[info.path] = info.file_size or 0
    return out


def files_bytes(location: str, client, list_fn, key: str) -> dict[str, int]:
    """{path: bytes} of every artifact at `location`: read from the disk when it is local."""
    folder = local_path(location)
    if folder is not None and folder.is_dir():
        return {
            p.relative_to(folder).as_posix(): p.stat().st_size
            for p in folder.rglob("*")
            if p.is_file()
        }
    return tree_bytes(client, list_fn, key)


def store_bytes(uri: str, run_id: str) -> dict:
    """Bytes of run `run_id`'s artifacts and of each of its MLflow models."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    own = files_bytes(run.info.artifact_uri, client, client.list_artifacts, run_id)
    models = client.search_logged_models(
        experiment_ids=[run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    weights = code = rest = 0
    for model in models:
        found = files_bytes(
            model.artifact_location, client, client.list_logged_model_artifacts, model.model_id
        )
        for path, size in found.items():
            if path.startswith("artifacts/run/"):
                weights += size
            elif path.startswith("code/"):
                code += size
            else:
                rest += size
    run_files = sum(v for k, v in own.items() if k.startswith("run_dir/"))  # older runs
    return {
        "models": len(models),
        "run_artifacts_bytes": sum(own.values()),
        "run_dir_bytes": run_files,
        "model_run_files_bytes": weights,
        "model_code_bytes": code,
        "model_other_bytes": rest,
        "total_bytes": sum(own.values()) + weights + code + rest,
    }


def measure(root: Path, run: str, args: argparse.Namespace) -> dict:
    from mlflow import MlflowClient

    uri = tracking_uri(root)
    name = f"nlpzoo-{run}"
    version = MlflowClient(tracking_uri=uri).get_model_version_by_alias(name, "champion")
    task = task_of(root, run)
    text, params, argv, stdin = requests_for(task, run, args)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    rows, commands, agree = [], [], True
    with tempfile.TemporaryDirectory(prefix="nlpzoo-serving-") as tmp:
        for _ in range(args.repeats):
            model_uri = f"models:/{name}@champion"
            seconds, out = timed(
                [sys.executable, "-c", PYFUNC, model_uri, text, json.dumps(params)],
                env, "", Path(tmp),
            )  # fmt: skip
            row = json.loads(out.strip().splitlines()[-1])
            row["process_s"] = seconds
            rows.append(row)
            seconds, out = timed(
                [sys.executable, "-m", "nlpzoo", *argv, "--root", str(root)], env, stdin, root
            )
            commands.append(seconds)
            agree = agree and same(task, row["answer"], out)

    def stat(values: list[float]) -> dict:
        return {"median": round(statistics.median(values), 3), "min": round(min(values), 3)}

    return {
        "task": task,
        "model_uri": f"models:/{name}/{version.version}",
        "mlflow_run_id": version.run_id,
        "input": text,
        "params": params,
        "import_mlflow_s": stat([r["import_s"] for r in rows]),
        "load_model_s": stat([r["load_model_s"] for r in rows]),
        "first_answer_s": stat([r["first_answer_s"] for r in rows]),
        "process_s": stat([r["process_s"] for r in rows]),
        "command_s": stat(commands),
        "same_answer": agree,
        "answer": rows[-1]["answer"],
        "store": store_bytes(uri, version.run_id),
    }


def machine() -> dict:
    import mlflow
    import torch

    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "mlflow": mlflow.__version__,
        "torch": torch.__version__,
    }


def markdown(result: dict) -> str:
    mb = 1e6
    lines = [
        "| run | task | `load_model` s | first answer s | process s | command s | same | "
        "store MB: run files / code / run's artifacts / total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run, r in result["runs"].items():
        s = r["store"]
        files = s["model_run_files_bytes"] + s["run_dir_bytes"]
        lines.append(
            f"| `{run}` | {r['task']} | {r['load_model_s']['median']:.2f} | "
            f"{r['first_answer_s']['median']:.2f} | {r['process_s']['median']:.2f} | "
            f"{r['command_s']['median']:.2f} | {'yes' if r['same_answer'] else 'no'} | "
            f"{files / mb:.2f} / {s['model_code_bytes'] / mb:.2f} / "
            f"{s['run_artifacts_bytes'] / mb:.2f} / {s['total_bytes'] / mb:.2f} |"
        )
    load = result.get("load_average")
    note = f"; load average {load[0]:.2f} / {load[1]:.2f}" if load else ""
    lines.append("")
    lines.append(
        f"Median of {result['repeats']} fresh processes each; {result['machine']['cpu']}, "
        f"{result['machine']['cores']} cores, MLflow {result['machine']['mlflow']}{note}."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this)")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), help="runs to measure")
    parser.add_argument("--repeats", type=int, default=3, help="processes per figure (3)")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON result")
    parser.add_argument("--sentence", default="Ein Hund läuft über die Wiese.", help="to translate")
    parser.add_argument("--prompt", default="the jury said", help="to continue")
    parser.add_argument("--word", default="city", help="whose neighbours to find")
    parser.add_argument("--markdown", action="store_true", help="print the table of --out")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    root = args.root.resolve()
    if not (root / "models").is_dir():
        raise SystemExit(f"no models/ in {root}: run the pipeline first (make repro)")
    before = os.getloadavg()
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "root": str(root),
        "tracking_uri": tracking_uri(root),
        "repeats": args.repeats,
        "machine": machine(),
        "runs": {run: measure(root, run, args) for run in args.runs},
    }
    after = os.getloadavg()
    result["load_average"] = [round(before[0], 2), round(after[0], 2)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
