"""SpatialData points at the scale of real data: what the reader hands
napari for a large points element, and that napari's layer of it stays a normal,
editable Points layer.

The store is generated with pyarrow in the layout of the small store spatialdata 0.7.3
wrote (``data/points_only.zarr``: its group documents and its parquet schema, dask's
index column and pandas metadata included), in several ``part.N.parquet`` files. The
time and memory figures are measured by ``benchmarks/bench_spatialdata.py``, not here.
"""

from __future__ import annotations

import gc
import shutil

import numpy as np
import pytest

from tests._support.paths import TESTS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("shapely")

SMALL = TESTS / "ngff" / "spatial" / "data" / "points_only.zarr"
PARQUET = ("points", "transcripts", "points.parquet")
N, PARTS, GENES = 30_000, 3, 40


def _write_store(path, extra=None):
    """*SMALL* with its points replaced by N generated rows in PARTS files, in the small
    store's schema (``extra``: more columns, name -> values)."""
    shutil.copytree(SMALL, path)
    src = path.joinpath(*PARQUET)
    schema = pq.read_schema(src / "part.0.parquet")
    shutil.rmtree(src)
    src.mkdir()
    rng = np.random.default_rng(1)
    names = pa.array([f"gene{i:02d}" for i in range(GENES)])
    gene_type = pa.dictionary(pa.int16(), pa.string())
    target = schema.set(schema.get_field_index("gene"), pa.field("gene", gene_type))
    per = N // PARTS
    for part in range(PARTS):
        start = part * per
        cols = {
            "x": pa.array(rng.uniform(0, 500, per)),
            "y": pa.array(rng.uniform(0, 300, per)),
            "gene": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, GENES, per).astype(np.int16)), names
            ),
            "cell_id": pa.array(rng.integers(0, 1000, per)),
            "quality": pa.array(rng.uniform(0, 40, per).astype(np.float32)),
            "__null_dask_index__": pa.array(np.arange(start, start + per)),
        }
        table = pa.table(cols).cast(target.remove_metadata())
        for name, values in (extra or {}).items():
            table = table.append_column(name, pa.array(values[start : start + per]))
        table = table.replace_schema_metadata(schema.metadata)
        pq.write_table(table, src / f"part.{part}.parquet")
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    flags = np.arange(N) % 3 == 0
    return _write_store(tmp_path_factory.mktemp("scale") / "pts.zarr", {"__flag__": flags})


def _read(path):
    from napari_ozx.layers.reading import read_layer_data

    lds = read_layer_data(str(path), report=lambda w, e: None)
    assert len(lds) == 1
    return lds[0]


def test_every_point_and_every_real_column(store):
    """Every row, every column spatialdata shows as a column (the genes stay a
    categorical), not dask's index column: spatialdata reads it back as the index
    (it is listed in the pandas metadata's ``index_columns``), a row number. A column
    whose name merely starts with ``__`` is data and stays."""
    raw = pq.read_table(store.joinpath(*PARQUET))
    data, kw, kind = _read(store)
    assert kind == "points" and data.shape == (N, 2)
    np.testing.assert_array_equal(data[:, 0], raw.column("y").to_numpy())
    np.testing.assert_array_equal(data[:, 1], raw.column("x").to_numpy())
    f = kw["features"]
    assert list(f.columns) == ["gene", "cell_id", "quality", "__flag__"]
    assert str(f["gene"].dtype) == "category"
    assert f["cell_id"].dtype == np.int64 and f["quality"].dtype == np.float32
    assert list(f["gene"].astype(str)) == raw.column("gene").to_pylist()
    np.testing.assert_array_equal(f["__flag__"], np.arange(N) % 3 == 0)
    # the coordinates column by column: napari's extent (a min and max per axis, taken
    # several times while it builds the layer) then reads contiguous memory
    assert data.flags.f_contiguous


def test_an_index_column_not_listed_as_index_is_data(tmp_path):
    """Without pandas metadata the generated names are the index; with it, only the
    columns it lists."""
    from napari_ozx.ngff.spatial.points import unnamed_index_columns

    names = ["x", "__null_dask_index__", "__index_level_0__", "__kept__"]
    bare = pa.schema([(n, pa.int64()) for n in names])
    assert unnamed_index_columns(bare) == {"__null_dask_index__", "__index_level_0__"}
    listed = bare.with_metadata({b"pandas": b'{"index_columns": ["__index_level_0__"]}'})
    assert unnamed_index_columns(listed) == {"__index_level_0__"}


@pytest.fixture(scope="module")
def layer(store):
    from napari.components import ViewerModel

    data, kw, _ = _read(store)
    vm = ViewerModel()
    pts = vm.add_points(data, **kw)
    return vm, pts, data, kw


def test_napari_keeps_the_coordinates_and_small_per_point_arrays(layer):
    """napari keeps the reader's coordinates as they are (no copy), every point shown,
    and one float32 size and border width per point (what vispy draws with), not
    float64 / int64."""
    _, pts, data, kw = layer
    assert pts.data is data and len(pts.data) == N and pts.shown.all()
    assert pts.size.dtype == np.float32 and pts.border_width.dtype == np.float32
    assert float(pts.size[0]) == pytest.approx(float(kw["size"]))
    # the gene colouring: one colour per gene, the legend in the metadata
    legend = kw["metadata"]["napari_ozx_spatialdata"]["legend"]
    genes = np.asarray(pts.features["gene"].astype(str))
    for g in ("gene00", "gene07"):
        np.testing.assert_allclose(
            pts.face_color[genes == g], [legend[g]] * int(np.sum(genes == g))
        )


def test_the_layer_stays_editable(layer):
    """Add, move, recolour and delete points on the layer built from the reader's data:
    features, sizes and colours follow, the genes stay a categorical."""
    _, pts, _, _ = layer
    n = len(pts.data)
    pts.add([[10.0, 20.0], [11.0, 21.0]])
    assert len(pts.data) == len(pts.features) == len(pts.size) == len(pts.face_color) == n + 2
    np.testing.assert_array_equal(pts.data[-1], [11.0, 21.0])
    assert str(pts.features["gene"].dtype) == "category"
    # move: the data in place, then as a new array
    moved = np.array(pts.data)
    moved[0] += 5.0
    pts.data = moved
    np.testing.assert_array_equal(pts.data[0], moved[0])
    # recolour the selection
    pts.selected_data = {0, n}
    pts.current_face_color = "red"
    np.testing.assert_allclose(pts.face_color[[0, n]], [[1, 0, 0, 1], [1, 0, 0, 1]])
    pts.size[1] = 7.5
    assert pts.size[1] == 7.5
    # delete
    gene_of_2 = pts.features["gene"].iloc[2]
    pts.selected_data = {0, 1}
    pts.remove_selected()
    assert len(pts.data) == len(pts.features) == len(pts.size) == n
    assert pts.features["gene"].iloc[0] == gene_of_2


def test_memory_of_the_handed_arrays_goes_back_when_napari_is_done(store, monkeypatch):
    """napari copies the features and converts the colours; when the reader's arrays
    die after napari built its layer, the allocators give their memory back
    (``release_unused``: arrow's pool and the C heap)."""
    from napari.components import ViewerModel

    import napari_ozx.ngff.spatial.files as files

    calls: list[int] = []
    monkeypatch.setattr(files, "release_unused", lambda: calls.append(1))

    def build():  # the layer data die with this frame, as in napari's reader path
        data, kw, _ = _read(store)
        pts = ViewerModel().add_points(data, **kw)
        return pts, len(calls)

    pts, before = build()
    gc.collect()
    assert len(calls) == before + 2  # the features frame and the colour array
    assert len(pts.features) == N  # napari's copy is unaffected
    # on glibc the heap's free pages are handed back by malloc_trim
    import platform

    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert files._malloc_trim_function() is not None
        assert isinstance(files.malloc_trim(), bool)


def test_the_same_points_from_a_single_file_ozx(store, tmp_path):
    """Inside a ``.ozx`` (read through the store, not memory-mapped) the points and
    their features are those of the directory."""
    import zipfile

    files = sorted(p for p in store.rglob("*") if p.is_file())
    files.sort(key=lambda p: (p.name != "zarr.json", len(p.relative_to(store).parts)))
    ozx = tmp_path / "pts.ozx"
    with zipfile.ZipFile(ozx, "w", zipfile.ZIP_STORED) as z:
        for p in files:
            z.write(p, p.relative_to(store).as_posix())
    data, kw, _ = _read(ozx)
    ref, ref_kw, _ = _read(store)
    np.testing.assert_array_equal(data, ref)
    assert kw["features"].equals(ref_kw["features"])
