"""Many polygons (100,000 open without freezing napari): above
``SHAPES_LAYER_MAX`` rings a polygons element opens as one Surface layer of its outlines,
one thin triangle per edge. Faithful: every ring of every part, every vertex and edge,
holes as outlines, features per polygon reachable, placed by the scene dock like any
other layer.

The stores are spatialdata 0.7.3's ``blobs.zarr`` (its shapes element's group document
and GeoParquet metadata) with the polygons replaced by ones written here with pyarrow and
shapely; expected values come from those geometries through shapely, never from the code
under test.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests._support.paths import TESTS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
shapely = pytest.importorskip("shapely")

BLOBS = TESTS / "ngff" / "spatial" / "data" / "blobs.zarr"
N_SIMPLE = 600  # more rings than SHAPES_LAYER_MAX


def _triangle_areas(tri: np.ndarray) -> np.ndarray:
    """The areas of (n, 3, 2) triangles (numpy 2 refuses np.cross on 2-vectors)."""
    a, b = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    return np.abs(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]) / 2


def _blob_rings(rng, n: int, centre_spread: float = 500.0):
    """*n* star-shaped (often concave) rings of 5 to 14 vertices, closed."""
    out = []
    for _ in range(n):
        k = int(rng.integers(5, 15))
        ang = np.sort(rng.uniform(0, 2 * np.pi, k))
        r = rng.uniform(2, 6) * rng.uniform(0.4, 1.0, k)
        c = rng.uniform(0, centre_spread, 2)
        ring = np.stack([c[0] + r * np.cos(ang), c[1] + r * np.sin(ang)], axis=1)
        out.append(np.vstack([ring, ring[:1]]))
    return out


def _square(x0: float, y0: float, s: float, clockwise: bool = False):
    pts = [(x0, y0), (x0 + s, y0), (x0 + s, y0 + s), (x0, y0 + s)]
    return pts[::-1] if clockwise else pts


def _write_store(tmp_path, name: str, geoms) -> object:
    """blobs.zarr with its polygons element replaced by *geoms* (and a ``label`` column),
    in spatialdata's GeoParquet layout (the element's own geo metadata)."""
    store = tmp_path / name
    shutil.copytree(BLOBS, store)
    root = json.loads((store / "zarr.json").read_text())
    root.pop("consolidated_metadata", None)
    (store / "zarr.json").write_text(json.dumps(root))
    path = store / "shapes" / "cells_poly" / "shapes.parquet"
    schema = pq.read_schema(path)
    geo = json.loads(schema.metadata[b"geo"])
    types = sorted({shapely.GeometryType(int(t)).name.title() for t in shapely.get_type_id(geoms)})
    geo["columns"]["geometry"]["geometry_types"] = [
        "MultiPolygon" if t == "Multipolygon" else t for t in types
    ]
    geo["columns"]["geometry"]["bbox"] = [float(v) for v in shapely.total_bounds(geoms)]
    table = pa.table(
        {
            "area_um2": pa.array(shapely.area(geoms)),
            "label": pa.array([f"cell{i}" for i in range(len(geoms))]),
            "geometry": pa.array(shapely.to_wkb(geoms), type=schema.field("geometry").type),
        }
    ).replace_schema_metadata({b"geo": json.dumps(geo).encode()})
    pq.write_table(table, path)
    return store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("polygons")
    rng = np.random.default_rng(7)
    simple = np.array([shapely.Polygon(r) for r in _blob_rings(rng, N_SIMPLE)], dtype=object)
    holed = shapely.Polygon(
        _square(1000, 1000, 60), holes=[_square(1010, 1010, 10, True), _square(1030, 1030, 20)]
    )
    multi = shapely.MultiPolygon(
        [
            shapely.Polygon(_square(1200, 1000, 30), holes=[_square(1210, 1010, 5, True)]),
            shapely.Polygon(_square(1300, 1000, 20)),
            shapely.Polygon(_square(1400, 1000, 10)),
        ]
    )
    # a U: not star-shaped (no point inside sees both arms' tops)
    u = shapely.Polygon(
        [
            (1500, 1000),
            (1530, 1000),
            (1530, 1030),
            (1520, 1030),
            (1520, 1010),
            (1510, 1010),
            (1510, 1030),
            (1500, 1030),
        ]
    )
    mixed = np.concatenate([simple[:300], np.array([holed, multi, u], dtype=object), simple[300:]])
    return {
        "simple": (_write_store(tmp, "simple.zarr", simple), simple),
        "mixed": (_write_store(tmp, "mixed.zarr", mixed), mixed),
    }


def _open(store):
    from napari_ozx.layers.reading import read_layer_data

    messages: list[str] = []
    lds = read_layer_data(str(store), report=lambda w, e: messages.append(f"{w}: {e}"))
    (layer,) = [ld for ld in lds if ld[1].get("name") == "cells_poly"]
    return layer, messages


def _expected_rings(geoms):
    """(geometry, part, hole, ring (y, x) without its closing vertex) of every ring."""
    out = []
    for g, geom in enumerate(geoms):
        for p, part in enumerate(shapely.get_parts(geom)):
            for r, ring in enumerate(shapely.get_rings(part)):
                xy = shapely.get_coordinates(ring)[:-1]
                out.append((g, p, r > 0, xy[:, ::-1]))
    return out


@pytest.mark.parametrize("case", ["simple", "mixed"])
def test_every_ring_vertex_and_edge_is_drawn(stores, case):
    """Every vertex of every ring of every part is a mesh vertex, in the rings' order,
    and each ring's edges (its closing edge included) are sides of triangles with an
    area (drawn), one triangle per edge; said once in a message, with how many rings
    were filled and how many drawn as outlines."""
    store, geoms = stores[case]
    ((vertices, faces, values), kw, kind), messages = _open(store)
    assert kind == "surface"
    rings = _expected_rings(geoms)
    rec = kw["metadata"]["napari_ozx_spatialdata"]
    offsets = np.asarray(rec["ring_offsets"])
    filled = np.asarray(rec["filled"])
    assert len(offsets) - 1 == len(rings) == rec["rings"] == len(filled)
    n_filled = int(filled.sum())
    (message,) = [m for m in messages if "one Surface layer" in m and "cells_poly" in m]
    assert f"{n_filled:,} filled" in message
    assert f"{len(rings) - n_filled:,} as outlines" in message
    n = int(offsets[-1])
    outline_vertices = int(np.sum(np.diff(offsets)[~filled]))
    assert len(faces) == n and len(vertices) == n + n_filled + outline_vertices == len(values)
    for i, (_g, _p, _h, yx) in enumerate(rings):
        a, b = offsets[i], offsets[i + 1]
        np.testing.assert_allclose(vertices[a:b], yx, rtol=1e-6)
        m = b - a
        np.testing.assert_array_equal(faces[a:b, 0], np.arange(a, b))
        np.testing.assert_array_equal(faces[a:b, 1], a + (np.arange(m) + 1) % m)
    tri = np.asarray(vertices, dtype=np.float64)[faces]
    area = _triangle_areas(tri)
    assert np.all(area > 0)
    assert np.all(faces[:, 2] >= n)  # the third corner is never another ring's vertex
    np.testing.assert_array_equal(values[:n], 1)  # bright at every ring vertex


def test_star_shaped_rings_are_filled_exactly_the_others_outlined(stores):
    """A filled ring's triangles fan from one point (value 0: transparent) and tile its
    polygon exactly: each lies inside it and their areas add up to its area, so nothing
    is drawn outside a polygon. Holes, the outer rings of polygons with holes and a ring
    that is not star-shaped (a U) keep one outline triangle per edge (value 1)."""
    store, geoms = stores["mixed"]
    ((vertices, faces, values), kw, _kind), _messages = _open(store)
    rec = kw["metadata"]["napari_ozx_spatialdata"]
    offsets = np.asarray(rec["ring_offsets"])
    filled = np.asarray(rec["filled"])
    rings = _expected_rings(geoms)
    tri = np.asarray(vertices, dtype=np.float64)[faces]
    for i, (g, p, hole, yx) in enumerate(rings):
        a, b = offsets[i], offsets[i + 1]
        polygon = shapely.Polygon(yx)
        if hole or len(shapely.get_rings(shapely.get_parts(geoms[g])[p])) > 1:
            assert not filled[i], i
        if filled[i]:
            assert len(set(faces[a:b, 2].tolist())) == 1  # one centre
            assert values[faces[a, 2]] == 0
            triangles = shapely.polygons(tri[a:b])
            assert np.all(shapely.contains(polygon.buffer(1e-3), triangles))
            drawn = shapely.Polygon(tri[a:b, 1])  # the ring as drawn (float32 vertices)
            np.testing.assert_allclose(shapely.area(triangles).sum(), drawn.area, rtol=1e-6)
        else:
            assert len(set(faces[a:b, 2].tolist())) == b - a  # a corner per edge
            np.testing.assert_array_equal(values[faces[a:b, 2]], 1)
    u = len(rings) - 1 - (N_SIMPLE - 300)  # the U: the last ring before the simple ones
    assert len(rings[u][3]) == 8 and not filled[u]
    assert filled.sum() > N_SIMPLE // 2  # most of the random star-shaped rings


def test_parts_holes_and_features_per_polygon(stores):
    """A MultiPolygon keeps every part, holes are rings of their own (``hole``), and each
    ring carries its polygon's columns and instance id (the layer's metadata)."""
    store, geoms = stores["mixed"]
    (_data, kw, _kind), _messages = _open(store)
    feats = kw["metadata"]["napari_ozx_spatialdata"]["ring_features"]
    rings = _expected_rings(geoms)
    np.testing.assert_array_equal(feats["instance_id"], [g for g, _p, _h, _yx in rings])
    np.testing.assert_array_equal(feats["part"], [p for _g, p, _h, _yx in rings])
    np.testing.assert_array_equal(feats["hole"], [h for _g, _p, h, _yx in rings])
    assert list(feats["label"]) == [f"cell{g}" for g, _p, _h, _yx in rings]
    multi = int(np.flatnonzero(shapely.get_type_id(geoms) == 6)[0])
    mine = np.asarray(feats["instance_id"]) == multi
    assert sorted(set(np.asarray(feats["part"])[mine])) == [0, 1, 2]
    assert int(np.sum(np.asarray(feats["hole"])[mine])) == 1
    np.testing.assert_allclose(np.asarray(feats["area_um2"])[mine], shapely.area(geoms[multi]))


def test_the_layer_opens_and_is_re_placed_by_the_scene_dock(stores):
    """napari takes the layer data as a Surface layer placed by the element's transform;
    ``place_spatialdata`` (the scene dock's function) moves it to another coordinate
    system by its affine."""
    from napari.components import ViewerModel

    from napari_ozx.layers.spatial.placing import place_spatialdata

    store, _geoms = stores["simple"]
    doc_path = store / "shapes" / "cells_poly" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    t = json.loads(json.dumps(doc["attributes"]["coordinateTransformations"][0]))
    t.update(type="scale", scale=[5.0, 5.0])
    t["output"]["name"] = "aligned"
    doc["attributes"]["coordinateTransformations"].append(t)
    doc_path.write_text(json.dumps(doc))
    try:
        ((data, kw, _kind), _messages) = _open(store)
        vm = ViewerModel()
        layer = vm.add_surface(data, **kw)
        first = np.asarray(data[0][0], dtype=np.float64)
        np.testing.assert_allclose(layer.data_to_world(first), 2 * first, rtol=1e-6)  # global
        moved = place_spatialdata([layer], str(store), "aligned", lambda w, e: None)
        assert moved == 1
        np.testing.assert_allclose(layer.data_to_world(first), 5 * first, rtol=1e-6)
        assert layer.metadata["napari_ozx_spatialdata"]["system"] == "aligned"
        np.testing.assert_allclose(vm.layers.extent.world[:, -1], layer.extent.world[:, -1])
    finally:
        doc["attributes"]["coordinateTransformations"].pop()
        doc_path.write_text(json.dumps(doc))


def test_polygons_without_holes_read_as_the_general_path_reads_them(stores, monkeypatch):
    """The shortcut for Polygons without holes gives the rings, parts and holes the
    general path (shapely's ``to_ragged_array``) gives."""
    import napari_ozx.ngff.spatial.shapes as shp
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.spatial.elements import list_elements

    store, _geoms = stores["simple"]

    def read():
        with open_ome_zarr(str(store)) as root:
            (el,) = [e for e in list_elements(root, ("shapes",)) if e.name == "cells_poly"]
            return shp.read_shapes(root, el)

    fast = read()
    monkeypatch.setattr(shp, "_simple_polygons", lambda shapely, geoms: None)
    general = read()
    for name in ("vertices", "ring_offsets", "geometry_of", "part_of", "ring_is_hole"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(general, name), err_msg=name)


def test_below_the_limit_holes_are_closed_outlines_with_a_width(stores, monkeypatch):
    """Under ``SHAPES_LAYER_MAX`` rings (napari's Shapes layer) a hole is a path back to
    its first vertex (all its edges), and the outlines have a width (drawn)."""
    import napari_ozx.layers.spatial.elements as el

    monkeypatch.setattr(el, "SHAPES_LAYER_MAX", 10_000)
    store, geoms = stores["mixed"]
    (rings, kw, kind), _messages = _open(store)
    assert kind == "shapes"
    expected = _expected_rings(geoms)
    assert len(rings) == len(expected)
    for ring, shape_type, (_g, _p, hole, yx) in zip(rings, kw["shape_type"], expected):
        assert shape_type == ("path" if hole else "polygon")
        np.testing.assert_allclose(ring, np.vstack([yx, yx[:1]]) if hole else yx)
    assert kw["edge_width"] > 0
    # a polygon with holes is not filled (napari's fill would cover its holes)
    with_holes = {(g, p) for g, p, hole, _yx in expected if hole}
    assert with_holes and len(with_holes) < len(expected)
    alpha = np.asarray(kw["face_color"])[:, 3]
    for a, (g, p, hole, _yx) in zip(alpha, expected, strict=True):
        assert (a == 0) == ((g, p) in with_holes), (g, p, hole)


def test_degenerate_rings_are_drawn_too():
    """A ring of two vertices, a ring whose vertices are collinear and a ring with a
    vertex at its centre (zero area) still get a triangle with an area per edge."""
    from napari_ozx.layers.spatial.polygons import ring_mesh

    rings = [
        [[0.0, 0.0], [0.0, 4.0]],
        [[10.0, 0.0], [10.0, 2.0], [10.0, 6.0]],
        [[20.0, 0.0], [22.0, 2.0], [24.0, 0.0], [22.0, -2.0], [22.0, 0.0]],
    ]
    vertices = np.concatenate(rings)
    offsets = np.cumsum([0] + [len(r) for r in rings])
    # every ring as an outline (each taken for a hole: never filled)
    mesh, faces, _values, filled = ring_mesh(vertices, offsets, np.ones(len(rings), bool))
    assert not filled.any()
    np.testing.assert_array_equal(mesh[: len(vertices)], vertices)
    tri = np.asarray(mesh, dtype=np.float64)[faces]
    area = _triangle_areas(tri)
    assert len(faces) == len(vertices) and np.all(area > 0)
    # the first two cannot be filled by a fan (flat triangles): outlines; the third's
    # vertex mean is its vertex (22, 0) but its centroid sees every edge: filled
    mesh, faces, _values, filled = ring_mesh(vertices, offsets)
    assert filled.tolist() == [False, False, True] and len(mesh) == len(vertices) + 5 + 1
    tri = np.asarray(mesh, dtype=np.float64)[faces]
    area = _triangle_areas(tri)
    assert np.all(area > 0)
