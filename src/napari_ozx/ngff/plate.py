"""HCS plates and wells: metadata in a few concurrent round trips, a lazy plate overview.

``HcsPlate(oz)`` opens the plate (or single well) at the root of an :class:`OmeZarr`:

1. the root's ``plate`` metadata is already parsed (:class:`~.models.Plate`, any version);
2. **one** concurrent :meth:`OmeZarr.read_docs` call (:mod:`.documents`) reads every
   well's metadata (:class:`~.models.Well`) -> :class:`WellInfo` per well, in plate
   order; a well whose group is missing or broken (invalid JSON included) keeps an
   ``error`` and the rest of the plate still opens.

``HcsPlate.overview(field, acquisition)`` builds an :class:`Overview` with three more
concurrent batches (the chosen field's image group of every well; every level of one
*representative* field to choose the pyramid level; that level's array document in
every well) and no pixel I/O. Its ``data`` is one dask array laid out as on the plate:

* axes are the representative field's axes; y and x hold ``rows x columns`` tiles of
  ``pitch = tile + gap`` pixels, the field's level image at ``inset`` in its tile;
* the level is the one whose larger y/x size is nearest (in log scale) to a target tile
  (256 px for 96 wells, less for bigger plates so the overview stays ~4k px wide);
* fields of other sizes are padded to the largest (cropped beyond twice the
  representative's size or the target tile, and beyond ``TILE_LIMIT`` px: a field with
  no small pyramid level shows its top-left corner); other non-y/x axes (t, z) are
  padded to the largest, the channel axis follows the representative (its ``omero``
  names and colours apply);
* absent wells, wells without that field and wells that fail are zeros and cost no I/O;
* one dask task per plate row and plane: it reads that row's wells **concurrently** in
  zarr's event loop (a 384-well plane is 16 tasks, not 384 round trips).

Limits against hostile metadata: at most ``MAX_WELLS`` wells, ``MAX_OVERVIEW_TASKS``
dask tasks; a well listed twice at one position is ignored (with a warning).

``HcsPlate.open_fields(well, ...)`` returns the full-resolution :class:`~.open.Image` of a
well's fields (their groups read concurrently); :meth:`HcsPlate.placements` says where to
put them in world coordinates: on the well's overview tile, or as a grid of fields.

No napari, no Qt: the napari glue is in ``layers/reading.py`` and ``_qt/plate_navigator.py``.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MetadataError, NotOmeZarrError, OzxError
from .documents import join_path, run_sync
from .models import (
    Acquisition,
    Axis,
    Dataset,
    Multiscale,
    NodeMetadata,
    Omero,
    Plate,
    parse_node_attributes,
)
from .open import ArrayNode, GroupNode, Image, OmeZarr

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

MAX_TILE = 256
MIN_TILE = 48
OVERVIEW_EDGE = 4096  # the overview aims at about this many pixels along its longer side
TILE_LIMIT = 1024  # a field without a small enough level is cropped to this in the overview
MAX_WELLS = 100_000  # rows x columns beyond this is not a plate we can show
MAX_OVERVIEW_TASKS = 2_000_000  # plate rows x planes (t, c, z) of the overview graph

# plates handed out by the reader, so the navigator finds the very object behind an
# overview layer (metadata carries only the id); alive as long as its overview's dask
# graph (which references it) or any other user
_LIVE: weakref.WeakValueDictionary[str, HcsPlate] = weakref.WeakValueDictionary()


def plate_by_id(plate_id: str) -> HcsPlate | None:
    return _LIVE.get(plate_id)


def yx_axes(axes: Sequence[Axis]) -> tuple[int, int]:
    """Indices of the y and x axes: the last two spatial axes (else the last two)."""
    spatial = [
        i
        for i, a in enumerate(axes)
        if a.type == "space" or (a.type is None and a.name in ("z", "y", "x"))
    ]
    if len(spatial) >= 2:
        return spatial[-2], spatial[-1]
    n = len(axes)
    return n - 2, n - 1


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

    def fields_in(self, acquisition: int | None = None) -> tuple[FieldRef, ...]:
        """The well's fields, or those of one acquisition."""
        if acquisition is None:
            return self.fields
        return tuple(f for f in self.fields if f.acquisition == acquisition)

    def describe(self) -> str:
        if self.error:
            return f"{self.path or self.name}: {self.error}"
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
class _WellTile:
    """What the overview reads for one well: a level array of one field."""

    row: int
    column: int
    node: ArrayNode
    shape: tuple[int, ...]


class Overview:
    """A lazy low-resolution picture of the whole plate (see the module docstring)."""

    def __init__(
        self,
        plate: HcsPlate,
        field_index: int,
        acquisition: int | None,
        rep: Image,
        level: int,
        tiles: dict[tuple[int, int], _WellTile],
        shown: dict[tuple[int, int], FieldRef],
        tile: tuple[int, int],
        skipped: dict[str, str],
    ) -> None:
        self.plate = plate
        self.field_index = field_index
        self.acquisition = acquisition
        self.representative = rep
        self.level = level
        self.tiles = tiles
        self.shown = shown  # (row, column) -> the field whose level is in the tile
        self.tile = tile
        self.skipped = skipped  # well path -> reason it is empty in the overview
        ms = rep.multiscale
        self.multiscale: Multiscale = ms
        self.axes: tuple[Axis, ...] = ms.axes
        self.channel_axis: int | None = ms.channel_axis
        self.yx = yx_axes(ms.axes)
        if self.yx[0] > self.yx[1]:
            raise MetadataError(
                f"{plate.oz.source}: x before y in the axes is not supported for plates"
            )
        gap = max(2, round(max(tile) * 0.04))
        self.pitch = (tile[0] + gap, tile[1] + gap)
        self.inset = (gap // 2, gap // 2)
        ds = ms.datasets[level]
        self.scale: tuple[float, ...] = ds.scale
        # y / x start at 0 (tile (0, 0) at the origin); other axes keep the field's offset
        self.translation: tuple[float, ...] = tuple(
            0.0 if i in self.yx else t for i, t in enumerate(ds.translation)
        )
        level_shape = rep.arrays[level].shape
        shape = list(level_shape)
        for t in tiles.values():
            for i, s in enumerate(t.shape):
                if i not in self.yx and i != self.channel_axis:
                    shape[i] = max(shape[i], s)
        shape[self.yx[0]] = len(plate.rows) * self.pitch[0]
        shape[self.yx[1]] = len(plate.columns) * self.pitch[1]
        self.shape: tuple[int, ...] = tuple(shape)
        planes = math.prod(s for i, s in enumerate(shape) if i not in self.yx)
        if planes * len(plate.rows) > MAX_OVERVIEW_TASKS:
            raise MetadataError(
                f"{plate.oz.source}: plate overview of {planes} planes x {len(plate.rows)} rows "
                "is too large"
            )
        self.dtype: np.dtype = np.dtype(rep.arrays[level].array.dtype)
        self._failed: set[str] = set()

    @property
    def omero(self) -> Omero | None:
        return self.representative.meta.omero

    @property
    def yx_scale(self) -> tuple[float, float]:
        return self.scale[self.yx[0]], self.scale[self.yx[1]]

    def tile_origin(self, row: int, column: int) -> tuple[float, float]:
        """World y/x of the centre of the first pixel of a well's image in its tile."""
        sy, sx = self.yx_scale
        return (
            (row * self.pitch[0] + self.inset[0]) * sy,
            (column * self.pitch[1] + self.inset[1]) * sx,
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
        """The overview in the shape of an :class:`~.open.Image` with one level, so the
        same layer mapping (channels, omero colours, units) applies to it."""
        rep = self.representative
        ms = rep.multiscale
        ds = Dataset(ms.datasets[self.level].path, self.scale, self.translation)
        return OverviewImage(
            root=self.plate.oz,
            path=self.plate.path,
            name=self.plate.name,
            multiscale=Multiscale(ms.version, ms.axes, (ds,), ms.name, ms.type),
            meta=rep.meta,
            arrays=[rep.arrays[self.level]],
            levels=[self.data],
        )

    def _chunk_failed(self, t: _WellTile, err: BaseException) -> None:
        # a well whose chunks cannot be read stays black; say so once per array
        if t.node.path not in self._failed:
            self._failed.add(t.node.path)
            logger.warning(
                "%s: overview of %s left empty: %s", self.plate.oz.source, t.node.path, err
            )

    @cached_property
    def data(self) -> da.Array:
        """The overview as one dask array (nothing is read until a chunk is computed)."""
        import dask.array as da

        ndim = len(self.shape)
        y, x = self.yx
        chunks: list[tuple[int, ...]] = []
        for i, s in enumerate(self.shape):
            if i == y:
                chunks.append((self.pitch[0],) * len(self.plate.rows))
            elif i == x:
                chunks.append((self.shape[x],))
            else:
                chunks.append((1,) * s)
        name = "ozx-plate-" + uuid.uuid4().hex[:16]
        planes = [range(s) if i not in self.yx else [None] for i, s in enumerate(self.shape)]
        by_row: dict[int, list[_WellTile]] = {}
        for t in self.tiles.values():
            by_row.setdefault(t.row, []).append(t)
        graph: dict[tuple[Any, ...], Any] = {}
        for plane in itertools.product(*planes):
            for r in range(len(self.plate.rows)):
                key = tuple(r if i == y else 0 if i == x else plane[i] for i in range(ndim))
                job = _RowJob(self, r, tuple(by_row.get(r, ())), plane)
                graph[(name, *key)] = (_read_row, job)
        return da.Array(
            graph,
            name,
            chunks=tuple(chunks),
            dtype=self.dtype,
            meta=np.empty((0,) * ndim, self.dtype),
        )


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


@dataclass(frozen=True, eq=False)
class _RowJob:
    """One dask task: a plane of one plate row (opaque to dask: no keys inside)."""

    overview: Overview
    row: int
    tiles: tuple[_WellTile, ...]
    plane: tuple[int | None, ...]  # index of non-y/x axes; None at y and x


def _read_row(job: _RowJob) -> np.ndarray:
    ov = job.overview
    y, x = ov.yx
    py, width = ov.pitch[0], ov.shape[x]
    out = np.zeros((py, width), dtype=ov.dtype)
    reads = []
    for t in job.tiles:
        sel: list[Any] = []
        ok = True
        for i, p in enumerate(job.plane):
            if i == y:
                sel.append(slice(0, min(t.shape[i], ov.tile[0])))
            elif i == x:
                sel.append(slice(0, min(t.shape[i], ov.tile[1])))
            elif p >= t.shape[i]:
                ok = False  # this well has fewer planes / channels: zeros
                break
            else:
                sel.append(p)
        if ok:
            reads.append((t, tuple(sel)))
    if reads:

        async def one(node: ArrayNode, sel: tuple[Any, ...]) -> Any:
            return await node.array.async_array.getitem(sel)

        async def all_() -> list[Any]:
            import asyncio

            return await asyncio.gather(*(one(t.node, s) for t, s in reads), return_exceptions=True)

        results = run_sync(all_())
        iy, ix = ov.inset
        for (t, _), res in zip(reads, results, strict=True):
            if isinstance(res, BaseException):
                ov._chunk_failed(t, res)
                continue
            a = np.asarray(res)
            h, w = a.shape[-2:]
            x0 = t.column * ov.pitch[1] + ix
            out[iy : iy + h, x0 : x0 + w] = a
    shape = tuple(py if i == y else width if i == x else 1 for i in range(len(job.plane)))
    return out.reshape(shape)


# -------------------------------------------------------------------- plate


class HcsPlate:
    """A plate (or a single well) at ``path`` in an opened OME-Zarr hierarchy."""

    def __init__(self, oz: OmeZarr, path: str = "") -> None:
        self.oz = oz
        self.path = path.strip("/")
        group = oz.root if not self.path else oz.group(self.path)
        meta = group.meta
        self.id = uuid.uuid4().hex
        self._overviews: dict[tuple[int, int | None, int | None], Overview] = {}
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
        paths = [join_path(self.path, w.path) for w in wells]
        docs = self.oz.read_docs(paths)  # every well at once
        out = []
        for pw, p, res in zip(wells, paths, docs, strict=True):
            name = f"{plate.rows[pw.row]}{plate.columns[pw.column]}"
            if res is None:
                out.append(WellInfo(p, pw.row, pw.column, name, error="well group is missing"))
                continue
            try:
                g = self.oz.make_group(p, res)
                if g.meta.well is None:
                    raise MetadataError("no 'well' metadata")
            except OzxError as e:
                out.append(WellInfo(p, pw.row, pw.column, name, error=str(e)))
                continue
            fields = _fields(p, g.meta.well.images)
            out.append(WellInfo(p, pw.row, pw.column, name, fields))
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
        return max((len(w.fields_in(acquisition)) for w in self.wells), default=0)

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
        for p, res in zip(paths, self.oz.read_docs(paths), strict=True):
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
                out.append(self.oz.image(ref.path, g))
            except OzxError as e:
                out.append(e)
        return out

    # -- overview ----------------------------------------------------------------------
    def target_tile(self) -> int:
        n = max(len(self.rows), len(self.columns))
        return int(min(MAX_TILE, max(MIN_TILE, OVERVIEW_EDGE // max(n, 1))))

    def overview(
        self, field_index: int = 0, acquisition: int | None = None, target_tile: int | None = None
    ) -> Overview:
        """The plate overview from each well's field *field_index* (metadata reads only)."""
        key = (field_index, acquisition, target_tile)
        if key in self._overviews:
            return self._overviews[key]
        target = target_tile or self.target_tile()
        chosen: list[tuple[WellInfo, FieldRef]] = []
        skipped: dict[str, str] = {}
        for w in self.wells:
            refs = w.fields_in(acquisition)
            if w.error:
                skipped[w.path] = w.error
            elif field_index < len(refs):
                chosen.append((w, refs[field_index]))
            else:
                skipped[w.path] = f"no field {field_index}"
        groups = self._groups([f.path for _, f in chosen])
        rep: Image | None = None
        rep_err: OzxError | None = None
        for (w, f), g in zip(chosen, groups, strict=True):
            if isinstance(g, OzxError):
                continue
            try:
                rep = self._full_image(f.path, g)
                break
            except OzxError as e:
                rep_err = e
                skipped[w.path] = str(e)
        if rep is None:
            why = f" ({rep_err})" if rep_err else ""
            raise MetadataError(
                f"{self.oz.source}: no well of this plate has a readable field {field_index}{why}"
            )
        level = _choose_level([a.shape for a in rep.arrays], yx_axes(rep.multiscale.axes), target)
        ms0 = rep.multiscale
        # every other well's field: that level's array document, all at once
        todo: list[tuple[WellInfo, FieldRef, GroupNode]] = []
        for (w, f), g in zip(chosen, groups, strict=True):
            if isinstance(g, OzxError):
                skipped[w.path] = str(g)
            else:
                todo.append((w, f, g))
        level_paths = []
        for _, f, g in todo:
            ds = g.meta.multiscales[0].datasets
            level_paths.append(join_path(f.path, ds[min(level, len(ds) - 1)].path))
        tiles: dict[tuple[int, int], _WellTile] = {}
        shown: dict[tuple[int, int], FieldRef] = {}
        rep_yx = rep.arrays[level].shape
        for (w, f, g), p, res in zip(
            todo, level_paths, self.oz.read_docs(level_paths), strict=True
        ):
            try:
                node = self.oz.make_array(p, res)
                g = self._fix_implied_axes(g, len(node.shape))
                names = g.meta.multiscales[0].axis_names
                if names != ms0.axis_names:
                    raise MetadataError(f"axes {list(names)} differ from {list(ms0.axis_names)}")
                if len(node.shape) != len(names):  # the overview indexes shapes by axis
                    raise MetadataError(
                        f"{p}: {len(node.shape)} dimensions for {len(names)} axes {list(names)}"
                    )
            except OzxError as e:
                skipped[w.path] = str(e)
                continue
            tiles[(w.row, w.column)] = _WellTile(w.row, w.column, node, node.shape)
            shown[(w.row, w.column)] = f
        y, x = yx_axes(ms0.axes)
        cap_y = min(max(2 * rep_yx[y], 2 * target), TILE_LIMIT)
        cap_x = min(max(2 * rep_yx[x], 2 * target), TILE_LIMIT)
        tile = (
            min(max(t.shape[y] for t in tiles.values()), cap_y),
            min(max(t.shape[x] for t in tiles.values()), cap_x),
        )
        if skipped:
            logger.info("%s: %d wells empty in the overview", self.oz.source, len(skipped))
        ov = Overview(self, field_index, acquisition, rep, level, tiles, shown, tile, skipped)
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
    ) -> list[tuple[float, float]]:
        """World (y, x) offsets to add to each image's own translation.

        With an *overview*: the first image lands exactly on the well's tile (its overview
        level over the tile), further ones (``grid``) continue to the right and down in a
        near-square grid of fields. Without one (a well opened on its own): the first
        field stays where its metadata puts it; ``grid`` lines the others up beside it.
        """
        if not images:
            return []

        def t_at(img: Image, lvl: int) -> tuple[float, float]:
            y, x = yx_axes(img.multiscale.axes)
            ds = img.multiscale.datasets[min(lvl, len(img.multiscale.datasets) - 1)]
            return ds.translation[y], ds.translation[x]

        if overview is not None:
            # where the image's overview level would be drawn -> where its tile is
            level = overview.level
            oy, ox = overview.tile_origin(well.row, well.column)
        else:
            # a well on its own: the first field stays where its metadata puts it
            level = 0
            oy, ox = t_at(images[0], 0)
        if not grid:
            if overview is None:
                return [(0.0, 0.0)] * len(images)
            return [(oy - ty, ox - tx) for ty, tx in (t_at(img, level) for img in images)]
        ext_y = ext_x = 0.0
        for img in images:
            y, x = yx_axes(img.multiscale.axes)
            ds0 = img.multiscale.datasets[0]
            ext_y = max(ext_y, img.arrays[0].shape[y] * ds0.scale[y])
            ext_x = max(ext_x, img.arrays[0].shape[x] * ds0.scale[x])
        ncol = math.ceil(math.sqrt(len(images)))
        step_y, step_x = ext_y * 1.04, ext_x * 1.04  # a small gap between fields
        out = []
        for k, img in enumerate(images):
            ty, tx = t_at(img, level)
            out.append((oy - ty + (k // ncol) * step_y, ox - tx + (k % ncol) * step_x))
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
            out.append(FieldRef(join_path(well_path, im.path), im.path, im.acquisition))
        else:
            logger.warning("well %r: field path %r leaves the well; ignored", well_path, im.path)
    return tuple(out)


def _choose_level(shapes: Sequence[tuple[int, ...]], yx: tuple[int, int], target: int) -> int:
    """The pyramid level whose larger y/x side is nearest to *target* (log scale); ties
    go to the finer level."""
    best, best_d = 0, math.inf
    for i, s in enumerate(shapes):
        side = max(s[yx[0]], s[yx[1]], 1)
        d = abs(math.log(side / target))
        if d < best_d - 1e-9:
            best, best_d = i, d
    return best


def open_hcs(source: Any, path: str = "") -> HcsPlate:
    """Open a plate or well (an :class:`OmeZarr` or anything :func:`open_ome_zarr` takes)."""
    from .open import open_ome_zarr

    if isinstance(source, OmeZarr):
        return HcsPlate(source, path)
    oz = open_ome_zarr(source)
    try:
        return HcsPlate(oz, path)
    except BaseException:
        oz.close()
        raise
