"""bioformats2raw's OME-XML in a real napari window: two series
open as layers named by their XML image names, and the inspector shows the XML's
facts with where each value came from."""

from __future__ import annotations

import pytest

from tests.ngff.omexml import DATA

pytestmark = pytest.mark.gui


def test_series_layers_and_the_inspector_section(make_napari_viewer, qtbot):
    from napari_ozx._qt.inspector import InspectorWidget

    viewer = make_napari_viewer()
    layers = viewer.open(str(DATA / "b2r_two.zarr"), plugin="napari-ozx")
    assert [layer.name for layer in layers] == [
        "Embryo 1: DAPI",
        "Embryo 1: GFP",
        "Embryo 2: DAPI",
        "Embryo 2: GFP",
    ]
    assert tuple(layers[2].units) == ("nanometer", "nanometer")  # from the XML
    w = InspectorWidget()
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.source_loaded, timeout=10_000):
        w.inspect(DATA / "b2r_two.zarr")
    root = w.tree.topLevelItem(0)
    series = next(root.child(i) for i in range(root.childCount()) if root.child(i).text(0) == "1")
    with qtbot.waitSignal(w.details_shown, timeout=10_000):
        w.tree.setCurrentItem(series)
    text = w.summary.toPlainText()
    assert "OME-XML" in text and "Embryo 2" in text
    assert "60x NA 1.4 Oil" in text
    assert "Source of scale x" in text and "OME-XML" in text
    w.close()
