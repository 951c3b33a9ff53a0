"""Many polygon rings as one napari Surface mesh, one triangle per edge (numpy only).

:func:`ring_mesh` turns rings (every vertex and edge kept) into one mesh, a single vispy
draw: a star-shaped ring that is not a hole (nor a holed polygon's outer ring) is filled
by an exact fan from a point of its kernel, bright at the edge and transparent at the
centre; every other ring is an outline of thin triangles whose long sides are its edges
(:func:`outline_width`). The vertices are the ring vertices in order, then the fans'
centres, then the outlines' inner corners; ``faces[i]`` is the edge leaving ring vertex
``i`` (:func:`next_vertex`). Why not napari's Shapes or Vectors layers:
``docs/design/spatialdata-layers.md``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OUTLINE_WIDTH", "mesh_vertex_rings", "outline_width", "ring_mesh"]

#: an outline's width at a vertex, as a fraction of the median edge of the element
#: (never more than a third of the way to its ring's centre)
OUTLINE_WIDTH = 0.1


def next_vertex(ring_offsets: np.ndarray, n: int) -> np.ndarray:
    """For each of the *n* vertices of rings starting at *ring_offsets*, the index of
    the vertex its edge leads to (a ring's last vertex leads back to its first)."""
    o = np.asarray(ring_offsets, dtype=np.int64)
    nxt = np.arange(1, n + 1, dtype=np.int64)
    counts = np.diff(o)
    full = counts > 0
    nxt[o[1:][full] - 1] = o[:-1][full]
    return nxt


def _width(edge: np.ndarray) -> float:
    sample = edge[:: max(1, len(edge) // 100_000)]
    sample = sample[sample > 0]
    return OUTLINE_WIDTH * (float(np.median(sample)) if len(sample) else 1.0)


def outline_width(vertices: np.ndarray, ring_offsets: np.ndarray) -> float:
    """The width :func:`ring_mesh` draws the rings' outlines with, in their units
    (for a Shapes layer of the same rings: its ``edge_width``)."""
    v = np.asarray(vertices, dtype=np.float64)
    nxt = next_vertex(ring_offsets, len(v))
    return _width(np.hypot(*(v[nxt] - v).T)) if len(v) else 1.0


def _centres(
    y: np.ndarray, x: np.ndarray, nxt: np.ndarray, starts: np.ndarray, per_ring: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cy, cx, star)`` per non-empty ring: a point inside it and whether the fan from
    that point tiles the ring exactly, i.e. the point lies in the ring's kernel (every
    triangle ``(c, v[i], v[i + 1])`` turns as the ring does, none flat). Tried: the
    vertex mean, then, for the rings where it fails, the area centroid."""
    cy = np.add.reduceat(y, starts, dtype=np.float64) / per_ring
    cx = np.add.reduceat(x, starts, dtype=np.float64) / per_ring

    def fan_test(
        cy: np.ndarray, cx: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        ay = y - np.repeat(cy, per_ring)
        ax = x - np.repeat(cx, per_ring)
        by, bx = ay[nxt], ax[nxt]
        cross = ay * bx - ax * by  # twice each fan triangle's signed area
        area = np.add.reduceat(cross, starts)  # twice the ring's (whatever the point)
        cross *= np.repeat(np.sign(area), per_ring)
        return np.minimum.reduceat(cross, starts) > 0, cross, (ay + by, ax + bx)

    star, cross, (sy, sx) = fan_test(cy, cx)
    if not np.all(star):
        # the centroid: the fan triangles' centroids (c + (a + b) / 3) weighted by area
        w = np.add.reduceat(cross, starts)
        ok = w > 0
        gy = np.add.reduceat(sy * cross, starts) / np.where(ok, 3 * w, 1.0)
        gx = np.add.reduceat(sx * cross, starts) / np.where(ok, 3 * w, 1.0)
        ty, tx = np.where(star, cy, cy + gy), np.where(star, cx, cx + gx)
        star2, _cross, _s = fan_test(ty, tx)
        better = star2 & ~star
        cy, cx = np.where(better, ty, cy), np.where(better, tx, cx)
        star |= star2
    return cy, cx, star


def ring_mesh(
    vertices: np.ndarray, ring_offsets: np.ndarray, ring_is_hole: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(mesh vertices (n + m, 2) float32, faces (n, 3) int32, values (n + m,) float32,
    filled (r,) bool)``, column-major: one triangle per edge of every ring (its closing
    edge included), ``faces[i]`` the edge leaving ring vertex ``i``.

    A ring whose kernel holds its vertex mean or centroid (a star-shaped ring, convex
    ones included) and that is neither a hole nor the outer ring of a polygon with holes
    is *filled*: its triangles fan from that point (one extra mesh vertex, value 0; the
    ring's vertices value 1) and tile the ring exactly, nothing outside it. Every other
    ring keeps its outline triangles (module docstring; their inner corners value 1).
    """
    n = len(vertices)
    o = np.asarray(ring_offsets, dtype=np.int64)
    counts = np.diff(o)
    filled = np.zeros(len(counts), dtype=bool)
    if n == 0:
        return (
            np.zeros((0, 2), np.float32),
            np.zeros((0, 3), np.int32),
            np.zeros(0, np.float32),
            filled,
        )
    nxt = next_vertex(o, n)
    y = np.asarray(vertices[:, 0], dtype=np.float64)
    x = np.asarray(vertices[:, 1], dtype=np.float64)
    full = counts > 0
    per_ring = counts[full]
    starts = o[:-1][full]
    cy, cx, star = _centres(y, x, nxt, starts, per_ring)
    ok = star & (per_ring >= 3)
    if ring_is_hole is not None and len(ring_is_hole):
        hole = np.asarray(ring_is_hole, dtype=bool)
        holed = hole.copy()  # a hole, or an outer ring followed by its holes
        holed[:-1] |= hole[1:]
        ok &= ~holed[full]
    filled[full] = ok
    fan_v = np.repeat(ok, per_ring)  # per vertex: its ring is filled
    n_fan = int(np.count_nonzero(ok))
    out_idx = np.flatnonzero(~fan_v)
    m = n_fan + len(out_idx)
    mesh = np.empty((n + m, 2), dtype=np.float32, order="F")
    mesh[:n, 0] = y
    mesh[:n, 1] = x
    mesh[n : n + n_fan, 0] = cy[ok]
    mesh[n : n + n_fan, 1] = cx[ok]
    if len(out_idx):
        rep_y, rep_x = np.repeat(cy, per_ring), np.repeat(cx, per_ring)
        _inner_corners(y, x, nxt, rep_y, rep_x, out_idx, mesh[n + n_fan :])
    faces = np.empty((n, 3), dtype=np.int32, order="F")  # written column by column
    faces[:, 0] = np.arange(n, dtype=np.int32)
    faces[:, 1] = nxt
    third = faces[:, 2]
    third[fan_v] = n + np.repeat(np.arange(n_fan, dtype=np.int32), per_ring[ok])
    third[out_idx] = n + n_fan + np.arange(len(out_idx), dtype=np.int32)
    values = np.ones(n + m, dtype=np.float32)
    values[n : n + n_fan] = 0
    return mesh, faces, values, filled


def mesh_vertex_rings(
    ring_offsets: np.ndarray, filled: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each vertex of :func:`ring_mesh`'s mesh (rings starting at *ring_offsets*,
    *filled* as it returned), the ring it belongs to, and whether it is a filled ring's
    centre: the ring vertices, then the filled rings' centres, then the outlines' inner
    corners, in that order."""
    o = np.asarray(ring_offsets, dtype=np.int64)
    counts = np.diff(o)
    ring_of = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    fill = np.asarray(filled, dtype=bool)
    centres = np.flatnonzero(fill)
    corners = ring_of[~fill[ring_of]]
    rings = np.concatenate([ring_of, centres, corners])
    centre = np.zeros(len(rings), dtype=bool)
    centre[len(ring_of) : len(ring_of) + len(centres)] = True
    return rings, centre


def _inner_corners(
    y: np.ndarray,
    x: np.ndarray,
    nxt: np.ndarray,
    cy: np.ndarray,
    cx: np.ndarray,
    idx: np.ndarray | None,
    out: np.ndarray,
) -> None:
    """The outline triangles' third corners ``q[i]`` for the vertices *idx* (all when
    None) into *out* ((k, 2) float32): ``p[i]`` moved towards its ring's centre (``cy``,
    ``cx``, per vertex) by the outline width (at most a third of the way); where that
    would make the triangle flat (a ring of one or two vertices, a vertex at its centre)
    moved across the edge instead. In float32 columns (what vispy draws with: fewer and
    smaller temporaries, whose first touch costs as much as the arithmetic)."""
    y32 = y.astype(np.float32)
    x32 = x.astype(np.float32)
    dy, dx = y32[nxt], x32[nxt]
    dy -= y32
    dx -= x32
    edge = np.sqrt(dy * dy + dx * dx)  # (np.hypot: twice as slow)
    width = np.float32(_width(edge))
    if idx is not None:
        dy, dx, edge, y32, x32 = dy[idx], dx[idx], edge[idx], y32[idx], x32[idx]
        cy, cx = cy[idx], cx[idx]
    iy, ix = out[:, 0], out[:, 1]
    iy[:] = cy
    ix[:] = cx
    iy -= y32
    ix -= x32
    dist = np.sqrt(iy * iy + ix * ix)
    scale = np.minimum(dist / np.float32(3.0), width)
    np.divide(scale, dist, out=scale, where=dist > 0)  # (where dist is 0, scale is 0)
    iy *= scale
    ix *= scale
    height = np.abs(dy * ix - dx * iy)  # the triangle's doubled area
    flat = height <= np.float32(1e-4) * edge * width
    if np.any(flat):
        length = np.where(edge[flat] > 0, edge[flat], np.float32(1.0))
        iy[flat] = dx[flat] / length * width
        ix[flat] = -dy[flat] / length * width
    iy += y32
    ix += x32
