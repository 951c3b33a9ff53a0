"""npe2 reader: OME-Zarr directories and ``.ozx`` files -> napari layer data.

Thin glue: :mod:`napari_ozx.ngff` parses and opens; this module maps the typed model to
napari layer keyword arguments. It imports neither Qt nor napari at module level, so a
headless ``npe2.read`` stays headless.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import OzxError
from .ngff.models import SPACE_UNITS, TIME_UNITS, has_ome_keys

logger = logging.getLogger(__name__)

LayerData = tuple[Any, dict[str, Any], str]
_NULL_LAYER = [(None,)]  # npe2's "read fine, nothing to add" sentinel

# omero colours that match a built-in napari colormap get its name
_NAMED_COLORMAPS = {
    "FF0000": "red",
    "00FF00": "green",
    "0000FF": "blue",
    "FF00FF": "magenta",
    "00FFFF": "cyan",
    "FFFF00": "yellow",
    "FFFFFF": "gray",
    "000000": "gray",
}


# ------------------------------------------------------------------ get_reader


def get_reader(path: str | Sequence[str]) -> Any:
    """Return :func:`read` if *path* is OME-Zarr we can read, else ``None``.

    Cheap and never raises: it looks at one small metadata file (or, for ``.zip``, the
    ZIP central directory). Any ``.ozx`` is claimed, so a broken one gets our clear
    error message instead of napari's "no reader found".
    """
    try:
        paths = [path] if isinstance(path, str | os.PathLike) else list(path)
        if not paths or not all(_claims(os.fspath(p)) for p in paths):
            return None
    except Exception:
        logger.debug("get_reader(%r) declined after an error", path, exc_info=True)
        return None
    return read


def _claims(path: str) -> bool:
    from .ozx.remote import is_url

    if is_url(path):  # no network here: the name must say what it is
        return path.split("?", 1)[0].rstrip("/").lower().endswith((".ozx", ".zip", ".zarr"))
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".ozx":
        return True
    if p.is_dir():
        return _dir_has_ome(p)
    if suffix == ".zip" and p.is_file():
        # the ZIP index alone answers "is there a root zarr.json?" (no zarr import)
        from .ozx._zip import FileRangeReader, read_zip_index

        with FileRangeReader(p) as reader:
            return "zarr.json" in read_zip_index(reader).by_name
    return False


def _dir_has_ome(p: Path) -> bool:
    for name in ("zarr.json", ".zattrs"):
        f = p / name
        if f.is_file() and f.stat().st_size < 64 << 20:
            doc = json.loads(f.read_bytes())
            if not isinstance(doc, dict):
                return False
            attrs = doc.get("attributes", {}) if name == "zarr.json" else doc
            return isinstance(attrs, dict) and has_ome_keys(attrs)
    return False


# ------------------------------------------------------------------------ read


def read(path: str | Sequence[str]) -> list[Any]:
    """Read one or more OME-Zarr sources into layer data.

    A source that cannot be read is reported once, as a napari notification naming the
    file and the reason; the others still open.
    """
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    layers: list[Any] = []
    for p in paths:
        try:
            layers.extend(read_layer_data(os.fspath(p)))
        except (OzxError, OSError) as e:
            _report(os.fspath(p), e)
        except Exception as e:
            logger.exception("unexpected error reading %s", p)
            _report(
                os.fspath(p),
                RuntimeError(f"unexpected {type(e).__name__}: {e} (please report this)"),
            )
    return layers or _NULL_LAYER


def _report(path: str, err: BaseException) -> None:
    msg = f"napari-ozx cannot open {path}: {err}"
    logger.error(msg)
    try:
        from napari.utils.notifications import show_error
    except ImportError:  # pragma: no cover - napari is a dependency
        return
    show_error(msg)


def read_layer_data(path: str) -> list[LayerData]:
    """Layer data for every image (and its labels) in *path*; raises OzxError."""
    from .ngff.open import open_ome_zarr

    root = open_ome_zarr(path)
    if root.root.meta.kind in ("plate", "well"):
        return plate_layer_data(root)
    out: list[LayerData] = []
    for image in root.images():
        if image.meta.image_label is not None:
            out.extend(labels_layer_data(image))
            continue
        out.append(image_layer_data(image))
        for label in image.labels:
            try:
                out.extend(labels_layer_data(label))
            except OzxError as e:  # a broken label must not hide the image
                _report(f"{path} (labels {label.name!r})", e)
    return out


# ---------------------------------------------------------------- image layers


def _units(axes: Sequence[Any]) -> tuple[str, ...]:
    out = []
    for a in axes:
        u = a.unit
        out.append(u if u in SPACE_UNITS or u in TIME_UNITS else "pixel")
    return tuple(out)


def _drop(seq: Sequence[Any], axis: int | None) -> tuple[Any, ...]:
    return tuple(v for i, v in enumerate(seq) if i != axis)


def _colormap(color: str | None) -> str | None:
    if color is None:
        return None
    return _NAMED_COLORMAPS.get(color, f"#{color.lower()}")


def _source_metadata(image: Any) -> dict[str, Any]:
    return {
        "ome_zarr": {
            "source": image.root.source,
            "path": image.path,
            "version": image.multiscale.version,
            "zarr_format": image.root.zarr_format,
        }
    }


def image_layer_data(image: Any) -> LayerData:
    ms = image.multiscale
    levels = image.levels
    ds0 = ms.datasets[0]
    c = ms.channel_axis
    omero = image.meta.omero
    stats = image.arrays[0].extensions.statistics

    kwargs: dict[str, Any] = {
        "name": image.name,
        "scale": _drop(ds0.scale, c),
        "translate": _drop(ds0.translation, c),
        "axis_labels": _drop(ms.axis_names, c),
        "units": _drop(_units(ms.axes), c),
        "multiscale": len(levels) > 1,
        "metadata": _source_metadata(image),
    }
    n_channels = levels[0].shape[c] if c is not None else 1
    channels = list(omero.channels) if omero else []
    if len(channels) != n_channels:
        if channels:
            logger.warning(
                "%s: omero lists %d channels for %d in the data; ignoring omero",
                image.root.source,
                len(channels),
                n_channels,
            )
        channels = []

    def limits(ch: Any) -> list[float] | None:
        if ch is not None and ch.window is not None:
            return [ch.window.start, ch.window.end]
        if (
            stats is not None
            and stats.min is not None
            and stats.max is not None
            and stats.max > stats.min
        ):
            return [float(stats.min), float(stats.max)]
        return None

    if c is not None:
        kwargs["channel_axis"] = c
        if channels:
            kwargs["name"] = [ch.label or f"{image.name} c{i}" for i, ch in enumerate(channels)]
            cmaps = [_colormap(ch.color) for ch in channels]
            if all(cm is not None for cm in cmaps):
                kwargs["colormap"] = cmaps
            kwargs["visible"] = [ch.active for ch in channels]
            lims = [limits(ch) for ch in channels]
            if all(lim is not None for lim in lims):
                kwargs["contrast_limits"] = lims
        else:
            kwargs["name"] = [f"{image.name} c{i}" for i in range(n_channels)]
            lim = limits(None)
            if lim is not None:
                kwargs["contrast_limits"] = [lim] * n_channels
    else:
        ch = channels[0] if channels else None
        if ch is not None:
            if ch.label:
                kwargs["name"] = ch.label
            cm = _colormap(ch.color)
            if cm is not None:
                kwargs["colormap"] = cm
            kwargs["visible"] = ch.active
        lim = limits(ch)
        if lim is not None:
            kwargs["contrast_limits"] = lim
    data = levels if len(levels) > 1 else levels[0]
    return (data, kwargs, "image")


# --------------------------------------------------------------- label layers


def labels_layer_data(label: Any) -> list[LayerData]:
    ms = label.multiscale
    levels = label.levels
    ds0 = ms.datasets[0]
    c = ms.channel_axis
    il = label.meta.image_label
    base: dict[str, Any] = {
        "scale": _drop(ds0.scale, c),
        "translate": _drop(ds0.translation, c),
        "axis_labels": _drop(ms.axis_names, c),
        "units": _drop(_units(ms.axes), c),
        "multiscale": len(levels) > 1,
        "metadata": _source_metadata(label),
    }
    if il is not None and il.colors:
        cmap: dict[Any, Any] = {None: (0.6, 0.6, 0.6, 1.0), 0: (0.0, 0.0, 0.0, 0.0)}
        cmap.update({lc.value: tuple(x / 255 for x in lc.rgba) for lc in il.colors})
        base["colormap"] = cmap
    if il is not None and il.properties:
        base["features"] = _features(il.properties)

    if not np.issubdtype(levels[0].dtype, np.integer):
        levels = [lvl.astype(np.int64) for lvl in levels]
    n = levels[0].shape[c] if c is not None else 1
    out = []
    for i in range(n):
        if c is not None:
            index = tuple(i if ax == c else slice(None) for ax in range(len(ms.axes)))
            lv = [lvl[index] for lvl in levels]
        else:
            lv = levels
        kw = dict(base, name=label.name if n == 1 else f"{label.name} c{i}")
        out.append((lv if len(lv) > 1 else lv[0], kw, "labels"))
    return out


def _features(properties: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """image-label ``properties`` -> a features table keyed by label value ('index')."""
    keys: list[str] = []
    for p in properties:
        keys.extend(k for k in p if k != "label-value" and k not in keys)
    table: dict[str, list[Any]] = {"index": [p["label-value"] for p in properties]}
    for k in keys:
        table[k] = [p.get(k) for p in properties]
    return table


# ------------------------------------------------------------------ HCS plates

PLATE_KEY = "ozx_plate"  # layer metadata read by the plate navigator (JSON-able)
WELL_KEY = "ozx_well"
GRID_FIELDS_MAX = 16  # a well opened on its own shows up to this many fields as a grid


def plate_layer_data(root: Any) -> list[LayerData]:
    """A plate: its lazy overview (an image layer per channel) and the row / column names
    (a text-only Points layer). A well opened on its own: its fields at full resolution
    side by side as a grid (only the first when it has more than ``GRID_FIELDS_MAX``),
    with their labels. Reads metadata only.

    When a napari window is running the plate navigator is docked (:func:`_dock_navigator`);
    a headless read never imports Qt.
    """
    from .ngff.plate import HcsPlate

    plate = HcsPlate(root)
    if plate.kind == "well":
        well = plate.wells[0]
        fields = None if len(well.fields) <= GRID_FIELDS_MAX else [0]
        out, errors = well_layer_data(plate, well, fields=fields, grid=True)
        for e in errors:
            _report(root.source, OzxError(e))
        if not out:
            raise OzxError(f"no field of well {well.name!r} can be read")
    else:
        out = overview_layer_data(plate.overview())
    _dock_navigator(plate)
    return out


def plate_info(plate: Any) -> dict[str, Any]:
    return {
        "plate_id": plate.id,
        "source": plate.oz.source,
        "path": plate.path,
        "kind": plate.kind,
        "name": plate.name,
    }


def overview_layer_data(ov: Any) -> list[LayerData]:
    """The overview's image layer data (channel axis split by napari) and the well labels."""
    plate = ov.plate
    data, kw, kind = image_layer_data(ov.as_image())
    info = {
        **plate_info(plate),
        "overview": {"field": ov.field_index, "acquisition": ov.acquisition, "level": ov.level},
    }
    kw["metadata"] = {**kw["metadata"], PLATE_KEY: info}
    names = kw["name"]
    kw["name"] = (
        [f"overview {n}" for n in names] if isinstance(names, list) else f"overview {names}"
    )
    y, x = ov.yx
    units = _units(ov.axes)
    ann = ov.annotations()
    sy, sx = ov.yx_scale
    points_kw: dict[str, Any] = {
        "name": f"{plate.name} wells",
        "features": {"label": [a[2] for a in ann]},
        "text": {"string": "{label}", "color": "white", "size": 10, "anchor": "center"},
        "size": min(sy * ov.pitch[0], sx * ov.pitch[1]) * 0.5,
        "face_color": "transparent",
        "border_color": "transparent",
        "axis_labels": (ov.axes[y].name, ov.axes[x].name),
        "units": (units[y], units[x]),
        "metadata": {PLATE_KEY: info},
    }
    points = np.array([(a[0], a[1]) for a in ann], dtype=float).reshape(-1, 2)
    return [(data, kw, kind), (points, points_kw, "points")]


def well_layer_data(
    plate: Any,
    well: Any,
    fields: Sequence[int] | None = None,
    grid: bool = False,
    acquisition: int | None = None,
    overview: Any = None,
) -> tuple[list[LayerData], list[str]]:
    """Full-resolution layer data (images + labels) of a well's fields, placed on its
    overview tile (or as a grid), and the messages of the fields that failed."""
    opened = plate.open_fields(well, fields, acquisition)
    images = [im for im in opened if not isinstance(im, OzxError)]
    errors = [f"well {well.name}: {e}" for e in opened if isinstance(e, OzxError)]
    offsets = plate.placements(well, images, grid=grid, overview=overview)
    info = plate_info(plate)
    out: list[LayerData] = []
    for img, off in zip(images, offsets, strict=True):
        field = img.path.rsplit("/", 1)[-1]
        prefix = f"{well.name} f{field}" if well.name else f"f{field}"
        meta = {PLATE_KEY: info, WELL_KEY: {"well": well.path, "field": img.path}}
        lds = [image_layer_data(img)]
        try:
            for label in img.labels:
                lds.extend((d, k, t, label) for d, k, t in labels_layer_data(label))  # type: ignore[misc]
        except OzxError as e:  # a broken label must not hide the field
            errors.append(f"well {well.name} field {field} labels: {e}")
        for ld in lds:
            data, kw, kind = ld[:3]
            _place(kw, ld[3] if len(ld) > 3 else img, off, prefix, meta)
            out.append((data, kw, kind))
    return out, errors


def _place(
    kw: dict[str, Any], image: Any, off: tuple[float, float], prefix: str, meta: dict[str, Any]
) -> None:
    from .ngff.plate import yx_axes

    ms = image.multiscale
    c = ms.channel_axis
    y, x = yx_axes(ms.axes)
    keep = [i for i in range(ms.ndim) if i != c]
    t = list(kw["translate"])
    t[keep.index(y)] += off[0]
    t[keep.index(x)] += off[1]
    kw["translate"] = tuple(t)
    names = kw["name"]
    kw["name"] = (
        [f"{prefix} {n}" for n in names] if isinstance(names, list) else f"{prefix} {names}"
    )
    kw["metadata"] = {**kw["metadata"], **meta}


def _dock_navigator(plate: Any) -> None:
    """Dock the plate navigator in the running napari window, if there is one.

    Only when napari's Qt front end is already imported (a window exists): a headless
    ``npe2.read`` never imports Qt from here. The navigator finds the plate's overview
    layers by their metadata once napari adds them.
    """
    import sys

    if "napari._qt" not in sys.modules:
        return
    try:
        from ._qt.plate_navigator import dock_for_plate

        dock_for_plate(plate)
    except Exception:
        logger.warning("napari-ozx: could not dock the plate navigator", exc_info=True)
