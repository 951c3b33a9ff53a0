"""A SpatialData store written by spatialdata 0.7.3 in napari itself (real window +
OpenGL canvas under Xvfb): every element is a layer, the points and shapes drawn where
the image is."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.paths import TESTS

pytestmark = pytest.mark.gui
pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

DATA = TESTS / "ngff" / "spatial" / "data"


def test_spatialdata_store_opens_every_element(make_napari_viewer, qtbot):
    from napari.layers import Image, Labels, Points, Shapes

    viewer = make_napari_viewer(show=True)
    layers = viewer.open(str(DATA / "blobs.zarr"), plugin="napari-ozx")
    by_name = {ly.name: ly for ly in layers}
    assert {"dapi", "cd3"} <= set(by_name)
    assert isinstance(by_name["cells"], Labels) and isinstance(by_name["nuclei"], Labels)
    assert isinstance(by_name["dapi"], Image)
    spots, poly = by_name["spots"], by_name["cells_poly"]
    pts, pts3 = by_name["transcripts"], by_name["transcripts3d"]
    assert isinstance(spots, Points) and isinstance(poly, Shapes)
    assert isinstance(pts, Points) and len(pts.data) == 300 and pts3.ndim == 3
    assert "gene" in pts.features.columns and len(pts.features) == 300
    assert len(poly.data) == 6 and list(poly.features["part"]).count(1) == 1
    # the tables' rows on the labels and the circles
    assert list(by_name["nuclei"].features["area"]) == [65, 75, 85, 95, 105, 115]
    assert "counts" in spots.features.columns
    # every point drawn in the image's world: the image spans 0..64, so do the points
    lo, hi = np.asarray(pts.extent.world)
    assert lo[-2:].min() >= -1 and hi[-2:].max() <= 66
    viewer.dims.ndisplay = 2
    qtbot.wait(50)
    shot = viewer.screenshot(canvas_only=True)
    assert shot.shape[-1] == 4 and shot[..., :3].std() > 0


def test_points_only_store_in_napari(make_napari_viewer):
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(DATA / "points_only.zarr"), plugin="napari-ozx")
    assert layer.name == "transcripts" and len(layer.data) == 500


# two_systems.zarr (make_fixtures.py): "aligned" is "global" then x' = 100 - 1.5 y,
# y' = 10 + 1.5 x; here over napari's (y, x)
ALIGN_YX = np.array([[0.0, 1.5, 10.0], [-1.5, 0.0, 100.0], [0.0, 0.0, 1.0]])
SCALE2 = np.diag([2.0, 2.0, 1.0])
SHIFT = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, 1.5], [0.0, 0.0, 1.0]])  # y -0.5, x +1.5


def _choose(qtbot, combo, system: str) -> None:
    """Pick *system* the way a user does: focus the combo box, arrow keys (Qt emits
    ``activated`` for a keyboard choice, as for a click in its list)."""
    from qtpy.QtCore import Qt

    combo.setFocus()
    step = Qt.Key.Key_Down if combo.findText(system) > combo.currentIndex() else Qt.Key.Key_Up
    while combo.currentText() != system:
        qtbot.keyClick(combo, step)


def _world(layer, m: np.ndarray, p=(4.0, 5.0)) -> None:
    """*layer* puts data point *p* (y, x) where the (y, x) matrix *m* does."""
    np.testing.assert_allclose(layer.data_to_world(p), (m @ [*p, 1.0])[:2], atol=1e-9)


def test_scene_dock_re_places_a_spatialdata_store(make_napari_viewer, qtbot, tmp_path, monkeypatch):
    """Elements are placed by their transformations in the images' coordinate systems,
    and the scene dock re-places them with the rest. The store's
    systems are listed in the scene dock; choosing one moves images, labels, points and
    circles (sizes with them) and polygons by their elements' transformations; the labels
    element with no transformation to it is hidden, named in one message, and shown
    again back in "global"."""
    from napari_ozx._qt.base import OzxDockWidget
    from napari_ozx._viewer_hooks import SCENE_DOCK_NAME
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    warnings: list[str] = []
    monkeypatch.setattr(
        OzxDockWidget, "notify_warning", lambda self, reason, *a, **k: warnings.append(reason)
    )
    viewer = make_napari_viewer(show=True)
    by = {ly.name: ly for ly in viewer.open(str(DATA / "two_systems.zarr"), plugin="napari-ozx")}
    pts, spots, poly = by["transcripts"], by["spots"], by["cells_poly"]
    _, dock = viewer.window.add_plugin_dock_widget("napari-ozx", SCENE_DOCK_NAME)
    combo = dock.system_combo
    qtbot.waitUntil(lambda: combo.count() == 2, timeout=10_000)
    assert [combo.itemText(i) for i in range(2)] == ["global", "aligned"]
    assert combo.currentText() == "global" and combo.isEnabled()
    _world(pts, SHIFT)
    _world(by["dapi"], SCALE2)

    _choose(qtbot, combo, "aligned")
    qtbot.waitUntil(lambda: pts.metadata[SPATIAL_KEY]["system"] == "aligned", timeout=10_000)
    np.testing.assert_allclose(pts.affine.affine_matrix, ALIGN_YX @ SHIFT, atol=1e-9)
    np.testing.assert_allclose(spots.affine.affine_matrix, ALIGN_YX @ SCALE2, atol=1e-9)
    np.testing.assert_allclose(poly.affine.affine_matrix, ALIGN_YX @ SCALE2, atol=1e-9)
    for layer in (pts, spots, poly):
        np.testing.assert_allclose(layer.scale, 1.0)
        np.testing.assert_allclose(layer.translate, 0.0)
    _world(pts, ALIGN_YX @ SHIFT, tuple(pts.data[7]))
    # circles: diameters in the element's units, drawn 2 x 1.5 = 3x larger in "aligned"
    np.testing.assert_allclose(spots.size, 2 * np.asarray(spots.features["radius"]))
    lin = spots.affine.affine_matrix[:2, :2]
    assert np.sqrt(abs(np.linalg.det(lin))) == pytest.approx(3.0)
    # the images and labels moved with them
    for name in ("dapi", "cd3", "cells"):
        _world(by[name], ALIGN_YX @ SCALE2)
    assert all(by[n].visible for n in ("dapi", "cd3", "cells", "transcripts", "spots"))
    # "nuclei" is in "global" only: hidden, named in one message
    assert not by["nuclei"].visible
    assert len(warnings) == 1 and "'nuclei'" in warnings[0] and "'aligned'" in warnings[0]
    viewer.reset_view()
    qtbot.wait(50)
    viewer.screenshot(str(tmp_path / "spatialdata_aligned.png"), canvas_only=False)

    _choose(qtbot, combo, "global")
    qtbot.waitUntil(lambda: pts.metadata[SPATIAL_KEY]["system"] == "global", timeout=10_000)
    np.testing.assert_allclose(pts.affine.affine_matrix, SHIFT, atol=1e-9)
    np.testing.assert_allclose(spots.affine.affine_matrix, SCALE2, atol=1e-9)
    for name in ("dapi", "cells", "nuclei"):
        _world(by[name], SCALE2)
    assert by["nuclei"].visible and len(warnings) == 1
