"""The "Levels and ROIs" dock in napari itself (real window under Xvfb): a level chosen
is what napari reads, in 2D and in 3D; a rectangle of a ROI table layer opens as its own
layers at the level chosen, over the image. Screenshots go to the test's temporary
folder (and, with NAPARI_OZX_SCREENSHOTS=DIR, to DIR for a person to look at)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._support.omegen import write_image
from tests.qt import test_plate_tables_gui as plate_tables
from tests.qt.test_plate_gui import _navigator

pytestmark = pytest.mark.gui

ngio_plate = plate_tables.ngio_plate  # ngio's plate with ROI tables (a module fixture)
_click_map = plate_tables._click_map

PIXEL = 0.65


def _keep(shot: Path) -> None:
    """A quantised copy in NAPARI_OZX_SCREENSHOTS (how ``resources/levels.png`` and
    ``resources/roi.png`` are made)."""
    from tests.qt.test_widgets_gui import _keep_screenshot

    _keep_screenshot(shot, shot.name)


def _image(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    """A 2-channel 384 x 512 image, 3 levels in unsharded 32 x 32 chunks, 0.65 µm
    pixels, labels ``cells``, and a ROI table ``fov`` (FOV_1, FOV_2: 128 x 128 px each,
    on the grid of every level), as ngio writes one."""
    from zarr.storage import LocalStore

    from napari_ozx.ngff.tables.write import put_keys, roi_table_keys, tables_group_keys

    yy, xx = np.mgrid[0:384, 0:512]
    a = ((np.sin(yy / 11) + np.cos(xx / 17)) * 900 + 2000).astype(np.uint16)
    b = ((xx // 32 + yy // 32) % 2 * 3000 + 500).astype(np.uint16)
    cells = ((yy // 64 + xx // 64) % 3).astype(np.uint8)
    path = tmp_path / "img.zarr"
    levels = write_image(
        path,
        np.stack([a, b]),
        axes="cyx",
        levels=3,
        scale=[1.0, PIXEL, PIXEL],
        sharded=False,
        labels={"cells": cells},
    )
    names = ["FOV_1", "FOV_2"]
    cols = {
        "x_micrometer": np.array([64.0, 256.0]) * PIXEL,
        "y_micrometer": np.array([64.0, 192.0]) * PIXEL,
        "z_micrometer": np.zeros(2),
        "len_x_micrometer": np.full(2, 128.0 * PIXEL),
        "len_y_micrometer": np.full(2, 128.0 * PIXEL),
        "len_z_micrometer": np.ones(2),
    }
    keys = {f"tables/fov/{k}": v for k, v in roi_table_keys(names, cols, 3).items()}
    keys.update({f"tables/{k}": v for k, v in tables_group_keys(None, "fov", 3).items()})
    put_keys(LocalStore(path), keys)
    return path, levels


@pytest.fixture
def chunk_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every chunk key read from a local directory (zarr's reads and the direct ones)."""
    from zarr.storage import LocalStore

    keys: list[str] = []
    get, get_sync = LocalStore.get, LocalStore.get_sync

    async def aget(self, key, *a, **k):  # type: ignore[no-untyped-def]
        keys.append(key)
        return await get(self, key, *a, **k)

    def sget(self, key, *a, **k):  # type: ignore[no-untyped-def]
        keys.append(key)
        return get_sync(self, key, *a, **k)

    monkeypatch.setattr(LocalStore, "get", aget)
    monkeypatch.setattr(LocalStore, "get_sync", sget)
    return keys


def _chunks(keys: list[str]) -> set[str]:
    return {k for k in keys if "/c/" in k and not k.startswith(("tables", "labels"))}


def _settle(qtbot, viewer) -> None:
    viewer.window._qt_viewer.canvas.native.update()
    qtbot.wait(300)


def test_a_chosen_level_is_the_only_one_napari_reads_in_2d_and_3d(
    make_napari_viewer, qtbot, tmp_path, chunk_reads
):
    from napari_ozx._qt.levels import LevelsDock

    path, _ = _image(tmp_path)
    viewer = make_napari_viewer(show=True)
    layers = viewer.open(str(path), plugin="napari-ozx")
    image = layers[0]
    assert image.multiscale
    dock = LevelsDock(viewer)
    viewer.window.add_dock_widget(dock, name="Levels and ROIs")
    channels = [lyr for lyr in layers if lyr.multiscale and lyr._type_string == "image"]
    assert len(channels) == 2
    viewer.layers.selection.active = image
    viewer.layers.selection.update(channels)  # both channels: one choice for the image
    combo = dock.level_combo
    items = [combo.itemText(i) for i in range(combo.count())]
    assert items[0].startswith("automatic")
    assert items[1:] == [
        "0: 0.65 µm (384 × 512 px)",
        "1: 1.3 µm (192 × 256 px)",
        "2: 2.6 µm (96 × 128 px)",
    ]
    # zoomed in, napari's automatic choice is level 0
    viewer.camera.zoom *= 6
    _settle(qtbot, viewer)
    qtbot.waitUntil(lambda: image.data_level == 0, timeout=10_000)
    chunk_reads.clear()
    combo.setCurrentIndex(2)
    combo.activated.emit(2)  # what a user's pick sends
    assert [c.locked_data_level for c in channels] == [1, 1] and combo.currentIndex() == 2
    viewer.camera.zoom *= 1.5
    _settle(qtbot, viewer)
    qtbot.waitUntil(lambda: image.data_level == 1, timeout=10_000)
    shot = tmp_path / "levels.png"
    viewer.screenshot(str(shot), canvas_only=False)
    _keep(shot)
    read = _chunks(chunk_reads)
    # napari read level 1 (the whole of it: a pinned level is sliced whole), no other
    assert read == {f"1/c/{c}/{y}/{x}" for c in (0, 1) for y in range(6) for x in range(8)}
    # 3D keeps the pinned level (napari-ozx's 3D choice does not override the user's)
    chunk_reads.clear()
    viewer.dims.ndisplay = 3
    _settle(qtbot, viewer)
    assert image.locked_data_level == 1 and image.data_level == 1
    read = _chunks(chunk_reads)
    assert all(k.startswith("1/") for k in read), sorted(read)
    viewer.dims.ndisplay = 2
    assert image.locked_data_level == 1
    # automatic again: napari's choice by zoom (level 0 this close)
    combo.setCurrentIndex(0)
    combo.activated.emit(0)
    _settle(qtbot, viewer)
    assert [c.locked_data_level for c in channels] == [None, None]
    qtbot.waitUntil(lambda: image.data_level == 0, timeout=10_000)


def test_a_selected_roi_opens_as_its_own_layers_over_the_image(make_napari_viewer, qtbot, tmp_path):
    from napari.layers import Image, Labels, Shapes
    from qtpy.QtCore import Qt

    from napari_ozx._qt.levels import LevelsDock, open_selected_rois

    path, levels = _image(tmp_path)
    viewer = make_napari_viewer(show=True)
    viewer.open(str(path), plugin="napari-ozx")
    (rois,) = [lyr for lyr in viewer.layers if isinstance(lyr, Shapes)]
    full = [lyr for lyr in viewer.layers if isinstance(lyr, Image)]
    viewer.layers.selection.active = rois
    rois.mode = "select"
    rois.selected_data = {1}  # FOV_2
    _, dock = viewer.window.add_plugin_dock_widget("napari-ozx", "Levels and ROIs")
    assert isinstance(dock, LevelsDock)
    qtbot.waitUntil(lambda: "FOV_2" in dock.roi_label.text(), timeout=5_000)
    qtbot.waitUntil(lambda: dock.roi_level.count() == 3, timeout=10_000)
    assert dock.roi_level.itemText(1) == "1: 1.3 µm (192 × 256 px)"
    assert not dock.masked.isEnabled()  # a ROI table: nothing to mask with
    dock.roi_level.setCurrentIndex(1)
    qtbot.mouseClick(dock.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: any(lyr.name.startswith("FOV_2") for lyr in viewer.layers), timeout=10_000
    )
    qtbot.waitUntil(lambda: dock.open_button.isEnabled(), timeout=10_000)
    crops = [lyr for lyr in viewer.layers if lyr.name.startswith("FOV_2: ")]
    assert sorted(lyr.name for lyr in crops) == ["FOV_2: cells", "FOV_2: test c0", "FOV_2: test c1"]
    c0 = next(lyr for lyr in crops if lyr.name == "FOV_2: test c0")
    assert isinstance(c0, Image) and not c0.multiscale
    # level 1 (pixels of 1.3 µm): FOV_2 is rows 96..160, columns 128..192 of level 1
    np.testing.assert_array_equal(np.asarray(c0.data), levels[1][0, 96:160, 128:192])
    np.testing.assert_allclose(c0.scale, [2 * PIXEL, 2 * PIXEL])
    # over the image, where the file's level 1 lies: its pixel 96, 128 is level 0's
    # 192, 256 (this file's levels are scaled by 2 with no translation)
    np.testing.assert_allclose(c0.data_to_world((0, 0)), full[0].data_to_world((192, 256)))
    cells = next(lyr for lyr in crops if isinstance(lyr, Labels))
    assert cells.data.shape == (64, 64)
    viewer.reset_view()
    for lyr in full:
        lyr.opacity = 0.5
    _settle(qtbot, viewer)
    shot = tmp_path / "roi.png"
    viewer.screenshot(str(shot), canvas_only=False)
    _keep(shot)

    # the layer menu's command: opens the selection through the dock (level kept)
    viewer.layers.selection.active = rois
    rois.selected_data = {0}
    open_selected_rois(viewer)
    qtbot.waitUntil(
        lambda: any(lyr.name.startswith("FOV_1: ") for lyr in viewer.layers), timeout=10_000
    )


def test_a_roi_of_a_field_in_the_plate_navigator_opens_over_its_well(
    make_napari_viewer, qtbot, ngio_plate
):
    """A well opened from the plate navigator shows its field on the well's tile with the
    field's ROI layer; a rectangle of it opens as layers lying over that field there."""
    from napari_ozx._qt.levels import LevelsDock

    viewer = make_napari_viewer(show=True)
    viewer.open(str(ngio_plate["ozx"]), plugin="napari-ozx")
    nav = _navigator(viewer)
    try:
        with qtbot.waitSignal(nav.wellLoaded, timeout=15_000):
            _click_map(qtbot, nav, 1, 0)  # B/01
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        fov = viewer.layers["B01 f0 FOV_ROI_table"]
        field = next(
            lyr for lyr in viewer.layers if lyr.name.startswith("B01 f0 ") and lyr.multiscale
        )
        viewer.layers.selection.active = fov
        fov.selected_data = {1}  # FOV_2: x 16-32 µm, y 0-24 µm (pixels 32.., 0..)
        _, dock = viewer.window.add_plugin_dock_widget("napari-ozx", "Levels and ROIs")
        assert isinstance(dock, LevelsDock)
        qtbot.waitUntil(lambda: "FOV_2" in dock.roi_label.text(), timeout=5_000)
        qtbot.waitUntil(lambda: dock.roi_level.count() == 2, timeout=10_000)
        dock.open_selected()
        qtbot.waitUntil(
            lambda: any(lyr.name.startswith("FOV_2: ") for lyr in viewer.layers), timeout=15_000
        )
        crop = next(lyr for lyr in viewer.layers if lyr.name.startswith("FOV_2: "))
        assert crop.data.shape[-2:] == (48, 32)
        np.testing.assert_allclose(crop.data_to_world((0, 0)), field.data_to_world((0, 32)))
        np.testing.assert_array_equal(np.asarray(crop.data), np.asarray(field.data[0])[:, 32:64])
    finally:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        nav.shutdown()


def test_a_row_of_the_inspectors_table_view_opens_as_layers(make_napari_viewer, qtbot, tmp_path):
    """The inspector's preview of a ROI table: a row's "Open as layers" opens that ROI."""
    from qtpy.QtWidgets import QMenu

    from napari_ozx._qt.inspector import InspectorWidget

    path, levels = _image(tmp_path)
    viewer = make_napari_viewer(show=True)
    viewer.open(str(path), plugin="napari-ozx")
    w = InspectorWidget(viewer)
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.source_loaded, timeout=15_000):
        w.inspect(str(path))
    with qtbot.waitSignal(w.table_preview_shown, timeout=15_000):
        w.select_path("tables/fov")
    t = w.table_preview
    row = [t.item(r, 0).text() for r in range(t.rowCount())].index("FOV_1")
    # the row's context menu offers it
    menus: list[QMenu] = []
    orig = QMenu.popup
    QMenu.popup = lambda self, *a: menus.append(self)  # type: ignore[method-assign]
    try:
        t.customContextMenuRequested.emit(t.visualItemRect(t.item(row, 0)).center())
    finally:
        QMenu.popup = orig  # type: ignore[method-assign]
    (menu,) = menus
    (action,) = [a for a in menu.actions() if a.text() == "Open as layers"]
    action.trigger()
    qtbot.waitUntil(
        lambda: any(lyr.name == "FOV_1: test c0" for lyr in viewer.layers), timeout=15_000
    )
    c0 = viewer.layers["FOV_1: test c0"]
    np.testing.assert_array_equal(np.asarray(c0.data), levels[0][0, 64:192, 64:192])
