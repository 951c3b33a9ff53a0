"""Level of detail for a large polygons element: the cells held for a view are exactly
the element's cells one of whose parts' bounding box meets the view grown by its margin (every cell
that meets the view among them), all their rings and vertices; zoomed out, cells per
pixel. Expected values come from the geometries through shapely, never from the code
under test."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ngff.spatial.test_polygons_scale import _blob_rings, _square, _write_store

pytest.importorskip("pyarrow")
shapely = pytest.importorskip("shapely")

SPREAD = 400.0


def _geoms():
    rng = np.random.default_rng(7)
    polys = [shapely.Polygon(r) for r in _blob_rings(rng, 1500, SPREAD)]
    # a polygon with a hole and a multipolygon of two parts far apart
    polys.append(shapely.Polygon(_square(100, 100, 20), [_square(105, 105, 5, clockwise=True)]))
    polys.append(
        shapely.MultiPolygon(
            [shapely.Polygon(_square(10, 10, 4)), shapely.Polygon(_square(390, 390, 4))]
        )
    )
    return np.asarray(polys, dtype=object)


@pytest.fixture(scope="module")
def element(tmp_path_factory):
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.spatial.elements import list_elements
    from napari_ozx.ngff.spatial.shapes import read_shapes

    geoms = _geoms()
    store = _write_store(tmp_path_factory.mktemp("poly"), "cells.zarr", geoms)
    root = open_ome_zarr(store)
    el = next(e for e in list_elements(root, ("shapes",)) if e.name == "cells_poly")
    return geoms, read_shapes(root, el)


def _lod(data, view_max=10**9):
    from napari_ozx.layers.spatial.lod_shapes import LodShapes

    g = data.geometry_of
    feats = {"instance_id": data.index[g], "hole": data.ring_is_hole}
    return LodShapes(data, feats, view_max=view_max)


def _truth(geoms, grown, view):
    """(cells one of whose parts' bounds meets *grown*, cells meeting *view*), as rows;
    rectangles (y0, x0, y1, x1)."""
    parts, row = shapely.get_parts(geoms, return_index=True)
    b = shapely.bounds(parts)  # x0, y0, x1, y1
    y0, x0, y1, x1 = grown
    meet = (b[:, 1] <= y1) & (b[:, 3] >= y0) & (b[:, 0] <= x1) & (b[:, 2] >= x0)
    vy0, vx0, vy1, vx1 = view
    inter = shapely.intersects(geoms, shapely.box(vx0, vy0, vx1, vy1))
    return set(row[meet].tolist()), set(np.flatnonzero(inter).tolist())


@pytest.mark.parametrize(
    "view",
    [
        (100.0, 100.0, 160.0, 180.0),  # inside, cutting cells at every side
        (-50.0, -50.0, 30.0, 30.0),  # over the element's corner
        (380.0, 0.0, 460.0, 400.0),  # a strip at its far edge
        (103.0, 103.0, 108.0, 108.0),  # inside the hole of one cell
        (1000.0, 1000.0, 1010.0, 1010.0),  # outside: nothing
    ],
)
def test_the_cells_held_for_a_view_are_the_cells_meeting_it(element, view):
    from napari_ozx.layers.spatial.lod_shapes import LodShapes

    geoms, data = element
    lod = _lod(data)
    got = lod.view(view)
    rows = {int(np.flatnonzero(data.index == i)[0]) for i in got.features["instance_id"]}
    meet, inter = _truth(geoms, got.rect, view)
    assert rows == meet
    assert inter <= rows
    if not meet:
        return
    # every ring of every cell held, each with its vertices in order, the closing one dropped
    want_rings = [
        np.asarray(r.coords)[:-1, ::-1]
        for i in sorted(rows)
        for p in (geoms[i].geoms if hasattr(geoms[i], "geoms") else [geoms[i]])
        for r in [p.exterior, *p.interiors]
    ]
    o = got.ring_offsets
    verts = got.mesh[0]
    held = [verts[o[k] : o[k + 1]] for k in range(len(o) - 1)]
    assert len(held) == len(want_rings)
    key = lambda a: tuple(np.asarray(a, np.float32).ravel().tolist())  # noqa: E731  # as drawn
    assert sorted(map(key, held)) == sorted(map(key, want_rings))
    assert isinstance(lod, LodShapes) and got.positions is not None


def test_above_its_cap_a_view_holds_no_cell_and_the_overview_counts_every_cell(element):
    geoms, data = element
    lod = _lod(data, view_max=50)
    got = lod.view((0.0, 0.0, 400.0, 400.0))
    assert got.positions is None and len(got.ring_offsets) == 1 and got.count > 50
    levels = lod.overview_levels()
    # one count per ring that is not a hole: every polygon part
    parts = int(sum(len(g.geoms) if hasattr(g, "geoms") else 1 for g in geoms))
    assert float(levels[0].sum()) == parts
    assert all(abs(float(lv.sum()) * 4**i - parts) < 1e-3 * parts for i, lv in enumerate(levels))
