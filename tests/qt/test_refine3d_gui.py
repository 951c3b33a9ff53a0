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
    """Holds every read of a 3D level at its start until ``gate.set()``; records what it
    read (the coarsest level read ahead and kept goes through)."""
    event = threading.Event()
    event.finished = []  # type: ignore[attr-defined]
    real = lazy.prepare_view

    def held(view, cancelled=lambda: False, keep=False):
        if keep:
            return real(view, cancelled, keep=True)
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


@pytest.fixture
def requests(monkeypatch):
    """Every read of a level view napari-ozx answers: (level shape, box, answered from
    memory, on the GUI thread)."""
    seen = []
    real_take = lazy._take_prepared

    def take(src, index):
        got = real_take(src, index)
        gui = threading.current_thread() is threading.main_thread()
        seen.append((src.shape, index, got is not None, gui))
        return got

    monkeypatch.setattr(lazy, "_take_prepared", take)
    return seen


def _level(layer, k):
    """The shape of the whole array behind *layer*'s level *k* (as ``requests`` has it)."""
    return lazy._view_of(layer.data[k])[0].shape


def _gui_reads(requests, shape):
    """The boxes of the level of *shape* read from the store on the GUI thread."""
    return [r[1] for r in requests if r[0] == shape and r[3] and not r[2]]


def _warmed(qtbot, viewer, layer):
    """Wait until the coarsest level's 3D volume is read ahead and kept."""
    coarse = _refine3d.level_view(viewer, layer, len(layer.level_shapes) - 1, ndisplay=3)
    qtbot.waitUntil(lambda: lazy.is_prepared(coarse), timeout=20_000)


def test_3d_shows_the_coarsest_level_at_once_then_the_budget_level(
    make_napari_viewer, qtbot, volume, gate, requests
):
    viewer, layer = _open(make_napari_viewer, volume)
    _warmed(qtbot, viewer, layer)  # read ahead, off the GUI thread, while 2D is shown
    requests.clear()
    viewer.dims.ndisplay = 3
    # before anything of level 0 is read, napari draws level 2 (its own choice in 3D)
    assert layer.data_level == 2 and layer.locked_data_level is None
    assert _refine3d.refining(layer) == 0
    # napari's 3D slice and thumbnail of level 2 came from memory: nothing read here
    assert any(r[0] == _level(layer, 2) for r in requests)
    assert _gui_reads(requests, _level(layer, 2)) == []
    gate.set()
    qtbot.waitUntil(lambda: gate.finished == [True], timeout=20_000)
    qtbot.waitUntil(lambda: layer.locked_data_level == 0, timeout=20_000)
    qtbot.waitUntil(lambda: layer.data_level == 0, timeout=20_000)
    assert _refine3d.refining(layer) is None
    # napari's request for the volume was served from the worker's read, not read again
    level0 = [r[1:3] for r in requests if r[0] == _level(layer, 0)]
    assert level0 == [((0, (0, 16), (0, 64), (0, 64)), True)]  # channel 0, whole volume
    shown = np.asarray(layer._slice.image.raw)
    assert shown.shape == (16, 64, 64)
    np.testing.assert_array_equal(shown, np.asarray(layer.data[0]))


def test_a_time_step_in_3d_shows_the_coarsest_level_then_refines_off_the_gui_thread(
    make_napari_viewer, qtbot, tmp_path, gate, requests
):
    rng = np.random.default_rng(5)
    path = tmp_path / "t.zarr"
    data = rng.integers(0, 4000, (3, 8, 32, 32), dtype=np.uint16)
    levels = write_image(path, data, "tzyx", levels=3)
    viewer, layer = _open(make_napari_viewer, path)
    viewer.dims.ndisplay = 3
    gate.set()
    qtbot.waitUntil(lambda: layer.data_level == 0, timeout=20_000)
    gate.clear()
    requests.clear()
    viewer.dims.set_current_step(0, 2)  # the time slider
    # at once: the coarsest level at t = 2, read once for napari's slice and thumbnail
    assert layer.data_level == 2 and _refine3d.refining(layer) == 0
    np.testing.assert_array_equal(np.asarray(layer._slice.image.raw), levels[2][2])
    assert _gui_reads(requests, _level(layer, 0)) == []
    assert len(_gui_reads(requests, _level(layer, 2))) <= 1
    gate.set()
    qtbot.waitUntil(lambda: layer.data_level == 0, timeout=20_000)
    np.testing.assert_array_equal(np.asarray(layer._slice.image.raw), data[2])
    assert _gui_reads(requests, _level(layer, 0)) == []  # served from the worker's read
    # a displayed axis moving (z) changes nothing: no new read
    requests.clear()
    viewer.dims.set_point(1, 3.0)
    assert layer.data_level == 0 and _refine3d.refining(layer) is None
    assert [r for r in requests if r[0] == _level(layer, 0)] == []


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
    assert not lazy.is_prepared(_refine3d.level_view(viewer, layer, 0))  # nothing kept


def test_removing_the_layer_cancels_the_read_in_flight(make_napari_viewer, qtbot, volume, gate):
    viewer, layer = _open(make_napari_viewer, volume)
    _warmed(qtbot, viewer, layer)
    coarse = _refine3d.level_view(viewer, layer, 2, ndisplay=3)
    viewer.dims.ndisplay = 3
    assert _refine3d.refining(layer) == 0
    viewer.layers.remove(layer)
    assert _refine3d.refining(layer) is None
    assert not lazy.is_prepared(coarse)  # the coarsest volume kept for it is dropped
    gate.set()
    qtbot.waitUntil(lambda: gate.finished == [False], timeout=20_000)


def test_prepare_view_reads_exactly_the_box_and_hands_it_over_once(volume):
    from napari_ozx.ngff.read.open import open_ome_zarr

    level = open_ome_zarr(str(volume)).image("").levels[0][0]
    view = level[3:11, 5:60]
    assert lazy.prepare_view(view)
    direct = np.asarray(level.compute())[3:11, 5:60]
    src = lazy._view_of(view)[0]
    kept = src.prepared[lazy._view_of(view)[1]][0]
    np.testing.assert_array_equal(kept, direct)
    # another view of the same box gets those very pixels, once
    assert np.asarray(level[3:11][:, 5:60]) is kept
    assert not lazy.is_prepared(view)
    assert not lazy.prepare_view(level[0:4], cancelled=lambda: True)
    assert not src.prepared
    assert not lazy.prepare_view(np.zeros(3))  # not a level view: nothing to do


def test_a_kept_view_serves_every_request_of_its_box_and_inside_it(volume):
    from napari_ozx.ngff.read.open import open_ome_zarr

    level = open_ome_zarr(str(volume)).image("").levels[0][0]
    whole = np.asarray(level.compute())
    view = level[2:12]
    assert lazy.prepare_view(view, keep=True)
    kept = lazy._view_of(view)[0].prepared[lazy._view_of(view)[1]][0]
    assert np.asarray(level[2:12]) is kept
    assert np.asarray(level[2:12]) is kept  # again: kept, not handed over
    plane = np.asarray(level[5, 10:20])  # inside: a view of the kept pixels
    assert np.shares_memory(plane, kept)
    np.testing.assert_array_equal(plane, whole[5, 10:20])
    outside = np.asarray(level[1:4])  # not inside: read
    assert not np.shares_memory(outside, kept)
    np.testing.assert_array_equal(outside, whole[1:4])
    lazy.forget_prepared(view)
    assert not lazy.is_prepared(view)
    assert not np.shares_memory(np.asarray(level[2:12]), kept)


def test_two_boxes_of_one_level_are_kept_side_by_side(volume):
    from napari_ozx.ngff.read.open import open_ome_zarr

    level = open_ome_zarr(str(volume)).image("").levels[0][0]
    a, b = level[0:8], level[8:16]
    assert lazy.prepare_view(a) and lazy.prepare_view(b)
    assert lazy.is_prepared(a) and lazy.is_prepared(b)
    np.testing.assert_array_equal(np.asarray(b), np.asarray(level.compute())[8:16])
    assert lazy.is_prepared(a) and not lazy.is_prepared(b)


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


def test_the_layers_shown_in_3d_share_the_budget(
    make_napari_viewer, qtbot, tmp_path, gate, monkeypatch
):
    rng = np.random.default_rng(6)
    path = tmp_path / "two.zarr"
    write_image(path, rng.integers(0, 900, (2, 8, 32, 32), dtype=np.uint16), levels=3)
    # level 0 is 16 KiB a channel, 48 KiB in its three copies: one layer's within 70 KiB,
    # two layers' (35 KiB each) not; level 1 (12 KiB in three copies) is
    monkeypatch.setenv("NAPARI_OZX_3D_BUDGET_MB", str(70 / 1024))
    viewer = make_napari_viewer()
    layers = viewer.open(str(path), plugin="napari-ozx")
    viewer.dims.ndisplay = 3
    assert [_refine3d.refining(ly) for ly in layers] == [1, 1]
    viewer.dims.ndisplay = 2
    viewer.layers.remove(layers[1])
    viewer.dims.ndisplay = 3
    assert _refine3d.refining(layers[0]) == 0
    gate.set()
    qtbot.waitUntil(lambda: layers[0].data_level == 0, timeout=20_000)


def test_the_coarsest_volume_read_ahead_follows_the_time_slider_in_2d(
    make_napari_viewer, qtbot, tmp_path
):
    rng = np.random.default_rng(7)
    path = tmp_path / "t.zarr"
    data = rng.integers(0, 4000, (3, 8, 32, 32), dtype=np.uint16)
    levels = write_image(path, data, "tzyx", levels=3)
    viewer, layer = _open(make_napari_viewer, path)
    _warmed(qtbot, viewer, layer)
    before = _refine3d.level_view(viewer, layer, 2, ndisplay=3)
    viewer.dims.set_point(1, 5.0)  # z: the same volume in 3D, nothing new
    assert lazy.is_prepared(before)
    viewer.dims.set_current_step(0, 2)  # t
    _warmed(qtbot, viewer, layer)
    assert not lazy.is_prepared(before)  # the volume of t = 0 is dropped
    now = _refine3d.level_view(viewer, layer, 2, ndisplay=3)
    np.testing.assert_array_equal(np.asarray(now), levels[2][2])
