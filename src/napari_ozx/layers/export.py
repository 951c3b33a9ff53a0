"""Export without Qt, for the export panel and File > Save: plans, layout estimates,
remembered options, and the export itself.

:func:`estimate_export` says what the writer will produce for a
:class:`~napari_ozx.ngff.write.options.WriteOptions` and the arrays to write: per level the
chunk and shard shapes, chunks per shard, one shard's size, and the number of entries or
files (exact without all-fill-value shards, an upper bound otherwise), from the writer's
own layout rules. :func:`load_options` / :func:`save_options` keep the options between
sessions as JSON in the user's config directory (``NAPARI_OZX_CONFIG_DIR``); File > Save
uses them too. :func:`export_layers` writes napari layer data as File > Save does, with
progress and cancel (the panel runs it in a worker); :func:`export_layers_summary` also
says what it wrote. Nothing here imports napari or Qt.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.layers.writing import (
    FullLayerData,
    layer_axes,
    specs_from_layers,
    write_layer_data,
)
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.options import (
    CODECS,
    DOWNSAMPLE,
    OZX_VERSION,
    VERSIONS,
    level_range,
    versions_for_format,
)
from napari_ozx.ngff.write.specs import Progress, SceneSpec, StoredPyramid, WriteSummary
from napari_ozx.ngff.write.writer import WriteOptions, chunk_and_shard, plan_levels
from napari_ozx.ozx.rfc9 import ARCHIVE_SUFFIXES

logger = logging.getLogger(__name__)

__all__ = [
    "CODECS",
    "CONFIG_ENV",
    "DOWNSAMPLE",
    "VERSIONS",
    "ArrayPlan",
    "ExportEstimate",
    "LevelEstimate",
    "MultiscaleEstimate",
    "constrain",
    "estimate_export",
    "estimate_multiscale",
    "export_layers",
    "export_layers_summary",
    "level_range",
    "load_options",
    "options_from_dict",
    "options_path",
    "options_to_dict",
    "plans_from_layer_data",
    "retarget",
    "save_options",
]

CONFIG_ENV = "NAPARI_OZX_CONFIG_DIR"
_OPTIONS_FILE = "export_options.json"


# ------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class ArrayPlan:
    """One multiscale the writer will create (the image, or one label image)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    axes: tuple[Axis, ...]
    is_labels: bool = False
    #: the pyramid an opened multiscale layer has as stored (written as it is)
    pyramid: StoredPyramid | None = None


def _default_axes(ndim: int) -> tuple[Axis, ...]:
    return tuple(layer_axes(None, None, ndim, False))


def plans_from_layer_data(layers: Sequence[FullLayerData]) -> list[ArrayPlan]:
    """What saving *layers* writes: one image (image layers become its channels) plus one
    label image per labels layer. Raises :class:`OzxError` where saving would."""
    _refuse(layers)
    image, labels = specs_from_layers(layers)
    plans = []
    images = image.images if isinstance(image, SceneSpec) else [image] if image else []
    for im in images:
        plans.append(
            ArrayPlan(
                im.name or "image",
                tuple(im.data.shape),
                np.dtype(im.data.dtype),
                tuple(im.axes),
                pyramid=im.pyramid,
            )
        )
        if isinstance(image, SceneSpec):
            labels = [*labels, *im.labels]
    for lab in labels:
        plans.append(
            ArrayPlan(
                lab.name,
                tuple(lab.data.shape),
                np.dtype(lab.data.dtype),
                tuple(lab.axes),
                True,
                lab.pyramid,
            )
        )
    return plans


def _refuse(layers: Sequence[FullLayerData]) -> None:
    """The panel's own refusals, before File > Save's (:func:`.writing.specs_from_layers`)."""
    images = [lyr for lyr in layers if lyr[2] == "image"]
    labels = [lyr for lyr in layers if lyr[2] == "labels"]
    if not images and not labels and len(layers) == len(images) + len(labels):
        raise OzxError("choose at least one image or labels layer")
    if not images and len(labels) > 1:
        raise OzxError("several label layers need an image to belong to (or save them one by one)")


# --------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class LevelEstimate:
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    shard_shape: tuple[int, ...] | None
    itemsize: int

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The unit written as one entry / file: a shard, or a chunk without sharding."""
        return self.shard_shape or self.chunk_shape

    @property
    def chunks_per_shard(self) -> int:
        if self.shard_shape is None:
            return 1
        return math.prod(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))

    @property
    def shard_bytes(self) -> int:
        """Uncompressed bytes of one shard (of one chunk when not sharded)."""
        return math.prod(self.stored_shape) * self.itemsize

    @property
    def objects(self) -> int:
        """Entries / files holding data (at most: empty shards are not stored)."""
        return math.prod(
            math.ceil(s / u) for s, u in zip(self.shape, self.stored_shape, strict=True)
        )

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize


@dataclass(frozen=True)
class MultiscaleEstimate:
    plan: ArrayPlan
    levels: tuple[LevelEstimate, ...]

    @property
    def data_entries(self) -> int:
        return sum(lv.objects for lv in self.levels)

    @property
    def nbytes(self) -> int:
        return sum(lv.nbytes for lv in self.levels)


@dataclass(frozen=True)
class ExportEstimate:
    format: str  # "ozx" | "directory"
    version: str
    multiscales: tuple[MultiscaleEstimate, ...]
    metadata_entries: int

    @property
    def data_entries(self) -> int:
        return sum(m.data_entries for m in self.multiscales)

    @property
    def entries(self) -> int:
        """Entries of the ``.ozx`` (files of the directory), metadata included."""
        return self.data_entries + self.metadata_entries

    @property
    def first(self) -> LevelEstimate | None:
        return self.multiscales[0].levels[0] if self.multiscales else None

    @property
    def shard_bytes(self) -> int:
        """The largest shard (uncompressed) of any array."""
        return max((lv.shard_bytes for m in self.multiscales for lv in m.levels), default=0)

    @property
    def chunks_per_shard(self) -> int:
        first = self.first
        return first.chunks_per_shard if first is not None else 0

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in self.multiscales)

    @property
    def levels(self) -> int:
        return len(self.multiscales[0].levels) if self.multiscales else 0

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) lines for a panel."""
        from napari_ozx.inspection import format_bytes

        first = self.first
        if first is None:
            return []
        what = "entries" if self.format == "ozx" else "files"
        shard = "shard" if first.shard_shape else "chunk"
        rows = [
            ("Chunk shape", " × ".join(map(str, first.chunk_shape))),
            (
                "Shard shape",
                " × ".join(map(str, first.shard_shape))
                if first.shard_shape
                else "no sharding (0.4)",
            ),
            ("Chunks per shard", f"{self.chunks_per_shard:,}"),
            (f"{shard.capitalize()} size", f"{first.shard_bytes / 2**20:.2f} MiB uncompressed"),
            (what.capitalize(), f"{self.entries:,} ({self.metadata_entries} metadata)"),
            ("Pyramid levels", str(self.levels)),
            ("Data", f"{format_bytes(self.nbytes)} uncompressed, all levels"),
        ]
        return rows


def estimate_multiscale(options: WriteOptions, plan: ArrayPlan) -> MultiscaleEstimate:
    """Level shapes, chunk and shard layout the writer uses for *plan* under *options*."""
    axes = plan.axes or _default_axes(len(plan.shape))
    if len(axes) != len(plan.shape):
        raise OzxError(f"{plan.name}: {len(plan.shape)}-D data but {len(axes)} axes")
    itemsize = np.dtype(plan.dtype).itemsize
    levels = []
    # a read-only view of one element: level 0's shape and dtype, no memory, no data
    level0 = np.broadcast_to(np.zeros((), plan.dtype), plan.shape)
    for lv in plan_levels(level0, axes, None, None, "mean", options, plan.pyramid, plan.name):
        shp = lv.shape
        chunks, shards = chunk_and_shard(shp, axes, options)
        levels.append(
            LevelEstimate(tuple(shp), tuple(chunks), tuple(shards) if shards else None, itemsize)
        )
    return MultiscaleEstimate(plan, tuple(levels))


def estimate_export(
    options: WriteOptions, plans: Sequence[ArrayPlan], target: str | os.PathLike[str] | None = None
) -> ExportEstimate:
    """What writing *plans* (from :func:`plans_from_layer_data`) with *options* produces."""
    fmt = options.resolved_format(target or "export.ozx")
    ms = tuple(estimate_multiscale(options, p) for p in plans)
    image = [m for m in ms if not m.plan.is_labels]
    labels = [m for m in ms if m.plan.is_labels]
    groups = len(ms) + (1 if image and labels else 0)  # each multiscale + the labels/ group
    arrays = sum(len(m.levels) for m in ms)
    per_group, per_array = (
        (1, 1) if options.version != "0.4" else (2, 2)
    )  # zarr.json | .zgroup+.zattrs, .zarray+.zattrs
    return ExportEstimate(fmt, options.version, ms, groups * per_group + arrays * per_array)


# ------------------------------------------------------------------ valid choices


def constrain(options: WriteOptions) -> WriteOptions:
    """The nearest valid combination: a version the format can hold (RFC-9: an .ozx holds
    0.5 only), a level within the codec's range (ranges from
    :mod:`napari_ozx.ngff.write.options`)."""
    fmt = options.format if options.format != "auto" else "ozx"
    allowed = versions_for_format(fmt)
    if options.version not in allowed:
        options = dataclasses.replace(options, version=cast(Any, OZX_VERSION))
    rng = level_range(options.codec)
    if rng is not None and not rng[0] <= options.level <= rng[1]:
        options = dataclasses.replace(options, level=min(max(options.level, rng[0]), rng[1]))
    return options


def retarget(path: str, fmt: str) -> str:
    """*path* with the suffix of *fmt*: ``x.ozx`` <-> ``x.ome.zarr`` (empty stays empty)."""
    if not path:
        return path
    low = path.lower()
    stem = path
    for suf in (".ome.zarr", ".zarr", *ARCHIVE_SUFFIXES):
        if low.endswith(suf):
            stem = path[: -len(suf)]
            break
    if fmt == "ozx":
        return stem + ".ozx"
    return stem + (".ome.zarr" if not low.endswith(".zarr") else path[len(stem) :])


# ------------------------------------------------------------------- persistence


def config_dir() -> Path:
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_config_dir("napari-ozx", appauthor=False))


def options_path() -> Path:
    """Where the remembered export options live."""
    return config_dir() / _OPTIONS_FILE


def options_to_dict(options: WriteOptions) -> dict[str, Any]:
    return options.to_dict()


def options_from_dict(data: object) -> WriteOptions:
    """Tolerant loading (:meth:`WriteOptions.from_dict`): a damaged file never blocks saving."""
    return WriteOptions.from_dict(data)


def save_options(options: WriteOptions, path: str | os.PathLike[str] | None = None) -> Path:
    """Remember *options* (atomically replaces the JSON file)."""
    p = Path(path) if path is not None else options_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(options_to_dict(options), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def load_options(
    target: str | os.PathLike[str] | None = None, path: str | os.PathLike[str] | None = None
) -> WriteOptions:
    """The remembered options (defaults when none were saved or the file is unreadable).

    With a *target* (File > Save), the file name decides the format (``format="auto"``),
    and an ``.ozx`` target always gets version 0.5.
    """
    p = Path(path) if path is not None else options_path()
    opts = WriteOptions()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except OSError as e:
        logger.warning("cannot read remembered export options %s: %s", p, e)
        text = None
    if text is not None:
        try:
            opts = options_from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            logger.warning(
                "remembered export options %s are not valid JSON (%s); using the defaults", p, e
            )
    if target is not None:
        opts = opts.for_target(target)
    return opts


# ------------------------------------------------------------------------- export


def export_layers(
    target: str | os.PathLike[str],
    layers: Sequence[FullLayerData],
    options: WriteOptions,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Write napari layer data as File > Save does, reporting progress, cancellable.

    Raises :class:`~napari_ozx.ngff.write.writer.WriteCancelled` when *cancel* is set; nothing is
    then left at *target* (its previous content, if any, is untouched).
    """
    return export_layers_summary(target, layers, options, progress, cancel).target


def export_layers_summary(
    target: str | os.PathLike[str],
    layers: Sequence[FullLayerData],
    options: WriteOptions,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> WriteSummary:
    """:func:`export_layers`, returning what was written (the version ``"auto"`` chose,
    the images and labels)."""
    _refuse(layers)
    return write_layer_data(target, layers, options, progress, cancel)
