"""Table layers know where they came from, in a real napari window:
with the Shapes layer of a ROI table selected, the metadata inspector shows that table
(its name and type, the image it belongs to, its rows), not "No OME-Zarr source".

The screenshot is saved in the test's tmp dir, and in ``$NAPARI_OZX_SCREENSHOTS`` when
set (to look at it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from napari_ozx.layers.provenance import TABLE_KEY, LayerSource, TableOrigin

pytestmark = pytest.mark.gui


def test_table_origin_is_read_back_tolerantly():
    meta = {TABLE_KEY: {"source": "/d/img.zarr", "image": "B/03/0", "table": "FOV", "rows": 2}}
    origin = TableOrigin.from_metadata(meta)
    assert origin == TableOrigin("/d/img.zarr", "B/03/0", "FOV", rows=2)
    assert origin.node == "B/03/0/tables/FOV"
    assert TableOrigin("/d/img.zarr", "", "FOV").node == "tables/FOV"
    assert TableOrigin("/d/img.zarr", "", "FOV", path="x/tables/FOV").node == "x/tables/FOV"
    for bad in ({"source": "", "image": "", "table": "t"}, {"source": "s", "table": "t"}, 3):
        assert TableOrigin.from_metadata({TABLE_KEY: bad}) is None
    assert TableOrigin.from_metadata({TABLE_KEY: {**meta[TABLE_KEY], "rows": "2"}}) is None
    assert LayerSource.from_metadata(meta) is None  # a table's layer is no image layer


def test_inspector_shows_the_table_of_a_selected_roi_layer(make_napari_viewer, qtbot, tmp_path):
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    from napari_ozx._qt.inspector import InspectorWidget
    from tests._support import tablegen as tg

    image = tg.write_ngio_image(tmp_path / "img.zarr", "0.5")
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1400, 900)
    viewer.open(str(image.path), plugin="napari-ozx")
    layer = viewer.layers["fov_anndata"]
    origin = TableOrigin.of(layer)
    assert origin is not None and origin.node == "tables/fov_anndata"
    assert (origin.table, origin.image, origin.type) == ("fov_anndata", "", "roi_table")
    viewer.layers.selection.active = layer

    # the inspector opened from the menu, with the ROI layer selected
    _dock, w = viewer.window.add_plugin_dock_widget("napari-ozx", "Metadata inspector")
    assert isinstance(w, InspectorWidget)
    try:
        qtbot.waitUntil(
            lambda: w.table_note.text().startswith("<b>fov_anndata</b>"), timeout=20_000
        )
        assert "No OME-Zarr source" not in w.source_label.text()
        assert "img.zarr" in w.source_label.text()
        node = w.current_node()
        assert node is not None and node.path == "tables/fov_anndata"
        assert w.tabs.currentIndex() == w._table_tab  # its rows, shown
        t = w.table_preview
        names = [t.item(r, 0).text() for r in range(t.rowCount())]
        assert names == list(layer.features["name"])  # the layer's ROIs, row by row
        heads = [t.horizontalHeaderItem(i).text() for i in range(t.columnCount())]
        assert "x_micrometer" in heads and "len_y_micrometer" in heads
        note = w.table_note.text()
        assert f"{len(names)} rows" in note and "roi_table of image <code>/</code>" in note
        qtbot.waitUntil(lambda: "fov_anndata" in w.summary.toPlainText(), timeout=10_000)
        summary = w.summary.toPlainText()
        assert "Type\nroi_table" in summary and f"Rows\n{len(names)}" in summary
        assert "Image\nimg.zarr (/)" in summary  # the image it belongs to

        png = tmp_path / "inspector_roi_layer.png"
        shot = viewer.screenshot(str(png), canvas_only=False)
        assert shot.shape[0] > 500
        out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(out) / png.name)

        # another image layer selected: the inspector follows it, off the Table tab
        with qtbot.waitSignal(w.details_shown, timeout=10_000):
            viewer.layers.selection.active = viewer.layers["nuclei"]
        assert not w.tabs.isTabEnabled(w._table_tab)
    finally:
        w.shutdown()
