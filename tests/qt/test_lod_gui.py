"""Level of detail in a napari window: zoomed out the overview, zoomed in exactly the
points of the view, replaced as the camera moves; categories and hover on them.

A small generated store (``tests/ngff/spatial/test_points_lod.py``) with the
level-of-detail threshold and the view's cap lowered, so that the test stays small.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

from tests.ngff.spatial.test_points_lod import H, N, W, _truth, write_store

CAP = 4_000


@pytest.fixture
def lod_viewer(make_napari_viewer, tmp_path, monkeypatch):
    from napari_ozx.layers.spatial import lod as lodmod

    monkeypatch.setattr(lodmod, "LOD_MIN_POINTS", N - 1)
    monkeypatch.setattr(lodmod, "VIEW_MAX", CAP)
    table = write_store(tmp_path / "pts.zarr")
    viewer = make_napari_viewer(show=True)
    viewer.window.resize(800, 600)
    layers = viewer.open(str(tmp_path / "pts.zarr"), plugin="napari-ozx")
    kinds = sorted(type(lay).__name__ for lay in layers)
    assert kinds == ["Image", "Points"]
    pts = next(lay for lay in layers if type(lay).__name__ == "Points")
    overview = next(lay for lay in layers if type(lay).__name__ == "Image")
    return viewer, pts, overview, lodmod.lod_of(pts), table


def _held_set(pts):
    f = pts.features
    return {
        (float(c[0]), float(c[1]), float(z), str(g), int(cid), float(q))
        for c, z, g, cid, q in zip(
            np.asarray(pts.data, np.float32),
            f["z"],
            f["gene"].astype(str),
            f["cell_id"],
            f["quality"],
            strict=True,
        )
    }


def _wait_view(qtbot, viewer, pts, lod):
    from napari_ozx._lod import view_rect

    def shown():
        rect = view_rect(viewer, pts)
        s = lod.shown
        assert s is not None and s.positions is not None
        assert s.rect[0] <= rect[0] and s.rect[1] <= rect[1]
        assert s.rect[2] >= rect[2] and s.rect[3] >= rect[3]
        assert len(pts.data) == len(s.positions)

    qtbot.waitUntil(shown, timeout=10_000)
    return lod.shown.rect


def _go(viewer, centre, height):
    """Centre the camera on *centre* (y, x) showing about *height* units vertically."""
    cam = viewer.scene.camera
    cam.center = centre
    cam.zoom = viewer.canvas.size[0] / height


def test_zoomed_out_overview_zoomed_in_every_point_of_the_view(qtbot, lod_viewer):
    viewer, pts, overview, lod, table = lod_viewer
    qtbot.waitUntil(lambda: lod.shown is not None, timeout=10_000)
    # the whole element in view: more than the cap, the overview alone
    assert len(pts.data) == 0 and overview.visible
    assert overview.multiscale and float(np.asarray(overview.data[0]).sum()) == N
    # zoomed in, on tile edges (10-unit lattice) and then at the store's corner
    for centre in ((150.0, 250.0), (0.0, 0.0), (H, W), (150.0, 265.0)):
        _go(viewer, centre, 40.0)
        rect = _wait_view(qtbot, viewer, pts, lod)
        assert 0 < len(pts.data) <= CAP
        assert _held_set(pts) == _truth(table, *rect)
        assert not overview.visible
        # every z of the view drawn: the layer is 2D, z a feature
        assert pts.ndim == 2
        assert len(pts._view_data) == len(pts.data)
    _go(viewer, (H / 2, W / 2), 2 * H)
    qtbot.waitUntil(lambda: len(pts.data) == 0 and overview.visible, timeout=10_000)


def test_show_categories_and_colours_in_view_and_overview(qtbot, lod_viewer):
    import napari_ozx
    from napari_ozx.layers.categories.palettes import default_palette

    viewer, pts, overview, lod, table = lod_viewer
    _go(viewer, (150.0, 250.0), 40.0)
    _wait_view(qtbot, viewer, pts, lod)
    shown = napari_ozx.show_categories(pts, "gene", ["gene03"])
    genes = np.asarray(table.column("gene").to_pylist(), dtype=object)
    assert shown == int((genes == "gene03").sum())
    rect = _wait_view(qtbot, viewer, pts, lod)
    assert set(pts.features["gene"].astype(str)) == {"gene03"}
    assert _held_set(pts) == _truth(table, *rect, genes={"gene03"})
    qtbot.waitUntil(lambda: "gene03" in overview.name, timeout=10_000)
    assert float(np.asarray(overview.data[0]).sum()) == shown
    # colours: the gene's in the palette of every gene, in every view
    palette = default_palette(30).astype(np.float32)
    np.testing.assert_allclose(np.asarray(pts.face_color)[:, :3], palette[[3] * len(pts.data), :3])
    legend = napari_ozx.color_by(pts, "quality")
    assert legend.kind == "continuous"
    assert len({tuple(c) for c in np.asarray(pts.face_color).round(3)}) > 1
    from napari_ozx.layers.categories.colouring import current_legend, hidden_categories

    napari_ozx.color_by(pts, "gene")
    legend = current_legend(pts)  # what the categories dock lists: the whole element's
    assert legend is not None and len(legend.categories) == 30 and sum(legend.counts) == N
    assert hidden_categories(pts) == {f"gene{i:02d}" for i in range(30)} - {"gene03"}
    napari_ozx.show_categories(pts, "gene", None)
    rect = _wait_view(qtbot, viewer, pts, lod)
    assert _held_set(pts) == _truth(table, *rect)
    qtbot.waitUntil(lambda: float(np.asarray(overview.data[0]).sum()) == N, timeout=10_000)


def test_hover_shows_the_features_of_the_point(qtbot, lod_viewer):
    """The status bar's text under the cursor names the features of the point there."""
    viewer, pts, _overview, lod, _table = lod_viewer
    _go(viewer, (150.0, 250.0), 40.0)
    _wait_view(qtbot, viewer, pts, lod)
    where = pts.data_to_world(pts.data[len(pts.data) // 2])
    k = pts.get_value(where, world=True)
    assert k is not None  # a point under the cursor (the one drawn on top)
    text = str(pts.get_status(where, world=True)["value"])
    row = pts.features.iloc[int(k)]
    assert f"gene: {row['gene']}" in text
    assert f"cell_id: {row['cell_id']}" in text
    assert "z: " in text
