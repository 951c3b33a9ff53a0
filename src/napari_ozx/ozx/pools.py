"""The process's long-lived thread pools, one per purpose, made on first use.

Remote reads (``ozx-io``, ``ozx-ahead``), their planning (``ozx-browse``), chunk decoding
(``ozx-decode``) and local-header reads (``ozx-member``) each have their own pool, so one
kind of work never queues behind another (a read napari waits for never waits for
read-ahead). Threads are named after their pool: a pool's own thread must not wait on a
job of the same pool (see :func:`in_pool`).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["in_pool", "shared_pool"]

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The pool called ``name`` (``workers`` threads, named ``name_N``), made once."""
    pool = _pools.get(name)
    if pool is None:
        with _lock:
            pool = _pools.get(name)
            if pool is None:
                pool = _pools[name] = ThreadPoolExecutor(workers, thread_name_prefix=name)
    return pool


def in_pool(*names: str) -> bool:
    """Whether the calling thread is one of these pools' threads."""
    return threading.current_thread().name.startswith(tuple(f"{n}_" for n in names))
