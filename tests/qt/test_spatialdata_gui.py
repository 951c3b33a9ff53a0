"""A SpatialData store written by spatialdata 0.7.3 in napari itself (real window +
OpenGL canvas under Xvfb): every element is a layer, the points and shapes drawn where
the image is (issue 42)."""

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
