"""The metadata of a write, created before any data: groups, arrays, ``multiscales``,
``omero``, ``labels``, ``image-label``, a scene's or a plate's root.

So an ``.ozx`` gets every ``zarr.json`` as its first entries (RFC-9) and zarr never
rewrites one. :func:`create_hierarchy` returns the write plan: one
:class:`~napari_ozx.ngff.write.plan.WriteJob` per multiscale, its arrays created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.metadata import (
    INTRINSIC,
    Axis,
    CoordinateSystem,
    ImageLabel,
    NodeMetadata,
    Omero,
    Scene,
    zarr_format_for,
)
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.plan import (
    LevelPlan,
    WriteJob,
    array_kwargs,
    chunk_and_shard,
    labels_like,
    level_factors,
    level_method,
    multiscale_metadata,
    omero_metadata,
    plan_levels,
)
from napari_ozx.ngff.write.specs import (
    ArrayData,
    ImageSpec,
    LabelsSpec,
    PlateWriteSpec,
    SceneSpec,
    StoredPyramid,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from zarr.abc.store import Store

__all__ = ["create_hierarchy"]


def create_hierarchy(
    store: Store,
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
    labels: Sequence[LabelsSpec],
    opts: WriteOptions,
) -> list[WriteJob]:
    """Create every group and array of a write of *image* (or of the one standalone label
    image in *labels* when *image* is ``None``) in *store*; return the write plan."""
    builder = _Hierarchy(store, opts)
    if isinstance(image, SceneSpec):
        builder.add_scene(image)
    elif isinstance(image, PlateWriteSpec):
        builder.add_plate(image)
    elif image is not None:
        builder.add_image("", image, image.to_world)
    else:
        (lab,) = labels
        builder.add_multiscale(
            _Multiscale("", lab.data, lab.axes, lab.scale, lab.translation, lab.name),
            level_method(opts, labels=True),
            image_label=_image_label(lab, None),
            to_world=lab.to_world,
            pyramid=lab.pyramid,
        )
    return builder.jobs


@dataclass(frozen=True)
class _Multiscale:
    """One multiscale to create: its group path, level-0 data, axes and place."""

    path: str
    data: ArrayData
    axes: Sequence[Axis]
    scale: Sequence[float] | None
    translation: Sequence[float] | None
    name: str | None


def _image_label(lab: LabelsSpec, source: str | None) -> ImageLabel:
    return ImageLabel(
        tuple(lab.colors), tuple(dict(p) for p in lab.properties), source_image=source
    )


@dataclass
class _Hierarchy:
    """Creates the groups and arrays of one write in *store*, collecting the jobs."""

    store: Store
    opts: WriteOptions
    jobs: list[WriteJob] = field(default_factory=list)

    @property
    def zarr_format(self) -> Literal[2, 3]:
        return zarr_format_for(self.opts.version)

    def group(self, path: str, node: NodeMetadata | None, overwrite: bool) -> object:
        import zarr

        attrs = node.to_attributes(self.opts.version) if node is not None else None
        return zarr.create_group(
            store=self.store,
            path=path,
            zarr_format=self.zarr_format,
            attributes=attrs,
            overwrite=overwrite,
        )

    def add_multiscale(
        self,
        m: _Multiscale,
        method: str,
        omero: Omero | None = None,
        image_label: ImageLabel | None = None,
        to_world: ArrayLike | None = None,
        pyramid: StoredPyramid | None = None,
        like: list[LevelPlan] | None = None,
    ) -> list[LevelPlan]:
        """The group of one multiscale and its level arrays; its job joins the plan."""
        import zarr

        opts = self.opts
        if len(m.axes) != m.data.ndim:
            raise OzxError(
                f"{m.name or m.path or 'image'}: {m.data.ndim}-D data but {len(m.axes)} axes"
            )
        levels = like or plan_levels(
            m.data, m.axes, m.scale, m.translation, method, opts, pyramid, m.name or m.path
        )
        kept = pyramid is not None and not opts.rebuild_pyramid
        ms = multiscale_metadata(
            m.name,
            m.axes,
            levels,
            pyramid.type if kept and pyramid is not None else method,
            opts.version,
            to_world,
            pyramid.metadata if kept and pyramid is not None else None,
        )
        node = NodeMetadata(multiscales=(ms,), omero=omero, image_label=image_label)
        # never overwrite=True at the root: zarr then deletes the store's directory (our
        # locked partial) and makes a new one, unlocked, which a concurrent save's
        # stale-partial sweep may remove (the concurrent-saves test failed so under load)
        grp = zarr.create_group(
            store=self.store,
            path=m.path,
            zarr_format=self.zarr_format,
            attributes=node.to_attributes(opts.version),
            overwrite=bool(m.path),
        )
        shapes = [lv.shape for lv in levels]
        job = WriteJob(m.path, m.data, m.axes, shapes, method, sources=[lv.source for lv in levels])
        if like is not None:
            job.factors = level_factors(shapes)
        dtype = np.dtype(m.data.dtype)
        for lv in levels:
            chunks, shards = chunk_and_shard(lv.shape, m.axes, opts)
            kw = array_kwargs(chunks, shards, dtype, m.axes, opts)
            job.arrays.append(grp.create_array(lv.path, shape=lv.shape, dtype=dtype, **kw))
        self.jobs.append(job)
        return levels

    def add_image(self, prefix: str, image: ImageSpec, to_world: ArrayLike | None) -> None:
        """An image at *prefix* and its label images under ``labels/``."""
        opts = self.opts
        om = omero_metadata(image.channels, np.dtype(image.data.dtype), image.name)
        image_levels = self.add_multiscale(
            _Multiscale(prefix, image.data, image.axes, image.scale, image.translation, image.name),
            level_method(opts, labels=False),
            om,
            to_world=to_world,
            pyramid=image.pyramid,
        )
        if not image.labels:
            return
        names = [lab.name for lab in image.labels]
        if len(set(names)) != len(names) or any(not n or "/" in n for n in names):
            raise OzxError(f"label names must be unique and contain no '/': {names}")
        self.group(f"{prefix}/labels".lstrip("/"), NodeMetadata(labels=tuple(names)), True)
        for lab in image.labels:
            self.add_multiscale(
                _Multiscale(
                    f"{prefix}/labels/{lab.name}".lstrip("/"),
                    lab.data,
                    lab.axes,
                    lab.scale,
                    lab.translation,
                    lab.name,
                ),
                level_method(opts, labels=True),
                image_label=_image_label(lab, "../../"),
                to_world=lab.to_world if to_world is not None else None,
                pyramid=lab.pyramid,
                like=labels_like(lab, image, image_levels, opts),
            )

    def add_scene(self, scene: SceneSpec) -> None:
        """A scene: each image in a group of its own, placed in the scene's "world" by
        the scene's transformations (the simplest equivalent of each layer's place)."""
        from napari_ozx.ngff.model.transforms import Identity, SystemRef, simplest

        transformations = []
        for path, im in zip(scene.paths, scene.images, strict=True):
            m = im.to_world
            t = simplest(np.asarray(m, float)) if m is not None else Identity(ndim=len(im.axes))
            transformations.append(
                replace(t, input=SystemRef(INTRINSIC, path), output=SystemRef(scene.system))
            )
        axes = tuple(scene.system_axes or scene.images[0].axes)
        meta = Scene(tuple(transformations), (CoordinateSystem(scene.system, axes),))
        # the root first (see add_multiscale on overwrite at the root)
        self.group("", NodeMetadata(scene=meta), False)
        for path, im in zip(scene.paths, scene.images, strict=True):
            self.add_image(path, im, None)

    def add_plate(self, plate: PlateWriteSpec) -> None:
        """A plate: the plate group, its row and well groups, every field an image."""
        version = self.opts.version
        self.group("", NodeMetadata(plate=replace(plate.plate, version=version)), False)
        for row in sorted({w.split("/")[0] for w in plate.wells}):
            self.group(row, None, True)
        for wpath, well in plate.wells.items():
            self.group(wpath, NodeMetadata(well=replace(well, version=version)), True)
        for fpath, im in plate.fields.items():
            self.add_image(fpath, im, im.to_world)
