"""Editing labels in place and saving only the changes back into the file."""

from __future__ import annotations

import os
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.layers.editable import EditableLabels, make_labels_editable
from napari_ozx.layers.saveback import SaveBackError, save_labels_back
from tests._support import thirdparty as tp
from tests._support.viewermodel import open_in_viewer_model

pytest.importorskip("napari")

RNG = np.random.default_rng(7)


def _labels(vm: Any) -> Any:
    from napari.layers import Labels

    return next(lyr for lyr in vm.layers if isinstance(lyr, Labels))


def _mtimes(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in root.rglob("*")
        if p.is_file()
    }


def _ours(tmp_path: Path, suffix: str, levels: int = 3, shape=(2, 8, 96, 128)) -> Path:
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    img = RNG.integers(0, 4000, shape, dtype=np.uint16)
    lab = np.zeros(shape[1:], np.uint32)
    lab[:, 10:40, 20:60] = 1
    lab[:, 50:90, 70:120] = 2
    path = tmp_path / f"cells{suffix}"
    axes = layer_axes(["z", "y", "x"], None, 3, True)
    spec = ImageSpec(img, axes, channels=[])
    labels = LabelsSpec("cells", lab, layer_axes(["z", "y", "x"], None, 3, False))
    opts = WriteOptions(chunk_yx=32, shard_yx=64, shard_z=2, pyramid_levels=levels)
    write_ome_zarr(path, spec, [labels], opts)
    return path


# ------------------------------------------------------------------ the array


def test_editable_array_reads_lazily_and_copies_only_touched_chunks():
    import dask.array as da

    base_np = RNG.integers(0, 5, (3, 64, 64), dtype=np.uint16)
    e = EditableLabels(da.from_array(base_np, chunks=(1, 16, 16)))
    truth = base_np.copy()
    np.testing.assert_array_equal(np.asarray(e), truth)
    np.testing.assert_array_equal(e[1, 5:40:3, -10:], truth[1, 5:40:3, -10:])
    pts = (np.array([0, 2, 2]), np.array([1, 63, 62]), np.array([0, 63, 17]))
    e[pts] = 9
    truth[pts] = 9
    e[1, 20:22, 30:50] = 4
    truth[1, 20:22, 30:50] = 4
    np.testing.assert_array_equal(e[pts], truth[pts])
    np.testing.assert_array_equal(np.asarray(e), truth)
    assert e.dirty_chunks == [(0, 0, 0), (1, 1, 1), (1, 1, 2), (1, 1, 3), (2, 3, 1), (2, 3, 3)]
    assert e.dirty_nbytes == 6 * 16 * 16 * 2
    assert not (base_np == 9).any()  # the base itself is never written
    with pytest.raises(IndexError):
        e[(np.array([3]), np.array([0]), np.array([0]))] = 1
    with pytest.raises(OzxError):
        EditableLabels(da.zeros((4, 4), dtype=float))


def test_napari_paints_an_opened_labels_layer(tmp_path):
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    vm = open_in_viewer_model(fx.path)
    lab = _labels(vm)
    assert isinstance(lab.data, EditableLabels) and lab.editable and not lab.multiscale
    lab.paint((1, 10, 10), 5)
    assert lab.data[1, 10, 10] == 5
    lab.undo()
    assert lab.data[1, 10, 10] == fx.labels["cells"][0][1, 10, 10]


def test_large_pyramid_stays_read_only_and_says_why(tmp_path, monkeypatch):
    from napari_ozx.layers import editable

    monkeypatch.setattr(editable, "CHEAP_PLANE_PIXELS", 16)
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    vm = open_in_viewer_model(fx.path)
    lab = _labels(vm)
    assert lab.multiscale and not lab.editable
    assert "read-only" in lab.metadata["ozx_read_only"]
    assert "Edit labels" in lab.metadata["ozx_read_only"]
    new = make_labels_editable(lab)
    assert new.editable and isinstance(new.data, EditableLabels)
    assert new.data.shape == lab.data[0].shape
    assert new.metadata["napari_ozx"] == lab.metadata["napari_ozx"]
    np.testing.assert_array_equal(np.asarray(new.data), fx.labels["cells"][0])


def test_edit_selected_labels_replaces_the_layer_in_place(tmp_path, monkeypatch):
    from napari_ozx.layers import editable

    monkeypatch.setattr(editable, "CHEAP_PLANE_PIXELS", 16)
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    vm = open_in_viewer_model(fx.path)
    lab = _labels(vm)
    i = vm.layers.index(lab)
    vm.layers.selection = {lab}
    (new,) = editable.edit_selected_labels(vm)
    assert vm.layers[i] is new and new.editable


# ------------------------------------------------------------- save back: dirs


@pytest.mark.parametrize(
    "maker", [tp.make_omezarr_py_v05_image_labels, tp.make_omezarr_py_v04_image_labels]
)
def test_save_back_rewrites_only_changed_label_chunks(maker, tmp_path):
    from napari_ozx._reader import read_layer_data

    fx = maker(tmp_path)
    vm = open_in_viewer_model(fx.path)
    lab = _labels(vm)
    before = _mtimes(fx.path)
    time.sleep(0.02)
    truth = fx.labels["cells"][0].copy()
    lab.data_setitem((np.array([1, 1]), np.array([3, 4]), np.array([5, 5])), 9)
    truth[1, 3:5, 5] = 9
    save_labels_back(lab)
    after = _mtimes(fx.path)
    changed = sorted(k for k in after if before.get(k) != after[k])
    assert changed, "nothing written"
    assert all(k.startswith("labels/cells/") for k in changed), changed
    assert set(before) <= set(after)
    # one chunk per level at most: the one holding (1, 3..4, 5) and its parents, where
    # their (nearest) values change: here level 1 samples (1, 2|4, 4), not painted, so
    # neither it nor the levels below are rewritten
    levels = {k.split("/")[2] for k in changed}
    assert fx.label_paths["cells"][0] in levels and levels <= set(fx.label_paths["cells"])
    assert len(changed) == len(levels)
    lab_back = next(d for d, kw, k in read_layer_data(str(fx.path)) if k == "labels")
    np.testing.assert_array_equal(np.asarray(lab_back), truth)
    np.testing.assert_array_equal(np.asarray(lab.data), truth)
    assert lab.data.dirty_chunks == []
    # the pyramid below follows (nearest: every 2nd pixel)
    import zarr

    g = zarr.open_group(str(fx.path), mode="r")
    s1 = np.asarray(g[f"labels/cells/{fx.label_paths['cells'][1]}"])
    assert s1[1, 2, 2] == truth[1, 4, 4]
    # a second edit + save works on top of the first
    lab.data_setitem((np.array([0]), np.array([0]), np.array([0])), 3)
    truth[0, 0, 0] = 3
    save_labels_back(lab)
    lab_back = next(d for d, kw, k in read_layer_data(str(fx.path)) if k == "labels")
    np.testing.assert_array_equal(np.asarray(lab_back), truth)


def test_save_back_sharded_directory(tmp_path):
    path = _ours(tmp_path, ".ome.zarr")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    before = _mtimes(path)
    time.sleep(0.02)
    lab.data[3, 72, 100] = 7
    save_labels_back(lab)
    after = _mtimes(path)
    changed = sorted(k for k in after if before.get(k) != after[k])
    assert changed == ["labels/cells/0/c/1/1/1", "labels/cells/1/c/1/0/0", "labels/cells/2/c/1/0/0"]
    assert not list(path.rglob("*.partial"))


# --------------------------------------------------------------- save back: ozx


def test_save_back_ozx_copies_unchanged_members_byte_for_byte(tmp_path):
    from napari_ozx._reader import read_layer_data
    from napari_ozx.ozx.validate import validate

    path = _ours(tmp_path, ".ozx")
    with zipfile.ZipFile(path) as z:
        old = {i.filename: z.read(i.filename) for i in z.infolist()}
        old_order = [i.filename for i in z.infolist()]
        old_comment = z.comment
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    truth = np.asarray(lab.data).copy()
    lab.data[3, 72, 100] = 7
    truth[3, 72, 100] = 7
    inode = path.stat().st_ino
    save_labels_back(lab)
    assert path.stat().st_ino != inode
    with zipfile.ZipFile(path) as z:
        new = {i.filename: z.read(i.filename) for i in z.infolist()}
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        assert z.comment == old_comment
        new_order = [i.filename for i in z.infolist()]
    changed = sorted(k for k in new if old.get(k) != new[k])
    assert changed == ["labels/cells/0/c/1/1/1", "labels/cells/1/c/1/0/0", "labels/cells/2/c/1/0/0"]
    assert new_order == old_order
    report = validate(path, deep=True)
    assert report.ok, report
    lab_back = next(d for d, kw, k in read_layer_data(str(path)) if k == "labels")
    np.testing.assert_array_equal(np.asarray(lab_back), truth)
    np.testing.assert_array_equal(np.asarray(lab.data), truth)
    # the image layers still read (their descriptor holds the old, identical inode)
    assert np.asarray(vm.layers[0].data[0]).any()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    # and again
    lab.data[0, 0, 0] = 5
    truth[0, 0, 0] = 5
    save_labels_back(lab)
    lab_back = next(d for d, kw, k in read_layer_data(str(path)) if k == "labels")
    np.testing.assert_array_equal(np.asarray(lab_back), truth)


# ------------------------------------------------------------------ bad input


def test_save_back_refuses_a_changed_source(tmp_path):
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    vm = open_in_viewer_model(fx.path)
    lab = _labels(vm)
    lab.data[0, 0, 0] = 4
    doc = fx.path / "labels" / "cells" / "s0" / "zarr.json"
    time.sleep(0.02)
    doc.write_bytes(doc.read_bytes())  # rewritten by someone else
    before = _mtimes(fx.path)
    with pytest.raises(SaveBackError, match="changed since") as ei:
        save_labels_back(lab)
    assert str(fx.path) in str(ei.value)
    assert _mtimes(fx.path) == before


def test_save_back_refuses_read_only(tmp_path, monkeypatch):
    """A read-only archive (or folder) is refused before anything is written. (chmod is
    simulated through ``os.access``: the tests may run as root, which ignores modes.)"""
    from napari_ozx.layers import saveback

    path = _ours(tmp_path, ".ozx")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    lab.data[0, 0, 0] = 4
    real_access = os.access
    monkeypatch.setattr(
        saveback.os,
        "access",
        lambda p, mode: False if Path(p) == path and mode == os.W_OK else real_access(p, mode),
    )
    inode = path.stat().st_ino
    with pytest.raises(SaveBackError, match="read-only") as ei:
        save_labels_back(lab)
    assert str(path) in str(ei.value)
    assert path.stat().st_ino == inode and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_save_back_refuses_values_that_do_not_fit_and_non_labels(tmp_path):
    from napari.layers import Labels

    path = _ours(tmp_path, ".ome.zarr")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    before = _mtimes(path)
    with pytest.raises(SaveBackError, match="not opened editable"):
        save_labels_back(Labels(np.zeros((4, 4), np.uint8), name="new"))
    lab.data._dirty[(0, 0, 0)] = np.full(lab.data.chunks, -1, np.int64)  # wider than uint32
    with pytest.raises(SaveBackError, match="do not fit"):
        save_labels_back(lab)
    assert _mtimes(path) == before


def test_save_back_full_disk_leaves_the_original(tmp_path, monkeypatch):
    """A failure while writing the new chunks (ENOSPC) leaves every file as it was."""
    import errno

    from napari_ozx.layers import saveback

    path = _ours(tmp_path, ".ome.zarr")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    lab.data[3, 72, 100] = 7
    before = _mtimes(path)
    real_fsync = os.fsync
    calls = []

    def full(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(saveback.os, "fsync", full)
    with pytest.raises(SaveBackError, match="No space left") as ei:
        save_labels_back(lab)
    assert str(path) in str(ei.value)
    assert _mtimes(path) == before
    assert not list(path.rglob("*.partial"))


def test_menu_commands_edit_and_save_back(tmp_path, monkeypatch):
    from napari_ozx.layers import commands, editable

    monkeypatch.setattr(editable, "CHEAP_PLANE_PIXELS", 16)
    path = _ours(tmp_path, ".ome.zarr")
    vm = open_in_viewer_model(path)
    vm.layers.selection = {_labels(vm)}
    commands.edit_labels(vm)
    lab = _labels(vm)
    assert isinstance(lab.data, EditableLabels) and lab.editable
    lab.data[1, 72, 100] = 6
    vm.layers.selection = {lab}
    from napari.utils.notifications import notification_manager

    before = len(notification_manager.records)
    commands.save_labels(vm)
    # said as a notification (as every save) and in the status bar
    assert f"labels saved back into {path}" in str(vm.status)
    notes = [str(n.message) for n in notification_manager.records[before:]]
    assert any(f"labels saved back into {path}" in n for n in notes), notes
    with pytest.raises(OzxError, match="select"):
        vm.layers.selection = {vm.layers[0]}
        commands.save_labels(vm)
    vm2 = open_in_viewer_model(path)
    assert np.asarray(_labels(vm2).data[0])[1, 72, 100] == 6  # still a (read-only) pyramid


@pytest.mark.parametrize("fast", [True, False], ids=["copy_file_range", "pread-pwrite"])
def test_save_back_ozx_recomputes_crc_of_a_member_it_cannot_trust(tmp_path, monkeypatch, fast):
    """A member whose local header disagrees with the central directory (here: its
    CRC-32 field) is re-read and re-checksummed, not copied with the recorded CRC; both
    copy paths give the same archive."""
    from napari_ozx.ozx import writer as writer_mod
    from napari_ozx.ozx.validate import validate

    if not fast:
        monkeypatch.setattr(writer_mod, "_USE_COPY_FILE_RANGE", False)
    path = _ours(tmp_path, ".ozx")
    with zipfile.ZipFile(path) as z:
        old = {i.filename: z.read(i.filename) for i in z.infolist()}
        victim = next(i for i in z.infolist() if i.filename.startswith("0/c/"))
    with open(path, "r+b") as fh:
        fh.seek(victim.header_offset + 14)
        fh.write(b"\0\0\0\0")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    lab.data[0, 4, 4] = 9
    save_labels_back(lab)
    report = validate(path, deep=True)
    assert report.ok, report
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        new = {i.filename: z.read(i.filename) for i in z.infolist()}
        info = z.getinfo(victim.filename)
    with open(path, "rb") as fh:  # the local header carries the right CRC-32 again
        fh.seek(info.header_offset + 14)
        assert int.from_bytes(fh.read(4), "little") == zlib.crc32(old[victim.filename])
    assert new[victim.filename] == old[victim.filename]
    assert sorted(k for k in new if old[k] != new[k]) == [
        "labels/cells/0/c/0/0/0",
        "labels/cells/1/c/0/0/0",
        "labels/cells/2/c/0/0/0",
    ]


def _foreign_pyramid(tmp_path: Path, version: str) -> tuple[Path, list[np.ndarray]]:
    """Labels whose pyramid another method made: each level samples the *second* pixel of
    every 2x2 block ([1::2]), where napari-ozx's nearest takes the first."""
    import zarr

    from tests._support.omegen import write_image, zip_dir

    yy, xx = np.mgrid[0:128, 0:128]
    lab = ((yy // 6 + xx // 10) % 7 + 1).astype(np.uint16)  # small objects everywhere
    d = tmp_path / f"foreign{version}.zarr"
    write_image(d, np.zeros((128, 128), np.uint8), "yx", version, levels=4, labels={"c": lab})
    fmt = 3 if version == "0.5" else 2
    g = zarr.open_group(d / "labels" / "c", mode="a", zarr_format=fmt)
    names = sorted(k for k in g.array_keys())
    levels = [np.asarray(g[names[0]])]
    for name in names[1:]:
        nxt = levels[-1][1::2, 1::2]
        g[name][...] = nxt
        levels.append(nxt)
    return (zip_dir(d, tmp_path / "foreign.ozx") if version == "0.5" else d), levels


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_save_back_keeps_a_foreign_pyramid_outside_the_edit(tmp_path, version):
    """Only pyramid pixels whose source block holds a changed pixel
    are recomputed; every other pixel of every level keeps its stored value (0.4
    directory; 0.5 as an .ozx)."""
    import zarr

    path, before = _foreign_pyramid(tmp_path, version)
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    yy, xx = np.mgrid[0:128, 0:128]
    disc = (yy - 50) ** 2 + (xx - 70) ** 2 <= 9**2
    lab.data_setitem(tuple(np.nonzero(disc)), 42)
    save_labels_back(lab)
    if path.suffix == ".ozx":
        g = zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r")
    else:
        g = zarr.open_group(str(path), mode="r")
    names = sorted(k for k in g["labels/c"].array_keys())
    footprint = disc
    for n, name in enumerate(names):
        after = np.asarray(g[f"labels/c/{name}"])
        if n:
            # a level-n pixel is in the footprint when its 2x2 source block touches it
            h, w = after.shape
            pad = np.pad(
                footprint, [(0, 2 * h - footprint.shape[0]), (0, 2 * w - footprint.shape[1])]
            )
            footprint = pad.reshape(h, 2, w, 2).any(axis=(1, 3))
        outside = ~footprint
        np.testing.assert_array_equal(after[outside], before[n][outside], err_msg=f"level {n}")
        if n == 0:
            assert (after[disc] == 42).all()
    assert (
        np.asarray(g[f"labels/c/{names[1]}"])[footprint if len(names) == 1 else slice(None)] == 42
    ).any()


# ------------------------------------------------------- direct encoding (no zarr loop)


def _relayout(path: Path, layout: str) -> None:
    """Rewrite the labels arrays of *path* (a directory) in another storage layout, same
    values: what a save-back must encode as zarr-python would."""
    import zarr
    from zarr.codecs import (
        BloscCodec,
        BytesCodec,
        Crc32cCodec,
        ShardingCodec,
        TransposeCodec,
        ZstdCodec,
    )

    root = path / "labels" / "cells"
    for p in sorted(q for q in root.iterdir() if (q / "zarr.json").exists()):
        values = np.asarray(zarr.open_array(str(p), mode="r"))
        kw: dict[str, Any] = {}
        if layout == "chunks_zstd_checksum":
            zstd = ZstdCodec(level=1, checksum=True)
            kw = {"chunks": (1, 32, 32), "codecs": [BytesCodec(), zstd]}
        elif layout == "shards_index_start_big_endian":
            inner = ShardingCodec(
                chunk_shape=(1, 16, 16),
                codecs=[BytesCodec(endian="big"), Crc32cCodec()],
                index_codecs=[BytesCodec()],
                index_location="start",
            )
            kw = {"chunks": (2, 32, 32), "codecs": [inner]}
        elif layout == "blosc":
            kw = {"chunks": (1, 32, 32), "codecs": [BytesCodec(), BloscCodec()]}
        elif layout == "transposed":  # not reproduced directly: zarr-python encodes it
            kw = {"chunks": (1, 32, 32), "codecs": [TransposeCodec(order=(0, 2, 1)), BytesCodec()]}
        a = zarr.create(
            shape=values.shape,
            dtype=values.dtype,
            store=str(p),
            zarr_format=3,
            fill_value=0,
            overwrite=True,
            **kw,
        )
        a[...] = values


def _staged_both(lab: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The staged bytes of *lab*'s edits: the direct encoder's (or why not) and zarr's."""
    from napari_ozx.layers import saveback as sb
    from napari_ozx.layers.provenance import LayerSource
    from napari_ozx.ngff.read.open import open_ome_zarr

    src = LayerSource.of(lab)
    assert src is not None
    oz = open_ome_zarr(src.source)
    try:
        image = oz.image(src.node)
        arrays = [a.array for a in image.arrays]
        store = arrays[0].store_path.store
        dirty = lab.data.dirty_items()
        levels = [sb._direct(a, store) for a in arrays]
        why = next((x for x in levels if isinstance(x, str)), None)
        direct = sb._stage_direct(levels, dirty) if why is None else {}
        return why, direct, sb._stage_zarr(image, arrays, store, dirty)
    finally:
        oz.close()


@pytest.mark.parametrize(
    "layout",
    [
        "ours",
        "ours_ozx",
        "chunks_zstd_checksum",
        "shards_index_start_big_endian",
        "blosc",
        "transposed",
    ],
)
def test_direct_encoding_matches_zarr_byte_for_byte(tmp_path, layout, monkeypatch):
    """The save-back's own encoder (no zarr event loop) stages the same bytes as
    zarr-python's arrays for every layout it takes (edge chunks, a chunk painted back
    to the fill value, strokes over several chunks and planes), and declines the others;
    the saved file then holds the edits at every level."""
    import zarr

    monkeypatch.delenv("NAPARI_OZX_FAST_PATHS", raising=False)  # the direct path's switch
    path = _ours(tmp_path, ".ozx" if layout == "ours_ozx" else ".ome.zarr", shape=(2, 8, 90, 125))
    if layout not in ("ours", "ours_ozx"):
        _relayout(path, layout)
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    truth = np.asarray(lab.data).copy()
    rng = np.random.default_rng(3)
    for z in (1, 6):  # strokes
        ys = rng.integers(0, 90, 300)
        xs = rng.integers(0, 125, 300)
        lab.data_setitem((np.full(300, z), ys, xs), 5)
        truth[z, ys, xs] = 5
    lab.data[2, 0:32, 32:64] = 0  # label 1 there: the chunk holds only the fill value now
    truth[2, 0:32, 32:64] = 0
    lab.data[7, 64:90, 96:125] = 3  # the corner (edge) chunk
    truth[7, 64:90, 96:125] = 3
    why, direct, by_zarr = _staged_both(lab)
    if layout == "transposed":
        assert why is not None and "TransposeCodec" in why
    else:
        assert why is None
        assert sorted(direct) == sorted(by_zarr) and len(direct) > 3
        assert direct == by_zarr
        if layout == "chunks_zstd_checksum":  # the emptied chunk is deleted
            assert by_zarr["labels/cells/0/c/2/0/1"] is None
    save_labels_back(lab)
    np.testing.assert_array_equal(np.asarray(lab.data), truth)
    vm2 = open_in_viewer_model(path)
    np.testing.assert_array_equal(np.asarray(_labels(vm2).data), truth)
    if path.is_dir():
        g = zarr.open_group(str(path / "labels" / "cells"), mode="r")
        lvl1 = np.asarray(g["1"])
        np.testing.assert_array_equal(lvl1[7, 32:45, 48:63], 3)  # nearest of the corner


def test_block_any_matches_the_definition():
    from napari_ozx.layers.saveback import _block_any

    rng = np.random.default_rng(0)
    for shape, f in [((1, 9, 7), [1, 2, 2]), ((4, 8, 8), [2, 2, 2]), ((5, 11), [3, 2])]:
        mask = rng.random(shape) < 0.05
        out_shape = tuple(-(-n // k) for n, k in zip(shape, f))
        want = np.zeros(out_shape, bool)
        for idx in np.ndindex(*out_shape):
            block = tuple(slice(i * k, (i + 1) * k) for i, k in zip(idx, f))
            want[idx] = mask[block].any()
        np.testing.assert_array_equal(_block_any(mask, f, out_shape), want)
        np.testing.assert_array_equal(_block_any(mask, f, (*out_shape[:-1], 1)), want[..., :1])


def test_direct_encoding_with_an_edit_grid_other_than_the_chunks(tmp_path, monkeypatch):
    """Edits held in blocks that are not the stored chunks (here 2x2 chunks, and a
    block cut by the array's edge) stage the same bytes as zarr-python's arrays."""
    from types import SimpleNamespace

    monkeypatch.delenv("NAPARI_OZX_FAST_PATHS", raising=False)
    path = _ours(tmp_path, ".ozx", shape=(2, 8, 90, 125))
    lab = _labels(open_in_viewer_model(path))
    data = EditableLabels(lab.data.base, chunks=(1, 64, 64))
    data[3, 10:80, 5:120] = 4
    data[(np.array([5, 5]), np.array([89, 0]), np.array([124, 0]))] = 9
    why, direct, by_zarr = _staged_both(SimpleNamespace(data=data, metadata=lab.metadata))
    assert why is None and direct == by_zarr and len(direct) >= 3


def test_save_back_closes_the_replaced_archive(tmp_path):
    """The replaced .ozx is closed after the save returns (on a thread: the last close
    of a large unlinked file frees its space, which the GUI need not wait for); once
    :func:`released` returns, no descriptor holds it, and the new file was complete at
    the save's return."""
    import gc

    from napari_ozx.layers.saveback import released
    from napari_ozx.ozx.validate import validate

    path = _ours(tmp_path, ".ozx")
    vm = open_in_viewer_model(path)
    lab = _labels(vm)
    lab.data[3, 72, 100] = 7
    save_labels_back(lab)
    assert validate(path, deep=True).ok
    assert released(10)
    gc.collect()
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    assert not [x for x in links if x.startswith(str(path)) and x.endswith("(deleted)")], links
    assert np.asarray(lab.data)[3, 72, 100] == 7
