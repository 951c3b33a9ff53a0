"""Tables -> napari: ROI tables as Shapes layers, feature tables as labels ``features``.

What the reader does with an image's tables (listed and read by
:mod:`napari_ozx.ngff.tables.read`): each is listed in the image layer's metadata
(:data:`TABLES_KEY`); a small one is read when the image opens, a larger one when asked
for (:func:`napari_ozx.layers.reading.table_layer_data`). A ROI or masking ROI table becomes
a 2D (y, x) Shapes layer (:func:`roi_shapes_layer_data`: one rectangle per ROI as the
table has it, hidden above :data:`MANY_ROIS`); a feature table the ``features`` of the
labels layer its ``region`` names; a plate's condition table the ``features`` of its wells
layer (:func:`well_condition_points`). :func:`zoom_to_roi` and :func:`color_labels_by` act
on a viewer. A table that cannot be read is one report; the rest still opens.

Qt-free, napari not imported (plain tuples). Why ROI layers are 2D:
``docs/design/tables.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from napari_ozx.errors import OzxError, Report, TableError, log_report
from napari_ozx.layers.provenance import TABLE_KEY, LayerData
from napari_ozx.ngff.tables.read import (
    OPEN_MAX_ROWS,
    ROI_TYPES,
    TableData,
    TableInfo,
    image_roi_boxes,
    list_tables,
    read_table,
    roi_pixel_edges,
    spatialdata_tables,
)

if TYPE_CHECKING:
    from napari.layers import Labels, Layer, Shapes
    from napari.viewer import Viewer

    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ngff.read.plate import Overview
    from napari_ozx.ngff.tables.conditions import PlateConditions

logger = logging.getLogger(__name__)

__all__ = [
    "CONDITIONS_KEY",
    "MANY_ROIS",
    "TABLES_KEY",
    "TABLE_KEY",
    "condition_features",
    "labels_features",
    "merge_features",
    "roi_shapes_layer_data",
    "set_well_conditions",
    "well_condition_points",
    "zoom_to_roi",
]

#: the metadata key of an image layer listing the image's tables
TABLES_KEY = "napari_ozx_tables"
#: the metadata key of a plate's wells layer: the condition table its features show
CONDITIONS_KEY = "napari_ozx_conditions"
#: a ROI layer with more rectangles than this opens hidden (and without text)
MANY_ROIS = 50
#: the edge colour of ROI and masking ROI rectangles
ROI_COLORS = {"roi_table": "yellow", "masking_roi_table": "cyan"}


# ------------------------------------------------------------------------ ROI shapes


def _yx(image: OmeImage) -> tuple[int, int, list[int]]:
    """(y, x) axis indices of *image* among its non-channel axes, and those axes."""
    from napari_ozx.ngff.read.plate import yx_axes

    ms = image.multiscale
    keep = [i for i in range(ms.ndim) if i != ms.channel_axis]
    y, x = yx_axes(ms.axes)
    return keep.index(y), keep.index(x), keep


def roi_shapes_layer_data(
    table: TableData,
    image: OmeImage,
    image_kwargs: Mapping[str, object],
    report: Report | None = None,
) -> LayerData:
    """A ROI (or masking ROI) table of *image* as Shapes layer data: one rectangle per
    ROI, in a 2D (y, x) layer placed as the image is (*image_kwargs*: the
    image layer's ``scale`` / ``translate`` / ``affine`` / ``axis_labels`` / ``units``).

    A rectangle is the ROI itself, never the pixels it covers: the table's micrometres
    are pixel edges (:func:`~napari_ozx.ngff.tables.read.roi_pixel_edges`), napari draws
    pixel *i* from i - 0.5 to i + 0.5, so a ROI drawn, saved
    (:func:`~napari_ozx.layers.save_roi.save_roi_table`) and reopened is the rectangle
    drawn, on pixel edges or not (a ROI on them outlines its pixels of the image layer).
    """
    info = table.info
    boxes = image_roi_boxes(table, image)
    ms = image.multiscale
    iy, ix, keep = _yx(image)
    ay, ax = keep[iy], keep[ix]
    edge0, edge1 = roi_pixel_edges(table, ms.axis_names, ms.datasets[0].scale)
    y0, y1 = edge0[:, ay] - 0.5, edge1[:, ay] - 0.5
    x0, x1 = edge0[:, ax] - 0.5, edge1[:, ax] - 0.5
    data = [
        np.array([[a, b], [a, d], [c, d], [c, b]], dtype=float)
        for a, b, c, d in zip(y0, x0, y1, x1, strict=True)
    ]
    n = len(data)
    names = np.asarray([str(v) for v in table.index], dtype=object)
    features: dict[str, Any] = {"name": names}
    if info.type == "masking_roi_table":
        features["label"] = table.instances()
    for k, v in table.columns.items():
        features.setdefault(k, v)
    color = ROI_COLORS.get(str(info.type), "yellow")
    pick = [iy, ix]
    extent = [image.levels[0].shape[keep[i]] for i in pick]
    kwargs: dict[str, Any] = {
        "name": info.name,
        "ndim": 2,
        "shape_type": "rectangle",
        "edge_color": color,
        "face_color": "transparent",
        "edge_width": max(1.0, 0.004 * max(extent)),
        "features": features,
        "visible": n <= MANY_ROIS,
        "scale": tuple(_seq(image_kwargs, "scale")[i] for i in pick),
        "translate": tuple(_seq(image_kwargs, "translate")[i] for i in pick),
        "axis_labels": tuple(_seq(image_kwargs, "axis_labels")[i] for i in pick),
        "units": tuple(_seq(image_kwargs, "units")[i] for i in pick),
    }
    if 0 < n <= MANY_ROIS:
        kwargs["text"] = {"string": "{name}", "color": color, "anchor": "upper_left", "size": 9}
    affine = image_kwargs.get("affine")
    if affine is not None:
        sub = _yx_affine(np.asarray(affine, dtype=float), iy, ix)
        if sub is None:
            (report or log_report)(
                info.source,
                TableError(
                    "the image's transformation mixes y / x with other axes: its ROIs are "
                    "shown without it",
                    info.name,
                ),
            )
        else:
            kwargs["affine"] = sub
    meta: dict[str, Any] = {  # a provenance.TableOrigin (and the z planes below)
        "source": info.source,
        "image": info.image,
        "table": info.name,
        "path": info.path,
        "type": info.type,
        "backend": info.backend,
        "rows": n,
    }
    z = next((i for i, a in enumerate(ms.axis_names) if str(a).lower() == "z"), None)
    if z is not None and z in keep:
        sz = float(ms.datasets[0].scale[z])
        tz = float(ms.datasets[0].translation[z])
        middle = (boxes.start[:, z] + np.maximum(boxes.stop[:, z] - 1, boxes.start[:, z])) // 2
        meta["z_middle"] = (middle * sz + tz).tolist()  # each box's middle plane, in world
        meta["z_axis_from_end"] = len(keep) - keep.index(z)
    kwargs["metadata"] = {TABLE_KEY: meta}
    return (data, kwargs, "shapes")


def _yx_affine(m: np.ndarray, iy: int, ix: int) -> np.ndarray | None:
    """The y / x part of a napari affine over the image's axes, or None when the
    transformation mixes y or x with another axis."""
    d = m.shape[0] - 1
    others = [i for i in range(d) if i not in (iy, ix)]
    if others and (
        not np.allclose(m[np.ix_([iy, ix], others)], 0)
        or not np.allclose(m[np.ix_(others, [iy, ix])], 0)
    ):
        return None
    idx = [iy, ix, d]
    return m[np.ix_(idx, idx)]


# ------------------------------------------------------------------ labels features


def labels_features(table: TableData, region: str | None = None) -> dict[str, np.ndarray]:
    """A feature table (or any table with label values) as napari labels ``features``:
    ``index`` = the label value of each row (napari's convention), then the columns. With
    *region*, only the rows of that labels element (SpatialData)."""
    t = table.for_region(region) if region is not None else table
    out: dict[str, np.ndarray] = {"index": t.instances()}
    skip = {t.info.instance_key, t.info.region_key}
    for k, v in t.columns.items():
        if k not in skip and k != "index":
            out[k] = v
    return out


def _seq(kwargs: Mapping[str, object], key: str) -> Sequence[object]:
    """A per-axis entry (``scale``, ``units`` ...) of an image's layer keyword arguments."""
    return cast("Sequence[object]", kwargs[key])


def merge_features(
    existing: Mapping[str, Iterable[object]] | None, new: Mapping[str, Iterable[object]]
) -> dict[str, list[object] | np.ndarray]:
    """*new* features (with an ``index`` column), plus the columns of *existing* ones
    (an image-label's ``properties``) matched by ``index``; *new* wins a name both have."""
    out: dict[str, list[object] | np.ndarray] = {
        k: list(v) if not isinstance(v, np.ndarray) else v for k, v in new.items()
    }
    if not existing or "index" not in existing:
        return out
    where = {v: i for i, v in enumerate(existing["index"])}
    for k, col in existing.items():
        if k in out:
            continue
        vals = list(col)
        out[k] = [vals[where[v]] if v in where else None for v in out["index"]]
    return out


# ------------------------------------------------------------------ plate conditions


def condition_features(
    conditions: PlateConditions, wells: Sequence[str | None]
) -> dict[str, list[object]]:
    """A plate's conditions as napari ``features``, one row per entry of *wells* (well
    paths; None: a row that is no well): ``well`` (the path), then each condition column
    (a column named like one of napari-ozx's gets " (condition)" added). A well the table
    does not name has None; a well with several values has them joined ("rep2, rep9")."""
    from napari_ozx.ngff.tables.conditions import format_value

    out: dict[str, list[object]] = {"well": list(wells)}
    for column in conditions.columns:
        values = [
            conditions.wells.get(w.strip("/"), {}).get(column) if w is not None else None
            for w in wells
        ]
        if any(isinstance(v, tuple) for v in values):
            values = [None if v is None else format_value(v) for v in values]
        name = column if column not in ("well", "label", "index") else f"{column} (condition)"
        out[name] = values
    return out


def well_condition_points(
    ov: Overview,
    points: np.ndarray,
    points_kw: dict[str, Any],
    report: Report | None = None,
) -> np.ndarray:
    """The plate's wells layer (its row and column names, *points* / *points_kw*) with
    one more point per well when the plate has a condition table: centred on the well's
    tile, as large as the tile, invisible, with the well's path and conditions as
    ``features`` (:func:`condition_features`), so hovering a well puts
    "well: B/03, drug: DMSO, concentration: 0" in napari's status bar. The names keep
    their text; the wells have none. Returns the points; *points_kw* is changed in
    place. A condition table that cannot be read is reported; the plate still opens."""
    from napari_ozx.ngff.tables.conditions import plate_conditions

    plate = ov.plate
    if plate.kind != "plate":
        return points
    try:
        conditions = plate_conditions(plate)
    except OzxError as e:
        (report or log_report)(str(plate.oz.source), e)
        return points
    if conditions.table is None:
        return points
    wells = list(plate.wells)
    sy, sx = ov.yx_scale
    py, px = ov.pitch
    centres = np.array(
        [((w.row * py + (py - 1) / 2) * sy, (w.column * px + (px - 1) / 2) * sx) for w in wells],
        dtype=float,
    ).reshape(-1, 2)
    names = list(points_kw["features"]["label"])
    n = len(names)
    features = condition_features(conditions, [None] * n + [w.path for w in wells])
    points_kw["features"] = {"label": names + [None] * len(wells), **features}
    text = dict(points_kw.get("text") or {})
    text["string"] = {"array": names + [""] * len(wells), "default": ""}
    points_kw["text"] = text
    size = float(points_kw["size"])
    points_kw["size"] = np.array([size] * n + [min(sy * py, sx * px)] * len(wells), dtype=float)
    meta = dict(points_kw.get("metadata") or {})
    meta[CONDITIONS_KEY] = conditions.table.name
    points_kw["metadata"] = meta
    return np.concatenate([points.reshape(-1, 2), centres])


def set_well_conditions(layer: Layer, conditions: PlateConditions) -> bool:
    """Show another of the plate's condition tables on its wells layer (made by
    :func:`well_condition_points`): the layer's ``features`` become *conditions*' for
    its wells. False (nothing changed) for a layer without wells."""
    features = getattr(layer, "features", None)
    if features is None or "well" not in features or "label" not in features:
        return False
    wells = [w if isinstance(w, str) else None for w in features["well"].tolist()]
    new = condition_features(conditions, wells)
    layer.features = {"label": features["label"].tolist(), **new}
    meta = dict(layer.metadata)
    if conditions.table is not None:
        meta[CONDITIONS_KEY] = conditions.table.name
    layer.metadata = meta
    return True


# ------------------------------------------------------------------- the reader's hook


def _report_table(report: Report, source: str, info: TableInfo, reason: str) -> None:
    report(source, TableError(reason, info.name))


def _annotate(image_kwargs: dict[str, object], infos: Sequence[TableInfo], read: set[str]) -> None:
    listing = [{**i.to_dict(), "read": i.name in read} for i in infos]
    meta = image_kwargs.get("metadata")
    if isinstance(meta, list):
        image_kwargs["metadata"] = [{**m, TABLES_KEY: listing} for m in meta]
    elif isinstance(meta, dict):
        image_kwargs["metadata"] = {**meta, TABLES_KEY: listing}


def _set_features(lds: Sequence[LayerData], features: Mapping[str, Iterable[object]]) -> None:
    for _data, kw, _kind in lds:
        kw["features"] = merge_features(kw.get("features"), features)


def image_table_layers(
    root: OmeZarr,
    image: OmeImage,
    image_kwargs: dict[str, object],
    labels: Mapping[str, Sequence[LayerData]],
    report: Report | None = None,
) -> list[LayerData]:
    """The reader's hook for one image: its ROI tables as Shapes layer data (returned),
    its feature tables as the ``features`` of the labels layer data in *labels* (by label
    name; changed in place), and the listing in *image_kwargs*' metadata. Reads only the
    small tables (metadata first); never raises for a table."""
    report = report or log_report
    source = str(root.source)
    try:
        infos = list_tables(root, image.path)
    except TableError as e:
        report(source, TableError(e.reason, "", f"image {image.path!r}" if image.path else ""))
        return []
    if not infos:
        return []
    out: list[LayerData] = []
    read: set[str] = set()
    for info in infos:
        if info.error is not None:
            _report_table(report, source, info, info.error)
            continue
        wanted = info.is_roi or (info.type == "feature_table" and info.region in labels)
        if not wanted:
            continue
        if not info.small():
            logger.info(
                "%s: table %r (%s rows) is not read at open (more than %d rows or %d bytes)",
                source,
                info.name,
                "?" if info.rows is None else f"{info.rows:,}",
                OPEN_MAX_ROWS,
                info.nbytes or 0,
            )
            continue
        try:
            table = read_table(root, info)
            if info.type in ROI_TYPES:
                out.append(roi_shapes_layer_data(table, image, image_kwargs, report))
            else:
                _set_features(labels[str(info.region)], labels_features(table))
            read.add(info.name)
        except TableError as e:
            _report_table(report, source, info, e.reason)
    _annotate(image_kwargs, infos, read)
    return out


def spatialdata_features(
    root: OmeZarr, labels: Mapping[str, Sequence[LayerData]], report: Report | None = None
) -> None:
    """A SpatialData store's tables on its labels elements (*labels*: element name ->
    its layer data): each element gets the rows of the tables that annotate it."""
    from napari_ozx.layers.categories.colouring import add_uns_colors
    from napari_ozx.ngff.tables.read import category_colors

    report = report or log_report
    source = str(root.source)
    try:
        infos = spatialdata_tables(root)
    except TableError as e:
        report(source, e)
        return
    for info in infos:
        if info.error is not None:
            _report_table(report, source, info, info.error)
            continue
        targets = [r for r in info.regions if r in labels]
        if not targets or not info.small():
            continue
        try:
            table = read_table(root, info)
            colours = category_colors(root, info)
            for region in targets:
                _set_features(labels[region], labels_features(table, region))
                for _data, kw, _kind in labels[region]:
                    add_uns_colors(kw, colours)
        except TableError as e:
            _report_table(report, source, info, e.reason)


# ---------------------------------------------------------------------------- viewing


def zoom_to_roi(viewer: Viewer, layer: Shapes, row: int | str, margin: float = 0.1) -> None:
    """Centre *viewer* on one ROI of a ROI Shapes layer made by napari-ozx, and select it.

    The camera zooms so the ROI fills the canvas but for *margin*, and the z slider moves to
    the ROI's middle plane.

    Parameters
    ----------
    viewer : napari.Viewer
        The viewer showing *layer*.
    layer : napari.layers.Shapes
        A ROI layer made by napari-ozx (:func:`napari_ozx.table_layer_data` or the reader).
    row : int or str
        The ROI's position in the layer, or its name.
    margin : float, default 0.1
        The fraction of the canvas left around the ROI.

    Raises
    ------
    OzxError
        The layer has no such ROI.
    """
    names = (
        [str(v) for v in np.asarray(layer.features["name"])]
        if "name" in getattr(layer, "features", {})
        else []
    )
    if isinstance(row, str):
        if row not in names:
            raise OzxError(f"no ROI named {row!r} in layer {layer.name!r}")
        row = names.index(row)
    if not 0 <= row < len(layer.data):
        raise OzxError(f"layer {layer.name!r} has no ROI {row} (it has {len(layer.data)})")
    corners = np.array([layer.data_to_world(v) for v in np.asarray(layer.data[row])])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    ndim = viewer.dims.ndim
    first = ndim - corners.shape[1]  # the layer's axes are the viewer's last ones
    meta = layer.metadata.get(TABLE_KEY, {}) if isinstance(layer.metadata, Mapping) else {}
    z_middle, z_from_end = meta.get("z_middle"), meta.get("z_axis_from_end")
    if z_middle and isinstance(z_from_end, int) and ndim - z_from_end >= 0:
        viewer.dims.set_point(ndim - z_from_end, float(z_middle[row]))
    scene = getattr(viewer, "scene", None)
    camera = scene.camera if scene is not None else viewer.camera
    displayed = list(viewer.dims.displayed)
    centre = [
        (lo[d - first] + hi[d - first]) / 2 if d >= first else viewer.dims.point[d]
        for d in displayed
    ]
    camera.center = tuple(float(c) for c in centre)
    size = getattr(getattr(viewer, "canvas", None), "size", None)
    extent = [hi[d - first] - lo[d - first] for d in displayed[-2:] if d >= first]
    if size is not None and extent and min(extent) > 0:
        canvas = np.asarray(size, dtype=float)[-len(extent) :]
        camera.zoom = float((1 - margin) * np.min(canvas / np.asarray(extent)))
    layer.selected_data = {row}


def color_labels_by(
    layer: Labels, column: str, colormap: str = "viridis", limits: tuple[float, float] | None = None
) -> dict[int, tuple[float, float, float, float]]:
    """Colour a Labels layer's objects by one column of its ``features``.

    :func:`napari_ozx.color_by` on a Labels layer: each label value gets *colormap*'s
    colour of its value, scaled between *limits*; a categorical (text) column gets one
    colour per category (the table's ``uns`` colours, else scanpy's palette). Objects without a
    value (not in the table, or NaN) are grey; the background (0) stays transparent. The layer's
    ``colormap`` becomes the matching ``DirectLabelColormap``.

    Parameters
    ----------
    layer : napari.layers.Labels
        A labels layer whose ``features`` hold a feature table's measurements (and napari's
        ``index`` column of label values).
    column : str
        The feature to colour by.
    colormap : str, default "viridis"
        A napari colormap name.
    limits : tuple of float, optional
        The values mapped to the colormap's ends (default: the column's finite range).

    Returns
    -------
    dict
        The colours set: label value -> RGBA.

    Raises
    ------
    OzxError
        The layer has no such feature.
    """
    from napari_ozx.layers.categories.colouring import color_by, layer_kind

    if layer_kind(layer) != "labels":
        features = getattr(layer, "features", None)
        have = [str(c) for c in getattr(features, "columns", [])]
        raise OzxError(
            f"labels {getattr(layer, 'name', '?')!r} have no feature {column!r} to colour by "
            f"(features: {', '.join(have) or 'none'})"
        )
    color_by(layer, column, colormap=colormap, limits=limits)
    labels = np.asarray(layer.features["index"]).astype(np.int64)
    rgba = np.asarray(layer.colormap.map(labels), dtype=float)
    return {
        int(v): tuple(float(c) for c in rgba[i])  # type: ignore[misc]
        for i, v in enumerate(labels.tolist())
        if v != 0
    }
