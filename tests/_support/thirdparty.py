"""OME-Zarr test fixtures written by *third-party* tools, with ground truth.

Every ``make_<name>(tmp_dir)`` function writes one dataset below ``tmp_dir``
with a real writer (ome-zarr-py, ngff-zarr, or plain zarr where the brief
asks for hand-written metadata) and returns a :class:`Fixture` describing
what a correct reader must report for it.

Ground-truth rules
------------------
* ``levels`` / ``labels`` hold the pixel data of every pyramid level *as read
  back from the written files with plain zarr* (never the numpy input), so
  they match exactly what the tool stored (e.g. its own downsampling).
* ``chunks`` / ``shards`` are read back from the written arrays too (for a
  sharded array ``chunks`` is the inner chunk shape, ``shards`` the shard
  shape; ``shards`` is ``None`` for unsharded arrays).
* The metadata fields (scales, translations, units, omero, label colors) are
  the values handed to the tool; ``tests/test_thirdparty_fixtures.py``
  checks that the tool really wrote them (raw JSON comparison).
* Where the metadata carries no value (e.g. no coordinateTransformations
  before 0.4) the field holds what a reader must *infer*; ``notes`` says so.

Arrays are kept small and pixel sizes / offsets are deliberately different
per axis (and y != x in shape) so swapped axes are caught.

Nothing here imports ``napari_ozx``.
"""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from tests._support.classic_dask import in_child_without_query_planning

__all__ = [
    "ALL_FIXTURES",
    "Fixture",
    "inspect_zip",
    "make_ngffzarr_v05_ozx",
    "make_ngffzarr_v05_sharded_dir",
    "make_omezarr_py_v04_2d_yx",
    "make_omezarr_py_v04_image_labels",
    "make_omezarr_py_v05_image_labels",
    "make_omezarr_py_v05_write_image_api",
    "make_v01_image",
    "make_v01_to_v03_image",
    "make_v02_image",
    "make_v03_image",
    "make_zarr_v2_and_v3_side_by_side",
]


# --------------------------------------------------------------------------
# Fixture dataclass
# --------------------------------------------------------------------------


@dataclass
class Fixture:
    """A dataset on disk plus the ground truth a reader must reproduce."""

    #: What a user would open (directory of the image group, or the .ozx file).
    path: Path
    #: OME-Zarr version of the *image* metadata ("0.1" ... "0.5").
    version: str
    #: Axis names in array order (implied "tczyx" for 0.1/0.2).
    axes: list[str]
    #: axis name -> unit, only for axes that carry a unit.
    units: dict[str, str]
    #: Full pixel data of every pyramid level, read back with plain zarr.
    levels: list[np.ndarray]
    #: Per level, full length over all axes (metadata value, or implied).
    scales: list[list[float]]
    #: Per level, full length over all axes; None if no translation written.
    translations: list[list[float] | None]
    #: omero channel labels (None if no omero metadata).
    channel_names: list[str] | None
    #: omero channel colors as written (hex "RRGGBB", no '#'), or None.
    channel_colors: list[str] | None
    #: omero window (start, end) per channel, or None.
    contrast_limits: list[tuple[float, float]] | None
    #: label name -> per-level arrays (read back with plain zarr).
    labels: dict[str, list[np.ndarray]]
    #: label name -> {label value: (r, g, b, a)} (only labels with colors).
    label_colors: dict[str, dict[int, tuple[int, int, int, int]]]
    #: True if the image arrays use the sharding codec.
    sharded: bool
    #: "<tool> <version>".
    writer: str
    #: Zarr (inner) chunk shape per image level.
    chunks: list[tuple[int, ...]]
    #: Shard shape per image level (None for unsharded levels).
    shards: list[tuple[int, ...] | None]
    #: Zarr format of the image arrays (2 or 3).
    zarr_format: int = 2
    #: Dataset paths per level, relative to ``path`` (as in the metadata).
    dataset_paths: list[str] = field(default_factory=list)
    #: Multiscale "name" as written (None if none).
    name: str | None = None
    #: omero window (min, max) per channel, or None.
    contrast_ranges: list[tuple[float, float]] | None = None
    #: label name -> dataset paths per level (relative to ``labels/<name>``).
    label_paths: dict[str, list[str]] = field(default_factory=dict)
    #: label name -> axis names of the label image.
    label_axes: dict[str, list[str]] = field(default_factory=dict)
    #: label name -> per-level scale (full length).
    label_scales: dict[str, list[list[float]]] = field(default_factory=dict)
    #: label name -> per-level translation (None if not written).
    label_translations: dict[str, list[list[float] | None]] = field(default_factory=dict)
    #: label name -> {label value: properties dict (without "label-value")}.
    label_properties: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    #: Free-form facts about the files (tool quirks, zip layout, ...).
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [lvl.shape for lvl in self.levels]

    @property
    def dtype(self) -> np.dtype:
        return self.levels[0].dtype


# --------------------------------------------------------------------------
# Shared synthetic content (small, non-square, distinct per axis)
# --------------------------------------------------------------------------

C, Z, Y, X = 2, 4, 48, 64
SPATIAL_UNITS = {"z": "micrometer", "y": "micrometer", "x": "micrometer"}
# Pixel size at level 0 and the offset of the first pixel (physical units).
SCALE0 = {"c": 1.0, "z": 2.0, "y": 0.5, "x": 0.25}
OFFSET0 = {"c": 0.0, "z": 1.0, "y": 10.0, "x": 20.0}
CHANNEL_NAMES = ["DAPI", "GFP"]
CHANNEL_COLORS = ["0000FF", "00FF00"]
CONTRAST_LIMITS = [(10.0, 3000.0), (20.0, 3500.0)]
CONTRAST_RANGES = [(0.0, 65535.0), (0.0, 65535.0)]
LABEL_NAME = "cells"
LABEL_COLORS = {1: (255, 0, 0, 255), 2: (0, 255, 0, 128), 3: (0, 0, 255, 255)}
LABEL_PROPERTIES = {1: {"class": "nucleus"}, 2: {"class": "cytoplasm", "area": 300}}


def _image(shape=(C, Z, Y, X), dtype=np.uint16, seed: int = 0) -> np.ndarray:
    """Deterministic image with structure (gradient + noise), distinct channels."""
    rng = np.random.default_rng(seed)
    grids = np.indices(shape[-2:])
    base = (grids[0] * 7 + grids[1] * 3).astype(np.float64)
    arr = np.broadcast_to(base, shape).astype(np.float64).copy()
    # make channels / z planes distinguishable
    if len(shape) >= 3:
        idx = np.indices(shape[:-2]).sum(axis=0) if len(shape) > 2 else 0
        arr += np.asarray(idx, dtype=np.float64)[..., None, None] * 100
    arr += rng.integers(0, 50, size=shape)
    info = np.iinfo(dtype)
    return np.clip(arr, info.min, info.max).astype(dtype)


def _label_image(shape=(Z, Y, X), dtype=np.uint32) -> np.ndarray:
    lab = np.zeros(shape, dtype=dtype)
    lab[..., 4:20, 6:30] = 1
    lab[..., 24:44, 34:60] = 2
    lab[..., 30:36, 8:16] = 3
    return lab


def _omero_dict() -> dict[str, Any]:
    return {
        "channels": [
            {
                "label": name,
                "color": color,
                "active": True,
                "window": {"start": lo, "end": hi, "min": mn, "max": mx},
            }
            for name, color, (lo, hi), (mn, mx) in zip(
                CHANNEL_NAMES, CHANNEL_COLORS, CONTRAST_LIMITS, CONTRAST_RANGES
            )
        ]
    }


def _image_label_dict() -> dict[str, Any]:
    return {
        "colors": [{"label-value": v, "rgba": list(rgba)} for v, rgba in LABEL_COLORS.items()],
        "properties": [{"label-value": v, **props} for v, props in LABEL_PROPERTIES.items()],
    }


def _import_ome_zarr():
    """Import ome-zarr-py's writer API.  ``ome_zarr.writer`` builds a
    deprecated ``Scaler()`` as a default argument at import time, which
    emits a DeprecationWarning; silence it here (locally) only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ome_zarr import format as ome_format
        from ome_zarr import scale as ome_scale
        from ome_zarr import writer as ome_writer
    return ome_format, ome_scale, ome_writer


def _ensure_dir(tmp_dir: Path | str) -> Path:
    """Create ``tmp_dir`` if needed (ngff-zarr's .ozx writer needs the parent
    directory to exist; it stages a hidden temp dir next to the archive)."""
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    return tmp_dir


def _pkg_version(name: str) -> str:
    from importlib.metadata import version

    return f"{name} {version(name)}"


# --------------------------------------------------------------------------
# Read-back helpers (plain zarr only)
# --------------------------------------------------------------------------


def _read_arrays(
    group: zarr.Group, paths: list[str]
) -> tuple[list[np.ndarray], list[tuple[int, ...]], list[tuple[int, ...] | None]]:
    arrays, chunks, shards = [], [], []
    for p in paths:
        arr = group[p]
        assert isinstance(arr, zarr.Array), p
        arrays.append(np.asarray(arr[...]))
        chunks.append(tuple(int(c) for c in arr.chunks))
        sh = getattr(arr, "shards", None)
        shards.append(None if sh is None else tuple(int(s) for s in sh))
    return arrays, chunks, shards


def _open_group(path: Path | str, zarr_format: int | None = None) -> zarr.Group:
    return zarr.open_group(str(path), mode="r", zarr_format=zarr_format)


def inspect_zip(path: Path) -> dict[str, Any]:
    """Describe a zip archive's layout (entry order, ZIP64, comment...)."""
    raw = Path(path).read_bytes()
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        comment = zf.comment
    json_idx = [i for i, n in enumerate(names) if n.rsplit("/", 1)[-1] == "zarr.json"]
    other_idx = [i for i, n in enumerate(names) if i not in set(json_idx)]
    try:
        comment_json = json.loads(comment.decode("utf-8")) if comment else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        comment_json = None
    # ZIP64 end-of-central-directory record / locator signatures.  They sit
    # just before the classic EOCD, i.e. in the last ~100 bytes + comment.
    tail = raw[-(22 + 20 + 56 + len(comment) + 64) :]
    eocd64 = b"PK\x06\x06" in tail
    eocd64_locator = b"PK\x06\x07" in tail

    def _has_zip64_extra(extra: bytes) -> bool:
        i = 0
        while i + 4 <= len(extra):
            hid = int.from_bytes(extra[i : i + 2], "little")
            size = int.from_bytes(extra[i + 2 : i + 4], "little")
            if hid == 0x0001:
                return True
            i += 4 + size
        return False

    return {
        "entries": names,
        "n_entries": len(names),
        "first_entry": names[0] if names else None,
        "root_zarr_json_first": bool(names) and names[0] == "zarr.json",
        "all_zarr_json_before_data": (
            bool(json_idx) and (not other_idx or max(json_idx) < min(other_idx))
        ),
        "directory_entries": [n for n in names if n.endswith("/")],
        "compress_types": sorted({i.compress_type for i in infos}),
        "all_stored": all(i.compress_type == zipfile.ZIP_STORED for i in infos),
        "comment": comment.decode("utf-8", "replace") if comment else "",
        "comment_json": comment_json,
        "zip64_eocd_record": eocd64,
        "zip64_eocd_locator": eocd64_locator,
        "zip64_entry_extras": any(_has_zip64_extra(i.extra) for i in infos),
        "zip64": eocd64 or any(_has_zip64_extra(i.extra) for i in infos),
        "size_bytes": len(raw),
    }


# --------------------------------------------------------------------------
# ome-zarr-py: write_multiscale / write_multiscale_labels with explicit
# coordinate transformations (0.4 and 0.5)
# --------------------------------------------------------------------------

_N_LEVELS = 3  # level factors 1, 2, 4 in y/x (z and c never downsampled)


def _explicit_transforms(axes: str) -> list[list[dict[str, Any]]]:
    """Per-level scale + translation (non-zero at level 0, pixel-centre shift
    for the downsampled levels)."""
    out = []
    for lvl in range(_N_LEVELS):
        f = 2**lvl
        scale = [SCALE0[a] * (f if a in "yx" else 1) for a in axes]
        trans = [OFFSET0[a] + ((f - 1) * SCALE0[a] / 2 if a in "yx" else 0.0) for a in axes]
        out.append(
            [
                {"type": "scale", "scale": scale},
                {"type": "translation", "translation": trans},
            ]
        )
    return out


@in_child_without_query_planning
def _omezarr_py_image_labels(tmp_dir: Path, version: str) -> Fixture:
    ome_format, ome_scale, ome_writer = _import_ome_zarr()
    FormatV04, FormatV05 = ome_format.FormatV04, ome_format.FormatV05

    fmt = FormatV04() if version == "0.4" else FormatV05()
    path = _ensure_dir(tmp_dir) / f"omezarr_py_v{version.replace('.', '')}.ome.zarr"
    image = _image()
    labels = _label_image()
    img_ct = _explicit_transforms("czyx")
    lab_ct = _explicit_transforms("zyx")

    with warnings.catch_warnings():
        # Scaler and coordinate_transformations are deprecated in ome-zarr 0.18
        # but are the only public way to write explicit per-level transforms.
        warnings.simplefilter("ignore", DeprecationWarning)
        scaler = ome_scale.Scaler(max_layer=_N_LEVELS - 1)
        pyramid = scaler.nearest(image)
        label_pyramid = scaler.nearest(labels)
        group = zarr.open_group(str(path), mode="w", zarr_format=fmt.zarr_format)
        ome_writer.write_multiscale(
            pyramid,
            group,
            fmt=fmt,
            axes=["c", "z", "y", "x"],
            axes_units=dict(SPATIAL_UNITS),
            coordinate_transformations=img_ct,
            storage_options={"chunks": (1, 2, 16, 32)},
            name="image",
            metadata={"omero": _omero_dict()},
        )
        ome_writer.write_multiscale_labels(
            label_pyramid,
            group,
            LABEL_NAME,
            fmt=fmt,
            axes=["z", "y", "x"],
            axes_units=dict(SPATIAL_UNITS),
            coordinate_transformations=lab_ct,
            storage_options={"chunks": (2, 16, 32)},
            label_metadata=_image_label_dict(),
        )

    paths = [f"s{i}" for i in range(_N_LEVELS)]
    g = _open_group(path, fmt.zarr_format)
    levels, chunks, shards = _read_arrays(g, paths)
    lab_levels, _, _ = _read_arrays(g[f"labels/{LABEL_NAME}"], paths)

    notes: dict[str, Any] = {
        "api": "ome_zarr.writer.write_multiscale + write_multiscale_labels "
        "(explicit coordinate_transformations; pyramid from Scaler.nearest)",
        "why_not_write_image": "ome-zarr 0.18 write_image()/write_labels() "
        "accept coordinate_transformations but silently ignore them (only a "
        "DeprecationWarning); they always write scale + pixel-centre "
        "translation with zero offset at level 0.",
        "omero_version_key": False,
        "image_label_has_source": False,
        "image_label_version_key": True,
    }
    if version == "0.5":
        notes["labels_group_ome_has_version"] = False  # ome-zarr-py quirk
        notes["label_arrays_have_dimension_names"] = False  # quirk (axes as str)
        notes["image_arrays_have_dimension_names"] = True

    return Fixture(
        path=path,
        version=version,
        axes=["c", "z", "y", "x"],
        units=dict(SPATIAL_UNITS),
        levels=levels,
        scales=[t[0]["scale"] for t in img_ct],
        translations=[t[1]["translation"] for t in img_ct],
        channel_names=list(CHANNEL_NAMES),
        channel_colors=list(CHANNEL_COLORS),
        contrast_limits=list(CONTRAST_LIMITS),
        contrast_ranges=list(CONTRAST_RANGES),
        labels={LABEL_NAME: lab_levels},
        label_colors={LABEL_NAME: dict(LABEL_COLORS)},
        label_properties={LABEL_NAME: {k: dict(v) for k, v in LABEL_PROPERTIES.items()}},
        label_paths={LABEL_NAME: list(paths)},
        label_axes={LABEL_NAME: ["z", "y", "x"]},
        label_scales={LABEL_NAME: [t[0]["scale"] for t in lab_ct]},
        label_translations={LABEL_NAME: [t[1]["translation"] for t in lab_ct]},
        sharded=False,
        writer=_pkg_version("ome-zarr"),
        chunks=chunks,
        shards=shards,
        zarr_format=fmt.zarr_format,
        dataset_paths=paths,
        name="image",
        notes=notes,
    )


def make_omezarr_py_v04_image_labels(tmp_dir: Path) -> Fixture:
    """ome-zarr-py, OME-Zarr 0.4 / Zarr v2: czyx uint16 3-level pyramid with
    explicit scale + non-zero translation, units, omero, and labels/cells
    (uint32, image-label colors + properties)."""
    return _omezarr_py_image_labels(tmp_dir, "0.4")


def make_omezarr_py_v05_image_labels(tmp_dir: Path) -> Fixture:
    """Same as the 0.4 fixture but OME-Zarr 0.5 / Zarr v3 (FormatV05)."""
    return _omezarr_py_image_labels(tmp_dir, "0.5")


# --------------------------------------------------------------------------
# ome-zarr-py: the high-level write_image / write_labels API (0.5)
# --------------------------------------------------------------------------


@in_child_without_query_planning
def make_omezarr_py_v05_write_image_api(tmp_dir: Path) -> Fixture:
    """ome-zarr-py ``write_image`` + ``write_labels`` (the recommended API),
    OME-Zarr 0.5: pyramid via scale_factors (RESIZE for the image, NEAREST
    for labels), auto scale + pixel-centre translation (zero at level 0)."""
    ome_format, _, ome_writer = _import_ome_zarr()
    FormatV05 = ome_format.FormatV05
    write_image, write_labels = ome_writer.write_image, ome_writer.write_labels

    path = _ensure_dir(tmp_dir) / "omezarr_py_v05_write_image.ome.zarr"
    scale = {a: SCALE0[a] for a in "czyx"}
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    write_image(
        _image(seed=1),
        group,
        scale_factors=[2, 4],
        fmt=FormatV05(),
        axes="czyx",
        scale=scale,
        axes_units=dict(SPATIAL_UNITS),
        storage_options={"chunks": (1, 2, 16, 32)},
        omero=_omero_dict(),
    )
    write_labels(
        _label_image(),
        group,
        name=LABEL_NAME,
        scaler=None,  # default is a deprecated Scaler() that overrides scale_factors
        scale_factors=[2, 4],
        fmt=FormatV05(),
        axes="zyx",
        scale={a: SCALE0[a] for a in "zyx"},
        axes_units=dict(SPATIAL_UNITS),
        label_metadata=_image_label_dict(),
    )

    paths = [f"s{i}" for i in range(_N_LEVELS)]
    g = _open_group(path, 3)
    levels, chunks, shards = _read_arrays(g, paths)
    lab_levels, _, _ = _read_arrays(g[f"labels/{LABEL_NAME}"], paths)

    def auto(axes: str):
        scales, trans = [], []
        for lvl in range(_N_LEVELS):
            f = 2**lvl
            s = [SCALE0[a] * (f if a in "yx" else 1) for a in axes]
            scales.append(s)
            trans.append([si / 2 - SCALE0[a] / 2 for si, a in zip(s, axes)])
        return scales, trans

    img_s, img_t = auto("czyx")
    lab_s, lab_t = auto("zyx")
    return Fixture(
        path=path,
        version="0.5",
        axes=["c", "z", "y", "x"],
        units=dict(SPATIAL_UNITS),
        levels=levels,
        scales=img_s,
        translations=img_t,
        channel_names=list(CHANNEL_NAMES),
        channel_colors=list(CHANNEL_COLORS),
        contrast_limits=list(CONTRAST_LIMITS),
        contrast_ranges=list(CONTRAST_RANGES),
        labels={LABEL_NAME: lab_levels},
        label_colors={LABEL_NAME: dict(LABEL_COLORS)},
        label_properties={LABEL_NAME: {k: dict(v) for k, v in LABEL_PROPERTIES.items()}},
        label_paths={LABEL_NAME: list(paths)},
        label_axes={LABEL_NAME: ["z", "y", "x"]},
        label_scales={LABEL_NAME: lab_s},
        label_translations={LABEL_NAME: lab_t},
        sharded=False,
        writer=_pkg_version("ome-zarr"),
        chunks=chunks,
        shards=shards,
        zarr_format=3,
        dataset_paths=paths,
        name="image",
        notes={
            "api": "ome_zarr.writer.write_image + write_labels",
            "omero_version_key": True,  # omero gets "version": "0.5" inside
            "omero_window_values_are_floats": True,  # pydantic turns 10 -> 10.0
            "image_downsampling": "skimage resize (anti-aliased), not striding",
            "labels_group_ome_has_version": False,
        },
    )


# --------------------------------------------------------------------------
# ngff-zarr: sharded 0.5 directory and .ozx
# --------------------------------------------------------------------------

NGFF_AXES = ["t", "c", "z", "y", "x"]
NGFF_SCALE0 = {"t": 1.5, "c": 1.0, "z": 2.0, "y": 0.5, "x": 0.25}
NGFF_OFFSET0 = {"t": 0.0, "c": 0.0, "z": 1.0, "y": 10.0, "x": 20.0}
NGFF_UNITS = {"t": "second", **SPATIAL_UNITS}


def _ngff_multiscales():
    import ngff_zarr as nz

    data = _image(shape=(2, C, Z, Y, X), seed=2)
    image = nz.to_ngff_image(
        data,
        dims=NGFF_AXES,
        scale={a: NGFF_SCALE0[a] for a in ("t", "z", "y", "x")},
        translation={a: NGFF_OFFSET0[a] for a in ("t", "z", "y", "x")},
        axes_units=dict(NGFF_UNITS),
        channel_names=list(CHANNEL_NAMES),
        name="image",
    )
    multiscales = nz.to_multiscales(
        image,
        # every spatial dim must be listed, otherwise the writer KeyErrors
        scale_factors=[{"z": 1, "y": 2, "x": 2}, {"z": 1, "y": 4, "x": 4}],
        chunks={"t": 1, "c": 1, "z": 2, "y": 16, "x": 16},
        method=nz.Methods.DASK_BIN_SHRINK,  # no itk / dask-image needed
    )
    # to_ngff_image(channel_names=...) does NOT produce omero metadata;
    # it has to be attached explicitly.
    multiscales.metadata.omero = nz.Omero(
        channels=[
            nz.OmeroChannel(
                color=color,
                label=name,
                window=nz.OmeroWindow(min=mn, max=mx, start=lo, end=hi),
            )
            for name, color, (lo, hi), (mn, mx) in zip(
                CHANNEL_NAMES, CHANNEL_COLORS, CONTRAST_LIMITS, CONTRAST_RANGES
            )
        ]
    )
    return multiscales


def _ngff_ground_truth(path: Path, store, zarr_format: int = 3) -> dict[str, Any]:
    paths = [f"scale{i}/image" for i in range(_N_LEVELS)]
    g = zarr.open_group(store, mode="r", zarr_format=zarr_format)
    levels, chunks, shards = _read_arrays(g, paths)
    scales, trans = [], []
    for lvl in range(_N_LEVELS):
        f = 2**lvl
        scales.append([NGFF_SCALE0[a] * (f if a in "yx" else 1) for a in NGFF_AXES])
        trans.append(
            [
                NGFF_OFFSET0[a] + ((f - 1) * NGFF_SCALE0[a] / 2 if a in "yx" else 0.0)
                for a in NGFF_AXES
            ]
        )
    return {
        "path": path,
        "version": "0.5",
        "axes": list(NGFF_AXES),
        "units": dict(NGFF_UNITS),
        "levels": levels,
        "scales": scales,
        "translations": trans,
        "channel_names": list(CHANNEL_NAMES),
        "channel_colors": list(CHANNEL_COLORS),
        "contrast_limits": list(CONTRAST_LIMITS),
        "contrast_ranges": list(CONTRAST_RANGES),
        "labels": {},
        "label_colors": {},
        "sharded": any(s is not None for s in shards),
        "writer": _pkg_version("ngff-zarr"),
        "chunks": chunks,
        "shards": shards,
        "zarr_format": 3,
        "dataset_paths": paths,
        "name": "image",
    }


_NGFF_NOTES = {
    "api": "ngff_zarr.to_ngff_image + to_multiscales + to_ngff_zarr",
    "labels": "ngff-zarr 0.50 has no label-image writer; no labels written",
    "omero": "written from multiscales.metadata.omero (Omero/OmeroChannel/"
    "OmeroWindow); channel_names alone does not create omero; no 'active' key",
    "dataset_paths_nested": "datasets are 'scaleN/image' (array inside an "
    "intermediate group 'scaleN' whose attributes hold _ARRAY_DIMENSIONS)",
    "consolidated_metadata": "root zarr.json carries consolidated_metadata",
    "multiscale_extra_keys": "multiscales[0] has 'type', 'metadata' and '@type': 'ngff:Image'",
    "translations": "level-0 translation as given; lower levels add the "
    "pixel-centre shift (f-1)*s0/2",
    "shards_clipped_to_shape": "shard shape = chunks*chunks_per_shard, clipped to the array shape",
}


@in_child_without_query_planning
def make_ngffzarr_v05_sharded_dir(tmp_dir: Path) -> Fixture:
    """ngff-zarr, OME-Zarr 0.5 directory, tczyx uint16, sharded
    (chunks_per_shard=2), scale + translation, units, omero."""
    import ngff_zarr as nz

    path = _ensure_dir(tmp_dir) / "ngffzarr_v05_sharded.ome.zarr"
    nz.to_ngff_zarr(str(path), _ngff_multiscales(), version="0.5", chunks_per_shard=2)
    gt = _ngff_ground_truth(path, str(path))
    return Fixture(**gt, notes={**_NGFF_NOTES, "chunks_per_shard": 2})


@in_child_without_query_planning
def make_ngffzarr_v05_ozx(tmp_dir: Path) -> Fixture:
    """ngff-zarr, the same image written as a single-file RFC-9 ``.ozx``
    (``to_ngff_zarr(<path>.ozx, ...)``; chunks_per_shard defaults to 2)."""
    import ngff_zarr as nz
    from zarr.storage import ZipStore

    path = _ensure_dir(tmp_dir) / "ngffzarr_v05.ozx"
    nz.to_ngff_zarr(str(path), _ngff_multiscales(), version="0.5")
    store = ZipStore(str(path), mode="r")
    try:
        gt = _ngff_ground_truth(path, store)
    finally:
        store.close()
    notes = {
        **_NGFF_NOTES,
        "chunks_per_shard": "2 (ngff-zarr default for .ozx)",
        "zip": inspect_zip(path),
        "zip_writer": "ngff_zarr.rfc9_zip.write_store_to_zip (directory staged "
        "next to the archive, then zipped with zipfile, allowZip64=True, "
        "ZIP_STORED)",
    }
    return Fixture(**gt, notes=notes)


# --------------------------------------------------------------------------
# ome-zarr-py: plain 2D yx 0.4, no omero
# --------------------------------------------------------------------------


@in_child_without_query_planning
def make_omezarr_py_v04_2d_yx(tmp_dir: Path) -> Fixture:
    """ome-zarr-py ``write_image``, OME-Zarr 0.4: 2D yx uint8, no omero, no
    units, default scale (1.0) -- a reader must fall back to defaults."""
    ome_format, _, ome_writer = _import_ome_zarr()
    FormatV04, write_image = ome_format.FormatV04, ome_writer.write_image

    path = _ensure_dir(tmp_dir) / "omezarr_py_v04_2d.ome.zarr"
    data = _image(shape=(Y, X), dtype=np.uint8, seed=3)
    group = zarr.open_group(str(path), mode="w", zarr_format=2)
    write_image(data, group, scale_factors=[2, 4], fmt=FormatV04())  # axes auto "yx"
    paths = [f"s{i}" for i in range(_N_LEVELS)]
    levels, chunks, shards = _read_arrays(_open_group(path, 2), paths)
    scales = [[float(2**i)] * 2 for i in range(_N_LEVELS)]
    trans = [[(2**i - 1) / 2] * 2 for i in range(_N_LEVELS)]
    return Fixture(
        path=path,
        version="0.4",
        axes=["y", "x"],
        units={},
        levels=levels,
        scales=scales,
        translations=trans,
        channel_names=None,
        channel_colors=None,
        contrast_limits=None,
        labels={},
        label_colors={},
        sharded=False,
        writer=_pkg_version("ome-zarr"),
        chunks=chunks,
        shards=shards,
        zarr_format=2,
        dataset_paths=paths,
        name="image",
        notes={
            "api": "ome_zarr.writer.write_image (no omero kwarg -> no omero key)",
            "translations": "auto pixel-centre shift (zero at level 0)",
            "chunks": "one chunk per level (dask default chunking)",
        },
    )


# --------------------------------------------------------------------------
# Both .zattrs (0.4) and zarr.json (0.5) for the same hierarchy
# --------------------------------------------------------------------------

SIDE_V05_SCALE0 = {"c": 1.0, "z": 2.0, "y": 0.5, "x": 0.25}
SIDE_V04_SCALE0 = {"c": 1.0, "z": 3.0, "y": 0.7, "x": 0.3}  # the decoy


@in_child_without_query_planning
def make_zarr_v2_and_v3_side_by_side(tmp_dir: Path) -> Fixture:
    """One directory holding BOTH OME-Zarr 0.4 (.zgroup/.zattrs/.zarray, Zarr
    v2 chunk keys ``s0/0/0/0/0``) and OME-Zarr 0.5 (zarr.json, chunk keys
    ``s0/c/0/0/0/0``) for the same hierarchy.  The two halves have different
    scales AND different pixel values; the ground truth is the 0.5 half.

    Each half is written by ome-zarr-py into its own directory; the two trees
    are then merged with ``shutil.copytree`` (no file name collides).
    """
    ome_format, _, ome_writer = _import_ome_zarr()
    FormatV04, FormatV05 = ome_format.FormatV04, ome_format.FormatV05
    write_image = ome_writer.write_image

    path = _ensure_dir(tmp_dir) / "side_by_side.ome.zarr"
    staging = _ensure_dir(tmp_dir) / "_side_by_side_staging"
    v3_data = _image(seed=4)
    v2_data = (v3_data // 2 + 7).astype(np.uint16)  # distinguishable pixels
    omero = _omero_dict()
    omero_v2 = json.loads(json.dumps(omero))
    for ch in omero_v2["channels"]:
        ch["label"] = ch["label"] + "_v04"
        ch["color"] = "FF0000"
    for fmt, data, scale0, om, sub in (
        (FormatV04(), v2_data, SIDE_V04_SCALE0, omero_v2, "v2"),
        (FormatV05(), v3_data, SIDE_V05_SCALE0, omero, "v3"),
    ):
        group = zarr.open_group(str(staging / sub), mode="w", zarr_format=fmt.zarr_format)
        write_image(
            data,
            group,
            scale_factors=[2, 4],
            method=None,
            fmt=fmt,
            axes="czyx",
            scale=dict(scale0),
            axes_units=dict(SPATIAL_UNITS),
            storage_options={"chunks": (1, 2, 16, 32)},
            omero=om,
        )
    shutil.copytree(staging / "v2", path)
    shutil.copytree(staging / "v3", path, dirs_exist_ok=True)
    shutil.rmtree(staging)

    paths = [f"s{i}" for i in range(_N_LEVELS)]
    levels, chunks, shards = _read_arrays(_open_group(path, 3), paths)
    v2_levels, _, _ = _read_arrays(_open_group(path, 2), paths)

    def auto(scale0):
        s = [[scale0[a] * (2**i if a in "yx" else 1) for a in "czyx"] for i in range(_N_LEVELS)]
        t = [[si / 2 - scale0[a] / 2 for si, a in zip(row, "czyx")] for row in s]
        return s, t

    s3, t3 = auto(SIDE_V05_SCALE0)
    s2, t2 = auto(SIDE_V04_SCALE0)
    return Fixture(
        path=path,
        version="0.5",
        axes=["c", "z", "y", "x"],
        units=dict(SPATIAL_UNITS),
        levels=levels,
        scales=s3,
        translations=t3,
        channel_names=list(CHANNEL_NAMES),
        channel_colors=list(CHANNEL_COLORS),
        contrast_limits=list(CONTRAST_LIMITS),
        contrast_ranges=list(CONTRAST_RANGES),
        labels={},
        label_colors={},
        sharded=False,
        writer=_pkg_version("ome-zarr") + " (x2, merged with shutil)",
        chunks=chunks,
        shards=shards,
        zarr_format=3,
        dataset_paths=paths,
        name="image",
        notes={
            "decoy_version": "0.4",
            "decoy_scales": s2,
            "decoy_translations": t2,
            "decoy_channel_names": [c["label"] for c in omero_v2["channels"]],
            "decoy_channel_colors": [c["color"] for c in omero_v2["channels"]],
            "decoy_levels": v2_levels,
            "zarr_open_group_default": "zarr 3.1 picks zarr.json (v3) and emits "
            "ZarrUserWarning 'Both zarr.json ... and .zgroup ... exist'",
        },
    )


# --------------------------------------------------------------------------
# Hand-written 0.1 / 0.2 / 0.3 (plain zarr v2 + .zattrs)
# --------------------------------------------------------------------------


def make_v01_to_v03_image(tmp_dir: Path, version: str = "0.3") -> Fixture:
    """Hand-written legacy multiscale image (plain zarr v2 + .zattrs JSON)
    following ngff-0.2-spec.txt:

    * 0.1 / 0.2: no ``axes`` -> implied 5D (t, c, z, y, x); 0.1 uses the "."
      dimension separator, 0.2 the nested "/" one.
    * 0.3: ``"axes": ["c", "y", "x"]`` (list of strings), "/" separator.

    Paths "0", "1", "2"; omero with version; labels/cells with image-label.
    No coordinateTransformations exist before 0.4: ``scales`` hold the
    implied values (level shape ratio, 1.0 at level 0), ``translations`` are
    None.
    """
    import numcodecs

    if version not in ("0.1", "0.2", "0.3"):
        raise ValueError(version)
    path = _ensure_dir(tmp_dir) / f"legacy_v{version.replace('.', '')}.zarr"
    if version == "0.3":
        axes = ["c", "y", "x"]
        base = _image(shape=(C, Y, X), seed=5)
        lab0 = _label_image(shape=(1, Y, X))
    else:
        axes = ["t", "c", "z", "y", "x"]
        base = _image(shape=(1, C, Z, Y, X), seed=5)
        lab0 = _label_image(shape=(1, 1, Z, Y, X))
    sep = "." if version == "0.1" else "/"
    compressor = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)

    def strided(a: np.ndarray, f: int) -> np.ndarray:
        return a[..., ::f, ::f]

    def write_pyramid(group: zarr.Group, data: np.ndarray) -> list[str]:
        names = []
        for lvl in range(_N_LEVELS):
            arr = strided(data, 2**lvl)
            chunks = tuple(1 if i < arr.ndim - 2 else min(32, s) for i, s in enumerate(arr.shape))
            za = group.create_array(
                str(lvl),
                shape=arr.shape,
                dtype=arr.dtype,
                chunks=chunks,
                compressors=compressor,
                chunk_key_encoding={"name": "v2", "separator": sep},
            )
            za[...] = arr
            names.append(str(lvl))
        return names

    def multiscales(name: str, paths: list[str]) -> list[dict[str, Any]]:
        ms: dict[str, Any] = {
            "version": version,
            "name": name,
            "datasets": [{"path": p} for p in paths],
            "type": "nearest",
            "metadata": {"method": "numpy strided slicing", "version": np.__version__},
        }
        if version == "0.3":
            ms["axes"] = list(axes)
        return [ms]

    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    paths = write_pyramid(root, base)
    omero = {
        "id": 1,
        "name": f"legacy v{version}",
        "version": version,
        "channels": [
            {
                "active": True,
                "coefficient": 1,
                "color": color,
                "family": "linear",
                "inverted": False,
                "label": cname,
                "window": {"start": lo, "end": hi, "min": mn, "max": mx},
            }
            for cname, color, (lo, hi), (mn, mx) in zip(
                CHANNEL_NAMES, CHANNEL_COLORS, CONTRAST_LIMITS, CONTRAST_RANGES
            )
        ],
        "rdefs": {"defaultT": 0, "defaultZ": 0, "model": "color"},
    }
    root.attrs.update({"multiscales": multiscales("image", paths), "omero": omero})

    labels_group = root.create_group("labels")
    labels_group.attrs["labels"] = [LABEL_NAME]
    lab_group = labels_group.create_group(LABEL_NAME)
    lab_paths = write_pyramid(lab_group, lab0)
    lab_group.attrs.update(
        {
            "multiscales": multiscales(LABEL_NAME, lab_paths),
            "image-label": {
                "version": version,
                **_image_label_dict(),
                "source": {"image": "../../"},
            },
        }
    )

    g = _open_group(path, 2)
    levels, chunks, shards = _read_arrays(g, paths)
    lab_levels, _, _ = _read_arrays(g[f"labels/{LABEL_NAME}"], lab_paths)

    def implied(shapes):
        s0 = shapes[0]
        return [[float(a / b) for a, b in zip(s0, s)] for s in shapes]

    return Fixture(
        path=path,
        version=version,
        axes=list(axes),
        units={},
        levels=levels,
        scales=implied([lv.shape for lv in levels]),
        translations=[None] * _N_LEVELS,
        channel_names=list(CHANNEL_NAMES),
        channel_colors=list(CHANNEL_COLORS),
        contrast_limits=list(CONTRAST_LIMITS),
        contrast_ranges=list(CONTRAST_RANGES),
        labels={LABEL_NAME: lab_levels},
        label_colors={LABEL_NAME: dict(LABEL_COLORS)},
        label_properties={LABEL_NAME: {k: dict(v) for k, v in LABEL_PROPERTIES.items()}},
        label_paths={LABEL_NAME: lab_paths},
        label_axes={LABEL_NAME: list(axes)},
        label_scales={LABEL_NAME: implied([lv.shape for lv in lab_levels])},
        label_translations={LABEL_NAME: [None] * _N_LEVELS},
        sharded=False,
        writer=f"hand-written (zarr {zarr.__version__}, zarr_format=2)",
        chunks=chunks,
        shards=shards,
        zarr_format=2,
        dataset_paths=paths,
        name="image",
        notes={
            "axes_in_metadata": version == "0.3",
            "axes_implied": version in ("0.1", "0.2"),
            "dimension_separator": sep,
            "scales_source": "implied from level shape ratios (no "
            "coordinateTransformations before 0.4); translations None",
            "compressor": "blosc lz4",
            "zarray_has_dimension_separator_key": True,  # zarr 3 always writes it
        },
    )


def make_v01_image(tmp_dir: Path) -> Fixture:
    return make_v01_to_v03_image(tmp_dir, "0.1")


def make_v02_image(tmp_dir: Path) -> Fixture:
    return make_v01_to_v03_image(tmp_dir, "0.2")


def make_v03_image(tmp_dir: Path) -> Fixture:
    return make_v01_to_v03_image(tmp_dir, "0.3")


#: name -> factory, convenient for ``pytest.mark.parametrize``.
ALL_FIXTURES: dict[str, Callable[[Path], Fixture]] = {
    "omezarr_py_v04_image_labels": make_omezarr_py_v04_image_labels,
    "omezarr_py_v05_image_labels": make_omezarr_py_v05_image_labels,
    "omezarr_py_v05_write_image_api": make_omezarr_py_v05_write_image_api,
    "ngffzarr_v05_sharded_dir": make_ngffzarr_v05_sharded_dir,
    "ngffzarr_v05_ozx": make_ngffzarr_v05_ozx,
    "omezarr_py_v04_2d_yx": make_omezarr_py_v04_2d_yx,
    "zarr_v2_and_v3_side_by_side": make_zarr_v2_and_v3_side_by_side,
    "v01_image": make_v01_image,
    "v02_image": make_v02_image,
    "v03_image": make_v03_image,
}


@in_child_without_query_planning
def write_ngff_zarr_image(
    path: Path,
    data: np.ndarray,
    dims: list[str],
    version: str,
    scale: dict[str, float] | None = None,
    translation: dict[str, float] | None = None,
) -> None:
    """*data* written by ngff-zarr (two levels) at *path* (a directory or ``.ozx``)."""
    import ngff_zarr as nz

    img = nz.to_ngff_image(data, dims=dims, scale=scale, translation=translation)
    ms = nz.to_multiscales(img, scale_factors=[2])
    nz.to_ngff_zarr(str(path), ms, version=version)
