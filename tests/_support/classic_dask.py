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

import functools
import inspect
import os
import pickle
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
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
    query planning off when it is on here, else in this process."""

    @functools.wraps(fn)
    def run(*args: Any) -> T:
        if not QUERY_PLANNING:
            return fn(*args)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.pickle"
            code = (
                "import pickle\n"
                f"from {fn.__module__} import {fn.__name__} as fn\n"
                f"result = fn.__wrapped__(*pickle.loads({pickle.dumps(args)!r}))\n"
                f"open({str(out)!r}, 'wb').write(pickle.dumps(result))\n"
            )
            env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": "False"}
            root = str(ROOT)
            subprocess.run([sys.executable, "-c", code], env=env, cwd=root, check=True, timeout=600)
            return pickle.loads(out.read_bytes())  # type: ignore[no-any-return]

    return run


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
