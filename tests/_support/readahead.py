"""Waiting for the remote read-ahead in tests: what napari's reads so far planned has run."""

from __future__ import annotations

import threading
import time


def wait_idle(timeout: float = 10.0, delayed: bool = True) -> None:
    """Wait until every prefetch napari's reads so far have planned was started (the
    read-ahead's delay passed, unless not ``delayed``; the planner's queue drained: each
    of its threads reaches a barrier behind it), then until no remote chunk fetch is in
    flight. Raises ``AssertionError`` on a hang."""
    from napari_ozx.ngff.read import fastread
    from napari_ozx.ngff.read.browse import PLANNER_THREADS, _planner_pool
    from napari_ozx.ozx.pools import later

    end = time.monotonic() + timeout
    while delayed and later().pending():
        if time.monotonic() > end:
            raise AssertionError("a read-ahead still waits to start")
        time.sleep(0.01)
    barrier = threading.Barrier(PLANNER_THREADS + 1)
    for _ in range(PLANNER_THREADS):
        _planner_pool().submit(barrier.wait, timeout)
    barrier.wait(timeout)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with fastread._inflight_lock:
            if not fastread._inflight:
                return
        time.sleep(0.01)
    raise AssertionError("remote fetches still in flight")
