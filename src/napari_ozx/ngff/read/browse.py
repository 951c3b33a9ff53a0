"""Browsing a remote image: a plane's sibling reads and read-ahead along the moved axis.

:class:`Browse` (one per opened remote image, shared by its levels) watches napari's
direct view reads (:mod:`.lazy`) and fetches ahead of them into :mod:`.fastread`'s remote
chunk cache: the reads of the previous position (sibling channels, thumbnails) for the new
one at once; the next planes along the moved axis in the background (up to
:data:`MAX_AHEAD`, within ``NAPARI_OZX_READAHEAD_MB``), sent :data:`READAHEAD_DELAY_S`
after napari's reads so they do not slow its draw; and the shard indexes of the planes
reachable from a first read. A request no longer wanted is dropped unsent; a read napari
waits for never queues behind a read-ahead. ``dask.compute``, saves and exports are not
watched.

Why, and the frame times that set the delay: ``docs/design/reading.md``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from napari_ozx.ngff.read.fastpaths import readahead_budget
from napari_ozx.ozx.pools import later, shared_pool

__all__ = ["MAX_AHEAD", "PLANNER_THREADS", "READAHEAD_DELAY_S", "WARM_INDEXES", "Browse"]

logger = logging.getLogger(__name__)

#: planes fetched ahead at most (however large the budget)
MAX_AHEAD = 16

#: per root axis: an integer (the axis is dropped) or a ``(start, stop)`` box
Index = tuple[int | tuple[int, int], ...]


#: threads that start prefetches
PLANNER_THREADS = 4

#: seconds from napari's read at a position to the read-ahead's start (its draw of the
#: plane comes in between; 0: at once)
READAHEAD_DELAY_S = 0.1


def _planner_pool() -> ThreadPoolExecutor:
    """Threads that start prefetches (a shard index may have to be read first)."""
    return shared_pool("ozx-browse", PLANNER_THREADS)


class Browse:
    """The reads napari makes of one remote image (all its levels), and what to fetch
    before it asks (see the module docstring). Thread-safe."""

    def __init__(
        self,
        readers: Sequence[Any],
        channel_axis: int | None,
        active: Sequence[int] | None = None,
    ) -> None:
        # weakly: dropping the layers frees the readers (and their store) at once
        self._readers = [weakref.ref(r) for r in readers]
        self._coarsest = len(readers) - 1
        self._channel = channel_axis
        #: the channels shown when the image opens (omero ``active``, else all)
        self._active = list(active) if active is not None else None
        self._lock = threading.Lock()
        self._pos: tuple[tuple[int, int], ...] | None = None
        self._step: tuple[int, int] | None = None  # (axis, +1 / -1) of the last move
        self._run = 0  # steps of one made in a row along it (0: it was a jump)
        #: slot (channel, thumbnail level?) -> (level, index): reads at this position
        self._cur: dict[tuple[int | None, bool], tuple[int, Index]] = {}
        #: the same at the previous position (what the next position will need)
        self._prev: dict[tuple[int | None, bool], tuple[int, Index]] = {}
        #: positions read ahead are wanted for, with the (level, slot)s planned
        self._window: set[tuple[int, ...]] = set()
        self._levels: set[int] = set()
        #: (level, index with the moving axes as None) whose shard indexes were read ahead
        self._indexed: set[tuple[int, tuple[Any, ...]]] = set()

    # ------------------------------------------------------------------ napari's reads

    def warm(self, positions: Sequence[Mapping[int, int]]) -> None:
        """The image was just opened for a viewer whose first reads will be at
        ``positions`` (level-0 index of each axis that is neither the channel nor one of
        the last two, y and x): fetch in the background, at each, the coarsest level's
        plane of every channel shown at open (napari's thumbnail, and each layer's first
        view) and the shard indexes of the other levels' planes, nearest the origin first
        (at most :data:`WARM_INDEXES` per level, channel and position). They arrive while
        napari makes the layers, so its first reads cost a round trip each (their
        chunks), not two (an index, then the chunks). Read-ahead requests: a read napari
        waits for takes over one not sent yet. Off with the read-ahead."""
        if readahead_budget() <= 0 or not positions:
            return
        _planner_pool().submit(_warm, weakref.ref(self), [dict(p) for p in positions])

    def demand(self, level: int, index: Index) -> None:
        """napari is about to read ``index`` (on the level's root) of ``level``."""
        if not 0 <= level <= self._coarsest:
            return
        pos = _position(index, self._channel)
        slot = self._slot(level, index)
        siblings: list[tuple[int, Index]] = []
        with self._lock:
            if pos != self._pos:
                step, one = _move(self._pos, pos)
                # steps of one made in a row the same way (0: a jump along the axis)
                self._run = (self._run + 1 if step == self._step else 1) if one else 0
                if self._cur:
                    self._prev = self._cur
                self._cur = {}
                self._pos = pos
                self._step = step
                siblings = [(lv, _at(ix, pos)) for s, (lv, ix) in self._prev.items() if s != slot]
            if not self._prev and slot not in self._cur:
                siblings += self._first_siblings(level, index, slot[0])
            elif not slot[1] and slot in self._cur and self._cur[slot] != (level, index):
                # a new view of a channel where napari has read it already (another
                # level or box: a zoom or pan): napari reads the other channels' next
                siblings += self._view_siblings(level, index, slot[0])
            self._cur[slot] = (level, index)
        if siblings:
            _planner_pool().submit(_prefetch, weakref.ref(self), siblings, False)

    def _first_siblings(
        self, level: int, index: Index, channel: int | None
    ) -> list[tuple[int, Index]]:
        """Before napari has moved: it reads every shown channel at the same place next
        (lock held)."""
        ch = self._channel
        r = self.reader(level)
        if ch is None or channel is None or r is None:
            return []
        n = r.layout.shape[ch]
        shown = self._active if self._active is not None else range(n)
        out = []
        for c in shown:
            if c != channel and 0 <= c < n:
                new = list(index)
                new[ch] = c if isinstance(index[ch], int) else (c, c + 1)
                out.append((level, tuple(new)))
        return out

    def _view_siblings(
        self, level: int, index: Index, channel: int | None
    ) -> list[tuple[int, Index]]:
        """The same view of the other channels napari has read here or at the previous
        position (lock held)."""
        ch = self._channel
        if ch is None or channel is None:
            return []
        seen = {c for c, _ in (*self._cur, *self._prev) if c is not None and c != channel}
        out = []
        for c in sorted(seen):
            new = list(index)
            new[ch] = c if isinstance(index[ch], int) else (c, c + 1)
            out.append((level, tuple(new)))
        return out

    def served(self, level: int, index: Index) -> None:
        """napari's read of ``index`` is done: read ahead of it, after it (its requests
        and their siblings' go first; on one connection pool and one I/O loop, what is
        sent first comes back first) and after napari's draw of it
        (:data:`READAHEAD_DELAY_S`)."""
        with self._lock:
            if self._cur.get(self._slot(level, index)) != (level, index):
                return  # napari has moved on meanwhile
            plan = self._plan()
            along = self._along(level, index)
        if plan:
            ref = weakref.ref(self)

            def start() -> None:
                _planner_pool().submit(_prefetch, ref, plan, True)

            if READAHEAD_DELAY_S > 0:
                later().call(ref, READAHEAD_DELAY_S, start)
            else:
                start()
        if along is not None:
            _planner_pool().submit(_prefetch_indexes, weakref.ref(self), level, *along)

    def _along(self, level: int, index: Index) -> tuple[list[tuple[int, int]], list[int]] | None:
        """The first time napari reads this part of a level: the box of every plane it
        may move to from here (the moving axes, z and t, whole), and where it is now
        (lock held). Their shard indexes are read once in the background, so that a
        jump to any plane costs one round trip, like a step (:meth:`FastReader.fetch_indexes`)."""
        moving = {k for k, _ in _position(index, self._channel)}
        key = (level, tuple(None if k in moving else i for k, i in enumerate(index)))
        shape = self._shape(level)
        if not moving or shape is None or key in self._indexed or readahead_budget() <= 0:
            return None
        if len(self._indexed) >= 4096:  # panned around a lot: forget (indexes are kept)
            self._indexed.clear()
        self._indexed.add(key)
        box = [(i, i + 1) if isinstance(i, int) else i for i in index]
        near = [a for a, _ in box]
        for k in moving:
            box[k] = (0, shape[k])
        return box, near

    def _slot(self, level: int, index: Index) -> tuple[int | None, bool]:
        """Which of napari's reads at a position this is: a channel's view or its
        thumbnail (the coarsest level, which napari reads at every step too)."""
        ch = self._channel
        c = _single(index[ch]) if ch is not None else None
        return (c, level == self._coarsest and level > 0)

    def _plan(self) -> list[tuple[int, Index]]:
        """Read-ahead for the current position, nearest first, within the budget (lock
        held): the next planes along the moved axis and the previous one."""
        self._window = set()
        self._levels = set()
        step, pos = self._step, self._pos
        budget = readahead_budget()
        if step is None or pos is None or budget <= 0:
            return []
        items = {**self._prev, **self._cur}
        self._levels = {lv for lv, _ in items.values()}
        plane = sum(self._nbytes(lv, ix) for lv, ix in items.values())
        # ramped up while the user keeps stepping the same way: the first step of a run
        # does not flood the network (and this 2-core machine's decoder) with 16 planes
        ahead = min(MAX_AHEAD, 1 + 2 * self._run, budget // max(plane, 1) - 1)
        if ahead < 1:
            return []
        axis, d = step
        now = dict(pos)[axis]
        self._window.add(tuple(i for _, i in pos))  # what is queued for here: still wanted
        # after a jump along the axis: both neighbours (the user may step either way)
        order = [now + d, now - d] + [now + k * d for k in range(2, ahead + 1) if self._run]
        out: list[tuple[int, Index]] = []
        for q in order:
            new = tuple((k, q if k == axis else i) for k, i in pos)
            for lv, ix in items.values():
                shape = self._shape(lv)
                if shape is None or not 0 <= q < shape[axis]:
                    continue
                self._window.add(tuple(i for _, i in new))
                out.append((lv, _at(ix, new)))
        return out

    def wanted(self, level: int, index: Index) -> bool:
        """Whether a read-ahead of ``index`` is still worth sending."""
        with self._lock:
            if level not in self._levels:
                return False
            return tuple(i for _, i in _position(index, self._channel)) in self._window

    # ------------------------------------------------------------------ helpers

    def reader(self, level: int) -> Any:
        return self._readers[level]() if 0 <= level < len(self._readers) else None

    def _shape(self, level: int) -> tuple[int, ...] | None:
        r = self.reader(level)
        return None if r is None else r.layout.shape

    def _nbytes(self, level: int, index: Index) -> int:
        r = self.reader(level)
        if r is None:
            return 0
        n = int(np.prod([b - a for i in index if type(i) is tuple for a, b in [i]]))
        return n * r.dtype.itemsize


def _move(
    old: tuple[tuple[int, int], ...] | None, new: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int] | None, bool]:
    """``((axis, +1 / -1), by_one)`` when ``new`` is ``old`` moved along one axis (by
    one, or a jump), else ``(None, False)``."""
    if old is None or len(old) != len(new) or any(k != j for (k, _), (j, _) in zip(old, new)):
        return None, False
    moved = [(k, b - a) for (k, a), (_, b) in zip(old, new, strict=True) if a != b]
    if len(moved) != 1:
        return None, False
    axis, delta = moved[0]
    return (axis, 1 if delta > 0 else -1), abs(delta) == 1


def _single(i: int | tuple[int, int]) -> int | None:
    """The one index an axis is read at (an integer, or a range of one), else None."""
    if isinstance(i, int):
        return i
    return i[0] if i[1] - i[0] == 1 else None


def _position(index: Index, channel: int | None) -> tuple[tuple[int, int], ...]:
    """``(axis, index)`` of the axes other than the channel read at one index: where a
    plane is (napari reads z as ``z:z+1``)."""
    out = []
    for k, i in enumerate(index):
        j = _single(i)
        if j is not None and k != channel:
            out.append((k, j))
    return tuple(out)


def _at(index: Index, pos: tuple[tuple[int, int], ...]) -> Index:
    """``index`` with the position axes set to ``pos`` (in the form each was read in)."""
    out = list(index)
    for k, i in pos:
        out[k] = i if isinstance(out[k], int) else (i, i + 1)
    return tuple(out)


def _prefetch(
    ref: Callable[[], Browse | None], items: list[tuple[int, Index]], ahead: bool
) -> None:
    """Start the fetches of ``items`` (siblings: at once; read-ahead: each request sent
    only while still wanted). Runs on the planner's threads; never raises (a failed
    prefetch is read again, and reported, by the read napari makes)."""
    for level, index in items:
        browse = ref()
        if browse is None:
            return  # the layers are gone
        reader = browse.reader(level)
        if reader is None:
            continue
        box = [(i, i + 1) if type(i) is int else i for i in index]
        wanted = None
        if ahead:
            if not browse.wanted(level, index):
                continue
            wanted = _Wanted(ref, level, index)
        del browse
        try:
            reader.remote_chunks(reader.chunk_coords(box), wait=False, wanted=wanted)
        except Exception as e:  # pragma: no cover - failures are settled on the futures
            logger.debug("prefetch of level %d %s failed: %s", level, index, e)


def _prefetch_indexes(
    ref: Callable[[], Browse | None],
    level: int,
    box: list[tuple[int, int]],
    near: list[int],
) -> None:
    """Read the shard indexes of ``box`` at ``level`` (planner thread). Stops when the
    layers are gone; never raises."""
    browse = ref()
    reader = None if browse is None else browse.reader(level)
    del browse
    if reader is None:
        return

    def wanted() -> bool:
        return ref() is not None

    try:
        n = reader.fetch_indexes(box, near, wanted)
    except Exception as e:  # pragma: no cover - fetch_indexes settles its own failures
        logger.debug("shard indexes of level %d not read ahead: %s", level, e)
        return
    if n:
        logger.debug("read %d shard indexes of level %d ahead", n, level)


#: shard indexes read ahead by :meth:`Browse.warm` per level, channel and position
WARM_INDEXES = 16


def _warm(ref: Callable[[], Browse | None], positions: list[dict[int, int]]) -> None:
    """:meth:`Browse.warm`'s fetches (planner thread); never raises."""
    browse = ref()
    if browse is None:
        return
    top, ch = browse._coarsest, browse._channel
    readers = [browse.reader(lv) for lv in range(top + 1)]
    active = browse._active
    del browse
    if any(r is None for r in readers):
        return
    shape0 = readers[0].layout.shape
    n = shape0[ch] if ch is not None else 1
    channels = [c for c in (active if active is not None else range(n)) if 0 <= c < n]

    def wanted() -> bool:
        return ref() is not None

    def box(level: int, pos: dict[int, int], c: int) -> list[tuple[int, int]]:
        shape = readers[level].layout.shape
        out = []
        for k, m in enumerate(shape):
            if k == ch:
                out.append((c, c + 1))
            elif k in pos:  # where napari is, at this level's scale along the axis
                i = min(pos[k] * m // max(shape0[k], 1), m - 1)
                out.append((i, i + 1))
            else:
                out.append((0, m))
        return out

    from napari_ozx.ngff.read.fastread import _readahead_pool, _wait_all

    jobs = [(pos, c) for pos in positions for c in (channels if ch is not None else [0])]
    try:
        # every level's shard indexes there in one concurrent batch (one round trip) ...
        batch = []
        for level in range(top, -1, -1):
            for pos, c in jobs:
                b = box(level, pos, c)
                near = [a for a, _ in b]
                batch += readers[level].index_jobs(b, near, wanted, limit=WARM_INDEXES)
        _wait_all(_readahead_pool(), batch)
        # ... then the coarsest level's chunks there (napari reads them for every layer)
        coarsest = readers[top]
        for pos, c in jobs:
            coords = coarsest.chunk_coords(box(top, pos, c))
            coarsest.remote_chunks(coords, wait=False, wanted=wanted)
    except Exception as e:  # pragma: no cover - a hint; napari's reads read it again
        logger.debug("warming the first reads failed: %s", e)


class _Wanted:
    """``wanted()`` of one read-ahead request, holding its :class:`Browse` weakly."""

    __slots__ = ("index", "level", "ref")

    def __init__(self, ref: Callable[[], Browse | None], level: int, index: Index) -> None:
        self.ref, self.level, self.index = ref, level, index

    def __call__(self) -> bool:
        browse = self.ref()
        return browse is not None and browse.wanted(self.level, self.index)
