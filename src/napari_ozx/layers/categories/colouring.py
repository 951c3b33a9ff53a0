"""Colour a layer by one of its feature columns, and hide or show its categories.

:func:`color_by` and :func:`show_categories` work on Points (face colour), Shapes (edge
and face, a transparent face kept transparent), napari-ozx's polygon Surfaces (ring
vertex colours, :mod:`napari_ozx.layers.spatial.polygons`) and Labels (a
``DirectLabelColormap`` over the ``index`` column), one ``features`` row per object. A
categorical column gets the table's ``uns["<column>_colors"]`` or spatialdata-plot's
scanpy palette (:mod:`.palettes`), rows without a category grey; a numeric one a napari
colormap over its range, NaN grey. Hidden means not drawn: napari 0.9 draws every point
of a fully displayed layer whatever ``Points.shown`` says, so a hidden row is made fully
transparent; nothing else of the layer changes. A few numpy passes over pandas' own codes
plus one napari colour update (``benchmarks/bench_spatialdata.py``: 2,000,000 points).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx._compat import napari_unproxied
from napari_ozx.errors import OzxError
from napari_ozx.layers.categories.palettes import MISSING_RGBA, default_palette, to_rgba

if TYPE_CHECKING:
    from napari.layers import Layer

__all__ = [
    "CATEGORIES_KEY",
    "Legend",
    "categorical_columns",
    "color_by",
    "colour_columns",
    "current_legend",
    "is_number",
    "layer_kind",
    "make_legend",
    "rows_features",
    "show_categories",
]

#: the key of a layer's colouring record in ``layer.metadata``: ``column``, ``kind``,
#: ``hidden`` (the categories not drawn), ``uns_colors`` (column -> category -> colour,
#: from the table's ``uns``), ``limits`` and ``colormap`` of a continuous column
CATEGORIES_KEY = "napari_ozx_categories"
#: the SpatialData record's key (layers.spatial.elements.SPATIAL_KEY, not imported:
#: layers.spatial imports this package)
_SPATIAL_KEY = "napari_ozx_spatialdata"
#: entries of a continuous column's colormap table (finer than the 256 steps drawn),
#: used above that many rows
LUT_SIZE = 4096
#: the reader's polygon rings colour (its Surface colormap's top), before any colouring
_RING_RGBA = (1.0, 1.0, 0.0, 1.0)


class CategoryError(OzxError):
    """A column that cannot colour a layer, or a layer that has no rows to colour."""


@dataclass
class Legend:
    """What a layer is coloured by: the column, its categories (in their order) with
    their counts and colours, or a continuous column's range and colormap."""

    column: str
    kind: str  # "categorical" or "continuous"
    categories: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    colours: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    missing: int = 0  # rows without a category or value
    limits: tuple[float, float] | None = None
    data_range: tuple[float, float] | None = None
    colormap: str | None = None
    rows: int = 0

    def colour_of(self, category: str) -> tuple[float, ...]:
        return tuple(float(c) for c in self.colours[self.categories.index(category)])


# ------------------------------------------------------------------------ the rows


def layer_kind(layer: Any) -> str | None:
    """ "points", "shapes", "surface" (napari-ozx's polygon rings), "labels" (with
    ``features`` and their ``index`` column) or None: a layer this module colours."""
    from napari.layers import Labels, Points, Shapes, Surface

    if isinstance(layer, Points):
        return "points"
    if isinstance(layer, Shapes):
        return "shapes"
    if isinstance(layer, Surface):
        rec = _spatial(layer)
        return "surface" if "ring_features" in rec and "ring_offsets" in rec else None
    if isinstance(layer, Labels):
        feats = getattr(layer, "features", None)
        return "labels" if feats is not None and "index" in feats else None
    return None


def _spatial(layer: Any) -> Mapping[str, Any]:
    meta = getattr(layer, "metadata", None)
    rec = meta.get(_SPATIAL_KEY) if isinstance(meta, Mapping) else None
    return rec if isinstance(rec, Mapping) else {}


def rows_features(layer: Any) -> Any:
    """The features of the layer's rows (a pandas DataFrame): its ``features``, the
    polygon Surface's ring features."""
    import pandas as pd

    kind = layer_kind(layer)
    if kind is None:
        raise CategoryError(
            f"layer {getattr(layer, 'name', '?')!r} ({type(layer).__name__}) has no "
            "features to colour by (Points, Shapes, napari-ozx's polygon Surface, or "
            "Labels with a table)"
        )
    if kind == "surface":
        return pd.DataFrame(dict(_spatial(layer)["ring_features"]), copy=False)
    return layer.features


def colour_columns(layer: Any) -> list[str]:
    """The columns a layer can be coloured by (the labels' ``index`` left out)."""
    feats = rows_features(layer)
    return [str(c) for c in feats.columns if not (layer_kind(layer) == "labels" and c == "index")]


def _is_categorical(col: Any) -> bool:
    import pandas as pd

    dtype = getattr(col, "dtype", None)
    return isinstance(dtype, pd.CategoricalDtype) or getattr(dtype, "kind", "O") in "bOUST"


def categorical_columns(layer: Any) -> list[str]:
    feats = rows_features(layer)
    return [c for c in colour_columns(layer) if _is_categorical(feats[c])]


def _codes(col: Any) -> tuple[np.ndarray, list[str]]:
    """(code per row, -1 for none; the categories as text, in their order): a pandas
    categorical keeps its own order (the one ``uns`` colours follow), other columns
    their sorted distinct values (pandas' order for a new categorical)."""
    import pandas as pd

    if not isinstance(getattr(col, "dtype", None), pd.CategoricalDtype):
        col = pd.Categorical(np.asarray(col, dtype=object) if _is_text(col) else np.asarray(col))
    cat = col.cat if isinstance(col, pd.Series) else col
    codes = np.asarray(cat.codes)
    return codes, [str(c) for c in cat.categories]


def _is_text(col: Any) -> bool:
    return getattr(getattr(col, "dtype", None), "kind", "O") in "OUST"


def _uns_colours(layer: Any, column: str, categories: list[str]) -> np.ndarray | None:
    meta = getattr(layer, "metadata", None)
    rec = meta.get(CATEGORIES_KEY) if isinstance(meta, Mapping) else None
    uns = rec.get("uns_colors", {}).get(column) if isinstance(rec, Mapping) else None
    if not isinstance(uns, Mapping) or not all(c in uns for c in categories):
        return None
    try:
        return to_rgba([str(uns[c]) for c in categories])
    except (ValueError, TypeError, KeyError):
        return None


def make_legend(
    layer: Any,
    column: str,
    *,
    colormap: str = "viridis",
    limits: tuple[float, float] | None = None,
) -> tuple[Legend, np.ndarray, np.ndarray | None]:
    """The legend of *column* and each row's colour ((n, 4) float32), without touching
    the layer; also each row's category code (categorical columns), else None."""
    feats = rows_features(layer)
    if column not in feats or (layer_kind(layer) == "labels" and column == "index"):
        have = ", ".join(colour_columns(layer)) or "none"
        raise CategoryError(
            f"layer {getattr(layer, 'name', '?')!r} has no feature {column!r} to colour by "
            f"(features: {have})"
        )
    col = feats[column]
    n = len(feats)
    if _is_categorical(col):
        codes, cats = _codes(col)
        palette = _uns_colours(layer, column, cats)
        if palette is None:
            palette = default_palette(len(cats))
        table = np.vstack([palette.astype(np.float32), np.asarray([MISSING_RGBA], np.float32)])
        # a row without a category (code -1) takes the last row: grey
        rows = np.take(table, codes, axis=0, mode="wrap")
        counts = np.bincount(codes[codes >= 0], minlength=len(cats)) if n else np.zeros(len(cats))
        legend = Legend(
            column,
            "categorical",
            cats,
            [int(c) for c in counts],
            palette.astype(np.float32),
            missing=int(np.count_nonzero(codes < 0)),
            rows=n,
        )
        return legend, rows, codes
    from napari.utils.colormaps import ensure_colormap

    values = np.asarray(col, dtype=np.float64)
    finite = np.isfinite(values)
    rng = (
        (float(np.min(values[finite])), float(np.max(values[finite])))
        if finite.any()
        else (0.0, 1.0)
    )
    lo, hi = limits if limits is not None else rng
    cmap = ensure_colormap(colormap)
    scaled = np.clip((values - lo) / (hi - lo), 0, 1) if hi > lo else np.zeros_like(values)
    scaled[~finite] = 0
    if n > LUT_SIZE:
        # the colormap sampled finer than 8-bit colour, then looked up: napari's own
        # map interpolates every value (most of a second for 2,000,000 rows)
        lut = np.asarray(cmap.map(np.linspace(0.0, 1.0, LUT_SIZE)), dtype=np.float32)
        rows = lut[np.rint(scaled * (LUT_SIZE - 1)).astype(np.intp)]
    else:
        rows = np.asarray(cmap.map(scaled), dtype=np.float32)
    rows[~finite] = MISSING_RGBA
    legend = Legend(
        column,
        "continuous",
        missing=int(np.count_nonzero(~finite)),
        limits=(float(lo), float(hi)),
        data_range=rng,
        colormap=str(cmap.name),
        rows=n,
    )
    return legend, rows, None


# ------------------------------------------------------------------------ the state


@dataclass
class _State:
    """What a layer looked like before napari-ozx coloured it, and what it does now."""

    rows: int
    original_a: np.ndarray  # points: face; shapes: face; surface: ring; labels: row
    original_b: np.ndarray | None  # points: border; shapes: edge
    base_a: np.ndarray
    base_b: np.ndarray | None
    visible: np.ndarray | None = None  # rows drawn (None: all)
    legend: Legend | None = None
    codes: np.ndarray | None = None  # the legend column's codes
    filter_column: str | None = None
    filter_values: frozenset[str] | None = None


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()


def _f32(a: Any) -> np.ndarray:
    return np.array(a, dtype=np.float32, copy=True).reshape(-1, 4)


def _state(layer: Any) -> _State:
    kind = layer_kind(layer)
    n = len(rows_features(layer))
    st = _STATES.get(layer)
    if st is not None and st.rows == n:
        return st
    a: np.ndarray
    b: np.ndarray | None = None
    if kind == "points":
        a, b = _f32(layer.face_color), _f32(layer.border_color)
    elif kind == "shapes":
        a, b = _f32(layer.face_color), _f32(layer.edge_color)
    elif kind == "surface":
        a = np.tile(np.asarray(_RING_RGBA, np.float32), (n, 1))
    else:
        labels = np.asarray(rows_features(layer)["index"])
        a = _f32(layer.colormap.map(labels)) if n else np.zeros((0, 4), np.float32)
    st = _State(n, a, b, a.copy(), None if b is None else b.copy())
    _STATES[layer] = st
    return st


def _record(layer: Any, st: _State) -> None:
    """The layer's colouring in its metadata (what a saved session or script reads)."""
    meta = dict(layer.metadata) if isinstance(layer.metadata, Mapping) else {}
    rec = dict(meta.get(CATEGORIES_KEY) or {})
    lg = st.legend
    if lg is not None:
        rec.update(column=lg.column, kind=lg.kind)
        if lg.kind == "continuous":
            rec.update(limits=list(lg.limits or ()), colormap=lg.colormap)
        else:
            rec.pop("limits", None)
            rec.pop("colormap", None)
    rec["filter_column"] = st.filter_column
    rec["shown"] = None if st.filter_values is None else sorted(st.filter_values)
    meta[CATEGORIES_KEY] = rec
    layer.metadata = meta


# ------------------------------------------------------------------------ drawing


def _apply(layer: Any, st: _State) -> None:
    """Draw *st*: the base colours, hidden rows fully transparent."""
    kind = layer_kind(layer)
    hidden = None if st.visible is None else ~st.visible
    a = st.base_a
    b = st.base_b
    if hidden is not None and hidden.any():
        a = a.copy()
        a[hidden, 3] = 0
        if b is not None:
            b = b.copy()
            b[hidden, 3] = 0
    if kind == "points":
        layer.face_color = a
        if b is not None and np.any(np.asarray(layer.border_width) > 0):
            layer.border_color = b
    elif kind == "shapes":
        layer.face_color = a
        if b is not None:
            layer.edge_color = b
    elif kind == "surface":
        layer.vertex_colors = _surface_vertex_colours(layer, a)
    else:
        _labels_colormap(layer, a)


def _surface_vertex_colours(layer: Any, ring_rgba: np.ndarray) -> np.ndarray:
    """Each mesh vertex's colour from its ring's: opaque at the ring and at an outline's
    inner corners, transparent at a filled ring's centre (the reader's look)."""
    from napari_ozx.layers.spatial.polygons import mesh_vertex_rings

    rec = _spatial(layer)
    rings, centre = mesh_vertex_rings(np.asarray(rec["ring_offsets"]), np.asarray(rec["filled"]))
    out = ring_rgba[rings]
    out[centre, 3] = 0
    return np.ascontiguousarray(out, dtype=np.float32)


def _labels_colormap(layer: Any, rows: np.ndarray) -> None:
    from napari.utils.colormaps import DirectLabelColormap

    labels = np.asarray(rows_features(layer)["index"]).astype(np.int64).tolist()
    colours: dict[Any, Any] = {None: np.asarray(MISSING_RGBA, np.float32), 0: np.zeros(4)}
    colours.update({v: c for v, c in zip(labels, rows, strict=True) if v != 0})
    layer.colormap = DirectLabelColormap(color_dict=colours)


# ------------------------------------------------------------------------ public


def color_by(
    layer: Layer,
    column: str,
    *,
    colormap: str = "viridis",
    limits: tuple[float, float] | None = None,
) -> Legend:
    """Colour *layer*'s objects by its feature *column* (see the module).

    Categories hidden by :func:`show_categories` stay hidden; the layer's metadata records
    the legend (``CATEGORIES_KEY``).

    Parameters
    ----------
    layer : napari.layers.Points, Shapes, Surface or Labels
        A layer with ``features`` (a polygon Surface: napari-ozx's).
    column : str
        The feature column to colour by.
    colormap : str, default "viridis"
        The napari colormap of a numeric column.
    limits : tuple of float, optional
        The values at the colormap's ends (default: the column's range).

    Returns
    -------
    Legend
        The categories with their colours and counts, or the numeric range.

    Raises
    ------
    OzxError
        The layer has no such column.
    """
    layer = napari_unproxied(layer)
    lod = _lod(layer)
    if lod is not None:
        return _lod_color_by(layer, lod, column, colormap, limits)
    st = _state(layer)
    legend, rows, codes = make_legend(layer, column, colormap=colormap, limits=limits)
    kind = layer_kind(layer)
    if kind == "shapes":
        face = rows.copy()
        face[:, 3] = st.original_a[:, 3]  # a transparent face stays transparent
        st.base_a, st.base_b = face, rows
    else:
        st.base_a = rows
    st.legend, st.codes = legend, codes
    _apply(layer, st)
    _record(layer, st)
    return legend


def show_categories(layer: Layer, column: str, values: Iterable[object] | None) -> int:
    """Draw only the rows of *layer* whose *column* is one of *values*.

    The others are not drawn (fully transparent, see the module).

    Parameters
    ----------
    layer : napari.layers.Points, Shapes, Surface or Labels
        A layer with ``features``.
    column : str
        The feature column.
    values : iterable, or None
        The values drawn (compared as text, or as numbers for a numeric column); None draws
        every row.

    Returns
    -------
    int
        How many rows are drawn.

    Raises
    ------
    CategoryError
        The layer has no such column.
    """
    layer = napari_unproxied(layer)
    lod = _lod(layer)
    if lod is not None:
        return _lod_show_categories(layer, lod, column, values)
    st = _state(layer)
    feats = rows_features(layer)
    if column not in feats:
        have = ", ".join(colour_columns(layer)) or "none"
        raise CategoryError(
            f"layer {getattr(layer, 'name', '?')!r} has no feature {column!r} (features: {have})"
        )
    if values is None:
        st.visible, st.filter_column, st.filter_values = None, None, None
    else:
        wanted = frozenset("" if v is None else str(v) for v in values)
        col = feats[column]
        if _is_categorical(col):
            if st.legend is not None and st.legend.column == column and st.codes is not None:
                codes, cats = st.codes, st.legend.categories
            else:
                codes, cats = _codes(col)
            keep = np.array([c in wanted for c in cats] + [False], dtype=bool)
            visible = np.take(keep, codes, mode="wrap")  # code -1: the last, False
        else:
            nums = np.asarray(col, dtype=np.float64)
            targets = [float(v) for v in wanted if is_number(v)]
            visible = np.isin(nums, np.asarray(targets, dtype=np.float64))
        st.visible, st.filter_column, st.filter_values = visible, column, wanted
    _apply(layer, st)
    _record(layer, st)
    return st.rows if st.visible is None else int(np.count_nonzero(st.visible))


# ------------------------------------------------------------------ level of detail


def _lod(layer: Any) -> Any:
    """The level-of-detail element behind *layer* (:mod:`napari_ozx.layers.spatial.lod`:
    its Points layer holds only the view's points, so its colours and filter are the
    element's, kept for every view), else None."""
    from napari_ozx.layers.spatial.lod import lod_of

    lod = lod_of(layer)
    if lod is not None:
        lod.bind(layer)
    return lod


def _lod_color_by(
    layer: Any, lod: Any, column: str, colormap: str, limits: tuple[float, float] | None
) -> Legend:
    try:
        info = lod.colour_by(column, colormap, limits)
    except OzxError as e:
        raise CategoryError(str(e)) from None
    legend = Legend(column=column, **info)
    lod.legend = legend
    lod.recolour()
    _lod_record(layer, lod)
    return legend


def _lod_show_categories(layer: Any, lod: Any, column: str, values: Iterable[object] | None) -> int:
    try:
        kept = int(lod.set_filter(column, values))
    except OzxError as e:
        raise CategoryError(str(e)) from None
    lod.refilter()
    _lod_record(layer, lod)
    return kept


def _lod_record(layer: Any, lod: Any) -> None:
    """The colouring in the metadata of the element's layers (both)."""
    for lay in (lod.points_layer, lod.overview_layer, layer):
        if lay is None or not isinstance(lay.metadata, Mapping):
            continue
        meta = dict(lay.metadata)
        rec = dict(meta.get(CATEGORIES_KEY) or {})
        if lod.colour_column is not None:
            rec.update(column=lod.colour_column, kind=lod.colour_kind)
        rec["filter_column"] = lod.filter_column
        rec["shown"] = None if lod.filter_values is None else sorted(lod.filter_values)
        meta[CATEGORIES_KEY] = rec
        lay.metadata = meta


def is_number(text: str) -> bool:
    """Whether *text* reads as a number (``float`` takes it)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def current_legend(layer: Any) -> Legend | None:
    """The legend of what *layer* is coloured by: napari-ozx's last :func:`color_by`,
    else the column its reader coloured it by (a points element's ``feature_key``),
    computed without touching the layer; None when neither."""
    layer = napari_unproxied(layer)
    lod = _lod(layer)
    if lod is not None:
        if not isinstance(lod.legend, Legend) and lod.ready and lod.colour_column:
            lod.legend = Legend(column=lod.colour_column, **lod.colour_by(lod.colour_column))
        return lod.legend if isinstance(lod.legend, Legend) else None
    st = _STATES.get(layer)
    if st is not None and st.legend is not None and st.rows == len(rows_features(layer)):
        return st.legend
    meta = getattr(layer, "metadata", None)
    rec = meta.get(CATEGORIES_KEY) if isinstance(meta, Mapping) else None
    column = rec.get("column") if isinstance(rec, Mapping) else None
    column = column or _spatial(layer).get("colour_by")
    if not isinstance(column, str) or column not in rows_features(layer):
        return None
    legend, _rows, codes = make_legend(layer, column)
    st = _state(layer)
    st.legend, st.codes = legend, codes
    return legend


def hidden_categories(layer: Any) -> set[str]:
    """The categories of the legend's column that :func:`show_categories` hides."""
    layer = napari_unproxied(layer)
    lod = _lod(layer)
    if lod is not None:
        lg = lod.legend
        if (
            not isinstance(lg, Legend)
            or lod.filter_values is None
            or lod.filter_column != lg.column
        ):
            return set()
        return {c for c in lg.categories if c not in lod.filter_values}
    st = _STATES.get(layer)
    if st is None or st.legend is None or st.filter_values is None:
        return set()
    if st.filter_column != st.legend.column:
        return set()
    return {c for c in st.legend.categories if c not in st.filter_values}


def add_uns_colors(layer_kwargs: dict[str, Any], colours: Mapping[str, Mapping[str, str]]) -> None:
    """Record a table's ``uns`` colours (column -> category -> colour,
    :func:`napari_ozx.ngff.tables.read.category_colors`) in layer data's metadata, for
    :func:`color_by` (changed in place; a list of metadata, one per layer, each)."""
    if not colours:
        return
    meta = layer_kwargs.get("metadata")
    metas = meta if isinstance(meta, list) else [meta]
    if meta is None:
        layer_kwargs["metadata"] = metas[0] = {}
    for m in metas:
        if not isinstance(m, dict):
            continue
        rec = m.setdefault(CATEGORIES_KEY, {})
        uns = rec.setdefault("uns_colors", {})
        for column, by_category in colours.items():
            uns[column] = dict(by_category)
