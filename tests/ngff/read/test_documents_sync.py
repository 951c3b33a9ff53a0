"""A local .ozx's metadata documents are read directly (the store's ``get_sync``), not
through zarr's event loop, with the same documents and errors as the event-loop path;
a remote one (``threaded_io``) keeps reading a batch concurrently.

The event-loop path is the one every ``threaded_io`` store takes (a remote archive's),
so forcing ``threaded_io=True`` on the same local archive gives what a local archive
read before: the two are compared node by node, error by error.
"""

from __future__ import annotations

import errno
import io
import json
import struct
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from napari_ozx.errors import OzxError
from napari_ozx.ngff.read import documents
from napari_ozx.ngff.read.documents import read_documents
from napari_ozx.ozx.store import OzxStore
from tests._support.omegen import zip_dir
from tests._support.plategen import PlateSpec, write_plate
from tests._support.zipbuild import central_record_offset

GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {"hello": "world"}}
ARRAY = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [4, 4],
    "data_type": "uint8",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "codecs": [{"name": "bytes"}],
    "attributes": {},
}


def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode()


#: a v3 hierarchy with a node of every kind of document problem
V3 = {
    "zarr.json": _json(GROUP),
    "A/zarr.json": _json({**GROUP, "attributes": {"well": {"images": [{"path": "0"}]}}}),
    "A/0/zarr.json": _json(ARRAY),
    "invalid/zarr.json": b'{"zarr_format": 3,',
    "list/zarr.json": b"[1, 2]",
    "fmt2/zarr.json": _json({**GROUP, "zarr_format": 2}),
    "ext/zarr.json": _json({**GROUP, "extensions": [{"name": "nobody-knows"}]}),
    "ignorable/zarr.json": _json({**GROUP, "future": {"must_understand": False}}),
    "refused/zarr.json": _json({**GROUP, "future": {"x": 1}}),
    "big/zarr.json": _json({**GROUP, "attributes": {"pad": "x" * 400}}),
    "A/0/c/0/0": bytes(16),
}
V3_PATHS = ["", "A", "A/0", "invalid", "list", "fmt2", "ext", "ignorable", "refused", "big", "no"]

#: Zarr v2: a group, an OME group with its .zattrs only, an array, a broken .zattrs
V2 = {
    ".zgroup": _json({"zarr_format": 2}),
    ".zattrs": _json({"hello": "v2"}),
    "w/.zattrs": _json({"well": {"images": [{"path": "0"}]}}),
    "w/0/.zarray": _json(
        {
            "zarr_format": 2,
            "shape": [4, 4],
            "chunks": [4, 4],
            "dtype": "|u1",
            "compressor": None,
            "fill_value": 0,
            "order": "C",
            "filters": None,
        }
    ),
    "w/0/.zattrs": _json({"_ARRAY_DIMENSIONS": ["y", "x"]}),
    "bad/.zgroup": _json({"zarr_format": 2}),
    "bad/.zattrs": b"{nope",
}
V2_PATHS = ["", "w", "w/0", "bad", "no"]


def _archive(path: Path, members: dict[str, bytes], deflated: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            method = zipfile.ZIP_DEFLATED if name in deflated else zipfile.ZIP_STORED
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return path


def _patched(path: Path, name: str, offset: int, fmt: str, value: int) -> Path:
    """*path* with one field of *name*'s central-directory record overwritten."""
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, central_record_offset(data, name) + offset, value)
    path.write_bytes(bytes(data))
    return path


def _outcome(store: OzxStore, paths: list[str], fmt: int | None, kind: Any = None) -> Any:
    """What ``read_documents`` gives, comparably: per node its fields and error (class
    and message), or the class and message of what it raised."""
    try:
        docs = read_documents(store, paths, fmt, kind)
    except Exception as e:
        return ("raised", type(e), str(e))
    return [
        None
        if d is None
        else (
            d.path,
            d.zarr_format,
            d.node_type,
            d.document,
            d.attributes,
            d.files,
            d.checked,
            repr(d.extensions),
            None if d.error is None else (type(d.error), str(d.error)),
        )
        for d in docs
    ]


@pytest.fixture
def no_event_loop(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every way the documents reader could reach zarr's event loop or the store's async
    ``get``, recorded (an empty list: documents read directly)."""
    hops: list[str] = []

    def run_sync(coro: Any) -> Any:
        hops.append("run_sync")
        return orig_run_sync(coro)

    orig_run_sync = documents.run_sync
    monkeypatch.setattr(documents, "run_sync", run_sync)
    orig_get = OzxStore.get

    async def get(self: OzxStore, key: str, *a: Any, **k: Any) -> Any:
        hops.append(f"get {key}")
        return await orig_get(self, key, *a, **k)

    monkeypatch.setattr(OzxStore, "get", get)
    return hops


def _compare(
    path: Path,
    paths: list[str],
    fmt: int | None,
    kind: Any = None,
    *,
    hops: list[str] | None = None,
    **options: Any,
) -> Any:
    """The direct outcome, asserted equal to the event-loop path's on the same archive
    (and, with *hops*, asserted to have used neither the loop nor the async ``get``)."""
    with OzxStore(path, threaded_io=True, **options) as s:
        before = _outcome(s, paths, fmt, kind)
    if hops is not None:
        hops.clear()
    with OzxStore(path, **options) as s:
        assert s.threaded_io is False
        after = _outcome(s, paths, fmt, kind)
    if hops is not None:
        assert hops == [], hops
    assert after == before
    return after


# ------------------------------------------------------------ same documents, no loop


@pytest.mark.parametrize("fmt", [None, 3])
def test_v3_documents_and_node_problems_same_as_the_event_loop_path(tmp_path, fmt, no_event_loop):
    ozx = _archive(tmp_path / "v3.ozx", V3)
    got = _compare(ozx, V3_PATHS, fmt, hops=no_event_loop)
    by_path = dict(zip(V3_PATHS, got, strict=True))
    assert by_path["no"] is None
    assert by_path[""][4] == {"hello": "world"} and by_path[""][8] is None
    assert by_path["A/0"][2] == "array" and by_path["A/0"][8] is None
    assert by_path["ignorable"][8] is None
    errors = {p: d[8] for p, d in by_path.items() if d is not None and d[8] is not None}
    assert set(errors) == {"invalid", "list", "fmt2", "ext", "refused"}
    assert all(issubclass(cls, OzxError) for cls, _ in errors.values())
    assert "invalid JSON" in errors["invalid"][1]
    assert "expected a JSON object" in errors["list"][1]
    assert "zarr_format is not 3" in errors["fmt2"][1]
    assert "nobody-knows" in errors["ext"][1]


@pytest.mark.parametrize(
    ("fmt", "kind"), [(None, None), (2, None), (2, "group"), (2, "ome-group"), (None, "array")]
)
def test_v2_documents_same_as_the_event_loop_path(tmp_path, fmt, kind, no_event_loop):
    ozx = _archive(tmp_path / "v2.ozx", V2)
    got = _compare(ozx, V2_PATHS, fmt, kind, hops=no_event_loop)
    if kind is None:
        by_path = dict(zip(V2_PATHS, got, strict=True))
        assert by_path[""][1] == 2 and by_path[""][4] == {"hello": "v2"}
        assert by_path["w/0"][2] == "array"
        assert by_path["bad"][8] is not None and "invalid JSON" in by_path["bad"][8][1]


def test_the_same_members_are_read(tmp_path, monkeypatch):
    """Zarr v3 first, the v2 documents only of the nodes without a zarr.json: the direct
    reads ask the archive for exactly the members the event-loop path asked for."""
    members = {**V3, **{f"old/{k}": v for k, v in V2.items()}}
    ozx = _archive(tmp_path / "mixed.ozx", members)
    keys: list[str] = []
    orig = OzxStore.read_bytes

    def spy(self: OzxStore, key: str, byte_range: Any) -> Any:
        keys.append(key)
        return orig(self, key, byte_range)

    monkeypatch.setattr(OzxStore, "read_bytes", spy)
    paths = [*V3_PATHS, "old", "old/w", "old/w/0"]
    read = {}
    for threaded in (True, False):
        keys.clear()
        with OzxStore(ozx, threaded_io=threaded) as s:
            _outcome(s, paths, None)
        read[threaded] = sorted(keys)
    assert read[False] == read[True]
    assert "A/.zattrs" not in read[False] and "old/.zgroup" in read[False]


def test_a_plate_reads_its_documents_without_the_event_loop(tmp_path, no_event_loop):
    """A local .ozx plate's batches (plate, wells, fields, levels) are
    read in the calling thread, as a directory's are; the plate is the same."""
    from napari_ozx.ngff.read.plate import open_hcs

    spec = PlateSpec(2, 3, fields=2, labels=False, missing_groups={(1, 2)})
    d = write_plate(tmp_path / "p.ome.zarr", spec, "0.5")
    ozx = zip_dir(d, tmp_path / "p.ozx")
    no_event_loop.clear()
    plate = open_hcs(str(ozx))
    ov = plate.overview()
    assert no_event_loop == []
    ref = open_hcs(str(d)).overview()
    assert ov.data.shape == ref.data.shape
    assert [w.path for w in plate.wells] == [w.path for w in open_hcs(str(d)).wells]


# ------------------------------------------------------------ same errors


def test_too_large_document_is_that_nodes_problem(tmp_path, monkeypatch, no_event_loop):
    monkeypatch.setattr(documents, "MAX_METADATA_BYTES", 300)
    ozx = _archive(tmp_path / "v3.ozx", V3)
    got = _compare(ozx, ["", "big"], 3, hops=no_event_loop)
    assert got[0][8] is None
    cls, msg = got[1][8]
    assert cls is documents.MetadataError
    assert "big/zarr.json is too large" in msg and "limited to 300 bytes" in msg


def test_crc_mismatch_raises_the_stores_error(tmp_path):
    ozx = _patched(_archive(tmp_path / "v3.ozx", V3), "A/zarr.json", 16, "<I", 12345)
    got = _compare(ozx, V3_PATHS, 3)
    assert got[0] == "raised" and got[1].__name__ == "ZipFormatError" and "CRC" in got[2]


def test_crc_not_checked_when_the_store_says_so(tmp_path):
    """The direct reads are the store's: its options apply to them as to its ``get``."""
    ozx = _patched(_archive(tmp_path / "v3.ozx", V3), "A/zarr.json", 16, "<I", 12345)
    got = _compare(ozx, ["A"], 3, verify_crc_max=0, verify_members=False)
    assert got[0][8] is None


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (24, 10, "inflates to more than"),  # declared smaller than it inflates to
        (24, 0xFFFFFFF0, ""),  # a ratio deflate cannot produce: the read says so
        (8, 0x0001 | 0x0008, "encrypt"),  # general-purpose flag: encrypted
    ],
)
def test_broken_deflated_member_raises_the_stores_error(tmp_path, field, value, match):
    members = {**V3, "A/zarr.json": _json({**GROUP, "attributes": {"pad": "0" * 5000}})}
    ozx = _archive(tmp_path / "v3.ozx", members, deflated=("A/zarr.json",))
    _patched(ozx, "A/zarr.json", field, "<I" if field != 8 else "<H", value)
    got = _compare(ozx, ["", "A", "A/0"], 3)
    assert got[0] == "raised" and issubclass(got[1], OzxError), got
    assert match.lower() in got[2].lower(), got


def test_inflate_limit_raises_the_stores_error(tmp_path):
    members = {**V3, "A/zarr.json": _json({**GROUP, "attributes": {"pad": "0" * 5000}})}
    ozx = _archive(tmp_path / "v3.ozx", members, deflated=("A/zarr.json",))
    got = _compare(ozx, ["", "A"], 3, max_inflate_bytes=1000)
    assert got[0] == "raised" and "refusing" in got[2]


class _FailingFile(io.BytesIO):
    """An archive in memory whose reads inside one byte range fail (a bad sector)."""

    def __init__(self, data: bytes, bad: range) -> None:
        super().__init__(data)
        self.bad = bad

    def read(self, n: int | None = -1) -> bytes:
        if self.tell() in self.bad:
            raise OSError(errno.EIO, "Input/output error")
        return super().read(n)


def test_a_failing_read_is_reported_as_before(tmp_path, monkeypatch):
    """A read that fails other than by the archive's own errors is left to the store's
    ``get`` (retried, then that node's DocumentReadError): same node errors as before."""
    monkeypatch.setattr(documents, "REMOTE_BACKOFF_S", 0.0)
    ozx = _archive(tmp_path / "v3.ozx", V3)
    data = ozx.read_bytes()
    info = zipfile.ZipFile(ozx).getinfo("A/zarr.json")
    bad = range(info.header_offset, info.header_offset + 30 + len(info.filename) + info.file_size)
    outcomes = []
    for threaded in (True, False):
        store = OzxStore(_FailingFile(data, bad), threaded_io=threaded)
        assert store.threaded_io is threaded
        outcomes.append(_outcome(store, ["", "A", "A/0"], 3))
    assert outcomes[0] == outcomes[1]
    err = outcomes[1][1][8]
    assert err is not None and err[0] is documents.DocumentReadError, outcomes
    assert "reading A/zarr.json failed" in err[1] and "Input/output error" in err[1], err


# ------------------------------------------------------------ remote: still concurrent


def test_a_threaded_store_reads_a_batch_concurrently(tmp_path, monkeypatch):
    """A remote archive (``threaded_io``) keeps the event-loop path: the documents of a
    batch are in flight together (here: none of three reads finishes before all three
    have started), not read one after another."""
    ozx = _archive(tmp_path / "v3.ozx", V3)
    paths = ["", "A", "A/0"]
    barrier = threading.Barrier(len(paths), timeout=30)
    orig = OzxStore.read_bytes
    direct: list[str] = []

    def read(self: OzxStore, key: str, byte_range: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            direct.append(key)
        barrier.wait()  # BrokenBarrierError (a node's error) if the reads were serial
        return orig(self, key, byte_range)

    monkeypatch.setattr(OzxStore, "read_bytes", read)
    with OzxStore(ozx, threaded_io=True) as s:
        docs = read_documents(s, paths, 3)
    assert direct == []
    assert all(d is not None and d.error is None for d in docs), docs


def test_checksum_helper_matches_zipfile():
    """(The CRC field patched above is the central record's, at offset 16.)"""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("m", b"abc")
    data = buf.getvalue()
    assert struct.unpack_from("<I", data, central_record_offset(data, "m") + 16)[0] == zlib.crc32(
        b"abc"
    )
