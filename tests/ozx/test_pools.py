"""The process's thread pools: the light request pools run every job on named threads,
at most ``workers`` at once, and ``map`` keeps order and raises the first error in order
once every job has ended. ``Later`` runs the latest call per key, no later than the
first one asked."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from napari_ozx.ozx.pools import Later, LightPool, in_pool


@pytest.fixture
def make_pool() -> Iterator:
    made: list[LightPool] = []

    def make(name: str, workers: int) -> LightPool:
        made.append(LightPool(name, workers))
        return made[-1]

    yield make
    for pool in made:
        pool.shutdown()
        assert not [t for t in threading.enumerate() if t.name.startswith(f"{pool.name}_")]


def test_submit_runs_every_job_on_at_most_workers_named_threads(make_pool):
    pool = make_pool("test-light", 3)
    names: set[str] = set()
    running, most, ended = [0], [0], [0]
    lock = threading.Lock()
    all_done = threading.Event()

    def job() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            names.add(threading.current_thread().name)
        time.sleep(0.02)  # long enough for the others to queue
        with lock:
            running[0] -= 1
            ended[0] += 1
            if ended[0] == 12:
                all_done.set()

    for _ in range(12):
        pool.submit(job)
    assert all_done.wait(10)
    assert most[0] == 3
    assert names == {"test-light_0", "test-light_1", "test-light_2"}


def test_map_keeps_order_and_runs_concurrently(make_pool):
    pool = make_pool("test-map", 8)
    gate = threading.Barrier(8)

    def f(x: int) -> tuple[int, bool]:
        gate.wait(10)  # only returns if all 8 run at once
        return x * x, in_pool("test-map")

    assert pool.map(f, range(8)) == [(x * x, True) for x in range(8)]
    assert pool.map(f, []) == []


def test_map_raises_the_first_error_in_order_after_every_job_ended(make_pool):
    pool = make_pool("test-err", 4)
    ended: list[int] = []

    def f(x: int) -> int:
        if x == 1:
            time.sleep(0.05)
            ended.append(x)
            raise ValueError("one")
        if x == 2:
            ended.append(x)
            raise KeyError("two")
        time.sleep(0.1)
        ended.append(x)
        return x

    with pytest.raises(ValueError, match="one"):
        pool.map(f, range(4))
    assert sorted(ended) == [0, 1, 2, 3]


def test_a_failing_job_is_logged_and_the_pool_goes_on(make_pool, caplog):
    pool = make_pool("test-log", 1)
    ran = threading.Event()

    def bad() -> None:
        raise RuntimeError("a bug")

    with caplog.at_level(logging.ERROR, logger="napari_ozx.ozx.pools"):
        pool.submit(bad)
        pool.submit(ran.set)
        assert ran.wait(10)
    assert "test-log" in caplog.text and "a bug" in caplog.text


@pytest.fixture
def make_later() -> Iterator:
    made: list[Later] = []

    def make(name: str) -> Later:
        made.append(Later(name))
        return made[-1]

    yield make
    for lt in made:
        lt.shutdown()
        assert not [t for t in threading.enumerate() if t.name == lt.name]


def _settled(lt: Later, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout  # a hang guard, not a speed check
    while lt.pending():
        if time.monotonic() > end:
            raise AssertionError("a call still waits")
        time.sleep(0.01)


def test_later_runs_the_latest_call_of_a_key_at_the_first_call_s_time(make_later):
    """A user holding the arrow key replans read-ahead on every step: the plan that runs
    is the newest, and it runs when the first one was due (a later call does not push
    it back, or read-ahead would never start)."""
    lt = make_later("test-later")
    ran: list[tuple[str, str]] = []
    lt.call("k", 0.3, lambda: ran.append(("first", threading.current_thread().name)))
    lt.call("k", 60.0, lambda: ran.append(("second", threading.current_thread().name)))
    assert lt.pending() == 1
    _settled(lt)  # well before the second call's 60 s
    assert ran == [("second", "test-later")]


def test_later_runs_calls_of_other_keys_in_time_order(make_later):
    lt = make_later("test-later-order")
    ran: list[str] = []
    lt.call("slow", 0.4, lambda: ran.append("slow"))
    lt.call("soon", 0.05, lambda: ran.append("soon"))
    lt.call("now", 0.0, lambda: ran.append("now"))
    _settled(lt)
    assert ran == ["now", "soon", "slow"]


def test_later_logs_a_failing_call_and_goes_on(make_later, caplog):
    lt = make_later("test-later-fail")

    def boom() -> None:
        raise ValueError("boom")

    ran: list[str] = []
    with caplog.at_level(logging.ERROR, logger="napari_ozx.ozx.pools"):
        lt.call("a", 0.0, boom)
        lt.call("b", 0.05, lambda: ran.append("b"))
        _settled(lt)
    assert ran == ["b"]
    assert any("test-later-fail" in r.getMessage() and r.exc_info for r in caplog.records)


def test_later_shutdown_drops_waiting_calls_and_ends_its_thread(make_later):
    lt = make_later("test-later-stop")
    ran: list[str] = []
    lt.call("a", 30.0, lambda: ran.append("a"))
    assert [t for t in threading.enumerate() if t.name == "test-later-stop"]
    lt.shutdown()
    assert lt.pending() == 0
    assert not [t for t in threading.enumerate() if t.name == "test-later-stop"]
    assert ran == []
    with pytest.raises(RuntimeError, match="shut down"):
        lt.call("b", 0.0, lambda: ran.append("b"))
