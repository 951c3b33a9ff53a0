"""Show an opened OME-Zarr 0.6 scene in another coordinate system.

A scene's layers (:func:`.reading.scene_layer_data`) carry the system they are placed in
(``LayerSource.scene_system``). :func:`place_scene` moves them to another system of the
scene by changing only their transforms (the metadata read again, no pixel): an image that
cannot reach the chosen system stays in its intrinsic one, reported. A SpatialData store's
layers (each names its store under ``SPATIAL_KEY``) are a scene too, re-placed through
:func:`~napari_ozx.layers.spatial.placing.spatialdata_placements` (elements without a
transformation to the system hidden, named in one message). Qt-free: the scene dock
(``_qt/scene.py``) and scripts call the same functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, Report, log_report
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.reading import (
    parse_system,
    placement,
    scene_systems,
    scene_to_world,
)
from napari_ozx.layers.spatial.elements import SPATIAL_KEY

if TYPE_CHECKING:
    from napari.layers import Layer

    from napari_ozx.layers.reading import Placement

__all__ = [
    "apply_placements",
    "layer_scene",
    "place_scene",
    "scene_placements",
    "scene_sources",
    "shown_system",
    "systems_of",
]

#: what :func:`scene_placements` gives per layer: a 0.6 scene's ``(layer, placement, new
#: LayerSource)``, a SpatialData store's ``(layer, what to set, None)``
Placed = tuple["Layer", "Placement", LayerSource] | tuple["Layer", dict[str, Any], None]


def _spatial_record(layer: Layer) -> Mapping[str, Any] | None:
    meta = layer.metadata if isinstance(layer.metadata, Mapping) else {}
    rec = meta.get(SPATIAL_KEY)
    return rec if isinstance(rec, Mapping) and isinstance(rec.get("source"), str) else None


def layer_scene(layer: Layer | None) -> tuple[str, str | None] | None:
    """``(source, system shown)`` of the scene *layer* belongs to: a 0.6 scene's layer,
    or any layer of a SpatialData store (system None while the layer is hidden
    for having no transformation to the system shown); None for any other layer."""
    from napari_ozx.layers.spatial.placing import HIDDEN_KEY

    if layer is None:
        return None
    src = LayerSource.of(layer)
    if src is not None and src.scene_system is not None:
        return src.source, src.scene_system
    rec = _spatial_record(layer)
    if rec is None:
        return None
    hidden = isinstance(layer.metadata, Mapping) and HIDDEN_KEY in layer.metadata
    system = rec.get("system")
    return str(rec["source"]), None if hidden or not isinstance(system, str) else system


def scene_sources(layers: Iterable[Layer]) -> list[str]:
    """The sources of the scenes *layers* show (one entry per scene, in layer order):
    0.6 scenes and SpatialData stores."""
    out: dict[str, None] = {}
    for layer in layers:
        found = layer_scene(layer)
        if found is not None:
            out.setdefault(found[0], None)
    return list(out)


def shown_system(layers: Iterable[Layer], source: str) -> str | None:
    """The coordinate system the scene at *source* is shown in (its layers say)."""
    for layer in layers:
        found = layer_scene(layer)
        if found is not None and found[0] == source and found[1] is not None:
            return found[1]
    return None


def systems_of(source: str) -> list[str]:
    """The coordinate systems the scene at *source* can be shown in, as text: ``name``
    for the scene's own, ``path:name`` for an image's (:func:`.reading.parse_system`);
    a SpatialData store's: every system its elements are transformed to."""
    from napari_ozx.layers.spatial.placing import spatialdata_systems
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(source) as root:
        if root.root.meta.kind == "spatialdata":
            return spatialdata_systems(root)
        return [f"{p}:{n}" if p else n for p, n in scene_systems(root)]


def _image_path(node: str) -> str:
    """The image a label image belongs to (``a/labels/cells`` -> ``a``), else *node*."""
    head, sep, _ = node.partition("/labels/")
    return head if sep else node


def scene_placements(
    layers: Iterable[Layer], source: str, system: str, report: Report | None = None
) -> list[Placed]:
    """What :func:`place_scene` sets on each layer of the scene at *source*:
    ``(layer, placement, new LayerSource)``, for a SpatialData store ``(layer, what to
    set, None)``. Reads metadata only and touches no layer, so a dock can run it off the
    GUI thread and apply the result on it."""
    from napari_ozx.layers.spatial.placing import spatialdata_placements
    from napari_ozx.ngff.read.open import open_ome_zarr

    report = report or log_report
    layers = list(layers)
    if any((rec := _spatial_record(ly)) is not None and rec["source"] == source for ly in layers):
        return [(ly, kw, None) for ly, kw in spatialdata_placements(layers, source, system, report)]
    target = parse_system(system)
    mine = [
        (ly, src)
        for ly in layers
        if (src := LayerSource.of(ly)) is not None
        and src.source == source
        and src.scene_system is not None
    ]
    out: list[Placed] = []
    if not mine:
        return out
    with open_ome_zarr(source) as root:
        if target not in scene_systems(root):
            raise OzxError(f"{source}: the scene has no coordinate system {system!r}")
        graph = root.transform_graph
        for layer, src in mine:
            image = root.image(_image_path(src.node))
            own = root.image(src.node) if src.node != image.path else image
            what = f"{source} ({src.node})"
            to_world = scene_to_world(graph, image, target, report, what)
            kw = placement(own.multiscale, to_world, report=report, what=what)
            out.append((layer, kw, dataclasses.replace(src, scene_system=system)))
    return out


def apply_placements(placements: Iterable[Placed]) -> int:
    """Set what :func:`scene_placements` computed (on napari's thread); returns the count."""
    from napari_ozx.layers.spatial.placing import apply_spatialdata_placements

    n = 0
    for layer, kw, src in placements:
        if src is None:
            n += apply_spatialdata_placements([(layer, dict(kw))])
            continue
        ndim = len(kw["scale"])
        layer.affine = kw.get("affine", np.eye(ndim + 1))
        layer.scale = kw["scale"]
        layer.translate = kw["translate"]
        layer.metadata = {**layer.metadata, **src.to_metadata()}
        n += 1
    return n


def place_scene(
    layers: Iterable[Layer], source: str, system: str, report: Report | None = None
) -> int:
    """Place the layers of the scene at *source* in *system* (e.g. ``"world"`` or
    ``"tileA:physical"``); returns how many moved. Layers whose image cannot reach
    *system* are shown in their intrinsic system and reported through *report*."""
    return apply_placements(scene_placements(layers, source, system, report))
