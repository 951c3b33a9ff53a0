"""Our reader on OME-Zarr written by *other* tools (ome-zarr-py, ngff-zarr, plain zarr).

Ground truth comes from ``tests/_support/thirdparty.py`` (pixels read back with plain zarr,
metadata as handed to the tool); nothing here derives expectations from napari_ozx.

1. ``open_ome_zarr``: pixels of every level, axes, units, per-level transforms, omero,
   labels (pixels, colours, properties).
2. The npe2 reader: ``get_reader`` -> layer data tuples with napari keyword arguments,
   also through ``npe2.read``; and the whole read path stays headless (no Qt import).
3. Opening reads metadata keys only, never a chunk or shard.
4. ``get_reader`` declines what is not ours without raising; a broken ``.ozx`` is claimed
   and reported as ONE napari error notification, never an exception.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from napari_ozx import _reader
from napari_ozx.ngff.read.open import open_ome_zarr
from tests._support.thirdparty import ALL_FIXTURES, Fixture

pytestmark = pytest.mark.slow  # other tools write and read every fixture

FIXTURE_NAMES = list(ALL_FIXTURES)
LEGACY = [n for n in FIXTURE_NAMES if n in ("v01_image", "v02_image", "v03_image")]

# Our documented mapping of omero hex colours to napari colormaps (see layers.reading._colormap):
# the six primaries/secondaries and white get napari's named colormaps, anything else
# becomes a "#rrggbb" custom colormap.
NAMED = {
    "FF0000": "red",
    "00FF00": "green",
    "0000FF": "blue",
    "FF00FF": "magenta",
    "00FFFF": "cyan",
    "FFFF00": "yellow",
    "FFFFFF": "gray",
}

METADATA_KEYS = ("zarr.json", ".zattrs", ".zgroup", ".zarray", ".zmetadata")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Fixture]:
    """Every third-party fixture, written once per module (read-only for the tests)."""
    root = tmp_path_factory.mktemp("thirdparty")
    return {name: make(root / name) for name, make in ALL_FIXTURES.items()}


def _is_legacy(fx: Fixture) -> bool:
    return fx.version in ("0.1", "0.2", "0.3")


def _expected_colormap(hex_color: str) -> str:
    return NAMED.get(hex_color.upper(), f"#{hex_color.lower()}")


def _expected_features(props: dict[int, dict[str, Any]]) -> dict[str, list[Any]]:
    keys: list[str] = []
    for p in props.values():
        keys.extend(k for k in p if k not in keys)
    table: dict[str, list[Any]] = {"index": list(props)}
    for k in keys:
        table[k] = [p.get(k) for p in props.values()]
    return table


def _drop(seq, axis):
    return tuple(v for i, v in enumerate(seq) if i != axis)


# ----------------------------------------------------------------- 1. open_ome_zarr


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_open_ome_zarr_matches_ground_truth(name, built):
    fx = built[name]
    with open_ome_zarr(fx.path) as oz:
        images = oz.images()
        assert len(images) == 1
        (img,) = images
        ms = img.multiscale

        # pixels of EVERY level
        assert len(img.levels) == len(fx.levels)
        for i, (lazy, want) in enumerate(zip(img.levels, fx.levels, strict=True)):
            got = np.asarray(lazy)
            assert got.dtype == want.dtype, f"level {i}"
            np.testing.assert_array_equal(got, want, err_msg=f"level {i}")

        # axes and units
        assert list(ms.axis_names) == fx.axes
        assert {a.name: a.unit for a in ms.axes if a.unit} == fx.units
        if "c" in fx.axes:
            assert ms.channel_axis == fx.axes.index("c")

        # per-level transforms (legacy: level 0 here; implied scales tested below)
        assert [d.path for d in ms.datasets] == fx.dataset_paths
        checked = range(1) if _is_legacy(fx) else range(len(fx.levels))
        for i in checked:
            assert ms.datasets[i].scale == pytest.approx(fx.scales[i]), f"scale level {i}"
            want_t = fx.translations[i] or [0.0] * len(fx.axes)
            assert ms.datasets[i].translation == pytest.approx(want_t), f"translation level {i}"
        if _is_legacy(fx):  # no coordinateTransformations before 0.4: no translation
            assert all(d.translation == (0.0,) * len(fx.axes) for d in ms.datasets)

        # omero
        omero = img.meta.omero
        if fx.channel_names is None:
            assert omero is None or not omero.channels
        else:
            assert [c.label for c in omero.channels] == fx.channel_names
            assert [c.color for c in omero.channels] == [c.upper() for c in fx.channel_colors]
            assert [(c.window.start, c.window.end) for c in omero.channels] == fx.contrast_limits
            if fx.contrast_ranges is not None:
                assert [(c.window.min, c.window.max) for c in omero.channels] == fx.contrast_ranges

        # labels
        labels = {lab.name: lab for lab in img.labels}
        assert set(labels) == set(fx.labels)
        for lname, lab in labels.items():
            want_levels = fx.labels[lname]
            assert len(lab.levels) == len(want_levels)
            for i, (lazy, want) in enumerate(zip(lab.levels, want_levels, strict=True)):
                np.testing.assert_array_equal(np.asarray(lazy), want, err_msg=f"{lname} level {i}")
            if lname in fx.label_axes:
                assert list(lab.multiscale.axis_names) == fx.label_axes[lname]
            if lname in fx.label_scales and not _is_legacy(fx):
                for i, ds in enumerate(lab.multiscale.datasets):
                    assert ds.scale == pytest.approx(fx.label_scales[lname][i])
                    want_t = fx.label_translations[lname][i] or [0.0] * len(ds.scale)
                    assert ds.translation == pytest.approx(want_t)
            il = lab.meta.image_label
            assert il is not None
            assert {c.value: c.rgba for c in il.colors} == fx.label_colors.get(lname, {})
            props = {
                p["label-value"]: {k: v for k, v in p.items() if k != "label-value"}
                for p in il.properties
            }
            assert props == fx.label_properties.get(lname, {})


def test_side_by_side_never_shows_the_v04_decoy(built):
    """RFC-2: where zarr.json and .zattrs both exist, the 0.5 (Zarr v3) half wins."""
    fx = built["zarr_v2_and_v3_side_by_side"]
    with open_ome_zarr(fx.path) as oz:
        assert oz.zarr_format == 3
        (img,) = oz.images()
        assert img.multiscale.version == "0.5"
        labels = [c.label for c in img.meta.omero.channels]
        assert labels != fx.notes["decoy_channel_names"]
        assert not np.array_equal(np.asarray(img.levels[0]), fx.notes["decoy_levels"][0])


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_levels_get_implied_scale(name, built):
    fx = built[name]
    with open_ome_zarr(fx.path) as oz:
        (img,) = oz.images()
        got = [list(d.scale) for d in img.multiscale.datasets]
    for i, (g, want) in enumerate(zip(got, fx.scales, strict=True)):
        assert g == pytest.approx(want), f"level {i}"


# ------------------------------------------------------------------ 2. npe2 reader


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_reader_layer_data(name, built):
    fx = built[name]
    reader = _reader.get_reader(str(fx.path))
    assert callable(reader)
    layers = reader(str(fx.path))
    assert layers and layers != [(None,)]

    images = [lyr for lyr in layers if lyr[2] == "image"]
    labels = [lyr for lyr in layers if lyr[2] == "labels"]
    assert len(images) == 1
    assert len(labels) == len(fx.labels)
    assert len(layers) == 1 + len(fx.labels)

    data, kw, _ = images[0]
    c = fx.axes.index("c") if "c" in fx.axes else None
    multiscale = len(fx.levels) > 1
    assert kw["multiscale"] is multiscale
    levels = data if multiscale else [data]
    assert [tuple(lv.shape) for lv in levels] == [lv.shape for lv in fx.levels]
    np.testing.assert_array_equal(np.asarray(levels[-1]), fx.levels[-1])

    assert kw.get("channel_axis") == c
    spatial = [a for a in fx.axes if a != "c"]
    assert tuple(kw["axis_labels"]) == tuple(spatial)
    assert tuple(kw["units"]) == tuple(fx.units.get(a, "pixel") for a in spatial)
    assert tuple(kw["scale"]) == pytest.approx(_drop(fx.scales[0], c))
    t0 = fx.translations[0] or [0.0] * len(fx.axes)
    assert tuple(kw["translate"]) == pytest.approx(_drop(t0, c))

    if fx.channel_names is not None:
        assert kw["name"] == fx.channel_names
        assert kw["colormap"] == [_expected_colormap(h) for h in fx.channel_colors]
        assert kw["contrast_limits"] == [list(w) for w in fx.contrast_limits]
    else:
        assert kw["name"] == fx.name
        assert "colormap" not in kw

    for ldata, lkw, _ in labels:
        lname = lkw["name"]
        assert lname in fx.labels
        llevels = ldata if lkw["multiscale"] else [ldata]
        want = fx.labels[lname][0]
        lax = fx.label_axes.get(lname, [])
        if "c" in lax:  # a label image with a (size-1) channel axis: one layer per channel
            assert want.shape[lax.index("c")] == 1
            want = np.take(want, 0, axis=lax.index("c"))
            assert tuple(lkw["axis_labels"]) == tuple(a for a in lax if a != "c")
        np.testing.assert_array_equal(np.asarray(llevels[0]), want)
        colors = fx.label_colors.get(lname)
        if colors:
            cmap = lkw["colormap"]
            assert isinstance(cmap, dict)
            for value, rgba in colors.items():
                assert cmap[value] == pytest.approx(tuple(x / 255 for x in rgba))
            assert cmap[0][3] == 0  # background transparent
        props = fx.label_properties.get(lname)
        if props:
            assert lkw["features"] == _expected_features(props)


def _npe2_read(path: Path):
    import npe2

    pm = npe2.PluginManager.instance()
    try:
        pm.get_manifest("napari-ozx")
    except KeyError:
        pm.discover()
    return npe2.read([str(path)], stack=False, plugin_name="napari-ozx")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_npe2_read_same_layers(name, built):
    fx = built[name]
    ours = _reader.get_reader(str(fx.path))(str(fx.path))
    via_npe2 = _npe2_read(fx.path)
    assert len(via_npe2) == len(ours)
    assert [t[2] for t in via_npe2] == [t[2] for t in ours]
    assert [t[1]["name"] for t in via_npe2] == [t[1]["name"] for t in ours]


def test_reader_path_is_headless(built, tmp_path):
    """npe2.read of good files and of a broken one (which notifies) imports no Qt."""
    bad = tmp_path / "broken.ozx"
    bad.write_bytes(b"\x00garbage" * 64)
    paths = [str(built[n].path) for n in ("ngffzarr_v05_ozx", "omezarr_py_v04_image_labels")]
    code = textwrap.dedent(
        f"""
        import json, sys
        import npe2
        pm = npe2.PluginManager.instance()
        pm.discover()
        counts = [len(npe2.read([p], stack=False, plugin_name="napari-ozx")) for p in {paths!r}]
        bad = npe2.read([{str(bad)!r}], stack=False, plugin_name="napari-ozx")
        qt = sorted(m for m in sys.modules
                    if m.split(".")[0] in ("PyQt6", "PyQt5", "PySide6", "PySide2", "qtpy"))
        print(json.dumps({{"counts": counts, "bad": repr(bad), "qt": qt}}))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["counts"] == [1, 2]
    assert out["bad"] == "[(None,)]"
    assert out["qt"] == []


# ------------------------------------------------------- 3. nothing computed at open


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_reader_reads_only_metadata(name, built, store_reads):
    fx = built[name]
    keys = store_reads
    layers = _reader.get_reader(str(fx.path))(str(fx.path))
    assert len(layers) == 1 + len(fx.labels)
    assert keys, "the spy saw no store reads at all"
    data_keys = [k for k in keys if k.rsplit("/", 1)[-1] not in METADATA_KEYS]
    assert data_keys == []


# ------------------------------------------------ 4. declining and broken files


def _plain_zarr_dir(path: Path, fmt: int) -> Path:
    g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    g.attrs["hello"] = "world"
    a = g.create_array("data", shape=(8, 8), dtype="uint8", chunks=(4, 4))
    a[...] = 1
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "plain_zarr_v3",
        "plain_zarr_v2",
        "random_dir",
        "empty_dir",
        "text_file",
        "nonexistent",
        "nonexistent_zarr",
        "nonexistent_zip",
        "zip_without_zarr_json",
        "json_garbage_dir",
        "empty_list",
    ],
)
def test_get_reader_declines(kind, tmp_path):
    if kind == "plain_zarr_v3":
        path: Any = str(_plain_zarr_dir(tmp_path / "plain.zarr", 3))
    elif kind == "plain_zarr_v2":
        path = str(_plain_zarr_dir(tmp_path / "plain2.zarr", 2))
    elif kind == "random_dir":
        d = tmp_path / "photos"
        (d / "sub").mkdir(parents=True)
        (d / "a.txt").write_text("hello")
        (d / "sub" / "b.bin").write_bytes(b"\x00\x01")
        path = str(d)
    elif kind == "empty_dir":
        (tmp_path / "empty.zarr").mkdir()
        path = str(tmp_path / "empty.zarr")
    elif kind == "text_file":
        (tmp_path / "notes.txt").write_text("not an image\n")
        path = str(tmp_path / "notes.txt")
    elif kind == "nonexistent":
        path = str(tmp_path / "does" / "not" / "exist")
    elif kind == "nonexistent_zarr":
        path = str(tmp_path / "missing.ome.zarr")
    elif kind == "nonexistent_zip":
        path = str(tmp_path / "missing.zip")
    elif kind == "zip_without_zarr_json":
        path = str(tmp_path / "archive.zip")
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("readme.txt", "hello")
            zf.writestr("data/0/0", b"\x00" * 16)
    elif kind == "json_garbage_dir":
        d = tmp_path / "broken.zarr"
        d.mkdir()
        (d / "zarr.json").write_text("{ not json")
        path = str(d)
    else:
        path = []
    assert _reader.get_reader(path) is None


@pytest.fixture
def notifications():
    """Every notification napari dispatches (the real notification_manager path)."""
    from napari.utils.notifications import notification_manager

    got: list[Any] = []

    def on_ready(event):
        got.append(event)

    notification_manager.notification_ready.connect(on_ready)
    try:
        yield got
    finally:
        notification_manager.notification_ready.disconnect(on_ready)


def _valid_ozx(built) -> bytes:
    return Path(built["ngffzarr_v05_ozx"].path).read_bytes()


@pytest.mark.parametrize(
    "kind", ["truncated_tail", "truncated_half", "garbage", "empty", "missing"]
)
def test_broken_ozx_reports_one_error(kind, built, tmp_path, notifications):
    from napari.utils.notifications import NotificationSeverity

    path = tmp_path / f"{kind}.ozx"
    raw = _valid_ozx(built)
    if kind == "truncated_tail":
        path.write_bytes(raw[:-40])
    elif kind == "truncated_half":
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "garbage":
        path.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif kind == "empty":
        path.write_bytes(b"")
    # "missing": a .ozx name that does not exist is claimed too (our policy: any .ozx)

    reader = _reader.get_reader(str(path))
    assert reader is not None, "a .ozx is always claimed so its error is ours to explain"
    result = reader(str(path))  # must not raise
    assert result == [(None,)]

    errors = [n for n in notifications if n.severity == NotificationSeverity.ERROR]
    assert len(errors) == 1, [n.message for n in notifications]
    msg = errors[0].message
    assert str(path) in msg
    first = msg.splitlines()[0]  # what a collapsed toast shows: reason first, then the name
    assert first.endswith(f"({path.name})") and str(path) not in first, msg
    reason = first[: -len(f"({path.name})")].strip()
    assert len(reason) > 5, msg
    if kind != "missing":
        assert any(w in msg.lower() for w in ("zip", "central directory", "truncated", "archive"))
    else:
        assert "no such file" in msg.lower() or "not found" in msg.lower() or "exist" in msg.lower()


def test_one_broken_file_does_not_hide_the_others(built, tmp_path, notifications):
    from napari.utils.notifications import NotificationSeverity

    bad = tmp_path / "bad.ozx"
    bad.write_bytes(b"PK\x05\x06" + b"\x00" * 10)
    good = built["ngffzarr_v05_ozx"].path
    layers = _reader.read([str(bad), str(good)])
    assert len(layers) == 1 and layers[0][2] == "image"
    errors = [n for n in notifications if n.severity == NotificationSeverity.ERROR]
    assert len(errors) == 1 and str(bad) in errors[0].message
