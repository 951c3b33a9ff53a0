"""Level of detail for a large points element: the points a view holds are exactly the
element's points there (tile edges, the store's edges, any z), categories filter them,
and the overview counts them.

The store is the small store spatialdata 0.7.3 wrote (``data/points_only.zarr``) with
its points replaced by generated rows with a ``z`` axis, in several parquet files; the
level-of-detail threshold is lowered so that it stays small.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests._support.paths import TESTS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("shapely")

SMALL = TESTS / "ngff" / "spatial" / "data" / "points_only.zarr"
PARQUET = ("points", "transcripts", "points.parquet")
N, PARTS, GENES = 24_000, 3, 30
W, H = 500.0, 300.0


def write_store(path, n=N, parts=PARTS, seed=3):
    """*SMALL* with N points (x, y, z axes; gene, cell_id, quality) in *parts* files.
    Some points lie exactly on the store's edges and on a 10-unit lattice (tile edges
    of a grid of 10-unit tiles); returns the rows as one pyarrow table."""
    shutil.copytree(SMALL, path)
    el = path / "points" / "transcripts"
    doc = json.loads((el / "zarr.json").read_text())
    doc["attributes"]["axes"] = ["x", "y", "z"]
    (el / "zarr.json").write_text(json.dumps(doc))
    src = path.joinpath(*PARQUET)
    schema = pq.read_schema(src / "part.0.parquet")
    shutil.rmtree(src)
    src.mkdir()
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, W, n)
    y = rng.uniform(0, H, n)
    lattice = rng.random(n) < 0.2
    x[lattice] = np.round(x[lattice] / 10) * 10
    y[lattice] = np.round(y[lattice] / 10) * 10
    x[:4], y[:4] = [0, W, 0, W], [0, 0, H, H]  # the corners
    names = pa.array([f"gene{i:02d}" for i in range(GENES)])
    gene_type = pa.dictionary(pa.int16(), pa.string())
    target = schema.set(schema.get_field_index("gene"), pa.field("gene", gene_type))
    target = target.append(pa.field("z", pa.float64()))
    cols = {
        "x": x,
        "y": y,
        "gene": rng.integers(0, GENES, n).astype(np.int16),
        "cell_id": rng.integers(0, 1000, n),
        "quality": rng.uniform(0, 40, n).astype(np.float32),
        "__null_dask_index__": np.arange(n),
        "z": rng.uniform(-5, 5, n),
    }
    tables = []
    bounds = np.linspace(0, n, parts + 1).astype(int)
    for part in range(parts):
        s = slice(bounds[part], bounds[part + 1])
        arrays = {k: pa.array(v[s]) for k, v in cols.items()}
        arrays["gene"] = pa.DictionaryArray.from_arrays(arrays["gene"], names)
        table = pa.table(arrays).cast(target.remove_metadata())
        table = table.replace_schema_metadata(schema.metadata)
        pq.write_table(table, src / f"part.{part}.parquet")
        tables.append(table)
    return pa.concat_tables(tables)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("lod") / "pts.zarr"
    table = write_store(path)
    return path, table


def _element(path):
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.spatial.elements import list_elements

    root = open_ome_zarr(str(path))
    (el,) = list(list_elements(root, ("points",)))
    return root, el


@pytest.fixture(scope="module")
def index(store):
    from napari_ozx.ngff.spatial.points_index import build_index

    root, el = _element(store[0])
    return build_index(root, el, tiles=(30, 50))  # 10 x 10 unit tiles


def _truth(table, y0, x0, y1, x1, genes=None):
    """The store's points in the rectangle (float32 coordinates, as held), as a set of
    rows (y, x, z, gene, cell_id, quality)."""
    y = table.column("y").to_numpy().astype(np.float32)
    x = table.column("x").to_numpy().astype(np.float32)
    gene = np.asarray(table.column("gene").to_pylist(), dtype=object)
    inside = (y >= y0) & (y <= y1) & (x >= x0) & (x <= x1)
    if genes is not None:
        inside &= np.isin(gene, list(genes))
    z = table.column("z").to_numpy().astype(np.float32)
    cell = table.column("cell_id").to_numpy()
    q = table.column("quality").to_numpy()
    return {
        (float(y[i]), float(x[i]), float(z[i]), str(gene[i]), int(cell[i]), float(q[i]))
        for i in np.flatnonzero(inside)
    }


def _held(view):
    f = view.features
    return {
        (float(c[0]), float(c[1]), float(z), str(g), int(cid), float(q))
        for c, z, g, cid, q in zip(
            view.coords, f["z"], f["gene"].astype(str), f["cell_id"], f["quality"], strict=True
        )
    }


RECTS = [
    (100.0, 200.0, 150.0, 260.0),  # on tile edges (10-unit tiles, lattice points on them)
    (95.0, 195.0, 105.0, 205.0),  # across four tiles' corner
    (0.0, 0.0, 20.0, 30.0),  # the store's corner
    (280.0, 470.0, H, W),  # the opposite corner, its edges included
    (-50.0, -50.0, 1000.0, 1000.0),  # everything, and beyond
    (400.0, 600.0, 500.0, 700.0),  # outside: nothing
    (123.4, 56.7, 123.4, 56.7),  # a point-sized rectangle
]


@pytest.mark.parametrize("rect", RECTS)
def test_view_holds_exactly_the_points_in_the_rectangle(store, index, rect):
    """Every point of the element in the rectangle, each once, with its features (z of
    every value: z is a feature, not a slice), and no other."""
    from napari_ozx.layers.spatial.lod import LodPoints

    lod = LodPoints(index, "transcripts", view_max=N)
    view = lod.view(rect, margin=0.0)
    assert view.positions is not None
    want = _truth(store[1], *rect)
    assert len(view.coords) == len(want)
    assert _held(view) == want


def test_margin_holds_the_points_around_the_view(store, index):
    from napari_ozx.layers.spatial.lod import LodPoints

    lod = LodPoints(index, "transcripts", view_max=N)
    view = lod.view((100.0, 100.0, 140.0, 180.0), margin=0.25)
    assert view.rect == (90.0, 80.0, 150.0, 200.0)
    assert _held(view) == _truth(store[1], 90.0, 80.0, 150.0, 200.0)


def test_z_is_a_feature_every_z_in_view(store, index):
    """Points of every z in the rectangle are held (none dropped as out of slice)."""
    from napari_ozx.layers.spatial.lod import LodPoints

    view = LodPoints(index, "t", view_max=N).view((0.0, 0.0, H, W), margin=0.0)
    z = np.asarray(view.features["z"])
    assert len(z) == N
    assert z.min() < -4.9 and z.max() > 4.9


def test_too_many_points_leave_the_view_to_the_overview(index):
    from napari_ozx.layers.spatial.lod import LodPoints

    lod = LodPoints(index, "t", view_max=1000)
    assert lod.view((0.0, 0.0, H, W)).positions is None
    assert len(lod.view((0.0, 0.0, H, W)).coords) == 0
    small = lod.view((100.0, 100.0, 110.0, 110.0), margin=0.0)
    assert small.positions is not None and 0 < len(small.coords) <= 1000


def test_categories_filter_the_points_and_the_overview(store, index):
    """Hidden categories are not in the data; the overview counts only the kept ones."""
    from napari_ozx.layers.spatial.lod import LodPoints

    lod = LodPoints(index, "t", view_max=N)
    total = lod.overview_levels()[0].sum()
    assert total == N
    kept = lod.set_filter("gene", ["gene03", "gene07"])
    rect = (50.0, 50.0, 250.0, 400.0)
    view = lod.view(rect, margin=0.0)
    assert _held(view) == _truth(store[1], *rect, genes={"gene03", "gene07"})
    genes = np.asarray(store[1].column("gene").to_pylist(), dtype=object)
    assert kept == int(np.isin(genes, ["gene03", "gene07"]).sum())
    levels = lod.overview_levels()
    assert levels[0].sum() == kept
    assert all(np.isclose(lv.sum() * 4**k, kept) for k, lv in enumerate(levels))
    assert "gene03" in lod.describe()
    lod.set_filter("gene", None)
    assert lod.overview_levels()[0].sum() == N


def test_colours_follow_the_gene_palette(index):
    """Points are coloured by the element's feature_key in spatialdata-plot's palette,
    the same colour for a gene in every view."""
    from napari_ozx.layers.categories.palettes import default_palette
    from napari_ozx.layers.spatial.lod import LodPoints

    lod = LodPoints(index, "t", view_max=N)
    palette = default_palette(GENES).astype(np.float32)
    for rect in RECTS[:3]:
        view = lod.view(rect, margin=0.0)
        codes = view.features["gene"].cat.codes.to_numpy()
        np.testing.assert_array_equal(view.colours, palette[codes])
    assert list(index.categories["gene"]) == [f"gene{i:02d}" for i in range(GENES)]


def test_overview_density_counts_each_point_in_its_pixel(store, index):
    table = store[1]
    y = table.column("y").to_numpy().astype(np.float32)
    x = table.column("x").to_numpy().astype(np.float32)
    img = index.density(25.0)
    assert img.shape == (12, 20)
    iy = np.minimum(((y - 0) / 25.0).astype(int), 11)
    ix = np.minimum(((x - 0) / 25.0).astype(int), 19)
    want = np.zeros((12, 20))
    np.add.at(want, (iy, ix), 1)
    np.testing.assert_array_equal(img, want)


def test_reader_opens_a_large_element_as_overview_and_view(store, monkeypatch):
    """Above the threshold, the reader hands napari the overview (a multiscale image)
    and an empty 2D Points layer with the element's features; at or below it, one
    Points layer of every point as before."""
    from napari_ozx import _compat
    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.layers.spatial import lod

    monkeypatch.setattr(lod, "LOD_MIN_POINTS", N - 1)
    monkeypatch.setattr(_compat, "napari_qt_loaded", lambda: False)  # headless: built now
    said = []
    lds = read_layer_data(str(store[0]), report=lambda w, e: said.append(str(e)))
    kinds = [ld[2] for ld in lds]
    assert kinds == ["image", "points"]
    levels, kw, _ = lds[0]
    assert lds[1][1]["metadata"][lod.LOD_KEY].ready
    assert kw["multiscale"] and levels[0].sum() == N
    coords, pkw, _ = lds[1]
    assert coords.shape == (0, 2) and pkw["ndim"] == 2
    assert list(pkw["features"].columns) == ["gene", "cell_id", "quality", "z"]
    assert any("level of detail" in s for s in said)
    monkeypatch.setattr(lod, "LOD_MIN_POINTS", N)
    (plain,) = read_layer_data(str(store[0]), report=lambda w, e: None)
    assert plain[2] == "points" and len(plain[0]) == N


def test_in_a_window_the_index_is_built_after_the_layers_are_in(store, monkeypatch):
    """With napari's Qt front end, the reader hands napari the layers without reading the
    points (the overview's extent from the parquet statistics); the index is built
    later (by the camera hook, off the GUI thread) and then gives the same views."""
    from napari_ozx import _compat
    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.layers.spatial import lod

    monkeypatch.setattr(lod, "LOD_MIN_POINTS", N - 1)
    monkeypatch.setattr(_compat, "napari_qt_loaded", lambda: True)
    lds = read_layer_data(str(store[0]), report=lambda w, e: None)
    view = lds[1][1]["metadata"][lod.LOD_KEY]
    assert not view.ready and view.build is not None
    assert view.extent == (0.0, 0.0, H, W)
    assert lds[0][0][0].sum() == 0  # nothing counted yet
    assert len(view.view((0.0, 0.0, 10.0, 10.0)).coords) == 0
    view.attach(view.build())
    assert view.overview_levels()[0].sum() == N
    rect = (100.0, 200.0, 150.0, 260.0)
    assert _held(view.view(rect, margin=0.0)) == _truth(store[1], *rect)
