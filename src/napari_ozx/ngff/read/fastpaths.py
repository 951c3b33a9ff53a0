"""The switch and the log of napari-ozx's fast paths.

Two paths read pixels faster than the general one and give the same pixels and errors
(tests compare them): :mod:`.lazy` (napari's tiles read the level's reader directly
instead of through a dask graph) and :mod:`.fastread` (chunks decoded by numcodecs
without zarr-python's codec pipeline). Each declines what it does not reproduce exactly
(a codec, a data type, a chunk grid, dask's query planning), and then zarr-python and
dask read as usual.

* A decline is said once per reason in the log (logger ``napari_ozx.ngff.read.fastpaths``,
  INFO), so "why is this file slower" has an answer.
* ``NAPARI_OZX_FAST_PATHS=0`` turns both off, for a user ruling them out when a tile
  looks wrong (read when an array is opened, so it applies to files opened after it is
  set).
"""

from __future__ import annotations

import logging
import os
import threading

__all__ = [
    "ENV",
    "READAHEAD_DEFAULT_MB",
    "READAHEAD_ENV",
    "declined",
    "enabled",
    "readahead_budget",
    "set_readahead_mb",
]

logger = logging.getLogger(__name__)

ENV = "NAPARI_OZX_FAST_PATHS"
#: MiB of remote planes fetched ahead of the one shown (:mod:`.browse`); 0 turns it off
READAHEAD_ENV = "NAPARI_OZX_READAHEAD_MB"
READAHEAD_DEFAULT_MB = 192
_said: set[tuple[str, str]] = set()
_lock = threading.Lock()


def enabled() -> bool:
    """False when ``NAPARI_OZX_FAST_PATHS`` is 0 / false / no / off (said once)."""
    off = os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off")
    if off:
        declined("all fast paths", f"turned off by {ENV}={os.environ[ENV]}")
    return not off


def declined(path: str, reason: str) -> None:
    """Log once that the fast path *path* is not taken, and why."""
    with _lock:
        if (path, reason) in _said:
            return
        _said.add((path, reason))
    logger.info("napari-ozx fast path '%s' not used: %s (the general path reads)", path, reason)


_budget: int | None = None


def readahead_budget() -> int:
    """Bytes of remote planes :mod:`.browse` fetches ahead of the one shown:
    ``NAPARI_OZX_READAHEAD_MB`` (MiB, 0 turns read-ahead off; default
    :data:`READAHEAD_DEFAULT_MB`), else what :func:`set_readahead_mb` set."""
    if _budget is not None:
        return _budget
    raw = os.environ.get(READAHEAD_ENV, "").strip()
    if raw:
        try:
            mb = float(raw)
            if mb >= 0:
                return int(mb * 2**20)
        except ValueError:
            pass
        declined("read-ahead", f"{READAHEAD_ENV}={raw!r} is not a number of MiB >= 0: default used")
    return READAHEAD_DEFAULT_MB << 20


def set_readahead_mb(mb: float | None) -> None:
    """Set the read-ahead budget in MiB for this process (0: off; None: back to
    ``NAPARI_OZX_READAHEAD_MB`` / the default)."""
    global _budget
    if mb is not None and not mb >= 0:
        raise ValueError(f"read-ahead budget must be >= 0 MiB, got {mb!r}")
    _budget = None if mb is None else int(mb * 2**20)
