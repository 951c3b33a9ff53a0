"""RFC-4 orientation in a real napari window: an image ngff-zarr 0.50
wrote with its LPS orientation opens with axis labels naming each direction, low to high
coordinates ("UI/UX: End-user applications SHOULD display the encoded information with,
for example, the human-readable names of the axes"), so napari's slider shows it."""

from __future__ import annotations

import pytest

from tests.ngff.rfc.ngffzarr import write_ngff_zarr

pytestmark = pytest.mark.gui


def test_axis_labels_name_the_anatomical_direction(make_napari_viewer, tmp_path):
    pytest.importorskip("ngff_zarr")
    path = write_ngff_zarr(tmp_path / "lps.ome.zarr", "0.6", "LPS")
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(path), plugin="napari-ozx")
    want = ("z (inferior→superior)", "y (anterior→posterior)", "x (right→left)")
    assert tuple(layer.axis_labels) == want
    assert tuple(viewer.dims.axis_labels) == want
    # the slider of the one axis not displayed (z) is labelled with its direction
    sliders = viewer.window._qt_viewer.dims.slider_widgets
    shown = [w.axis_label.text() for w in sliders if w.isVisibleTo(viewer.window._qt_window)]
    assert shown == ["z (inferior→superior)"]
