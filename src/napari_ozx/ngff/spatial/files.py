"""The parquet files of SpatialData's points and shapes, read with pyarrow.

A local directory's files are memory-mapped by pyarrow (no copy through Python); a
``.ozx`` member or a remote file is read through the store. pyarrow and shapely are the
``napari-ozx[spatialdata]`` extra: without them, one :class:`SpatialDependencyError`
names it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.read.documents import join_path, run_sync

__all__ = [
    "EXTRA",
    "SpatialDependencyError",
    "parquet_parts",
    "parquet_schema",
    "read_parquet",
    "release_unused",
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
            from napari_ozx.ngff.tables.read import _file_size

            return [path] if _file_size(root.store, path) is not None else []
    parts = [n for n in names if n.endswith(".parquet")]

    def order(name: str) -> tuple[int, str]:
        m = re.search(r"(\d+)", name)
        return (int(m.group(1)) if m else -1, name)

    return [join_path(path, n) for n in sorted(parts, key=order)]


def read_parquet(root: Any, keys: Sequence[str], columns: Sequence[str] | None = None) -> Any:
    """The parquet files *keys* as one pyarrow Table (only *columns* when given)."""
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    local = _local_root(root.store)
    tables = []
    for key in keys:
        if local is not None:
            source: Any = os.path.join(local, key)
        else:
            from napari_ozx.ngff.tables.read import _get

            source = pa.BufferReader(_get(root.store, key))
        tables.append(
            pq.read_table(
                source,
                columns=list(columns) if columns is not None else None,
                memory_map=local is not None,
            )
        )
    if not tables:
        raise MetadataError(f"no parquet file in {keys!r}")
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def parquet_schema(root: Any, key: str) -> Any:
    """The arrow schema (and row count) of one parquet file, from its footer."""
    pq = require("pyarrow.parquet")
    local = _local_root(root.store)
    if local is not None:
        return pq.ParquetFile(os.path.join(local, key))
    from napari_ozx.ngff.tables.read import _file_size, _StoreFile

    size = _file_size(root.store, key)
    if size is None:
        raise MetadataError(f"{key} is missing")
    return pq.ParquetFile(_StoreFile(root.store, key, size))


def release_unused() -> None:
    """Give the memory arrow freed (read buffers, the coordinate columns once copied)
    back to the system: arrow's allocator otherwise keeps it, as much as the columns."""
    pa = require("pyarrow")
    pa.default_memory_pool().release_unused()
