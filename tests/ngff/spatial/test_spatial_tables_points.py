"""Tables on SpatialData points, and images placed by transformations whose outputs are
named in another order than their inputs, on stores written by
spatialdata 0.7.3 itself (``make_fixtures.py``: ``points_table.zarr``,
``raster_systems.zarr``).

Expected values come from the files through pyarrow and zarr directly (what spatialdata
wrote), never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._support.paths import TESTS

pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

DATA = TESTS / "ngff" / "spatial" / "data"
POINTS_TABLE = DATA / "points_table.zarr"
RASTER = DATA / "raster_systems.zarr"


def _read(path):
    from napari_ozx.layers.reading import read_layer_data

    messages: list[str] = []
    lds = read_layer_data(str(path), report=lambda w, e: messages.append(f"{w}: {e}"))
    names = [kw["name"] if isinstance(kw["name"], str) else kind for _d, kw, kind in lds]
    return dict(zip(names, lds, strict=True)), messages


def _obs() -> pd.DataFrame:
    """The table's rows as spatialdata wrote them (AnnData's ``obs``), through zarr."""
    import zarr

    g = zarr.open_group(str(POINTS_TABLE / "tables" / "cell_table" / "obs"), mode="r")

    def col(name):
        node = g[name]
        if isinstance(node, zarr.Group):  # AnnData's categorical encoding
            return np.asarray(node["categories"][:], dtype=object)[node["codes"][:]]
        return node[:]

    return pd.DataFrame({k: col(k) for k in ("region", "cell_id", "area", "cell_type", "quality")})


def test_a_table_on_two_points_elements_gives_each_its_own_rows():
    """A table written by spatialdata itself annotating points: each element gets its
    own rows as features, matched by instance id, also when one table annotates several
    elements with overlapping ids. Each point takes
    the row of its ``cell_id`` (the element's ``instance_key``) for its own element; a
    point whose instance has no row gets NaN; the table's ``quality`` does not replace
    the points' own."""
    layers, messages = _read(POINTS_TABLE)
    assert not messages
    obs = _obs()
    for name in ("transcripts", "transcripts_b"):
        feats = pd.DataFrame(layers[name][1]["features"])
        raw = pq.read_table(POINTS_TABLE / "points" / name / "points.parquet").to_pandas()
        rows = obs[obs["region"] == name].set_index("cell_id")
        ids = raw["cell_id"].to_numpy()
        np.testing.assert_array_equal(feats["cell_id"], ids)
        np.testing.assert_array_equal(feats["quality"], raw["quality"])  # the points' own
        want_area = rows["area"].reindex(ids).to_numpy()
        np.testing.assert_array_equal(feats["area"].to_numpy(), want_area)  # NaN == NaN
        want_type = rows["cell_type"].reindex(ids).to_numpy()
        got_type = feats["cell_type"].astype(object).to_numpy()
        assert [None if pd.isna(v) else v for v in got_type] == [
            None if pd.isna(v) else v for v in want_type
        ]
        np.testing.assert_array_equal(
            feats["cell_table.quality"], rows["quality"].reindex(ids).to_numpy()
        )
    # the ids overlap (3..7 in both): each element kept its own rows
    a = pd.DataFrame(layers["transcripts"][1]["features"])
    b = pd.DataFrame(layers["transcripts_b"][1]["features"])
    assert set(a["cell_id"]) & set(b["cell_id"]) >= {3, 4, 5, 6, 7}
    assert a.loc[a["cell_id"] == 5, "area"].iloc[0] == 51.0
    assert b.loc[b["cell_id"] == 5, "area"].iloc[0] == 502.0
    assert a.loc[a["cell_id"] == 9, "area"].isna().all()  # no row for instance 9


def test_join_rows_matches_categorical_text_ids_of_many_points():
    """Points elements hold millions of rows, their instance ids often text (Xenium's
    ``cell_id``), stored as categories: the join goes through the categories, each
    point gets its instance's row, a point of no instance (a missing category) none."""
    from napari_ozx.layers.spatial.tables import join_rows
    from napari_ozx.ngff.tables.read import TableData, TableInfo

    rng = np.random.default_rng(0)
    names = np.array([f"cell-{i:04d}" for i in range(500)], dtype=object)
    codes = rng.integers(-1, 500, 300_000)
    ids = pd.Categorical.from_codes(codes, categories=names)
    features = pd.DataFrame({"cell_id": ids, "gene": np.zeros(len(codes), np.int8)})
    rows = np.arange(0, 500, 2)  # every other instance has a row
    info = TableInfo(
        name="cells",
        path="tables/cells",
        image="",
        type=None,
        backend="anndata",
        regions=("transcripts",),
        region_key="region",
        instance_key="cell_id",
        origin="spatialdata",
    )
    table = TableData(
        info,
        np.array([f"r{i}" for i in rows], dtype=object),
        {
            "region": np.array(["transcripts"] * len(rows), dtype=object),
            "cell_id": names[rows][::-1].copy(),  # another order than the categories
            "volume": rows[::-1] * 2.0,
            "gene": np.array([f"g{i}" for i in rows[::-1]], dtype=object),
        },
    )
    join_rows(features, features["cell_id"], table, info)
    has_row = (codes >= 0) & (codes % 2 == 0)
    np.testing.assert_array_equal(features["volume"][has_row], codes[has_row] * 2.0)
    assert features["volume"][~has_row].isna().all()
    clash = features["cells.gene"]  # the element's own ``gene`` stays
    assert isinstance(clash.dtype, pd.CategoricalDtype)
    assert list(clash[has_row][:5]) == [f"g{c}" for c in codes[has_row][:5]]
    assert clash[~has_row].isna().all() and (features["gene"] == 0).all()
    assert "cell_id" in features and "region" not in features


def test_reordered_outputs_place_images_and_labels_where_the_dock_does():
    """Placed by the element's transformations in the same coordinate system as the
    images: spatialdata writes an affine over (x, y) on a (c, y, x) image with
    outputs ``c, x, y``; its rows are matched by axis name, so "global" (x' = 2 x + 5,
    y' = 3 y + 7) puts pixel (y 1, x 2) at (y 10, x 9), as the scene dock's re-placing
    (:func:`place_spatialdata`) does, in napari's (y, x) order."""
    from napari.components import ViewerModel

    from napari_ozx.layers.spatial.placing import place_spatialdata

    layers, _ = _read(RASTER)
    vm = ViewerModel()
    for data, kw, kind in layers.values():
        assert tuple(kw["axis_labels"]) == ("y", "x")
        getattr(vm, f"add_{kind}")(data, **kw)
    assert {ly.name for ly in vm.layers} == {"dapi", "cd3", "cells"}
    for p in [(1, 2), (0, 0), (15, 23)]:
        want = (3 * p[0] + 7, 2 * p[1] + 5)
        for layer in vm.layers:
            np.testing.assert_allclose(layer.data_to_world(p), want, atol=1e-9)
    assert place_spatialdata(list(vm.layers), str(RASTER), "global") == 3
    for layer in vm.layers:  # the dock's placement: the same
        np.testing.assert_allclose(layer.data_to_world((1, 2)), (10.0, 9.0), atol=1e-9)
