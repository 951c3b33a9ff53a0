"""The categories dock in a real napari window (OpenGL canvas under Xvfb), driven as a
user does: choose the column, Space on a legend row to hide it, type in the search box,
"Only this", "Show all"; what napari *draws* is checked on the canvas's pixels, for
Points, Shapes, the polygon Surface and Labels of a SpatialData store."""

from __future__ import annotations

import numpy as np
import pytest

from napari_ozx.layers.categories.palettes import TAB10, to_rgba
from tests._support.sd_categories import CELL_TYPE_COLORS, store_with_cell_types

pytestmark = pytest.mark.gui
pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

#: kind -> (layer, column, a category to hide, its colour, another category's colour)
CASES = {
    "points": ("transcripts", "gene", "ACTB", TAB10[0], TAB10[2]),
    "shapes": ("cells_poly", "label", "c", TAB10[2], TAB10[3]),
    "surface": ("cells_poly", "label", "c", TAB10[2], TAB10[3]),
    "labels": ("nuclei", "cell_type", "B", CELL_TYPE_COLORS[0], CELL_TYPE_COLORS[1]),
}


def _pixels(viewer, qtbot, colour: str, tol: int = 40) -> int:
    """How many canvas pixels have *colour* (within *tol* per channel)."""
    qtbot.wait(30)
    shot = viewer.screenshot(canvas_only=True)[..., :3].astype(int)
    target = np.round(to_rgba([colour])[0][:3] * 255).astype(int)
    return int(np.count_nonzero(np.all(np.abs(shot - target) <= tol, axis=-1)))


def _choose(qtbot, combo, text: str) -> None:
    """Pick *text* in a combo box as a user does with the keyboard (Qt emits
    ``activated`` for it, as for a click in its list)."""
    from qtpy.QtCore import Qt

    combo.setFocus()
    step = Qt.Key.Key_Down if combo.findText(text) > combo.currentIndex() else Qt.Key.Key_Up
    while combo.currentText() != text:
        qtbot.keyClick(combo, step)


def _row(dock, category: str):
    for i in range(dock.list.count()):
        item = dock.list.item(i)
        if item.text().startswith(f"{category}  ("):
            return item
    raise AssertionError(f"no legend row {category!r}")


def _open(make_napari_viewer, tmp_path, monkeypatch, kind: str):
    from napari_ozx.layers.spatial import elements

    if kind == "surface":
        monkeypatch.setattr(elements, "SHAPES_LAYER_MAX", 0)
    store = store_with_cell_types(tmp_path)
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1000, 700)
    viewer.open(str(store), plugin="napari-ozx")
    name = CASES[kind][0]
    layer = viewer.layers[name]
    for other in viewer.layers:
        other.visible = other is layer
    layer.opacity = 1.0  # the colours as they are, not blended with the black canvas
    viewer.layers.selection.active = layer
    viewer.reset_view()
    # the store has genes and a table: the reader docked the dock already
    _dock, dock = viewer.window.add_plugin_dock_widget("napari-ozx", "Categories")
    return viewer, layer, dock


@pytest.mark.parametrize("kind", list(CASES))
def test_dock_colours_hides_and_shows_categories_on_the_canvas(
    kind, make_napari_viewer, qtbot, tmp_path, monkeypatch
):
    from qtpy.QtCore import Qt

    viewer, layer, dock = _open(make_napari_viewer, tmp_path, monkeypatch, kind)
    _name, column, hide, colour, other = CASES[kind]
    assert dock.layer is layer
    _choose(qtbot, dock.column_combo, column)
    assert dock.legend is not None and dock.legend.column == column
    assert dock.list.count() == len(dock.legend.categories)
    assert _pixels(viewer, qtbot, colour) > 0 and _pixels(viewer, qtbot, other) > 0
    # Space on the row's box: hidden, not drawn
    dock.list.setFocus()
    dock.list.setCurrentItem(_row(dock, hide))
    qtbot.keyClick(dock.list, Qt.Key.Key_Space)
    assert _row(dock, hide).checkState() == Qt.CheckState.Unchecked
    assert _pixels(viewer, qtbot, colour) == 0
    assert _pixels(viewer, qtbot, other) > 0
    assert "of" in dock.summary.text()
    qtbot.keyClick(dock.list, Qt.Key.Key_Space)  # and back
    assert _pixels(viewer, qtbot, colour) > 0
    # the search box finds the category, "Only this" shows it alone
    qtbot.keyClicks(dock.search, hide[:2])
    visible = [dock.list.item(i) for i in range(dock.list.count())]
    assert not _row(dock, hide).isHidden()
    assert all(hide[:2].lower() in it.text().lower() for it in visible if not it.isHidden())
    qtbot.mouseClick(dock.only_button, Qt.MouseButton.LeftButton)
    assert _pixels(viewer, qtbot, colour) > 0 and _pixels(viewer, qtbot, other) == 0
    qtbot.mouseClick(dock.all_button, Qt.MouseButton.LeftButton)
    assert _pixels(viewer, qtbot, other) > 0
    if kind == "surface":  # the reader's hook: hovering a polygon names it
        rec = layer.metadata["napari_ozx_spatialdata"]
        o, feats = rec["ring_offsets"], rec["ring_features"]
        inside = np.asarray(layer.vertices[o[0] : o[1]], dtype=float).mean(axis=0)
        status = layer.get_status(layer.data_to_world(inside), world=True)
        assert f"label: {feats['label'][0]}" in status["coordinates"]


def test_dock_colours_by_a_numeric_column_with_range_and_colour_bar(
    make_napari_viewer, qtbot, tmp_path, monkeypatch
):
    from napari.utils.colormaps import ensure_colormap

    viewer, layer, dock = _open(make_napari_viewer, tmp_path, monkeypatch, "labels")
    _choose(qtbot, dock.column_combo, "area")  # 65 .. 115
    assert dock.continuous.isVisible() and not dock.list.isVisible()
    assert (dock.low.value(), dock.high.value()) == (65.0, 115.0)
    assert not dock.bar.pixmap().isNull() and dock.bar_high.text() == "115"
    top = ensure_colormap("viridis").map([1.0])[0]
    np.testing.assert_allclose(layer.colormap.map(np.array([6]))[0], top, atol=1e-6)
    dock.high.setValue(85.0)  # as typed: nuclei 3..6 (85 and more) at the top colour
    np.testing.assert_allclose(layer.colormap.map(np.array([4]))[0], top, atol=1e-6)
    assert _pixels(viewer, qtbot, "#fde725") > 0  # viridis' top drawn


def test_opening_a_store_in_a_window_raises_no_false_alarm(
    make_napari_viewer, qtbot, tmp_path, monkeypatch, caplog
):
    """No warning about what spatialdata always writes (omero channels with a label
    only), and a message about a part of a store that opened (its polygons shown as a
    Surface) never says "cannot open"."""
    import logging

    from napari.utils.notifications import notification_manager

    from napari_ozx.layers.spatial import elements

    monkeypatch.setattr(elements, "SHAPES_LAYER_MAX", 0)
    store = store_with_cell_types(tmp_path)
    got: list[str] = []
    notification_manager.notification_ready.connect(lambda n: got.append(str(n.message)))
    viewer = make_napari_viewer(show=True)
    with caplog.at_level(logging.WARNING):
        layers = viewer.open(str(store), plugin="napari-ozx")
        qtbot.wait(50)
    assert len(layers) >= 7
    about_part = [m for m in got if "shown as one Surface layer" in m]
    assert about_part and all(m.endswith(f"napari-ozx opened {store}") for m in about_part)
    assert not [m for m in got if "cannot open" in m or "OME-Zarr rule" in m], got
    assert not [r for r in caplog.records if "OME-Zarr rule" in r.getMessage()]
