"""One edit transaction for a directory store and an ``.ozx``: staged keys, all or nothing."""

from __future__ import annotations

import errno
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napari_ozx.layers.transaction import EditTransaction, Fingerprint, SaveBackError
from napari_ozx.ozx.rfc9 import is_metadata_name
from tests._support.omegen import zip_dir
from tests._support.viewermodel import open_in_viewer_model

KINDS = [".ome.zarr", ".ozx"]
GROUP = b'{"zarr_format": 3, "node_type": "group", "attributes": {}}'


def _store(tmp_path: Path, suffix: str) -> Path:
    """A small Zarr v3 hierarchy: groups ``a`` (an array ``a/x``) and ``b``."""
    import zarr

    src = tmp_path / "src.zarr" if suffix == ".ozx" else tmp_path / f"img{suffix}"
    root = zarr.open_group(src, mode="w", zarr_format=3)
    x = root.require_group("a").create_array("x", shape=(4, 4), chunks=(2, 2), dtype="u1")
    x[:] = np.arange(16, dtype="u1").reshape(4, 4)
    b = root.require_group("b").create_array("y", shape=(2,), chunks=(2,), dtype="u1")
    b[:] = [7, 8]
    if suffix != ".ozx":
        return src
    out = zip_dir(src, tmp_path / "img.ozx")
    import shutil

    shutil.rmtree(src)
    return out


def _contents(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        return {
            p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()
        }
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}


def _nothing_beside(tmp_path: Path, path: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".partial", ".creating")]


@pytest.mark.parametrize("suffix", KINDS)
def test_put_delete_and_delete_prefix_are_applied(tmp_path, suffix):
    path = _store(tmp_path, suffix)
    before = _contents(path)
    with EditTransaction(path) as tx:
        assert tx.exists("a/x/c/0/0") and not tx.exists("new/zarr.json")
        tx.delete_prefix("new")  # absent: its new content is all there will be
        tx.put("new/zarr.json", GROUP)  # a new group
        tx.put("new/data/0", b"\x01\x02")
        tx.put("a/x/c/0/0", b"new chunk")  # a member replaced
        tx.delete("a/x/c/1/1")
        tx.delete("a/x/c/9/9")  # absent: nothing happens
        tx.delete_prefix("b")  # a whole group
        assert tx.get("a/x/c/0/0") == before["a/x/c/0/0"]  # the store as it was
        assert tx.get("new/zarr.json") is None
        tx.commit()
    after = _contents(path)
    expected = {k: v for k, v in before.items() if not k.startswith("b/") and k != "a/x/c/1/1"}
    expected.update({"new/zarr.json": GROUP, "new/data/0": b"\x01\x02", "a/x/c/0/0": b"new chunk"})
    assert after == expected
    _nothing_beside(tmp_path, path)
    if path.is_dir():
        assert not (path / "b").exists()
    else:  # RFC-9 "zarr.json first": every document before the first data member
        from napari_ozx.ozx.validate import validate_rfc9

        with zipfile.ZipFile(path) as zf:
            names = [i.filename for i in zf.infolist()]
            assert zf.comment == b'{"ome":{"version":"0.5"}}'  # the archive comment kept
        first_data = next(i for i, n in enumerate(names) if not is_metadata_name(n))
        assert all(not is_metadata_name(n) for n in names[first_data:])
        assert names[0] == "zarr.json"
        assert validate_rfc9(str(path)).ok


@pytest.mark.parametrize("suffix", KINDS)
def test_a_group_deleted_and_written_again_is_replaced_as_a_whole(tmp_path, suffix):
    path = _store(tmp_path, suffix)
    before = _contents(path)
    with EditTransaction(path) as tx:
        tx.delete_prefix("a")
        tx.put("a/zarr.json", GROUP)
        tx.put("a/other/0", b"z")
        tx.commit()
    expected = {k: v for k, v in before.items() if not k.startswith("a/")}
    expected.update({"a/zarr.json": GROUP, "a/other/0": b"z"})
    assert _contents(path) == expected
    _nothing_beside(tmp_path, path)


@pytest.mark.parametrize("suffix", KINDS)
def test_put_writer_streams_a_group_through_a_zarr_store(tmp_path, suffix):
    import zarr

    path = _store(tmp_path, suffix)
    values = np.arange(64, dtype="u2").reshape(8, 8)
    seen: list[str] = []

    def write_data(store: Any, prefix: str) -> None:
        seen.append(prefix)
        grp = zarr.open_group(store, mode="a", path=prefix, zarr_format=3)
        grp.create_array("v", shape=(8, 8), chunks=(4, 4), dtype="u2")[:] = values

    with EditTransaction(path) as tx:
        tx.put("labels/zarr.json", GROUP)
        tx.put_writer("labels/new", write_data)
        tx.commit()
    assert seen  # called at commit, with where the group is in the store it was given
    from napari_ozx.ngff.read.open import open_store

    store = open_store(path)
    got = zarr.open_array(store, path="labels/new/v", mode="r")[:]
    np.testing.assert_array_equal(got, values)
    _nothing_beside(tmp_path, path)


@pytest.mark.parametrize("suffix", KINDS)
def test_put_writer_replaces_a_group_only_when_it_was_deleted(tmp_path, suffix):
    path = _store(tmp_path, suffix)
    before = _contents(path)

    def write_data(store: Any, prefix: str) -> None:
        import zarr

        zarr.open_group(store, mode="a", path=prefix, zarr_format=3)

    with EditTransaction(path) as tx:
        with pytest.raises(SaveBackError, match="'a' exists"):
            tx.put_writer("a", write_data)  # would mix old and new keys
        tx.delete_prefix("b")
        tx.put("b/zarr.json", GROUP)
        tx.put_writer("b/inner", write_data)  # inside a deleted group: its new content
        tx.commit()
    after = _contents(path)
    assert {k for k in after if k.startswith("b/")} == {"b/zarr.json", "b/inner/zarr.json"}
    assert {k: v for k, v in after.items() if not k.startswith("b/")} == {
        k: v for k, v in before.items() if not k.startswith("b/")
    }
    _nothing_beside(tmp_path, path)


def test_a_new_group_is_on_disk_before_the_document_that_lists_it(tmp_path, monkeypatch):
    """Directory: the new group is built beside its place, renamed in, and only then is
    the parent's document replaced."""
    path = _store(tmp_path, ".ome.zarr")
    order: list[str] = []
    real_rename, real_replace = os.rename, os.replace

    def rename(a: Any, b: Any) -> None:
        order.append(Path(b).relative_to(path).as_posix())
        real_rename(a, b)

    def replace(a: Any, b: Any) -> None:
        order.append(Path(b).relative_to(path).as_posix())
        real_replace(a, b)

    with EditTransaction(path) as tx:
        tx.put("a/zarr.json", GROUP)  # the parent group's document, rewritten
        tx.put("a/cells/zarr.json", GROUP)
        tx.put("a/cells/c/0", b"1")
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(os, "replace", replace)
        tx.commit()
    assert [o for o in order if not o.endswith(".partial")] == ["a/cells", "a/zarr.json"]
    assert (path / "a" / "cells" / "c" / "0").read_bytes() == b"1"


@pytest.mark.parametrize("suffix", KINDS)
def test_leaving_without_commit_changes_nothing(tmp_path, suffix):
    path = _store(tmp_path, suffix)
    before = _contents(path)
    inode = path.stat().st_ino
    with EditTransaction(path) as tx:
        tx.put("a/x/c/0/0", b"never")
        tx.delete_prefix("b")
        tx.copy_ahead(["a/x"])  # .ozx: a new archive already being written
    with pytest.raises(RuntimeError), EditTransaction(path) as tx:
        tx.put("a/x/c/0/0", b"never")
        raise RuntimeError("the caller failed")
    assert _contents(path) == before and path.stat().st_ino == inode
    _nothing_beside(tmp_path, path)


@pytest.mark.parametrize("suffix", KINDS)
def test_a_read_only_target_is_refused_and_nothing_is_written(tmp_path, suffix, monkeypatch):
    """(chmod is simulated through ``os.access``: the tests may run as root.)"""
    path = _store(tmp_path, suffix)
    before = _contents(path)
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode: False if Path(p).is_relative_to(path) else real(p, mode),
    )
    with pytest.raises(SaveBackError, match="read-only") as ei, EditTransaction(path) as tx:
        tx.put("new/zarr.json", GROUP)
        tx.put("a/x/c/0/0", b"x")
        tx.commit()
    assert str(path) in str(ei.value) and "nothing was written" in str(ei.value)
    assert _contents(path) == before
    _nothing_beside(tmp_path, path)


@pytest.mark.parametrize("suffix", KINDS)
def test_a_failure_in_the_middle_of_a_commit_leaves_nothing(tmp_path, suffix):
    """A full disk while the new group is written: the store is as it was, no partial
    file or folder is left, and the error is one SaveBackError, reason first."""
    import zarr

    path = _store(tmp_path, suffix)
    before = _contents(path)

    def write_data(store: Any, prefix: str) -> None:
        grp = zarr.open_group(store, mode="a", path=prefix, zarr_format=3)
        grp.create_array("v", shape=(8, 8), chunks=(4, 4), dtype="u1")[:4] = 1
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(SaveBackError, match=r"^No space left") as ei:
        with EditTransaction(path, action="saving a test group into") as tx:
            tx.put("a/x/c/0/0", b"changed")  # a file replaced beside the group
            tx.delete_prefix("b")
            tx.put("b/zarr.json", GROUP)  # a group swapped
            tx.put_writer("g", write_data)
            tx.commit()
    assert f"saving a test group into {path}" in str(ei.value)
    assert _contents(path) == before
    _nothing_beside(tmp_path, path)


def test_a_failure_while_renaming_into_place_undoes_the_groups_placed(tmp_path, monkeypatch):
    """Directory: the new group and the swapped group are already in place when the
    document's rename fails; both are undone, the old group is back, nothing is left."""
    path = _store(tmp_path, ".ome.zarr")
    before = _contents(path)
    real_replace = os.replace

    def replace(a: Any, b: Any) -> None:
        if Path(b).name == "zarr.json":
            raise OSError(errno.EIO, "Input/output error")
        real_replace(a, b)

    with pytest.raises(SaveBackError, match=r"^Input/output error"):
        with EditTransaction(path) as tx:
            tx.put("a/cells/zarr.json", GROUP)  # a new group
            tx.delete_prefix("b")
            tx.put("b/zarr.json", GROUP)  # a group swapped
            tx.put("a/zarr.json", GROUP)  # the document listing them, last
            monkeypatch.setattr(os, "replace", replace)
            tx.commit()
    monkeypatch.setattr(os, "replace", real_replace)
    assert _contents(path) == before
    assert not (path / "a" / "cells").exists()
    _nothing_beside(tmp_path, path)


def test_an_archive_copied_ahead_keeps_every_member_and_refuses_one_it_copied(tmp_path):
    """``.ozx``: members are copied into the new archive while the edit is computed, up
    to the first data member of the groups the edit changes; the rest follow at commit.
    An edit of a member already copied is refused, and nothing is left."""
    path = _store(tmp_path, ".ozx")
    before = _contents(path)
    with EditTransaction(path) as tx:
        tx.copy_ahead(["b/y"])  # a/x's chunks come first in the archive: copied ahead
        tx.put("b/y/c/0", b"new")
        tx.commit()
    assert _contents(path) == {**before, "b/y/c/0": b"new"}
    before = _contents(path)
    with pytest.raises(SaveBackError, match="copied ahead"), EditTransaction(path) as tx:
        tx.copy_ahead(["b/y"])
        tx.put("a/x/c/0/0", b"too late")
        tx.commit()
    assert _contents(path) == before
    _nothing_beside(tmp_path, path)


@pytest.mark.parametrize("suffix", KINDS)
def test_a_file_changed_since_its_fingerprint_is_refused(tmp_path, suffix):
    path = _store(tmp_path, suffix)
    fp = Fingerprint.of(path, ["a/x/zarr.json"])
    assert fp.unchanged()
    if path.is_dir():
        doc = path / "a" / "x" / "zarr.json"
        doc.write_bytes(doc.read_bytes() + b" ")  # another tool rewrote the array
    else:
        os.replace(zip_dir(tmp_path / "unused", tmp_path / "other.ozx"), path)
    before = _contents(path)
    with pytest.raises(SaveBackError, match="changed since it was opened"):
        with EditTransaction(path, expect=fp) as tx:
            tx.put("a/x/c/0/0", b"x")
            tx.commit()
    assert _contents(path) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("unused")) == [
        path.name
    ]
    assert not list(tmp_path.rglob("*.partial"))


def test_keys_outside_the_store_are_refused(tmp_path):
    path = _store(tmp_path, ".ome.zarr")
    with EditTransaction(path) as tx:
        for bad in ("../escape", "/abs", "a//b", "a/./b", "a/"):
            with pytest.raises(SaveBackError.__mro__[1]):  # an OzxError
                tx.put(bad, b"x")


def test_an_archive_saved_over_the_viewed_file_keeps_the_layers_right(tmp_path):
    """The viewer shows the ``.ozx`` being rebuilt: afterwards its layers read the new
    file (the old one is not held) and show the same pixels; its editable labels count as
    opened from the new file, so they save back."""
    pytest.importorskip("napari")
    from napari.layers import Image, Labels

    from napari_ozx.layers.editable import EditableLabels, chunk_reader
    from napari_ozx.layers.saveback import save_labels_back
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    rng = np.random.default_rng(3)
    img = rng.integers(0, 4000, (2, 4, 64, 64), dtype=np.uint16)
    lab = np.zeros((4, 64, 64), np.uint32)
    lab[:, 5:20, 5:30] = 3
    path = tmp_path / "view.ozx"
    spec = ImageSpec(img, layer_axes(["z", "y", "x"], None, 3, True), channels=[])
    labels = LabelsSpec("cells", lab, layer_axes(["z", "y", "x"], None, 3, False))
    write_ome_zarr(path, spec, [labels], WriteOptions(chunk_yx=32, pyramid_levels=2))
    vm = open_in_viewer_model(path)
    image = next(lyr for lyr in vm.layers if isinstance(lyr, Image))  # channel 0
    labels_layer = next(lyr for lyr in vm.layers if isinstance(lyr, Labels))
    assert isinstance(labels_layer.data, EditableLabels)
    old_inode = path.stat().st_ino
    with EditTransaction(path) as tx:
        tx.put("extra/zarr.json", GROUP)
        tx.commit()
    new_inode = path.stat().st_ino
    assert new_inode != old_inode
    level0 = image.data[0] if image.multiscale else image.data
    np.testing.assert_array_equal(np.asarray(level0[1]), img[0, 1])
    store = chunk_reader(level0).array.store_path.store
    assert os.fstat(store.reader.fd).st_ino == new_inode  # the old file is not held
    labels_layer.data[0, 0, 0] = 5
    save_labels_back(labels_layer)  # not refused as "changed since opened"
    with zipfile.ZipFile(path) as zf:
        assert "extra/zarr.json" in zf.namelist()
    np.testing.assert_array_equal(np.asarray(labels_layer.data[0, :2, :2]), [[5, 0], [0, 0]])


def test_a_directory_saved_under_the_viewed_layer_reads_the_saved_pixels(tmp_path):
    """Sharded labels in a directory, read (their shard indexes cached), saved back twice
    into the same shard: each time the layer reads exactly what was saved."""
    pytest.importorskip("napari")
    from napari.layers import Labels

    from napari_ozx.layers.saveback import save_labels_back
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    img = np.zeros((1, 2, 64, 64), np.uint16)
    lab = np.zeros((2, 64, 64), np.uint32)
    lab[:, 5:20, 5:30] = 3
    path = tmp_path / "view.ome.zarr"
    spec = ImageSpec(img, layer_axes(["z", "y", "x"], None, 3, True), channels=[])
    labels = LabelsSpec("cells", lab, layer_axes(["z", "y", "x"], None, 3, False))
    opts = WriteOptions(chunk_yx=16, shard_yx=64, shard_z=2, pyramid_levels=1)
    write_ome_zarr(path, spec, [labels], opts)
    layer = next(lyr for lyr in open_in_viewer_model(path).layers if isinstance(lyr, Labels))
    expected = lab.copy()
    for value, (y, x) in [(7, (40, 50)), (9, (2, 60))]:
        np.testing.assert_array_equal(np.asarray(layer.data[1]), expected[1])
        layer.data[1, y : y + 3, x : x + 3] = value
        expected[1, y : y + 3, x : x + 3] = value
        save_labels_back(layer)
        assert not layer.data.dirty_chunks  # what is shown now comes from the file
        np.testing.assert_array_equal(np.asarray(layer.data[1]), expected[1])
        np.testing.assert_array_equal(np.asarray(layer.data[0]), expected[0])
