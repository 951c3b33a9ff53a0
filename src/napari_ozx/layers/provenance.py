"""Where a napari layer came from: :class:`LayerSource`, stored in ``layer.metadata``.

Every layer napari-ozx creates carries one record under :data:`METADATA_KEY`: the source
(path or URL), the node inside the hierarchy, the layer's kind and, for plates, which
plate / well / field; the plate navigator finds plates and the inspector follows the
active layer by it. It is a plain JSON-able ``dict`` read back tolerantly
(:meth:`LayerSource.from_metadata` returns ``None`` for someone else's, an older or a
damaged record, never raises). A layer made from a table carries a :class:`TableOrigin`
under :data:`TABLE_KEY` instead (the file, the image, the table), so the inspector shows
that table. No napari import: it works on anything with a ``metadata`` mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

__all__ = [
    "EDITABLE_KEY",
    "LEVEL_3D_KEY",
    "LOCKED_3D_KEY",
    "METADATA_KEY",
    "ROI_KEY",
    "TABLE_KEY",
    "LayerData",
    "LayerKind",
    "LayerSource",
    "TableOrigin",
    "plate_key",
    "plates_in",
]

#: napari-ozx's keys in ``layer.metadata``, all defined here and all starting with
#: ``napari_ozx``: the layer's :class:`LayerSource` record ...
METADATA_KEY = "napari_ozx"
#: ... True on labels whose data is an editable, saved-back array (layers.editable) ...
EDITABLE_KEY = "napari_ozx_editable"
#: ... an int set by the user: the level a multiscale layer renders from in 3D ...
LEVEL_3D_KEY = "napari_ozx_3d_level"
#: ... True while napari-ozx (not the user) holds the layer's 3D level ...
LOCKED_3D_KEY = "napari_ozx_locked_3d"
#: ... on a layer made from a table, its :class:`TableOrigin` record ...
TABLE_KEY = "napari_ozx_table"
#: ... and, on a crop of one ROI (layers.regions.crop), which ROI of which table and level
ROI_KEY = "napari_ozx_roi"

#: napari's layer data: (data, layer attributes, layer type)
LayerData = tuple[Any, dict[str, Any], str]

#: image / labels: a plain image or label image; plate-overview: the lazy picture of a
#: plate and its well-name points; well: a field (or its labels) of a plate's well
LayerKind = Literal["image", "labels", "plate-overview", "well"]
_KINDS: tuple[str, ...] = get_args(LayerKind)
_FORMAT = 1  # bumped when a field changes meaning; other formats are not ours to read


@dataclass(frozen=True)
class LayerSource:
    """The typed record of where a layer came from.

    ``node`` is the path of the layer's node in the hierarchy (``""`` is the root): the
    image or label image for ``image`` / ``labels`` / ``well`` layers, the plate (or well)
    group for ``plate-overview`` layers. Plate fields are set for plate-overview and well
    layers only.
    """

    source: str
    node: str = ""
    kind: LayerKind = "image"
    version: str | None = None  # OME-Zarr version of the node
    zarr_format: int | None = None
    levels: int = 1  # pyramid levels the layer shows
    channel: int | None = None  # index along the OME channel axis, when split by channel
    plate_id: str | None = None  # the live HcsPlate (ngff.plate.plate_by_id) when read
    plate_path: str | None = None  # the plate (or single well) group
    plate_name: str | None = None
    plate_kind: Literal["plate", "well"] | None = None
    well: str | None = None  # well path ("B/3")
    field_path: str | None = None  # the field image ("B/3/0")
    field_index: int | None = None  # field of the well; for an overview, the field shown
    acquisition: int | None = None  # for an overview: the acquisition it shows
    overview_level: int | None = None  # for an overview: the level of its tiles
    #: for a 0.6 scene's layers: the coordinate system they are placed in ("name" of the
    #: scene's own, "path:name" of an image's)
    scene_system: str | None = None
    #: the stored pyramid a multiscale layer shows, so a save keeps it (see
    #: :func:`napari_ozx.layers.reading.pyramid_record`): per level its array path, shape,
    #: scale factor and offset from level 0 (level-0 pixels) over the layer's axes, and
    #: the multiscale's ``type`` / ``metadata``
    pyramid: dict[str, Any] | None = field(default=None, compare=False)
    #: RFC-4: each oriented axis's ``orientation`` as written, by axis name
    #: (``{"y": {"type": "anatomical", "value": "anterior-to-posterior"}}``)
    orientation: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def is_plate(self) -> bool:
        """The layer belongs to a plate (its overview, or a well's field)."""
        return self.kind in ("plate-overview", "well") and self.plate_path is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": _FORMAT}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name in ("source", "node", "kind"):
                out[f.name] = value
        return out

    def to_metadata(self) -> dict[str, Any]:
        """``{METADATA_KEY: ...}``, to merge into a layer's metadata."""
        return {METADATA_KEY: self.to_dict()}

    @classmethod
    def from_dict(cls, data: object) -> LayerSource | None:
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            return None
        source, kind = data.get("source"), data.get("kind", "image")
        if not isinstance(source, str) or not source or kind not in _KINDS:
            return None
        kwargs: dict[str, Any] = {"source": source, "kind": kind}
        for name, types in _OPTIONAL.items():
            value = data.get(name)
            if value is None:
                continue
            if not isinstance(value, types) or isinstance(value, bool):
                return None  # damaged or foreign: not a record we can trust
            kwargs[name] = value
        if kwargs.get("plate_kind") not in (None, "plate", "well"):
            return None
        return cls(**kwargs)

    @classmethod
    def from_metadata(cls, metadata: object) -> LayerSource | None:
        """The record in a layer's *metadata*, or None (no record, or not one of ours)."""
        if not isinstance(metadata, Mapping):
            return None
        return cls.from_dict(metadata.get(METADATA_KEY))

    @classmethod
    def of(cls, layer: object) -> LayerSource | None:
        """The record of a napari layer (anything with ``metadata``), or None."""
        return cls.from_metadata(getattr(layer, "metadata", None))


_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "node": str,
    "version": str,
    "zarr_format": int,
    "levels": int,
    "channel": int,
    "plate_id": str,
    "plate_path": str,
    "plate_name": str,
    "plate_kind": str,
    "well": str,
    "field_path": str,
    "field_index": int,
    "acquisition": int,
    "overview_level": int,
    "scene_system": str,
    "pyramid": dict,
    "orientation": dict,
}


@dataclass(frozen=True)
class TableOrigin:
    """Where a table layer came from: the ``source`` (path or URL), the ``image`` it
    belongs to (its node path, ``""`` = the root), the ``table``'s name and, as the
    reader found them, its node ``path``, ``type``, ``backend`` and ``rows``.

    A plain dict under :data:`TABLE_KEY` (other keys, e.g. a ROI table's z planes, ride
    along); read back tolerantly, like :class:`LayerSource`."""

    source: str
    image: str
    table: str
    path: str | None = None
    type: str | None = None
    backend: str | None = None
    rows: int | None = None

    @property
    def node(self) -> str:
        """The table's node path in the hierarchy (``<image>/tables/<name>`` unless the
        reader recorded another)."""
        if self.path:
            return self.path
        return "/".join(p for p in (self.image.strip("/"), "tables", self.table) if p)

    @classmethod
    def from_metadata(cls, metadata: object) -> TableOrigin | None:
        """The record in a layer's *metadata*, or None (no record, or damaged)."""
        data = metadata.get(TABLE_KEY) if isinstance(metadata, Mapping) else None
        if not isinstance(data, Mapping):
            return None
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            value = data.get(f.name)
            required = f.name in ("source", "image", "table")
            want: type | tuple[type, ...] = int if f.name == "rows" else str
            if value is None and not required:
                continue
            if not isinstance(value, want) or isinstance(value, bool):
                return None
            kwargs[f.name] = value
        if not kwargs["source"] or not kwargs["table"]:
            return None
        return cls(**kwargs)

    @classmethod
    def of(cls, layer: object) -> TableOrigin | None:
        """The record of a napari layer (anything with ``metadata``), or None."""
        return cls.from_metadata(getattr(layer, "metadata", None))


def plates_in(layers: Iterable[object]) -> list[LayerSource]:
    """The plates (and single wells) shown by *layers* (e.g. ``viewer.layers``): one
    record per plate, from its first layer, in layer order. A plate is identified by its
    ``plate_id``, or by (source, plate path) when that is missing."""
    seen: set[tuple[str, ...]] = set()
    out: list[LayerSource] = []
    for layer in layers:
        src = LayerSource.of(layer)
        if src is None or not src.is_plate:
            continue
        key = plate_key(src)
        if key not in seen:
            seen.add(key)
            out.append(src)
    return out


def plate_key(src: LayerSource) -> tuple[str, ...]:
    """What identifies the plate of *src*: its ``plate_id`` (one per opening), else
    (source, plate path)."""
    if src.plate_id:
        return ("id", src.plate_id)
    return ("path", src.source, src.plate_path or "")
