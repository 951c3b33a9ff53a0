"""RFC-8 collections (draft, ome/ngff ``rfc/8/``): a root ``ome`` node of ``"type":
"collection"`` grouping other nodes, by ``Path`` object or inline, optionally placed by a
collection-level ``scene``.

:func:`~napari_ozx.ngff.model.metadata.is_collection_document` is the reader's claim;
:func:`parse_collection` walks the root's nodes (inline nested collections depth first) into a
:class:`Collection` of
:class:`Member` records: a ``multiscale`` node with a ``zarr`` path (relative or absolute) is an
image member, every other node is listed with the reason it is not opened.
:func:`scene_document` writes the collection's scene in OME-Zarr 0.6's form so the 0.6
scene machinery places the images. :data:`DRAFT_NOTE` is the one warning an opened
collection gives. Nothing here reads files. The rules read:
``docs/design/metadata-model.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DRAFT_NOTE",
    "Collection",
    "Member",
    "parse_collection",
    "scene_document",
]

#: the one warning of an opened RFC-8 collection
DRAFT_NOTE = (
    "RFC-8 collections are a draft of the OME-Zarr specification (it may still change): "
    "opened are the image nodes listed by a 'zarr' path, placed by the collection's scene"
)


@dataclass(frozen=True, slots=True)
class Member:
    """One node of a collection, as listed (nested collections' members carry the names
    of the collections they are in, ``within``)."""

    name: str
    type: str
    id: str | None = None
    path_type: str | None = None
    path: str | None = None
    within: tuple[str, ...] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_image(self) -> bool:
        """An image napari-ozx opens: a ``multiscale`` node with a ``zarr`` path."""
        return self.type == "multiscale" and self.path_type == "zarr" and bool(self.path)

    @property
    def why_not_opened(self) -> str | None:
        """Why a node is listed but not opened (``None`` for an image member)."""
        if self.is_image:
            return None
        if self.type == "multiscale" and self.path is None:
            return "an inline multiscale node (its levels in the collection's document)"
        if self.path_type == "json":
            return "a 'json' path (a node held in another JSON document)"
        if self.path_type is not None and self.path_type != "zarr":
            return f"a path of type {self.path_type!r}"
        if self.type == "collection":
            return "a collection without nodes"
        return f"a node of type {self.type!r}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.id is not None:
            out["id"] = self.id
        if self.path is not None:
            out["path"] = {"type": self.path_type, "path": self.path}
        if self.within:
            out["within"] = list(self.within)
        out["opened"] = self.is_image
        if not self.is_image:
            out["reason"] = self.why_not_opened
        return out


@dataclass(frozen=True, slots=True)
class Collection:
    """An RFC-8 collection root: its name, every node it lists (depth first) and its
    scene, as written."""

    name: str
    members: tuple[Member, ...]
    id: str | None = None
    coordinate_systems: tuple[Mapping[str, Any], ...] = ()
    transformations: tuple[Mapping[str, Any], ...] = ()

    @property
    def images(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.is_image)


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _members(nodes: object, within: tuple[str, ...], out: list[Member]) -> None:
    for i, raw in enumerate(nodes if isinstance(nodes, list) else []):
        if not isinstance(raw, Mapping):
            out.append(Member(f"nodes[{i}]", "invalid", within=within))
            continue
        name = _str(raw.get("name")) or f"nodes[{i}]"
        kind = _str(raw.get("type")) or "untyped"
        path = raw.get("path")
        ptype = _str(path.get("type")) if isinstance(path, Mapping) else None
        ppath = _str(path.get("path")) if isinstance(path, Mapping) else None
        attrs = raw.get("attributes")
        if kind == "collection" and isinstance(raw.get("nodes"), list):
            _members(raw["nodes"], (*within, name), out)  # an inline nested collection
            continue
        out.append(
            Member(
                name,
                kind,
                _str(raw.get("id")),
                ptype,
                ppath,
                within,
                attrs if isinstance(attrs, Mapping) else {},
            )
        )


def parse_collection(ome: Mapping[str, Any]) -> Collection:
    """The collection an ``ome`` object describes (:func:`.metadata.is_collection_document`)."""
    members: list[Member] = []
    _members(ome.get("nodes"), (), members)
    attrs = ome.get("attributes")
    scene = attrs.get("scene") if isinstance(attrs, Mapping) else None
    systems: tuple[Mapping[str, Any], ...] = ()
    transforms: tuple[Mapping[str, Any], ...] = ()
    if isinstance(scene, Mapping):
        cs, ts = scene.get("coordinateSystems"), scene.get("coordinateTransformations")
        systems = tuple(c for c in cs if isinstance(c, Mapping)) if isinstance(cs, list) else ()
        transforms = tuple(t for t in ts if isinstance(t, Mapping)) if isinstance(ts, list) else ()
    return Collection(
        _str(ome.get("name")) or "collection",
        tuple(members),
        _str(ome.get("id")),
        systems,
        transforms,
    )


def _ref(raw: object, col: Collection, resolve: Callable[[str], str | None]) -> Any:
    """An RFC-8 ``Reference`` as 0.6's ``{"name", "path"}`` (``None``: not resolvable)."""
    if not isinstance(raw, Mapping):
        return raw  # a bare name, or garbage for the parser to name
    rid, path = _str(raw.get("id")), raw.get("path")
    if isinstance(path, Mapping) and path.get("type") == "zarr" and _str(path.get("path")):
        where = resolve(str(path["path"]))
        return None if where is None else {"name": rid, "path": where}
    name = _str(raw.get("name"))
    member = next((m for m in col.images if m.id == rid), None) if name else None
    if member is not None and member.path is not None:  # {"id": node, "name": system}
        where = resolve(member.path)
        return None if where is None else {"name": name, "path": where}
    return {"name": rid or name}


def scene_document(
    col: Collection, resolve: Callable[[str], str | None]
) -> tuple[dict[str, Any], list[str]]:
    """The collection's scene in OME-Zarr 0.6's form, and what was left out of it.

    *resolve* maps a member's ``zarr`` path to the image group's path under the
    collection's root, or ``None`` where it is not under it; a transformation with such
    an end is left out (and named). Coordinate systems keep their ``axes``, named by
    their ``id``."""
    systems = [
        {"name": _str(c.get("id")) or _str(c.get("name")), "axes": c.get("axes")}
        for c in col.coordinate_systems
    ]
    kept, left = [], []
    for i, t in enumerate(col.transformations):
        src, dst = _ref(t.get("input"), col, resolve), _ref(t.get("output"), col, resolve)
        if src is None or dst is None:
            left.append(f"coordinateTransformations[{i}] ({t.get('type')})")
            continue
        kept.append({**t, "input": src, "output": dst})
    doc: dict[str, Any] = {"coordinateTransformations": kept}
    if systems:
        doc["coordinateSystems"] = systems
    return doc, left
