import pytest


@pytest.fixture
def unseeded(monkeypatch):
    """`make_trainer` seeds the process (PL_GLOBAL_SEED, PL_SEED_WORKERS): undone after the test.
    A module takes it with `pytestmark = pytest.mark.usefixtures("unseeded")`."""
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
