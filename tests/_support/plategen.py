"""HCS plate fixtures (OME-Zarr 0.3 / 0.4 / 0.5) with pixel ground truth, fast.

Three writers, one :class:`PlateSpec` (what the plate holds) and one ground truth
(:meth:`PlateSpec.field_data`, :meth:`PlateSpec.label_data`: every field of every well has
its own pixels, so a well shown in the wrong place is caught):

* :func:`write_plate_omezarr_py` -- **ome-zarr-py** (0.4, Zarr v2): ``write_plate_metadata``
  for the plate, ``write_well_metadata`` for every well, ``write_image`` + ``write_labels``
  for one complete template field. Writing 768 fields with ``write_image`` would take
  ~50 s here (66 ms each), so every other field is a copy of the template's files whose
  chunk files are re-encoded with that field's pixels, using the compressor the template's
  ``.zarray`` names (numcodecs): metadata and layout are exactly ome-zarr-py's.
* :func:`write_plate` -- plain Zarr written by hand (JSON documents + chunk files, zstd via
  numcodecs), any of 0.3 / 0.4 (Zarr v2) / 0.5 (Zarr v3); hundreds of wells in ~1 s. Also
  writes the broken and unusual cases (missing well groups, missing fields, acquisitions,
  odd field sizes).
* :func:`write_plate_sharded` -- zarr-python ``create_array`` with sharding + zstd
  (``tests/omegen.write_image`` per field), 0.5; for small plates.

* :func:`write_plate_ours` -- every field written by **our** writer
  (``napari_ozx.ngff.write.writer.write_ome_zarr``: sharded, zstd, mean-downsampled levels).

``tests/omegen.zip_dir`` turns a 0.5 directory into an ``.ozx``.
Nothing here imports ``napari_ozx`` except :func:`write_plate_ours`.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests._support.classic_dask import in_child_without_query_planning

OMERO = {
    "channels": [
        {
            "label": "DAPI",
            "color": "0000FF",
            "window": {"start": 0, "end": 4000, "min": 0, "max": 65535},
            "active": True,
        },
        {
            "label": "GFP",
            "color": "00FF00",
            "window": {"start": 0, "end": 4000, "min": 0, "max": 65535},
            "active": True,
        },
        {
            "label": "RFP",
            "color": "FF0000",
            "window": {"start": 0, "end": 4000, "min": 0, "max": 65535},
            "active": True,
        },
    ]
}
LABEL_COLORS = {1: [255, 0, 0, 255], 2: [0, 255, 0, 255]}


def row_names(n: int) -> list[str]:
    out = []
    for i in range(n):
        out.append(chr(65 + i) if i < 26 else "A" + chr(65 + i - 26))  # A..Z, AA..AF (1536)
    return out


@dataclass
class PlateSpec:
    n_rows: int = 8
    n_cols: int = 12
    fields: int = 2
    channels: int = 2
    size: tuple[int, int] = (64, 64)
    levels: int = 2
    labels: bool = True
    z: int = 0  # > 0: axes czyx with this many planes
    missing: set[tuple[int, int]] = field(default_factory=set)  # not in the plate metadata
    missing_groups: set[tuple[int, int]] = field(default_factory=set)  # listed, group absent
    missing_fields: set[tuple[int, int, int]] = field(
        default_factory=set
    )  # listed, field group absent
    acquisitions: int = 0  # > 0: fields split round-robin over this many acquisitions
    field_size: Callable[[int, int, int], tuple[int, int]] | None = None  # per (r, c, f)
    scale_yx: tuple[float, float] = (0.5, 0.5)
    name: str = "test plate"
    pattern: str = "ramp"  # "ramp": unique values per well/field/channel; "cells": blobs
    chunk_yx: int = 64  # chunk edge of the hand-written arrays
    z_of: Callable[[int, int, int], int] | None = None  # per (r, c, f) planes (z > 0)

    def nz(self, r: int, c: int, f: int) -> int:
        return self.z_of(r, c, f) if self.z_of and self.z else self.z

    @property
    def rows(self) -> list[str]:
        return row_names(self.n_rows)

    @property
    def cols(self) -> list[str]:
        return [str(i + 1) for i in range(self.n_cols)]

    @property
    def axes(self) -> str:
        return "czyx" if self.z else "cyx"

    def wells(self) -> list[tuple[int, int]]:
        return [
            (r, c)
            for r in range(self.n_rows)
            for c in range(self.n_cols)
            if (r, c) not in self.missing
        ]

    def well_path(self, r: int, c: int) -> str:
        return f"{self.rows[r]}/{self.cols[c]}"

    def acquisition_of(self, f: int) -> int | None:
        return (f % self.acquisitions) + 1 if self.acquisitions else None

    def shape(self, r: int, c: int, f: int, level: int = 0) -> tuple[int, ...]:
        h, w = self.field_size(r, c, f) if self.field_size else self.size
        for _ in range(level):
            h, w = -(-h // 2), -(-w // 2)
        return (self.channels, *((self.nz(r, c, f),) if self.z else ()), h, w)

    def field_data(self, r: int, c: int, f: int, level: int = 0) -> np.ndarray:
        """Level *level* of field *f* of well (r, c): unique per well/field/channel."""
        h, w = self.field_size(r, c, f) if self.field_size else self.size
        wi = r * self.n_cols + c
        if self.pattern == "cells":
            return _cells(self, r, c, f, h, w, level)
        ch = np.arange(self.channels, dtype=np.int64)[:, None, None]
        yy = np.arange(h, dtype=np.int64)[None, :, None]
        xx = np.arange(w, dtype=np.int64)[None, None, :]
        base = (wi * 37 + f * 1009 + ch * 20011 + yy + 2 * xx + 1) % 65521
        if self.z:
            zz = np.arange(self.nz(r, c, f), dtype=np.int64)[None, :, None, None]
            base = (base[:, None] + zz * 3001) % 65521
        data = base.astype(np.uint16)
        for _ in range(level):
            data = data[..., ::2, ::2]
        return np.ascontiguousarray(data)

    def label_data(self, r: int, c: int, f: int, level: int = 0) -> np.ndarray:
        if self.pattern == "cells":
            lab = _cells(self, r, c, f, *self.shape(r, c, f)[-2:], 0, labels=True)
            for _ in range(level):
                lab = lab[..., ::2, ::2]
            return np.ascontiguousarray(lab)
        h, w = self.field_size(r, c, f) if self.field_size else self.size
        yy, xx = np.mgrid[0:h, 0:w]
        lab = np.zeros((h, w), np.uint32)
        lab[(yy // 16 + xx // 16 + r + c + f) % 3 == 1] = 1
        lab[(yy // 16 + xx // 16 + r + c + f) % 3 == 2] = 2
        if self.z:
            lab = np.broadcast_to(lab, (self.nz(r, c, f), h, w)).copy()
        for _ in range(level):
            lab = lab[..., ::2, ::2]
        return np.ascontiguousarray(lab)

    def present_fields(self, r: int, c: int) -> list[int]:
        return [f for f in range(self.fields) if (r, c, f) not in self.missing_fields]


def _cells(
    spec: PlateSpec, r: int, c: int, f: int, h: int, w: int, level: int, labels: bool = False
) -> np.ndarray:
    """Round 'nuclei' (channel 0) with a dimmer halo (channel 1); count varies by well."""
    rng = np.random.default_rng((r * 1000 + c) * 10 + f)
    n = 2 + (r * 7 + c * 3) % 9
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((spec.channels, h, w), np.float32)
    lab = np.zeros((h, w), np.uint32)
    rad = max(3.0, min(h, w) / 9)
    for k in range(n):
        cy, cx = rng.uniform(rad, h - rad), rng.uniform(rad, w - rad)
        d2 = ((yy - cy) ** 2 + (xx - cx) ** 2) / rad**2
        img[0] += 3500 * np.exp(-d2 * 1.5)
        if spec.channels > 1:
            img[1] += 1800 * np.exp(-d2 * 0.4)
        lab[d2 < 1] = k % 2 + 1
    img += rng.normal(120, 20, img.shape).astype(np.float32)
    if labels:
        out = lab if not spec.z else np.broadcast_to(lab, (spec.z, h, w)).copy()
        return out
    data = np.clip(img, 0, 65535).astype(np.uint16)
    if spec.z:
        data = np.broadcast_to(data[:, None], (spec.channels, spec.z, h, w)).copy()
    for _ in range(level):
        data = data[..., ::2, ::2]
    return np.ascontiguousarray(data)


# ------------------------------------------------------------------ metadata


def _axes_json(axes: str, version: str) -> list[Any]:
    if version == "0.3":
        return list(axes)
    out = []
    for a in axes:
        if a == "c":
            out.append({"name": "c", "type": "channel"})
        else:
            out.append({"name": a, "type": "space", "unit": "micrometer"})
    return out


def _multiscales(spec: PlateSpec, version: str, name: str, axes: str) -> list[dict[str, Any]]:
    datasets = []
    for lvl in range(spec.levels):
        ds: dict[str, Any] = {"path": str(lvl)}
        if version not in ("0.1", "0.2", "0.3"):
            f = 2**lvl
            s = [
                1.0
                if a == "c"
                else (
                    spec.scale_yx[0] * f if a == "y" else spec.scale_yx[1] * f if a == "x" else 1.0
                )
                for a in axes
            ]
            t = [0.0 if a in "cz" else (si - si / f) / 2 for a, si in zip(axes, s)]
            ds["coordinateTransformations"] = [
                {"type": "scale", "scale": s},
                {"type": "translation", "translation": t},
            ]
        datasets.append(ds)
    ms: dict[str, Any] = {"name": name, "axes": _axes_json(axes, version), "datasets": datasets}
    if version != "0.5":
        ms["version"] = version
    return [ms]


def _plate_json(spec: PlateSpec, version: str) -> dict[str, Any]:
    wells = []
    for r, c in spec.wells():
        w: dict[str, Any] = {"path": spec.well_path(r, c)}
        if version not in ("0.1", "0.2", "0.3"):
            w.update(rowIndex=r, columnIndex=c)
        wells.append(w)
    plate: dict[str, Any] = {
        "name": spec.name,
        "rows": [{"name": n} for n in spec.rows],
        "columns": [{"name": n} for n in spec.cols],
        "wells": wells,
        "field_count": spec.fields,
    }
    if spec.acquisitions:
        plate["acquisitions"] = [
            {"id": i + 1, "name": f"acq {i + 1}"} for i in range(spec.acquisitions)
        ]
    if version != "0.5":
        plate["version"] = version
    return plate


def _well_json(spec: PlateSpec, version: str) -> dict[str, Any]:
    images = []
    for f in range(spec.fields):
        im: dict[str, Any] = {"path": str(f)}
        if spec.acquisitions:
            im["acquisition"] = spec.acquisition_of(f)
        images.append(im)
    well: dict[str, Any] = {"images": images}
    if version != "0.5":
        well["version"] = version
    return well


def _omero(spec: PlateSpec) -> dict[str, Any]:
    return {"channels": [dict(c) for c in OMERO["channels"][: spec.channels]]}


# ------------------------------------------------------------- chunk writing


class _Files:
    """Collects (path, bytes) and writes them; creating directories once each."""

    def __init__(self) -> None:
        self.dirs: set[str] = set()

    def put(self, path: Path | str, data: bytes) -> None:
        d = os.path.dirname(path)
        if d not in self.dirs:
            os.makedirs(d, exist_ok=True)
            self.dirs.add(d)
        with open(path, "wb") as fh:
            fh.write(data)

    def json(self, path: Path | str, doc: Any) -> None:
        self.put(path, json.dumps(doc, separators=(",", ":")).encode())


def _blocks(
    data: np.ndarray, chunks: tuple[int, ...]
) -> Iterable[tuple[tuple[int, ...], np.ndarray]]:
    """Chunk index and the chunk's data, edge chunks padded with zeros (full size)."""
    grid = [range(-(-s // c)) for s, c in zip(data.shape, chunks)]
    import itertools

    for idx in itertools.product(*grid):
        sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        block = data[sl]
        if block.shape != chunks:
            pad = np.zeros(chunks, data.dtype)
            pad[tuple(slice(0, s) for s in block.shape)] = block
            block = pad
        yield idx, block


def _zstd() -> Any:
    from numcodecs import Zstd

    return Zstd(level=1)


def _write_array(
    files: _Files, path: Path, data: np.ndarray, zarr_format: int, axes: str, chunk_yx: int = 64
) -> None:
    chunks = tuple(1 if a in "cz" else min(chunk_yx, s) for a, s in zip(axes, data.shape))
    codec = _zstd()
    if zarr_format == 3:
        doc = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(data.shape),
            "data_type": np.dtype(data.dtype).name,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            # "." keys: no directory per chunk (mkdir dominates writing thousands of fields)
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
            "fill_value": 0,
            "codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
            ],
            "attributes": {},
            "dimension_names": list(axes),
        }
        files.json(path / "zarr.json", doc)
        for idx, block in _blocks(data, chunks):
            files.put(
                path / ("c." + ".".join(map(str, idx))),
                codec.encode(block.astype(block.dtype.newbyteorder("<")).tobytes()),
            )
    else:
        doc = {
            "zarr_format": 2,
            "shape": list(data.shape),
            "chunks": list(chunks),
            "dtype": np.dtype(data.dtype).newbyteorder("<").str,
            "compressor": codec.get_config(),
            "fill_value": 0,
            "order": "C",
            "filters": None,
            "dimension_separator": ".",
        }
        files.json(path / ".zarray", doc)
        for idx, block in _blocks(data, chunks):
            files.put(path / ".".join(map(str, idx)), codec.encode(block.tobytes()))


def _group(files: _Files, path: Path, attrs: dict[str, Any], version: str) -> None:
    if version == "0.5":
        files.json(
            path / "zarr.json",
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"ome": {"version": "0.5", **attrs}} if attrs else {},
            },
        )
    else:
        files.json(path / ".zgroup", {"zarr_format": 2})
        if attrs:
            files.json(path / ".zattrs", attrs)


def _write_field(
    files: _Files, spec: PlateSpec, fpath: Path, r: int, c: int, f: int, version: str
) -> None:
    zf = 3 if version == "0.5" else 2
    axes = spec.axes
    _group(
        files,
        fpath,
        {
            "multiscales": _multiscales(spec, version, f"{spec.well_path(r, c)}/{f}", axes),
            "omero": _omero(spec),
        },
        version,
    )
    for lvl in range(spec.levels):
        _write_array(
            files, fpath / str(lvl), spec.field_data(r, c, f, lvl), zf, axes, spec.chunk_yx
        )
    if spec.labels:
        laxes = axes.replace("c", "")
        _group(files, fpath / "labels", {"labels": ["cells"]}, version)
        il: dict[str, Any] = {
            "colors": [{"label-value": k, "rgba": v} for k, v in LABEL_COLORS.items()],
            "source": {"image": "../../"},
        }
        if version != "0.5":
            il["version"] = version
        lattrs = {"multiscales": _multiscales(spec, version, "cells", laxes), "image-label": il}
        _group(files, fpath / "labels" / "cells", lattrs, version)
        for lvl in range(spec.levels):
            _write_array(
                files,
                fpath / "labels" / "cells" / str(lvl),
                spec.label_data(r, c, f, lvl),
                zf,
                laxes,
                spec.chunk_yx,
            )


def write_plate(path: Path, spec: PlateSpec, version: str = "0.5") -> Path:
    """Plain Zarr written by hand: plate, wells, fields (+ labels), any of 0.3-0.5."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    files = _Files()
    _group(files, path, {"plate": _plate_json(spec, version)}, version)
    for r, c in spec.wells():
        if (r, c) in spec.missing_groups:
            continue
        wpath = path / spec.rows[r] / spec.cols[c]
        _group(files, path / spec.rows[r], {}, version)
        _group(files, wpath, {"well": _well_json(spec, version)}, version)
        for f in spec.present_fields(r, c):
            _write_field(files, spec, wpath / str(f), r, c, f, version)
    return path


def write_well(path: Path, spec: PlateSpec, version: str = "0.5", r: int = 0, c: int = 0) -> Path:
    """A single well group at the root of *path* (fields of well (r, c) of *spec*)."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    files = _Files()
    _group(files, path, {"well": _well_json(spec, version)}, version)
    for f in spec.present_fields(r, c):
        _write_field(files, spec, path / str(f), r, c, f, version)
    return path


# ------------------------------------------------------------- ome-zarr-py


@in_child_without_query_planning  # ome-zarr-py writes through dask
def write_plate_omezarr_py(path: Path, spec: PlateSpec) -> Path:
    """OME-Zarr 0.4 by ome-zarr-py (see the module docstring for the template copies)."""
    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ome_zarr.format import FormatV04
        from ome_zarr.writer import (
            write_image,
            write_labels,
            write_plate_metadata,
            write_well_metadata,
        )
    if spec.z or spec.field_size or spec.acquisitions > 1:
        raise ValueError("the ome-zarr-py fixture writes uniform cyx fields only")
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    fmt = FormatV04()
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    wells = [spec.well_path(r, c) for r, c in spec.wells()]
    acq = [{"id": 1, "name": "acq 1"}] if spec.acquisitions else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        write_plate_metadata(
            root,
            spec.rows,
            spec.cols,
            wells,
            fmt=fmt,
            field_count=spec.fields,
            name=spec.name,
            acquisitions=acq,
        )
        images = [
            {"path": str(f), **({"acquisition": 1} if acq else {})} for f in range(spec.fields)
        ]
        for wp in wells:
            write_well_metadata(root.require_group(wp), images, fmt=fmt)
        (r0, c0) = spec.wells()[0]
        tgroup = root.require_group(f"{wells[0]}/0")
        scale = {"c": 1.0, "y": spec.scale_yx[0], "x": spec.scale_yx[1]}
        write_image(
            spec.field_data(r0, c0, 0),
            tgroup,
            scale_factors=[2] * (spec.levels - 1),
            fmt=fmt,
            axes="cyx",
            scale=scale,
            axes_units={"y": "micrometer", "x": "micrometer"},
            storage_options={"chunks": (1, 32, 32)},
            omero=_omero(spec),
        )
        if spec.labels:
            write_labels(
                spec.label_data(r0, c0, 0),
                tgroup,
                name="cells",
                scaler=None,
                scale_factors=[2] * (spec.levels - 1),
                fmt=fmt,
                axes="yx",
                scale={"y": spec.scale_yx[0], "x": spec.scale_yx[1]},
                axes_units={"y": "micrometer", "x": "micrometer"},
                label_metadata={
                    "colors": [{"label-value": k, "rgba": v} for k, v in LABEL_COLORS.items()]
                },
            )
    template = path / wells[0] / "0"
    arrays = _template_arrays(template)
    meta_files = {p.relative_to(template).as_posix(): p.read_bytes() for p in template.rglob(".z*")}
    files = _Files()
    for r, c in spec.wells():
        for f in range(spec.fields):
            dst = path / spec.well_path(r, c) / str(f)
            if (r, c, f) != (r0, c0, 0):
                for rel, data in meta_files.items():
                    files.put(dst / rel, data)
            for rel, (is_label, lvl, zarray) in arrays.items():
                data = spec.label_data(r, c, f, lvl) if is_label else spec.field_data(r, c, f, lvl)
                _stamp_v2(files, dst / rel, zarray, data)
    return path


def _template_arrays(template: Path) -> dict[str, tuple[bool, int, dict[str, Any]]]:
    """Relative array path -> (is label, level index, .zarray) from the multiscales."""
    out = {}
    for grp, is_label in ((template, False), (template / "labels" / "cells", True)):
        if not (grp / ".zattrs").exists():
            continue
        ms = json.loads((grp / ".zattrs").read_text())["multiscales"][0]
        for lvl, ds in enumerate(ms["datasets"]):
            arr = grp / ds["path"]
            out[arr.relative_to(template).as_posix()] = (
                is_label,
                lvl,
                json.loads((arr / ".zarray").read_text()),
            )
    return out


def _stamp_v2(files: _Files, arr: Path, zarray: dict[str, Any], data: np.ndarray) -> None:
    import numcodecs

    if tuple(zarray["shape"]) != data.shape:
        raise ValueError(f"{arr}: template shape {zarray['shape']} != {data.shape}")
    if zarray.get("filters"):
        raise ValueError("filters are not supported by the stamping")
    dtype = np.dtype(zarray["dtype"])
    comp = numcodecs.get_codec(zarray["compressor"]) if zarray.get("compressor") else None
    sep = zarray.get("dimension_separator", ".")
    for idx, block in _blocks(data.astype(dtype), tuple(zarray["chunks"])):
        raw = block.astype(dtype).tobytes(order=zarray.get("order", "C"))
        files.put(arr / sep.join(map(str, idx)), comp.encode(raw) if comp else raw)


# ------------------------------------------------------------- sharded zarr


def write_plate_sharded(path: Path, spec: PlateSpec) -> Path:
    """OME-Zarr 0.5 through zarr-python (sharded, zstd) with tests/omegen.write_image."""
    import zarr

    from tests._support.omegen import write_image

    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.attrs["ome"] = {"version": "0.5", "plate": _plate_json(spec, "0.5")}
    for r, c in spec.wells():
        wp = spec.well_path(r, c)
        if (r, c) in spec.missing_groups:
            continue
        root.require_group(wp).attrs["ome"] = {"version": "0.5", "well": _well_json(spec, "0.5")}
        for f in spec.present_fields(r, c):
            write_image(
                path,
                spec.field_data(r, c, f),
                axes=spec.axes,
                version="0.5",
                levels=spec.levels,
                scale=[1.0, *([1.0] if spec.z else []), *spec.scale_yx],
                omero=_omero(spec),
                labels={"cells": spec.label_data(r, c, f)} if spec.labels else None,
                label_colors=LABEL_COLORS if spec.labels else None,
                group_path=f"{wp}/{f}",
            )
    return path


def write_plate_ours(path: Path, spec: PlateSpec) -> Path:
    """OME-Zarr 0.5 plate whose fields (and labels) are written by napari-ozx's writer;
    level 0 is the ground truth (its pyramid is mean-downsampled, not strided)."""
    from napari_ozx.ngff.model.metadata import Axis, Channel, LabelColor, Window
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    files = _Files()
    _group(files, path, {"plate": _plate_json(spec, "0.5")}, "0.5")
    axes = [Axis(a, "channel") if a == "c" else Axis(a, "space", "micrometer") for a in spec.axes]
    laxes = [a for a in axes if a.type != "channel"]
    chans = [
        Channel(c["label"], c["color"], Window(c["window"]["start"], c["window"]["end"]))
        for c in _omero(spec)["channels"]
    ]
    scale = [
        1.0
        if a.type == "channel"
        else (spec.scale_yx[0] if a.name == "y" else spec.scale_yx[1] if a.name == "x" else 1.0)
        for a in axes
    ]
    colors = [LabelColor(k, tuple(v)) for k, v in LABEL_COLORS.items()]  # type: ignore[arg-type]
    opts = WriteOptions(format="directory", pyramid_levels=spec.levels, workers=1)
    for r, c in spec.wells():
        if (r, c) in spec.missing_groups:
            continue
        wpath = path / spec.rows[r] / spec.cols[c]
        _group(files, path / spec.rows[r], {}, "0.5")
        _group(files, wpath, {"well": _well_json(spec, "0.5")}, "0.5")
        for f in spec.present_fields(r, c):
            labels = (
                [LabelsSpec("cells", spec.label_data(r, c, f), laxes, scale[1:], colors=colors)]
                if spec.labels
                else []
            )
            img = ImageSpec(
                spec.field_data(r, c, f),
                axes,
                scale,
                None,
                chans,
                f"{spec.well_path(r, c)}/{f}",
                labels,
            )
            write_ome_zarr(wpath / str(f), img, options=opts)
    return path


# ------------------------------------------------------------- test fixtures

_BUILT: dict[tuple[str, str], Any] = {}


def _sparse_spec() -> PlateSpec:
    # a 384-well plate with two wells in three missing; one listed well without a group,
    # one well whose second field group is missing
    missing = {(r, c) for r in range(16) for c in range(24) if (r * 24 + c) % 3 != 0}
    return PlateSpec(
        16, 24, labels=False, missing=missing, missing_groups={(0, 3)}, missing_fields={(1, 0, 1)}
    )


def _build(name: str, base: Path) -> tuple[dict[str, Path], PlateSpec]:
    from tests._support.omegen import zip_dir

    def v05(
        spec: PlateSpec, writer: Callable[..., Path] = write_plate
    ) -> tuple[dict[str, Path], PlateSpec]:
        d = writer(base / f"{name}.ome.zarr", spec, *(("0.5",) if writer is write_plate else ()))  # type: ignore[operator]
        return {"dir": d, "ozx": zip_dir(d, base / f"{name}.ozx")}, spec

    if name == "p96_v04_py":
        spec = PlateSpec()
        return {"dir": write_plate_omezarr_py(base / "p96.ome.zarr", spec)}, spec
    if name == "p384_v04_py":
        spec = PlateSpec(16, 24, labels=False)
        return {"dir": write_plate_omezarr_py(base / "p384.ome.zarr", spec)}, spec
    if name == "p96_v05":
        return v05(PlateSpec())
    if name == "p384_v05":
        return v05(PlateSpec(16, 24, labels=False))
    if name == "sparse_v05":
        return v05(_sparse_spec())
    if name == "sharded_v05":
        return v05(PlateSpec(2, 3, missing={(1, 2)}), write_plate_sharded)
    if name == "odd_v05":
        spec = PlateSpec(
            2, 3, z=3, labels=False, field_size=lambda r, c, f: (40 + 8 * r + 4 * f, 56 - 8 * c)
        )
        return v05(spec)
    if name == "acq_v04":
        spec = PlateSpec(2, 3, fields=4, acquisitions=2, labels=False)
        return {"dir": write_plate(base / "acq.ome.zarr", spec, "0.4")}, spec
    if name == "v03":
        spec = PlateSpec(4, 6, fields=1, labels=False)
        return {"dir": write_plate(base / "v03.ome.zarr", spec, "0.3")}, spec
    if name == "well_v05":
        spec = PlateSpec(1, 1, fields=3)
        d = write_well(base / "well.ome.zarr", spec, "0.5")
        return {"dir": d, "ozx": zip_dir(d, base / "well.ozx")}, spec
    if name == "ours_v05":
        return v05(PlateSpec(2, 3, missing={(1, 1)}), write_plate_ours)
    if name == "p24_v05":
        return v05(PlateSpec(4, 6))
    if name == "small_sparse_v05":
        return v05(
            PlateSpec(
                3,
                4,
                labels=False,
                missing={(0, 1)},
                missing_groups={(0, 3)},
                missing_fields={(1, 0, 1)},
            )
        )
    if name == "cells_v05":
        spec = PlateSpec(8, 12, size=(96, 96), pattern="cells", name="cells plate")
        return v05(spec)
    raise KeyError(name)


_RAM_DIRS: dict[str, Path] = {}


def _session_dir(tmp_path_factory: Any, name: str) -> Path:
    """A fresh directory for one fixture: in RAM (/dev/shm) when there is one.

    Plates are thousands of small files; on this machine's disk creating a file costs
    0.1-1 ms (a 384-well plate took 5-10 s), on tmpfs ~30 us. Removed at exit.
    """
    base = str(tmp_path_factory.getbasetemp())
    if base not in _RAM_DIRS and os.access("/dev/shm", os.W_OK):
        import atexit
        import tempfile

        d = Path(tempfile.mkdtemp(prefix="napari-ozx-plates-", dir="/dev/shm"))
        atexit.register(shutil.rmtree, d, True)
        _RAM_DIRS[base] = d
    if base in _RAM_DIRS:
        d = _RAM_DIRS[base] / name
        shutil.rmtree(d, ignore_errors=True)  # what a failed build left
        d.mkdir()
        return d
    return tmp_path_factory.mktemp(name)


def built_plate(tmp_path_factory: Any, name: str) -> tuple[dict[str, Path], PlateSpec]:
    """Write fixture *name* once per test session (shared by every test module)."""
    key = (str(tmp_path_factory.getbasetemp()), name)
    if key not in _BUILT:
        _BUILT[key] = _build(name, _session_dir(tmp_path_factory, name))
    return _BUILT[key]
