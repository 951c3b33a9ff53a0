"""Tables for people: an image's (or a plate's) tables as the inspector lists them, and
a preview of a table's first rows.

Listing is :func:`napari_ozx.ngff.tables.read.list_tables` over the inspection's own cached
document reads (:class:`TableDocs`), so it costs what ``napari-ozx info`` costs: table
metadata, never column data. A preview (:func:`preview_table`) reads the table's columns
once, refusing tables of more than :data:`PREVIEW_MAX_BYTES`, and keeps the first
:data:`PREVIEW_ROWS` rows as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from napari_ozx.errors import TableError
from napari_ozx.inspection._text import format_bytes
from napari_ozx.ngff.tables.read import TableInfo, read_table

if TYPE_CHECKING:
    from zarr.abc.store import Store

    from napari_ozx.ngff.read.documents import NodeDocuments

__all__ = [
    "PREVIEW_MAX_BYTES",
    "PREVIEW_ROWS",
    "TableDocs",
    "TablePreview",
    "preview_table",
    "table_facts",
    "table_summary",
]

#: the rows a preview shows
PREVIEW_ROWS = 20
#: a table whose data is larger than this is not read for a preview
PREVIEW_MAX_BYTES = 32 << 20
#: a cell's text is cut at this many characters
_CELL_CHARS = 80


class _Read(Protocol):
    @property
    def docs(self) -> NodeDocuments: ...


class _Hierarchy(Protocol):
    """What the table views read of an inspection (:class:`~.tree.Hierarchy`)."""

    source: str

    @property
    def store(self) -> Store: ...

    def read_many(self, paths: Sequence[str]) -> Sequence[_Read | None]: ...


class TableDocs:
    """A hierarchy's cached document reads as a :class:`~napari_ozx.ngff.tables.read.TableSource`
    (anything with ``store``, ``source`` and ``read_many(paths) -> [NodeRead | None]``)."""

    def __init__(self, hierarchy: _Hierarchy) -> None:
        self.hierarchy = hierarchy
        self.store = hierarchy.store
        self.source = hierarchy.source

    def read_docs(
        self, paths: Sequence[str], kind: Literal["group", "ome-group", "array"] | None = None
    ) -> list[NodeDocuments | None]:
        return [None if r is None else r.docs for r in self.hierarchy.read_many(list(paths))]


def table_summary(info: TableInfo) -> str:
    """The tree's second column: type · backend · rows (or the table's problem)."""
    if info.error is not None:
        return f"cannot be read: {info.error}"
    parts = [info.type or "table", info.backend or "?"]
    if info.rows is not None:
        parts.append(f"{info.rows:,} row{'s' if info.rows != 1 else ''}")
    return " · ".join(parts)


def table_facts(info: TableInfo) -> list[tuple[str, str]]:
    """(label, value) rows of a table's summary: name, type, backend, rows, columns,
    the label image it describes ..."""
    rows = [
        ("Name", info.name),
        ("Type", info.type or "(none)"),
        ("Backend", info.backend or "(none)"),
    ]
    if info.version is not None:
        rows.append(("Table version", info.version))
    rows.append(("Rows", "unknown" if info.rows is None else f"{info.rows:,}"))
    cols = ", ".join(info.columns) if info.columns else "(none)"
    rows.append((f"Columns ({len(info.columns)})", cols))
    if info.regions:
        rows.append(("Label image", ", ".join(info.regions)))
    elif info.region_path is not None:
        rows.append(("Region", info.region_path))
    if info.instance_key is not None:
        rows.append(("Instance key", info.instance_key))
    if info.index_key is not None:
        idx = info.index_key + (f" ({info.index_type})" if info.index_type else "")
        rows.append(("Index", idx))
    if info.nbytes is not None:
        rows.append(("Size", format_bytes(info.nbytes)))
    if info.error is not None:
        rows.append(("Problem", info.error))
    return rows


@dataclass(frozen=True)
class TablePreview:
    """A table's first rows as text: ``columns`` (the index first), ``rows`` (each a
    tuple of cell texts), ``total`` (the table's rows), or ``error``."""

    name: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    total: int = 0
    error: str | None = None


def _cell(value: object) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = str(value)
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def preview_table(
    hierarchy: _Hierarchy,
    info: TableInfo,
    rows: int = PREVIEW_ROWS,
    max_bytes: int = PREVIEW_MAX_BYTES,
) -> TablePreview:
    """The first *rows* rows of the table *info* of *hierarchy* (an inspection): the
    table is read once, refused beyond *max_bytes*. Never raises for the table."""
    try:
        data = read_table(TableDocs(hierarchy), info, max_bytes=max_bytes)
    except TableError as e:
        return TablePreview(info.name, error=e.reason)
    n = min(rows, len(data))
    head = [data.index[:n], *(v[:n] for v in data.columns.values())]
    cells = tuple(tuple(_cell(col[i]) for col in head) for i in range(n))
    return TablePreview(info.name, (data.index_name, *data.columns), cells, len(data))
