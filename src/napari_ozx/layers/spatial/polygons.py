"""Many polygon rings as one napari Surface mesh of their outlines (numpy only).

napari's Shapes layer builds each shape in Python (milliseconds each) and its Vectors
layer keeps several copies of every edge (its extent, slice, thumbnail and vispy mesh
are each recomputed from them: seconds for a million edges). Here every ring's every
edge becomes one thin triangle, ``(p[i], p[i + 1], q[i])``, whose long side is the
edge itself and whose third corner ``q[i]`` is ``p[i]`` moved a little towards its
ring's centre: the mesh's outer boundary is exactly the rings (every vertex, every
edge, holes as outlines), drawn with a visible width, one triangle per edge, in one
Surface layer whose vispy mesh is a single draw.

The mesh's vertices are every ring vertex (``vertices[:n]``, in the rings' order)
followed by their inner copies (``vertices[n:]``); ``faces[i]`` is the edge leaving
ring vertex ``i``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OUTLINE_WIDTH", "outline_mesh", "outline_width"]

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
    """The width :func:`outline_mesh` draws the rings' outlines with, in their units
    (for a Shapes layer of the same rings: its ``edge_width``)."""
    v = np.asarray(vertices, dtype=np.float64)
    nxt = next_vertex(ring_offsets, len(v))
    return _width(np.hypot(*(v[nxt] - v).T)) if len(v) else 1.0


def outline_mesh(vertices: np.ndarray, ring_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mesh vertices (2n, 2) float32, faces (n, 3) int32)``, both column-major: one
    triangle per edge of every ring (its closing edge included), see the module's
    docstring."""
    n = len(vertices)
    if n == 0:
        return np.zeros((0, 2), np.float32), np.zeros((0, 3), np.int32)
    # column-major: napari takes the layer's extent (min and max over axis 0) several
    # times while adding it, ~100 times faster over columns than over (y, x) rows; and
    # each step below is one pass over a plain float32 column (what vispy draws with:
    # fewer and smaller temporaries, whose first touch costs as much as the arithmetic)
    mesh = np.empty((2 * n, 2), dtype=np.float32, order="F")
    y, x = mesh[:n, 0], mesh[:n, 1]
    y[:] = vertices[:, 0]
    x[:] = vertices[:, 1]
    o = np.asarray(ring_offsets, dtype=np.int64)
    counts = np.diff(o)
    nxt = next_vertex(o, n)
    dy, dx = y[nxt], x[nxt]
    dy -= y
    dx -= x
    edge = np.sqrt(dy * dy + dx * dx)  # (np.hypot: twice as slow)
    width = _width(edge)
    full = counts > 0
    per_ring = counts[full]
    starts = o[:-1][full]
    iy, ix = mesh[n:, 0], mesh[n:, 1]  # towards the ring's centre, then the corner
    iy[:] = np.repeat(np.add.reduceat(y, starts, dtype=np.float64) / per_ring, per_ring)
    ix[:] = np.repeat(np.add.reduceat(x, starts, dtype=np.float64) / per_ring, per_ring)
    iy -= y
    ix -= x
    dist = np.sqrt(iy * iy + ix * ix)
    scale = np.minimum(dist / 3.0, np.float32(width))
    np.divide(scale, dist, out=scale, where=dist > 0)  # (where dist is 0, scale is 0)
    iy *= scale
    ix *= scale
    # an edge whose inner corner would fall on its line (a ring of one or two vertices,
    # a vertex at its ring's centre): the corner moved across the edge instead
    height = np.abs(dy * ix - dx * iy)  # the triangle's doubled area
    flat = height <= 1e-4 * edge * np.float32(width)
    if np.any(flat):
        length = np.where(edge[flat] > 0, edge[flat], 1.0)
        iy[flat] = dx[flat] / length * width
        ix[flat] = -dy[flat] / length * width
    iy += y
    ix += x
    faces = np.empty((n, 3), dtype=np.int32, order="F")  # written column by column
    faces[:, 0] = np.arange(n, dtype=np.int32)
    faces[:, 1] = nxt
    faces[:, 2] = faces[:, 0] + np.int32(n)
    return mesh, faces
