"""Tables next to images: the Fractal / ngio table specification
V1 as ngio 1.1.3 itself writes it (every backend, Zarr v2 and v3, directories and .ozx),
SpatialData tables, hand-broken tables, the ROI -> pixel mapping checked against ngio's
own, the napari layer data, the CLI listing and the validator's table warnings.

The files are written in the test session by ``tests/_support/tablegen.py`` (ngio is pinned in the
testing extra); tests that need ngio skip when it is not importable.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import napari_ozx
from napari_ozx.errors import OzxError, TableError
from napari_ozx.layers.reading import read_layer_data, table_layer_data
from napari_ozx.layers.tables import TABLE_KEY, TABLES_KEY, zoom_to_roi
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.tables.read import (
    list_tables,
    read_table,
    roi_pixel_boxes,
    roi_world_boxes,
    spatialdata_tables,
)
from tests._support import tablegen as tg
from tests._support.omegen import write_image, zip_dir

NGIO = "ngio (pinned in the testing extra) is not installed: no ngio-written tables to read"


def _ngio() -> None:
    pytest.importorskip("ngio", reason=NGIO)


@pytest.fixture(scope="module")
def ngio_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same image written by ngio as OME-Zarr 0.4 (Zarr v2) and 0.5 (Zarr v3), and the
    0.5 directory zipped into an .ozx."""
    _ngio()
    root = tmp_path_factory.mktemp("ngio")
    v2 = tg.write_ngio_image(root / "img04.zarr", "0.4")
    v3 = tg.write_ngio_image(root / "img05.zarr", "0.5", 60)  # 60 extra ROIs
    ozx = zip_dir(v3.path, root / "img05.ozx")
    return {"v2": v2, "v3": v3, "ozx": ozx}


FLAVOURS = ["v2", "v3", "ozx"]


def _path(files: dict[str, Any], flavour: str) -> str:
    f = files[flavour]
    return str(f if isinstance(f, Path) else f.path)


def _reference(files: dict[str, Any], flavour: str) -> tg.NgioImage:
    """The directory ngio wrote (and reads back) for a flavour."""
    return files["v2" if flavour == "v2" else "v3"]


def _reports(path: str) -> tuple[list[Any], list[tuple[str, OzxError]]]:
    got: list[tuple[str, OzxError]] = []
    lds = read_layer_data(path, report=lambda what, err: got.append((what, err)))
    return lds, got


@functools.cache
def _ngio_frames(path: Path) -> dict[str, Any]:
    """Every table of *path* as ngio reads it (read once per image)."""
    names = tuple(f"{k}_{b}" for k in ("fov", "nuclei_roi", "feat", "cond") for b in tg.BACKENDS)
    return tg.ngio_dataframes(path, names)


@functools.cache
def _ngio_rois(path: Path) -> dict[str, dict[str, np.ndarray]]:
    return tg.ngio_roi_pixels(path, ("fov_anndata", "fov_csv", "nuclei_roi_parquet"))


# ----------------------------------------------------------------------- discovery


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_table_is_listed_with_its_type_backend_and_region(ngio_files, flavour):
    ref = _reference(ngio_files, flavour)
    infos = {i.name: i for i in list_tables(_path(ngio_files, flavour))}
    expected = {n: t for n, t in ref.tables.items() if flavour != "v2" or n != "many"}
    assert {n: (i.type, i.backend) for n, i in infos.items()} == expected
    for be in tg.BACKENDS:
        fov, masking = infos[f"fov_{be}"], infos[f"nuclei_roi_{be}"]
        feat, cond = infos[f"feat_{be}"], infos[f"cond_{be}"]
        assert all(i.error is None and i.version == "1" for i in (fov, masking, feat, cond))
        assert fov.region is None and masking.region == "nuclei" and feat.region == "nuclei"
        assert masking.instance_key == "label" and feat.instance_key == "label"
        assert fov.rows == 4 and masking.rows == 3 and feat.rows == 3 and cond.rows == 2
        assert {"x_micrometer", "len_y_micrometer", "x_micrometer_original"} <= set(fov.columns)
        assert set(feat.columns) == {"area", "kind", "n_neighbours"}
        assert fov.small() and feat.small()


def test_an_image_without_tables_lists_none(tmp_path):
    write_image(tmp_path / "plain.zarr", np.zeros((8, 8), np.uint8), axes="yx")
    assert list_tables(str(tmp_path / "plain.zarr")) == []


# ------------------------------------------------------------------------- reading


def _same(ours: np.ndarray, theirs: Any) -> None:
    theirs = np.asarray(theirs)
    if ours.dtype.kind == "f" or theirs.dtype.kind == "f":
        np.testing.assert_allclose(ours.astype(float), theirs.astype(float), equal_nan=True)
    else:
        assert [str(v) for v in ours] == [str(v) for v in theirs]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("kind", ["fov", "nuclei_roi", "feat", "cond"])
@pytest.mark.parametrize("backend", tg.BACKENDS)
def test_every_backend_reads_what_ngio_reads(ngio_files, flavour, kind, backend):
    """Each table, read directly (no anndata, no pandas), equals ngio's own DataFrame of
    the same table: index, column names and values."""
    name = f"{kind}_{backend}"
    ours = read_table(_path(ngio_files, flavour), name)
    theirs = _ngio_frames(_reference(ngio_files, flavour).path)[name]
    assert set(ours.columns) == set(theirs.columns)
    if kind != "cond":  # a condition table has no index key: ngio's is its row numbers
        _same(ours.index, theirs.index)
    for col in theirs.columns:
        _same(ours.columns[col], theirs[col])


def test_csv_loses_zero_padding_as_ngio_does(ngio_files):
    path = _path(ngio_files, "v3")
    assert read_table(path, "cond_csv").columns["column"].tolist() == [5, 12]
    for be in ("anndata", "parquet", "json"):
        assert read_table(path, f"cond_{be}").columns["column"].tolist() == ["05", "12"]


def test_to_pandas_and_a_column_subset(ngio_files):
    t = read_table(_path(ngio_files, "v3"), "feat_anndata", columns=["area"])
    assert list(t.columns) == ["area"]
    df = t.to_pandas()
    assert df.index.name == "label" and df["area"].tolist() == [200.0, 1800.0, 320.0]


# -------------------------------------------------------------------------- ROIs


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("name", ["fov_anndata", "fov_csv", "nuclei_roi_parquet"])
def test_roi_boxes_are_the_pixels_ngio_reads(ngio_files, flavour, name):
    """ngio's ``Image.get_roi`` of every ROI returns exactly level 0 sliced by our box:
    array-origin micrometres / pixel size, ngio's 1 % rounding, floor / ceil, clipping,
    z missing from a ROI, the image's translation ignored."""
    ref = _reference(ngio_files, flavour)
    expected = _ngio_rois(ref.path)[name]
    with open_ome_zarr(_path(ngio_files, flavour)) as oz:
        (image,) = oz.images()
        table = read_table(oz, name)
        ms = image.multiscale
        boxes = roi_pixel_boxes(table, ms.axis_names, ms.datasets[0].scale, image.levels[0].shape)
    assert [str(n) for n in boxes.names] == list(expected)
    for i, roi in enumerate(expected):
        np.testing.assert_array_equal(ref.image[boxes.slices(i)], expected[roi], err_msg=roi)
    if name.startswith("fov"):  # the ROIs of tablegen.rois(), by hand
        by = dict(zip(boxes.names, zip(boxes.start.tolist(), boxes.stop.tolist())))
        assert by["FOV_1"] == ([0, 0, 0, 0], [2, 4, 48, 60])
        assert by["FOV_2"] == ([0, 0, 48, 60], [2, 1, 96, 120])  # no z: 0 / 1 um
        assert by["rounded"] == ([0, 1, 8, 20], [2, 3, 15, 32])
        assert by["outside"] == ([0, 0, 0, 107], [2, 1, 11, 120])


def test_world_boxes_add_scale_and_translation(ngio_files):
    with open_ome_zarr(_path(ngio_files, "v3")) as oz:
        (image,) = oz.images()
        ds0 = image.multiscale.datasets[0]
        boxes = roi_pixel_boxes(read_table(oz, "fov_json"), image.multiscale.axis_names, ds0.scale)
        lo, hi = roi_world_boxes(boxes, ds0.scale, ds0.translation)
    np.testing.assert_allclose(lo[0], [0.0, 3.0, 10.0, -5.0])  # FOV_1 starts at the origin
    # (no shape given: an axis without ROI columns, here c, is 0..1)
    np.testing.assert_allclose(hi[0], [1.0, 3.0 + 4 * 1.5, 10.0 + 48 * 0.65, -5.0 + 60 * 0.65])


def test_roi_without_x_columns_is_a_table_error(ngio_files):
    t = read_table(_path(ngio_files, "v3"), "cond_json")
    with pytest.raises(TableError, match=r"_micrometer.* missing"):
        roi_pixel_boxes(t, ("y", "x"), (1.0, 1.0))


# ------------------------------------------------------------------ napari layers


def _by_name(lds: list[Any]) -> dict[str, Any]:
    out = {}
    for data, kw, kind in lds:
        names = kw["name"] if isinstance(kw["name"], list) else [kw["name"]]
        for n in names:
            out[n] = (data, kw, kind)
    return out


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_reader_gives_roi_shapes_and_labels_features(ngio_files, flavour):
    path = _path(ngio_files, flavour)
    lds, reports = _reports(path)
    assert reports == []
    layers = _by_name(lds)
    for be in tg.BACKENDS:
        data, kw, kind = layers[f"fov_{be}"]
        assert kind == "shapes" and kw["shape_type"] == "rectangle" and len(data) == 4
        assert list(kw["features"]["name"]) == ["FOV_1", "FOV_2", "rounded", "outside"]
        np.testing.assert_allclose(kw["features"]["x_micrometer_original"][:2], [-1448.3, -1409.3])
        assert kw["visible"] and kw["face_color"] == "transparent"
        assert kw["scale"] == (0.65, 0.65) and kw["translate"] == (10.0, -5.0)
        assert kw["metadata"][TABLE_KEY]["table"] == f"fov_{be}"
        data, kw, kind = layers[f"nuclei_roi_{be}"]
        assert list(kw["features"]["label"]) == [1, 2, 3]
    _, kw, kind = layers["nuclei"]
    assert kind == "labels"
    assert list(kw["features"]["index"]) == [1, 2, 3]
    assert list(kw["features"]["area"]) == [200.0, 1800.0, 320.0]
    assert list(kw["features"]["kind"]) == ["round", "long", "edge"]
    image_meta = layers["channel_0"][1]["metadata"][0]
    listed = {t["name"]: t["read"] for t in image_meta[TABLES_KEY]}
    assert listed["fov_anndata"] and listed["feat_csv"] and not listed["cond_json"]
    if flavour != "v2":
        data, kw, _ = layers["many"]
        assert len(data) == 60 and kw["visible"] is False and "text" not in kw


def test_labels_coloured_by_a_feature_column_in_one_call(ngio_files):
    """color_labels_by: each object the colormap's colour of its measurement (scaled to
    the column's range), text columns one colour per category, objects the table does
    not list grey, the background transparent; an unknown column is one clear error."""
    from napari.components import ViewerModel
    from napari.utils.colormaps import ensure_colormap

    lds = read_layer_data(_path(ngio_files, "v3"))
    vm = ViewerModel()
    for data, kw, kind in lds:
        getattr(vm, f"add_{kind}")(data, **kw)
    nuclei = vm.layers["nuclei"]
    colours = napari_ozx.color_labels_by(nuclei, "area")  # 200, 1800, 320
    viridis = ensure_colormap("viridis")
    np.testing.assert_allclose(colours[1], viridis.map([0.0])[0])
    np.testing.assert_allclose(colours[2], viridis.map([1.0])[0])
    np.testing.assert_allclose(colours[3], viridis.map([120 / 1600])[0])
    np.testing.assert_allclose(nuclei.colormap.map(np.array([2]))[0], colours[2], atol=1e-6)
    np.testing.assert_allclose(nuclei.colormap.map(np.array([0]))[0][3], 0.0)
    np.testing.assert_allclose(nuclei.colormap.map(np.array([9]))[0], [0.5, 0.5, 0.5, 1.0])
    kinds = napari_ozx.color_labels_by(nuclei, "kind", "turbo")  # round, long, edge
    assert len({kinds[1], kinds[2], kinds[3]}) == 3
    with pytest.raises(OzxError, match="no feature 'volume'"):
        napari_ozx.color_labels_by(nuclei, "volume")


def test_rectangles_outline_the_roi_pixels_in_napari(ngio_files):
    """In a napari viewer, each rectangle's world box is the world box of its pixels of
    the image layer (placed with its translation)."""
    from napari.components import ViewerModel

    lds = read_layer_data(_path(ngio_files, "v3"))
    vm = ViewerModel()
    for data, kw, kind in lds:
        getattr(vm, f"add_{kind}")(data, **kw)
    image, shapes = vm.layers["channel_0"], vm.layers["nuclei_roi_anndata"]
    with open_ome_zarr(_path(ngio_files, "v3")) as oz:
        (img,) = oz.images()
        ms = img.multiscale
        boxes = roi_pixel_boxes(
            read_table(oz, "nuclei_roi_anndata"), ms.axis_names, ms.datasets[0].scale
        )
    for i in range(len(boxes)):
        corners = np.array([shapes.data_to_world(v) for v in shapes.data[i]])
        z, y, x = 1, 2, 3
        lo = image.data_to_world([0, boxes.start[i, y] - 0.5, boxes.start[i, x] - 0.5])[1:]
        hi = image.data_to_world([0, boxes.stop[i, y] - 0.5, boxes.stop[i, x] - 0.5])[1:]
        np.testing.assert_allclose(corners.min(axis=0), lo)
        np.testing.assert_allclose(corners.max(axis=0), hi)
        assert boxes.stop[i, z] > boxes.start[i, z]
    # the labels the masking table boxes: each box is its label's bounding box
    labels = _reference(ngio_files, "v3").labels
    for i, value in enumerate(boxes.names):
        zz, yy, xx = np.nonzero(labels == int(value))
        assert boxes.start[i, 1:].tolist() == [zz.min(), yy.min(), xx.min()]
        assert boxes.stop[i, 1:].tolist() == [zz.max() + 1, yy.max() + 1, xx.max() + 1]


def test_zoom_to_roi_centres_zooms_and_steps_z(ngio_files):
    from napari.components import ViewerModel

    vm = ViewerModel()
    for data, kw, kind in read_layer_data(_path(ngio_files, "v3")):
        getattr(vm, f"add_{kind}")(data, **kw)
    shapes = vm.layers["nuclei_roi_json"]
    zoom_to_roi(vm, shapes, "2")  # label 2: z 1..3, y 30..49, x 40..69
    assert vm.dims.point[0] == pytest.approx(3.0 + 2 * 1.5)  # z: its middle plane, 2
    centre = vm.camera.center[-2:]
    assert centre == pytest.approx((10.0 + 39.5 * 0.65, -5.0 + 54.5 * 0.65))
    assert shapes.selected_data == {1}
    with pytest.raises(OzxError, match="no ROI named"):
        zoom_to_roi(vm, shapes, "nope")


def test_a_huge_table_is_listed_not_read_at_open(ngio_files, tmp_path, store_reads):
    """A 10^6-row feature table: listed from its metadata, its columns never read when
    the image opens; read when asked for."""
    path = tmp_path / "big.zarr"
    shutil.copytree(_reference(ngio_files, "v3").path, path)
    tg.write_big_feature_table(path, 10**6)
    store_reads.clear()
    lds, reports = _reports(str(path))
    assert reports == []
    big = [k for k in store_reads if "tables/big/" in k]
    assert big and all(k.rsplit("/", 1)[-1] == "zarr.json" or "/var/" in k for k in big), big
    image_meta = _by_name(lds)["channel_0"][1]["metadata"][0]
    (entry,) = [t for t in image_meta[TABLES_KEY] if t["name"] == "big"]
    assert entry["rows"] == 10**6 and entry["read"] is False
    assert read_table(str(path), "big", columns=["area"]).columns["area"][-1] == 10**6 * 0.5
    with pytest.raises(TableError, match="more than"):
        read_table(str(path), "big", max_bytes=1 << 20)


def test_a_large_roi_table_opens_on_demand(ngio_files, monkeypatch):
    from napari_ozx.ngff.tables import read as tables

    monkeypatch.setattr(tables, "OPEN_MAX_ROWS", 2)
    path = _path(ngio_files, "v3")
    assert "fov_anndata" not in _by_name(read_layer_data(path))
    data, kw, kind = table_layer_data(path, "fov_anndata")
    assert kind == "shapes" and len(data) == 4 and kw["name"] == "fov_anndata"
    with pytest.raises(TableError, match="no ROI table"):
        table_layer_data(path, "feat_json")


# ------------------------------------------------------------------ cost at open


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_an_image_without_tables_costs_one_missing_lookup(
    tmp_path, store_reads, monkeypatch, version
):
    """Opening an image without tables reads exactly one key more than the same open
    without the tables hook: the tables group's document (absent)."""
    import napari_ozx.layers.tables as lt

    path = tmp_path / "plain.zarr"
    write_image(path, np.zeros((2, 16, 16), np.uint8), axes="cyx", version=version)
    store_reads.clear()
    read_layer_data(str(path))
    with_tables = list(store_reads)
    monkeypatch.setattr(lt, "image_table_layers", lambda *a, **k: [])
    store_reads.clear()
    read_layer_data(str(path))
    extra = sorted(set(with_tables) - set(store_reads))
    assert extra == (["tables/zarr.json"] if version == "0.5" else ["tables/.zattrs"])
    assert len(with_tables) == len(store_reads) + 1


def test_importing_the_table_modules_imports_no_pyarrow_or_pandas():
    code = (
        "import sys\n"
        "import napari_ozx.ngff.tables.read, napari_ozx.layers.tables\n"
        "print(','.join(m for m in ('pyarrow', 'pandas', 'anndata', 'polars') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_reading_anndata_and_json_tables_imports_no_pyarrow(ngio_files):
    code = (
        "import sys\n"
        "from napari_ozx.ngff.tables.read import read_table\n"
        f"read_table({_path(ngio_files, 'v3')!r}, 'feat_anndata')\n"
        f"read_table({_path(ngio_files, 'v3')!r}, 'fov_json')\n"
        "print(','.join(m for m in ('pyarrow', 'pandas', 'anndata') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_parquet_without_pyarrow_says_which_extra(ngio_files, monkeypatch):
    for mod in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, mod, None)
    path = _path(ngio_files, "v3")
    infos = {i.name: i for i in list_tables(path)}
    assert "napari-ozx[tables]" in str(infos["fov_parquet"].error)
    with pytest.raises(TableError, match=r"napari-ozx\[tables\]") as e:
        read_table(path, "fov_parquet")
    assert "napari-ozx[tables]" in str(e.value) and "fov_parquet" in str(e.value)
    lds, reports = _reports(path)
    parquet = [str(err) for _, err in reports if "parquet" in str(err)]
    assert len(parquet) == 4 and all("napari-ozx[tables]" in m for m in parquet)  # one each
    assert "fov_anndata" in _by_name(lds)


# ------------------------------------------------------------------ broken tables


def _attrs_path(table_dir: Path) -> Path:
    return table_dir / "zarr.json"


def _edit_attrs(table_dir: Path, change: Any) -> None:
    p = _attrs_path(table_dir)
    doc = json.loads(p.read_text())
    change(doc["attributes"])
    p.write_text(json.dumps(doc))


def _chunk(array: Path) -> Path:
    return next(p for p in sorted(array.rglob("*")) if p.is_file() and p.name != "zarr.json")


def _cut_last_line(path: Path) -> None:
    """A csv cut short inside its last line (a write that stopped half way)."""
    lines = path.read_text().splitlines()
    lines[-1] = lines[-1][: lines[-1].index(",")]
    path.write_text("\n".join(lines))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


BROKEN = {
    # name: (how it is broken, what the one message says)
    "fov_json": (
        lambda t: _edit_attrs(t / "table", lambda a: a.pop("len_x_micrometer")),
        "ROI columns missing: len_x_micrometer",
    ),
    "fov_anndata": (lambda t: _edit_attrs(t, lambda a: a.update(type=42)), "type 42"),
    "fov_csv": (lambda t: _edit_attrs(t, lambda a: a.update(backend="hdf5")), "unknown backend"),
    "feat_anndata": (lambda t: _truncate(_chunk(t / "X")), "cannot be read"),
    "feat_parquet": (lambda t: _truncate(t / "table.parquet"), "table.parquet"),
    "nuclei_roi_csv": (lambda t: _cut_last_line(t / "table.csv"), "fields"),
    "nuclei_roi_anndata": (lambda t: shutil.rmtree(t / "obs" / "label"), "obs index"),
    "feat_json": (lambda t: shutil.rmtree(t), "no such group"),
}


@pytest.fixture(scope="module")
def broken(ngio_files, tmp_path_factory):
    root = tmp_path_factory.mktemp("broken")
    path = root / "broken.zarr"
    shutil.copytree(ngio_files["v3"].path, path)
    for name, (breaks, _msg) in BROKEN.items():
        breaks(path / "tables" / name)
    return path


def test_each_broken_table_is_one_message_and_the_image_opens(broken):
    lds, reports = _reports(str(broken))
    layers = _by_name(lds)
    assert "channel_0" in layers and "nuclei" in layers and "fov_parquet" in layers
    messages = [str(err) for _, err in reports]
    assert all(isinstance(err, TableError) for _, err in reports)
    for name, (_breaks, expected) in BROKEN.items():
        mine = [m for m in messages if f"table {name!r}" in m]
        assert len(mine) == 1, (name, messages)
        assert expected in mine[0], (name, mine[0])
        assert mine[0].index(expected) < mine[0].index(f"table {name!r}")  # reason first
        assert name not in layers
    assert len(reports) == len(BROKEN)
    # the other backends of the broken tables still give their layers and features
    assert list(layers["nuclei"][1]["features"]["index"]) == [1, 2, 3]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_read_table_of_a_broken_table_raises_one_table_error(broken, name):
    with pytest.raises(TableError) as e:
        read_table(str(broken), name)
    assert f"table {name!r}" in str(e.value) and BROKEN[name][1] in str(e.value)


def test_a_malformed_tables_list_is_one_message(ngio_files, tmp_path):
    path = tmp_path / "badlist.zarr"
    shutil.copytree(ngio_files["v3"].path, path)
    _edit_attrs(path / "tables", lambda a: a.update(tables="fov_json"))
    lds, reports = _reports(str(path))
    assert len(reports) == 1 and "not a list of names" in str(reports[0][1])
    assert "channel_0" in _by_name(lds)


def test_an_unknown_table_name_is_a_table_error(ngio_files):
    with pytest.raises(TableError, match="no such table"):
        read_table(_path(ngio_files, "v3"), "nope")


# --------------------------------------------------------------------- SpatialData


@pytest.mark.parametrize("attrs_in", ["group", "uns"])
def test_spatialdata_table_gives_each_element_its_own_rows(tmp_path, attrs_in):
    """One AnnData table annotating labels elements a and b whose instance ids overlap
    (1, 2 in both): each element's features are its own rows only."""
    pytest.importorskip("anndata", reason="anndata (with ngio in the testing extra) writes it")
    path = tmp_path / "sd.zarr"
    expected = tg.write_spatialdata(path, attrs_in)
    (info,) = spatialdata_tables(str(path))
    assert info.regions == ("a", "b", "c") and info.region_key == "region"
    assert info.instance_key == "cell_id" and info.rows == 5 and info.error is None
    lds, reports = _reports(str(path))
    assert reports == []
    layers = _by_name(lds)
    for element, areas in expected.items():
        _, kw, kind = layers[element]
        feats = kw["features"]
        assert kind == "labels"
        assert list(feats["index"]) == list(areas)
        assert list(feats["area"]) == list(areas.values())
        assert "region" not in feats and "cell_id" not in feats
    assert list(layers["a"][1]["features"]["kind"]) == ["x", "z"]
    table = read_table(str(path), "table")
    assert table.for_region("b").index.tolist() == ["r1", "r3"]


# ---------------------------------------------------------------- CLI and validate


def test_info_lists_every_table_with_its_type(ngio_files, capsys):
    from napari_ozx.__main__ import main

    path = _path(ngio_files, "ozx")
    assert main(["info", "--json", path]) == 0
    report = json.loads(capsys.readouterr().out)
    tables = {t["name"]: t for t in report["images"][0]["tables"]}
    assert {n: (t["type"], t["backend"]) for n, t in tables.items()} == ngio_files["v3"].tables
    assert tables["feat_parquet"]["region"] == "nuclei" and tables["fov_csv"]["rows"] == 4
    assert main(["info", path]) == 0
    text = capsys.readouterr().out
    assert "table feat_csv: feature_table, csv, 3 rows, 3 columns, region nuclei" in text


def test_info_shows_a_broken_table_and_spatialdata_tables(broken, tmp_path, capsys):
    from napari_ozx.__main__ import main

    assert main(["info", str(broken)]) == 0  # a table is not the image's problem
    text = capsys.readouterr().out
    assert "table fov_csv: cannot be read: unknown backend 'hdf5'" in text
    pytest.importorskip("anndata", reason="anndata writes the SpatialData table")
    sd = tmp_path / "sd.zarr"
    tg.write_spatialdata(sd)
    main(["info", "--json", str(sd)])
    (table,) = json.loads(capsys.readouterr().out)["tables"]
    assert table["regions"] == ["a", "b", "c"] and table["origin"] == "spatialdata"


def test_validate_warns_by_the_v1_specification(ngio_files, tmp_path):
    from napari_ozx.ngff.validate.rules import RULES
    from napari_ozx.ngff.validate.walk import validate_ome

    assert not [f for f in validate_ome(_path(ngio_files, "v3")) if f.code.startswith("table")]
    path = tmp_path / "rules.zarr"
    shutil.copytree(ngio_files["v3"].path, path)
    t = path / "tables"
    _edit_attrs(t / "fov_json" / "table", lambda a: a.pop("z_micrometer"))
    _edit_attrs(t / "nuclei_roi_json", lambda a: [a.pop("region"), a.pop("instance_key")])
    _edit_attrs(t / "feat_json", lambda a: a.update(table_version="2"))
    _edit_attrs(t / "cond_json", lambda a: a.update(type="drug_table"))
    _edit_attrs(t, lambda a: a["tables"].append("ghost"))
    found = {(f.code, f.node) for f in validate_ome(str(path)) if f.code.startswith("table")}
    assert found == {
        ("table-roi-columns", "tables/fov_json"),
        ("table-region", "tables/nuclei_roi_json"),
        ("table-instance-key", "tables/nuclei_roi_json"),
        ("table-version", "tables/feat_json"),
        ("table-type", "tables/cond_json"),
        ("table-missing", "tables"),
    }
    for f in validate_ome(str(path)):
        if f.code.startswith("table"):
            assert f.severity == "warning" and f.rule == RULES[f.code].text
    assert "len_z_micrometer" in RULES["table-roi-columns"].text


def test_validate_names_broken_tables(broken):
    from napari_ozx.ngff.validate.walk import validate_ome

    found = {(f.code, f.node) for f in validate_ome(str(broken)) if f.code.startswith("table")}
    assert {
        ("table-missing", "tables"),
        ("table-type", "tables/fov_anndata"),
        ("table-backend", "tables/fov_csv"),
        ("table-roi-columns", "tables/fov_json"),
        ("table-unreadable", "tables/nuclei_roi_anndata"),
        ("table-unreadable", "tables/feat_parquet"),
    } <= found
    assert ("table-unreadable", "tables/fov_anndata") not in found  # said once, as its type
