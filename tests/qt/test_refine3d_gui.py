"""3D that refines from coarse to fine, in a real napari window.

Turning 3D shows the coarsest level at once; the level that fits the budget is read off
the GUI thread and replaces it, and napari's own request for it is then served from what
was read (no store read on the GUI thread). Back in 2D, or with the layer removed, a read
in flight stops and nothing is kept.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from napari_ozx import _refine3d
from napari_ozx.ngff.read import lazy
from tests._support.omegen import write_image

pytestmark = pytest.mark.gui


@pytest.fixture
def volume(tmp_path):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 4000, (1, 16, 64, 64), dtype=np.uint16)
    path = tmp_path / "vol.zarr"
    write_image(path, data, axes="czyx", levels=3)
    return path


@pytest.fixture
def gate(monkeypatch):
    """Holds every 3D read at its start until ``gate.set()``; records what it read."""
    event = threading.Event()
    event.finished = []  # type: ignore[attr-defined]
    real = lazy.prepare_view

    def held(view, cancelled):
        assert event.wait(30)
        ok = real(view, cancelled)
        event.finished.append(ok)  # type: ignore[attr-defined]
        return ok

    monkeypatch.setattr(lazy, "prepare_view", held)
    monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", "64")  # level 0 (128 kB) fits
    return event


def _open(make_napari_viewer, path):
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(path), plugin="napari-ozx")
    assert layer.multiscale and len(layer.level_shapes) == 3
    return viewer, layer


def test_3d_shows_the_coarsest_level_at_once_then_the_budget_level(
    make_napari_viewer, qtbot, volume, gate, monkeypatch
):
    served = []  # the reads answered from what the worker read
    real_take = lazy._take_prepared

    def take(src, index):
        got = real_take(src, index)
        if got is not None:
            served.append(index)
        return got

    monkeypatch.setattr(lazy, "_take_prepared", take)
    viewer, layer = _open(make_napari_viewer, volume)
    viewer.dims.ndisplay = 3
    # before anything of level 0 is read, napari draws level 2 (its own choice in 3D)
    assert layer.data_level == 2 and layer.locked_data_level is None
    assert _refine3d.refining(layer) == 0
    gate.set()
    qtbot.waitUntil(lambda: gate.finished == [True], timeout=20_000)
    qtbot.waitUntil(lambda: layer.locked_data_level == 0, timeout=20_000)
    qtbot.waitUntil(lambda: layer.data_level == 0, timeout=20_000)
    assert _refine3d.refining(layer) is None
    # napari's request for the volume was served from the worker's read, not read again
    assert served == [(0, (0, 16), (0, 64), (0, 64))]  # channel 0, the whole volume
    shown = np.asarray(layer._slice.image.raw)
    assert shown.shape == (16, 64, 64)
    np.testing.assert_array_equal(shown, np.asarray(layer.data[0]))


def test_back_to_2d_cancels_the_read_in_flight(make_napari_viewer, qtbot, volume, gate):
    viewer, layer = _open(make_napari_viewer, volume)
    viewer.dims.ndisplay = 3
    assert _refine3d.refining(layer) == 0
    viewer.dims.ndisplay = 2
    assert _refine3d.refining(layer) is None
    assert layer.locked_data_level is None  # napari's own choice in 2D
    gate.set()
    qtbot.waitUntil(lambda: gate.finished == [False], timeout=20_000)  # stopped early
    qtbot.wait(50)
    assert layer.locked_data_level is None
    assert lazy._view_of(layer.data[0])[0].prepared is None  # nothing kept


def test_removing_the_layer_cancels_the_read_in_flight(make_napari_viewer, qtbot, volume, gate):
    viewer, layer = _open(make_napari_viewer, volume)
    viewer.dims.ndisplay = 3
    assert _refine3d.refining(layer) == 0
    viewer.layers.remove(layer)
    assert _refine3d.refining(layer) is None
    gate.set()
    qtbot.waitUntil(lambda: gate.finished == [False], timeout=20_000)


def test_prepare_view_reads_exactly_the_box_and_hands_it_over_once(volume):
    from napari_ozx.ngff.read.open import open_ome_zarr

    level = open_ome_zarr(str(volume)).image("").levels[0][0]
    view = level[3:11, 5:60]
    assert lazy.prepare_view(view)
    direct = np.asarray(level.compute())[3:11, 5:60]
    src = lazy._view_of(view)[0]
    kept = src.prepared[1]
    np.testing.assert_array_equal(kept, direct)
    # another view of the same box gets those very pixels, once
    assert np.asarray(level[3:11][:, 5:60]) is kept
    assert src.prepared is None
    assert not lazy.prepare_view(level[0:4], cancelled=lambda: True)
    assert src.prepared is None
    assert not lazy.prepare_view(np.zeros(3))  # not a level view: nothing to do


def test_the_channels_refine_together_in_one_redraw(make_napari_viewer, qtbot, tmp_path, gate):
    rng = np.random.default_rng(4)
    path = tmp_path / "two.zarr"
    write_image(path, rng.integers(0, 900, (2, 8, 32, 32), dtype=np.uint16), levels=3)
    viewer = make_napari_viewer()
    layers = viewer.open(str(path), plugin="napari-ozx")
    assert len(layers) == 2
    seen = []  # at each lock: the levels both layers are locked on, and reads in flight
    for lay in layers:
        lay.events.locked_data_level.connect(
            lambda _e: seen.append(
                ([ly.locked_data_level for ly in layers], [_refine3d.refining(ly) for ly in layers])
            )
        )
    viewer.dims.ndisplay = 3
    assert [_refine3d.refining(ly) for ly in layers] == [0, 0]
    gate.set()
    qtbot.waitUntil(lambda: [ly.locked_data_level for ly in layers] == [0, 0], timeout=20_000)
    # the first lock came when neither layer was still being read
    assert seen[0][1] == [None, None]
    assert seen[-1][0] == [0, 0]
