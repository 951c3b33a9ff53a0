"""A plate's conditions on the canvas, in a real napari window: the
plate's wells layer carries each well's condition columns as ``features``, so the
status napari computes for the cursor over a well names the well and its conditions;
the layer follows the condition table chosen in the plate navigator. ``napari-ozx info``
lists each well's conditions next to the well (here too, to share the plate).

The plate is ngio's own (``tests/_support/plate_tablegen.py``): condition_table (csv,
row / column / drug / concentration) and by_well (AnnData, a replicate per field row).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests._support import plate_tablegen as ptg
from tests._support.omegen import zip_dir
from tests.qt.test_plate_gui import _navigator


@pytest.fixture(scope="module")
def ngio_plate(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    root = tmp_path_factory.mktemp("ngio_plate_canvas")
    plate = ptg.write_ngio_plate(root / "plate.zarr")
    return {"plate": plate, "dir": plate.path, "ozx": zip_dir(plate.path, root / "plate.ozx")}


def _status_at(viewer, world: tuple[float, float]) -> str:
    """The status napari's status checker computes for the cursor at *world* (y, x)."""
    viewer.mouse_over_canvas = True
    viewer.cursor.position = world
    viewer.update_status_from_cursor()
    status = viewer.status
    return status if isinstance(status, str) else str(status.get("coordinates", status))


@pytest.mark.gui
def test_hovering_a_well_shows_its_conditions(make_napari_viewer, qtbot, ngio_plate):
    viewer = make_napari_viewer(show=True)
    viewer.open(str(ngio_plate["ozx"]), plugin="napari-ozx")
    nav = _navigator(viewer)
    try:
        wells = viewer.layers["conditions plate wells"]
        feats = wells.features
        assert list(feats.columns) == ["label", "well", "drug", "concentration"]
        at = {w: i for i, w in enumerate(feats["well"]) if isinstance(w, str)}
        assert sorted(at) == sorted(ngio_plate["plate"].wells)  # every well, no other
        b03 = at["B/03"]
        assert feats["drug"][b03] == "nocodazole" and feats["concentration"][b03] == 0.5
        assert feats["drug"][at["A/01"]] == "DMSO" and feats["concentration"][at["C/04"]] == 1.5
        assert list(feats["label"][:3]) == ["A", "B", "C"]  # the names keep their text
        assert list(wells.text.values[:3]) == ["A", "B", "C"] and wells.text.values[b03] == ""

        # the cursor over a corner of B/03's tile (off its field): the well and its
        # conditions, as napari's status bar shows them with the wells layer selected
        qtbot.waitUntil(
            lambda: nav.plate is not None and nav._entries[nav.plate.id].overview is not None,
            timeout=10_000,
        )
        ov = nav._entries[nav.plate.id].overview
        y0, x0, y1, x1 = ov.tile_box(1, 2)
        inside = (y0 + 0.3 * (y1 - y0), x0 + 0.3 * (x1 - x0))
        qtbot.waitUntil(lambda: viewer.layers.selection.active is wells, timeout=5000)
        status = _status_at(viewer, inside)
        assert "well: B/03" in status, status
        assert "drug: nocodazole" in status and "concentration: 0.5" in status, status
        own = wells.get_status(inside, world=True)["value"]
        assert "well: B/03" in own and "drug: nocodazole" in own
        # a tile's corner (outside the well's circle) and off the plate: no conditions
        assert "well:" not in wells.get_status(ov.tile_box(0, 0)[:2], world=True)["value"]
        assert "drug" not in _status_at(viewer, (-5 * (y1 - y0), -5 * (x1 - x0)))
        # the navigator's hover line names them too
        qtbot.waitUntil(lambda: nav.conditions.conditions is not None, timeout=15_000)
        assert nav.well_label(inside) == "B03 (field 0) drug=nocodazole concentration=0.5"

        # another condition table chosen in the panel: the layer follows it
        nav.conditions.table_combo.setCurrentText("by_well")
        qtbot.waitUntil(lambda: "replicate" in wells.features.columns, timeout=15_000)
        assert wells.metadata["napari_ozx_conditions"] == "by_well"
        assert wells.features["replicate"][b03] == "rep2, rep9"  # B03: two field rows
        assert "drug" not in wells.features.columns
        assert "replicate: rep2, rep9" in _status_at(viewer, inside)
        np.testing.assert_array_equal(np.asarray(wells.features["well"][b03]), "B/03")
    finally:
        qtbot.waitUntil(lambda: not nav.busy, timeout=10_000)
        nav.shutdown()


@pytest.mark.parametrize("flavour", ["dir", "ozx"])
def test_info_lists_each_wells_conditions(ngio_plate, flavour, capsys):
    """``napari-ozx info --json``: every well of the plate document, its row and column
    names and its conditions from the plate's condition table; the text lists them too."""
    import json

    from napari_ozx.__main__ import main

    assert main(["info", "--json", str(ngio_plate[flavour])]) == 0
    plate = json.loads(capsys.readouterr().out)["plate"]
    assert plate["conditions"] == {
        "table": "condition_table",
        "columns": ["drug", "concentration"],
        "matched_by": "row and column",
        "unmatched_rows": 1,  # D/01 is not on the plate
    }
    listed = {w["path"]: w for w in plate["well_list"]}
    assert list(listed) == ngio_plate["plate"].wells  # the plate's order
    assert listed["B/04"] == {
        "path": "B/04",
        "row": "B",
        "column": "04",
        "conditions": {"drug": "taxol", "concentration": 0.5},
    }
    assert {p: w["conditions"] for p, w in listed.items()} == ngio_plate["plate"].conditions
    assert main(["info", str(ngio_plate[flavour])]) == 0
    text = capsys.readouterr().out
    assert (
        "conditions (table condition_table, wells by row and column): drug, concentration" in text
    )
    assert "    B/04: drug=taxol, concentration=0.5" in text
