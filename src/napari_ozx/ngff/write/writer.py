"""Write OME-Zarr 0.6 or 0.5 (``.ozx`` or directory) or 0.4 (directory) with a pyramid.

An image or label image whose place is more than a scale and a translation of its pixels
(a napari layer rotated, sheared or with an affine: ``to_world``) is written as 0.6: its
intrinsic system (level 0 scaled to physical units) and a multiscale-level transformation
from it to the system it is shown in, listed first (the simplest equivalent,
:func:`.transforms.simplest`). Asked for 0.4 / 0.5, such a save is refused naming the
layer and the transformation, never written without it. ``version="auto"`` writes 0.5
unless the data needs 0.6.

How it streams:

1. The whole hierarchy's metadata is created first (groups, arrays, ``multiscales``,
   ``omero``, ``labels``, ``image-label``), so an ``.ozx`` gets every ``zarr.json`` as
   its first entries (RFC-9) and zarr never rewrites one.
2. Level 0 is written shard by shard from the source (numpy or dask: only the region of
   one shard is computed at a time). Each shard is encoded by zarr (sharding + codec)
   and stored exactly once: work is split on shard boundaries, so no shard is ever
   written partially and read back.
3. Level *n* is copied from the source's own level *n* when the spec carries the
   pyramid it has as stored (:class:`StoredPyramid`: ``convert`` and a save of an opened
   layer; its pixels, per-level scale and translation, ``type``, ``metadata`` and level
   paths are kept, re-chunked and re-encoded only). Otherwise, and for levels beyond the
   stored ones or with ``rebuild_pyramid``, it is computed from level *n-1* **as
   written** (read back through the same store), 2x in y and x, so the source is read
   once and memory stays at a few shards per worker.
4. Everything goes to a temporary name beside the target, renamed onto it only when
   complete: a failed or cancelled save leaves the previous file untouched.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

# Literal: export_options resolves WriteOptions' type hints in this module's namespace
# until it calls WriteOptions.from_dict (then this import can go)
from typing import Any, Literal

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.metadata import (
    INTRINSIC,
    Axis,
    Channel,
    CoordinateSystem,
    Dataset,
    ImageLabel,
    LabelColor,
    Multiscale,
    NodeMetadata,
    Omero,
    Scene,
    Window,
    zarr_format_for,
)
from napari_ozx.ngff.write.options import WriteOptions

logger = logging.getLogger(__name__)

__all__ = [
    "ImageSpec",
    "LabelLevel",
    "LabelsSpec",
    "LevelPlan",
    "PlateWriteSpec",
    "PreparedLabels",
    "SaveError",
    "SceneSpec",
    "StoredLevel",
    "StoredPyramid",
    "WriteCancelled",
    "WriteOptions",  # re-exported from .options, its home
    "WriteSummary",
    "chunk_and_shard",
    "plan_levels",
    "prepare_labels",
    "pyramid_notes",
    "pyramid_shapes",
    "summarize_write",
    "write_ome_zarr",
    "write_with",
]

Progress = Callable[[int, int], None]  # (shards done, shards total)


class WriteCancelled(OzxError):
    """The save was cancelled; nothing was written at the target."""


class SaveError(OzxError, OSError):
    """The file system refused the save (disk full, read-only, permission), named by its
    target; the partial copy beside it has been removed."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


@dataclass(frozen=True)
class StoredLevel:
    """A lower pyramid level as the source stores it: its data (numpy or dask, the
    spec's axes and data type), its scale and translation to the intrinsic system, and
    its array path (``None``: the level's index)."""

    data: Any
    scale: Sequence[float]
    translation: Sequence[float]
    path: str | None = None


@dataclass(frozen=True)
class StoredPyramid:
    """The pyramid an image or label image has as stored, to be written level for level
    rather than rebuilt: levels 1.. (level 0 is the spec's ``data``, ``scale`` and
    ``translation``), level 0's array path, and the multiscale's ``type`` and
    ``metadata`` (the downsampling another tool used, e.g. a Gaussian).

    ``WriteOptions.pyramid_levels`` then says how many levels to write (``None``: the
    stored ones): fewer keeps the finest, more builds the missing ones from the coarsest
    stored level; ``rebuild_pyramid`` ignores the stored lower levels."""

    lower: tuple[StoredLevel, ...] = ()
    path0: str | None = None
    type: str | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def count(self) -> int:
        return 1 + len(self.lower)


@dataclass
class LabelsSpec:
    name: str
    data: Any  # integer array (numpy or dask), same axes as ``axes``
    axes: Sequence[Axis]
    scale: Sequence[float] | None = None
    translation: Sequence[float] | None = None
    colors: Sequence[LabelColor] = ()
    properties: Sequence[dict[str, Any]] = ()
    #: homogeneous matrix (over ``axes``) from the intrinsic system (level 0 scaled and
    #: translated) to where the labels are shown; ``None``: the intrinsic system
    to_world: Any = None
    #: what ``to_world`` is, for messages ("rotation", "shear or affine")
    to_world_kind: str = ""
    #: the pyramid the labels have as stored (``None``: built from ``data``)
    pyramid: StoredPyramid | None = None


@dataclass
class ImageSpec:
    data: Any  # numpy or dask array
    axes: Sequence[Axis]
    scale: Sequence[float] | None = None
    translation: Sequence[float] | None = None
    channels: Sequence[Channel] = ()
    name: str | None = None
    labels: Sequence[LabelsSpec] = field(default_factory=list)
    to_world: Any = None  # as LabelsSpec.to_world
    to_world_kind: str = ""
    pyramid: StoredPyramid | None = None  # as LabelsSpec.pyramid
    #: the source image's ``tables/`` group, carried into the write (``convert``; see
    #: :mod:`.table_write`); ``None``: no tables
    tables: Any = None


#: the name of the coordinate system a napari layer's world becomes
WORLD = "world"


@dataclass
class PlateWriteSpec:
    """An HCS plate to write: the plate model, each well's model (by well path) and each
    field's image (by field path, relative to the plate)."""

    plate: Any  # models.Plate
    wells: dict[str, Any]  # well path -> models.Well
    fields: dict[str, ImageSpec]
    #: the plate's own ``tables/`` group (e.g. condition tables), carried as an image's
    tables: Any = None

    @property
    def images(self) -> list[ImageSpec]:
        return list(self.fields.values())

    @property
    def labels(self) -> list[LabelsSpec]:
        return [lab for im in self.fields.values() for lab in im.labels]


@dataclass
class SceneSpec:
    """Several images placed in one "world" (napari layers with different transforms
    saved together): an OME-Zarr 0.6 scene, each image in the group ``paths[i]``."""

    images: Sequence[ImageSpec]
    paths: Sequence[str]
    name: str | None = None
    #: the scene's coordinate system the images are placed in (its name and axes;
    #: default: "world" with the first image's axes)
    system: str = WORLD
    system_axes: Sequence[Axis] | None = None

    @property
    def labels(self) -> list[LabelsSpec]:
        return [lab for im in self.images for lab in im.labels]


def needed_version(specs: Sequence[ImageSpec | LabelsSpec]) -> str | None:
    """ "0.6" when a spec is placed by more than a scale and a translation."""
    return "0.6" if any(s.to_world is not None for s in specs) else None


def _all_specs(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None, labels: Sequence[LabelsSpec]
) -> list[ImageSpec | LabelsSpec]:
    """Every image and label image a write of *image* and *labels* stores."""
    specs: list[ImageSpec | LabelsSpec] = [*labels]
    if isinstance(image, SceneSpec | PlateWriteSpec):
        specs += [*image.images, *image.labels]
    elif image is not None:
        specs += [image, *image.labels]
    return specs


def _needed(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None, specs: Sequence[ImageSpec | LabelsSpec]
) -> str | None:
    """The version the data needs (``None``: any): 0.6 for a scene or a spec placed by
    more than a scale and a translation."""
    return "0.6" if isinstance(image, SceneSpec) else needed_version(specs)


@dataclass(frozen=True)
class WriteSummary:
    """What a write stored and where: the target, the OME-Zarr version written (what
    ``"auto"`` chose), and how many images (with the channels of a single one) and label
    images. :meth:`message` is the line File > Save, the export panel and
    ``napari-ozx convert`` show."""

    target: Path
    version: str
    images: int = 0
    labels: int = 0
    channels: int | None = None  # the channels of the one image written
    kind: str = ""  # "scene" or "plate": what the images make up
    #: what was done to stored pyramids beyond copying them (levels dropped or built),
    #: and the source's tables that were not carried over (and why)
    notes: tuple[str, ...] = ()
    tables: int = 0  #: the source's tables carried over (``convert``)

    def content(self) -> str:
        """``"OME-Zarr 0.5, 1 image (2 channels), 1 labels"``."""
        parts = [f"OME-Zarr {self.version}" + (f" {self.kind}" if self.kind else "")]
        if self.images:
            text = f"{self.images} image" + ("s" if self.images != 1 else "")
            if self.images == 1 and self.channels is not None and self.channels > 1:
                text += f" ({self.channels} channels)"
            parts.append(text)
        if self.labels:
            parts.append(f"{self.labels} labels")
        if self.tables:
            parts.append(f"{self.tables} table" + ("s" if self.tables != 1 else ""))
        return ", ".join(parts)

    def message(self) -> str:
        """``"Saved cells.ozx: OME-Zarr 0.5, 1 image (2 channels), 1 labels"``, and one
        more line per note (a stored pyramid's levels dropped or built)."""
        line = f"Saved {self.target.name or self.target}: {self.content()}"
        return "\n".join([line, *self.notes])


def summarize_write(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None = None,
    labels: Sequence[LabelsSpec] = (),
    options: WriteOptions | None = None,
) -> WriteSummary:
    """What :func:`write_ome_zarr` / :func:`write_with` store for these arguments (the
    version ``"auto"`` resolves to by the same rule they use); no checks, and no I/O
    but for a source's tables a write has not planned yet (:mod:`.table_write`)."""
    specs = _all_specs(image, labels)
    version = (options or WriteOptions()).resolved_version(_needed(image, specs))
    n_labels = sum(isinstance(s, LabelsSpec) for s in specs)
    n_images = len(specs) - n_labels
    channels = None
    if isinstance(image, ImageSpec):
        c = next((i for i, a in enumerate(image.axes) if a.type == "channel"), None)
        channels = int(image.data.shape[c]) if c is not None else 1
    kind = ""
    if isinstance(image, SceneSpec | PlateWriteSpec):
        kind = "scene" if isinstance(image, SceneSpec) else "plate"
    notes = pyramid_notes(image, labels, options or WriteOptions())
    n_tables = 0
    for _, tables in _table_sources(image):
        carried, table_notes = tables.planned(zarr_format_for(version))
        n_tables += len(carried)
        notes.extend(table_notes)
    return WriteSummary(
        Path(target), version, n_images, n_labels, channels, kind, tuple(notes), n_tables
    )


def _table_sources(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
) -> list[tuple[str, Any]]:
    """(path in the target, :class:`~.table_write.SourceTables`) of every ``tables/``
    group a write carries: each image's, and a plate's own."""
    out: list[tuple[str, Any]] = []
    if isinstance(image, PlateWriteSpec):
        if image.tables is not None:
            out.append(("", image.tables))
        out += [(p, im.tables) for p, im in image.fields.items() if im.tables is not None]
    elif isinstance(image, SceneSpec):
        out += [
            (p, im.tables)
            for p, im in zip(image.paths, image.images, strict=True)
            if im.tables is not None
        ]
    elif image is not None and image.tables is not None:
        out.append(("", image.tables))
    return out


def _check_version_holds(specs: Sequence[ImageSpec | LabelsSpec], version: str) -> None:
    for s in specs:
        if s.to_world is not None and version < "0.6":
            raise OzxError(
                f"OME-Zarr {version} cannot store the {s.to_world_kind or 'affine'} "
                f"transformation of {s.name or 'the image'!r} (only scale and translation): "
                f"save as OME-Zarr 0.6 (or version auto) to keep it"
            )


# ------------------------------------------------------------------- layout


def chunk_and_shard(
    shape: Sequence[int], axes: Sequence[Axis], opts: WriteOptions
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Inner chunks: ``chunk_yx`` tiles of single planes; shards: ``shard_z`` planes of
    up to ``shard_yx`` squared (a multiple of the chunk). Other axes: 1."""
    yx = _yx_axes(axes)
    chunks, shards = [], []
    for i, (a, s) in enumerate(zip(axes, shape, strict=True)):
        s = max(int(s), 1)
        if i in yx:
            c = min(opts.chunk_yx, s)
            sh = min(max(opts.shard_yx // c, 1) * c, math.ceil(s / c) * c)
        elif a.type == "space" or (a.type is None and a.name == "z"):
            c, sh = 1, min(opts.shard_z, s)
        else:
            c, sh = 1, 1
        chunks.append(c)
        shards.append(sh)
    return tuple(chunks), (tuple(shards) if zarr_format_for(opts.version) == 3 else None)


def _yx_axes(axes: Sequence[Axis]) -> tuple[int, ...]:
    """Axes halved per pyramid level: the last two spatial axes."""
    spatial = [
        i for i, a in enumerate(axes) if a.type == "space" or (a.type is None and a.name in "zyx")
    ]
    return tuple(spatial[-2:])


def pyramid_shapes(
    shape: Sequence[int], axes: Sequence[Axis], opts: WriteOptions
) -> list[tuple[int, ...]]:
    ds = _yx_axes(axes)
    shapes = [tuple(int(s) for s in shape)]
    limit = opts.pyramid_levels
    while True:
        cur = shapes[-1]
        if limit is not None and len(shapes) >= limit:
            break
        if limit is None and (
            not ds or all(cur[i] <= opts.chunk_yx for i in ds) or len(shapes) >= 12
        ):
            break
        nxt = tuple(math.ceil(s / 2) if i in ds else s for i, s in enumerate(cur))
        if nxt == cur:
            break
        shapes.append(nxt)
    return shapes


def _codecs(opts: WriteOptions, itemsize: int) -> Any:
    """Chunk codecs of a v3 array. Every chunk carries a checksum whatever the codec, so
    a flipped bit read by range is a decode error, never wrong pixels (a ZIP CRC covers
    whole shards): zstd's frame checksum, gzip's CRC-32 trailer, else a ``crc32c``
    codec after the compressor."""
    from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec

    if opts.codec == "none":
        return [Crc32cCodec()]
    if opts.codec == "zstd":
        return [ZstdCodec(level=opts.level, checksum=True)]
    if opts.codec == "gzip":
        return [GzipCodec(level=min(max(opts.level, 0), 9))]
    cname: Literal["lz4", "zstd"] = "lz4" if opts.codec == "blosc-lz4" else "zstd"
    blosc = BloscCodec(
        cname=cname,
        clevel=min(max(opts.level, 0), 9),
        shuffle="bitshuffle" if itemsize == 1 else "shuffle",
        typesize=itemsize,
    )
    return [blosc, Crc32cCodec()]


def _v2_compressor(opts: WriteOptions) -> Any:
    """0.4 (Zarr v2) is written for old tools, so it stays plain: zarrs (ngff-zarr) refuses
    both numcodecs' ``Zstd(checksum=...)`` field and a ``crc32c`` filter in v2 metadata.
    Only gzip chunks carry a checksum there; 0.5 (and every ``.ozx``) always does."""
    import numcodecs

    if opts.codec == "none":
        return None
    if opts.codec == "zstd":
        return numcodecs.Zstd(level=opts.level)
    if opts.codec == "gzip":
        return numcodecs.GZip(level=min(max(opts.level, 0), 9))
    return numcodecs.Blosc(
        cname="lz4" if opts.codec == "blosc-lz4" else "zstd",
        clevel=min(max(opts.level, 0), 9),
        shuffle=numcodecs.Blosc.SHUFFLE,
    )


# ------------------------------------------------------------------ metadata


@dataclass(frozen=True)
class LevelPlan:
    """One level a write stores: its array path, shape, scale and translation (to the
    intrinsic system), and the data it is copied from (``None``: computed from the level
    above as written)."""

    path: str
    shape: tuple[int, ...]
    scale: tuple[float, ...]
    translation: tuple[float, ...]
    source: Any = None


def _halved_places(
    scale: Sequence[float],
    translation: Sequence[float],
    axes: Sequence[Axis],
    method: str,
    count: int,
) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """(scale, translation) of *count* levels, the first placed by *scale* and
    *translation*, each next one halved in y and x by *method*."""
    halved = _yx_axes(axes)
    out = []
    for i in range(count):
        # ceil halving repeats the edge: a level-i pixel is exactly 2**i first-level pixels
        factors = [2.0**i if ax in halved else 1.0 for ax in range(len(axes))]
        sc = tuple(float(s) * f for s, f in zip(scale, factors, strict=True))
        if method == "mean":  # the centre of a 2x2 block lies half a pixel further in
            tr = tuple(
                float(t) + (f - 1) * s / 2
                for t, s, f in zip(translation, scale, factors, strict=True)
            )
        else:
            tr = tuple(float(t) for t in translation)
        out.append((sc, tr))
    return out


def _next_path(previous: str, index: int, used: set[str]) -> str:
    """The array path of a level built after *previous*: its numbering continued
    (``s2`` after ``s1``), else the level's index."""
    m = re.fullmatch(r"([A-Za-z_\-]*)(\d+)", previous)
    candidates = [f"{m.group(1)}{int(m.group(2)) + 1}"] if m else []
    candidates += [str(index), f"level{index}"]
    return next(c for c in candidates if c not in used)


def plan_levels(
    data: Any,
    axes: Sequence[Axis],
    scale: Sequence[float] | None,
    translation: Sequence[float] | None,
    method: str,
    opts: WriteOptions,
    pyramid: StoredPyramid | None = None,
    name: str = "",
) -> list[LevelPlan]:
    """Every level one multiscale is written with (no I/O: shapes only).

    Without a stored *pyramid* (or with ``opts.rebuild_pyramid``), the writer's own: level
    0 from *data*, then halved in y and x by *method* (:func:`pyramid_shapes`). With one,
    the stored levels, as stored (``opts.pyramid_levels`` of them, default all), then any
    more asked for halved from the coarsest stored one."""
    ndim = len(axes)
    sc0 = tuple(float(v) for v in scale) if scale is not None else (1.0,) * ndim
    tr0 = tuple(float(v) for v in translation) if translation is not None else (0.0,) * ndim
    if pyramid is None or opts.rebuild_pyramid:
        shapes = pyramid_shapes(data.shape, axes, opts)
        places = _halved_places(sc0, tr0, axes, method, len(shapes))
        return [
            LevelPlan(str(i), shp, sc, tr, data if i == 0 else None)
            for i, (shp, (sc, tr)) in enumerate(zip(shapes, places, strict=True))
        ]
    stored = [(pyramid.path0, data, sc0, tr0)] + [
        (
            lv.path,
            lv.data,
            tuple(float(v) for v in lv.scale),
            tuple(float(v) for v in lv.translation),
        )
        for lv in pyramid.lower
    ]
    count = opts.pyramid_levels or len(stored)
    out: list[LevelPlan] = []
    used: set[str] = set()
    for i, (path, d, sc, tr) in enumerate(stored[:count]):
        if len(d.shape) != ndim or len(sc) != ndim or len(tr) != ndim:
            raise OzxError(
                f"{name or 'image'}: level {i} has {len(d.shape)} dimensions, "
                f"{len(sc)} scales and {len(tr)} translations for {ndim} axes"
            )
        if np.dtype(d.dtype) != np.dtype(data.dtype):
            raise OzxError(
                f"{name or 'image'}: level {i} is {np.dtype(d.dtype)}, level 0 "
                f"{np.dtype(data.dtype)}: a pyramid has one data type"
            )
        p = path if path and "/" not in path and path not in used else str(i)
        if p in used:
            p = _next_path(out[-1].path, i, used)
        used.add(p)
        out.append(LevelPlan(p, tuple(int(x) for x in d.shape), sc, tr, d))
    if count > len(out):
        last = out[-1]
        more = pyramid_shapes(last.shape, axes, replace(opts, pyramid_levels=count - len(out) + 1))
        places = _halved_places(last.scale, last.translation, axes, method, len(more))
        for shp, (sc, tr) in zip(more[1:], places[1:], strict=True):
            p = _next_path(out[-1].path, len(out), used)
            used.add(p)
            out.append(LevelPlan(p, shp, sc, tr, None))
    return out


def pyramid_notes(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
    labels: Sequence[LabelsSpec],
    opts: WriteOptions,
) -> list[str]:
    """What a write does to stored pyramids beyond copying them (levels dropped, built or
    rebuilt), one line per image or label image, for the summary (no I/O)."""
    notes = []
    for spec in _all_specs(image, labels):
        pyr = spec.pyramid
        if pyr is None:
            continue
        what = (
            f"labels {spec.name!r}"
            if isinstance(spec, LabelsSpec)
            else f"image {spec.name!r}"
            if spec.name
            else "the image"
        )
        if opts.rebuild_pyramid:
            n = len(pyramid_shapes(spec.data.shape, spec.axes, opts))
            if pyr.count > 1 or n > 1:
                notes.append(
                    f"{what}: pyramid rebuilt from level 0 ({n} levels; the "
                    f"{pyr.count} stored were not copied)"
                )
            continue
        method = _method(opts, isinstance(spec, LabelsSpec))
        plan = plan_levels(
            spec.data, spec.axes, spec.scale, spec.translation, method, opts, pyr, spec.name or ""
        )
        kept = sum(lv.source is not None for lv in plan)
        if kept < pyr.count:
            notes.append(
                f"{what}: {kept} of its {pyr.count} stored levels written, "
                f"level{'s' if pyr.count - kept > 1 else ''} "
                f"{_span(kept, pyr.count - 1)} dropped"
            )
        if len(plan) > kept:
            notes.append(
                f"{what}: level{'s' if len(plan) - kept > 1 else ''} "
                f"{_span(kept, len(plan) - 1)} built from stored level {kept - 1} ({method})"
            )
    return notes


def _labels_like(
    lab: LabelsSpec, image: ImageSpec, image_levels: Sequence[LevelPlan], opts: WriteOptions
) -> list[LevelPlan] | None:
    """The levels of labels without a stored pyramid of their own under an image whose
    stored pyramid is kept: the image's levels (channel axis dropped), so the label image
    has "the same number of entries (scale levels) as the original unlabeled image"
    (0.4-0.6, "labels") at the same scales, each level taken from the one above
    (nearest, or *opts*' mode where a level halves). ``None``: the labels' own pyramid
    (they have one stored, the image's is rebuilt, or they are shaped or placed
    otherwise than its level 0)."""
    if lab.pyramid is not None or image.pyramid is None or opts.rebuild_pyramid:
        return None
    c = next((i for i, a in enumerate(image.axes) if a.type == "channel"), None)
    keep = [i for i in range(len(image.axes)) if i != c]
    if [image.axes[i].name for i in keep] != [a.name for a in lab.axes]:
        return None
    first = image_levels[0]
    ndim = len(lab.axes)
    lab_scale = tuple(float(v) for v in lab.scale) if lab.scale is not None else (1.0,) * ndim
    lab_tr = (
        tuple(float(v) for v in lab.translation) if lab.translation is not None else (0.0,) * ndim
    )
    if (
        tuple(lab.data.shape) != tuple(first.shape[i] for i in keep)
        or not np.allclose(lab_scale, [first.scale[i] for i in keep])
        or not np.allclose(lab_tr, [first.translation[i] for i in keep])
    ):
        return None
    return [
        LevelPlan(
            str(n),
            tuple(lv.shape[i] for i in keep),
            tuple(lv.scale[i] for i in keep),
            tuple(lv.translation[i] for i in keep),
            lab.data if n == 0 else None,
        )
        for n, lv in enumerate(image_levels)
    ]


def _factors(shapes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Per level, the integer factor from the level above on every axis (1 for level 0)."""
    return [tuple(1 for _ in shapes[0])] + [
        tuple(max(1, round(p / c)) if c else 1 for p, c in zip(a, b, strict=True))
        for a, b in itertools.pairwise(shapes)
    ]


def _span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


def _method(opts: WriteOptions, labels: bool) -> str:
    """The downsampling method of built levels: *opts*' where it suits, else mean for
    images and nearest for labels."""
    if labels:
        return opts.downsample if opts.downsample in ("nearest", "mode") else "nearest"
    return opts.downsample if opts.downsample in ("mean", "nearest") else "mean"


def _multiscale(
    name: str | None,
    axes: Sequence[Axis],
    levels: Sequence[LevelPlan],
    kind: str | None,
    version: str,
    to_world: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> Multiscale:
    datasets = tuple(Dataset(lv.path, lv.scale, lv.translation) for lv in levels)
    ms = Multiscale(
        version,
        tuple(axes),
        datasets,
        name=name or None,
        type=kind,
        metadata=dict(metadata) if metadata else None,
    )
    if to_world is None:
        return ms
    from napari_ozx.ngff.model.transforms import SystemRef, simplest

    t = replace(
        simplest(np.asarray(to_world, dtype=float)),
        input=SystemRef(INTRINSIC),
        output=SystemRef(WORLD),
        name=f"{INTRINSIC} to {WORLD}",
    )
    # the world first: where a reader shows the image (the spec's hint for scenes, and
    # Multiscale.default_system)
    systems = (CoordinateSystem(WORLD, tuple(axes)), CoordinateSystem(INTRINSIC, tuple(axes)))
    return replace(ms, coordinate_systems=systems, intrinsic=INTRINSIC, transformations=(t,))


def _omero(channels: Sequence[Channel], dtype: np.dtype, name: str | None) -> Omero | None:
    """The channels as written: white when uncoloured, and a window's missing min/max
    filled from the integer dtype's range (the window itself where there is none).

    A channel without a window gets the dtype's full range (0..1 for floats): the 0.4 and
    0.5 JSON schemas require ``window`` and ``color`` on every channel, and yaozarrs and
    ome-zarr-models refuse a file without them (tests/test_model_serialise.py)."""
    if not channels:
        return None
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = float(info.min), float(info.max)
    else:
        lo, hi = None, None
    chans = []
    for ch in channels:
        w = ch.window
        if w is None:
            w = Window(lo, hi) if lo is not None and hi is not None else Window(0.0, 1.0)
        w = Window(
            w.start,
            w.end,
            w.min if w.min is not None else (lo if lo is not None else w.start),
            w.max if w.max is not None else (hi if hi is not None else w.end),
        )
        chans.append(replace(ch, label=ch.label or None, color=ch.color or "FFFFFF", window=w))
    return Omero(tuple(chans), name=name or None, model="color")


# --------------------------------------------------------------- downsample


def downsample2(block: np.ndarray, axes: tuple[int, ...], method: str) -> np.ndarray:
    """Halve *block* along *axes* (ceil for odd sizes: the edge is repeated)."""
    if method == "nearest":
        idx = tuple(slice(None, None, 2) if i in axes else slice(None) for i in range(block.ndim))
        return block[idx]
    pad = [(0, block.shape[i] % 2 if i in axes else 0) for i in range(block.ndim)]
    if any(p[1] for p in pad):
        block = np.pad(block, pad, mode="edge")
    shape: list[int] = []
    red: list[int] = []
    for i, s in enumerate(block.shape):
        if i in axes:
            shape += [s // 2, 2]
            red.append(len(shape) - 1)
        else:
            shape.append(s)
    v = block.reshape(shape)
    if method == "mean":
        # float32 is exact for sums of four <=16-bit values; wider types need float64
        acc = np.float32 if block.dtype.itemsize <= 2 or block.dtype == np.float32 else np.float64
        out = v.sum(axis=tuple(red), dtype=acc)
        np.multiply(out, 0.25, out=out)
        if np.issubdtype(block.dtype, np.integer):
            np.rint(out, out=out)
        return out.astype(block.dtype, copy=False)
    # mode (labels): the most frequent of each 2x2 block, ties to the first
    v = np.moveaxis(v, red, list(range(v.ndim - len(red), v.ndim)))
    v = v.reshape(*v.shape[: v.ndim - len(red)], -1)
    counts = (v[..., :, None] == v[..., None, :]).sum(-1)
    return np.take_along_axis(v, counts.argmax(-1)[..., None], -1)[..., 0]


# ---------------------------------------------------------------------- write


@dataclass
class _Job:
    """One multiscale (image or labels) to write into a group."""

    group_path: str
    data: Any
    axes: Sequence[Axis]
    shapes: list[tuple[int, ...]]
    method: str
    arrays: list[Any] = field(default_factory=list)
    #: per level, the integer factor from the level above on every axis; ``None``: the
    #: writer's own pyramid (2x in y and x, :func:`pyramid_shapes`)
    factors: list[tuple[int, ...]] | None = None
    #: per level, the data it is copied from (a stored level), or ``None``: computed from
    #: the level above; no list: level 0 from ``data``, every other computed
    sources: list[Any] | None = None

    def source(self, level: int) -> Any:
        """The data level *level* is copied from, or ``None`` (computed from above)."""
        if self.sources is not None:
            return self.sources[level]
        return self.data if level == 0 else None


#: unsharded arrays are written in regions of about this many bytes (whole chunks)
_WRITE_REGION_BYTES = 4 << 20


def _write_step(shape: Sequence[int], chunks: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The region one write task covers for an unsharded array: whole chunks, grown in
    y and x to ~:data:`_WRITE_REGION_BYTES`.

    Why: one task per chunk made a 0.4 directory of 64x64 chunks cost a thread hop, a
    zarr ``__setitem__`` (event-loop round trip) and, for a lazy source, a dask compute
    *per chunk* (ten times slower than sharded). A region of many chunks is one
    ``__setitem__`` that zarr fans out concurrently, and one source compute. Chunks stay
    whole, so none is written twice or read back.
    """
    step = [min(c, s) if s else c for c, s in zip(chunks, shape, strict=True)]
    nbytes = int(np.prod(step)) * itemsize
    grew = True
    while grew and nbytes < _WRITE_REGION_BYTES:
        grew = False
        for ax in (len(step) - 1, len(step) - 2):
            if ax >= 0 and step[ax] < shape[ax] and nbytes < _WRITE_REGION_BYTES:
                step[ax] *= 2
                nbytes *= 2
                grew = True
    return tuple(step)


def _regions(shape: Sequence[int], step: Sequence[int]) -> list[tuple[slice, ...]]:
    ranges = [range(0, s, st) for s, st in zip(shape, step, strict=True)]
    return [
        tuple(slice(o, min(o + st, s)) for o, st, s in zip(origin, step, shape, strict=True))
        for origin in itertools.product(*ranges)
    ]


def write_ome_zarr(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None = None,
    labels: Sequence[LabelsSpec] = (),
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    compute: Callable[[Any], Any] | None = None,
) -> Path:
    """Write *image* (with its labels) or standalone *labels* to *target*.

    *compute* evaluates one shard-sized region of a lazy source (default: dask's
    synchronous scheduler in the writer's own threads); pass e.g. a dask.distributed
    client's ``lambda x: client.compute(x).result()`` to evaluate the source on a
    cluster while encoding and writing stay here (:mod:`.cluster` moves the encoding
    and, for directories, the writing to the workers too).

    Returns the target path. Raises :class:`WriteCancelled` when *cancel* is set; the
    previous content of *target* is then untouched.
    """
    opts = options or WriteOptions()

    def write_data(jobs: list[_Job], store: Any, tmp_dir: Path | None) -> None:
        _write_data(jobs, opts, progress, cancel, compute or _compute)

    return write_with(target, image, labels, opts, write_data)


#: writes every region of the created arrays: ``(jobs, store, partial directory or None)``
DataWriter = Callable[[list["_Job"], Any, Path | None], None]


def write_with(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
    labels: Sequence[LabelsSpec],
    options: WriteOptions | None,
    write_data: DataWriter,
) -> Path:
    """:func:`write_ome_zarr` with the data written by *write_data*: the checks, the
    metadata (created before any data), the temporary target and the atomic swap or
    clean-up are the same for every way of writing the pixels.

    *write_data* gets the jobs (one per multiscale, its zarr arrays already created),
    the store (an ``OzxWriteStore`` for ``.ozx``) and the partial directory the arrays
    live in (``None`` for ``.ozx``); it returns once every region is stored.
    """
    opts = options or WriteOptions()
    target = Path(target)
    opts.validate(target)
    fmt = opts.resolved_format(target)
    if image is None and not labels:
        raise OzxError("nothing to write")
    scene = isinstance(image, SceneSpec)
    specs = _all_specs(image, labels)
    opts = opts.with_resolved_version(_needed(image, specs))  # as summarize_write
    if scene and opts.version < "0.6":
        raise OzxError(
            f"OME-Zarr {opts.version} has no scenes: layers placed differently (scale, "
            "translate, rotate, shear, affine) are saved together as an OME-Zarr 0.6 scene "
            "(or save them one at a time)"
        )
    _check_version_holds(specs, opts.version)
    if image is None and len(labels) > 1:
        raise OzxError("several label layers need an image to belong to (or save them one by one)")
    if isinstance(image, ImageSpec) and labels:
        image = replace(image, labels=[*image.labels, *labels])
    if not target.parent.is_dir():
        # the same for both formats: a missing folder is more often a typo than a wish
        raise OzxError(
            f"cannot save: the folder {str(target.parent)!r} does not exist "
            f"(create it first): {target}"
        )

    if fmt == "ozx":
        from napari_ozx.ozx.write_store import OzxWriteStore

        store: Any = OzxWriteStore(
            target, comment=json.dumps({"ome": {"version": opts.version}}, separators=(",", ":"))
        )
        tmp_dir = None
    else:
        from zarr.storage import LocalStore

        from napari_ozx.ozx import atomic

        atomic.recover_directory(target)
        atomic.remove_stale_partials(target)
        tmp_dir, lock_fd = atomic.create_partial_dir(target)  # swept only if we die
        store = LocalStore(tmp_dir)
    try:
        jobs = _create_hierarchy(store, image, labels if image is None else (), opts)
        _carry_tables(store, image, opts)
        write_data(jobs, store, tmp_dir)
    except BaseException as e:
        if tmp_dir is None:
            store.abort()
        else:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            atomic.release(lock_fd)
        if isinstance(e, OSError) and not isinstance(e, OzxError):
            # disk full, read-only, permission: say so about the target, not the hidden
            # temporary name beside it
            reason = e.strerror or str(e)
            raise SaveError(f"cannot save {str(target)!r}: {reason}", errno=e.errno) from e
        raise
    if tmp_dir is None:
        return store.commit()
    try:
        _swap_directory(tmp_dir, target)
    finally:
        atomic.release(lock_fd)
    return target


def _carry_tables(
    store: Any, image: ImageSpec | SceneSpec | PlateWriteSpec | None, opts: WriteOptions
) -> None:
    """The source's ``tables/`` groups into *store* (:mod:`.table_write`): every
    document now, with the hierarchy's (an ``.ozx`` gets every ``zarr.json`` before any
    data, RFC-9), then their chunks and files, before the pixels."""
    sources = _table_sources(image)
    if not sources:
        return
    from napari_ozx.ngff.tables.write import TableCopy

    zf = zarr_format_for(opts.version)
    copies = [TableCopy(tables, prefix, zf) for prefix, tables in sources]
    for c in copies:
        c.write_documents(store)
    for c in copies:
        c.write_data(store)


def _swap_directory(tmp_dir: Path, target: Path) -> None:
    from napari_ozx.ngff.read.live import adopt_old_tree, retain_for_readers
    from napari_ozx.ozx import atomic

    # open layers reading the tree being replaced keep a stable copy (see ngff/read/live.py)
    cloned = True
    if target.is_dir():
        try:
            retain_for_readers(target)
        except OSError:  # no hard links here: keep the old tree itself for them
            cloned = False

    def dispose(old: Path) -> None:
        # after the exchange *old* (our partial's name) holds the previous tree, unlocked:
        # a concurrent save's stale-partial sweep may delete it first, which is fine
        if not cloned and old.is_dir():
            # under a name no stale-partial cleanup matches, while readers use it
            kept = old.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.retained")
            try:
                os.rename(old, kept)
            except FileNotFoundError:
                return
            if adopt_old_tree(kept, target):
                return
            old = kept
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)

    atomic.swap_directory(tmp_dir, target, dispose=dispose)


def _array_kwargs(
    chunks: Sequence[int],
    shards: Sequence[int] | None,
    dtype: np.dtype,
    axes: Sequence[Axis],
    opts: WriteOptions,
    separator: Literal["/", "."] = "/",
) -> dict[str, Any]:
    """``create_array`` keywords of one level: chunks, shards and codecs for the version."""
    kw: dict[str, Any] = {"chunks": tuple(chunks), "fill_value": 0}
    if zarr_format_for(opts.version) == 3:
        kw.update(
            shards=tuple(shards) if shards is not None else None,
            compressors=_codecs(opts, dtype.itemsize),
            dimension_names=[a.name for a in axes],
        )
    else:
        kw.update(
            compressors=_v2_compressor(opts),
            chunk_key_encoding={"name": "v2", "separator": separator},
        )
    return kw


@dataclass(frozen=True)
class LabelLevel:
    """One level of a label image laid out like its image's level (channel axis dropped):
    shape, storage chunks / shards and the level's coordinate transformations."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    scale: tuple[float, ...]
    translation: tuple[float, ...]


@dataclass
class PreparedLabels:
    """A label image ready to go under an existing image's ``labels/`` group (see
    :func:`prepare_labels`): its metadata documents, then its data."""

    documents: dict[str, bytes]  #: key relative to the label image -> document bytes
    spec: LabelsSpec
    levels: list[LabelLevel]
    method: str
    options: WriteOptions
    array_metadata: list[Any]

    def write_data(
        self,
        store: Any,
        prefix: str,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        compute: Callable[[Any], Any] | None = None,
    ) -> None:
        """Write every level's chunks to *store* under *prefix* (the label image's path
        in that store; its documents must be there or follow). Level *n* is computed from
        level *n-1* as written, shard by shard, like :func:`write_ome_zarr`."""
        import zarr
        from zarr import AsyncArray
        from zarr.storage import StorePath

        arrays = [
            zarr.Array(
                AsyncArray(
                    metadata=m, store_path=StorePath(store, f"{prefix}/{i}" if prefix else str(i))
                )
            )
            for i, m in enumerate(self.array_metadata)
        ]
        shapes = [lvl.shape for lvl in self.levels]
        job = _Job(
            prefix, self.spec.data, self.spec.axes, shapes, self.method, arrays, _factors(shapes)
        )
        _write_data([job], self.options, progress, cancel, compute or _compute)


def prepare_labels(
    spec: LabelsSpec,
    levels: Sequence[LabelLevel],
    options: WriteOptions,
    separator: Literal["/", "."] = "/",
) -> PreparedLabels:
    """The documents of *spec* as a label image of an existing image: one level per
    *levels* (the image's pyramid, so the labels overlay every level), ``image-label``
    with its colours, properties and ``source.image: "../../"``, the version and Zarr
    format of *options*. Built from the models (``to_attributes``) and zarr's own
    metadata serialiser, never hand-written JSON. ``separator``: Zarr v2 chunk keys."""
    import zarr
    from zarr.storage import MemoryStore

    opts = options
    zf = zarr_format_for(opts.version)
    if not spec.name or "/" in spec.name or spec.name.startswith("."):
        raise OzxError(f"invalid label name {spec.name!r}")
    if len(levels) < 1 or any(len(lvl.shape) != len(spec.axes) for lvl in levels):
        raise OzxError(f"{spec.name}: every level needs one size per axis")
    method = _method(opts, labels=True)
    datasets = tuple(
        Dataset(str(i), tuple(lvl.scale), tuple(lvl.translation)) for i, lvl in enumerate(levels)
    )
    ms = Multiscale(opts.version, tuple(spec.axes), datasets, name=spec.name, type=method)
    il = ImageLabel(tuple(spec.colors), tuple(dict(p) for p in spec.properties), "../../")
    attrs = NodeMetadata(multiscales=(ms,), image_label=il).to_attributes(opts.version)
    docs: dict[str, Any] = {}
    grp = zarr.create_group(store=MemoryStore(docs), zarr_format=zf, attributes=attrs)
    dtype = np.dtype(spec.data.dtype)
    metas = []
    for i, lvl in enumerate(levels):
        kw = _array_kwargs(lvl.chunks, lvl.shards, dtype, spec.axes, opts, separator)
        metas.append(grp.create_array(str(i), shape=lvl.shape, dtype=dtype, **kw).metadata)
    return PreparedLabels(
        {k: v.to_bytes() for k, v in docs.items()}, spec, list(levels), method, opts, metas
    )


def _create_hierarchy(
    store: Any,
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
    labels: Sequence[LabelsSpec],
    opts: WriteOptions,
) -> list[_Job]:
    import zarr

    zf = zarr_format_for(opts.version)
    jobs: list[_Job] = []

    def add_multiscale(
        path: str,
        data: Any,
        axes: Sequence[Axis],
        scale: Any,
        translation: Any,
        name: str | None,
        method: str,
        omero: Omero | None = None,
        image_label: ImageLabel | None = None,
        to_world: Any = None,
        pyramid: StoredPyramid | None = None,
        like: list[LevelPlan] | None = None,
    ) -> list[LevelPlan]:
        if len(axes) != data.ndim:
            raise OzxError(f"{name or path or 'image'}: {data.ndim}-D data but {len(axes)} axes")
        levels = like or plan_levels(
            data, axes, scale, translation, method, opts, pyramid, name or path
        )
        kept = pyramid is not None and not opts.rebuild_pyramid
        ms = _multiscale(
            name,
            axes,
            levels,
            pyramid.type if kept and pyramid is not None else method,
            opts.version,
            to_world,
            pyramid.metadata if kept and pyramid is not None else None,
        )
        node = NodeMetadata(multiscales=(ms,), omero=omero, image_label=image_label)
        attrs = node.to_attributes(opts.version)
        # never overwrite=True at the root: zarr then deletes the store's directory (our
        # locked partial) and makes a new one, unlocked, which a concurrent save's
        # stale-partial sweep may remove (the concurrent-saves test failed so under load)
        grp = zarr.create_group(
            store=store, path=path, zarr_format=zf, attributes=attrs, overwrite=bool(path)
        )
        shapes = [lv.shape for lv in levels]
        job = _Job(path, data, axes, shapes, method, sources=[lv.source for lv in levels])
        if like is not None:
            job.factors = _factors(shapes)
        dtype = np.dtype(data.dtype)
        for lv in levels:
            chunks, shards = chunk_and_shard(lv.shape, axes, opts)
            kw = _array_kwargs(chunks, shards, dtype, axes, opts)
            job.arrays.append(grp.create_array(lv.path, shape=lv.shape, dtype=dtype, **kw))
        jobs.append(job)
        return levels

    def image_label(lab: LabelsSpec, source: str | None) -> ImageLabel:
        return ImageLabel(
            tuple(lab.colors), tuple(dict(p) for p in lab.properties), source_image=source
        )

    def add_image(prefix: str, image: ImageSpec, to_world: Any) -> None:
        method = _method(opts, labels=False)
        om = _omero(image.channels, np.dtype(image.data.dtype), image.name)
        image_levels = add_multiscale(
            prefix,
            image.data,
            image.axes,
            image.scale,
            image.translation,
            image.name,
            method,
            om,
            to_world=to_world,
            pyramid=image.pyramid,
        )
        if image.labels:
            names = [lab.name for lab in image.labels]
            if len(set(names)) != len(names) or any(not n or "/" in n for n in names):
                raise OzxError(f"label names must be unique and contain no '/': {names}")
            zarr.create_group(
                store=store,
                path=f"{prefix}/labels".lstrip("/"),
                zarr_format=zf,
                attributes=NodeMetadata(labels=tuple(names)).to_attributes(opts.version),
                overwrite=True,
            )
            for lab in image.labels:
                add_multiscale(
                    f"{prefix}/labels/{lab.name}".lstrip("/"),
                    lab.data,
                    lab.axes,
                    lab.scale,
                    lab.translation,
                    lab.name,
                    _method(opts, labels=True),
                    image_label=image_label(lab, "../../"),
                    to_world=lab.to_world if to_world is not None else None,
                    pyramid=lab.pyramid,
                    like=_labels_like(lab, image, image_levels, opts),
                )

    if isinstance(image, SceneSpec):
        # a scene: each image in a group of its own, placed in the scene's "world" by
        # the scene's transformations (the simplest equivalent of each layer's place)
        from napari_ozx.ngff.model.transforms import Identity, SystemRef, simplest

        transformations = []
        for path, im in zip(image.paths, image.images, strict=True):
            m = im.to_world
            t = simplest(np.asarray(m, float)) if m is not None else Identity(ndim=len(im.axes))
            transformations.append(
                replace(t, input=SystemRef(INTRINSIC, path), output=SystemRef(image.system))
            )
        axes = tuple(image.system_axes or image.images[0].axes)
        scene = Scene(tuple(transformations), (CoordinateSystem(image.system, axes),))
        zarr.create_group(  # the root first (see add_multiscale on overwrite at the root)
            store=store,
            path="",
            zarr_format=zf,
            attributes=NodeMetadata(scene=scene).to_attributes(opts.version),
            overwrite=False,
        )
        for path, im in zip(image.paths, image.images, strict=True):
            add_image(path, im, None)
    elif isinstance(image, PlateWriteSpec):
        # a plate: the plate group, its row and well groups, every field an image
        plate_meta = replace(image.plate, version=opts.version)
        zarr.create_group(
            store=store,
            path="",
            zarr_format=zf,
            attributes=NodeMetadata(plate=plate_meta).to_attributes(opts.version),
            overwrite=False,
        )
        for row in sorted({w.split("/")[0] for w in image.wells}):
            zarr.create_group(store=store, path=row, zarr_format=zf, overwrite=True)
        for wpath, well in image.wells.items():
            zarr.create_group(
                store=store,
                path=wpath,
                zarr_format=zf,
                attributes=NodeMetadata(well=replace(well, version=opts.version)).to_attributes(
                    opts.version
                ),
                overwrite=True,
            )
        for fpath, im in image.fields.items():
            add_image(fpath, im, im.to_world)
    elif image is not None:
        add_image("", image, image.to_world)
    else:
        (lab,) = labels
        add_multiscale(
            "",
            lab.data,
            lab.axes,
            lab.scale,
            lab.translation,
            lab.name,
            _method(opts, labels=True),
            image_label=image_label(lab, None),
            to_world=lab.to_world,
            pyramid=lab.pyramid,
        )
    return jobs


def _write_data(
    jobs: list[_Job],
    opts: WriteOptions,
    progress: Progress | None,
    cancel: threading.Event | None,
    compute: Callable[[Any], Any],
) -> None:
    plan = []  # (array, region, source-callable) in dependency order, level by level
    for job in jobs:
        ds_axes = _yx_axes(job.axes)
        for lvl, arr in enumerate(job.arrays):
            step = arr.shards or _write_step(arr.shape, arr.chunks, arr.dtype.itemsize)
            plan.append([(job, lvl, arr, r, ds_axes) for r in _regions(arr.shape, step)])
    total = sum(len(p) for p in plan)
    done = 0
    lock = threading.Lock()
    failed = threading.Event()  # set on the first error so queued shards stop early

    def check() -> None:
        """Between planes of a shard: a cancel takes effect within one plane's work, not
        after the shards already running."""
        if cancel is not None and cancel.is_set():
            raise WriteCancelled("save cancelled")

    def one(
        job: _Job, lvl: int, arr: Any, region: tuple[slice, ...], ds_axes: tuple[int, ...]
    ) -> None:
        nonlocal done
        check()
        if failed.is_set():
            return
        src = job.source(lvl)
        if src is not None:
            block = _source_region(src, region, ds_axes, arr.dtype, compute, check)
        elif job.factors is not None and any(f > 2 for f in job.factors[lvl]):
            block = _strided_region(job.arrays[lvl - 1], region, job.factors[lvl], arr.dtype)
        else:
            axes = (
                ds_axes
                if job.factors is None
                else tuple(i for i, f in enumerate(job.factors[lvl]) if f == 2)
            )
            block = _downsampled_region(
                job.arrays[lvl - 1], region, axes, job.method, arr.dtype, check
            )
        check()
        if block.dtype != arr.dtype:
            block = block.astype(arr.dtype)
        arr[region] = block
        with lock:
            done += 1
            d = done
        if progress is not None:
            progress(d, total)

    workers = opts.workers or os.cpu_count() or 2
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ozx-write") as pool:
        # one level at a time: level n reads what level n-1 wrote
        for tasks in plan:
            futures = [pool.submit(one, *t) for t in tasks]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            errors = [e for f in finished if (e := f.exception()) is not None]
            if errors:
                failed.set()
                for f in futures:
                    f.cancel()
                wait(futures)
                raise errors[0]


def _source_region(
    data: Any,
    region: tuple[slice, ...],
    ds_axes: tuple[int, ...],
    dtype: np.dtype,
    compute: Callable[[Any], Any],
    check: Callable[[], None],
) -> np.ndarray:
    """One shard of the source, computed plane by plane (y/x slabs) for a lazy source so a
    cancel is seen between planes; numpy sources are sliced at once (no work to split)."""
    from dask import is_dask_collection

    region_data = data[region]
    if not is_dask_collection(region_data):
        return np.asarray(region_data)
    outer = [i for i in range(len(region)) if i not in ds_axes]
    if not outer or any(max(region_data.chunks[i]) > 1 for i in outer):
        # planes share source chunks: computing plane by plane would recompute them
        return np.asarray(compute(region_data))
    out = np.empty([s.stop - s.start for s in region], dtype=region_data.dtype)
    for idx in itertools.product(*(range(region[i].stop - region[i].start) for i in outer)):
        check()
        sel: list[Any] = [slice(None)] * len(region)
        for i, k in zip(outer, idx, strict=True):
            sel[i] = slice(k, k + 1)
        out[tuple(sel)] = np.asarray(compute(region_data[tuple(sel)]))
    return out


def _downsampled_region(
    src: Any,
    region: tuple[slice, ...],
    ds_axes: tuple[int, ...],
    method: str,
    dtype: np.dtype,
    check: Callable[[], None] | None = None,
) -> np.ndarray:
    """One output shard of level n from level n-1, one plane (y/x slab) at a time, so
    memory stays at one output shard plus one input plane instead of 4 shards."""
    out = np.empty([s.stop - s.start for s in region], dtype=dtype)
    up = [
        slice(s.start * 2, min(s.stop * 2, src.shape[i])) if i in ds_axes else s
        for i, s in enumerate(region)
    ]
    outer = [i for i in range(len(region)) if i not in ds_axes]
    for idx in itertools.product(*(range(region[i].stop - region[i].start) for i in outer)):
        if check is not None:
            check()
        sel = list(up)
        dst: list[Any] = [slice(None)] * len(region)
        for i, k in zip(outer, idx, strict=True):
            sel[i] = slice(region[i].start + k, region[i].start + k + 1)
            dst[i] = slice(k, k + 1)
        out[tuple(dst)] = downsample2(np.asarray(src[tuple(sel)]), ds_axes, method)
    return out


def _strided_region(
    src: Any, region: tuple[slice, ...], factors: Sequence[int], dtype: np.dtype
) -> np.ndarray:
    """One region of a level whose factors from *src* are not all 1 or 2 (another tool's
    pyramid): pixel ``i`` is pixel ``i * f`` above it (nearest; clipped at the edge, so a
    level rounded either way is filled)."""
    lo = [min(s.start * f, n - 1) for s, f, n in zip(region, factors, src.shape, strict=True)]
    hi = [
        min((s.stop - 1) * f, n - 1) + 1 if s.stop > s.start else lo_
        for s, f, n, lo_ in zip(region, factors, src.shape, lo, strict=True)
    ]
    block = np.asarray(src[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))])
    idx = [
        np.minimum(np.arange(s.start, s.stop) * f, n - 1) - a
        for s, f, n, a in zip(region, factors, src.shape, lo, strict=True)
    ]
    return np.asarray(block[np.ix_(*idx)], dtype=dtype)


def _compute(x: Any) -> Any:
    """One region of a lazy source, on this thread, with a private (empty) callback set.

    ``callbacks=()`` matters: with the default (``None``) dask's scheduler *swaps out the
    process-global* ``Callback.active`` for the duration of the compute, so a background
    export would switch off napari's dask cache while the user moves a slider (and
    napari's callbacks would see half of the export's tasks). An empty tuple leaves the
    global set alone and keeps the export's tasks out of napari's cache.
    """
    from dask import is_dask_collection

    if is_dask_collection(x):
        return x.compute(scheduler="synchronous", callbacks=())
    return x
