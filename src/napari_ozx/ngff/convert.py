"""Turn an opened image back into a write spec: the heart of ``napari-ozx convert``.

Directory <-> ``.ozx``, 0.4 -> 0.5, rechunk / reshard / recompress: the source's level 0
stays lazy (dask) and the writer streams it shard by shard, rebuilding the pyramid.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import OzxError
from .open import Image, open_ome_zarr
from .write import ImageSpec, LabelsSpec, Progress, WriteOptions, write_ome_zarr

__all__ = ["convert", "image_spec", "labels_spec"]


def labels_spec(label: Image) -> LabelsSpec:
    ds = label.multiscale.datasets[0]
    il = label.meta.image_label
    return LabelsSpec(
        name=label.name,
        data=label.levels[0],
        axes=list(label.multiscale.axes),
        scale=list(ds.scale),
        translation=list(ds.translation),
        colors=list(il.colors) if il else [],
        properties=[dict(p) for p in il.properties] if il else [],
    )


def image_spec(image: Image, with_labels: bool = True) -> ImageSpec:
    ds = image.multiscale.datasets[0]
    omero = image.meta.omero
    channels = list(omero.channels) if omero else []
    c = image.multiscale.channel_axis
    n = image.levels[0].shape[c] if c is not None else 1
    return ImageSpec(
        data=image.levels[0],
        axes=list(image.multiscale.axes),
        scale=list(ds.scale),
        translation=list(ds.translation),
        channels=channels if len(channels) == n else [],
        name=image.multiscale.name or (omero.name if omero else None),
        labels=[labels_spec(lab) for lab in image.labels] if with_labels else [],
    )


def convert(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    compute: Callable[[Any], Any] | None = None,
    client: Any = None,
) -> Path:
    """Rewrite the image (with its labels) at *source* to *target* with *options*.

    *client*: a ``distributed.Client``; its workers then read the source, build the
    pyramid and encode every shard (writing them themselves for a directory target on a
    shared file system), see :mod:`.cluster`. Without one, *compute* says how a lazy
    region of the source is evaluated (see ``write_ome_zarr``)."""
    if Path(source).resolve() == Path(target).resolve() and Path(source).is_dir():
        raise OzxError("converting a directory onto itself is not supported: choose another target")
    with open_ome_zarr(source) as oz:
        images = oz.images()
        if len(images) != 1:
            raise OzxError(
                f"{source}: holds {len(images)} images; convert writes one image per target"
            )
        (image,) = images
        if image.meta.image_label is not None:
            image_arg, labels = None, [labels_spec(image)]
        else:
            image_arg, labels = image_spec(image), []
        if client is not None:
            from .cluster import write_ome_zarr_on_cluster

            return write_ome_zarr_on_cluster(
                target,
                image_arg,
                labels,
                options,
                progress,
                cancel,
                client=client,
                source_name=str(source),
            )
        return write_ome_zarr(
            target,
            image_arg,
            labels,
            options=options,
            progress=progress,
            cancel=cancel,
            compute=compute,
        )
