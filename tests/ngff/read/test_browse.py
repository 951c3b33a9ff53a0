"""Browsing remote images: a plane's requests concurrent, sibling channels in
the same round trip, read-ahead along the moved axis within its budget, dropped when the
user moves elsewhere; remote directories read by the direct reader. Against a real local
HTTP server with added latency (tests/_support/httpserver.py), never mocks."""

from __future__ import annotations

import gc
import threading
import time
import weakref
import zipfile
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.read import fastread
from napari_ozx.ngff.read.fastpaths import readahead_budget, set_readahead_mb
from napari_ozx.ngff.read.lazy import source_reader
from napari_ozx.ozx import store as ozx_store
from tests._support.httpserver import Server
from tests._support.omegen import write_image
from tests._support.readahead import wait_idle
from tests._support.zipbuild import zip_directory

#: every test here talks to a local server (tests/_support/httpserver.py or moto's)
pytestmark = pytest.mark.network

pytest.importorskip("aiohttp")

SHAPE = (2, 8, 64, 96)  # c, z, y, x: 2 x 3 chunks of 32 per plane


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("browse")
    data = np.random.default_rng(30).integers(0, 4000, SHAPE, dtype=np.uint16)
    write_image(root / "stack.ome.zarr", data, levels=2, chunks=(1, 1, 32, 32))
    zip_directory(root / "stack.ome.zarr", root / "stack.ozx")
    with Server(root) as srv:
        srv.latency = 0.01
        yield srv, data


@pytest.fixture(autouse=True)
def _budget(monkeypatch):
    # these archives are small: the leading bytes fetched at open would hold them whole
    monkeypatch.setattr(ozx_store, "SPECULATIVE_HEAD", 4096)
    set_readahead_mb(None)
    yield
    # nothing a test planned may still wait or run in the next one (whose counts it would
    # change): the read-ahead after a test's last reads runs on the shared Later thread
    _idle()
    set_readahead_mb(None)


_idle = wait_idle


def _levels(url: str) -> list:
    (data, _meta, kind), *_ = read_layer_data(url)
    assert kind == "image"
    return data


def _plane(levels: list, c: int, z: int) -> np.ndarray:
    # what napari reads: the channel's view, the plane as z:z+1, the tile
    return np.asarray(levels[0][c][z : z + 1, :, :])[0]


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_direct_reader_serves_remote_ozx_and_directories(served, name):
    srv, data = served
    levels = _levels(f"{srv.url}/{name}")
    reader = source_reader(levels[0])
    assert isinstance(reader.reader, fastread.FastReader), "the direct reader reads it"
    assert reader.reader.remote
    assert reader.browse is not None
    np.testing.assert_array_equal(_plane(levels, 1, 3), data[1, 3])


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_sibling_channel_comes_with_the_first(served, name):
    """'Channel siblings': after napari read both channels at z=0, its read of channel 0
    at z=1 also fetches channel 1 at z=1; the read of channel 1 then sends nothing."""
    srv, data = served
    set_readahead_mb(0)  # siblings only
    levels = _levels(f"{srv.url}/{name}")
    for c in (0, 1):
        _plane(levels, c, 0)
    _idle()
    np.testing.assert_array_equal(_plane(levels, 0, 1), data[0, 1])
    _idle()
    srv.reset()
    np.testing.assert_array_equal(_plane(levels, 1, 1), data[1, 1])
    assert srv.requests == []


def test_hidden_channel_is_not_fetched(served):
    """A channel napari stopped reading (hidden layer) is not fetched at the next step."""
    srv, _ = served
    set_readahead_mb(0)
    levels = _levels(f"{srv.url}/stack.ome.zarr")
    _plane(levels, 0, 0)
    _plane(levels, 1, 0)
    _plane(levels, 0, 1)  # channel 1 hidden from here on
    _idle()
    _plane(levels, 0, 2)
    _idle()
    srv.reset()
    _plane(levels, 1, 2)
    assert srv.requests, "channel 1 at z=2 was fetched although napari did not read it at z=1"


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_read_ahead_along_the_moved_axis(served, name):
    srv, data = served
    levels = _levels(f"{srv.url}/{name}")
    for z in (0, 1, 2):
        for c in (0, 1):
            np.testing.assert_array_equal(_plane(levels, c, z), data[c, z])
    _idle()
    srv.reset()
    for z in (3, 4):  # the next planes in the direction of travel
        for c in (0, 1):
            np.testing.assert_array_equal(_plane(levels, c, z), data[c, z])
    assert srv.requests == []
    # and backwards: the previous plane was fetched too
    _idle()
    srv.reset()
    for c in (0, 1):
        np.testing.assert_array_equal(_plane(levels, c, 3), data[c, 3])
    assert srv.requests == []


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_read_ahead_waits_for_napari_s_draw(served, name, monkeypatch):
    """'Read-ahead never delays the plane asked for now.' napari draws a plane right
    after reading it; read-ahead answers arriving meanwhile slowed that draw. So nothing
    is read ahead until READAHEAD_DELAY_S after napari's reads at a position (the
    siblings of its read, which it waits for, go at once), and then the next plane is."""
    from napari_ozx.ngff.read import browse
    from napari_ozx.ozx.pools import later

    monkeypatch.setattr(browse, "READAHEAD_DELAY_S", 2.0)
    srv, data = served
    levels = _levels(f"{srv.url}/{name}")
    for z in (0, 1):
        for c in (0, 1):
            np.testing.assert_array_equal(_plane(levels, c, z), data[c, z])
    _idle(delayed=False)  # siblings and shard indexes: sent and answered
    sent = len(srv.requests)
    assert later().pending() == 1, "the read-ahead plan waits"
    time.sleep(0.2)
    assert len(srv.requests) == sent, "read ahead before napari could draw"
    _idle()
    assert len(srv.requests) > sent
    srv.reset()
    for c in (0, 1):
        np.testing.assert_array_equal(_plane(levels, c, 2), data[c, 2])
    assert srv.requests == [], "the next plane was not read ahead after the delay"
    _idle()  # nothing left waiting for the next test


def test_after_a_jump_both_neighbours_are_read_ahead(served):
    srv, data = served
    levels = _levels(f"{srv.url}/stack.ome.zarr")
    for z in (1, 5):  # a jump along z
        for c in (0, 1):
            _plane(levels, c, z)
    _idle()
    srv.reset()
    for c in (0, 1):
        np.testing.assert_array_equal(_plane(levels, c, 4), data[c, 4])
    _idle()
    # (that step of one then reads ahead further down: only z=4's own chunks count)
    z4 = [r for r in srv.requests if "/0/c/0/4/" in r[1] or "/0/c/1/4/" in r[1]]
    assert z4 == [], "the plane before the jump's target was not read ahead"
    srv.reset()
    for c in (0, 1):
        np.testing.assert_array_equal(_plane(levels, c, 6), data[c, 6])
    _idle()
    z6 = [r for r in srv.requests if "/0/c/0/6/" in r[1] or "/0/c/1/6/" in r[1]]
    assert z6 == [], "the plane after the jump's target was not read ahead"


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_siblings_take_over_read_ahead_still_queued(served, name, monkeypatch):
    """A plane read ahead but still queued (the read-ahead requests are slow or many) is
    sent at once when napari arrives there: channel 0's read sends its own chunks and
    the sibling fetch sends channel 1's, so channel 1 does not wait for the read-ahead
    queue nor cost napari's next read a round trip of its own."""
    from concurrent.futures import ThreadPoolExecutor

    srv, data = served
    gate = threading.Event()
    stuck = ThreadPoolExecutor(1, thread_name_prefix="stuck-ahead")
    stuck.submit(gate.wait, 30)  # every read-ahead request queues behind this
    monkeypatch.setattr(fastread, "_readahead_pool", lambda: stuck)
    try:
        levels = _levels(f"{srv.url}/{name}")
        for z in (0, 1):  # a step of one: z=2 is planned ahead, and stays queued
            for c in (0, 1):
                _plane(levels, c, z)
        np.testing.assert_array_equal(_plane(levels, 0, 2), data[0, 2])
        settled, last = time.monotonic() + 10, -1
        while time.monotonic() < settled and len(srv.requests) != last:
            last = len(srv.requests)  # the sibling fetch's requests, until none come
            time.sleep(0.3)
        srv.reset()
        np.testing.assert_array_equal(_plane(levels, 1, 2), data[1, 2])
        assert srv.requests == [], "channel 1 at z=2 waited in the read-ahead queue"
    finally:
        gate.set()
        stuck.shutdown(wait=True)
        _idle()


def _shard_requests(srv, root: Path, name: str, c: int, z: int) -> list:
    """The requests served that touch the shard of channel ``c``, plane ``z`` of level 0
    (its own key in a directory; its member's bytes in an ``.ozx``)."""
    if name.endswith(".ozx"):
        with zipfile.ZipFile(root / name) as zf:
            info = zf.getinfo(f"0/c/{c}/{z}/0/0")
        start = info.header_offset  # the local header, then the member's bytes
        stop = start + 30 + len(info.filename) + len(info.extra) + info.compress_size
        out = []
        for _method, path, rng in srv.requests:
            if path.endswith(name) and rng and rng.startswith("bytes=") and "-" in rng[6:]:
                a, _, b = rng[6:].partition("-")
                if a and b and start <= int(a) and int(b) < stop:
                    out.append(rng)
        return out
    return [r for r in srv.requests if r[1].endswith(f"{name}/0/c/{c}/{z}/0/0")]


def _tile(levels: list, c: int, z: int) -> np.ndarray:
    # one 32 x 32 tile: part of the plane's shard, so its chunk is read by a byte range
    # after the shard's index
    return np.asarray(levels[0][c][z : z + 1, 0:32, 0:32])[0]


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
@pytest.mark.parametrize("budget_mb", [None, 0])
def test_a_jump_costs_one_round_trip_once_indexes_are_read_ahead(served, name, budget_mb):
    """'Read-ahead along the axis the user moves' and 'one round trip per new plane':
    after napari's first read of a tile, the shard indexes of every plane it can move to
    (all of z, at that level and place) are read in the background, so a jump to a far
    plane sends only its chunk's byte range, not the index and then the range. With the
    read-ahead budget at 0 nothing is read ahead: the jump pays the index too."""
    srv, data = served
    set_readahead_mb(budget_mb)
    levels = _levels(f"{srv.url}/{name}")
    np.testing.assert_array_equal(_tile(levels, 0, 0), data[0, 0, :32, :32])
    _idle()
    srv.reset()
    np.testing.assert_array_equal(_tile(levels, 0, 6), data[0, 6, :32, :32])
    sent = _shard_requests(srv, srv.root, name, 0, 6)
    _idle()
    assert len(sent) == (1 if budget_mb is None else 2), sent


def test_index_read_ahead_is_nearest_first_and_bounded(served, monkeypatch):
    """The indexes are read once (a second call sends nothing), nearest to the plane
    shown first, and never more than half the index cache holds."""
    srv, _ = served
    set_readahead_mb(0)  # nothing but the calls made here
    levels = _levels(f"{srv.url}/stack.ome.zarr")
    reader = source_reader(levels[0]).reader
    box = [(0, 1), (0, SHAPE[1]), (0, 32), (0, 32)]
    monkeypatch.setattr(fastread, "INDEX_CACHE_BYTES", 2 * 3 * reader.layout.index_size)
    srv.reset()
    assert reader.fetch_indexes(box, [0, 5, 0, 0], wanted=lambda: False) == 0
    assert srv.requests == [], "sent although no longer wanted"
    assert reader.fetch_indexes(box, [0, 5, 0, 0]) == 3  # the cap
    got = sorted(int(r[1].split("/0/c/0/")[1].split("/")[0]) for r in srv.requests)
    assert got == [4, 5, 6], "not the planes nearest to z=5"
    monkeypatch.setattr(fastread, "INDEX_CACHE_BYTES", 4 << 20)
    srv.reset()
    assert reader.fetch_indexes(box, [0, 5, 0, 0]) == SHAPE[1] - 3
    assert reader.fetch_indexes(box, [0, 5, 0, 0]) == 0
    assert len(srv.requests) == SHAPE[1] - 3


@pytest.mark.parametrize("name", ["stack.ozx", "stack.ome.zarr"])
def test_cached_chunks_hold_nothing_the_garbage_collector_tracks(served, name):
    """The remote chunk cache keeps up to hundreds of MiB of chunks over a browse: its
    keys are ints and its arrays own their bytes or view ``bytes``, so that filling it
    adds no objects for the garbage collector to track (they drove collections of
    napari's whole heap during remote browsing)."""
    import gc

    srv, data = served
    levels = _levels(f"{srv.url}/{name}")
    np.testing.assert_array_equal(_plane(levels, 1, 2), data[1, 2])
    _idle()
    reader = source_reader(levels[0]).reader
    box = [(1, 2), (2, 3), (0, SHAPE[2]), (0, SHAPE[3])]
    coords = reader.chunk_coords(box)
    assert len(coords) == 6
    for cc in coords:
        key = reader._ckey(cc)
        assert type(key) is int
        hit, value = fastread._remote_chunks.lookup(key)
        assert hit and value is not None
        chain = value
        while chain is not None:
            assert not gc.is_tracked(chain), type(chain)
            chain = getattr(chain, "base", None)
    assert (
        len({reader._ckey(cc) for cc in reader.chunk_coords([(0, 2), (0, 8), (0, 64), (0, 96)])})
        == 2 * 8 * 6
    )


def test_read_ahead_off_with_a_zero_budget(served):
    srv, data = served
    set_readahead_mb(0)
    assert readahead_budget() == 0
    levels = _levels(f"{srv.url}/stack.ozx")
    for z in (0, 1, 2):
        for c in (0, 1):
            _plane(levels, c, z)
    _idle()
    srv.reset()
    np.testing.assert_array_equal(_plane(levels, 0, 3), data[0, 3])
    assert srv.requests, "nothing was to be read ahead"


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("NAPARI_OZX_READAHEAD_MB", "12")
    assert readahead_budget() == 12 << 20
    monkeypatch.setenv("NAPARI_OZX_READAHEAD_MB", "0")
    assert readahead_budget() == 0
    monkeypatch.setenv("NAPARI_OZX_READAHEAD_MB", "lots")
    assert readahead_budget() == 192 << 20  # default, said in the log
    with pytest.raises(ValueError, match=">= 0"):
        set_readahead_mb(-1)


def test_jump_drops_what_was_planned(served):
    """After a jump elsewhere, read-ahead planned for the old neighbourhood is unwanted."""
    srv, _ = served
    levels = _levels(f"{srv.url}/stack.ozx")
    for z in (0, 1):
        _plane(levels, 0, z)
    browse, level = source_reader(levels[0]).browse
    c0z2 = (0, (2, 3), (0, 64), (0, 96))
    assert browse.wanted(level, c0z2)
    _plane(levels, 0, 6)  # a jump
    assert not browse.wanted(level, c0z2)
    _idle()


def test_memory_stays_within_the_cache_over_a_long_browse(served, monkeypatch):
    srv, data = served
    set_readahead_mb(0.05)
    monkeypatch.setattr(fastread, "REMOTE_CHUNK_CACHE_BYTES", 40_000)
    fastread._remote_chunks.clear()
    levels = _levels(f"{srv.url}/stack.ozx")
    limit = fastread._remote_chunks.max_bytes
    assert limit == 40_000 + readahead_budget()
    for z in [*range(8), *range(7, -1, -1)] * 2:
        for c in (0, 1):
            np.testing.assert_array_equal(_plane(levels, c, z), data[c, z])
        assert fastread._remote_chunks.nbytes <= limit
    _idle()
    assert fastread._remote_chunks.nbytes <= limit


def test_closing_the_layer_frees_readers_and_stops_read_ahead(served):
    srv, _ = served
    levels = _levels(f"{srv.url}/stack.ozx")
    for z in (0, 1):
        _plane(levels, 0, z)
    browse, _ = source_reader(levels[0]).browse
    ref = weakref.ref(source_reader(levels[0]).reader)
    _idle()
    del levels
    gc.collect()
    assert ref() is None
    assert browse.reader(0) is None


def test_concurrent_reads_of_the_same_planes_agree(served):
    """Reads stay thread-safe: napari's slicing thread and others read the same planes
    (each chunk fetched once, the others wait for it)."""
    srv, data = served
    levels = _levels(f"{srv.url}/stack.ome.zarr")
    errors: list[BaseException] = []

    def browse(c: int) -> None:
        try:
            for z in range(SHAPE[1]):
                np.testing.assert_array_equal(_plane(levels, c, z), data[c, z])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=browse, args=(c % 2,)) for c in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    _idle()


def test_failed_chunk_is_one_error_naming_the_url(served):
    """A chunk the server refuses is an error naming the URL and the reason: never a
    hang, never a tile of fill value; siblings fetched for it fail the same way."""
    srv, _ = served
    set_readahead_mb(0)
    levels = _levels(f"{srv.url}/stack.ome.zarr")
    _plane(levels, 0, 0)
    _plane(levels, 1, 0)
    srv.fail["/0/c/1/5/0/0"] = 403
    try:
        with pytest.raises(OzxError, match=r"stack\.ome\.zarr/0/c/1/5/0/0.*403"):
            _plane(levels, 1, 5)
    finally:
        srv.fail.clear()
    _idle()


def test_remote_directory_store_get_sync_reads_what_zarr_reads(served):
    """RemoteDirectoryStore.get_sync gives the object's bytes for every kind of range
    zarr asks for, None for a missing object, and a range or suffix (what the shard
    reads use) even from a server that ignores Range."""
    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
    from zarr.buffer import default_buffer_prototype

    from napari_ozx.ozx.remote.store import open_remote_store

    srv, _ = served
    store = open_remote_store(f"{srv.url}/stack.ome.zarr")
    proto = default_buffer_prototype()
    key = "0/c/0/0/0/0"
    raw = (srv.root / "stack.ome.zarr" / key).read_bytes()
    cases = {
        None: raw,
        RangeByteRequest(3, 17): raw[3:17],
        OffsetByteRequest(5): raw[5:],
        SuffixByteRequest(9): raw[-9:],
    }
    for ignore in (False, True):
        srv.ignore_range = ignore
        try:
            for rng, want in cases.items():
                if ignore and isinstance(rng, OffsetByteRequest):
                    continue  # whole or tail cannot be told apart (zarr never asks this)
                got = store.get_sync(key, prototype=proto, byte_range=rng)
                assert got.to_bytes() == want, (rng, ignore)
        finally:
            srv.ignore_range = False
    assert store.get_sync("0/c/9/9/9/9", prototype=proto) is None  # missing: fill value


def test_first_read_brings_the_channels_shown_at_open(served):
    """Before napari has moved, a channel's first read brings the same tile of the other
    channels shown at open: napari reads them next."""
    srv, data = served
    set_readahead_mb(0)
    levels = _levels(f"{srv.url}/stack.ozx")
    np.testing.assert_array_equal(_plane(levels, 0, 4), data[0, 4])
    _idle()
    srv.reset()
    np.testing.assert_array_equal(_plane(levels, 1, 4), data[1, 4])
    assert srv.requests == []


def test_first_read_skips_channels_hidden_at_open(tmp_path):
    data = np.random.default_rng(31).integers(0, 4000, SHAPE, dtype=np.uint16)
    omero = {
        "channels": [
            {"label": "a", "color": "FF0000", "active": True},
            {"label": "b", "color": "00FF00", "active": False},
        ]
    }
    write_image(tmp_path / "h.ome.zarr", data, levels=2, chunks=(1, 1, 32, 32), omero=omero)
    set_readahead_mb(0)
    with Server(tmp_path) as srv:
        levels = _levels(f"{srv.url}/h.ome.zarr")
        _plane(levels, 0, 2)
        _idle()
        srv.reset()
        np.testing.assert_array_equal(_plane(levels, 1, 2), data[1, 2])
        assert srv.requests, "a channel hidden at open was fetched"
        _idle()


@pytest.mark.parametrize("extra", [0, 24, 600])
def test_first_range_of_a_member_with_its_local_header(tmp_path, extra):
    """Remote: a member's first byte range is read together with its local header (one
    round trip); a local extra field longer than the window costs one more read, never
    a wrong byte; a header naming another member is still an error."""
    import struct

    from zarr.abc.store import RangeByteRequest, SuffixByteRequest
    from zarr.buffer import default_buffer_prototype

    from napari_ozx.errors import ZipFormatError
    from napari_ozx.ozx.remote.source import FsspecRangeReader
    from napari_ozx.ozx.store import OzxStore

    payload = np.random.default_rng(extra).bytes(50_000)
    path = tmp_path / "x.ozx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
        zf.writestr("a/pad", b"\0" * 8192)  # a/c/0's header lies past what open fetched
        info = zipfile.ZipInfo("a/c/0")
        if extra:
            info.extra = struct.pack("<HH", 0xCAFE, extra - 4) + b"\0" * (extra - 4)
        zf.writestr(info, payload)
    with zipfile.ZipFile(path) as zf:
        data_at = zf.getinfo("a/c/0").header_offset + 30 + len("a/c/0") + extra
    proto = default_buffer_prototype()
    with Server(tmp_path) as srv:
        for rng, want in [
            (RangeByteRequest(1000, 1100), payload[1000:1100]),
            (SuffixByteRequest(64), payload[-64:]),
        ]:
            store = OzxStore(FsspecRangeReader(f"{srv.url}/x.ozx"))
            srv.reset()
            got = store.get_sync("a/c/0", prototype=proto, byte_range=rng)
            assert got.to_bytes() == want
            assert len(srv.requests) == (2 if extra <= 512 else 3), srv.requests
            # the window starts where the data would start without an extra field: sent
            # before the header said where it starts (with it, not after it)
            first = data_at + (
                rng.start if isinstance(rng, RangeByteRequest) else len(payload) - 64
            )
            starts = [int(r[2][6:].split("-")[0]) for r in srv.requests if r[2]]
            assert first - extra in starts, (starts, first, extra)
            store.close()
        # a central record pointing at another member's local header
        raw = bytearray(path.read_bytes())
        at = raw.index(b"a/c/0", raw.index(b"PK\x01\x02"))  # the central record's name
        raw[at : at + 5] = b"a/c/1"
        (tmp_path / "bad.ozx").write_bytes(bytes(raw))
        store = OzxStore(FsspecRangeReader(f"{srv.url}/bad.ozx"))
        with pytest.raises(ZipFormatError, match="names another member"):
            store.get_sync("a/c/1", prototype=proto, byte_range=RangeByteRequest(0, 10))
        store.close()
