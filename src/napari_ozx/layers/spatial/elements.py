"""A SpatialData store's points and shapes as napari layer data, and its tables on them.

Points -> a Points layer of every point in napari's axis order, placed by the element's
transformation to the images' coordinate system (``affine``), the other columns as
``features``, coloured by ``feature_key`` in spatialdata-plot's palette
(:mod:`napari_ozx.layers.categories.palettes`; :func:`points_layer_data`); circles -> a Points
layer sized by diameter (:func:`circles_layer_data`); polygons -> a Shapes layer of every
ring (holes as outlines), or above :data:`SHAPES_LAYER_MAX` rings one Surface layer of
them (:mod:`.polygons`), said once (:func:`polygons_layer_data`); tables -> each element's
rows as its ``features`` (:mod:`.tables`). :func:`spatialdata_layers` does a whole store.
An element that cannot be shown is reported once, by name. Design notes:
``docs/design/spatialdata-layers.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, Report
from napari_ozx.layers.provenance import LayerData

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ngff.spatial.elements import Element
    from napari_ozx.ngff.spatial.points import PointsData
    from napari_ozx.ngff.spatial.shapes import Circles, Polygons

logger = logging.getLogger(__name__)

__all__ = [
    "SHAPES_LAYER_MAX",
    "SPATIAL_KEY",
    "circles_layer_data",
    "points_layer_data",
    "polygons_layer_data",
    "spatialdata_element_layers",
]

#: the key of a SpatialData element's record in ``layer.metadata``
SPATIAL_KEY = "napari_ozx_spatialdata"
#: a polygons element with more rings than this is shown as one Surface layer of its
#: outlines (napari's Shapes layer: ~3 ms per polygon, so about 1.5 s at this size)
SHAPES_LAYER_MAX = 500
#: the system SpatialData places elements in unless a store says otherwise
DEFAULT_SYSTEM = "global"


def _meta(root: OmeZarr, element: Element, system: str, **extra: Any) -> dict[str, Any]:
    return {
        SPATIAL_KEY: {
            "source": str(root.source),
            "element": element.path,
            "kind": element.kind,
            "system": system,
            **extra,
        }
    }


def element_affine(
    element: Element, system: str, axes: Sequence[str], report: Report, what: str
) -> np.ndarray:
    from napari_ozx.ngff.spatial.elements import to_system

    try:
        return to_system(element, system, axes)
    except OzxError as e:
        report(what, OzxError(f"{e}: shown in its own coordinates"))
        return np.eye(len(axes) + 1)


def _features_frame(table: Any) -> Any:
    """A pyarrow Table as the pandas DataFrame napari keeps (categories stay categories;
    numbers converted without a copy where arrow allows; arrow's temporaries given back)."""
    from napari_ozx.ngff.spatial.files import memory_pool, release_unused

    # one thread, malloc's pool: what arrow's own allocator frees, it partly keeps
    frame = table.to_pandas(split_blocks=True, use_threads=False, memory_pool=memory_pool())
    release_unused()
    return frame


def points_layer_data(root: OmeZarr, data: PointsData, system: str, report: Report) -> LayerData:
    el = data.element
    what = f"{root.source} (points {el.name!r})"
    features = _features_frame(data.features)
    kwargs: dict[str, Any] = {
        "name": el.name,
        "features": features,
        "affine": element_affine(el, system, data.axes, report, what),
        "axis_labels": data.axes,
        # float32 scalars: napari broadcasts them to one value per point in their dtype
        # (int 0 -> int64, a float -> float64); float32 is what vispy draws with and
        # halves those two arrays (15 MiB for 2,000,000 points)
        "size": np.float32(_point_size(data.coords)),
        "border_width": np.float32(0),
        # no antialiasing fringe: vispy draws each marker as a quad of its size plus 6 px
        # for it (8 x 8 px for a 2 px marker); without it, 2 x 2 px. Software OpenGL
        # (llvmpipe) then draws 2,000,000 zoomed-out points in about half the time, and
        # each point keeps its own colour instead of a blend of its neighbours'
        "antialiasing": 0,
        "metadata": _meta(root, el, system, points=len(data), axes=list(data.axes)),
        "ndim": len(data.axes),
    }
    key = data.feature_key
    if key is not None:
        import pandas as pd

        col = features[key]
        cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
        codes = cat.cat.codes.to_numpy()
        from napari_ozx.layers.categories.palettes import MISSING_RGBA, default_palette

        # spatialdata-plot's palette for that many categories (scanpy's lists)
        palette = np.vstack([default_palette(len(cat.cat.categories)), [MISSING_RGBA]])
        # a missing category (code -1) takes the last row: grey
        colours = np.take(palette.astype(np.float32), codes, axis=0, mode="wrap")
        kwargs["face_color"] = colours
        kwargs["metadata"][SPATIAL_KEY]["colour_by"] = key
        kwargs["metadata"][SPATIAL_KEY]["legend"] = {
            str(c): [float(x) for x in palette[i]] for i, c in enumerate(cat.cat.categories)
        }
    from napari_ozx.ngff.spatial.files import release_when_freed

    # napari copies the features and converts the colours: once it has built the layer
    # and these die, their memory goes back to the system (not kept by the allocators)
    release_when_freed(features, *([kwargs["face_color"]] if key is not None else []))
    return data.coords, kwargs, "points"


def lod_points_layers(
    root: OmeZarr, element: Element, system: str, report: Report
) -> list[LayerData]:
    """A points element above :data:`~.lod.LOD_MIN_POINTS` points: its overview and
    the Points layer of the points in view (:mod:`.lod`), placed in *system*."""
    import functools

    from napari_ozx.layers.spatial.lod import lod_layers_data
    from napari_ozx.ngff.spatial.points import points_rows

    what = f"{root.source} (points {element.name!r})"
    affine = element_affine(element, system, ("y", "x"), report, what)
    return lod_layers_data(
        root,
        element,
        system,
        report,
        functools.partial(_meta, root, element, system),
        affine,
        lambda extent: _spacing(extent, points_rows(root, element) or 1),
    )


def _spacing(extent: tuple[float, float, float, float], n: int) -> float:
    """Half the mean spacing of *n* points spread evenly over *extent* (y0, x0, y1, x1)."""
    h, w = extent[2] - extent[0], extent[3] - extent[1]
    area = float(np.prod([v for v in (h, w) if v > 0])) if (h > 0 or w > 0) else 0.0
    return float(np.sqrt(area / max(n, 1)) / 2) if area > 0 else 1.0


def _point_size(coords: np.ndarray) -> float:
    """A marker size that keeps points apart: half the mean spacing of *coords* spread
    evenly over their extent (a strided sample measures the extent)."""
    if not len(coords):
        return 1.0
    step = max(1, len(coords) // 100_000)
    ext = np.ptp(coords[::step, -2:], axis=0)
    area = float(np.prod(ext[ext > 0])) if np.any(ext > 0) else 0.0
    if not np.isfinite(area) or area <= 0:
        return 1.0
    return float(np.sqrt(area / len(coords)) / 2)


def circles_layer_data(root: OmeZarr, data: Circles, system: str, report: Report) -> LayerData:
    el = data.element
    what = f"{root.source} (shapes {el.name!r})"
    features: dict[str, Any] = {"instance_id": data.index, **data.features, "radius": data.radii}
    kwargs: dict[str, Any] = {
        "name": el.name,
        "features": features,
        "affine": element_affine(el, system, ("y", "x"), report, what),
        "axis_labels": ("y", "x"),
        "size": 2.0 * data.radii,
        "face_color": "#ffffff66",
        "border_width": 0,
        "metadata": _meta(root, el, system, shapes=len(data), geometry="circles", axes=["y", "x"]),
        "ndim": 2,
    }
    return data.centres, kwargs, "points"


def polygons_layer_data(root: OmeZarr, data: Polygons, system: str, report: Report) -> LayerData:
    el = data.element
    what = f"{root.source} (shapes {el.name!r})"
    affine = element_affine(el, system, ("y", "x"), report, what)
    meta = _meta(
        root, el, system, shapes=len(data), rings=data.n_rings, geometry="polygons", axes=["y", "x"]
    )
    g = data.geometry_of
    features: dict[str, Any] = {
        "instance_id": data.index[g],
        "part": data.part_of,
        "hole": data.ring_is_hole,
        **{k: np.asarray(v)[g] for k, v in data.features.items()},
    }
    if data.n_rings > SHAPES_LAYER_MAX:
        return _outlines_layer_data(data, affine, meta, features, report, what)
    from napari_ozx.layers.spatial.polygons import outline_width

    # a hole is an open path to napari: closed here, its last edge drawn too
    rings = [
        np.vstack([r, r[:1]]) if h and len(r) else r
        for r, h in zip(data.rings(), data.ring_is_hole.tolist(), strict=True)
    ]
    # napari's polygons have no holes: a polygon with holes is drawn as its outlines
    # (no fill, as in the outlines layer), so that its fill does not cover them
    hole = np.asarray(data.ring_is_hole, dtype=bool)
    holed = hole.copy()
    holed[:-1] |= hole[1:]  # a hole, or an outer ring followed by its holes
    face = np.tile(np.array([1.0, 1.0, 1.0, 0.2], dtype=np.float32), (len(hole), 1))
    face[holed, 3] = 0.0
    kwargs: dict[str, Any] = {
        "name": el.name,
        "shape_type": ["path" if h else "polygon" for h in hole.tolist()],
        "features": features,
        "affine": affine,
        "axis_labels": ("y", "x"),
        "face_color": face,
        "edge_color": "#ffff00",
        # outlines as wide as the outlines layer's: holes (paths) drawn, not covered
        "edge_width": outline_width(data.vertices, data.ring_offsets),
        "metadata": meta,
        "ndim": 2,
    }
    return rings, kwargs, "shapes"


def _outlines_layer_data(
    data: Polygons,
    affine: np.ndarray,
    meta: dict[str, Any],
    ring_features: dict[str, Any],
    report: Report,
    what: str,
) -> LayerData:
    """Every ring as one napari Surface mesh, one triangle per edge (closing edge
    included): star-shaped rings filled by a fan from their centre, bright at the ring
    and transparent at the centre, the others (holes and their polygons included) as
    outlines (:func:`~napari_ozx.layers.spatial.polygons.ring_mesh`)."""
    from napari_ozx.layers.spatial.polygons import ring_mesh

    vertices, faces, values, filled = ring_mesh(data.vertices, data.ring_offsets, data.ring_is_hole)
    n_filled = int(np.count_nonzero(filled))
    report(
        what,
        OzxError(
            f"{data.n_rings:,} polygon rings shown as one Surface layer, one triangle per "
            f"edge (every vertex and edge): {n_filled:,} filled from their centre, bright "
            f"at their edges; {data.n_rings - n_filled:,} as outlines (holes and their "
            f"polygons, rings not star-shaped); per-polygon features in the layer's "
            f"metadata: napari's Shapes layer takes seconds for more than "
            f"{SHAPES_LAYER_MAX:,}"
        ),
    )
    meta[SPATIAL_KEY]["representation"] = "outlines"
    meta[SPATIAL_KEY]["filled"] = filled
    meta[SPATIAL_KEY]["ring_offsets"] = data.ring_offsets
    meta[SPATIAL_KEY]["ring_features"] = {k: np.asarray(c) for k, c in ring_features.items()}
    kwargs: dict[str, Any] = {
        "name": data.element.name,
        "affine": affine,
        "axis_labels": ("y", "x"),
        # opaque yellow at the rings, transparent at the fans' centres: the image
        # shows through each cell; no depth test (a 2D layer over and under others)
        "colormap": {"colors": [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]], "name": "ozx_rings"},
        "blending": "translucent_no_depth",
        "contrast_limits": (0.0, 1.0),
        "shading": "none",
        "metadata": meta,
    }
    return (vertices, faces, values), kwargs, "surface"


def images_system(root: OmeZarr) -> str:
    """The coordinate system the store's images are shown in: their first one (each
    image's default), else spatialdata's default, ``global``."""
    from napari_ozx.ngff.spatial.elements import list_elements

    for el in list_elements(root, ("images", "labels")):
        if el.systems:
            return el.systems[0]
    return DEFAULT_SYSTEM


def spatialdata_element_layers(
    root: OmeZarr, report: Report, system: str | None = None
) -> tuple[list[LayerData], dict[str, LayerData]]:
    """Layer data for every shapes and points element of the SpatialData store *root*,
    and (element name -> layer data) of the shapes for their tables. Each element that
    cannot be shown is reported once, naming it."""
    from napari_ozx.layers.spatial import lod
    from napari_ozx.ngff.spatial.elements import list_elements
    from napari_ozx.ngff.spatial.files import SpatialDependencyError
    from napari_ozx.ngff.spatial.points import points_rows, read_points
    from napari_ozx.ngff.spatial.shapes import Circles, read_shapes

    system = system or images_system(root)
    out: list[LayerData] = []
    by_name: dict[str, LayerData] = {}
    missing_dependency = False
    for el in list_elements(root, ("shapes", "points")):
        what = f"{root.source} ({el.kind} {el.name!r})"
        if el.error is not None:
            report(what, OzxError(f"{el.kind} element {el.name!r} not shown: {el.error}"))
            continue
        try:
            if el.kind == "points" and (points_rows(root, el) or 0) > lod.LOD_MIN_POINTS:
                out.extend(lod_points_layers(root, el, system, report))
                continue
            if el.kind == "points":
                ld = points_layer_data(root, read_points(root, el), system, report)
            else:
                shp = read_shapes(root, el)
                if isinstance(shp, Circles):
                    ld = circles_layer_data(root, shp, system, report)
                else:
                    ld = polygons_layer_data(root, shp, system, report)
                by_name[el.name] = ld
        except SpatialDependencyError as e:
            if not missing_dependency:
                report(str(root.source), e)
            missing_dependency = True
            continue
        except OzxError as e:
            report(what, OzxError(f"{el.kind} element {el.name!r} not shown: {e}"))
            continue
        out.append(ld)
    return out, by_name


def spatialdata_layers(root: OmeZarr, report: Report, system: str | None = None) -> list[LayerData]:
    """The store's shapes and points as layer data (the reader's hook,
    :func:`.store.spatialdata_store_layers`, adds their tables); nothing here stops the
    read (each problem is reported, naming the element)."""
    try:
        layers, _shapes = spatialdata_element_layers(root, report, system)
    except OzxError as e:
        report(f"{root.source} (points and shapes)", e)
        return []
    if layers:
        from napari_ozx.ngff.spatial.files import release_unused

        release_unused()  # what arrow freed while reading (its allocator keeps it)
    return layers
