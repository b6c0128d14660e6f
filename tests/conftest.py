import os
from pathlib import Path

# Offline data: use the shared mirror beside the project unless the caller chose another.
_MIRROR = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
if not os.environ.get("NLPZOO_DATA_MIRROR") and _MIRROR.is_dir():
    os.environ["NLPZOO_DATA_MIRROR"] = str(_MIRROR.resolve())
