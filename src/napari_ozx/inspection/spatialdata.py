"""A SpatialData store's facts for ``napari-ozx info``: its ``spatialdata_attrs``
version and every element (images, labels, shapes, points, tables) with its kind, size
and coordinate systems, from metadata (documents and parquet footers) only."""

from __future__ import annotations

from typing import Any

__all__ = ["spatialdata_facts", "spatialdata_lines"]


def _size(src: Any, el: Any) -> dict[str, Any]:
    from napari_ozx.ngff.read.documents import join_path
    from napari_ozx.ngff.spatial.elements import ome_section
    from napari_ozx.ngff.spatial.points import points_rows
    from napari_ozx.ngff.spatial.shapes import shapes_rows

    if el.kind == "points":
        return {"points": points_rows(src, el)}
    if el.kind == "shapes":
        return {"shapes": shapes_rows(src, el)}
    if el.kind == "tables":
        (obs,) = src.read_docs([join_path(el.path, "obs", "_index")])
        shape = obs.document.get("shape") if obs is not None else None
        return {"rows": int(shape[0]) if isinstance(shape, list) and shape else None}
    ms = ome_section(el.attributes).get("multiscales")
    first = ms[0] if isinstance(ms, list) and ms and isinstance(ms[0], dict) else {}
    ds = first.get("datasets") if isinstance(first, dict) else None
    if not isinstance(ds, list) or not ds or not isinstance(ds[0], dict):
        return {}
    (level,) = src.read_docs([join_path(el.path, str(ds[0].get("path", "0")))])
    shape = level.document.get("shape") if level is not None else None
    return {"shape": list(shape) if isinstance(shape, list) else None, "levels": len(ds)}


def spatialdata_facts(src: Any) -> dict[str, Any]:
    """``{"version", "software_version", "elements": [...]}`` of the store *src* (an
    ``OmeZarr`` or any document reader with a ``store``)."""
    from napari_ozx.ngff.spatial.elements import list_elements

    (root,) = src.read_docs([""])
    attrs = root.attributes if root is not None else {}
    sd = attrs.get("spatialdata_attrs") if isinstance(attrs, dict) else None
    sd = sd if isinstance(sd, dict) else {}
    elements = []
    for el in list_elements(src):
        entry: dict[str, Any] = {"kind": el.kind, "name": el.name, "path": el.path}
        if el.error is not None:
            entry["error"] = el.error
        else:
            if el.version is not None:
                entry["format_version"] = el.version
            if el.kind != "tables":
                entry["coordinate_systems"] = list(el.systems)
            try:
                entry.update(_size(src, el))
            except Exception as e:  # a fact we cannot read must not hide the others
                entry["error"] = f"{type(e).__name__}: {e}"
            if el.kind == "tables":
                region = el.attributes.get("region")
                entry["annotates"] = [region] if isinstance(region, str) else region
        elements.append(entry)
    return {
        "version": sd.get("version"),
        "software_version": sd.get("spatialdata_software_version"),
        "elements": elements,
    }


def spatialdata_lines(facts: dict[str, Any]) -> list[str]:
    """The facts for people (``napari-ozx info``)."""
    written = (
        f", written by spatialdata {facts['software_version']}"
        if facts.get("software_version")
        else ""
    )
    lines = [f"  SpatialData store (format {facts.get('version')}{written})"]
    for e in facts["elements"]:
        size = ""
        for key in ("points", "shapes", "rows"):
            if e.get(key) is not None:
                size = f"{e[key]:,} {key}"
        if e.get("shape") is not None:
            size = "x".join(str(n) for n in e["shape"])
        systems = ", ".join(e.get("coordinate_systems", []))
        where = f" in {systems}" if systems else ""
        if e.get("annotates"):
            where = f" annotating {', '.join(map(str, e['annotates']))}"
        err = f" ({e['error']})" if e.get("error") else ""
        kind = {"images": "image", "tables": "table"}.get(e["kind"], e["kind"])
        lines.append(f"    {kind} {e['name']}: {size}{where}{err}".rstrip())
    return lines
