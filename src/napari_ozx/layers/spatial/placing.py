"""Re-place an opened SpatialData store's layers in another of its coordinate systems.

The images and labels through the reader's :func:`~napari_ozx.layers.reading.placement`,
the points and shapes through their elements' transformations (their layers' metadata
names store and element): transforms only, no data read again. Qt-free: scripts call
:func:`place_spatialdata`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.layers.spatial.elements import SPATIAL_KEY, Report, _affine

logger = logging.getLogger(__name__)

__all__ = ["place_spatialdata"]


def place_spatialdata(
    layers: Sequence[Any], source: str, system: str, report: Report | None = None
) -> int:
    """Re-place the layers of the SpatialData store at *source* (its images, labels,
    points and shapes, as napari-ozx opened them) in coordinate system *system*, by
    their transforms only (metadata is read again, no data); returns how many moved. An
    element without a transformation to *system* is shown in its own coordinates and
    reported, naming it."""
    from napari_ozx.layers.provenance import LayerSource
    from napari_ozx.layers.reading import placement
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.spatial.elements import list_elements

    def log(what: str, err: OzxError) -> None:
        logger.warning("napari-ozx: %s: %s", what, err)

    report = report or log
    n = 0
    with open_ome_zarr(source) as root:
        elements = {
            el.path: el for el in list_elements(root, ("images", "labels", "shapes", "points"))
        }
        for layer in layers:
            meta = layer.metadata if isinstance(layer.metadata, Mapping) else {}
            rec = meta.get(SPATIAL_KEY)
            if isinstance(rec, Mapping) and rec.get("source") == str(root.source):
                el = elements.get(str(rec.get("element")))
                if el is None:
                    continue
                what = f"{root.source} ({el.kind} {el.name!r})"
                layer.affine = _affine(el, system, tuple(rec.get("axes", ("y", "x"))), report, what)
                layer.metadata = {**meta, SPATIAL_KEY: {**rec, "system": system}}
                n += 1
                continue
            src = LayerSource.of(layer)
            if src is None or src.source != str(root.source) or src.node not in elements:
                continue
            img = root.image(src.node)
            kw = placement(img.multiscale, system=system, report=report, what=src.node)
            ndim = len(kw["scale"])
            layer.affine = kw.get("affine", np.eye(ndim + 1))
            layer.scale = kw["scale"]
            layer.translate = kw["translate"]
            n += 1
    return n
