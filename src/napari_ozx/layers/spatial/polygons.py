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

__all__ = ["OUTLINE_WIDTH", "outline_mesh"]

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


def outline_mesh(vertices: np.ndarray, ring_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mesh vertices (2n, 2) float32 column-major, faces (n, 3) int32)``: one
    triangle per edge of every ring (its closing edge included), see the module's
    docstring."""
    v = np.asarray(vertices, dtype=np.float64)
    n = len(v)
    if n == 0:
        return np.zeros((0, 2), np.float32), np.zeros((0, 3), np.int32)
    o = np.asarray(ring_offsets, dtype=np.int64)
    counts = np.diff(o)
    nxt = next_vertex(o, n)
    edge = np.hypot(*(v[nxt] - v).T)
    positive = edge[edge > 0]
    width = OUTLINE_WIDTH * (float(np.median(positive)) if len(positive) else 1.0)
    starts = o[:-1][counts > 0]
    centre = np.add.reduceat(v, starts, axis=0) / counts[counts > 0, None]
    inward = np.repeat(centre, counts[counts > 0], axis=0) - v
    dist = np.hypot(*inward.T)
    step = np.minimum(width, dist / 3.0)
    scale = np.divide(step, dist, out=np.zeros_like(dist), where=dist > 0)
    inner = v + inward * scale[:, None]
    # an edge whose inner corner would fall on it (a ring of one or two vertices, a
    # vertex at its ring's centre): moved across the edge instead, so it is drawn
    d = v[nxt] - v
    flat = np.abs(d[:, 0] * inward[:, 1] - d[:, 1] * inward[:, 0]) * scale <= 1e-12 * (1 + edge)
    if np.any(flat):
        perp = np.stack([-d[flat, 1], d[flat, 0]], axis=1)
        length = np.where(edge[flat] > 0, edge[flat], 1.0)[:, None]
        inner[flat] = v[flat] + perp / length * width
    # column-major: napari takes the layer's extent (min and max over axis 0) several
    # times while adding it, ~100 times faster over columns than over (y, x) rows
    mesh = np.empty((2 * n, 2), dtype=np.float32, order="F")
    mesh[:n] = v
    mesh[n:] = inner
    i = np.arange(n, dtype=np.int32)
    faces = np.stack([i, nxt.astype(np.int32), i + np.int32(n)], axis=1)
    return mesh, faces
