"""RFC-8 collections (draft) in the validator: the collection named as a draft, each
listed node checked for what the draft requires of it, and every image member under the
collection's root walked as an OME-Zarr image (every OME-Zarr rule applies to it).
"""

from __future__ import annotations

from typing import Any

from napari_ozx.ngff.model.collection import parse_collection
from napari_ozx.ngff.validate.rules import Rule

__all__ = ["COLLECTION_RULES", "check_collection"]

_RFC8 = "RFC-8 (collections, draft)"
COLLECTION_RULES = {
    "collection-draft": Rule(
        "warning",
        "RFC-8 is a draft: collections group nodes (images or collections), referenced by "
        "paths or inlined; the specification may still change.",
        f"{_RFC8} §Overview",
    ),
    "collection-node": Rule(
        "error",
        'Objects that implement `Node` have the fields "type" (required), "id", "name" '
        '(required) and "attributes"; a `Path` object has a "type" and a "path".',
        f"{_RFC8} §Node, §Path interface",
    ),
    "collection-member": Rule(
        "error",
        'The `"zarr"` type is used for paths that reference nodes in a Zarr array or group. '
        "Implementations MUST append `zarr.json` to the path to access the metadata of the "
        "referenced node.",
        f"{_RFC8} §Path interface",
    ),
}


def _add(walker: Any, code: str, node: str, message: str) -> None:
    walker.r.add(code, node, message, rules=COLLECTION_RULES)


def check_collection(walker: Any, g: Any) -> None:
    """The walker's hook for an RFC-8 collection root group *g*."""
    from napari_ozx.ngff.read.collection import member_location

    col = parse_collection(g.ome)
    images = col.images
    _add(
        walker,
        "collection-draft",
        g.path,
        f"RFC-8 collection {col.name!r}: {len(col.members)} nodes, {len(images)} images "
        "opened by napari-ozx",
    )
    for m in col.members:
        where = "/".join((*m.within, m.name))
        if m.type in ("invalid", "untyped") or m.name.startswith("nodes["):
            _add(walker, "collection-node", g.path, f"node {where!r} has no 'type' or 'name'")
    docs = walker.docs  # the opener (its source) or a plain store (its root folder)
    source = str(getattr(docs, "source", None) or getattr(getattr(docs, "store", None), "root", ""))
    for m in images:
        assert m.path is not None
        inside, _ = member_location(m.path, source)
        if inside is None:
            continue  # another hierarchy: `napari-ozx validate` it on its own
        (res,) = walker.read([inside])
        grp = walker.group(inside, res) if isinstance(res, tuple) else None
        if grp is None or "multiscales" not in grp.ome:
            _add(
                walker,
                "collection-member",
                inside,
                f"image node {m.name!r}: no OME-Zarr image at {m.path!r}",
            )
            continue
        walker.node(grp)
