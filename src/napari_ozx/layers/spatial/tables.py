"""A SpatialData store's tables on its shapes and points elements, as their ``features``.

:func:`element_table_features` gives each shapes and points element the rows of the
tables that annotate it (``region_key`` value), matched by instance id: the shapes' index,
the points' ``instance_key`` column (every point of an instance gets its row).
:func:`join_rows` does the match vectorised (``Index.get_indexer``; categorical ids
through their categories), so millions of points cost no Python loop. No row: NaN or a
missing category; a clashing column is named ``<table>.<column>``; tables above
:data:`~napari_ozx.ngff.tables.read.OPEN_MAX_ROWS` rows are listed, not read. Design
notes: ``docs/design/spatialdata-layers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.provenance import LayerData
from napari_ozx.layers.spatial.elements import SPATIAL_KEY

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ngff.tables.read import TableData, TableInfo

__all__ = ["element_table_features", "join_rows"]


def _targets(root: OmeZarr, layers: Sequence[LayerData]) -> dict[str, tuple[Any, str]]:
    """element name -> (the features its table columns go to, the id column's name) for
    every shapes and points layer of *layers*."""
    from napari_ozx.ngff.spatial.elements import list_elements

    out: dict[str, tuple[Any, str]] = {}
    points_keys: dict[str, Any] | None = None
    for _data, kwargs, _kind in layers:
        meta = kwargs.get("metadata")
        rec = meta.get(SPATIAL_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(rec, Mapping) or rec.get("source") != str(root.source):
            continue
        name = str(rec.get("element", "")).rsplit("/", 1)[-1]
        if rec.get("kind") == "shapes":
            feats = rec.get("ring_features", kwargs.get("features"))
            if feats is not None and "instance_id" in feats:
                out[name] = (feats, "instance_id")
        elif rec.get("kind") == "points":
            if points_keys is None:
                points_keys = {
                    el.name: el.spatialdata_attrs.get("instance_key")
                    for el in list_elements(root, ("points",))
                }
            key = points_keys.get(name)
            feats = kwargs.get("features")
            if isinstance(key, str) and feats is not None and key in feats:
                out[name] = (feats, key)
            else:
                out[name] = (feats, "")  # reported only if a table annotates it
    return out


def element_table_features(root: OmeZarr, layers: Sequence[LayerData], report: Report) -> None:
    """The store's tables on its shapes and points *layers* (napari layer data made by
    :mod:`.elements`): each element gets its rows' columns as ``features``, matched by
    instance id (changed in place). A problem is reported naming the table, never
    raised."""
    from napari_ozx.layers.categories.colouring import add_uns_colors
    from napari_ozx.ngff.tables.read import category_colors, read_table, spatialdata_tables

    targets = _targets(root, layers)
    if not targets:
        return
    kwargs_of = {_element_name(kw): kw for _d, kw, _k in layers}
    for info in spatialdata_tables(root):
        mine = [r for r in info.regions if r in targets]
        if info.error is not None or not mine or not info.small():
            continue
        what = f"{root.source} (table {info.name!r})"
        try:
            table = read_table(root, info)
        except OzxError as e:
            report(what, e)
            continue
        colours = category_colors(root, info)
        for region in mine:
            feats, id_column = targets[region]
            if not id_column:
                report(
                    what,
                    OzxError(
                        f"points element {region!r} has no instance_key column: "
                        f"the table's rows are not joined to it"
                    ),
                )
                continue
            try:
                join_rows(feats, feats[id_column], table.for_region(region), info, report)
                if colours:
                    add_uns_colors(kwargs_of[region], colours)
            except OzxError as e:
                report(f"{what} on {region!r}", e)


def _element_name(kwargs: Mapping[str, Any]) -> str:
    meta = kwargs.get("metadata")
    rec = meta.get(SPATIAL_KEY) if isinstance(meta, Mapping) else None
    return str(rec.get("element", "")).rsplit("/", 1)[-1] if isinstance(rec, Mapping) else ""


def _table_ids(rows: TableData, info: TableInfo) -> np.ndarray:
    key = info.instance_key
    if key is not None and key in rows.columns:
        return np.asarray(rows.columns[key])
    if key is None or key == info.index_key or info.index_key is None:
        return np.asarray(rows.index)
    raise OzxError(f"instance_key {key!r} is not a column of table {info.name!r}")


def _positions(table_ids: np.ndarray, element_ids: Any) -> tuple[np.ndarray, int]:
    """For each of *element_ids*, the position of its row in *table_ids* (-1: none),
    and how many table ids repeat (the first row of an id is used)."""
    import pandas as pd

    index = pd.Index(table_ids)
    first = np.arange(len(index))
    repeats = 0
    if not index.is_unique:
        keep = ~index.duplicated()
        repeats = int(len(index) - keep.sum())
        index, first = index[keep], first[keep]
    col = element_ids
    if isinstance(getattr(col, "dtype", None), pd.CategoricalDtype):
        codes = np.asarray(col.cat.codes if isinstance(col, pd.Series) else col.codes)
        cats = col.cat.categories if isinstance(col, pd.Series) else col.categories
        per_cat = index.get_indexer(cats)
        where = np.where(codes >= 0, per_cat[np.maximum(codes, 0)], -1)
    else:
        where = index.get_indexer(np.asarray(col))
    where = np.where(where >= 0, first[np.maximum(where, 0)], -1)
    return where.astype(np.int64, copy=False), repeats


def _joined(col: np.ndarray, where: np.ndarray) -> Any:
    """*col* taken at *where* (-1: missing): numbers as floats with NaN (their own
    dtype when every row is found), text as a pandas Categorical."""
    import pandas as pd

    ok = where >= 0
    if col.dtype.kind in "OUS":
        cat = pd.Categorical(col)
        codes = np.where(ok, cat.codes[np.maximum(where, 0)], -1)
        return pd.Categorical.from_codes(codes, dtype=cat.dtype)
    if ok.all():
        return col[where]
    vals = np.full(len(where), np.nan)
    vals[ok] = col[where[ok]]
    return vals


def join_rows(
    features: Any,
    element_ids: Any,
    rows: TableData,
    info: TableInfo,
    report: Report | None = None,
) -> None:
    """Add *rows*' columns (a table's rows for one element) to *features* (a dict of
    columns or a pandas DataFrame), matched by instance id: each entry of *element_ids*
    (one per feature row) takes the row whose ``instance_key`` equals it. The instance
    and region columns are not copied; a clashing name is prefixed ``<table>.``."""
    where, repeats = _positions(_table_ids(rows, info), element_ids)
    if repeats and report is not None:
        report(
            f"{info.source} (table {info.name!r})",
            OzxError(f"{repeats} instance ids repeat: the first row of each is used"),
        )
    skip = {info.instance_key, info.region_key}
    for name, col in rows.columns.items():
        if name in skip:
            continue
        out = name if name not in features else f"{info.name}.{name}"
        features[out] = _joined(np.asarray(col), where)
