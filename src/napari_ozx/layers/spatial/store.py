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

__all__ = ["mark_spatialdata_layers", "spatialdata_store_layers", "spatialdata_systems"]


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
