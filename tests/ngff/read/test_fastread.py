"""The direct read path (ngff.fastread) returns zarr-python's pixels and errors."""

from __future__ import annotations

import itertools
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

from napari_ozx.errors import ChunkDecodeError
from napari_ozx.ngff.read.fastread import FastReader, fast_reader
from napari_ozx.ngff.read.open import _ChunkReader
from napari_ozx.ozx.store import OzxStore
from tests._support.omegen import zip_dir

RNG = np.random.default_rng(7)
SHAPE = (3, 70, 90)  # edge chunks everywhere


def _boxes(shape: tuple[int, ...]) -> list[tuple[slice, ...]]:
    rng = np.random.default_rng(3)
    out = [tuple(slice(0, s) for s in shape)]
    for _ in range(12):
        box = []
        for s in shape:
            a = int(rng.integers(0, s))
            b = int(rng.integers(a + 1, s + 1))
            box.append(slice(a, b))
        out.append(tuple(box))
    return out


def _check(array: zarr.Array) -> None:
    fr = fast_reader(array)
    assert isinstance(fr, FastReader), "layout should be read directly"
    for box in _boxes(array.shape):
        want = array[box]
        got = fr[box]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _write(path: Path, data: np.ndarray, **kw: object) -> zarr.Array:
    a = zarr.create_array(zarr.storage.LocalStore(path), shape=data.shape, dtype=data.dtype, **kw)
    a[...] = data
    return a


def _data(dtype: str, missing: bool = True) -> np.ndarray:
    d = RNG.integers(0, 200, SHAPE).astype(dtype)
    if missing:
        d[1] = 7  # equals the fill value below: zarr skips writing these chunks
    return d


COMPRESSORS = {
    "zstd": [ZstdCodec(level=3, checksum=True)],
    "blosc": [BloscCodec(cname="lz4", shuffle="shuffle")],
    "gzip": [GzipCodec(level=5)],
    "none": [],
    # what our writer gives blosc and uncompressed data (and convert keeps): a crc32c
    # trailer on every inner chunk
    "blosc+crc32c": [BloscCodec(cname="zstd", shuffle="shuffle"), Crc32cCodec()],
    "crc32c": [Crc32cCodec()],
}


@pytest.mark.parametrize("codec", list(COMPRESSORS))
@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("store", ["dir", "ozx"])
def test_sharded_v3_pixels_equal_zarr(tmp_path, codec, index_location, store):
    data = _data("uint16")
    a = _write(
        tmp_path / "a.zarr",
        data,
        chunks=(1, 16, 16),
        shards=(2, 32, 48),
        compressors=COMPRESSORS[codec],
        fill_value=7,
        config={"write_empty_chunks": False},
    )
    if index_location == "start":  # rewrite with the index in front
        a = zarr.create_array(
            zarr.storage.LocalStore(tmp_path / "b.zarr"),
            shape=data.shape,
            dtype=data.dtype,
            serializer=ShardingCodec(
                chunk_shape=(1, 16, 16),
                codecs=[BytesCodec(), *COMPRESSORS[codec]],
                index_location="start",
            ),
            compressors=None,
            chunks=(2, 32, 48),
            fill_value=7,
        )
        a[...] = data
    if store == "ozx":
        root = Path(a.store_path.store.root)
        a = zarr.open_array(OzxStore(zip_dir(root, tmp_path / "a.ozx")), mode="r")
    _check(a)


@pytest.mark.parametrize("codec", list(COMPRESSORS))
@pytest.mark.parametrize("dtype", ["uint8", ">u2", "<i4", "float32", ">f8", "bool"])
def test_unsharded_v3_pixels_equal_zarr(tmp_path, codec, dtype):
    data = _data("uint8" if dtype == "bool" else dtype)
    if dtype == "bool":
        data = data > 100
    endian = "big" if dtype.startswith(">") else "little"
    a = _write(
        tmp_path / "a.zarr",
        data,
        chunks=(2, 16, 32),
        serializer=BytesCodec(endian=endian) if np.dtype(dtype).itemsize > 1 else "auto",
        compressors=COMPRESSORS[codec],
        fill_value=7 if dtype != "bool" else False,
    )
    _check(a)


@pytest.mark.parametrize(
    "compressor",
    [numcodecs.Zstd(level=1), numcodecs.Blosc(cname="zstd"), numcodecs.GZip(), None],
    ids=["zstd", "blosc", "gzip", "none"],
)
@pytest.mark.parametrize("separator", [".", "/"])
def test_v2_pixels_equal_zarr(tmp_path, compressor, separator):
    data = _data("int16")
    a = _write(
        tmp_path / "a.zarr",
        data,
        chunks=(1, 20, 25),
        zarr_format=2,
        compressors=compressor,
        fill_value=7,
        chunk_key_encoding={"name": "v2", "separator": separator},
    )
    _check(a)


def test_layouts_we_do_not_reproduce_fall_back_to_zarr(tmp_path):
    data = _data("uint16")
    transposed = _write(
        tmp_path / "t.zarr", data, chunks=(1, 16, 16), filters=[TransposeCodec(order=(0, 2, 1))]
    )
    f_order = _write(tmp_path / "f.zarr", data, chunks=(1, 16, 16), zarr_format=2, order="F")
    for a in (transposed, f_order):
        assert fast_reader(a) is None
        reader = _ChunkReader(a, "src")
        assert reader.reader is a
        np.testing.assert_array_equal(reader[(slice(0, 3), slice(0, 70), slice(0, 90))], data)


def test_non_slice_selections_are_read_by_zarr(tmp_path):
    data = _data("uint16")
    a = _write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(1, 32, 32))
    fr = fast_reader(a)
    assert fr is not None
    np.testing.assert_array_equal(fr[(1, slice(0, 5), slice(None))], data[1, 0:5])
    np.testing.assert_array_equal(fr[(slice(0, 3, 2), slice(None), slice(None))], data[::2])


def _corrupt_file(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 3
    raw[mid : mid + 8] = b"\xff" * 8
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("sharded", [True, False])
@pytest.mark.parametrize("codec", ["zstd", "blosc+crc32c", "crc32c"])
def test_broken_chunks_raise_the_same_decode_error(tmp_path, sharded, codec):
    data = RNG.integers(0, 60000, (1, 64, 64), dtype=np.uint16)
    compressors = [ZstdCodec(level=3, checksum=True)] if codec == "zstd" else COMPRESSORS[codec]
    kw: dict = {"chunks": (1, 32, 32), "compressors": compressors}
    if sharded:
        kw["shards"] = (1, 64, 64)
    a = _write(tmp_path / "a.zarr", data, **kw)
    key = "c/0/0/0" if sharded else "c/0/1/1"
    _corrupt_file(tmp_path / "a.zarr" / key)
    fast = _ChunkReader(a, "src.zarr")
    slow = _ChunkReader(a, "src.zarr")
    slow.reader = a
    assert isinstance(fast.reader, FastReader)
    boxes = [(slice(0, 1), slice(0, 64), slice(0, 64))] + [
        (slice(0, 1), slice(y, y + 32), slice(x, x + 32)) for y in (0, 32) for x in (0, 32)
    ]
    raised = 0
    for box in boxes:
        outcome = []
        for r in (fast, slow):
            try:
                outcome.append(r[box])
            except ChunkDecodeError as e:
                # named by the stored key where the selection starts
                assert str(e).startswith("src.zarr: c/0/"), str(e)
                outcome.append(str(e).split("(")[0])
        if isinstance(outcome[0], str):
            raised += 1
            assert outcome[0] == outcome[1]
        else:
            assert not isinstance(outcome[1], str)
            np.testing.assert_array_equal(outcome[0], outcome[1])
    assert raised >= 2  # the whole array and the quadrant holding the damage
    assert key.startswith("c/0/")


def test_truncated_shard_index_is_an_error_not_pixels(tmp_path):
    data = RNG.integers(0, 60000, (1, 64, 64), dtype=np.uint16)
    a = _write(tmp_path / "a.zarr", data, chunks=(1, 32, 32), shards=(1, 64, 64))
    shard = tmp_path / "a.zarr" / "c" / "0" / "0" / "0"
    shard.write_bytes(shard.read_bytes()[:-3])
    r = _ChunkReader(a, "src.zarr")
    for box in [
        (slice(0, 1), slice(0, 32), slice(0, 32)),
        (slice(0, 1), slice(0, 64), slice(0, 64)),
    ]:
        with pytest.raises(ChunkDecodeError, match="c/0/0/0"):
            r[box]


def test_shard_index_cache_is_bounded(tmp_path, monkeypatch):
    import napari_ozx.ngff.read.fastread as fr_mod

    data = RNG.integers(0, 9, (8, 32, 32), dtype=np.uint8)
    a = _write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(1, 32, 32))
    fr = fast_reader(a)
    assert fr is not None
    per_index = 16 * 4 + 4
    monkeypatch.setattr(fr_mod, "INDEX_CACHE_BYTES", 3 * (per_index - 4))
    for z, (y, x) in itertools.product(range(8), [(0, 0), (16, 16)]):
        np.testing.assert_array_equal(
            fr[(slice(z, z + 1), slice(y, y + 16), slice(x, x + 16))],
            data[z : z + 1, y : y + 16, x : x + 16],
        )
    assert len(fr._indexes) <= 3


def test_fast_reader_pickles_for_distributed_workers(tmp_path):
    import pickle

    data = _data("uint16")
    a = _write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(1, 32, 32))
    root = Path(a.store_path.store.root)
    b = zarr.open_array(OzxStore(zip_dir(root, tmp_path / "a.ozx")), mode="r")
    for arr in (a, b):
        reader = _ChunkReader(arr, "src")
        np.testing.assert_array_equal(
            reader[(slice(0, 1), slice(0, 9), slice(3, 40))], data[:1, :9, 3:40]
        )
        clone = pickle.loads(pickle.dumps(reader))
        assert isinstance(clone.reader, FastReader)
        np.testing.assert_array_equal(clone[(slice(0, 3), slice(None), slice(None))], data)


# ---------------------------------------------------------------------- remote fetches


def test_fetch_settles_like_a_future():
    """``_Fetch``, the in-flight record of a remote chunk, behaves as the part of
    ``concurrent.futures.Future`` the reader uses: every waiter gets the value or the
    error; a pending fetch can be cancelled (its waiters get ``CancelledError``), a
    running one cannot; it settles once."""
    import threading
    from concurrent.futures import CancelledError

    from napari_ozx.ngff.read.fastread import _Fetch

    f = _Fetch()
    got: list[object] = []
    waiters = [threading.Thread(target=lambda: got.append(f.result())) for _ in range(3)]
    for t in waiters:
        t.start()
    assert not f.done() and not f.running()
    assert f.set_running_or_notify_cancel() and f.running()
    assert not f.cancel()  # running
    f.set_result(7)
    f.set_result(8)  # settled once
    for t in waiters:
        t.join(10)
    assert got == [7, 7, 7] and f.done() and f.result() == 7

    e = _Fetch(readahead=True)
    assert e.readahead
    e.set_exception(ValueError("broken chunk"))
    with pytest.raises(ValueError, match="broken chunk"):
        e.result()

    c = _Fetch()
    assert c.cancel() and c.cancel() and c.cancelled() and c.done()
    assert not c.set_running_or_notify_cancel()
    c.set_result(1)  # ignored: taken over
    with pytest.raises(CancelledError):
        c.result()
