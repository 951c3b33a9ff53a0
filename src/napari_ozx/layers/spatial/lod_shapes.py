"""Level of detail for a large polygons element: cells per pixel zoomed out, every cell
of the view zoomed in.

Above :data:`LOD_MIN_RINGS` rings, a polygons element is shown as two layers
(:func:`lod_polygons_layers_data`): ``<name> density``, a multiscale Image of the cells
per pixel (each ring that is not a hole counted at its vertices' mean, rasterised once
at open), shown while the view holds more than :data:`VIEW_MAX_RINGS` rings; and
``<name>``, the Surface layer of the outlines layer (:mod:`.polygons`, hover and
features as there) holding exactly the cells one of whose rings' bounding box meets
the view grown by a margin (:meth:`LodShapes.view`): a cell meeting the view is always
held, with all its rings. The camera hook (:mod:`napari_ozx._lod`) replaces it off the
GUI thread, as for points (:mod:`.lod`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.provenance import LayerData
from napari_ozx.layers.spatial.lod import (
    LOD_KEY,
    MARGIN,
    LodElement,
    overview_layer_data,
    pyramid,
)

if TYPE_CHECKING:
    from napari_ozx.ngff.spatial.shapes import Polygons

__all__ = ["LOD_MIN_RINGS", "VIEW_MAX_RINGS", "LodShapes", "lod_polygons_layers_data"]

#: a polygons element of more rings than this is shown through level of detail (the
#: Surface of 150,000 cells, 1.8M triangles, takes seconds a frame in software OpenGL)
LOD_MIN_RINGS = 50_000
#: the most rings the Surface layer holds: beyond, the view shows the overview
VIEW_MAX_RINGS = 20_000
_SPATIAL_KEY = "napari_ozx_spatialdata"  # layers.spatial.elements.SPATIAL_KEY


@dataclass
class ShapesView:
    """The cells of one view as Surface layer data and its SpatialData record's parts."""

    rect: tuple[float, float, float, float]  #: y0, x0, y1, x1 (data coordinates)
    positions: np.ndarray | None  #: the element's rings held; None: too many, overview
    mesh: tuple[np.ndarray, np.ndarray, np.ndarray]  #: vertices, faces, values
    ring_offsets: np.ndarray
    filled: np.ndarray
    features: dict[str, np.ndarray]  #: per ring held
    count: int  #: rings meeting the rectangle


def ring_boxes(vertices: np.ndarray, ring_offsets: np.ndarray) -> np.ndarray:
    """(rings, 4) float64: y0, x0, y1, x1 of each ring (NaN for an empty ring)."""
    o = np.asarray(ring_offsets, dtype=np.int64)
    counts = np.diff(o)
    boxes = np.full((len(counts), 4), np.nan)
    full = counts > 0
    starts = o[:-1][full]
    if len(starts):
        v = np.asarray(vertices, dtype=np.float64)
        boxes[full, 0] = np.minimum.reduceat(v[:, 0], starts)
        boxes[full, 1] = np.minimum.reduceat(v[:, 1], starts)
        boxes[full, 2] = np.maximum.reduceat(v[:, 0], starts)
        boxes[full, 3] = np.maximum.reduceat(v[:, 1], starts)
    return boxes


def _placeholder(at: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Surface of no visible triangle (napari refuses a Surface of no vertex)."""
    verts = np.tile(np.asarray(at, np.float32), (3, 1))
    return verts, np.zeros((1, 3), np.int32), np.zeros(3, np.float32)


class LodShapes(LodElement):
    """One polygons element shown through level of detail (see the module)."""

    extent: tuple[float, float, float, float]  #: the rings' (y0, x0, y1, x1)

    def __init__(self, data: Polygons, features: dict[str, Any], view_max: int | None = None):
        self.data = data
        self.name = data.element.name
        #: per ring, the whole element (a table adds its columns here, in place)
        self.features = features
        self.view_max = VIEW_MAX_RINGS if view_max is None else view_max
        self.boxes = ring_boxes(data.vertices, data.ring_offsets)
        self.geometry_of = np.asarray(data.geometry_of, dtype=np.int64)
        self.n_geometries = len(data)
        self.index = self  # built at open: ready
        self.build = None
        self.shown = None
        self.on_filter = None
        self._points = self._overview = None
        if len(self.boxes) and np.isfinite(self.boxes).any():
            lo = np.nanmin(self.boxes[:, :2], axis=0)
            hi = np.nanmax(self.boxes[:, 2:], axis=0)
            self.extent = (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))
        else:
            self.extent = (0.0, 0.0, 1.0, 1.0)

    def rings_meeting(self, y0: float, x0: float, y1: float, x1: float) -> np.ndarray:
        """The rings (ascending) of every cell one of whose rings' bounding box meets
        the rectangle (edges included)."""
        b = self.boxes
        with np.errstate(invalid="ignore"):
            hit = (b[:, 0] <= y1) & (b[:, 2] >= y0) & (b[:, 1] <= x1) & (b[:, 3] >= x0)
        cells = np.zeros(self.n_geometries + 1, dtype=bool)
        cells[self.geometry_of[hit]] = True
        return np.flatnonzero(cells[self.geometry_of])

    def view(self, rect: tuple[float, float, float, float], margin: float = MARGIN) -> ShapesView:
        """The cells meeting *rect* (y0, x0, y1, x1, data coordinates) grown by *margin*
        of its size on every side, as a Surface; none (the overview) when that is more
        than :attr:`view_max` rings."""
        from napari_ozx.layers.spatial.polygons import ring_mesh

        y0, x0, y1, x1 = rect
        dy, dx = (y1 - y0) * margin, (x1 - x0) * margin
        grown = (y0 - dy, x0 - dx, y1 + dy, x1 + dx)
        rings = self.rings_meeting(*grown)
        if len(rings) > self.view_max:
            return self._empty(grown, None, len(rings))
        o = np.asarray(self.data.ring_offsets, dtype=np.int64)
        counts = o[1:][rings] - o[:-1][rings]
        offsets = np.zeros(len(rings) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        # every vertex of the rings held, in order
        take = np.repeat(o[:-1][rings] - offsets[:-1], counts) + np.arange(offsets[-1])
        holes = np.asarray(self.data.ring_is_hole, dtype=bool)[rings]
        verts, faces, values, filled = ring_mesh(self.data.vertices[take], offsets, holes)
        if not len(verts):
            return self._empty(grown, rings, 0)
        feats = {k: np.asarray(v)[rings] for k, v in self.features.items()}
        return ShapesView(grown, rings, (verts, faces, values), offsets, filled, feats, len(rings))

    def _empty(self, rect: tuple[float, float, float, float], rings: Any, n: int) -> ShapesView:
        feats = {k: np.asarray(v)[:0] for k, v in self.features.items()}
        mesh = _placeholder((self.extent[0], self.extent[1]))
        none = np.zeros(1, np.int64)
        return ShapesView(rect, rings, mesh, none, np.zeros(0, bool), feats, n)

    def empty_view(self) -> ShapesView:
        return self._empty((0.0, 0.0, 0.0, 0.0), np.zeros(0, np.int64), 0)

    def apply(self, layer: Any, data: ShapesView) -> None:
        """Put *data* in the Surface *layer* (GUI thread): its record first (hover reads
        it), then the mesh."""
        rec = layer.metadata.get(_SPATIAL_KEY)
        if isinstance(rec, dict):
            rec["ring_offsets"] = data.ring_offsets
            rec["filled"] = data.filled
            rec["ring_features"] = data.features
        layer.data = data.mesh

    def overview_levels(self) -> list[np.ndarray]:
        """Cells per pixel: each ring that is not a hole counted at its vertices' mean,
        :data:`~.lod.OVERVIEW_SIDE` pixels along the longer side, then halved."""
        pixel = self.overview_pixel()
        y0, x0, y1, x1 = self.extent
        h = max(1, int(np.ceil((y1 - y0) / pixel)))
        w = max(1, int(np.ceil((x1 - x0) / pixel)))
        d = self.data
        o = np.asarray(d.ring_offsets, dtype=np.int64)
        counts = np.diff(o)
        keep = (counts > 0) & ~np.asarray(d.ring_is_hole, dtype=bool)
        v = np.asarray(d.vertices, dtype=np.float64)
        starts = o[:-1][counts > 0]
        sums = np.zeros((len(counts), 2))
        if len(starts):
            sums[counts > 0] = np.add.reduceat(v, starts, axis=0)
        cy = sums[keep, 0] / counts[keep]
        cx = sums[keep, 1] / counts[keep]
        py = np.clip(((cy - y0) / pixel).astype(np.intp), 0, h - 1)
        px = np.clip(((cx - x0) / pixel).astype(np.intp), 0, w - 1)
        level = np.bincount(py * w + px, minlength=h * w).reshape(h, w).astype(np.float32)
        return pyramid(level)

    def describe(self) -> str:
        return f"{self.name} density"


def lod_polygons_layers_data(
    data: Polygons,
    affine: np.ndarray,
    meta: dict[str, Any],
    ring_features: dict[str, Any],
    report: Report,
    what: str,
    surface_kwargs: dict[str, Any],
) -> list[LayerData]:
    """The overview and the Surface layer of a large polygons element (see the module);
    *surface_kwargs*: the outlines layer's look (:mod:`.elements`)."""
    feats = {k: np.asarray(c) for k, c in ring_features.items()}
    lod = LodShapes(data, feats)
    report(
        what,
        OzxError(
            f"{len(data):,} cells ({data.n_rings:,} rings) shown by level of detail: zoomed "
            f"out, {lod.describe()!r} (cells per pixel); zoomed in to {lod.view_max:,} rings "
            "or fewer in view, every cell of the view (outlines, features on hover)"
        ),
    )
    rec = meta[_SPATIAL_KEY]
    rec.update(representation="outlines", lod=True, ring_features=feats)
    empty = lod.empty_view()
    rec.update(ring_offsets=empty.ring_offsets, filled=empty.filled)
    overview_meta = {_SPATIAL_KEY: {k: v for k, v in rec.items() if k != "ring_features"}}
    overview = overview_layer_data(lod, affine, overview_meta, "gray")
    kwargs = {**surface_kwargs, "affine": affine, "metadata": {**meta, LOD_KEY: lod}}
    return [overview, (empty.mesh, kwargs, "surface")]
