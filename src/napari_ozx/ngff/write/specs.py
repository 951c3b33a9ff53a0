"""What a write stores: the specs of images, label images, scenes and plates, their stored
pyramids, the summary of a write and the errors it raises.

Shared by the local writer (:mod:`.writer`), the cluster writer (:mod:`.cluster`) and
``convert`` (:mod:`.convert`); :mod:`.writer` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.metadata import Axis, Channel, LabelColor, Plate, Well
from napari_ozx.ngff.model.versions import version_key

if TYPE_CHECKING:
    import dask.array as da
    import zarr
    from numpy.typing import ArrayLike

    from napari_ozx.ngff.read.lazy import LevelArray
    from napari_ozx.ngff.tables.write import SourceTables

__all__ = [
    "WORLD",
    "ArrayData",
    "Compute",
    "ImageSpec",
    "LabelsSpec",
    "PlateWriteSpec",
    "Progress",
    "SaveError",
    "SceneSpec",
    "StoredLevel",
    "StoredPyramid",
    "WriteCancelled",
    "WriteSummary",
    "all_specs",
    "check_version_holds",
    "needed_by",
    "needed_version",
    "table_sources",
]

#: the pixels a write reads, one region at a time: numpy, dask, a zarr array or a level
#: read lazily (:class:`~napari_ozx.ngff.read.lazy.LevelArray`)
ArrayData: TypeAlias = "np.ndarray | da.Array | zarr.Array | LevelArray"

Progress = Callable[[int, int], None]  # (shards done, shards total)

#: evaluates one region of a lazy source (a dask collection) to its pixels, e.g. a
#: dask.distributed client's ``lambda x: client.compute(x).result()``
Compute = Callable[[object], object]


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

    data: ArrayData
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
    metadata: Mapping[str, object] | None = None

    @property
    def count(self) -> int:
        return 1 + len(self.lower)


@dataclass
class LabelsSpec:
    """A label image to write (under an image's ``labels/``, or on its own).

    Parameters
    ----------
    name : str
        Its name under ``labels/``.
    data : numpy.ndarray, dask.array.Array, zarr.Array or LevelArray
        Level 0, integers, with the axes *axes*.
    axes : sequence of Axis
        One per dimension of *data*.
    scale, translation : sequence of float, optional
        Level 0's pixel size and offset per axis (default: 1 and 0).
    colors : sequence of LabelColor, default ()
        ``image-label`` colours by label value.
    properties : sequence of dict, default ()
        ``image-label`` properties by label value.
    to_world : array_like, optional
        Homogeneous matrix (over *axes*) from the intrinsic system (level 0 scaled and
        translated) to where the labels are shown (written as 0.6); None: the intrinsic
        system.
    to_world_kind : str, default ""
        What *to_world* is, for messages ("rotation", "shear or affine").
    pyramid : StoredPyramid, optional
        The pyramid the labels have as stored (None: built from *data*).
    """

    name: str
    data: ArrayData  # integer array (numpy or dask), same axes as ``axes``
    axes: Sequence[Axis]
    scale: Sequence[float] | None = None
    translation: Sequence[float] | None = None
    colors: Sequence[LabelColor] = ()
    properties: Sequence[dict[str, Any]] = ()
    #: homogeneous matrix (over ``axes``) from the intrinsic system (level 0 scaled and
    #: translated) to where the labels are shown; ``None``: the intrinsic system
    to_world: ArrayLike | None = None
    #: what ``to_world`` is, for messages ("rotation", "shear or affine")
    to_world_kind: str = ""
    #: the pyramid the labels have as stored (``None``: built from ``data``)
    pyramid: StoredPyramid | None = None


@dataclass
class ImageSpec:
    """An image to write: its level-0 data, axes, placement, channels and label images.

    Parameters
    ----------
    data : numpy.ndarray, dask.array.Array, zarr.Array or LevelArray
        Level 0; a lazy array is written shard by shard.
    axes : sequence of Axis
        One per dimension of *data*.
    scale, translation : sequence of float, optional
        Level 0's pixel size and offset per axis (default: 1 and 0).
    channels : sequence of Channel, default ()
        ``omero`` channel names, colours and windows.
    name : str, optional
        The multiscale's name.
    labels : sequence of LabelsSpec, default []
        Label images written under the image's ``labels/``.
    to_world : array_like, optional
        As :attr:`LabelsSpec.to_world`.
    to_world_kind : str, default ""
        As :attr:`LabelsSpec.to_world_kind`.
    pyramid : StoredPyramid, optional
        As :attr:`LabelsSpec.pyramid`.
    tables : SourceTables, optional
        The source image's ``tables/`` group, carried into the write (``convert``; see
        :mod:`napari_ozx.ngff.tables.write`); None: no tables.
    """

    data: ArrayData  # numpy or dask array
    axes: Sequence[Axis]
    scale: Sequence[float] | None = None
    translation: Sequence[float] | None = None
    channels: Sequence[Channel] = ()
    name: str | None = None
    labels: Sequence[LabelsSpec] = field(default_factory=list)
    to_world: ArrayLike | None = None  # as LabelsSpec.to_world
    to_world_kind: str = ""
    pyramid: StoredPyramid | None = None  # as LabelsSpec.pyramid
    #: the source image's ``tables/`` group, carried into the write (``convert``; see
    #: :mod:`napari_ozx.ngff.tables.write`); ``None``: no tables
    tables: SourceTables | None = None


#: the name of the coordinate system a napari layer's world becomes
WORLD = "world"


@dataclass
class PlateWriteSpec:
    """An HCS plate to write: the plate model, each well's model (by well path) and each
    field's image (by field path, relative to the plate)."""

    plate: Plate
    wells: dict[str, Well]  # well path -> its model
    fields: dict[str, ImageSpec]
    #: the plate's own ``tables/`` group (e.g. condition tables), carried as an image's
    tables: SourceTables | None = None

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


def all_specs(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None, labels: Sequence[LabelsSpec]
) -> list[ImageSpec | LabelsSpec]:
    """Every image and label image a write of *image* and *labels* stores."""
    specs: list[ImageSpec | LabelsSpec] = [*labels]
    if isinstance(image, SceneSpec | PlateWriteSpec):
        specs += [*image.images, *image.labels]
    elif image is not None:
        specs += [image, *image.labels]
    return specs


def needed_by(
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


def table_sources(
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
) -> list[tuple[str, SourceTables]]:
    """(path in the target, :class:`~napari_ozx.ngff.tables.write.SourceTables`) of every
    ``tables/`` group a write carries: each image's, and a plate's own."""
    out: list[tuple[str, SourceTables]] = []
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


def check_version_holds(specs: Sequence[ImageSpec | LabelsSpec], version: str) -> None:
    for s in specs:
        if s.to_world is not None and version_key(version) < (0, 6):
            raise OzxError(
                f"OME-Zarr {version} cannot store the {s.to_world_kind or 'affine'} "
                f"transformation of {s.name or 'the image'!r} (only scale and translation): "
                f"save as OME-Zarr 0.6 (or version auto) to keep it"
            )
