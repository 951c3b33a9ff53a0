"""A remote first open costs the round trips its dependencies need, no more: the archive's
index and metadata in one (no HEAD first), the shard indexes and thumbnails napari's
first slices read fetched while napari makes its layers, and a new view of one channel
bringing the other channels'.

Structure, not time: a local HTTP server (tests/_support/httpserver.py) answers every
request after a latency and logs when it answered; a request that started only after
another was answered depends on it, and the depth of that chain is what is counted."""

from __future__ import annotations

import time

import numpy as np
import pytest

from napari_ozx._reader import read
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.read.fastpaths import set_readahead_mb
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ozx import store as ozx_store
from tests._support.httpserver import FastServer
from tests._support.omegen import write_image
from tests._support.readahead import wait_idle
from tests._support.zipbuild import zip_directory

pytestmark = pytest.mark.network

SHAPE = (2, 9, 64, 96)  # c, z, y, x: napari's first slices at z=0 and z=(9-1)//2=4
LATENCY = 0.3  # seconds before every answer: a dependency is a gap of a whole latency


class _Log(list):
    """The server's request log, with the time each answer was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item) -> None:
        self.times.append(time.monotonic())
        super().append(item)

    def clear(self) -> None:
        self.times.clear()
        super().clear()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("first-open")
    data = np.random.default_rng(43).integers(0, 4000, SHAPE, dtype=np.uint16)
    write_image(root / "stack.ome.zarr", data, levels=3, chunks=(1, 1, 32, 32))
    zip_directory(root / "stack.ome.zarr", root / "stack.ozx")
    with FastServer(root) as srv:
        srv.requests = _Log()
        srv.latency = LATENCY
        yield srv, data


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    # the archive is small: the leading bytes fetched at open would hold it whole (its
    # documents take its first 6 KiB)
    monkeypatch.setattr(ozx_store, "SPECULATIVE_HEAD", 8192)
    set_readahead_mb(None)
    yield
    set_readahead_mb(None)


def _depth(srv, since: float = 0.0, until: float = float("inf")) -> int:
    """How many requests long the longest chain is in which each request started only
    after the one before was answered (a request concurrent with another starts well
    within half a latency of it); of the requests started between ``since`` and
    ``until`` (monotonic clock)."""
    spans = sorted((t - LATENCY, t) for t in srv.requests.times)
    spans = [(a, b) for a, b in spans if since <= a < until]
    depth: list[int] = []
    for i, (start, _) in enumerate(spans):
        before = [depth[j] for j in range(i) if spans[j][1] <= start + LATENCY / 2]
        depth.append(1 + max(before, default=0))
    return max(depth, default=0)


def _idle() -> None:
    """Until the planner's queue has drained and no remote chunk fetch is in flight."""
    wait_idle(timeout=20.0, delayed=False)


def _view(level, c: int, z: int) -> np.ndarray:
    # what napari reads: the channel's view, the plane as z:z+1
    return np.asarray(level[c][z : z + 1, :, :])[0]


def test_a_remote_ozx_opens_in_one_round_trip(served):
    """The end records, the central directory and the leading metadata of a remote
    ``.ozx`` come in one round trip: no HEAD before them, no separate request for the
    central directory (it lies in the tail read), the documents from the head read."""
    srv, data = served
    _idle()
    srv.reset()
    with open_ome_zarr(f"{srv.url}/stack.ozx") as oz:
        (image,) = oz.images()
        assert image.arrays[0].shape == SHAPE
        assert _depth(srv) == 1, srv.requests
        assert [m for m, _, _ in srv.requests] == ["GET", "GET"], srv.requests
        ranges = sorted(r for _, _, r in srv.requests)
        assert ranges[0].startswith("bytes=-"), "the tail as a suffix range"
        assert ranges[1].startswith("bytes=0-"), "the head"
        np.testing.assert_array_equal(np.asarray(image.levels[0][1, 3]), data[1, 3])


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_napari_s_first_slices_wait_one_round_trip_each(served, name):
    """A headless first open as napari makes it: the read, then each channel's layer
    sliced at z=0 (its view and thumbnail at the coarsest level), then at the middle
    step (the view at level 0 and the thumbnail). The shard indexes and thumbnails those
    read were fetched while the layers were being made: the thumbnails cost nothing, a
    view one round trip (its chunks, not its shard index first)."""
    srv, data = served
    _idle()  # (another test's read-ahead)
    srv.reset()
    layers = read(f"{srv.url}/{name}")
    (levels, kwargs, kind), *_ = layers
    assert kind == "image" and kwargs["channel_axis"] == 0
    _idle()
    mid = (SHAPE[1] - 1) // 2
    thumbs = len(srv.requests)
    for z in (0, mid):  # napari's thumbnails (and first views) of every layer
        for c in range(SHAPE[0]):
            _view(levels[-1], c, z)
    assert len(srv.requests) == thumbs, "the thumbnails were not fetched ahead"
    _idle()  # (what the thumbnails' reads asked to be read ahead)
    t0 = time.monotonic()
    np.testing.assert_array_equal(_view(levels[0], 0, mid), data[0, mid])
    t1 = time.monotonic()
    # the view's chunks only: its shard index was read ahead
    assert _depth(srv, t0, t1) == 1, srv.requests
    np.testing.assert_array_equal(_view(levels[0], 1, mid), data[1, mid])


def test_a_new_view_of_one_channel_brings_the_others(served):
    """napari reads a zoomed view of every channel in turn: the first one's read fetches
    the others' too, so the second channel's costs no request."""
    srv, data = served
    _idle()
    set_readahead_mb(0)  # siblings only
    (levels, _, _), *_ = read_layer_data(f"{srv.url}/stack.ozx")
    for c in range(SHAPE[0]):
        _view(levels[1], c, 2)
    _idle()
    np.testing.assert_array_equal(_view(levels[0], 0, 2), data[0, 2])  # zoomed in
    _idle()
    srv.reset()
    np.testing.assert_array_equal(_view(levels[0], 1, 2), data[1, 2])
    assert srv.requests == []
