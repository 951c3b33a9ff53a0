"""The process's long-lived thread pools, one per purpose, made on first use.

Remote reads (``ozx-io``, ``ozx-ahead``), their planning (``ozx-browse``), chunk decoding
(``ozx-decode``) and local-header reads (``ozx-member``) each have their own pool, so one
kind of work never queues behind another (a read napari waits for never waits for
read-ahead). Threads are named after their pool: a pool's own thread must not wait on a
job of the same pool (see :func:`in_pool`).

The request pools (:func:`light_pool`) hand out no ``Future`` per job: a remote plane sends
dozens of requests at once, and each ``Future`` (with its ``Condition``) is a dozen
objects for the garbage collector. Their bursts drove a young-generation collection
every ~100 ms of a remote browse, which brought forward the full collection of napari's
heap (~200 ms, every thread stopped) that a local browse does not meet.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["LightPool", "in_pool", "light_pool", "shared_pool"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")
_P = TypeVar("_P")

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def _once(made: dict[str, _P], name: str, make: Callable[[], _P]) -> _P:
    """``made[name]``, made by ``make()`` the first time (thread-safe)."""
    pool = made.get(name)
    if pool is None:
        with _lock:
            pool = made.get(name)
            if pool is None:
                pool = made[name] = make()
    return pool


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The pool called ``name`` (``workers`` threads, named ``name_N``), made once."""
    return _once(_pools, name, lambda: ThreadPoolExecutor(workers, thread_name_prefix=name))


def in_pool(*names: str) -> bool:
    """Whether the calling thread is one of these pools' threads."""
    return threading.current_thread().name.startswith(tuple(f"{n}_" for n in names))


class LightPool:
    """Up to ``workers`` named threads (``name_N``, made as jobs arrive) running callables
    from one queue: :meth:`submit` returns nothing (a job settles its own outcome) and
    :meth:`map` waits on one lock, not a ``Future`` per job. Threads are daemons: they
    only read, and live as long as the process."""

    def __init__(self, name: str, workers: int) -> None:
        self.name = name
        self.workers = workers
        self._jobs: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0

    def submit(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on a pool thread; an exception it raises is logged, not raised."""
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and self._threads < self.workers
            if start:
                self._threads += 1
                n = self._threads
        self._jobs.put(fn)
        if start:
            threading.Thread(target=self._work, name=f"{self.name}_{n - 1}", daemon=True).start()

    def map(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        """``[fn(x) for x in items]`` run concurrently; the first exception in order is
        raised once all are done. Not from this pool's own threads (it would wait on
        itself)."""
        todo = list(items)
        out: list[object] = [None] * len(todo)
        failed: list[BaseException | None] = [None] * len(todo)
        left = [len(todo)]
        done = threading.Lock()
        done.acquire()
        count = threading.Lock()

        def one(i: int, x: _T) -> None:
            try:
                out[i] = fn(x)
            except BaseException as e:
                failed[i] = e
            with count:
                left[0] -= 1
                last = left[0] == 0
            if last:
                done.release()

        if not todo:
            return []
        for i, x in enumerate(todo):
            self.submit(lambda i=i, x=x: one(i, x))  # type: ignore[misc]
        done.acquire()
        for e in failed:
            if e is not None:
                raise e
        return out  # type: ignore[return-value]

    def shutdown(self) -> None:
        """Let every thread end once the jobs queued before are done (waits for them).
        The process's own pools live as long as it; tests shut theirs down."""
        with self._lock:
            threads, self.workers = self._threads, 0  # no new thread from here on
        mine = [t for t in threading.enumerate() if t.name.startswith(f"{self.name}_")]
        for _ in range(threads):
            self._jobs.put(_STOP)
        for t in mine:
            t.join()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            if job is _STOP:
                return
            try:
                job()
            except BaseException:  # a job settles its own errors; this is a bug
                logger.exception("a job of pool %s failed", self.name)
            del job


def _STOP() -> None:
    """Queued by :meth:`LightPool.shutdown`: the thread that takes it ends."""


_light: dict[str, LightPool] = {}


def light_pool(name: str, workers: int) -> LightPool:
    """The :class:`LightPool` called ``name``, made once."""
    return _once(_light, name, lambda: LightPool(name, workers))
