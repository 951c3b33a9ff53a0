"""One ROI (or one segmented object) of an image as its own layers: :func:`open_roi`.

A ROI table row (``roi_table``) or a masking ROI table row (``masking_roi_table``: one
object of a label image, by its label id) becomes one image layer per channel and one
labels layer per label image, the reader's layer data for the whole image
(:mod:`napari_ozx.layers.reading`) with each array replaced by the crop of one pyramid
level. Pixels as ngio 1.1 reads a ROI (``get_roi``, ``get_roi_masked`` with
``masked=True``) at that level's pixel size
(:func:`napari_ozx.ngff.tables.read.roi_pixel_boxes`); a label image at its level closest
in pixel size. The crop lies exactly over the full image in world coordinates. Lazy: only
the chunks the ROI touches are read, when napari shows them. The layers carry a ROI record
(:data:`ROI_KEY`) and no :class:`~napari_ozx.layers.provenance.LayerSource`: a crop is
never saved back over its image. The pixel rules in full: ``docs/design/tables.md``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import OzxError, TableError
from napari_ozx.layers.provenance import METADATA_KEY, ROI_KEY
from napari_ozx.layers.reading import (
    LayerData,
    Report,
    image_layer_data,
    label_to_world,
    labels_layer_data,
)

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.tables.read import TableData

__all__ = ["ROI_KEY", "open_roi", "roi_names", "split_image_path"]

#: the ROI names a message lists at most
_NAMES_SHOWN = 8


def split_image_path(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(source, node)``: a path to an image group inside a zipped OME-Zarr
    (``plate.ozx/B/03/0``) as the ``.ozx`` (or ``.zip``) and the group in it; any other
    path (a directory, a field directory of a plate, an ``.ozx``, a URL) as itself and
    ``""``."""
    text = os.fspath(path)
    norm = text.replace("\\", "/")
    for suffix in (".ozx/", ".zip/"):
        at = norm.lower().find(suffix)
        if at >= 0:
            cut = at + len(suffix) - 1
            container = text[:cut]
            if "://" in norm or os.path.isfile(container):
                return container, norm[cut + 1 :].strip("/")
    return text, ""


def roi_names(table: TableData) -> list[str]:
    """The ROIs of a ROI table by name, of a masking ROI table by label id (as text)."""
    if table.info.type == "masking_roi_table":
        return [str(int(v)) for v in table.instances()]
    return [str(v) for v in table.index]


def _row(table: TableData, roi: str | int, where: str) -> int:
    """The row of *roi*: a ROI name, or a label id of a masking ROI table."""
    names = roi_names(table)
    key = str(int(roi)) if isinstance(roi, int | np.integer) else str(roi).strip()
    if table.info.type == "masking_roi_table":
        with contextlib.suppress(ValueError):
            key = str(int(float(key)))
    hits = [i for i, n in enumerate(names) if n == key]
    if not hits:
        hits = [i for i, v in enumerate(table.index) if str(v) == key]
    if not hits:
        what = "label id" if table.info.type == "masking_roi_table" else "ROI"
        shown = ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")
        raise TableError(
            f"no {what} {roi!r} in this table (it has {len(names)}: {shown or 'none'})",
            table.info.name,
            where,
        )
    return hits[0]


def _closest_level(image: OmeImage, scale: Sequence[float], axes: Sequence[str]) -> int:
    """The level of *image* whose pixel size along the named spatial *axes* is closest to
    *scale* (ngio's ``strict=False`` pick: the nearest, the finer one on a tie)."""
    ms = image.multiscale
    names = [str(a).lower() for a in ms.axis_names]
    pairs = [
        (names.index(str(a).lower()), float(s))
        for a, s in zip(axes, scale, strict=True)
        if str(a).lower() in ("x", "y", "z") and str(a).lower() in names and s > 0
    ]
    best, dist = 0, math.inf
    for i, ds in enumerate(ms.datasets):
        d = sum(abs(math.log(ds.scale[k] / s)) for k, s in pairs if ds.scale[k] > 0)
        if d < dist - 1e-12:
            best, dist = i, d
    return best


def _box(table: TableData, image: OmeImage, level: int) -> tuple[slice, ...]:
    """The ROI (the table's only row) as an index of *level* of *image*."""
    from napari_ozx.ngff.tables.read import roi_pixel_boxes

    ms = image.multiscale
    shape = tuple(int(s) for s in image.levels[level].shape)
    boxes = roi_pixel_boxes(table, tuple(ms.axis_names), tuple(ms.datasets[level].scale), shape)
    return boxes.slices(0)


def _placed(
    image: OmeImage, kwargs: dict[str, Any], level: int, box: Sequence[slice]
) -> dict[str, Any]:
    """*kwargs* (the whole image's placement at level 0) for the crop *box* of *level*:
    its first pixel where that pixel of the level lies."""
    ms = image.multiscale
    c = ms.channel_axis
    keep = [i for i in range(ms.ndim) if i != c]
    ds0, dsl = ms.datasets[0], ms.datasets[level]
    out = dict(kwargs)
    scale, translate = [], []
    for k, i in enumerate(keep):
        s0, t0 = float(ds0.scale[i]), float(ds0.translation[i])
        world_s, world_t = float(kwargs["scale"][k]), float(kwargs["translate"][k])
        d = world_s / s0 if s0 else 1.0  # the scale the image's system adds
        shift = world_t - t0 * d
        sl, tl = float(dsl.scale[i]), float(dsl.translation[i])
        scale.append(sl * d)
        translate.append((tl + (box[i].start or 0) * sl) * d + shift)
    out["scale"], out["translate"] = tuple(scale), tuple(translate)
    out["multiscale"] = False
    return out


def _spatial_match(
    mask: Any, mask_axes: Sequence[str], axes: Sequence[str], shape: Sequence[int]
) -> Any:
    """*mask* (over *mask_axes*) as an array over *axes* of *shape*: axes it lacks
    (channels) broadcast, a different extent resampled to the nearest pixel."""
    import dask.array as da

    names = [str(a).lower() for a in mask_axes]
    index: list[Any] = []
    for ax, n in zip(axes, shape, strict=True):
        name = str(ax).lower()
        if name not in names:
            continue
        k = names.index(name)
        m = int(mask.shape[k])
        if m != n and m > 0:
            picks = np.minimum((np.arange(n) * m) // max(n, 1), m - 1)
            mask = (
                da.take(mask, picks, axis=k)
                if hasattr(mask, "dask")
                else np.take(mask, picks, axis=k)
            )
        index.append(k)
    mask = mask.transpose(index) if index != sorted(index) else mask
    present = [str(a).lower() in names for a in axes]
    for pos, here in enumerate(present):
        if not here:
            mask = mask[(slice(None),) * pos + (None,)]
    return mask


def _where(mask: Any, data: Any) -> Any:
    """*data* where *mask*, else 0, in *data*'s dtype: lazily for a dask array; read for
    a LevelArray (dask's query planning, whose arrays napari cannot show)."""
    zero = np.zeros((), dtype=data.dtype)
    if hasattr(data, "dask"):
        import dask.array as da

        return da.where(mask, data, zero).astype(data.dtype)
    return np.where(np.asarray(mask), np.asarray(data), zero).astype(data.dtype)


def _object_mask(
    masking: OmeImage,
    table: TableData,
    target: OmeImage,
    target_level: int,
    target_box: Sequence[slice],
    label_id: int,
) -> Any:
    """``masking == label_id`` over the crop *target_box* of *target*'s level, read from
    *masking*'s level closest to that level's pixel size (cropped by the same ROI)."""
    ms = target.multiscale
    lvl = _closest_level(masking, ms.datasets[target_level].scale, ms.axis_names)
    mbox = _box(table, masking, lvl)
    crop = masking.levels[lvl][tuple(mbox)]
    if not hasattr(crop, "dask"):  # a LevelArray (dask's query planning): one object, read
        crop = np.asarray(crop)
    shape = [s.stop - s.start for s in target_box]
    return _spatial_match(crop == label_id, masking.multiscale.axis_names, ms.axis_names, shape)


def _roi_record(
    source: str, node: str, table: TableData, roi: str, level: int, masked: bool
) -> dict[str, Any]:
    return {
        ROI_KEY: {
            "source": source,
            "image": node,
            "table": table.info.name,
            "type": table.info.type,
            "roi": roi,
            "level": level,
            "masked": masked,
        }
    }


def _named(kwargs: dict[str, Any], roi: str) -> None:
    names = kwargs.get("name")
    one = lambda n: f"{roi}: {n}"  # noqa: E731
    kwargs["name"] = [one(n) for n in names] if isinstance(names, list) else one(names)


def _without_source(meta: Any, record: dict[str, Any]) -> Any:
    """Layer metadata of a crop: the ROI record instead of the image's source."""
    if isinstance(meta, list):
        return [_without_source(m, record) for m in meta]
    out = {k: v for k, v in dict(meta or {}).items() if k != METADATA_KEY}
    out.pop("napari_ozx_editable", None)
    out.pop("ozx_read_only", None)
    return {**out, **record}


def open_roi(
    path: str | os.PathLike[str],
    table: str,
    roi: str | int,
    *,
    level: int = 0,
    masked: bool = False,
    report: Report | None = None,
    view: tuple[Sequence[float], Sequence[float]] | None = None,
) -> list[LayerData]:
    """One ROI (or one object of a masking ROI table) of an image as its own layers.

    Parameters
    ----------
    path : str or os.PathLike
        An image group: a directory, an ``.ozx``, a URL, or a plate field such as
        ``plate.zarr/B/03/0`` or ``plate.ozx/B/03/0``.
    table : str
        One of the image's ROI or masking ROI tables.
    roi : str or int
        A row name (``"FOV_1"``) or, for a masking ROI table, a label id.
    level : int, default 0
        The pyramid level read (0 = full resolution).
    masked : bool, default False
        Masking tables only: pixels outside the object are 0.
    report : callable, optional
        Called as ``report(message, error)`` for what cannot be shown.
    view : tuple of (scale, translate), optional
        The y / x placement of a ROI layer of this table shown elsewhere than its image's
        own (a field in a plate's well view): the crops go there too.

    Returns
    -------
    list of tuple
        napari layer data: one image layer per channel, one labels layer per label image,
        cropped and placed over the full image; nothing is read but metadata and the table
        until napari shows them.

    Raises
    ------
    TableError
        Naming the ROI and the table: an unknown table, ROI or label id, a table that is no
        ROI table, or a ROI outside the image.
    OzxError
        A level the image does not have.
    """
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.tables.read import read_table

    source, node = split_image_path(path)
    root = open_ome_zarr(source)
    image = root.image(node)
    what = f"ROI {roi!r} of table {table!r}"
    where = f"{source}{'/' + node if node else ''}"
    try:
        data = read_table(root, table, node)
    except TableError as e:
        raise TableError(f"{what} not opened: {e.reason}", table, where) from None
    if not data.info.is_roi:
        raise TableError(f"{what} not opened: a {data.info.type} has no ROIs", table, where)
    row = _row(data, roi, where)
    name = roi_names(data)[row]
    region = data.info.region
    # layer names: the ROI's name, or the object's label image and id ("nuclei 2")
    shown = f"{region} {name}" if data.info.type == "masking_roi_table" and region else name
    one = data.take([row])
    levels = len(image.levels)
    if isinstance(level, np.integer):
        level = int(level)
    if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level < levels:
        raise OzxError(
            f"level {level!r} does not exist: the image has levels 0-{levels - 1} ({where})"
        )
    masking = data.info.type == "masking_roi_table"
    if masked and not masking:
        raise TableError(
            f"{what}: masked=True needs a masking ROI table (this is a {data.info.type})",
            table,
            where,
        )
    box = _box(one, image, level)
    if any(s.stop <= s.start for s in box):
        raise TableError(f"{what} lies outside the image", table, where)
    record = _roi_record(str(root.source), node, data, name, level, masked)
    mask_label = None
    label_id = int(name) if masking else 0
    if masked:
        mask_label = next((lb for lb in image.labels if lb.path.rsplit("/", 1)[-1] == region), None)
        if mask_label is None:
            raise TableError(
                f"{what}: its label image {region!r} is not among the image's labels", table, where
            )

    _, kwargs, kind = image_layer_data(image, report=report)
    shift = _view_shift(image, kwargs, view)
    crop = image.levels[level][box]
    if mask_label is not None:
        mask = _object_mask(mask_label, one, image, level, box, label_id)
        crop = _where(mask, crop)
    kwargs = _shifted(image, _placed(image, kwargs, level, box), shift)
    kwargs["metadata"] = _without_source(kwargs.get("metadata"), record)
    _named(kwargs, shown)
    out: list[LayerData] = [(crop, kwargs, kind)]

    ims = image.multiscale
    for label in image.labels:
        try:
            lds = labels_layer_data(label, to_world=label_to_world(image, label), report=report)
            llevel = _closest_level(label, ims.datasets[level].scale, ims.axis_names)
            lbox = _box(one, label, llevel)
            lcrop = label.levels[llevel][lbox]
            if not np.issubdtype(lcrop.dtype, np.integer):
                lcrop = lcrop.astype(np.int64)
            if mask_label is not None:
                lmask = _object_mask(mask_label, one, label, llevel, lbox, label_id)
                lcrop = _where(lmask, lcrop)
        except OzxError as e:  # a broken label must not hide the crop
            (report or _log_report)(f"{where} (labels {label.name!r})", e)
            continue
        lc = label.multiscale.channel_axis
        for i, (_, lkw, lkind) in enumerate(lds):
            data_i = lcrop
            if lc is not None:
                data_i = lcrop[tuple(i if ax == lc else slice(None) for ax in range(lcrop.ndim))]
            lkw = _shifted(label, _placed(label, lkw, llevel, lbox), shift)
            lkw["metadata"] = _without_source(lkw.get("metadata"), record)
            _named(lkw, shown)
            out.append((data_i, lkw, lkind))
    return out


def _yx(image: OmeImage) -> tuple[int, int]:
    """The y and x axes among *image*'s layer axes (its channel axis dropped)."""
    from napari_ozx.ngff.read.plate import yx_axes

    c = image.multiscale.channel_axis
    y, x = yx_axes(image.multiscale.axes)
    return y - (c is not None and c < y), x - (c is not None and c < x)


def _view_shift(
    image: OmeImage, kwargs: dict[str, Any], view: tuple[Sequence[float], Sequence[float]] | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(zoom, offset)`` along y / x taking *image*'s own placement (*kwargs*) to
    *view*'s, or None."""
    if view is None:
        return None
    iy, ix = _yx(image)
    own_s = np.asarray([kwargs["scale"][iy], kwargs["scale"][ix]], dtype=float)
    own_t = np.asarray([kwargs["translate"][iy], kwargs["translate"][ix]], dtype=float)
    zoom = np.asarray(view[0], dtype=float) / own_s
    return zoom, np.asarray(view[1], dtype=float) - own_t * zoom


def _shifted(
    node: OmeImage, kwargs: dict[str, Any], shift: tuple[np.ndarray, np.ndarray] | None
) -> dict[str, Any]:
    if shift is None:
        return kwargs
    iy, ix = _yx(node)
    scale, translate = list(kwargs["scale"]), list(kwargs["translate"])
    for k, i in enumerate((iy, ix)):
        translate[i] = translate[i] * shift[0][k] + shift[1][k]
        scale[i] = scale[i] * shift[0][k]
    return {**kwargs, "scale": tuple(scale), "translate": tuple(translate)}


def _log_report(what: str, err: OzxError) -> None:
    import logging

    logging.getLogger(__name__).warning("napari-ozx: %s: %s", what, err)
