"""napari itself (real Qt window + OpenGL canvas under Xvfb): open, look, save, errors."""

from __future__ import annotations

import numpy as np
import pytest

from napari_ozx._compat import dask_query_planning
from napari_ozx._sample_data import sample_path
from tests._support.paths import CORPUS

pytestmark = pytest.mark.gui


def test_open_sample_shows_named_coloured_channels_and_labels(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer(show=True)
    layers = viewer.open(str(sample_path()), plugin="napari-ozx")
    assert [lyr.name for lyr in layers] == ["Nuclei", "Membrane", "nuclei"]
    nuc, mem, lab = layers
    assert nuc.colormap.name == "cyan" and mem.colormap.name == "magenta"
    assert nuc.contrast_limits == [40.0, 800.0]
    # small label pyramids open editable: level 0, copy-on-write (layers.editable)
    assert nuc.multiscale and lab.editable and not lab.multiscale
    assert tuple(nuc.scale) == (1.0, 0.25, 0.25)
    assert [str(u) for u in nuc.units] == ["micrometer"] * 3
    assert tuple(viewer.dims.axis_labels) == ("z", "y", "x")
    # labels keep the colours stored in image-label
    assert lab.colormap.color_dict[1][3] == pytest.approx(1.0)
    viewer.dims.set_point(0, 8)
    shot = viewer.screenshot(str(tmp_path / "sample.png"), canvas_only=True)
    assert shot.shape[-1] == 4
    rgb = shot[..., :3].astype(int)
    # something bright and coloured is on the canvas (not a black or blank frame)
    assert (rgb.max(axis=-1) > 100).mean() > 0.02
    assert (rgb[..., 0] - rgb[..., 1]).std() > 5


def test_sample_data_menu_contribution(make_napari_viewer):
    viewer = make_napari_viewer()
    viewer.open_sample("napari-ozx", "cells")
    assert [type(lyr).__name__ for lyr in viewer.layers] == ["Image", "Image", "Labels"]


def test_save_layers_from_viewer_and_reopen(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    viewer.open(str(sample_path()), plugin="napari-ozx")
    target = tmp_path / "resaved.ozx"
    written = viewer.layers.save(str(target), plugin="napari-ozx")
    assert written == [str(target)]
    again = make_napari_viewer()
    layers = again.open(str(target), plugin="napari-ozx")
    assert [lyr.name for lyr in layers] == ["Nuclei", "Membrane", "nuclei"]
    for a, b in zip(viewer.layers, layers):
        np.testing.assert_array_equal(np.asarray(a.data[0]), np.asarray(b.data[0]))
        assert tuple(a.scale) == tuple(b.scale)
    assert layers[0].contrast_limits == [40.0, 800.0]


def test_broken_file_is_one_clear_message(make_napari_viewer, tmp_path):
    from napari.utils.notifications import notification_manager

    viewer = make_napari_viewer()
    bad = tmp_path / "broken.ozx"
    bad.write_bytes(sample_path().read_bytes()[:5000])  # truncated: no end records
    seen = []
    notification_manager.notification_ready.connect(seen.append)
    try:
        layers = viewer.open(str(bad), plugin="napari-ozx")
    finally:
        notification_manager.notification_ready.disconnect(seen.append)
    assert layers == []
    errors = [n for n in seen if "napari-ozx" in str(n.message)]
    assert len(errors) == 1
    assert str(bad) in errors[0].message


def _notifications(viewer, path, **kw):
    from napari.utils.notifications import notification_manager

    seen = []
    notification_manager.notification_ready.connect(seen.append)
    try:
        layers = viewer.open(str(path), **kw)
    finally:
        notification_manager.notification_ready.disconnect(seen.append)
    return layers, seen


def test_error_toast_leads_with_the_reason(make_napari_viewer, tmp_path):
    """A collapsed toast shows the first line of the message: it must be the reason (and
    the short file name), not a long path; the full path is on a later line."""
    viewer = make_napari_viewer()
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "nested" / "deeper"
    deep.mkdir(parents=True)
    bad = deep / "level_missing.ozx"
    src = CORPUS / "files" / "level_missing.ozx"
    bad.write_bytes(src.read_bytes())
    layers, seen = _notifications(viewer, bad, plugin="napari-ozx")
    assert layers == []
    (note,) = [n for n in seen if str(bad) in str(n.message)]
    first, *rest = str(note.message).splitlines()
    assert first.startswith("pyramid level '1' is missing") and len(first) < 80, first
    assert first.endswith("(level_missing.ozx)") and str(bad) not in first
    assert any(str(bad) in line for line in rest)
    assert str(note.message).count(str(bad)) == 1  # the path is not repeated


def test_time_slider_shows_physical_time(make_napari_viewer, tmp_path):
    """napari's t slider shows an index; the text overlay says where that is in time."""
    from tests._support.omegen import write_image

    data = np.arange(4 * 2 * 16 * 16, dtype=np.uint16).reshape(4, 2, 16, 16)
    write_image(tmp_path / "movie.zarr", data, axes="tcyx", levels=1, scale=[2.5, 1, 0.5, 0.5])
    viewer = make_napari_viewer()
    viewer.open(str(tmp_path / "movie.zarr"), plugin="napari-ozx")
    from napari_ozx._viewer_hooks import text_overlay

    overlay = text_overlay(viewer)
    step = viewer.dims.current_step[0]
    assert overlay.visible and overlay.text == f"t = {2.5 * step:g} second"
    viewer.dims.set_current_step(0, 3)
    assert overlay.text == "t = 7.5 second"
    viewer.layers.clear()
    assert not overlay.visible


def test_napari_slices_read_boxes_directly_not_through_the_scheduler(make_napari_viewer):
    """napari's slicer gets its pixels from LazyArray's direct read (LevelArray's under
    dask's query planning): one reader call per layer and step, for the plane it shows,
    and no dask scheduler run."""
    from dask.callbacks import Callback

    from napari_ozx.ngff.read.lazy import LazyArray, LevelArray
    from napari_ozx.ngff.read.open import _ChunkReader, open_ome_zarr

    viewer = make_napari_viewer()
    layers = viewer.open(str(sample_path()), plugin="napari-ozx")
    image = next(lyr for lyr in layers if type(lyr).__name__ == "Image")
    data = image.data[0] if image.multiscale else image.data
    assert isinstance(data, LevelArray if dask_query_planning() else LazyArray)
    with open_ome_zarr(sample_path()) as oz:
        full = np.asarray(oz.images()[0].levels[0])
    calls: list[tuple] = []
    runs: list[int] = []
    orig = _ChunkReader.__getitem__

    def spy(self: _ChunkReader, sel: object) -> object:
        calls.append(sel if isinstance(sel, tuple) else (sel,))
        return orig(self, sel)

    _ChunkReader.__getitem__ = spy  # type: ignore[method-assign]
    try:
        with Callback(start=lambda dsk: runs.append(1)):
            viewer.dims.set_point(0, 5)
    finally:
        _ChunkReader.__getitem__ = orig  # type: ignore[method-assign]
    assert calls, "napari read nothing"
    assert runs == []  # no scheduler
    # the z napari shows (an integer or a one-plane slice), never the whole stack
    assert all(any(s in (5, slice(5, 6)) for s in sel) for sel in calls), calls
    channel = layers.index(image)
    np.testing.assert_array_equal(np.asarray(data[5]), full[channel, 5])
