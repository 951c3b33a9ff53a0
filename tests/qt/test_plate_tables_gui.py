"""Plate tables in a real napari window: the plate navigator's
condition colours, legend, tooltips and filter on ngio's plate, a field's ROI tables
placed on its well, and the inspector's table listing and preview.

Screenshots are saved in the test's tmp dir, and in ``$NAPARI_OZX_SCREENSHOTS`` when set
(to look at them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qtpy.QtCore import QEvent, Qt

from tests._support import plate_tablegen as ptg
from tests._support.omegen import zip_dir
from tests.qt.test_plate_gui import _navigator

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def ngio_plate(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    root = tmp_path_factory.mktemp("ngio_plate_gui")
    plate = ptg.write_ngio_plate(root / "plate.zarr")
    return {"plate": plate, "dir": plate.path, "ozx": zip_dir(plate.path, root / "plate.ozx")}


def _keep(png: Path, name: str) -> None:
    out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(out) / name)


def _click_map(qtbot, nav, r: int, c: int) -> None:
    qtbot.mouseClick(nav.map, Qt.MouseButton.LeftButton, pos=nav.map.well_center(r, c))


def test_navigator_shows_filters_and_tooltips_conditions(
    make_napari_viewer, qtbot, ngio_plate, tmp_path
):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1400, 900)
    viewer.open(str(ngio_plate["ozx"]), plugin="napari-ozx")
    nav = _navigator(viewer)
    panel = nav.conditions
    try:
        qtbot.waitUntil(lambda: panel.conditions is not None, timeout=15_000)
        assert panel.isVisible()
        title = panel.title.text()
        assert "condition_table" in title and "10 wells" in title
        assert "1 row names no well" in title  # D/01 is not on the plate
        assert panel.table_combo.isVisible()  # two condition tables: a choice
        assert panel.color_combo.currentText() == "drug"  # the first condition column

        # colours: a well's fill is its drug's; the legend lists each drug and its wells
        colors = nav.map._colors
        taxol, dmso, noc = colors[(1, 3)], colors[(0, 0)], colors[(0, 1)]
        assert colors[(2, 3)] == taxol and colors[(1, 0)] == dmso and colors[(2, 2)] == noc
        assert len({taxol.name(), dmso.name(), noc.name()}) == 3
        legend = panel.legend.text()
        for drug, n in (("DMSO", 2), ("nocodazole", 6), ("taxol", 2)):
            assert drug in legend and f"({n})" in legend.split(drug, 1)[1][:40]
        assert taxol.name() in legend and dmso.name() in legend

        # the tooltip: the well, its fields, and every condition column
        tip = nav.map.tooltip(1, 3)
        assert "B04" in tip and "drug: taxol" in tip and "concentration: 0.5" in tip
        from qtpy.QtGui import QHelpEvent
        from qtpy.QtWidgets import QApplication, QToolTip

        pos = nav.map.well_center(2, 2)
        QApplication.sendEvent(
            nav.map, QHelpEvent(QEvent.Type.ToolTip, pos, nav.map.mapToGlobal(pos))
        )
        qtbot.waitUntil(QToolTip.isVisible, timeout=3000)
        assert "drug: nocodazole" in QToolTip.text() and "concentration: 1.5" in QToolTip.text()
        QToolTip.hideText()

        # the filter: a value from the list, then text typed into the box
        panel.set_filter("drug", "taxol")
        assert panel.count.text() == "2 of 10 wells match"
        assert nav.map.filtered_out(0, 0) and not nav.map.filtered_out(1, 3)
        with qtbot.assertNotEmitted(nav.map.wellActivated, wait=100):
            _click_map(qtbot, nav, 0, 0)  # a filtered-out well does not open
        assert nav._pending is None and not nav.well_layers
        edit = panel.value_combo.lineEdit()
        edit.clear()
        qtbot.keyClicks(edit, "noc")  # a substring: every nocodazole well
        assert panel.count.text() == "6 of 10 wells match"
        assert not nav.map.filtered_out(2, 2) and nav.map.filtered_out(1, 3)
        panel.set_filter(None, "dms")  # any column, case-insensitive
        assert panel.count.text() == "2 of 10 wells match"

        # a matching well opens, with each field's ROI tables on its tile
        with qtbot.waitSignal(nav.wellLoaded, timeout=15_000) as sig:
            _click_map(qtbot, nav, 1, 0)
        assert sig.args == ["B/01"]
        fov = viewer.layers["B01 f0 FOV_ROI_table"]
        assert "B01 f0 well_ROI_table" in viewer.layers
        assert list(fov.features["name"]) == ["FOV_1", "FOV_2"] and fov.visible
        ov = nav._entries[nav.plate.id].overview
        y0, x0, _, _ = ov.field_box(1, 0)
        corners = np.array([fov.data_to_world(v) for rect in fov.data for v in rect])
        np.testing.assert_allclose(corners.min(axis=0), [y0, x0])
        np.testing.assert_allclose(corners.max(axis=0), [y0 + 24.0, x0 + 32.0])  # 2 FOVs
        # the next well reuses the ROI layers (as many rows): its own names and place
        panel.set_filter(None, "")
        with qtbot.waitSignal(nav.wellLoaded, timeout=15_000):
            _click_map(qtbot, nav, 1, 1)
        assert viewer.layers["B02 f0 FOV_ROI_table"] is fov
        assert fov.metadata["napari_ozx_table"]["image"] == "B/02/0"
        np.testing.assert_allclose(
            np.array([fov.data_to_world(v) for v in fov.data[0]]).min(axis=0),
            ov.field_box(1, 1)[:2],
        )

        # colour by another column; the screenshot (dock and canvas)
        panel.set_color_column("concentration")
        assert nav.map._colors[(0, 0)] != nav.map._colors[(1, 0)]
        panel.set_filter("drug", "nocodazole")
        viewer.reset_view()
        qtbot.wait(200)
        png = tmp_path / "plate_conditions.png"
        shot = viewer.screenshot(str(png), canvas_only=False)
        assert shot.shape[0] > 700
        _keep(png, "plate_conditions.png")
        dock_png = tmp_path / "plate_conditions_dock.png"
        assert nav.grab().save(str(dock_png))
        _keep(dock_png, "plate_conditions_dock.png")
    finally:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        nav.shutdown()


def test_navigator_switches_condition_tables(make_napari_viewer, qtbot, ngio_plate):
    viewer = make_napari_viewer(show=False)
    viewer.open(str(ngio_plate["dir"]), plugin="napari-ozx")
    nav = _navigator(viewer)
    panel = nav.conditions
    try:
        qtbot.waitUntil(lambda: panel.conditions is not None, timeout=15_000)
        panel.table_combo.setCurrentText("by_well")
        qtbot.waitUntil(
            lambda: panel.conditions is not None and panel.conditions.table.name == "by_well",
            timeout=15_000,
        )
        assert panel.color_combo.currentText() == "replicate"
        assert "replicate: rep2, rep9" in nav.map.tooltip(1, 2)  # B03: two field rows
        panel.set_filter("replicate", "rep9")
        assert panel.count.text() == "1 of 10 wells match"
    finally:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        nav.shutdown()


def test_a_plate_without_conditions_has_no_panel(make_napari_viewer, qtbot, tmp_path):
    from tests.inspection.test_inspection import make_plate

    viewer = make_napari_viewer(show=False)
    viewer.open(str(make_plate(tmp_path / "plate.zarr")), plugin="napari-ozx")
    nav = _navigator(viewer)
    try:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        assert nav.conditions.isHidden() and nav.map._colors == {}
        assert "conditions" not in nav.map.tooltip(0, 0)
    finally:
        nav.shutdown()


def test_inspector_lists_tables_and_previews_their_rows(qtbot, ngio_plate, tmp_path):
    from napari_ozx._qt.inspector import InspectorWidget

    w = InspectorWidget()
    qtbot.addWidget(w)
    w.resize(900, 820)
    w.show()
    with qtbot.waitSignal(w.source_loaded, timeout=15_000):
        w.inspect(ngio_plate["ozx"])
    root = w.tree.topLevelItem(0)
    assert [root.child(i).text(0) for i in range(root.childCount())] == [
        "Row A",
        "Row B",
        "Row C",
        "tables",
    ]
    tables = root.child(3)
    assert tables.text(1) == "2 tables"
    tables.setExpanded(True)
    qtbot.waitUntil(lambda: tables.childCount() == 2, timeout=10_000)
    assert tables.child(0).text(0) == "condition_table"
    assert tables.child(0).text(1) == "condition_table · csv · 11 rows"
    assert not w.tabs.isTabEnabled(w._table_tab)  # the root is no table
    with qtbot.waitSignal(w.table_preview_shown, timeout=15_000) as sig:
        w.tree.setCurrentItem(tables.child(0))
    assert sig.args == ["tables/condition_table"]
    assert w.tabs.isTabEnabled(w._table_tab)
    t = w.table_preview
    assert (t.rowCount(), t.columnCount()) == (11, 5)
    heads = [t.horizontalHeaderItem(i).text() for i in range(5)]
    assert heads == ["index", "row", "column", "drug", "concentration"]
    assert [t.item(0, i).text() for i in range(5)] == ["0", "A", "1", "DMSO", "0"]
    assert "11 rows" in w.table_note.text()
    summary = w.summary.toPlainText()
    assert "Columns (4)" in summary and "csv" in summary
    assert '"condition_table"' in w.json_view.toPlainText()
    w.tabs.setCurrentIndex(w._table_tab)
    qtbot.wait(100)
    png = tmp_path / "inspector_table.png"
    assert w.grab().save(str(png))
    _keep(png, "inspector_table.png")

    # a field's ROI table, selected by path (its ancestors load on the way)
    with qtbot.waitSignal(w.table_preview_shown, timeout=15_000) as sig:
        w.select_path("B/03/1/tables/FOV_ROI_table")
    assert sig.args == ["B/03/1/tables/FOV_ROI_table"]
    assert t.rowCount() == 2 and t.horizontalHeaderItem(0).text() == "FieldIndex"
    assert t.item(1, 0).text() == "FOV_2" and t.item(1, 1).text() == "16"
    assert "Index\nFieldIndex (str)" in w.summary.toPlainText()
    # another node: the Table tab is off again
    with qtbot.waitSignal(w.details_shown, timeout=10_000):
        w.select_path("B/03/1")
    assert not w.tabs.isTabEnabled(w._table_tab) and t.rowCount() == 0
    w.close()
    w.deleteLater()


def test_inspector_row_double_click_zooms_to_the_roi(make_napari_viewer, qtbot, tmp_path):
    """A ROI table's row in the inspector's preview, double-clicked,
    centres the viewer on that ROI (the one napari-ozx drew from the same table)."""
    from napari_ozx._qt.inspector import InspectorWidget
    from tests._support import tablegen as tg

    image = tg.write_ngio_image(tmp_path / "img.zarr", "0.5")
    viewer = make_napari_viewer()
    viewer.open(str(image.path), plugin="napari-ozx")
    layer = viewer.layers["fov_anndata"]
    w = InspectorWidget(viewer)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.source_loaded, timeout=15_000):
        w.inspect(image.path)
    with qtbot.waitSignal(w.table_preview_shown, timeout=15_000):
        w.select_path("tables/fov_anndata")
    assert w.roi_layer() is layer
    row = [w.table_preview.item(r, 0).text() for r in range(w.table_preview.rowCount())]
    r = row.index("FOV_2")
    w.table_preview.cellDoubleClicked.emit(r, 0)
    corners = np.array([layer.data_to_world(v) for v in np.asarray(layer.data[1])])
    centre = (corners.min(axis=0) + corners.max(axis=0)) / 2
    np.testing.assert_allclose(viewer.camera.center[-2:], centre[-2:], atol=1e-6)
    assert layer.selected_data == {1}
