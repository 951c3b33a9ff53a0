"""Everything napari-ozx uses that another package does not promise, in one place.

The rest of the package uses public API only (``grep -rn "zarr\\.core\\|_Array__\\|
sys\\._getframe" src`` finds nothing outside this module; ``tests/test_compat.py``
checks it, and checks each item below against the installed versions, so a release
that changes one fails a test instead of a user's read).

Each use says what it is for, what it was checked against, and what happens when it is
gone:

* ``zarr_sync``: ``zarr.core.sync.sync`` runs a coroutine on zarr's own event loop.
  zarr's async objects (stores, ``AsyncArray``) are bound to that loop, so batched
  metadata reads must run there; zarr has no public equivalent. Checked against zarr
  3.1.6 and 3.4.2.
* ``npe2_reading_plugin``: the plugin npe2 is reading with, found on the call stack
  (``npe2.io_utils._read`` and its ``plugin_name`` argument). npe2 passes a reader
  nothing but the path; this tells "the user picked napari-ozx" from "napari asks every
  reader". Checked against npe2 0.10.0; if npe2 reorganises, it answers None and
  the reader declines as before.
* ``new_dask_view``: a classic ``dask.array.Array`` (subclass) made without
  ``Array.__new__``: its name, chunks and meta set through dask's ``_name`` / ``_chunks``
  properties and ``_meta`` / ``_cached_keys`` slots. napari makes up to three views per
  tile; the public constructor (normalising chunks and meta, annotating a graph layer
  the view does not have yet) costs ~45 us a view against ~12 us, ~10% of a tile read.
  Checked against dask 2026.8.0; where those slots or properties are not there, the
  public constructor is used (same array, slower).
* ``dask_query_planning``: whether ``dask.array.Array`` is the query-planning (array
  expression) class, read from dask's own config the way ``dask.array`` reads it. Our
  direct tile path subclasses the classic ``Array``; under query planning levels are
  ``LevelArray`` instead (:func:`napari_ozx.ngff.lazy.lazy_array`).
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from types import FrameType
from typing import Any

__all__ = [
    "CHECKED_AGAINST",
    "dask_query_planning",
    "fast_dask_views",
    "new_dask_view",
    "npe2_reading_plugin",
    "zarr_sync",
]

#: the releases each item was checked against (tests/test_compat.py)
CHECKED_AGAINST = {
    "zarr": ("3.1.6", "3.4.2"),
    "dask": ("2026.8.0",),
    "npe2": ("0.10.0",),
}


def zarr_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run *coro* on zarr's event loop and return its result (thread-safe)."""
    from zarr.core.sync import sync

    return sync(coro)


def npe2_reading_plugin(max_depth: int = 12, skip: int = 2) -> str | None:
    """The ``plugin_name`` npe2's read loop was called with (None: not named, or not
    called from npe2). *skip* frames above this one are the caller's own."""
    frame: FrameType | None
    try:
        frame = sys._getframe(skip)
    except ValueError:  # pragma: no cover - shallow stack
        return None
    for _ in range(max_depth):
        if frame is None:
            return None
        if frame.f_code.co_name == "_read" and frame.f_globals.get("__name__") == "npe2.io_utils":
            name = frame.f_locals.get("plugin_name")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def dask_query_planning() -> bool:
    """Whether ``dask.array.Array`` is the array-expression class (query planning)."""
    import dask.array as da

    return da.Array.__module__.startswith("dask.array._array_expr")


def fast_dask_views() -> bool:
    """Whether :func:`new_dask_view` can skip dask's constructor (the slots and
    properties it sets are there)."""
    import dask.array as da

    slots = set(getattr(da.Array, "__slots__", ()))
    props = all(isinstance(da.Array.__dict__.get(n), property) for n in ("_name", "_chunks"))
    return {"__name", "__chunks", "_cached_keys", "_meta"} <= slots and props


def new_dask_view(cls: type, name: str, chunks: tuple[tuple[int, ...], ...], meta: Any) -> Any:
    """An instance of *cls* (a subclass of the classic ``dask.array.Array`` whose graph
    is set later) with exact *chunks* and *meta*, made the fast way where
    :func:`fast_dask_views`, else by dask's public constructor with an empty graph."""
    if _FAST_VIEWS is None:
        _init_views()
    if _FAST_VIEWS:
        obj: Any = object.__new__(cls)
        obj._cached_keys = None
        obj._name = name
        obj._chunks = chunks
        obj._meta = meta
        return obj
    import dask.array as da

    return da.Array.__new__(cls, _EMPTY_GRAPH, name, chunks, meta=meta)


_FAST_VIEWS: bool | None = None
_EMPTY_GRAPH: Any = None


def _init_views() -> None:
    global _FAST_VIEWS, _EMPTY_GRAPH
    from dask.highlevelgraph import HighLevelGraph

    _EMPTY_GRAPH = HighLevelGraph({}, {})
    _FAST_VIEWS = fast_dask_views()
