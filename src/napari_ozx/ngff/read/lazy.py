"""The arrays napari gets for every level, with a direct path for what napari does with them.

:class:`LazyArray` is a ``dask.array.Array`` (graph, ``compute``, ``da.stack``, pickling as
before, the same pixels) that remembers which box of which reader it is: basic
``__getitem__`` (ints, step-1 slices, ``...``) composes views without building a graph
(built on demand by dask's own slicing), and ``compute`` / ``np.asarray`` of such a view
reads the box through :mod:`.fastread` on the calling thread, no scheduler; anything else
is plain dask, and a failed direct read is recomputed through dask so errors are dask's
own. Under dask's array query planning :func:`lazy_array` gives a :class:`LevelArray`
instead: the same views and direct reads, without dask. :func:`source_reader` finds a
view's reader. ``NAPARI_OZX_FAST_PATHS=0`` turns the direct path off (:mod:`.fastpaths`).

Why, what it gives up (napari's dask cache) and what it costs: ``docs/design/reading.md``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from napari_ozx._compat import new_dask_view
from napari_ozx.ngff.read.indexing import orthogonal

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "LazyArray",
    "LevelArray",
    "forget_prepared",
    "is_prepared",
    "lazy_array",
    "prepare_view",
    "source_reader",
    "view_box",
]

#: per root axis: an integer (the axis is dropped) or a ``(start, stop)`` box
_Index = tuple[int | tuple[int, int], ...]


class _Source:
    """What every view of one level shares: the reader and the level's chunk grid."""

    __slots__ = ("bounds", "chunks", "dtype", "graph", "name", "prepared", "reader", "shape")

    def __init__(self, reader: Any, root: da.Array, graph: bool = True) -> None:
        self.reader = reader
        self.name: str = root.name
        self.chunks: tuple[tuple[int, ...], ...] = root.chunks
        self.shape: tuple[int, ...] = tuple(int(n) for n in root.shape)
        self.dtype = root.dtype
        # views read ahead of napari's requests (:func:`prepare_view`), one per box (the
        # channels of a ``c`` axis share a level): box -> (pixels, kept for every request)
        self.prepared: dict[_Index, tuple[np.ndarray, bool]] = {}
        # not the array itself: no reference cycle (a LevelArray keeps its dask array)
        self.graph: Any = root.dask if graph else None
        # chunk boundaries per axis: block i covers [bounds[i], bounds[i + 1])
        self.bounds: list[list[int]] = []
        for c in root.chunks:
            b = [0]
            for n in c:
                b.append(b[-1] + int(n))
            self.bounds.append(b)


class LazyArray(da.Array):
    """A dask array over one pyramid level's reader (see the module docstring)."""

    __slots__ = ("_ozx_graph", "_ozx_index", "_ozx_name", "_ozx_src")
    _ozx_graph: Any
    _ozx_index: _Index
    _ozx_name: str
    _ozx_src: _Source | None

    # dask keeps the graph in the ``dask`` slot of ``da.Array``; this property shadows it
    # so that a view builds its graph only when asked
    @property
    def dask(self) -> Any:
        graph = self._ozx_graph
        if graph is None:
            graph = self._ozx_graph = self._build_graph()
        return graph

    @dask.setter
    def dask(self, graph: object) -> None:
        self._ozx_graph = graph

    def __dask_graph__(self) -> Any:
        return self.dask

    # ------------------------------------------------------------------ views

    def _direct(self) -> tuple[_Source, _Index] | None:
        src = getattr(self, "_ozx_src", None)
        if src is None or self.name != self._ozx_name:
            return None  # not ours, or rewritten in place (x[...] = v)
        return src, self._ozx_index

    def __getitem__(self, index: object) -> Any:
        direct = self._direct()
        new = None if direct is None else _compose(direct[1], direct[0].shape, index)
        if new is None:
            return super().__getitem__(index)
        src, old = direct  # type: ignore[misc]
        if new == old:
            return self
        return _view(src, new)

    def _build_graph(self) -> Any:
        """The graph dask builds for this view: the level sliced by dask's own
        ``__getitem__``, its output keys aliased to this view's (deterministic) name."""
        src, index = self._ozx_src, self._ozx_index
        if src is None:  # pragma: no cover - the graph of a level is set on creation
            raise RuntimeError("a LazyArray without a graph or a source")
        level = da.Array(src.graph, src.name, src.chunks, dtype=src.dtype)
        view = level[_selection(index)]
        if view.chunks != self.chunks:  # pragma: no cover - our invariant
            raise RuntimeError(f"view chunks {self.chunks} differ from dask's {view.chunks}")
        aliases: dict[Any, Any] = {(self.name, *k[1:]): k for k in _flat(view.__dask_keys__())}
        return HighLevelGraph.from_collections(self.name, aliases, dependencies=[view])

    # ------------------------------------------------------------------ reads

    def compute(self, **kwargs: object) -> Any:
        direct = self._direct()
        if direct is None:
            return super().compute(**kwargs)
        src, index = direct
        ready = _take_prepared(src, index)
        if ready is not None:
            return ready
        _tell_browse(src, index)
        try:
            out = np.asarray(src.reader[_selection(index)])
        except Exception:
            # the same read through dask: the same pixels, or exactly dask's error
            return super().compute(**kwargs)
        _tell_browse(src, index, served=True)
        if out.dtype != self.dtype:  # pragma: no cover - readers return the level dtype
            out = out.astype(self.dtype)
        return out[()] if out.ndim == 0 else out


def _take_prepared(src: _Source, index: _Index) -> np.ndarray | None:
    """The pixels of *index* if :func:`prepare_view` read that box (or the same box with
    an axis kept one wide instead of dropped, as napari asks), else None: handed over once
    (the caller keeps them: no second copy held here), or, for a box kept for every
    request, served as they are, or as a view of them for a box inside it (a plane of a
    kept volume)."""
    ready = src.prepared
    if not ready:
        return None
    got = ready.get(index)
    if got is not None:
        if not got[1]:
            ready.pop(index, None)
        return got[0]
    for box, (pixels, keep) in list(ready.items()):
        inside = _inside(index, box)
        if inside is not None and (keep or inside[1]):
            if not keep:
                ready.pop(box, None)
            return pixels[inside[0]]
    return None


def _inside(index: _Index, box: _Index) -> tuple[tuple[int | slice | None, ...], bool] | None:
    """*index* as an index into the pixels of *box*, and whether it is all of them, when
    *index* lies inside *box* (an axis *box* drops may be asked one wide), else None."""
    if len(index) != len(box):
        return None
    out: list[int | slice | None] = []
    whole = True
    for i, b in zip(index, box, strict=True):
        if isinstance(b, int):
            if i == b:
                continue
            if isinstance(i, int) or i != (b, b + 1):
                return None
            out.append(None)  # the same plane, its axis kept
        elif isinstance(i, int):
            if not b[0] <= i < b[1]:
                return None
            out.append(i - b[0])
            whole = False  # a plane of the box: not all of it
        elif b[0] <= i[0] and i[1] <= b[1]:
            out.append(slice(i[0] - b[0], i[1] - b[0]))
            whole = whole and i == b
        else:
            return None
    return tuple(out), whole


#: how much :func:`prepare_view` reads in one call (whole chunks), between cancel checks
_PREPARE_STEP = 16 << 20


def _view_of(arr: object) -> tuple[_Source, _Index] | None:
    if isinstance(arr, LevelArray):
        return arr._src, arr._index
    if isinstance(arr, LazyArray):
        return arr._direct()
    return None


def prepare_view(
    arr: object, cancelled: Callable[[], bool] = lambda: False, keep: bool = False
) -> bool:
    """Read the view *arr* (a :class:`LazyArray` or :class:`LevelArray`) now, on the
    calling thread, a plane of its first axis at a time, and keep its pixels for the next
    ``np.asarray`` / ``compute()`` of the same box on that level (from any view of it):
    napari's request is then served at once. With *keep*, every request of that box, or
    of a box inside it, is served until :func:`forget_prepared` (a small level napari
    asks for again and again: the coarsest, for 3D and the thumbnails). Returns False
    (nothing kept) when *arr* is not such a view or *cancelled()* became true between
    planes; read errors propagate."""
    view = _view_of(arr)
    if view is None:
        return False
    src, index = view
    sel = _selection(index)
    shape = tuple(b - a for i in index if not isinstance(i, int) for a, b in [i])
    out = np.empty(shape, dtype=src.dtype)
    first = next((k for k, i in enumerate(index) if not isinstance(i, int)), None)
    if first is None or shape[0] == 0:
        out[...] = np.asarray(src.reader[sel])
    else:
        # whole chunks of the first axis at a time, about _PREPARE_STEP bytes: one read
        # asks for all their chunks at once (remote: concurrent requests)
        a, b = cast(tuple[int, int], index[first])
        per_plane = max(1, out[0].nbytes)
        bounds = [x for x in src.bounds[first] if a < x < b]
        cuts, start = [], a
        for x in [*bounds, b]:
            if (x - start) * per_plane >= _PREPARE_STEP or x == b:
                cuts.append((start, x))
                start = x
        for lo, hi in cuts:
            if cancelled():
                return False
            part = list(sel)
            part[first] = slice(lo, hi)
            out[lo - a : hi - a] = np.asarray(src.reader[tuple(part)])
    if cancelled():
        return False
    src.prepared[index] = (out, keep)
    return True


def view_box(arr: object) -> tuple[object, _Index] | None:
    """What identifies the box of the level view *arr* (its level and index), else None."""
    view = _view_of(arr)
    return None if view is None else (view[0], view[1])


def is_prepared(arr: object) -> bool:
    """Whether :func:`prepare_view` holds the pixels of the view *arr*'s box."""
    view = _view_of(arr)
    return view is not None and view[1] in view[0].prepared


def forget_prepared(arr: object) -> None:
    """Drop the pixels :func:`prepare_view` kept for the view *arr*'s box (memory back)."""
    view = _view_of(arr)
    if view is not None:
        view[0].prepared.pop(view[1], None)


def _tell_browse(src: _Source, index: _Index, served: bool = False) -> None:
    """A view is about to be read (napari's tiles), or was: tell the image's
    :class:`~napari_ozx.ngff.read.browse.Browse` (remote images), which fetches what comes
    next. Never raises: prefetching is a hint."""
    hint = getattr(src.reader, "browse", None)
    if hint is not None:
        try:
            if served:
                hint[0].served(hint[1], index)
            else:
                hint[0].demand(hint[1], index)
        except Exception:  # pragma: no cover - a hint; the read itself goes on
            import logging

            logging.getLogger(__name__).debug("browse hint failed", exc_info=True)


def _selection(index: _Index) -> tuple[int | slice, ...]:
    return tuple(i if isinstance(i, int) else slice(i[0], i[1]) for i in index)


def _as_int(x: object) -> int | None:
    """``x`` as a Python int when numpy would index with it as one (not bool)."""
    if type(x) is int:
        return x
    if isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
        return int(x)
    return None


def _compose(old: _Index, shape: Sequence[int], index: object) -> _Index | None:
    """``old`` (a box on the root) indexed by ``index`` on the view, or None when the
    index is not a plain basic one (dask then handles it, errors included)."""
    idx = index if type(index) is tuple else (index,)
    kept = [k for k, i in enumerate(old) if type(i) is not int]
    at = [j for j, i in enumerate(idx) if i is Ellipsis]  # (`in` would compare arrays)
    if at:
        if len(at) > 1:
            return None
        fill = len(kept) - (len(idx) - 1)
        if fill < 0:
            return None  # too many indices: dask's IndexError
        idx = (*idx[: at[0]], *([_ALL] * fill), *idx[at[0] + 1 :])
    elif len(idx) > len(kept):
        return None
    new = list(old)
    for k, item in zip(kept, idx, strict=False):  # missing trailing indices: whole axes
        a, b = old[k]  # type: ignore[misc]
        n = b - a
        if type(item) is slice:
            start, stop, step = item.start, item.stop, item.step
            if step is not None and _as_int(step) != 1:
                return None
            if start is None and stop is None:
                continue
            if (start is not None and _as_int(start) is None) or (
                stop is not None and _as_int(stop) is None
            ):
                return None
            s0, s1, _ = slice(start, stop).indices(n)
            new[k] = (a + s0, a + max(s0, s1))
            continue
        i = _as_int(item)
        if i is None:
            return None
        if i < 0:
            i += n
        if not 0 <= i < n:
            return None  # out of range: dask's IndexError
        new[k] = a + i
    return tuple(new)


_ALL = slice(None)


def _axis_chunks(bounds: list[int], a: int, b: int) -> tuple[int, ...]:
    """The chunks dask gives the slice ``a:b`` of an axis with these block bounds."""
    if a >= b:
        return (0,)
    i0 = bisect_right(bounds, a) - 1
    i1 = bisect_left(bounds, b) - 1
    return tuple(min(b, bounds[i + 1]) - max(a, bounds[i]) for i in range(i0, i1 + 1))


def _view(src: _Source, index: _Index) -> LazyArray:
    chunks = tuple(
        _axis_chunks(src.bounds[k], *i) for k, i in enumerate(index) if not isinstance(i, int)
    )
    # deterministic and exact (equal views share task keys, as with dask's tokenize)
    name = "getitem-" + src.name + "[" + ",".join(map(_fmt, index)) + "]"
    # no graph yet: built when something asks for it (see LazyArray.dask)
    obj: LazyArray = new_dask_view(
        LazyArray, name, chunks, np.empty((0,) * len(chunks), dtype=src.dtype)
    )
    obj._ozx_graph = None
    obj._ozx_src = src
    obj._ozx_index = index
    obj._ozx_name = name
    return obj


def _flat(keys: object) -> Iterator[tuple[Any, ...]]:
    """dask's nested lists of block keys, flattened."""
    if isinstance(keys, list):
        for k in keys:
            yield from _flat(k)
    else:
        yield cast("tuple[Any, ...]", keys)


def _fmt(i: int | tuple[int, int]) -> str:
    return str(i) if isinstance(i, int) else f"{i[0]}:{i[1]}"


def lazy_array(
    reader: Any, chunks: Sequence[Any], name: str, dtype: np.dtype[Any], *, fancy: bool
) -> Any:
    """A dask array over ``reader`` (``reader[sel]`` reads a box) as a :class:`LazyArray`
    with the same graph, name and chunks; the dask array itself when the direct path is
    off (:func:`~napari_ozx.ngff.read.fastpaths.enabled`). ``fancy``: dask's getter then
    fuses a slice of a chunk into the chunk's own read. Under dask's array
    query planning, whose arrays do not turn into numpy arrays (``np.asarray`` gives an
    object array of dask arrays, dask issue #11922) so that napari can show none, a
    :class:`LevelArray` (said once in the log)."""
    from napari_ozx._compat import dask_query_planning
    from napari_ozx.ngff.read.fastpaths import declined, enabled

    arr = da.from_array(
        reader,
        chunks=chunks,
        name=name,
        lock=False,
        asarray=False,
        fancy=fancy,
        inline_array=True,
        meta=np.empty((0,) * len(chunks), dtype=dtype),
    )
    if dask_query_planning():
        declined(
            "tiles through dask",
            "dask's array query planning is on: levels are napari-ozx arrays read directly "
            "(its dask arrays do not convert to numpy, which napari needs)",
        )
        return LevelArray(_Source(reader, arr, graph=False), arr)
    if not enabled():
        return arr
    graph: Mapping[Any, Any] = arr.dask
    out = LazyArray(graph, arr.name, arr.chunks, meta=np.empty((0,) * arr.ndim, arr.dtype))
    src = _Source(reader, out)
    out._ozx_src = src
    out._ozx_index = tuple((0, n) for n in src.shape)
    out._ozx_name = out.name
    return out


class LevelArray:
    """A pyramid level (or a view of one) that napari reads without dask: ``shape``,
    ``dtype``, ``ndim``, ``chunks``; basic indexing gives views (composed like
    :class:`LazyArray`'s), any other index reads the whole view and indexes it as dask
    does (a list picks along its own axis);
    ``np.asarray`` / ``compute()`` read the box through the level's reader (falling back
    to the level's dask array, whose errors a user then sees); ``to_dask()`` is the dask
    array. Used under dask's array query planning (see :func:`lazy_array`)."""

    def __init__(self, src: _Source, root: da.Array, index: _Index | None = None) -> None:
        self._src = src
        self._root = root  # the level's dask array: the general path and its errors
        self._index: _Index = index if index is not None else tuple((0, n) for n in src.shape)
        self.shape: tuple[int, ...] = tuple(
            b - a for i in self._index if not isinstance(i, int) for a, b in [i]
        )
        self.dtype = src.dtype
        self.ndim = len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        return tuple(
            _axis_chunks(self._src.bounds[k], *i)
            for k, i in enumerate(self._index)
            if not isinstance(i, int)
        )

    @property
    def chunksize(self) -> tuple[int, ...]:
        return tuple(max(c) for c in self.chunks)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"LevelArray(shape={self.shape}, dtype={self.dtype}, source={self._src.name})"

    def __getitem__(self, key: object) -> Any:
        new = _compose(self._index, self._src.shape, key)
        if new is not None:
            return LevelArray(self._src, self._root, new)
        return orthogonal(np.asarray(self), key)  # as a dask array indexes; numpy's errors

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        out = np.asarray(self.compute())
        return out if dtype is None else out.astype(dtype, copy=False)

    def compute(self, **_: object) -> np.ndarray:
        ready = _take_prepared(self._src, self._index)
        if ready is not None:
            return ready
        sel = _selection(self._index)
        _tell_browse(self._src, self._index)
        try:
            out = np.asarray(self._src.reader[sel])
        except Exception:
            out = np.asarray(self._root[sel].compute())
        else:
            _tell_browse(self._src, self._index, served=True)
        if out.dtype != self.dtype:  # pragma: no cover - readers return the level dtype
            out = out.astype(self.dtype)
        return out[()] if out.ndim == 0 else out

    def to_dask(self) -> Any:
        return self._root[_selection(self._index)]


def source_reader(arr: object) -> Any:
    """The reader behind a :class:`LazyArray` or :class:`LevelArray` (a level or a view
    of one), else None."""
    if isinstance(arr, LevelArray):
        return arr._src.reader
    src = getattr(arr, "_ozx_src", None) if isinstance(arr, LazyArray) else None
    return None if src is None else src.reader
