"""The write plan: how each multiscale is laid out and in which regions it is written.

Shared by the local writer (:mod:`.writer`) and the cluster writer (:mod:`.cluster`), so
both store the same arrays, key for key and byte for byte:

* layout: :func:`chunk_and_shard`, :func:`pyramid_shapes`, :func:`plan_levels` (each level's
  path, shape, place and source), :func:`array_kwargs` (zarr ``create_array`` keywords:
  chunks, shards, codecs for the version);
* metadata: :func:`multiscale_metadata`, :func:`omero_metadata`, :func:`labels_like`;
* the work: one :class:`WriteJob` per multiscale (its arrays created), written region by
  region (:func:`write_step`, :func:`write_regions`), level *n* from level *n-1* as written
  (:func:`downsample2` over :func:`~napari_ozx.ngff.model.axes.spatial_yx`, or
  :func:`level_factors` for another tool's pyramid).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.axes import spatial_yx
from napari_ozx.ngff.model.metadata import (
    INTRINSIC,
    Axis,
    Channel,
    CoordinateSystem,
    Dataset,
    Multiscale,
    Omero,
    Window,
    zarr_format_for,
)
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.specs import (
    WORLD,
    ArrayData,
    ImageSpec,
    LabelsSpec,
    PlateWriteSpec,
    SceneSpec,
    StoredPyramid,
    all_specs,
)

if TYPE_CHECKING:
    import zarr
    from numcodecs.abc import Codec
    from numpy.typing import ArrayLike
    from zarr.abc.codec import BaseCodec
    from zarr.abc.store import Store

__all__ = [
    "WRITE_REGION_BYTES",
    "DataWriter",
    "ExtraMembers",
    "LevelPlan",
    "WriteJob",
    "array_kwargs",
    "chunk_and_shard",
    "downsample2",
    "labels_like",
    "level_factors",
    "level_method",
    "multiscale_metadata",
    "omero_metadata",
    "plan_levels",
    "pyramid_notes",
    "pyramid_shapes",
    "spatial_yx",
    "v2_compressor",
    "v3_codecs",
    "write_regions",
    "write_step",
]

# ------------------------------------------------------------------- layout


def chunk_and_shard(
    shape: Sequence[int], axes: Sequence[Axis], opts: WriteOptions
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Inner chunks: ``chunk_yx`` tiles of single planes; shards: ``shard_z`` planes of
    up to ``shard_yx`` squared (a multiple of the chunk). Other axes: 1."""
    yx = spatial_yx(axes)
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


def pyramid_shapes(
    shape: Sequence[int], axes: Sequence[Axis], opts: WriteOptions
) -> list[tuple[int, ...]]:
    ds = spatial_yx(axes)
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


def v3_codecs(opts: WriteOptions, itemsize: int) -> list[BaseCodec]:
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


def v2_compressor(opts: WriteOptions) -> Codec | None:
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


def array_kwargs(
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
            compressors=v3_codecs(opts, dtype.itemsize),
            dimension_names=[a.name for a in axes],
        )
    else:
        kw.update(
            compressors=v2_compressor(opts),
            chunk_key_encoding={"name": "v2", "separator": separator},
        )
    return kw


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
    source: ArrayData | None = None


def _halved_places(
    scale: Sequence[float],
    translation: Sequence[float],
    axes: Sequence[Axis],
    method: str,
    count: int,
) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """(scale, translation) of *count* levels, the first placed by *scale* and
    *translation*, each next one halved in y and x by *method*."""
    halved = spatial_yx(axes)
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
    data: ArrayData,
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
    for spec in all_specs(image, labels):
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
        method = level_method(opts, isinstance(spec, LabelsSpec))
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


def labels_like(
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


def level_factors(shapes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Per level, the integer factor from the level above on every axis (1 for level 0)."""
    return [tuple(1 for _ in shapes[0])] + [
        tuple(max(1, round(p / c)) if c else 1 for p, c in zip(a, b, strict=True))
        for a, b in itertools.pairwise(shapes)
    ]


def _span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


def level_method(opts: WriteOptions, labels: bool) -> str:
    """The downsampling method of built levels: *opts*' where it suits, else mean for
    images and nearest for labels."""
    if labels:
        return opts.downsample if opts.downsample in ("nearest", "mode") else "nearest"
    return opts.downsample if opts.downsample in ("mean", "nearest") else "mean"


def multiscale_metadata(
    name: str | None,
    axes: Sequence[Axis],
    levels: Sequence[LevelPlan],
    kind: str | None,
    version: str,
    to_world: ArrayLike | None = None,
    metadata: Mapping[str, object] | None = None,
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


def omero_metadata(channels: Sequence[Channel], dtype: np.dtype, name: str | None) -> Omero | None:
    """The channels as written: white when uncoloured, and a window's missing min/max
    filled from the integer dtype's range (the window itself where there is none).

    A channel without a window gets the dtype's full range (0..1 for floats): the 0.4 and
    0.5 JSON schemas require ``window`` and ``color`` on every channel, and yaozarrs and
    ome-zarr-models refuse a file without them (tests/ngff/model/test_model_serialise.py)."""
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
class WriteJob:
    """One multiscale (image or labels) to write into a group: the unit of the write plan.

    :func:`~napari_ozx.ngff.write.hierarchy.create_hierarchy` makes one per multiscale with
    its zarr arrays created (metadata only); a writer then stores every region of every
    level, level by level (level *n* may read what level *n-1* wrote): the regions of a
    level are its shards, or :func:`write_step` blocks of whole chunks when unsharded
    (:func:`write_regions`); a level is copied from :meth:`source` when it has one, else
    computed from the level above: :func:`downsample2` over ``spatial_yx(axes)`` when
    ``factors`` is ``None``, else by ``factors``."""

    group_path: str
    data: ArrayData
    axes: Sequence[Axis]
    shapes: list[tuple[int, ...]]
    method: str
    arrays: list[zarr.Array] = field(default_factory=list)
    #: per level, the integer factor from the level above on every axis; ``None``: the
    #: writer's own pyramid (2x in y and x, :func:`pyramid_shapes`)
    factors: list[tuple[int, ...]] | None = None
    #: per level, the data it is copied from (a stored level), or ``None``: computed from
    #: the level above; no list: level 0 from ``data``, every other computed
    sources: list[ArrayData | None] | None = None

    def source(self, level: int) -> ArrayData | None:
        """The data level *level* is copied from, or ``None`` (computed from above)."""
        if self.sources is not None:
            return self.sources[level]
        return self.data if level == 0 else None


#: unsharded arrays are written in regions of about this many bytes (whole chunks)
WRITE_REGION_BYTES = 4 << 20


def write_step(shape: Sequence[int], chunks: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The region one write task covers for an unsharded array: whole chunks, grown in
    y and x to ~:data:`WRITE_REGION_BYTES`.

    Why: one task per chunk made a 0.4 directory of 64x64 chunks cost a thread hop, a
    zarr ``__setitem__`` (event-loop round trip) and, for a lazy source, a dask compute
    *per chunk* (ten times slower than sharded). A region of many chunks is one
    ``__setitem__`` that zarr fans out concurrently, and one source compute. Chunks stay
    whole, so none is written twice or read back.
    """
    step = [min(c, s) if s else c for c, s in zip(chunks, shape, strict=True)]
    nbytes = int(np.prod(step)) * itemsize
    grew = True
    while grew and nbytes < WRITE_REGION_BYTES:
        grew = False
        for ax in (len(step) - 1, len(step) - 2):
            if ax >= 0 and step[ax] < shape[ax] and nbytes < WRITE_REGION_BYTES:
                step[ax] *= 2
                nbytes *= 2
                grew = True
    return tuple(step)


def write_regions(shape: Sequence[int], step: Sequence[int]) -> list[tuple[slice, ...]]:
    ranges = [range(0, s, st) for s, st in zip(shape, step, strict=True)]
    return [
        tuple(slice(o, min(o + st, s)) for o, st, s in zip(origin, step, shape, strict=True))
        for origin in itertools.product(*ranges)
    ]


#: writes every region of the created arrays: ``(jobs, store, partial directory or None)``
DataWriter = Callable[[list["WriteJob"], "Store", Path | None], None]


class ExtraMembers(Protocol):
    """What a write keeps beside its hierarchy, through the same store (so a directory
    and an ``.ozx`` alike, inside their atomic swap): bioformats2raw's ``OME`` group and
    XML (:mod:`.omexml`). Documents go with the hierarchy's (an ``.ozx`` gets every
    ``zarr.json`` first, RFC-9), files after every document, before the pixels."""

    def write_documents(self, store: Store, version: str) -> None:
        """Groups and attributes (the root's may be updated) for OME-Zarr *version*."""

    def write_files(self, store: Store) -> None:
        """Members that are not metadata documents, byte for byte."""
