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

from .ome06gen import rotation2, system, write_group, write_image06

pytestmark = pytest.mark.gui


def _keep(shot: Path) -> None:
    out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out) / shot.name)


def _scene(tmp_path: Path) -> Path:
    root = tmp_path / "scene.ozx.zarr"
    yy, xx = np.mgrid[0:96, 0:128]
    a = ((np.sin(yy / 6) + np.cos(xx / 9)) * 60 + 130).astype(np.uint8)
    b = ((xx // 16 + yy // 16) % 2 * 180 + 40).astype(np.uint8)
    write_image06(root / "tileA", a, scale=[1.0, 1.0])
    write_image06(root / "tileB", b, scale=[0.5, 0.5])
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
                            {"type": "scale", "scale": [2.0, 2.0]},
                            {"type": "rotation", "rotation": rotation2(30)},
                            {"type": "translation", "translation": [60.0, 160.0]},
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
