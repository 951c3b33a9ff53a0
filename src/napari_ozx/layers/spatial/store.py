"""The reader's hook for a SpatialData store: its points and shapes, their tables, and
the record every layer of the store carries.

:func:`spatialdata_store_layers` is what :func:`napari_ozx.layers.reading.read_layer_data`
calls once the store's images and labels are read: the points and shapes layer data
(:mod:`.elements`), the tables on them (:mod:`.tables`), then
:func:`mark_spatialdata_layers` on every layer of the store, so the scene dock finds a
store of images and labels only too, and the reader knows when to dock it (a store in
more than one coordinate system). Nothing here stops the read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.provenance import LayerData
from napari_ozx.layers.spatial.elements import SPATIAL_KEY

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import OmeZarr

__all__ = [
    "element_store_tables",
    "enclosing_store",
    "mark_spatialdata_layers",
    "spatialdata_store_layers",
    "spatialdata_systems",
]


def spatialdata_systems(root: Any) -> list[str]:
    """The coordinate systems of the SpatialData store *root* (an opened
    :class:`~napari_ozx.ngff.read.open.OmeZarr`): the one its images are shown in first,
    then every other its images, labels, points and shapes are transformed to."""
    from napari_ozx.layers.spatial.elements import images_system
    from napari_ozx.ngff.spatial.elements import list_elements

    out = [images_system(root)]
    for el in list_elements(root, ("images", "labels", "shapes", "points")):
        out.extend(s for s in el.systems if s not in out)
    return out


def mark_spatialdata_layers(root: Any, layers: Sequence[LayerData]) -> None:
    """Give the layers of the SpatialData store *root* what the scene dock finds a store
    by (changed in place): its images' and labels' layers (found by their
    :class:`~napari_ozx.layers.provenance.LayerSource` node) get the ``SPATIAL_KEY``
    record its points and shapes have (store, element, kind, the system it is shown
    in), and every record lists the store's coordinate systems (``systems``)."""
    from napari_ozx.layers.provenance import LayerSource
    from napari_ozx.ngff.spatial.elements import list_elements

    systems = spatialdata_systems(root)
    source = str(root.source)
    raster = {el.path: el for el in list_elements(root, ("images", "labels"))}
    for _data, kwargs, _kind in layers:
        meta = kwargs.get("metadata")
        for m in meta if isinstance(meta, list) else [meta]:
            if not isinstance(m, dict):
                continue
            rec = m.get(SPATIAL_KEY)
            if isinstance(rec, dict):
                if rec.get("source") == source:
                    rec["systems"] = list(systems)
                continue
            src = LayerSource.from_metadata(m)
            el = raster.get(src.node or "") if src is not None and src.source == source else None
            if el is None:
                continue
            new: dict[str, Any] = {"source": source, "element": el.path, "kind": el.kind}
            if el.systems:  # where the reader shows it: its first system (``placement``)
                new["system"] = el.systems[0]
            m[SPATIAL_KEY] = {**new, "systems": list(systems)}


def spatialdata_store_layers(
    root: OmeZarr, report: Report, raster: Sequence[LayerData] = ()
) -> list[LayerData]:
    """The store's points and shapes as layer data, the tables on them as their
    ``features``, and every layer of the store (those and the already read images and
    labels, *raster*) marked with its record. Each problem is reported, naming what it
    concerns; nothing raises."""
    from napari_ozx.layers.spatial.elements import spatialdata_layers
    from napari_ozx.layers.spatial.tables import element_table_features

    layers = spatialdata_layers(root, report)
    if layers:
        try:
            element_table_features(root, layers, report)
        except OzxError as e:
            report(f"{root.source} (tables)", e)
    try:
        mark_spatialdata_layers(root, [*raster, *layers])
    except OzxError as e:
        report(f"{root.source} (coordinate systems)", e)
    return layers


def enclosing_store(path: str) -> tuple[str, str, str] | None:
    """``(store, "images" | "labels", element name)`` when the local directory *path*
    is an image or labels element of a SpatialData store (``<store>/labels/<name>``, the
    store's root attributes holding ``spatialdata_attrs``), else None. Local folders
    only (a remote element would cost a round trip more)."""
    import json
    from pathlib import Path

    from napari_ozx.ozx.remote import is_url

    if is_url(path):
        return None
    p = Path(path)
    if p.parent.name not in ("images", "labels"):
        return None
    store = p.parent.parent
    for name, nested in (("zarr.json", True), (".zattrs", False)):
        f = store / name
        try:
            if not f.is_file() or f.stat().st_size > 1 << 20:
                continue
            doc = json.loads(f.read_bytes())
        except (OSError, ValueError):
            return None
        attrs = doc.get("attributes") if nested and isinstance(doc, dict) else doc
        if isinstance(attrs, dict) and isinstance(attrs.get("spatialdata_attrs"), dict):
            return str(store), p.parent.name, p.name
        return None
    return None


def element_store_tables(path: str, layers: Sequence[LayerData], report: Report) -> None:
    """A labels element opened alone (*path*: ``<store>/labels/<name>``, its *layers*)
    gets the rows of its store's tables as ``features``, as when the store's root is
    opened (changed in place). Nothing for another path; problems reported."""
    found = enclosing_store(path)
    if found is None or found[1] != "labels" or not layers:
        return
    from napari_ozx.layers.tables import spatialdata_features
    from napari_ozx.ngff.read.open import open_ome_zarr

    store, _kind, name = found
    try:
        with open_ome_zarr(store) as root:
            spatialdata_features(root, {name: list(layers)}, report)
    except OzxError as e:
        report(f"{store} (tables)", e)
