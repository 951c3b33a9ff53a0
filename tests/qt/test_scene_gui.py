"""An OME-Zarr 0.6 scene in napari itself (real window + OpenGL canvas under Xvfb): two
tiles, one translated, one scaled + rotated + translated, shown where the scene places
them; the scene dock re-places them in another system; a rotated layer saved from the
viewer reopens where it was. The screenshots go to the test's temporary folder (and, with
NAPARI_OZX_SCREENSHOTS=DIR, to DIR for a person to look at)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests._support.ome06gen import rotation2, system, write_group, write_image06

pytestmark = pytest.mark.gui


def _keep(shot: Path) -> None:
    out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out) / shot.name)


def _scene(
    tmp_path: Path,
    shape: tuple[int, int] = (96, 128),
    b_scale: float = 2.0,
    b_translation: tuple[float, float] = (60.0, 160.0),
    name: str = "scene.ozx.zarr",
) -> Path:
    """Two tiles: tileA at the origin, tileB scaled by *b_scale*, rotated 30 degrees and
    moved by *b_translation* in the scene's "world"."""
    root = tmp_path / name
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]]
    a = ((np.sin(yy / 6) + np.cos(xx / 9)) * 60 + 130).astype(np.uint8)
    b = ((xx // 16 + yy // 16) % 2 * 180 + 40).astype(np.uint8)
    write_image06(root / "tileA", a, scale=[1.0, 1.0])
    write_image06(root / "tileB", b, scale=[1.0 / b_scale, 1.0 / b_scale])
    write_group(
        root,
        {
            "scene": {
                "coordinateSystems": [system("world", "yx")],
                "coordinateTransformations": [
                    {
                        "type": "translation",
                        "translation": [0.0, 0.0],
                        "input": {"name": "physical", "path": "tileA"},
                        "output": {"name": "world"},
                    },
                    {
                        "type": "sequence",
                        "input": {"name": "physical", "path": "tileB"},
                        "output": {"name": "world"},
                        "transformations": [
                            {"type": "scale", "scale": [b_scale, b_scale]},
                            {"type": "rotation", "rotation": rotation2(30)},
                            {"type": "translation", "translation": list(b_translation)},
                        ],
                    },
                ],
            }
        },
    )
    return root


def test_scene_of_two_tiles_in_napari(make_napari_viewer, qtbot, tmp_path):
    from napari_ozx._qt.scene import SceneDock

    root = _scene(tmp_path)
    viewer = make_napari_viewer(show=True)
    la, lb = viewer.open(str(root), plugin="napari-ozx")
    r = np.asarray(rotation2(30))
    for p in [(0, 0), (40, 90)]:
        np.testing.assert_allclose(la.data_to_world(p), p)
        np.testing.assert_allclose(
            lb.data_to_world(p), r @ (np.array(p, float)) + [60.0, 160.0], atol=1e-9
        )
    viewer.reset_view()
    shot = tmp_path / "scene_world.png"
    img = viewer.screenshot(str(shot), canvas_only=True)
    _keep(shot)
    rgb = img[..., :3].astype(int)
    assert (rgb.max(axis=-1) > 60).mean() > 0.05  # both tiles drawn, not a blank frame

    # opening a scene docks the scene dock (as a plate docks the plate navigator)
    docked = [w for w in viewer.window.dock_widgets.values() if isinstance(w, SceneDock)]
    assert len(docked) == 1
    dock = docked[0]
    qtbot.waitUntil(lambda: dock.system_combo.count() > 0, timeout=10_000)
    systems = [dock.system_combo.itemText(i) for i in range(dock.system_combo.count())]
    assert systems[0] == "world" and "tileB:physical" in systems
    assert dock.system_combo.currentText() == "world"
    with qtbot.waitSignal(lb.events.affine, timeout=10_000):
        dock.place("tileB:physical")
    qtbot.waitUntil(lambda: dock.system_combo.currentText() == "tileB:physical", timeout=5_000)
    # tileB's own system: tileB at its pixel size, tileA through the inverse of tileB's path
    np.testing.assert_allclose(lb.data_to_world((10, 20)), (5.0, 10.0), atol=1e-9)
    want_a = r.T @ (np.array([10.0, 20.0]) - [60.0, 160.0]) / 2.0
    np.testing.assert_allclose(la.data_to_world((10, 20)), want_a, atol=1e-9)
    viewer.reset_view()
    shot = tmp_path / "scene_tileB.png"
    viewer.screenshot(str(shot), canvas_only=False)
    _keep(shot)


def _visible(viewer) -> np.ndarray:
    """The world region (rows: min, max; columns: y, x) the 2D canvas shows, from the
    camera's center and zoom (canvas pixels per world unit) and the canvas size."""
    cam = viewer.scene.camera
    half = np.asarray(viewer.canvas.size, float) / 2 / cam.zoom  # (height, width)
    center = np.asarray(cam.center[-2:], float)
    return np.stack([center - half, center + half])


def _inside(extent: np.ndarray, region: np.ndarray) -> bool:
    return bool(np.all(extent[0] >= region[0]) and np.all(extent[1] <= region[1]))


def test_a_scene_opens_framed(make_napari_viewer, qtbot, tmp_path):
    """Napari fits the view to the first layer added to an empty viewer only;
    a scene (tileB rotated 30 degrees and moved (100, 50), beyond tileA) opened through
    napari's own ``viewer.open`` shows both tiles with no Home press. Adding a layer or
    opening another scene into that viewer leaves the user's view alone."""
    root = _scene(tmp_path, shape=(48, 72), b_scale=1.0, b_translation=(100.0, 50.0))
    viewer = make_napari_viewer(show=True)
    la, lb = viewer.open(str(root), plugin="napari-ozx")
    qtbot.wait(50)  # the scene dock docked, the canvas at its final size
    tiles = [layer.extent.world[:, -2:] for layer in (la, lb)]
    assert not _inside(tiles[1], tiles[0]), "tileB lies beyond tileA"
    region = _visible(viewer)
    for tile in tiles:
        assert _inside(tile, region), (tile, region)
    both = np.stack([np.min([t[0] for t in tiles], 0), np.max([t[1] for t in tiles], 0)])
    np.testing.assert_allclose(viewer.scene.camera.center[-2:], both.mean(0), atol=1.0)
    shot = tmp_path / "scene_framed.png"
    viewer.screenshot(str(shot), canvas_only=False)
    _keep(shot)

    # the user looks at a part; what is added next does not move the camera
    viewer.scene.camera.center = (10.0, 20.0)
    viewer.scene.camera.zoom = 8.0
    viewer.add_image(np.ones((40, 40), np.uint8), translate=(-500, -500))
    again = _scene(tmp_path, shape=(48, 72), b_translation=(-300.0, 400.0), name="far.ozx.zarr")
    assert len(viewer.open(str(again), plugin="napari-ozx")) == 2
    qtbot.wait(50)
    np.testing.assert_allclose(viewer.scene.camera.center[-2:], (10.0, 20.0))
    assert viewer.scene.camera.zoom == 8.0


def test_rotated_layer_saved_from_the_viewer_reopens_in_place(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    data = (np.arange(64 * 80, dtype=np.uint16).reshape(64, 80) % 200).astype(np.uint16)
    layer = viewer.add_image(data, name="cells", rotate=25, scale=(0.5, 0.25), translate=(3, 4))
    target = tmp_path / "rotated.ozx"
    assert viewer.layers.save(str(target), plugin="napari-ozx") == [str(target)]
    again = make_napari_viewer()
    (back,) = again.open(str(target), plugin="napari-ozx")
    for p in [(20, 31), (0, 0), (63, 79)]:
        np.testing.assert_allclose(back.data_to_world(p), layer.data_to_world(p), atol=1e-6)


def test_spatialdata_store_of_images_and_labels_docks_the_scene_dock(make_napari_viewer, qtbot):
    """A SpatialData store of images and labels only, in two coordinate systems ("global"
    first), docks the scene dock as it opens and is offered in it; "aligned" and back
    re-places its layers. Written by spatialdata 0.7.3 (``tests/ngff/spatial/make_fixtures.py``
    ``raster_systems.zarr``): "global" is x' = 2 x + 5, y' = 3 y + 7 (an affine whose
    outputs spatialdata writes as ``c, x, y``), "aligned" a scale of 2."""
    pytest.importorskip("pyarrow")
    from napari_ozx._qt.scene import SceneDock
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY
    from tests._support.paths import TESTS

    store = TESTS / "ngff" / "spatial" / "data" / "raster_systems.zarr"
    viewer = make_napari_viewer(show=True)
    by = {ly.name: ly for ly in viewer.open(str(store), plugin="napari-ozx")}
    assert set(by) == {"dapi", "cd3", "cells"}
    docked = [w for w in viewer.window.dock_widgets.values() if isinstance(w, SceneDock)]
    assert len(docked) == 1
    dock = docked[0]
    combo = dock.system_combo
    qtbot.waitUntil(lambda: combo.count() == 2, timeout=10_000)
    assert [combo.itemText(i) for i in range(2)] == ["global", "aligned"]
    assert combo.currentText() == "global" and dock.source == str(store)
    for layer in by.values():
        np.testing.assert_allclose(layer.data_to_world((1, 2)), (10.0, 9.0), atol=1e-9)

    with qtbot.waitSignal(by["cells"].events.affine, timeout=10_000):
        dock.place("aligned")
    qtbot.waitUntil(lambda: by["dapi"].metadata[SPATIAL_KEY]["system"] == "aligned", timeout=5_000)
    for layer in by.values():
        np.testing.assert_allclose(layer.data_to_world((1, 2)), (2.0, 4.0), atol=1e-9)
    with qtbot.waitSignal(by["cells"].events.affine, timeout=10_000):
        dock.place("global")
    qtbot.waitUntil(lambda: combo.currentText() == "global", timeout=5_000)
    for layer in by.values():  # the dock puts them where the reader did
        np.testing.assert_allclose(layer.data_to_world((1, 2)), (10.0, 9.0), atol=1e-9)


def test_only_a_store_in_several_coordinate_systems_docks_the_scene_dock():
    """The reader docks the scene dock for a SpatialData store whose elements lie in
    more than one coordinate system (``raster_systems.zarr``: "global", "aligned"),
    not for one in "global" only (``blobs.zarr``)."""
    pytest.importorskip("pyarrow")
    from napari_ozx._viewer_hooks import _spatialdata_scenes
    from napari_ozx.layers.reading import read_layer_data
    from tests._support.paths import TESTS

    data = TESTS / "ngff" / "spatial" / "data"
    two, one = data / "raster_systems.zarr", data / "blobs.zarr"
    assert _spatialdata_scenes(read_layer_data(str(two), lambda w, e: None)) == {str(two)}
    assert _spatialdata_scenes(read_layer_data(str(one), lambda w, e: None)) == set()
