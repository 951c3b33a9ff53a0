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
    except Exception:  # noqa: BLE001 - get_reader must never raise
        logger.debug("get_reader(%r) declined after an error", path, exc_info=True)
        return None
    return read


def _claims(path: str) -> bool:
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".ozx":
        return True
    if p.is_dir():
        return _dir_has_ome(p)
    if suffix == ".zip" and p.is_file():
        from .ozx.store import OzxStore

        with OzxStore(p) as store:
            return "zarr.json" in store.index.by_name
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
                image.root.source, len(channels), n_channels,
            )
        channels = []

    def limits(ch: Any) -> list[float] | None:
        if ch is not None and ch.window is not None:
            return [ch.window.start, ch.window.end]
        if stats is not None and stats.min is not None and stats.max is not None and stats.max > stats.min:
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
