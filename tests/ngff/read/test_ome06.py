"""OME-Zarr 0.6: coordinate systems, transformations and scenes, read into napari layers
placed where the metadata says, and napari layer transforms saved without loss.

The check of "where" is napari's own: ``layer.data_to_world`` of level-0 pixels against
world coordinates computed here independently (numpy) from the spec's definitions:
"Coordinate convention" (the pixel centre is the origin), "multiscales" (datasets map
arrays to the intrinsic system), "coordinateTransformations" (forward direction,
"Matrix transformations": matrices act on column vectors, first axis first) and "scene".
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.layers.writing import write_layer_data
from napari_ozx.ngff.write.options import WriteOptions
from tests._support.classic_dask import peer_in_process
from tests._support.ome06gen import rotation2, system, write_group, write_image06
from tests._support.paths import ROOT

REALWORLD = ROOT.parent / "shared" / "realworld"


def _layers(layer_data):
    """napari layers (headless ViewerModel, napari's own channel split) for layer data."""
    from napari.components import ViewerModel

    vm = ViewerModel()
    out = []
    for data, kw, kind in layer_data:
        added = getattr(vm, f"add_{kind}")(data, **kw)
        out.extend(added if isinstance(added, list) else [added])
    return vm, out


def _level0(layer):
    return np.asarray(layer.data[0] if layer.multiscale else layer.data)


def _world(layer, points):
    return np.array([layer.data_to_world(p) for p in points], dtype=float)


PIXELS = [(0, 0), (20, 31), (5, 40), (31, 1)]


# ----------------------------------------------------------------- images


def test_ngff_zarr_06_image_and_ozx_open_in_place(tmp_path):
    """An image written by ngff-zarr 0.50 with version="0.6" (directory and .ozx):
    per-level ``sequence[scale, translation]`` to an "intrinsic" system."""
    pytest.importorskip("ngff_zarr")
    from tests._support.thirdparty import write_ngff_zarr_image

    src = np.arange(2 * 32 * 48, dtype=np.uint16).reshape(2, 32, 48)
    for name in ("img.ome.zarr", "img.ozx"):
        write_ngff_zarr_image(
            tmp_path / name,
            src,
            ["c", "y", "x"],
            "0.6",
            {"y": 0.5, "x": 0.25},
            {"y": 10.0, "x": -3.0},
        )
        _, layers = _layers(read_layer_data(str(tmp_path / name)))
        assert len(layers) == 2  # one per channel
        for c, layer in enumerate(layers):
            want = np.array([(10 + 0.5 * i, -3 + 0.25 * j) for i, j in PIXELS])
            np.testing.assert_allclose(_world(layer, PIXELS), want)
            np.testing.assert_array_equal(np.asarray(layer.data[0]), src[c])
    with zipfile.ZipFile(tmp_path / "img.ozx") as z:
        assert json.loads(z.comment)["ome"]["version"] == "0.6"


@pytest.mark.parametrize("io_as_strings", [False, True])
def test_rotation_to_the_first_listed_system(tmp_path, io_as_strings):
    """'multiscales > coordinateTransformations': a rotation then a translation from the
    intrinsic system to "world", listed first: the layer is shown in "world". Both shapes
    of input / output (the spec's objects, the conformance suites' bare strings)."""
    data = np.arange(32 * 48, dtype=np.uint8).reshape(32, 48)
    r = rotation2(30)
    inp = "physical" if io_as_strings else {"name": "physical"}
    out = "world" if io_as_strings else {"name": "world"}
    write_image06(
        tmp_path / "rot.zarr",
        data,
        scale=[0.5, 2.0],
        translation=[1.0, -1.0],
        systems=[system("world", "yx")],
        transformations=[
            {
                "type": "sequence",
                "input": inp,
                "output": out,
                "transformations": [
                    {"type": "rotation", "rotation": r},
                    {"type": "translation", "translation": [5.0, 7.0]},
                ],
            }
        ],
        io_as_strings=io_as_strings,
    )
    _, (layer,) = _layers(read_layer_data(str(tmp_path / "rot.zarr")))
    phys = np.array([(1 + 0.5 * i, -1 + 2.0 * j) for i, j in PIXELS])
    want = phys @ np.asarray(r).T + [5.0, 7.0]
    np.testing.assert_allclose(_world(layer, PIXELS), want, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(layer.data[0]), data)


def test_intrinsic_listed_first_is_where_the_image_is_shown(tmp_path):
    """The image lists its intrinsic system first: a second system with a scale does not
    move it (the spec: the intrinsic system "should be used for viewing" by default)."""
    data = np.zeros((16, 16), np.uint8)
    write_image06(
        tmp_path / "a.zarr",
        data,
        scale=[2.0, 3.0],
        systems=[system("physical", "yx"), system("other", "yx")],
        transformations=[
            {
                "type": "scale",
                "scale": [10.0, 10.0],
                "input": {"name": "physical"},
                "output": {"name": "other"},
            }
        ],
    )
    _, (layer,) = _layers(read_layer_data(str(tmp_path / "a.zarr")))
    np.testing.assert_allclose(_world(layer, [(1, 1)]), [(2.0, 3.0)])


def test_mapaxis_and_affine_become_napari_affine(tmp_path):
    """mapAxis (a permutation) and affine are linear: napari's ``affine`` carries them."""
    data = np.zeros((16, 24), np.uint8)
    a = [[1.0, 0.5, 3.0], [0.2, 2.0, -4.0]]
    write_image06(
        tmp_path / "aff.zarr",
        data,
        systems=[system("world", "yx")],
        transformations=[
            {
                "type": "sequence",
                "input": {"name": "physical"},
                "output": {"name": "world"},
                "transformations": [
                    {"type": "mapAxis", "mapAxis": [1, 0]},
                    {"type": "affine", "affine": a},
                ],
            }
        ],
    )
    _, (layer,) = _layers(read_layer_data(str(tmp_path / "aff.zarr")))
    m = np.asarray(a)
    want = [m[:, :2] @ np.array([j, i]) + m[:, 2] for i, j in PIXELS]
    np.testing.assert_allclose(_world(layer, PIXELS), want, atol=1e-9)


def test_non_linear_path_shows_the_intrinsic_system_and_says_so(tmp_path, caplog):
    """'coordinateTransformations': readers "SHOULD display an informative warning if
    encountering transformations that cannot be parsed or displayed"."""
    data = np.zeros((16, 16), np.uint8)
    write_image06(
        tmp_path / "p.zarr",
        data,
        scale=[2.0, 2.0],
        systems=[system("world", "zyx")],
        transformations=[
            {
                "type": "projectAxis",
                "droppedInputs": [],
                "createdOutputs": [0],
                "input": {"name": "physical"},
                "output": {"name": "world"},
            }
        ],
    )
    reports = []
    with caplog.at_level(logging.WARNING):
        (ld,) = read_layer_data(str(tmp_path / "p.zarr"), report=lambda w, e: reports.append(e))
    assert reports and "intrinsic" in str(reports[0])
    _, (layer,) = _layers([ld])
    np.testing.assert_allclose(_world(layer, [(3, 4)]), [(6.0, 8.0)])


def test_draft_version_opens_with_one_warning(tmp_path, caplog):
    """Pre-release tags written by earlier tools open when their metadata has the 0.6
    shape, with one warning naming the draft version."""
    write_image06(tmp_path / "d.zarr", np.ones((8, 8), np.uint8), version="0.6.dev3")
    with caplog.at_level(logging.WARNING):
        (ld,) = read_layer_data(str(tmp_path / "d.zarr"))
    assert "0.6.dev3" in caplog.text
    assert np.asarray(ld[0][0]).sum() == 64


def test_realworld_06_dev4_case_opens():
    case = REALWORLD / "cases" / "models_v06_image.zarr"
    if not case.exists():
        pytest.skip("../shared/realworld is not beside this clone")
    lds = read_layer_data(str(case))
    _, layers = _layers(lds)
    assert len(layers) == 2  # c split; shown in its first system, coord_sys0 (intrinsic)
    # t z y x after the channel split; level 0 scale (1, 0.5, 0.5, 0.5)
    np.testing.assert_allclose(layers[0].data_to_world((1, 2, 3, 4)), (1, 1, 1.5, 2))


def test_labels_of_a_06_image_open_with_it(tmp_path):
    data = np.zeros((32, 32), np.uint16)
    write_image06(tmp_path / "im.zarr", data, scale=[0.5, 0.5])
    write_group(tmp_path / "im.zarr" / "labels", {"labels": ["cells"]})
    lab = np.zeros((32, 32), np.uint32)
    lab[4:8, 4:8] = 3
    write_image06(
        tmp_path / "im.zarr" / "labels" / "cells",
        lab,
        scale=[0.5, 0.5],
        extra_ome={"image-label": {"colors": [{"label-value": 3, "rgba": [255, 0, 0, 255]}]}},
    )
    lds = read_layer_data(str(tmp_path / "im.zarr"))
    assert [k for _, _, k in lds] == ["image", "labels"]
    _, (img, labels) = _layers(lds)
    np.testing.assert_allclose(_world(labels, PIXELS), _world(img, PIXELS))
    assert np.asarray(labels.data[0] if labels.multiscale else labels.data).max() == 3


# ----------------------------------------------------------------- scenes


def _scene(tmp_path: Path, with_c: bool = False) -> tuple[Path, np.ndarray, np.ndarray]:
    root = tmp_path / "scene.zarr"
    a = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    b = (np.arange(32 * 32, dtype=np.uint16).reshape(32, 32) * 2).astype(np.uint16)
    write_image06(root / "tileA", a, scale=[1.0, 1.0])
    write_image06(root / "tileB", b, scale=[0.5, 0.5])
    transforms = [
        {
            "type": "translation",
            "translation": [0.0, 40.0],
            "input": {"name": "physical", "path": "tileA"},
            "output": {"name": "world"},
        },
        {
            "type": "sequence",
            "input": {"name": "physical", "path": "tileB"},
            "output": {"name": "world"},
            "transformations": [
                {"type": "scale", "scale": [2.0, 2.0]},
                {"type": "rotation", "rotation": rotation2(25)},
                {"type": "translation", "translation": [50.0, 20.0]},
            ],
        },
    ]
    if with_c:
        write_image06(root / "tileC", a, scale=[1.0, 1.0])
        transforms.append(
            {
                "type": "identity",
                "input": {"name": "physical", "path": "tileC"},
                "output": {"name": "elsewhere"},
            }
        )
    systems = [system("world", "yx")] + ([system("elsewhere", "yx")] if with_c else [])
    write_group(
        root, {"scene": {"coordinateSystems": systems, "coordinateTransformations": transforms}}
    )
    return root, a, b


def test_scene_of_two_tiles_opens_in_the_scenes_first_system(tmp_path):
    """'scene': two images, one translated, one scaled + rotated + translated, shown in
    the scene's first coordinate system ("it is RECOMMENDED that the scene's first entry
    under the coordinateSystems field is used as the default")."""
    root, a, b = _scene(tmp_path)
    lds = read_layer_data(str(root))
    _, (la, lb) = _layers(lds)
    np.testing.assert_allclose(_world(la, PIXELS), [(i, j + 40.0) for i, j in PIXELS])
    r = np.asarray(rotation2(25))
    want_b = [r @ (2.0 * 0.5 * np.array(p, float)) + [50.0, 20.0] for p in PIXELS]
    np.testing.assert_allclose(_world(lb, PIXELS), want_b, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(la.data[0]), a)
    np.testing.assert_array_equal(np.asarray(lb.data[0]), b)


def test_scene_in_another_system_and_an_unreachable_image(tmp_path):
    """Shown in tileA's own system, tileB lands through the inverse of tileA's
    transformation; tileC reaches only "elsewhere": shown alone, with a report."""
    root, _, _ = _scene(tmp_path, with_c=True)
    reports: list[tuple[str, OzxError]] = []
    lds = read_layer_data(
        str(root), report=lambda w, e: reports.append((w, e)), system="tileA:physical"
    )
    _, (la, lb, lc) = _layers(lds)
    np.testing.assert_allclose(_world(la, PIXELS), np.array(PIXELS, float))
    r = np.asarray(rotation2(25))
    want_b = [r @ (np.array(p, float)) + [50.0, 20.0 - 40.0] for p in PIXELS]
    np.testing.assert_allclose(_world(lb, PIXELS), want_b, atol=1e-9)
    np.testing.assert_allclose(_world(lc, PIXELS), np.array(PIXELS, float))
    assert len(reports) == 1 and "tileC" in reports[0][0]


def test_scene_path_that_leaves_the_root_is_refused(tmp_path):
    root = tmp_path / "bad.zarr"
    write_image06(root / "tileA", np.zeros((8, 8), np.uint8))
    write_group(
        root,
        {
            "scene": {
                "coordinateSystems": [system("world", "yx")],
                "coordinateTransformations": [
                    {
                        "type": "identity",
                        "input": {"name": "physical", "path": "../tileA"},
                        "output": {"name": "world"},
                    }
                ],
            }
        },
    )
    with pytest.raises(OzxError, match=r"\.\./tileA|leave|outside|root"):
        read_layer_data(str(root))


def test_unknown_transformation_type_is_one_clear_error(tmp_path):
    write_image06(
        tmp_path / "u.zarr",
        np.zeros((8, 8), np.uint8),
        systems=[system("world", "yx")],
        transformations=[
            {"type": "warp", "input": {"name": "physical"}, "output": {"name": "world"}}
        ],
    )
    with pytest.raises(OzxError, match="warp"):
        read_layer_data(str(tmp_path / "u.zarr"))


def test_parameters_that_do_not_fit_are_one_clear_error(tmp_path):
    write_image06(
        tmp_path / "s.zarr",
        np.zeros((8, 8), np.uint8),
        systems=[system("world", "yx")],
        transformations=[
            {
                "type": "affine",
                "affine": [[1.0, 0.0], [0.0, 1.0]],
                "input": {"name": "physical"},
                "output": {"name": "world"},
            }
        ],
    )
    reports: list[OzxError] = []
    (ld,) = read_layer_data(str(tmp_path / "s.zarr"), report=lambda w, e: reports.append(e))
    assert len(reports) == 1 and "affine" in str(reports[0])
    _, (layer,) = _layers([ld])  # shown where it can be: its intrinsic system
    np.testing.assert_allclose(_world(layer, [(3, 4)]), [(3.0, 4.0)])


# --------------------------------------------------------------- SpatialData


def _sd_axes(names):
    return [{"name": n, "type": "channel" if n == "c" else "space"} for n in names]


def test_spatialdata_image_and_labels_elements_open_placed(tmp_path):
    """SpatialData 0.7 elements: "0.5-dev-spatialdata" with a multiscale-level scale in
    the 0.6-draft form (input / output objects with axes), from "cyx" to "global"."""
    import zarr

    root = tmp_path / "sd.zarr"
    img = np.arange(2 * 16 * 16, dtype=np.uint16).reshape(2, 16, 16)
    g = zarr.open_group(root / "images" / "raw", mode="w", zarr_format=3)
    g.create_array("0", data=img, chunks=(1, 16, 16), dimension_names=["c", "y", "x"])
    write_group(
        root / "images" / "raw",
        {
            "multiscales": [
                {
                    "axes": _sd_axes("cyx"),
                    "datasets": [
                        {
                            "path": "0",
                            "coordinateTransformations": [
                                {"type": "scale", "scale": [1.0, 1.0, 1.0]}
                            ],
                        }
                    ],
                    "coordinateTransformations": [
                        {
                            "type": "scale",
                            "scale": [1.0, 2.0, 3.0],
                            "input": {"name": "cyx", "axes": _sd_axes("cyx")},
                            "output": {"name": "global", "axes": _sd_axes("cyx")},
                        }
                    ],
                }
            ],
            "omero": {"channels": [{"label": "a"}, {"label": "b"}]},
        },
        version="0.5-dev-spatialdata",
    )
    lab = np.zeros((16, 16), np.uint32)
    lab[2:5, 2:5] = 7
    g = zarr.open_group(root / "labels" / "cells", mode="w", zarr_format=3)
    g.create_array("0", data=lab, chunks=(16, 16), dimension_names=["y", "x"])
    write_group(
        root / "labels" / "cells",
        {
            "image-label": {},
            "multiscales": [
                {
                    "axes": _sd_axes("yx"),
                    "datasets": [
                        {
                            "path": "0",
                            "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0]}],
                        }
                    ],
                    "coordinateTransformations": [
                        {
                            "type": "affine",
                            "affine": [[0.0, 2.0, 1.0], [2.0, 0.0, 0.0]],
                            "input": {"name": "yx", "axes": _sd_axes("yx")},
                            "output": {"name": "global", "axes": _sd_axes("yx")},
                        }
                    ],
                }
            ],
        },
        version="0.5-dev-spatialdata",
    )
    for container in ("", "images", "labels"):
        (root / container).mkdir(exist_ok=True)
        attrs = {"spatialdata_attrs": {"version": "0.2"}} if not container else {}
        (root / container / "zarr.json").write_text(
            json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
        )
    _, layers = _layers(read_layer_data(str(root / "images" / "raw")))
    assert [ly.name for ly in layers] == ["a", "b"]
    np.testing.assert_allclose(_world(layers[0], [(3, 4)]), [(6.0, 12.0)])
    np.testing.assert_array_equal(np.asarray(layers[1].data), img[1])
    _, (labels,) = _layers(read_layer_data(str(root / "labels" / "cells")))
    np.testing.assert_allclose(_world(labels, [(3, 4)]), [(9.0, 6.0)])
    assert int(np.asarray(labels.data).max()) == 7
    # the store's root: every image and labels element, each placed in "global"
    from napari_ozx._reader import get_reader

    lds = get_reader(str(root))(str(root))
    assert [k for _, _, k in lds] == ["image", "labels"]
    _, (_a, b, cells) = _layers(lds)
    np.testing.assert_allclose(_world(cells, [(3, 4)]), [(9.0, 6.0)])
    np.testing.assert_allclose(_world(b, [(3, 4)]), [(6.0, 12.0)])


# ------------------------------------------------------------- round trips


def _napari_layer(kind="image", **transform):
    from napari.components import ViewerModel

    vm = ViewerModel()
    data = (np.arange(40 * 50, dtype=np.uint16).reshape(40, 50) % 251).astype(np.uint16)
    add = vm.add_labels if kind == "labels" else vm.add_image
    layer = add(data.astype(np.uint32) if kind == "labels" else data, name="cells", **transform)
    return vm, layer


@pytest.mark.parametrize(
    "transform",
    [
        {"rotate": 25, "scale": (0.5, 0.25), "translate": (3.0, 4.0)},
        {"shear": [0.4], "scale": (2.0, 1.0)},
        {"affine": np.array([[0.0, 1.5, 2.0], [-1.0, 0.3, 5.0], [0.0, 0.0, 1.0]])},
        {"rotate": -40, "affine": np.array([[1.0, 0.0, 7.0], [0.0, 2.0, 0.0], [0, 0, 1]])},
    ],
    ids=["rotate", "shear", "affine", "rotate+affine"],
)
@pytest.mark.parametrize("target", ["x.ozx", "x.ome.zarr"])
def test_transformed_layer_saved_and_reopened_is_where_it_was(tmp_path, transform, target):
    """A napari layer rotated / sheared / with an affine, saved by napari-ozx with napari's
    own save (default writer: version auto), reopened: every pixel where it was."""
    import npe2

    npe2.PluginManager.instance().discover()  # napari's Viewer does this at start-up
    vm, layer = _napari_layer(**transform)
    points = [(20, 31), (0, 0), (39, 49), (7, 3)]
    before = _world(layer, points)
    assert vm.layers.save(str(tmp_path / target), plugin="napari-ozx")
    lds = read_layer_data(str(tmp_path / target))
    _, (back,) = _layers(lds)
    np.testing.assert_allclose(_world(back, points), before, atol=1e-6)
    np.testing.assert_array_equal(_level0(back), layer.data)
    if target.endswith(".ozx"):
        with zipfile.ZipFile(tmp_path / target) as z:
            assert json.loads(z.comment)["ome"]["version"] == "0.6"


def test_rotated_labels_round_trip(tmp_path):
    _vm, layer = _napari_layer("labels", rotate=90, translate=(1.0, 2.0))
    points = [(20, 31), (0, 0)]
    before = _world(layer, points)
    write_layer_data(tmp_path / "l.ozx", [layer.as_layer_data_tuple()])
    _, (back,) = _layers(read_layer_data(str(tmp_path / "l.ozx")))
    np.testing.assert_allclose(_world(back, points), before, atol=1e-6)


def test_plain_layer_still_writes_05(tmp_path):
    """version auto writes 0.5 unless a transform needs 0.6: most files stay readable
    by every 0.5 reader."""
    _vm, layer = _napari_layer(scale=(0.5, 0.5), translate=(1.0, 1.0))
    write_layer_data(tmp_path / "p.ozx", [layer.as_layer_data_tuple()])
    with zipfile.ZipFile(tmp_path / "p.ozx") as z:
        assert json.loads(z.comment)["ome"]["version"] == "0.5"
        assert json.loads(z.read("zarr.json"))["attributes"]["ome"]["version"] == "0.5"


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_save_to_05_or_04_refuses_a_rotation_and_names_it(tmp_path, version):
    _vm, layer = _napari_layer(rotate=25)
    target = tmp_path / "r.ome.zarr"
    with pytest.raises(OzxError, match=rf"OME-Zarr {version} cannot store the rotation.*cells"):
        write_layer_data(target, [layer.as_layer_data_tuple()], WriteOptions(version=version))
    assert list(tmp_path.iterdir()) == []


def test_06_written_is_read_by_ngff_zarr(tmp_path):
    """What we write as 0.6 reads back with another implementation (ngff-zarr 0.50)."""
    nz = pytest.importorskip("ngff_zarr")
    _vm, layer = _napari_layer(rotate=25, scale=(0.5, 0.25))
    write_layer_data(tmp_path / "r.ome.zarr", [layer.as_layer_data_tuple()])
    peer_in_process("ngff-zarr reading")
    ms = nz.from_ngff_zarr(str(tmp_path / "r.ome.zarr"))
    np.testing.assert_array_equal(np.asarray(ms.images[0].data), layer.data)


# ------------------------------------------------------------------ plates


def test_plate_in_06_opens(tmp_path):
    """'plate' / 'well' in 0.6: the same shapes under {"ome": {"version": "0.6"}}; the
    fields are 0.6 multiscale images."""
    root = tmp_path / "plate.zarr"
    wells = [("A", "1"), ("B", "2")]
    write_group(
        root,
        {
            "plate": {
                "rows": [{"name": "A"}, {"name": "B"}],
                "columns": [{"name": "1"}, {"name": "2"}],
                "wells": [
                    {"path": f"{r}/{c}", "rowIndex": "AB".index(r), "columnIndex": int(c) - 1}
                    for r, c in wells
                ],
                "field_count": 1,
            }
        },
    )
    for r, c in wells:
        write_group(root / r, {})
        write_group(root / r / c, {"well": {"images": [{"path": "0"}]}})
        write_image06(root / r / c / "0", np.full((16, 16), ord(r), np.uint8), scale=[1.0, 1.0])
    lds = read_layer_data(str(root))
    kinds = [k for _, _, k in lds]
    assert kinds[0] == "image" and "points" in kinds
    overview = lds[0][0]
    level = overview[-1] if isinstance(overview, list) else overview
    assert np.asarray(level).max() == ord("B")


def test_layers_placed_differently_saved_together_become_a_scene(tmp_path):
    """'scene': layers with different transforms saved together are an OME-Zarr 0.6
    scene (one image each, placed in "world" by the scene's transformations); reopened,
    every layer is where it was. A 0.5 save of them is refused, saying why."""
    import npe2
    from napari.components import ViewerModel

    npe2.PluginManager.instance().discover()
    vm = ViewerModel()
    a = np.arange(40 * 50, dtype=np.uint16).reshape(40, 50)
    la = vm.add_image(a, name="tileA", translate=(0.0, 60.0))
    lb = vm.add_image(a[:30, :20].copy(), name="tileB", rotate=30, scale=(2.0, 2.0))
    lab = vm.add_labels((a > 1000).astype(np.uint8), name="cells", translate=(0.0, 60.0))
    before = {ly.name: _world(ly, PIXELS[:2]) for ly in (la, lb, lab)}
    for target in ("s.ozx", "s.ome.zarr"):
        assert vm.layers.save(str(tmp_path / target), plugin="napari-ozx")
        lds = read_layer_data(str(tmp_path / target))
        _, layers = _layers(lds)
        assert sorted(ly.name for ly in layers) == ["cells", "tileA", "tileB"]
        for ly in layers:
            np.testing.assert_allclose(_world(ly, PIXELS[:2]), before[ly.name], atol=1e-6)
    with pytest.raises(OzxError, match="no scenes"):
        write_layer_data(
            tmp_path / "s05.ozx",
            [ly.as_layer_data_tuple() for ly in (la, lb)],
            WriteOptions(version="0.5"),
        )
