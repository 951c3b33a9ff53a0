"""Re-place an opened SpatialData store's layers in another of its coordinate systems.

The images and labels through the reader's :func:`~napari_ozx.layers.reading.placement`,
the points and shapes through their elements' transformations (every layer of the store
names store and element in its metadata, :mod:`.store`): transforms only, no data read
again.

An element with no transformation to the chosen system has no place in it (SpatialData's
own rule: an element belongs to the systems it is transformed to), so its layers are
hidden, all of them named in one message, and shown again, placed, when a system they
have is chosen. Qt-free: scripts call :func:`place_spatialdata`; the scene dock computes
:func:`spatialdata_placements` off napari's thread and applies them on it
(:func:`apply_spatialdata_placements`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.spatial.elements import SPATIAL_KEY, element_affine
from napari_ozx.layers.spatial.store import spatialdata_systems

logger = logging.getLogger(__name__)

__all__ = [
    "HIDDEN_KEY",
    "apply_spatialdata_placements",
    "place_spatialdata",
    "spatialdata_placements",
    "spatialdata_systems",
]

#: ``layer.metadata`` key of a layer hidden because its element has no transformation
#: to the system shown (the value: that system); only such layers are shown again
HIDDEN_KEY = "napari_ozx_spatialdata_hidden"

#: ``(layer, what to set: affine, scale, translate, visible, metadata)``
Placed = tuple[Any, dict[str, Any]]


def _log(what: str, err: OzxError) -> None:
    logger.warning("napari-ozx: %s: %s", what, err)


def spatialdata_placements(
    layers: Sequence[Any], source: str, system: str, report: Report | None = None
) -> list[Placed]:
    """What :func:`place_spatialdata` sets on each layer of the store at *source*; reads
    metadata only and touches no layer (a dock runs it off napari's thread). The layers
    of elements with no transformation to *system* are hidden, named in one message."""
    from napari_ozx.layers.provenance import LayerSource
    from napari_ozx.layers.reading import placement
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.spatial.elements import list_elements

    report = report or _log
    out: list[Placed] = []
    hidden: dict[str, str] = {}  # element path -> what it is and where it is
    with open_ome_zarr(source) as root:
        elements = {
            el.path: el for el in list_elements(root, ("images", "labels", "shapes", "points"))
        }
        for layer in layers:
            meta = layer.metadata if isinstance(layer.metadata, Mapping) else {}
            raw = meta.get(SPATIAL_KEY)
            rec = (
                raw if isinstance(raw, Mapping) and raw.get("source") == str(root.source) else None
            )
            src = LayerSource.of(layer) if rec is None else None
            if rec is not None:
                el = elements.get(str(rec.get("element")))
            elif src is not None and src.source == str(root.source):
                el = elements.get(src.node)
            else:
                continue
            if el is None:
                continue
            what = f"{root.source} ({el.kind} {el.name!r})"
            if el.systems and system not in el.systems:
                hidden[el.path] = f"{el.kind} {el.name!r} (in {', '.join(map(repr, el.systems))})"
                out.append((layer, {"visible": False, "metadata": {**meta, HIDDEN_KEY: system}}))
                continue
            new_meta = {k: v for k, v in meta.items() if k != HIDDEN_KEY}
            kw: dict[str, Any] = {"metadata": new_meta}
            if HIDDEN_KEY in meta:
                kw["visible"] = True
            if rec is not None:
                new_meta[SPATIAL_KEY] = {**rec, "system": system}
            if el.kind not in ("images", "labels"):
                axes = tuple(rec.get("axes", ("y", "x")) if rec is not None else ("y", "x"))
                kw["affine"] = element_affine(el, system, axes, report, what)
            else:
                # level 0 to the image's own system, then the element's transformation
                # matched by axis name (spatialdata writes an affine's outputs as x, y)
                ms = root.image(el.path).multiscale
                pl = placement(ms, system=ms.intrinsic, report=report, what=what)
                c = ms.channel_axis
                axes = tuple(a.name for i, a in enumerate(ms.axes) if i != c)
                kw["affine"] = element_affine(el, system, axes, report, what)
                kw["scale"] = pl["scale"]
                kw["translate"] = pl["translate"]
            out.append((layer, kw))
    if hidden:
        names = ", ".join(hidden.values())
        report(
            str(source),
            OzxError(
                f"no transformation to coordinate system {system!r}: hidden while it is "
                f"shown: {names}"
            ),
        )
    return out


def apply_spatialdata_placements(placements: Iterable[Placed]) -> int:
    """Set what :func:`spatialdata_placements` computed (on napari's thread); returns
    how many layers it placed or hid."""
    n = 0
    for layer, kw in placements:
        for key in ("affine", "scale", "translate", "metadata", "visible"):
            if key in kw:
                setattr(layer, key, kw[key])
        n += 1
    return n


def place_spatialdata(
    layers: Sequence[Any], source: str, system: str, report: Report | None = None
) -> int:
    """Re-place the layers of the SpatialData store at *source* (its images, labels,
    points and shapes, as napari-ozx opened them) in coordinate system *system*, by
    their transforms only (metadata is read again, no data); returns how many layers it
    placed or hid. The layers of an element without a transformation to *system* are
    hidden (shown again by a later call with a system they have), all of them named in
    one message through *report*."""
    return apply_spatialdata_placements(spatialdata_placements(layers, source, system, report))
