"""The levels' dask arrays (ngff.lazy.LazyArray): numpy's pixels, dask's graphs and errors."""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

from napari_ozx._compat import dask_query_planning
from napari_ozx.errors import ChunkDecodeError
from napari_ozx.ngff.read.fastread import FastReader
from napari_ozx.ngff.read.lazy import LazyArray, lazy_array, source_reader
from napari_ozx.ngff.read.open import _ChunkReader, open_ome_zarr, open_store
from napari_ozx.ozx.store import OzxStore
from tests._support.omegen import zip_dir

# LazyArray subclasses the classic dask Array; under dask's array query planning levels
# are LevelArray instead (tests/test_compat.py covers those)
pytestmark = pytest.mark.skipif(
    dask_query_planning(), reason="LazyArray is the classic dask Array's subclass"
)

SHAPE = (3, 5, 70, 90)
DASK_CHUNKS = (2, 2, 24, 40)  # irregular against the inner chunks and the shape


def _zarr(tmp_path: Path, data: np.ndarray, store: str = "dir", **kw: Any) -> zarr.Array:
    kw.setdefault("chunks", (1, 1, 16, 16))
    kw.setdefault("shards", (1, 1, 32, 32))
    kw.setdefault("compressors", [ZstdCodec(level=3, checksum=True)])
    path = tmp_path / "a.zarr"
    a = zarr.create_array(zarr.storage.LocalStore(path), shape=data.shape, dtype=data.dtype, **kw)
    a[...] = data
    if store == "ozx":
        return zarr.open_array(OzxStore(zip_dir(path, tmp_path / "a.ozx")), mode="r")
    return a


def _from_reader(reader: _ChunkReader, chunks: tuple[int, ...] = DASK_CHUNKS) -> da.Array:
    """A plain dask array over the reader, built as ArrayNode.dask builds it."""
    return da.from_array(
        reader,
        chunks=chunks,
        name="ozx-test-" + str(id(reader)),
        lock=False,
        asarray=False,
        fancy=True,
        inline_array=True,
        meta=np.empty((0,) * reader.ndim, dtype=reader.dtype),
    )


def _level(reader: _ChunkReader, chunks: tuple[int, ...] = DASK_CHUNKS) -> LazyArray:
    """Our level over the reader, with :func:`_from_reader`'s chunks and name."""
    return lazy_array(reader, chunks, "ozx-test-" + str(id(reader)), reader.dtype, fancy=True)


@pytest.fixture(params=["dir", "ozx"])
def level(request, tmp_path) -> tuple[LazyArray, da.Array, np.ndarray]:
    """(our level, a plain dask array with the same chunks over numpy, the pixels)."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 60000, SHAPE, dtype=np.uint16)
    data[1, 2] = 0  # whole shards at the fill value: never written
    arr = _zarr(tmp_path, data, request.param)
    reader = _ChunkReader(arr, "src")
    assert isinstance(reader.reader, FastReader)
    lv = _level(reader)
    return lv, da.from_array(data, chunks=DASK_CHUNKS), data


def _random_index(rng: random.Random, shape: tuple[int, ...]) -> Any:
    """A basic numpy index: ints (negative too), slices (negative, None, past the end,
    empty), maybe an Ellipsis, maybe fewer entries than axes, maybe not a tuple."""
    out: list[Any] = []
    for n in shape:
        r = rng.random()
        if n and r < 0.25:
            out.append(rng.randrange(-n, n))
        elif r < 0.3:
            out.append(np.int64(rng.randrange(n)) if n else slice(None))
        elif r < 0.4:
            out.append(slice(None))
        else:
            a = rng.choice([None, rng.randrange(-n - 3, n + 3)])
            b = rng.choice([None, rng.randrange(-n - 3, n + 3)])
            step = rng.choice([None, None, 1])
            out.append(slice(a, b, step))
    if out and rng.random() < 0.3:
        k = rng.randrange(len(out) + 1)
        j = rng.randrange(k, len(out) + 1)
        out[k:j] = [Ellipsis]
    elif out and rng.random() < 0.2:
        out = out[: rng.randrange(len(out))]
    if len(out) == 1 and rng.random() < 0.5:
        return out[0]
    return tuple(out)


def _same(lazy: Any, plain: da.Array, want: np.ndarray) -> None:
    assert isinstance(lazy, LazyArray)
    assert lazy.shape == plain.shape == want.shape
    assert lazy.chunks == plain.chunks
    assert lazy.dtype == want.dtype
    got = np.asarray(lazy)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_levels_are_lazy_arrays_with_dask_graphs(tmp_path):
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, write_ome_zarr

    data = np.arange(2 * 40 * 50, dtype=np.uint16).reshape(2, 40, 50)
    axes = [Axis("c", "channel"), Axis("y", "space"), Axis("x", "space")]
    write_ome_zarr(tmp_path / "x.ozx", ImageSpec(data, axes, name="x"))
    lv = open_ome_zarr(tmp_path / "x.ozx").images()[0].levels[0]
    assert isinstance(lv, LazyArray) and isinstance(lv, da.Array)
    assert isinstance(source_reader(lv), _ChunkReader)
    assert source_reader(lv[1]) is source_reader(lv)
    np.testing.assert_array_equal(np.asarray(lv[1, 3:7]), data[1, 3:7])
    np.testing.assert_array_equal(dask.compute(lv[1, 3:7])[0], data[1, 3:7])


def test_random_basic_indices_equal_numpy_and_dask(level):
    lv, plain, data = level
    rng = random.Random(11)
    for _ in range(100):
        idx = _random_index(rng, data.shape)
        view = lv[idx]
        _same(view, plain[idx], data[idx])
        # the graph (built on demand) computes the same through the scheduler
        np.testing.assert_array_equal(dask.compute(view, scheduler="sync")[0], data[idx])


def test_composed_views_equal_numpy(level):
    lv, plain, data = level
    rng = random.Random(12)
    for _ in range(60):
        view, p, want = lv, plain, data
        for _ in range(rng.randrange(1, 4)):
            if want.ndim == 0:
                break
            idx = _random_index(rng, want.shape)
            view, p, want = view[idx], p[idx], want[idx]
        if want.ndim:
            _same(view, p, want)
        np.testing.assert_array_equal(view.compute(), want)
        np.testing.assert_array_equal(dask.compute(view)[0], want)


def test_napari_slicing_reads_one_box_directly(level, monkeypatch):
    lv, _, data = level
    reader = source_reader(lv)
    calls: list[Any] = []
    orig = type(reader).__getitem__
    monkeypatch.setattr(
        type(reader), "__getitem__", lambda self, sel: calls.append(sel) or orig(self, sel)
    )
    # what napari does: a channel, a tile, the point along z; task fusion off
    with dask.config.set({"optimization.fuse.active": False}):
        got = np.asarray(lv[2][:, 10:42, 33:71][3])
    np.testing.assert_array_equal(got, data[2, 3, 10:42, 33:71])
    assert calls == [(2, 3, slice(10, 42), slice(33, 71))]


def test_zero_d_empty_and_noop_views(level):
    lv, plain, data = level
    v = lv[1, -2, 5, -1]
    assert v.shape == () and v.ndim == 0
    assert type(v.compute()) is type(plain[1, -2, 5, -1].compute()) is np.uint16
    assert v.compute() == data[1, -2, 5, -1]
    assert np.asarray(v).shape == () and np.asarray(v) == data[1, -2, 5, -1]
    assert lv[(1, 2)][(slice(None),) * 2] is not None
    for idx in [(slice(2, 2),), (0, 0, slice(80, 90)), (Ellipsis, slice(5, 1)), (1, slice(9, 3))]:
        _same(lv[idx], plain[idx], data[idx])
    assert lv[:] is lv and lv[...] is lv and lv[:, :, :, :] is lv
    view = lv[1]
    assert view[...] is view


def test_other_indices_go_through_dask_unchanged(level):
    lv, plain, data = level
    for idx in [
        ([0, 2],),
        (1, [4, 0, 3]),
        (slice(None, None, 2),),
        (0, 0, slice(None, None, -1)),
        (None, 1),
        (np.array([True, False, True]),),
        (0, np.arange(3)),
    ]:
        got = lv[idx]
        assert not isinstance(got, LazyArray)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(plain[idx]))
    for idx in [(3,), (0, -6), (0, 0, 0, 0, 0), (Ellipsis, Ellipsis), (1, 2, 100), (0.5,)]:
        with pytest.raises(Exception) as ours:
            lv[idx]
        with pytest.raises(Exception) as theirs:
            plain[idx]
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value)
    # a view falls back the same way
    np.testing.assert_array_equal(np.asarray(lv[1][[0, 3]]), data[1][[0, 3]])


def test_dask_operations_on_levels_and_views(level):
    lv, _, data = level
    view = lv[1, :, 7:60]
    np.testing.assert_array_equal(da.stack([lv[0], lv[2]]).compute(), np.stack([data[0], data[2]]))
    np.testing.assert_array_equal(
        view.map_blocks(lambda b: b // 2, dtype=view.dtype).compute(), data[1, :, 7:60] // 2
    )
    assert int(view.sum().compute()) == int(data[1, :, 7:60].sum())
    np.testing.assert_array_equal((view + 1).compute(), data[1, :, 7:60] + 1)
    np.testing.assert_array_equal(view.rechunk((5, 10, 10)).compute(), data[1, :, 7:60])
    np.testing.assert_array_equal(view.persist().compute(), data[1, :, 7:60])
    np.testing.assert_array_equal(view.copy().compute(), data[1, :, 7:60])
    np.testing.assert_array_equal(view.T.compute(), data[1, :, 7:60].T)
    assert view.dask is view.__dask_graph__() and len(dict(view.dask)) > 0
    blocks = view.to_delayed().ravel()
    assert len(blocks) == view.npartitions


def test_views_pickle_as_dask_arrays(level):
    lv, _, data = level
    for arr, want in [(lv, data), (lv[2, 1:4, :, 5:], data[2, 1:4, :, 5:])]:
        clone = pickle.loads(pickle.dumps(arr))
        assert isinstance(clone, da.Array)
        np.testing.assert_array_equal(clone.compute(), want)


def test_assignment_turns_the_direct_path_off(level):
    lv, _, data = level
    view = lv[0, 1]
    view[3:5, 2] = 7
    want = data[0, 1].copy()
    want[3:5, 2] = 7
    np.testing.assert_array_equal(np.asarray(view), want)
    np.testing.assert_array_equal(np.asarray(view[2:9, :4]), want[2:9, :4])
    np.testing.assert_array_equal(np.asarray(lv[0, 1]), data[0, 1])  # the level is intact


def _corrupt(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 3
    raw[mid : mid + 8] = b"\xff" * 8
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("store", ["dir", "ozx"])
def test_broken_chunks_raise_dask_s_very_error(tmp_path, store):
    rng = np.random.default_rng(9)
    data = rng.integers(0, 60000, (2, 64, 96), dtype=np.uint16)
    path = tmp_path / "a.zarr"
    a = zarr.create_array(
        zarr.storage.LocalStore(path),
        shape=data.shape,
        dtype=data.dtype,
        chunks=(1, 32, 32),
        compressors=[ZstdCodec(level=3, checksum=True)],
    )
    a[...] = data
    _corrupt(path / "c" / "1" / "1" / "2")
    if store == "ozx":
        a = zarr.open_array(OzxStore(zip_dir(path, tmp_path / "a.ozx")), mode="r")
    reader = _ChunkReader(a, "src.zarr")
    plain = _from_reader(reader, (1, 32, 48))
    lv = _level(reader, (1, 32, 48))
    raised = 0
    for idx in [
        (1,),
        (1, slice(40, 60), slice(70, 90)),
        (slice(None), slice(20, 50), slice(10, 90)),
        (1, 40, slice(None)),
        (0,),
        (1, slice(0, 30)),
    ]:
        outcome = []
        for arr in (lv, plain):
            try:
                outcome.append(np.asarray(arr[idx]))
            except ChunkDecodeError as e:
                outcome.append(f"{type(e).__name__}: {e}")
        if isinstance(outcome[0], str):
            raised += 1
            assert outcome[0] == outcome[1]
            assert "src.zarr: c/1/" in outcome[0]
        else:
            np.testing.assert_array_equal(outcome[0], outcome[1])
            np.testing.assert_array_equal(outcome[0], data[idx])
    assert raised == 4


def test_concurrent_reads_of_views(level):
    from concurrent.futures import ThreadPoolExecutor

    lv, _, data = level
    rng = random.Random(4)
    idxs = [_random_index(rng, data.shape) for _ in range(60)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: np.asarray(lv[i]), idxs))
    for i, g in zip(idxs, got, strict=True):
        np.testing.assert_array_equal(g, data[i])


@pytest.mark.network
def test_remote_tiles_are_read_once_then_from_the_chunk_cache(tmp_path, monkeypatch):
    """napari's dask cache never sees direct reads: remote decoded chunks are kept instead
    (a pan back costs no requests); a second reader (reopened file) never shares them."""
    from napari_ozx.ozx import store as ozx_store
    from tests._support.httpserver import Server

    # the leading bytes fetched at open would hold a small archive whole; the trailing ones
    # (the index, read with them: 128 KiB) would too, so the data are larger (384 KiB of
    # noise) and the chunks read below lie outside both
    monkeypatch.setattr(ozx_store, "SPECULATIVE_HEAD", 4096)

    rng = np.random.default_rng(2)
    data = rng.integers(0, 60000, (2, 256, 384), dtype=np.uint16)
    www = tmp_path / "www"
    www.mkdir()
    path = tmp_path / "a.zarr"
    a = zarr.create_array(
        zarr.storage.LocalStore(path),
        shape=data.shape,
        dtype=data.dtype,
        chunks=(1, 32, 32),
        shards=(1, 32, 96),
        compressors=[ZstdCodec(level=3)],
    )
    a[...] = data
    zip_dir(path, www / "a.ozx")
    with Server(www) as srv:
        store = open_store(f"{srv.url}/a.ozx")
        assert store.threaded_io
        arr = zarr.open_array(store, mode="r")
        reader = _ChunkReader(arr, "remote")
        assert isinstance(reader.reader, FastReader)
        lv = _level(reader, (1, 32, 96))
        srv.reset()
        np.testing.assert_array_equal(np.asarray(lv[1, 10:40, 40:70]), data[1, 10:40, 40:70])
        assert srv.requests
        srv.reset()
        np.testing.assert_array_equal(np.asarray(lv[1][5:35, 33:64]), data[1, 5:35, 33:64])
        np.testing.assert_array_equal(np.asarray(lv[1, 10:40, 40:70]), data[1, 10:40, 40:70])
        assert srv.requests == []  # every inner chunk was decoded before
        np.testing.assert_array_equal(np.asarray(lv[0, 33:40]), data[0, 33:40])
        assert srv.requests  # a chunk not read yet
        # a read over four shards (their requests run concurrently)
        np.testing.assert_array_equal(np.asarray(lv[:, 20:50, 10:90]), data[:, 20:50, 10:90])
        other = _ChunkReader(zarr.open_array(open_store(f"{srv.url}/a.ozx"), mode="r"), "r2")
        srv.reset()
        np.testing.assert_array_equal(
            other[(1, slice(10, 40), slice(40, 70))], data[1, 10:40, 40:70]
        )
        assert srv.requests  # its own reads, not the first reader's chunks
