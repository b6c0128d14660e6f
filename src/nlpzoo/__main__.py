"""Command line.

python -m nlpzoo validate [params.yaml]          check a params file, running nothing
python -m nlpzoo translate --run RUN [FILE]      translate lines (stdin by default) with the
                                                 trained translation run models/RUN/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nlpzoo.errors import NlpzooError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nlpzoo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("validate", help="validate params.yaml (keys, types, values)")
    check.add_argument("params", nargs="?", default="params.yaml", type=Path)
    tr = sub.add_parser("translate", help="translate source lines with a trained run")
    tr.add_argument("--run", required=True, help="a translation run trained into models/RUN/")
    tr.add_argument("input", nargs="?", type=Path, help="source lines (default: stdin)")
    tr.add_argument("--beam", type=int, default=None, help="beam size (default: the run's)")
    tr.add_argument("--models", type=Path, default=Path("models"), help="the models/ folder")
    args = parser.parse_args(argv)
    if args.command == "translate":
        return _translate(args)
    if args.command == "validate":
        from nlpzoo.cli import load_params

        try:
            params = load_params(args.params)
        except NlpzooError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{args.params}: ok ({len(params['models'])} runs: {', '.join(params['models'])})")
    return 0


def _translate(args: argparse.Namespace) -> int:
    from nlpzoo.mt_runner import translate_lines

    try:
        if args.input is not None:
            lines = args.input.read_text(encoding="utf-8").splitlines()
        else:
            lines = sys.stdin.read().splitlines()
        for line in translate_lines(args.models / args.run, lines, beam_size=args.beam):
            print(line)
    except NlpzooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
