"""Check that the third-party fixtures in ``tests/_support/thirdparty.py`` are what
they claim to be.

Only zarr, ome-zarr-py, ngff-zarr, zipfile and json are used here -- never
``napari_ozx``.  The metadata ground truth of each Fixture is compared with
the raw JSON the tool wrote, the pixel ground truth with independent readers
(ome-zarr-py's Reader, ngff-zarr's from_ngff_zarr).
"""

from __future__ import annotations

import json
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests._support import thirdparty as tp
from tests._support.classic_dask import peer_in_process
from tests._support.thirdparty import ALL_FIXTURES, Fixture

# Import the writers/readers up front so the time budget below measures
# writing, not first-time imports.
tp._import_ome_zarr()
import ngff_zarr  # noqa: E402 - after the import above, on purpose

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Label, Multiscales, Reader


# --------------------------------------------------------------------------
# raw metadata access (json + zipfile only)
# --------------------------------------------------------------------------


class RawStore:
    """Read raw metadata documents from a directory or a zip archive."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.is_zip = self.path.is_file()

    def read(self, key: str) -> bytes | None:
        if self.is_zip:
            with zipfile.ZipFile(self.path) as zf:
                try:
                    return zf.read(key)
                except KeyError:
                    return None
        p = self.path / key
        return p.read_bytes() if p.is_file() else None

    def json(self, key: str) -> dict[str, Any] | None:
        raw = self.read(key)
        return None if raw is None else json.loads(raw)

    def exists(self, key: str) -> bool:
        return self.read(key) is not None

    def group_attrs(self, node: str, zarr_format: int) -> dict[str, Any]:
        """OME attributes of a group: .zattrs (v2) or zarr.json["attributes"]["ome"]
        (v3)."""
        prefix = f"{node}/" if node else ""
        if zarr_format == 2:
            return self.json(prefix + ".zattrs") or {}
        doc = self.json(prefix + "zarr.json")
        assert doc is not None, f"missing {prefix}zarr.json"
        assert doc["node_type"] == "group"
        return doc.get("attributes", {}).get("ome", {})

    def array_meta(self, node: str, zarr_format: int) -> dict[str, Any]:
        doc = self.json(f"{node}/.zarray" if zarr_format == 2 else f"{node}/zarr.json")
        assert doc is not None, f"missing array metadata for {node}"
        return doc


def _multiscale(attrs: dict[str, Any]) -> dict[str, Any]:
    assert "multiscales" in attrs, sorted(attrs)
    assert len(attrs["multiscales"]) >= 1
    return attrs["multiscales"][0]


def _transforms(ds: dict[str, Any]) -> tuple[list[float] | None, list[float] | None]:
    scale = trans = None
    for t in ds.get("coordinateTransformations", []):
        if t["type"] == "scale":
            scale = t["scale"]
        elif t["type"] == "translation":
            trans = t["translation"]
    return scale, trans


# --------------------------------------------------------------------------
# build each fixture once per module (each build is timed)
# --------------------------------------------------------------------------


def _build(name: str, tmp_path: Path) -> tuple[Fixture, float]:
    t0 = time.perf_counter()
    fx = ALL_FIXTURES[name](tmp_path)
    return fx, time.perf_counter() - t0


@pytest.fixture(scope="module")
def _cache(tmp_path_factory) -> dict[str, tuple[Fixture, float]]:
    return {}


def _get(name: str, cache: dict, factory) -> tuple[Fixture, float]:
    if name not in cache:
        cache[name] = _build(name, factory.mktemp(name))
    return cache[name]


@pytest.fixture(params=sorted(ALL_FIXTURES))
def built(request, _cache, tmp_path_factory) -> tuple[str, Fixture, float]:
    fx, dt = _get(request.param, _cache, tmp_path_factory)
    return request.param, fx, dt


NGFF_ZARR_FIXTURES = [n for n in sorted(ALL_FIXTURES) if n.startswith("ngffzarr")]
OME_ZARR_READABLE = [n for n in sorted(ALL_FIXTURES) if n not in NGFF_ZARR_FIXTURES]


# --------------------------------------------------------------------------
# generic self-consistency
# --------------------------------------------------------------------------


def test_inside_tmp(built):
    _name, fx, _ = built
    assert fx.path.exists()
    # nothing but the dataset left behind in tmp_dir (no staging dirs)
    assert [p.name for p in fx.path.parent.iterdir()] == [fx.path.name]


def test_shapes_and_lengths_consistent(built):
    name, fx, _ = built
    n = len(fx.levels)
    ndim = len(fx.axes)
    assert n >= 2
    for lst in (fx.scales, fx.translations, fx.chunks, fx.shards, fx.dataset_paths):
        assert len(lst) == n, name
    assert len(set(fx.axes)) == ndim
    assert set(fx.units) <= set(fx.axes)
    assert fx.version in {"0.1", "0.2", "0.3", "0.4", "0.5"}
    assert fx.zarr_format == (3 if fx.version == "0.5" else 2)
    assert fx.writer

    for i, (lvl, s, t, c, sh) in enumerate(
        zip(fx.levels, fx.scales, fx.translations, fx.chunks, fx.shards)
    ):
        assert isinstance(lvl, np.ndarray)
        assert lvl.ndim == ndim
        assert lvl.dtype == fx.dtype
        assert len(s) == ndim and all(v > 0 for v in s)
        assert t is None or len(t) == ndim
        assert len(c) == ndim
        if sh is None:
            assert all(ci <= si for ci, si in zip(c, lvl.shape)) or not fx.sharded
        else:
            assert len(sh) == ndim
            assert all(si % ci == 0 for si, ci in zip(sh, c)), (sh, c)
        if i:
            prev = fx.levels[i - 1]
            assert all(a <= b for a, b in zip(lvl.shape, prev.shape))
            assert lvl.size < prev.size
            # scale grows exactly where the shape shrinks
            for ax in range(ndim):
                ratio = fx.levels[0].shape[ax] / lvl.shape[ax]
                assert fx.scales[i][ax] == pytest.approx(fx.scales[0][ax] * ratio)
    assert fx.sharded == any(s is not None for s in fx.shards)

    if fx.channel_names is not None:
        nc = fx.levels[0].shape[fx.axes.index("c")]
        assert len(fx.channel_names) == nc
        assert fx.channel_colors is not None and len(fx.channel_colors) == nc
        assert all(len(col) == 6 and int(col, 16) >= 0 for col in fx.channel_colors)
        assert fx.contrast_limits is not None and len(fx.contrast_limits) == nc
        assert all(lo < hi for lo, hi in fx.contrast_limits)
    else:
        assert fx.channel_colors is None and fx.contrast_limits is None


def test_labels_consistent(built):
    name, fx, _ = built
    for lname, lvls in fx.labels.items():
        assert len(lvls) == len(fx.levels), name
        assert len(fx.label_paths[lname]) == len(lvls)
        axes = fx.label_axes[lname]
        values0 = set(np.unique(lvls[0]).tolist())
        assert values0 >= {0, 1}
        for i, lv in enumerate(lvls):
            assert np.issubdtype(lv.dtype, np.integer)
            assert lv.ndim == len(axes)
            # nearest downsampling never invents label values
            assert set(np.unique(lv).tolist()) <= values0
            # label spatial shape matches the image level spatial shape
            for ax in ("y", "x"):
                assert lv.shape[axes.index(ax)] == fx.levels[i].shape[fx.axes.index(ax)]
            assert len(fx.label_scales[lname][i]) == len(axes)
        for value, rgba in fx.label_colors.get(lname, {}).items():
            assert isinstance(value, int)
            assert len(rgba) == 4 and all(0 <= v <= 255 for v in rgba)


# --------------------------------------------------------------------------
# metadata as written (raw JSON) == ground truth
# --------------------------------------------------------------------------


def test_raw_metadata_matches_ground_truth(built):
    name, fx, _ = built
    raw = RawStore(fx.path)
    zf = fx.zarr_format
    if zf == 2:
        assert raw.exists(".zgroup") and raw.exists(".zattrs")
    else:
        root = raw.json("zarr.json")
        assert root["zarr_format"] == 3 and root["node_type"] == "group"
        assert root["attributes"]["ome"]["version"] == "0.5"

    attrs = raw.group_attrs("", zf)
    ms = _multiscale(attrs)
    assert [d["path"] for d in ms["datasets"]] == fx.dataset_paths
    if fx.version != "0.5":
        assert ms["version"] == fx.version
    if fx.name is not None:
        assert ms.get("name") == fx.name

    # axes
    if fx.version in ("0.1", "0.2"):
        assert "axes" not in ms
        assert fx.axes == list("tczyx")
    elif fx.version == "0.3":
        assert ms["axes"] == fx.axes  # list of strings
    else:
        assert [a["name"] for a in ms["axes"]] == fx.axes
        assert {a["name"]: a["unit"] for a in ms["axes"] if "unit" in a} == fx.units

    # coordinate transformations
    for i, ds in enumerate(ms["datasets"]):
        scale, trans = _transforms(ds)
        if fx.version in ("0.1", "0.2", "0.3"):
            assert scale is None and trans is None
            assert fx.translations[i] is None
        else:
            assert scale == pytest.approx(fx.scales[i]), (name, i)
            if fx.translations[i] is None:
                assert trans is None
            else:
                assert trans == pytest.approx(fx.translations[i]), (name, i)

    # arrays: shape / dtype / chunks / shards as stored
    for i, p in enumerate(fx.dataset_paths):
        meta = raw.array_meta(p, zf)
        assert tuple(meta["shape"]) == fx.levels[i].shape
        if zf == 2:
            assert tuple(meta["chunks"]) == fx.chunks[i]
            assert np.dtype(meta["dtype"]) == fx.dtype
        else:
            assert meta["node_type"] == "array"
            assert np.dtype(meta["data_type"]) == fx.dtype
            outer = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
            shard_codecs = [c for c in meta["codecs"] if c["name"] == "sharding_indexed"]
            if fx.shards[i] is None:
                assert not shard_codecs
                assert outer == fx.chunks[i]
            else:
                assert len(shard_codecs) == 1
                assert outer == fx.shards[i]
                inner = tuple(shard_codecs[0]["configuration"]["chunk_shape"])
                assert inner == fx.chunks[i]

    # omero
    omero = attrs.get("omero")
    if fx.channel_names is None:
        assert omero is None
    else:
        chans = omero["channels"]
        assert [c["label"] for c in chans] == fx.channel_names
        assert [c["color"] for c in chans] == fx.channel_colors
        assert [(c["window"]["start"], c["window"]["end"]) for c in chans] == (fx.contrast_limits)
        if fx.contrast_ranges is not None:
            assert [(c["window"]["min"], c["window"]["max"]) for c in chans] == (fx.contrast_ranges)

    # labels
    if not fx.labels:
        assert not raw.exists("labels/.zattrs") and not raw.exists("labels/zarr.json")
    else:
        assert raw.group_attrs("labels", zf)["labels"] == list(fx.labels)
    for lname in fx.labels:
        lattrs = raw.group_attrs(f"labels/{lname}", zf)
        lms = _multiscale(lattrs)
        assert [d["path"] for d in lms["datasets"]] == fx.label_paths[lname]
        if fx.version not in ("0.1", "0.2"):
            axes = lms["axes"]
            names = axes if fx.version == "0.3" else [a["name"] for a in axes]
            assert names == fx.label_axes[lname]
        for i, ds in enumerate(lms["datasets"]):
            scale, trans = _transforms(ds)
            if fx.version in ("0.1", "0.2", "0.3"):
                assert scale is None
            else:
                assert scale == pytest.approx(fx.label_scales[lname][i])
                assert trans == pytest.approx(fx.label_translations[lname][i])
            meta = raw.array_meta(f"labels/{lname}/{ds['path']}", zf)
            assert tuple(meta["shape"]) == fx.labels[lname][i].shape
        il = lattrs["image-label"]
        colors = {c["label-value"]: tuple(c["rgba"]) for c in il.get("colors", [])}
        assert colors == fx.label_colors.get(lname, {})
        props = {
            p["label-value"]: {k: v for k, v in p.items() if k != "label-value"}
            for p in il.get("properties", [])
        }
        assert props == fx.label_properties.get(lname, {})


# --------------------------------------------------------------------------
# pixel ground truth == independent readers
# --------------------------------------------------------------------------


def _read_with_ome_zarr(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nodes = list(Reader(parse_url(str(path)))())
    image = next(n for n in nodes if n.load(Multiscales) and not n.load(Label))
    labels = {n.metadata["name"]: n for n in nodes if n.load(Label)}
    return image, labels


@pytest.mark.parametrize("name", OME_ZARR_READABLE)
def test_pixels_match_ome_zarr_reader(name, _cache, tmp_path_factory):
    fx, _ = _get(name, _cache, tmp_path_factory)
    peer_in_process("ome-zarr-py reading")
    image, labels = _read_with_ome_zarr(fx.path)
    assert len(image.data) == len(fx.levels)
    for got, want in zip(image.data, fx.levels):
        np.testing.assert_array_equal(np.asarray(got), want)
    if fx.channel_names is not None:
        assert image.metadata["channel_names"] == fx.channel_names
    assert set(labels) == set(fx.labels)
    for lname, node in labels.items():
        for got, want in zip(node.data, fx.labels[lname]):
            np.testing.assert_array_equal(np.asarray(got), want)
        # ome-zarr-py converts rgba to 0..1 floats
        colors = {
            k: tuple(round(v * 255) for v in rgba) for k, rgba in node.metadata["color"].items()
        }
        assert colors == fx.label_colors[lname]


@pytest.mark.parametrize("name", NGFF_ZARR_FIXTURES)
def test_pixels_match_ngff_zarr_reader(name, _cache, tmp_path_factory):
    fx, _ = _get(name, _cache, tmp_path_factory)
    peer_in_process("ngff-zarr reading")
    ms = ngff_zarr.from_ngff_zarr(str(fx.path))
    assert len(ms.images) == len(fx.levels)
    for i, (img, want) in enumerate(zip(ms.images, fx.levels)):
        assert list(img.dims) == fx.axes
        np.testing.assert_array_equal(np.asarray(img.data), want)
        assert [img.scale[a] for a in fx.axes] == pytest.approx(fx.scales[i])
        assert [img.translation[a] for a in fx.axes] == pytest.approx(fx.translations[i])
    assert [c.label for c in ms.metadata.omero.channels] == fx.channel_names


# --------------------------------------------------------------------------
# fixture-specific claims
# --------------------------------------------------------------------------


def test_explicit_nonzero_translation_written(tmp_path):
    for name in ("omezarr_py_v04_image_labels", "omezarr_py_v05_image_labels"):
        fx, _ = _build(name, tmp_path / name)
        assert any(v != 0 for v in fx.translations[0])
        ms = _multiscale(RawStore(fx.path).group_attrs("", fx.zarr_format))
        _, trans0 = _transforms(ms["datasets"][0])
        assert trans0 == pytest.approx(fx.translations[0])


def test_v05_image_has_no_v2_metadata(tmp_path):
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    assert (fx.path / "zarr.json").is_file()
    assert not list(fx.path.rglob(".zattrs")) and not list(fx.path.rglob(".zgroup"))
    # dimension_names: written for the image, not for the labels (ome-zarr quirk)
    img = json.loads((fx.path / "s0" / "zarr.json").read_text())
    assert img["dimension_names"] == fx.axes
    lab = json.loads((fx.path / "labels/cells/s0/zarr.json").read_text())
    assert "dimension_names" not in lab or not lab["dimension_names"]
    assert fx.notes["label_arrays_have_dimension_names"] is False
    # labels group "ome" has no "version" key (ome-zarr quirk, recorded in notes)
    assert "version" not in RawStore(fx.path).group_attrs("labels", 3)
    assert fx.notes["labels_group_ome_has_version"] is False


def test_ngffzarr_sharded_dir(tmp_path):
    fx = tp.make_ngffzarr_v05_sharded_dir(tmp_path)
    assert fx.sharded and all(s is not None for s in fx.shards)
    assert fx.path.is_dir() and (fx.path / "zarr.json").is_file()
    assert fx.dataset_paths == ["scale0/image", "scale1/image", "scale2/image"]
    assert any(v != 0 for v in fx.translations[0])
    root = json.loads((fx.path / "zarr.json").read_text())
    assert "consolidated_metadata" in root
    # opens with plain zarr (as a v3 group)
    g = zarr.open_group(str(fx.path), mode="r")
    assert g.metadata.zarr_format == 3
    assert g["scale0/image"].shards == fx.shards[0]


def test_ngffzarr_ozx_archive(tmp_path):
    fx = tp.make_ngffzarr_v05_ozx(tmp_path)
    assert fx.path.suffix == ".ozx" and fx.path.is_file()
    assert zipfile.is_zipfile(fx.path)
    with zipfile.ZipFile(fx.path) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        root = json.loads(zf.read("zarr.json"))
        comment = json.loads(zf.comment)
    assert names[0] == "zarr.json"
    assert root["attributes"]["ome"]["version"] == "0.5"
    assert comment["ome"]["version"] == "0.5"
    assert comment["ome"]["zipFile"]["centralDirectory"]["jsonFirst"] is True

    info = fx.notes["zip"]
    assert info == tp.inspect_zip(fx.path)
    assert info["root_zarr_json_first"] and info["all_zarr_json_before_data"]
    assert info["all_stored"]
    assert info["entries"] == names
    # ngff-zarr asks for allowZip64=True, but Python's zipfile only emits ZIP64
    # records when needed, so a small archive is NOT ZIP64.
    assert info["zip64"] is False
    assert fx.sharded
    # same pixels as the directory variant
    fx_dir = tp.make_ngffzarr_v05_sharded_dir(tmp_path / "dir")
    for a, b in zip(fx.levels, fx_dir.levels):
        np.testing.assert_array_equal(a, b)
    assert fx.shards == fx_dir.shards and fx.chunks == fx_dir.chunks


def test_2d_defaults(tmp_path):
    fx = tp.make_omezarr_py_v04_2d_yx(tmp_path)
    assert fx.axes == ["y", "x"] and fx.units == {}
    assert fx.levels[0].dtype == np.uint8 and fx.levels[0].ndim == 2
    assert fx.channel_names is None
    attrs = json.loads((fx.path / ".zattrs").read_text())
    assert set(attrs) == {"multiscales"}
    assert fx.scales[0] == [1.0, 1.0]


def test_side_by_side_prefers_v05(tmp_path):
    fx = tp.make_zarr_v2_and_v3_side_by_side(tmp_path)
    p = fx.path
    for f in (".zgroup", ".zattrs", "zarr.json", "s0/.zarray", "s0/zarr.json"):
        assert (p / f).is_file(), f
    v2 = json.loads((p / ".zattrs").read_text())
    v3 = json.loads((p / "zarr.json").read_text())["attributes"]["ome"]
    assert v2["multiscales"][0]["version"] == "0.4"
    assert v3["version"] == "0.5"
    s2 = [_transforms(d)[0] for d in v2["multiscales"][0]["datasets"]]
    s3 = [_transforms(d)[0] for d in v3["multiscales"][0]["datasets"]]
    np.testing.assert_allclose(s3, fx.scales)
    np.testing.assert_allclose(s2, fx.notes["decoy_scales"])
    for a, b in zip(s2, s3):
        assert a != pytest.approx(b)
    # pixels are distinguishable too
    for a, b in zip(fx.levels, fx.notes["decoy_levels"]):
        assert a.shape == b.shape and not np.array_equal(a, b)
    np.testing.assert_array_equal(
        np.asarray(zarr.open_group(str(p), mode="r", zarr_format=2)["s0"][...]),
        fx.notes["decoy_levels"][0],
    )
    # zarr itself picks v3 when both exist (and warns)
    with pytest.warns(UserWarning, match="Both zarr.json"):
        g = zarr.open_group(str(p), mode="r")
    assert g.metadata.zarr_format == 3
    np.testing.assert_array_equal(np.asarray(g["s0"][...]), fx.levels[0])


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_legacy_layout(version, tmp_path):
    fx = tp.make_v01_to_v03_image(tmp_path, version)
    p = fx.path
    assert fx.version == version
    assert not list(p.rglob("zarr.json"))
    zarray = json.loads((p / "0" / ".zarray").read_text())
    sep = "." if version == "0.1" else "/"
    assert zarray.get("dimension_separator", ".") == sep
    first_chunk = sep.join("0" * fx.levels[0].ndim)
    assert (p / "0" / first_chunk).is_file()
    attrs = json.loads((p / ".zattrs").read_text())
    ms = attrs["multiscales"][0]
    assert ms["version"] == version
    if version == "0.3":
        assert ms["axes"] == ["c", "y", "x"] and fx.levels[0].ndim == 3
    else:
        assert "axes" not in ms and fx.levels[0].ndim == 5
    assert attrs["omero"]["version"] == version
    assert fx.scales[0] == [1.0] * len(fx.axes)
    assert fx.translations == [None] * len(fx.levels)
