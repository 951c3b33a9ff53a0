"""One chunk layout for reading and writing (ngff.read.chunks): every codec chain it takes
decodes zarr-python's bytes to zarr's values and encodes them back to zarr's bytes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

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
from napari_ozx.ngff.read.chunks import ChunkLayout, chunk_layout, morton_order

SHAPE = (3, 40, 50)  # edge chunks on both plane axes
FILL = 7

CHAINS: dict[str, list[Any]] = {
    "none": [],
    "zstd": [ZstdCodec(level=3)],
    "zstd+checksum": [ZstdCodec(level=1, checksum=True)],
    "blosc lz4 shuffle": [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")],
    "blosc defaults": [BloscCodec()],  # typesize and shuffle taken from the data type
    "blosc bitshuffle blocksize": [
        BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle", blocksize=256)
    ],
    "gzip": [GzipCodec(level=5)],
    "crc32c": [Crc32cCodec()],
    "zstd+crc32c": [ZstdCodec(level=3), Crc32cCodec()],
    "blosc+crc32c": [BloscCodec(cname="zstd", shuffle="shuffle"), Crc32cCodec()],
}


def _data(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    d = rng.integers(0, 120, SHAPE).astype(dtype)
    d[1] = FILL  # whole chunks of the fill value: zarr leaves them out
    d[2, :16, :16] = FILL
    return d


def _gzip_time_free(b: bytes) -> bytes:
    """A gzip stream without its MTIME header field (RFC 1952: bytes 4-7), which records
    when it was written (numcodecs, hence zarr, stamps the current time)."""
    return b[:4] + b[8:] if b[:2] == b"\x1f\x8b" else b


def _stored(root: Path) -> dict[str, bytes]:
    meta = {"zarr.json", ".zarray", ".zattrs", ".zgroup"}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name not in meta
    }


def _grid(a: zarr.Array, unit: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(-(-s // u)) for s, u in zip(a.shape, unit))))


def _region(cc: tuple[int, ...], unit: tuple[int, ...], shape: tuple[int, ...]) -> tuple:
    return tuple(slice(i * u, min((i + 1) * u, n)) for i, u, n in zip(cc, unit, shape))


def _padded(values: np.ndarray, unit: tuple[int, ...]) -> np.ndarray:
    out = np.full(unit, FILL, dtype=values.dtype)
    out[tuple(slice(0, n) for n in values.shape)] = values
    return out


def _roundtrip(a: zarr.Array, root: Path, data: np.ndarray, gzip: bool) -> None:
    """Every stored key decodes to *data* and encodes back to its stored bytes; a copy of
    the array written from our bytes alone reads in zarr-python as new values."""
    lo = chunk_layout(a)
    assert isinstance(lo, ChunkLayout), lo
    norm = _gzip_time_free if gzip else bytes
    stored = _stored(root)
    assert stored, "zarr wrote no chunk"
    ours: dict[str, bytes] = {}
    new = (data.astype(np.int64) * 3 % 97).astype(data.dtype)
    new[1] = FILL
    if lo.shard is None:
        for cc in _grid(a, lo.chunk):
            key = lo.key(cc)
            box = _region(cc, lo.chunk, lo.shape)
            if key in stored:
                values = lo.decode(stored[key])
                np.testing.assert_array_equal(
                    values[tuple(slice(0, s.stop - s.start) for s in box)], data[box]
                )
                assert norm(lo.encode(values)) == norm(stored[key]), key
            else:
                assert lo.is_fill(_padded(data[box], lo.chunk)), key
            v = _padded(new[box], lo.chunk)
            if not lo.is_fill(v):
                ours[key] = lo.encode(v)
    else:
        per = lo.per_shard
        for sc in _grid(a, lo.shard):
            key = lo.key(sc)
            inner_new: dict[tuple[int, ...], bytes] = {}
            if key in stored:
                chunks = lo.stored_chunks(stored[key])
                rebuilt = {}
                for local, raw in chunks.items():
                    cc = tuple(s * p + i for s, p, i in zip(sc, per, local))
                    box = _region(cc, lo.chunk, lo.shape)
                    values = lo.decode(raw)
                    np.testing.assert_array_equal(
                        values[tuple(slice(0, s.stop - s.start) for s in box)], data[box]
                    )
                    rebuilt[local] = lo.encode(values)
                    assert norm(rebuilt[local]) == norm(bytes(raw))
                shard = lo.build_shard(rebuilt)
                assert shard is not None
                if not gzip:
                    assert shard == stored[key], key
            for local in np.ndindex(*per):
                cc = tuple(s * p + i for s, p, i in zip(sc, per, local))
                box = _region(cc, lo.chunk, lo.shape)
                if any(s.stop <= s.start for s in box):
                    continue
                v = _padded(new[box], lo.chunk)
                if not lo.is_fill(v):
                    inner_new[local] = lo.encode(v)
            built = lo.build_shard(inner_new)
            if built is not None:
                ours[key] = built
    # zarr-python reads an array holding only our bytes as the new values
    copy = root.parent / (root.name + "-ours")
    for doc in (".zarray", "zarr.json"):
        if (root / doc).exists():
            copy.mkdir()
            (copy / doc).write_bytes((root / doc).read_bytes())
    for key, b in ours.items():
        (copy / key).parent.mkdir(parents=True, exist_ok=True)
        (copy / key).write_bytes(b)
    np.testing.assert_array_equal(zarr.open_array(str(copy), mode="r")[...], new)


@pytest.mark.parametrize(
    ("chain", "endian"),
    [(c, "little") for c in CHAINS] + [(c, "big") for c in ("none", "blosc defaults", "zstd")],
)
@pytest.mark.parametrize("sharded", ["unsharded", "index end", "index start + crc32c"])
def test_v3_chains_round_trip_zarrs_bytes(tmp_path, chain, endian, sharded):
    """Zarr v3 §"bytes", "sharding_indexed": each chain, either endianness, sharded with
    the index at either end or not sharded."""
    data = _data("uint16")
    root = tmp_path / "a.zarr"
    kw: dict[str, Any] = {"fill_value": FILL, "dtype": data.dtype, "shape": data.shape}
    serializer = BytesCodec(endian=endian)
    if sharded == "unsharded":
        kw |= {"chunks": (1, 16, 32), "serializer": serializer, "compressors": CHAINS[chain]}
    else:
        start = sharded.startswith("index start")
        kw |= {
            "chunks": (2, 32, 32),
            "compressors": None,
            "serializer": ShardingCodec(
                chunk_shape=(1, 16, 16),
                codecs=[serializer, *CHAINS[chain]],
                index_codecs=[BytesCodec(), Crc32cCodec()] if start else [BytesCodec()],
                index_location="start" if start else "end",
            ),
        }
    a = zarr.create_array(zarr.storage.LocalStore(root), **kw)
    a[...] = data
    _roundtrip(a, root, data, gzip=chain == "gzip")


@pytest.mark.parametrize(
    "compressor",
    [
        None,
        numcodecs.Zstd(level=2),
        numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
        numcodecs.GZip(level=4),
        numcodecs.Zlib(level=3),
    ],
    ids=["none", "zstd", "blosc", "gzip", "zlib"],
)
@pytest.mark.parametrize("dtype", ["<u2", ">i4"])
def test_v2_compressors_round_trip_zarrs_bytes(tmp_path, compressor, dtype):
    """Zarr v2 (§"compressor"): any numcodecs compressor, either byte order."""
    data = _data(dtype)
    root = tmp_path / "a.zarr"
    a = zarr.create_array(
        zarr.storage.LocalStore(root),
        shape=data.shape,
        dtype=data.dtype,
        chunks=(1, 16, 32),
        zarr_format=2,
        compressors=compressor,
        fill_value=FILL,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    a[...] = data
    _roundtrip(a, root, data, gzip=isinstance(compressor, numcodecs.GZip))


def test_layouts_not_reproduced_say_why(tmp_path):
    data = _data("uint16")
    store = zarr.storage.LocalStore(tmp_path / "t.zarr")
    transposed = zarr.create_array(
        store, shape=data.shape, dtype=data.dtype, filters=[TransposeCodec(order=(0, 2, 1))]
    )
    f_order = zarr.create_array(
        zarr.storage.LocalStore(tmp_path / "f.zarr"),
        shape=data.shape,
        dtype=data.dtype,
        zarr_format=2,
        order="F",
    )
    assert "TransposeCodec" in str(chunk_layout(transposed))
    assert "F order" in str(chunk_layout(f_order))


def test_broken_data_raises_one_error_type(tmp_path):
    data = _data("uint16")
    root = tmp_path / "a.zarr"
    a = zarr.create_array(
        zarr.storage.LocalStore(root),
        shape=data.shape,
        dtype=data.dtype,
        fill_value=FILL,
        chunks=(1, 32, 32),
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(1, 16, 16),
            codecs=[BytesCodec(), ZstdCodec(), Crc32cCodec()],
            index_codecs=[BytesCodec(), Crc32cCodec()],
        ),
    )
    a[...] = data
    lo = chunk_layout(a)
    assert isinstance(lo, ChunkLayout)
    shard = (root / "c" / "0" / "0" / "0").read_bytes()
    chunks = lo.stored_chunks(shard)
    raw = bytes(next(iter(chunks.values())))
    flipped = raw[:-4] + bytes([raw[-4] ^ 1]) + raw[-3:]
    import google_crc32c

    garbage = b"\x28\xb5\x2f\xfd" + b"\x00" * 20  # a zstd frame's magic, then nothing valid
    bad_stream = garbage + np.uint32(google_crc32c.value(garbage)).tobytes()  # checksum right
    index_flipped = shard[:-1] + bytes([shard[-1] ^ 1])
    for broken, match in [
        (lambda: lo.decode(flipped), "CRC-32C"),
        (lambda: lo.decode(bad_stream), "Error"),
        (lambda: lo.decode(b"ab"), "too short"),
        (lambda: lo.stored_chunks(shard[:-3]), "index"),
        (lambda: lo.stored_chunks(index_flipped), "CRC-32C"),
        (lambda: lo.stored_chunks(shard[:40] + shard[-lo.index_size :]), "outside"),
    ]:
        with pytest.raises(ChunkDecodeError, match=match):
            broken()


def test_morton_order_is_zarrs():
    """The chunk order inside a shard is zarr's: morton_order_iter (zarr 3.1) or
    morton_order_coords (zarr 3.4, where the iterator is gone)."""
    import zarr.core.indexing as zi

    zarrs = getattr(zi, "morton_order_iter", None) or zi.morton_order_coords
    for per in [(1, 1), (4, 4), (1, 4, 4), (3, 5), (2, 3, 7), (16, 4, 4), (1, 2, 2), (5,)]:
        assert morton_order(per) == [tuple(int(i) for i in c) for c in zarrs(per)], per
