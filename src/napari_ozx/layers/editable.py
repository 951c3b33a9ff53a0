"""Editable labels without loading the volume: a copy-on-write level 0.

napari makes a multiscale Labels layer read-only, and a dask array cannot be painted. An
:class:`EditableLabels` stands in for level 0: reads go to the lazy source, a write copies
only the touched storage chunks into memory (the dirty map), so memory grows by a chunk
per chunk touched, never by the volume; :mod:`napari_ozx.layers.saveback` writes just those
back. Both ways napari indexes labels work: basic indexing (display slicing) and a tuple
of coordinate arrays (painting, fill, undo). The layer is single-scale (napari reads the
shown plane at full resolution, cheap up to a few thousand pixels a side).
:func:`make_labels_editable` swaps a multiscale labels layer for one on demand;
:func:`read_only_reason` is what a read-only one says; :func:`fingerprint` records what
was opened, so a save refuses a file changed since; :func:`repoint_archive` follows an
``.ozx`` that napari-ozx rebuilt.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from napari_ozx._compat import napari_layer_state
from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import EDITABLE_KEY
from napari_ozx.ngff.read.documents import local_root
from napari_ozx.ngff.read.indexing import basic_box, expand, is_fancy
from napari_ozx.ozx.edit import Fingerprint

if TYPE_CHECKING:
    import numpy.typing as npt
    import zarr
    from napari.layers import Labels, Layer
    from napari.viewer import Viewer
    from zarr.abc.store import Store

logger = logging.getLogger(__name__)

__all__ = [
    "EDITABLE_KEY",
    "EditableLabels",
    "Fingerprint",
    "array_on_store",
    "chunk_reader",
    "fingerprint",
    "labels_entry",
    "make_labels_editable",
    "opened_editable",
    "read_only_reason",
    "repoint_archive",
]

#: a labels pyramid whose level-0 plane is at most this many pixels opens editable
CHEAP_PLANE_PIXELS = 4096 * 4096

Chunk = tuple[int, ...]


class LevelLike(Protocol):
    """A lazy level (dask, zarr or numpy array): what :class:`EditableLabels` reads."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    @property
    def ndim(self) -> int: ...

    @property
    def size(self) -> int: ...

    def __getitem__(self, key: tuple[slice, ...], /) -> Any: ...


class ChunkReader(Protocol):
    """What our reader's dask arrays read through: ``array`` is the zarr array."""

    array: zarr.Array


class EditableLabels:
    """A writable, lazily read, copy-on-write integer array over *base* (level 0)."""

    def __init__(self, base: LevelLike, chunks: Sequence[int] | None = None) -> None:
        if not np.issubdtype(np.dtype(base.dtype), np.integer):
            raise OzxError(f"labels must be of an integer type, not {base.dtype}")
        self.base = base
        self.shape: tuple[int, ...] = tuple(int(s) for s in base.shape)
        self.dtype = np.dtype(base.dtype)
        self.ndim = len(self.shape)
        self.chunks: tuple[int, ...] = (
            tuple(
                max(1, min(int(c), s))
                for c, s in zip(chunks or _storage_chunks(base), self.shape, strict=True)
            )
            if self.shape
            else ()
        )
        self._dirty: dict[Chunk, np.ndarray] = {}
        #: the source's fingerprint when opened (see :func:`fingerprint`)
        self.opened: Fingerprint | None = None
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- queries
    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def dirty_chunks(self) -> list[Chunk]:
        """Grid indices of the chunks changed since opening (or the last save-back)."""
        with self._lock:
            return sorted(self._dirty)

    @property
    def dirty_nbytes(self) -> int:
        with self._lock:
            return sum(a.nbytes for a in self._dirty.values())

    def chunk_region(self, idx: Chunk) -> tuple[slice, ...]:
        return tuple(
            slice(i * c, min((i + 1) * c, s))
            for i, c, s in zip(idx, self.chunks, self.shape, strict=True)
        )

    def dirty_items(self) -> list[tuple[tuple[slice, ...], np.ndarray]]:
        """(region, values) of every changed chunk (copies, safe to use while painting)."""
        with self._lock:
            return [(self.chunk_region(k), v.copy()) for k, v in sorted(self._dirty.items())]

    def clear_dirty(self) -> None:
        """Forget the edits: after a save-back the base holds them."""
        with self._lock:
            self._dirty.clear()

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (
            f"EditableLabels(shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}, "
            f"dirty={len(self._dirty)})"
        )

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        out = self[(slice(None),) * self.ndim]
        return out.astype(dtype, copy=False) if dtype is not None else out

    # ---------------------------------------------------------------- reading
    def __getitem__(self, key: object) -> Any:
        key = expand(key, self.ndim)
        if is_fancy(key):
            idx = np.broadcast_arrays(*(np.asarray(k, dtype=np.intp) for k in key))
            return self._get_points(idx)
        box, post = basic_box(key, self.shape)
        region = tuple(slice(a, b) for a, b in box)
        return self._read_region(region)[post]

    def _read_base(self, region: tuple[slice, ...]) -> np.ndarray:
        block = self.base[region]
        from dask import is_dask_collection

        if is_dask_collection(block):
            # private callbacks: napari's global dask cache must not see (or keep) these
            block = block.compute(scheduler="synchronous", callbacks=())
        return np.asarray(block, dtype=self.dtype)

    def _read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        out = None
        with self._lock:
            dirty = [
                (k, v) for k, v in self._dirty.items() if _overlap(self.chunk_region(k), region)
            ]
        if region_size(region):
            out = self._read_base(region)
        else:
            out = np.empty([s.stop - s.start for s in region], self.dtype)
        if dirty:
            out = np.array(out, copy=True)
            for k, v in dirty:
                in_chunk, in_region = _overlap_slices(self.chunk_region(k), region)
                out[in_region] = v[in_chunk]
        return out

    def _chunk_for_read(self, idx: Chunk) -> np.ndarray:
        with self._lock:
            v = self._dirty.get(idx)
        return v if v is not None else self._read_base(self.chunk_region(idx))

    def _dirty_chunk(self, idx: Chunk) -> np.ndarray:
        with self._lock:
            v = self._dirty.get(idx)
            if v is None:
                v = np.array(self._read_base(self.chunk_region(idx)), copy=True)
                self._dirty[idx] = v
            return v

    def _group(
        self, idx: Sequence[np.ndarray]
    ) -> Iterator[tuple[Chunk, np.ndarray, tuple[np.ndarray, ...]]]:
        """Points grouped by chunk: (chunk index, which points, their in-chunk coords)."""
        flat = [np.ravel(i) for i in idx]
        for ax, (a, s) in enumerate(zip(flat, self.shape, strict=True)):
            if a.size and (a.min() < -s or a.max() >= s):
                raise IndexError(f"index out of bounds for axis {ax} with size {s}")
        flat = [np.where(a < 0, a + s, a) for a, s in zip(flat, self.shape, strict=True)]
        cid = (
            np.stack([a // c for a, c in zip(flat, self.chunks, strict=True)], axis=-1)
            if flat
            else None
        )
        if cid is None or cid.size == 0:
            return
        uniq, inverse = np.unique(cid, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        for u, ck in enumerate(uniq):
            sel = np.nonzero(inverse == u)[0]
            chunk = tuple(int(x) for x in ck)
            local = tuple(a[sel] - c * i for a, c, i in zip(flat, self.chunks, chunk, strict=True))
            yield chunk, sel, local

    def _get_points(self, idx: Sequence[np.ndarray]) -> np.ndarray:
        shape = idx[0].shape if idx else ()
        out = np.empty(int(np.prod(shape)), dtype=self.dtype)
        for chunk, sel, local in self._group(idx):
            out[sel] = self._chunk_for_read(chunk)[local]
        return out.reshape(shape)

    # ---------------------------------------------------------------- writing
    def __setitem__(self, key: object, value: npt.ArrayLike) -> None:
        key = expand(key, self.ndim)
        if is_fancy(key):
            idx = np.broadcast_arrays(*(np.asarray(k, dtype=np.intp) for k in key))
            vals = np.broadcast_to(np.asarray(value, dtype=self.dtype), idx[0].shape).ravel()
            with self._lock:
                for chunk, sel, local in self._group(idx):
                    self._dirty_chunk(chunk)[local] = vals[sel]
            return
        box, post = basic_box(key, self.shape)
        region = tuple(slice(a, b) for a, b in box)
        target_shape = np.empty([s.stop - s.start for s in region], dtype=bool)[post].shape
        vals = np.broadcast_to(np.asarray(value, dtype=self.dtype), target_shape)
        full = np.empty([s.stop - s.start for s in region], dtype=self.dtype)
        mask = np.zeros(full.shape, dtype=bool)
        full[post] = vals
        mask[post] = True
        with self._lock:
            for chunk in self._chunks_in(region):
                in_chunk, in_region = _overlap_slices(self.chunk_region(chunk), region)
                if not mask[in_region].any():
                    continue
                block = self._dirty_chunk(chunk)
                sub = block[in_chunk]
                np.copyto(sub, full[in_region], where=mask[in_region])

    def _chunks_in(self, region: tuple[slice, ...]) -> Iterator[Chunk]:
        ranges = [
            range(r.start // c, -(-r.stop // c)) if r.stop > r.start else range(0)
            for r, c in zip(region, self.chunks, strict=True)
        ]
        yield from itertools.product(*ranges)


def region_size(region: tuple[slice, ...]) -> int:
    return math.prod(max(0, s.stop - s.start) for s in region)


def _storage_chunks(base: LevelLike) -> tuple[int, ...]:
    """The zarr (inner) chunk shape behind a dask array from our reader, else its chunks."""
    reader = chunk_reader(base)
    if reader is not None and len(reader.array.chunks) == len(base.shape):
        return tuple(int(c) for c in reader.array.chunks)
    chunks = getattr(base, "chunks", None)  # a dask array's blocks, or a zarr array's chunks
    if chunks and all(isinstance(c, tuple) and c for c in chunks):
        return tuple(max(c) for c in chunks)
    if chunks and all(isinstance(c, int) for c in chunks):
        return tuple(chunks)
    return tuple(min(s, 256) for s in base.shape)


def chunk_reader(base: object) -> ChunkReader | None:
    """The object our reader's dask arrays read through (``.array`` is the zarr array)."""
    from napari_ozx.ngff.read.lazy import source_reader

    reader = source_reader(base)  # our levels and their views name it directly
    if reader is not None:
        return cast("ChunkReader", reader)
    if not hasattr(base, "__dask_graph__"):
        return None
    graph = getattr(base, "dask", None)
    if graph is None:
        return None
    # from_array(..., inline_array=True) keeps the array object in every reading task
    for task in dict(graph).values():
        found = _find_reader(task)
        if found is not None:
            return found
    return None


def _find_reader(obj: object, depth: int = 0) -> ChunkReader | None:
    if depth > 6:
        return None
    if hasattr(obj, "array") and hasattr(obj, "source") and hasattr(obj.array, "metadata"):
        return cast("ChunkReader", obj)
    for attr in ("args", "kwargs"):
        inner = getattr(obj, attr, None)
        if isinstance(inner, dict):
            inner = list(inner.values())
        if isinstance(inner, tuple | list):
            for x in inner:
                f = _find_reader(x, depth + 1)
                if f is not None:
                    return f
    value = getattr(obj, "value", None)
    if value is not None and value is not obj:
        f = _find_reader(value, depth + 1)
        if f is not None:
            return f
    if isinstance(obj, tuple | list):
        for x in obj:
            f = _find_reader(x, depth + 1)
            if f is not None:
                return f
    return None


def _overlap(a: tuple[slice, ...], b: tuple[slice, ...]) -> bool:
    return all(x.start < y.stop and y.start < x.stop for x, y in zip(a, b, strict=True))


def _overlap_slices(
    chunk: tuple[slice, ...], region: tuple[slice, ...]
) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """Where *chunk* and *region* (both in array coordinates) overlap, as slices into the
    chunk's block and into the region's."""
    inter = [
        slice(max(c.start, r.start), min(c.stop, r.stop))
        for c, r in zip(chunk, region, strict=True)
    ]
    in_chunk = tuple(slice(i.start - c.start, i.stop - c.start) for i, c in zip(inter, chunk))
    in_region = tuple(slice(i.start - r.start, i.stop - r.start) for i, r in zip(inter, region))
    return in_chunk, in_region


# ------------------------------------------------------------------ fingerprint


def fingerprint(data: EditableLabels) -> Fingerprint | None:
    """What must not change between opening and saving: the stored array document of
    level 0 (directory) or the whole archive (``.ozx``: size, mtime, inode); None when
    *data* was not read from a local file."""
    reader = chunk_reader(data.base)
    if reader is None:
        return None
    store = reader.array.store_path.store
    path = reader.array.path.strip("/")
    root = local_root(store)
    if root is not None:
        lead = f"{path}/" if path else ""
        return Fingerprint.of(root, (f"{lead}zarr.json", f"{lead}.zarray"))
    ozx = getattr(store, "path", None)
    if ozx:
        from napari_ozx.ozx.remote import is_url

        if is_url(str(ozx)) or not os.path.exists(ozx):
            # remote (HTTP / S3): nothing to stat; a save-back refuses it (saveback.py)
            return Fingerprint(str(ozx), (), ("remote",))
        return Fingerprint.of(ozx)
    return None


# --------------------------------------------------------------------- layers


# every editable array opened from a file, weakly: when napari-ozx rebuilds an .ozx
# (a save-back, new labels added) the others of that archive follow it (repoint_archive)
_live: weakref.WeakSet[EditableLabels] = weakref.WeakSet()
_live_lock = threading.Lock()


def opened_editable(level0: LevelLike) -> EditableLabels:
    """An :class:`EditableLabels` over *level0* (our reader's lazy level), remembering
    the source's fingerprint so a save-back can tell when the file changed."""
    e = EditableLabels(level0)
    e.opened = fingerprint(e)
    with _live_lock:
        _live.add(e)
    return e


_editable = opened_editable


def array_on_store(a: zarr.Array, store: Store) -> zarr.Array:
    """The zarr array *a* (same metadata and path) read from *store*."""
    import zarr
    from zarr import AsyncArray
    from zarr.storage import StorePath

    return zarr.Array(AsyncArray(metadata=a.metadata, store_path=StorePath(store, a.path)))


def repoint_archive(
    target: str | os.PathLike[str],
    before: Fingerprint | None,
    arrays: Iterable[EditableLabels] = (),
    changed: str | None = None,
) -> Store:
    """napari-ozx replaced the ``.ozx`` *target* (fingerprint *before*) by a new archive
    whose members are the old ones byte for byte, except below the level-0 array
    *changed* (a save-back's labels; ``None`` when nothing changed). Every open lazy
    level reading the old file now reads the new one
    (:func:`~napari_ozx.ngff.read.live.follow_archive`: the old file's space is not held), and every
    live editable array that had opened it as *before*, and *arrays*, counts as having opened the
    new one. Without this a save-back of one label image made every other label image of the archive
    refuse to save ("the file changed since ... opened"). Arrays opened separately on *changed*
    keep the old file (and still refuse to save over the change). Returns the new store.
    """
    from napari_ozx.ngff.read.live import follow_archive, set_array
    from napari_ozx.ngff.read.open import open_store

    store = open_store(target)
    skip = {changed} if changed is not None else set()
    if before is not None and before.inode is not None:
        follow_archive(target, before.inode, store, skip)
    with _live_lock:
        todo = [e for e in _live if before is not None and e.opened == before]
    forced = list(arrays)
    todo.extend(a for a in forced if all(a is not t for t in todo))
    key = os.path.realpath(target)
    for e in todo:
        reader = chunk_reader(e.base)
        if reader is None:
            continue
        old = reader.array.store_path.store
        if old is not store:
            if os.path.realpath(str(getattr(old, "path", ""))) != key:
                continue
            if reader.array.path in skip and all(e is not a for a in forced):
                continue
            set_array(reader, array_on_store(reader.array, store))
        e.opened = fingerprint(e)
    return store


def read_only_reason(name: str) -> str:
    return (
        f"labels {name!r} open read-only: napari cannot paint into a multiscale (pyramid) "
        "labels layer. Use Layers > 'Edit labels at full resolution (napari-ozx)' (or "
        "napari_ozx.layers.editable.make_labels_editable) to edit level 0; save with "
        "'Save labels back into the file (napari-ozx)'."
    )


def labels_entry(
    levels: Sequence[LevelLike], kw: Mapping[str, object]
) -> tuple[object, dict[str, object], str]:
    """The reader's hook: layer data for one label image given its lazy *levels*.

    A single level, or a pyramid whose level-0 plane is cheap to show at full
    resolution, opens editable (an :class:`EditableLabels`); a larger pyramid stays
    multiscale and read-only, and its metadata says why and how to edit it.
    """
    lvl0 = levels[0]
    plane = math.prod(lvl0.shape[-2:]) if lvl0.ndim >= 2 else lvl0.size
    if len(levels) == 1 or plane <= CHEAP_PLANE_PIXELS:
        meta = {**_metadata(kw), EDITABLE_KEY: True}
        return _editable(lvl0), {**kw, "multiscale": False, "metadata": meta}, "labels"
    meta = {**_metadata(kw), "ozx_read_only": read_only_reason(str(kw.get("name")))}
    return levels, {**kw, "metadata": meta}, "labels"


def _metadata(kw: Mapping[str, object]) -> Mapping[str, object]:
    return cast("Mapping[str, object]", kw.get("metadata", {}))


def make_labels_editable(layer: Layer) -> Labels:
    """A single-scale Labels layer editing *layer*'s level 0 copy-on-write (nothing is
    loaded until shown or painted). Returns *layer* itself when it already is editable."""
    from napari.layers import Labels

    if not isinstance(layer, Labels):
        raise OzxError(f"layer {layer.name!r} is not a labels layer")
    if isinstance(layer.data, EditableLabels):
        return layer
    data = layer.data[0] if layer.multiscale else layer.data
    state = napari_layer_state(layer)
    for k in ("data", "multiscale"):
        state.pop(k, None)
    state["metadata"] = {**state.get("metadata", {}), EDITABLE_KEY: True}
    state["metadata"].pop("ozx_read_only", None)
    new = Labels(_editable(data), **{k: v for k, v in state.items() if k in _LABELS_ARGS})
    return new


_LABELS_ARGS = {
    "name",
    "metadata",
    "scale",
    "translate",
    "rotate",
    "shear",
    "affine",
    "opacity",
    "blending",
    "visible",
    "colormap",
    "features",
    "axis_labels",
    "units",
    "rendering",
    "depiction",
    "iso_gradient_mode",
    "plane",
    "experimental_clipping_planes",
}


def edit_selected_labels(viewer: Viewer) -> list[Labels]:
    """Replace every selected multiscale (read-only) labels layer of *viewer* by an
    editable one at the same place in the layer list. Returns the new layers."""
    from napari.layers import Labels

    out = []
    for layer in [lyr for lyr in viewer.layers.selection if isinstance(lyr, Labels)]:
        if isinstance(layer.data, EditableLabels):
            continue
        new = make_labels_editable(layer)
        i = viewer.layers.index(layer)
        viewer.layers.remove(layer)
        viewer.layers.insert(i, new)
        out.append(new)
    return out
