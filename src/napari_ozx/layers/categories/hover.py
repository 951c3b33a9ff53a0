"""Hovering a polygon of napari-ozx's polygon Surface shows its features.

napari asks the active layer for the status bar's text: ``layer.get_status(position,
world=True, ...)`` (``ViewerModel._calc_status_from_cursor``), which calls
``get_value``; a Surface has no value in 2D (its ``_get_value`` returns None). The
Surface made from a polygons element (:mod:`napari_ozx.layers.spatial.elements`) keeps
one row of features per ring in its metadata, so :func:`install_hover` gives that layer
a ``get_status`` that adds the features of the polygon under the cursor, as napari's
Points and Shapes layers add theirs ("cell_type: T, area: 81").

:func:`ring_at` finds the polygon: the rings whose bounding box holds the point (one
vectorised test over every ring), then an even-odd test on those rings' edges; a
point in a hole is not in its polygon; of overlapping polygons, the smallest.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from napari_ozx._compat import napari_unproxied

__all__ = ["features_at", "install_hover", "ring_at"]

_SPATIAL_KEY = "napari_ozx_spatialdata"
#: layers whose get_status is ours
_HOVERED: weakref.WeakSet[Any] = weakref.WeakSet()
#: per layer: (its vertices' identity, ring bounding boxes)
_BOXES: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def _record(layer: Any) -> Mapping[str, Any]:
    meta = getattr(layer, "metadata", None)
    rec = meta.get(_SPATIAL_KEY) if isinstance(meta, Mapping) else None
    return rec if isinstance(rec, Mapping) else {}


def is_polygon_surface(layer: Any) -> bool:
    rec = _record(layer)
    return "ring_features" in rec and "ring_offsets" in rec and hasattr(layer, "vertices")


def _ring_boxes(layer: Any, n: int, offsets: np.ndarray) -> np.ndarray:
    """(rings, 4): y0, x0, y1, x1 of each ring (NaN for an empty ring)."""
    verts = np.asarray(layer.vertices)
    got = _BOXES.get(layer)
    # the array itself, not its id: a level-of-detail layer's vertices are replaced
    if got is not None and got[0] is verts:
        return got[1]
    v = verts[:n, -2:].astype(np.float64)
    counts = np.diff(offsets)
    boxes = np.full((len(counts), 4), np.nan)
    full = counts > 0
    starts = offsets[:-1][full]
    if len(starts):
        boxes[full, 0] = np.minimum.reduceat(v[:, 0], starts)
        boxes[full, 1] = np.minimum.reduceat(v[:, 1], starts)
        boxes[full, 2] = np.maximum.reduceat(v[:, 0], starts)
        boxes[full, 3] = np.maximum.reduceat(v[:, 1], starts)
    _BOXES[layer] = (verts, boxes)
    return boxes


def _inside(v: np.ndarray, y: float, x: float) -> bool:
    """Even-odd test of (y, x) against the closed ring *v* ((k, 2): y, x)."""
    if len(v) < 3:
        return False
    y0, x0 = v[:, 0], v[:, 1]
    y1, x1 = np.roll(y0, -1), np.roll(x0, -1)
    crosses = (y0 > y) != (y1 > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
    return bool(np.count_nonzero(crosses & (x < xs)) % 2)


def _area(v: np.ndarray) -> float:
    y, x = v[:, 0], v[:, 1]
    return abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) / 2


def ring_at(layer: Any, position: Any) -> int | None:
    """The ring (row of the ring features) of the polygon under *position* (data
    coordinates, y / x last), or None: a point in a hole is not in its polygon; of
    overlapping polygons, the smallest."""
    rec = _record(layer)
    offsets = np.asarray(rec["ring_offsets"], dtype=np.int64)
    holes = np.asarray(rec["ring_features"].get("hole", np.zeros(len(offsets) - 1, bool)))
    n = int(offsets[-1]) if len(offsets) else 0
    if n == 0:
        return None
    y, x = (float(c) for c in np.asarray(position, dtype=np.float64)[-2:])
    boxes = _ring_boxes(layer, n, offsets)
    with np.errstate(invalid="ignore"):
        near = np.flatnonzero(
            (boxes[:, 0] <= y) & (y <= boxes[:, 2]) & (boxes[:, 1] <= x) & (x <= boxes[:, 3])
        )
    if not len(near):
        return None
    verts = np.asarray(layer.vertices)[:n, -2:]
    rings: list[int] = [int(r) for r in near.tolist()]
    hits = [r for r in rings if _inside(verts[int(offsets[r]) : int(offsets[r + 1])], y, x)]
    inside = set(hits)
    best: tuple[float, int] | None = None
    for r in hits:
        if bool(holes[r]):
            continue
        k = r + 1  # its holes follow it
        in_hole = False
        while k < len(holes) and bool(holes[k]):
            in_hole = in_hole or k in inside
            k += 1
        if in_hole:
            continue
        area = _area(verts[offsets[r] : offsets[r + 1]])
        if best is None or area < best[0]:
            best = (area, r)
    return None if best is None else best[1]


def features_at(layer: Any, position: Any, world: bool = True) -> list[str]:
    """``"name: value"`` for each ring feature of the polygon under *position* (world
    coordinates by default), as napari's Points show theirs; [] when none."""
    from napari.utils.status_messages import status_format

    if not getattr(layer, "visible", True):
        return []
    pos = np.asarray(position, dtype=np.float64)
    data = np.asarray(layer.world_to_data(pos)) if world else pos
    ring = ring_at(layer, data)
    if ring is None:
        return []
    out = []
    for k, col in _record(layer)["ring_features"].items():
        if k in ("hole", "part"):
            continue
        v = np.asarray(col)[ring]
        if v is None or (isinstance(v, float | np.floating) and np.isnan(v)):
            continue
        out.append(f"{k}: {status_format(v.item() if isinstance(v, np.generic) else v)}")
    return out


def install_hover(layer: Any) -> bool:
    """Make *layer* (napari-ozx's polygon Surface) add the features of the polygon under
    the cursor to napari's status bar. False (nothing done) for any other layer; once
    per layer."""
    layer = napari_unproxied(layer)
    if not is_polygon_surface(layer):
        return False
    if layer in _HOVERED:
        return True
    plain = type(layer).get_status

    def get_status(self: Any, position: Any = None, **kwargs: Any) -> dict[str, Any]:
        status = plain(self, position, **kwargs)
        if position is None:
            return status
        props = features_at(self, position, world=bool(kwargs.get("world", False)))
        if props:
            text = ", ".join(props)
            value = status.get("value") or ""
            status["value"] = f"{value}; {text}" if value else text
            status["coordinates"] = f"{status.get('coords', '')}: {status['value']}"
        return status

    layer.get_status = types.MethodType(get_status, layer)
    _HOVERED.add(layer)
    return True
