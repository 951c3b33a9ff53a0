"""How napari draws a SpatialData points element so that panning and zooming
stay usable: every point drawn in its own colour, without the antialiasing fringe that
makes software OpenGL rasterise a quad 6 px wider than each marker (the frame times are
measured by ``benchmarks/bench_spatialdata.py``, not here)."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.paths import TESTS

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

POINTS_ONLY = TESTS / "ngff" / "spatial" / "data" / "points_only.zarr"


def test_every_point_drawn_in_its_own_colour(make_napari_viewer, tmp_path):
    """Zoomed in until the markers are several pixels wide, each canvas pixel is either the
    background or exactly one point's colour: no blend of a point with its neighbours or
    the background (what antialiased edges draw)."""
    viewer = make_napari_viewer(show=True)  # (hidden, its canvas draws no markers)
    (layer,) = viewer.open(str(POINTS_ONLY), plugin="napari-ozx")
    assert len(layer.data) == 500  # every point is in the layer
    viewer.reset_view()
    viewer.camera.zoom *= 4
    shot = viewer.screenshot(str(tmp_path / "points.png"), canvas_only=True)
    pixels = shot[..., :3].reshape(-1, 3).astype(int)
    background = pixels[0]  # a corner: outside the points
    allowed = np.vstack([np.round(layer.face_color[:, :3] * 255).astype(int), background])
    drawn = pixels[np.any(pixels != background, axis=1)]
    assert len(drawn) > 0.05 * len(pixels)  # the points are there, and large
    colours, counts = np.unique(drawn, axis=0, return_counts=True)
    nearest = np.abs(colours[:, None, :] - allowed[None, :, :]).max(axis=2).min(axis=1)
    blended = counts[nearest > 2].sum()
    assert blended < 0.001 * len(drawn), f"{blended} pixels blended from several colours"
