"""Tests for napari_ozx.ozx.writer, .write_store and .records packing: RFC-9 byte layout,
zarr round trips, failure safety."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
import zipfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer.core import default_buffer_prototype
from zarr.core.sync import sync

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ozx.records import (
    pack_central_header,
    pack_eocd,
    pack_local_header,
    pack_zip64_eocd,
    pack_zip64_locator,
)
from napari_ozx.ozx.rfc9 import DEFAULT_COMMENT
from napari_ozx.ozx.write_store import OzxWriteStore
from napari_ozx.ozx.writer import (
    DuplicateEntryError,
    InvalidEntryNameError,
    OzxOrderError,
    OzxWriter,
    WriterClosedError,
)
from tests._support.classic_dask import peer_in_process

OME_COMMENT = {"ome": {"version": "0.5"}}

# ----------------------------------------------------------------------------- raw parser


def _extra_fields(extra: bytes) -> dict[int, bytes]:
    out = {}
    pos = 0
    while pos < len(extra):
        hid, size = struct.unpack_from("<HH", extra, pos)
        out[hid] = extra[pos + 4 : pos + 4 + size]
        pos += 4 + size
    assert pos == len(extra), "extra field overruns"
    return out


def parse_zip(path: Path) -> dict:
    """Parse an archive with struct only; asserts the RFC-9 / ZIP64 structure."""
    raw = Path(path).read_bytes()
    eocd_pos = raw.rfind(b"PK\x05\x06")
    assert eocd_pos >= 0, "no end of central directory record"
    (_, disk, cd_disk, n_disk, n_total, cd_size32, cd_off32, clen) = struct.unpack_from(
        "<IHHHHIIH", raw, eocd_pos
    )
    assert eocd_pos + 22 + clen == len(raw), "bytes after the archive comment"
    comment = raw[eocd_pos + 22 :]
    assert (disk, cd_disk) == (0, 0)

    loc_pos = eocd_pos - 20
    sig, z64_disk, z64_off, n_disks = struct.unpack_from("<IIQI", raw, loc_pos)
    assert sig == 0x07064B50, "no ZIP64 end of central directory locator"
    assert (z64_disk, n_disks) == (0, 1)
    (sig, rec_size, made_by, needed, d1, d2, n1, n2, cd_size, cd_off) = struct.unpack_from(
        "<IQHHIIQQQQ", raw, z64_off
    )
    assert sig == 0x06064B50, "no ZIP64 end of central directory record"
    assert rec_size == 44 and needed >= 45 and (d1, d2) == (0, 0) and n1 == n2
    assert z64_off + 56 == loc_pos, "ZIP64 EOCD record must directly precede the locator"
    assert cd_off + cd_size == z64_off, "central directory must directly precede ZIP64 EOCD"
    # classic record: real value where it fits, else the ZIP64 marker
    assert n_disk == n_total == min(n1, 0xFFFF)
    assert cd_size32 == min(cd_size, 0xFFFFFFFF) and cd_off32 == min(cd_off, 0xFFFFFFFF)

    central = []
    pos = cd_off
    for _ in range(n1):
        fields = struct.unpack_from("<IHHHHHHIIIHHHHHII", raw, pos)
        (
            sig,
            made_by,
            needed,
            flags,
            method,
            _t,
            _d,
            crc,
            csize,
            usize,
            nlen,
            xlen,
            klen,
            disk_start,
            _iattr,
            eattr,
            loff,
        ) = fields
        assert sig == 0x02014B50
        name = raw[pos + 46 : pos + 46 + nlen]
        extras = _extra_fields(raw[pos + 46 + nlen : pos + 46 + nlen + xlen])
        assert 0x0001 in extras, f"no ZIP64 extra in central header of {name!r}"
        assert (csize, usize, loff) == (0xFFFFFFFF,) * 3
        z_usize, z_csize, z_off = struct.unpack("<QQQ", extras[0x0001])
        central.append(
            {
                "name": name.decode("utf-8"),
                "flags": flags,
                "method": method,
                "crc": crc,
                "size": z_usize,
                "csize": z_csize,
                "offset": z_off,
                "needed": needed,
                "made_by": made_by,
                "eattr": eattr,
                "klen": klen,
                "disk_start": disk_start,
            }
        )
        pos += 46 + nlen + xlen + klen
    assert pos == cd_off + cd_size, "central directory size mismatch"

    local = []
    for c in central:
        off = c["offset"]
        fields = struct.unpack_from("<IHHHHHIIIHH", raw, off)
        sig, needed, flags, method, _t, _d, crc, csize, usize, nlen, xlen = fields
        assert sig == 0x04034B50
        name = raw[off + 30 : off + 30 + nlen].decode("utf-8")
        extras = _extra_fields(raw[off + 30 + nlen : off + 30 + nlen + xlen])
        assert 0x0001 in extras, f"no ZIP64 extra in local header of {name!r}"
        assert (csize, usize) == (0xFFFFFFFF, 0xFFFFFFFF)
        z_usize, z_csize = struct.unpack("<QQ", extras[0x0001])
        data_off = off + 30 + nlen + xlen
        local.append(
            {
                "name": name,
                "flags": flags,
                "method": method,
                "crc": crc,
                "size": z_usize,
                "csize": z_csize,
                "offset": off,
                "header_len": 30 + nlen + xlen,
                "data_offset": data_off,
                "needed": needed,
                "data": raw[data_off : data_off + z_csize],
            }
        )
    return {
        "raw": raw,
        "comment": comment,
        "central": central,
        "local": local,
        "cd_off": cd_off,
        "cd_size": cd_size,
        "z64_off": z64_off,
        "eocd_pos": eocd_pos,
    }


def bfs_sorted(names):
    return sorted(names, key=lambda n: (n.count("/"), n.split("/")))


def check_rfc9(path: Path) -> dict:
    """Every structural RFC-9 check on one archive; returns the parsed archive."""
    z = parse_zip(path)
    central, local, raw = z["central"], z["local"], z["raw"]
    names = [c["name"] for c in central]
    assert len(names) == len(set(names)), "duplicate names"
    assert json.loads(z["comment"]) == OME_COMMENT
    for c, lh in zip(central, local, strict=True):
        assert c["name"] == lh["name"]
        assert c["method"] == lh["method"] == 0, "entry not STORED"
        assert not (c["flags"] & 0x8) and not (lh["flags"] & 0x8), "data descriptor flag"
        assert c["flags"] == lh["flags"]
        assert c["needed"] == lh["needed"] == 45
        assert c["made_by"] >> 8 == 3 and (c["made_by"] & 0xFF) >= 45
        assert c["crc"] == lh["crc"]
        assert c["size"] == c["csize"] == lh["size"] == lh["csize"]
        assert c["disk_start"] == 0 and c["klen"] == 0
        assert (c["eattr"] >> 16) & 0o777 == 0o644
        # no data descriptor after the data: next local header or the central directory
        end = lh["data_offset"] + lh["size"]
        assert raw[end : end + 4] in (b"PK\x03\x04", b"PK\x01\x02")
    # zarr.json first, root first, BFS: central directory order ...
    meta = [n for n in names if n.split("/")[-1] == "zarr.json"]
    assert names[: len(meta)] == bfs_sorted(meta)
    assert names[0] == "zarr.json"
    # ... and local order (by header offset)
    by_offset = [lh["name"] for lh in sorted(local, key=lambda e: e["offset"])]
    assert by_offset[: len(meta)] == bfs_sorted(meta)
    # no dead bytes: local records are contiguous from 0 and end at the central directory
    pos = 0
    for lh in sorted(local, key=lambda e: e["offset"]):
        assert lh["offset"] == pos, "gap or overlap between local entries"
        pos = lh["data_offset"] + lh["size"]
    assert pos == z["cd_off"]
    assert len(raw) == pos + z["cd_size"] + 56 + 20 + 22 + len(z["comment"])
    # Python's zipfile agrees, and the CRCs are right
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert zf.namelist() == names
        assert json.loads(zf.comment) == OME_COMMENT
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
    return z


def temp_leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".partial")]


# ----------------------------------------------------------------------------- fixtures


def build_hierarchy(store, rng=None):
    """Root image group (OME-like attrs), arrays 0 and 1, labels group with a labels array.

    Metadata first, then data, as OzxWriteStore requires. Returns {path: ndarray}.
    """
    rng = rng or np.random.default_rng(0)
    root = zarr.create_group(
        store=store,
        attributes={
            "ome": {
                "version": "0.5",
                "multiscales": [
                    {
                        "axes": [
                            {"name": "z", "type": "space"},
                            {"name": "y", "type": "space"},
                            {"name": "x", "type": "space"},
                        ],
                        "datasets": [
                            {
                                "path": "0",
                                "coordinateTransformations": [
                                    {"type": "scale", "scale": [1, 1, 1]}
                                ],
                            },
                            {
                                "path": "1",
                                "coordinateTransformations": [
                                    {"type": "scale", "scale": [1, 2, 2]}
                                ],
                            },
                        ],
                    }
                ],
            }
        },
    )
    zstd = zarr.codecs.ZstdCodec(level=3)
    a0 = root.create_array(
        "0",
        shape=(8, 64, 96),
        dtype="uint16",
        chunks=(1, 16, 32),
        shards=(4, 32, 96),
        compressors=zstd,
        dimension_names=("z", "y", "x"),
    )
    a1 = root.create_array(
        "1",
        shape=(8, 32, 48),
        dtype="uint16",
        chunks=(1, 16, 16),
        shards=(4, 32, 48),
        compressors=zstd,
        dimension_names=("z", "y", "x"),
    )
    labels = root.create_group(
        "labels", attributes={"ome": {"version": "0.5", "labels": ["cells"]}}
    )
    cells = labels.create_group("cells")
    cells.attrs["ome"] = {
        "version": "0.5",
        "image-label": {"colors": []},
        "multiscales": [{"datasets": [{"path": "0"}]}],
    }
    lab = cells.create_array(
        "0",
        shape=(8, 64, 96),
        dtype="uint32",
        chunks=(1, 32, 32),
        shards=(8, 64, 96),
        compressors=zstd,
        fill_value=0,
    )
    src = {
        "0": rng.integers(0, 4000, size=(8, 64, 96), dtype=np.uint16),
        "1": rng.integers(0, 4000, size=(8, 32, 48), dtype=np.uint16),
        "labels/cells/0": np.zeros((8, 64, 96), dtype=np.uint32),
    }
    src["labels/cells/0"][2:5, 10:30, 20:60] = 7
    a0[...] = src["0"]
    a1[...] = src["1"]
    lab[...] = src["labels/cells/0"]
    return src


@pytest.fixture
def hierarchy_ozx(tmp_path):
    path = tmp_path / "image.ozx"
    with OzxWriteStore(path) as store:
        src = build_hierarchy(store)
    return path, src


# ----------------------------------------------------------------------------- byte layout


def test_tiny_archive_has_all_end_records(tmp_path):
    path = tmp_path / "tiny.ozx"
    with OzxWriter(path) as w:
        w.add("zarr.json", b'{"zarr_format":3,"node_type":"group"}')
    z = check_rfc9(path)
    assert [c["name"] for c in z["central"]] == ["zarr.json"]
    assert z["comment"] == DEFAULT_COMMENT
    assert temp_leftovers(tmp_path) == []


def test_hierarchy_layout_is_rfc9(hierarchy_ozx):
    path, _ = hierarchy_ozx
    z = check_rfc9(path)
    names = [c["name"] for c in z["central"]]
    assert names[:5] == [
        "zarr.json",
        "0/zarr.json",
        "1/zarr.json",
        "labels/zarr.json",
        "labels/cells/zarr.json",
    ]
    assert names[5] == "labels/cells/0/zarr.json"
    # one entry per shard, each exactly once
    assert sum(n.startswith("0/c/") for n in names) == 2 * 2
    assert sum(n.startswith("1/c/") for n in names) == 2
    assert sum(n.startswith("labels/cells/0/c/") for n in names) == 1


def test_metadata_buffered_then_written_sorted(tmp_path):
    path = tmp_path / "order.ozx"
    meta = {
        "b/c/zarr.json": b"{}",
        "a/zarr.json": b"{}",
        "zarr.json": b"{}",
        "b/zarr.json": b"{}",
        "a/b/zarr.json": b"{}",
    }
    with OzxWriter(path) as w:
        for k, v in meta.items():
            w.add(k, v)
        w.add("a/zarr.json", b'{"x":1}', overwrite=True)  # allowed while buffered
        w.add("b/c/0", b"data0")
        w.add("a/0", b"data1")
        assert w.metadata_flushed
        assert w.names[:5] == (
            "zarr.json",
            "a/zarr.json",
            "b/zarr.json",
            "a/b/zarr.json",
            "b/c/zarr.json",
        )
    z = check_rfc9(path)
    local = sorted(z["local"], key=lambda e: e["offset"])
    assert [e["name"] for e in local] == [
        "zarr.json",
        "a/zarr.json",
        "b/zarr.json",
        "a/b/zarr.json",
        "b/c/zarr.json",
        "b/c/0",
        "a/0",
    ]
    assert local[1]["data"] == b'{"x":1}'


def test_names_and_listing_while_metadata_buffered(tmp_path):
    path = tmp_path / "flows.ozx"
    with OzxWriteStore(path) as store:
        zarr.open_group(store=store, mode="w", attributes={"a": 1})
        arr = zarr.create_array(
            store=store,
            name="x/0",
            shape=(4,),
            dtype="i4",
            chunks=(2,),
            shards=(4,),
            overwrite=True,
        )  # zarr deletes the prefix first
        assert store.writer.names == ("zarr.json", "x/zarr.json", "x/0/zarr.json")
        assert not store.writer.metadata_flushed
        arr[...] = np.arange(4)
        assert store.writer.names[-1] == "x/0/c/0"
    assert zipfile.ZipFile(path).namelist() == [
        "zarr.json",
        "x/zarr.json",
        "x/0/zarr.json",
        "x/0/c/0",
    ]
    check_rfc9(path)


def test_metadata_flushed_at_commit_without_data(tmp_path):
    path = tmp_path / "meta.ozx"
    with OzxWriter(path) as w:
        w.add_metadata({"x/zarr.json": b"{}", "zarr.json": b"{}"})
        assert not w.metadata_flushed
        assert w.entry_count == 2
    check_rfc9(path)


def test_non_ascii_name_sets_utf8_flag(tmp_path):
    path = tmp_path / "utf8.ozx"
    with OzxWriter(path) as w:
        w.add("zarr.json", b"{}")
        w.add("Zellkern/ä", b"1")
        w.add("plain", b"2")
    z = check_rfc9(path)
    flags = {c["name"]: c["flags"] for c in z["central"]}
    assert flags["Zellkern/ä"] & 0x800
    assert not flags["plain"] & 0x800
    with zipfile.ZipFile(path) as zf:
        assert zf.read("Zellkern/ä") == b"1"


def test_comment_options(tmp_path):
    with OzxWriter(tmp_path / "c1.ozx", comment=None) as w:
        w.add("zarr.json", b"{}")
    assert zipfile.ZipFile(tmp_path / "c1.ozx").comment == b""
    text = '{"ome":{"version":"0.5"},"zipFile":{"centralDirectory":{"jsonFirst":true}}}'
    with OzxWriter(tmp_path / "c2.ozx", comment=text) as w:
        w.add("zarr.json", b"{}")
    assert zipfile.ZipFile(tmp_path / "c2.ozx").comment == text.encode()
    with pytest.raises(ValueError):
        OzxWriter(tmp_path / "c3.ozx", comment=b"x" * 70000)
    with pytest.raises(ValueError):
        OzxWriter(tmp_path / "c4.ozx", comment=b"PK\x05\x06")
    assert temp_leftovers(tmp_path) == []


def test_concurrent_adds_from_many_threads(tmp_path):
    path = tmp_path / "threads.ozx"
    rng = np.random.default_rng(1)
    payloads = {f"d/{i}": rng.bytes(int(rng.integers(0, 50_000))) for i in range(200)}
    progress = []
    with OzxWriter(path, progress=lambda b, n: progress.append((b, n))) as w:
        w.add("zarr.json", b"{}")
        w.add("d/zarr.json", b"{}")
        barrier = threading.Barrier(8)
        items = list(payloads.items())

        def work(part):
            barrier.wait()
            for k, v in part:
                w.add(k, memoryview(v))

        threads = [threading.Thread(target=work, args=(items[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert w.entry_count == 202
    z = check_rfc9(path)
    got = {e["name"]: e["data"] for e in z["local"]}
    for k, v in payloads.items():
        assert got[k] == v
    assert max(n for _, n in progress) == 202
    assert w.bytes_written == path.stat().st_size


# ----------------------------------------------------------------------------- record packing


BIG = 5 * 2**32 + 12345


def test_pack_local_header_zip64_values():
    name = b"0/c/0/0/0"
    rec = pack_local_header(name, 0xDEADBEEF, BIG, flags=0x800, dos_time=1, dos_date=2)
    sig, needed, flags, method, t, d, crc, cs, us, nlen, xlen = struct.unpack_from(
        "<IHHHHHIIIHH", rec
    )
    assert (sig, needed, flags, method, t, d, crc) == (0x04034B50, 45, 0x800, 0, 1, 2, 0xDEADBEEF)
    assert (cs, us) == (0xFFFFFFFF, 0xFFFFFFFF)
    assert rec[30 : 30 + nlen] == name and len(rec) == 30 + nlen + xlen
    extras = _extra_fields(rec[30 + nlen :])
    assert struct.unpack("<QQ", extras[1]) == (BIG, BIG)


def test_pack_central_header_zip64_values():
    name = b"labels/x/c/1/2"
    offset = 7 * 2**32 + 99
    rec = pack_central_header(name, 0x12345678, BIG, offset)
    f = struct.unpack_from("<IHHHHHHIIIHHHHHII", rec)
    assert f[0] == 0x02014B50 and f[2] == 45 and f[4] == 0 and f[7] == 0x12345678
    assert (f[8], f[9], f[16]) == (0xFFFFFFFF,) * 3
    nlen, xlen = f[10], f[11]
    extras = _extra_fields(rec[46 + nlen : 46 + nlen + xlen])
    assert struct.unpack("<QQQ", extras[1]) == (BIG, BIG, offset)


def test_pack_end_records_beyond_4gib():
    cd_off = 6 * 2**32 + 1
    cd_size = 2**32 + 7
    count = 70_000
    z64 = pack_zip64_eocd(count, cd_size, cd_off)
    assert len(z64) == 56
    sig, size, _made, needed, d1, d2, n1, n2, s, o = struct.unpack("<IQHHIIQQQQ", z64)
    assert (sig, size, needed, d1, d2) == (0x06064B50, 44, 45, 0, 0)
    assert (n1, n2, s, o) == (count, count, cd_size, cd_off)
    loc = pack_zip64_locator(cd_off + cd_size)
    assert struct.unpack("<IIQI", loc) == (0x07064B50, 0, cd_off + cd_size, 1)
    eocd = pack_eocd(count, cd_size, cd_off, DEFAULT_COMMENT)
    f = struct.unpack_from("<IHHHHIIH", eocd)
    assert f == (0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(DEFAULT_COMMENT))
    assert eocd[22:] == DEFAULT_COMMENT
    small = struct.unpack_from("<IHHHHIIH", pack_eocd(3, 100, 200))
    assert small == (0x06054B50, 0, 0, 3, 3, 100, 200, 0)


def test_python_zipfile_reads_synthetic_zip64_offsets(tmp_path):
    """Central directory and end records with 64-bit values parse in zipfile (via a sparse
    file: the data lies beyond 4 GiB but only a few bytes are actually written)."""
    path = tmp_path / "sparse.zip"
    name = b"zarr.json"
    data = b"{}"
    offset = 2**32 + 4096
    local = pack_local_header(name, zipfile.crc32(data), len(data))
    cd = pack_central_header(name, zipfile.crc32(data), len(data), offset)
    cd_off = offset + len(local) + len(data)
    tail = cd + pack_zip64_eocd(1, len(cd), cd_off) + pack_zip64_locator(cd_off + len(cd))
    tail += pack_eocd(1, len(cd), cd_off, DEFAULT_COMMENT)
    try:
        with open(path, "wb") as f:
            f.seek(offset)
            f.write(local + data + tail)
    except OSError:  # pragma: no cover - filesystem without sparse files / space
        pytest.skip("cannot create a sparse file beyond 4 GiB here")
    with zipfile.ZipFile(path) as zf:
        (info,) = zf.infolist()
        assert info.header_offset == offset
        assert zf.read("zarr.json") == data
    path.unlink()


# ----------------------------------------------------------------------------- round trips


def test_round_trip_zipstore_and_extracted_dir(hierarchy_ozx, tmp_path):
    path, src = hierarchy_ozx
    store = zarr.storage.ZipStore(path, mode="r")
    root = zarr.open_group(store, mode="r")
    assert root.attrs["ome"]["multiscales"][0]["datasets"][1]["path"] == "1"
    for key, expected in src.items():
        np.testing.assert_array_equal(root[key][...], expected)
    store.close()

    out = tmp_path / "extracted.zarr"
    with zipfile.ZipFile(path) as zf:
        zf.extractall(out)
    root = zarr.open_group(zarr.storage.LocalStore(out, read_only=True), mode="r")
    for key, expected in src.items():
        np.testing.assert_array_equal(root[key][...], expected)
    assert root["labels/cells"].attrs["ome"]["image-label"] == {"colors": []}


def test_dask_store_two_threads_aligned_to_shards(tmp_path):
    path = tmp_path / "dask.ozx"
    rng = np.random.default_rng(3)
    src = rng.integers(0, 2**16, size=(8, 128, 128), dtype=np.uint16)
    src2 = rng.integers(0, 255, size=(8, 128, 128), dtype=np.uint8)
    with OzxWriteStore(path) as store:
        root = zarr.create_group(store=store, attributes={"ome": {"version": "0.5"}})
        arr = root.create_array(
            "0",
            shape=src.shape,
            dtype=src.dtype,
            chunks=(1, 32, 32),
            shards=(2, 64, 64),
            compressors=zarr.codecs.ZstdCodec(),
        )
        arr2 = root.create_array(
            "1",
            shape=src2.shape,
            dtype=src2.dtype,
            chunks=(1, 32, 32),
            shards=(4, 64, 128),
            compressors=zarr.codecs.ZstdCodec(),
        )
        darr = da.from_array(src, chunks=(2, 64, 64))
        peer_in_process("dask's store() and to_zarr() (query planning has neither)")
        with dask.config.set(scheduler="threads", num_workers=2):
            da.store(darr, arr, lock=False)
            da.to_zarr(da.from_array(src2, chunks=(4, 64, 128)), arr2)
    z = check_rfc9(path)
    names = [c["name"] for c in z["central"]]
    assert sum(n.startswith("0/c/") for n in names) == 4 * 2 * 2
    assert sum(n.startswith("1/c/") for n in names) == 2 * 2
    root = zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r")
    np.testing.assert_array_equal(root["0"][...], src)
    np.testing.assert_array_equal(root["1"][...], src2)


def test_all_fill_value_shards_are_skipped(tmp_path):
    path = tmp_path / "empty.ozx"
    with OzxWriteStore(path) as store:
        root = zarr.create_group(store=store)
        arr = root.create_array(
            "0", shape=(4, 32), dtype="uint8", chunks=(1, 16), shards=(2, 32), fill_value=0
        )
        data = np.zeros((4, 32), np.uint8)
        data[3, 5] = 1
        arr[...] = data  # first shard is all fill value: zarr deletes it, never written
    names = zipfile.ZipFile(path).namelist()
    assert names == ["zarr.json", "0/zarr.json", "0/c/1/0"]
    root = zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r")
    np.testing.assert_array_equal(root["0"][...], data)


def test_separate_writes_of_distinct_shards(tmp_path):
    path = tmp_path / "rows.ozx"
    data = np.arange(4 * 32, dtype=np.int32).reshape(4, 32)
    with OzxWriteStore(path) as store:
        arr = zarr.create_array(
            store=store, shape=(4, 32), dtype="int32", chunks=(1, 16), shards=(2, 32)
        )
        arr[0:2] = data[0:2]
        arr[2:4] = data[2:4]
    check_rfc9(path)
    np.testing.assert_array_equal(
        zarr.open_array(zarr.storage.ZipStore(path, mode="r"), mode="r")[...], data
    )


def test_store_reads_back_metadata_and_data(tmp_path):
    path = tmp_path / "readback.ozx"
    store = OzxWriteStore(path)
    proto = default_buffer_prototype()
    buf = proto.buffer.from_bytes
    sync(store.set("zarr.json", buf(b'{"zarr_format":3,"node_type":"group"}')))
    sync(store.set("sub/zarr.json", buf(b"{}")))
    sync(store.set("sub/zarr.json", buf(b'{"a":1}')))  # overwrite while buffered
    sync(store.set("sub/c/0", buf(b"0123456789")))
    assert sync(store.exists("sub/c/0")) and not sync(store.exists("sub/c/1"))
    assert sync(store.get("sub/c/1", proto)) is None
    assert sync(store.get("sub/zarr.json", proto)).to_bytes() == b'{"a":1}'
    get = lambda br: sync(store.get("sub/c/0", proto, br)).to_bytes()  # noqa: E731
    assert get(None) == b"0123456789"
    assert get(RangeByteRequest(2, 5)) == b"234"
    assert get(OffsetByteRequest(7)) == b"789"
    assert get(SuffixByteRequest(3)) == b"789"
    assert sync(store.getsize("sub/c/0")) == 10

    async def collect(it):
        return [x async for x in it]

    assert sorted(sync(collect(store.list()))) == ["sub/c/0", "sub/zarr.json", "zarr.json"]
    assert sorted(sync(collect(store.list_dir("")))) == ["sub", "zarr.json"]
    assert sorted(sync(collect(store.list_dir("sub")))) == ["c", "zarr.json"]
    assert sync(collect(store.list_prefix("sub/c"))) == ["sub/c/0"]
    sync(store.delete("sub/c/never-written"))  # no-op
    # unchanged metadata after data is a no-op; changed metadata is refused
    sync(store.set("sub/zarr.json", buf(b'{"a":1}')))
    with pytest.raises(OzxOrderError):
        sync(store.set("sub/zarr.json", buf(b'{"a":2}')))
    store.close()
    assert store.writer.committed
    assert zipfile.ZipFile(path).read("sub/zarr.json") == b'{"a":1}'


# ----------------------------------------------------------------------------- failures


@pytest.fixture
def existing_target(tmp_path):
    path = tmp_path / "existing.ozx"
    with OzxWriter(path) as w:
        w.add("zarr.json", b'{"old": true}')
        w.add("0/c/0", os.urandom(10_000))
    return path, path.read_bytes()


def test_exception_in_dask_task_leaves_target_intact(existing_target):
    path, before = existing_target
    src = np.arange(8 * 64 * 64, dtype=np.uint16).reshape(8, 64, 64)
    calls = {"n": 0}
    lock = threading.Lock()

    def boom(block):
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 3:
            raise RuntimeError("injected failure")
        return block

    peer_in_process("dask's store() (query planning has none)")
    darr = da.from_array(src, chunks=(2, 64, 64)).map_blocks(boom, dtype=src.dtype)
    with pytest.raises(RuntimeError, match="injected"):
        with OzxWriteStore(path) as store:
            arr = zarr.create_array(
                store=store,
                shape=src.shape,
                dtype=src.dtype,
                chunks=(1, 32, 32),
                shards=(2, 64, 64),
            )
            with dask.config.set(scheduler="threads", num_workers=2):
                da.store(darr, arr, lock=False)
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []
    assert store.writer.aborted


def test_exception_after_n_entries_and_abort(existing_target):
    path, before = existing_target
    with pytest.raises(KeyError):
        with OzxWriter(path) as w:
            w.add("zarr.json", b"{}")
            for i in range(5):
                w.add(f"c/{i}", b"x" * 1000)
            assert temp_leftovers(path.parent) == [w.temp_path.name]
            raise KeyError("stop")
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []

    w = OzxWriter(path)
    w.add("zarr.json", b"{}")
    w.add("c/0", b"abc")
    w.abort()
    w.abort()  # idempotent
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []
    with pytest.raises(WriterClosedError):
        w.add("c/1", b"x")
    with pytest.raises(WriterClosedError):
        w.commit()

    store = OzxWriteStore(path)
    zarr.create_group(store=store)
    store.abort()
    store.close()  # after abort: nothing is committed
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []


def test_progress_callback_can_cancel(existing_target):
    path, before = existing_target

    def progress(nbytes, n):
        if n >= 3:
            raise InterruptedError("cancelled by user")

    with pytest.raises(InterruptedError):
        with OzxWriter(path, progress=progress) as w:
            w.add("zarr.json", b"{}")
            for i in range(10):
                w.add(f"c/{i}", b"y" * 100)
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []


def test_commit_without_root_metadata_refused(existing_target):
    path, before = existing_target
    w = OzxWriter(path)
    w.add("0/zarr.json", b"{}")
    with pytest.raises(MetadataError):
        w.commit()
    assert path.read_bytes() == before
    assert temp_leftovers(path.parent) == []


def test_overwrite_file_being_read(existing_target):
    path, before = existing_target
    with open(path, "rb") as f:
        head = f.read(100)
        with OzxWriteStore(path) as store:
            zarr.create_group(store=store, attributes={"new": True})
        rest = f.read()  # old inode, still readable
        assert head + rest == before
    assert path.read_bytes() != before
    assert zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r").attrs["new"]
    check_rfc9(path)


def test_new_file_has_normal_permissions(tmp_path):
    path = tmp_path / "perm.ozx"
    with OzxWriter(path) as w:
        w.add("zarr.json", b"{}")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "name",
    [
        "",
        "/abs/zarr.json",
        "C:/x",
        "a/../b",
        "../x",
        "./x",
        "a//b",
        "a/",
        "a\\b",
        "nested.ozx",
        "a/b.OZX",
        "nul\x00",
    ],
)
def test_refused_names(tmp_path, name):
    with OzxWriter(tmp_path / "n.ozx") as w:
        w.add("zarr.json", b"{}")
        with pytest.raises(InvalidEntryNameError):
            w.add(name, b"x")
    assert issubclass(InvalidEntryNameError, OzxError)


def test_duplicate_entries_refused(tmp_path):
    with OzxWriter(tmp_path / "dup.ozx") as w:
        w.add("zarr.json", b"{}")
        with pytest.raises(DuplicateEntryError):
            w.add("zarr.json", b"{}")  # buffered, but overwrite not asked for
        w.add("c/0", b"1")
        with pytest.raises(DuplicateEntryError):
            w.add("c/0", b"2")
    assert zipfile.ZipFile(tmp_path / "dup.ozx").namelist() == ["zarr.json", "c/0"]


def test_store_refuses_rewriting_a_shard(tmp_path):
    path = tmp_path / "rewrite.ozx"
    store = OzxWriteStore(path)
    arr = zarr.create_array(
        store=store, shape=(4, 32), dtype="uint8", chunks=(1, 16), shards=(2, 32)
    )
    arr[0:2] = 1
    with pytest.raises(DuplicateEntryError, match="align"):
        arr[0:2] = 2
    with pytest.raises(DuplicateEntryError, match="align"):
        arr[0, 0:16] = 3  # partial shard write: zarr reads the shard back, then rewrites it
    with pytest.raises(DuplicateEntryError):
        arr[0:2] = 0  # all fill value: zarr would delete the written shard
    store.commit()
    names = zipfile.ZipFile(path).namelist()
    assert names.count("c/0/0") == 1
    np.testing.assert_array_equal(
        zarr.open_array(zarr.storage.ZipStore(path, mode="r"), mode="r")[0:2], 1
    )


def test_metadata_after_data_strict_and_lenient(tmp_path):
    with OzxWriter(tmp_path / "strict.ozx") as w:
        w.add("zarr.json", b"{}")
        w.add("a/c/0", b"1")
        with pytest.raises(OzxOrderError):
            w.add("b/zarr.json", b"{}")
        with pytest.raises(OzxOrderError):
            w.discard_metadata("zarr.json")

    store = OzxWriteStore(tmp_path / "strict-store.ozx")
    root = zarr.create_group(store=store)
    a = root.create_array("a", shape=(2,), dtype="uint8", chunks=(2,), shards=(2,))
    a[...] = 1
    with pytest.raises(OzxOrderError):
        root.create_group("late")
    with pytest.raises(OzxOrderError):
        root.attrs["late"] = 1
    store.abort()

    path = tmp_path / "lenient.ozx"
    with OzxWriter(path, strict_order=False) as w:
        w.add("zarr.json", b"{}")
        w.add("a/c/0", b"1")
        w.add("b/zarr.json", b"{}")
        with pytest.raises(DuplicateEntryError):
            w.add("zarr.json", b"{}", overwrite=True)  # already written: never twice
    z = parse_zip(path)
    assert [c["name"] for c in z["central"]] == ["zarr.json", "b/zarr.json", "a/c/0"]
    assert [e["name"] for e in sorted(z["local"], key=lambda e: e["offset"])] == [
        "zarr.json",
        "a/c/0",
        "b/zarr.json",
    ]


def test_store_not_picklable(tmp_path):
    import pickle

    store = OzxWriteStore(tmp_path / "p.ozx")
    with pytest.raises(TypeError):
        pickle.dumps(store)
    store.abort()


# ----------------------------------------------------------------------------- other tools


@pytest.mark.skipif(shutil.which("unzip") is None, reason="unzip not installed")
def test_unzip_accepts(hierarchy_ozx):
    path, _ = hierarchy_ozx
    res = subprocess.run(["unzip", "-t", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No errors detected" in res.stdout
    res = subprocess.run(["unzip", "-l", str(path)], capture_output=True, text=True)
    assert res.returncode == 0 and "zarr.json" in res.stdout


@pytest.mark.skipif(shutil.which("7z") is None, reason="7z not installed")
def test_7z_accepts(hierarchy_ozx):
    path, _ = hierarchy_ozx
    res = subprocess.run(["7z", "t", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Everything is Ok" in res.stdout
