"""A direct chunk read path for the layouts our writer (and most tools) produce.

:func:`fast_reader` gives a :class:`FastReader` for an array whose layout
:func:`.chunks.chunk_layout` takes (else ``None``, saying why once, :mod:`.fastpaths`;
zarr-python reads it then, as it does a store without ``get_sync``). It keeps each
shard's decoded index (:data:`INDEX_CACHE_BYTES`), reads the inner chunks a box needs with
few synchronous ``get_sync`` calls (neighbouring ranges merged), and decodes them through
:mod:`.chunks` (zarr-python's own codecs: same bytes, same pixels; broken data a
:class:`~napari_ozx.errors.ChunkDecodeError`), several at once on a small pool. Remote
stores (``threaded_io``): the requests of one read concurrent, decoded chunks kept
(:data:`REMOTE_CHUNK_CACHE_BYTES`), each fetched once at a time, read-ahead on its own
threads. Why (zarr's per-tile machinery against the compiled readers):
``docs/design/reading.md``; measured by ``benchmarks/bench_compiled.py``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from napari_ozx.ngff.read.chunks import EMPTY, ChunkLayout, chunk_layout
from napari_ozx.ngff.read.indexing import plain_box
from napari_ozx.ozx.lru import ByteLRU
from napari_ozx.ozx.pools import LightPool, in_pool, light_pool, shared_pool

if TYPE_CHECKING:
    import zarr

__all__ = ["INDEX_CACHE_BYTES", "FastReader", "fast_reader"]

logger = logging.getLogger(__name__)

#: byte budget of the decoded shard indexes kept per array (16 bytes per inner chunk:
#: 4 MiB holds the indexes of 262,144 inner chunks)
INDEX_CACHE_BYTES = 4 << 20
#: byte ranges of one shard closer than this are read with one call (local stores: a
#: skipped gap costs a page-cache copy, a call costs more)
MERGE_GAP = 64 << 10
#: the same for remote stores, where every byte is transferred: zarr-python writes a
#: shard's inner chunks in Morton order, so one z-plane's chunks alternate with the next
#: plane's; merging across those ~chunk-sized gaps read a remote plane at 1.75x its
#: stored bytes (``benchmarks/bench_remote.py``). Only near-adjacent ranges are merged;
#: the requests of one read run concurrently (``threaded_io``).
REMOTE_MERGE_GAP = 4 << 10
#: shards of a local container (``.ozx``) up to this size are read whole, as zarr-python
#: read them when a dask chunk covered the shard: the store then verifies the member's
#: CRC-32 (``OzxStore.verify_crc_max``), which ranged reads cannot. Locally that costs
#: one page-cache pread of <= 1 MiB; remote containers (``threaded_io``) keep
#: ranged reads, where bytes are what costs.
WHOLE_SHARD_BYTES = 1 << 20
#: decode on threads only when a request needs at least this many chunks
_THREAD_MIN_CHUNKS = 4
#: decoded inner chunks of remote arrays kept (one LRU for the process): napari's
#: opportunistic dask cache never sees the direct reads of :mod:`.lazy`, and remotely a
#: re-read (a pan back, a re-slice) costs requests. Local arrays are not cached: a
#: re-read is a page-cache pread and one decode. The cache
#: holds this much plus the read-ahead budget (:func:`.fastpaths.readahead_budget`),
#: where read-ahead (:mod:`.browse`) puts the planes it fetches.
REMOTE_CHUNK_CACHE_BYTES = 64 << 20
_MAX_SIZES = 1 << 16

#: requests to remote stores in flight at once for reads someone waits for (napari's
#: tiles and the same tiles of their sibling channels): a new plane's chunks in one round
#: trip. fsspec/aiohttp reuse their connections (keep-alive) between them.
IO_THREADS = 32
#: requests in flight at once for read-ahead (:mod:`.browse`), on their own threads so
#: that a read napari waits for never queues behind them
READAHEAD_IO_THREADS = 24
_T = TypeVar("_T")


def _io_pool() -> LightPool:
    return light_pool("ozx-io", IO_THREADS)


def _readahead_pool() -> LightPool:
    return light_pool("ozx-ahead", READAHEAD_IO_THREADS)


def _decode_threads() -> int:
    import os

    return min(4, os.cpu_count() or 1)


def _decode_pool() -> ThreadPoolExecutor:
    return shared_pool("ozx-decode", _decode_threads())


def _remote_cache_bytes() -> int:
    from napari_ozx.ngff.read.fastpaths import readahead_budget

    return REMOTE_CHUNK_CACHE_BYTES + readahead_budget()


_remote_chunks: ByteLRU[np.ndarray] = ByteLRU(
    _remote_cache_bytes, lambda a: int(a.nbytes), max_item=lambda limit: limit // 4
)
_reader_ids = itertools.count()


def _has_get_sync(store: Any) -> bool:
    return callable(getattr(store, "get_sync", None))


def fast_reader(array: zarr.Array) -> FastReader | None:
    """A :class:`FastReader` for ``array``, or ``None`` when zarr-python must read it
    (why is said once in the log, see :mod:`.fastpaths`)."""
    from napari_ozx.ngff.read.fastpaths import declined, enabled

    if not enabled():
        return None
    try:
        store = array.store_path.store
        if not _has_get_sync(store):
            layout: ChunkLayout | str = (
                f"a store without synchronous reads ({type(store).__name__})"
            )
        else:
            layout = chunk_layout(array)
    except Exception as e:  # anything unexpected in zarr's model: let zarr read it
        layout = f"unexpected array metadata ({type(e).__name__}: {e})"
    if isinstance(layout, str):
        declined("direct chunk reads", layout)
        return None
    return FastReader(array, layout)


class FastReader:
    """Reads ``array[selection]`` for basic slice selections (what dask asks for)."""

    def __init__(self, array: zarr.Array, layout: ChunkLayout) -> None:
        from zarr.buffer import default_buffer_prototype

        self.array = array
        self.layout = layout
        self.store: Any = array.store_path.store
        self.dtype = layout.dtype
        self.fill = layout.fill
        self._proto = default_buffer_prototype()
        from napari_ozx.ozx.protocol import as_container

        container = as_container(self.store)
        remote = bool(getattr(self.store, "threaded_io", False))
        self._container = None if remote else container
        # decoded chunks of remote arrays, keyed by this reader (a re-pointed or reopened
        # array gets a new reader, so never another version's chunks)
        self._cache = _remote_chunks if remote else None
        self._threaded_io = remote
        self._merge_gap = REMOTE_MERGE_GAP if remote else MERGE_GAP
        self._uid = next(_reader_ids)  # < 2**64 in any process's life
        self._grid = tuple(-(-s // c) for s, c in zip(layout.shape, layout.chunk, strict=True))
        self._indexes: ByteLRU[np.ndarray] = ByteLRU(
            lambda: INDEX_CACHE_BYTES,
            lambda a: int(a.nbytes),
            max_item=lambda _: 1 << 62,  # the newest index is always kept
            min_items=1,
        )
        # member sizes of the container's shards (a central-directory lookup costs as much
        # as the read of a tile's bytes); the container is read-only
        self._sizes: dict[tuple[int, ...], int | None] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # for dask.distributed: rebuilt from the (picklable) zarr array on the worker;
        # locks and caches are per process
        return _rebuild, (self.array,)

    # ------------------------------------------------------------------ keys and I/O

    def _ckey(self, coords: tuple[int, ...]) -> int:
        """One remote chunk of this reader as an int (the remote cache's and the fetches'
        key): ints are not tracked by the garbage collector, tuples of tuples are."""
        flat = 0
        for c, n in zip(coords, self._grid, strict=True):
            flat = flat * n + c
        return (flat << 64) | self._uid

    def _key(self, coords: tuple[int, ...]) -> str:
        return self.layout.key(coords)

    def _get(self, key: str, byte_range: Any = None) -> memoryview | None:
        buf = self.store.get_sync(key, prototype=self._proto, byte_range=byte_range)
        # a view, not ``to_bytes()``: that copy cost ~15% of a tile's read; the chunks of
        # a whole shard are then slices of it, not copies either
        return None if buf is None else memoryview(buf.as_numpy_array())

    def _shard_index(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """``(chunks..., 2)`` uint64 offsets/lengths of one shard, or None if absent."""
        found, cached = self._indexes.lookup(coords)
        if found:
            return cached
        from zarr.abc.store import RangeByteRequest, SuffixByteRequest

        lo = self.layout
        size = lo.index_size
        rng = SuffixByteRequest(size) if lo.index_end else RangeByteRequest(0, size)
        raw = self._get(self._key(coords), rng)
        index = None if raw is None else self.layout.decode_index(raw)
        self._indexes.put(coords, index)  # type: ignore[arg-type]  # (None: no shard)
        return index

    def _member_size(self, coords: tuple[int, ...], key: str) -> int | None:
        size = self._sizes.get(coords, -1)
        if size == -1:
            assert self._container is not None
            size = self._container.member_size(key)
            if len(self._sizes) >= _MAX_SIZES:
                self._sizes.clear()
            self._sizes[coords] = size
        return size

    # ------------------------------------------------------------------ reads

    def __getitem__(self, sel: Any) -> np.ndarray:
        sel = sel if isinstance(sel, tuple) else (sel,)
        box, drop = plain_box(sel, self.layout.shape)
        if box is None:
            return np.asarray(self.array[sel])  # anything but plain boxes: zarr-python
        out = self._read_box(box)
        return out[tuple(0 if d else slice(None) for d in drop)] if any(drop) else out

    def chunk_coords(self, box: Sequence[tuple[int, int]]) -> list[tuple[int, ...]]:
        """The decoded units (inner chunks) a box touches, in C order."""
        chunk = self.layout.chunk
        ranges = [range(a // c, -(-b // c)) for (a, b), c in zip(box, chunk, strict=True)]
        return list(itertools.product(*ranges))  # C order, as np.ndindex

    @property
    def remote(self) -> bool:
        """Whether chunks come over the network (kept decoded, fetched concurrently)."""
        return self._cache is not None

    def fetch_indexes(
        self,
        box: Sequence[tuple[int, int]],
        near: Sequence[int],
        wanted: Callable[[], bool] | None = None,
        limit: int | None = None,
    ) -> int:
        """Read now, concurrently on the read-ahead threads, the shard indexes not kept
        yet of the shards ``box`` touches, nearest to element ``near`` first, at most
        half of what the index cache holds (remote sharded arrays; a no-op otherwise).
        Then a read of any plane in ``box`` costs one round trip (its chunks), not two
        (the index, then the chunks). Each request is sent only while ``wanted()``; a
        failed one is left to the read that needs it (it reads, and reports, it again).
        Returns how many indexes were read (at most ``limit``, when given). Not from the
        I/O pools' own threads."""
        return sum(_wait_all(_readahead_pool(), self.index_jobs(box, near, wanted, limit)))

    def index_jobs(
        self,
        box: Sequence[tuple[int, int]],
        near: Sequence[int],
        wanted: Callable[[], bool] | None = None,
        limit: int | None = None,
    ) -> list[Callable[[], bool]]:
        """:meth:`fetch_indexes`' requests, one callable each (True: read), not run: a
        caller may run those of several arrays as one concurrent batch."""
        lo = self.layout
        if self._cache is None or lo.shard is None:
            return []
        cap = INDEX_CACHE_BYTES // 2 // lo.index_size
        if limit is not None:
            cap = min(cap, limit)
        spans = [
            range(a // s, -(-b // s)) for (a, b), s in zip(box, lo.shard, strict=True) if b > a
        ]
        if cap < 1 or len(spans) != len(box):
            return []
        here = [p // s for p, s in zip(near, lo.shard, strict=True)]
        todo = [sc for sc in itertools.product(*spans) if not self._indexes.lookup(sc)[0]]
        todo.sort(key=lambda sc: sum(abs(c - h) for c, h in zip(sc, here, strict=True)))

        def one(sc: tuple[int, ...]) -> bool:
            if wanted is not None and not wanted():
                return False
            try:
                self._shard_index(sc)
            except Exception as e:  # the read that needs it reads it again, and says why
                logger.debug("shard index %s not read ahead: %s", sc, e)
                return False
            return True

        return [functools.partial(one, sc) for sc in todo[:cap]]

    def _read_box(self, box: list[tuple[int, int]]) -> np.ndarray:
        lo = self.layout
        out = np.empty([max(b - a, 0) for a, b in box], dtype=self.dtype)
        if out.size == 0:
            return out
        chunk = lo.chunk
        coords_list = self.chunk_coords(box)

        def place(cc: tuple[int, ...], raw: memoryview | np.ndarray | None) -> None:
            src: list[slice] = []
            dst: list[slice] = []
            for i, (a, b) in enumerate(box):
                c0 = cc[i] * chunk[i]
                s0, s1 = max(a, c0), min(b, c0 + chunk[i])
                src.append(slice(s0 - c0, s1 - c0))
                dst.append(slice(s0 - a, s1 - a))
            if raw is None:
                out[tuple(dst)] = self.fill
                return
            decoded = raw if isinstance(raw, np.ndarray) else self.layout.decode(raw)
            out[tuple(dst)] = decoded[tuple(src)]

        if self._cache is not None:
            # remote: every chunk fetched once (cache, a fetch in flight, or now), all
            # requests of the box concurrently and decoded as they arrive
            for cc, decoded in zip(coords_list, self.remote_chunks(coords_list), strict=True):
                place(cc, decoded)
            return out

        raws: list[memoryview | None] = [None] * len(coords_list)
        self._run(self._raw_jobs(coords_list, raws.__setitem__, self._run))
        todo = list(zip(coords_list, raws, strict=True))

        def run(batch: list[tuple[tuple[int, ...], memoryview | None]]) -> None:
            for cc, raw in batch:
                place(cc, raw)

        if len(todo) < _THREAD_MIN_CHUNKS:
            run(todo)
            return out
        # contiguous batches, the first decoded on this (otherwise waiting) thread: ~10%
        # faster than one task per chunk on the loaded 2-core machine; errors are raised
        # in chunk order, as before
        pool = _decode_pool()
        n = _decode_threads() + 1
        size = -(-len(todo) // n)
        futures = [pool.submit(run, todo[i : i + size]) for i in range(size, len(todo), size)]
        first: BaseException | None = None
        try:
            run(todo[:size])
        except Exception as e:
            first = e
        for f in futures:
            try:
                f.result()
            except Exception as e:
                first = first or e
        if first is not None:
            raise first
        return out

    # ------------------------------------------------------------------ remote chunks

    def remote_chunks(
        self, coords_list: list[tuple[int, ...]], *, wait: bool = True, wanted: Any = None
    ) -> list[np.ndarray | None]:
        """The decoded chunks of a remote array (None: fill value), each fetched at most
        once at a time: from the cache, else by waiting for the fetch already in flight
        (a sibling or read-ahead fetch), else fetched now, all concurrently.

        ``wait=False`` (prefetch): start the fetches and return at once (an empty list);
        ``wanted`` is then asked before each request is sent: a request no longer wanted
        (read-ahead for a plane the user has moved away from) is dropped unsent, and a
        reader waiting for it fetches it itself."""
        cache = self._cache
        assert cache is not None
        found: dict[tuple[int, ...], np.ndarray | None] = {}
        waits: dict[tuple[int, ...], _Fetch] = {}
        mine: dict[tuple[int, ...], _Fetch] = {}
        with _inflight_lock:
            for cc in coords_list:
                hit, value = cache.lookup(self._ckey(cc))
                if hit:
                    found[cc] = value
                    continue
                fut = _inflight.get(self._ckey(cc))
                if fut is not None and (wait or wanted is None) and fut.readahead and fut.cancel():
                    # a read-ahead request not sent yet: this read (or a sibling fetch
                    # for it, which napari asks for next) sends it now, not behind the
                    # read-ahead queue
                    fut = None
                if fut is None:
                    fut = _inflight[self._ckey(cc)] = _Fetch(wanted is not None)
                    mine[cc] = fut
                elif wait:
                    waits[cc] = fut
        if mine:
            io = _io_pool() if wanted is None else _readahead_pool()
            self._fetch(mine, io, wanted)
        if not wait:
            return []
        dropped = []
        for cc, fut in {**mine, **waits}.items():
            try:
                found[cc] = fut.result()
            except _Dropped:
                dropped.append(cc)  # a read-ahead dropped unsent: fetched by this read
        if dropped:
            found.update(zip(dropped, self.remote_chunks(dropped), strict=True))
        return [found[cc] for cc in coords_list]

    def _fetch(
        self,
        futures: dict[tuple[int, ...], _Fetch],
        io: LightPool | ThreadPoolExecutor,
        wanted: Any,
    ) -> None:
        """Send the requests of ``futures``' chunks on ``io`` (not waiting for them); each
        arriving chunk is decoded on the I/O thread, kept and handed to its future."""
        coords = list(futures)
        cache = self._cache
        assert cache is not None

        def settle(
            cc: tuple[int, ...], value: Any = None, error: BaseException | None = None
        ) -> None:
            fut = futures[cc]
            if fut.cancelled():
                return  # taken over by a read that could not wait (see remote_chunks)
            key = self._ckey(cc)
            if error is None:
                cache.put(key, value)
            with _inflight_lock:
                if _inflight.get(key) is fut:
                    del _inflight[key]
            if error is None:
                fut.set_result(value)
            else:
                fut.set_exception(error)

        def sink(i: int, raw: memoryview | None) -> None:
            cc = coords[i]
            if futures[cc].done():
                return
            try:
                value = None if raw is None else self.layout.decode(raw)
                if value is not None:
                    # uncompressed chunks are views of the request's buffer: keep a copy
                    value = value if self.layout.decoders else value.copy()
                    value.flags.writeable = False  # shared by every later read
            except Exception as e:
                settle(cc, error=e)
                return
            settle(cc, value)

        def guarded(job: Callable[[], Any], members: list[int]) -> Callable[[], None]:
            def run() -> None:
                live = [i for i in members if futures[coords[i]].set_running_or_notify_cancel()]
                if not live:
                    return  # every chunk was taken over by a read that could not wait
                if wanted is not None and not wanted():
                    for i in live:
                        settle(coords[i], error=_Dropped())
                    return
                try:
                    job()
                except BaseException as e:
                    for i in live:
                        settle(coords[i], error=e)
                    return
                for i in live:  # a member the job did not deliver is the fill value
                    if not futures[coords[i]].done():
                        settle(coords[i], None)

            return run

        def run_all(jobs: list[tuple[Callable[[], Any], list[int]]]) -> None:
            for job, members in jobs:
                io.submit(guarded(job, members))

        try:
            self._raw_jobs(coords, sink, lambda jobs: _wait_all(io, jobs), run_all)
        except BaseException as e:  # a shard index failed: every chunk of the request
            for cc in coords:
                fut = futures[cc]
                if not fut.done() and (fut.running() or fut.set_running_or_notify_cancel()):
                    settle(cc, error=e)

    # ------------------------------------------------------------------ requests

    def _raw_jobs(
        self,
        coords_list: list[tuple[int, ...]],
        sink: Callable[[int, memoryview | None], None],
        run_indexes: Callable[[list[Callable[[], Any]]], list[Any]],
        submit: Callable[[list[tuple[Callable[[], Any], list[int]]]], None] | None = None,
    ) -> list[Callable[[], Any]]:
        """The store requests that bring ``coords_list``'s raw chunks to ``sink(i, raw)``
        (raw None: the fill value): one per unsharded chunk, per small or wholly wanted
        shard, per merged byte range of a shard (its index read first through
        ``run_indexes``, cached). With ``submit`` the requests (each with the positions
        it delivers) go there as soon as their shard's index is known; else returned."""
        lo = self.layout
        jobs: list[tuple[Callable[[], Any], list[int]]] = []

        def flush() -> None:
            if submit is not None and jobs:
                submit(list(jobs))
                jobs.clear()

        if lo.shard is None:
            for i, cc in enumerate(coords_list):
                jobs.append((functools.partial(self._read_chunk, self._key(cc), i, sink), [i]))
            flush()
            return [j for j, _ in jobs]
        per = lo.per_shard
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, cc in enumerate(coords_list):
            groups.setdefault(tuple(c // p for c, p in zip(cc, per, strict=True)), []).append(i)
        ranged: list[tuple[tuple[int, ...], str, list[int]]] = []
        for scoords, members in groups.items():
            key = self._key(scoords)
            size = None if self._container is None else self._member_size(scoords, key)
            if len(members) == lo.n_per_shard or (size is not None and size <= WHOLE_SHARD_BYTES):
                job = functools.partial(self._read_whole, key, members, coords_list, sink)
                jobs.append((job, members))
            else:
                ranged.append((scoords, key, members))
        flush()
        # the indexes of the shards read by ranges (remote: one request each, concurrent)
        indexes = run_indexes([functools.partial(self._shard_index, sc) for sc, _, _ in ranged])
        for (_, key, members), index in zip(ranged, indexes, strict=True):
            if index is None:
                for i in members:
                    sink(i, None)  # missing shard: fill value
                continue
            spans = []
            for i in members:
                local = tuple(c % p for c, p in zip(coords_list[i], per, strict=True))
                off, n = index[local]
                if off == EMPTY and n == EMPTY:
                    sink(i, None)  # empty inner chunk: fill value
                    continue
                spans.append((int(off), int(off) + int(n), i))
            spans.sort()
            for group in _merge_spans(spans, self._merge_gap):
                rng = (group[0][0], max(s1 for _, s1, _ in group))
                job = functools.partial(self._read_span, key, rng, group, sink)
                jobs.append((job, [i for _, _, i in group]))
        flush()
        return [j for j, _ in jobs]

    def _read_chunk(self, key: str, i: int, sink: Callable[[int, memoryview | None], None]) -> None:
        sink(i, self._get(key))

    def _read_whole(
        self,
        key: str,
        members: list[int],
        coords_list: list[tuple[int, ...]],
        sink: Callable[[int, memoryview | None], None],
    ) -> None:
        """The whole shard, read as one member like zarr-python does (so a container
        store verifies its checksum), its index taken from its bytes."""
        lo = self.layout
        whole = self._get(key)
        if whole is None:
            for i in members:
                sink(i, None)  # missing shard: fill value
            return
        index = lo.whole_index(whole)
        for i in members:
            local = tuple(c % p for c, p in zip(coords_list[i], lo.per_shard, strict=True))
            sink(i, lo.inner(whole, index, local))

    def _read_span(
        self,
        key: str,
        rng: tuple[int, int],
        spans: list[tuple[int, int, int]],
        sink: Callable[[int, memoryview | None], None],
    ) -> None:
        """One byte range of a shard holding the inner chunks of ``spans``."""
        from zarr.abc.store import RangeByteRequest

        start, stop = rng
        data = self._get(key, RangeByteRequest(start, stop))
        if data is None:
            raise ValueError(f"shard {key} vanished while reading")
        for s0, s1, i in spans:
            sink(i, data[s0 - start : s1 - start])

    def _run(self, jobs: list[Callable[[], _T]]) -> list[_T]:
        """Run store reads: concurrently where one read can take milliseconds (remote
        stores, ``threaded_io``), as dask's threads did per dask chunk; else in turn."""
        if self._threaded_io and len(jobs) > 1:
            return list(_io_pool().map(_call, jobs))
        return [f() for f in jobs]


class _Dropped(Exception):
    """A read-ahead request dropped unsent (no longer wanted)."""


_PENDING, _RUNNING, _CANCELLED, _FINISHED = range(4)
_fetch_state = threading.Lock()


class _Fetch:
    """The fetch of one remote chunk, as far as a ``concurrent.futures.Future`` is used
    here (pending -> running -> finished, or cancelled while pending), in two objects
    instead of a dozen (a ``Future`` and its ``Condition``): dozens are made per plane,
    and their bursts drove the garbage collector (see :mod:`napari_ozx.ozx.pools`).
    Waiters block on a lock released when it settles."""

    __slots__ = ("_error", "_settled", "_state", "_value", "readahead")

    def __init__(self, readahead: bool = False) -> None:
        self.readahead = readahead
        self._state = _PENDING
        self._value: Any = None
        self._error: BaseException | None = None
        self._settled = threading.Lock()
        self._settled.acquire()

    def cancel(self) -> bool:
        with _fetch_state:
            if self._state != _PENDING:
                return self._state == _CANCELLED
            self._state = _CANCELLED
        self._settled.release()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        with _fetch_state:
            if self._state == _CANCELLED:
                return False
            if self._state == _PENDING:
                self._state = _RUNNING
            return True

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def running(self) -> bool:
        return self._state == _RUNNING

    def done(self) -> bool:
        return self._state in (_CANCELLED, _FINISHED)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        with _fetch_state:
            if self._state in (_CANCELLED, _FINISHED):
                return
            self._value, self._error, self._state = value, error, _FINISHED
        self._settled.release()

    def set_result(self, value: Any) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def result(self) -> Any:
        with self._settled:  # every waiter in turn, once settled
            pass
        if self._state == _CANCELLED:
            from concurrent.futures import CancelledError

            raise CancelledError
        if self._error is not None:
            raise self._error
        return self._value


#: a remote chunk's key (:meth:`FastReader._ckey`: reader and chunk) -> its fetch in flight
_inflight: dict[int, _Fetch] = {}
_inflight_lock = threading.Lock()


def _merge_spans(
    spans: list[tuple[int, int, int]], gap: int
) -> Iterator[list[tuple[int, int, int]]]:
    """Sorted ``(start, stop, i)`` byte spans grouped where they are at most ``gap`` apart."""
    j = 0
    while j < len(spans):
        stop = spans[j][1]
        k = j + 1
        while k < len(spans) and spans[k][0] - stop <= gap:
            stop = max(stop, spans[k][1])
            k += 1
        yield spans[j:k]
        j = k


def _wait_all(io: LightPool | ThreadPoolExecutor, jobs: list[Callable[[], _T]]) -> list[_T]:
    """Run ``jobs`` concurrently on ``io`` and return their results in order. Called from
    a thread that is not one of ``io``'s, or with one job (run here): a pool waiting on
    itself could deadlock."""
    if len(jobs) <= 1 or in_pool("ozx-io", "ozx-ahead"):
        return [f() for f in jobs]
    return list(io.map(_call, jobs))


def _call(f: Callable[[], _T]) -> _T:
    return f()


def _rebuild(array: zarr.Array) -> FastReader | zarr.Array:
    return fast_reader(array) or array
