"""OME-XML as bioformats2raw keeps it beside the pixels (``OME/METADATA.ome.xml``,
:data:`XML_KEY`): a bounded, hostile-input-safe parser and the model of what we use of it.

Pure: the bytes come in as an iterable of chunks (:mod:`napari_ozx.ngff.read.omexml` reads
them lazily). :func:`parse_ome_xml` streams them through ``defusedxml``'s ``iterparse``
(DTDs and entities refused), stops before the annotations and keeps nothing it has read
(:class:`OmeXml`, :class:`XmlImage`, :class:`XmlWellSample`); :func:`scan_annotations`
finds an image's referenced annotations by a byte search (each at most
:data:`MAX_ANNOTATION_BYTES`); :func:`fill_multiscale` fills what the multiscale says
nothing of (OME-Zarr wins), naming each value's source. Older schema namespaces are read
too. Unreadable XML is an :class:`OmeXmlError`; the image opens without it. Why it streams:
``docs/design/metadata-model.md``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from napari_ozx.errors import MetadataError

__all__ = [
    "CURRENT_SCHEMA",
    "MAX_ANNOTATION_BYTES",
    "XML_KEY",
    "OmeXml",
    "OmeXmlError",
    "XmlAnnotation",
    "XmlChannel",
    "XmlImage",
    "XmlObjective",
    "XmlWellSample",
    "length_unit",
    "parse_ome_xml",
    "rgba_color",
    "scan_annotations",
    "time_unit",
]

#: where bioformats2raw keeps the XML, relative to the hierarchy root
XML_KEY = "OME/METADATA.ome.xml"
CURRENT_SCHEMA = "2016-06"
_NS_PREFIX = "http://www.openmicroscopy.org/Schemas/OME/"
#: the most bytes one referenced annotation element may take (a MapAnnotation of a few
#: thousand pairs); a larger one is reported, not parsed
MAX_ANNOTATION_BYTES = 4 << 20

#: OME-XML's length units (UnitsLength) -> OME-Zarr (UDUNITS-2) unit names
_LENGTH_UNITS = {
    "Ym": "yottameter",
    "Zm": "zettameter",
    "Em": "exameter",
    "Pm": "petameter",
    "Tm": "terameter",
    "Gm": "gigameter",
    "Mm": "megameter",
    "km": "kilometer",
    "hm": "hectometer",
    "dam": "decameter",
    "m": "meter",
    "dm": "decimeter",
    "cm": "centimeter",
    "mm": "millimeter",
    "\u00b5m": "micrometer",  # MICRO SIGN, as the schema spells it
    "\u03bcm": "micrometer",  # GREEK SMALL LETTER MU, as some writers spell it
    "um": "micrometer",
    "nm": "nanometer",
    "pm": "picometer",
    "fm": "femtometer",
    "am": "attometer",
    "zm": "zeptometer",
    "ym": "yoctometer",
    "\u00c5": "angstrom",
    "in": "inch",
    "ft": "foot",
    "yd": "yard",
    "mi": "mile",
    "pc": "parsec",
}
#: OME-XML's time units (UnitsTime) -> OME-Zarr unit names
_TIME_UNITS = {
    "Ys": "yottasecond",
    "Zs": "zettasecond",
    "Es": "exasecond",
    "Ps": "petasecond",
    "Ts": "terasecond",
    "Gs": "gigasecond",
    "Ms": "megasecond",
    "ks": "kilosecond",
    "hs": "hectosecond",
    "das": "decasecond",
    "s": "second",
    "ds": "decisecond",
    "cs": "centisecond",
    "ms": "millisecond",
    "\u00b5s": "microsecond",
    "\u03bcs": "microsecond",
    "us": "microsecond",
    "ns": "nanosecond",
    "ps": "picosecond",
    "fs": "femtosecond",
    "as": "attosecond",
    "zs": "zeptosecond",
    "ys": "yoctosecond",
    "min": "minute",
    "h": "hour",
    "d": "day",
}


class OmeXmlError(MetadataError):
    """``OME/METADATA.ome.xml`` cannot be read (the message names the reason)."""


def length_unit(unit: str | None) -> str | None:
    """The OME-Zarr name of an OME-XML length unit (``µm`` -> ``micrometer``), the
    schema's default (µm) when *unit* is None; None for units OME-Zarr has no name for
    (pixel, reference frame)."""
    return _LENGTH_UNITS.get("\u00b5m" if unit is None else unit)


def time_unit(unit: str | None) -> str | None:
    """The OME-Zarr name of an OME-XML time unit (default s)."""
    return _TIME_UNITS.get("s" if unit is None else unit)


def rgba_color(value: int | None) -> str | None:
    """An OME-XML ``Color`` (a signed 32-bit packed RGBA integer; -1 is opaque white)
    as OME-Zarr's omero ``RRGGBB``."""
    if value is None:
        return None
    v = value & 0xFFFFFFFF
    return f"{(v >> 24) & 0xFF:02X}{(v >> 16) & 0xFF:02X}{(v >> 8) & 0xFF:02X}"


@dataclass(frozen=True)
class Quantity:
    """A value and its unit as the XML spells it (``unit`` None: the schema's default)."""

    value: float
    unit: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit}


@dataclass(frozen=True)
class XmlChannel:
    id: str | None = None
    name: str | None = None
    color: int | None = None  #: signed packed RGBA, as stored
    excitation: Quantity | None = None
    emission: Quantity | None = None
    fluor: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.color is not None:
            out["color"] = rgba_color(self.color)
        if self.excitation is not None:
            out["excitation_wavelength"] = self.excitation.to_json()
        if self.emission is not None:
            out["emission_wavelength"] = self.emission.to_json()
        if self.fluor is not None:
            out["fluor"] = self.fluor
        return out


@dataclass(frozen=True)
class XmlObjective:
    id: str
    nominal_magnification: float | None = None
    lens_na: float | None = None
    immersion: str | None = None
    model: str | None = None
    manufacturer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("nominal_magnification", self.nominal_magnification),
                ("lens_na", self.lens_na),
                ("immersion", self.immersion),
                ("model", self.model),
                ("manufacturer", self.manufacturer),
            )
            if v is not None
        }


@dataclass(frozen=True)
class XmlImage:
    """What napari-ozx uses of one ``Image`` element."""

    index: int  #: its position among the ``Image`` elements (the series index)
    id: str | None = None
    name: str | None = None
    acquisition_date: str | None = None
    description: str | None = None
    #: per axis name (``x``, ``y``, ``z``) the ``PhysicalSize``
    physical_size: Mapping[str, Quantity] = field(default_factory=dict)
    time_increment: Quantity | None = None
    sizes: Mapping[str, int] = field(default_factory=dict)  #: ``SizeX`` ... as ``x``...
    dimension_order: str | None = None
    channels: tuple[XmlChannel, ...] = ()
    objective: XmlObjective | None = None
    annotation_refs: tuple[str, ...] = ()
    #: how the ``Pixels`` say where the pixels are: ``MetadataOnly``, ``BinData``,
    #: ``TiffData`` or None (none of them)
    pixels_data: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "id": self.id, "name": self.name}
        if self.acquisition_date is not None:
            out["acquisition_date"] = self.acquisition_date
        if self.description is not None:
            out["description"] = self.description
        if self.physical_size:
            out["physical_size"] = {k: q.to_json() for k, q in self.physical_size.items()}
        if self.time_increment is not None:
            out["time_increment"] = self.time_increment.to_json()
        if self.objective is not None:
            out["objective"] = self.objective.to_json()
        out["channels"] = [c.to_json() for c in self.channels]
        if self.annotation_refs:
            out["annotation_refs"] = list(self.annotation_refs)
        return out


@dataclass(frozen=True)
class XmlWellSample:
    """One field of a plate's well: where the stage was and which image it is."""

    row: int
    column: int
    index: int | None
    image_ref: str | None
    position_x: Quantity | None = None
    position_y: Quantity | None = None


@dataclass(frozen=True)
class XmlAnnotation:
    id: str
    kind: str  #: ``map``, ``comment``, ``tag``, ``long``, ``double``, ``xml`` ...
    namespace: str | None = None
    description: str | None = None
    value: Any = None  #: list of [key, value] for ``map``; the text otherwise

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.description:
            out["description"] = self.description
        out["value"] = self.value
        return out


@dataclass(frozen=True)
class OmeXml:
    """The images (and a plate's well samples) read from an OME-XML document."""

    schema: str  #: ``2016-06``, ``2015-01`` ...
    images: tuple[XmlImage, ...] = ()
    well_samples: tuple[XmlWellSample, ...] = ()
    #: every ``Image`` element was read (the parse reached the section after them)
    complete: bool = False
    #: bytes read into the parser when it stopped (where the annotation scan may start)
    stopped_at: int = 0
    #: namespace prefixes declared on the way, for parsing fragments later
    namespaces: Mapping[str, str] = field(default_factory=dict)
    #: what the reader should say once (an older schema, no MetadataOnly)
    notes: tuple[str, ...] = ()

    def image(self, index: int) -> XmlImage | None:
        return self.images[index] if 0 <= index < len(self.images) else None

    def image_by_id(self, image_id: str) -> XmlImage | None:
        return next((im for im in self.images if im.id == image_id), None)


class _ChunkStream(io.RawIOBase):
    """An iterable of byte chunks as the file object ``iterparse`` reads; counts bytes."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            nxt = next(self._it, None)
            if nxt is None:
                return 0
            self._buf = bytes(nxt)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self.consumed += n
        return n


def _local(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def _float(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        return None


def _quantity(attrs: Mapping[str, str], name: str, default_unit: str) -> Quantity | None:
    value = _float(attrs.get(name))
    if value is None:
        return None
    return Quantity(value, attrs.get(name + "Unit") or default_unit)


#: elements the schema puts after every Image: the parse stops at the first of them
_AFTER_IMAGES = frozenset({"StructuredAnnotations", "ROI", "BinaryOnly"})


def parse_ome_xml(
    chunks: Iterable[bytes], *, images: int | None = None, where: str = XML_KEY
) -> OmeXml:
    """Parse the start of an OME-XML document: the instruments, plates and ``Image``
    elements (the first *images* of them, or all), stopping before the annotations.

    Raises :class:`OmeXmlError` naming the reason (the parser's message for invalid,
    truncated or non-UTF-8 XML, a refused DTD or entity, a root that is not ``OME``).
    No bytes at all (no such file) give an empty :class:`OmeXml` (``stopped_at`` 0).
    """
    import defusedxml
    from defusedxml.ElementTree import ParseError, iterparse

    stream = _ChunkStream(chunks)
    namespaces: dict[str, str] = {}
    objectives: dict[str, XmlObjective] = {}
    out_images: list[XmlImage] = []
    samples: list[XmlWellSample] = []
    notes: list[str] = []
    schema = ""
    complete = False
    depth = 0
    stack: list[Any] = []
    try:
        for event, elem in iterparse(
            stream,
            events=("start", "end", "start-ns"),
            forbid_dtd=True,
            forbid_entities=True,
            forbid_external=True,
        ):
            if event == "start-ns":
                prefix, uri = elem
                namespaces.setdefault(prefix, uri)
                continue
            ns, name = _local(elem.tag)
            if event == "start":
                depth += 1
                if depth == 1:
                    if name != "OME" or (ns and not ns.startswith(_NS_PREFIX)):
                        raise OmeXmlError(
                            f"{where}: not OME-XML (root element {elem.tag!r}); ignored"
                        )
                    schema = ns[len(_NS_PREFIX) :].strip("/") if ns else "none"
                elif depth == 2 and name in _AFTER_IMAGES:
                    complete = True
                    break
                stack.append(elem)
                continue
            # end
            stack.pop()
            depth -= 1
            if depth == 1:
                if name == "Instrument":
                    for o in elem:
                        if _local(o.tag)[1] == "Objective" and o.get("ID"):
                            objectives[o.get("ID", "")] = _objective(o)
                elif name == "Plate":
                    samples.extend(_well_samples(elem))
                elif name == "Image":
                    out_images.append(_image(elem, len(out_images), objectives))
                stack[0].remove(elem)  # keep nothing of what was read
                if name == "Image" and images is not None and len(out_images) >= images:
                    break
            elif name in ("Plane", "OriginalMetadata") and stack:
                stack[-1].remove(elem)
            elif depth == 0:
                complete = True
    except ParseError as e:
        if stream.consumed == 0:  # no such file (or an empty one): nothing to read
            return OmeXml(schema="")
        raise OmeXmlError(f"{where}: invalid XML ({e}); ignored") from None
    except defusedxml.DTDForbidden:
        raise OmeXmlError(
            f"{where}: a DTD (document type declaration) is refused: it can expand "
            "entities ('billion laughs') or fetch external ones; ignored"
        ) from None
    except defusedxml.EntitiesForbidden as e:
        raise OmeXmlError(f"{where}: entity declaration {e.name!r} refused; ignored") from None
    except defusedxml.ExternalReferenceForbidden as e:
        raise OmeXmlError(
            f"{where}: external reference {e.sysid!r} refused (never read or fetched); ignored"
        ) from None
    except defusedxml.DefusedXmlException as e:
        raise OmeXmlError(f"{where}: refused ({e}); ignored") from None
    except RecursionError:
        raise OmeXmlError(f"{where}: invalid XML (nested too deeply); ignored") from None
    if not schema:
        raise OmeXmlError(f"{where}: invalid XML (no root element); ignored")
    if schema != CURRENT_SCHEMA and schema != "none":
        notes.append(
            f"{where}: OME-XML schema {schema} (older than {CURRENT_SCHEMA}): read as "
            f"{CURRENT_SCHEMA}, whose Image, Pixels and Channel elements are the same"
        )
    missing = [im.index for im in out_images if im.pixels_data != "MetadataOnly"]
    if missing:
        notes.append(
            f"{where}: {len(missing)} of {len(out_images)} images have no <MetadataOnly/> "
            f"in their Pixels (first: Image {missing[0]}): bioformats2raw.layout MUST use "
            "<MetadataOnly/> elements; the pixels are read from the Zarr arrays"
        )
    return OmeXml(
        schema=schema,
        images=tuple(out_images),
        well_samples=tuple(samples),
        complete=complete,
        stopped_at=stream.consumed,
        namespaces=dict(namespaces),
        notes=tuple(notes),
    )


def _text(elem: Any) -> str | None:
    t = elem.text
    return t.strip() if isinstance(t, str) and t.strip() else None


def _objective(o: Any) -> XmlObjective:
    return XmlObjective(
        id=o.get("ID", ""),
        nominal_magnification=_float(o.get("NominalMagnification")),
        lens_na=_float(o.get("LensNA")),
        immersion=o.get("Immersion"),
        model=o.get("Model"),
        manufacturer=o.get("Manufacturer"),
    )


def _well_samples(plate: Any) -> Iterator[XmlWellSample]:
    for well in plate:
        if _local(well.tag)[1] != "Well":
            continue
        row, col = _int(well.get("Row")), _int(well.get("Column"))
        if row is None or col is None:
            continue
        for ws in well:
            if _local(ws.tag)[1] != "WellSample":
                continue
            ref = next((c.get("ID") for c in ws if _local(c.tag)[1] == "ImageRef"), None)
            yield XmlWellSample(
                row=row,
                column=col,
                index=_int(ws.get("Index")),
                image_ref=ref,
                position_x=_quantity(ws.attrib, "PositionX", "reference frame"),
                position_y=_quantity(ws.attrib, "PositionY", "reference frame"),
            )


def _image(elem: Any, index: int, objectives: Mapping[str, XmlObjective]) -> XmlImage:
    date = description = None
    objective = None
    refs: list[str] = []
    pixels = None
    for child in elem:
        name = _local(child.tag)[1]
        if name == "AcquisitionDate":
            date = _text(child)
        elif name == "Description":
            description = _text(child)
        elif name == "ObjectiveSettings":
            objective = objectives.get(child.get("ID", ""))
        elif name == "AnnotationRef" and child.get("ID"):
            refs.append(child.get("ID"))
        elif name == "Pixels":
            pixels = child
    kwargs: dict[str, Any] = {}
    if pixels is not None:
        attrs = pixels.attrib
        sizes = {
            ax: q
            for ax in ("x", "y", "z")
            if (q := _quantity(attrs, f"PhysicalSize{ax.upper()}", "\u00b5m"))
        }
        kwargs["physical_size"] = sizes
        kwargs["time_increment"] = _quantity(attrs, "TimeIncrement", "s")
        kwargs["sizes"] = {
            ax: n for ax in "xyzct" if (n := _int(attrs.get(f"Size{ax.upper()}"))) is not None
        }
        kwargs["dimension_order"] = attrs.get("DimensionOrder")
        channels = []
        data = None
        for child in pixels:
            name = _local(child.tag)[1]
            if name == "Channel":
                fluor = child.get("Fluor")
                channels.append(
                    XmlChannel(
                        id=child.get("ID"),
                        name=child.get("Name"),
                        color=_int(child.get("Color")),
                        excitation=_quantity(child.attrib, "ExcitationWavelength", "nm"),
                        emission=_quantity(child.attrib, "EmissionWavelength", "nm"),
                        fluor=fluor,
                    )
                )
            elif name in ("MetadataOnly", "BinData", "TiffData") and data is None:
                data = name
        kwargs["channels"] = tuple(channels)
        kwargs["pixels_data"] = data
    return XmlImage(
        index=index,
        id=elem.get("ID"),
        name=elem.get("Name"),
        acquisition_date=date,
        description=description,
        objective=objective,
        annotation_refs=tuple(refs),
        **kwargs,
    )


_ANNOTATION_START = re.compile(
    rb"<(?:([A-Za-z_][\w.-]*):)?(Map|Comment|Tag|Term|Long|Double|Boolean|Timestamp|XML|List|File)"
    rb"Annotation\b([^<>]*)>"
)


def scan_annotations(
    chunks: Iterable[bytes],
    wanted: Iterable[str],
    namespaces: Mapping[str, str] | None = None,
) -> dict[str, XmlAnnotation]:
    """The annotations among *chunks* whose ``ID`` is in *wanted*.

    Found by a byte search for each wanted ``ID="..."`` (original metadata, millions of
    elements, is skipped without being tokenised), each found element parsed on its own
    (defused, at most :data:`MAX_ANNOTATION_BYTES`). Stops once all are found; an
    element that cannot be read is left out."""
    todo = {w.encode("utf-8"): w for w in wanted}
    found: dict[str, XmlAnnotation] = {}
    decl = "".join(
        f' xmlns{":" + p if p else ""}="{_attr_escape(u)}"' for p, u in (namespaces or {}).items()
    )
    buf = b""
    it = iter(chunks)
    quotes: tuple[bytes, ...] | None = None
    while todo:
        nxt = next(it, None)
        final = nxt is None
        if nxt is not None:
            buf += nxt
        if quotes is None:  # the quote the writer uses: each search costs a pass
            quotes = tuple(q for q in (b'"', b"'") if b"ID=" + q in buf) or (b'"', b"'")
        keep = max(0, len(buf) - _TAIL)  # an ID or a start tag may straddle chunks
        for key in list(todo):
            m = None
            at = _find_id(buf, key, 0, quotes)
            while at >= 0:
                start = buf.rfind(b"<", 0, at)
                m = _ANNOTATION_START.match(buf, start) if start >= 0 else None
                if m is not None and m.start(3) <= at < m.end(3):
                    break
                m = None  # a reference to it (AnnotationRef), or another element's ID
                at = _find_id(buf, key, at + 1, quotes)
            if m is None:
                continue
            if m.group(3).rstrip().endswith(b"/"):
                stop = m.end()
            else:
                prefix = m.group(1)
                end_tag = b"</" + (prefix + b":" if prefix else b"") + m.group(2) + b"Annotation>"
                stop = buf.find(end_tag, m.end(), m.start() + MAX_ANNOTATION_BYTES)
                if stop < 0:
                    if final or len(buf) - m.start() >= MAX_ANNOTATION_BYTES:
                        del todo[key]  # too large, or truncated: left out
                    else:
                        keep = min(keep, m.start())  # read on: the element continues
                    continue
                stop += len(end_tag)
            del todo[key]
            ann = _parse_annotation(buf[m.start() : stop], decl, m.group(2).decode())
            if ann is not None:
                found[ann.id] = ann
        if final:
            break
        buf = buf[keep:]
    return found


#: bytes kept from one chunk to the next: an ID attribute or a start tag cut in two
_TAIL = 8192


def _find_id(buf: bytes, key: bytes, start: int, quotes: tuple[bytes, ...]) -> int:
    """Where ``ID="key"`` (with one of *quotes*) is in *buf* from *start*, -1 if nowhere."""
    best = -1
    for q in quotes:
        needle = b"ID=" + q + key + q
        at = buf.find(needle, start)
        while at > 0 and buf[at - 1 : at] not in (b" ", b"\t", b"\n", b"\r"):
            at = buf.find(needle, at + 1)  # e.g. ``OtherID=``
        if at >= 0 and (best < 0 or at < best):
            best = at
    return best


def _attr_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _parse_annotation(fragment: bytes, decl: str, kind: str) -> XmlAnnotation | None:
    from defusedxml.ElementTree import fromstring

    try:
        wrapper = f"<wrapper{decl}>".encode() + fragment + b"</wrapper>"
        root = fromstring(wrapper, forbid_dtd=True)
    except Exception:  # invalid, or refused: left out
        return None
    elem = next(iter(root), None)
    if elem is None:
        return None
    description = None
    value: Any = None
    for child in elem:
        name = _local(child.tag)[1]
        if name == "Description":
            description = _text(child)
        elif name == "Value":
            if kind == "Map":
                value = [[m.get("K"), m.text or ""] for m in child if _local(m.tag)[1] == "M"]
            elif kind == "XML":
                value = None  # original metadata and other raw XML: not shown as a string
            else:
                value = _text(child)
    return XmlAnnotation(
        id=elem.get("ID", ""),
        kind=kind.lower(),
        namespace=elem.get("Namespace"),
        description=description,
        value=value,
    )


# ------------------------------------------------------------------ filling the gaps

#: where a value shown came from
FROM_ZARR = "OME-Zarr"
FROM_XML = "OME-XML"


@dataclass(frozen=True)
class XmlFill:
    """An image's XML and, per value napari-ozx shows, where it came from."""

    image: XmlImage
    #: e.g. ``{"scale x": "OME-XML", "unit x": "OME-XML", "channel names": "OME-Zarr"}``
    sources: Mapping[str, str] = field(default_factory=dict)
    #: how many images (series) its file holds
    series_count: int = 1
    #: a plate field's ``WellSample`` (its stage position), or None
    sample: XmlWellSample | None = None
    #: how layers name the image among its file's series (``Image@Name``, with the
    #: image's path where two images share a name), or None
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.image.to_json(), "sources": dict(self.sources)}


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b))


def fill_multiscale(
    ms: Any, omero: Any, xml: XmlImage, n_channels: int
) -> tuple[Any, Any, XmlFill]:
    """What the XML adds to an image's multiscale (a ``metadata.Multiscale``) and omero
    (``metadata.Omero`` or None): OME-Zarr metadata wins where both speak (Bio-Formats'
    ZarrReader rule), the XML fills what it lacks.

    * A space axis ``x`` / ``y`` / ``z`` or the time axis without a unit and with a
      level-0 scale of 1 (the multiscale says nothing of its size) takes the XML's
      ``PhysicalSize`` / ``TimeIncrement`` and unit (every level's scale and translation
      multiplied by it); one whose scale already equals the XML's value takes the unit.
    * Channels without a label or colour take the XML channel's ``Name`` / ``Color``
      (only when the XML lists as many channels as the data has).
    """
    from dataclasses import replace

    from napari_ozx.ngff.model.metadata import Channel, Omero

    sources: dict[str, str] = {}
    factors = [1.0] * ms.ndim
    axes = list(ms.axes)
    if ms.version not in ("0.6",) and not ms.transformations:
        ds0 = ms.datasets[0].scale if ms.datasets else (1.0,) * ms.ndim
        for i, ax in enumerate(ms.axes):
            name = ax.name.lower()
            if ax.type == "time" or name == "t":
                q = xml.time_increment
                unit = time_unit(q.unit) if q is not None else None
                key = "t"
            elif name in ("x", "y", "z") and ax.type in (None, "space"):
                q = xml.physical_size.get(name)
                unit = length_unit(q.unit) if q is not None else None
                key = name
            else:
                continue
            if ax.unit is not None:
                sources[f"scale {key}"] = sources[f"unit {key}"] = FROM_ZARR
                continue
            if q is None or unit is None or q.value <= 0:
                continue
            if _close(ds0[i], 1.0) and not _close(q.value, 1.0):
                factors[i] = q.value
                sources[f"scale {key}"] = FROM_XML
            else:
                sources[f"scale {key}"] = FROM_ZARR
                if not _close(ds0[i], q.value):
                    continue  # both speak of the size and disagree: the unit stays unsaid
            axes[i] = replace(ax, unit=unit)
            sources[f"unit {key}"] = FROM_XML
    if any(f != 1.0 for f in factors) or axes != list(ms.axes):
        datasets = tuple(
            replace(
                d,
                scale=tuple(s * f for s, f in zip(d.scale, factors, strict=True)),
                translation=tuple(t * f for t, f in zip(d.translation, factors, strict=True)),
            )
            for d in ms.datasets
        )
        ms = replace(ms, axes=tuple(axes), datasets=datasets)
    xch = xml.channels
    if len(xch) == n_channels and n_channels:
        old = list(omero.channels) if omero is not None else []
        if len(old) != n_channels:
            old = [Channel() for _ in range(n_channels)]
        new = []
        for ch, x in zip(old, xch, strict=True):
            label = ch.label
            if label is None and x.name:
                label = x.name
                sources["channel names"] = FROM_XML
            color = ch.color
            if color is None and x.color is not None:
                color = rgba_color(x.color)
                sources["channel colors"] = FROM_XML
            new.append(replace(ch, label=label, color=color))
        sources.setdefault("channel names", FROM_ZARR)
        sources.setdefault("channel colors", FROM_ZARR)
        if new != old:
            omero = replace(omero, channels=tuple(new)) if omero is not None else Omero(tuple(new))
    return ms, omero, XmlFill(xml, sources)
