"""Show an opened OME-Zarr 0.6 scene in another coordinate system.

The layers of a scene (:func:`.reading.scene_layer_data`) carry the system they are
placed in (``LayerSource.scene_system``). :func:`place_scene` moves them to another
system of the same scene by changing only their transforms (``scale``, ``translate``,
``affine``): the hierarchy's metadata is read again (documents only), no pixel is. An
image that cannot reach the chosen system is shown in its own intrinsic system and
reported, never drawn where its metadata does not put it.

Qt-free: the scene dock (``_qt/scene.py``) and scripts call the same functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.reading import (
    Report,
    _log_report,
    parse_system,
    placement,
    scene_systems,
    scene_to_world,
)

if TYPE_CHECKING:
    from napari.layers import Layer

    from napari_ozx.layers.reading import Placement

__all__ = [
    "apply_placements",
    "place_scene",
    "scene_placements",
    "scene_sources",
    "systems_of",
]


def scene_sources(layers: Iterable[Layer]) -> list[str]:
    """The sources of the scenes *layers* show (one entry per scene, in layer order)."""
    out: dict[str, None] = {}
    for layer in layers:
        src = LayerSource.of(layer)
        if src is not None and src.scene_system is not None:
            out.setdefault(src.source, None)
    return list(out)


def systems_of(source: str) -> list[str]:
    """The coordinate systems the scene at *source* can be shown in, as text: ``name``
    for the scene's own, ``path:name`` for an image's (:func:`.reading.parse_system`)."""
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(source) as root:
        return [f"{p}:{n}" if p else n for p, n in scene_systems(root)]


def _image_path(node: str) -> str:
    """The image a label image belongs to (``a/labels/cells`` -> ``a``), else *node*."""
    head, sep, _ = node.partition("/labels/")
    return head if sep else node


def scene_placements(
    layers: Iterable[Layer], source: str, system: str, report: Report | None = None
) -> list[tuple[Layer, Placement, LayerSource]]:
    """What :func:`place_scene` sets on each layer of the scene at *source*:
    ``(layer, placement, new LayerSource)``. Reads metadata only and touches no layer,
    so a dock can run it off the GUI thread and apply the result on it."""
    from napari_ozx.ngff.read.open import open_ome_zarr

    report = report or _log_report
    target = parse_system(system)
    mine = [
        (ly, src)
        for ly in layers
        if (src := LayerSource.of(ly)) is not None
        and src.source == source
        and src.scene_system is not None
    ]
    out: list[tuple[Layer, Placement, LayerSource]] = []
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


def apply_placements(placements: Iterable[tuple[Layer, Placement, LayerSource]]) -> int:
    """Set what :func:`scene_placements` computed (on napari's thread); returns the count."""
    n = 0
    for layer, kw, src in placements:
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
