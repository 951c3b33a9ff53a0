"""Turn an opened image back into a write spec: the heart of ``napari-ozx convert``.

:func:`convert` (and :func:`convert_summary`): directory <-> ``.ozx``, 0.4 -> 0.5 / 0.6,
rechunk / reshard / recompress, every level lazy and streamed shard by shard. A pyramid is
data: each stored level keeps its pixels, scale and translation (0.6: transformations),
array path and the multiscale's ``type`` / ``metadata`` (:func:`stored_pyramid`), only
re-encoded; levels are built only when asked (``pyramid_levels``, ``rebuild_pyramid``).
Every image's ``tables/`` goes along (:mod:`napari_ozx.ngff.tables.write`).
:func:`image_spec`, :func:`plate_spec` and :func:`scene_spec` make the specs;
:func:`source_options` reads the source's layout (chunks, shards, codec, version), kept
unless told otherwise. A 0.6 source shown in another system keeps that placement.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_ozx.errors import OzxError
from napari_ozx.ngff.read.open import Image, OmeZarr, open_ome_zarr
from napari_ozx.ngff.tables.write import source_tables
from napari_ozx.ngff.write.omexml import carry_ome_xml, warn_dropped
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.specs import (
    Compute,
    ImageSpec,
    LabelsSpec,
    PlateWriteSpec,
    Progress,
    SceneSpec,
    StoredLevel,
    StoredPyramid,
    WriteSummary,
)
from napari_ozx.ngff.write.writer import summarize_write, write_ome_zarr

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "convert",
    "convert_summary",
    "image_spec",
    "labels_spec",
    "plate_spec",
    "scene_spec",
    "source_options",
    "stored_pyramid",
]


def plate_spec(oz: OmeZarr) -> PlateWriteSpec:
    """What a plate at the root of *oz* writes as: the plate and well models and every
    field's image (lazy: its level 0 is read shard by shard when written). A well or
    field that cannot be read stops the conversion, naming it (a converted plate must
    hold what its metadata lists)."""
    from napari_ozx.ngff.read.plate import HcsPlate

    plate = HcsPlate(oz)
    assert plate.plate is not None
    plate.resolve_wells()  # a large plate reads its wells as needed: all are, here
    wells: dict[str, Any] = {}
    fields: dict[str, ImageSpec] = {}
    for w in plate.wells:
        if w.error:
            raise OzxError(f"{oz.source}: well {w.path}: {w.error}")
        g = oz.group(w.path)
        assert g.meta.well is not None
        wells[w.path] = g.meta.well
        for ref, im in zip(w.fields, plate.open_fields(w), strict=True):
            if isinstance(im, OzxError):
                raise OzxError(f"{oz.source}: field {ref.path}: {im}")
            fields[ref.path] = image_spec(im)
    return PlateWriteSpec(plate.plate, wells, fields, source_tables(oz, "", "plate"))


def scene_spec(oz: OmeZarr) -> SceneSpec:
    """What a 0.6 scene at the root of *oz* writes as: each image it names (lazy, every
    stored level, its labels) placed in the scene's first coordinate system by the
    transformation the hierarchy's graph gives from its intrinsic system. An image the
    graph cannot place, or places by more than a linear map, stops the conversion,
    naming it (written elsewhere it would be misplaced)."""
    import numpy as np

    scene = oz.root.meta.scene
    assert scene is not None  # convert calls this for a scene at the root only
    images = oz.images()
    if not images:
        raise OzxError(f"{oz.source}: the scene names no image")
    if not scene.coordinate_systems:
        raise OzxError(f"{oz.source}: the scene defines no coordinate system to place images in")
    system = scene.coordinate_systems[0]
    graph = oz.transform_graph
    specs = []
    for im in images:
        ms = im.multiscale
        t = graph.path((im.path, ms.intrinsic), ("", system.name))
        m = t.matrix(ms.ndim)
        if m is None or np.asarray(m).shape != (ms.ndim + 1, ms.ndim + 1):
            raise OzxError(
                f"{oz.source}: image {im.path!r} is placed in {system.name!r} by a "
                "transformation that is not linear: convert cannot carry it over"
            )
        m = np.asarray(m, dtype=float)
        spec = image_spec(im)
        spec.to_world = None if np.allclose(m, np.eye(ms.ndim + 1)) else m
        spec.to_world_kind = t.label
        specs.append(spec)
    return SceneSpec(specs, [im.path for im in images], None, system.name, system.axes)


def _to_world(image: Image) -> tuple[Any, str]:
    """The matrix from *image*'s intrinsic system to where it is shown, when that is
    more than nothing (for the writer's ``to_world``), and what it is."""
    import numpy as np

    ms = image.multiscale
    if ms.default_system == ms.intrinsic:
        return None, ""
    t = ms.transform_to(ms.default_system)
    m = t.matrix(ms.ndim)
    if m is None or not t.is_linear or m.shape != (ms.ndim + 1, ms.ndim + 1):
        raise OzxError(
            f"{image.root.source}: the {t.label} to {ms.default_system!r} is not linear: "
            "convert cannot carry it over"
        )
    if np.allclose(m, np.eye(ms.ndim + 1)):
        return None, ""
    return m, t.label


def _codec_of(codecs: Iterable[object]) -> tuple[str, int] | None:
    """(WriteOptions codec, level) of zarr's codec objects / a numcodecs compressor."""
    for c in codecs:
        name = type(c).__name__.lower()
        inner = getattr(c, "codecs", None)
        if inner is not None and name.startswith("sharding"):
            return _codec_of(inner)
        if name.startswith("zstd"):
            return "zstd", int(getattr(c, "level", 3))
        if name.startswith("gzip"):
            return "gzip", int(getattr(c, "level", 6))
        if name.startswith("blosc"):
            cname = str(getattr(c, "cname", "lz4"))
            cname = getattr(getattr(c, "cname", None), "value", cname)
            if cname in ("lz4", "zstd"):
                return f"blosc-{cname}", int(getattr(c, "clevel", 5))
    return None


def source_options(
    source: str | os.PathLike[str], target: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The write options that keep *source*'s layout: inner chunk and shard edges in y/x,
    planes per shard, codec and level, number of pyramid levels, and its OME-Zarr version
    when *target* can hold it. Options it has no equivalent for are left out."""
    from napari_ozx.ngff.write.options import VERSIONS, WriteOptions, format_for_path

    out: dict[str, Any] = {}
    with open_ome_zarr(source) as oz:
        if oz.root.meta.kind == "plate":  # the first readable field speaks for the plate
            from napari_ozx.ngff.read.plate import HcsPlate

            plate = HcsPlate(oz)
            plate.resolve_wells([w.path for w in plate.wells[:8]])
            images = [
                im
                for w in plate.wells[:8]
                if not w.error
                for im in plate.open_fields(w, [0])
                if not isinstance(im, OzxError)
            ][:1]
        else:
            images = oz.images()
        if not images:
            return out
        image = images[0]
        node = image.arrays[0]
        arr = node.array
        axes = image.multiscale.axes
        chunks, shards = node.chunks, node.shards
        out["chunk_yx"] = int(chunks[-1])
        if shards is not None:
            out["shard_yx"] = int(shards[-1])
            z = [i for i, a in enumerate(axes) if a.name == "z" or a.type == "space"][:-2]
            if z:
                out["shard_z"] = int(shards[z[-1]])
        meta = arr.metadata
        codecs = getattr(meta, "codecs", None)
        if codecs is None:
            comp = getattr(meta, "compressor", None)
            codecs = [comp] if comp is not None else []
        found = _codec_of(codecs)
        if found is not None:
            out["codec"], out["level"] = found
        elif codecs is not None and not any(
            type(c).__name__.lower().startswith(("zstd", "gzip", "blosc")) for c in codecs
        ):
            out["codec"] = "none"
        version = image.multiscale.version
        fmt = format_for_path(target) if target is not None else "directory"
        if version in VERSIONS[fmt]:
            out["version"] = version
    # only what WriteOptions accepts (a level outside the codec's range falls back)
    try:
        WriteOptions(**out).validate(target)
    except OzxError:
        out.pop("level", None)
    return out


def stored_pyramid(image: Image) -> StoredPyramid:
    """*image*'s pyramid as stored: its lower levels (lazy), every level's scale,
    translation and path, the multiscale's ``type`` and ``metadata``."""
    ms = image.multiscale
    lower = tuple(
        StoredLevel(data, tuple(ds.scale), tuple(ds.translation), ds.path)
        for data, ds in zip(image.levels[1:], ms.datasets[1:], strict=True)
    )
    return StoredPyramid(lower, ms.datasets[0].path, ms.type, ms.metadata)


def labels_spec(label: Image) -> LabelsSpec:
    ds = label.multiscale.datasets[0]
    il = label.meta.image_label
    to_world, kind = _to_world(label)
    return LabelsSpec(
        to_world=to_world,
        to_world_kind=kind,
        name=label.name,
        data=label.levels[0],
        axes=list(label.multiscale.axes),
        scale=list(ds.scale),
        translation=list(ds.translation),
        colors=list(il.colors) if il else [],
        properties=[dict(p) for p in il.properties] if il else [],
        pyramid=stored_pyramid(label),
    )


def image_spec(image: Image, with_labels: bool = True) -> ImageSpec:
    ds = image.multiscale.datasets[0]
    omero = image.meta.omero
    channels = list(omero.channels) if omero else []
    c = image.multiscale.channel_axis
    n = image.levels[0].shape[c] if c is not None else 1
    to_world, kind = _to_world(image)
    return ImageSpec(
        to_world=to_world,
        to_world_kind=kind,
        data=image.levels[0],
        axes=list(image.multiscale.axes),
        scale=list(ds.scale),
        translation=list(ds.translation),
        channels=channels if len(channels) == n else [],
        name=image.multiscale.name or (omero.name if omero else None),
        labels=[labels_spec(lab) for lab in image.labels] if with_labels else [],
        pyramid=stored_pyramid(image),
        tables=source_tables(image.root, image.path),
    )


def convert(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    compute: Compute | None = None,
    client: Client | None = None,
) -> Path:
    """Rewrite the image (with its labels and tables), plate or scene at *source* to *target*.

    Parameters
    ----------
    source : str or os.PathLike
        An OME-Zarr directory, ``.ozx`` file or URL that :func:`open_ome_zarr` opens.
    target : str or os.PathLike
        The ``.ozx`` file or directory to write; an existing one is replaced atomically.
    options : WriteOptions, optional
        The layout to write (default: :func:`source_options`, the source's own layout and
        version).
    progress : callable, optional
        Called as ``progress(shards_done, shards_total)``.
    cancel : threading.Event, optional
        Set it to stop the write; *target* is then untouched.
    compute : callable, optional
        How a lazy region of the source is evaluated, as for :func:`write_ome_zarr`.
    client : distributed.Client, optional
        A dask.distributed client: its workers then read the source, build the pyramid and
        encode every shard (writing them themselves for a directory target on a shared file
        system), see :mod:`.cluster`.

    Returns
    -------
    pathlib.Path
        *target*, now holding the converted hierarchy.

    Raises
    ------
    WriteCancelled, InvalidOptionError
        As for :func:`write_ome_zarr`.
    OzxError
        The source cannot be read or written as asked, naming it and the reason.
    """
    return convert_summary(source, target, options, progress, cancel, compute, client).target


def convert_summary(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    compute: Compute | None = None,
    client: Client | None = None,
) -> WriteSummary:
    """:func:`convert`, returning what was written (the version, the images and labels:
    the line ``napari-ozx convert`` prints)."""
    if Path(source).resolve() == Path(target).resolve() and Path(source).is_dir():
        raise OzxError("converting a directory onto itself is not supported: choose another target")
    if options is None:
        options = WriteOptions(**source_options(source, target))
    with open_ome_zarr(source) as oz:
        kind = "scene" if oz.root.meta.scene is not None else oz.root.meta.kind
        if kind in ("scene", "plate"):
            if client is not None:
                raise OzxError(f"converting a {kind} on a dask cluster is not supported yet")
            whole = scene_spec(oz) if kind == "scene" else plate_spec(oz)
            extra, note = carry_ome_xml(oz, kind, target)
            out = write_ome_zarr(
                target,
                whole,
                (),
                options=options,
                progress=progress,
                cancel=cancel,
                compute=compute,
                extra=extra,
            )
            return _with_note(summarize_write(out, whole, (), options), note)
        images = oz.images()
        if len(images) != 1:
            raise OzxError(
                f"{source}: holds {len(images)} images; convert writes one image per target"
            )
        (image,) = images
        _, note = carry_ome_xml(oz, kind, target)  # one image at the root: not the collection
        if image.meta.image_label is not None:
            image_arg, labels = None, [labels_spec(image)]
        else:
            image_arg, labels = image_spec(image), []
        if client is not None:
            from napari_ozx.ngff.write.cluster import write_ome_zarr_on_cluster

            out = write_ome_zarr_on_cluster(
                target,
                image_arg,
                labels,
                options,
                progress,
                cancel,
                client=client,
                source_name=str(source),
            )
        else:
            out = write_ome_zarr(
                target,
                image_arg,
                labels,
                options=options,
                progress=progress,
                cancel=cancel,
                compute=compute,
            )
        return _with_note(summarize_write(out, image_arg, labels, options), note)


def _with_note(summary: WriteSummary, note: str | None) -> WriteSummary:
    """*summary* with the note of bioformats2raw's OME-XML not kept (:mod:`.omexml`),
    warned once now that the write is done."""
    from dataclasses import replace

    if note is None:
        return summary
    warn_dropped(summary.target, note)
    return replace(summary, notes=(*summary.notes, note))
