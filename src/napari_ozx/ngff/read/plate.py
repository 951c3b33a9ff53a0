"""HCS plates and wells: metadata in a few concurrent round trips, a lazy plate overview.

:func:`open_hcs` / :class:`HcsPlate` open the plate (or well) at the root of an
:class:`~.open.OmeZarr`: every well's document in one concurrent batch (:mod:`.documents`)
-> a :class:`WellInfo` each; a missing or broken well keeps an ``error``, the rest opens.
:meth:`HcsPlate.overview` builds an :class:`Overview`, the whole plate as one lazy
multiscale image (two more batches, no pixel read): level 0 is every well's chosen field
pixel for pixel, coarser levels the fields' own pyramid then subsampling down to about
:data:`OVERVIEW_EDGE` px; one chunk per well tile and plane, so napari reads only the
wells it shows. Bounded by :data:`MAX_WELLS` and :data:`MAX_PLANES` against hostile
metadata. :meth:`HcsPlate.open_fields` opens a well's fields, :meth:`HcsPlate.placements`
says where they go. The tile geometry and level rules: ``docs/design/plates.md``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import MetadataError, NotOmeZarrError, OzxError
from napari_ozx.ngff.model.axes import yx_axes
from napari_ozx.ngff.model.metadata import (
    Acquisition,
    Axis,
    Dataset,
    Multiscale,
    NodeMetadata,
    Omero,
    Plate,
    parse_node_attributes,
)
from napari_ozx.ngff.read.documents import join_path, run_sync
from napari_ozx.ngff.read.indexing import basic_box, expand
from napari_ozx.ngff.read.open import ArrayNode, GroupNode, Image, OmeZarr

if TYPE_CHECKING:
    import dask.array as da

logger = logging.getLogger(__name__)

__all__ = [
    "FieldRef",
    "HcsPlate",
    "Overview",
    "OverviewImage",
    "WellInfo",
    "open_hcs",
    "plate_by_id",
    "yx_axes",
]

OVERVIEW_EDGE = 4096  # the overview aims at about this many pixels along its longer side
MAX_WELLS = 100_000  # rows x columns beyond this is not a plate we can show
MAX_PLANES = 1_000_000  # along one t / c / z axis of the plate picture
#: from this many wells on, a plate opens without reading every well: the plate document
#: lists the wells, the first well with a readable field sizes the overview, and each
#: other well's document, field group and arrays are read (in concurrent batches) when
#: its tile is first drawn or the well is opened (a field that then disagrees - another
#: layout, more planes or a larger size than the first - is shown as far as it fits, and
#: logged; a well without the chosen field stays empty)
LAZY_FIELDS_FROM = 400

# plates handed out by the reader, so the navigator finds the very object behind an
# overview layer (metadata carries only the id); alive as long as its overview's dask
# graph (which references it) or any other user
_LIVE: weakref.WeakValueDictionary[str, HcsPlate] = weakref.WeakValueDictionary()


def plate_by_id(plate_id: str) -> HcsPlate | None:
    return _LIVE.get(plate_id)


# --------------------------------------------------------------------- wells


@dataclass(frozen=True, slots=True)
class FieldRef:
    """One field of view of a well."""

    path: str  # from the root of the hierarchy, e.g. "A/1/0"
    name: str  # as listed by the well, e.g. "0"
    acquisition: int | None = None


@dataclass(frozen=True, slots=True)
class WellInfo:
    path: str  # "A/1" (from the root)
    row: int
    column: int
    name: str  # "A1": row name + column name
    fields: tuple[FieldRef, ...] = ()
    error: str | None = None  # why the well's metadata could not be read
    # False: a large plate's well whose own document is not read yet (its fields are
    # unknown); HcsPlate.resolve_wells reads it when the well is first needed
    read: bool = True

    def fields_in(self, acquisition: int | None = None) -> tuple[FieldRef, ...]:
        """The well's fields, or those of one acquisition."""
        if acquisition is None:
            return self.fields
        return tuple(f for f in self.fields if f.acquisition == acquisition)

    def describe(self) -> str:
        if self.error:
            return f"{self.path or self.name}: {self.error}"
        if not self.read:
            return f"{self.path or self.name}: not read yet"
        names = ", ".join(
            f.name if f.acquisition is None else f"{f.name} (acq. {f.acquisition})"
            for f in self.fields
        )
        n = len(self.fields)
        return f"{self.path or self.name}: {n} field{'s' if n != 1 else ''}" + (
            f": {names}" if names else ""
        )


# ----------------------------------------------------------------- overview


@dataclass(frozen=True, slots=True)
class _Level:
    """One level of the plate picture: which level of each well's field it shows."""

    factor: tuple[int, int]  # y / x downsampling relative to level 0 of the plate picture
    field_level: int  # the fields' own pyramid level read
    stride: tuple[int, int]  # y / x step within that level (beyond the fields' pyramid)
    pitch: tuple[int, int]  # y / x pixels from one well to the next
    inset: tuple[int, int]  # y / x pixels from a tile's corner to its field
    shape: tuple[int, ...]


class Overview:
    """The whole plate as one lazy multiscale image (see the module docstring).

    Level 0 is every well's full-resolution field at its place in the grid; coarser
    levels show the fields' own coarser pyramid levels (and, beyond their pyramid,
    every k-th pixel of their coarsest level) until the plate is about
    ``OVERVIEW_EDGE`` pixels along its longer side. Each level is a dask array with one
    chunk per well tile and plane; a chunk reads only its well (an empty tile reads
    nothing), so napari reads the wells it shows, at the level it shows.
    """

    def __init__(
        self,
        plate: HcsPlate,
        field_index: int,
        acquisition: int | None,
        rep: Image,
        fields: dict[tuple[int, int], tuple[FieldRef | None, GroupNode | None]],
        skipped: dict[str, str],
        tile: tuple[int, int] | None = None,
        extent: Sequence[int] | None = None,
        empty: set[str] | None = None,
    ) -> None:
        self.plate = plate
        self.field_index = field_index
        self.acquisition = acquisition
        self.representative = rep
        self.level = 0
        # (row, column) -> the field shown in that tile (None: its well is not read
        # yet), its group (None: not read yet)
        self.fields = fields
        self.skipped = skipped  # well path -> reason it is empty in the overview
        self.empty = set(empty or ())  # of those, wells without the chosen field
        ms = rep.multiscale
        self.multiscale: Multiscale = ms
        self.axes: tuple[Axis, ...] = ms.axes
        self.channel_axis: int | None = ms.channel_axis
        self.yx = y, x = yx_axes(ms.axes)
        if y > x:
            raise MetadataError(
                f"x before y in the axes is not supported for plates ({plate.oz.source})"
            )
        shape0 = rep.arrays[0].shape
        self.tile: tuple[int, int] = tile or (shape0[y], shape0[x])
        # non-y/x extents at level 0: the most planes any well has (default: the
        # representative's), so a well with more t / z / c than the representative
        # is shown whole rather than cut
        self.extent: tuple[int, ...] = tuple(extent) if extent is not None else tuple(shape0)
        ds = ms.datasets[0]
        self.scale: tuple[float, ...] = ds.scale
        # y / x start at 0 (tile (0, 0) at the origin); other axes keep the field's offset
        self.translation: tuple[float, ...] = tuple(
            0.0 if i in self.yx else t for i, t in enumerate(ds.translation)
        )
        self.dtype: np.dtype = np.dtype(rep.arrays[0].array.dtype)
        self._levels = self._plan([a.shape for a in rep.arrays])
        self.pitch = self._levels[0].pitch
        self.inset = self._levels[0].inset
        self.shape: tuple[int, ...] = self._levels[0].shape
        planes = max((s for i, s in enumerate(self.shape) if i not in self.yx), default=1)
        if planes > MAX_PLANES:
            raise MetadataError(
                f"plate picture of {planes} planes along one axis is too large ({plate.oz.source})"
            )
        self._failed: set[str] = set()
        self._nodes: dict[tuple[str, int], ArrayNode | None] = {}
        self._lock = threading.Lock()

    @property
    def shown(self) -> dict[tuple[int, int], FieldRef]:
        """(row, column) -> the field shown in that tile, for the wells read so far."""
        with self._lock:
            return {k: f for k, (f, _) in self.fields.items() if f is not None}

    def field_label(self, row: int, column: int) -> str:
        """What the tile shows: 'field 0', 'not read yet' or 'no field'."""
        with self._lock:
            ref, _ = self.fields.get((row, column), (None, None))
            unread = (row, column) in self.fields and ref is None
        if ref is not None:
            return f"field {ref.name}"
        return "not read yet" if unread else "no field"

    def progress(self) -> tuple[int, int]:
        """(fields whose metadata is read or failed, fields the picture shows): a large
        plate's fields are read as their tiles are first drawn (:data:`LAZY_FIELDS_FROM`),
        so a view can say that the rest is still loading."""
        with self._lock:
            wells = [(self.plate.by_position[pos].path, g) for pos, (_, g) in self.fields.items()]
            failed = self.failed()
            total = len({w for w, _ in wells} | set(failed))
            pending = sum(1 for w, g in wells if g is None and w not in self.skipped)
        return total - pending, total

    def failed(self) -> dict[str, str]:
        """Wells whose field could not be shown, with the reason (well path -> reason):
        their metadata or field failed, at open or when their tile was first drawn. Wells
        without the chosen field are not failures (they are empty in the picture)."""
        return {p: why for p, why in list(self.skipped.items()) if p not in self.empty}

    def _plan(self, shapes: Sequence[tuple[int, ...]]) -> list[_Level]:
        """Levels: the fields' integer-factor pyramid levels, then strided ones."""
        y, x = self.yx
        ny, nx = len(self.plate.rows), len(self.plate.columns)
        base = shapes[0]
        picks: list[tuple[tuple[int, int], int, tuple[int, int]]] = [((1, 1), 0, (1, 1))]
        for i, s in enumerate(shapes[1:], 1):
            fy, fx = base[y] / max(s[y], 1), base[x] / max(s[x], 1)
            ry, rx = round(fy), round(fx)
            prev = picks[-1][0]
            # an integer factor (the last level's size may be rounded up) that grows
            if ry < 1 or rx < 1 or (ry, rx) == prev or ry < prev[0] or rx < prev[1]:
                continue
            if abs(s[y] - math.ceil(base[y] / ry)) > 1 or abs(s[x] - math.ceil(base[x] / rx)) > 1:
                continue
            picks.append(((ry, rx), i, (1, 1)))
        (fy, fx), lvl, _ = picks[-1]
        while max(ny * base[y] / fy, nx * base[x] / fx) > OVERVIEW_EDGE and len(picks) < 16:
            fy, fx = fy * 2, fx * 2
            ly, lx = _field_factor(picks)
            picks.append(((fy, fx), lvl, (fy // ly, fx // lx)))
        fmax = (max(p[0][0] for p in picks), max(p[0][1] for p in picks))
        gap = max(2, round(max(self.tile) * 0.04))
        pitch0 = tuple(fmax[k] * math.ceil((self.tile[k] + gap) / fmax[k]) for k in range(2))
        out = []
        for (fy, fx), lvl, stride in picks:
            pitch = (pitch0[0] // fy, pitch0[1] // fx)
            inset = (
                ((pitch0[0] - self.tile[0]) // 2) // fy,
                ((pitch0[1] - self.tile[1]) // 2) // fx,
            )
            shape = [
                # a level the fields downsample along t / z scales the plate's extent alike
                -(-self.extent[i] * s // base[i]) if base[i] else s
                for i, s in enumerate(shapes[lvl])
            ]
            shape[y], shape[x] = ny * pitch[0], nx * pitch[1]
            out.append(_Level((fy, fx), lvl, stride, pitch, inset, tuple(shape)))
        return out

    @property
    def levels(self) -> list[da.Array]:
        return self.datas

    @property
    def omero(self) -> Omero | None:
        return self.representative.meta.omero

    @property
    def yx_scale(self) -> tuple[float, float]:
        return self.scale[self.yx[0]], self.scale[self.yx[1]]

    def tile_origin(self, row: int, column: int) -> tuple[float, float]:
        """World y/x of the centre of the first pixel of a well's field in its tile."""
        sy, sx = self.yx_scale
        return (
            (row * self.pitch[0] + self.inset[0]) * sy,
            (column * self.pitch[1] + self.inset[1]) * sx,
        )

    def tile_box(self, row: int, column: int) -> tuple[float, float, float, float]:
        """World (y0, x0, y1, x1) of a well's whole tile (pixel edges, gap included)."""
        sy, sx = self.yx_scale
        py, px = self.pitch
        return (
            (row * py - 0.5) * sy,
            (column * px - 0.5) * sx,
            ((row + 1) * py - 0.5) * sy,
            ((column + 1) * px - 0.5) * sx,
        )

    def field_box(self, row: int, column: int) -> tuple[float, float, float, float]:
        """World (y0, x0, y1, x1) of the tile's field area (pixel edges)."""
        sy, sx = self.yx_scale
        oy, ox = self.tile_origin(row, column)
        return (
            oy - 0.5 * sy,
            ox - 0.5 * sx,
            oy + (self.tile[0] - 0.5) * sy,
            ox + (self.tile[1] - 0.5) * sx,
        )

    def well_at(self, y: float, x: float) -> WellInfo | None:
        """The well whose tile holds the world point (y, x), or None."""
        sy, sx = self.yx_scale
        # pixel (i, j) covers [i - 0.5, i + 0.5) in data coordinates
        r = math.floor(y / sy + 0.5) // self.pitch[0] if sy else -1
        c = math.floor(x / sx + 0.5) // self.pitch[1] if sx else -1
        return self.plate.by_position.get((int(r), int(c)))

    def annotations(self) -> list[tuple[float, float, str]]:
        """Row and column names as (world y, world x, text), left of and above the grid."""
        sy, sx = self.yx_scale
        py, px = self.pitch
        out = []
        for r, name in enumerate(self.plate.rows):
            out.append(((r * py + (py - 1) / 2) * sy, -0.5 * px * sx, name))
        for c, name in enumerate(self.plate.columns):
            out.append((-0.5 * py * sy, (c * px + (px - 1) / 2) * sx, name))
        return out

    def as_image(self) -> OverviewImage:
        """The plate picture in the shape of an :class:`~.open.Image` (one dataset per
        level), so the same layer mapping (channels, omero colours, units) applies."""
        rep = self.representative
        ms = rep.multiscale
        y, x = self.yx
        datasets = []
        for lv in self._levels:
            ds = ms.datasets[lv.field_level]
            scale = list(ds.scale)
            scale[y], scale[x] = self.scale[y] * lv.factor[0], self.scale[x] * lv.factor[1]
            datasets.append(Dataset(ds.path, tuple(scale), self.translation))
        return OverviewImage(
            root=self.plate.oz,
            path=self.plate.path,
            name=self.plate.name,
            multiscale=Multiscale(ms.version, ms.axes, tuple(datasets), ms.name, ms.type),
            meta=rep.meta,
            arrays=[rep.arrays[lv.field_level] for lv in self._levels],
            levels=self.datas,
        )

    def _chunk_failed(self, path: str, err: BaseException) -> None:
        # a well whose chunks cannot be read stays black; say so once per array
        if path not in self._failed:
            self._failed.add(path)
            logger.warning(
                "%s: plate picture of %s left empty: %s", self.plate.oz.source, path, err
            )

    def _skip(self, pos: tuple[int, int], why: str, empty: bool = False) -> None:
        """The tile at *pos* stays empty: its well failed (or has no such field)."""
        path = self.plate.by_position[pos].path
        with self._lock:
            self.fields.pop(pos, None)
            self.skipped.setdefault(path, why)
            if empty:
                self.empty.add(path)

    def _prepare(self, positions: Sequence[tuple[int, int]], level: int | None = None) -> None:
        """Read what drawing the wells at *positions* needs and is not read yet - their
        well documents, field groups and (at *level*) array documents - one concurrent
        batch per kind, so a plate drawn over a network costs three round trips, not three
        per well (see :data:`LAZY_FIELDS_FROM`)."""
        plate = self.plate
        with self._lock:
            todo = [p for p in positions if p in self.fields]
            unread = [p for p in todo if self.fields[p][0] is None]
        if unread:
            plate.resolve_wells([plate.by_position[p].path for p in unread])
            for p in unread:
                w = plate.by_position[p]
                refs = w.fields_in(self.acquisition)
                if w.error:
                    self._chunk_failed(w.path, MetadataError(w.error))
                    self._skip(p, w.error)
                elif self.field_index >= len(refs):
                    self._skip(p, f"no field {self.field_index}", empty=True)
                else:
                    with self._lock:
                        if p in self.fields:
                            self.fields[p] = (refs[self.field_index], None)
        with self._lock:
            need: list[tuple[tuple[int, int], FieldRef]] = []
            for p in todo:
                r, g = self.fields.get(p, (None, None))
                if r is not None and g is None:
                    need.append((p, r))
        if need:
            ndim = len(self.representative.arrays[0].shape)
            for (p, ref), got in zip(need, plate._groups([r.path for _, r in need]), strict=True):
                try:
                    if isinstance(got, OzxError):
                        raise got
                    got = plate._fix_implied_axes(got, ndim)
                    names = got.meta.multiscales[0].axis_names
                    if names != self.multiscale.axis_names:
                        raise MetadataError(
                            f"axes {list(names)} differ from {list(self.multiscale.axis_names)}"
                        )
                except OzxError as e:
                    self._chunk_failed(ref.path, e)
                    self._skip(p, str(e))
                    continue
                with self._lock:
                    if p in self.fields:
                        self.fields[p] = (ref, got)
        if level is None:
            return
        keys: list[tuple[str, int]] = []
        with self._lock:
            for p in todo:
                fref, g = self.fields.get(p, (None, None))
                if fref is None or g is None:
                    continue
                dsets = g.meta.multiscales[0].datasets
                if level < len(dsets):
                    key = (join_path(fref.path, dsets[level].path), level)
                    if key not in self._nodes:
                        keys.append(key)
        if not keys:
            return
        paths = [k[0] for k in keys]
        for key, res in zip(keys, plate.oz.read_docs(paths, "array"), strict=True):
            try:
                node: ArrayNode | None = plate.oz.make_array(key[0], res)
                if node is not None and len(node.shape) != len(self.shape):
                    raise MetadataError(f"{len(node.shape)} dimensions, not {len(self.shape)}")
            except OzxError as e:
                self._chunk_failed(key[0], e)
                node = None
            with self._lock:
                self._nodes[key] = node

    def _node(self, pos: tuple[int, int], level: int) -> ArrayNode | None:
        """The array of a well's field at one pyramid level, as read by :meth:`_prepare`
        (None: not read, or it cannot be shown)."""
        with self._lock:
            ref, g = self.fields.get(pos, (None, None))
            if ref is None or g is None:
                return None
            dsets = g.meta.multiscales[0].datasets
            if level >= len(dsets):
                return None
            return self._nodes.get((join_path(ref.path, dsets[level].path), level))

    @cached_property
    def datas(self) -> list[da.Array]:
        """One dask array per level (nothing is read until a chunk is computed)."""
        return [self._level_array(i) for i in range(len(self._levels))]

    @property
    def data(self) -> da.Array:
        """Level 0: every well's full-resolution field."""
        return self.datas[0]

    def _level_array(self, i: int) -> da.Array:

        lv = self._levels[i]
        y, x = self.yx
        chunks = tuple(
            (lv.pitch[0],) * len(self.plate.rows)
            if k == y
            else (lv.pitch[1],) * len(self.plate.columns)
            if k == x
            else (1,) * s
            for k, s in enumerate(lv.shape)
        )
        src = _PlateLevel(self, i)
        from napari_ozx.ngff.read.lazy import lazy_array  # napari's tiles read src[box] directly

        name = "ozx-plate-" + uuid.uuid4().hex[:16]
        return lazy_array(src, chunks, name, self.dtype, fancy=False)


def _field_factor(picks: list[tuple[tuple[int, int], int, tuple[int, int]]]) -> tuple[int, int]:
    """The pyramid factor of the field level under the strided levels."""
    for f, _, stride in reversed(picks):
        if stride == (1, 1):
            return f
    return (1, 1)


class _PlateLevel:
    """Array-like view of one plate level: ``[...]`` reads the wells a box touches,
    concurrently, at that level (zeros where there is no field)."""

    def __init__(self, ov: Overview, index: int) -> None:
        self.ov = ov
        self.index = index
        self.lv = ov._levels[index]
        self.shape = self.lv.shape
        self.ndim = len(self.shape)
        self.dtype = ov.dtype

    def __dask_tokenize__(self) -> tuple[str, int, int]:
        # deterministic: the plate picture is identified by its plate, field and level
        return ("ozx-plate-level", id(self.ov), self.index)

    def __getitem__(self, key: Any) -> np.ndarray:
        box, post = basic_box(expand(key, self.ndim), self.shape)
        return self._read(box)[post]

    def _read(self, box: list[tuple[int, int]]) -> np.ndarray:
        ov, lv = self.ov, self.lv
        y, x = ov.yx
        out = np.zeros(tuple(b - a for a, b in box), dtype=self.dtype)
        if out.size == 0:
            return out
        (y0, y1), (x0, x1) = box[y], box[x]
        py, px = lv.pitch
        jobs = []
        cells = [
            (r, c)
            for r in range(y0 // py, (y1 - 1) // py + 1)
            for c in range(x0 // px, (x1 - 1) // px + 1)
        ]
        ov._prepare(cells, lv.field_level)  # metadata of wells not read yet, in batches
        for r, c in cells:
            if (r, c) not in ov.fields:
                continue
            node = ov._node((r, c), lv.field_level)
            if node is None:
                continue
            sy, sx = lv.stride
            fh = min(-(-node.shape[y] // sy), py - lv.inset[0])
            fw = min(-(-node.shape[x] // sx), px - lv.inset[1])
            ty, tx = r * py + lv.inset[0], c * px + lv.inset[1]
            a_y, b_y = max(y0, ty), min(y1, ty + fh)
            a_x, b_x = max(x0, tx), min(x1, tx + fw)
            if a_y >= b_y or a_x >= b_x:
                continue
            sel: list[Any] = []
            dst: list[slice] = []
            ok = True
            for k, (a, b) in enumerate(box):
                if k == y:
                    sel.append(slice((a_y - ty) * sy, (b_y - ty - 1) * sy + 1, sy))
                    dst.append(slice(a_y - y0, b_y - y0))
                elif k == x:
                    sel.append(slice((a_x - tx) * sx, (b_x - tx - 1) * sx + 1, sx))
                    dst.append(slice(a_x - x0, b_x - x0))
                else:
                    hi = min(b, node.shape[k])
                    if hi <= a:
                        ok = False
                        break
                    sel.append(slice(a, hi))
                    dst.append(slice(0, hi - a))
            if ok:
                jobs.append((node, tuple(sel), tuple(dst)))
        if not jobs:
            return out

        async def all_() -> list[Any]:
            import asyncio

            return await asyncio.gather(
                *(n.array.async_array.getitem(s) for n, s, _ in jobs), return_exceptions=True
            )

        for (node, _, where), res in zip(jobs, run_sync(all_()), strict=True):
            if isinstance(res, BaseException):
                ov._chunk_failed(node.path, res)
                continue
            out[where] = np.asarray(res)
        return out


@dataclass(frozen=True, eq=False)
class OverviewImage:
    """Duck-typed :class:`~.open.Image` for the overview (see :meth:`Overview.as_image`)."""

    root: OmeZarr
    path: str
    name: str
    multiscale: Multiscale
    meta: NodeMetadata
    arrays: list[ArrayNode]
    levels: list[Any]


# -------------------------------------------------------------------- plate


class HcsPlate:
    """A plate (or a single well) at ``path`` in an opened OME-Zarr hierarchy."""

    def __init__(self, oz: OmeZarr, path: str = "") -> None:
        self.oz = oz
        self.path = path.strip("/")
        group = oz.root if not self.path else oz.group(self.path)
        meta = group.meta
        self.id = uuid.uuid4().hex
        self._overviews: dict[tuple[int, int | None], Overview] = {}
        self._wells_lock = threading.Lock()
        self.generation = 0  # counts the wells read after open (views refresh on it)
        if meta.plate is not None:
            self.kind = "plate"
            self.plate: Plate | None = meta.plate
            self.name = meta.plate.name or oz.name
            self.rows = meta.plate.rows
            self.columns = meta.plate.columns
            self.acquisitions: tuple[Acquisition, ...] = meta.plate.acquisitions
            self.wells = self._read_wells(meta.plate)
        elif meta.well is not None:
            self.kind = "well"
            self.plate = None
            base = self.path.rsplit("/", 1)[-1] if self.path else oz.name
            parent = (
                os.path.basename(os.path.dirname(oz.source.rstrip("/\\"))) if not self.path else ""
            )
            if parent.isalpha() and base.isdigit():  # ".../plate.zarr/B/3" -> "B3"
                base = parent + base
            self.name = base
            self.rows, self.columns = ("",), ("",)
            self.acquisitions = ()
            self.wells = (WellInfo(self.path, 0, 0, base, _fields(self.path, meta.well.images)),)
        else:
            raise NotOmeZarrError(f"{oz.source}: {self.path or '/'!r} is not an HCS plate or well")
        self.by_position = {(w.row, w.column): w for w in self.wells}
        self.by_path = {w.path: w for w in self.wells}
        _LIVE[self.id] = self

    def _read_wells(self, plate: Plate) -> tuple[WellInfo, ...]:
        if len(plate.rows) * len(plate.columns) > MAX_WELLS or len(plate.wells) > MAX_WELLS:
            raise MetadataError(
                f"{self.oz.source}: plate of {len(plate.rows)} x {len(plate.columns)} with "
                f"{len(plate.wells)} wells is beyond {MAX_WELLS} wells"
            )
        seen: set[tuple[int, int]] = set()
        wells = []
        for pw in plate.wells:
            if not _safe(pw.path):
                logger.warning(
                    "%s: well path %r leaves the plate; ignored", self.oz.source, pw.path
                )
                continue
            if (pw.row, pw.column) in seen:
                logger.warning(
                    "%s: well %s repeats a row and column; ignored", self.oz.source, pw.path
                )
                continue
            seen.add((pw.row, pw.column))
            wells.append(pw)
        unread = [
            WellInfo(
                join_path(self.path, pw.path, key="wells path"),
                pw.row,
                pw.column,
                f"{plate.rows[pw.row]}{plate.columns[pw.column]}",
                read=False,
            )
            for pw in wells
        ]
        if len(unread) >= LAZY_FIELDS_FROM:
            return tuple(unread)  # read as they are needed (resolve_wells)
        out = self._well_infos(unread)  # every well at once
        bad = [w for w in out if w.error]
        if bad:
            logger.warning(
                "%s: %d of %d wells cannot be read (e.g. %s)",
                self.oz.source,
                len(bad),
                len(out),
                bad[0].describe(),
            )
        return tuple(out)

    def _well_infos(self, wells: Sequence[WellInfo]) -> list[WellInfo]:
        """The wells with their documents read (one concurrent batch)."""
        docs = self.oz.read_docs([w.path for w in wells], "ome-group")
        out = []
        for w, res in zip(wells, docs, strict=True):
            p, row, col, name = w.path, w.row, w.column, w.name
            if res is None:
                out.append(WellInfo(p, row, col, name, error="well group is missing"))
                continue
            try:
                g = self.oz.make_group(p, res)
                if g.meta.well is None:
                    raise MetadataError("no 'well' metadata")
            except OzxError as e:
                out.append(WellInfo(p, row, col, name, error=str(e)))
                continue
            out.append(WellInfo(p, row, col, name, _fields(p, g.meta.well.images)))
        return out

    def resolve_wells(self, paths: Sequence[str] | None = None) -> None:
        """Read the documents of these wells (all, by default) that are not read yet, in
        one concurrent batch; a well that cannot be read keeps its error."""
        todo = [w for w in (self.wells if paths is None else map(self.well, paths)) if not w.read]
        if not todo:
            return
        done = {w.path: w for w in self._well_infos(todo)}
        with self._wells_lock:
            wells = tuple(done.get(w.path, w) if not w.read else w for w in self.wells)
            self.wells = wells
            self.by_position = {(w.row, w.column): w for w in wells}
            self.by_path = {w.path: w for w in wells}
            self.generation += 1
        bad = [w for w in done.values() if w.error]
        if bad:
            logger.warning(
                "%s: %d of %d wells cannot be read (e.g. %s)",
                self.oz.source,
                len(bad),
                len(done),
                bad[0].describe(),
            )

    @property
    def wells_read(self) -> bool:
        """Every well's document is read (a large plate reads them as needed)."""
        return all(w.read for w in self.wells)

    # -- questions ---------------------------------------------------------------
    def well(self, key: str | tuple[int, int]) -> WellInfo:
        w = (
            self.by_position.get(key)
            if isinstance(key, tuple)
            else self.by_path.get(key.strip("/"))
        )
        if w is None:
            raise KeyError(f"no well {key!r} in {self.oz.source}")
        return w

    def max_fields(self, acquisition: int | None = None) -> int:
        """The most fields a well has (in *acquisition*); while wells are still unread,
        at least what the plate declares (``field_count`` / ``maximumfieldcount``), else 1."""
        n = max((len(w.fields_in(acquisition)) for w in self.wells if w.read), default=0)
        if not self.wells_read:
            declared = self.plate.field_count if self.plate else None
            if acquisition is not None:
                declared = next(
                    (a.maximum_field_count for a in self.acquisitions if a.id == acquisition),
                    None,
                )
            n = max(n, declared or 0, 1)
        return n

    def acquisition_ids(self) -> list[int]:
        """Acquisitions declared by the plate, else those the wells refer to."""
        ids = [a.id for a in self.acquisitions]
        for w in self.wells:
            for f in w.fields:
                if f.acquisition is not None and f.acquisition not in ids:
                    ids.append(f.acquisition)
        return ids

    # -- groups and images -------------------------------------------------------
    def _groups(self, paths: Sequence[str]) -> list[GroupNode | OzxError]:
        out: list[GroupNode | OzxError] = []
        for p, res in zip(paths, self.oz.read_docs(paths, "ome-group"), strict=True):
            if res is None:
                out.append(MetadataError(f"field group {p!r} is missing"))
                continue
            try:
                g = self.oz.make_group(p, res)
                if not g.meta.multiscales:
                    raise MetadataError(f"{p!r} is not a multiscale image")
                out.append(g)
            except OzxError as e:
                out.append(e)
        return out

    def _representative(
        self,
        chosen: Sequence[tuple[WellInfo, FieldRef]],
        groups: Sequence[GroupNode | OzxError],
        skipped: dict[str, str],
        field_index: int,
    ) -> Image:
        """The first field of *chosen* that opens as an image: it sizes the overview."""
        rep_err: OzxError | None = None
        for (w, f), g in zip(chosen, groups, strict=True):
            if isinstance(g, OzxError):
                rep_err = rep_err or g
                continue
            try:
                return self._full_image(f.path, g)
            except OzxError as e:
                rep_err = e
                skipped[w.path] = str(e)
        why = f": {rep_err}" if rep_err else ""
        raise MetadataError(
            f"no well of this plate has a readable field {field_index}{why} ({self.oz.source})"
        )

    def _lazy_overview(
        self,
        key: tuple[int, int | None],
        field_index: int,
        acquisition: int | None,
        chosen: list[tuple[WellInfo, FieldRef | None]],
        skipped: dict[str, str],
        empty: set[str],
    ) -> Overview:
        """The overview of a large plate (see :data:`LAZY_FIELDS_FROM`): the first well
        with a readable field sizes it (the next 15 tried only if it cannot be read), the
        others are read when their tiles are drawn."""
        rep: Image | None = None
        fields: dict[tuple[int, int], tuple[FieldRef | None, GroupNode | None]] = {
            (w.row, w.column): (f, None) for w, f in chosen
        }
        batches = [chosen[:1], chosen[1:16]]
        for i, head in enumerate(batches):
            self.resolve_wells([w.path for w, f in head if f is None])
            refs: list[tuple[WellInfo, FieldRef]] = []
            for w, _ in head:
                w = self.well(w.path)
                found = w.fields_in(acquisition)
                if w.error:
                    skipped[w.path] = w.error
                elif field_index < len(found):
                    refs.append((w, found[field_index]))
                    fields[(w.row, w.column)] = (found[field_index], None)
                else:
                    skipped[w.path] = f"no field {field_index}"
                    empty.add(w.path)
            groups = self._groups([f.path for _, f in refs])
            for (w, _), g in zip(refs, groups, strict=True):
                if isinstance(g, OzxError):
                    skipped[w.path] = str(g)
            try:
                rep = self._representative(refs, groups, skipped, field_index)
                break
            except MetadataError:
                if i == len(batches) - 1 or len(chosen) == 1:
                    raise
        assert rep is not None
        for pos, (f, _) in list(fields.items()):
            if self.by_position[pos].path in skipped:  # failed, or without the field
                del fields[pos]
            elif f is not None and f.path == rep.path:
                fields[pos] = (f, rep.group)
        ov = Overview(self, field_index, acquisition, rep, fields, skipped, empty=empty)
        self._overviews[key] = ov
        return ov

    def _fix_implied_axes(self, g: GroupNode, ndim: int) -> GroupNode:
        """0.1 / 0.2 imply axes from the dimensionality: re-parse with the real ndim."""
        ms = g.meta.multiscales[0]
        if ms.version in ("0.1", "0.2") and ms.ndim != ndim:
            meta = parse_node_attributes(g.attributes, g.zarr_format, g.path, ndim)
            return GroupNode(g.store, g.path, g.zarr_format, g.attributes, meta, g.extensions)
        return g

    def open_fields(
        self,
        well: WellInfo | str,
        fields: Sequence[int] | None = None,
        acquisition: int | None = None,
    ) -> list[Image | OzxError]:
        """Full-resolution images of a well's fields (all, or those indices of the fields
        in *acquisition*); a field that cannot be opened is returned as its error."""
        w = well if isinstance(well, WellInfo) else self.well(well)
        if not w.read:
            self.resolve_wells([w.path])
            w = self.well(w.path)
        if w.error:
            raise MetadataError(f"{self.oz.source}: well {w.path}: {w.error}")
        refs = w.fields_in(acquisition)
        chosen = (
            [refs[i] for i in fields if 0 <= i < len(refs)] if fields is not None else list(refs)
        )
        out: list[Image | OzxError] = []
        for ref, g in zip(chosen, self._groups([f.path for f in chosen]), strict=True):
            if isinstance(g, OzxError):
                out.append(g)
                continue
            try:
                image = self.oz.image(ref.path, g)
                if self.oz.root.meta.bioformats2raw_layout is not None:
                    from napari_ozx.ngff.read.omexml import field_with_xml  # its WellSample

                    image = field_with_xml(self.oz, ref.path, image)
                out.append(image)
            except OzxError as e:
                out.append(e)
        return out

    # -- overview ----------------------------------------------------------------------
    def overview(self, field_index: int = 0, acquisition: int | None = None) -> Overview:
        """The whole-plate picture of each well's field *field_index*.

        Metadata only: the chosen field's group in every well (one concurrent batch) and
        one representative field's pyramid; each well's coarser level arrays are opened
        when a chunk of theirs is first read.
        """
        key = (field_index, acquisition)
        if key in self._overviews:
            return self._overviews[key]
        chosen: list[tuple[WellInfo, FieldRef | None]] = []
        skipped: dict[str, str] = {}
        empty: set[str] = set()
        for w in self.wells:
            refs = w.fields_in(acquisition)
            if not w.read:
                chosen.append((w, None))  # read when its tile is first drawn
            elif w.error:
                skipped[w.path] = w.error
            elif field_index < len(refs):
                chosen.append((w, refs[field_index]))
            else:
                skipped[w.path] = f"no field {field_index}"
                empty.add(w.path)
        if len(chosen) >= LAZY_FIELDS_FROM or not self.wells_read:
            return self._lazy_overview(key, field_index, acquisition, chosen, skipped, empty)
        full = [(w, f) for w, f in chosen if f is not None]
        groups = self._groups([f.path for _, f in full])
        rep = self._representative(full, groups, skipped, field_index)
        ms0 = rep.multiscale
        ndim = len(rep.arrays[0].shape)
        fields: dict[tuple[int, int], tuple[FieldRef | None, GroupNode | None]] = {}
        for (w, f), g in zip(full, groups, strict=True):
            if isinstance(g, OzxError):
                skipped[w.path] = str(g)
                continue
            try:
                g = self._fix_implied_axes(g, ndim)
                names = g.meta.multiscales[0].axis_names
                if names != ms0.axis_names:
                    raise MetadataError(f"axes {list(names)} differ from {list(ms0.axis_names)}")
            except OzxError as e:
                skipped[w.path] = str(e)
                continue
            fields[(w.row, w.column)] = (f, g)
        # every field's full-resolution array document, in one concurrent batch: the
        # tile is the largest field (up to twice the representative's size)
        paths = [
            join_path(f.path, g.meta.multiscales[0].datasets[0].path)
            for f, g in fields.values()
            if f is not None and g is not None  # (every group is read here)
        ]
        nodes: dict[tuple[str, int], ArrayNode | None] = {}
        y, x = yx_axes(ms0.axes)
        tile = [rep.arrays[0].shape[y], rep.arrays[0].shape[x]]
        extent = list(rep.arrays[0].shape)
        for pos, p, res in zip(list(fields), paths, self.oz.read_docs(paths, "array"), strict=True):
            try:
                node = self.oz.make_array(p, res)
                if len(node.shape) != len(ms0.axes) or len(node.shape) != ndim:
                    # the plate picture indexes shapes by axis
                    raise MetadataError(
                        f"{p}: {len(node.shape)} dimensions for {len(ms0.axes)} axes "
                        f"{list(ms0.axis_names)}"
                    )
            except OzxError as e:
                skipped[self.by_position[pos].path] = str(e)
                del fields[pos]
                continue
            nodes[(p, 0)] = node
            tile[0] = max(tile[0], min(node.shape[y], 2 * rep.arrays[0].shape[y]))
            tile[1] = max(tile[1], min(node.shape[x], 2 * rep.arrays[0].shape[x]))
            extent = [max(n, m) for n, m in zip(extent, node.shape, strict=True)]
        if skipped:
            logger.info("%s: %d wells empty in the overview", self.oz.source, len(skipped))
        ov = Overview(
            self, field_index, acquisition, rep, fields, skipped, (tile[0], tile[1]), extent, empty
        )
        ov._nodes.update(nodes)
        self._overviews[key] = ov
        return ov

    def _full_image(self, path: str, g: GroupNode) -> Image:
        return self.oz.image(path, g)

    # -- placing full-resolution fields ----------------------------------------------
    def placements(
        self,
        well: WellInfo,
        images: Sequence[Image],
        grid: bool = False,
        overview: Overview | None = None,
    ) -> list[tuple[float, float, float]]:
        """Where to draw each image: (world y offset, world x offset, zoom), the offsets
        added to the image's own translation (after its scale is multiplied by zoom).

        With an *overview*: one field lands exactly on the well's tile (pixel for pixel
        over the picture's full-resolution level); ``grid`` subdivides the tile into a
        near-square grid of cells and shrinks every field into its own cell, so no field
        ever covers a neighbouring well. Without one (a well opened on its own): the
        first field stays where its metadata puts it; ``grid`` lines the others up beside
        it at full size.
        """
        if not images:
            return []

        def t0(img: Image) -> tuple[float, float]:
            y, x = yx_axes(img.multiscale.axes)
            ds = img.multiscale.datasets[0]
            return ds.translation[y], ds.translation[x]

        def extent(img: Image) -> tuple[float, float]:
            y, x = yx_axes(img.multiscale.axes)
            ds = img.multiscale.datasets[0]
            return img.arrays[0].shape[y] * ds.scale[y], img.arrays[0].shape[x] * ds.scale[x]

        from napari_ozx.ngff.read.omexml import stage_offsets

        # where the OME-Zarr metadata places no field, bioformats2raw's XML may
        stage = None if grid else stage_offsets(images)
        if overview is not None:
            oy, ox = overview.tile_origin(well.row, well.column)
            if stage is not None:
                ty, tx = t0(images[0])
                return [(oy - ty + dy, ox - tx + dx, 1.0) for dy, dx in stage]
            if not grid or len(images) == 1:
                return [(oy - ty, ox - tx, 1.0) for ty, tx in map(t0, images)]
            y0, x0, y1, x1 = overview.field_box(well.row, well.column)
            ncol = math.ceil(math.sqrt(len(images)))
            nrow = math.ceil(len(images) / ncol)
            cell_y, cell_x = (y1 - y0) / nrow, (x1 - x0) / ncol
            out = []
            for k, img in enumerate(images):
                ey, ex = extent(img)
                zoom = 0.96 * min(cell_y / ey, cell_x / ex) if ey and ex else 1.0
                # pixel centres: the image's first pixel centre sits half a (zoomed)
                # pixel inside its cell, centred in the cell
                y, x = yx_axes(img.multiscale.axes)
                ds = img.multiscale.datasets[0]
                sy, sx = ds.scale[y] * zoom, ds.scale[x] * zoom
                cy = y0 + (k // ncol) * cell_y + (cell_y - ey * zoom) / 2 + sy / 2
                cx = x0 + (k % ncol) * cell_x + (cell_x - ex * zoom) / 2 + sx / 2
                ty, tx = t0(img)
                out.append((cy - ty * zoom, cx - tx * zoom, zoom))
            return out
        if stage is not None:
            return [(dy, dx, 1.0) for dy, dx in stage]
        if not grid:
            return [(0.0, 0.0, 1.0)] * len(images)
        oy, ox = t0(images[0])
        ext_y = max(extent(img)[0] for img in images)
        ext_x = max(extent(img)[1] for img in images)
        ncol = math.ceil(math.sqrt(len(images)))
        step_y, step_x = ext_y * 1.04, ext_x * 1.04  # a small gap between fields
        out = []
        for k, img in enumerate(images):
            ty, tx = t0(img)
            out.append((oy - ty + (k // ncol) * step_y, ox - tx + (k % ncol) * step_x, 1.0))
        return out

    def __repr__(self) -> str:
        size = f"{len(self.rows)}x{len(self.columns)}"
        return f"HcsPlate({self.oz.source!r}, {self.kind}, {size}, {len(self.wells)} wells)"


def _safe(path: str) -> bool:
    """A relative path that stays below its group (no '..', no empty parts)."""
    parts = path.split("/")
    return bool(path) and all(p not in ("", ".", "..") for p in parts)


def _fields(well_path: str, images: Sequence[Any]) -> tuple[FieldRef, ...]:
    out = []
    for im in images:
        if _safe(im.path):
            out.append(
                FieldRef(join_path(well_path, im.path, key="images path"), im.path, im.acquisition)
            )
        else:
            logger.warning("well %r: field path %r leaves the well; ignored", well_path, im.path)
    return tuple(out)


def open_hcs(source: Any, path: str = "") -> HcsPlate:
    """Open an HCS plate or well, reading its wells' metadata in one concurrent batch.

    Parameters
    ----------
    source : OmeZarr or str or os.PathLike or zarr.abc.store.Store
        An opened hierarchy (kept open), or anything :func:`open_ome_zarr` takes.
    path : str, default ""
        The plate's (or well's) group in the hierarchy; "" is the root.

    Returns
    -------
    HcsPlate
        The plate: its wells, :meth:`HcsPlate.overview` (the whole plate as one lazy
        multiscale image) and :meth:`HcsPlate.open_fields`.

    Raises
    ------
    NotOmeZarrError
        The group at *path* is not an HCS plate or well.
    MetadataError
        Invalid plate or well metadata.
    """
    from napari_ozx.ngff.read.open import open_ome_zarr

    if isinstance(source, OmeZarr):
        return HcsPlate(source, path)
    oz = open_ome_zarr(source)
    try:
        return HcsPlate(oz, path)
    except BaseException:
        oz.close()
        raise
