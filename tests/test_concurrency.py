"""Many threads against one opened ``.ozx``; no leaked file descriptors or threads.

* 16 threads read random tiles through the dask levels of ONE opened image (and of its
  labels), and through zarr arrays and raw byte ranges of ONE ``OzxStore`` (path source:
  lock-free ``pread``; ``io.BytesIO`` source: seek + read under a lock; STORED and DEFLATED
  archives), all compared with the truth;
* file descriptors: none left pointing at the archive after ``OmeZarr.close()``, after
  many open/close cycles, after failed opens of broken files, and the process' total
  count does not grow (``/proc/self/fd``);
* threads: after all of that, no thread is left that was not there before, except the
  long-lived pools of zarr (its event loop thread and that loop's default executor) and
  of dask (its default scheduler pool), which persist once started.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import threading
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.abc.store import RangeByteRequest, SuffixByteRequest

from napari_ozx import _reader
from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ozx.store import OzxStore
from tests._support.omegen import pyramid, write_image, zip_dir
from tests._support.paths import CORPUS

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="counts file descriptors in /proc/self/fd"
)

N_THREADS = 16
TILES_PER_THREAD = 16
JOIN_TIMEOUT = 60.0
CORPUS_FILES = CORPUS / "files"


# --------------------------------------------------------------------------- fixtures


class Sample:
    def __init__(self, root: Path) -> None:
        rng = np.random.default_rng(7)
        self.data = rng.integers(0, 60000, (2, 2, 96, 128), dtype=np.uint16)
        self.label = (self.data[0] // 15000).astype(np.uint32)
        directory = root / "img.zarr"
        self.levels = write_image(
            directory, self.data, axes="czyx", levels=3, labels={"cells": self.label}
        )
        self.label_levels = pyramid(self.label, 3, "zyx")
        self.stored = zip_dir(directory, root / "img.ozx")
        self.deflated = zip_dir(directory, root / "img-deflated.ozx", deflate=True)
        with zipfile.ZipFile(self.stored) as zf:
            self.members = {n: zf.read(n) for n in zf.namelist()}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return Sample(tmp_path_factory.mktemp("concurrency"))


def run_threads(n: int, fn: Callable[[int], None]) -> None:
    """Run ``fn(i)`` in ``n`` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            fn(i)
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=target, args=(i,), name=f"test-reader-{i}") for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"threads still running after {JOIN_TIMEOUT} s (deadlock?): {alive}"
    if errors:
        raise errors[0]


def random_tile(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """A random box: the leading axes a single index range, the last two a tile."""
    out = []
    for ax, size in enumerate(shape):
        if ax < len(shape) - 2:
            a = int(rng.integers(0, size))
            out.append(slice(a, a + 1))
        else:
            a = int(rng.integers(0, size))
            b = int(rng.integers(a + 1, min(size, a + 80) + 1))
            out.append(slice(a, b))
    return tuple(out)


def fds_to(path: Path) -> list[int]:
    """Descriptors of this process open on ``path``."""
    target = os.path.realpath(path)
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                out.append(int(fd))
        except OSError:  # closed meanwhile (e.g. the listing's own descriptor)
            pass
    return out


def open_fds() -> set[tuple[str, str]]:
    """This process's descriptors as (number, what it is open on)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile (the listing's own one)
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
    return out


# --------------------------------------------------------------------------- pixels


@pytest.mark.parametrize("kind", ["stored", "deflated"])
def test_threads_read_tiles_through_dask_levels(sample: Sample, kind: str) -> None:
    path = getattr(sample, kind)
    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        levels = img.levels
        (label,) = img.labels
        label_levels = label.levels
        assert [lv.shape for lv in levels] == [t.shape for t in sample.levels]

        def reader(i: int) -> None:
            rng = np.random.default_rng(1000 + i)
            for _ in range(TILES_PER_THREAD):
                if rng.random() < 0.25:
                    k = int(rng.integers(0, len(label_levels)))
                    lazy, truth = label_levels[k], sample.label_levels[k]
                else:
                    k = int(rng.integers(0, len(levels)))
                    lazy, truth = levels[k], sample.levels[k]
                box = random_tile(rng, lazy.shape)
                got = lazy[box].compute(scheduler="sync")
                np.testing.assert_array_equal(got, truth[box], err_msg=f"{kind} level {k} {box}")

        run_threads(N_THREADS, reader)
    assert fds_to(path) == []


def test_dask_thread_pool_reads_whole_levels(sample: Sample) -> None:
    """dask's threaded scheduler with 16 workers computes every level at once, correctly."""
    import dask

    with open_ome_zarr(sample.stored) as oz, ThreadPoolExecutor(N_THREADS) as pool:
        (img,) = oz.images()
        got = dask.compute(*img.levels, scheduler="threads", pool=pool)
        for g, truth in zip(got, sample.levels, strict=True):
            np.testing.assert_array_equal(g, truth)


@pytest.mark.parametrize("source", ["path", "bytesio", "deflated"])
def test_threads_share_one_store(sample: Sample, source: str) -> None:
    """One OzxStore: zarr arrays and raw byte ranges from 16 threads, all exact."""
    if source == "bytesio":
        store = OzxStore(io.BytesIO(sample.stored.read_bytes()))
    elif source == "deflated":
        store = OzxStore(sample.deflated, deflate_cache_bytes=1 << 20)  # force evictions
    else:
        store = OzxStore(sample.stored)
    try:
        arrays = {
            p: zarr.open_array(store=store, path=p, mode="r")
            for p in ("0", "1", "2", "labels/cells/0", "labels/cells/1")
        }
        truths = {
            "0": sample.levels[0],
            "1": sample.levels[1],
            "2": sample.levels[2],
            "labels/cells/0": sample.label_levels[0],
            "labels/cells/1": sample.label_levels[1],
        }
        keys = sorted(k for k in sample.members if not k.endswith("/"))

        def reader(i: int) -> None:
            rng = np.random.default_rng(2000 + i)
            for _ in range(TILES_PER_THREAD):
                if i % 2:
                    p = list(arrays)[int(rng.integers(0, len(arrays)))]
                    box = random_tile(rng, arrays[p].shape)
                    np.testing.assert_array_equal(arrays[p][box], truths[p][box])
                else:
                    key = keys[int(rng.integers(0, len(keys)))]
                    want = sample.members[key]
                    a = int(rng.integers(0, max(1, len(want))))
                    b = int(rng.integers(a, len(want) + 1))
                    buf = store.get_sync(key, byte_range=RangeByteRequest(a, b))
                    assert buf is not None and buf.to_bytes() == want[a:b], (key, a, b)
                    n = int(rng.integers(0, len(want) + 1))
                    buf = store.get_sync(key, byte_range=SuffixByteRequest(n))
                    assert buf is not None and buf.to_bytes() == want[len(want) - n :], (key, n)

        run_threads(N_THREADS, reader)
    finally:
        store.close()
    if source != "bytesio":
        assert fds_to(sample.stored if source == "path" else sample.deflated) == []


# --------------------------------------------------------------------------- file descriptors


def _use(path: Path) -> None:
    """Open, touch every level and label, close."""
    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        for lv in [*img.levels, *img.labels[0].levels]:
            np.asarray(lv[(0,) * (lv.ndim - 2) + (slice(0, 16), slice(0, 16))])


def test_no_fd_left_after_close(sample: Sample) -> None:
    _use(sample.stored)  # warm up zarr's loop and dask's pool (they keep their own fds)
    gc.collect()  # what earlier tests left for the collector goes first
    before = open_fds()
    oz = open_ome_zarr(sample.stored)
    (img,) = oz.images()
    levels = img.levels
    np.asarray(levels[0][0, 0, :32, :32])
    assert len(fds_to(sample.stored)) >= 1
    oz.close()
    assert fds_to(sample.stored) == [], "OmeZarr.close() left the archive open"
    assert open_fds() - before == set()
    # reading after close fails (it does not silently reopen and leak a descriptor)
    with pytest.raises((OzxError, ValueError)):
        np.asarray(levels[0][1, 1, :32, :32])
    assert fds_to(sample.stored) == []
    oz.close()  # idempotent


def test_no_fd_growth_over_open_close_cycles(sample: Sample) -> None:
    _use(sample.stored)
    gc.collect()  # what earlier tests left for the collector goes first
    before = open_fds()
    for _ in range(15):
        _use(sample.stored)
        _use(sample.deflated)
        with OzxStore(sample.stored) as store:
            assert store.get_sync("zarr.json") is not None
        assert _reader.get_reader(str(sample.stored)) is not None
    assert fds_to(sample.stored) == [] and fds_to(sample.deflated) == []
    assert open_fds() - before == set()


def test_read_layer_data_releases_descriptors(sample: Sample) -> None:
    """Layers hold the archive open while napari uses them; dropping them releases it."""
    _use(sample.stored)
    gc.collect()  # what earlier tests left for the collector goes first
    before = open_fds()
    for _ in range(10):
        layers = read_layer_data(str(sample.stored))
        np.asarray(layers[0][0][0][0, 0, :16, :16])
        assert len(fds_to(sample.stored)) == 1
        del layers
    gc.collect()
    assert fds_to(sample.stored) == []
    assert open_fds() - before == set()


FAILING = [
    "zip_garbage.ozx",  # fails while parsing the end records
    "cd_bad_signature.ozx",  # ... the central directory
    "encrypted_root_zarr_json.ozx",  # ... reading the root document
    "json_invalid.ozx",  # ... parsing it
    "level_missing.ozx",  # ... after the store and root group exist
    "unknown_codec.ozx",  # ... building a zarr array
    "ext_must_understand_array.ozx",
]


def test_failed_opens_release_descriptors() -> None:
    """A file that fails to open leaves no descriptor behind, with no help from the GC."""
    paths = [CORPUS_FILES / n for n in FAILING]
    _reader.read(str(paths[0]))  # warm up
    gc.collect()
    before = open_fds()
    gc.disable()  # descriptors must be closed deterministically, not by a GC pass
    try:
        for _ in range(10):
            for p in paths:
                with pytest.raises(OzxError):
                    read_layer_data(str(p))
                assert fds_to(p) == [], f"{p.name}: descriptor left open after the error"
                assert _reader.get_reader(str(p)) is not None
    finally:
        gc.enable()
    # nothing opened here is still open (descriptors of earlier tests, such as a pooled
    # connection the server closed, may close meanwhile: that is not this test's leak)
    assert open_fds() - before == set()


# --------------------------------------------------------------------------- threads


def _long_lived_threads() -> set[threading.Thread]:
    """Threads of pools that persist by design once started: zarr's event loop thread and
    that loop's default executor (zarr's ``asyncio.to_thread``), dask's default pool."""
    import dask.threaded
    from zarr.core import sync as zsync

    keep: set[threading.Thread] = set()
    if zsync.iothread[0] is not None:
        keep.add(zsync.iothread[0])
    loop = zsync.loop[0]
    executor = getattr(loop, "_default_executor", None) if loop is not None else None
    for ex in (executor, getattr(zsync, "_executor", None), dask.threaded.default_pool):
        keep |= set(getattr(ex, "_threads", ()) or ())
    return keep


def test_no_thread_leak(sample: Sample) -> None:
    _use(sample.stored)
    _reader.read(str(CORPUS_FILES / "json_invalid.ozx"))
    before = set(threading.enumerate())
    for _ in range(5):
        _use(sample.stored)
        _use(sample.deflated)
        for n in FAILING:
            _reader.read(str(CORPUS_FILES / n))
    with open_ome_zarr(sample.stored) as oz:
        (img,) = oz.images()
        run_threads(
            N_THREADS, lambda i: img.levels[i % 3][i % 2, 0, :8, :8].compute(scheduler="sync")
        )
    gc.collect()
    after = set(threading.enumerate())
    new = {t for t in after - before if t.is_alive()} - _long_lived_threads()
    assert not new, f"threads left behind: {sorted(t.name for t in new)}"
