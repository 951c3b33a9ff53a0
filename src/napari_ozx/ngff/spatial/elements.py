"""A SpatialData store's elements, from metadata only.

A SpatialData store (scverse) is a Zarr group whose attributes hold ``spatialdata_attrs:
{"version": ...}`` (:func:`is_spatialdata`) and whose :data:`CONTAINERS` (``images/``,
``labels/``, ``points/``, ``shapes/``, ``tables/``) hold a group per element: images and
labels are OME-Zarr images, points a directory of parquet parts (``ngff:points``), shapes
GeoParquet (``ngff:shapes``) or format 0.1's ragged arrays, tables AnnData.
:func:`list_elements` lists them as :class:`Element` records (kind, name, attributes, format
version, coordinate systems); :func:`to_system` turns an element's transformation to a
named system into a matrix over given axis names; :func:`child_names` lists a group
(consolidated metadata, else a listing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from napari_ozx.errors import MetadataError, TransformError
from napari_ozx.ngff.read.documents import child_names, join_path

__all__ = [
    "CONTAINERS",
    "Element",
    "axis_names",
    "is_spatialdata",
    "list_elements",
    "ome_section",
    "spatialdata_version",
    "to_system",
]

#: the containers of a store, in the order a viewer adds their layers
CONTAINERS = ("images", "labels", "shapes", "points", "tables")
#: the ``encoding-type`` spatialdata writes for each non-raster kind
ENCODINGS = {"points": "ngff:points", "shapes": "ngff:shapes", "tables": "anndata"}


def ome_section(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The attributes that hold a node's OME metadata: Zarr v3 groups keep theirs under
    ``ome``, Zarr v2 groups at the top level."""
    ome = raw.get("ome")
    return ome if isinstance(ome, Mapping) else raw


def is_spatialdata(attributes: Mapping[str, Any]) -> bool:
    """Whether a root group's attributes make it a SpatialData store."""
    return isinstance(attributes.get("spatialdata_attrs"), Mapping)


def spatialdata_version(attributes: Mapping[str, Any]) -> str | None:
    """``spatialdata_attrs.version`` of a group (the store's or an element's)."""
    sd = attributes.get("spatialdata_attrs")
    v = sd.get("version") if isinstance(sd, Mapping) else None
    return str(v) if isinstance(v, str | int | float) else None


@dataclass(frozen=True)
class Element:
    """One element of a SpatialData store, as its metadata describes it."""

    kind: str  #: "images", "labels", "points", "shapes" or "tables"
    name: str
    path: str  #: the element group's path in the store
    attributes: Mapping[str, Any] = field(default_factory=dict, repr=False)
    zarr_format: int | None = None
    error: str | None = None  #: why its group cannot be read

    @property
    def encoding_type(self) -> str | None:
        v = self.attributes.get("encoding-type")
        return v if isinstance(v, str) else None

    @property
    def version(self) -> str | None:
        """The element's format version (``spatialdata_attrs.version``)."""
        return spatialdata_version(self.attributes)

    @property
    def spatialdata_attrs(self) -> Mapping[str, Any]:
        sd = self.attributes.get("spatialdata_attrs")
        return sd if isinstance(sd, Mapping) else {}

    @property
    def axes(self) -> tuple[str, ...]:
        """The element's axes (points and shapes: ``axes``; images: their multiscale's)."""
        raw = self.attributes.get("axes")
        if raw is None:
            ms = ome_section(self.attributes).get("multiscales")
            if isinstance(ms, list) and ms and isinstance(ms[0], Mapping):
                raw = ms[0].get("axes")
        return tuple(axis_names(raw))

    @property
    def raw_transforms(self) -> list[Mapping[str, Any]]:
        """The element's ``coordinateTransformations`` as stored (images and labels:
        their multiscale's)."""
        raw = self.attributes.get("coordinateTransformations")
        if raw is None:
            ms = ome_section(self.attributes).get("multiscales")
            if isinstance(ms, list) and ms and isinstance(ms[0], Mapping):
                raw = ms[0].get("coordinateTransformations")
        return [t for t in raw if isinstance(t, Mapping)] if isinstance(raw, list) else []

    @property
    def systems(self) -> tuple[str, ...]:
        """The coordinate systems the element is placed in (its transformations' outputs)."""
        out: list[str] = []
        for t in self.raw_transforms:
            name = _ref_name(t.get("output"))
            if name is not None and name not in out:
                out.append(name)
        return tuple(out)


def _ref_name(raw: object) -> str | None:
    if isinstance(raw, str):
        return raw or None
    if isinstance(raw, Mapping):
        n = raw.get("name")
        return n if isinstance(n, str) and n else None
    return None


def axis_names(raw: object) -> list[str]:
    """Axis names from a list of names or of ``{"name": ...}`` objects."""
    if not isinstance(raw, list):
        return []
    out = []
    for a in raw:
        name = a.get("name") if isinstance(a, Mapping) else a
        if isinstance(name, str):
            out.append(name)
    return out


def _ref_axes(raw: object) -> list[str]:
    return axis_names(raw.get("axes")) if isinstance(raw, Mapping) else []


def to_system(element: Element, system: str, axes: Sequence[str]) -> np.ndarray:
    """The homogeneous ``(n+1, n+1)`` matrix that places *element*'s coordinates, given
    in the order of *axes* (e.g. ``("y", "x")``), in coordinate system *system*, with
    the result in the same axis order. Axes are matched by name (a transformation's
    ``input`` / ``output`` objects list them); an axis the transformation does not map is
    left as it is. Raises :class:`TransformError` when the element has no linear
    transformation to *system*."""
    from napari_ozx.ngff.model.transforms import parse_transform

    n = len(axes)
    for raw in element.raw_transforms:
        if _ref_name(raw.get("output")) != system:
            continue
        where = f"{element.path}: transformation to {system!r}"
        t = parse_transform(raw, where=where)
        in_axes = _ref_axes(raw.get("input")) or list(element.axes)
        out_axes = _ref_axes(raw.get("output")) or in_axes
        m = t.matrix(len(in_axes))
        if m is None:
            raise TransformError(f"{where}: a {t.type} transformation is not linear")
        if m.shape != (len(out_axes) + 1, len(in_axes) + 1):
            raise TransformError(
                f"{where}: its matrix is {m.shape[0] - 1}x{m.shape[1] - 1}, "
                f"its axes {len(out_axes)} out and {len(in_axes)} in"
            )
        out = np.eye(n + 1)
        for i, a in enumerate(axes):
            if a not in out_axes:
                continue
            row = out_axes.index(a)
            out[i, :] = 0.0
            for j, b in enumerate(axes):
                if b in in_axes:
                    out[i, j] = m[row, in_axes.index(b)]
            out[i, n] = m[row, -1]
        return out
    have = ", ".join(repr(s) for s in element.systems) or "none"
    raise TransformError(
        f"{element.path}: no transformation to coordinate system {system!r} (it has {have})"
    )


def list_elements(root: Any, kinds: Sequence[str] = CONTAINERS) -> list[Element]:
    """Every element of the SpatialData store *root* (an
    :class:`~napari_ozx.ngff.read.open.OmeZarr`), container by container (:data:`CONTAINERS` order),
    names sorted; metadata only (the root's consolidated metadata when it has it, else listings)."""
    out: list[Element] = []
    for kind in kinds:
        names = sorted(n for n in child_names(root, kind) if n)
        try:
            paths = [join_path(kind, n, key=kind) for n in names]
        except MetadataError:
            continue
        for name, path, docs in zip(names, paths, root.read_docs(paths), strict=True):
            if docs is None:
                continue
            if docs.error is not None:
                out.append(Element(kind, name, path, error=str(docs.error)))
                continue
            if docs.node_type != "group":
                out.append(Element(kind, name, path, error="an array, not a group"))
                continue
            out.append(Element(kind, name, path, docs.attributes, docs.zarr_format))
    return out
