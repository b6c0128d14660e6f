"""Worker threads of the compiled kernels (nlpzoo.models.word2vec_kernel, glove_kernel).

The kernels release the GIL, so Python threads calling them run in parallel. A pool is made the
first time a kernel asks for that many threads and kept for the process: a run calls the kernel
once per Lightning step, and starting threads for every step would cost more than some steps.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_POOLS: dict[tuple[str, int], ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def thread_pool(name: str, threads: int) -> ThreadPoolExecutor:
    """The process's pool of `threads` threads named `name`_0, `name`_1, ..."""
    with _LOCK:
        key = (name, threads)
        if key not in _POOLS:
            _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix=name)
        return _POOLS[key]
