"""Command line.

python -m nlpzoo validate [params.yaml]          check a params file, running nothing
python -m nlpzoo pipeline [--check]              write dvc.yaml from params.yaml and the code
python -m nlpzoo repro [--jobs N]                `dvc repro` with N runs side by side (make repro)
python -m nlpzoo translate --run RUN [FILE]      translate lines (stdin by default) with the
                                                 trained translation run models/RUN/
python -m nlpzoo generate --run RUN              sample text from a language model
python -m nlpzoo score --run RUN [FILE]          log-probability, perplexity of sentences
python -m nlpzoo neighbours --run RUN WORD...    nearest neighbours in a run's word vectors
python -m nlpzoo analogy --run RUN A B C         A is to B as C is to ?
(--mlflow-run ID instead of --run: a run logged to MLflow; `COMMAND --help` for each)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nlpzoo import use
from nlpzoo.errors import NlpzooError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nlpzoo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("validate", help="validate params.yaml (keys, types, values)")
    check.add_argument("params", nargs="?", default="params.yaml", type=Path)
    pipe = sub.add_parser(
        "pipeline",
        help="write dvc.yaml from params.yaml's runs and the code each stage imports",
        description="Write dvc.yaml: one train-RUN and evaluate-RUN stage per enabled run of "
        "params.yaml's `models:`, each depending on exactly the code it runs. "
        "Example: python -m nlpzoo pipeline && dvc repro",
    )
    pipe.add_argument("--check", action="store_true", help="only check that dvc.yaml is current")
    pipe.add_argument("--root", type=Path, default=Path("."), help="the project (default: .)")
    sub.add_parser("repro", help="dvc repro with N runs trained side by side (`make repro`)")
    tr = sub.add_parser("translate", help="translate source lines with a trained run")
    which = tr.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="a translation run trained into models/RUN/")
    which.add_argument("--mlflow-run", metavar="ID", help="instead of --run: an MLflow run ID")
    tr.add_argument("input", nargs="?", type=Path, help="source lines (default: stdin)")
    tr.add_argument("--beam", type=int, default=None, help="beam size (default: the run's)")
    tr.add_argument("--models", type=Path, default=Path("models"), help="the models/ folder")
    use.add_commands(sub)  # generate, score, neighbours, analogy
    parser.set_defaults(handler=None)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["repro"]:  # its own options, and any of `dvc repro` after them
        from nlpzoo import repro

        return repro.main(argv[1:])
    args = parser.parse_args(argv)
    if args.handler is not None:
        return use.run_command(args)
    if args.command == "translate":
        return _translate(args)
    if args.command == "pipeline":
        return _pipeline(args)

    if args.command == "validate":
        from nlpzoo.cli import load_params

        try:
            params = load_params(args.params)
        except NlpzooError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{args.params}: ok ({len(params['models'])} runs: {', '.join(params['models'])})")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    from nlpzoo import pipeline
    from nlpzoo.params import load_params

    root = args.root.resolve()
    try:
        params = load_params(root / "params.yaml")
        if args.check:
            pipeline.check(params, root)
            print(f"{root / 'dvc.yaml'}: current")
        else:
            path = pipeline.write(params, root)
            runs = ", ".join(pipeline.parse_models(params))
            print(f"wrote {path} (runs: {runs})")
    except NlpzooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _translate(args: argparse.Namespace) -> int:
    from nlpzoo.tasks.mt import translate

    try:
        if args.input is not None:
            lines = args.input.read_text(encoding="utf-8").splitlines()
        else:
            lines = sys.stdin.read().splitlines()
        if args.mlflow_run:
            from nlpzoo.tracking import fetch_run_dir

            run_dir = fetch_run_dir(args.mlflow_run)
        else:
            run_dir = args.models / args.run
        for line in translate(run_dir, lines, beam_size=args.beam):
            print(line)
    except NlpzooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
