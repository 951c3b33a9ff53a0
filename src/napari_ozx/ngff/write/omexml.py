"""bioformats2raw's ``OME/METADATA.ome.xml`` on the way out (``convert``).

The XML describes the source's images in their order. A write that keeps them all at
the same paths (a plate: every field where it was) keeps the XML byte for byte, the
``OME`` group's ``series`` and the root's ``bioformats2raw.layout``; a write that does
not (one image of a collection written alone, at the root) says so in its summary
instead of writing an XML that no longer matches. So does a write the XML cannot follow
yet (an ``.ozx`` target: its members are final once written).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from napari_ozx.ngff.model.omexml import XML_KEY

__all__ = ["carry_ome_xml"]

logger = logging.getLogger(__name__)


def _source_xml(oz: Any) -> bytes | None:
    from napari_ozx.ngff.read.omexml import member_chunks

    if oz.root.meta.bioformats2raw_layout is None:
        return None
    data = b"".join(member_chunks(oz.store, XML_KEY))
    return data or None


def carry_ome_xml(oz: Any, target: Path, kind: str) -> str | None:
    """After ``convert`` wrote *oz* (a ``kind`` hierarchy) to *target*: the XML, its
    ``series`` and the layout kept (a plate into a directory), or the note saying why
    not; None when the source has no XML."""
    if oz.root.meta.bioformats2raw_layout is None:
        return None
    xml = _source_xml(oz)
    if xml is None:
        return None
    if kind != "plate":
        n = len(oz.root.meta.series) if oz.root.meta.series else None
        note = (
            f"{XML_KEY} not written: the target holds the image alone, not the "
            f"bioformats2raw collection its XML describes" + (f" ({n} images)" if n else "")
        )
    elif not target.is_dir():
        note = f"{XML_KEY} not written: an .ozx target cannot carry it yet (convert to a directory)"
    else:
        _write_b2r(oz, target, xml)
        return None
    logger.warning("%s: %s", target, note)
    return note


def _write_b2r(oz: Any, target: Path, xml: bytes) -> None:
    """The XML byte for byte, the ``OME`` group (with the source's ``series``) and the
    root's ``bioformats2raw.layout`` into the directory *target*, each file replaced
    atomically."""
    from napari_ozx.ozx.atomic import replace_files

    ome_attrs = oz.ome_attributes("OME") or {}
    raw = ome_attrs.get("series")
    series = [s for s in raw if isinstance(s, str)] if isinstance(raw, list) else []
    files: dict[Path, bytes] = {target / XML_KEY: xml}
    root_v3 = target / "zarr.json"
    if root_v3.is_file():
        doc = json.loads(root_v3.read_text())
        ome = doc.setdefault("attributes", {}).setdefault("ome", {})
        ome["bioformats2raw.layout"] = 3
        files[root_v3] = json.dumps(doc, indent=2).encode()
        attrs: dict[str, Any] = {"ome": {"version": ome.get("version", "0.5")}}
        if series:
            attrs["ome"]["series"] = series
        files[target / "OME" / "zarr.json"] = json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": attrs}, indent=2
        ).encode()
    else:
        zattrs = target / ".zattrs"
        doc = json.loads(zattrs.read_text()) if zattrs.is_file() else {}
        doc["bioformats2raw.layout"] = 3
        files[zattrs] = json.dumps(doc, indent=2).encode()
        files[target / "OME" / ".zgroup"] = b'{"zarr_format": 2}'
        if series:
            files[target / "OME" / ".zattrs"] = json.dumps({"series": series}).encode()
    (target / "OME").mkdir(exist_ok=True)
    replace_files(files)


def dropped_xml_note(sources: list[str], target: Path) -> str | None:
    """For a save of layers read from *sources*: the note (and a warning) that a source's
    OME-XML is not written, since the saved file holds the layers as new images, not the
    bioformats2raw collection the XML describes; None when no source has an XML."""
    from napari_ozx.errors import OzxError
    from napari_ozx.ngff.read.open import open_ome_zarr

    for source in dict.fromkeys(sources):
        try:
            with open_ome_zarr(source) as oz:
                xml = _source_xml(oz)
                n = len(oz.root.meta.series) if oz.root.meta.series else None
        except (OzxError, OSError):
            continue
        if xml is None:
            continue
        note = (
            f"{XML_KEY} of {source} not written: the saved file holds the layers as new "
            "images, not the bioformats2raw collection its XML describes"
            + (f" ({n} images)" if n else "")
        )
        logger.warning("%s: %s", target, note)
        return note
    return None


__all__ += ["dropped_xml_note"]
