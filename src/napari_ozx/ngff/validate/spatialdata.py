"""SpatialData stores in the validator: the store named with its version, its raster
elements walked as OME-Zarr images (every OME-Zarr rule applies to them), its points and
shapes checked for the attributes spatialdata writes.

spatialdata (scverse) documents its on-disk format by its writers: a points element is
a group with ``encoding-type: "ngff:points"``, ``axes``, ``coordinateTransformations``
and ``spatialdata_attrs.version`` beside ``points.parquet``; a shapes element the same
with ``"ngff:shapes"`` beside ``shapes.parquet`` (format 0.2+) or ``coords`` and
``Index`` arrays (format 0.1, ``spatialdata_attrs.geos`` naming the geometry type).
"""

from __future__ import annotations

from typing import Any

from napari_ozx.errors import OzxError
from napari_ozx.ngff.validate.rules import Rule

__all__ = ["SPATIALDATA_RULES", "check_spatialdata"]

_SD = "SpatialData on-disk format (spatialdata 0.7)"
SPATIALDATA_RULES = {
    "spatialdata-store": Rule(
        "info",
        "A SpatialData store: a Zarr group whose attributes hold spatialdata_attrs "
        "(its format version); images and labels are OME-Zarr images, points, shapes and "
        "tables spatialdata's own elements.",
        f"{_SD} §SpatialData container",
    ),
    "spatialdata-element": Rule(
        "error",
        "Each element of images/, labels/, points/, shapes/ and tables/ is a Zarr group.",
        f"{_SD} §elements",
    ),
    "spatialdata-points": Rule(
        "error",
        'A points element has encoding-type "ngff:points", axes (x, y and optionally z), '
        "coordinateTransformations (input and output named, with axes), "
        "spatialdata_attrs.version, and points.parquet (part.N.parquet files) holding a "
        "column per axis.",
        f"{_SD} §points",
    ),
    "spatialdata-shapes": Rule(
        "error",
        'A shapes element has encoding-type "ngff:shapes", axes, '
        "coordinateTransformations, spatialdata_attrs.version, and shapes.parquet "
        "(GeoParquet, WKB geometry; format 0.2+) or coords and Index arrays with "
        "spatialdata_attrs.geos (format 0.1).",
        f"{_SD} §shapes",
    ),
}


#: OME-Zarr rules every store spatialdata writes breaks, by design of its format: omero
#: channels with a ``label`` only (no ``color`` nor ``window``), and its multiscales'
#: transformations to named coordinate systems (affine, sequence: 0.6's, under its
#: "0.5-dev-spatialdata" version). ``validate`` reports them; a viewer opening such a
#: store or one of its elements takes them as normal input and says nothing.
WRITTEN_BY_SPATIALDATA = frozenset({"omero-color", "omero-window", "transform-type"})


def _add(walker: Any, code: str, node: str, message: str) -> None:
    walker.r.add(code, node, message, rules=SPATIALDATA_RULES)


def check_spatialdata(walker: Any, g: Any) -> None:
    """The walker's hook for a SpatialData root group *g*."""
    from napari_ozx.ngff.read.documents import child_names
    from napari_ozx.ngff.spatial.elements import list_elements, spatialdata_version

    docs = walker.docs
    try:
        elements = list_elements(docs)
    except OzxError as e:
        elements = []
        _add(walker, "spatialdata-element", "/", f"the elements cannot be listed: {e}")
    counts: dict[str, int] = {}
    for el in elements:
        counts[el.kind] = counts.get(el.kind, 0) + 1
    sd = g.attrs.get("spatialdata_attrs", {})
    written = sd.get("spatialdata_software_version") if isinstance(sd, dict) else None
    summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no elements"
    _add(
        walker,
        "spatialdata-store",
        "/",
        f"SpatialData store, format {spatialdata_version(g.attrs)}"
        + (f" (written by spatialdata {written})" if written else "")
        + f": {summary}",
    )
    raster = [el.path for el in elements if el.kind in ("images", "labels") and el.error is None]
    walker.prefetch_images(raster)
    for el in elements:
        if el.error is not None:
            _add(
                walker, "spatialdata-element", el.path, f"{el.kind} element {el.name!r}: {el.error}"
            )
        elif el.kind in ("images", "labels"):
            (res,) = walker.read([el.path])
            if isinstance(res, tuple):
                grp = walker.group(el.path, res)
                if grp is not None:
                    walker.node(grp)
        elif el.kind in ("points", "shapes"):
            for why in element_problems(docs, el, child_names):
                _add(walker, f"spatialdata-{el.kind}", el.path, why)


def element_problems(docs: Any, el: Any, child_names: Any) -> list[str]:
    """What a points or shapes element lacks of the attributes spatialdata writes."""
    from napari_ozx.ngff.read.documents import join_path
    from napari_ozx.ngff.spatial.elements import to_system
    from napari_ozx.ngff.spatial.files import parquet_parts

    out: list[str] = []
    kind = el.kind
    want = "ngff:points" if kind == "points" else "ngff:shapes"
    if el.encoding_type != want:
        out.append(f"encoding-type is {el.encoding_type!r}, not {want!r}")
    axes = el.axes
    if not axes or not set(axes) <= {"x", "y", "z"} or not {"x", "y"} <= set(axes):
        out.append(f"axes {list(axes)!r} are not x, y (and z)")
    if el.version is None:
        out.append("spatialdata_attrs.version is missing")
    if not el.raw_transforms:
        out.append("coordinateTransformations is missing or empty")
    for system in el.systems:
        try:
            to_system(el, system, tuple(a for a in ("z", "y", "x") if a in axes))
        except OzxError as e:
            out.append(str(e))
    if kind == "points":
        if not parquet_parts(docs, join_path(el.path, "points.parquet")):
            out.append("points.parquet is missing")
    elif el.version == "0.1" or "geos" in el.spatialdata_attrs:
        names = set(child_names(docs, el.path))
        for arr in ("coords", "Index"):
            if arr not in names:
                out.append(f"the {arr} array is missing (shapes format 0.1)")
        if not isinstance(el.spatialdata_attrs.get("geos"), dict):
            out.append("spatialdata_attrs.geos is missing (shapes format 0.1)")
    elif not parquet_parts(docs, join_path(el.path, "shapes.parquet")):
        out.append("shapes.parquet is missing")
    return out
