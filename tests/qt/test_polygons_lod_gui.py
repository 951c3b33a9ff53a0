"""Level of detail for a large polygons element in a napari window: zoomed out, cells
per pixel and no cell geometry; zoomed in, exactly the cells meeting the view (and its
margin) in the Surface layer, replaced as the camera moves; hover names a cell's
features. A small store with the threshold and the view's cap lowered."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ngff.spatial.test_polygons_lod import _geoms, _truth
from tests.ngff.spatial.test_polygons_scale import _write_store

pytest.importorskip("pyarrow")
shapely = pytest.importorskip("shapely")


@pytest.fixture
def cells_viewer(make_napari_viewer, tmp_path, monkeypatch):
    from napari_ozx.layers.spatial import lod_shapes

    monkeypatch.setattr(lod_shapes, "LOD_MIN_RINGS", 500)
    monkeypatch.setattr(lod_shapes, "VIEW_MAX_RINGS", 300)
    geoms = _geoms()
    store = _write_store(tmp_path, "cells.zarr", geoms)
    viewer = make_napari_viewer(show=True)
    viewer.window.resize(800, 600)
    layers = viewer.open(str(store), plugin="napari-ozx")
    surface = next(lay for lay in layers if lay.name == "cells_poly")
    overview = next(lay for lay in layers if lay.name == "cells_poly density")
    assert type(surface).__name__ == "Surface" and overview.multiscale
    return viewer, surface, overview, geoms


def _held_rows(surface, geoms):
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    rec = surface.metadata[SPATIAL_KEY]
    ids = np.asarray(rec["ring_features"]["instance_id"])
    return set(ids.tolist()), rec


def _go(viewer, layer, centre, height):
    """Centre the camera on *centre* (y, x, *layer*'s data coordinates) showing about
    *height* world units vertically."""
    cam = viewer.scene.camera
    cam.center = tuple(layer.data_to_world(centre))[-2:]
    cam.zoom = viewer.canvas.size[0] / height


def test_zoomed_out_cells_per_pixel_zoomed_in_exactly_the_cells_of_the_view(
    qtbot, cells_viewer, tmp_path
):
    from napari_ozx._lod import view_rect
    from napari_ozx.layers.spatial.lod import LOD_KEY

    viewer, surface, overview, geoms = cells_viewer
    lod = surface.metadata[LOD_KEY]
    qtbot.waitUntil(lambda: lod.shown is not None, timeout=10_000)
    # all 1,503 cells in view: more rings than the cap, the overview and no geometry
    assert lod.shown.positions is None and overview.visible
    held, rec = _held_rows(surface, geoms)
    assert held == set() and list(rec["ring_offsets"]) == [0]
    parts = int(sum(len(g.geoms) if hasattr(g, "geoms") else 1 for g in geoms))
    assert float(np.asarray(overview.data[0]).sum()) == parts
    viewer.screenshot(str(tmp_path / "out.png"), canvas_only=False)
    # zoomed in at the cell with a hole: exactly the cells meeting the view held
    for centre in ((110.0, 110.0), (30.0, 300.0)):
        _go(viewer, surface, centre, 40.0)

        def shown(centre=centre):
            s = lod.shown
            rect = view_rect(viewer, surface)
            assert s is not None and s.positions is not None
            assert s.rect[0] <= rect[0] and s.rect[2] >= rect[2]
            assert s.rect[1] <= rect[1] and s.rect[3] >= rect[3]

        qtbot.waitUntil(shown, timeout=10_000)
        assert not overview.visible
        rect = view_rect(viewer, surface)
        held, rec = _held_rows(surface, geoms)
        meet, inter = _truth(geoms, lod.shown.rect, rect)
        assert held == meet and inter <= held and len(held) > 3
        o = np.asarray(rec["ring_offsets"])
        assert len(o) - 1 == len(rec["ring_features"]["instance_id"])
    viewer.screenshot(str(tmp_path / "in.png"), canvas_only=False)


def test_hover_names_the_features_of_the_cell_under_the_cursor(qtbot, cells_viewer):
    from napari_ozx.layers.categories.hover import features_at
    from napari_ozx.layers.spatial.lod import LOD_KEY

    viewer, surface, _overview, geoms = cells_viewer
    lod = surface.metadata[LOD_KEY]
    _go(viewer, surface, (112.0, 112.0), 40.0)
    qtbot.waitUntil(
        lambda: lod.shown is not None and lod.shown.positions is not None, timeout=10_000
    )
    # inside the holed square (rows 1500), away from its hole and from other cells'
    probe = next(
        (y, x)
        for y in np.linspace(100.5, 119.5, 39)
        for x in np.linspace(100.5, 119.5, 39)
        if shapely.intersects(geoms[1500], shapely.Point(x, y))
        and not any(
            shapely.intersects(g, shapely.Point(x, y)) for i, g in enumerate(geoms) if i != 1500
        )
    )
    text = features_at(surface, surface.data_to_world(probe))
    assert "instance_id: 1500" in text
    hole = features_at(surface, surface.data_to_world((107.5, 107.5)))
    assert "instance_id: 1500" not in hole
