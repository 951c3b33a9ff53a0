"""An RFC-8 collection root opened (:mod:`napari_ozx.ngff.model.collection`): its image
members found, and the collection shown to the reader as an OME-Zarr 0.6 scene, so the
scene machinery (graph, placement, scene dock) places every image.

:func:`open_collection` gives an :class:`OpenedCollection`: a member inside the
collection's directory (relative, or an absolute ``file://`` URL or path under it;
:func:`member_location`) is an image group read through the same store; any other (``..``,
another directory, ``http(s)://``) is opened on its own (:func:`external_images`) and shown
in its own coordinate system, with one report. The root's group is replaced by one whose
metadata is the scene (:func:`~napari_ozx.ngff.model.collection.scene_document`), read as
0.6. One warning (:data:`~napari_ozx.ngff.model.collection.DRAFT_NOTE`) says RFC-8 is a
draft and names every member not opened.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ngff.model.collection import (
    DRAFT_NOTE,
    Collection,
    Member,
    parse_collection,
    scene_document,
)
from napari_ozx.ngff.model.metadata import NodeMetadata, parse_node_attributes

__all__ = ["OpenedCollection", "open_collection"]

logger = logging.getLogger(__name__)


@dataclass
class OpenedCollection:
    """What the opener keeps of a collection root."""

    collection: Collection
    #: the root's metadata as a 0.6 scene (``meta.scene``), what the reader and graph see
    meta: NodeMetadata
    #: the ``ome`` attributes of that scene (the transformation graph reads them)
    scene_ome: dict[str, Any]
    #: the image members under the root, as store paths, in the collection's order
    image_paths: list[str]
    #: the members elsewhere: ``(member, location)``, opened on their own
    external: list[tuple[Member, str]] = field(default_factory=list)
    #: each image member's node name, by its store path (or, elsewhere, its location)
    names: dict[str, str] = field(default_factory=dict)

    def name_of(self, image: Any, inside: bool) -> str | None:
        """The node name of an opened member image (None: not a member)."""
        return self.names.get(image.path if inside else str(image.root.source))


def _local_dir(source: str) -> str | None:
    return source if os.path.isdir(source) else None


def member_location(raw: str, source: str) -> tuple[str | None, str]:
    """Where a member's ``zarr`` path points: ``(path under the root, "")`` or ``(None,
    location)`` for a location outside it (a local path or a URL)."""
    parsed = urlparse(raw)
    base = _local_dir(source)
    if parsed.scheme == "file":
        local = unquote(parsed.path)
        if parsed.netloc and len(parsed.netloc) == 2 and parsed.netloc[1] == ":":
            local = parsed.netloc + local  # file://C:/... as the draft writes it
        raw = local
    elif parsed.scheme and len(parsed.scheme) > 1:  # http(s)://, s3://
        return None, raw
    if os.path.isabs(raw):
        if base is not None:
            rel = os.path.relpath(raw, base)
            if not rel.startswith(".."):
                return rel.replace(os.sep, "/"), ""
        return None, raw
    norm = posixpath.normpath(raw)
    if norm == "." or norm.startswith("../") or norm == "..":
        if base is not None:
            return None, os.path.normpath(os.path.join(base, raw))
        return None, raw
    return norm, ""


def open_collection(source: str, ome: object) -> OpenedCollection:
    """The collection at the root of *source* (its ``ome`` object), shown as a 0.6 scene
    (one warning: a draft)."""
    col = parse_collection(ome if isinstance(ome, Mapping) else {})

    def resolve(raw: str) -> str | None:
        return member_location(raw, source)[0]

    doc, left = scene_document(col, resolve)
    paths: list[str] = []
    external: list[tuple[Member, str]] = []
    names: dict[str, str] = {}
    for m in col.images:
        assert m.path is not None
        inside, elsewhere = member_location(m.path, source)
        if inside is not None:
            if inside not in paths:
                paths.append(inside)
        else:
            external.append((m, elsewhere))
        names.setdefault(inside or elsewhere, m.name)
    scene_ome: dict[str, Any] = {"version": "0.6", "scene": doc}
    meta = parse_node_attributes({"ome": scene_ome}, 3, node="")
    skipped = [
        f"{'/'.join((*m.within, m.name))}: {m.why_not_opened}"
        for m in col.members
        if not m.is_image
    ]
    notes = [f"not opened: {'; '.join(skipped)}"] if skipped else []
    if left:
        notes.append(f"transformations naming images outside it not applied: {', '.join(left)}")
    logger.warning(
        "%s: %s%s", source, DRAFT_NOTE, "".join(f" ({n})" for n in notes) if notes else ""
    )
    return OpenedCollection(col, meta, scene_ome, paths, external, names)


def external_images(opened: OpenedCollection, open_ome_zarr: Callable[[str], Any]) -> list[Any]:
    """The members outside the collection's root, each opened as its own hierarchy by
    *open_ome_zarr* (a member that cannot be read is logged and left out)."""
    out: list[Any] = []
    for m, location in opened.external:
        try:
            out.extend(open_ome_zarr(location).images()[:1])
        except (OzxError, OSError, MetadataError) as e:
            logger.warning("collection member %r at %s not opened: %s", m.name, location, e)
    return out
