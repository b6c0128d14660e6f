"""Shared start-up of the stage scripts: logging, params loading and validation, clean errors."""

from __future__ import annotations

import errno
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlpzoo.errors import NlpzooError


def load_params(path: Path = Path("params.yaml")) -> dict[str, Any]:
    from nlpzoo.params import load_params as load

    return load(path)


def root() -> Path:
    """Where a stage reads and writes: the working directory, which DVC sets to the stage's own
    copy of the project. Not `DVC_ROOT`: for a queued or `--temp` experiment DVC points that at
    the parent repository (so MLflow logs there, see tracking.py) while the stage runs in a
    temporary copy, and writing outputs to the parent would leave the copy without them."""
    return Path.cwd().resolve()


def run_stage(main: Callable[[list[str]], Any]) -> None:
    """Run a stage's `main(argv)`; a user error prints one clear line and exits with status 1."""
    logging.basicConfig(
        level=os.environ.get("NLPZOO_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    # a deprecation inside Lightning itself, printed once per process; nothing a user can act on
    warnings.filterwarnings("ignore", message=r".*treespec.*LeafSpec.*")
    for noisy in ("alembic", "mlflow", "pytorch_lightning", "lightning", "lightning_fabric"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        main(sys.argv[1:])
    except NlpzooError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit as e:
        # Lightning stops training on SIGTERM by raising SIGTERMException, a SystemExit with
        # status 0: a stage cut short must fail (and its checkpoint lets a rerun resume)
        if type(e).__name__ != "SIGTERMException":
            raise
        print("terminated; rerun the stage to resume from its checkpoint", file=sys.stderr)
        sys.exit(128 + 15)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # outputs are written under a temporary name and renamed at the end: nothing is lost
        print(
            f"error: disk full while writing {e.filename or 'an output'} ({e.strerror}); the "
            "previous outputs are unchanged; free some space and rerun",
            file=sys.stderr,
        )
        sys.exit(1)
