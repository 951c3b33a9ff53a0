"""Tests for the ZIP central-directory reader (napari_ozx.ozx._zip)."""

from __future__ import annotations

import contextlib
import io
import os
import struct
import zipfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from napari_ozx.errors import OzxError, UnsupportedZipFeature, ZipFormatError
from napari_ozx.ozx._zip import (
    TAIL_SIZE,
    FileObjRangeReader,
    FileRangeReader,
    RangeReader,
    ZipEntry,
    data_offset,
    local_header_name,
    open_reader,
    read_zip_index,
)
from napari_ozx.ozx.records import (
    EOCD,
    FLAG_UTF8,
    LOCAL_HEADER,
    METHOD_DEFLATED,
    METHOD_STORED,
    ZIP64_EOCD,
    ZIP64_LOCATOR,
    method_name,
)
from tests._support.zipbuild import build_central_header, build_end_records, build_local_header

# --------------------------------------------------------------------------- helpers


def make_zip(
    members: list[tuple[str, bytes]] | list[tuple[str, bytes, int]],
    *,
    zip64: bool = True,
    comment: bytes = b"",
    cd_order: list[int] | None = None,
    flags: int = FLAG_UTF8,
) -> bytes:
    """A raw archive written with our record builders (ZIP64 everywhere when ``zip64``)."""
    out = bytearray()
    records = []
    for m in members:
        name, data = m[0], m[1]
        method = m[2] if len(m) > 2 else METHOD_STORED  # type: ignore[misc]
        payload = data
        if method == METHOD_DEFLATED:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        crc = zlib.crc32(data)
        offset = len(out)
        nb = name.encode("utf-8") if flags & FLAG_UTF8 else name.encode("cp437")
        out += build_local_header(
            nb, crc32=crc, compressed_size=len(payload), uncompressed_size=len(data),
            method=method, flags=flags, zip64=zip64,
        )  # fmt: skip
        out += payload
        records.append(
            build_central_header(
                nb,
                header_offset=offset,
                crc32=crc,
                compressed_size=len(payload),
                uncompressed_size=len(data),
                method=method,
                flags=flags,
                zip64=zip64,
            )
        )
    order = cd_order if cd_order is not None else range(len(records))
    cd_offset = len(out)
    for i in order:
        out += records[i]
    cd_size = len(out) - cd_offset
    out += build_end_records(
        count=len(records), cd_offset=cd_offset, cd_size=cd_size, comment=comment, zip64=zip64
    )
    return bytes(out)


def pyzip(members, *, compression=zipfile.ZIP_STORED, comment=b"", force_zip64=False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in members:
            with zf.open(name, "w", force_zip64=force_zip64) as f:
                f.write(data)
        zf.comment = comment
    return buf.getvalue()


def index_of(data: bytes, **kw):
    return read_zip_index(FileObjRangeReader(io.BytesIO(data)), **kw)


class CountingReader(RangeReader):
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.calls: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        self.calls.append((offset, length))
        return self.data[offset : offset + length]


def eocd_pos(data: bytes) -> int:
    return data.rindex(b"PK\x05\x06")


def patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


MEMBERS = [
    ("zarr.json", b'{"zarr_format": 3, "node_type": "group"}'),
    ("0/zarr.json", b'{"zarr_format": 3, "node_type": "array"}'),
    ("0/c/0/0", bytes(range(256)) * 40),
    ("0/c/0/1", b"x" * 1000),
    ("empty", b""),
]


# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("force_zip64", [False, True])
def test_matches_zipfile(compression, force_zip64):
    data = pyzip(MEMBERS, compression=compression, comment=b"hello", force_zip64=force_zip64)
    idx = index_of(data)
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    assert [e.name for e in idx.entries] == [i.filename for i in infos]
    assert idx.comment == b"hello"
    assert not idx.zip64  # zipfile writes ZIP64 end records only when it must
    assert idx.duplicates == ()
    assert idx.trailing_bytes == 0
    assert idx.file_size == len(data)
    reader = FileObjRangeReader(io.BytesIO(data))
    for e, info in zip(idx.entries, infos, strict=True):
        assert e.index == infos.index(info)
        assert e.header_offset == info.header_offset
        assert e.method == info.compress_type
        assert e.crc32 == info.CRC
        assert e.compressed_size == info.compress_size
        assert e.uncompressed_size == info.file_size
        assert idx.by_name[e.name] == e  # built on demand: equal, not identical
        off = data_offset(reader, e, limit=idx.cd_offset)
        raw = data[off : off + e.compressed_size]
        if e.method == METHOD_STORED:
            assert raw == dict(MEMBERS)[e.name]
        else:
            assert zlib.decompress(raw, -15) == dict(MEMBERS)[e.name]


def test_own_builder_zip64_everywhere():
    data = make_zip(MEMBERS, comment=b'{"ome": {"version": "0.5"}}')
    idx = index_of(data)
    assert idx.zip64 and idx.zip64_eocd_offset is not None
    assert all(e.zip64_extra for e in idx.entries)
    assert [e.name for e in idx.entries] == [m[0] for m in MEMBERS]
    # zipfile agrees with what our builders wrote
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.testzip() is None
    for name, payload in MEMBERS:
        assert zf.read(name) == payload
    reader = FileObjRangeReader(io.BytesIO(data))
    for e in idx.entries:
        off = data_offset(reader, e)
        assert data[off : off + e.compressed_size] == dict(MEMBERS)[e.name]
        assert local_header_name(reader, e) == e.name.encode()


def test_no_zip64_builder_roundtrip():
    data = make_zip(MEMBERS, zip64=False)
    idx = index_of(data)
    assert not idx.zip64 and not any(e.zip64_extra for e in idx.entries)
    assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None


def test_cd_order_differs_from_local_order():
    data = make_zip(MEMBERS, cd_order=[4, 3, 2, 1, 0])
    idx = index_of(data)
    assert [e.name for e in idx.entries] == [m[0] for m in reversed(MEMBERS)]
    assert [e.index for e in idx.entries] == [0, 1, 2, 3, 4]
    by_offset = sorted(idx.entries, key=lambda e: e.header_offset)
    assert by_offset[0].name == "zarr.json"


def test_empty_archive():
    data = pyzip([])
    idx = index_of(data)
    assert idx.entries == () and len(idx) == 0 and idx.cd_size == 0


def test_zipfile_zip64_end_records_with_many_entries():
    # zipfile switches to ZIP64 end records above 65535 entries
    n = 65536
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(n):
            zf.writestr(f"c/{i}", b"")
    data = buf.getvalue()
    idx = index_of(data)
    assert idx.zip64
    assert len(idx.entries) == n
    # the classic record is saturated: the counts came from the ZIP64 record
    _, _, _, _n_disk, n_total, *_ = EOCD.unpack_from(data, idx.eocd_offset)
    assert n_total == 0xFFFF
    assert idx.entries[-1].name == f"c/{n - 1}"


def test_hand_patched_zip64_counts():
    data = make_zip(MEMBERS)
    idx = index_of(data)
    # the ZIP64 record's counts win over (possibly saturated) classic counts
    zpos = idx.zip64_eocd_offset
    lying = patch(data, zpos + 24, "<Q", 3)  # entries on this disk
    lying = patch(lying, zpos + 32, "<Q", 3)  # entries total
    assert len(index_of(lying).entries) == 3
    too_many = patch(patch(data, zpos + 24, "<Q", 10**6), zpos + 32, "<Q", 10**6)
    with pytest.raises(ZipFormatError, match="claims"):
        index_of(too_many)
    e = idx.eocd_offset
    classic = patch(patch(data, e + 8, "<H", 0xFFFF), e + 10, "<H", 0xFFFF)
    assert len(index_of(classic).entries) == len(MEMBERS)


def test_parse_100k_entries_in_two_reads():
    """A large central directory is read in one request (its speed: benchmarks/)."""
    n = 100_000
    out = bytearray()
    for i in range(n):
        out += build_central_header(
            f"0/c/0/{i // 1000}/{i % 1000}".encode(), header_offset=0, crc32=0,
            compressed_size=0, uncompressed_size=0,
        )  # fmt: skip
    # one local header at 0 that every record points to, then the CD
    local = build_local_header(b"x", crc32=0, compressed_size=0, uncompressed_size=0)
    cd = bytes(out)
    data = local + cd + build_end_records(count=n, cd_offset=len(local), cd_size=len(cd))
    reader = CountingReader(data)
    idx = read_zip_index(reader)
    assert len(idx.entries) == n
    assert idx.entries[-1].name == "0/c/0/99/999"
    assert len(reader.calls) == 2  # tail + exactly one read of the central directory


def test_single_read_when_cd_in_tail():
    data = make_zip(MEMBERS)
    reader = CountingReader(data)
    read_zip_index(reader)
    assert reader.calls == [(0, len(data))]


def test_tail_read_once_for_large_file():
    big = os.urandom(TAIL_SIZE * 3)
    data = make_zip([("zarr.json", b"{}"), ("big", big)], comment=b"c" * 1000)
    reader = CountingReader(data)
    idx = read_zip_index(reader)
    assert reader.calls == [(len(data) - TAIL_SIZE, TAIL_SIZE)]
    assert idx.comment == b"c" * 1000


def test_comment_containing_eocd_signature():
    comment = b"junk PK\x05\x06 more junk" + b"\x00" * 30
    data = make_zip(MEMBERS, comment=comment)
    idx = index_of(data)
    assert idx.comment == comment
    assert len(idx.entries) == len(MEMBERS)


def test_max_comment():
    comment = b"z" * 0xFFFF
    idx = index_of(make_zip(MEMBERS, comment=comment))
    assert idx.comment == comment


def test_trailing_bytes_tolerated():
    data = make_zip(MEMBERS) + b"garbage after the archive"
    idx = index_of(data)
    assert idx.trailing_bytes == len(b"garbage after the archive")
    assert len(idx.entries) == len(MEMBERS)


def test_duplicates_last_wins():
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = pyzip([("a", b"old"), ("b", b"1"), ("a", b"new")])
    idx = index_of(data)
    assert idx.duplicates == ("a",)
    assert len(idx.entries) == 3
    assert idx.by_name["a"].index == 2
    assert len(idx.by_name) == 2


def test_cp437_and_utf8_names():
    data = make_zip([("\u00fc.txt", b"1")], flags=0)  # cp437 0x81
    assert index_of(data).entries[0].name == "\u00fc.txt"
    data = make_zip([("\u00e9\u6f22.json", b"1")], flags=FLAG_UTF8)
    e = index_of(data).entries[0]
    assert e.name == "\u00e9\u6f22.json" and e.utf8
    bad = make_zip([("\u00e9", b"1")], flags=FLAG_UTF8)
    bad = bad.replace("\u00e9".encode(), b"\xff\xfe")
    with pytest.raises(ZipFormatError, match="UTF-8"):
        index_of(bad)


def test_entry_properties_and_method_name():
    e = ZipEntry("a/", 0, 0, 0, 0x0809, 0, 0, 0, False, b"")
    assert e.is_dir and e.is_encrypted and e.has_data_descriptor and e.utf8
    assert method_name(8) == "deflated (method 8)"
    assert method_name(12) == "bzip2 (method 12)"
    assert method_name(77) == "method 77"


def test_sparse_file_64bit_offsets(tmp_path):
    """A member beyond 4 GiB: offsets only fit the ZIP64 extra fields (sparse file)."""
    path = tmp_path / "sparse.ozx"
    far = 5 * 2**30
    payload = b"beyond four gibibytes"
    local0 = build_local_header(b"zarr.json", crc32=zlib.crc32(b"{}"), compressed_size=2,
                                uncompressed_size=2)  # fmt: skip
    try:
        with open(path, "wb") as f:
            f.write(local0 + b"{}")
            f.seek(far)
            f.write(build_local_header(b"far", crc32=zlib.crc32(payload),
                                       compressed_size=len(payload),
                                       uncompressed_size=len(payload)))  # fmt: skip
            f.write(payload)
            cd_offset = f.tell()
            cd = build_central_header(b"zarr.json", header_offset=0, crc32=zlib.crc32(b"{}"),
                                      compressed_size=2, uncompressed_size=2)  # fmt: skip
            cd += build_central_header(b"far", header_offset=far, crc32=zlib.crc32(payload),
                                       compressed_size=len(payload),
                                       uncompressed_size=len(payload))  # fmt: skip
            f.write(cd)
            f.write(build_end_records(count=2, cd_offset=cd_offset, cd_size=len(cd)))
    except OSError as exc:  # pragma: no cover - file system without sparse files
        pytest.skip(f"cannot create a sparse 5 GiB file: {exc}")
    with FileRangeReader(path) as reader:
        idx = read_zip_index(reader)
        e = idx.by_name["far"]
        assert e.header_offset == far and e.zip64_extra
        off = data_offset(reader, e, limit=idx.cd_offset)
        assert reader.read(off, e.compressed_size) == payload
        assert idx.cd_offset > 2**32
    assert zipfile.ZipFile(path).read("far") == payload


# --------------------------------------------------------------------------- readers


def test_file_range_reader(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"0123456789")
    r = FileRangeReader(p)
    assert r.size == 10 and not r.closed
    assert r.read(2, 3) == b"234"
    assert r.read(10, 0) == b""
    with pytest.raises(ZipFormatError, match="unexpected end of file"):
        r.read(8, 3)
    with pytest.raises(ValueError):
        r.read(-1, 2)
    assert "FileRangeReader" in repr(r)
    r.close()
    r.close()
    assert r.closed
    with pytest.raises(ValueError, match="closed"):
        r.read(0, 1)


def test_file_range_reader_rejects_directory(tmp_path):
    with pytest.raises(ZipFormatError, match="not a regular file"):
        FileRangeReader(tmp_path)


def test_file_range_reader_huge_length_does_not_allocate(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"abc")
    with FileRangeReader(p) as r, pytest.raises(ZipFormatError):
        r.read(0, 2**62)


class Dribble(io.RawIOBase):
    """A file-like object that returns at most 3 bytes per read."""

    def __init__(self, data: bytes) -> None:
        self._b = io.BytesIO(data)

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        return self._b.seek(pos, whence)

    def tell(self):
        return self._b.tell()

    def read(self, n=-1):
        return self._b.read(min(n, 3) if n >= 0 else 3)


def test_fileobj_reader_short_reads():
    data = make_zip(MEMBERS)
    r = FileObjRangeReader(Dribble(data))
    assert r.read(5, 20) == data[5:25]
    idx = read_zip_index(r)
    assert len(idx.entries) == len(MEMBERS)
    f = io.BytesIO(data)
    r2 = FileObjRangeReader(f)
    r2.close()
    assert not f.closed
    with pytest.raises(ValueError, match="closed"):
        r2.read(0, 1)
    r3 = FileObjRangeReader(f, close_file=True)
    r3.close()
    assert f.closed


def test_open_reader(tmp_path):
    p = tmp_path / "a.zip"
    p.write_bytes(make_zip(MEMBERS))
    r, owned = open_reader(p)
    assert isinstance(r, FileRangeReader) and owned
    r.close()
    r2, owned2 = open_reader(io.BytesIO(b"abc"))
    assert isinstance(r2, FileObjRangeReader) and owned2
    assert open_reader(r2) == (r2, False)
    with pytest.raises(TypeError):
        open_reader(42)
    with pytest.raises(TypeError):
        FileObjRangeReader(42)


# --------------------------------------------------------------------------- hostile files


def small_zip() -> bytes:
    return make_zip([("zarr.json", b"{}"), ("a/b", b"hello world")], comment=b"hi")


def test_truncation_at_every_offset():
    data = small_zip()
    for cut in range(len(data)):
        with pytest.raises(ZipFormatError):
            index_of(data[:cut])


def test_truncation_every_offset_zipfile_made():
    data = pyzip(MEMBERS[:3], comment=b"c")
    for cut in range(len(data)):
        with pytest.raises(ZipFormatError):
            index_of(data[:cut])


def test_truncated_file_on_disk(tmp_path):
    p = tmp_path / "t.ozx"
    p.write_bytes(small_zip()[:-7])
    with FileRangeReader(p) as r, pytest.raises(ZipFormatError):
        read_zip_index(r)


def test_not_a_zip():
    with pytest.raises(ZipFormatError, match="end of central directory"):
        index_of(b"\x89HDF\r\n" + b"\0" * 500)
    with pytest.raises(ZipFormatError, match="only"):
        index_of(b"PK")


def test_corrupt_cd_offset_and_size():
    data = make_zip(MEMBERS, zip64=False)
    e = eocd_pos(data)
    with pytest.raises(ZipFormatError):
        index_of(patch(data, e + 16, "<I", len(data) + 100))  # offset beyond file
    with pytest.raises(ZipFormatError):
        index_of(patch(data, e + 12, "<I", 0x7FFFFFFF))  # size beyond file
    with pytest.raises(ZipFormatError):
        index_of(patch(data, e + 16, "<I", 3))  # offset pointing into data
    with pytest.raises(ZipFormatError):
        index_of(patch(data, e + 16, "<I", 0xFFFFFFFF))  # saturated, no ZIP64


def test_corrupt_zip64_records():
    data = make_zip(MEMBERS)
    idx = index_of(data)
    loc = idx.eocd_offset - ZIP64_LOCATOR.size
    z = idx.zip64_eocd_offset
    with pytest.raises(ZipFormatError):
        index_of(patch(data, loc + 8, "<Q", 2**63))  # ZIP64 EOCD offset out of range
    with pytest.raises(ZipFormatError):
        index_of(patch(data, loc + 8, "<Q", 0))  # points at a local header
    with pytest.raises(ZipFormatError):
        index_of(patch(data, z + 48, "<Q", 2**64 - 1))  # cd offset
    with pytest.raises(ZipFormatError):
        index_of(patch(data, z + 40, "<Q", 2**60))  # cd size
    with pytest.raises(ZipFormatError):
        index_of(patch(data, z + 4, "<Q", 2**40))  # record size
    with pytest.raises(ZipFormatError):
        index_of(patch(data, z, "<I", 0x12345678))  # signature


def test_zip64_extra_out_of_range_and_short():
    data = make_zip(MEMBERS)
    idx = index_of(data)
    cd = data[idx.cd_offset :]
    # first central record: its ZIP64 extra starts right after the name
    name_len = len(idx.entries[0].name)
    extra_at = idx.cd_offset + 46 + name_len
    assert cd[46 + name_len : 46 + name_len + 2] == b"\x01\x00"
    # header offset (3rd value) far beyond the central directory
    with pytest.raises(ZipFormatError):
        index_of(patch(data, extra_at + 4 + 16, "<Q", 2**62))
    # compressed size huge
    with pytest.raises(ZipFormatError):
        index_of(patch(data, extra_at + 4 + 8, "<Q", 2**62))
    # extra field declares fewer bytes than the saturated fields need
    short = patch(data, extra_at + 2, "<H", 8)
    with pytest.raises(ZipFormatError):
        index_of(short)
    # extra field length runs past the record's extra area
    with pytest.raises(ZipFormatError):
        index_of(patch(data, extra_at + 2, "<H", 0xFFF0))


def test_bad_central_signature_and_count():
    data = make_zip(MEMBERS, zip64=False)
    idx = index_of(data)
    with pytest.raises(ZipFormatError, match="signature"):
        index_of(patch(data, idx.cd_offset, "<I", 0))
    e = eocd_pos(data)
    with pytest.raises(ZipFormatError):
        index_of(patch(patch(data, e + 8, "<H", 900), e + 10, "<H", 900))
    # a name length that runs past the directory
    with pytest.raises(ZipFormatError):
        index_of(patch(data, idx.cd_offset + 28, "<H", 60000))


@pytest.mark.parametrize(
    ("field", "value"),
    [(4, 1), (6, 1)],  # this disk number, disk with the central directory
)
def test_multi_disk_classic(field, value):
    data = make_zip(MEMBERS, zip64=False)
    bad = patch(data, eocd_pos(data) + field, "<H", value)
    with pytest.raises(UnsupportedZipFeature, match="multi-part"):
        index_of(bad)
    idx = index_of(bad, allow_multi_part=True)
    assert idx.multi_part


def test_multi_disk_counts_differ():
    data = make_zip(MEMBERS, zip64=False)
    bad = patch(data, eocd_pos(data) + 8, "<H", 2)  # entries on this disk != total
    with pytest.raises(UnsupportedZipFeature, match="multi-part"):
        index_of(bad)


def test_multi_disk_zip64_locator_and_record():
    data = make_zip(MEMBERS)
    idx = index_of(data)
    loc = idx.eocd_offset - ZIP64_LOCATOR.size
    with pytest.raises(UnsupportedZipFeature, match="multi-part"):
        index_of(patch(data, loc + 16, "<I", 3))  # total disks
    with pytest.raises(UnsupportedZipFeature, match="multi-part"):
        index_of(patch(data, idx.zip64_eocd_offset + 16, "<I", 1))  # this disk
    assert index_of(patch(data, loc + 16, "<I", 3), allow_multi_part=True).multi_part


def test_multi_disk_entry_start():
    data = make_zip(MEMBERS, zip64=False)
    idx = index_of(data)
    bad = patch(data, idx.cd_offset + 34, "<H", 2)  # disk number start of entry 0
    with pytest.raises(UnsupportedZipFeature, match="multi-part"):
        index_of(bad)
    assert index_of(bad, allow_multi_part=True).multi_part


def test_data_offset_errors():
    data = make_zip(MEMBERS, zip64=False)
    idx = index_of(data)
    e = idx.by_name["0/c/0/0"]
    bad = patch(data, e.header_offset, "<I", 0)
    with pytest.raises(ZipFormatError, match="local file header"):
        data_offset(FileObjRangeReader(io.BytesIO(bad)), e)
    bad = patch(data, e.header_offset + 8, "<H", 8)  # method in local header
    with pytest.raises(ZipFormatError, match="local header says"):
        data_offset(FileObjRangeReader(io.BytesIO(bad)), e)
    bad = patch(data, e.header_offset + 28, "<H", 0xFFFF)  # local extra length huge
    with pytest.raises(ZipFormatError, match="runs past"):
        data_offset(FileObjRangeReader(io.BytesIO(bad)), e, limit=idx.cd_offset)
    with pytest.raises(ZipFormatError):
        local_header_name(FileObjRangeReader(io.BytesIO(patch(data, e.header_offset, "<I", 0))), e)


def test_local_header_may_differ_from_central():
    """Local name/extra lengths differ from the central directory's: data offset follows
    the local header."""
    name = b"zarr.json"
    payload = b'{"a": 1}'
    local = LOCAL_HEADER.pack(b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(payload),
                              len(payload), len(payload), len(name), 7)  # fmt: skip
    local += name + b"\xfe\xca\x03\x00abc" + payload
    cd = build_central_header(name, header_offset=0, crc32=zlib.crc32(payload),
                              compressed_size=len(payload), uncompressed_size=len(payload),
                              flags=0, zip64=False)  # fmt: skip
    data = local + cd + build_end_records(count=1, cd_offset=len(local), cd_size=len(cd),
                                          zip64=False)  # fmt: skip
    idx = index_of(data)
    reader = FileObjRangeReader(io.BytesIO(data))
    off = data_offset(reader, idx.entries[0])
    assert data[off : off + len(payload)] == payload


def test_builders_reject_oversize():
    with pytest.raises(ValueError):
        build_local_header(b"a", crc32=0, compressed_size=2**33, uncompressed_size=0, zip64=False)
    with pytest.raises(ValueError):
        build_central_header(b"a", header_offset=2**33, crc32=0, compressed_size=0,
                             uncompressed_size=0, zip64=False)  # fmt: skip
    with pytest.raises(ValueError):
        build_end_records(count=70000, cd_offset=0, cd_size=0, zip64=False)
    with pytest.raises(ValueError):
        build_end_records(count=1, cd_offset=0, cd_size=0, comment=b"x" * 70000)
    assert len(build_end_records(count=0, cd_offset=0, cd_size=0)) == (
        ZIP64_EOCD.size + ZIP64_LOCATOR.size + EOCD.size
    )


# --------------------------------------------------------------------------- fuzzing

_SEED_ZIPS = [
    small_zip(),
    make_zip(MEMBERS[:3], zip64=False, comment=b"{}"),
    pyzip(MEMBERS[:3], compression=zipfile.ZIP_DEFLATED, force_zip64=True),
]


@st.composite
def mutated_zip(draw):
    data = bytearray(draw(st.sampled_from(_SEED_ZIPS)))
    n_mut = draw(st.integers(1, 8))
    for _ in range(n_mut):
        kind = draw(st.sampled_from(["byte", "u16", "u32", "u64", "cut"]))
        # bias mutations towards the end records and the central directory
        lo = draw(st.sampled_from([0, max(0, len(data) - 200)]))
        if len(data) == 0:
            break
        pos = draw(st.integers(lo, len(data) - 1))
        if kind == "byte":
            data[pos] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[pos:]
        else:
            width = {"u16": 2, "u32": 4, "u64": 8}[kind]
            value = draw(st.sampled_from([0, 1, 0xFF, 0xFFFF, 0xFFFFFFFF, 2**63, 2**64 - 1]))
            value &= (1 << (8 * width)) - 1
            chunk = value.to_bytes(width, "little")
            data[pos : pos + width] = chunk[: len(data) - pos]
    return bytes(data)


@settings(max_examples=400, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_zip())
def test_fuzz_mutations_never_crash(data):
    reader = FileObjRangeReader(io.BytesIO(data))
    try:
        idx = read_zip_index(reader)
    except OzxError:
        return
    for entry in idx.entries:
        try:
            off = data_offset(reader, entry, limit=idx.cd_offset)
        except OzxError:
            continue
        assert off + entry.compressed_size <= idx.cd_offset


@settings(max_examples=200, deadline=500)
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    with contextlib.suppress(OzxError):
        read_zip_index(FileObjRangeReader(io.BytesIO(data)))


# ---- compact index: the same answers as a dict of entries, without one object per entry


def _reference(data: bytes) -> tuple[list[tuple], dict[str, int]]:
    """What zipfile sees: records in order, name -> position of the last record."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
    recs = [(i.filename, i.header_offset, i.CRC, i.compress_size, i.file_size) for i in infos]
    last = {}
    for k, r in enumerate(recs):
        last[r[0]] = k
    return recs, last


@pytest.mark.parametrize("zip64", [True, False])
def test_compact_index_matches_zipfile_on_many_entries(zip64):
    members = [(f"0/c/{i // 100}/{i % 100}", bytes([i % 251]) * (i % 7)) for i in range(5000)]
    members += [("0/c/0/3", b"rewritten"), ("0/c/10/10", b"again")]  # duplicates: last wins
    data = make_zip(members, zip64=zip64)
    idx = index_of(data)
    recs, last = _reference(data)
    assert len(idx.entries) == len(recs) == 5002
    got = [
        (e.name, e.header_offset, e.crc32, e.compressed_size, e.uncompressed_size)
        for e in idx.entries
    ]
    assert got == recs
    assert idx.entries[-1].name == "0/c/10/10" and idx.entries[-1].index == 5001
    assert idx.entries[-5002] == idx.entries[0]
    with pytest.raises(IndexError):
        idx.entries[5002]
    assert [e.index for e in idx.entries[10:13]] == [10, 11, 12]
    assert len(idx.by_name) == len(last) == 5000
    assert list(idx.by_name) == list(last)  # first-seen order, like a dict
    for name, k in last.items():
        assert idx.by_name[name].index == k
    assert idx.by_name["0/c/0/3"].uncompressed_size == len(b"rewritten")
    assert idx.duplicates == ("0/c/0/3", "0/c/10/10")
    assert "0/c/50/100" not in idx.by_name and idx.get("nope") is None
    with pytest.raises(KeyError):
        idx.by_name["0/c/0/3/"]
    assert all(e.zip64_extra == zip64 for e in idx.entries[:50])


def test_compact_index_non_ascii_and_colliding_names():
    long_a = "A" * 64 + "x"  # the name hash covers 64 bytes + the length: these collide
    long_b = "A" * 64 + "y"
    members = [("zarr.json", b"{}"), (long_a, b"a"), (long_b, b"b"), ("ü/zarr.json", b"u")]
    members += [(long_a, b"a2")]
    for data in (make_zip(members), make_zip(members, flags=0)):
        idx = index_of(data)
        assert idx.by_name[long_a].index == 4 and idx.by_name[long_b].index == 2
        assert idx.duplicates == (long_a,)
        assert len(idx.by_name) == 4
    # without the UTF-8 flag a name is cp437, as zipfile reads it
    idx = index_of(make_zip(members, flags=0))
    _recs, last = _reference(make_zip(members, flags=0))
    assert set(idx.by_name) == set(last)


def test_compact_index_is_compact():
    from napari_ozx.ozx._zip import _EntrySequence

    members = [(f"0/c/{i // 100}/{i % 100}", b"x") for i in range(20000)]
    idx = index_of(make_zip(members))
    assert isinstance(idx.entries, _EntrySequence)
    table = idx.entries._table
    assert table.nbytes < 100 * len(members)  # bytes per entry, names included
