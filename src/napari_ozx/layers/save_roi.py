"""Save the rectangles of a napari Shapes layer as a ROI table of the image they were drawn
over (Fractal / ngio table specification V1, ``tables/<name>``).

:func:`save_roi_table` writes a ``roi_table`` as ngio 1.1 writes one
(:func:`napari_ozx.ngff.tables.write.roi_table_keys`, in the image's Zarr format), so ngio
reads back the same boxes and napari-ozx reopens the same rectangles;
:func:`roi_columns_from_shapes` computes its columns (corners through both layers'
transforms to level-0 pixel edges, micrometres from the array origin, z from the stack or
the features, names from the features). Committed by one
:class:`~napari_ozx.layers.transaction.EditTransaction`; refused with one
:class:`~napari_ozx.layers.transaction.SaveBackError` (not a Shapes layer, empty, a shape that
is not an axis-aligned rectangle, an image not opened from a local file, an existing name
without ``overwrite``). Only ROI tables are written from napari.

The pixel conventions: ``docs/design/tables.md``; the commit: ``docs/design/saving.md``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from napari_ozx.layers.add_labels import local_image_target
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.transaction import SaveBackError, check_node_name, group_transaction, refusal
from napari_ozx.layers.writing import unique_name
from napari_ozx.ngff.read.documents import join_path

if TYPE_CHECKING:
    import pandas as pd
    from napari.layers import Image, Layer, Shapes

    from napari_ozx.layers.transaction import EditTransaction
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.read.open import OmeZarr

logger = logging.getLogger(__name__)

__all__ = ["roi_columns_from_shapes", "save_roi_table"]

#: a corner within this many pixels of the box's edge is on it (napari's float vertices)
_TOL = 1e-3
#: pixel positions are rounded to this many decimals
_DECIMALS = 4
_ORIGINAL = ("x_micrometer_original", "y_micrometer_original")


def _layer_name(layer: Layer) -> str:
    return str(getattr(layer, "name", None) or "shapes")


def _safe_name(name: str) -> str:
    """A layer name as a table name (what labels do with theirs)."""
    out = re.sub(r"[^\w.\-]+", "_", name.strip()).strip("_.")
    return out or "rois"


def save_roi_table(
    shapes_layer: Layer,
    image_layer: Image,
    name: str | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write the rectangles of *shapes_layer* as a ROI table of the image *image_layer* shows.

    The table goes into the ``tables/`` of the image *image_layer* was opened from, as ngio
    writes a ROI table (see the module).

    Parameters
    ----------
    shapes_layer : napari.layers.Shapes
        Axis-aligned rectangles, drawn over the image.
    image_layer : napari.layers.Image
        The image layer opened by napari-ozx: its :class:`LayerSource` names the file and
        image, its transform places the rectangles.
    name : str, optional
        The table's name (default: the layer's name, made safe for a path).
    overwrite : bool, default False
        Replace an existing table of that name (refused otherwise).

    Returns
    -------
    pathlib.Path
        The OME-Zarr file the table was written into.

    Raises
    ------
    SaveBackError
        Refused, nothing written: not a Shapes layer, an empty layer, a shape that is not
        an axis-aligned rectangle, an image not opened from a local file, an existing name.
    """
    sname = _layer_name(shapes_layer)
    if not (hasattr(shapes_layer, "shape_type") and hasattr(shapes_layer, "data")):
        raise SaveBackError(
            f"{sname!r} is not a Shapes layer: only rectangles of a Shapes layer become a "
            "ROI table (nothing was written)"
        )
    if len(shapes_layer.data) == 0:
        raise SaveBackError(
            f"the Shapes layer {sname!r} has no rectangles: draw the ROIs first "
            "(nothing was written)"
        )
    src, target = local_image_target(image_layer, f"ROIs {sname!r}", "open it with napari-ozx")
    table = name if name is not None else _safe_name(sname)
    return _save(shapes_layer, image_layer, src, target, table, overwrite)


# ----------------------------------------------------------------------- geometry


def _image_dims(image: OmeImage, image_layer: Image, target: Path) -> list[int]:
    """The image's axes (indices into its OME axes) that the image layer's dimensions are:
    all of them, or all but the channel axis (a layer per channel)."""
    ms = image.multiscale
    ndim = getattr(image_layer, "ndim", None)
    c = ms.channel_axis
    if ndim == ms.ndim:
        return list(range(ms.ndim))
    if c is not None and ndim == ms.ndim - 1:
        return [i for i in range(ms.ndim) if i != c]
    raise refusal(
        target,
        f"the image layer has {ndim} dimensions, the image {image.path or '/'!r} "
        f"{ms.ndim} ({', '.join(ms.axis_names)}): not the layer of this image",
    )


def _corners_in_image(
    shapes: Shapes, image_layer: Image, verts: np.ndarray, pad: float
) -> np.ndarray:
    """*verts* (a shape's vertices, the Shapes layer's data coordinates) in the image
    layer's data coordinates; world axes the Shapes layer lacks are set to *pad*."""
    out = []
    ndim = int(image_layer.ndim)
    for v in verts:
        w = np.asarray(shapes.data_to_world(v), dtype=float)
        if len(w) < ndim:
            w = np.concatenate([np.full(ndim - len(w), pad), w])
        out.append(np.asarray(image_layer.world_to_data(w), dtype=float))
    return np.asarray(out)


def roi_columns_from_shapes(
    shapes_layer: Shapes, image_layer: Image, image: OmeImage, target: Path | None = None
) -> tuple[list[str], dict[str, np.ndarray]]:
    """The ROI names and ngio's ROI columns (``x_micrometer`` ... ``len_z_micrometer``,
    and ``*_micrometer_original`` when the features have them) of *shapes_layer*'s
    rectangles drawn over *image_layer*, the napari layer of the opened
    :class:`~napari_ozx.ngff.read.open.Image` *image* (module doc). Raises
    :class:`SaveBackError` for a shape that is not an axis-aligned rectangle."""
    from napari_ozx.ngff.read.plate import yx_axes

    where = target or Path(str(getattr(image.root, "source", "")))
    sname = _layer_name(shapes_layer)
    ms = image.multiscale
    dims = _image_dims(image, image_layer, where)
    y, x = yx_axes(ms.axes)
    z = next((i for i, a in enumerate(ms.axis_names) if str(a).lower() == "z"), None)
    iy, ix = dims.index(y), dims.index(x)
    iz = dims.index(z) if z is not None and z in dims else None
    scale = [float(s) for s in ms.datasets[0].scale]
    shape0 = tuple(int(s) for s in image.arrays[0].shape)
    flat = int(shapes_layer.ndim) < int(image_layer.ndim)
    n = len(shapes_layer.data)
    start = np.zeros((n, 3))  # pixels (z, y, x), first edge
    length = np.zeros((n, 3))
    z_known = np.zeros(n, dtype=bool)
    types = list(shapes_layer.shape_type)
    for i, verts in enumerate(shapes_layer.data):
        label = f"shape {i} of {sname!r}"
        if types[i] != "rectangle":
            raise refusal(where, f"{label} is not a rectangle (it is a {types[i]} shape)")
        verts = np.asarray(verts, dtype=float)
        corners = _corners_in_image(shapes_layer, image_layer, verts, 0.0)
        if flat:  # other axes padded: y / x must not depend on them
            other = _corners_in_image(shapes_layer, image_layer, verts, 1.0)
            if not np.allclose(corners[:, [iy, ix]], other[:, [iy, ix]], atol=_TOL):
                raise refusal(
                    where,
                    f"the image layer's transformation mixes y / x with other axes: {label} "
                    "is no box of its pixels",
                )
        yx = corners[:, [iy, ix]]
        lo, hi = yx.min(axis=0), yx.max(axis=0)
        if (hi - lo < _TOL).any():
            raise refusal(where, f"{label} has no area in the image's y / x plane")
        on_edge = (np.abs(yx - lo) < _TOL) | (np.abs(yx - hi) < _TOL)
        combos = {(bool(abs(p[0] - lo[0]) < _TOL), bool(abs(p[1] - lo[1]) < _TOL)) for p in yx}
        if not on_edge.all() or len(combos) != 4:
            raise refusal(
                where,
                f"{label} is a rectangle rotated against the image's pixel grid; a ROI is "
                "an axis-aligned box",
            )
        if not flat:
            rest = [k for k in range(corners.shape[1]) if k not in (iy, ix)]
            if rest and not np.allclose(corners[:, rest], corners[0, rest], atol=_TOL):
                raise refusal(where, f"{label} does not lie in a y / x plane of the image")
            if iz is not None:
                start[i, 0] = float(np.round(corners[0, iz]))
                length[i, 0] = 1.0
                z_known[i] = True
        # napari keeps vertices as float32: a pixel edge drawn at 40 comes back as
        # 40.0000006; a ten-thousandth of a pixel is below anything drawn
        start[i, 1:] = np.round(lo + 0.5, _DECIMALS)
        length[i, 1:] = np.round(hi + 0.5, _DECIMALS) - start[i, 1:]
    features = getattr(shapes_layer, "features", None)
    cols: dict[str, np.ndarray] = {
        "x_micrometer": start[:, 2] * scale[x],
        "y_micrometer": start[:, 1] * scale[y],
    }
    if z is not None:
        zs, zl = start[:, 0] * scale[z], length[:, 0] * scale[z]
        whole = ~z_known
        zs[whole], zl[whole] = 0.0, shape0[z] * scale[z]
        fz, fl = _feature(features, "z_micrometer", n), _feature(features, "len_z_micrometer", n)
        if flat and fz is not None and fl is not None:
            ok = np.isfinite(fz) & np.isfinite(fl) & whole
            zs[ok], zl[ok] = fz[ok], fl[ok]
    else:  # as ngio writes a ROI without z
        zs, zl = np.zeros(n), np.ones(n)
    cols["z_micrometer"] = zs
    cols["len_x_micrometer"] = length[:, 2] * scale[x]
    cols["len_y_micrometer"] = length[:, 1] * scale[y]
    cols["len_z_micrometer"] = zl
    for c in _ORIGINAL:
        v = _feature(features, c, n)
        if v is not None and np.isfinite(v).all():
            cols[c] = v
    return _names(features, n), cols


def _feature(features: pd.DataFrame | None, column: str, n: int) -> np.ndarray | None:
    """A float feature column, or None (absent, or not numbers)."""
    if features is None or column not in getattr(features, "columns", ()):
        return None
    try:
        v = np.asarray(features[column], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return v if v.shape == (n,) else None


def _names(features: pd.DataFrame | None, n: int) -> list[str]:
    raw: Sequence[object] | None = None
    for col in ("name", "index"):
        if features is not None and col in getattr(features, "columns", ()):
            values = list(np.asarray(features[col], dtype=object))
            if len(values) == n:
                raw = values
                break
    names: list[str] = []
    seen: set[str] = set()
    for i in range(n):
        v = raw[i] if raw is not None else None
        text = "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
        names.append(unique_name(text or f"ROI_{i}", seen))
    return names


# ------------------------------------------------------------------------- writing


def _save(
    shapes: Shapes, image_layer: Image, src: LayerSource, target: Path, table: str, overwrite: bool
) -> Path:
    check_node_name(target, table, "table")
    tpath = join_path(src.node, "tables")
    action = f"saving ROIs {_layer_name(shapes)!r} into"
    with group_transaction(target, tpath, action) as (tx, oz):
        rows = _stage_table(tx, oz, shapes, image_layer, src.node, tpath, table, overwrite)
        tx.commit()
        _adopt(shapes, target, src.node, table, rows)
    logger.info("saved %d ROIs of %r into %s as %s/%s", rows, shapes.name, target, tpath, table)
    return target


def _stage_table(
    tx: EditTransaction,
    oz: OmeZarr,
    shapes: Shapes,
    image_layer: Image,
    image_node: str,
    tpath: str,
    table: str,
    overwrite: bool,
) -> int:
    """Stage the ROI table *table* of the rectangles of *shapes* (replacing one of that
    name when *overwrite*) and the tables group's document listing it; returns its rows."""
    from napari_ozx.ngff.tables.write import roi_table_keys, tables_group_keys

    image = oz.image(image_node)
    if image.meta.image_label is not None:
        raise refusal(tx.target, f"{image_node!r} is a label image; ROI tables go into an image")
    names, columns = roi_columns_from_shapes(shapes, image_layer, image, tx.target)
    zf = oz.zarr_format or 2
    (docs,) = oz.read_docs([tpath])
    attrs = dict(docs.attributes) if docs is not None and docs.error is None else None
    if docs is not None and docs.error is not None:
        raise refusal(tx.target, f"the image's tables group cannot be read: {docs.error}")
    listed = attrs.get("tables") if attrs is not None else None
    listed = list(listed) if isinstance(listed, list) else []
    node = join_path(tpath, table)
    if (table in listed or tx.exists_group(node)) and not overwrite:
        raise refusal(
            tx.target,
            f"a table {table!r} already exists in the image {image_node or '/'!r} "
            "(save with overwrite=True to replace it, or choose another name)",
        )
    tx.delete_prefix(node)  # an overwritten table is replaced as a whole
    for key, data in roi_table_keys(names, columns, zf).items():
        tx.put(join_path(node, key), data)
    if table not in listed:
        for key, doc in tables_group_keys(attrs, table, zf).items():
            tx.put(join_path(tpath, key), doc)
    return len(names)


def _adopt(layer: Layer, target: Path, node: str, table: str, rows: int) -> None:
    """The layer now says which table it is (a later save of it replaces that table)."""
    from napari_ozx.layers.tables import TABLE_KEY

    meta = dict(getattr(layer, "metadata", None) or {})
    meta[TABLE_KEY] = {  # the read table's z planes (for zoom_to_roi) no longer apply
        "source": str(target),
        "image": node,
        "table": table,
        "type": "roi_table",
        "backend": "anndata",
        "rows": rows,
    }
    layer.metadata = meta
