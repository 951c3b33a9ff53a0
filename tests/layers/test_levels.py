"""The 3D level choice (napari would render the coarsest level)."""

from __future__ import annotations

import pytest

from napari_ozx.layers.levels import DEFAULT_3D_BUDGET, budget_3d, choose_3d_level

SHAPES = [(2, 1024, 2048, 2048), (2, 512, 1024, 1024), (2, 256, 512, 512), (2, 128, 256, 256)]


def test_finest_level_that_fits_texture_and_budget():
    zyx = [1, 2, 3]
    # 512 MiB of uint16: 256 x 512 x 512 x 2 B = 128 MiB fits, 512 x 1024 x 1024 does not
    assert choose_3d_level(SHAPES, zyx, 2, 2048, 512 << 20) == 2
    assert choose_3d_level(SHAPES, zyx, 2, 2048, 2 << 30) == 1  # 1 GiB level fits 2 GiB
    assert choose_3d_level(SHAPES, zyx, 2, 4096, 16 << 30) == 0
    assert choose_3d_level(SHAPES, zyx, 2, 512, 16 << 30) == 2  # texture size limits
    assert choose_3d_level(SHAPES, zyx, 2, 64, 16 << 30) == 3  # nothing fits: coarsest


def test_budget_from_environment(monkeypatch):
    monkeypatch.delenv("NAPARI_OZX_3D_BUDGET_MB", raising=False)
    assert budget_3d() == DEFAULT_3D_BUDGET
    monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", "64")
    assert budget_3d() == 64 << 20
    for bad in ("", "lots", "-3"):
        monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", bad)
        assert budget_3d() == DEFAULT_3D_BUDGET


@pytest.mark.gui
def test_3d_view_renders_the_finest_level_that_fits(
    make_napari_viewer, qtbot, tmp_path, monkeypatch
):
    import numpy as np

    from tests._support.omegen import write_image

    data = np.zeros((1, 32, 64, 64), dtype=np.uint16)
    write_image(tmp_path / "vol.zarr", data, axes="czyx", levels=3)
    monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", str(20_000 / (1 << 20)))  # ~20 kB
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(tmp_path / "vol.zarr"), plugin="napari-ozx")
    assert layer.multiscale and len(layer.level_shapes) == 3
    viewer.dims.ndisplay = 3
    # level 1 (16 x 32 x 32 x 2 B = 32 kB) is over budget, level 2 (4 kB) fits
    assert layer.locked_data_level == 2
    monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", "1")
    viewer.dims.ndisplay = 2
    assert layer.locked_data_level is None  # napari's own choice in 2D
    viewer.dims.ndisplay = 3
    assert layer.data_level == 2  # the coarsest at once, while level 0 is read
    qtbot.waitUntil(lambda: layer.locked_data_level == 0)  # 128 kB fits 1 MiB
    viewer.dims.ndisplay = 2
    layer.metadata["napari_ozx_3d_level"] = 1  # pinned by the user
    viewer.dims.ndisplay = 3
    qtbot.waitUntil(lambda: layer.locked_data_level == 1)


def test_the_copies_of_a_volume_count_in_the_budget():
    zyx = [1, 2, 3]
    # 256 x 512 x 512 uint16 = 128 MiB: once within 256 MiB, three times not
    assert choose_3d_level(SHAPES, zyx, 2, 2048, 256 << 20) == 2
    assert choose_3d_level(SHAPES, zyx, 2, 2048, 256 << 20, copies=3) == 3
    assert choose_3d_level(SHAPES, zyx, 2, 2048, 384 << 20, copies=3) == 2
