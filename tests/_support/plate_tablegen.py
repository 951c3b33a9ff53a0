"""An HCS plate with tables, written by ngio 1.1.3 itself, for
``tests/ngff/tables/test_plate_tables.py`` and ``tests/qt/test_plate_tables_gui.py``.

ngio writes the plate (``create_empty_plate``), each field image
(``create_ome_zarr_from_array`` into the plate's image groups) with its ROI tables, and
the plate-level condition tables (``OmeZarrPlate.add_table``): nothing is hand-written.
Nothing is committed: the plate is written in the test session (in a child process under
dask's array query planning, see ``classic_dask.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests._support.classic_dask import in_child_without_query_planning
from tests._support.tablegen import quiet

ROWS = ("A", "B", "C")
COLUMNS = ("01", "02", "03", "04")
MISSING = {("A", "04"), ("C", "01")}  # positions without a well
PIXEL = 0.5
SHAPE = (2, 48, 64)  # c, y, x of every field
#: the FOV ROIs of every field: name -> (x, y, len_x, len_y) in micrometres
FOVS = {"FOV_1": (0.0, 0.0, 16.0, 24.0), "FOV_2": (16.0, 0.0, 16.0, 24.0)}
DRUGS = {"01": "DMSO", "02": "nocodazole", "03": "nocodazole", "04": "taxol"}
CONCENTRATION = {"A": 0.0, "B": 0.5, "C": 1.5}


@dataclass
class NgioPlate:
    path: Path
    wells: list[str]  # well paths, plate order
    #: well path -> the conditions written (condition_table, csv)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    two_fields: str = "B/03"  # the well with two fields (and two rows in "by_well")


def wells() -> list[tuple[str, str]]:
    return [(r, c) for r in ROWS for c in COLUMNS if (r, c) not in MISSING]


@in_child_without_query_planning
def write_ngio_plate(path: Path, version: str = "0.5") -> NgioPlate:
    """The plate (3 x 4 positions, 10 wells; B/03 has two fields) with:

    * per field: ROI tables ``FOV_ROI_table`` (two FOVs) and ``well_ROI_table``;
    * ``condition_table`` (csv: "01" reads back as 1): row, column, drug, concentration,
      one row per well plus one row for a well the plate does not have (D/01);
    * ``by_well`` (AnnData): the well's name ("B03") and a replicate per field row (so
      B03 has two different values).
    """
    import pandas as pd
    from ngio import (
        ConditionTable,
        ImageInWellPath,
        Roi,
        RoiTable,
        create_empty_plate,
        create_ome_zarr_from_array,
    )

    with quiet():
        images = [ImageInWellPath(row=r, column=c, path="0") for r, c in wells()]
        images.append(ImageInWellPath(row="B", column="03", path="1"))
        plate = create_empty_plate(
            str(path), "conditions plate", images=images, ngff_version=version
        )
        rng = np.random.default_rng(7)
        for im in images:
            store = plate.get_image_store(im.row, im.column, im.path)
            data = rng.integers(0, 3000, SHAPE, dtype=np.uint16)
            oz = create_ome_zarr_from_array(
                store,
                data,
                pixelsize=PIXEL,
                axes_names="cyx",
                levels=2,
                ngff_version=version,
                overwrite=True,
            )
            fovs = [
                Roi.from_values(name=n, slices={"x": (x, lx), "y": (y, ly)})
                for n, (x, y, lx, ly) in FOVS.items()
            ]
            oz.add_table("FOV_ROI_table", RoiTable(rois=fovs), backend="anndata")
            whole = Roi.from_values(
                name="well", slices={"x": (0.0, SHAPE[2] * PIXEL), "y": (0.0, SHAPE[1] * PIXEL)}
            )
            oz.add_table("well_ROI_table", RoiTable(rois=[whole]), backend="anndata")
        out = NgioPlate(path, [f"{r}/{c}" for r, c in wells()])
        rows = []
        for r, c in wells():
            cond = {"drug": DRUGS[c], "concentration": CONCENTRATION[r]}
            out.conditions[f"{r}/{c}"] = cond
            rows.append({"row": r, "column": c, **cond})
        rows.append({"row": "D", "column": "01", "drug": "DMSO", "concentration": 9.0})
        plate.add_table("condition_table", ConditionTable(pd.DataFrame(rows)), backend="csv")
        by_well = pd.DataFrame(
            {
                "well": [f"{r}{c}" for r, c in wells()] + ["B03"],
                "replicate": [f"rep{i % 2 + 1}" for i in range(len(wells()))] + ["rep9"],
            }
        )
        plate.add_table("by_well", ConditionTable(by_well), backend="anndata")
    return out
