"""Tests for the RFC-9 validator (napari_ozx.ozx.validate)."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import ZstdCodec

from napari_ozx.errors import OzxError, ZipFormatError
from napari_ozx.ozx._zip import FileObjRangeReader, read_zip_index
from napari_ozx.ozx.records import FLAG_UTF8, METHOD_DEFLATED, METHOD_STORED
from napari_ozx.ozx.store import OzxStore
from napari_ozx.ozx.validate import MAX_PER_CODE, RULES, ValidationReport, validate
from tests._support.zipbuild import (
    build_central_header,
    build_end_records,
    build_local_header,
    central_record_offset,
)

OME_COMMENT = b'{"ome": {"version": "0.5"}}'


def jdump(doc) -> bytes:
    return json.dumps(doc).encode()


def group_doc(ome: dict | None = None) -> bytes:
    doc: dict = {"zarr_format": 3, "node_type": "group", "attributes": {}}
    if ome is not None:
        doc["attributes"]["ome"] = ome
    return jdump(doc)


def array_doc(sharded: bool = True) -> bytes:
    inner = [{"name": "bytes", "configuration": {"endian": "little"}}]
    codecs = (
        [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2], "codecs": inner,
            "index_codecs": [*inner, {"name": "crc32c"}], "index_location": "end"}}]
        if sharded else inner
    )  # fmt: skip
    return jdump({
        "zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": codecs,
    })  # fmt: skip


ROOT = group_doc({"version": "0.5", "multiscales": [{"datasets": [{"path": "0"}]}]})


def good_members() -> list[tuple[str, bytes]]:
    """A tiny conformant hierarchy, zarr.json first in breadth-first order."""
    return [
        ("zarr.json", ROOT),
        ("0/zarr.json", array_doc()),
        ("labels/zarr.json", group_doc({"version": "0.5", "labels": ["cells"]})),
        ("labels/cells/zarr.json", array_doc()),
        ("0/c/0/0", bytes(range(16)) + b"\x00" * 40),
        ("labels/cells/c/0/0", b"\x01" * 56),
    ]


def make_zip(
    members,
    *,
    zip64: bool = True,
    comment: bytes = OME_COMMENT,
    cd_order: list[int] | None = None,
) -> bytes:
    """Raw archive via our record builders: ZIP64 end records always, like RFC-9 asks."""
    out = bytearray()
    records = []
    for m in members:
        name, data = m[0], m[1]
        method = m[2] if len(m) > 2 else METHOD_STORED
        payload = data
        if method == METHOD_DEFLATED:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        crc = zlib.crc32(data)
        offset = len(out)
        nb = name.encode()
        out += build_local_header(nb, crc32=crc, compressed_size=len(payload),
                                  uncompressed_size=len(data), method=method,
                                  zip64=zip64)  # fmt: skip
        out += payload
        records.append(build_central_header(nb, header_offset=offset, crc32=crc,
                                            compressed_size=len(payload),
                                            uncompressed_size=len(data), method=method,
                                            zip64=zip64))  # fmt: skip
    cd_offset = len(out)
    for i in cd_order if cd_order is not None else range(len(records)):
        out += records[i]
    out += build_end_records(count=len(records), cd_offset=cd_offset,
                             cd_size=len(out) - cd_offset, comment=comment,
                             zip64=zip64)  # fmt: skip
    return bytes(out)


def pyzip_conformant(path, members, comment=OME_COMMENT) -> None:
    """Best effort with Python's zipfile: force_zip64 members, correct order, comment."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members:
            with zf.open(name, "w", force_zip64=True) as f:
                f.write(data)
        zf.comment = comment


def check(data: bytes, **kw) -> ValidationReport:
    return validate(io.BytesIO(data), **kw)


def problems(report: ValidationReport) -> set[str]:
    return {f.code for f in report.findings if f.severity != "info"}


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


# --------------------------------------------------------------------------- conforming


def test_conformant_archive_has_no_findings(tmp_path):
    path = tmp_path / "good.ozx"
    path.write_bytes(make_zip(good_members()))
    report = validate(path)
    assert report.ok
    assert problems(report) == set(), [str(f) for f in report.findings]
    assert report.codes == {"summary"}
    summary = report.by_code("summary")[0]
    assert "2 groups, 2 arrays" in summary.message and "0.5" in summary.message
    # JSON round trip
    d = json.loads(json.dumps(report.to_dict()))
    assert d["ok"] is True and d["counts"] == {"error": 0, "warning": 0, "info": 1}
    assert d["source"] == str(path)
    assert "OK" in str(report)


def test_zipfile_made_archive_only_lacks_zip64_end_records(tmp_path):
    path = tmp_path / "py.ozx"
    pyzip_conformant(path, good_members())
    report = validate(path)
    assert report.ok
    assert problems(report) == {"zip64-missing"}
    (f,) = report.by_code("zip64-missing")
    assert f.severity == "warning" and f.rule == RULES["zip64-missing"][1]
    assert "ZIP64" in f.rule and "SHOULD" in f.rule


def test_zarr_written_hierarchy_zipped_conformantly(tmp_path):
    d = tmp_path / "img.zarr"
    root = zarr.open_group(zarr.storage.LocalStore(d), mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5"}
    a = root.create_array("0", shape=(4, 64, 64), dtype="uint16", shards=(2, 64, 64),
                          chunks=(1, 32, 32), compressors=ZstdCodec(level=1))  # fmt: skip
    a[:] = np.arange(a.size, dtype="uint16").reshape(a.shape)
    files = sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
    meta = sorted((f for f in files if f.endswith("zarr.json")), key=lambda f: (f.count("/"), f))
    members = [(f, (d / f).read_bytes()) for f in meta + [f for f in files if f not in meta]]
    path = tmp_path / "img.ozx"
    path.write_bytes(make_zip(members))
    report = validate(path, deep=True)
    assert problems(report) == set(), [str(f) for f in report.findings]
    with OzxStore(path) as store:  # and it reads
        np.testing.assert_array_equal(zarr.open_array(store=store, path="0", mode="r")[:], a[:])
        assert problems(validate(store)) == set()  # an OzxStore is a valid source


def test_every_finding_quotes_a_rule():
    data = make_zip([("a/zarr.json", b"{"), ("../x", b"1")], comment=b"")
    report = check(data)
    assert not report.ok
    for f in report.findings:
        assert f.rule, f
        assert f.code in RULES and RULES[f.code][0] == f.severity


# --------------------------------------------------------------------------- MUSTs


def test_root_zarr_json_missing_with_hint():
    members = [("image.zarr/zarr.json", ROOT), ("image.zarr/0/zarr.json", array_doc())]
    report = check(make_zip(members))
    assert not report.ok
    (f,) = report.by_code("root-zarr-json-missing")
    assert "image.zarr/zarr.json" in f.message and f.severity == "error"
    assert "MUST contain" in f.rule


def test_root_zarr_json_missing_plain():
    report = check(make_zip([("data.bin", b"123")]))
    assert "root-zarr-json-missing" in report.codes


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", jdump({"zarr_format": 2, "node_type": "group"}),
     jdump({"zarr_format": 3, "node_type": "folder"}), b"\xff\xfe"],
)  # fmt: skip
def test_root_zarr_json_invalid(content):
    report = check(make_zip([("zarr.json", content)]))
    assert "root-zarr-json-invalid" in report.codes
    assert not report.ok


def test_nested_zarr_json_invalid():
    report = check(make_zip([("zarr.json", ROOT), ("0/zarr.json", b"{oops")]))
    assert "zarr-json-invalid" in report.codes
    assert report.by_code("zarr-json-invalid")[0].member == "0/zarr.json"


def test_nested_archive_by_name_and_content():
    inner = make_zip(good_members())
    members = [*good_members(), ("extra/inner.ozx", b"whatever"), ("blob", inner)]
    report = check(make_zip(members))
    found = {f.member for f in report.by_code("nested-archive")}
    assert found == {"extra/inner.ozx", "blob"}
    assert not report.ok
    # a deflated nested zip is found too
    report = check(make_zip([*good_members(), ("blob2", inner, METHOD_DEFLATED)]))
    assert {f.member for f in report.by_code("nested-archive")} == {"blob2"}


def test_disconnected_nodes():
    members = [("zarr.json", ROOT), ("a/b/zarr.json", group_doc())]
    report = check(make_zip(members))
    (f,) = report.by_code("disconnected-node")
    assert f.member == "a/b/zarr.json" and "exactly one" in f.rule
    members = [("zarr.json", ROOT), ("0/zarr.json", array_doc()), ("0/x/zarr.json", group_doc())]
    report = check(make_zip(members))
    assert "inside array" in report.by_code("disconnected-node")[0].message


def test_multi_part_is_a_finding_not_an_exception():
    data = make_zip(good_members())
    idx = read_zip_index(FileObjRangeReader(io.BytesIO(data)))
    loc = idx.eocd_offset - 20
    report = check(patched(data, loc + 16, "<I", 2))
    assert "multi-part" in report.codes and not report.ok
    assert "SHALL NOT be split" in report.by_code("multi-part")[0].rule


def test_unparseable_raises():
    with pytest.raises(ZipFormatError):
        check(b"definitely not a zip file" * 10)
    with pytest.raises(ZipFormatError):
        check(make_zip(good_members())[:-10])
    with pytest.raises(TypeError):
        validate(12)


# --------------------------------------------------------------------------- SHOULDs


def test_compressed_entry():
    members = good_members()
    members[4] = (members[4][0], members[4][1], METHOD_DEFLATED)
    report = check(make_zip(members))
    assert problems(report) == {"compressed-entry"}
    assert report.ok


def test_sharding_not_used():
    members = good_members()
    members[3] = ("labels/cells/zarr.json", array_doc(sharded=False))
    report = check(make_zip(members))
    assert problems(report) == {"sharding-not-used"}
    assert report.by_code("sharding-not-used")[0].member == "labels/cells/zarr.json"


def test_root_not_first_in_cd_only():
    members = good_members()
    order = [1, 0, 2, 3, 4, 5]
    report = check(make_zip(members, cd_order=order))
    assert problems(report) == {"root-zarr-json-not-first-cd", "zarr-json-order-cd"}


def test_root_not_first_in_local_order_only():
    members = good_members()
    local = [members[1], members[0], *members[2:]]
    # central directory in the recommended order although the local order is not
    report = check(make_zip(local, cd_order=[1, 0, 2, 3, 4, 5]))
    assert problems(report) == {"root-zarr-json-not-first-local", "zarr-json-order-local"}


def test_zarr_json_not_contiguous():
    m = good_members()
    members = [m[0], m[1], m[4], m[2], m[3], m[5]]
    report = check(make_zip(members))
    assert problems(report) == {"zarr-json-order-local", "zarr-json-order-cd"}
    assert "not all at the start" in report.by_code("zarr-json-order-local")[0].message


def test_zarr_json_not_breadth_first():
    m = good_members()
    members = [m[0], m[1], m[3], m[2], m[4], m[5]]  # depth 2 before depth 1
    report = check(make_zip(members))
    assert problems(report) == {"zarr-json-order-local", "zarr-json-order-cd"}
    f = report.by_code("zarr-json-order-cd")[0]
    assert "breadth-first" in f.message and f.member == "labels/zarr.json"


def test_same_depth_any_order_is_fine():
    m = good_members()
    members = [m[0], m[2], m[1], m[3], m[5], m[4]]
    assert problems(check(make_zip(members))) == set()


@pytest.mark.parametrize(
    ("comment", "code"),
    [
        (b"", "comment-missing"),
        (b"\xff\xfe not utf8", "comment-invalid"),
        (b"not json", "comment-invalid"),
        (b'{"ome": {}}', "comment-invalid"),
        (b'{"ome": {"version": 0.5}}', "comment-invalid"),
        (b'["ome"]', "comment-invalid"),
        (b'{"ome": {"version": "0.6"}}', "ome-version-mismatch"),
    ],
)
def test_comment(comment, code):
    report = check(make_zip(good_members(), comment=comment))
    assert problems(report) == {code}
    assert report.ok


def test_comment_may_carry_more_keys():
    comment = b'{"ome": {"version": "0.5", "zipFile": {"centralDirectory": {"jsonFirst": true}}}}'
    assert problems(check(make_zip(good_members(), comment=comment))) == set()


def test_root_not_ome():
    members = [("zarr.json", group_doc()), ("0/zarr.json", array_doc())]
    report = check(make_zip(members))
    assert problems(report) == {"root-not-ome"}


def test_file_extension(tmp_path):
    path = tmp_path / "image.zip"
    path.write_bytes(make_zip(good_members()))
    assert problems(validate(path)) == {"file-extension"}
    with open(path, "rb") as f:  # a named file object reports it too
        assert problems(validate(f)) == {"file-extension"}


# --------------------------------------------------------------------------- hygiene


def test_duplicate_names():
    members = [*good_members(), ("0/c/0/0", b"again")]
    report = check(make_zip(members))
    assert "duplicate-name" in report.codes and not report.ok
    assert report.by_code("duplicate-name")[0].member == "0/c/0/0"


@pytest.mark.parametrize("name", ["../evil", "a/../../b", "/etc/passwd", "C:/x", "a\\b"])
def test_unsafe_names(name):
    report = check(make_zip([*good_members(), (name, b"x")]))
    assert [f.member for f in report.by_code("unsafe-name")] == [name]
    assert not report.ok


def test_findings_are_capped():
    members = good_members() + [(f"../x{i}", b"x") for i in range(MAX_PER_CODE + 5)]
    report = check(make_zip(members))
    assert len(report.by_code("unsafe-name")) == MAX_PER_CODE
    (t,) = report.by_code("findings-truncated")
    assert "5 more 'unsafe-name'" in t.message


def test_encrypted_entry():
    data = make_zip(good_members())
    rec = central_record_offset(data, "0/c/0/0")
    flags = struct.unpack_from("<H", data, rec + 8)[0]
    report = check(patched(data, rec + 8, "<H", flags | 1))
    assert [f.member for f in report.by_code("encrypted-entry")] == ["0/c/0/0"]


def test_unsupported_compression(tmp_path):
    path = tmp_path / "bz.ozx"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in good_members():
            zf.writestr(name, data, compress_type=zipfile.ZIP_BZIP2 if "/c/" in name else None)
        zf.comment = OME_COMMENT
    report = validate(path)
    assert {f.member for f in report.by_code("unsupported-compression")} == {
        "0/c/0/0", "labels/cells/c/0/0"
    }  # fmt: skip
    assert "bzip2" in report.by_code("unsupported-compression")[0].message


def test_data_descriptor_on_stored():
    data = make_zip(good_members())
    rec = central_record_offset(data, "0/c/0/0")
    flags = struct.unpack_from("<H", data, rec + 8)[0]
    report = check(patched(data, rec + 8, "<H", flags | 0x08))
    assert problems(report) == {"data-descriptor"}


def test_data_descriptor_written_by_zipfile_unseekable():
    class Unseekable(io.RawIOBase):
        def __init__(self):
            self.buf = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.buf += b
            return len(b)

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in good_members():
            zf.writestr(name, data)
        zf.comment = OME_COMMENT
    report = check(bytes(sink.buf))
    assert "data-descriptor" in report.codes
    assert "overlapping-entries" not in report.codes


def test_crc_mismatch_metadata_always_chunks_when_deep():
    data = make_zip(good_members())
    bad_meta = patched(data, central_record_offset(data, "0/zarr.json") + 16, "<I", 1)
    assert "crc-mismatch" in check(bad_meta).codes
    bad_chunk = patched(data, central_record_offset(data, "0/c/0/0") + 16, "<I", 1)
    assert "crc-mismatch" not in check(bad_chunk).codes
    report = check(bad_chunk, deep=True)
    assert [f.member for f in report.by_code("crc-mismatch")] == ["0/c/0/0"]
    assert report.deep and report.to_dict()["deep"]
    # deflated chunk, deep
    members = good_members()
    members[4] = (members[4][0], members[4][1] * 1000, METHOD_DEFLATED)
    data = make_zip(members)
    assert "crc-mismatch" not in check(data, deep=True).codes
    bad = patched(data, central_record_offset(data, "0/c/0/0") + 16, "<I", 7)
    assert "crc-mismatch" in check(bad, deep=True).codes


def test_overlapping_entries():
    members = good_members()
    data = make_zip(members, zip64=False)
    rec = central_record_offset(data, "0/c/0/0")
    # claim the chunk is 100 bytes longer: it now runs over the next member's local header
    csize = struct.unpack_from("<I", data, rec + 20)[0]
    bad = patched(patched(data, rec + 20, "<I", csize + 100), rec + 24, "<I", csize + 100)
    report = check(bad)
    (f,) = report.by_code("overlapping-entries")
    assert f.member == "labels/cells/c/0/0"


def test_two_records_one_local_header():
    data = bytearray(make_zip(good_members(), zip64=False))
    # point the last record at the first chunk's local header: names now disagree
    first = central_record_offset(bytes(data), "0/c/0/0")
    last = central_record_offset(bytes(data), "labels/cells/c/0/0")
    hoff = struct.unpack_from("<I", data, first + 42)[0]
    struct.pack_into("<I", data, last + 42, hoff)
    report = check(bytes(data))
    assert [f.member for f in report.by_code("bad-local-header")] == ["labels/cells/c/0/0"]


def test_bad_local_header_signature():
    data = make_zip(good_members())
    hoff = read_zip_index(FileObjRangeReader(io.BytesIO(data))).by_name["0/c/0/0"].header_offset
    report = check(patched(data, hoff, "<I", 0))
    (f,) = report.by_code("bad-local-header")
    assert f.member == "0/c/0/0" and "no local file header" in f.message


def test_member_unreadable_deflated_metadata():
    members = good_members()
    members[1] = ("0/zarr.json", array_doc(), METHOD_DEFLATED)
    data = bytearray(make_zip(members))
    idx = read_zip_index(FileObjRangeReader(io.BytesIO(bytes(data))))
    e = idx.by_name["0/zarr.json"]
    start = e.header_offset + 30 + len(e.name) + 20  # zip64 local extra is 20 bytes
    data[start : start + e.compressed_size] = b"\xff" * e.compressed_size
    report = check(bytes(data))
    assert [f.member for f in report.by_code("member-unreadable")] == ["0/zarr.json"]


def test_trailing_data_and_directory_entries():
    members = [("zarr.json", ROOT), ("0/", b""), ("0/zarr.json", array_doc())]
    report = check(make_zip(members) + b"tail")
    assert "trailing-data" in report.codes
    assert report.by_code("directory-entries")[0].severity == "info"


def test_report_helpers():
    report = check(make_zip([("zarr.json", b"nope"), ("x", b"1")], comment=b""))
    assert report.errors and all(f.severity == "error" for f in report.errors)
    assert report.warnings and all(f.severity == "warning" for f in report.warnings)
    sev = [f.severity for f in report.findings]
    assert sev == sorted(sev, key=["error", "warning", "info"].index)
    assert "NOT CONFORMANT" in str(report)
    assert str(report.errors[0]).startswith("ERROR root-zarr-json-invalid [zarr.json]")


def test_utf8_flag_names_roundtrip():
    assert FLAG_UTF8  # names written by make_zip are UTF-8 flagged
    members = [*good_members(), ("été/zarr.json", group_doc())]
    report = check(make_zip(members))
    assert problems(report) == {"zarr-json-order-local", "zarr-json-order-cd"}


_FUZZ_SEED = make_zip([*good_members()[:2], ("0/c/0/0", b"\x00" * 64, METHOD_DEFLATED)])


@settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(_FUZZ_SEED) - 1), st.integers(0, 255)),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 40),
)
def test_fuzz_validate_never_crashes(mutations, cut):
    data = bytearray(_FUZZ_SEED)
    for pos, value in mutations:
        data[pos] = value
    if cut:
        del data[-cut:]
    try:
        report = check(bytes(data), deep=True)
    except OzxError:
        return
    json.dumps(report.to_dict())
