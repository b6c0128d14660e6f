"""Command line: `python -m nlpzoo validate [params.yaml]` checks a params file, running nothing."""

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
    args = parser.parse_args(argv)
    if args.command == "validate":
        from nlpzoo.cli import load_params

        try:
            params = load_params(args.params)
        except NlpzooError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{args.params}: ok ({len(params['models'])} runs: {', '.join(params['models'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
