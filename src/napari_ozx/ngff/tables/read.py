"""Tables next to images: the Fractal / ngio table specification V1 and SpatialData tables.

:func:`list_tables` lists an image's (or plate's) ``tables/`` as :class:`TableInfo` records from
metadata only; :func:`read_table` reads one into a :class:`TableData` (numpy columns and
the index, refusing more than *max_bytes*); :func:`spatialdata_tables` lists a SpatialData
root's. Backends: AnnData read directly with zarr (v2 and v3; no ``anndata`` dependency),
parquet through ``pyarrow`` when installed (``napari-ozx[tables]``), csv, json; through the
opener's document reader and store, so directories, ``.ozx`` and remote stores alike. A
malformed table is a :class:`~napari_ozx.errors.TableError` naming it, never the image's.
ROIs: :func:`roi_pixel_boxes` (level-0 pixels, as ngio maps them), :func:`roi_pixel_edges`
(the ROI as drawn) and :func:`roi_world_boxes`. Writing is :mod:`.write`'s.

The layouts read and the ROI conventions: ``docs/design/tables.md``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import numpy as np

from napari_ozx.errors import OzxError, TableError
from napari_ozx.ngff.read.documents import (
    DocumentSource,
    NodeDocuments,
    child_names,
    join_path,
    run_sync,
)
from napari_ozx.ozx.protocol import as_container

if TYPE_CHECKING:
    from zarr.abc.store import Store

logger = logging.getLogger(__name__)

__all__ = [
    "BACKENDS",
    "MAX_TABLE_BYTES",
    "OPEN_MAX_BYTES",
    "OPEN_MAX_ROWS",
    "ROI_COLUMNS",
    "ROI_TYPES",
    "TABLE_TYPES",
    "RoiBoxes",
    "StoredFile",
    "TableData",
    "TableInfo",
    "TableSource",
    "category_colors",
    "list_tables",
    "opened_source",
    "read_table",
    "roi_pixel_boxes",
    "roi_pixel_edges",
    "roi_world_boxes",
    "spatialdata_tables",
    "stored_bytes",
    "stored_size",
]

TABLE_TYPES = ("roi_table", "masking_roi_table", "feature_table", "condition_table")
ROI_TYPES = ("roi_table", "masking_roi_table")
#: the ``backend`` attribute -> the layout it names
BACKENDS = {
    "anndata_v1": "anndata",
    "anndata": "anndata",
    "parquet": "parquet",
    "csv": "csv",
    "json": "json",
}
#: the columns the V1 specification requires of ROI and masking ROI tables
ROI_COLUMNS = (
    "x_micrometer",
    "y_micrometer",
    "z_micrometer",
    "len_x_micrometer",
    "len_y_micrometer",
    "len_z_micrometer",
)
#: what a viewer reads when an image opens: tables of at most this many rows and bytes
#: (larger ones are listed, and read when asked for)
OPEN_MAX_ROWS = 10_000
OPEN_MAX_BYTES = 8 << 20
#: what :func:`read_table` reads at most unless told otherwise
MAX_TABLE_BYTES = 1 << 30
#: an AnnData table's ``var`` names (its float columns) are read for the listing up to this
_MAX_VAR_NAMES = 100_000
#: a csv file's header is looked for in its first bytes; its rows are counted when it is
#: at most this large
_CSV_HEAD = 64 << 10
_CSV_COUNT_MAX = 1 << 20
#: ngio's pixel rounding: a ROI edge within 1 % of a pixel boundary is on it
_PIXEL_EPS = 1e-2


# --------------------------------------------------------------------------- sources


class TableSource(DocumentSource, Protocol):
    """What listing and reading tables need: the opener's document reader and store
    (:class:`~napari_ozx.ngff.read.open.OmeZarr` is one), and the name of its source."""

    @property
    def source(self) -> str: ...


class StoreDocuments:
    """A :class:`TableSource` over a bare store (the validator's walk has no opener)."""

    def __init__(self, store: Store, source: str) -> None:
        self.store = store
        self.source = source
        self._docs: dict[str, NodeDocuments | None] = {}
        self._format: int | None = None

    def read_docs(
        self, paths: Sequence[str], kind: Literal["group", "ome-group", "array"] | None = None
    ) -> list[NodeDocuments | None]:
        from napari_ozx.ngff.read.documents import read_documents

        todo = [p for p in dict.fromkeys(paths) if p not in self._docs]
        if todo:
            for p, d in zip(
                todo, read_documents(self.store, todo, self._format, kind), strict=True
            ):
                self._docs[p] = d
                if d is not None and self._format is None:
                    self._format = d.zarr_format
        return [self._docs[p] for p in paths]


@contextlib.contextmanager
def opened_source(source: Any) -> Iterator[TableSource]:
    """*source* as a :class:`TableSource`: itself when it is one, else the hierarchy at
    that path, URL or store, opened for the call and closed after it."""
    if hasattr(source, "read_docs") and hasattr(source, "store"):
        yield source
        return
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(source) as oz:
        yield oz


# ---------------------------------------------------------------------------- models


@dataclass(frozen=True)
class TableInfo:
    """One table as its metadata describes it (no column data read).

    Made by :func:`list_tables`; :func:`read_table` raises a listed ``error`` as a
    :class:`~napari_ozx.errors.TableError`.

    Parameters
    ----------
    name : str
        The table's name.
    path : str
        The table group's path in the hierarchy.
    image : str
        The image it belongs to ("" for a SpatialData store's root tables).
    type : str or None
        ``roi_table``, ``masking_roi_table``, ``feature_table``, ``condition_table`` ...
    backend : str or None
        ``anndata``, ``parquet``, ``csv`` or ``json`` (``anndata_v1`` normalised).
    version : str, optional
        ``table_version``.
    rows : int, optional
        The number of rows; None when only reading the data would tell.
    columns : tuple of str, default ()
        Every column but the index, in the backend's order.
    regions : tuple of str, default ()
        The labels images (or SpatialData elements) the rows describe.
    region_path : str, optional
        The ``region`` path as stored.
    region_key : str, optional
        SpatialData: the column naming each row's element.
    instance_key : str, optional
        The column (or the index) holding label values / instance ids.
    index_key, index_type : str, optional
        The typed tables' index column and its type.
    nbytes : int, optional
        Stored size of a file backend; else an estimate.
    origin : {"ngio", "spatialdata"}, default "ngio"
        Which specification the table follows.
    source : str, default ""
        The file or URL (for messages).
    error : str, optional
        Why the table cannot be read (malformed attributes, a missing group, a backend
        whose dependency is missing).
    attributes : mapping, optional
        The table group's attributes as stored.
    """

    name: str
    path: str  #: the table group's path in the hierarchy
    image: str  #: the image it belongs to ("" for a SpatialData store's root tables)
    type: str | None  #: roi_table, masking_roi_table, feature_table, condition_table, ...
    backend: str | None  #: anndata, parquet, csv or json (``anndata_v1`` normalised)
    version: str | None = None  #: ``table_version``
    rows: int | None = None  #: None when only reading the data would tell
    columns: tuple[str, ...] = ()  #: every column but the index, in the backend's order
    #: the labels image (by name, under the image's ``labels/``; a SpatialData element's
    #: name) the rows describe: the first of :attr:`regions`
    regions: tuple[str, ...] = ()
    region_path: str | None = None  #: the ``region`` path as stored
    region_key: str | None = None  #: SpatialData: the column naming each row's element
    instance_key: str | None = None  #: the column (or the index) holding label values
    index_key: str | None = None
    index_type: str | None = None
    nbytes: int | None = None  #: stored size of a file backend; else an estimate
    origin: Literal["ngio", "spatialdata"] = "ngio"
    source: str = ""  #: the file or URL (for messages)
    error: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def region(self) -> str | None:
        """The labels image the table describes (the first one of a SpatialData table)."""
        return self.regions[0] if self.regions else None

    @property
    def is_roi(self) -> bool:
        return self.type in ROI_TYPES

    def small(self, max_rows: int | None = None, max_bytes: int | None = None) -> bool:
        """Whether a viewer may read this table when the image opens (at most *max_rows*
        rows and *max_bytes*; default :data:`OPEN_MAX_ROWS`, :data:`OPEN_MAX_BYTES`)."""
        max_rows = OPEN_MAX_ROWS if max_rows is None else max_rows
        max_bytes = OPEN_MAX_BYTES if max_bytes is None else max_bytes
        if self.error is not None:
            return False
        if self.rows is not None and self.rows > max_rows:
            return False
        return self.nbytes is not None and self.nbytes <= max_bytes

    def check(self) -> None:
        """Raise the table's :attr:`error` (a :class:`TableError`), if it has one."""
        if self.error is not None:
            raise TableError(self.error, self.name, _where(self))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able facts (``napari-ozx info --json``)."""
        out: dict[str, Any] = {
            "name": self.name,
            "path": self.path,
            "type": self.type,
            "backend": self.backend,
            "version": self.version,
            "rows": self.rows,
            "columns": list(self.columns),
            "region": self.region,
        }
        if len(self.regions) > 1:
            out["regions"] = list(self.regions)
        if self.instance_key is not None:
            out["instance_key"] = self.instance_key
        if self.origin != "ngio":
            out["origin"] = self.origin
        if self.error is not None:
            out["error"] = self.error
        return out


def _where(info: TableInfo) -> str:
    """The file (and image) of a table, for messages."""
    return info.source + (f" image {info.image!r}" if info.image else "")


@dataclass(frozen=True)
class TableData:
    """A table's rows: the index and each column as a numpy array, all of one length.

    Made by :func:`read_table`.

    Parameters
    ----------
    info : TableInfo
        The table's metadata.
    index : numpy.ndarray
        The index (ROI names, label values ...).
    columns : dict of str to numpy.ndarray
        Each column (strings as ``object`` arrays).
    """

    info: TableInfo
    index: np.ndarray
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.index)

    @property
    def index_name(self) -> str:
        return self.info.index_key or "index"

    def column(self, name: str) -> np.ndarray:
        """One column by name; the index by its ``index_key`` too."""
        if name in self.columns:
            return self.columns[name]
        if name == self.info.index_key:
            return self.index
        raise TableError(f"no column {name!r}", self.info.name, _where(self.info))

    def instances(self) -> np.ndarray:
        """The label value of each row: the ``instance_key`` column, or the index when the
        instance key names it (ngio's feature and masking ROI tables)."""
        key = self.info.instance_key or "label"
        if key in self.columns:
            values = self.columns[key]
        elif key == self.info.index_key or self.info.index_key is None:
            values = self.index
        else:
            raise TableError(
                f"instance_key {key!r} is not a column", self.info.name, _where(self.info)
            )
        try:
            return np.asarray(values).astype(np.int64)
        except (TypeError, ValueError):
            raise TableError(
                f"instance_key {key!r} holds values that are not integer label values",
                self.info.name,
                _where(self.info),
            ) from None

    def for_region(self, region: str) -> TableData:
        """The rows that annotate labels element *region* (SpatialData: the rows whose
        ``region_key`` column names it); all rows of a table that describes one region."""
        key = self.info.region_key
        if key is None or key not in self.columns:
            return self if region in self.info.regions or not self.info.regions else self.take([])
        keep = np.flatnonzero(np.asarray(self.columns[key]).astype(str) == region)
        return self.take(keep)

    def take(self, rows: Any) -> TableData:
        """The table with only *rows* (indices)."""
        rows = np.asarray(rows, dtype=np.int64)
        return TableData(
            replace(self.info, rows=len(rows)),
            self.index[rows],
            {k: v[rows] for k, v in self.columns.items()},
        )

    def to_pandas(self) -> Any:
        """A pandas DataFrame indexed by the table's index (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise TableError(
                "pandas is not installed (install napari-ozx[tables])",
                self.info.name,
                _where(self.info),
            ) from None
        return pd.DataFrame(
            self.columns, index=pd.Index(self.index, name=self.info.index_key), copy=False
        )


# ------------------------------------------------------------------------- discovery


def list_tables(source: Any, image: str = "") -> list[TableInfo]:
    """The tables of the image at *image* (its ``tables/`` group), from metadata only.

    Parameters
    ----------
    source : OmeZarr, TableSource, str, os.PathLike or zarr.abc.store.Store
        An opened hierarchy (or any :class:`TableSource`), or a path / URL / store, opened
        for the call.
    image : str, default ""
        The image's (or plate's) group; "" is the root.

    Returns
    -------
    list of TableInfo
        One per listed table, in the list's order; a table that cannot be read is listed
        with its :attr:`TableInfo.error`. Empty when the image has no ``tables/``.

    Raises
    ------
    TableError
        The ``tables`` group's list is malformed.
    """
    with opened_source(source) as src:
        return _list_tables(src, image)


def _list_tables(src: TableSource, image: str, only: str | None = None) -> list[TableInfo]:
    """The image's tables (*only*: that one, the others' metadata not read)."""
    tpath = join_path(image, "tables")
    (docs,) = src.read_docs([tpath], kind="ome-group")
    if docs is None:
        return []
    where = f"{src.source}:{image or '/'}"
    if docs.error is not None:
        raise TableError(f"the tables group cannot be read: {docs.error}", "", where)
    names = docs.attributes.get("tables")
    if names is None and not docs.attributes:
        return []  # an empty tables group (ngio creates one)
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise TableError(
            f"the tables group's 'tables' is not a list of names ({_short(names)})", "", where
        )
    if only is not None:
        names = [n for n in names if n == only]
    paths: list[str | None] = []
    for n in names:
        try:
            paths.append(join_path(tpath, n, key="tables"))
        except OzxError:
            paths.append(None)
    found = src.read_docs([p for p in paths if p is not None], kind="ome-group")
    by_path = dict(zip([p for p in paths if p is not None], found, strict=True))
    out = []
    for n, p in zip(names, paths, strict=True):
        if p is None:
            why = "the table name leaves the tables group"
            out.append(_broken(n, tpath, image, why, src.source))
            continue
        out.append(_info(src, n, p, image, by_path[p], "ngio"))
    return out


def spatialdata_tables(source: Any) -> list[TableInfo]:
    """A SpatialData store's tables (the root's ``tables/`` group, listed), metadata only."""
    with opened_source(source) as src:
        names = sorted(child_names(src, "tables"))
        paths = [join_path("tables", n, key="tables") for n in names]
        docs = src.read_docs(paths)
        return [
            _info(src, n, p, "", d, "spatialdata")
            for n, p, d in zip(names, paths, docs, strict=True)
            if d is not None
        ]


def _broken(name: str, path: str, image: str, why: str, source: str) -> TableInfo:
    return TableInfo(name, path, image, None, None, source=source, error=why)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _info(
    src: TableSource,
    name: str,
    path: str,
    image: str,
    docs: NodeDocuments | None,
    origin: Literal["ngio", "spatialdata"],
) -> TableInfo:
    if docs is None:
        return _broken(name, path, image, "listed in tables but there is no such group", src.source)
    if docs.error is not None:
        return _broken(name, path, image, f"its group cannot be read: {docs.error}", src.source)
    if docs.node_type != "group":
        why = "listed in tables but it is an array, not a group"
        return _broken(name, path, image, why, src.source)
    attrs = docs.attributes
    ttype = attrs.get("type", attrs.get("table_type"))
    version = attrs.get("table_version", attrs.get("fractal_table_version"))
    raw_backend = attrs.get("backend")
    if raw_backend is None and (attrs.get("encoding-type") == "anndata" or origin != "ngio"):
        raw_backend = "anndata"
    base = TableInfo(
        name,
        path,
        image,
        ttype if isinstance(ttype, str) else None,
        BACKENDS.get(raw_backend) if isinstance(raw_backend, str) else None,
        version=str(version) if isinstance(version, str | int) else None,
        index_key=attrs.get("index_key") if isinstance(attrs.get("index_key"), str) else None,
        index_type=attrs.get("index_type") if isinstance(attrs.get("index_type"), str) else None,
        instance_key=(
            attrs.get("instance_key") if isinstance(attrs.get("instance_key"), str) else None
        ),
        origin=origin,
        source=src.source,
        attributes=attrs,
    )
    if ttype is not None and not isinstance(ttype, str):
        return replace(base, error=f"its type {_short(ttype)} is not a string")
    if raw_backend is None:
        return replace(base, error="no backend attribute, and it is not an AnnData group")
    if base.backend is None:
        return replace(
            base,
            error=f"unknown backend {_short(raw_backend)} "
            f"(napari-ozx reads {', '.join(sorted(BACKENDS))})",
        )
    if base.index_type not in (None, "int", "str"):
        return replace(base, error=f"index_type {_short(base.index_type)} is not 'int' or 'str'")
    reader = _LAYOUTS[base.backend]
    try:
        base = _with_region(base, attrs, image)
        info = reader.describe(src, base)
    except TableError as e:
        return replace(base, error=e.reason)
    except OzxError as e:  # a document or member the store refuses
        return replace(base, error=str(e))
    if info.is_roi and info.columns:
        need = ("x_micrometer", "y_micrometer", "len_x_micrometer", "len_y_micrometer")
        missing = [c for c in need if c not in info.columns]
        if missing:
            return replace(info, error=f"ROI columns missing: {', '.join(missing)}")
    return info


def _with_region(info: TableInfo, attrs: Mapping[str, Any], image: str) -> TableInfo:
    """The ``region`` of an ngio table (``{"path": "../labels/<name>"}``, relative to the
    ``tables`` group) or of a SpatialData table (element names)."""
    region = attrs.get("region")
    if region is None:
        return info
    if info.origin == "spatialdata":
        names = [region] if isinstance(region, str) else region
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise TableError(f"region {_short(region)} is not an element name or a list of them")
        key = attrs.get("region_key")
        return replace(info, regions=tuple(names), region_key=key if isinstance(key, str) else None)
    path = region.get("path") if isinstance(region, Mapping) else None
    if not isinstance(path, str):
        raise TableError(f'region {_short(region)} is not {{"path": "../labels/<name>"}}')
    from napari_ozx.ngff.model.graph import resolve_path

    target = resolve_path(join_path(image, "tables"), path)
    if target is None:
        raise TableError(f"region path {path!r} leaves the hierarchy")
    parts = [p for p in target.split("/") if p]
    labels = [p for p in join_path(image, "labels").split("/") if p]
    name = parts[-1] if parts[:-1] == labels and len(parts) == len(labels) + 1 else None
    return replace(info, regions=(name,) if name else (), region_path=path)


# --------------------------------------------------------------------------- reading


def read_table(
    source: Any,
    table: str | TableInfo,
    image: str = "",
    *,
    columns: Sequence[str] | None = None,
    max_bytes: int = MAX_TABLE_BYTES,
) -> TableData:
    """The rows of one table.

    Parameters
    ----------
    source : OmeZarr, TableSource, str, os.PathLike or zarr.abc.store.Store
        As for :func:`list_tables`.
    table : str or TableInfo
        The table's name in the image's ``tables/`` (a SpatialData store's root tables when
        *image* is "" and the root has no ``tables`` list), or its :class:`TableInfo`.
    image : str, default ""
        The image's (or plate's) group; "" is the root.
    columns : sequence of str, optional
        Read only these columns (the index always).
    max_bytes : int, default 1 GiB
        Refuse a table whose data is larger.

    Returns
    -------
    TableData
        The table's index and columns as numpy arrays, with its :class:`TableInfo`.

    Raises
    ------
    TableError
        The table cannot be read (missing, malformed, too large, or a backend whose extra is
        not installed), naming it and the reason.
    """
    with opened_source(source) as src:
        info = table if isinstance(table, TableInfo) else _find(src, table, image)
        info.check()
        assert info.backend is not None
        try:
            data = _LAYOUTS[info.backend].read(src, info, columns, max_bytes)
        except TableError as e:
            raise TableError(e.reason, info.name, _where(info)) from None
        except OzxError as e:
            raise TableError(str(e), info.name, _where(info)) from None
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            raise TableError(
                f"its data cannot be read: {type(e).__name__}: {e}", info.name, _where(info)
            ) from None
        return _normalised(data)


def _find(src: TableSource, name: str, image: str) -> TableInfo:
    infos = _list_tables(src, image, only=name)
    if not infos and not image:
        infos = [t for t in spatialdata_tables(src) if t.name == name]
    for info in infos:
        if info.name == name:
            return info
    (docs,) = src.read_docs([join_path(image, "tables")], kind="ome-group")
    listed = docs.attributes.get("tables") if docs is not None else None
    known = ", ".join(map(str, listed)) if isinstance(listed, list) and listed else "none"
    raise TableError(f"no such table (the image lists: {known})", name, src.source)


def _normalised(data: TableData) -> TableData:
    """Every column as long as the index; the index cast to ``index_type``."""
    info = data.info
    n = len(data.index)
    for k, v in data.columns.items():
        if len(v) != n:
            raise TableError(
                f"column {k!r} has {len(v)} rows, the table {n} (truncated data)",
                info.name,
                _where(info),
            )
    index = data.index
    if info.index_type == "int":
        try:
            index = np.asarray(index).astype(np.int64)  # numbers, or strings of integers
        except (TypeError, ValueError, OverflowError):
            raise TableError(
                "index_type is 'int' but the index holds other values", info.name, _where(info)
            ) from None
    elif info.index_type == "str":
        index = np.asarray([str(v) for v in index], dtype=object)
    return TableData(replace(info, rows=n, columns=tuple(data.columns)), index, data.columns)


def _split_index(info: TableInfo, cols: dict[str, np.ndarray], n: int) -> TableData:
    """A file backend's table: its ``index_key`` column (an ordinary column there) is the
    index, else the row numbers."""
    key = info.index_key
    if key is not None and key in cols:
        index = cols.pop(key)
    else:
        index = np.arange(n)
    return TableData(info, index, cols)


def _column_values(values: Sequence[Any]) -> np.ndarray:
    """A column from JSON / csv values: int64, float64 (None / NaN / "" as NaN), bool,
    else strings as an object array."""
    vals = list(values)
    present = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(vals):
        return np.asarray(vals, dtype=bool)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if len(present) == len(vals):
            return np.asarray(vals, dtype=np.int64)
        return np.asarray([np.nan if v is None else v for v in vals], dtype=np.float64)
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return np.asarray([np.nan if v is None else v for v in vals], dtype=np.float64)
    return np.asarray(vals, dtype=object)


# ------------------------------------------------------------------------ the layouts


class _Layout(Protocol):
    def describe(self, src: TableSource, info: TableInfo) -> TableInfo: ...

    def read(
        self, src: TableSource, info: TableInfo, columns: Sequence[str] | None, max_bytes: int
    ) -> TableData: ...


def _too_large(nbytes: int, max_bytes: int) -> TableError:
    return TableError(
        f"its data is {nbytes:,} bytes, more than the {max_bytes:,} read at most "
        "(read_table(..., max_bytes=...) reads more)"
    )


class _JsonLayout:
    """Columns as the attributes of the ``table`` subgroup (ngio's json backend)."""

    def _columns(self, src: TableSource, info: TableInfo) -> dict[str, list[Any]]:
        (docs,) = src.read_docs([join_path(info.path, "table")], kind="ome-group")
        if docs is None:
            raise TableError("json backend without its 'table' group")
        if docs.error is not None:
            raise TableError(f"its 'table' group cannot be read: {docs.error}")
        cols = docs.attributes
        if not all(isinstance(v, list) for v in cols.values()):
            bad = next(k for k, v in cols.items() if not isinstance(v, list))
            raise TableError(f"json column {bad!r} is not a list")
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise TableError(f"json columns of different lengths {sorted(lengths)}")
        return dict(cols)

    def describe(self, src: TableSource, info: TableInfo) -> TableInfo:
        cols = self._columns(src, info)
        rows = len(next(iter(cols.values()))) if cols else 0
        names = tuple(k for k in cols if k != info.index_key)
        return replace(info, rows=rows, columns=names, nbytes=rows * max(len(cols), 1) * 8)

    def read(
        self, src: TableSource, info: TableInfo, columns: Sequence[str] | None, max_bytes: int
    ) -> TableData:
        raw = self._columns(src, info)
        n = len(next(iter(raw.values()))) if raw else 0
        cols = {k: _column_values(v) for k, v in raw.items() if _wanted(k, info, columns)}
        return _split_index(info, cols, n)


def _wanted(name: str, info: TableInfo, columns: Sequence[str] | None) -> bool:
    return columns is None or name in columns or name == info.index_key


# file members (parquet, csv): read through the store, sizes known upfront where possible


def stored_size(store: Store, key: str) -> int | None:
    """The size in bytes of the file *key* in *store*, or None when it is missing or the
    store cannot tell."""
    container = as_container(store)
    if container is not None:
        return container.member_size(key)
    from zarr.storage import LocalStore

    if isinstance(store, LocalStore):
        try:
            return os.stat(os.path.join(str(store.root), key)).st_size
        except OSError:
            return None
    try:
        return int(run_sync(store.getsize(key)))
    except (OSError, NotImplementedError, FileNotFoundError):
        return None


def stored_bytes(store: Store, key: str, start: int | None = None, end: int | None = None) -> bytes:
    """The bytes of the file *key* in *store* (``[start, end)`` when given); raises
    :class:`TableError` when it is missing."""
    from zarr.abc.store import RangeByteRequest
    from zarr.buffer import default_buffer_prototype

    rng = None if start is None else RangeByteRequest(start, end if end is not None else start)
    buf = run_sync(store.get(key, prototype=default_buffer_prototype(), byte_range=rng))
    if buf is None:
        raise TableError(f"{key.rsplit('/', 1)[-1]} is missing")
    data: bytes = buf.to_bytes()
    return data


class StoredFile(io.RawIOBase):
    """A store member as a seekable read-only file (pyarrow reads a parquet footer and
    the column chunks it needs through it, never the whole file)."""

    def __init__(self, store: Store, key: str, size: int) -> None:
        self.store, self.key, self.size, self.pos = store, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        data = stored_bytes(self.store, self.key, self.pos, self.pos + n)
        b[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _pyarrow_parquet(info: TableInfo) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TableError(
            f"reading {info.backend} tables needs pyarrow, which is not installed "
            "(install napari-ozx[tables])"
        ) from None
    return pq


class _ParquetLayout:
    """``table.parquet`` in the group (ngio's parquet backend), through pyarrow."""

    def _file(self, src: TableSource, info: TableInfo) -> tuple[Any, int]:
        pq = _pyarrow_parquet(info)
        key = join_path(info.path, "table.parquet")
        size = stored_size(src.store, key)
        if size is None:
            raise TableError("table.parquet is missing")
        try:
            return pq.ParquetFile(StoredFile(src.store, key, size)), size
        except TableError:
            raise
        except Exception as e:  # pyarrow's ArrowInvalid / OSError: not a parquet file
            raise TableError(f"table.parquet cannot be read: {e}") from None

    def describe(self, src: TableSource, info: TableInfo) -> TableInfo:
        pf, size = self._file(src, info)
        names = tuple(n for n in pf.schema_arrow.names if n != info.index_key)
        return replace(info, rows=int(pf.metadata.num_rows), columns=names, nbytes=size)

    def read(
        self, src: TableSource, info: TableInfo, columns: Sequence[str] | None, max_bytes: int
    ) -> TableData:
        pf, size = self._file(src, info)
        if size > max_bytes:
            raise _too_large(size, max_bytes)
        names = [n for n in pf.schema_arrow.names if _wanted(n, info, columns)]
        try:
            table = pf.read(columns=names)
        except Exception as e:
            raise TableError(f"table.parquet cannot be read: {e}") from None
        cols: dict[str, np.ndarray] = {}
        for name, col in zip(table.column_names, table.columns, strict=True):
            import pyarrow as pa

            col = col.combine_chunks() if hasattr(col, "combine_chunks") else col
            if pa.types.is_dictionary(col.type):
                col = col.dictionary_decode()
            values = col.to_numpy(zero_copy_only=False)
            if values.dtype.kind in ("U", "S", "O"):
                values = np.asarray(values, dtype=object)
            cols[name] = values
        return _split_index(info, cols, table.num_rows)


def _parse_csv_value(text: str) -> Any:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return text


class _CsvLayout:
    """``table.csv`` in the group (ngio's csv backend): the header names the columns,
    values are typed per column as pyarrow types them (so "05" reads back as 5)."""

    key = "table.csv"

    def describe(self, src: TableSource, info: TableInfo) -> TableInfo:
        key = join_path(info.path, self.key)
        size = stored_size(src.store, key)
        if size is None:
            raise TableError(f"{self.key} is missing")
        head = stored_bytes(src.store, key, 0, min(size, _CSV_HEAD)) if size else b""
        text = head.decode("utf-8", errors="replace")
        if size > _CSV_HEAD and "\n" not in text:
            raise TableError(f"{self.key} has no header line in its first {_CSV_HEAD:,} bytes")
        lines = text.splitlines()
        header = next(csv.reader(lines[:1]), []) if lines else []
        rows = None
        if size <= _CSV_COUNT_MAX:
            rows = max(
                len(list(csv.reader(io.StringIO(stored_bytes(src.store, key).decode())))) - 1, 0
            )
        names = tuple(h for h in header if h != info.index_key)
        return replace(info, rows=rows, columns=names, nbytes=size)

    def read(
        self, src: TableSource, info: TableInfo, columns: Sequence[str] | None, max_bytes: int
    ) -> TableData:
        key = join_path(info.path, self.key)
        size = stored_size(src.store, key)
        if size is not None and size > max_bytes:
            raise _too_large(size, max_bytes)
        try:
            text = stored_bytes(src.store, key).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TableError(f"{self.key} is not UTF-8 text ({e})") from None
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            raise TableError(f"{self.key} is empty (no header line)")
        header, body = rows[0], [r for r in rows[1:] if r]
        for i, r in enumerate(body):
            if len(r) != len(header):
                raise TableError(
                    f"{self.key} line {i + 2} has {len(r)} fields, the header {len(header)} "
                    "(truncated or malformed)"
                )
        cols = {
            h: _column_values([_parse_csv_value(r[j]) for r in body])
            for j, h in enumerate(header)
            if _wanted(h, info, columns)
        }
        return _split_index(info, cols, len(body))


# AnnData in Zarr (v2 and v3), read with zarr directly


def _array(src: TableSource, docs: NodeDocuments, max_bytes: int | None = None) -> np.ndarray:
    """One array's values (see :func:`_arrays`)."""
    return _arrays(src, [docs], max_bytes)[0]


def _arrays(
    src: TableSource, docs: Sequence[NodeDocuments], max_bytes: int | None = None
) -> list[np.ndarray]:
    """The values of several arrays, read concurrently (one trip through zarr's event
    loop), their documents checked as the opener checks them; strings as object arrays.
    Refuses arrays of more than *max_bytes* together (8 bytes an element counted)."""
    import asyncio

    from zarr import AsyncArray
    from zarr.storage import StorePath

    from napari_ozx.ngff.read.open import validate_array_document

    total = 0
    for d in docs:
        d.raise_error()
        if d.node_type != "array":
            raise TableError(f"{d.path.rsplit('/', 1)[-1]!r} is a group, expected an array")
        validate_array_document(d.checked, d.path)
        total += math.prod(d.checked.get("shape") or []) * 8
    if max_bytes is not None and total > max_bytes:
        raise _too_large(total, max_bytes)

    async def one(d: NodeDocuments) -> Any:
        try:
            meta = cast(Any, dict(d.checked))
            arr = AsyncArray(metadata=meta, store_path=StorePath(src.store, d.path))
            return await arr.getitem(...)
        except OzxError:
            raise
        except Exception as e:  # a codec error: corrupt or truncated chunks
            raise TableError(
                f"array {d.path.rsplit('/', 1)[-1]!r} cannot be read: {type(e).__name__}: {e}"
            ) from None

    async def every() -> list[Any]:
        return list(await asyncio.gather(*(one(d) for d in docs)))

    out = []
    for raw in run_sync(every()) if docs else []:
        values = np.asarray(raw)
        if values.dtype.kind in ("T", "U", "S", "O"):
            values = np.asarray(values.tolist() if values.ndim else values.item(), dtype=object)
        out.append(values)
    return out


@dataclass(frozen=True)
class _AnnLayout:
    obs_index: str
    obs_order: tuple[str, ...]
    rows: int | None
    x: NodeDocuments | None
    var_index: NodeDocuments | None


class _AnnDataLayout:
    """AnnData's Zarr layout: ``obs`` (a dataframe: ``_index`` names the index array,
    ``column-order`` the columns; strings, categoricals, nullable integers), ``X`` (the
    float columns; dense, or csr / csc) with their names in ``var``'s index."""

    def _layout(self, src: TableSource, info: TableInfo) -> _AnnLayout:
        p = info.path
        _t, obs, x, var = src.read_docs(
            [p, join_path(p, "obs"), join_path(p, "X"), join_path(p, "var")]
        )
        if obs is None:
            raise TableError("AnnData without its 'obs' group")
        obs.raise_error()
        oattrs = obs.attributes
        index = oattrs.get("_index", "_index")
        order = oattrs.get("column-order", [])
        if not isinstance(index, str) or not isinstance(order, list):
            raise TableError("AnnData 'obs' attributes are malformed (_index, column-order)")
        vdocs = None
        need = [join_path(p, "obs", index)]
        if var is not None:
            var.raise_error()
            vname = var.attributes.get("_index", "_index")
            if isinstance(vname, str):
                need.append(join_path(p, "var", vname))
        got = src.read_docs(need)
        idx = got[0]
        if idx is None:
            raise TableError(f"AnnData obs index {index!r} is missing")
        idx.raise_error()
        # anndata >= 0.12 with pandas' string dtype: a nullable-string-array group
        first = (
            self._parts(src, idx, index, _encoding_parts(idx, index))[0]
            if (idx.node_type != "array")
            else idx
        )
        shape = first.document.get("shape")
        rows = int(shape[0]) if isinstance(shape, list) and len(shape) == 1 else None
        if len(got) > 1:
            vdocs = got[1]
        if x is not None:
            x.raise_error()
        return _AnnLayout(index, tuple(str(c) for c in order), rows, x, vdocs)

    def _var_names(self, src: TableSource, lay: _AnnLayout) -> list[str]:
        if lay.x is None:
            return []
        if lay.var_index is None:
            raise TableError("AnnData with X but no 'var' index (the names of X's columns)")
        doc = lay.var_index
        if doc.node_type != "array":
            doc = self._parts(src, doc, "var index", _encoding_parts(doc, "var index"))[0]
        n = (doc.document.get("shape") or [0])[0]
        if n > _MAX_VAR_NAMES:
            raise TableError(f"AnnData with {n:,} columns in X: too many to list")
        return [str(v) for v in self._column(src, lay.var_index, "var index")]

    def _column(self, src: TableSource, d: NodeDocuments, what: str) -> np.ndarray:
        """One 1-D column on its own: an array, or an encoded group (nullable strings,
        integers, booleans, categoricals)."""
        if d.node_type == "array":
            return _array(src, d)
        enc = str(d.attributes.get("encoding-type"))
        parts = self._parts(src, d, what, _encoding_parts(d, what))
        first, second = _arrays(src, parts)
        return _decode_column(what, enc, first, second)

    def describe(self, src: TableSource, info: TableInfo) -> TableInfo:
        lay = self._layout(src, info)
        names = (*self._var_names(src, lay), *lay.obs_order)
        info = replace(
            info,
            rows=lay.rows,
            columns=tuple(n for n in names if n != info.index_key),
            nbytes=(lay.rows or 0) * max(len(names), 1) * 8,
        )
        if info.index_key is None and lay.obs_index != "_index":
            info = replace(info, index_key=lay.obs_index)
        if info.origin == "spatialdata":
            info = self._spatialdata_attrs(src, info)
        return info

    def _spatialdata_attrs(self, src: TableSource, info: TableInfo) -> TableInfo:
        """SpatialData before 0.4 kept region, region_key and instance_key in
        ``uns/spatialdata_attrs`` (an AnnData dict of strings)."""
        if info.regions:
            return info
        base = join_path(info.path, "uns", "spatialdata_attrs")
        keys = ("region", "region_key", "instance_key")
        docs = src.read_docs([join_path(base, k) for k in keys])
        present = [(k, d) for k, d in zip(keys, docs, strict=True) if d is not None]
        values = _arrays(src, [d for _, d in present if d.node_type == "array"])
        found: dict[str, Any] = {
            k: v.tolist() if v.ndim else v.item()
            for (k, _), v in zip([kd for kd in present if kd[1].node_type == "array"], values)
        }
        region = found.get("region")
        if region is None:
            return info
        regions = [region] if isinstance(region, str) else list(region)
        return replace(
            info,
            regions=tuple(str(r) for r in regions),
            region_key=str(found["region_key"]) if "region_key" in found else None,
            instance_key=str(found["instance_key"]) if "instance_key" in found else None,
        )

    def read(
        self, src: TableSource, info: TableInfo, columns: Sequence[str] | None, max_bytes: int
    ) -> TableData:
        lay = self._layout(src, info)
        rows = lay.rows or 0
        width = len(lay.obs_order) + (1 if lay.x is not None else 0)
        if rows * max(width, 1) * 8 > max_bytes:
            raise _too_large(rows * width * 8, max_bytes)
        names = self._var_names(src, lay)
        want = [i for i, n in enumerate(names) if columns is None or n in columns]
        obs_cols = [c for c in lay.obs_order if columns is None or c in columns]
        p = info.path
        docs = src.read_docs(
            [join_path(p, "obs", lay.obs_index), *(join_path(p, "obs", c) for c in obs_cols)]
        )
        idx, col_docs = docs[0], list(docs[1:])
        assert idx is not None
        for c, d in zip(obs_cols, col_docs, strict=True):
            if d is None:
                raise TableError(f"column {c!r} is listed in obs but missing (truncated data)")
        # every array of the table in one batch: the index, X (dense), obs columns, and
        # the parts of X (sparse) and of encoded columns (categorical, nullable)
        parts: dict[str, list[NodeDocuments]] = {}
        x = lay.x if want else None
        if x is not None and x.node_type != "array":
            parts["X"] = self._parts(src, x, "X", _SPARSE_PARTS)
        plain: list[NodeDocuments] = []
        if idx.node_type == "array":
            plain.append(idx)
        else:  # a nullable-string-array group (anndata >= 0.12 with pandas' strings)
            parts[_INDEX] = self._parts(src, idx, lay.obs_index, _encoding_parts(idx, "index"))
        if x is not None and x.node_type == "array":
            plain.append(x)
        for c, d in zip(obs_cols, col_docs, strict=True):
            assert d is not None
            d.raise_error()
            if d.node_type == "array":
                plain.append(d)
            else:
                enc = str(d.attributes.get("encoding-type"))
                kids = _ENCODED_PARTS.get(enc)
                if kids is None:
                    raise TableError(
                        f"column {c!r}: AnnData encoding {_short(enc)} is not supported"
                    )
                parts[c] = self._parts(src, d, c, kids)
        flat = [*plain, *(d for ds in parts.values() for d in ds)]
        values = dict(zip([d.path for d in flat], _arrays(src, flat, max_bytes), strict=True))
        cols: dict[str, np.ndarray] = {}
        if x is not None:
            if "X" in parts:
                sparse = [values[d.path] for d in parts["X"]]
                matrix = self._densify(x, sparse, max_bytes)
            else:
                matrix = values[x.path]
            if matrix.ndim != 2 or matrix.shape[1] != len(names):
                raise TableError(
                    f"AnnData X has shape {matrix.shape}, var names {len(names)} columns"
                )
            for i in want:
                cols[names[i]] = matrix[:, i]
        for c, d in zip(obs_cols, col_docs, strict=True):
            assert d is not None
            if d.node_type == "array":
                cols[c] = values[d.path]
            else:
                enc = str(d.attributes.get("encoding-type"))
                first, second = (values[k.path] for k in parts[c])
                cols[c] = _decode_column(c, enc, first, second)
        if idx.node_type == "array":
            index = values[idx.path]
        else:
            first, second = (values[k.path] for k in parts[_INDEX])
            enc = str(idx.attributes.get("encoding-type"))
            index = _decode_column(lay.obs_index, enc, first, second)
        return TableData(info, index, cols)

    def _parts(
        self, src: TableSource, group: NodeDocuments, what: str, kids: tuple[str, ...]
    ) -> list[NodeDocuments]:
        found = src.read_docs([join_path(group.path, k) for k in kids])
        if any(d is None for d in found):
            enc = group.attributes.get("encoding-type")
            raise TableError(f"{what!r} ({enc}) lacks one of {', '.join(kids)}")
        return [d for d in found if d is not None]

    def _densify(self, x: NodeDocuments, parts: list[np.ndarray], max_bytes: int) -> np.ndarray:
        enc = x.attributes.get("encoding-type")
        shape = x.attributes.get("shape")
        if enc not in ("csr_matrix", "csc_matrix") or not isinstance(shape, list):
            raise TableError(f"AnnData X encoding {_short(enc)} is not supported")
        data, indices, indptr = parts
        n, m = int(shape[0]), int(shape[1])
        if n * m * 8 > max_bytes:
            raise _too_large(n * m * 8, max_bytes)
        out = np.zeros((n, m), dtype=data.dtype if data.size else np.float64)
        major = n if enc == "csr_matrix" else m
        if len(indptr) != major + 1:
            raise TableError(f"AnnData X ({enc}) indptr has {len(indptr)} entries for {major}")
        for i in range(major):
            lo, hi = int(indptr[i]), int(indptr[i + 1])
            if enc == "csr_matrix":
                out[i, indices[lo:hi]] = data[lo:hi]
            else:
                out[indices[lo:hi], i] = data[lo:hi]
        return out


_SPARSE_PARTS = ("data", "indices", "indptr")
#: the key of the obs index's parts (no column can be named so: it is not a str)
_INDEX = "\x00index"
#: AnnData's encoded dataframe columns (groups) and their two arrays
_ENCODED_PARTS = {
    "categorical": ("categories", "codes"),
    "nullable-integer": ("values", "mask"),
    "nullable-boolean": ("values", "mask"),
    "nullable-string-array": ("values", "mask"),
}


def _encoding_parts(d: NodeDocuments, what: str) -> tuple[str, ...]:
    """The two arrays of an encoded AnnData group, or a :class:`TableError`."""
    enc = str(d.attributes.get("encoding-type"))
    kids = _ENCODED_PARTS.get(enc)
    if kids is None:
        raise TableError(f"{what!r}: AnnData encoding {_short(enc)} is not supported")
    return kids


def _decode_column(name: str, enc: str, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """An encoded AnnData column from its two arrays."""
    if enc == "categorical":
        codes = second.astype(np.int64)
        if codes.size and (int(np.max(codes)) >= len(first) or int(np.min(codes)) < -1):
            raise TableError(f"column {name!r}: categorical codes outside its categories")
        if first.dtype.kind in ("i", "u", "f", "b") and not (codes < 0).any():
            return np.asarray(first)[codes]
        cats = np.asarray([*first.tolist(), None], dtype=object)
        return np.asarray(cats[codes], dtype=object)  # code -1 (missing) -> None
    mask = second.astype(bool)
    if enc == "nullable-integer":
        return np.where(mask, np.nan, first.astype(np.float64)) if mask.any() else first
    out = np.asarray(first, dtype=object)
    out[mask] = None
    return out


_LAYOUTS: dict[str, _Layout] = {
    "anndata": _AnnDataLayout(),
    "parquet": _ParquetLayout(),
    "csv": _CsvLayout(),
    "json": _JsonLayout(),
}


# ------------------------------------------------------------------------------ ROIs


@dataclass(frozen=True)
class RoiBoxes:
    """A ROI table's boxes in level-0 pixels: ``start`` (inclusive) and ``stop``
    (exclusive) per ROI (rows) and axis (columns, named by ``axes``), as integer arrays;
    ``names`` is the table's index (ROI names, a masking ROI table's label values)."""

    names: np.ndarray
    axes: tuple[str, ...]
    start: np.ndarray
    stop: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    def slices(self, i: int) -> tuple[slice, ...]:
        """ROI *i* as a numpy index of level 0 (``level0[boxes.slices(i)]``)."""
        return tuple(
            slice(int(a), int(b)) for a, b in zip(self.start[i], self.stop[i], strict=True)
        )


def _world_to_pixel(values: np.ndarray, size: float) -> np.ndarray:
    raster = np.asarray(values, dtype=np.float64) / size
    rounded = np.round(raster)
    return np.where(np.abs(rounded - raster) < _PIXEL_EPS, rounded, raster)


def roi_pixel_boxes(
    table: TableData,
    axes: Sequence[str],
    scale: Sequence[float],
    shape: Sequence[int] | None = None,
) -> RoiBoxes:
    """Each ROI of a ROI (or masking ROI) table as a box of level-0 pixels, as ngio maps it.

    ``<a>_micrometer`` and ``len_<a>_micrometer`` (a = x, y, z; ``t_second`` /
    ``len_t_second`` for t) are relative to the array origin: divided by the pixel size
    (rounded to the pixel when within 1 %), the start floored and the end (start + length)
    ceiled, clipped to *shape*. An axis the table has no columns for (z may be missing;
    channels) is the whole extent. The image's translation is not used: see
    :func:`roi_world_boxes`.

    Parameters
    ----------
    table : TableData
        A ROI or masking ROI table (:func:`read_table`).
    axes : sequence of str
        The image's axis names.
    scale : sequence of float
        The image's level-0 pixel size per axis.
    shape : sequence of int, optional
        The level-0 shape to clip to (without it, an axis without columns is 0..1).

    Returns
    -------
    RoiBoxes
        ``start`` (inclusive) and ``stop`` (exclusive) per ROI and axis, and the ROI names.
    """
    p0, p1, whole = _roi_pixel_extents(table, axes, scale)
    lo, hi = np.floor(p0).astype(np.int64), np.ceil(p1).astype(np.int64)
    if shape is not None:
        extent = np.asarray([int(s) for s in shape], dtype=np.int64)
        lo, hi = np.clip(lo, 0, extent), np.clip(hi, 0, extent)
        hi[:, whole] = extent[whole]
    return RoiBoxes(np.asarray(table.index), tuple(axes), lo, hi)


def roi_pixel_edges(
    table: TableData, axes: Sequence[str], scale: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Each ROI of a ROI (or masking ROI) table exactly, in level-0 pixel *edges* of an
    image with *axes* and level-0 *scale*: ``(start, stop)`` per ROI and axis, floats,
    neither floored, ceiled nor clipped (:func:`roi_pixel_boxes` is the pixels they
    cover). The table's micrometres are edges relative to the array origin (ngio's
    convention: ``x_micrometer`` 0 is the left edge of pixel 0), so pixel *i* is ``[i,
    i + 1)`` here, where OME-Zarr and napari put its centre at *i*: a napari rectangle
    of the ROI is ``start - 0.5 .. stop - 0.5`` in the image's data coordinates. A
    position within 1 % of a pixel edge is on it, as ngio rounds. An axis the table has
    no columns for is ``0 .. 1``."""
    p0, p1, _ = _roi_pixel_extents(table, axes, scale)
    return p0, p1


def _roi_pixel_extents(
    table: TableData, axes: Sequence[str], scale: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(start, stop, whole)``: the ROIs in pixel edges (:func:`roi_pixel_edges`), and
    per axis whether the table leaves it whole (no columns for it)."""
    info = table.info
    n = len(table)
    start = np.zeros((n, len(axes)), dtype=np.float64)
    stop = np.ones((n, len(axes)), dtype=np.float64)
    whole = np.zeros(len(axes), dtype=bool)
    for k, (ax, size) in enumerate(zip(axes, scale, strict=True)):
        name = str(ax).lower()
        cols = (
            (f"{name}_micrometer", f"len_{name}_micrometer")
            if name in ("x", "y", "z")
            else ("t_second", "len_t_second")
            if name == "t"
            else None
        )
        if cols is None or cols[0] not in table.columns or cols[1] not in table.columns:
            if cols is not None and name in ("x", "y"):
                raise TableError(
                    f"ROI columns {cols[0]!r} / {cols[1]!r} missing", info.name, _where(info)
                )
            whole[k] = True
            continue
        s = np.asarray(table.columns[cols[0]], dtype=np.float64)
        ln = np.asarray(table.columns[cols[1]], dtype=np.float64)
        bad = ~(np.isfinite(s) & np.isfinite(ln))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise TableError(
                f"ROI {table.index[row]!r} has no {name} position or length",
                info.name,
                _where(info),
            )
        if not size > 0:
            raise TableError(
                f"the image's pixel size along {name} is {size}", info.name, _where(info)
            )
        p0 = _world_to_pixel(s, size)
        start[:, k], stop[:, k] = p0, p0 + _world_to_pixel(ln, size)
    return start, stop, whole


def roi_world_boxes(
    boxes: RoiBoxes, scale: Sequence[float], translation: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """*boxes* in the image's world: pixel * level-0 scale + level-0 translation.

    Parameters
    ----------
    boxes : RoiBoxes
        Level-0 pixel boxes (:func:`roi_pixel_boxes`).
    scale : sequence of float
        The image's level-0 scale per axis.
    translation : sequence of float
        The image's level-0 translation per axis.

    Returns
    -------
    tuple of numpy.ndarray
        ``(low, high)``, each (ROIs, axes): ``low`` the first pixel's coordinate, ``high``
        the one past the last (OME-Zarr's pixel coordinates: a pixel's centre), so the box
        covers the pixels of the image placed with its translation.
    """
    sc = np.asarray(scale, dtype=np.float64)
    tr = np.asarray(translation, dtype=np.float64)
    return boxes.start * sc + tr, boxes.stop * sc + tr


def image_roi_boxes(table: TableData, image: Any) -> RoiBoxes:
    """:func:`roi_pixel_boxes` for an opened :class:`~napari_ozx.ngff.read.open.Image`."""
    ms = image.multiscale
    return roi_pixel_boxes(
        table, tuple(ms.axis_names), tuple(ms.datasets[0].scale), tuple(image.levels[0].shape)
    )


# ------------------------------------------------------------- categorical colours
# scanpy, squidpy and spatialdata-plot keep a categorical ``obs`` column's colours in
# ``uns["<column>_colors"]``: one colour string per category, in the order of the
# column's ``categories``; a viewer colours each category as the analysis did.

#: at most this many categories (a colour list larger than this is ignored)
MAX_COLOR_CATEGORIES = 100_000


def category_colors(source: Any, info: TableInfo) -> dict[str, dict[str, str]]:
    """column -> category -> colour string, for each categorical ``obs`` column of the
    AnnData table *info* that has ``uns["<column>_colors"]`` (at least one colour per
    category). {} for another table, or when they cannot be read (never raises)."""
    if info.backend != "anndata":
        return {}
    try:
        with opened_source(source) as src:
            obs = _AnnDataLayout()._layout(src, info).obs_order
            if not obs:
                return {}
            p = info.path
            cols = list(obs)
            colour_docs = src.read_docs([join_path(p, "uns", f"{c}_colors") for c in cols])
            wanted = [
                (c, d)
                for c, d in zip(cols, colour_docs, strict=True)
                if d is not None and d.error is None and d.node_type == "array"
            ]
            if not wanted:
                return {}
            cat_docs = src.read_docs([join_path(p, "obs", c, "categories") for c, _ in wanted])
            pairs = [
                (c, d, k)
                for (c, d), k in zip(wanted, cat_docs, strict=True)
                if k is not None and k.error is None and k.node_type == "array"
            ]
            docs = [x for _, d, k in pairs for x in (d, k)]
            values = _arrays(src, docs, max_bytes=MAX_COLOR_CATEGORIES * 16)
    except (OzxError, OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[str, dict[str, str]] = {}
    for i, (c, _d, _k) in enumerate(pairs):
        colours, cats = values[2 * i].ravel().tolist(), values[2 * i + 1].ravel().tolist()
        if len(colours) >= len(cats) and all(isinstance(x, str) for x in colours):
            out[c] = {str(cat): str(col) for cat, col in zip(cats, colours, strict=False)}
    return out
