"""The two single homes of the container package: ZIP record layouts (``ozx.records``)
and the RFC-9 rules (``ozx.rfc9``) that the writer and the validator share."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from napari_ozx.errors import ZipFormatError
from napari_ozx.ozx import records, rfc9
from napari_ozx.ozx.validate import CHECKS, RULES, validate
from napari_ozx.ozx.writer import InvalidEntryNameError, OzxWriter
from tests._support.paths import SHARED

SPEC = SHARED / "specs" / "rfc9-zipped-ome-zarr.txt"

# --------------------------------------------------------------------------- records


def test_record_sizes_are_appnote_sizes():
    sizes = {
        records.LOCAL_HEADER: 30,
        records.CENTRAL_HEADER: 46,
        records.EOCD: 22,
        records.ZIP64_LOCATOR: 20,
        records.ZIP64_EOCD: 56,
        records.DATA_DESCRIPTOR: 16,
        records.DATA_DESCRIPTOR_ZIP64: 24,
    }
    for layout, size in sizes.items():
        assert layout.size == size


@settings(deadline=None)  # a loaded CI machine must not turn slowness into a failure
@given(
    name=st.binary(min_size=1, max_size=40),
    crc=st.integers(0, 2**32 - 1),
    size=st.integers(0, 2**63),
    csize=st.integers(0, 2**63),
    offset=st.integers(0, 2**63),
)
def test_zip64_headers_round_trip(name, crc, size, csize, offset):
    local = records.pack_local_header(name, crc, size, compressed_size=csize, method=8)
    head = records.unpack_local_header(local)
    assert head.signature == records.SIG_LOCAL and head.method == 8 and head.crc32 == crc
    assert (head.compressed_size, head.uncompressed_size) == (records.U32_MAX,) * 2
    assert local[30 : 30 + head.name_length] == name
    extra = local[30 + head.name_length :]
    assert len(extra) == head.extra_length == records.LOCAL_ZIP64_EXTRA_SIZE
    u, c, _, _, found = records.read_zip64_extra(extra, records.U32_MAX, records.U32_MAX, 0, 0, 0)
    assert (u, c, found) == (size, csize, True)

    central = records.pack_central_header(name, crc, size, offset, compressed_size=csize)
    rec = records.unpack_central_header(central)
    assert rec.signature == records.SIG_CENTRAL and rec.header_offset == records.U32_MAX
    extra = central[46 + rec.name_length :]
    assert len(extra) == rec.extra_length == records.CENTRAL_ZIP64_EXTRA_SIZE
    assert records.read_zip64_extra(extra, *(records.U32_MAX,) * 3, 0, 0) == (
        size,
        csize,
        offset,
        0,
        True,
    )


def test_classic_headers_are_what_zipfile_reads():
    data = b"hello"
    crc = zipfile.crc32(data)
    local = records.pack_local_header(b"a.txt", crc, len(data), zip64=False)
    cd = records.pack_central_header(b"a.txt", crc, len(data), 0, zip64=False)
    archive = local + data + cd + records.pack_eocd(1, len(cd), len(local) + len(data), b"hi")
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert zf.read("a.txt") == data and zf.comment == b"hi"
    with pytest.raises(ValueError):
        records.pack_local_header(b"big", 0, 2**32, zip64=False)


def test_end_records_round_trip():
    z64 = records.unpack_zip64_eocd(records.pack_zip64_eocd(70_000, 2**33, 2**34))
    assert z64.signature == records.SIG_ZIP64_EOCD and z64.record_size == records.ZIP64_EOCD_BODY
    assert (z64.entries, z64.cd_size, z64.cd_offset) == (70_000, 2**33, 2**34)
    loc = records.unpack_zip64_locator(records.pack_zip64_locator(123))
    assert (loc.zip64_eocd_offset, loc.total_disks) == (123, 1)
    eocd = records.unpack_eocd(records.pack_eocd(70_000, 2**33, 5, b"c"))
    assert (eocd.entries, eocd.cd_size, eocd.cd_offset, eocd.comment_length) == (
        0xFFFF,
        0xFFFFFFFF,
        5,
        1,
    )


@pytest.mark.parametrize("zip64", [False, True])
def test_data_descriptor_with_and_without_signature(zip64):
    packed = records.pack_data_descriptor(0xCAFE, 10, 20, zip64=zip64)
    dd = records.unpack_data_descriptor(packed, zip64=zip64)
    assert dd == (records.SIG_DATA_DESCRIPTOR, 0xCAFE, 10, 20)
    bare = records.unpack_data_descriptor(b"xx" + packed[4:], 2, zip64=zip64)
    assert bare == (b"", 0xCAFE, 10, 20)
    with pytest.raises(ZipFormatError, match="cut off"):
        records.unpack_data_descriptor(packed[:-1], zip64=zip64)


def test_zip64_extra_with_lying_length_is_a_format_error():
    extra = records.EXTRA_HEADER.pack(records.ZIP64_EXTRA_ID, 16) + b"\0" * 8
    with pytest.raises(ZipFormatError, match="corrupt extra field"):
        records.read_zip64_extra(extra, records.U32_MAX, 0, 0, 0, 7)
    short = records.EXTRA_HEADER.pack(records.ZIP64_EXTRA_ID, 8) + b"\0" * 8
    with pytest.raises(ZipFormatError, match="too short"):
        records.read_zip64_extra(short, records.U32_MAX, records.U32_MAX, 0, 0, 7)


# --------------------------------------------------------------------------- rfc9


@pytest.mark.skipif(not SPEC.exists(), reason="shared specs (../shared/specs) not present")
def test_every_rule_is_quoted_verbatim_from_the_spec():
    spec = SPEC.read_text(encoding="utf-8")
    for rule in rfc9.RULES:
        assert rule.text in spec, rule.key
        assert rule.level in rule.text
        item = int(rule.section.rsplit(" ", 1)[1])
        # the sentence is the numbered item the section names
        assert re.search(rf"\n\s*{item}\.\s+{re.escape(rule.text[:40])}", spec), rule.key


def test_validator_rule_table_references_the_rfc9_rules():
    rfc9_codes = {code for code, (_, rule) in CHECKS.items() if isinstance(rule, rfc9.Rule)}
    assert {CHECKS[code][1] for code in rfc9_codes} == set(rfc9.RULES)  # every rule checked
    for code in rfc9_codes:
        severity, rule = CHECKS[code]
        assert RULES[code] == (severity, rule.text)
        if rule.level == "SHOULD":
            assert severity == "warning", code  # a SHOULD never fails an archive


_PATHS = st.lists(st.sampled_from(["a", "b", "cc"]), min_size=1, max_size=4).map("/".join)


@settings(deadline=None, max_examples=60)
@given(st.lists(_PATHS, unique=True, max_size=12))
def test_writer_sort_order_satisfies_the_validator_order_check(dirs):
    meta = ["zarr.json"] + [f"{d}/zarr.json" for d in dirs]
    data = [f"{d}/c/0" for d in dirs]
    ordered = sorted(meta, key=rfc9.metadata_sort_key) + data
    assert ordered[0] == "zarr.json"
    assert rfc9.order_problem(ordered, "here") is None


def test_order_problems():
    assert "not all at the start" in rfc9.order_problem(["zarr.json", "c/0", "a/zarr.json"], "x")[0]
    msg, member = rfc9.order_problem(["zarr.json", "a/b/zarr.json", "a/zarr.json"], "x")
    assert "breadth-first" in msg and member == "a/zarr.json"


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("0/c/0", []),
        ("../evil", ["parent"]),
        ("/etc/passwd", ["absolute"]),
        ("C:/x", ["absolute"]),
        ("a\\b", ["backslash"]),
        ("a//b", ["empty-segment"]),
        ("a/", ["empty-segment"]),
        ("x.OZX", ["nested"]),
        ("", ["empty"]),
        ("nul\x00", ["nul"]),
    ],
)
def test_name_policy_is_shared(tmp_path, name, kinds):
    problems = rfc9.name_problems(name)
    assert [p.kind for p in problems] == kinds
    with OzxWriter(tmp_path / "n.ozx", require_root_metadata=False) as w:
        if kinds:
            with pytest.raises(InvalidEntryNameError, match=re.escape(problems[0].reason)):
                w.add(name, b"x")
        else:
            w.add(name, b"x")
    unsafe = [p for p in problems if p.kind in rfc9.UNSAFE_NAME_KINDS]
    if name and "\x00" not in name:
        # the validator reports exactly the unsafe kinds of the same policy
        raw = io.BytesIO()
        with zipfile.ZipFile(raw, "w") as zf:
            zf.writestr("zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
            zf.writestr(name, b"x")
        report = validate(io.BytesIO(raw.getvalue()))
        assert len(report.by_code("unsafe-name")) == len(unsafe)


def test_nested_name_cites_the_rule(tmp_path):
    with (
        OzxWriter(tmp_path / "n.ozx", require_root_metadata=False) as w,
        pytest.raises(InvalidEntryNameError, match="SHALL NOT be embedded"),
    ):
        w.add("inner.ozx", b"x")


def test_comment():
    assert rfc9.DEFAULT_COMMENT == b'{"ome":{"version":"0.5"}}'
    assert rfc9.comment_version(rfc9.archive_comment("0.6")) == ("0.6", None)
    assert rfc9.comment_version(b"")[1].startswith("the archive has no comment")
    assert "not UTF-8 JSON" in rfc9.comment_version(b"\xff")[1]
    assert "no string ome.version" in rfc9.comment_version(b'{"ome": {"version": 5}}')[1]


def test_extension_and_methods():
    assert rfc9.has_ozx_extension("a/B.OZX") and not rfc9.has_ozx_extension("b.zip")
    assert not rfc9.is_compressed(records.METHOD_STORED)
    assert rfc9.is_compressed(records.METHOD_DEFLATED)
    assert rfc9.WRITE_METHOD == records.METHOD_STORED and rfc9.WRITE_ZIP64


@pytest.mark.parametrize(
    ("name", "archive"),
    [
        ("a/B.OZX", True),
        ("x.zip", True),
        ("x.zip/", True),
        ("https://host/x.ozx?token=1", True),
        ("s3://bucket/x.ZIP/", True),
        ("https://host/x.ome.zarr", False),
        ("https://host/x.zarr?f=.ozx", False),
        ("local?name.ozx", True),  # a "?" in a local path is part of the name
        ("x.ozx.json", False),
    ],
)
def test_archive_names(name, archive):
    """One home for "is this name a zipped OME-Zarr": every layer asks is_archive_name."""
    assert rfc9.is_archive_name(name) is archive
    assert rfc9.ARCHIVE_SUFFIXES == (rfc9.OZX_SUFFIX, ".zip")
