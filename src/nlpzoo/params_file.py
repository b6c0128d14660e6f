"""The one params loader of the stages, `repro` and the commands: params.yaml read, checked as a
whole (`nlpzoo.params.validate_params`), and dvc.yaml checked against it and the code.

A driver module (docs/design.md §6): it refuses or hands over params.yaml's mapping as YAML read
it, so no stage depends on it. It sits above `nlpzoo.pipeline`, whose checks it calls, which sits
above `nlpzoo.params` (docs/design.md §1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlpzoo.params import read_params, validate_params
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
