"""Tests of bioformats2raw's OME-XML (``OME/METADATA.ome.xml``); fixtures in ``data/``."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).parent / "data"
XML = "OME/METADATA.ome.xml"


def b2r_copy(tmp: Path, xml: bytes, name: str = "b2r_04.zarr") -> Path:
    """A copy of a fixture whose XML is *xml*."""
    dst = tmp / name
    shutil.copytree(DATA / name, dst)
    (dst / XML).write_bytes(xml)
    return dst


def big_annotations(nbytes: int, name: str = "b2r_04.zarr") -> bytes:
    """The fixture's XML with about *nbytes* of original metadata (as bioformats2raw
    writes a vendor's key/value pairs) before its own annotations."""
    xml = (DATA / name / XML).read_bytes()
    one = (
        b'<XMLAnnotation ID="Annotation:OM%d" Namespace="openmicroscopy.org/OriginalMetadata">'
        b"<Value><OriginalMetadata><Key>Vendor key %d</Key><Value>%s</Value>"
        b"</OriginalMetadata></Value></XMLAnnotation>\n"
    )
    parts = []
    size = 0
    i = 0
    pad = b"x" * 60
    while size < nbytes:
        block = b"".join(one % (i + k, i + k, pad) for k in range(1000))
        parts.append(block)
        size += len(block)
        i += 1000
    at = xml.index(b"<StructuredAnnotations>") + len(b"<StructuredAnnotations>")
    return xml[:at] + b"".join(parts) + xml[at:]
