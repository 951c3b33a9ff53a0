"""A pyramid is data: ``convert`` and a save of opened layers copy every stored level.

The source is what another tool writes: an OME-Zarr 0.4 directory made with zarr-python
alone, whose lower levels are independent data (not a 2x mean of level 0) described by
``multiscales[0].type`` / ``metadata`` as a Gaussian, with a translation per level that
no halving rule gives, and a label image with a pyramid of its own depth. Every level's
pixels, scale and translation, the multiscale's ``type`` and ``metadata``, the level
paths, the omero channels and the labels' level count must come through directory ->
``.ozx``, directory -> 0.5 / 0.6 directory and ``.ozx`` -> directory unchanged. Levels
are built only when asked (``--levels N``, ``--rebuild-pyramid``), and the output says so.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from napari_ozx.__main__ import main
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.write.convert import convert, convert_summary
from napari_ozx.ngff.write.options import WriteOptions
from tests._support.classic_dask import in_child_without_query_planning

AXES = [
    {"name": "c", "type": "channel"},
    {"name": "z", "type": "space", "unit": "micrometer"},
    {"name": "y", "type": "space", "unit": "micrometer"},
    {"name": "x", "type": "space", "unit": "micrometer"},
]
GAUSSIAN = {"method": "skimage.transform.pyramid_gaussian", "version": "0.19", "args": [2]}


def _write_source(root: Path, paths: tuple[str, ...] = ("0", "1", "2")) -> None:
    """2 channels x 6 z x 256 x 320 uint16 in 3 independent levels, labels in 2."""
    rng = np.random.default_rng(31)
    g = zarr.open_group(str(root), mode="w", zarr_format=2)
    datasets = []
    for i, path in enumerate(paths):
        shape = (2, 6, 256 >> i, 320 >> i)
        a = g.create_array(path, shape=shape, chunks=(1, 1, 64, 64), dtype="uint16")
        a[:] = rng.integers(0, 65535, shape, dtype="uint16")
        f = 2**i
        datasets.append(
            {
                "path": path,
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1, 2, 0.5 * f, 0.5 * f]},
                    # 10.0 / 10.1 / 10.2: no halving rule gives these
                    {"type": "translation", "translation": [0, 3, 10.0 + 0.1 * i, -5]},
                ],
            }
        )
    g.attrs["multiscales"] = [
        {
            "version": "0.4",
            "name": "src",
            "axes": AXES,
            "datasets": datasets,
            "type": "gaussian",
            "metadata": GAUSSIAN,
        }
    ]
    g.attrs["omero"] = {
        "version": "0.4",
        "channels": [
            {"label": "DNA", "color": "FF0000", "active": True,
             "window": {"start": 10, "end": 60000, "min": 0, "max": 65535}},
            {"label": "Actin", "color": "00FF00", "active": False,
             "window": {"start": 5, "end": 50000, "min": 0, "max": 65535}},
        ],
    }  # fmt: skip
    labels = g.create_group("labels")
    labels.attrs["labels"] = ["cells"]
    cells = labels.create_group("cells")
    lds = []
    for i in range(2):
        shape = (6, 256 >> i, 320 >> i)
        a = cells.create_array(str(i), shape=shape, chunks=(1, 64, 64), dtype="uint32")
        a[:] = rng.integers(0, 20, shape, dtype="uint32")
        f = 2**i
        lds.append(
            {
                "path": str(i),
                "coordinateTransformations": [
                    {"type": "scale", "scale": [2, 0.5 * f, 0.5 * f]},
                    {"type": "translation", "translation": [3, 10.0 + 0.1 * i, -5]},
                ],
            }
        )
    cells.attrs["multiscales"] = [{"version": "0.4", "name": "cells", "axes": AXES[1:],
                                   "datasets": lds}]  # fmt: skip
    cells.attrs["image-label"] = {"version": "0.4", "colors": [{"label-value": 1,
                                  "rgba": [255, 0, 0, 255]}]}  # fmt: skip


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("levels") / "src.ome.zarr"
    _write_source(root)
    return root


def _pyramid(image: Any) -> list[tuple[str, tuple, tuple, np.ndarray]]:
    return [
        (ds.path, tuple(ds.scale), tuple(ds.translation), np.asarray(lvl))
        for ds, lvl in zip(image.multiscale.datasets, image.levels, strict=True)
    ]


def _content(path: Path) -> dict[str, Any]:
    with open_ome_zarr(path) as oz:
        (image,) = oz.images()
        ms = image.multiscale
        return {
            "version": ms.version,
            "image": _pyramid(image),
            "labels": {lab.name: _pyramid(lab) for lab in image.labels},
            "type": ms.type,
            "metadata": dict(ms.metadata) if ms.metadata else None,
            "omero": [
                (c.label, c.color, c.active, c.window.start, c.window.end)
                for c in image.meta.omero.channels
            ],
        }


def _assert_same_levels(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} levels, the source has {len(want)}"
    for i, ((gp, gs, gt, ga), (wp, ws, wt, wa)) in enumerate(zip(got, want, strict=True)):
        # a nested path (ngff-zarr's "scale0/image") becomes the level's index
        assert gp == (wp if "/" not in wp else str(i)), f"{what} level {i}: {gp!r} for {wp!r}"
        assert np.allclose(gs, ws) and np.allclose(gt, wt), (what, i, gs, ws, gt, wt)
        assert ga.dtype == wa.dtype and ga.shape == wa.shape, (what, i)
        differ = int(np.count_nonzero(ga != wa))
        assert differ == 0, f"{what} level {i}: {differ} pixels differ from the stored level"


def _assert_as_stored(got: dict[str, Any], want: dict[str, Any]) -> None:
    _assert_same_levels(got["image"], want["image"], "image")
    assert got["labels"].keys() == want["labels"].keys()
    for name in want["labels"]:
        _assert_same_levels(got["labels"][name], want["labels"][name], f"labels {name}")
    assert got["type"] == "gaussian" and got["metadata"] == GAUSSIAN
    assert got["omero"] == want["omero"]


@pytest.mark.parametrize(
    ("target", "options", "version"),
    [
        ("out.ozx", {}, "0.5"),
        ("out05.ome.zarr", {"version": "0.5"}, "0.5"),
        ("out06.ome.zarr", {"version": "0.6"}, "0.6"),
        ("out04.ome.zarr", {}, "0.4"),  # the source's own version, kept
    ],
)
def test_convert_copies_every_stored_level(source, tmp_path, target, options, version):
    want = _content(source)
    written = convert_summary(source, tmp_path / target, _options(source, target, options))
    assert written.notes == ()  # nothing dropped, nothing built
    got = _content(tmp_path / target)
    assert got["version"] == version
    _assert_as_stored(got, want)


def test_ozx_back_to_a_directory_keeps_every_level(source, tmp_path):
    want = _content(source)
    convert(source, tmp_path / "a.ozx")
    convert(tmp_path / "a.ozx", tmp_path / "b.ome.zarr")
    _assert_as_stored(_content(tmp_path / "b.ome.zarr"), want)


def _options(source: Path, target: str, given: dict[str, Any]) -> WriteOptions:
    from napari_ozx.ngff.write.convert import source_options

    return WriteOptions(**{**source_options(source, target), **given})


def _mean2(a: np.ndarray) -> np.ndarray:
    """The writer's 2x2 mean of every whole block (y, x even)."""
    h, w = a.shape[-2] // 2 * 2, a.shape[-1] // 2 * 2
    b = a[..., :h, :w].astype(np.float64)
    m = (b[..., ::2, ::2] + b[..., 1::2, ::2] + b[..., ::2, 1::2] + b[..., 1::2, 1::2]) / 4
    return np.rint(m).astype(a.dtype)


def test_more_levels_are_built_from_the_coarsest_stored_one_and_said(source, tmp_path, capsys):
    """``--levels 5``: the 3 stored image levels (2 of the labels) are copied; the
    missing ones are halved from the coarsest stored level, placed by its scale and
    translation; the output names what was built."""
    want = _content(source)
    out = tmp_path / "more.ozx"
    assert main(["convert", str(source), str(out), "--levels", "5"]) == 0
    printed = capsys.readouterr().out
    assert "image 'src': levels 3-4 built from stored level 2 (mean)" in printed
    assert "labels 'cells': levels 2-4 built from stored level 1 (nearest)" in printed
    got = _content(out)
    _assert_same_levels(got["image"][:3], want["image"], "image")
    _assert_same_levels(got["labels"]["cells"][:2], want["labels"]["cells"], "labels")
    assert len(got["image"]) == len(got["labels"]["cells"]) == 5
    _, s2, t2, a2 = want["image"][2]
    _, s3, t3, a3 = got["image"][3]
    np.testing.assert_array_equal(a3[..., : a2.shape[-2] // 2, : a2.shape[-1] // 2], _mean2(a2))
    assert np.allclose(s3, [1, 2, 2 * s2[2], 2 * s2[3]])
    assert np.allclose(t3, [t2[0], t2[1], t2[2] + s2[2] / 2, t2[3] + s2[3] / 2])
    assert (
        got["labels"]["cells"][2][3].tolist() == want["labels"]["cells"][1][3][:, ::2, ::2].tolist()
    )


def test_fewer_levels_keep_the_finest_and_say_so(source, tmp_path, capsys):
    want = _content(source)
    out = tmp_path / "fewer.ome.zarr"
    assert main(["convert", str(source), str(out), "--levels", "2"]) == 0
    assert (
        "image 'src': 2 of its 3 stored levels written, level 2 dropped" in capsys.readouterr().out
    )
    got = _content(out)
    _assert_same_levels(got["image"], want["image"][:2], "image")
    _assert_same_levels(got["labels"]["cells"], want["labels"]["cells"], "labels")


def test_rebuild_pyramid_is_asked_for_and_said(source, tmp_path, capsys):
    want = _content(source)
    out = tmp_path / "rebuilt.ozx"
    assert main(["convert", str(source), str(out), "--rebuild-pyramid", "--levels", "3"]) == 0
    assert "image 'src': pyramid rebuilt from level 0 (3 levels" in capsys.readouterr().out
    got = _content(out)
    assert got["type"] == "mean" and got["metadata"] is None  # no longer the Gaussian's
    level0 = want["image"][0][3]
    np.testing.assert_array_equal(got["image"][0][3], level0)
    np.testing.assert_array_equal(got["image"][1][3], _mean2(level0))


def test_named_level_paths_are_kept_and_continued(tmp_path):
    """``s0``/``s1``/``s2`` stay as they are; a level built after them is ``s3``."""
    src = tmp_path / "named.ome.zarr"
    _write_source(src, paths=("s0", "s1", "s2"))
    convert(src, tmp_path / "n.ozx", WriteOptions(pyramid_levels=4))
    with open_ome_zarr(tmp_path / "n.ozx") as oz:
        assert [d.path for d in oz.images()[0].multiscale.datasets] == ["s0", "s1", "s2", "s3"]


# ------------------------------------------------------------- third-party pyramids


@in_child_without_query_planning
def _ome_zarr_py_gaussian(path: Path) -> None:
    from ome_zarr import scale as ome_scale
    from ome_zarr import writer as ome_writer
    from ome_zarr.format import FormatV04

    image = np.random.default_rng(5).integers(0, 4000, (2, 4, 128, 96), dtype=np.uint16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scaler = ome_scale.Scaler(max_layer=2, method="gaussian")
        pyramid = scaler.gaussian(image)
        group = zarr.open_group(str(path), mode="w", zarr_format=2)
        ome_writer.write_multiscale(
            pyramid,
            group,
            fmt=FormatV04(),
            axes=["c", "z", "y", "x"],
            metadata={"method": "ome_zarr.scale.Scaler.gaussian"},
        )


@in_child_without_query_planning
def _ngff_zarr_gaussian(path: Path) -> None:
    import ngff_zarr as nz

    data = np.random.default_rng(6).integers(0, 4000, (4, 128, 96), dtype=np.uint16)
    image = nz.to_ngff_image(
        data, dims=["z", "y", "x"], scale={"z": 2.0, "y": 0.5, "x": 0.5},
        translation={"z": 1.0, "y": 3.0, "x": -2.0},
    )  # fmt: skip
    ms = nz.to_multiscales(
        image,
        scale_factors=[{"z": 1, "y": 2, "x": 2}, {"z": 1, "y": 4, "x": 4}],
        method=nz.Methods.ITKWASM_GAUSSIAN,
    )
    nz.to_ngff_zarr(str(path), ms, version="0.5")


@pytest.mark.parametrize("writer", [_ome_zarr_py_gaussian, _ngff_zarr_gaussian])
@pytest.mark.parametrize("target", ["t.ozx", "t.ome.zarr"])
def test_third_party_gaussian_pyramids_survive_convert(tmp_path, writer, target):
    src = tmp_path / "src.ome.zarr"
    try:
        writer(src)
    except ImportError as e:  # ngff-zarr's Gaussian needs itkwasm-downsample
        pytest.skip(f"{writer.__name__}: {e}")
    with open_ome_zarr(src) as oz:
        (image,) = oz.images()
        want, kind = _pyramid(image), image.multiscale.type
    assert len(want) == 3
    # the lower levels really are not what our 2x mean would give
    assert not np.array_equal(want[1][3][..., :32, :32], _mean2(want[0][3])[..., :32, :32])
    convert(src, tmp_path / target)
    with open_ome_zarr(tmp_path / target) as oz:
        (image,) = oz.images()
        _assert_same_levels(_pyramid(image), want, writer.__name__)
        assert image.multiscale.type == kind


# ------------------------------------------------------------------ save as (napari)


def _viewer_with(path: Path) -> Any:
    import npe2
    from napari.components import ViewerModel

    npe2.PluginManager.instance().discover()
    vm = ViewerModel()
    vm.open(str(path), plugin="napari-ozx")
    return vm


@pytest.mark.parametrize("target", ["saved.ozx", "saved.ome.zarr"])
def test_save_as_keeps_the_pyramid_of_opened_layers(source, tmp_path, target):
    """File > Save of the opened image (its channel layers) and labels: every image level
    is written as stored (pixels, scale, translation, type, metadata, paths). The labels
    open editable at level 0, so their levels follow the image's (same count: "the same
    number of entries (scale levels) as the original unlabeled image", 0.4 §labels)."""
    from napari.plugins.io import save_layers

    want = _content(source)
    vm = _viewer_with(source)
    assert [ly.name for ly in vm.layers] == ["DNA", "Actin", "cells"]
    assert vm.layers["DNA"].multiscale
    out = tmp_path / target
    assert save_layers(str(out), list(vm.layers), plugin="napari-ozx") == [str(out)]
    got = _content(out)
    _assert_same_levels(got["image"], want["image"], "image")
    assert got["type"] == "gaussian" and got["metadata"] == GAUSSIAN
    cells = got["labels"]["cells"]
    assert len(cells) == len(got["image"])
    np.testing.assert_array_equal(cells[0][3], want["labels"]["cells"][0][3])
    for (_, ls, lt, _), (_, s, t, _) in zip(cells, got["image"], strict=True):
        assert np.allclose(ls, s[1:]) and np.allclose(lt, t[1:])


def test_save_as_of_one_channel_moved_keeps_levels_relative_to_level0(source, tmp_path):
    """A layer the user moved keeps its pyramid, each level placed relative to level 0
    as stored (the offsets 0.1 / 0.2 in y follow the move)."""
    from napari.plugins.io import save_layers

    want = _content(source)
    vm = _viewer_with(source)
    layer = vm.layers["Actin"]
    layer.translate = (100.0, 20.0, 30.0)
    out = tmp_path / "actin.ozx"
    save_layers(str(out), [layer], plugin="napari-ozx")
    with open_ome_zarr(out) as oz:
        (image,) = oz.images()
        got = _pyramid(image)
    assert len(got) == 3
    for i, ((_, s, t, a), (_, ws, wt, wa)) in enumerate(zip(got, want["image"], strict=True)):
        np.testing.assert_array_equal(a, wa[1])
        assert np.allclose(s, ws[1:])
        assert np.allclose(t, [100.0, 20.0 + wt[2] - 10.0, 30.0 + wt[3] + 5.0]), i


def test_a_layer_whose_levels_no_longer_match_its_record_gets_the_writers_pyramid(source, tmp_path):
    """Data replaced by the user (other shapes) is not the stored pyramid any more."""
    from napari.layers import Image
    from napari.plugins.io import save_layers

    vm = _viewer_with(source)
    meta = vm.layers["DNA"].metadata
    fresh = np.zeros((6, 100, 100), dtype=np.uint16)
    layer = Image([fresh, fresh[:, ::2, ::2]], multiscale=True, metadata=meta, name="x")
    out = tmp_path / "fresh.ozx"
    save_layers(str(out), [layer], plugin="napari-ozx")
    with open_ome_zarr(out) as oz:
        (image,) = oz.images()
        assert image.multiscale.type == "mean"
        assert tuple(image.levels[0].shape) == (6, 100, 100)


def test_a_scene_converts_with_every_image_placed_and_its_levels_kept(tmp_path):
    """A 0.6 scene (tile B scaled, rotated 25 deg and moved): each tile keeps its stored
    levels, and every pixel lands where it did in the scene's first coordinate system."""
    from napari_ozx._reader import read_layer_data
    from tests._support.ome06gen import rotation2, system, write_group, write_image06

    root = tmp_path / "scene.zarr"
    a = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    write_image06(root / "tileA", a, scale=[1.0, 1.0])
    write_image06(root / "tileB", a * 2, scale=[0.5, 0.5], levels=3)
    transforms = [
        {"type": "translation", "translation": [0.0, 40.0],
         "input": {"name": "physical", "path": "tileA"}, "output": {"name": "lab"}},
        {"type": "sequence", "input": {"name": "physical", "path": "tileB"},
         "output": {"name": "lab"},
         "transformations": [{"type": "scale", "scale": [2.0, 2.0]},
                             {"type": "rotation", "rotation": rotation2(25)},
                             {"type": "translation", "translation": [50.0, 20.0]}]},
    ]  # fmt: skip
    write_group(
        root, {"scene": {"coordinateSystems": [system("lab", "yx")],
                         "coordinateTransformations": transforms}}
    )  # fmt: skip
    out = tmp_path / "scene.ozx"
    summary = convert_summary(root, out)
    assert summary.version == "0.6" and summary.kind == "scene" and summary.images == 2

    def placed(path: Path) -> list[tuple[list, np.ndarray]]:
        from napari.components import ViewerModel

        vm = ViewerModel()
        got = []
        for data, kw, kind in read_layer_data(str(path)):
            layer = getattr(vm, f"add_{kind}")(data, **kw)
            pts = [layer.data_to_world(p) for p in [(0, 0), (20, 31), (31, 1)]]
            got.append((np.asarray(pts, float), [np.asarray(d) for d in layer.data]))
        return got

    for (pts, levels), (want_pts, want_levels) in zip(placed(out), placed(root), strict=True):
        np.testing.assert_allclose(pts, want_pts, atol=1e-9)
        assert len(levels) == len(want_levels)
        for got_level, want_level in zip(levels, want_levels, strict=True):
            np.testing.assert_array_equal(got_level, want_level)
    with open_ome_zarr(out) as oz:
        assert [c.name for c in oz.root.meta.scene.coordinate_systems] == ["lab"]


def test_the_export_panels_estimate_counts_the_stored_levels(source):
    """The export panel's estimate is what the writer does: an opened 3-level image is
    written in 3 levels (whatever the automatic rule would make of its size)."""
    from napari_ozx.layers.export import estimate_export, plans_from_layer_data

    vm = _viewer_with(source)
    layers = [ly.as_layer_data_tuple() for ly in vm.layers if ly.name != "cells"]
    est = estimate_export(WriteOptions(chunk_yx=64), plans_from_layer_data(layers), "e.ozx")
    assert [len(m.levels) for m in est.multiscales] == [3]
    rebuilt = WriteOptions(chunk_yx=64, rebuild_pyramid=True)
    est = estimate_export(rebuilt, plans_from_layer_data(layers), "e.ozx")
    assert [len(m.levels) for m in est.multiscales] == [4]  # x 320 -> 40: within a chunk
