"""Our writer, read back by other tools (RFC-9 zipped OME-Zarr, RFC-2 Zarr v3 / 0.5).

* Round trips of images (2-5 D, uint8/uint16/int32/float32, with and without labels) to
  ``.ozx``, to a 0.5 directory and to a 0.4 directory, read back by our reader, by
  zarr-python directly, by ome-zarr-py and by ngff-zarr.
* Byte-level RFC-9 checks of a written ``.ozx`` (``zipfile`` and a hand-rolled ``struct``
  parser of the local headers, the central directory and the end records).
* Failure injection and cancellation: the previous target stays byte-identical and no
  temporary file is left behind.
* Saving over the ``.ozx`` that is being read lazily.
* A lazy source much larger than a shard is written exactly (its peak memory is measured by
  ``benchmarks/bench_write.py --lazy-gib``, not here).

Expected values are computed here independently of napari_ozx (reference pyramid, exact
2**level factors) -- never read back from the writer's own metadata.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import struct
import subprocess
import sys
import textwrap
import threading
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest
import zarr

from napari_ozx._writer import write_layers
from napari_ozx.ngff.model.metadata import Axis, Channel, LabelColor, Window
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.write.writer import (
    ImageSpec,
    LabelsSpec,
    WriteCancelled,
    WriteOptions,
    write_ome_zarr,
)
from tests._support.classic_dask import peer_in_process

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from ome_zarr.io import ZarrLocation, parse_url
    from ome_zarr.reader import Label, Multiscales, Reader
import ngff_zarr

CHUNK = 16  # small chunks and shards so tiny images still get pyramids and many shards
OPTS_05 = WriteOptions(chunk_yx=CHUNK, shard_yx=2 * CHUNK, shard_z=2, workers=2)
OPTS_04 = WriteOptions(version="0.4", chunk_yx=CHUNK, workers=2)
TARGETS = ["ozx", "dir05", "dir04"]

UNITS = {"t": "second", "z": "micrometer", "y": "micrometer", "x": "micrometer"}
SCALE0 = {"t": 1.5, "c": 1.0, "z": 2.0, "y": 0.5, "x": 0.25}
OFFSET0 = {"t": 3.0, "c": 0.0, "z": 1.0, "y": 10.0, "x": 20.0}
LABEL_COLORS = {1: (255, 0, 0, 255), 7: (0, 255, 0, 128), 300: (10, 20, 30, 255)}
LABEL_PROPS = {1: {"kind": "nucleus"}, 7: {"kind": "cytoplasm", "area": 42}}


# ------------------------------------------------------------------ reference


def _axis(name: str) -> Axis:
    kind = {"t": "time", "c": "channel"}.get(name, "space")
    return Axis(name, kind, UNITS.get(name))


def ref_downsample(a: np.ndarray, method: str) -> np.ndarray:
    """Halve the last two axes, ceil for odd sizes (edge repeated); independent of src."""
    if method == "nearest":
        return a[..., ::2, ::2]
    pad = [(0, 0)] * (a.ndim - 2) + [(0, a.shape[-2] % 2), (0, a.shape[-1] % 2)]
    p = np.pad(a, pad, mode="edge").astype(np.float64)
    m = (p[..., 0::2, 0::2] + p[..., 1::2, 0::2] + p[..., 0::2, 1::2] + p[..., 1::2, 1::2]) / 4
    if np.issubdtype(a.dtype, np.integer):
        m = np.rint(m)
    return m.astype(a.dtype)


def expected_shapes(shape: tuple[int, ...], chunk: int = CHUNK) -> list[tuple[int, ...]]:
    """Ceil halving of y and x until both fit in one chunk."""
    out = [tuple(shape)]
    while max(out[-1][-2:]) > chunk:
        s = out[-1]
        out.append((*s[:-2], math.ceil(s[-2] / 2), math.ceil(s[-1] / 2)))
    return out


def ref_pyramid(a: np.ndarray, method: str) -> list[np.ndarray]:
    levels = [a]
    for _ in expected_shapes(a.shape)[1:]:
        levels.append(ref_downsample(levels[-1], method))
    return levels


def expected_transforms(axes: str, level: int, method: str) -> tuple[list[float], list[float]]:
    """Exact level transform: pixels are 2**level level-0 pixels wide in y and x; a block
    mean is centred (2**level - 1) / 2 level-0 pixels in, a strided sample is not."""
    f = 2**level
    scale = [SCALE0[a] * (f if a in "yx" else 1) for a in axes]
    shift = (f - 1) / 2 if method == "mean" else 0.0
    trans = [OFFSET0[a] + (shift * SCALE0[a] if a in "yx" else 0.0) for a in axes]
    return scale, trans


def assert_pixels(got: Any, want: np.ndarray, msg: str = "") -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, msg
    assert got.dtype == want.dtype, msg
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


# ------------------------------------------------------------------ the cases


@dataclass
class Case:
    axes: str
    data: np.ndarray
    channels: list[Channel]
    labels: np.ndarray | None = None  # spatial-axes label image
    name: str = "img"

    @property
    def label_axes(self) -> str:
        return "".join(a for a in self.axes if a in "zyx")

    def spec(self) -> ImageSpec:
        lspecs = []
        if self.labels is not None:
            la = self.label_axes
            lspecs.append(
                LabelsSpec(
                    "cells",
                    self.labels,
                    [_axis(a) for a in la],
                    [SCALE0[a] for a in la],
                    [OFFSET0[a] for a in la],
                    [LabelColor(v, rgba) for v, rgba in LABEL_COLORS.items()],
                    [{"label-value": v, **p} for v, p in LABEL_PROPS.items()],
                )
            )
        return ImageSpec(
            self.data,
            [_axis(a) for a in self.axes],
            [SCALE0[a] for a in self.axes],
            [OFFSET0[a] for a in self.axes],
            self.channels,
            self.name,
            lspecs,
        )


def _make_cases() -> dict[str, Case]:
    rng = np.random.default_rng(42)
    y, x = 64, 96

    def lab(shape):
        out = np.zeros(shape, np.uint32)
        out[..., 5:25, 10:40] = 1
        out[..., 30:60, 50:90] = 7
        out[..., 40:44, 2:6] = 300
        return out

    one = [Channel("mono", "FF8000", Window(5.0, 200.0))]
    two = [
        Channel("DAPI", "0000FF", Window(10.0, 3000.0)),
        Channel("GFP", "00FF00", Window(20.0, 3500.0)),
    ]
    return {
        "yx_uint8": Case("yx", rng.integers(0, 256, (y, x), dtype=np.uint8), one),
        "zyx_int32_labels": Case(
            "zyx",
            rng.integers(-50_000, 50_000, (3, y, x), dtype=np.int32),
            [Channel("signed", "FFFFFF", Window(-1000.0, 1000.0))],
            lab((3, y, x)),
        ),
        "czyx_uint16_labels": Case(
            "czyx", rng.integers(0, 4000, (2, 3, y, x), dtype=np.uint16), two, lab((3, y, x))
        ),
        "tczyx_float32": Case(
            "tczyx", rng.normal(100, 30, (2, 2, 3, 32, 48)).astype(np.float32), two
        ),
    }


CASES = _make_cases()


def _target(tmp: Path, case: str, target: str) -> tuple[Path, WriteOptions]:
    if target == "ozx":
        return tmp / f"{case}.ozx", OPTS_05
    if target == "dir05":
        return tmp / f"{case}.ome.zarr", OPTS_05
    return tmp / f"{case}_v04.ome.zarr", OPTS_04


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(case, target) -> written path; every combination is written once per module."""
    root = tmp_path_factory.mktemp("roundtrip")
    cache: dict[tuple[str, str], Path] = {}

    def get(case: str, target: str) -> Path:
        key = (case, target)
        if key not in cache:
            path, opts = _target(root, case, target)
            out = write_ome_zarr(path, CASES[case].spec(), options=opts)
            assert Path(out) == path
            cache[key] = path
        return cache[key]

    return get


PARAMS = [(c, t) for c in CASES for t in TARGETS]
IDS = [f"{c}-{t}" for c, t in PARAMS]


# ---------------------------------------------------------------- our reader


@pytest.mark.parametrize(("case", "target"), PARAMS, ids=IDS)
def test_roundtrip_our_reader(case, target, written):
    cs = CASES[case]
    path = written(case, target)
    if target == "ozx":
        assert path.is_file()
    else:
        assert path.is_dir()
    with open_ome_zarr(path) as oz:
        assert oz.zarr_format == (2 if target == "dir04" else 3)
        (img,) = oz.images()
        ms = img.multiscale
        assert ms.version == ("0.4" if target == "dir04" else "0.5")
        assert ms.axis_names == tuple(cs.axes)
        assert {a.name: a.unit for a in ms.axes if a.unit} == {
            a: UNITS[a] for a in cs.axes if a in UNITS
        }
        assert ms.name == cs.name
        ref = ref_pyramid(cs.data, "mean")
        assert [tuple(lv.shape) for lv in img.levels] == expected_shapes(cs.data.shape)
        for i, (lazy, want) in enumerate(zip(img.levels, ref, strict=True)):
            assert_pixels(lazy, want, f"level {i}")
            sc, tr = expected_transforms(cs.axes, i, "mean")
            assert ms.datasets[i].scale == pytest.approx(sc)
            assert ms.datasets[i].translation == pytest.approx(tr)
        om = img.meta.omero
        assert [c.label for c in om.channels] == [c.label for c in cs.channels]
        assert [c.color for c in om.channels] == [c.color for c in cs.channels]
        assert [(c.window.start, c.window.end) for c in om.channels] == [
            (c.window.start, c.window.end) for c in cs.channels
        ]
        if cs.labels is None:
            assert img.labels == []
            return
        (lab,) = img.labels
        assert lab.name == "cells"
        assert lab.multiscale.axis_names == tuple(cs.label_axes)
        lref = ref_pyramid(cs.labels, "nearest")
        for i, (lazy, want) in enumerate(zip(lab.levels, lref, strict=True)):
            assert_pixels(lazy, want, f"label level {i}")
            sc, tr = expected_transforms(cs.label_axes, i, "nearest")
            assert lab.multiscale.datasets[i].scale == pytest.approx(sc)
            assert lab.multiscale.datasets[i].translation == pytest.approx(tr)
        il = lab.meta.image_label
        assert {c.value: c.rgba for c in il.colors} == LABEL_COLORS
        props = {
            p["label-value"]: {k: v for k, v in p.items() if k != "label-value"}
            for p in il.properties
        }
        assert props == LABEL_PROPS
        assert il.source_image == "../../"


# ---------------------------------------------------------------- zarr-python


def _open_with_zarr(path: Path, target: str) -> tuple[zarr.Group, Any]:
    if target == "ozx":
        store = zarr.storage.ZipStore(str(path), mode="r")
        return zarr.open_group(store, mode="r"), store
    return zarr.open_group(str(path), mode="r", zarr_format=2 if target == "dir04" else 3), None


def _ome(attrs: dict[str, Any], target: str) -> dict[str, Any]:
    if target == "dir04":
        assert "ome" not in attrs
        return attrs
    assert set(attrs) == {"ome"}, "RFC-2: OME-Zarr 0.5 keeps everything under 'ome'"
    assert attrs["ome"]["version"] == "0.5"
    return attrs["ome"]


def _transform(ct: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    kinds = [t["type"] for t in ct]
    assert kinds[0] == "scale" and kinds in (["scale"], ["scale", "translation"])
    scale = ct[0]["scale"]
    trans = ct[1]["translation"] if len(ct) == 2 else [0.0] * len(scale)
    return scale, trans


@pytest.mark.parametrize(("case", "target"), PARAMS, ids=IDS)
def test_roundtrip_zarr_python(case, target, written):
    cs = CASES[case]
    g, store = _open_with_zarr(written(case, target), target)
    try:
        ome = _ome(g.attrs.asdict(), target)
        (ms,) = ome["multiscales"]
        if target == "dir04":
            assert ms["version"] == "0.4"
        assert [a["name"] for a in ms["axes"]] == list(cs.axes)
        assert [a.get("unit") for a in ms["axes"]] == [UNITS.get(a) for a in cs.axes]
        assert [a.get("type") for a in ms["axes"]] == [_axis(a).type for a in cs.axes]
        ref = ref_pyramid(cs.data, "mean")
        assert len(ms["datasets"]) == len(ref)
        for i, (ds, want) in enumerate(zip(ms["datasets"], ref, strict=True)):
            arr = g[ds["path"]]
            assert isinstance(arr, zarr.Array)
            assert arr.shape == want.shape
            if target != "dir04":
                assert list(arr.metadata.dimension_names) == list(cs.axes)
                assert arr.shards is not None, "RFC-9/0.5: sharded"
            assert_pixels(arr[...], want, f"level {i}")
            sc, tr = expected_transforms(cs.axes, i, "mean")
            got_s, got_t = _transform(ds["coordinateTransformations"])
            assert got_s == pytest.approx(sc) and got_t == pytest.approx(tr)
        chans = ome["omero"]["channels"]
        assert [c["label"] for c in chans] == [c.label for c in cs.channels]
        assert [c["color"] for c in chans] == [c.color for c in cs.channels]
        assert [(c["window"]["start"], c["window"]["end"]) for c in chans] == [
            (c.window.start, c.window.end) for c in cs.channels
        ]
        if cs.labels is None:
            assert "labels" not in g
            return
        assert _ome(g["labels"].attrs.asdict(), target)["labels"] == ["cells"]
        lg = g["labels/cells"]
        lome = _ome(lg.attrs.asdict(), target)
        il = lome["image-label"]
        assert {c["label-value"]: tuple(c["rgba"]) for c in il["colors"]} == LABEL_COLORS
        assert il["properties"] == [{"label-value": v, **p} for v, p in LABEL_PROPS.items()]
        lref = ref_pyramid(cs.labels, "nearest")
        for ds, want in zip(lome["multiscales"][0]["datasets"], lref, strict=True):
            assert_pixels(lg[ds["path"]][...], want)
    finally:
        if store is not None:
            store.close()


# --------------------------------------------------------------- ome-zarr-py


@contextlib.contextmanager
def _ome_zarr_py_nodes(path: Path) -> Iterator[tuple[list[Any], str]]:
    """Read with ome-zarr-py. Its 0.18 ``parse_url`` has no zip support (returns None
    for a ``.ozx``); the root image is still readable through an fsspec zip filesystem
    wrapped in zarr's FsspecStore, which ``ZarrLocation`` accepts."""
    fs = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loc = parse_url(str(path))
            how = "parse_url"
            if loc is None:
                import fsspec
                from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper
                from zarr.storage import FsspecStore

                fs = fsspec.filesystem("zip", fo=str(path), skip_instance_cache=True)
                store = FsspecStore(AsyncFileSystemWrapper(fs), path="", read_only=True)
                loc = ZarrLocation(store)
                how = "fsspec-zip"
            yield list(Reader(loc)()), how
    finally:
        if fs is not None:
            fs.close()


@pytest.mark.parametrize(("case", "target"), PARAMS, ids=IDS)
def test_roundtrip_ome_zarr_py(case, target, written):
    import dask

    peer_in_process("ome-zarr-py reading")
    with _ome_zarr_py_nodes(written(case, target)) as (nodes, how):
        # fsspec's zip filesystem shares one file handle between threads: dask's threads
        # reading through it at once get each other's bytes (seen with zarr 3.4 as shard
        # index checksum errors; zarr's own ZipStore and ours read the file fine)
        scheduler = "synchronous" if how == "fsspec-zip" else None
        with dask.config.set(scheduler=scheduler):
            _check_ome_zarr_py(CASES[case], target, nodes, how)


def _check_ome_zarr_py(cs: Case, target: str, nodes: list[Any], how: str) -> None:
    if target != "ozx":
        assert how == "parse_url"
    image = next(n for n in nodes if n.load(Multiscales) and not n.load(Label))
    ref = ref_pyramid(cs.data, "mean")
    assert [tuple(d.shape) for d in image.data] == expected_shapes(cs.data.shape)
    assert_pixels(image.data[0], ref[0], "level 0")
    assert_pixels(image.data[-1], ref[-1], "last level")
    md = image.metadata
    assert [a["name"] for a in md["axes"]] == list(cs.axes)
    for i, ct in enumerate(md["coordinateTransformations"]):
        sc, tr = expected_transforms(cs.axes, i, "mean")
        got_s, got_t = _transform(ct)
        assert got_s == pytest.approx(sc) and got_t == pytest.approx(tr)
    assert md["channel_names"] == [c.label for c in cs.channels]
    assert [list(cl) for cl in md["contrast_limits"]] == [
        [c.window.start, c.window.end] for c in cs.channels
    ]
    # ome-zarr-py turns omero colours into a black -> colour ramp of 0..1 floats
    want_rgb = [[int(c.color[i : i + 2], 16) / 255 for i in (0, 2, 4)] for c in cs.channels]
    got_rgb = [list(cm[-1]) for cm in md["colormap"]]
    np.testing.assert_allclose(np.array(got_rgb, dtype=float), np.array(want_rgb), atol=1e-6)

    labels = [n for n in nodes if n.load(Label)]
    if how == "fsspec-zip":
        # through the zip workaround ome-zarr-py re-opens child nodes by path string
        # (LocalStore) and so does not discover labels/ inside the archive
        return
    if cs.labels is None:
        assert labels == []
        return
    (lab,) = labels
    assert lab.metadata["name"] == "cells"
    assert_pixels(lab.data[0], cs.labels)
    colors = {k: tuple(round(v * 255) for v in rgba) for k, rgba in lab.metadata["color"].items()}
    assert colors == LABEL_COLORS
    assert lab.metadata["properties"] == LABEL_PROPS


# ----------------------------------------------------------------- ngff-zarr


@pytest.mark.parametrize(("case", "target"), PARAMS, ids=IDS)
def test_roundtrip_ngff_zarr(case, target, written):
    cs = CASES[case]
    peer_in_process("ngff-zarr reading")
    ms = ngff_zarr.from_ngff_zarr(str(written(case, target)))
    ref = ref_pyramid(cs.data, "mean")
    assert [tuple(im.data.shape) for im in ms.images] == expected_shapes(cs.data.shape)
    for i, im in enumerate(ms.images):
        assert list(im.dims) == list(cs.axes)
        sc, tr = expected_transforms(cs.axes, i, "mean")
        assert [im.scale[a] for a in cs.axes] == pytest.approx(sc)
        assert [im.translation[a] for a in cs.axes] == pytest.approx(tr)
        assert {a: u for a, u in (im.axes_units or {}).items() if u} == {
            a: UNITS[a] for a in cs.axes if a in UNITS
        }
    assert_pixels(ms.images[0].data, ref[0], "level 0")
    assert_pixels(ms.images[1].data, ref[1], "level 1")
    chans = ms.metadata.omero.channels
    assert [c.label for c in chans] == [c.label for c in cs.channels]
    assert [c.color.upper() for c in chans] == [c.color for c in cs.channels]
    assert [(c.window.start, c.window.end) for c in chans] == [
        (c.window.start, c.window.end) for c in cs.channels
    ]
    assert ms.metadata.name == cs.name


# ------------------------------------------------------ odd shapes (ceil halving)

ODD = Case(
    "zyx",
    np.random.default_rng(7).integers(0, 60000, (3, 70, 90), dtype=np.uint16),
    [Channel("odd", "00FFFF", Window(0.0, 60000.0))],
    labels=(np.indices((3, 70, 90)).sum(0) // 13 % 5).astype(np.uint16),
)


@pytest.fixture(scope="module")
def odd_written(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("odd")
    return {
        t: write_ome_zarr(
            _target(root, "odd", t)[0], ODD.spec(), options=_target(root, "odd", t)[1]
        )
        for t in ("ozx", "dir04")
    }


@pytest.mark.parametrize("target", ["ozx", "dir04"])
def test_odd_shapes_ceil_halving(target, odd_written):
    """70 x 90 -> 35 x 45 -> 18 x 23 -> 9 x 12: the edge pixel is repeated, nothing lost."""
    path = odd_written[target]
    assert expected_shapes(ODD.data.shape) == [(3, 70, 90), (3, 35, 45), (3, 18, 23), (3, 9, 12)]
    ref = ref_pyramid(ODD.data, "mean")
    lref = ref_pyramid(ODD.labels, "nearest")
    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        for i, (lazy, want) in enumerate(zip(img.levels, ref, strict=True)):
            assert_pixels(lazy, want, f"level {i}")
        (lab,) = img.labels
        for i, (lazy, want) in enumerate(zip(lab.levels, lref, strict=True)):
            assert_pixels(lazy, want, f"label level {i}")
    peer_in_process("ngff-zarr reading")
    ms = ngff_zarr.from_ngff_zarr(str(path))
    for im, want in zip(ms.images, ref, strict=True):
        assert_pixels(im.data, want)


@pytest.mark.parametrize("target", ["ozx", "dir04"])
def test_odd_shapes_exact_level_transforms(target, odd_written):
    """Pixel i of level n is the (mean of / sample at) level-0 pixels [2**n i, 2**n (i+1)):
    its size is exactly 2**n level-0 pixels whatever the image size."""
    with open_ome_zarr(odd_written[target]) as oz:
        (img,) = oz.images()
        got = [(list(d.scale), list(d.translation)) for d in img.multiscale.datasets]
        (lab,) = img.labels
        lgot = [(list(d.scale), list(d.translation)) for d in lab.multiscale.datasets]
    for i, (s, t) in enumerate(got):
        want_s, want_t = expected_transforms("zyx", i, "mean")
        assert s == pytest.approx(want_s) and t == pytest.approx(want_t), f"image level {i}"
    for i, (s, t) in enumerate(lgot):
        want_s, want_t = expected_transforms("zyx", i, "nearest")
        assert s == pytest.approx(want_s) and t == pytest.approx(want_t), f"label level {i}"


# ------------------------------------------------- npe2 writer (write_layers)


def _napari_layers() -> tuple[list[tuple[Any, dict[str, Any], str]], np.ndarray, np.ndarray]:
    """Real napari layers (headless) -> the layer data tuples napari hands a writer."""
    from napari.layers import Image, Labels

    rng = np.random.default_rng(3)
    data = rng.integers(0, 3000, (2, 4, 64, 80), dtype=np.uint16)
    lab = np.zeros((4, 64, 80), np.int32)
    lab[:, 10:20, 10:30] = 3
    lab[:, 30:50, 40:70] = 9
    kw = {
        "scale": (2.0, 0.5, 0.25),
        "translate": (1.0, 10.0, 20.0),
        "axis_labels": ("z", "y", "x"),
        "units": ("micrometer",) * 3,
    }
    layers = [
        Image(data[0], name="DAPI", colormap="blue", contrast_limits=(10, 2000), **kw),
        Image(
            data[1], name="GFP", colormap="green", contrast_limits=(5, 2500), visible=False, **kw
        ),
        Labels(
            lab,
            name="nuclei",
            colormap={None: (0.5, 0.5, 0.5, 1), 3: (1, 0, 0, 1), 9: (0, 0, 1, 1)},
            features={"index": [3, 9], "area": [200, 600]},
            **kw,
        ),
    ]
    return [lyr.as_layer_data_tuple() for lyr in layers], data, lab


@pytest.mark.parametrize("suffix", [".ozx", ".ome.zarr"])
def test_write_layers_read_back(suffix, tmp_path):
    tuples, data, lab = _napari_layers()
    path = tmp_path / f"layers{suffix}"
    out = write_layers(
        str(path), tuples, WriteOptions(chunk_yx=CHUNK, shard_yx=2 * CHUNK, shard_z=2)
    )
    assert out == [str(path)]

    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        assert_pixels(img.levels[0], data)
        assert [c.active for c in img.meta.omero.channels] == [True, False]
        (nuc,) = img.labels
        assert nuc.name == "nuclei"
        assert_pixels(nuc.levels[0], lab)
        il = nuc.meta.image_label
        assert {c.value: c.rgba for c in il.colors} == {3: (255, 0, 0, 255), 9: (0, 0, 255, 255)}
        assert [dict(p) for p in il.properties] == [
            {"label-value": 3, "area": 200},
            {"label-value": 9, "area": 600},
        ]

    peer_in_process("ngff-zarr and ome-zarr-py reading")
    ms = ngff_zarr.from_ngff_zarr(str(path))
    assert list(ms.images[0].dims) == ["c", "z", "y", "x"]
    assert_pixels(ms.images[0].data, data)
    assert [ms.images[0].scale[a] for a in "czyx"] == [1.0, 2.0, 0.5, 0.25]
    assert [ms.images[0].translation[a] for a in "czyx"] == [0.0, 1.0, 10.0, 20.0]
    chans = ms.metadata.omero.channels
    assert [c.label for c in chans] == ["DAPI", "GFP"]
    assert [c.color.upper() for c in chans] == ["0000FF", "00FF00"]
    assert [(c.window.start, c.window.end) for c in chans] == [(10, 2000), (5, 2500)]

    if suffix == ".ome.zarr":
        with _ome_zarr_py_nodes(path) as (nodes, _):
            (labnode,) = [n for n in nodes if n.load(Label)]
            assert labnode.metadata["properties"] == {3: {"area": 200}, 9: {"area": 600}}


def test_write_layers_keeps_any_feature_name(tmp_path):
    from napari.layers import Labels

    lab = np.zeros((32, 32), np.uint8)
    lab[2:8, 2:8] = 1
    lab[10:20, 10:20] = 2
    feats = {"index": [1, 2], "class": ["a", "b"], "cell type": ["x", "y"], "2nd": [0.5, 1.5]}
    path = tmp_path / "feats.ozx"
    write_layers(str(path), [Labels(lab, name="cells", features=feats).as_layer_data_tuple()])
    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        props = [dict(p) for p in img.meta.image_label.properties]
    assert props == [
        {"label-value": 1, "class": "a", "cell type": "x", "2nd": 0.5},
        {"label-value": 2, "class": "b", "cell type": "y", "2nd": 1.5},
    ]


# -------------------------------------------------------- RFC-9 byte level

LOCAL_SIG, CD_SIG = 0x04034B50, 0x02014B50
Z64_EOCD_SIG, Z64_LOC_SIG, EOCD_SIG = 0x06064B50, 0x07064B50, 0x06054B50


def _zip64_extra(extra: bytes, fields: list[tuple[str, int]]) -> dict[str, int]:
    """Resolve 0xFFFFFFFF fields from the ZIP64 extended information extra field."""
    out = dict(fields)
    i = 0
    while i + 4 <= len(extra):
        hid, size = struct.unpack_from("<HH", extra, i)
        if hid == 0x0001:
            j = i + 4
            for name, value in fields:
                if value == 0xFFFFFFFF:
                    (out[name],) = struct.unpack_from("<Q", extra, j)
                    j += 8
        i += 4 + size
    return out


def parse_zip(raw: bytes) -> dict[str, Any]:
    """A minimal independent ZIP parser: end records, central directory, local headers."""
    eocd = raw.rfind(struct.pack("<I", EOCD_SIG))
    assert eocd >= 0, "no end of central directory record"
    (_, _disk, _cd_disk, _n_disk, n_total, cd_size32, cd_off32, clen) = struct.unpack_from(
        "<IHHHHIIH", raw, eocd
    )
    assert eocd + 22 + clen == len(raw), "bytes after the end of central directory record"
    comment = raw[eocd + 22 :]
    # ZIP64 end of central directory locator: the 20 bytes right before the EOCD
    loc = eocd - 20
    sig, z64_disk, z64_off, n_disks = struct.unpack_from("<IIQI", raw, loc)
    assert sig == Z64_LOC_SIG, "no ZIP64 end of central directory locator"
    assert (z64_disk, n_disks) == (0, 1), "multi-part archive"
    rec = struct.unpack_from("<IQHHIIQQQQ", raw, z64_off)
    sig, rec_size, _made, _need, d, cdd, n64_disk, n64, cd_size, cd_off = rec
    assert sig == Z64_EOCD_SIG, "no ZIP64 end of central directory record"
    assert z64_off + 12 + rec_size == loc
    assert (d, cdd) == (0, 0) and n64_disk == n64
    # the classic record holds the real values or the ZIP64 "see the other record" marks
    assert (
        n_total in (n64, 0xFFFF)
        and cd_size32 in (cd_size, 0xFFFFFFFF)
        and cd_off32 in (cd_off, 0xFFFFFFFF)
    )
    assert cd_off + cd_size == z64_off, "dead space between central directory and end records"

    central = []
    p = cd_off
    for _ in range(n64):
        f = struct.unpack_from("<IHHHHHHIIIHHHHHII", raw, p)
        (
            sig,
            _made,
            _need,
            flags,
            method,
            _t,
            _d,
            crc,
            csize,
            usize,
            nlen,
            elen,
            cmlen,
            _disk,
            _ia,
            _ea,
            off,
        ) = f
        assert sig == CD_SIG
        name = raw[p + 46 : p + 46 + nlen].decode("utf-8")
        extra = raw[p + 46 + nlen : p + 46 + nlen + elen]
        vals = _zip64_extra(extra, [("usize", usize), ("csize", csize), ("offset", off)])
        central.append({"name": name, "flags": flags, "method": method, "crc": crc, **vals})
        p += 46 + nlen + elen + cmlen
    assert p == cd_off + cd_size

    local = []
    for e in sorted(central, key=lambda e: e["offset"]):
        hdr = struct.unpack_from("<IHHHHHIIIHH", raw, e["offset"])
        (sig, _need, flags, method, _t, _d, crc, _cs, _us, nlen, elen) = hdr
        assert sig == LOCAL_SIG, e["name"]
        name = raw[e["offset"] + 30 : e["offset"] + 30 + nlen].decode("utf-8")
        assert name == e["name"] and method == e["method"]
        start = e["offset"] + 30 + nlen + elen
        local.append(
            {**e, "local_flags": flags, "data_start": start, "data_end": start + e["csize"]}
        )
    return {
        "comment": comment,
        "central": central,
        "local": local,
        "cd_off": cd_off,
        "cd_size": cd_size,
        "z64_eocd_off": z64_off,
        "zip64_record_size": 12 + rec_size,
    }


def _depth(name: str) -> int:
    return name.count("/")


@pytest.fixture(scope="module")
def ozx_files(written, tmp_path_factory) -> dict[str, Path]:
    tuples, _, _ = _napari_layers()
    p = tmp_path_factory.mktemp("rfc9") / "layers.ozx"
    write_layers(str(p), tuples, WriteOptions(chunk_yx=CHUNK, shard_yx=2 * CHUNK, shard_z=2))
    return {
        "write_ome_zarr": written("czyx_uint16_labels", "ozx"),
        "write_layers": p,
        "tczyx": written("tczyx_float32", "ozx"),
    }


OZX_KINDS = ["write_ome_zarr", "write_layers", "tczyx"]


@pytest.mark.parametrize("kind", OZX_KINDS)
def test_rfc9_zipfile_view(kind, ozx_files):
    """RFC-9: "ZIP-level compression SHOULD be disabled in favor of Zarr-level compression
    codecs." -- "The ZIP archive comment SHOULD contain an UTF-8-encoded JSON string with an
    ome attribute that holds a version key with the OME-Zarr version as string value,
    equivalent to {"ome": { "version": "XX.YY" }}." -- "The root of the ZIP archive MUST
    correspond to the root of the OME-Zarr hierarchy. The ZIP file MUST contain the the
    OME-Zarr's root-level zarr.json." -- "The sharding codec SHOULD be used"."""
    path = ozx_files[kind]
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        assert zf.testzip() is None
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
        assert len(names) == len(set(names)), "duplicate entries"
        assert names[0] == "zarr.json"
        assert json.loads(zf.comment.decode("utf-8")) == {"ome": {"version": "0.5"}}
        root = json.loads(zf.read("zarr.json"))
        assert root["zarr_format"] == 3 and root["node_type"] == "group"
        assert root["attributes"]["ome"]["version"] == "0.5"
        assert not any(n.endswith(".ozx") for n in names), "no nested .ozx"
        assert not any(n.endswith("/") for n in names), "no directory entries needed"
        arrays = [json.loads(zf.read(n)) for n in names if n.endswith("zarr.json")]
        arrays = [a for a in arrays if a["node_type"] == "array"]
        assert arrays and all(a["codecs"][0]["name"] == "sharding_indexed" for a in arrays)


@pytest.mark.parametrize("kind", OZX_KINDS)
def test_rfc9_byte_layout(kind, ozx_files):
    """RFC-9: "The ZIP64 format extension SHOULD be used, irrespective of the ZIP file
    size." -- "The root-level zarr.json file SHOULD be the first ZIP file entry and the
    first entry in the central directory header; other zarr.json files SHOULD follow
    immediately afterwards, in breadth-first order." -- and, from the drawbacks: "Individual
    file headers may describe obsolete files" / "Removing a file from a zip archive, may not
    reduce the file size": a freshly written .ozx must have neither (no dead space)."""
    path = ozx_files[kind]
    raw = path.read_bytes()
    z = parse_zip(raw)

    # ZIP64 end record + locator present, single part
    assert z["zip64_record_size"] == 56

    for order_name in ("local", "central"):
        entries = z[order_name]
        names = [e["name"] for e in entries]
        assert names[0] == "zarr.json", order_name
        is_meta = [n.rsplit("/", 1)[-1] == "zarr.json" for n in names]
        n_meta = sum(is_meta)
        assert all(is_meta[:n_meta]) and not any(is_meta[n_meta:]), (
            f"{order_name}: zarr.json not all first"
        )
        depths = [_depth(n) for n in names[:n_meta]]
        assert depths == sorted(depths), (
            f"{order_name}: zarr.json not breadth-first: {names[:n_meta]}"
        )
    assert [e["name"] for e in z["local"]] == [e["name"] for e in z["central"]]

    # every entry STORED, sizes equal, no data descriptors, CRC right
    for e in z["local"]:
        assert e["method"] == 0 and e["csize"] == e["usize"]
        assert not (e["flags"] & 0x08) and not (e["local_flags"] & 0x08)
        import zlib

        assert zlib.crc32(raw[e["data_start"] : e["data_end"]]) == e["crc"], e["name"]

    # no dead space: entries back to back from byte 0, then the central directory, the
    # ZIP64 record, the locator and the classic end record with the comment
    assert z["local"][0]["offset"] == 0
    for a, b in zip(z["local"], z["local"][1:]):
        assert a["data_end"] == b["offset"], f"gap or overlap after {a['name']}"
    assert z["local"][-1]["data_end"] == z["cd_off"]
    entry_bytes = sum(e["data_end"] - e["offset"] for e in z["local"])
    assert len(raw) == entry_bytes + z["cd_size"] + 56 + 20 + 22 + len(z["comment"])

    with zipfile.ZipFile(path) as zf:
        assert [i.filename for i in zf.infolist()] == [e["name"] for e in z["central"]]
        assert [i.header_offset for i in zf.infolist()] == [e["offset"] for e in z["central"]]


# ---------------------------------------------------- failure and cancellation

SRC = np.arange(4 * 64 * 64, dtype=np.uint16).reshape(4, 64, 64)
ZYX = [_axis(a) for a in "zyx"]
FAIL_OPTS = WriteOptions(chunk_yx=CHUNK, shard_yx=2 * CHUNK, shard_z=2, workers=1)


def _snapshot(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        n for n in os.listdir(folder) if n.startswith(".") and (n.endswith((".partial", ".old")))
    )


def _failing_source(fail_at: tuple[int, int, int]) -> da.Array:
    def boom(block, block_info=None):
        if tuple(block_info[None]["chunk-location"]) == fail_at:
            raise RuntimeError("disk on fire")
        return block

    return da.from_array(SRC + 1, chunks=(2, 32, 32)).map_blocks(
        boom, dtype=SRC.dtype, meta=np.empty((0,) * SRC.ndim, SRC.dtype)
    )


@pytest.mark.parametrize("suffix", [".ozx", ".ome.zarr"])
@pytest.mark.parametrize("pre_existing", [True, False])
def test_source_error_mid_write_leaves_target_untouched(suffix, pre_existing, tmp_path):
    target = tmp_path / f"img{suffix}"
    if pre_existing:
        write_ome_zarr(target, ImageSpec(SRC, ZYX), options=FAIL_OPTS)
    before = _snapshot(target) if pre_existing else None
    done: list[int] = []
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_ome_zarr(
            target,
            ImageSpec(_failing_source((1, 1, 0)), ZYX),  # the 7th of 8 level-0 shards
            options=FAIL_OPTS,
            progress=lambda d, n: done.append(d),
        )
    assert len(done) >= 1, "the failure must come mid-write, after shards were stored"
    if pre_existing:
        assert _snapshot(target) == before
        with open_ome_zarr(target) as oz:
            assert_pixels(oz.images()[0].levels[0], SRC)
    else:
        assert not target.exists()
    assert _leftovers(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ([target.name] if pre_existing else [])


@pytest.mark.parametrize("suffix", [".ozx", ".ome.zarr"])
def test_cancel_after_first_shard(suffix, tmp_path):
    target = tmp_path / f"img{suffix}"
    write_ome_zarr(target, ImageSpec(SRC, ZYX), options=FAIL_OPTS)
    before = _snapshot(target)
    cancel = threading.Event()
    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        cancel.set()

    with pytest.raises(WriteCancelled):
        write_ome_zarr(
            target, ImageSpec(SRC + 5, ZYX), options=FAIL_OPTS, progress=progress, cancel=cancel
        )
    assert calls and calls[0][0] == 1 and calls[-1][0] < calls[-1][1]
    assert _snapshot(target) == before
    assert _leftovers(tmp_path) == []
    assert os.listdir(tmp_path) == [target.name]


# ------------------------------------------------------ saving over the source


def test_save_over_the_ozx_being_read(tmp_path):
    """Open lazily, save the lazy layers to the SAME .ozx: the writer reads the old file
    (its open descriptor keeps the old inode) while writing the new one beside it."""
    from napari.components import ViewerModel

    from napari_ozx import _reader

    case = CASES["czyx_uint16_labels"]
    path = tmp_path / "same.ozx"
    write_ome_zarr(path, case.spec(), options=OPTS_05)
    original = case.data.copy()
    original_labels = case.labels.copy()
    inode = path.stat().st_ino

    layer_data = _reader.get_reader(str(path))(str(path))
    vm = ViewerModel()  # headless: splits channel_axis into one layer per channel
    for data, kw, kind in layer_data:
        getattr(vm, f"add_{kind}")(data, **kw)
    assert [lyr.name for lyr in vm.layers] == ["DAPI", "GFP", "cells"]
    old_level0 = vm.layers[0].data[0]  # lazy, reads the old file

    out = write_layers(str(path), [lyr.as_layer_data_tuple() for lyr in vm.layers], OPTS_05)
    assert out == [str(path)]
    assert path.stat().st_ino != inode, "a new file was renamed onto the path"
    assert _leftovers(tmp_path) == []

    # the old lazy arrays still read the old inode
    assert_pixels(old_level0, original[0])

    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        assert_pixels(img.levels[0], original)
        assert [c.label for c in img.meta.omero.channels] == ["DAPI", "GFP"]
        assert [c.color for c in img.meta.omero.channels] == ["0000FF", "00FF00"]
        assert [(c.window.start, c.window.end) for c in img.meta.omero.channels] == [
            (10, 3000),
            (20, 3500),
        ]
        assert img.multiscale.datasets[0].scale == pytest.approx([1.0, *(SCALE0[a] for a in "zyx")])
        assert img.multiscale.datasets[0].translation == pytest.approx(
            [0.0, *(OFFSET0[a] for a in "zyx")]
        )
        (lab,) = img.labels
        assert_pixels(lab.levels[0], original_labels)
        il = lab.meta.image_label
        assert {c.value: c.rgba for c in il.colors} == LABEL_COLORS
        # napari keeps properties as a features *table*: a key that one label lacks comes
        # back as an explicit null for it (lossless apart from null == absent)
        props = {
            p["label-value"]: {k: v for k, v in p.items() if k != "label-value" and v is not None}
            for p in il.properties
        }
        assert props == LABEL_PROPS


# -------------------------------------------------- larger-than-shard lazy source

BIG_SHAPE = (16, 2048, 2048)  # 64 MiB of uint8; default options: 4 level-0 shards of 16 MiB
# (peak memory while streaming a lazy source is measured by benchmarks/bench_write.py --lazy-gib)

_BIG_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, dask.array as da
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    target, shape = sys.argv[1], tuple(json.loads(sys.argv[2]))
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]

    def pattern(block_info=None):
        info = block_info[None]
        (z0, _), (y0, _), (x0, _) = info["array-location"]
        z, y, x = info["chunk-shape"]
        # (x + 3y + 7z) mod 256 built in uint8 (wrapping adds): no temporaries bigger
        # than the block itself
        zz = ((7 * np.arange(z0, z0 + z)) % 256).astype(np.uint8)[:, None, None]
        yy = ((3 * np.arange(y0, y0 + y)) % 256).astype(np.uint8)[None, :, None]
        xx = (np.arange(x0, x0 + x) % 256).astype(np.uint8)[None, None, :]
        out = np.empty((z, y, x), np.uint8)
        np.add(yy, xx, out=out[:1])
        out[1:] = out[:1]
        out += zz
        return out

    chunks = ((4,) * (shape[0] // 4), (1024,) * (shape[1] // 1024), (1024,) * (shape[2] // 1024))
    # meta given: dask's query planning cannot infer it from a function of block_info
    src = da.map_blocks(pattern, dtype=np.uint8, chunks=chunks, meta=np.empty((0, 0, 0), np.uint8))
    opts = WriteOptions(workers=2)
    n0 = -(-shape[0] // 16) * -(-shape[1] // 1024) * -(-shape[2] // 1024)
    done = []

    def progress(n, total):
        done.append((n, total))

    write_ome_zarr(target, ImageSpec(src, axes), options=opts, progress=progress)
    print(json.dumps({"n0": n0, "progress": done[-1] if done else None}))
    """
)


def _pattern(z: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return ((x + 3 * y + 7 * z) % 256).astype(np.uint8)


@pytest.fixture(scope="module")
def big_write(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """Write the lazy source once, in a fresh process."""
    target = tmp_path_factory.mktemp("big") / "big.ozx"
    res = subprocess.run(
        [sys.executable, "-c", _BIG_SCRIPT, str(target), json.dumps(BIG_SHAPE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return target, json.loads(res.stdout.strip().splitlines()[-1])


def test_large_lazy_source_written_correctly(big_write):
    path, stats = big_write
    nbytes = math.prod(BIG_SHAPE)
    assert path.stat().st_size < nbytes // 10  # compressed pattern, not stored raw
    with open_ome_zarr(path) as oz:
        (img,) = oz.images()
        shapes = [tuple(lv.shape) for lv in img.levels]
        assert shapes[0] == BIG_SHAPE and len(shapes) >= 3
        for a, b in itertools.pairwise(shapes):
            assert b == (a[0], a[1] // 2, a[2] // 2)
        lv0 = img.levels[0]
        for z, ys, xs in [
            (0, slice(0, 64), slice(0, 64)),
            (15, slice(2000, 2048), slice(1000, 1100)),
            (7, slice(1020, 1040), slice(2030, 2040)),
        ]:
            zz, yy, xx = np.meshgrid(
                [z], np.arange(ys.start, ys.stop), np.arange(xs.start, xs.stop), indexing="ij"
            )
            assert_pixels(lv0[z : z + 1, ys, xs], _pattern(zz, yy, xx))
        # level 1 = 2x2 means of level 0 on a patch
        patch0 = np.asarray(lv0[3:4, 1000:1064, 2000:2064])
        assert_pixels(img.levels[1][3:4, 500:532, 1000:1032], ref_downsample(patch0, "mean"))
        # the last level on its first 8 x 8 pixels: chained 2x2 means
        steps = len(shapes) - 1
        chain = np.asarray(lv0[:, : 8 << steps, : 8 << steps])
        for _ in range(steps):
            chain = ref_downsample(chain, "mean")
        assert_pixels(img.levels[-1][:, :8, :8], chain)
    # and the file is a clean RFC-9 archive (one entry per shard, nothing rewritten)
    z = parse_zip(path.read_bytes())
    names = [e["name"] for e in z["local"]]
    assert names[0] == "zarr.json" and len(names) == len(set(names))
    assert sum(n.startswith("0/c/") for n in names) == stats["n0"]
    done, total = stats["progress"]  # the progress callback reached its end
    assert done == total > 0


def test_unsharded_writes_go_in_regions_of_whole_chunks(tmp_path):
    """A 0.4 directory of small chunks is written in multi-chunk regions (one zarr write
    and one source compute each), every chunk whole, and reads back exactly."""
    import dask.array as da

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr, write_step

    step = write_step((2, 3, 1000, 700), (1, 1, 64, 64), 2)
    assert step[:2] == (1, 1)
    assert all(s % 64 == 0 for s in step[2:]) and step[2] * step[3] * 2 >= 1 << 20
    assert write_step((5, 10, 10), (1, 10, 10), 1) == (1, 10, 10)  # nothing to grow

    data = np.arange(2 * 3 * 300 * 200, dtype=np.uint16).reshape(2, 3, 300, 200)
    computes = []

    def counting(block):
        computes.append(block.shape)
        return block

    src = da.from_array(data, chunks=(1, 1, 300, 200)).map_blocks(counting, dtype=data.dtype)
    axes = [Axis("c", "channel"), Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    out = write_ome_zarr(
        tmp_path / "a.zarr",
        ImageSpec(src, axes),
        options=WriteOptions(version="0.4", chunk_yx=32, pyramid_levels=1),
    )
    n_chunks = 2 * 3 * math.ceil(300 / 32) * math.ceil(200 / 32)
    assert len([p for p in (out / "0").rglob("*") if p.is_file() and p.name[0] != "."]) == n_chunks
    assert len(computes) <= 2 * 3 * 2  # one compute per region, not per 32x32 chunk
    with open_ome_zarr(out) as oz:
        np.testing.assert_array_equal(np.asarray(oz.images()[0].levels[0]), data)
