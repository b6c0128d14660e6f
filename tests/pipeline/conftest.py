"""The reference toy pipeline that the pipeline tests share: built and reproduced once per session.

A test that only reads its outputs takes `reference`; one that changes anything (a repro, an
experiment, a commit) takes a copy of it (`toy.copy_project`), never the reference itself. Under
pytest-xdist the tests that take it are in one group (`xdist_group("reference")`), so that it is
built once."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from toy import copy_project, pipeline_env, reference_params, run_checked, write_pipeline


@dataclass(frozen=True)
class Reference:
    """The reproduced reference project: its root (a git repository with DVC), the environment
    its commands run in, the output of the `dvc repro` that reproduced it from nothing, and the
    folder where each of its stage processes wrote the nlpzoo modules it loaded."""

    root: Path
    env: dict
    output: str
    traces: Path

    def copy(self, dest: Path) -> Reference:
        """A copy of the project at `dest` (and of the traces beside it), a project of its own."""
        copy_project(self.root, dest)
        traces = shutil.copytree(self.traces, dest.with_name(f"{dest.name}-traces"))
        env = {**self.env, "NLPZOO_TRACE_MODULES": str(traces)}
        return Reference(dest, env, self.output, Path(traces))


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Reference:
    """The reference toy pipeline (`toy.reference_params`: ngram, nnlm and SVD on the toy corpus
    in the project's inputs/, registered in MLflow) after a plain `dvc repro` from nothing, its
    first state committed to git. Read it; copy it (`Reference.copy`) to change it."""
    repo = tmp_path_factory.mktemp("reference") / "project"
    traces = tmp_path_factory.mktemp("reference-traces")
    env = pipeline_env(NLPZOO_TRACE_MODULES=str(traces))
    write_pipeline(repo, reference_params(repo / "inputs"), env, git=True)
    output = run_checked(["dvc", "repro"], repo, env)
    return Reference(repo, env, output, traces)
