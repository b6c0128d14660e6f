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
# `make test` runs the suite on every core (`-n auto --dist loadscope`, pyproject.toml). A work
# unit, which one worker takes whole, is a module (its module fixtures are built once), or a
# group of GROUPS: the tests that take one costly session fixture, so that it is built once.
# The units whose tests take the longest go out first (SLOW_FIRST), the rest in the order they
# were collected, so that no worker is left with a long one at the end.

# session fixture -> the tests that take it (node ids, or their start); each group is a unit
GROUPS = {
    "toy_reference": (  # the reference toy pipeline, tests/pipeline/conftest.py
        "tests/pipeline/test_pipeline.py::",
        "tests/pipeline/test_repro.py::test_a_toy_pipeline_on_every_core_keeps_going_past_a_fail",
        "tests/pipeline/test_repro_interrupt.py::",
    ),
}
# the units of half a minute or more, longest first (measured with `pytest --durations=0`)
SLOW_FIRST = (
    "toy_reference",  # built, reproduced, copied, experimented on: 5 to 7 minutes
    "tests/pipeline/test_run_cache.py",
    "tests/tracking/test_registry.py",
    "tests/training/test_training_resume.py",
    "tests/pipeline/test_determinism.py",
    "tests/training/test_training_ddp.py",
    "tests/pipeline/test_repro_signals.py",
    "tests/models/test_word2vec_kernel.py",
)


def _unit(nodeid: str) -> str:
    """The work unit of a test: its group of GROUPS, else its module."""
    for group, tests in GROUPS.items():
        if nodeid.startswith(tests):
            return group
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: none without it
def pytest_xdist_make_scheduler(config, log):
    """Under `--dist loadscope`: modules and GROUPS as the work units (`_unit`), in the order of
    the workers' collection (SLOW_FIRST first, `pytest_collection_modifyitems`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # not by their number of tests
    return ModulesAndGroups(config, log)


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker, SLOW_FIRST's units first, in that order (every worker collects
    the same order, which the scheduler follows)."""
    if hasattr(config, "workerinput"):
        rank = {unit: i for i, unit in enumerate(SLOW_FIRST)}
        items.sort(key=lambda item: rank.get(_unit(item.nodeid), len(SLOW_FIRST)))  # stable


@pytest.fixture(autouse=True)
def _in_the_group_of_its_session_fixture(request):
    """A test that takes a session fixture of GROUPS must be in its group: else pytest-xdist
    could give it to another worker, which would build the fixture again."""
    for group in GROUPS:
        if group in request.fixturenames and _unit(request.node.nodeid) != group:
            pytest.fail(f"it takes `{group}`: add it to GROUPS in tests/conftest.py")
