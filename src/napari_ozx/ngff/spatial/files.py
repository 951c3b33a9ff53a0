"""The parquet files of SpatialData's points and shapes, read with pyarrow.

A local directory's files are memory-mapped by pyarrow (no copy through Python); a
``.ozx`` member or a remote file is read through the store. pyarrow and shapely are the
``napari-ozx[spatialdata]`` extra: without them, one :class:`SpatialDependencyError`
names it.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.read.documents import join_path, run_sync

__all__ = [
    "EXTRA",
    "SpatialDependencyError",
    "malloc_trim",
    "memory_pool",
    "parquet_parts",
    "parquet_schema",
    "read_parquet",
    "release_unused",
    "release_when_freed",
    "require",
]

#: the extra that installs what points and shapes need
EXTRA = "napari-ozx[spatialdata]"


class SpatialDependencyError(MetadataError):
    """pyarrow or shapely is missing (points and shapes need both)."""


def require(what: str = "pyarrow") -> Any:
    """Import *what* (``"pyarrow"``, ``"pyarrow.parquet"`` or ``"shapely"``), or raise
    :class:`SpatialDependencyError` naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(what)
    except ImportError:
        top = what.split(".")[0]
        raise SpatialDependencyError(
            f"SpatialData points and shapes need {top}, which is not installed (install {EXTRA})"
        ) from None


def _local_root(store: Any) -> str | None:
    from zarr.storage import LocalStore

    return str(store.root) if isinstance(store, LocalStore) else None


def parquet_parts(root: Any, path: str) -> list[str]:
    """The store keys of the parquet data at *path*: the file itself, or the
    ``part.N.parquet`` files of a directory (dask's layout), in part order."""
    local = _local_root(root.store)
    if local is not None:
        full = os.path.join(local, path)
        if os.path.isfile(full):
            return [path]
        if not os.path.isdir(full):
            return []
        names = os.listdir(full)
    else:

        async def listing() -> list[str]:
            return [p.rstrip("/") async for p in root.store.list_dir(path)]

        try:
            names = run_sync(listing())
        except (OSError, NotImplementedError):
            names = []
        if not names:
            from napari_ozx.ngff.tables.read import stored_size

            return [path] if stored_size(root.store, path) is not None else []
    parts = [n for n in names if n.endswith(".parquet")]

    def order(name: str) -> tuple[int, str]:
        m = re.search(r"(\d+)", name)
        return (int(m.group(1)) if m else -1, name)

    return [join_path(path, n) for n in sorted(parts, key=order)]


def read_parquet(root: Any, keys: Sequence[str], columns: Sequence[str] | None = None) -> Any:
    """The parquet files *keys* as one pyarrow Table (only *columns* when given), its
    buffers from :func:`memory_pool`, decoded on this thread."""
    pa = require("pyarrow")
    ds = require("pyarrow.dataset")
    local = _local_root(root.store)
    fmt = ds.ParquetFileFormat()
    fs = require("pyarrow.fs").LocalFileSystem(use_mmap=True) if local is not None else None
    tables = []
    for key in keys:
        if local is not None:
            fragment = fmt.make_fragment(os.path.join(local, key), filesystem=fs)
        else:
            from napari_ozx.ngff.tables.read import stored_bytes

            fragment = fmt.make_fragment(pa.BufferReader(stored_bytes(root.store, key)))
        tables.append(
            fragment.to_table(
                columns=list(columns) if columns is not None else None,
                use_threads=False,
                memory_pool=memory_pool(),
            )
        )
    if not tables:
        raise MetadataError(f"no parquet file in {keys!r}")
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def memory_pool() -> Any:
    """The arrow memory pool points and shapes are read into: the C library's malloc.

    arrow's default allocator (mimalloc) keeps part of what is freed (tens of MiB for
    millions of points, varying from run to run, and more from its worker threads'
    heaps, hence one thread) even when asked to release it; malloc's free pages go
    back to the system (:func:`release_unused`)."""
    return require("pyarrow").system_memory_pool()


def parquet_schema(root: Any, key: str) -> Any:
    """The arrow schema (and row count) of one parquet file, from its footer."""
    pq = require("pyarrow.parquet")
    local = _local_root(root.store)
    if local is not None:
        return pq.ParquetFile(os.path.join(local, key))
    from napari_ozx.ngff.tables.read import StoredFile, stored_size

    size = stored_size(root.store, key)
    if size is None:
        raise MetadataError(f"{key} is missing")
    return pq.ParquetFile(StoredFile(root.store, key, size))


def release_unused() -> None:
    """Give freed memory back to the system: arrow's (read buffers, the coordinate
    columns once copied), which its allocator otherwise keeps, as much as the columns;
    and the C heap's free pages (:func:`malloc_trim`)."""
    pa = require("pyarrow")
    pa.default_memory_pool().release_unused()
    malloc_trim()


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: return the heap's free pages to the system.

    glibc serves an allocation of a few MiB from its heap once a freed block of that
    size has raised its mmap threshold (dynamic, up to 32 MiB), and keeps the pages of
    such blocks after they are freed: for millions of points, tens of MiB of
    intermediate copies would stay in the process. False where there is no glibc
    (macOS, Windows, musl): nothing to do there."""
    trim = _malloc_trim_function()
    return bool(trim(0)) if trim is not None else False


@functools.cache
def _malloc_trim_function() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's C library
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_when_freed(*objs: Any) -> None:
    """Call :func:`release_unused` when each of *objs* is freed.

    For the intermediate arrays a reader hands napari (a features frame napari copies,
    a colour array it converts): they die only after napari has built its layer, and
    their memory (and napari's own temporaries) would otherwise stay with the process."""
    import weakref

    for obj in objs:
        weakref.finalize(obj, release_unused).atexit = False
