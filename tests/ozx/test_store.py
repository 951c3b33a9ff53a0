"""Tests for OzxStore, the read-only zarr store over .ozx archives."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import pickle
import random
import struct
import threading
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.codecs import ZstdCodec
from zarr.core.buffer import default_buffer_prototype

from napari_ozx.errors import (
    OzxError,
    ReadOnlyStoreError,
    UnsupportedZipFeature,
    ZipFormatError,
)
from napari_ozx.ozx._zip import RangeReader
from napari_ozx.ozx.lru import ByteLRU
from napari_ozx.ozx.store import OzxStore
from tests._support.zipbuild import central_record_offset

PROTO = default_buffer_prototype()


def run(coro):
    return asyncio.run(coro)


async def _alist(ait):
    return [x async for x in ait]


def alist(ait):
    return run(_alist(ait))


def get_bytes(store, key, byte_range=None):
    buf = run(store.get(key, PROTO, byte_range))
    return None if buf is None else buf.to_bytes()


def zip_dir(src: Path, dst: Path, *, compression=zipfile.ZIP_STORED, force_zip64=False) -> None:
    files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    meta = sorted((f for f in files if f.endswith("zarr.json")), key=lambda f: (f.count("/"), f))
    with zipfile.ZipFile(dst, "w", compression=compression) as zf:
        for name in meta + [f for f in files if f not in meta]:
            with zf.open(name, "w", force_zip64=force_zip64) as out:
                out.write((src / name).read_bytes())
        zf.comment = b'{"ome": {"version": "0.5"}}'


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory):
    """A zarr v3 hierarchy as a directory plus zipped variants of it."""
    base = tmp_path_factory.mktemp("hier")
    d = base / "image.zarr"
    root = zarr.open_group(zarr.storage.LocalStore(d), mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{"datasets": [{"path": "0"}]}]}
    rng = np.random.default_rng(42)
    sharded = root.create_array(
        "0", shape=(2, 8, 96, 80), dtype="uint16", shards=(1, 4, 64, 64), chunks=(1, 1, 32, 32),
        compressors=ZstdCodec(level=3),
    )  # fmt: skip
    data0 = rng.integers(0, 4000, size=sharded.shape, dtype="uint16")
    sharded[:] = data0
    labels = root.create_group("labels")
    lab = labels.create_array("cells", shape=(50, 40), dtype="uint32", chunks=(16, 16))
    data1 = rng.integers(0, 10, size=lab.shape, dtype="uint32")
    lab[:] = data1
    stored = base / "stored.ozx"
    zip_dir(d, stored)
    deflated = base / "deflated.ozx"
    zip_dir(d, deflated, compression=zipfile.ZIP_DEFLATED)
    z64 = base / "zip64.ozx"
    zip_dir(d, z64, force_zip64=True)
    return {
        "dir": d, "stored": stored, "deflated": deflated, "zip64": z64,
        "data0": data0, "data1": data1,
    }  # fmt: skip


@pytest.fixture(params=["stored", "deflated", "zip64"])
def ozx_path(request, hierarchy):
    return hierarchy[request.param]


def dir_keys(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())


# --------------------------------------------------------------------------- content


def test_every_key_matches_directory(hierarchy, ozx_path):
    local = zarr.storage.LocalStore(hierarchy["dir"], read_only=True)
    keys = dir_keys(hierarchy["dir"])
    with OzxStore(ozx_path) as store:
        assert alist(store.list()) == keys
        for key in keys:
            expected = get_bytes(local, key)
            assert get_bytes(store, key) == expected
            n = len(expected)
            for br in [
                RangeByteRequest(0, min(n, 10)),
                RangeByteRequest(n // 3, n // 2),
                OffsetByteRequest(n // 2),
                SuffixByteRequest(min(n, 33)),
            ]:
                assert get_bytes(store, key, br) == get_bytes(local, key, br), (key, br)


def test_zarr_open_group_and_pixels(hierarchy, ozx_path):
    with OzxStore(ozx_path) as store:
        g = zarr.open_group(store=store, mode="r")
        assert g.attrs["ome"]["version"] == "0.5"
        a = g["0"]
        np.testing.assert_array_equal(a[:], hierarchy["data0"])
        np.testing.assert_array_equal(a[1, 5, 10:70, 3:77], hierarchy["data0"][1, 5, 10:70, 3:77])
        np.testing.assert_array_equal(g["labels/cells"][:], hierarchy["data1"])
        b = zarr.open_array(store=store, path="0", mode="r")
        np.testing.assert_array_equal(b[0, 2], hierarchy["data0"][0, 2])
        assert sorted(g.group_keys()) == ["labels"]
        assert sorted(g.array_keys()) == ["0"]


def test_zipstore_written_sharded_array(tmp_path):
    path = tmp_path / "zs.ozx"
    data = np.arange(4 * 64 * 64, dtype="int32").reshape(4, 64, 64)
    with zarr.storage.ZipStore(path, mode="w") as zs:
        a = zarr.create_array(zs, shape=data.shape, dtype="int32", shards=(2, 64, 64),
                              chunks=(1, 16, 16), compressors=ZstdCodec(level=1))  # fmt: skip
        a[:] = data
    zs = run(zarr.storage.ZipStore.open(path, mode="r"))
    with OzxStore(path) as store, zs:
        arr = zarr.open_array(store=store, mode="r")
        np.testing.assert_array_equal(arr[:], data)
        np.testing.assert_array_equal(arr[1, 5:40, 17:33], data[1, 5:40, 17:33])
        for key in alist(zs.list()):
            assert get_bytes(store, key) == run(zs.get(key, PROTO)).to_bytes()


def test_sharded_tile_read_is_one_pread_per_request(hierarchy):
    """Shard index (suffix) + inner chunk (range): one read each, once offsets are cached."""

    class Counting(RangeReader):
        def __init__(self, inner):
            self.inner, self.size, self.calls = inner, inner.size, []

        def read(self, offset, length):
            self.calls.append((offset, length))
            return self.inner.read(offset, length)

    with OzxStore(hierarchy["stored"]) as store:
        a = zarr.open_array(store=store, path="0", mode="r")
        a[0, 0, 0:32, 0:32]  # warm: data offsets of the shard are now cached
        counting = Counting(store._reader)
        store._reader = counting
        np.testing.assert_array_equal(a[0, 1, 32:64, 0:32], hierarchy["data0"][0, 1, 32:64, 0:32])
        assert len(counting.calls) == 2
        store._reader = counting.inner


# --------------------------------------------------------------------------- byte ranges


@pytest.fixture()
def simple(tmp_path):
    path = tmp_path / "simple.ozx"
    members = {"zarr.json": b'{"zarr_format": 3, "node_type": "group"}',
               "a/b/c": bytes(range(100)), "a/d": b"", "x/zarr.json": b"{}",
               "deflated": b"squeeze me " * 50}  # fmt: skip
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in members.items():
            zf.writestr(k, v, compress_type=zipfile.ZIP_DEFLATED if k == "deflated" else None)
        zf.writestr("a/", b"")  # a directory entry, as `zip -r` writes them
    return path, members


@pytest.mark.parametrize("key", ["a/b/c", "deflated"])
def test_byte_requests(simple, key):
    path, members = simple
    v = members[key]
    n = len(v)
    cases = [
        (None, v),
        (RangeByteRequest(0, 10), v[0:10]),
        (RangeByteRequest(10, 10), b""),
        (RangeByteRequest(n - 5, n + 100), v[n - 5 :]),  # clamped at the end
        (RangeByteRequest(n + 5, n + 10), b""),  # starts after the end
        (OffsetByteRequest(7), v[7:]),
        (OffsetByteRequest(n + 7), b""),
        (SuffixByteRequest(9), v[-9:]),
        (SuffixByteRequest(n + 50), v),  # longer than the member
        (SuffixByteRequest(0), b""),
    ]
    with OzxStore(path) as store:
        for br, expected in cases:
            assert get_bytes(store, key, br) == expected, br
            buf = store.get_sync(key, byte_range=br)
            assert buf.to_bytes() == expected
        with pytest.raises(ValueError):
            get_bytes(store, key, RangeByteRequest(5, 2))
        with pytest.raises(ValueError):
            get_bytes(store, key, OffsetByteRequest(-1))
        with pytest.raises(ValueError):
            get_bytes(store, key, SuffixByteRequest(-1))
        with pytest.raises(TypeError):
            get_bytes(store, key, (0, 5))


def test_get_partial_values_and_missing(simple):
    path, members = simple
    with OzxStore(path) as store:
        res = run(store.get_partial_values(PROTO, [
            ("a/b/c", RangeByteRequest(3, 6)),
            ("nope", None),
            ("deflated", SuffixByteRequest(4)),
            ("a/b/c", None),
        ]))  # fmt: skip
        assert res[0].to_bytes() == members["a/b/c"][3:6]
        assert res[1] is None
        assert res[2].to_bytes() == members["deflated"][-4:]
        assert res[3].to_bytes() == members["a/b/c"]
        assert get_bytes(store, "missing") is None
        assert store.get_sync("missing") is None
        assert get_bytes(store, "a/") is None  # directory entries are not keys
        assert get_bytes(store, "a/d") == b""


# --------------------------------------------------------------------------- listing


def test_listing(simple):
    path, members = simple
    with OzxStore(path) as store:
        assert alist(store.list()) == sorted(members)
        assert alist(store.list_prefix("")) == sorted(members)
        assert alist(store.list_prefix("a/")) == ["a/b/c", "a/d"]
        assert alist(store.list_prefix("a")) == ["a/b/c", "a/d"]
        assert alist(store.list_prefix("zzz")) == []
        assert alist(store.list_dir("")) == ["a", "deflated", "x", "zarr.json"]
        assert alist(store.list_dir("a")) == ["b", "d"]
        assert alist(store.list_dir("a/")) == ["b", "d"]
        assert alist(store.list_dir("a/b")) == ["c"]
        assert alist(store.list_dir("a/b/c")) == []
        assert alist(store.list_dir("nope")) == []
        assert run(store.exists("a/b/c"))
        assert not run(store.exists("a/b"))
        assert not run(store.exists("a/"))
        assert not run(store.exists("zzz"))
        assert not run(store.is_empty(""))
        assert not run(store.is_empty("a"))
        assert run(store.is_empty("a/b/c"))
        assert run(store.is_empty("q"))
        assert run(store.getsize("deflated")) == len(members["deflated"])
        with pytest.raises(FileNotFoundError):
            run(store.getsize("nope"))
        assert run(store.getsize_prefix("a/")) == 100


def test_listing_matches_localstore(hierarchy):
    local = zarr.storage.LocalStore(hierarchy["dir"], read_only=True)
    with OzxStore(hierarchy["stored"]) as store:
        for prefix in ["", "0", "0/c", "0/c/1", "labels", "labels/cells", "labels/cells/c/0"]:
            assert alist(store.list_dir(prefix)) == sorted(alist(local.list_dir(prefix))), prefix
        for prefix in ["", "0/", "labels/cells/"]:
            assert alist(store.list_prefix(prefix)) == sorted(alist(local.list_prefix(prefix)))


# --------------------------------------------------------------------------- read-only


def test_writes_refused(simple):
    path, _ = simple
    buf = PROTO.buffer.from_bytes(b"x")
    with OzxStore(path) as store:
        assert store.read_only and not store.supports_writes and not store.supports_deletes
        assert store.supports_listing and not store.supports_partial_writes
        for coro in [store.set("k", buf), store.set_if_not_exists("k", buf),
                     store.delete("a/b/c"), store.delete_dir("a"), store.clear(),
                     store._set_many([("k", buf)])]:  # fmt: skip
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                run(coro)
        with pytest.raises(ReadOnlyStoreError):
            store.set_sync("k", buf)
        with pytest.raises(ReadOnlyStoreError):
            store.delete_sync("k")
        with pytest.raises(ReadOnlyStoreError):
            store.with_read_only(False)
        with pytest.raises(ValueError, match="read-only"):
            zarr.open_group(store=store, mode="a")
        g = zarr.open_group(store=store, mode="r")
        with pytest.raises((ReadOnlyStoreError, ValueError)):
            g.attrs["x"] = 1
    with pytest.raises(ReadOnlyStoreError):
        OzxStore(path, read_only=False)


# --------------------------------------------------------------------------- sources


def test_file_object_sources(hierarchy):
    raw = hierarchy["stored"].read_bytes()
    for fobj in [io.BytesIO(raw), open(hierarchy["stored"], "rb")]:  # noqa: SIM115
        with fobj:
            store = OzxStore(fobj)
            assert store.path is None
            assert "file object" in repr(store)
            a = zarr.open_array(store=store, path="0", mode="r")
            np.testing.assert_array_equal(a[:], hierarchy["data0"])
            store.close()
            assert not fobj.closed  # the caller owns the file object
            assert store.closed
            with pytest.raises(ValueError, match="closed"):
                get_bytes(store, "zarr.json")


def test_bad_source_types(tmp_path):
    with pytest.raises(TypeError):
        OzxStore(123)
    with pytest.raises(FileNotFoundError):
        OzxStore(tmp_path / "missing.ozx")
    bad = tmp_path / "bad.ozx"
    bad.write_bytes(b"not a zip at all" * 10)
    with pytest.raises(ZipFormatError):
        OzxStore(bad)


def test_store_open_classmethod_and_reopen(simple):
    path, members = simple
    store = run(OzxStore.open(path))
    assert get_bytes(store, "a/b/c") == members["a/b/c"]
    store.close()
    assert store.closed
    with pytest.raises(ValueError, match="closed"):
        get_bytes(store, "a/b/c")
    run(store._open())  # zarr's _ensure_open path reopens a closed store
    assert get_bytes(store, "a/b/c") == members["a/b/c"]
    store.close()


def test_repr_eq_hash_pickle(simple):
    path, members = simple
    with OzxStore(path) as s1, OzxStore(str(path)) as s2:
        assert s1 == s2 and hash(s1) == hash(s2)
        assert s1 != "x"
        assert repr(s1) == f"OzxStore({str(path)!r})"
        assert str(s1) == f"ozx://{path}"
        assert s1.comment == b""
        assert s1.index.by_name["a/b/c"].uncompressed_size == 100
        s3 = pickle.loads(pickle.dumps(s1))
        assert s3 == s1
        assert get_bytes(s3, "a/b/c") == members["a/b/c"]
        s3.close()
        s4 = s1.with_read_only(True)
        assert s4 == s1 and s4 is not s1
        s4.close()
        assert get_bytes(s1, "a/b/c") == members["a/b/c"]  # s1 keeps its own descriptor
    bio = io.BytesIO(path.read_bytes())
    s5 = OzxStore(bio)
    s6 = pickle.loads(pickle.dumps(s5))
    assert get_bytes(s6, "deflated") == members["deflated"]
    assert s5 == s5.with_read_only(True)
    assert s5 != OzxStore(io.BytesIO(path.read_bytes()))


# ------------------------------------------------------------ deflate, CRC, hostile members


def _zip_bytes(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytearray:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    return bytearray(buf.getvalue())


def test_deflated_crc_mismatch():
    payload = bytes(random.Random(0).randbytes(5000))
    data = _zip_bytes({"m": payload})
    cd = central_record_offset(data, "m")
    struct.pack_into("<I", data, cd + 16, (zlib.crc32(payload) + 1) & 0xFFFFFFFF)
    store = OzxStore(io.BytesIO(bytes(data)))
    with pytest.raises(ZipFormatError, match="CRC"):
        get_bytes(store, "m")


def test_deflated_bomb_and_lies():
    payload = b"\0" * 200_000
    data = _zip_bytes({"m": payload})
    cd = central_record_offset(data, "m")
    # declared size smaller than what the stream inflates to
    small = bytearray(data)
    struct.pack_into("<I", small, cd + 24, 1000)
    with pytest.raises(ZipFormatError, match="inflates to more than"):
        get_bytes(OzxStore(io.BytesIO(bytes(small))), "m")
    # declared size larger than the stream (truncated stream)
    big = bytearray(data)
    struct.pack_into("<I", big, cd + 24, 300_000)
    with pytest.raises(ZipFormatError):
        get_bytes(OzxStore(io.BytesIO(bytes(big))), "m")
    # a ratio deflate cannot produce
    huge = bytearray(data)
    struct.pack_into("<I", huge, cd + 24, 0xFFFFFFF0)
    with pytest.raises(OzxError):
        get_bytes(OzxStore(io.BytesIO(bytes(huge))), "m")
    # a cap on what we inflate at all
    with pytest.raises(UnsupportedZipFeature, match="refusing"):
        get_bytes(OzxStore(io.BytesIO(bytes(data)), max_inflate_bytes=10_000), "m")
    # garbage instead of a deflate stream
    comp = struct.unpack_from("<I", data, cd + 20)[0]
    hoff = struct.unpack_from("<I", data, cd + 42)[0]
    nlen, elen = struct.unpack_from("<HH", data, hoff + 26)
    garbage = bytearray(data)
    start = hoff + 30 + nlen + elen
    garbage[start : start + comp] = b"\xff" * comp
    with pytest.raises(ZipFormatError, match="deflate"):
        get_bytes(OzxStore(io.BytesIO(bytes(garbage))), "m")


def test_stored_crc_checked_on_small_whole_reads():
    payload = b"0123456789" * 10
    data = _zip_bytes({"m": payload}, compression=zipfile.ZIP_STORED)
    cd = central_record_offset(data, "m")
    struct.pack_into("<I", data, cd + 16, 12345)
    store = OzxStore(io.BytesIO(bytes(data)))
    with pytest.raises(ZipFormatError, match="CRC"):
        get_bytes(store, "m")
    with pytest.raises(ZipFormatError, match="CRC"):  # partial: whole member checked once
        get_bytes(store, "m", RangeByteRequest(0, 5))
    unverified = OzxStore(io.BytesIO(bytes(data)), verify_members=False)
    assert get_bytes(unverified, "m", RangeByteRequest(0, 5)) == b"01234"
    lax = OzxStore(io.BytesIO(bytes(data)), verify_crc_max=0, verify_members=False)
    assert get_bytes(lax, "m") == payload


def test_stored_size_mismatch():
    data = _zip_bytes({"m": b"abc" * 10}, compression=zipfile.ZIP_STORED)
    cd = central_record_offset(data, "m")
    struct.pack_into("<I", data, cd + 24, 31)
    with pytest.raises(ZipFormatError, match="stored member"):
        get_bytes(OzxStore(io.BytesIO(bytes(data))), "m")


def test_encrypted_and_unsupported_methods():
    data = _zip_bytes({"m": b"abc" * 10}, compression=zipfile.ZIP_STORED)
    cd = central_record_offset(data, "m")
    enc = bytearray(data)
    flags = struct.unpack_from("<H", enc, cd + 8)[0]
    struct.pack_into("<H", enc, cd + 8, flags | 1)
    store = OzxStore(io.BytesIO(bytes(enc)))
    assert store.index.by_name["m"].is_encrypted
    with pytest.raises(UnsupportedZipFeature, match="encrypted"):
        get_bytes(store, "m")
    bz = _zip_bytes({"m": b"abc" * 10}, compression=zipfile.ZIP_BZIP2)
    with pytest.raises(UnsupportedZipFeature, match="bzip2"):
        get_bytes(OzxStore(io.BytesIO(bytes(bz))), "m")
    assert run(OzxStore(io.BytesIO(bytes(bz))).exists("m"))


def test_duplicate_names_read_last(tmp_path):
    path = tmp_path / "dup.ozx"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning):
        zf.writestr("k", b"old")
        zf.writestr("k", b"new")
    with OzxStore(path) as store:
        assert store.index.duplicates == ("k",)
        assert get_bytes(store, "k") == b"new"  # like zipfile / zarr's ZipStore
        assert alist(store.list()) == ["k"]


def test_deflate_cache(simple):
    path, members = simple
    with OzxStore(path) as store:
        assert get_bytes(store, "deflated") == members["deflated"]
        assert store._inflated.nbytes == len(members["deflated"])
        assert get_bytes(store, "deflated", RangeByteRequest(1, 4)) == members["deflated"][1:4]
    with OzxStore(path, deflate_cache_bytes=16) as store:
        assert get_bytes(store, "deflated") == members["deflated"]
        assert store._inflated.nbytes == 0


def test_byte_lru():
    lru: ByteLRU[bytes] = ByteLRU(10, len)
    lru.put("a", b"1234")
    lru.put("b", b"5678")
    assert lru.get("a") == b"1234"  # a is now most recent
    lru.put("c", b"90ab")  # evicts b
    assert lru.get("b") is None and lru.get("a") == b"1234" and lru.nbytes == 8
    lru.put("a", b"12")
    assert lru.nbytes == 6
    lru.put("big", b"x" * 11)
    assert lru.get("big") is None
    lru.clear()
    assert lru.nbytes == 0
    # None is a value too (an absent shard), sized 0; min_items keeps one over the bound;
    # a callable bound is read at every put
    bound = [4]
    idx: ByteLRU[bytes] = ByteLRU(lambda: bound[0], len, max_item=lambda _: 1 << 62, min_items=1)
    idx.put("none", None)  # type: ignore[arg-type]
    assert idx.lookup("none") == (True, None) and idx.lookup("other") == (False, None)
    bound[0] = 2
    idx.put("x", b"xyz")  # over the bound: kept alone (min_items), the older None goes
    assert idx.lookup("x") == (True, b"xyz") and "none" not in idx and len(idx) == 1


# ------------------------------------------------------------ threads and descriptors


@pytest.mark.parametrize("source", ["path", "bytesio"])
def test_threads_read_ranges_concurrently(tmp_path, source):
    rng = random.Random(7)
    members = {f"m{i}": rng.randbytes(rng.randrange(1, 200_000)) for i in range(16)}
    members["deflated"] = b"abcdefgh" * 10_000
    path = tmp_path / "t.ozx"
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in members.items():
            zf.writestr(k, v, compress_type=zipfile.ZIP_DEFLATED if k == "deflated" else None)
    store = OzxStore(path if source == "path" else io.BytesIO(path.read_bytes()))
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)

    def worker(i: int) -> None:
        r = random.Random(i)
        try:
            barrier.wait()
            for _ in range(200):
                key = r.choice(list(members))
                v = members[key]
                a = r.randrange(len(v))
                b = r.randrange(a, len(v) + 1)
                kind = r.randrange(3)
                br = (RangeByteRequest(a, b), OffsetByteRequest(a), SuffixByteRequest(b))[kind]
                expected = (v[a:b], v[a:], v[len(v) - b :] if b else b"")[kind]
                got = store.get_sync(key, byte_range=br).to_bytes()
                assert got == expected, (key, br)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    assert not errors, errors[0]


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_no_leaked_file_descriptors(hierarchy, tmp_path):
    before = _fd_count()
    for _ in range(5):
        store = OzxStore(hierarchy["stored"])
        a = zarr.open_array(store=store, path="0", mode="r")
        a[0, 0]
        clone = store.with_read_only(True)
        zarr.open_group(store=clone, mode="r")
        clone.close()
        store.close()
        s = pickle.loads(pickle.dumps(OzxStore(hierarchy["deflated"])))
        s.close()
    bad = tmp_path / "bad.ozx"
    bad.write_bytes(b"junk" * 100)
    for _ in range(5):
        with pytest.raises(ZipFormatError):
            OzxStore(bad)
    import gc

    gc.collect()
    assert _fd_count() == before
    with OzxStore(hierarchy["stored"]):
        assert _fd_count() == before + 1
    assert _fd_count() == before


class _OpaqueFile:
    """A file-like object of unknown kind (like an fsspec remote file)."""

    def __init__(self, data: bytes) -> None:
        self._b = io.BytesIO(data)

    def seek(self, pos, whence=0):
        return self._b.seek(pos, whence)

    def tell(self):
        return self._b.tell()

    def read(self, n=-1):
        return self._b.read(n)


def test_threaded_io_choice(hierarchy):
    raw = hierarchy["stored"].read_bytes()
    with OzxStore(hierarchy["stored"]) as s:
        assert not s.threaded_io
    assert not OzxStore(io.BytesIO(raw)).threaded_io
    with open(hierarchy["stored"], "rb") as f:
        assert not OzxStore(f).threaded_io
    opaque = OzxStore(_OpaqueFile(raw))
    assert opaque.threaded_io
    np.testing.assert_array_equal(
        zarr.open_array(store=opaque, path="0", mode="r")[:], hierarchy["data0"]
    )
    res = run(opaque.get_partial_values(PROTO, [("zarr.json", None), ("nope", None)]))
    assert res[0].to_bytes() == zipfile.ZipFile(io.BytesIO(raw)).read("zarr.json")
    assert res[1] is None
    with OzxStore(hierarchy["stored"], threaded_io=True) as forced:
        assert forced.threaded_io
        a = zarr.open_array(store=forced, path="0", mode="r")
        np.testing.assert_array_equal(a[1, 3], hierarchy["data0"][1, 3])
        assert pickle.loads(pickle.dumps(forced)).threaded_io


def _fuzz_seed() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
        zf.writestr("a/b", bytes(range(200)))
        zf.writestr("d", b"deflate " * 40, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


_SEED = _fuzz_seed()


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_SEED) - 1), st.integers(0, 255)), max_size=6))
def test_fuzz_store_reads_raise_only_ozx_errors(mutations):
    data = bytearray(_SEED)
    for pos, value in mutations:
        data[pos] = value
    try:
        store = OzxStore(io.BytesIO(bytes(data)))
    except OzxError:
        return
    for key in alist(store.list()):
        for br in (None, RangeByteRequest(1, 5), OffsetByteRequest(3), SuffixByteRequest(7)):
            with contextlib.suppress(OzxError):
                store.get_sync(key, byte_range=br)


def test_parsed_index_goes_with_its_last_store_without_the_collector():
    """A store's parsed archive (its index: ~100 MiB for a million members) is freed when
    the last store using it goes, by reference counting: nothing in it refers back to it."""
    import gc
    import weakref

    from napari_ozx._sample_data import sample_path

    store = OzxStore(str(sample_path()))
    shared = weakref.ref(store._shared)
    gc.disable()
    try:
        store.close()
        del store
        assert shared() is None
    finally:
        gc.enable()
