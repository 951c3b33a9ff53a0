"""Save edited labels back into the file they came from, with one action.

:func:`save_labels_back` writes only what changed: in a directory the changed level-0
chunks (whole shards when sharded) and the lower levels' regions they cover, every other
file untouched; an ``.ozx`` is rebuilt beside itself copying every unchanged member byte
for byte in the kernel, then renamed onto the old one. The new bytes are staged in memory
first (encoded directly for the direct reader's layouts, :mod:`napari_ozx.ngff.read.chunks`,
else by zarr), lower levels taken from the staged level above by every n-th pixel, and
only then committed by one :class:`~napari_ozx.layers.transaction.EditTransaction`
(an ``.ozx``'s unchanged members copied ahead while the chunks are encoded). Refused with one
:class:`SaveBackError` naming the file and the reason, nothing written: a read-only
target, a source changed since opened, non-integer labels, a shape or data type unlike
the stored level 0, a channel axis.

Why, and what it costs (``benchmarks/bench_saveback.py``): ``docs/design/saving.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from napari_ozx.layers.editable import EditableLabels, array_on_store, chunk_reader, fingerprint
from napari_ozx.layers.transaction import EditTransaction, SaveBackError, refusal, save_errors

if TYPE_CHECKING:
    import threading

    import zarr
    from napari.layers import Layer
    from zarr.abc.buffer import Buffer
    from zarr.abc.store import ByteRequest, Store, SupportsGetSync

    from napari_ozx.ngff.read.fastread import FastReader
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.read.open import OmeZarr

logger = logging.getLogger(__name__)

__all__ = ["SaveBackError", "save_labels_back"]


# ---------------------------------------------------------------- staging store


def _staging_store(base: Store) -> Any:
    from zarr.buffer import default_buffer_prototype

    from napari_ozx.ozx.store import BytesStore, byte_bounds

    class _StagingStore(BytesStore):
        """Reads *base*, keeps every write (and delete) in memory."""

        supports_writes = True
        supports_deletes = True
        supports_partial_writes = False
        supports_listing = False

        def __init__(self) -> None:
            super().__init__(read_only=False)
            self.base = base
            self.staged: dict[str, bytes | None] = {}  # None: deleted

        def __eq__(self, other: object) -> bool:
            return self is other

        def __hash__(self) -> int:
            return id(self)

        async def get_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
            if key not in self.staged:
                buf = await self.base.get(key, default_buffer_prototype(), byte_range)
                return None if buf is None else buf.to_bytes()
            data = self.staged[key]
            if data is None:
                return None
            start, stop = byte_bounds(byte_range, len(data))
            return data[start:stop]

        async def exists(self, key: str) -> bool:
            if key in self.staged:
                return self.staged[key] is not None
            return bool(await self.base.exists(key))

        async def set(self, key: str, value: Buffer) -> None:
            self.staged[key] = value.to_bytes()

        async def delete(self, key: str) -> None:
            self.staged[key] = None

        async def list(self) -> AsyncIterator[str]:  # pragma: no cover - not listed
            return
            yield

        async def list_prefix(self, prefix: str) -> AsyncIterator[str]:  # pragma: no cover
            return
            yield

        async def list_dir(self, prefix: str) -> AsyncIterator[str]:  # pragma: no cover
            return
            yield

    return _StagingStore()


# -------------------------------------------------------------------- save back


def save_labels_back(layer: Layer) -> Path:
    """Write *layer*'s edits into the OME-Zarr it was opened from (see the module).

    Parameters
    ----------
    layer : napari.layers.Labels
        A labels layer (or anything with ``data`` and ``metadata``) whose data is an
        :class:`EditableLabels`.

    Returns
    -------
    pathlib.Path
        The OME-Zarr file the edits were written into.

    Raises
    ------
    SaveBackError
        Refused, nothing written: a read-only target, a source changed since it was
        opened, labels that are not integers, a shape or data type unlike level 0.
    """
    data = layer.data
    meta = getattr(layer, "metadata", {}) or {}
    from napari_ozx.layers.provenance import LayerSource

    where = LayerSource.from_metadata(meta)
    src = where.source if where is not None and where.kind == "labels" else None
    node = where.node if where is not None else None
    name = getattr(layer, "name", "labels")
    if where is not None and where.channel is not None:
        raise SaveBackError(
            f"labels {name!r} are one channel of a label image; saving back channels is not "
            f"supported: {src} (nothing was written)"
        )
    if not isinstance(data, EditableLabels) or src is None or node is None:
        raise SaveBackError(
            f"labels {name!r} were not opened editable from an OME-Zarr file; "
            "save them with File > Save instead"
        )
    from napari_ozx.ozx.remote import is_url

    if is_url(src):
        raise SaveBackError(
            f"labels {name!r} were opened over the network ({src}): napari-ozx saves labels "
            "back into local files only; save them with File > Save instead (nothing was "
            "written)"
        )
    target = Path(src)
    with save_errors(f"saving labels {name!r} back into", target):
        return _save_back(target, node, data, name)


def _save_back(target: Path, node: str, data: EditableLabels, name: str) -> Path:
    from napari_ozx.ngff.read.open import open_ome_zarr

    if not np.issubdtype(data.dtype, np.integer):
        raise refusal(target, f"labels {name!r} are not integers ({data.dtype})")
    if not target.exists():
        raise refusal(target, "the source no longer exists")
    dirty = data.dirty_items()
    opened = data.opened
    # an .ozx: reuse the descriptor the layer already reads (once the transaction has
    # found the file unchanged since it was opened)
    reader = chunk_reader(data.base)
    store: Any = reader.array.store_path.store if reader is not None else None
    store_path = getattr(store, "path", None)
    same = (
        target.is_file()
        and isinstance(store_path, str)
        and os.path.realpath(store_path) == os.path.realpath(target)
        and opened is not None
        and not getattr(store, "closed", True)
    )
    action = f"saving labels {name!r} back into"
    with EditTransaction(target, action=action, expect=opened, store=store if same else None) as tx:
        if not dirty:
            return target
        oz = open_ome_zarr(store if same else str(target))
        try:
            _stage_and_commit(tx, oz, node, data, name, dirty)
        finally:
            # an .ozx save replaced the file these read: the last close of its descriptor
            # frees the old file's pages and blocks (~35 ms for 143 MiB on tmpfs), which
            # nobody needs to wait for; readers still on the old file keep it open
            box = [oz, store]
            del oz, store, reader
            _release_later(box)
    return target


_releasing: list[threading.Thread] = []  # threads closing replaced archives (see _release_later)


def _release_later(box: list[object]) -> None:
    """Close *box*'s OmeZarr (its own store, if any) and drop the references in *box* on
    a short-lived thread: when they are the last ones to a replaced archive, its
    descriptor is closed there, a moment later (:func:`released` waits for that)."""
    import threading

    def release() -> None:
        try:
            cast("OmeZarr", box[0]).close()
        except Exception:  # pragma: no cover - closing never fails a finished save
            logger.debug("closing the replaced archive failed", exc_info=True)
        box.clear()

    t = threading.Thread(target=release, name="napari-ozx release", daemon=True)
    _releasing[:] = [x for x in _releasing if x.is_alive()] + [t]
    t.start()


def released(timeout: float | None = None) -> bool:
    """Wait until the files replaced by finished save-backs are closed (their space
    released, unless another layer still reads them); False if *timeout* ran out."""
    import time

    end = None if timeout is None else time.monotonic() + timeout
    for t in list(_releasing):
        t.join(None if end is None else max(0.0, end - time.monotonic()))
    return not any(t.is_alive() for t in _releasing)


def _block_any(mask: np.ndarray, f: list[int], out_shape: tuple[int, ...]) -> np.ndarray:
    """Whether each *f*-sized block of *mask* holds a True (edge blocks may be partial):
    the OR of the block's strided views (for 2x2 blocks, four quarter-size ORs: a
    reduction over the interleaved block axes took ~10x longer)."""
    import itertools

    out = np.zeros(out_shape, dtype=bool)
    for offset in itertools.product(*(range(k) for k in f)):
        part = mask[tuple(slice(o, None, k) for o, k in zip(offset, f, strict=True))]
        part = part[tuple(slice(0, n) for n in out_shape)]
        out[tuple(slice(0, n) for n in part.shape)] |= part
    return out


def _stage_and_commit(
    tx: EditTransaction,
    oz: OmeZarr,
    node: str,
    data: EditableLabels,
    name: str,
    dirty: list[tuple[tuple[slice, ...], np.ndarray]],
) -> None:
    """Check the edits against the stored labels, stage their changed keys in *tx* and
    commit; *data* then reads the saved file and has no edits left."""
    target = tx.target
    image = oz.image(node)
    if image.multiscale.channel_axis is not None:
        raise refusal(target, f"labels {name!r} have a channel axis (not supported here)")
    arrays = [a.array for a in image.arrays]
    lvl0 = arrays[0]
    if tuple(lvl0.shape) != data.shape:
        raise refusal(
            target, f"labels {name!r} have shape {data.shape}, the file {tuple(lvl0.shape)}"
        )
    if not np.issubdtype(lvl0.dtype, np.integer):
        raise refusal(target, f"the stored labels {node!r} are not integers ({lvl0.dtype})")
    for _, v in dirty:
        if v.size and not _fits(v, np.dtype(lvl0.dtype)):
            raise refusal(target, f"label values of {name!r} do not fit {lvl0.dtype}")
    # .ozx: the members no save-back changes (everything but the label arrays' chunks)
    # are copied into the new archive while the changed shards are encoded
    tx.copy_ahead([a.path for a in image.arrays])
    staged = _stage(image, arrays, arrays[0].store_path.store, dirty)
    for key, value in staged.items():
        if value is None:
            tx.delete(key)
        else:
            tx.put(key, value)
    reader = chunk_reader(data.base)
    tx.commit(follow=[data], changed=reader.array.path if reader is not None else None)
    data.clear_dirty()
    data.opened = fingerprint(data)
    logger.info("saved %d changed keys of %r back into %s", len(staged), name, target)


def _stage(
    image: OmeImage,
    arrays: list[zarr.Array],
    base_store: Store,
    dirty: list[tuple[tuple[slice, ...], np.ndarray]],
) -> dict[str, bytes | None]:
    """The new bytes of every changed storage key (None: deleted), in memory: encoded
    directly (:class:`_Direct`) where every level's layout is one we reproduce exactly,
    else by zarr-python."""
    from napari_ozx.ngff.read.fastpaths import declined, enabled

    codecs: list[_Direct | str] = (
        [_direct(a, base_store) for a in arrays] if enabled() else ["fast paths off"]
    )
    if any(c is not None for c in image.crops):
        codecs.append("padded levels")
    why = next((c for c in codecs if isinstance(c, str)), None)
    if why is None:
        return _stage_direct([c for c in codecs if isinstance(c, _Direct)], dirty)
    declined("direct save-back encoding", why)
    return _stage_zarr(image, arrays, base_store, dirty)


def _stage_zarr(
    image: OmeImage,
    arrays: list[zarr.Array],
    base_store: Store,
    dirty: list[tuple[tuple[slice, ...], np.ndarray]],
) -> dict[str, bytes | None]:
    """:func:`_stage` through zarr-python's arrays on a :func:`_staging_store`."""
    lvl0 = arrays[0]
    staging = _staging_store(base_store)
    staged_arrays = [_on_store(a, staging) for a in arrays]
    boxes = [r for r, _ in dirty]
    # one write per shard (each write rewrites its whole shard in the staging store):
    # the shard's dirty chunks pasted onto its stored values
    for bbox in _by_unit(boxes, _plane_unit(arrays[0])):
        block = np.array(image.levels[0][bbox], dtype=lvl0.dtype)
        for region, values in dirty:
            if all(b.start <= r.start and r.stop <= b.stop for r, b in zip(region, bbox)):
                block[
                    tuple(slice(r.start - b.start, r.stop - b.start) for r, b in zip(region, bbox))
                ] = values
        staged_arrays[0][bbox] = block
    for lvl in range(1, len(staged_arrays)):
        prev, cur = staged_arrays[lvl - 1], staged_arrays[lvl]
        f = [max(1, round(p / c)) if c else 1 for p, c in zip(prev.shape, cur.shape, strict=True)]
        boxes = _merge(
            [
                tuple(
                    slice(-(-s.start // k), min(-(-s.stop // k), n))
                    for s, k, n in zip(b, f, cur.shape, strict=True)
                )
                for b in boxes
            ]
        )
        # as stored before this save, read through the image's own levels (the direct
        # reader: no event-loop round trip per read, unlike zarr's arrays)
        original_prev, original_cur = image.levels[lvl - 1], image.levels[lvl]
        for b in _by_unit(boxes, _plane_unit(arrays[lvl])):
            if any(s.stop <= s.start for s in b):
                continue
            # the whole source blocks of this box, changed or not
            src = tuple(
                slice(s.start * k, min(s.stop * k, n))
                for s, k, n in zip(b, f, prev.shape, strict=True)
            )
            new_prev = np.asarray(prev[src])
            changed = new_prev != np.asarray(original_prev[src])
            if not changed.any():
                continue
            # only the pixels whose source block holds a changed pixel are recomputed
            # (nearest, like the writer's labels); every other keeps its stored value, so
            # a pyramid another tool made is left as it was outside the edit's footprint
            affected = _block_any(changed, f, tuple(s.stop - s.start for s in b))
            sampled = new_prev[tuple(slice(None, None, k) for k in f)]
            old_cur = np.asarray(original_cur[b])
            new_cur = np.where(
                affected, sampled[tuple(slice(0, n) for n in old_cur.shape)], old_cur
            )
            if not np.array_equal(new_cur, old_cur):  # a level that does not change is not written
                cur[b] = new_cur
    return dict(staging.staged)


# ------------------------------------------------------------ direct encoding


class _Direct:
    """One level's chunks and shards encoded as zarr-python encodes them, without its
    event loop: a partial shard write there (read the shard, merge, encode, on the loop
    thread and its codec threads) cost ~10 ms per region, most of a save-back's own time
    beside the copy. The layouts and their bytes are :mod:`napari_ozx.ngff.read.chunks`'
    (the direct reader's); the rules are zarr-python's: a chunk equal to the fill value
    everywhere left out (``write_empty_chunks``), a shard with no chunk left deleted,
    unchanged inner chunks keep their bytes."""

    def __init__(self, store: SupportsGetSync, reader: FastReader) -> None:
        import zarr

        self.reader = reader  # the stored values (ngff.fastread: no dask, no event loop)
        self.layout = lo = reader.layout
        self.store = store
        self.shape, self.dtype, self.chunk = lo.shape, lo.dtype, lo.chunk
        self.write_empty = bool(zarr.config.get("array.write_empty_chunks", False))

    def region(self, cc: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of chunk *cc* inside the array."""
        return tuple(
            slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(cc, self.chunk, self.shape)
        )

    def chunks_in(self, box: tuple[slice, ...]) -> Iterator[tuple[int, ...]]:
        import itertools

        return itertools.product(
            *(range(s.start // c, -(-s.stop // c)) for s, c in zip(box, self.chunk, strict=True))
        )

    def read(self, box: tuple[slice, ...]) -> np.ndarray:
        """The stored values of *box* (as before this save)."""
        return np.asarray(self.reader[box], dtype=self.dtype)

    def _encode(self, values: np.ndarray) -> bytes | None:
        """A whole chunk's bytes; None when zarr-python would leave it out."""
        if not self.write_empty and self.layout.is_fill(values):
            return None
        return self.layout.encode(values)

    def _full(self, values: np.ndarray, old: bytes | memoryview | None) -> np.ndarray:
        """A whole chunk (edge chunks padded): *values* inside the array, the stored
        chunk (*old* bytes; else the fill value) outside, as zarr-python merges it."""
        if values.shape == self.chunk:
            return values
        if old is None:
            out = np.full(self.chunk, self.layout.fill)
        else:
            out = self.layout.decode(old).astype(self.dtype)
        out[tuple(slice(0, n) for n in values.shape)] = values
        return out

    def _get(self, key: str) -> memoryview | None:
        buf = self.store.get_sync(key)
        return None if buf is None else memoryview(buf.as_numpy_array().data).cast("B")

    def encode(self, new: dict[tuple[int, ...], np.ndarray]) -> dict[str, bytes | None]:
        """The new bytes of every storage key holding a chunk of *new* (chunk coords ->
        its values inside the array)."""
        lo = self.layout
        if lo.shard is None:
            return {
                lo.key(cc): self._encode(
                    self._full(v, None if v.shape == self.chunk else self._get(lo.key(cc)))
                )
                for cc, v in new.items()
            }
        per = lo.per_shard
        shards: dict[tuple[int, ...], dict[tuple[int, ...], np.ndarray]] = {}
        for cc, v in new.items():
            sc = tuple(i // p for i, p in zip(cc, per, strict=True))
            inner = tuple(i % p for i, p in zip(cc, per, strict=True))
            shards.setdefault(sc, {})[inner] = v
        return {lo.key(sc): self._shard(lo.key(sc), ch) for sc, ch in shards.items()}

    def _shard(self, key: str, changed: dict[tuple[int, ...], np.ndarray]) -> bytes | None:
        lo = self.layout
        raw = self._get(key)
        chunks = {} if raw is None else lo.stored_chunks(raw, f"shard {key!r}")
        for local, v in changed.items():
            enc = self._encode(self._full(v, chunks.get(local)))
            if enc is None:
                chunks.pop(local, None)
            else:
                chunks[local] = enc
        return lo.build_shard({k: bytes(v) for k, v in chunks.items()})


def _direct(array: zarr.Array, store: Store) -> _Direct | str:
    """How to encode *array*'s chunks directly (:class:`_Direct`), or why not."""
    from napari_ozx.ngff.read.chunks import chunk_layout
    from napari_ozx.ngff.read.fastread import fast_reader

    dtype = np.dtype(array.dtype)
    if dtype.kind not in "iub":
        return f"data type {dtype}"
    if not callable(getattr(store, "get_sync", None)):
        return f"a store without synchronous reads ({type(store).__name__})"
    reader = fast_reader(array)
    if reader is None:
        layout = chunk_layout(array)
        return layout if isinstance(layout, str) else "no direct reader (ngff.fastread)"
    return _Direct(cast("SupportsGetSync", store), reader)


def _stage_direct(
    levels: list[_Direct], dirty: list[tuple[tuple[slice, ...], np.ndarray]]
) -> dict[str, bytes | None]:
    """:func:`_stage` without zarr-python: the changed chunks of each level computed
    from the level above (stored values read through the image's own levels, the edits
    laid over them) and encoded by :class:`_Direct`. Same pixels as :func:`_stage_zarr`:
    level 0 takes every edited chunk; below, only pixels whose source block holds a
    changed pixel are recomputed (nearest), and a chunk that does not change is not
    written."""
    new: list[dict[tuple[int, ...], np.ndarray]] = [{} for _ in levels]
    lvl0 = levels[0]
    for region, values in dirty:
        for cc in lvl0.chunks_in(region):
            cr = lvl0.region(cc)
            inter = tuple(
                slice(max(a.start, b.start), min(a.stop, b.stop))
                for a, b in zip(cr, region, strict=True)
            )
            if any(s.stop <= s.start for s in inter):
                continue
            src = tuple(slice(i.start - r.start, i.stop - r.start) for i, r in zip(inter, region))
            block = new[0].get(cc)
            if block is None:
                if inter == cr:  # the whole chunk edited: nothing stored is needed
                    new[0][cc] = np.array(values[src], dtype=lvl0.dtype)
                    continue
                block = np.array(lvl0.read(cr), copy=True)
                new[0][cc] = block
            block[tuple(slice(i.start - c.start, i.stop - c.start) for i, c in zip(inter, cr))] = (
                values[src]
            )
    for lvl in range(1, len(levels)):
        prev, cur = levels[lvl - 1], levels[lvl]
        f = [max(1, round(p / c)) if c else 1 for p, c in zip(prev.shape, cur.shape, strict=True)]
        todo: dict[tuple[int, ...], None] = {}
        for cc in new[lvl - 1]:
            box = tuple(
                slice(s.start // k, min(-(-s.stop // k), n))
                for s, k, n in zip(prev.region(cc), f, cur.shape, strict=True)
            )
            todo.update(dict.fromkeys(cur.chunks_in(box)))
        for cc in todo:
            b = cur.region(cc)
            src = tuple(
                slice(s.start * k, min(s.stop * k, n))
                for s, k, n in zip(b, f, prev.shape, strict=True)
            )
            old_prev = prev.read(src)
            new_prev = _overlay(old_prev, src, prev, new[lvl - 1])
            if new_prev is old_prev:
                continue
            changed = new_prev != old_prev
            if not changed.any():
                continue
            old_cur = cur.read(b)
            affected = _block_any(changed, f, old_cur.shape)
            sampled = new_prev[tuple(slice(None, None, k) for k in f)]
            new_cur = np.where(
                affected, sampled[tuple(slice(0, n) for n in old_cur.shape)], old_cur
            )
            if not np.array_equal(new_cur, old_cur):  # a chunk that does not change is kept
                new[lvl][cc] = new_cur.astype(cur.dtype, copy=False)
    staged: dict[str, bytes | None] = {}
    for level, changes in zip(levels, new, strict=True):
        if changes:
            staged.update(level.encode(changes))
    return staged


def _overlay(
    base: np.ndarray,
    box: tuple[slice, ...],
    level: _Direct,
    changes: dict[tuple[int, ...], np.ndarray],
) -> np.ndarray:
    """*base* (the stored values of *box*) with the *changes* of *level* laid over it;
    *base* itself when none falls inside."""
    out = base
    for cc in level.chunks_in(box):
        v = changes.get(cc)
        if v is None:
            continue
        if out is base:
            out = np.array(base, copy=True)
        cr = level.region(cc)
        inter = tuple(
            slice(max(a.start, b.start), min(a.stop, b.stop)) for a, b in zip(cr, box, strict=True)
        )
        out[tuple(slice(i.start - b.start, i.stop - b.start) for i, b in zip(inter, box))] = v[
            tuple(slice(i.start - c.start, i.stop - c.start) for i, c in zip(inter, cr))
        ]
    return out


def _fits(v: np.ndarray, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return bool(v.min() >= info.min and v.max() <= info.max)


_on_store = array_on_store


def _plane_unit(arr: zarr.Array) -> tuple[int, ...]:
    """Boxes are grouped per plane of one shard (or chunk) in y/x: a stroke's chunks make
    one write of their plane's region, never the planes between two strokes."""
    unit = tuple(arr.shards or arr.chunks)
    return (1,) * (len(unit) - 2) + unit[-2:]


def _by_unit(boxes: list[tuple[slice, ...]], unit: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """The bounding box of *boxes* per storage unit (shard, else chunk) they start in."""
    groups: dict[tuple[int, ...], tuple[slice, ...]] = {}
    for b in boxes:
        key = tuple(s.start // max(u, 1) for s, u in zip(b, unit, strict=True))
        g = groups.get(key)
        groups[key] = (
            b
            if g is None
            else tuple(
                slice(min(x.start, y.start), max(x.stop, y.stop)) for x, y in zip(g, b, strict=True)
            )
        )
    return list(groups.values())


def _merge(boxes: list[tuple[slice, ...]]) -> list[tuple[slice, ...]]:
    """Drop duplicates (neighbouring chunks map onto the same lower-level region)."""
    seen: dict[tuple[tuple[int, int], ...], tuple[slice, ...]] = {}
    for b in boxes:
        seen.setdefault(tuple((s.start, s.stop) for s in b), b)
    return list(seen.values())
