"""One BLAS thread for query-time linear algebra, through one shared ``threadpoolctl`` controller.

WHY: numpy's OpenBLAS runs a matrix product on as many threads as there are cores. A query's
products are small: the snapshot's 3,681 x 384 vectors times one query vector take 0.4 ms on one
thread but took 16 ms (median of 20) on two on the shared 2-core machine, where the second thread
waits for a busy core; six searches per `ask` paid that six times. One thread gives the same
numbers: OpenBLAS splits a product by output rows, each computed whole by one thread with the same
kernel (``tests/test_blas_threads.py`` checks the searches' vectors and results). The controller
finds the BLAS libraries once per process (5-20 ms); the USE embedder shares it.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable


@functools.lru_cache(maxsize=1)
def blas_limit() -> Callable[..., Any] | None:
    """``ThreadpoolController().limit`` (call it as ``limit(limits=1, user_api="blas")``), or None
    without threadpoolctl (numpy's default threads then stand)."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # noqa: BLE001 - without threadpoolctl, or libraries it cannot inspect
        return None


def one_blas_thread() -> contextlib.AbstractContextManager:
    """``with one_blas_thread(): ...``: numpy's BLAS on one thread inside the block."""
    limit = blas_limit()
    return limit(limits=1, user_api="blas") if limit is not None else contextlib.nullcontext()
