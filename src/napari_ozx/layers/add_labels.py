"""Save a *new* labels layer into the OME-Zarr image it was drawn over, under ``labels/``.

:func:`add_labels_to_image` writes napari's "New labels" (or any integer layer of the
image's level-0 shape) as ``<image>/labels/<name>``: the image's pyramid, chunks and
shards, ``image-label`` with the layer's colours, the file's OME version and Zarr format,
its name appended to the ``labels`` group. One
:class:`~napari_ozx.layers.transaction.EditTransaction` commits the new arrays (levels
streamed at commit) and the group document, nothing else rewritten; an ``.ozx`` is rebuilt
beside itself and its readers follow it. The layer then reads the saved labels
copy-on-write and saves later edits with :func:`~napari_ozx.layers.saveback.save_labels_back`.
Refused with one :class:`~napari_ozx.layers.transaction.SaveBackError`, nothing written: an
existing name, a wrong shape, a non-integer layer, a read-only target, a remote source, a
labels group changed since it was read.

How each commit stays atomic: ``docs/design/saving.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import numpy as np

from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.transaction import SaveBackError, check_node_name, group_transaction, refusal
from napari_ozx.ngff.model.versions import version_key
from napari_ozx.ngff.read.documents import join_path

if TYPE_CHECKING:
    from napari.layers import Layer

    from napari_ozx.layers.transaction import EditTransaction
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.read.open import GroupNode, OmeZarr
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.write.specs import ArrayData
    from napari_ozx.ngff.write.writer import LabelLevel, LabelsSpec

logger = logging.getLogger(__name__)

__all__ = ["add_labels_to_image", "image_source_of"]

_T = TypeVar("_T")


def image_source_of(image: Layer | LayerSource | str | os.PathLike[str]) -> LayerSource | None:
    """The image *image* names: a napari layer opened by napari-ozx, a
    :class:`LayerSource`, or a path (its root image)."""
    if isinstance(image, LayerSource):
        return image
    if isinstance(image, str | os.PathLike):
        return LayerSource(source=os.fspath(image), node="", kind="image")
    return LayerSource.of(image)


def add_labels_to_image(
    labels_layer: Layer,
    image: Layer | LayerSource | str | os.PathLike[str],
    name: str | None = None,
) -> Path:
    """Write *labels_layer* into the file of *image* as ``labels/<name>`` (see the module).

    Parameters
    ----------
    labels_layer : napari.layers.Layer
        An integer layer (napari's "New labels") with the image's level-0 shape, without
        its channel axis.
    image : napari.layers.Layer, LayerSource, str or os.PathLike
        The image layer opened from the file, its :class:`LayerSource`, or the file's path.
    name : str, optional
        The new label image's name (default: the layer's name, made safe for a path).

    Returns
    -------
    pathlib.Path
        The file written; the layer then reads it and saves back into it.

    Raises
    ------
    SaveBackError
        Refused, nothing written: the name exists, a wrong shape, a non-integer layer, a
        read-only target or a remote source.
    """
    lname = getattr(labels_layer, "name", None) or "labels"
    src, target = local_image_target(
        image, f"labels {lname!r}", "open it with napari-ozx, or save both with File > Save"
    )
    return _add(labels_layer, src, target, name)


def local_image_target(
    image: Layer | LayerSource | str | os.PathLike[str], what: str, hint: str
) -> tuple[LayerSource, Path]:
    """The record and the local file of the image *what* (e.g. "labels 'cells'") is to
    be saved into, or one :class:`SaveBackError` saying why not (not opened from a file,
    remote, not an image); *hint* says what to do when it was not opened from a file."""
    src = image_source_of(image)
    if src is None:
        raise SaveBackError(
            f"the image to save {what} into was not opened from an OME-Zarr file "
            f"({hint}; nothing was written)"
        )
    from napari_ozx.ozx.remote import is_url

    if is_url(src.source):
        raise SaveBackError(
            f"the image is remote (read-only here); save {what} into a local copy "
            f"instead: {src.source} (nothing was written)"
        )
    target = Path(src.source)
    if src.kind not in ("image", "well"):
        raise SaveBackError(
            f"{what} can be saved into an image, not into a {src.kind} layer: {target} "
            "(nothing was written)"
        )
    return src, target


def _level0(layer: Layer) -> ArrayData:
    data = layer.data
    if getattr(layer, "multiscale", False) or (
        isinstance(data, list | tuple) and data and hasattr(data[0], "shape")
    ):
        return cast("ArrayData", data[0])
    return cast("ArrayData", data)


def _drop(seq: Iterable[_T], axis: int | None) -> tuple[_T, ...]:
    return tuple(v for i, v in enumerate(seq) if i != axis)


def _add(layer: Layer, src: LayerSource, target: Path, name: str | None) -> Path:
    lname = getattr(layer, "name", None) or "labels"
    data = _level0(layer)
    if not np.issubdtype(np.dtype(data.dtype), np.integer):
        raise refusal(target, f"labels {lname!r} are not integers ({np.dtype(data.dtype)})")
    lpath = join_path(src.node, "labels")
    with group_transaction(target, lpath, f"saving labels {lname!r} into") as (tx, oz):
        node = _stage(tx, oz, layer, data, src, lpath, name)
        tx.commit()
        _adopt(layer, target, node)
    logger.info("saved labels %r into %s as %s", lname, target, node)
    return target


def _stage(
    tx: EditTransaction,
    oz: OmeZarr,
    layer: Layer,
    data: ArrayData,
    src: LayerSource,
    lpath: str,
    name: str | None,
) -> str:
    """Stage the new label image (its documents, its levels written at commit) and the
    labels group's document listing it; returns its node path."""
    from napari_ozx.ngff.write.options import WriteOptions
    from napari_ozx.ngff.write.writer import prepare_labels

    target = tx.target
    lname = getattr(layer, "name", None) or "labels"
    image, axes = _target_image(oz, data, src, target, lname)
    spec = _labels_spec(layer, data, axes, name, target, lname)
    name = spec.name
    zf = oz.zarr_format or 2
    version = _label_version(zf, image.multiscale.version)
    (docs,) = oz.read_docs([lpath])
    group = None if docs is None else oz.make_group(lpath, docs)
    listed = list(group.meta.labels) if group is not None else []
    node = join_path(lpath, name)
    if name in listed or tx.exists_group(node):
        raise refusal(
            target,
            f"labels {name!r} already exist in the image {src.node or '/'!r}; to change "
            "them, open them and use 'Save labels back into the file', or choose another name",
        )
    levels, separator = _label_levels(image, zf)
    prepared = prepare_labels(spec, levels, WriteOptions(version=version), separator)
    attrs = _group_attributes(group, listed, name, zf, version)
    for key, doc in prepared.documents.items():
        tx.put(join_path(node, key), doc)
    tx.put_writer(node, prepared.write_data)
    for key, doc in _group_documents(attrs, zf, existing=group is not None).items():
        tx.put(join_path(lpath, key), doc)
    return node


def _target_image(
    oz: OmeZarr, data: ArrayData, src: LayerSource, target: Path, lname: str
) -> tuple[OmeImage, tuple[Axis, ...]]:
    """The image the labels go into and its axes without the channel axis; refused when
    it is a label image or its level 0 (channel axis dropped) is not the labels' shape."""
    image = oz.image(src.node)
    if image.meta.image_label is not None:
        raise refusal(target, f"{src.node!r} is a label image; new labels go into an image")
    ms = image.multiscale
    c = ms.channel_axis
    lvl0 = tuple(image.arrays[0].shape)
    expected = _drop(lvl0, c)
    axes = _drop(ms.axes, c)
    if tuple(data.shape) != expected:
        names = ", ".join(a.name for a in axes)
        raise refusal(
            target,
            f"labels {lname!r} have shape {tuple(data.shape)}, the image "
            f"{src.node or '/'!r} has {expected} ({names}) at level 0",
        )
    return image, axes


def _labels_spec(
    layer: Layer,
    data: ArrayData,
    axes: tuple[Axis, ...],
    name: str | None,
    target: Path,
    lname: str,
) -> LabelsSpec:
    """The spec (colours, properties, a path-safe name) the writer would make of the
    layer, over *axes*, named *name* when given (refused when it is no label name)."""
    from napari_ozx.layers.writing import labels_spec_from_layer

    meta: dict[str, Any]
    if hasattr(layer, "as_layer_data_tuple"):
        _, meta, _ = layer.as_layer_data_tuple()
    else:
        meta = {"name": lname, "metadata": getattr(layer, "metadata", {})}
    meta = {**meta, "multiscale": False, "axis_labels": [a.name for a in axes], "units": None}
    spec = labels_spec_from_layer((data, meta, "labels"), set())
    spec.axes = list(axes)
    if name is not None:
        check_node_name(target, name, "label")
        spec.name = name
    spec.data = data
    return spec


def _label_version(zarr_format: int, image_version: str) -> Literal["0.6", "0.5", "0.4"]:
    """The image's own version (a hierarchy's OME-Zarr version MUST be consistent)."""
    if zarr_format == 3:
        return "0.6" if version_key(image_version) >= version_key("0.6") else "0.5"
    return "0.4"


def _label_levels(image: OmeImage, zarr_format: int) -> tuple[list[LabelLevel], Literal["/", "."]]:
    """The label image's levels laid out like *image*'s (channel axis dropped), and the
    Zarr v2 chunk key separator of its level 0."""
    from napari_ozx.ngff.write.writer import LabelLevel

    ms = image.multiscale
    c = ms.channel_axis
    levels = []
    separator: Literal["/", "."] = "/"
    for i, (arr_node, ds) in enumerate(zip(image.arrays, ms.datasets, strict=True)):
        arr = arr_node.array
        shards = arr.shards
        levels.append(
            LabelLevel(
                shape=_drop(arr.shape, c),
                chunks=_drop(arr.chunks, c),
                shards=_drop(shards, c) if shards is not None else None,
                scale=_drop(ds.scale, c),
                translation=_drop(ds.translation, c),
            )
        )
        if i == 0 and zarr_format == 2 and getattr(arr.metadata, "dimension_separator", "/") == ".":
            separator = "."
    return levels, separator


def _group_attributes(
    group: GroupNode | None,
    listed: list[str],
    name: str,
    zarr_format: int,
    version: Literal["0.6", "0.5", "0.4"],
) -> dict[str, Any]:
    """The labels group's attributes as they are, *name* appended to its list (a new
    group's when there is none)."""
    from napari_ozx.ngff.model.metadata import NodeMetadata, ome_section

    if group is None:
        return NodeMetadata(labels=(name,)).to_attributes(version)
    attrs = dict(group.attributes)
    ome, _ = ome_section(attrs, zarr_format)
    raw = ome.get("labels")
    old = [x for x in raw if isinstance(x, str)] if isinstance(raw, list) else listed
    gen = NodeMetadata(labels=(*old, name)).to_attributes(version)
    if zarr_format == 3 and isinstance(attrs.get("ome"), dict):
        attrs["ome"] = {**attrs["ome"], **gen["ome"]}
    else:
        attrs.update(gen)
    return attrs


def _group_documents(
    attrs: Mapping[str, object], zarr_format: int, existing: bool
) -> dict[str, bytes]:
    """The labels group's document(s) by zarr's own serialiser (v2: ``.zattrs``, plus
    ``.zgroup`` for a new group; v3: ``zarr.json``)."""
    import zarr
    from zarr.storage import MemoryStore

    docs: dict[str, Any] = {}
    zarr.create_group(MemoryStore(docs), zarr_format=zarr_format, attributes=attrs)  # type: ignore[arg-type]
    out = {k: v.to_bytes() for k, v in docs.items()}
    if existing and zarr_format == 2:
        out.pop(".zgroup", None)  # there already: nothing but the attributes changes
    return out


# ---------------------------------------------------------------- afterwards


def _adopt(layer: Layer, target: Path, node: str) -> None:
    """The layer now reads the saved label image (copy-on-write) and says where from."""
    from napari_ozx.layers.editable import EDITABLE_KEY, opened_editable
    from napari_ozx.layers.reading import layer_source
    from napari_ozx.ngff.read.open import open_ome_zarr

    oz = open_ome_zarr(str(target))  # kept open by the layer's lazy level 0
    label = oz.image(node)
    data = opened_editable(label.levels[0])
    meta = dict(getattr(layer, "metadata", None) or {})
    meta.update(layer_source(label, "labels").to_metadata())
    meta[EDITABLE_KEY] = True
    layer.metadata = meta
    layer.data = data
