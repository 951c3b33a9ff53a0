"""Save a *new* labels layer into the OME-Zarr image it was drawn over, under ``labels/``.

napari's "New labels" over an opened image (or any integer layer with the image's
level-0 shape) becomes ``<image>/labels/<name>``: a label image with the image's pyramid
(same level shapes and coordinate transformations, so it overlays every level), storage
chunks and shards like the image's, ``image-label`` with the layer's colours and
``source.image: "../../"``, the file's OME version and Zarr format; its name is appended
to the ``labels`` group's list (the group is created when absent).

What is written, and what is not:

* **directory** — nothing existing is rewritten except the ``labels`` group document:
  the new arrays are written under a hidden temporary name inside ``labels/`` and
  renamed into place; the group document is then replaced atomically (a temporary file
  beside it, ``os.replace``). A failure removes what was written.
* **.ozx** — a new archive beside the old one: every existing member is copied byte for
  byte (``OzxWriter.add_copy_from``, as a label save-back does), the ``labels`` group
  document replaced, the new label members added, all metadata first in RFC-9's
  breadth-first order (the writer sorts it); the archive comment is kept and the new
  file renamed onto the old one. Layers reading the old archive are re-pointed at the
  new one (their members are the same bytes), so a later save-back of another label
  image of that file is not refused as "changed since opened".

Afterwards the layer reads the saved label image copy-on-write (an
:class:`~napari_ozx.layers.editable.EditableLabels`) and carries its
:class:`~napari_ozx.layers.provenance.LayerSource`, so later edits are saved with
:func:`~napari_ozx.layers.saveback.save_labels_back`.

Refused with one :class:`~napari_ozx.layers.saveback.SaveBackError` (reason first, the
file named, nothing written): a name that already exists (save-back is the way to change
it), a shape that is not the image's level 0 without its channel axis, a non-integer
layer, a read-only target, a remote source.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import numpy as np

from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.saveback import SaveBackError, refusal, save_errors
from napari_ozx.ngff.model.versions import version_key
from napari_ozx.ozx.atomic import fsync_tree, replace_files
from napari_ozx.ozx.edit import Fingerprint

if TYPE_CHECKING:
    from napari.layers import Layer

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.read.open import GroupNode, OmeZarr
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.write.specs import ArrayData
    from napari_ozx.ngff.write.writer import LabelLevel, LabelsSpec, PreparedLabels
    from napari_ozx.ozx.store import OzxStore
    from napari_ozx.ozx.writer import OzxWriter

logger = logging.getLogger(__name__)

__all__ = ["add_labels_to_image", "image_source_of"]

_NAME_OK = re.compile(r"^[\w][\w.\-]*$")

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
    """Write *labels_layer* into the file of *image* as ``labels/<name>`` (module doc).

    *image* is the image layer (opened from the file), its :class:`LayerSource`, or the
    file's path. *name* defaults to the layer's name (made safe for a path). Returns
    the file written; the layer then reads it and saves back into it.
    """
    lname = getattr(labels_layer, "name", None) or "labels"
    src, target = local_image_target(
        image, f"labels {lname!r}", "open it with napari-ozx, or save both with File > Save"
    )
    with save_errors(f"saving labels {lname!r} into", target):
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
    from napari_ozx.ozx.remote.source import is_url

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
    from napari_ozx.ngff.read.open import open_ome_zarr

    lname = getattr(layer, "name", None) or "labels"
    data = _level0(layer)
    if not np.issubdtype(np.dtype(data.dtype), np.integer):
        raise refusal(target, f"labels {lname!r} are not integers ({np.dtype(data.dtype)})")
    if not target.exists():
        raise refusal(target, "the image's file no longer exists")
    oz = open_ome_zarr(str(target))
    try:
        return _add_opened(oz, layer, data, src, target, name)
    finally:
        oz.close()


def _add_opened(
    oz: OmeZarr,
    layer: Layer,
    data: ArrayData,
    src: LayerSource,
    target: Path,
    name: str | None,
) -> Path:
    from napari_ozx.ngff.write.options import WriteOptions
    from napari_ozx.ngff.write.writer import prepare_labels

    lname = getattr(layer, "name", None) or "labels"
    image, axes = _target_image(oz, data, src, target, lname)
    spec = _labels_spec(layer, data, axes, name, target, lname)
    name = spec.name

    zf = oz.zarr_format or 2
    version = _label_version(zf, image.multiscale.version)
    lpath = f"{src.node}/labels" if src.node else "labels"
    group = oz._group_or_none(lpath)
    listed = list(group.meta.labels) if group is not None else []
    if name in listed or _exists(oz, target, f"{lpath}/{name}"):
        raise refusal(
            target,
            f"labels {name!r} already exist in the image {src.node or '/'!r}; to change "
            "them, open them and use 'Save labels back into the file', or choose another name",
        )
    _check_writable(target, target / lpath if target.is_dir() else target)

    levels, separator = _label_levels(image, zf)
    prepared = prepare_labels(spec, levels, WriteOptions(version=version), separator)
    attrs = _group_attributes(group, listed, name, zf, version)
    group_docs = _group_documents(attrs, zf, existing=group is not None)

    if target.is_dir():
        _commit_directory(target, lpath, name, prepared, group_docs)
    else:
        from napari_ozx.layers.editable import repoint_archive

        before = Fingerprint.of(target)
        _commit_ozx(target, cast("OzxStore", oz.store), lpath, name, prepared, group_docs)
        oz.close()  # before the others move: nothing of ours holds the old file
        repoint_archive(target, before)
    node = f"{lpath}/{name}"
    _adopt(layer, target, node)
    logger.info("saved labels %r into %s as %s", lname, target, node)
    return target


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
        if not _NAME_OK.match(name):
            raise refusal(
                target,
                f"{name!r} is not a label name (letters, digits, '_', '-', '.'; "
                "not starting with '.')",
            )
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


def _exists(oz: OmeZarr, target: Path, path: str) -> bool:
    if target.is_dir():
        return (target / path).exists()
    index = getattr(oz.store, "index", None)
    if index is None:
        return False
    lead = path + "/"
    return any(n == path or n.startswith(lead) for n in index.by_name)


def _check_writable(target: Path, where: Path) -> None:
    if target.is_dir():
        d = where if where.exists() else target
        if not os.access(d, os.W_OK):
            raise refusal(target, "the image's folder is read-only (no write permission)")
    elif not os.access(target.parent, os.W_OK) or not os.access(target, os.W_OK):
        raise refusal(target, "the file or its folder is read-only")


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


# ----------------------------------------------------------------------- commit


def _commit_directory(
    root: Path, lpath: str, name: str, prepared: PreparedLabels, group_docs: dict[str, bytes]
) -> None:
    from zarr.storage import LocalStore

    ldir = root / lpath
    made_group = not ldir.exists()
    ldir.mkdir(exist_ok=True)
    tmp = ldir / f".{name}.{uuid.uuid4().hex[:8]}.partial"
    final = ldir / name
    renamed = False
    try:
        tmp.mkdir()
        for key, doc in prepared.documents.items():
            p = tmp / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(doc)
        prepared.write_data(LocalStore(tmp), "")
        fsync_tree(tmp)  # on disk before the group document lists it
        os.rename(tmp, final)  # refuses to replace a non-empty directory made meanwhile
        renamed = True
        # .zgroup before .zattrs (v2): the attributes make it a labels group last
        for key in sorted(group_docs, key=lambda k: k != ".zgroup"):
            replace_files({ldir / key: group_docs[key]})
    except BaseException:
        shutil.rmtree(final if renamed else tmp, ignore_errors=True)
        if made_group:
            shutil.rmtree(ldir, ignore_errors=True)
        raise


def _commit_ozx(
    target: Path,
    base_store: OzxStore,
    lpath: str,
    name: str,
    prepared: PreparedLabels,
    group_docs: dict[str, bytes],
) -> None:
    """A new archive: the old metadata (but the labels group document), the new label
    image's and the updated group's documents, every old data member copied byte for
    byte, then the new label chunks; renamed onto *target*."""
    from napari_ozx.ozx.write_store import OzxWriteStore

    prefix = f"{lpath}/{name}"
    documents = {f"{prefix}/{k}": v for k, v in prepared.documents.items()}
    documents.update({f"{lpath}/{k}": v for k, v in group_docs.items()})
    rebuild_archive(
        target,
        base_store,
        replaced=lambda member: member in documents,
        documents=documents,
        write_data=lambda writer: prepared.write_data(OzxWriteStore(writer), prefix),
    )


def rebuild_archive(
    target: Path,
    base_store: OzxStore,
    replaced: Callable[[str], bool],
    documents: Mapping[str, bytes],
    write_data: Callable[[OzxWriter], None],
) -> None:
    """Rebuild the ``.ozx`` *target* (opened as *base_store*) with new members: every old
    member but the *replaced* ones copied byte for byte (its metadata first, RFC-9), the
    new metadata *documents* after the old metadata, the old data, then what
    *write_data* adds through the :class:`~napari_ozx.ozx.writer.OzxWriter` it is given;
    the new file renamed onto *target* (nothing left behind on failure)."""
    from napari_ozx.ozx.rfc9 import is_metadata_name
    from napari_ozx.ozx.writer import OzxWriter

    entries = sorted(
        (e for e in base_store.index.by_name.values() if not e.is_dir and not replaced(e.name)),
        key=lambda e: e.header_offset,
    )
    writer = OzxWriter(target, comment=base_store.comment or None)
    try:
        for e in entries:
            if is_metadata_name(e.name):
                writer.copy_member(base_store, e.name)
        for key, doc in documents.items():
            writer.add(key, doc)
        for e in entries:
            if not is_metadata_name(e.name):
                writer.copy_member(base_store, e.name)
        write_data(writer)
        writer.commit()
    except BaseException:
        writer.abort()
        raise


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
