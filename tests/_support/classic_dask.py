"""Tests under dask's array query planning (``DASK_ARRAY__QUERY_PLANNING=True``).

``scripts/test-newest.sh`` runs the whole suite twice on the newest releases: with the
classic ``dask.array.Array`` and with query planning's array. napari-ozx works under
both (levels are :class:`napari_ozx.ngff.read.lazy.LevelArray` there, saves compute dask
sources through dask's public calls). What cannot run in-process under query planning
is other people's code:

* ome-zarr-py and ngff-zarr call dask functions query planning does not have
  (``Array.chunksize``, ``to_zarr``, ``store``) or cannot tokenise (ngff-zarr's zarrista
  adapter): their *writers* run in a child process with it off
  (:func:`in_child_without_query_planning`), so the files are still theirs and our reader
  is tested on them under query planning; tests where *they read* in-process are skipped
  here (:func:`peer_in_process`) and run in the same suite's classic run.
* napari cannot show a query-planning dask array: ``np.asarray`` of one is an object
  array of dask arrays (dask issue #11922), and napari slices with ``np.asarray``.
* query planning tokenises every function given to ``map_blocks`` by pickling it: a
  test's closure over a lock or an event is wrapped in :func:`tokened`.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from napari_ozx._compat import dask_query_planning
from tests._support.paths import ROOT

QUERY_PLANNING = dask_query_planning()

T = TypeVar("T")


def peer_in_process(what: str) -> None:
    """Skip the rest of this test under query planning: *what* (another tool's code, or
    napari showing a dask array) does not work there. The classic run tests it."""
    if QUERY_PLANNING:
        pytest.skip(
            f"{what}: not under dask's array query planning; the suite's run without it tests this"
        )


def in_child_without_query_planning(fn: Callable[..., T]) -> Callable[..., T]:
    """*fn* (module level, picklable arguments and result) runs in a child process with
    query planning off when it is on here, else in this process. The child is started
    once per test process and kept (:class:`ClassicChild`): importing the other tools
    there took seconds per call, which made the query-planning run twice as long."""

    @functools.wraps(fn)
    def run(*args: Any) -> T:
        if not QUERY_PLANNING:
            return fn(*args)
        return _child().call(fn.__module__, fn.__name__, args)  # type: ignore[no-any-return]

    return run


class ClassicChild:
    """A Python child with dask's query planning off that runs ``module.name(*args)``
    (the undecorated function) for the parent, one call at a time, over two pipes."""

    TIMEOUT_S = 600.0

    def __init__(self) -> None:
        from multiprocessing.connection import Connection

        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        code = f"from tests._support.classic_dask import serve; serve({from_parent}, {to_parent})"
        env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": "False"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            cwd=str(ROOT),
            pass_fds=(from_parent, to_parent),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(from_parent)
        os.close(to_parent)
        self.out = Connection(to_child, readable=False)
        self.back = Connection(from_child, writable=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, module: str, name: str, args: tuple[Any, ...]) -> Any:
        try:
            self.out.send((module, name, args))
            ready = self.back.poll(self.TIMEOUT_S)
            reply = self.back.recv() if ready else None
        except (EOFError, OSError):
            reply = None
        if reply is None:
            self.close()
            raise RuntimeError(
                f"{module}.{name} in the classic-dask child: no answer "
                f"(exit code {self.proc.returncode}, or over {self.TIMEOUT_S:.0f} s)"
            )
        ok, value = reply
        if not ok:
            raise RuntimeError(f"{module}.{name} failed in the classic-dask child:\n{value}")
        return value

    def close(self) -> None:
        for conn in (self.out, self.back):
            conn.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def serve(from_parent: int, to_parent: int) -> None:
    """The child's loop: call what the parent sends until it closes its pipe."""
    import importlib
    import traceback
    from multiprocessing.connection import Connection

    inbox = Connection(from_parent, writable=False)
    outbox = Connection(to_parent, readable=False)
    while True:
        try:
            module, name, args = inbox.recv()
        except EOFError:
            return
        try:
            fn = getattr(importlib.import_module(module), name)
            reply: tuple[bool, Any] = (True, fn.__wrapped__(*args))
            outbox.send(reply)
        except BaseException:
            outbox.send((False, traceback.format_exc()))


_CHILD: list[ClassicChild] = []


def _child() -> ClassicChild:
    """This process's child, started on first use and again if it died."""
    if not _CHILD or not _CHILD[0].alive():
        if _CHILD:
            _CHILD.pop().close()
        else:
            atexit.register(lambda: _CHILD and _CHILD.pop().close())
        _CHILD.append(ClassicChild())
    return _CHILD[0]


class tokened:
    """*fn* for ``map_blocks`` with a token of its own: query planning names a task by
    pickling its function, which a closure over a lock or an event cannot be."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)  # map_blocks reads its signature (block_info)
        self.__signature__ = inspect.signature(fn)
        self.fn = fn
        self.token = uuid.uuid4().hex

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("test-fn", self.token)
