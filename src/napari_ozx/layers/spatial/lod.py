"""Level of detail for a large points element: an overview zoomed out, every point zoomed in.

Above :data:`LOD_MIN_POINTS` points, an element is read into a
:class:`~napari_ozx.ngff.spatial.points_index.PointsIndex` and shown as two layers
(:func:`lod_layers_data`): ``<name> density``, a multiscale Image of points per pixel
(of the categories ``show_categories`` keeps; its name says which), shown while the
view holds more than :data:`VIEW_MAX` points; and ``<name>``, a 2D Points layer holding
exactly the points of the view and a margin (:meth:`LodPoints.view`) with their
features (``z`` among them: a 2D view draws every point whatever its z) and colours,
empty while zoomed out. The camera hook (:mod:`napari_ozx._lod`) replaces them off the
GUI thread. Hidden categories are left out of the data (napari 0.9 draws every point of
a fully displayed layer, whatever ``shown`` says). Both layers keep the
:class:`LodPoints` in their metadata (:data:`LOD_KEY`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.provenance import LayerData

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ngff.spatial.elements import Element
    from napari_ozx.ngff.spatial.points_index import PointsIndex

__all__ = [
    "LOD_KEY",
    "LOD_MIN_POINTS",
    "VIEW_MAX",
    "LodElement",
    "LodPoints",
    "ViewData",
    "lod_element_of",
    "lod_layers_data",
    "lod_of",
    "overview_layer_data",
]

#: a points element of more points than this is shown through level of detail; at or
#: below it, as one Points layer of every point (2,000,000 points: 1.4 s, +235 MiB)
LOD_MIN_POINTS = 3_000_000
#: the most points the Points layer holds: beyond, the view shows the overview
VIEW_MAX = 1_000_000
#: the margin around the view whose points are held too, a fraction of its size
MARGIN = 0.1
#: pixels of the overview's finest level along the element's longer side
OVERVIEW_SIDE = 2048
#: the key of the :class:`LodPoints` in both layers' metadata
LOD_KEY = "napari_ozx_lod"
_SPATIAL_KEY = "napari_ozx_spatialdata"  # layers.spatial.elements.SPATIAL_KEY


@dataclass
class ViewData:
    """The points of one view: napari layer data, features, colours."""

    rect: tuple[float, float, float, float]  #: y0, x0, y1, x1 (data coordinates)
    positions: np.ndarray | None  #: rows of the index; None: too many, overview
    coords: np.ndarray  #: (k, 2) float32, y x
    features: Any  #: pandas DataFrame
    colours: np.ndarray  #: (k, 4) float32
    count: int  #: points in the rectangle (an upper bound when None positions)


def lod_element_of(layer: Any) -> LodElement | None:
    """The :class:`LodElement` (points or cells) behind *layer* (its view layer or its
    overview), else None."""
    meta = getattr(layer, "metadata", None)
    got = meta.get(LOD_KEY) if isinstance(meta, dict) else None
    return got if isinstance(got, LodElement) else None


def lod_of(layer: Any) -> LodPoints | None:
    """The :class:`LodPoints` behind *layer* (its points or its overview), else None."""
    got = lod_element_of(layer)
    return got if isinstance(got, LodPoints) else None


class LodElement:
    """What the camera hook (:mod:`napari_ozx._lod`) needs of an element shown through
    level of detail: its two layers, :meth:`view` (off the GUI thread) and :meth:`apply`
    (on it). :class:`LodPoints` here, :class:`~.lod_shapes.LodShapes` for polygons."""

    name: str
    extent: tuple[float, float, float, float] | None = None  #: y0, x0, y1, x1
    index: Any = None
    build: Callable[[], Any] | None = None
    shown: Any = None
    on_filter: Callable[[Any], None] | None = None
    _points: weakref.ref[Any] | None = None
    _overview: weakref.ref[Any] | None = None

    @property
    def ready(self) -> bool:
        return self.index is not None

    def bind(self, layer: Any) -> None:
        """Remember *layer* as the view's layer or the overview (a multiscale image)."""
        if getattr(layer, "multiscale", False) is True:
            self._overview = weakref.ref(layer)
        else:
            self._points = weakref.ref(layer)

    @property
    def points_layer(self) -> Any:
        """The layer holding the view's items (points, or cells)."""
        return None if self._points is None else self._points()

    @property
    def overview_layer(self) -> Any:
        return None if self._overview is None else self._overview()

    def attach(self, index: Any) -> None:
        """The index, built off the GUI thread (:attr:`build`)."""
        self.index = index

    def view(self, rect: tuple[float, float, float, float]) -> Any:
        raise NotImplementedError

    def apply(self, layer: Any, data: Any) -> None:
        raise NotImplementedError

    def overview_levels(self) -> list[np.ndarray]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def overview_pixel(self) -> float:
        """The side of the overview's finest pixels (data units)."""
        assert self.extent is not None
        y0, x0, y1, x1 = self.extent
        return max(y1 - y0, x1 - x0, 1e-6) / OVERVIEW_SIDE


def pyramid(level: np.ndarray) -> list[np.ndarray]:
    """*level*, then halved (means of 2 x 2 pixels) down to 256 or fewer pixels a side:
    items per finest pixel at every level (one contrast for all)."""
    levels = [level]
    while max(level.shape) > 256:
        h, w = (level.shape[0] + 1) // 2 * 2, (level.shape[1] + 1) // 2 * 2
        padded = np.zeros((h, w), np.float32)
        padded[: level.shape[0], : level.shape[1]] = level
        level = padded.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
        levels.append(level)
    return levels


class LodPoints(LodElement):
    """One points element shown through level of detail (see the module)."""

    def __init__(
        self,
        index: PointsIndex | None,
        name: str,
        view_max: int | None = None,
        extent: tuple[float, float, float, float] | None = None,
    ) -> None:
        from napari_ozx.layers.categories.palettes import MISSING_RGBA

        self.index: PointsIndex = index  # type: ignore[assignment]  # None until built
        self.name = name
        #: the overview's extent (y0, x0, y1, x1): the points' (the index's, or the
        #: parquet statistics' when the index is built later, :attr:`build`)
        self.extent = extent if extent is not None or index is None else index.extent
        #: makes the index when it was not built with the layers (the camera hook
        #: calls it off the GUI thread, then :meth:`attach`)
        self.build: Callable[[], PointsIndex] | None = None
        self.view_max = VIEW_MAX if view_max is None else view_max
        self.lock = threading.Lock()
        self._missing = np.asarray(MISSING_RGBA, np.float32)
        self.colour_column: str | None = None
        self._lut: np.ndarray | None = None  # categorical: palette + missing row
        self._continuous: tuple[np.ndarray, float, float, str] | None = None
        self.filter_column: str | None = None
        self.filter_values: frozenset[str] | None = None
        self._keep: tuple[str, np.ndarray] | None = None
        self._points = self._overview = None
        self.rect: tuple[float, float, float, float] | None = None  # last view asked
        self.shown: ViewData | None = None
        #: called (GUI thread) when the overview must be recomputed: the camera hook
        #: does it off the GUI thread; without one, :meth:`show_categories` does it
        self.on_filter: Callable[[LodPoints], None] | None = None
        self.legend: Any = None  #: the categories module's Legend of the colouring
        self.colour_kind: str | None = None
        if index is not None:
            self.attach(index)

    def attach(self, index: PointsIndex) -> None:
        """The index, built: coloured by its ``feature_key``, filtered as asked."""
        self.index = index
        if self.extent is None:
            self.extent = index.extent
        column = self.colour_column or index.feature_key
        if column is not None and column in index.columns:
            self.colour_by(column)
        if self.filter_column is not None and self.filter_values is not None:
            self.set_filter(self.filter_column, self.filter_values)

    def apply(self, layer: Any, data: ViewData) -> None:
        apply_view(layer, data)

    # ---------------------------------------------------------------- colours

    def colour_by(
        self, column: str, colormap: str = "viridis", limits: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """Colour the points by *column* (every point, the ones shown now and later);
        what a legend needs: ``kind``, ``categories``, ``counts``, ``colours``,
        ``missing``, ``limits``, ``data_range``, ``colormap``, ``rows``."""
        from napari_ozx.layers.categories.palettes import default_palette

        ix = self.index
        if ix is None:
            raise OzxError(f"layer {self.name!r}: its points are still being indexed")
        if column not in ix.columns:
            have = ", ".join(ix.columns) or "none"
            raise OzxError(
                f"layer {self.name!r} has no feature {column!r} to colour by (features: {have})"
            )
        values = ix.columns[column]
        if column in ix.categories:
            cats = ix.categories[column]
            palette = default_palette(len(cats)).astype(np.float32)
            self._lut = np.vstack([palette, self._missing[None]])
            self._continuous = None
            self.colour_column, self.colour_kind = column, "categorical"
            counts = ix.category_counts(column)
            return {
                "kind": "categorical",
                "categories": list(cats),
                "counts": [int(c) for c in counts],
                "colours": palette,
                "missing": int(len(ix) - int(counts.sum())),
                "rows": len(ix),
            }
        from napari.utils.colormaps import ensure_colormap

        v = values.astype(np.float64, copy=False)
        finite = np.isfinite(v)
        rng = (float(np.min(v[finite])), float(np.max(v[finite]))) if finite.any() else (0.0, 1.0)
        lo, hi = limits if limits is not None else rng
        cmap = ensure_colormap(colormap)
        lut = np.asarray(cmap.map(np.linspace(0.0, 1.0, 4096)), dtype=np.float32)
        self._continuous = (lut, float(lo), float(hi), str(cmap.name))
        self._lut = None
        self.colour_column, self.colour_kind = column, "continuous"
        return {
            "kind": "continuous",
            "missing": int(np.count_nonzero(~finite)),
            "limits": (float(lo), float(hi)),
            "data_range": rng,
            "colormap": str(cmap.name),
            "rows": len(ix),
        }

    def colours_of(self, positions: np.ndarray) -> np.ndarray:
        """The colours ((k, 4) float32) of the index's rows *positions*."""
        col = self.colour_column
        if col is None:
            return np.tile(np.asarray([1, 1, 1, 1], np.float32), (len(positions), 1))
        values = self.index.columns[col][positions]
        if self._lut is not None:
            return np.take(self._lut, values.astype(np.intp), axis=0, mode="wrap")
        assert self._continuous is not None
        lut, lo, hi, _name = self._continuous
        v = values.astype(np.float64)
        finite = np.isfinite(v)
        scaled = np.clip((v - lo) / (hi - lo), 0, 1) if hi > lo else np.zeros_like(v)
        scaled[~finite] = 0
        out = lut[np.rint(scaled * (len(lut) - 1)).astype(np.intp)]
        out[~finite] = self._missing
        return out

    # ---------------------------------------------------------------- categories

    def set_filter(self, column: str, values: Iterable[object] | None) -> int:
        """Keep only the points whose *column* is one of *values* (None: all); how many
        points of the element that keeps."""
        ix = self.index
        if ix is None:  # applied once indexed (:meth:`attach`)
            self.filter_column = None if values is None else column
            self.filter_values = None if values is None else frozenset(map(str, values))
            return 0
        if column not in ix.columns:
            have = ", ".join(ix.columns) or "none"
            raise OzxError(f"layer {self.name!r} has no feature {column!r} (features: {have})")
        if values is None:
            self.filter_column = self.filter_values = self._keep = None
            return len(ix)
        wanted = frozenset("" if v is None else str(v) for v in values)
        if column in ix.categories:
            mask = np.array([c in wanted for c in ix.categories[column]], dtype=bool)
            self._keep = (column, mask)
            kept = int(ix.category_counts(column)[mask].sum())
        else:
            # a numeric column: its distinct values as categories of a mask
            raise OzxError(
                f"layer {self.name!r}: only a categorical column filters a level-of-detail "
                f"points layer ({column!r} is numeric)"
            )
        self.filter_column, self.filter_values = column, wanted
        return kept

    def recolour(self) -> None:
        """Colour the points held now by the colouring column (GUI thread)."""
        pts, shown = self.points_layer, self.shown
        if (
            pts is not None
            and shown is not None
            and shown.positions is not None
            and len(shown.positions)
        ):
            shown.colours = self.colours_of(shown.positions)
            pts.face_color = shown.colours

    def refilter(self) -> None:
        """The categories shown changed (GUI thread): the points held now filtered
        again at once (at most :attr:`view_max` of them), the overview recomputed by
        :attr:`on_filter` (the camera hook, off the GUI thread), else here."""
        pts, shown = self.points_layer, self.shown
        if pts is not None and shown is not None and shown.positions is not None:
            data = self.view(shown.rect, margin=0.0)
            apply_view(pts, data)
            self.shown = data
        if self.on_filter is not None:
            self.on_filter(self)
            return
        ov = self.overview_layer
        if ov is not None:
            levels = self.overview_levels()
            ov.data = levels
            ov.contrast_limits = contrast_of(levels[0])
            ov.name = self.describe()

    @property
    def keep(self) -> tuple[str, np.ndarray] | None:
        return self._keep

    def describe(self) -> str:
        """What the overview shows, for its layer's name."""
        if self.filter_column is None or self.filter_values is None:
            return f"{self.name} density"
        shown = sorted(self.filter_values)
        text = ", ".join(shown[:3]) + (f" +{len(shown) - 3}" if len(shown) > 3 else "")
        return f"{self.name} density ({self.filter_column}: {text})"

    # ---------------------------------------------------------------- views

    def view(self, rect: tuple[float, float, float, float], margin: float = MARGIN) -> ViewData:
        """The points of the rectangle *rect* (y0, x0, y1, x1, data coordinates) grown
        by *margin* of its size on every side, with their features and colours; none
        (the overview) when that is more than :attr:`view_max` points."""
        y0, x0, y1, x1 = rect
        dy, dx = (y1 - y0) * margin, (x1 - x0) * margin
        grown = (y0 - dy, x0 - dx, y1 + dy, x1 + dx)
        ix = self.index
        if ix is None:
            return self._empty(grown, None, 0)
        estimate = ix.estimate(*grown)
        if estimate > 2 * self.view_max:
            return self._empty(grown, None, estimate)
        positions = ix.query(*grown, keep=self._keep)
        if len(positions) > self.view_max:
            return self._empty(grown, None, len(positions))
        coords = np.empty((len(positions), 2), np.float32)
        coords[:, 0] = ix.y[positions]
        coords[:, 1] = ix.x[positions]
        return ViewData(
            grown,
            positions,
            coords,
            self.features_of(positions),
            self.colours_of(positions),
            len(positions),
        )

    def _empty(self, rect: tuple[float, float, float, float], positions: Any, n: int) -> ViewData:
        none = np.zeros(0, np.int64)
        coords, colours = np.zeros((0, 2), np.float32), np.zeros((0, 4), np.float32)
        return ViewData(rect, positions, coords, self.features_of(none), colours, n)

    def empty_view(self) -> ViewData:
        """No point (the layer's data before the first view)."""
        return self._empty((0.0, 0.0, 0.0, 0.0), np.zeros(0, np.int64), 0)

    def features_of(self, positions: np.ndarray) -> Any:
        """The features (pandas DataFrame) of the index's rows *positions*: categories
        as pandas categoricals of every category of the element."""
        import pandas as pd

        ix = self.index
        if ix is None:
            return pd.DataFrame()
        cols: dict[str, Any] = {}
        for name, values in ix.columns.items():
            got = values[positions]
            if name in ix.categories:
                cols[name] = pd.Categorical.from_codes(
                    got.astype(np.int64), categories=ix.categories[name], validate=False
                )
            else:
                cols[name] = got
        return pd.DataFrame(cols, copy=False)

    def overview_levels(self) -> list[np.ndarray]:
        """The overview: points per pixel at :data:`OVERVIEW_SIDE` pixels along the
        longer side, then halved (means of 2 x 2 pixels) down to 256 or fewer."""
        pixel = self.overview_pixel()
        assert self.extent is not None
        if self.index is None:
            y0, x0, y1, x1 = self.extent
            shape = (
                max(1, int(np.ceil((y1 - y0) / pixel))),
                max(1, int(np.ceil((x1 - x0) / pixel))),
            )
            level = np.zeros(shape, np.float32)
        else:
            level = self.index.density(pixel, keep=self._keep, extent=self.extent)
        return pyramid(level)


def overview_layer_data(
    lod: LodElement, affine: np.ndarray, record: dict[str, Any], colormap: str
) -> LayerData:
    """*lod*'s overview as a multiscale Image placed by *affine* (the element's), with
    *record* as its SpatialData record."""
    levels = lod.overview_levels()
    pixel = lod.overview_pixel()
    assert lod.extent is not None
    y0, x0 = lod.extent[0], lod.extent[1]
    # pixel (i, j) of the finest level covers [y0 + i * pixel, y0 + (i + 1) * pixel)
    to_data = np.array([[pixel, 0, y0 + pixel / 2], [0, pixel, x0 + pixel / 2], [0, 0, 1]])
    kwargs: dict[str, Any] = {
        "name": lod.describe(),
        "multiscale": True,
        "affine": affine @ to_data,
        "axis_labels": ("y", "x"),
        "colormap": colormap,
        "blending": "additive",
        "contrast_limits": contrast_of(levels[0]),
        "metadata": {**record, LOD_KEY: lod},
    }
    return levels, kwargs, "image"


def contrast_of(level: np.ndarray) -> tuple[float, float]:
    """Contrast limits of a density image: 0 to its 99.5th percentile of non-empty pixels."""
    nz = level[level > 0]
    hi = float(np.percentile(nz, 99.5)) if len(nz) else 1.0
    return 0.0, max(hi, 1.0)


def lod_layers_data(
    root: OmeZarr,
    element: Element,
    system: str,
    report: Report,
    meta: Callable[..., dict[str, Any]],
    affine: np.ndarray,
    size: Callable[[tuple[float, float, float, float]], float],
    tiles: tuple[int, int] | None = None,
) -> list[LayerData]:
    """The overview and the points layer of a large points *element* (see the module);
    *meta* makes a layer's SpatialData record, *affine* places (y, x) in *system*,
    *size* gives the markers' size from the element's extent."""
    from napari_ozx._compat import napari_qt_loaded
    from napari_ozx.ngff.spatial.points import points_rows
    from napari_ozx.ngff.spatial.points_index import build_index, plane_extent

    # in a window, the layers are in at once and the camera hook builds the index on a
    # worker (:mod:`napari_ozx._lod`); headless, it is built here
    extent = plane_extent(root, element) if napari_qt_loaded() else None
    if extent is None:
        lod = LodPoints(build_index(root, element, tiles), element.name)
        n = len(lod.index)
    else:
        lod = LodPoints(None, element.name, extent=extent)
        lod.build = lambda: build_index(root, element, tiles)
        n = points_rows(root, element) or 0
    assert lod.extent is not None
    rec = meta(points=n, axes=["y", "x"], lod=True)
    what = f"{root.source} (points {element.name!r})"
    report(
        what,
        OzxError(
            f"{n:,} points shown by level of detail: zoomed out, "
            f"{lod.describe()!r} (points per pixel); zoomed in to {lod.view_max:,} points or "
            "fewer in view, every point of the view (z is a feature)"
        ),
    )
    overview = overview_layer_data(lod, affine, rec, "magma")
    empty = lod.empty_view()
    points_kwargs: dict[str, Any] = {
        "name": element.name,
        "features": empty.features,
        "affine": affine,
        "axis_labels": ("y", "x"),
        "size": np.float32(size(lod.extent)),
        "border_width": np.float32(0),
        "antialiasing": 0,
        "metadata": {**{k: dict(v) for k, v in rec.items()}, LOD_KEY: lod},
        "ndim": 2,
    }
    if lod.colour_column is not None:
        points_kwargs["metadata"][_SPATIAL_KEY]["colour_by"] = lod.colour_column
    return [overview, (empty.coords, points_kwargs, "points")]


def apply_view(layer: Any, data: ViewData) -> None:
    """Put *data* in the Points *layer* (GUI thread): coordinates, features, colours,
    in one go where napari allows (:func:`~napari_ozx._compat.napari_points_replace`)."""
    from napari_ozx._compat import napari_points_replace

    if (len(data.coords) or len(layer.data)) and napari_points_replace(
        layer, data.coords, data.features, data.colours
    ):
        return
    layer.data = data.coords
    layer.features = data.features
    if len(data.coords):
        layer.face_color = data.colours
