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

__all__ = ["CHECKED_AGAINST", "dask_query_planning", "npe2_reading_plugin", "zarr_sync"]

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
