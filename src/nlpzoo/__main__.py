"""Command line.

python -m nlpzoo validate [params.yaml]          check a params file, running nothing
python -m nlpzoo pipeline [--check]              write dvc.yaml from params.yaml and the code
python -m nlpzoo repro [--jobs N] [--gpu-slots S]
                                                 `dvc repro` with N runs side by side (default:
                                                 the cores), S of them per GPU (make repro)
python -m nlpzoo tour [--prepare-only]          every run at a small size in tour/, about
                                                 five minutes on two cores (make tour)
python -m nlpzoo translate --run RUN [FILE]      translate lines (stdin by default) with the
                                                 trained translation run models/RUN/
python -m nlpzoo generate --run RUN              sample text from a language model
python -m nlpzoo score --run RUN [FILE]          log-probability, perplexity of sentences
python -m nlpzoo neighbours --run RUN WORD...    nearest neighbours in a run's word vectors
python -m nlpzoo analogy --run RUN A B C         A is to B as C is to ?
(--mlflow-run ID or models:/nlpzoo-RUN@champion instead of --run: a run's model in MLflow;
`COMMAND --help` for each)
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
    sub.add_parser("repro", help="dvc repro with runs trained side by side (`make repro`)")
    sub.add_parser("tour", help="every run at a small size in tour/ (`make tour`)")
    use.add_commands(sub)  # generate, score, neighbours, analogy, translate
    parser.set_defaults(handler=None)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["repro"]:  # its own options, and any of `dvc repro` after them
        from nlpzoo import repro

        return repro.main(argv[1:])
    if argv[:1] == ["tour"]:  # its own options, and any of `nlpzoo repro` after them
        from nlpzoo import tour

        return tour.main(argv[1:])
    args = parser.parse_args(argv)
    if args.handler is not None:
        return use.run_command(args)
    if args.command == "pipeline":
        return _pipeline(args)

    if args.command == "validate":
        from nlpzoo.errors import PROJECT_ERRORS, error_line
        from nlpzoo.params_file import load_params

        try:
            if args.params.is_dir():
                raise NlpzooError(f"{args.params} is a folder, not a params file")
            params = load_params(args.params)
        except PROJECT_ERRORS as e:
            folder = args.params.resolve().parent
            print(f"error: {error_line(e, folder, args.params)}", file=sys.stderr)
            return 1
        print(f"{args.params}: ok ({len(params['models'])} runs: {', '.join(params['models'])})")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    from nlpzoo import pipeline
    from nlpzoo.errors import PROJECT_ERRORS, error_line
    from nlpzoo.params_file import load_params
    from nlpzoo.pipeline import check_dvc_yaml

    root = args.root.resolve()
    try:
        needs = (root / "params.yaml", root / "stages", pipeline.package_dir(root))
        if not all(p.exists() for p in needs):
            raise NlpzooError(
                f"{root} is not an nlpzoo project (it needs params.yaml, stages/ and src/nlpzoo/, "
                "the code dvc.yaml is made from): run this in the project's folder or name it "
                "with --root"
            )
        params = load_params(root / "params.yaml", pipeline=False)
        if args.check and not (root / "dvc.yaml").is_file():
            raise NlpzooError(
                f"{root / 'dvc.yaml'} not found: write it with `python -m nlpzoo pipeline`"
            )
        if args.check:
            check_dvc_yaml(root)
            pipeline.check(params, root)
            print(f"{root / 'dvc.yaml'}: current")
        else:
            path = pipeline.write(params, root)
            runs = ", ".join(pipeline.parse_models(params))
            print(f"wrote {path} (runs: {runs})")
    except PROJECT_ERRORS as e:
        print(f"error: {error_line(e, root)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
