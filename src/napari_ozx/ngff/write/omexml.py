"""bioformats2raw's ``OME/METADATA.ome.xml`` on the way out (``convert``, File > Save).

The XML describes the source's images in their order. A write that keeps them all at
the same paths (a plate: every field where it was) keeps the XML byte for byte, the
``OME`` group's ``series`` and the root's ``bioformats2raw.layout``
(:class:`Bf2RawMembers`, written through the write's own store: a directory and an
``.ozx`` alike, RFC-9's order kept); a write that does not (one image of a collection
written alone, at the root; layers saved as new images) says so in one warning, and in
its summary, instead of writing an XML that no longer matches.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_ozx.ngff.model.omexml import XML_KEY

if TYPE_CHECKING:
    from zarr.abc.store import Store

__all__ = ["Bf2RawMembers", "carry_ome_xml", "dropped_xml_note", "warn_dropped"]

logger = logging.getLogger(__name__)

_DROPPED = f"{XML_KEY} (and its OME series and bioformats2raw.layout)"


@dataclass(frozen=True)
class Bf2RawMembers:
    """bioformats2raw's layout kept by a write (an :class:`.plan.ExtraMembers`): the
    root's ``bioformats2raw.layout``, the ``OME`` group with its ``series``, and the XML
    byte for byte; built from the metadata model, written by zarr."""

    xml: bytes
    series: tuple[str, ...]
    layout: int = 3

    def write_documents(self, store: Store, version: str) -> None:
        import zarr

        from napari_ozx.ngff.model.metadata import NodeMetadata, zarr_format_for

        zf = zarr_format_for(version)
        root = zarr.open_group(store=store, mode="r+", zarr_format=zf)
        add = NodeMetadata(bioformats2raw_layout=self.layout).to_attributes(version)
        if "ome" in add:  # 0.5+: inside the root's ``ome`` object
            ome = root.attrs.get("ome")
            add = {"ome": {**(ome if isinstance(ome, dict) else {}), **add["ome"]}}
        root.attrs.update(add)
        zarr.create_group(
            store=store,
            path="OME",
            zarr_format=zf,
            attributes=NodeMetadata(series=self.series).to_attributes(version),
        )

    def write_files(self, store: Store) -> None:
        from napari_ozx.ngff.tables.write import put_keys

        put_keys(store, {XML_KEY: self.xml})


def _source_xml(oz: Any) -> bytes | None:
    from napari_ozx.ngff.read.omexml import member_chunks

    if oz.root.meta.bioformats2raw_layout is None:
        return None
    data = b"".join(member_chunks(oz.store, XML_KEY))
    return data or None


def carry_ome_xml(
    oz: Any, kind: str, target: str | os.PathLike[str]
) -> tuple[Bf2RawMembers | None, str | None]:
    """What a ``convert`` of *oz* (a ``kind`` hierarchy) to *target* keeps of its XML:
    the members to write with it (a plate: every field stays where it was, so the XML,
    ``series`` and layout still match), or the note saying why not (an image written
    alone, at the root, is no longer the collection its XML describes; warned once by
    :func:`warn_dropped` when the write is done); ``(None, None)`` when the source has
    no XML."""
    if not _has_xml(oz):
        return None, None
    xml = _source_xml(oz) if kind == "plate" else None  # read whole only when kept
    if xml is not None:
        raw = (oz.ome_attributes("OME") or {}).get("series")
        series = tuple(s for s in raw if isinstance(s, str)) if isinstance(raw, list) else ()
        return Bf2RawMembers(xml, series, oz.root.meta.bioformats2raw_layout), None
    n = len(oz.root.meta.series) or len(oz.images())
    note = (
        f"{_DROPPED} not written: the target holds the image alone, not the "
        f"bioformats2raw collection of {n} image{'s' if n != 1 else ''} its XML describes"
    )
    return None, note


def warn_dropped(target: str | os.PathLike[str], note: str) -> None:
    """The one warning of a write that leaves the XML out (its summary holds *note*)."""
    logger.warning("%s: %s", target, note)


def _has_xml(oz: Any) -> bool:
    from napari_ozx.ngff.read.omexml import member_chunks

    if oz.root.meta.bioformats2raw_layout is None:
        return False
    return next(member_chunks(oz.store, XML_KEY, chunk=64), None) is not None


def _series_of(node: str, series: Sequence[str]) -> str | None:
    """The series (image path) *node* belongs to (an image, or one of its labels)."""
    return next((s for s in series if node == s or node.startswith(s + "/")), None)


def dropped_xml_note(
    saved: Mapping[str, Sequence[str]], target: str | os.PathLike[str]
) -> str | None:
    """For a save of layers read from the nodes ``saved[source]`` of each source: the one
    note (and one warning) naming each source whose OME-XML is not written, and the
    images of its collection the saved file leaves out. A save writes layers as new
    images, never the bioformats2raw collection the XML describes, so the XML would no
    longer match. None when no source has an XML."""
    from napari_ozx.errors import OzxError
    from napari_ozx.ngff.read.open import open_ome_zarr

    parts = []
    for source, nodes in saved.items():
        try:
            with open_ome_zarr(source) as oz:
                if not _has_xml(oz):
                    continue
                series = list(oz.root.meta.series) or [im.path for im in oz.images()]
        except (OzxError, OSError):
            continue
        kept = [s for s in dict.fromkeys(_series_of(n, series) for n in nodes) if s is not None]
        left = [s for s in series if s not in kept]
        saved_as = f"image {', '.join(kept)}" if kept else "layers"
        part = (
            f"{Path(str(source)).name} ({saved_as} saved as new images; "
            f"{', '.join(left) if left else 'none'} of its {len(series)} left out)"
        )
        parts.append(part)
    if not parts:
        return None
    note = (
        f"{_DROPPED} of {'; '.join(parts)} not written: the saved file is not the "
        "bioformats2raw collection the XML describes"
    )
    warn_dropped(target, note)
    return note
