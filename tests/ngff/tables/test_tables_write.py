"""Tables written: a Shapes layer saved as a ROI table that ngio
1.1.3 reads back with the same boxes, and ``convert`` carrying every table (the 4 table
types x 4 backends ngio writes, a plate's own and its fields') directory <-> ``.ozx``,
0.4 (Zarr v2) <-> 0.5 (Zarr v3).

The files are written by ngio in the test session (``tests/_support/tablegen.py``,
``tests/_support/plate_tablegen.py``); tests skip when ngio is not installed.
"""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.tables.read import list_tables, read_table
from napari_ozx.ngff.write.convert import convert_summary
from napari_ozx.ngff.write.options import WriteOptions
from tests._support import tablegen as tg
from tests._support.omegen import zip_dir
from tests._support.viewermodel import open_in_viewer_model

NGIO = "ngio (pinned in the testing extra) is not installed: no ngio-written tables"
TABLES = tuple(f"{k}_{b}" for k in ("fov", "nuclei_roi", "feat", "cond") for b in tg.BACKENDS)
#: the tables ngio 1.1.3 reads from a zip store (its parquet / csv backends do not)
_ZIPPABLE = tuple(n for n in TABLES if n.endswith(("_anndata", "_json")))


@pytest.fixture(scope="module")
def ngio_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tg.NgioImage]:
    """The same image with 16 tables written by ngio as 0.4 (Zarr v2) and 0.5 (Zarr v3)."""
    pytest.importorskip("ngio", reason=NGIO)
    root = tmp_path_factory.mktemp("ngio_write")
    return {
        "v04": tg.write_ngio_image(root / "img04.zarr", "0.4"),
        "v05": tg.write_ngio_image(root / "img05.zarr", "0.5"),
    }


def _copy(ngio_dirs: dict[str, tg.NgioImage], flavour: str, tmp_path: Path) -> Path:
    """A private copy of a fixture: ``v04`` / ``v05`` directories, ``ozx`` (0.5 zipped)."""
    src = ngio_dirs["v04" if flavour == "v04" else "v05"].path
    out = tmp_path / src.name
    shutil.copytree(src, out)
    if flavour == "ozx":
        return zip_dir(out, tmp_path / "img05.ozx")
    return out


def _members(path: Path) -> dict[str, bytes]:
    """Every key of a directory or an ``.ozx`` and its bytes."""
    if path.is_dir():
        return {
            str(p.relative_to(path)).replace("\\", "/"): p.read_bytes()
            for p in path.rglob("*")
            if p.is_file()
        }
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}


def _validate_cli(path: Path) -> int:
    from napari_ozx.__main__ import main

    return main(["validate", str(path)])


def _same_tables(a: Path, b: Path, image: str = "") -> int:
    """*a* and *b* list the same tables (name, type, backend, columns, region) and read
    the same index and values; returns how many."""
    ta = {t.name: t for t in list_tables(str(a), image)}
    tb = {t.name: t for t in list_tables(str(b), image)}
    assert list(ta) == list(tb)
    for name, x in ta.items():
        y = tb[name]
        assert x.error is None and y.error is None, (name, x.error, y.error)
        assert (x.type, x.backend, x.columns, x.regions, x.rows) == (
            y.type,
            y.backend,
            y.columns,
            y.regions,
            y.rows,
        ), name
        da, db = read_table(str(a), name, image), read_table(str(b), name, image)
        assert [str(v) for v in da.index] == [str(v) for v in db.index], name
        assert list(da.columns) == list(db.columns), name
        for col, va in da.columns.items():
            vb = db.columns[col]
            assert va.dtype.kind == vb.dtype.kind, (name, col, va.dtype, vb.dtype)
            if va.dtype.kind == "f":
                np.testing.assert_array_equal(va, vb)
            else:
                assert [str(v) for v in va] == [str(v) for v in vb], (name, col)
    return len(ta)


# ---------------------------------------------------------------- convert keeps tables

# each chain: the source fixture, then (suffix, OME-Zarr version) of every step
CHAINS = {
    "dir05-ozx-dir": ("v05", [(".ozx", None), (".zarr", None)]),
    "dir04-dir05-ozx": ("v04", [(".zarr", "0.5"), (".ozx", "0.5")]),
    "dir05-dir04": ("v05", [(".zarr", "0.4")]),
    "ozx-dir04": ("ozx", [(".zarr", "0.4")]),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_convert_keeps_every_table(chain, ngio_dirs, tmp_path):
    flavour, steps = CHAINS[chain]
    source = _copy(ngio_dirs, flavour, tmp_path / "src")
    reference = ngio_dirs["v04" if flavour == "v04" else "v05"]
    frames = tg.ngio_dataframes(reference.path, TABLES)
    previous = source
    for i, (suffix, version) in enumerate(steps):
        target = tmp_path / f"step{i}{suffix}"
        opts = WriteOptions(version=version) if version else None
        summary = convert_summary(previous, target, opts)
        assert summary.tables == 16
        assert not [n for n in summary.notes if "table" in n], summary.notes
        assert "16 tables" in summary.message()
        assert _same_tables(previous, target) == 16
        assert _same_tables(source, target) == 16
        with open_ome_zarr(str(previous)) as a, open_ome_zarr(str(target)) as b:
            same_format = a.zarr_format == b.zarr_format
        if same_format:  # every key of tables/ byte for byte, documents and chunks
            before = {k: v for k, v in _members(previous).items() if k.startswith("tables/")}
            after = {k: v for k, v in _members(target).items() if k.startswith("tables/")}
            assert before == after
        else:  # no v2 consolidated metadata in v3, nor v3 documents in v2
            keys = [k for k in _members(target) if k.startswith("tables/")]
            wrong = ("zarr.json",) if version == "0.4" else (".zarray", ".zgroup", ".zmetadata")
            assert not [k for k in keys if k.rsplit("/", 1)[-1] in wrong]
        if suffix == ".ozx":
            assert _validate_cli(target) == 0
        # ngio reads every table of the converted file as it reads the source's (ngio
        # 1.1.3 reads no parquet / csv table from a zip store)
        names = TABLES if suffix != ".ozx" else _ZIPPABLE
        got = tg.ngio_dataframes(target, names)
        import pandas as pd

        for name in names:
            pd.testing.assert_frame_equal(got[name], frames[name], check_dtype=False)
        previous = target
    # and ngio maps the converted ROIs to the same pixels
    names = ("fov_anndata", "nuclei_roi_parquet", "fov_json")
    if previous.suffix == ".ozx":
        names = ("fov_anndata", "nuclei_roi_anndata", "fov_json")
    want = tg.ngio_roi_pixels(reference.path, names)
    got_px = tg.ngio_roi_pixels(previous, names)
    for name in names:
        assert want[name].keys() == got_px[name].keys()
        for roi, px in want[name].items():
            np.testing.assert_array_equal(got_px[name][roi], px)


def test_anndata_encoding_survives_a_format_change(ngio_dirs, tmp_path):
    """Rewritten v2 -> v3, every AnnData group and array keeps its attributes (the
    encodings) and data type kind, as anndata writes them in v3 (ngio's own v3 file)."""
    out = tmp_path / "out05.zarr"
    convert_summary(ngio_dirs["v04"].path, out, WriteOptions(version="0.5"))
    mine, ref = _members(out), _members(ngio_dirs["v05"].path)
    for name in ("fov_anndata", "feat_anndata", "cond_anndata", "nuclei_roi_anndata"):
        lead = f"tables/{name}/"
        docs = {
            k: json.loads(v) for k, v in mine.items() if k.startswith(lead) and "zarr.json" in k
        }
        refs = {k: json.loads(v) for k, v in ref.items() if k.startswith(lead) and "zarr.json" in k}
        assert docs.keys() == refs.keys(), name
        for k, d in docs.items():
            assert d["attributes"] == refs[k]["attributes"], k
            assert d["node_type"] == refs[k]["node_type"], k
            if d["node_type"] == "array":
                assert d["data_type"] == refs[k]["data_type"], k


def _add_unconvertible_table(root: Path) -> None:
    """A table ``odd`` (Zarr v2) whose column is pickled Python objects: zarr cannot
    read it, so it cannot be rewritten in another Zarr format."""
    import numcodecs

    t = root / "tables" / "odd"
    (t / "obs" / "blob").mkdir(parents=True)
    (t / ".zgroup").write_text('{"zarr_format": 2}')
    (t / ".zattrs").write_text(json.dumps({"type": "feature_table", "backend": "anndata"}))
    (t / "obs" / ".zgroup").write_text('{"zarr_format": 2}')
    arr = {
        "zarr_format": 2,
        "shape": [2],
        "chunks": [2],
        "dtype": "|O",
        "compressor": None,
        "fill_value": 0,
        "filters": [{"id": "pickle"}],
        "order": "C",
    }
    (t / "obs" / "blob" / ".zarray").write_text(json.dumps(arr))
    data = numcodecs.Pickle().encode(np.array([{"a": 1}, {"b": 2}], dtype=object))
    (t / "obs" / "blob" / "0").write_bytes(data)
    doc = root / "tables" / ".zattrs"
    attrs = json.loads(doc.read_text())
    attrs["tables"].append("odd")
    doc.write_text(json.dumps(attrs))


def test_a_table_that_cannot_change_format_is_left_out_with_a_note(ngio_dirs, tmp_path):
    source = _copy(ngio_dirs, "v04", tmp_path / "src")
    _add_unconvertible_table(source)
    out = tmp_path / "out.ozx"
    summary = convert_summary(source, out, WriteOptions(version="0.5"))
    (note,) = [n for n in summary.notes if "odd" in n]
    assert note.startswith("table 'odd' of the image not carried over: it cannot be rewritten")
    assert note in summary.message()
    assert summary.tables == 16
    names = [t.name for t in list_tables(str(out))]
    assert names == [t.name for t in list_tables(str(source)) if t.name != "odd"]
    assert "odd" not in names and not [k for k in _members(out) if "/odd/" in k]
    assert _validate_cli(out) == 0
    # the same Zarr format copies it byte for byte: nothing to leave out
    same = tmp_path / "same04.zarr"
    summary = convert_summary(source, same, WriteOptions(version="0.4"))
    assert summary.tables == 17 and not [n for n in summary.notes if "odd" in n]
    keep = {k: v for k, v in _members(source).items() if k.startswith("tables/odd/")}
    assert keep.items() <= _members(same).items()


def test_convert_keeps_a_plates_and_its_fields_tables(tmp_path):
    pytest.importorskip("ngio", reason=NGIO)
    from tests._support import plate_tablegen as pg

    plate = pg.write_ngio_plate(tmp_path / "plate04.zarr", "0.4")
    ozx = tmp_path / "plate.ozx"
    summary = convert_summary(plate.path, ozx, WriteOptions(version="0.5"))
    fields = [f"{w}/0" for w in plate.wells] + [f"{plate.two_fields}/1"]
    assert summary.tables == 2 + 2 * len(fields), summary.message()
    assert not [n for n in summary.notes if "table" in n]
    assert _validate_cli(ozx) == 0
    back = tmp_path / "plate05.zarr"
    convert_summary(ozx, back)
    for target in (ozx, back):
        assert _same_tables(plate.path, target, "") == 2  # condition_table, by_well
        for f in fields:
            assert _same_tables(plate.path, target, f) == 2  # FOV_ROI_table, well_ROI_table


def test_convert_on_a_cluster_keeps_tables(ngio_dirs, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "cluster.ozx"
    with (
        warnings.catch_warnings(),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as lc,
        distributed.Client(lc) as client,
    ):
        warnings.simplefilter("ignore")
        summary = convert_summary(ngio_dirs["v05"].path, out, client=client)
    assert summary.tables == 16
    assert _same_tables(ngio_dirs["v05"].path, out) == 16
    assert _validate_cli(out) == 0


# ------------------------------------------------------------------ ROIs written back


def _image_layer(vm: Any) -> Any:
    from napari.layers import Image

    return next(lyr for lyr in vm.layers if isinstance(lyr, Image))


def _world_rect(image: Any, y0: float, x0: float, y1: float, x1: float) -> np.ndarray:
    """The rectangle whose edges are the pixel edges y0..y1, x0..x1 of *image*'s level 0
    (pixel *i* spans i - 0.5 .. i + 0.5), as 2D world corners."""
    pad = [0.0] * (image.ndim - 2)
    corners = [(y0, x0), (y0, x1), (y1, x1), (y1, x0)]
    return np.array(
        [np.asarray(image.data_to_world([*pad, y - 0.5, x - 0.5]))[-2:] for y, x in corners]
    )


#: (y0, x0, y1, x1) pixel edges of the drawn rectangles: aligned, fractional, partly outside
RECTS = {
    "aligned": (10, 20, 30, 50),
    "fractional": (40.3, 60.6, 55.5, 80.2),
    "edge": (80, 100, 120, 150),
}


def _level0(path: Path) -> np.ndarray:
    with open_ome_zarr(str(path)) as oz:
        (image,) = oz.images()
        return np.asarray(image.levels[0])


def _draw(vm: Any, name: str = "drawn", **kw: Any) -> Any:
    image = _image_layer(vm)
    data = [_world_rect(image, *r) for r in RECTS.values()]
    return vm.add_shapes(
        data, shape_type="rectangle", name=name, features={"name": list(RECTS)}, **kw
    )


@pytest.mark.parametrize("flavour", ["v04", "v05", "ozx"])
def test_saved_rois_read_back_by_ngio_with_the_same_boxes(flavour, ngio_dirs, tmp_path):
    pytest.importorskip("napari")
    from napari.layers import Shapes

    from napari_ozx import save_roi_table
    from napari_ozx.layers.reading import table_layer_data

    path = _copy(ngio_dirs, flavour, tmp_path)
    vm = open_in_viewer_model(path)
    shapes = _draw(vm)
    before = _members(path)
    assert save_roi_table(shapes, _image_layer(vm), "drawn") == path

    # ngio maps every ROI to the pixels the rectangle covers (floor / ceil, clipped), z whole
    pixels = tg.ngio_roi_pixels(path, ("drawn",))["drawn"]
    full = _level0(path)
    assert list(pixels) == list(RECTS)
    for name, (y0, x0, y1, x1) in RECTS.items():
        box = full[:, :, int(np.floor(y0)) : int(np.ceil(y1)), int(np.floor(x0)) : int(np.ceil(x1))]
        np.testing.assert_array_equal(pixels[name], box)

    # our reader: a roi_table in AnnData with the names and ngio's columns
    (info,) = [t for t in list_tables(str(path)) if t.name == "drawn"]
    assert (info.type, info.backend, info.version, info.error) == (
        "roi_table",
        "anndata",
        "1",
        None,
    )
    data = read_table(str(path), "drawn")
    assert list(data.index) == list(RECTS)
    assert list(data.columns) == list(tg_roi_columns())
    np.testing.assert_allclose(
        data.columns["x_micrometer"], [20 * tg.PIXEL, 60.6 * tg.PIXEL, 100 * tg.PIXEL]
    )
    np.testing.assert_allclose(
        data.columns["len_y_micrometer"], [20 * tg.PIXEL, 15.2 * tg.PIXEL, 40 * tg.PIXEL]
    )
    np.testing.assert_allclose(data.columns["z_micrometer"], 0.0)
    np.testing.assert_allclose(data.columns["len_z_micrometer"], tg.SHAPE[1] * tg.Z_SPACING)

    # ngio reads each ROI as drawn, in its convention: micrometres of pixel *edges* from
    # the array origin (pixel i spans i .. i + 1 times the pixel size; the image's OME
    # translation not added)
    frame = tg.ngio_dataframes(path, ("drawn",))["drawn"]
    for name, (y0, x0, y1, x1) in RECTS.items():
        row = frame.loc[name]
        got_um = [row[f"{a}_micrometer"] for a in "yx"] + [row[f"len_{a}_micrometer"] for a in "yx"]
        np.testing.assert_allclose(got_um, np.array([y0, x0, y1 - y0, x1 - x0]) * tg.PIXEL)

    # ... and napari-ozx reopens every rectangle where it was drawn, in napari's
    # convention (pixel i centred on i: its edges at i - 0.5 and i + 0.5, placed with the
    # image's translation): on pixel edges, between them, partly outside the image. It
    # reopened them one pixel larger, on the pixels they cover
    layer_data, kw, _ = table_layer_data(str(path), "drawn")
    again = Shapes(layer_data, **kw)
    assert len(again.data) == len(RECTS)
    for i, name in enumerate(RECTS):
        drawn = np.array([shapes.data_to_world(v) for v in np.asarray(shapes.data[i])])
        got = np.array([again.data_to_world(v) for v in np.asarray(again.data[i])])
        np.testing.assert_allclose(  # napari keeps vertices as float32, AnnData X too
            sorted(map(tuple, got)), sorted(map(tuple, drawn)), atol=1e-4, err_msg=name
        )

    # the documents are the ones ngio (AnnData) writes for its own ROI table
    after = _members(path)
    assert _docs_of(after, "tables/drawn/") == _docs_of(after, "tables/fov_anndata/")

    # nothing else changed but the tables group's document
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == {"tables/zarr.json" if flavour != "v04" else "tables/.zattrs"}
    assert all(k.startswith("tables/drawn/") for k in after.keys() - before.keys())
    assert not [p for p in tmp_path.rglob("*") if "partial" in p.name]
    if flavour == "ozx":
        from napari_ozx.ozx.validate import validate

        assert validate(path, deep=True).ok
        assert _validate_cli(path) == 0


def tg_roi_columns() -> tuple[str, ...]:
    return (
        "x_micrometer",
        "y_micrometer",
        "z_micrometer",
        "len_x_micrometer",
        "len_y_micrometer",
        "len_z_micrometer",
    )


def _docs_of(members: dict[str, bytes], lead: str) -> dict[str, Any]:
    """Per node of a table: its attributes and (arrays) data type, format-neutral."""
    out: dict[str, Any] = {}
    for key, raw in members.items():
        if not key.startswith(lead):
            continue
        node, _, base = key[len(lead) :].rpartition("/")
        if base == "zarr.json":
            doc = json.loads(raw)
            entry = out.setdefault(node, {})
            entry["attributes"] = doc.get("attributes", {})
            entry["kind"] = doc["node_type"]
            if doc["node_type"] == "array":
                entry["dtype"] = doc["data_type"]
        elif base == ".zattrs":
            out.setdefault(node, {})["attributes"] = json.loads(raw)
        elif base == ".zarray":
            out.setdefault(node, {}).update(kind="array", dtype=json.loads(raw)["dtype"])
        elif base == ".zgroup":
            out.setdefault(node, {})["kind"] = "group"
    # anndata >= 0.13 with pandas' string dtype writes strings as a nullable-string-array
    # group (values + mask) where earlier releases (and napari-ozx) write a string-array;
    # AnnData reads both as the same column
    for node, entry in list(out.items()):
        if entry.get("attributes", {}).get("encoding-type") == "nullable-string-array":
            out[node] = {
                "attributes": {"encoding-type": "string-array", "encoding-version": "0.2.0"},
                "kind": "array",
            }
            for part in ("values", "mask"):
                out.pop(f"{node}/{part}", None)
        elif entry.get("attributes", {}).get("encoding-type") == "string-array":
            entry.pop("dtype", None)  # "string" (v3), "|O" (v2): both strings
    return out


@pytest.mark.parametrize("flavour", ["v04", "ozx"])
def test_a_second_table_keeps_the_first_and_a_name_is_not_reused(flavour, ngio_dirs, tmp_path):
    pytest.importorskip("napari")
    from napari_ozx import save_roi_table

    path = _copy(ngio_dirs, flavour, tmp_path)
    vm = open_in_viewer_model(path)
    image = _image_layer(vm)
    save_roi_table(_draw(vm, "first"), image)
    first = {k: v for k, v in _members(path).items() if k.startswith("tables/first/")}
    second = vm.add_shapes([_world_rect(image, 0, 0, 8, 8)], shape_type="rectangle", name="b")
    save_roi_table(second, image, "second")
    names = [t.name for t in list_tables(str(path))]
    assert names == [*list(ngio_dirs["v05"].tables), "first", "second"]
    assert first.items() <= _members(path).items()
    assert list(read_table(str(path), "second").index) == ["ROI_0"]

    # the same name again: refused, nothing written; overwrite=True replaces it
    before = _members(path)
    with pytest.raises(OzxError, match="a table 'second' already exists"):
        save_roi_table(second, image, "second")
    assert _members(path) == before
    save_roi_table(_draw(vm, "c"), image, "second", overwrite=True)
    assert list(read_table(str(path), "second").index) == list(RECTS)
    assert [t.name for t in list_tables(str(path))] == names
    assert first.items() <= _members(path).items()
    assert not [p for p in tmp_path.rglob("*") if "partial" in p.name]
    if flavour == "ozx":
        assert _validate_cli(path) == 0


def _refusal_cases(vm: Any, image: Any) -> dict[str, tuple[Any, Any, str]]:
    from napari.layers import Image, Shapes

    rect = _world_rect(image, 10, 10, 20, 30)
    centre = rect.mean(axis=0)
    turn = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    rotated = (rect - centre) @ turn.T + centre
    return {
        "not shapes": (image, image, "is not a Shapes layer"),
        "empty": (Shapes(ndim=2, name="nothing"), image, "has no rectangles"),
        "image not from a file": (
            Shapes([rect], shape_type="rectangle"),
            Image(np.zeros((4, 96, 120))),
            "was not opened from an OME-Zarr file",
        ),
        "rotated": (
            Shapes([rotated], shape_type="rectangle", name="tilted"),
            image,
            "is a rectangle rotated against the image's pixel grid",
        ),
        "ellipse": (
            Shapes([rect], shape_type="ellipse", name="round"),
            image,
            "is not a rectangle",
        ),
        "bad name": (Shapes([rect], shape_type="rectangle", name="../x"), image, "not a table"),
    }


CASES = ["not shapes", "empty", "image not from a file", "rotated", "ellipse", "bad name"]


@pytest.mark.parametrize("case", CASES)
def test_refusals_are_one_message_and_write_nothing(case, ngio_dirs, tmp_path):
    pytest.importorskip("napari")
    from napari_ozx import save_roi_table

    path = _copy(ngio_dirs, "ozx", tmp_path)
    vm = open_in_viewer_model(path)
    shapes, image, reason = _refusal_cases(vm, _image_layer(vm))[case]
    before = _members(path)
    files = sorted(p.name for p in tmp_path.rglob("*"))
    name = "../x" if case == "bad name" else None
    with pytest.raises(OzxError) as err:
        save_roi_table(shapes, image, name)
    text = str(err.value)
    assert reason in text and "\n" not in text, text
    assert text.index(reason) < text.rindex("nothing was written")  # the reason first
    assert _members(path) == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == files


def test_a_roi_layer_read_from_a_table_saves_the_same_boxes(ngio_dirs, tmp_path):
    """ngio's FOV table opened as a Shapes layer, saved under another name: ngio maps each
    ROI to the same pixels (each row's z extent kept from the layer's features)."""
    pytest.importorskip("napari")
    from napari_ozx import save_roi_table

    path = _copy(ngio_dirs, "v05", tmp_path)
    vm = open_in_viewer_model(path)
    layer = vm.layers["fov_anndata"]
    save_roi_table(layer, _image_layer(vm), "fov_again")
    px = tg.ngio_roi_pixels(path, ("fov_anndata", "fov_again"))
    assert px["fov_again"].keys() == px["fov_anndata"].keys()
    for roi, want in px["fov_anndata"].items():
        np.testing.assert_array_equal(px["fov_again"][roi], want)


def test_the_menu_command_saves_the_selected_shapes(ngio_dirs, tmp_path):
    pytest.importorskip("napari")
    import yaml

    from napari_ozx.layers import commands

    path = _copy(ngio_dirs, "ozx", tmp_path)
    vm = open_in_viewer_model(path)
    image = _image_layer(vm)
    shapes = _draw(vm, "my rois")
    vm.layers.selection = {shapes, image}
    commands.save_roi_table(vm)
    assert list(read_table(str(path), "my_rois").index) == list(RECTS)
    # a layer read from a ROI table of the image saves back into that table
    fov = vm.layers["fov_anndata"]
    fov.data = fov.data[:2]
    vm.layers.selection = {fov}
    commands.save_roi_table(vm)
    assert list(read_table(str(path), "fov_anndata").index) == ["FOV_1", "FOV_2"]
    assert _validate_cli(path) == 0
    # nothing selected: one message
    vm.layers.selection = set()
    with pytest.raises(OzxError, match="select a Shapes layer"):
        commands.save_roi_table(vm)
    manifest = yaml.safe_load(
        (Path(commands.__file__).parents[1] / "napari.yaml").read_text(encoding="utf-8")
    )
    (cmd,) = [
        c for c in manifest["contributions"]["commands"] if c["id"] == "napari-ozx.save_roi_table"
    ]
    assert cmd["title"] == "Save shapes as ROI table (napari-ozx)"
    assert {"command": "napari-ozx.save_roi_table"} in manifest["contributions"]["menus"][
        "napari/layers/annotate"
    ]
