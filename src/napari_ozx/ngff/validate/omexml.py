"""The bioformats2raw rules about ``OME/METADATA.ome.xml``, in the specification's words
(OME-Zarr 0.4/0.5 §bf2raw, "Details"): the XML is present (SHOULD), adheres to OME-XML
and uses ``<MetadataOnly/>`` (MUST), ``series`` matches the XML's ``Image`` elements
(MUST), and the plate case (``series`` SHOULD match the plate's fields).

The XML is read as the reader reads it (:mod:`napari_ozx.ngff.read.omexml`: streamed,
defused, up to the last ``Image``), so a huge or hostile XML costs the validator no
more than the reader.
"""

from __future__ import annotations

from typing import Any

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.omexml import XML_KEY, OmeXmlError, parse_ome_xml
from napari_ozx.ngff.validate.rules import Rule

__all__ = ["OMEXML_RULES", "check_ome_xml"]

_BF2RAW = "OME-Zarr 0.4/0.5 §bf2raw-details"
OMEXML_RULES = {
    "bf2raw-xml-missing": Rule(
        "warning",
        "Conforming groups SHOULD have OME metadata representing the entire collection of "
        "images in a file named OME/METADATA.ome.xml.",
        _BF2RAW,
    ),
    "bf2raw-xml-invalid": Rule(
        "error",
        "OME/METADATA.ome.xml MUST adhere to the OME-XML specification.",
        _BF2RAW,
    ),
    "bf2raw-metadata-only": Rule(
        "error",
        "OME/METADATA.ome.xml MUST use <MetadataOnly/> elements as opposed to <BinData/>, "
        "<BinaryOnly/> or <TiffData/>.",
        _BF2RAW,
    ),
    "bf2raw-xml-images": Rule(
        "error",
        "The order of the paths MUST match the order of the Image elements in "
        "OME/METADATA.ome.xml if provided. Every multiscales group MUST represent exactly "
        "one OME-XML Image in the same order as either the series index or the group numbers.",
        _BF2RAW,
    ),
    "bf2raw-xml-no-images": Rule(
        "warning",
        "SHOULD have OME metadata representing the entire collection of images in a file "
        "named OME/METADATA.ome.xml.",
        _BF2RAW,
    ),
    "bf2raw-plate-series": Rule(
        "warning",
        "If plate metadata is present, images MUST be located at the defined location. "
        "Matching series metadata SHOULD be provided for tools that are unaware of the "
        "plate specification.",
        _BF2RAW,
    ),
}


def _add(walker: Any, code: str, node: str, message: str) -> None:
    walker.r.add(code, node, message, rules=OMEXML_RULES)


def check_ome_xml(walker: Any, g: Any) -> None:
    """The walker's hook for a ``bioformats2raw.layout`` root group *g*."""
    from napari_ozx.ngff.model.metadata import ome_section
    from napari_ozx.ngff.read.omexml import member_chunks

    if g.path:
        return  # (the layout is a root's)
    store = getattr(walker.docs, "store", None)
    if store is None:
        return
    chunks = member_chunks(store, XML_KEY)
    try:
        xml = parse_ome_xml(chunks, where=XML_KEY)
    except OmeXmlError as e:
        _add(walker, "bf2raw-xml-invalid", XML_KEY, str(e).removesuffix("; ignored"))
        return
    except (OzxError, OSError) as e:
        _add(walker, "bf2raw-xml-invalid", XML_KEY, f"{XML_KEY} cannot be read: {e}")
        return
    finally:
        chunks.close()
    if xml.stopped_at == 0:
        _add(walker, "bf2raw-xml-missing", "OME", f"no {XML_KEY}")
        return
    bad = [im for im in xml.images if im.pixels_data != "MetadataOnly"]
    for im in bad[:5]:
        _add(
            walker,
            "bf2raw-metadata-only",
            XML_KEY,
            f"Image {im.index} ({im.id}): Pixels "
            + (f"hold <{im.pixels_data}>" if im.pixels_data else "have no <MetadataOnly/>"),
        )
    (res,) = walker.read(["OME"])
    series = None
    if isinstance(res, tuple):
        ome, _ = ome_section(res[2], res[0])
        raw = ome.get("series", res[2].get("series"))
        series = [s for s in raw if isinstance(s, str)] if isinstance(raw, list) else None
    n = len(xml.images)
    if "plate" in g.ome:
        fields = sum(1 for _ in xml.well_samples)
        if series is None:
            _add(
                walker,
                "bf2raw-plate-series",
                "OME",
                f"a plate without OME/series ({n} Image elements, {fields} WellSamples)",
            )
        elif len(series) != n:
            _add(
                walker,
                "bf2raw-xml-images",
                "OME",
                f"OME/series lists {len(series)} paths, the XML {n} Image elements",
            )
        return
    groups = series if series is not None else walker._numbered_groups(g.path)
    if n == 0 and groups:
        # an XML that describes no image at all (a placeholder) has no order to contradict:
        # it represents none of the collection, which the spec asks for with a SHOULD
        _add(
            walker,
            "bf2raw-xml-no-images",
            "OME",
            f"{XML_KEY} has no Image elements for the {len(groups)} images of the collection",
        )
    elif len(groups) != n:
        what = "OME/series lists" if series is not None else "the numbered groups are"
        _add(
            walker,
            "bf2raw-xml-images",
            "OME" if series is not None else "/",
            f"{what} {len(groups)} images, {XML_KEY} {n} Image elements",
        )
