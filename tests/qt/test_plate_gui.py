"""The plate navigator in a real napari window (Qt + OpenGL under Xvfb)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from qtpy.QtCore import QEvent, QPoint, Qt

from napari_ozx._qt.plate_navigator import ABSENT, EMPTY, ERROR, PRESENT, PlateMap, PlateNavigator
from napari_ozx.layers.provenance import LayerSource, plates_in

pytestmark = pytest.mark.gui


@pytest.fixture
def open_plate(make_napari_viewer, qtbot):
    """Open a plate in a shown viewer; return (viewer, navigator); wait for loads at the end."""
    navs = []

    def _open(path, show=True):
        viewer = make_napari_viewer(show=show)
        layers = viewer.open(str(path), plugin="napari-ozx")
        assert layers
        nav = _navigator(viewer)
        navs.append(nav)
        return viewer, nav

    yield _open
    for nav in navs:
        qtbot.waitUntil(lambda nav=nav: not nav.busy, timeout=10_000)
        nav.shutdown()


def _navigator(viewer) -> PlateNavigator:
    docks = [
        d
        for name, d in viewer.window._wrapped_dock_widgets.items()
        if name.startswith("Plate navigator")
    ]
    assert len(docks) == 1, list(viewer.window._wrapped_dock_widgets)
    nav = docks[0].inner_widget()
    assert isinstance(nav, PlateNavigator)
    return nav


def _wait_loaded(qtbot, nav, well):
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000) as sig:
        pass
    assert sig.args == [well]


def _click(qtbot, nav, r, c):
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000) as sig:
        qtbot.mouseClick(nav.map, Qt.MouseButton.LeftButton, pos=nav.map.well_center(r, c))
    return sig.args[0]


def _layers(viewer):
    return [lyr for lyr in viewer.layers if not lyr.name.endswith(" selected well")]


def _names(viewer):
    """Layer names, without the navigator's well outline (see test_focus_and_outline)."""
    return [lyr.name for lyr in viewer.layers if not lyr.name.endswith(" selected well")]


# ------------------------------------------------------------------ opening


def test_open_plate_docks_navigator_with_overview(open_plate, plates, qtbot):
    paths, spec = plates("p96_v04_py")
    viewer, nav = open_plate(paths["dir"])
    assert _names(viewer) == ["overview DAPI", "overview GFP", "test plate wells"]
    ov_layer = viewer.layers["overview DAPI"]
    assert ov_layer.colormap.name == "blue" and ov_layer.multiscale
    # the overview shown on the canvas is the plate: check a tile of the displayed slice
    ov = nav._entries[nav.plate.id].overview
    y0, x0 = 2 * ov.pitch[0] + ov.inset[0], 5 * ov.pitch[1] + ov.inset[1]
    np.testing.assert_array_equal(
        np.asarray(ov_layer.data[0][y0 : y0 + 64, x0 : x0 + 64]), spec.field_data(2, 5, 0)[0]
    )
    assert nav.plate.kind == "plate" and len(nav.plate.wells) == 96
    assert nav.map.state(0, 0) == PRESENT and nav.field_combo.count() == 2
    assert not nav.acq_combo.isVisible()
    assert (
        "B3" in nav.map.tooltip(1, 2)
        and "B/3/0" in nav.map.tooltip(1, 2)
        and "2 fields" in nav.map.tooltip(1, 2)
    )
    # hovering shows it
    from qtpy.QtGui import QHelpEvent
    from qtpy.QtWidgets import QApplication, QToolTip

    pos = nav.map.well_center(1, 2)
    QApplication.sendEvent(nav.map, QHelpEvent(QEvent.Type.ToolTip, pos, nav.map.mapToGlobal(pos)))
    qtbot.waitUntil(QToolTip.isVisible, timeout=3000)
    assert "B/3/1" in QToolTip.text()
    QToolTip.hideText()


def test_click_loads_well_then_replaces_it(open_plate, plates, qtbot):
    paths, spec = plates("p24_v05")
    viewer, nav = open_plate(paths["ozx"], show=False)
    assert _click(qtbot, nav, 1, 2) == "B/3"
    assert _names(viewer)[3:] == ["B3 f0 DAPI", "B3 f0 GFP", "B3 f0 cells"]
    dapi, gfp, cells = _layers(viewer)[3:]
    # small label pyramids open editable (level 0, copy-on-write)
    assert dapi.multiscale and cells.editable and type(cells).__name__ == "Labels"
    np.testing.assert_array_equal(np.asarray(gfp.data[0]), spec.field_data(1, 2, 0)[1])
    np.testing.assert_array_equal(
        np.asarray(cells.data[0] if cells.multiscale else cells.data), spec.label_data(1, 2, 0)
    )
    ov = nav._entries[nav.plate.id].overview
    np.testing.assert_allclose(dapi.translate, ov.tile_origin(1, 2))  # on its overview tile
    assert nav.map.is_loaded(1, 2)
    # the next well replaces it (in the same layers: contrast set by the user stays)
    first = list(_layers(viewer)[3:])
    dapi.contrast_limits = (10, 3000)
    assert _click(qtbot, nav, 3, 5) == "D/6"
    assert _names(viewer)[3:] == ["D6 f0 DAPI", "D6 f0 GFP", "D6 f0 cells"]
    assert list(_layers(viewer)[3:]) == first and tuple(dapi.contrast_limits) == (10, 3000)
    np.testing.assert_array_equal(
        np.asarray(cells.data[0] if cells.multiscale else cells.data), spec.label_data(3, 5, 0)
    )
    np.testing.assert_allclose(dapi.translate, ov.tile_origin(3, 5))
    assert nav.map.is_loaded(3, 5) and not nav.map.is_loaded(1, 2)
    # ... unless "keep" is checked
    nav.keep_check.setChecked(True)
    _click(qtbot, nav, 0, 0)
    assert _names(viewer)[3:] == [
        "D6 f0 DAPI",
        "D6 f0 GFP",
        "D6 f0 cells",
        "A1 f0 DAPI",
        "A1 f0 GFP",
        "A1 f0 cells",
    ]
    # deleting the well layers by hand is noticed
    viewer.layers.remove("A1 f0 cells")
    assert len(nav.well_layers) == 5


def test_keyboard_navigation(open_plate, plates, qtbot):
    paths, _ = plates("p24_v05")
    viewer, nav = open_plate(paths["dir"], show=False)
    nav.map.setFocus()
    assert nav.map.current == (0, 0)
    for key in (Qt.Key.Key_Right, Qt.Key.Key_Right, Qt.Key.Key_Down, Qt.Key.Key_Left):
        qtbot.keyClick(nav.map, key)
    assert nav.map.current == (1, 1)
    qtbot.keyClick(nav.map, Qt.Key.Key_Up)
    qtbot.keyClick(nav.map, Qt.Key.Key_Up)  # clamped at row A
    qtbot.keyClick(nav.map, Qt.Key.Key_End)
    assert nav.map.current == (0, 5)
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000) as sig:
        qtbot.keyClick(nav.map, Qt.Key.Key_Return)
    assert sig.args == ["A/6"] and _names(viewer)[3] == "A6 f0 DAPI"


def test_field_selector_and_grid(open_plate, plates, qtbot):
    paths, spec = plates("p24_v05")
    viewer, nav = open_plate(paths["dir"], show=False)
    _click(qtbot, nav, 3, 4)
    # another field reloads the shown well
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000):
        nav.field_combo.setCurrentIndex(1)
    assert _names(viewer)[3:] == ["D5 f1 DAPI", "D5 f1 GFP", "D5 f1 cells"]
    np.testing.assert_array_equal(
        np.asarray(viewer.layers["D5 f1 DAPI"].data[0]), spec.field_data(3, 4, 1)[0]
    )
    ov = nav._entries[nav.plate.id].overview
    np.testing.assert_allclose(viewer.layers["D5 f1 DAPI"].translate, ov.tile_origin(3, 4))
    # all fields as a grid: both fields side by side
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000):
        nav.grid_check.setChecked(True)
    assert _names(viewer)[3:] == [
        "D5 f0 DAPI",
        "D5 f0 GFP",
        "D5 f0 cells",
        "D5 f1 DAPI",
        "D5 f1 GFP",
        "D5 f1 cells",
    ]
    # ... inside the well's own tile, side by side, never over a neighbour
    t0, t1 = viewer.layers["D5 f0 DAPI"].translate, viewer.layers["D5 f1 DAPI"].translate
    assert t0[0] == t1[0] and t1[1] > t0[1]
    y0, x0, y1, x1 = ov.tile_box(3, 4)
    boxes = []
    for name in ("D5 f0 DAPI", "D5 f0 cells", "D5 f1 DAPI", "D5 f1 GFP", "D5 f1 cells"):
        (lo_y, lo_x), (hi_y, hi_x) = _world_box(viewer.layers[name])
        assert y0 <= lo_y and hi_y <= y1 and x0 <= lo_x and hi_x <= x1, (name, lo_y, hi_x)
        boxes.append((lo_x, hi_x))
    assert boxes[0][1] <= boxes[2][0]  # field 0 ends before field 1 starts


def _world_box(layer):
    """World (y, x) corners of a layer's full-resolution pixels (edges, not centres)."""
    shape = np.array(layer.data[0].shape if layer.multiscale else layer.data.shape)[-2:]
    scale, translate = np.array(layer.scale)[-2:], np.array(layer.translate)[-2:]
    return translate - 0.5 * scale, translate + (shape - 0.5) * scale


def test_loading_a_well_frames_and_outlines_it(open_plate, plates, qtbot):
    paths, _ = plates("p24_v05")
    viewer, nav = open_plate(paths["dir"])
    qtbot.waitUntil(lambda: type(viewer.layers.selection.active).__name__ == "Image", timeout=5000)
    zoom0 = viewer.scene.camera.zoom
    _click(qtbot, nav, 3, 4)
    ov = nav._entries[nav.plate.id].overview
    y0, x0, y1, x1 = ov.tile_box(3, 4)
    cy, cx = viewer.scene.camera.center[-2:]
    assert y0 < cy < y1 and x0 < cx < x1
    assert viewer.scene.camera.zoom > 2 * zoom0  # zoomed in onto the well
    outline = [lyr for lyr in viewer.layers if lyr.name.endswith(" selected well")]
    assert len(outline) == 1 and type(outline[0]).__name__ == "Shapes"
    outline = outline[0]
    assert not outline.editable and outline not in viewer.layers.selection
    assert viewer.layers[-1] is outline  # drawn above the well's layers
    np.testing.assert_allclose(outline.data[0].min(axis=0), [y0, x0])
    np.testing.assert_allclose(outline.data[0].max(axis=0), [y1, x1])
    # the next well moves the same outline and the camera
    _click(qtbot, nav, 0, 1)
    y0, x0, y1, x1 = ov.tile_box(0, 1)
    cy, cx = viewer.scene.camera.center[-2:]
    assert y0 < cy < y1 and x0 < cx < x1
    assert len([lyr for lyr in viewer.layers if lyr.name.endswith(" selected well")]) == 1
    np.testing.assert_allclose(outline.data[0].min(axis=0), [y0, x0])
    # hovering names the well and its field
    from napari.utils._test_utils import read_only_mouse_event

    oy, ox = ov.tile_origin(2, 5)
    nav._on_canvas_move(viewer, read_only_mouse_event(type="mouse_move", position=(oy, ox)))
    assert viewer.tooltip.text == "C6 (field 0)" and nav.hover_label.text() == "C6 (field 0)"
    nav._on_canvas_move(viewer, read_only_mouse_event(type="mouse_move", position=(-50, -50)))
    assert viewer.tooltip.text == ""


def test_first_view_fits_plate_and_selects_an_image(open_plate, plates, qtbot):
    paths, _ = plates("p96_v05")
    viewer, _nav = open_plate(paths["ozx"])
    qtbot.waitUntil(lambda: type(viewer.layers.selection.active).__name__ == "Image", timeout=5000)
    assert viewer.layers.selection.active.name == "overview DAPI"
    center, zoom = tuple(viewer.scene.camera.center), viewer.scene.camera.zoom
    viewer.reset_view()  # what fitting the whole plate looks like
    np.testing.assert_allclose(center, viewer.scene.camera.center, atol=1e-6)
    assert zoom == pytest.approx(viewer.scene.camera.zoom)


@pytest.mark.slow  # a plate drawn, zoomed and saved
def test_screenshot_of_a_well_zoomed_in(open_plate, plates, qtbot, tmp_path):
    """The plate zoomed onto one well shows that well's full-resolution pixels."""
    paths, _ = plates("cells_v05")
    viewer, nav = open_plate(paths["dir"])
    viewer.window._qt_window.resize(1200, 800)
    qtbot.wait(50)
    _click(qtbot, nav, 2, 3)
    qtbot.wait(200)
    out = os.environ.get("NAPARI_OZX_SHOT") or str(tmp_path / "well.png")
    shot = viewer.screenshot(out, canvas_only=False)
    assert Path(out).is_file() and shot.shape[-1] == 4
    canvas = viewer.screenshot(str(tmp_path / "canvas.png"), canvas_only=True)
    rgb = canvas[..., :3].astype(int)
    assert (rgb.max(axis=-1) > 60).mean() > 0.05  # cells on screen, not a black frame


def test_acquisition_filter(open_plate, plates, qtbot):
    paths, spec = plates("acq_v04")
    viewer, nav = open_plate(paths["dir"], show=False)
    assert not nav.acq_combo.isHidden() and nav.acq_combo.count() == 3
    assert nav.field_combo.count() == 4
    nav.acq_combo.setCurrentIndex(2)  # acquisition 2: fields "1" and "3" of each well
    assert nav.acquisition == 2 and nav.field_combo.count() == 2
    nav.field_combo.setCurrentIndex(1)
    _click(qtbot, nav, 1, 2)
    assert _names(viewer)[3:] == ["B3 f3 DAPI", "B3 f3 GFP"]
    np.testing.assert_array_equal(
        np.asarray(viewer.layers["B3 f3 GFP"].data[0]), spec.field_data(1, 2, 3)[1]
    )


def test_failing_well_is_one_message_and_rest_works(open_plate, plates, qtbot):
    from napari.utils.notifications import notification_manager

    paths, spec = plates("small_sparse_v05")
    viewer, nav = open_plate(paths["ozx"], show=False)
    assert (
        nav.map.state(0, 1) == ABSENT
        and nav.map.state(0, 3) == ERROR
        and nav.map.state(0, 0) == PRESENT
    )
    seen = []
    notification_manager.notification_ready.connect(seen.append)
    try:
        # listed well without a group: error right away
        with qtbot.waitSignal(nav.wellFailed, timeout=5000) as sig:
            qtbot.mouseClick(nav.map, Qt.MouseButton.LeftButton, pos=nav.map.well_center(0, 3))
        assert sig.args[0] == "A/4"
        # a well whose field 1 is missing: the field fails in the worker
        nav.field_combo.setCurrentIndex(1)
        with qtbot.waitSignal(nav.wellFailed, timeout=10_000) as sig:
            qtbot.mouseClick(nav.map, Qt.MouseButton.LeftButton, pos=nav.map.well_center(1, 0))
        assert sig.args[0] == "B/1" and "missing" in sig.args[1]
        assert nav.map.state(1, 0) == ERROR
        # absent well: nothing happens but a status line
        qtbot.mouseClick(nav.map, Qt.MouseButton.LeftButton, pos=nav.map.well_center(0, 1))
        assert "no well" in nav.status.text()
        # the rest keeps working
        assert _click(qtbot, nav, 0, 0) == "A/1"
    finally:
        notification_manager.notification_ready.disconnect(seen.append)
    errors = [str(n.message) for n in seen if str(n.message).startswith("Cannot open well")]
    assert len(errors) == 2 and "A4" in errors[0] and "B1" in errors[1]
    np.testing.assert_array_equal(
        np.asarray(viewer.layers["A1 f1 DAPI"].data[0]), spec.field_data(0, 0, 1)[0]
    )


def test_partly_read_plate_says_still_loading_and_marks_failed_fields(
    open_plate, qtbot, tmp_path, monkeypatch
):
    """A large plate's fields are read as their tiles are first drawn. The
    navigator says how many wells' fields are read while some are not, and a field that
    fails when drawn turns its well red on the map with the reason."""
    from napari_ozx.ngff.read import plate as plate_mod
    from tests._support.plategen import PlateSpec, write_plate

    monkeypatch.setattr(plate_mod, "LAZY_FIELDS_FROM", 1)  # 12 wells behave as 1536 do
    spec = PlateSpec(n_rows=3, n_cols=4, fields=1, labels=False, missing_fields={(2, 3, 0)})
    path = write_plate(tmp_path / "p.ome.zarr", spec, "0.4")
    _viewer, nav = open_plate(path, show=True)
    ov = nav._entries[nav.plate.id].overview
    # napari draws the whole plate at its coarsest level: every field gets read
    qtbot.waitUntil(lambda: ov.progress() == (12, 12), timeout=10_000)
    qtbot.waitUntil(lambda: nav.map.state(2, 3) == ERROR, timeout=5_000)
    assert "not shown" in nav.map.tooltip(2, 3) and "missing" in nav.map.tooltip(2, 3)
    assert "C4" in nav.map.tooltip(2, 3).split("\n")[0]
    qtbot.waitUntil(lambda: nav.progress.isHidden(), timeout=5_000)
    assert nav.map.state(0, 0) == PRESENT
    # wells not drawn yet (as when napari shows part of a plate): said, then filled in
    for pos in [(1, 1), (1, 2)]:
        ref, _ = ov.fields[pos]
        ov.fields[pos] = (ref, None)
    nav._watch_overview()
    assert not nav.progress.isHidden()
    assert "Still loading" in nav.progress.text() and "10 of 12" in nav.progress.text()
    np.asarray(ov.levels[-1])  # drawing reads them
    qtbot.waitUntil(lambda: nav.progress.isHidden(), timeout=5_000)
    assert not nav._progress_timer.isActive()


def test_canvas_click_opens_well(open_plate, plates, qtbot):
    from napari.utils._test_utils import read_only_mouse_event
    from napari.utils.interactions import (
        mouse_move_callbacks,
        mouse_press_callbacks,
        mouse_release_callbacks,
    )

    paths, _ = plates("p24_v05")
    viewer, nav = open_plate(paths["dir"], show=False)
    ov = nav._entries[nav.plate.id].overview
    y, x = ov.tile_origin(3, 4)
    pos = (y + 5, x + 5)

    def click(position, drag_to=None):
        mouse_press_callbacks(
            viewer, read_only_mouse_event(type="mouse_press", position=position, button=1)
        )
        if drag_to is not None:
            mouse_move_callbacks(
                viewer,
                read_only_mouse_event(
                    type="mouse_move", position=drag_to, button=1, is_dragging=True
                ),
            )
        mouse_release_callbacks(
            viewer,
            read_only_mouse_event(type="mouse_release", position=drag_to or position, button=1),
        )

    click(pos, drag_to=(y + 40, x + 40))  # a pan is not a click
    assert not nav.loading and len(viewer.layers) == 3
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000) as sig:
        click(pos)
    assert sig.args == ["D/5"] and _names(viewer)[3] == "D5 f0 DAPI"
    # in an editing mode the canvas belongs to the tool (multiscale labels cannot paint,
    # so use the well-name points layer in "add" mode)
    viewer.layers.selection.active = viewer.layers["test plate wells"]
    viewer.layers["test plate wells"].mode = "add"
    click(ov.tile_origin(0, 0))
    assert not nav.loading and _names(viewer)[3] == "D5 f0 DAPI"


def test_real_mouse_click_on_canvas(open_plate, plates, qtbot):
    """A real Qt mouse click on the vispy canvas, mapped from world coordinates."""
    paths, _ = plates("p24_v05")
    viewer, nav = open_plate(paths["dir"])
    viewer.window._qt_window.resize(1200, 800)
    qtbot.wait(50)
    viewer.reset_view()
    canvas = viewer.window._qt_viewer.canvas
    native = canvas.native
    ov = nav._entries[nav.plate.id].overview
    y, x = ov.tile_origin(2, 3)
    wy, wx = y + 10, x + 10
    cy, cx = viewer.scene.camera.center[-2:]
    z = viewer.scene.camera.zoom
    dpr = native.devicePixelRatioF() if hasattr(native, "devicePixelRatioF") else 1
    px = QPoint(
        int(native.width() / 2 + (wx - cx) * z / dpr),
        int(native.height() / 2 + (wy - cy) * z / dpr),
    )
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000) as sig:
        qtbot.mouseClick(native, Qt.MouseButton.LeftButton, pos=px)
    assert sig.args == ["C/4"]


def test_single_well_opens_fields_as_grid(open_plate, plates, qtbot):
    paths, spec = plates("well_v05")
    viewer, nav = open_plate(paths["ozx"], show=False)
    assert _names(viewer) == [f"well f{f} {n}" for f in range(3) for n in ("DAPI", "GFP", "cells")]
    assert nav.plate.kind == "well" and nav.map.state(0, 0) == PRESENT
    assert nav.field_combo.count() == 3
    np.testing.assert_array_equal(
        np.asarray(viewer.layers["well f2 GFP"].data[0]), spec.field_data(0, 0, 2)[1]
    )
    # the reader's fields are the navigator's well layers: one field replaces the grid
    assert nav.grid_check.isChecked() and len(nav.well_layers) == 9 and nav.map.is_loaded(0, 0)
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000):
        nav.grid_check.setChecked(False)
    assert _names(viewer) == ["well f0 DAPI", "well f0 GFP", "well f0 cells"]
    with qtbot.waitSignal(nav.wellLoaded, timeout=10_000):
        nav.field_combo.setCurrentIndex(2)
    assert _names(viewer) == ["well f2 DAPI", "well f2 GFP", "well f2 cells"]
    np.testing.assert_array_equal(
        np.asarray(viewer.layers["well f2 cells"].data), spec.label_data(0, 0, 2)
    )


def test_navigator_from_menu_finds_open_plates(make_napari_viewer, plates, qtbot):
    """Opened by hand (Plugins menu), the navigator picks up plates already loaded, and
    forgets a plate when its overview layers are deleted."""
    paths, _ = plates("sharded_v05")
    viewer = make_napari_viewer()
    viewer.open(str(paths["dir"]), plugin="napari-ozx")
    viewer.open(str(paths["ozx"]), plugin="napari-ozx")
    nav = PlateNavigator(viewer)
    qtbot.addWidget(nav)
    try:
        assert nav.plate_combo.count() == 2
        assert nav.map.state(1, 2) == ABSENT and nav.map.state(1, 1) == PRESENT
        found = plates_in(viewer.layers)
        assert sorted(s.source for s in found) == sorted([str(paths["dir"]), str(paths["ozx"])])
        for lyr in [
            lyr for lyr in viewer.layers if LayerSource.of(lyr).source == str(paths["ozx"])
        ]:
            viewer.layers.remove(lyr)
        assert nav.plate_combo.count() == 1
    finally:
        nav.shutdown()


def test_reader_in_a_worker_thread_docks_when_napari_adds_the_layers(
    make_napari_viewer, plates, qtbot
):
    """Read off the GUI thread, the reader does not touch the window: the navigator
    appears when napari inserts the plate's layers (on the GUI thread) and finds the
    plate from their LayerSource."""
    import threading

    from napari_ozx._reader import read

    paths, _ = plates("p24_v05")
    viewer = make_napari_viewer(show=False)
    out: list = []
    worker = threading.Thread(target=lambda: out.extend(read(str(paths["dir"]))))
    worker.start()
    worker.join()
    assert [kind for *_, kind in out] == ["image", "points"]
    assert not any(n.startswith("Plate navigator") for n in viewer.window._wrapped_dock_widgets)
    for data, kwargs, kind in out:
        getattr(viewer, f"add_{kind}")(data, **kwargs)
    nav = _navigator(viewer)
    try:
        assert nav.plate is not None and nav.plate.kind == "plate"
        assert nav.plate_combo.count() == 1  # one plate, however many of its layers
        assert len(nav._entries[nav.plate.id].layers) == 3  # 2 channels + the well names
        assert _click(qtbot, nav, 1, 2) == "B/3"
    finally:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        nav.shutdown()


@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (8, 12), (16, 24), (32, 48)])
def test_plate_map_sizes(qtbot, rows, cols):
    """6 to 1536 wells: every well has its own cell, clicks land on the right one."""
    from tests._support.plategen import row_names

    m = PlateMap()
    qtbot.addWidget(m)
    rn, cn = tuple(row_names(rows)), tuple(str(i + 1) for i in range(cols))
    state = {(r, c): PRESENT if (r + c) % 4 else EMPTY for r in range(rows) for c in range(cols)}
    m.set_plate(rn, cn, state, {})
    m.resize(m.sizeHint())
    m.show()
    qtbot.waitExposed(m)
    assert m.width() >= m.minimumSizeHint().width() - 1
    cell = m.cell_rect(0, 0).width()
    assert PlateMap.MIN_CELL <= cell <= PlateMap.MAX_CELL
    got = []
    m.wellActivated.connect(lambda r, c: got.append((r, c)))
    for r, c in [(0, 0), (rows - 1, cols - 1), (rows // 2, cols // 3)]:
        assert m.cell_at(m.well_center(r, c)) == (r, c)
        qtbot.mouseClick(m, Qt.MouseButton.LeftButton, pos=m.well_center(r, c))
    assert got == [(0, 0), (rows - 1, cols - 1), (rows // 2, cols // 3)]
    img = m.grab().toImage()
    assert not img.isNull()


@pytest.mark.slow  # a 96-well overview drawn and saved
def test_screenshot(open_plate, plates, qtbot, tmp_path):
    """A screenshot of the whole window: in $NAPARI_OZX_SCREENSHOTS if set (to look at)."""
    paths, _spec = plates("cells_v05")
    viewer, nav = open_plate(paths["ozx"])
    viewer.window._qt_window.resize(1400, 860)
    qtbot.wait(100)
    _click(qtbot, nav, 2, 4)
    viewer.layers["overview DAPI"].contrast_limits = (0, 3000)
    viewer.layers["overview GFP"].contrast_limits = (0, 2000)
    viewer.reset_view()
    qtbot.wait(100)
    target = Path(os.environ.get("NAPARI_OZX_SCREENSHOTS") or tmp_path) / "plate_screenshot.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    shot = viewer.screenshot(str(target), canvas_only=False)
    assert target.is_file()
    rgb = shot[..., :3].astype(int)
    assert shot.shape[0] > 700 and shot.shape[1] > 1200
    assert (rgb.max(axis=-1) > 100).mean() > 0.02  # not a black frame
    assert (rgb[..., 2] - rgb[..., 0]).max() > 100  # blue wells on the canvas / the map
