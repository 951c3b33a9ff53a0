"""Tables of HCS plates: the plate's condition tables mapped to
its wells (``napari_ozx.plate_conditions``), each field's ROI tables placed in the plate
mosaic, and the inspection's table nodes and previews.

The plate is written by ngio 1.1.3 itself (``tests/_support/plate_tablegen.py``); tests that need
it skip when ngio is not importable.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import napari_ozx
from napari_ozx.errors import NotOmeZarrError, TableError
from napari_ozx.inspection import Inspection
from napari_ozx.inspection.tree import TABLE, TABLES
from napari_ozx.layers.reading import well_layer_data
from napari_ozx.layers.tables import TABLE_KEY
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.read.plate import open_hcs
from napari_ozx.ngff.tables.conditions import PlateConditions, format_value, plate_conditions
from tests._support import plate_tablegen as ptg
from tests._support.omegen import zip_dir

NGIO = "ngio (pinned in the testing extra) is not installed: no ngio-written plate"


@pytest.fixture(scope="module")
def ngio_plate(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The plate as ngio wrote it (OME-Zarr 0.5 directory) and zipped into an .ozx."""
    pytest.importorskip("ngio", reason=NGIO)
    root = tmp_path_factory.mktemp("ngio_plate")
    plate = ptg.write_ngio_plate(root / "plate.zarr")
    return {"plate": plate, "dir": plate.path, "ozx": zip_dir(plate.path, root / "plate.ozx")}


# ------------------------------------------------------------------- conditions


@pytest.mark.parametrize("flavour", ["dir", "ozx"])
def test_condition_table_maps_every_well(ngio_plate, flavour):
    """ngio's csv condition table (row, column "01" read back as 1): every well gets its
    row's values; a row for a well the plate does not have is counted, not mapped."""
    conds = napari_ozx.plate_conditions(str(ngio_plate[flavour]))
    assert isinstance(conds, PlateConditions)
    assert conds.table is not None and conds.table.name == "condition_table"
    assert conds.key == "row and column" and conds.unmatched == 1
    assert conds.columns == ("drug", "concentration")
    assert {k: dict(v) for k, v in conds.items()} == ngio_plate["plate"].conditions
    assert conds["B/04"] == {"drug": "taxol", "concentration": 0.5}
    assert sorted(conds) == sorted(ngio_plate["plate"].wells)


@pytest.mark.parametrize("flavour", ["dir", "ozx"])
def test_info_lists_the_plates_own_tables(ngio_plate, flavour, capsys):
    """``napari-ozx info --json`` lists a plate's tables with their type (the plate
    document and its tables/ only: no well is read for it)."""
    import json

    from napari_ozx.__main__ import main

    assert main(["info", "--json", str(ngio_plate[flavour])]) == 0
    report = json.loads(capsys.readouterr().out)
    tables = {t["name"]: t["type"] for t in report["tables"]}
    assert tables == {"condition_table": "condition_table", "by_well": "condition_table"}


def test_well_name_column_and_several_rows_per_well(ngio_plate):
    """A table naming wells by name ("B03", AnnData backend); a well with two rows that
    disagree keeps both values."""
    conds = plate_conditions(ngio_plate["dir"], "by_well")
    assert conds.key == "well" and conds.unmatched == 0 and conds.columns == ("replicate",)
    assert conds["A/01"] == {"replicate": "rep1"}
    assert conds["B/03"] == {"replicate": ("rep2", "rep9")}
    assert conds.distinct("replicate") == ["rep1", "rep2", "rep9"]
    assert conds.matching("replicate", value="rep9") == {"B/03"}
    assert format_value(conds["B/03"]["replicate"]) == "rep2, rep9"


def test_matching_distinct_and_describe(ngio_plate):
    conds = plate_conditions(ngio_plate["dir"])
    assert conds.distinct("drug") == ["DMSO", "nocodazole", "taxol"]
    assert conds.distinct("concentration") == ["0", "0.5", "1.5"]  # numeric order
    assert conds.matching("drug", value="taxol") == {"B/04", "C/04"}
    assert conds.matching("drug", text="NOC") == {"A/02", "A/03", "B/02", "B/03", "C/02", "C/03"}
    assert conds.matching("concentration", value="1.5") == {"C/02", "C/03", "C/04"}
    assert conds.matching(None, text="dms") == {"A/01", "B/01"}  # any column
    assert conds.matching("drug") == set(conds)  # no value, no text: every well
    assert conds.describe("B/02") == ["drug: nocodazole", "concentration: 0.5"]
    assert conds.describe("A/04") == []  # no such well


def test_an_opened_plate_and_an_hcs_plate_are_sources_too(ngio_plate):
    with open_ome_zarr(str(ngio_plate["dir"])) as oz:
        assert dict(plate_conditions(oz)) == dict(plate_conditions(ngio_plate["dir"]))
    plate = open_hcs(str(ngio_plate["dir"]))
    try:
        assert plate_conditions(plate)["C/04"]["drug"] == "taxol"
    finally:
        plate.oz.close()


def _spy(oz: Any) -> list[str]:
    """The document paths *oz* is asked for from now on."""
    asked: list[str] = []
    read = oz.read_docs

    def spy(paths, *a, **kw):
        asked.extend(paths)
        return read(paths, *a, **kw)

    oz.read_docs = spy
    return asked


def test_one_table_read_and_no_well_document(ngio_plate):
    """The plate document, its tables group and the table: never a well's document."""
    with open_ome_zarr(str(ngio_plate["dir"])) as oz:
        asked = _spy(oz)
        plate_conditions(oz)
    wells = set(ngio_plate["plate"].wells)
    assert asked and not [p for p in asked if p in wells or p.split("/")[0] in "ABC"]
    assert all(p == "tables" or p.startswith("tables/") for p in asked)


def _json_table(group: Path, columns: dict[str, list[Any]]) -> None:
    """A condition table in ngio's json layout (its columns as the attributes of a
    ``table`` subgroup), hand-written."""

    def doc(path: Path, attrs: dict[str, Any]) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "zarr.json").write_text(
            json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
        )

    doc(group.parent, {"tables": [group.name]})
    doc(group, {"type": "condition_table", "table_version": "1", "backend": "json"})
    doc(group / "table", columns)


def test_1536_wells_one_table_read(tmp_path):
    """A 1536-well plate (its wells' groups not even written): every well mapped from one
    table, without reading any well."""
    from tests.inspection.test_inspection import make_plate

    rows = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdef"
    wells = [(r, c) for r in range(32) for c in range(48)]
    plate = make_plate(tmp_path / "big.zarr", rows=rows, cols=48, wells=wells, write_fields=False)
    _json_table(
        plate / "tables" / "condition_table",
        {
            "well": [f"{rows[r]}{c + 1:02d}" for r, c in wells],  # "A01": padded names
            "dose": [float(c % 8) for _, c in wells],
        },
    )
    with open_ome_zarr(str(plate)) as oz:
        asked = _spy(oz)
        conds = plate_conditions(oz)
    assert len(conds) == 1536 and conds.unmatched == 0 and conds.key == "well"
    assert conds["f/48"] == {"dose": 7.0} and conds["A/1"] == {"dose": 0.0}
    assert len(conds.matching("dose", value="3")) == 32 * 6
    assert all(p == "tables" or p.startswith("tables/") for p in asked)


def test_a_plate_without_condition_table(tmp_path):
    from tests.inspection.test_inspection import make_plate

    plate = make_plate(tmp_path / "plain.zarr")
    conds = plate_conditions(plate)
    assert conds.table is None and len(conds) == 0 and dict(conds) == {}
    with pytest.raises(TableError, match="no such table"):
        plate_conditions(plate, "condition_table")


def test_errors_name_the_table_and_the_reason(ngio_plate, tmp_path):
    copy = tmp_path / "plate.zarr"
    shutil.copytree(ngio_plate["dir"], copy)
    # a condition table that names no well
    group = copy / "tables" / "condition_table"
    (group / "table.csv").write_text('"drug","dose"\n"DMSO",1\n')
    with pytest.raises(TableError, match="no column names each row's well") as e:
        plate_conditions(copy)
    assert "condition_table" in str(e.value)
    # a field image is not a plate
    with pytest.raises(NotOmeZarrError, match="not an HCS plate"):
        plate_conditions(copy, plate="B/03/0")
    # a condition table too large to read is refused with its size
    doc = json.loads((group / "zarr.json").read_text())
    doc["attributes"]["backend"] = "csv"
    big = "row,column,drug\n" + "B,03,x\n" * 20
    (group / "table.csv").write_text(big)
    from napari_ozx.ngff.tables import conditions

    old = conditions.CONDITIONS_MAX_BYTES
    conditions.CONDITIONS_MAX_BYTES = 50
    try:
        with pytest.raises(TableError, match="more than the 50 read at most"):
            plate_conditions(copy)
    finally:
        conditions.CONDITIONS_MAX_BYTES = old


# ------------------------------------------------------------------- field ROIs


def _world_corners(data: np.ndarray, kw: dict[str, Any]) -> np.ndarray:
    return np.asarray(data) * np.asarray(kw["scale"]) + np.asarray(kw["translate"])


@pytest.mark.parametrize("grid", [False, True])
def test_field_roi_tables_are_placed_as_their_field(ngio_plate, grid):
    """Each field's ROI tables become Shapes layers named after the field, with the
    field's placed y / x scale and translation: each FOV outlines exactly the field
    pixels ngio maps it to, on the well's tile of the plate mosaic (or in the grid)."""
    plate = open_hcs(str(ngio_plate["ozx"]))
    try:
        ov = plate.overview()
        out, errors = well_layer_data(
            plate, "B/03", fields=None if grid else [0], grid=grid, overview=ov
        )
    finally:
        plate.oz.close()
    assert errors == []
    images = {kw["name"][0].split(" channel")[0]: kw for _, kw, k in out if k == "image"}
    shapes = {kw["name"]: (d, kw) for d, kw, k in out if k == "shapes"}
    fields = ["B03 f0", "B03 f1"] if grid else ["B03 f0"]
    assert sorted(shapes) == sorted(
        f"{f} {t}" for f in fields for t in ("FOV_ROI_table", "well_ROI_table")
    )
    for f in fields:
        img = images[f]
        data, kw = shapes[f"{f} FOV_ROI_table"]
        assert kw["scale"] == img["scale"] and kw["translate"] == img["translate"]
        assert kw["metadata"][TABLE_KEY]["image"] == f"B/03/{f[-1]}"
        assert list(kw["features"]["name"]) == ["FOV_1", "FOV_2"]
        for (x, y, lx, ly), rect in zip(ptg.FOVS.values(), data, strict=True):
            # pixel edges of the FOV's pixels: ngio's mapping of these aligned ROIs
            y0, x0 = y / ptg.PIXEL - 0.5, x / ptg.PIXEL - 0.5
            y1, x1 = (y + ly) / ptg.PIXEL - 0.5, (x + lx) / ptg.PIXEL - 0.5
            assert rect.min(axis=0).tolist() == [y0, x0]
            assert rect.max(axis=0).tolist() == [y1, x1]
        # the whole-field ROI covers the field's pixels in the world, as the image does
        whole, wkw = shapes[f"{f} well_ROI_table"]
        lo, hi = _world_corners(whole[0], wkw).min(axis=0), _world_corners(whole[0], wkw).max(0)
        s, t = np.asarray(img["scale"]), np.asarray(img["translate"])
        np.testing.assert_allclose(lo, t - s / 2)
        np.testing.assert_allclose(hi, t + (np.asarray(ptg.SHAPE[1:]) - 0.5) * s)
    if not grid:  # on the well's tile of the overview
        y0, x0, y1, x1 = ov.tile_box(1, 2)
        assert y0 <= lo[0] and x0 <= lo[1] and hi[0] <= y1 and hi[1] <= x1
        np.testing.assert_allclose([*lo, *hi], ov.field_box(1, 2))


# ------------------------------------------------------------------- inspection


def test_inspection_lists_plate_and_field_tables_with_previews(ngio_plate):
    with Inspection(ngio_plate["ozx"]) as insp:
        kids = insp.children(insp.root)
        assert [k.title for k in kids] == ["Row A", "Row B", "Row C", "tables"]
        tables = kids[-1]
        assert tables.kind == TABLES and tables.info == "2 tables"
        assert set(insp.paths_read()) == {"", "tables"}  # no well read for the plate's tables
        listed = insp.children(tables)
        assert [(t.kind, t.title, t.info) for t in listed] == [
            (TABLE, "condition_table", "condition_table · csv · 11 rows"),
            (TABLE, "by_well", "condition_table · anndata · 11 rows"),
        ]
        facts = insp.details(listed[0]).text()
        assert "Columns (4): row, column, drug, concentration" in facts and "csv" in facts
        assert '"type": "condition_table"' in insp.details(listed[0]).raw_json
        p = insp.table_preview(listed[0])
        assert p is not None and p.error is None and p.total == 11
        assert p.columns == ("index", "row", "column", "drug", "concentration")
        assert p.rows[0] == ("0", "A", "1", "DMSO", "0")
        assert len(insp.table_preview(listed[1], rows=3).rows) == 3
        # a field: its ROI tables under it, as an image's
        field = insp.find("B/03/1")[-1]
        ftables = next(k for k in insp.children(field) if k.kind == TABLES)
        rois = insp.children(ftables)
        assert [t.title for t in rois] == ["FOV_ROI_table", "well_ROI_table"]
        assert rois[0].info == "roi_table · anndata · 2 rows"
        fov = insp.table_preview(rois[0])
        assert fov.columns[0] == "FieldIndex" and [r[0] for r in fov.rows] == ["FOV_1", "FOV_2"]
        assert "Index: FieldIndex (str)" in insp.details(rois[0]).text()
        assert insp.table_preview(field) is None  # not a table


def test_preview_of_a_table_too_large_says_so(ngio_plate):
    from napari_ozx.inspection.tables import preview_table

    with Inspection(ngio_plate["dir"]) as insp:
        node = insp.children(insp.children(insp.root)[-1])[1]
        p = preview_table(insp, node.table, max_bytes=16)
    assert p.rows == () and p.error is not None and "more than the 16 read at most" in p.error


def test_an_image_without_tables_has_no_tables_node(tmp_path):
    from tests.inspection.test_inspection import make_plate

    with Inspection(make_plate(tmp_path / "plate.zarr")) as insp:
        assert [k.kind for k in insp.children(insp.root)] == ["row", "row"]
        field = insp.find("A/1/0")[-1]
        assert TABLES not in [k.kind for k in insp.children(field)]


def test_public_names():
    assert napari_ozx.plate_conditions is plate_conditions
    assert napari_ozx.PlateConditions is PlateConditions
