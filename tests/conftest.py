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
