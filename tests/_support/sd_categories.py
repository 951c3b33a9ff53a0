"""A copy of the SpatialData test store with a categorical column and its colours.

``blobs.zarr`` (written by spatialdata, ``tests/ngff/spatial/make_fixtures.py``) gets,
in its table ``table`` (annotating labels ``cells`` and ``nuclei``), an ``obs`` column
``cell_type`` in AnnData's categorical encoding and ``uns["cell_type_colors"]``, as
scanpy writes them (one colour string per category, in the categories' order), then
its consolidated metadata rewritten, as anndata / spatialdata do.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from tests._support.paths import TESTS

BLOBS = TESTS / "ngff" / "spatial" / "data" / "blobs.zarr"
#: categories (their order) and their uns colours: pure, easy to find on screen
CELL_TYPES = ("B", "T", "tumour")
CELL_TYPE_COLORS = ("#ff0000", "#00ff00", "#0000ff")


def cell_type_of(instance_id: int) -> str:
    """The cell type the store gives an object (of ``cells`` and of ``nuclei``)."""
    return CELL_TYPES[(instance_id - 1) % 3]


def _put(group: Any, name: str, values: tuple[str, ...], dtype: Any, attrs: dict) -> None:
    arr = group.create_array(name, shape=(len(values),), dtype=dtype, attributes=attrs)
    arr[...] = np.array(values, dtype=object)


def store_with_cell_types(dest: Path) -> Path:
    import zarr
    from zarr.core.dtype import VariableLengthUTF8

    out = dest / "typed.zarr"
    shutil.copytree(BLOBS, out)
    table = zarr.open_group(out / "tables" / "table", mode="r+")
    obs = table["obs"]
    ids = np.asarray(obs["instance_id"][...]).astype(int)
    codes = np.array([CELL_TYPES.index(cell_type_of(int(i))) for i in ids], dtype=np.int8)
    cat = obs.create_group(
        "cell_type",
        attributes={"encoding-type": "categorical", "encoding-version": "0.2.0", "ordered": False},
    )
    strings = {"encoding-type": "string-array", "encoding-version": "0.2.0"}
    text = VariableLengthUTF8()  # what anndata writes strings as (vlen-utf8)
    _put(cat, "categories", CELL_TYPES, text, strings)
    cat.create_array("codes", data=codes, attributes={"encoding-type": "array"})
    order = list(obs.attrs["column-order"])
    obs.attrs["column-order"] = [*order, "cell_type"]
    _put(table["uns"], "cell_type_colors", CELL_TYPE_COLORS, text, strings)
    zarr.consolidate_metadata(str(out))
    return out
