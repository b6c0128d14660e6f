"""Atomic writes: write a temporary sibling, then rename, so no half-written output remains."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temp file next to `path`; on success rename it over `path`, on error remove it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with open(tmp, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Build a directory under a temp name; on success replace `path` with it as a whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def global_rank() -> int:
    """This process's rank in a DDP job started one process per rank (torchrun, SLURM), as
    Lightning reads it from the launcher's variables; 0 otherwise."""
    from pytorch_lightning.utilities import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0) or 0)


@contextlib.contextmanager
def rank_zero_dir(path: Path) -> Iterator[Path]:
    """`atomic_dir(path)` on rank 0; a throwaway folder on the other ranks, so that when every
    rank runs the stage, only rank 0 writes the outputs."""
    if global_rank() == 0:
        with atomic_dir(path) as tmp:
            yield tmp
    else:
        with tempfile.TemporaryDirectory(prefix=f"nlpzoo-rank{global_rank()}-") as tmp:
            yield Path(tmp)


def remove_checkpoints(ckpt_dir: Path) -> None:
    """Delete a run's checkpoint folder, refusing any path that is not a folder directly inside
    a `checkpoints/` folder (a run name such as `..` must never empty the project)."""
    from nlpzoo.errors import ConfigError

    resolved = Path(ckpt_dir).resolve()
    from nlpzoo.layout import CHECKPOINTS

    if resolved.parent.name != CHECKPOINTS or resolved.name in ("", ".", ".."):
        raise ConfigError(f"refusing to delete {ckpt_dir}: not a run's folder inside checkpoints/")
    shutil.rmtree(resolved, ignore_errors=True)
