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


@pytest.fixture
def no_tracking(monkeypatch):
    """MLflow off for the test: `Tracker.start` gives a tracker that records nothing
    (`toy.inactive`), for tests that do not look at MLflow."""
    from nlpzoo.tracking import Tracker
    from toy import inactive

    monkeypatch.setattr(Tracker, "start", classmethod(inactive))


# ------------------------------------------------------------------------- pytest-xdist
# `make test` runs the suite on every core (`-n auto --dist loadgroup`, pyproject.toml). A work
# unit a worker takes whole is a module, or every test of an `xdist_group` (the tests of the
# reference toy pipeline, tests/pipeline/conftest.py): a module's fixtures and a group's
# session fixture are built once. The units whose tests take the longest go out first, the rest
# in the order they were collected, so that no worker is left with a long one at the end.

# the work units of half a minute or more, longest first (measured with `pytest --durations=0`)
SLOW_FIRST = (
    "reference",  # the reference toy pipeline: built, reproduced, copied, experimented on
    "tests/pipeline/test_run_cache.py",
    "tests/pipeline/test_determinism.py",
    "tests/pipeline/test_repro_signals.py",
)


def _unit(nodeid: str) -> str:
    """The work unit of a test: its `xdist_group` (the node id's `@group`), else its module."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.split("@")[-1]
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: none without it
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadgroup`: whole modules and groups as work units (`_unit`), the slow
    ones first (SLOW_FIRST)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # the order is the collection's (below)
    return ModulesAndGroups(config, log)


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker under `--dist loadgroup`: the tests of SLOW_FIRST's units first,
    in that order (each worker collects the same order, which the scheduler follows)."""
    if not hasattr(config, "workerinput") or config.getvalue("dist") != "loadgroup":
        return

    def rank(item) -> int:
        groups = [m.args[0] for m in item.iter_markers("xdist_group")]
        unit = groups[0] if groups else item.nodeid.split("::", 1)[0]
        return SLOW_FIRST.index(unit) if unit in SLOW_FIRST else len(SLOW_FIRST)

    items.sort(key=rank)  # stable: within a unit and among the others, the collection's order


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread_per_worker(request):
    """On a pytest-xdist worker: torch uses one thread (the workers share the cores; a test that
    needs another count sets it, and `_keep_torch_threads` restores it)."""
    if hasattr(request.config, "workerinput"):
        import torch

        torch.set_num_threads(1)
    yield
