"""Copying STORED members between archives without a CRC pass (``OzxWriter.add_copy``,
``stored_extent``): byte-identical members, valid CRCs, and the ``pread``/``pwrite``
fallback writing the same file as ``os.copy_file_range``."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.ozx import writer as writer_mod
from napari_ozx.ozx._zip import FileRangeReader, read_zip_index, stored_extent
from napari_ozx.ozx.validate import validate
from napari_ozx.ozx.writer import OzxWriter

DATE = (2024, 5, 6, 7, 8, 10)
RNG = np.random.default_rng(3)


def _source(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    members = {
        "zarr.json": b'{"zarr_format":3,"node_type":"group","attributes":{}}',
        "a/zarr.json": b'{"zarr_format":3,"node_type":"group","attributes":{}}',
        "a/c/0/0": RNG.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes(),  # > a few MiB
        "a/c/0/1": b"",
        "a/c/1/0": b"x" * 1000,
        "a/\u00e9t\u00e9/c/0": RNG.integers(0, 256, 12345, dtype=np.uint8).tobytes(),
    }
    path = tmp_path / "src.ozx"
    with OzxWriter(path, date_time=DATE) as w:
        for k, v in members.items():
            w.add(k, v)
    return path, members


def _copy_all(src: Path, dst: Path) -> int:
    """Copy every member of *src* into *dst* with add_copy; returns how many were trusted."""
    reader = FileRangeReader(src)
    try:
        index = read_zip_index(reader)
        trusted = 0
        with OzxWriter(dst, date_time=DATE) as w:
            for e in sorted(index.entries, key=lambda e: e.header_offset):
                off = stored_extent(reader, e, limit=index.cd_offset)
                if off is None:
                    w.add(e.name, _read_member(src, e.name))
                    continue
                trusted += 1
                w.add_copy(e.name, reader.fd, off, e.compressed_size, e.crc32)
        return trusted
    finally:
        reader.close()


def _read_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(name)


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # every CRC checks
        return {i.filename: z.read(i.filename) for i in z.infolist()}


@pytest.mark.parametrize("fast", [True, False], ids=["copy_file_range", "pread-pwrite"])
def test_copied_members_are_byte_identical_and_valid(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(
        writer_mod, "_USE_COPY_FILE_RANGE", fast and writer_mod._USE_COPY_FILE_RANGE
    )
    src, members = _source(tmp_path)
    dst = tmp_path / "dst.ozx"
    assert _copy_all(src, dst) == len(members)
    assert _members(dst) == members
    report = validate(dst, deep=True)
    assert report.ok, report
    assert dst.read_bytes() == src.read_bytes()  # same order, same records, same bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.ozx", "src.ozx"]


def test_fallback_writes_the_same_file_as_copy_file_range(tmp_path, monkeypatch):
    if not writer_mod._USE_COPY_FILE_RANGE:
        pytest.skip("os.copy_file_range is not available here")
    src, _ = _source(tmp_path)
    _copy_all(src, tmp_path / "fast.ozx")
    monkeypatch.setattr(writer_mod, "_USE_COPY_FILE_RANGE", False)
    _copy_all(src, tmp_path / "slow.ozx")
    assert (tmp_path / "fast.ozx").read_bytes() == (tmp_path / "slow.ozx").read_bytes()


def test_copy_file_range_refused_by_the_kernel_falls_back(tmp_path, monkeypatch):
    import errno

    def refuse(*a, **k):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(writer_mod, "_USE_COPY_FILE_RANGE", True)
    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    src, members = _source(tmp_path)
    _copy_all(src, tmp_path / "dst.ozx")
    assert _members(tmp_path / "dst.ozx") == members
    assert validate(tmp_path / "dst.ozx", deep=True).ok


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def test_a_member_whose_local_header_disagrees_is_not_trusted(tmp_path):
    src, _ = _source(tmp_path)
    reader = FileRangeReader(src)
    try:
        index = read_zip_index(reader)
        entry = index.by_name["a/c/1/0"]
        assert stored_extent(reader, entry, limit=index.cd_offset) is not None
    finally:
        reader.close()
    _patch(src, entry.header_offset + 14, b"\0\0\0\0")  # local CRC-32 field
    reader = FileRangeReader(src)
    try:
        assert stored_extent(reader, entry, limit=index.cd_offset) is None
        other = index.by_name["a/c/0/1"]
        assert stored_extent(reader, other, limit=index.cd_offset) is not None
    finally:
        reader.close()
    _patch(src, entry.header_offset + 30, b"b")  # local name now "b/c/1/0"
    reader = FileRangeReader(src)
    try:
        assert stored_extent(reader, entry, limit=index.cd_offset) is None
    finally:
        reader.close()


def test_add_copy_keeps_rfc9_order_and_duplicate_checks(tmp_path):
    src, members = _source(tmp_path)
    reader = FileRangeReader(src)
    try:
        index = read_zip_index(reader)
        e = index.by_name["a/c/1/0"]
        off = stored_extent(reader, e, limit=index.cd_offset)
        assert off is not None
        w = OzxWriter(tmp_path / "o.ozx")
        w.add("zarr.json", members["zarr.json"])
        w.add_copy(e.name, reader.fd, off, e.compressed_size, e.crc32)
        with pytest.raises(writer_mod.DuplicateEntryError):
            w.add_copy(e.name, reader.fd, off, e.compressed_size, e.crc32)
        m = index.by_name["a/zarr.json"]
        moff = stored_extent(reader, m, limit=index.cd_offset)
        with pytest.raises(writer_mod.OzxOrderError):
            w.add_copy(m.name, reader.fd, moff, m.compressed_size, m.crc32)
        w.abort()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["src.ozx"]
    finally:
        reader.close()


def test_add_copy_from_a_store_copies_trusted_members_and_declines_others(tmp_path):
    from napari_ozx.ozx.store import OzxStore

    src, members = _source(tmp_path)
    reader = FileRangeReader(src)
    try:
        off = read_zip_index(reader).by_name["a/c/1/0"].header_offset
    finally:
        reader.close()
    _patch(src, off + 14, b"\0\0\0\0")  # this member's local CRC now disagrees
    store = OzxStore(src)
    try:
        with OzxWriter(tmp_path / "o.ozx") as w:
            w.add("zarr.json", members["zarr.json"])
            assert w.add_copy_from(store, "a/c/0/0")
            assert not w.add_copy_from(store, "a/c/1/0")
            assert not w.add_copy_from(store, "no/such/member")
    finally:
        store.close()
    with zipfile.ZipFile(tmp_path / "o.ozx") as z:
        assert z.namelist() == ["zarr.json", "a/c/0/0"]
        assert z.read("a/c/0/0") == members["a/c/0/0"]
        assert z.testzip() is None
