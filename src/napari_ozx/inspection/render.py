"""Plain-text and JSON renderings of the inspection's facts (``napari-ozx info``).

:func:`info_report` gathers, from one :class:`~.source.Inspection`, the facts the CLI
prints: the root's kind, each image with its axes, channels, labels, tables (from their
metadata: :mod:`napari_ozx.ngff.tables.read`) and the :class:`~.facts.ArrayFacts` of every
level, a plate's layout, the archive's facts and
RFC-9 verdict, and every problem found on the way. :func:`info_text` renders that report
for people; ``--json`` prints it as it is. The Qt inspector renders the same facts as
HTML, so the command line and the dock cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from napari_ozx.inspection._text import format_bytes, pretty_json, shape_text
from napari_ozx.inspection.source import Inspection
from napari_ozx.inspection.tables import TableDocs
from napari_ozx.inspection.tree import COLLECTION, IMAGE, LABEL_IMAGE, LABELS, LEVEL, TreeNode

if TYPE_CHECKING:
    from napari_ozx.ngff.model.metadata import Plate

__all__ = ["format_bytes", "info_report", "info_text", "pretty_json"]


def _image_nodes(insp: Inspection) -> list[TreeNode]:
    """The images a viewer would show: the root image, a collection's series or the
    label images of a ``labels`` group (as the reader does)."""
    root = insp.root
    if root.kind in (IMAGE, LABEL_IMAGE):
        return [root]
    if root.kind in (LABELS, COLLECTION):  # a collection, a scene, a SpatialData store
        return [n for n in insp.children(root) if n.kind in (IMAGE, LABEL_IMAGE)]
    return []


def _image_entry(insp: Inspection, node: TreeNode, problems: list[dict[str, Any]]) -> dict:
    read = insp.read(node.path)
    meta = read.meta if read is not None else None
    entry: dict[str, Any] = {"path": node.path or "/", "name": node.title}
    if meta is None or not meta.multiscales:
        return entry
    ms = meta.multiscales[0]
    if node.kind != LABEL_IMAGE and node.path.split("/")[-2:-1] != ["labels"]:
        entry["name"] = (
            ms.name
            or (meta.omero.name if meta.omero is not None else None)
            or (node.title if node.path else insp.name)
        )
    levels = []
    labels: list[str] = []
    for child in insp.children(node):
        if child.kind == LEVEL and child.level is not None:
            ds = ms.datasets[child.level]
            facts = insp.array_facts(child.path)
            level: dict[str, Any] = {"path": child.path}
            if facts is not None:
                level.update(facts.to_dict())
            level["scale"] = list(ds.scale)
            level["translation"] = list(ds.translation)
            if child.error or facts is None:
                level["error"] = child.error or "zarr cannot read this array's metadata"
                problems.append({"path": child.path, "error": level["error"]})
            levels.append(level)
        elif child.kind == LABELS:
            labels = [c.path.rsplit("/", 1)[-1] for c in insp.children(child)]
    entry.update(
        version=ms.version,
        axes=[_axis_entry(a) for a in ms.axes],
        levels=levels,
        channels=[c.label for c in meta.omero.channels] if meta.omero else [],
        labels=labels,
    )
    if node.kind != LABEL_IMAGE:
        entry["tables"] = _tables(insp, node.path)
    from napari_ozx.inspection.omexml import xml_entry  # bioformats2raw's OME-XML

    xml = xml_entry(insp, node.path) if node.kind != LABEL_IMAGE else None
    if xml is not None:
        entry["ome_xml"] = xml
    return entry


def _axis_entry(a: Any) -> dict[str, Any]:
    """One axis for ``info --json``: name, type, unit and, where it has one, its RFC-4
    ``orientation`` as written."""
    out: dict[str, Any] = {"name": a.name, "type": a.type, "unit": a.unit}
    if a.orientation is not None:
        out["orientation"] = a.orientation.to_json()
    return out


def _tables(insp: Inspection, image: str | None) -> list[dict[str, Any]]:
    """The tables of the image at *image* (``None``: a SpatialData store's root tables),
    from their metadata (Fractal / ngio table specification V1, SpatialData)."""
    from napari_ozx.errors import TableError
    from napari_ozx.ngff.tables.read import list_tables, spatialdata_tables

    try:
        docs = TableDocs(insp)
        infos = spatialdata_tables(docs) if image is None else list_tables(docs, image)
    except TableError as e:
        return [{"name": None, "error": e.reason}]
    return [i.to_dict() for i in infos]


def _plate_wells(insp: Inspection, plate: Plate) -> dict[str, Any]:
    """A plate's wells as its document lists them (path, row and column names), each
    with its conditions from the plate's condition table (one table read, no well
    document), and which table that is (or why it cannot be read)."""
    from napari_ozx.errors import OzxError
    from napari_ozx.ngff.tables.conditions import plate_conditions

    out: dict[str, Any] = {}
    conditions = None
    try:
        conditions = plate_conditions(TableDocs(insp), model=plate)
    except OzxError as e:
        out["conditions"] = {"error": str(e)}
    if conditions is not None and conditions.table is not None:
        out["conditions"] = {
            "table": conditions.table.name,
            "columns": list(conditions.columns),
            "matched_by": conditions.key,
            "unmatched_rows": conditions.unmatched,
        }
    wells = []
    for w in plate.wells:
        row = plate.rows[w.row] if 0 <= w.row < len(plate.rows) else None
        col = plate.columns[w.column] if 0 <= w.column < len(plate.columns) else None
        entry: dict[str, Any] = {"path": w.path, "row": row, "column": col}
        if conditions is not None and conditions.table is not None:
            cond = conditions.wells.get(w.path.strip("/"), {})
            entry["conditions"] = {
                c: list(v) if isinstance(v, tuple) else v for c, v in cond.items()
            }
        wells.append(entry)
    out["well_list"] = wells
    return out


def info_report(insp: Inspection) -> dict[str, Any]:
    """The facts ``napari-ozx info`` shows, JSON-able (metadata reads only)."""
    root = insp.read("")
    meta = root.meta if root is not None else None
    problems: list[dict[str, Any]] = []
    out: dict[str, Any] = {
        "source": insp.source,
        "zarr_format": insp.zarr_format,
        "kind": meta.kind if meta is not None else "invalid",
        "version": meta.version if meta is not None else None,
        "images": [],
    }
    if insp.root.error:
        problems.append({"path": "/", "error": insp.root.error})
    elif meta is not None and not meta.is_ome:
        # the validator calls it invalid too: info must not say "fine" about it
        problems.append(
            {"path": "/", "error": "no OME-Zarr metadata: a plain Zarr group, not OME-Zarr"}
        )
    if meta is not None and meta.plate is not None:
        p = meta.plate
        out["plate"] = {
            "name": p.name,
            "rows": list(p.rows),
            "columns": list(p.columns),
            "wells": len(p.wells),
            "field_count": p.field_count,
            "acquisitions": [a.id for a in p.acquisitions],
            # info reads the plate document alone (a screen has thousands of wells):
            # the wells and their fields are read by the reader, checked by validate
            "wells_read": False,
        }
    if meta is not None and meta.well is not None:
        out["well"] = {"fields": [im.path for im in meta.well.images]}
    image_nodes = _image_nodes(insp)
    if meta is not None and meta.collection is not None:  # RFC-8 (draft): its nodes
        out["collection"], image_nodes = _collection_entry(insp, meta.collection)
    for node in image_nodes:
        if node.error and node is not insp.root:
            problems.append({"path": node.path, "error": node.error})
        out["images"].append(_image_entry(insp, node, problems))
    if meta is not None and meta.kind == "spatialdata":
        out["tables"] = _tables(insp, None)
        from napari_ozx.inspection.spatialdata import spatialdata_facts

        out["spatialdata"] = spatialdata_facts(TableDocs(insp))  # every element, by kind
    elif meta is not None and meta.plate is not None:
        out["tables"] = _tables(insp, "")  # the plate's own (conditions, plate ROIs)
        out["plate"].update(_plate_wells(insp, meta.plate))
    archive = insp.archive()
    if archive is not None:
        out["archive"] = archive.to_dict()
        if archive.validation_error:
            problems.append({"path": "/", "error": f"RFC-9: {archive.validation_error}"})
    out["problems"] = problems
    return out


def _collection_entry(insp: Inspection, col: Any) -> tuple[dict[str, Any], list[TreeNode]]:
    """An RFC-8 collection's nodes for ``info`` (each with whether the reader opens it,
    or why not) and the tree nodes of its image members under the root."""
    from napari_ozx.ngff.read.collection import member_location

    nodes = []
    for m in col.members:
        entry = m.to_dict()
        if m.is_image:
            inside, elsewhere = member_location(m.path, insp.source)
            entry["location"] = inside if inside is not None else elsewhere
        nodes.append(entry)
    images = []
    for e in nodes:
        where = e.get("location")
        found = insp.find(where)[-1] if e["opened"] and where is not None else None
        if found is not None and found.path == where and found.kind in (IMAGE, LABEL_IMAGE):
            images.append(found)
    return {"name": col.name, "draft": "RFC-8", "nodes": nodes}, images


def _orientation_text(axes: Sequence[dict[str, Any]]) -> str:
    """``z inferior→superior, y anterior→posterior`` (RFC-4, low to high coordinates)."""
    from napari_ozx.ngff.model.orientation import Orientation

    parts = []
    for a in axes:
        o = Orientation.parse(a["orientation"])
        parts.append(f"{a['name']} {o.direction if o else a['orientation']}")
    return ", ".join(parts)


def info_text(report: dict[str, Any]) -> str:
    """:func:`info_report` for people."""
    lines = [f"{report['source']}: {report['kind']} (Zarr v{report['zarr_format']})"]
    if "archive" in report:
        a = report["archive"]
        rfc = a["rfc9"]
        verdict = (
            f"cannot validate ({rfc['validation_error']})"
            if rfc["validation_error"]
            else ("RFC-9 conformant" if rfc["ok"] else "NOT RFC-9 conformant")
            + f" ({rfc['error']} errors, {rfc['warning']} warnings)"
        )
        lines.append(
            f"  archive: {a['entries']:,} entries, {format_bytes(a['size'])}, "
            f"ZIP64 {'yes' if a['zip64'] else 'no'}, comment {a['comment']!r}; {verdict}"
        )
    if "plate" in report:
        p = report["plate"]
        lines.append(
            f"  plate {p['name'] or ''!r}: {len(p['rows'])} rows × {len(p['columns'])} columns, "
            f"{p['wells']} wells"
            + (f", {p['field_count']} fields per well" if p["field_count"] else "")
        )
        if not p.get("wells_read", True):
            lines.append(
                "  wells: as listed by the plate; their own metadata is not read here "
                "(napari reads a well when it is shown, napari-ozx validate reads them all)"
            )
        lines.extend(_conditions_text(p))
    if "well" in report:
        lines.append(f"  well: {len(report['well']['fields'])} fields")
    if "collection" in report:
        col = report["collection"]
        lines.append(f"  collection {col['name']!r} (RFC-8, draft): {len(col['nodes'])} nodes")
        for n in col["nodes"]:
            where = " / ".join([*n.get("within", []), n["name"]])
            path = n.get("path", {}).get("path", "inline")
            state = "opened" if n["opened"] else f"not opened: {n['reason']}"
            lines.append(f"    {where}  {n['type']}  {path}  ({state})")
    if "spatialdata" in report:
        from napari_ozx.inspection.spatialdata import spatialdata_lines

        lines.extend(spatialdata_lines(report["spatialdata"]))
    for img in report["images"]:
        if "axes" not in img:
            lines.append(f"  image {img['path']} {img['name']!r}: no multiscale metadata")
            continue
        axes = " ".join(
            f"{a['name']}[{a['unit']}]" if a["unit"] else a["name"] for a in img["axes"]
        )
        lines.append(
            f"  image {img['path']} {img['name']!r} OME-Zarr {img['version']}  axes: {axes}"
        )
        oriented = [a for a in img["axes"] if a.get("orientation")]
        if oriented:
            lines.append(f"    orientation: {_orientation_text(oriented)}")
        if img["channels"]:
            lines.append(f"    channels: {', '.join(str(c) for c in img['channels'])}")
        for lv in img["levels"]:
            lines.append("    " + _level_text(lv))
        if img["labels"]:
            lines.append(f"    labels: {', '.join(img['labels'])}")
        lines.extend("    " + _table_text(t) for t in img.get("tables", ()))
        if "ome_xml" in img:
            from napari_ozx.inspection.omexml import xml_text

            lines.extend("    " + line for line in xml_text(img["ome_xml"]))
    lines.extend("  " + _table_text(t) for t in report.get("tables", ()))
    for p in report.get("problems", ()):
        lines.append(f"  problem at {p['path']}: {p['error']}")
    return "\n".join(lines)


#: ``info`` (text) lists the conditions of at most this many wells (``--json``: all)
WELLS_LISTED = 24


def _conditions_text(plate: dict[str, Any]) -> list[str]:
    """The plate's condition table and the first wells' conditions, one line each."""
    from napari_ozx.ngff.tables.conditions import format_value

    c = plate.get("conditions")
    if not c:
        return []
    if "error" in c:
        return [f"  conditions: cannot be read: {c['error']}"]
    lines = [
        f"  conditions (table {c['table']}, wells by {c['matched_by']}): "
        + ", ".join(c["columns"])
        + (
            f"; {c['unmatched_rows']} row{' names' if c['unmatched_rows'] == 1 else 's name'}"
            " no well"
            if c["unmatched_rows"]
            else ""
        )
    ]
    wells = [w for w in plate.get("well_list", ()) if w.get("conditions")]
    for w in wells[:WELLS_LISTED]:
        values = ", ".join(
            f"{k}={format_value(tuple(v) if isinstance(v, list) else v)}"
            for k, v in w["conditions"].items()
        )
        lines.append(f"    {w['path']}: {values}")
    if len(wells) > WELLS_LISTED:
        lines.append(f"    … {len(wells) - WELLS_LISTED} more wells (--json lists every well)")
    return lines


def _level_text(lv: dict[str, Any]) -> str:
    if "shape" not in lv:
        return f"{lv['path']}: {lv.get('error', 'unreadable')}"
    shard = f" shards {shape_text(lv['shards'])}" if lv["shards"] else ""
    stored = (
        f" stored {format_bytes(lv['stored_bytes'])}"
        + (f" ({lv['nbytes'] / lv['stored_bytes']:.2f}:1)" if lv["stored_bytes"] else "")
        if "stored_bytes" in lv
        else ""
    )
    return (
        f"{lv['path']}: {shape_text(lv['shape'])} {lv['dtype']} chunks "
        f"{shape_text(lv['chunks'])}{shard} [{' → '.join(lv['codecs']) or 'no codecs'}] "
        f"scale {tuple(lv['scale'])}{stored}"
    )


def _table_text(t: dict[str, Any]) -> str:
    """One table of the listing: name, type, backend, rows, columns, region (or why it
    cannot be read)."""
    if t.get("name") is None:
        return f"tables: {t.get('error')}"
    if t.get("error"):
        return f"table {t['name']}: cannot be read: {t['error']}"
    rows = "? rows" if t.get("rows") is None else f"{t['rows']:,} rows"
    parts = [str(t.get("type") or "untyped"), str(t.get("backend")), rows]
    parts.append(f"{len(t.get('columns') or [])} columns")
    regions = t.get("regions") or ([t["region"]] if t.get("region") else [])
    if regions:
        parts.append("region " + ", ".join(regions))
    return f"table {t['name']}: {', '.join(parts)}"
