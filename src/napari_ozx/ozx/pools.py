"""The process's long-lived thread pools, one per purpose, made on first use.

Remote reads (``ozx-io``, ``ozx-ahead``), their planning (``ozx-browse``), chunk decoding
(``ozx-decode``) and local-header reads (``ozx-member``) each have their own pool
(:func:`shared_pool`), so one kind of work never queues behind another; a pool's own
thread must not wait on a job of the same pool (:func:`in_pool`). The request pools
(:func:`light_pool`, :class:`LightPool`) hand out no ``Future`` per job: fewer objects for
the garbage collector while browsing. :class:`Later` (:func:`later`, one thread) calls the
latest function per key a moment from now: read-ahead waits there until napari has drawn.
Why no futures: ``docs/design/reading.md``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["Later", "LightPool", "in_pool", "later", "light_pool", "shared_pool"]

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


class Later:
    """Calls made a moment from now on one thread (``name``, a daemon, made on first
    use), the latest per key: :meth:`call` under a key that still waits replaces the
    function and keeps the earlier time, so calls made again and again (a user holding
    the arrow key) still run, at most ``delay`` after the first. The functions must be
    quick (they hand work on to a pool); one that raises is logged."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._due: dict[Hashable, tuple[float, Callable[[], object]]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._running = 0

    def call(self, key: Hashable, delay: float, fn: Callable[[], object]) -> None:
        """Run ``fn()`` in ``delay`` seconds, unless another call under ``key`` comes
        first: then that one's function runs instead, at the earlier of the two times."""
        with self._cond:
            if self._stopped:
                raise RuntimeError(f"{self.name} is shut down")
            when = time.monotonic() + delay
            old = self._due.get(key)
            self._due[key] = (when if old is None else min(old[0], when), fn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def pending(self) -> int:
        """How many calls wait or run."""
        with self._cond:
            return len(self._due) + self._running

    def shutdown(self) -> None:
        """Drop the calls waiting and end the thread (the process's own lives as long as
        it; tests shut theirs down)."""
        with self._cond:
            self._stopped = True
            self._due.clear()
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    if not self._due:
                        self._cond.wait()
                        continue
                    key = min(self._due, key=lambda k: self._due[k][0])
                    wait = self._due[key][0] - time.monotonic()
                    if wait <= 0:
                        fn = self._due.pop(key)[1]
                        self._running = 1
                        break
                    self._cond.wait(wait)
            try:
                fn()
            except Exception:
                logger.exception("a delayed call of %s failed", self.name)
            del fn
            with self._cond:
                self._running = 0


_later: dict[str, Later] = {}


def later(name: str = "ozx-later") -> Later:
    """The :class:`Later` called ``name``, made once."""
    return _once(_later, name, lambda: Later(name))
