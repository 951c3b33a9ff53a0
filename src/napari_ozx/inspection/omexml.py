"""What bioformats2raw's OME-XML says of an image, for ``info`` and the inspector.

Per image of a ``bioformats2raw.layout`` collection (or a plate's field): its XML
``Image``'s name, acquisition date and description, objective, channels (wavelengths
with units, fluor), time increment, the annotations it references (map annotations as
key/value pairs, found at the end of a huge XML by
:func:`napari_ozx.ngff.read.omexml.annotations_of`), and, for each value napari shows,
whether it came from the OME-Zarr metadata or from the XML. All structured, never the
raw XML.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from napari_ozx.ngff.model.omexml import OmeXml, XmlImage, fill_multiscale
from napari_ozx.ngff.read.omexml import annotations_of, read_ome_xml

if TYPE_CHECKING:
    from napari_ozx.inspection.facts import Row, Section
    from napari_ozx.inspection.tree import Hierarchy

__all__ = ["image_xml", "xml_entry", "xml_section", "xml_text"]

_cache: weakref.WeakKeyDictionary[Any, OmeXml | None] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _xml(insp: Hierarchy) -> OmeXml | None:
    with _lock:
        if insp in _cache:
            return _cache[insp]
    root = insp.read("")
    layout = root is not None and root.meta is not None and root.meta.bioformats2raw_layout
    result = read_ome_xml(insp.store, insp.source) if layout is not None and layout else None
    with _lock:
        _cache[insp] = result
    return result


def _series_index(insp: Hierarchy, path: str, xml: OmeXml) -> int | None:
    """Which ``Image`` element the image at *path* is: its place in ``OME/series``, else
    its group number; a plate's field through its ``WellSample``'s ``ImageRef``."""
    ome = insp.read("OME")
    series = ome.meta.series if ome is not None and ome.meta is not None else ()
    if path in series:
        return series.index(path)
    if path.isdigit():
        return int(path)
    parts = path.split("/")
    if len(parts) == 3 and xml.well_samples:
        from napari_ozx.ngff.read.omexml import well_sample_for

        root = insp.read("")
        plate = root.meta.plate if root is not None and root.meta is not None else None
        sample = well_sample_for(xml, plate, path) if plate is not None else None
        if sample is not None and sample.image_ref is not None:
            im = xml.image_by_id(sample.image_ref)
            return im.index if im is not None else None
    return None


def image_xml(insp: Hierarchy, path: str) -> XmlImage | None:
    """The XML ``Image`` of the image at *path*, or None."""
    xml = _xml(insp)
    if xml is None:
        return None
    index = _series_index(insp, path, xml)
    return xml.image(index) if index is not None else None


def xml_entry(insp: Hierarchy, path: str) -> dict[str, Any] | None:
    """``info --json``'s ``ome_xml`` of the image at *path*: the XML ``Image``'s facts,
    the annotations it references and where each shown value came from."""
    xml = _xml(insp)
    xim = image_xml(insp, path)
    if xml is None or xim is None:
        return None
    out = xim.to_json()
    found = annotations_of(insp.store, xml, xim.annotation_refs, insp.source)
    out["annotations"] = [found[r].to_json() for r in xim.annotation_refs if r in found]
    out["sources"] = _sources(insp, path, xim)
    return out


def _sources(insp: Hierarchy, path: str, xim: XmlImage) -> dict[str, str]:
    read = insp.read(path)
    meta = read.meta if read is not None else None
    if meta is None or not meta.multiscales:
        return {}
    ms = meta.multiscales[0]
    c = ms.channel_axis
    n = 1
    if c is not None and ms.datasets:  # the channels the data has, as the reader counts
        from napari_ozx.ngff.read.documents import join_path

        level = insp.read(join_path(path, ms.datasets[0].path))
        shape = level.docs.document.get("shape") if level is not None else None
        n = shape[c] if isinstance(shape, list) and c < len(shape) else 0
    return dict(fill_multiscale(ms, meta.omero, xim, n)[2].sources)


def _q(q: dict[str, Any] | None) -> str:
    return "" if q is None else f"{q['value']:g} {q['unit']}"


def xml_text(entry: dict[str, Any]) -> list[str]:
    """``info``'s lines for an image's ``ome_xml`` entry."""
    lines = [f"OME-XML image {entry.get('name')!r}" + _when(entry)]
    if entry.get("description"):
        lines.append(f"  description: {entry['description']}")
    obj = entry.get("objective")
    if obj:
        lines.append("  objective: " + _objective(obj))
    if entry.get("time_increment"):
        lines.append(f"  time increment: {_q(entry['time_increment'])}")
    for ch in entry.get("channels", ()):
        lines.append("  channel " + _channel(ch))
    for ann in entry.get("annotations", ()):
        lines.append("  annotation " + _annotation(ann))
    src = entry.get("sources") or {}
    xml = sorted(k for k, v in src.items() if v == "OME-XML")
    if xml:
        lines.append("  from OME-XML (OME-Zarr said nothing): " + ", ".join(xml))
    return lines


def _when(entry: dict[str, Any]) -> str:
    return f", acquired {entry['acquisition_date']}" if entry.get("acquisition_date") else ""


def _objective(obj: dict[str, Any]) -> str:
    parts = []
    if obj.get("nominal_magnification") is not None:
        parts.append(f"{obj['nominal_magnification']:g}x")
    if obj.get("lens_na") is not None:
        parts.append(f"NA {obj['lens_na']:g}")
    if obj.get("immersion"):
        parts.append(str(obj["immersion"]))
    if obj.get("model"):
        parts.append(f"({obj['model']})")
    return " ".join(parts)


def _channel(ch: dict[str, Any]) -> str:
    parts = [repr(ch.get("name"))]
    if ch.get("excitation_wavelength"):
        parts.append(f"ex {_q(ch['excitation_wavelength'])}")
    if ch.get("emission_wavelength"):
        parts.append(f"em {_q(ch['emission_wavelength'])}")
    if ch.get("fluor"):
        parts.append(f"fluor {ch['fluor']}")
    if ch.get("color"):
        parts.append(f"colour #{ch['color']}")
    return ", ".join(parts)


def _annotation(ann: dict[str, Any]) -> str:
    value = ann.get("value")
    if ann.get("kind") == "map" and isinstance(value, list):
        text = ", ".join(f"{k}={v}" for k, v in value)
    else:
        text = "" if value is None else str(value)
    return f"{ann['id']} ({ann['kind']}): {text}"


def xml_section(insp: Hierarchy, path: str) -> Section | None:
    """The inspector's "OME-XML" section of the image at *path* (its rows the facts of
    :func:`xml_entry`, and where each shown value came from)."""
    from napari_ozx.inspection.facts import Row, Section

    entry = xml_entry(insp, path)
    if entry is None:
        return None
    rows: list[Row] = [Row("Name", str(entry.get("name")))]
    if entry.get("acquisition_date"):
        rows.append(Row("Acquisition date", entry["acquisition_date"]))
    if entry.get("description"):
        rows.append(Row("Description", entry["description"]))
    if entry.get("objective"):
        rows.append(Row("Objective", _objective(entry["objective"])))
    if entry.get("time_increment"):
        rows.append(Row("Time increment", _q(entry["time_increment"])))
    for i, ch in enumerate(entry.get("channels", ())):
        rows.append(Row(f"Channel {i}", _channel(ch)))
    for ann in entry.get("annotations", ()):
        rows.append(Row("Annotation", _annotation(ann)))
    for key, src in sorted((entry.get("sources") or {}).items()):
        rows.append(Row(f"Source of {key}", src))
    return Section("OME-XML", tuple(rows))
