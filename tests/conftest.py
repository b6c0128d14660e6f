import os
from pathlib import Path

import pytest

# Offline data: use the shared mirror beside the project unless the caller chose another.
_MIRROR = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
if not os.environ.get("NLPZOO_DATA_MIRROR") and _MIRROR.is_dir():
    os.environ["NLPZOO_DATA_MIRROR"] = str(_MIRROR.resolve())


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """A run sets torch's thread count from `trainer.threads` for its whole process; restore it
    after each test so that no test depends on which tests ran before it."""
    import torch

    before = torch.get_num_threads()
    yield
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def one_thread():
    """One thread for torch and for the BLAS and OpenMP pools, for a module whose tests compare
    numbers of one-thread runs or time them (another job may be using the other cores). A module
    takes it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="session")
def _cpu_without_native_bf16():
    """Runs trained in the test process see a CPU without native bf16, so `trainer.precision:
    auto` is 32-true and their numbers are fp32's on every machine (a CPU with `avx512_bf16`
    or `amx_bf16` would train in bf16-mixed). Session-wide, so that module fixtures which train
    a reference run see it too. Tests of the rule pass the flags in; a test that starts a
    training subprocess pins the precision in its params."""
    from nlpzoo.training import trainer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "cpu_flags", lambda cpuinfo=None: set())
        yield
