"""Save the rectangles of a napari Shapes layer as a ROI table of the image they were drawn
over (Fractal / ngio table specification V1, ``tables/<name>``).

:func:`save_roi_table` writes a ``roi_table`` as ngio 1.1 writes one with its default
AnnData backend (:func:`napari_ozx.ngff.tables.write.roi_table_keys`, in the image's Zarr
format: v2 for OME-Zarr 0.4, v3 for 0.5 / 0.6), so ngio reads it back with the same boxes:

* each rectangle's corners are taken to the world (the Shapes layer's own transform) and
  into the image layer's level-0 pixels (its transform, the inverse of how napari-ozx
  places an image); the table's micrometres are pixel *edges* from the array origin
  (ngio's convention: pixel *i* spans i .. i + 1) where napari centres pixel *i* on i
  (it spans i - 0.5 .. i + 0.5), so a corner at pixel coordinate ``c`` is the edge
  ``c + 0.5``; any corner, on a pixel edge or between two, is saved as drawn, and
  napari-ozx reopens the table as the same rectangles
  (:func:`~napari_ozx.layers.tables.roi_shapes_layer_data`);
* ``x_micrometer`` / ``len_x_micrometer`` (and y) are those pixels times the image's
  level-0 pixel size, **relative to the array origin** (the image's OME translation is not
  added: ngio ignores it when it maps a ROI to pixels), in the axes' own unit as ngio uses
  it;
* z: a 2D Shapes layer's rectangles cover the whole z stack (``z_micrometer`` 0,
  ``len_z_micrometer`` the stack's depth), unless the layer's ``features`` carry finite
  ``z_micrometer`` / ``len_z_micrometer`` (a layer read from a ROI table: its rows keep
  their z); a rectangle of an nD layer covers the z plane it was drawn on. Without a z
  axis, 0 and 1, as ngio writes a ROI without z;
* the ROI names (the table's ``FieldIndex``) are the ``features``' ``name`` column, else
  its ``index`` column, else ``ROI_0``, ``ROI_1`` ...; a repeated name gets ``_2``,
  ``_3`` ...; ``x_micrometer_original`` / ``y_micrometer_original`` (stage positions) are
  kept when the features have them.

Atomic, like :func:`~napari_ozx.layers.add_labels.add_labels_to_image`: in a directory
the table is written under a hidden temporary name inside ``tables/`` and renamed into
place (an overwritten table swapped), then the ``tables`` group document replaced
(temporary file + rename); an ``.ozx`` is rebuilt beside itself, every other member copied
byte for byte, metadata first in RFC-9's order, then renamed onto the old file. A failure
leaves the file as it was and nothing beside it.

Refused with one :class:`~napari_ozx.layers.saveback.SaveBackError` (reason first, then
the file or layer; nothing written): not a Shapes layer, an empty layer, a shape that is not
a rectangle or whose rectangle is rotated against the image's pixel grid, an image layer
not opened from a local OME-Zarr file, a table name that exists (unless ``overwrite``).

Only ROI tables are written. Feature, masking ROI and condition tables are read-only in
napari-ozx: they are shown, and carried over by ``convert``, but never written from napari.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from napari_ozx.layers.add_labels import (
    _check_writable,
    _exists,
    local_image_target,
    rebuild_archive,
)
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.saveback import SaveBackError, refusal, save_errors
from napari_ozx.ozx.atomic import fsync_tree, replace_files, swap_directory
from napari_ozx.ozx.edit import Fingerprint

if TYPE_CHECKING:
    import pandas as pd
    from napari.layers import Image, Layer, Shapes

    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ozx.store import OzxStore
    from napari_ozx.ozx.writer import OzxWriter

logger = logging.getLogger(__name__)

__all__ = ["roi_columns_from_shapes", "save_roi_table"]

_NAME_OK = re.compile(r"^[\w][\w.\-]*$")
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
    """Write the rectangles of *shapes_layer* as a ROI table ``name`` (default: the
    layer's name, made safe for a path) into the ``tables/`` of the image *image_layer*
    was opened from (module doc). *image_layer* is the napari image layer opened by
    napari-ozx (its :class:`LayerSource` names the file and image; its transform places
    the rectangles). An existing table of that name is refused unless *overwrite*.
    Returns the file written."""
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
    with save_errors(f"saving ROIs {sname!r} into", target):
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
        base = text or f"ROI_{i}"
        out, k = base, 1
        while out in seen:
            k += 1
            out = f"{base}_{k}"
        seen.add(out)
        names.append(out)
    return names


# ------------------------------------------------------------------------- writing


def _save(
    shapes: Shapes, image_layer: Image, src: LayerSource, target: Path, table: str, overwrite: bool
) -> Path:
    from napari_ozx.ngff.read.documents import join_path
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.tables.write import roi_table_keys, tables_group_keys

    if not _NAME_OK.match(table):
        raise refusal(
            target,
            f"{table!r} is not a table name (letters, digits, '_', '-', '.'; not starting "
            "with '.')",
        )
    if not target.exists():
        raise refusal(target, "the image's file no longer exists")
    oz = open_ome_zarr(str(target))
    try:
        image = oz.image(src.node)
        if image.meta.image_label is not None:
            raise refusal(target, f"{src.node!r} is a label image; ROI tables go into an image")
        names, columns = roi_columns_from_shapes(shapes, image_layer, image, target)
        zf = oz.zarr_format or 2
        tpath = join_path(src.node, "tables")
        (docs,) = oz.read_docs([tpath])
        attrs = dict(docs.attributes) if docs is not None and docs.error is None else None
        if docs is not None and docs.error is not None:
            raise refusal(target, f"the image's tables group cannot be read: {docs.error}")
        listed = attrs.get("tables") if attrs is not None else None
        listed = list(listed) if isinstance(listed, list) else []
        exists = table in listed or _exists(oz, target, f"{tpath}/{table}")
        if exists and not overwrite:
            raise refusal(
                target,
                f"a table {table!r} already exists in the image {src.node or '/'!r} "
                "(save with overwrite=True to replace it, or choose another name)",
            )
        _check_writable(target, target / tpath if target.is_dir() else target)
        keys = roi_table_keys(names, columns, zf)
        group_docs = {} if table in listed else tables_group_keys(attrs, table, zf)
        if target.is_dir():
            _commit_directory(target, tpath, table, keys, group_docs)
        else:
            from napari_ozx.layers.editable import repoint_archive

            before = Fingerprint.of(target)
            _commit_ozx(target, cast("OzxStore", oz.store), tpath, table, keys, group_docs)
            oz.close()  # before the others move: nothing of ours holds the old file
            repoint_archive(target, before)
    finally:
        oz.close()
    _adopt(shapes, target, src.node, table, len(names))
    logger.info(
        "saved %d ROIs of %r into %s as %s/%s", len(names), shapes.name, target, tpath, table
    )
    return target


def _commit_directory(
    root: Path, tpath: str, table: str, keys: Mapping[str, bytes], group_docs: Mapping[str, bytes]
) -> None:
    tdir = root / tpath
    made_group = not tdir.exists()
    tdir.mkdir(exist_ok=True)
    tmp = tdir / f".{table}.{uuid.uuid4().hex[:8]}.partial"
    final = tdir / table
    replaced = final.exists()
    placed = False
    try:
        tmp.mkdir()
        for key, data in keys.items():
            p = tmp / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        fsync_tree(tmp)  # on disk before the group document lists it
        if replaced:
            swap_directory(tmp, final)  # the old table removed once swapped out
        else:
            os.rename(tmp, final)  # refuses a non-empty directory made meanwhile
        placed = True
        # .zgroup before .zattrs (v2): the attributes make it list the table last
        for key in sorted(group_docs, key=lambda k: k != ".zgroup"):
            replace_files({tdir / key: group_docs[key]})
    except BaseException:
        if not placed:
            shutil.rmtree(tmp, ignore_errors=True)
        elif not replaced:
            shutil.rmtree(final, ignore_errors=True)
        if made_group:
            shutil.rmtree(tdir, ignore_errors=True)
        raise


def _commit_ozx(
    target: Path,
    base_store: OzxStore,
    tpath: str,
    table: str,
    keys: Mapping[str, bytes],
    group_docs: Mapping[str, bytes],
) -> None:
    """A new archive: the old members (but a table of that name, and the tables group's
    documents when they change) byte for byte, the new table's and the group's documents
    with the metadata, the new table's chunks after the old data; renamed onto *target*."""
    from napari_ozx.ozx.rfc9 import is_metadata_name

    lead = f"{tpath}/{table}/"
    groups = {f"{tpath}/{k}": v for k, v in group_docs.items()}
    documents = {lead + k: v for k, v in keys.items() if is_metadata_name(k)}
    documents.update(groups)

    def write_data(writer: OzxWriter) -> None:
        for key, data in keys.items():
            if not is_metadata_name(key):
                writer.add(lead + key, data)

    rebuild_archive(
        target,
        base_store,
        replaced=lambda member: member.startswith(lead) or member in groups,
        documents=documents,
        write_data=write_data,
    )


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
