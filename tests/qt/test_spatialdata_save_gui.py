"""Saving a layer drawn in napari into a SpatialData store, in napari itself (real window
+ OpenGL canvas under Xvfb): the store opened, a Shapes layer drawn over it, the scene
dock's button opens the save dock with the store filled in, Save writes the element off
the GUI thread, the saved element reopens where it was drawn; a second save of the same
name is refused, reason first; the command is in Layers > Annotate. The
screenshot goes to the test's temporary folder (and, with NAPARI_OZX_SCREENSHOTS=DIR, to
DIR for a person to look at)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._support.paths import TESTS

pytestmark = pytest.mark.gui
pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

DATA = TESTS / "ngff" / "spatial" / "data"


def test_a_drawn_layer_is_saved_into_the_open_store_and_reopens_where_drawn(
    make_napari_viewer, qtbot, tmp_path, monkeypatch
):
    from napari.layers import Shapes

    from napari_ozx._qt.base import OzxDockWidget
    from napari_ozx._qt.spatial_save import SaveToSpatialDataWidget
    from napari_ozx._viewer_hooks import SCENE_DOCK_NAME

    errors: list[str] = []
    monkeypatch.setattr(
        OzxDockWidget, "notify_error", lambda self, reason, *a, **k: errors.append(reason)
    )
    store = tmp_path / "blobs.zarr"
    shutil.copytree(DATA / "blobs.zarr", store)
    viewer = make_napari_viewer(show=True)
    viewer.open(str(store), plugin="napari-ozx")
    # a tumour region and a stroma region drawn over the image (world = the store's
    # "global": the image spans 0..64)
    drawn = Shapes(
        [
            np.array([[6.0, 8.0], [6.0, 30.0], [28.0, 30.0], [28.0, 8.0]]),
            np.array([[36.0, 36.0], [60.0, 44.0], [44.0, 60.0]]),
        ],
        shape_type=["rectangle", "polygon"],
        features=pd.DataFrame({"region_type": pd.Categorical(["tumour", "stroma"])}),
        name="regions",
        edge_color="cyan",
        face_color=[0, 1, 1, 0.25],
        edge_width=1.0,
    )
    viewer.add_layer(drawn)
    viewer.layers.selection.active = drawn

    _, scene = viewer.window.add_plugin_dock_widget("napari-ozx", SCENE_DOCK_NAME)
    qtbot.waitUntil(lambda: scene.save_button.isVisible(), timeout=10_000)
    scene.save_button.click()
    docks = [
        w
        for w in viewer.window._dock_widgets.values()
        if isinstance(w.widget(), SaveToSpatialDataWidget)
    ]
    assert len(docks) == 1
    dock = docks[0].widget()
    assert os.path.samefile(dock.store_edit.text(), store)
    assert dock.name_edit.text() == "regions"
    qtbot.waitUntil(lambda: dock.system_combo.count() >= 1, timeout=10_000)
    assert dock.system_combo.currentText() == "global"

    dock.save_button.click()
    qtbot.waitUntil(lambda: dock.status.text().startswith("Saved"), timeout=30_000)
    assert "shapes/regions" in dock.status.text()
    assert (store / "shapes" / "regions" / "shapes.parquet").is_file()
    assert (store / "tables" / "regions_table" / "obs" / "region_type").is_dir()
    assert not errors

    # what a person looks at: the image, its labels and polygons, the drawn regions
    for layer in viewer.layers:
        if layer.name in ("transcripts", "transcripts3d", "spots", "cd3"):
            layer.visible = False
    viewer.reset_view()
    qtbot.wait(100)
    shot = Path(os.environ.get("NAPARI_OZX_SCREENSHOTS") or tmp_path) / "spatialdata-save.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    viewer.screenshot(str(shot), canvas_only=False)

    # the same name again, without "Replace": refused, reason first, nothing written
    before = (store / "shapes" / "regions" / "shapes.parquet").read_bytes()
    dock.save_button.click()
    qtbot.waitUntil(lambda: dock.status.text().startswith("Not saved"), timeout=30_000)
    assert errors and errors[0].startswith("shapes/regions exists")
    assert (store / "shapes" / "regions" / "shapes.parquet").read_bytes() == before

    # reopened by napari-ozx: the element where it was drawn, its table as features
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    (back,) = [
        ly
        for ly in viewer.open(str(store), plugin="napari-ozx")
        if ly.metadata.get(SPATIAL_KEY, {}).get("element") == "shapes/regions"
    ]
    assert isinstance(back, Shapes) and len(back.data) == 2
    for i in range(2):
        got = np.array([back.data_to_world(v) for v in back.data[i]])
        want = np.array([drawn.data_to_world(v) for v in drawn.data[i]])
        np.testing.assert_allclose(got, want, atol=1e-9)
    assert list(back.features["region_type"]) == ["tumour", "stroma"]


def test_save_command_is_in_the_annotate_menu(make_napari_viewer, qtbot):
    """Layers > Annotate (napari/layers/annotate) holds the command; run as napari runs
    it, it docks the save widget for the active layer."""
    from app_model.types import MenuItem
    from napari.layers import Points

    from napari_ozx._qt.spatial_save import SaveToSpatialDataWidget, open_save_dock

    viewer = make_napari_viewer(show=True)
    pts = viewer.add_layer(Points(np.array([[1.0, 2.0]]), name="marks"))
    viewer.layers.selection.active = pts
    from napari._app_model import get_app_model

    items = get_app_model().menus.get_menu("napari/layers/annotate")
    ids = {i.command.id for i in items if isinstance(i, MenuItem)}
    assert "napari-ozx.save_to_spatialdata" in ids
    get_app_model().commands.execute_command("napari-ozx.save_to_spatialdata").result()
    qtbot.wait(50)
    docked = [
        w.widget()
        for w in viewer.window._dock_widgets.values()
        if isinstance(w.widget(), SaveToSpatialDataWidget)
    ]
    assert len(docked) == 1
    widget = open_save_dock(viewer)  # again: the same dock, shown
    assert widget is docked[0]
    assert widget.layer == pts and widget.name_edit.text() == "marks"
    assert widget.save_button.isEnabled()
