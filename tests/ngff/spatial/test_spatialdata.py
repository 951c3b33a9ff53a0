"""SpatialData stores written by spatialdata 0.7.3 itself (``make_fixtures.py``): points,
shapes (circles, polygons with a MultiPolygon and a hole, format 0.1), tables on shapes
and labels, a points-only store, ``validate`` and ``info``.

Expected values come from the files through pyarrow and shapely directly (what
spatialdata wrote), never from the code under test.
"""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from tests._support.paths import TESTS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
shapely = pytest.importorskip("shapely")

DATA = TESTS / "ngff" / "spatial" / "data"
BLOBS = DATA / "blobs.zarr"
POINTS_ONLY = DATA / "points_only.zarr"
LEGACY = DATA / "legacy_shapes.zarr"


def _read(path, report=None):
    from napari_ozx.layers.reading import read_layer_data

    messages: list[str] = []

    def keep(what, err):
        messages.append(f"{what}: {err}")

    lds = read_layer_data(str(path), report=report or keep)
    return {
        kw["name"] if isinstance(kw.get("name"), str) else kind: (d, kw, kind)
        for d, kw, kind in lds
    }, messages


@pytest.fixture(scope="module", params=["0.7.3", "0.8.0"])
def blobs(request):
    """blobs.zarr as spatialdata 0.7.3 and 0.8.0 wrote it (the same seeded values; the
    expected values below come from 0.7.3's files)."""
    return _read(BLOBS if request.param == "0.7.3" else DATA / "sd080" / "blobs.zarr")


def _world(kw, coords):
    m = np.asarray(kw["affine"])
    c = np.asarray(coords, dtype=float)
    return c @ m[:-1, :-1].T + m[:-1, -1]


def test_the_stores_were_written_by_spatialdata_073():
    assert json.loads((DATA / "VERSION.json").read_text())["spatialdata"] == "0.7.3"
    root = json.loads((BLOBS / "zarr.json").read_text())["attributes"]
    assert root["spatialdata_attrs"]["spatialdata_software_version"] == "0.7.3"


# ------------------------------------------------------------------ 1. points


def test_points_every_point_placed_with_features_and_gene_colours(blobs):
    """Every point of ``points.parquet`` in a Points layer, in (y, x),
    placed by the element's translation into "global" (where the image is), the other
    columns as features, one colour per gene."""
    layers, _ = blobs
    raw = pq.read_table(BLOBS / "points" / "transcripts" / "points.parquet").to_pandas()
    data, kw, kind = layers["transcripts"]
    assert kind == "points" and data.shape == (len(raw), 2)
    np.testing.assert_array_equal(data, raw[["y", "x"]].to_numpy())
    # spatialdata's translation [1.5, -0.5] on axes (x, y)
    np.testing.assert_allclose(_world(kw, data), np.c_[raw["y"] - 0.5, raw["x"] + 1.5])
    feats = kw["features"]
    assert list(feats["gene"].astype(str)) == list(raw["gene"].astype(str))
    np.testing.assert_array_equal(feats["cell_id"], raw["cell_id"])
    colours = np.asarray(kw["face_color"])
    by_gene = {
        g: {tuple(c) for c in colours[(raw["gene"] == g).to_numpy()]} for g in set(raw["gene"])
    }
    assert all(len(c) == 1 for c in by_gene.values())  # one colour per gene ...
    assert len({next(iter(c)) for c in by_gene.values()}) == len(by_gene)  # ... each its own
    # 3D: z first, as napari orders axes
    raw3 = pq.read_table(BLOBS / "points" / "transcripts3d" / "points.parquet").to_pandas()
    data3, kw3, _ = layers["transcripts3d"]
    np.testing.assert_array_equal(data3, raw3[["z", "y", "x"]].to_numpy())
    assert tuple(kw3["axis_labels"]) == ("z", "y", "x")


def test_points_and_image_share_the_world(blobs):
    """The image is scaled 2x into "global"; the points are placed in "global" too, by
    their own transformation, as napari shows them."""
    from napari.components import ViewerModel

    layers, _ = blobs
    assert tuple(layers["image"][1]["scale"]) == (2.0, 2.0)
    data, kw, _ = layers["transcripts"]
    pts = ViewerModel().add_points(data, **kw)
    np.testing.assert_allclose(pts.data_to_world(data[7]), data[7] + (-0.5, 1.5))


# ------------------------------------------------------------------ 2. shapes


def test_circles_become_points_sized_by_their_diameter(blobs):
    layers, _ = blobs
    raw = pq.read_table(BLOBS / "shapes" / "spots" / "shapes.parquet").to_pandas()
    xy = shapely.get_coordinates(shapely.from_wkb(raw["geometry"]))
    data, kw, kind = layers["spots"]
    assert kind == "points"
    np.testing.assert_array_equal(data, xy[:, ::-1])
    np.testing.assert_allclose(kw["size"], 2 * raw["radius"])
    np.testing.assert_array_equal(kw["features"]["instance_id"], raw.index)  # spot_id
    assert list(kw["features"]["kind"]) == list(raw["kind"])
    # in napari the size is in data units: scaled 2x like the positions
    from napari.components import ViewerModel

    layer = ViewerModel().add_points(data, **kw)
    np.testing.assert_allclose(layer.data_to_world(data[0]), 2 * data[0])


def test_polygons_keep_every_part_and_hole(blobs):
    """A MultiPolygon keeps both parts (napari-spatialdata keeps the largest), a hole is
    kept as its own ring; each ring carries its geometry's columns."""
    layers, _ = blobs
    raw = pq.read_table(BLOBS / "shapes" / "cells_poly" / "shapes.parquet").to_pandas()
    geoms = shapely.from_wkb(raw["geometry"])
    rings, kw, kind = layers["cells_poly"]
    assert kind == "shapes"
    n_rings = sum(len(shapely.get_rings(p)) for g in geoms for p in shapely.get_parts(g))
    assert len(rings) == n_rings == 6
    f = kw["features"]
    multi = int(np.flatnonzero(shapely.get_type_id(geoms) == 6)[0])
    assert sorted(np.asarray(f["part"])[np.asarray(f["instance_id"]) == multi]) == [0, 1]
    assert kw["shape_type"].count("path") == int(np.sum(f["hole"])) == 1
    assert list(f["label"]) == [raw["label"][i] for i in f["instance_id"]]
    # vertices as stored (closing vertex dropped), (y, x)
    first = shapely.get_coordinates(shapely.get_exterior_ring(geoms[0]))[:-1]
    np.testing.assert_array_equal(rings[0], first[:, ::-1])


def test_many_polygons_become_one_outlines_layer_said_once(monkeypatch):
    """Above the Shapes layer's limit the same rings are one Surface layer of their
    outlines (one triangle per edge, every vertex), said once in a message."""
    import napari_ozx.layers.spatial.elements as el

    monkeypatch.setattr(el, "SHAPES_LAYER_MAX", 2)
    layers, messages = _read(BLOBS)
    (_vertices, faces, _values), _kw, kind = layers["cells_poly"]
    assert kind == "surface"
    n = 4 + 3 + 4 + 4 + 3 + 4
    assert len(faces) == n  # every vertex starts one edge
    np.testing.assert_array_equal(faces[3, :2], [3, 0])  # the first ring closed
    assert sum("shown as one Surface layer" in m for m in messages) == 1


def test_legacy_shapes_format_01():
    """spatialdata's shapes format 0.1 (ragged coords / offset* / Index / radius)."""
    layers, _messages = _read(LEGACY)
    data, kw, kind = layers["circles"]
    assert kind == "points"
    np.testing.assert_array_equal(data, [[3, 2], [12, 10], [5, 20]])
    np.testing.assert_allclose(kw["size"], [2, 4, 6])
    rings, kw, kind = layers["polygons"]
    assert kind == "shapes" and len(rings) == 3  # a triangle and a MultiPolygon of two
    assert list(kw["features"]["part"]) == [0, 0, 1]


def test_without_pyarrow_one_message_names_the_extra(monkeypatch):
    """No pyarrow -> one message naming napari-ozx[spatialdata]; the
    image and labels still open."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    layers, messages = _read(BLOBS)
    hits = [m for m in messages if "napari-ozx[spatialdata]" in m]
    assert len(hits) == 1, messages
    assert [k for _, _, k in layers.values()].count("labels") == 2


# ------------------------------------------------------------- 4./5. tables


def test_tables_give_each_element_its_own_rows(blobs):
    """One table annotates labels ``cells`` and ``nuclei`` whose instance ids overlap:
    each gets its own rows; ``spot_table`` annotates the circles, by instance id."""
    layers, _ = blobs
    cells, nuclei = layers["cells"][1]["features"], layers["nuclei"][1]["features"]
    assert list(cells["index"]) == list(nuclei["index"]) == [1, 2, 3, 4, 5, 6]
    assert list(cells["area"]) == [5, 15, 25, 35, 45, 55]
    assert list(nuclei["area"]) == [65, 75, 85, 95, 105, 115]
    spots = layers["spots"][1]["features"]
    ids = np.asarray(spots["instance_id"])
    np.testing.assert_array_equal(spots["counts"], (ids - 100) * 3)


# -------------------------------------------------- 6. every element, or one message


def test_points_only_store_opens(tmp_path):
    """A store with only points opens as a Points layer, no "no OME-Zarr keys"."""
    import warnings

    from napari_ozx._reader import get_reader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lds = get_reader(str(POINTS_ONLY))(str(POINTS_ONLY))
    assert [k for _, _, k in lds] == ["points"]
    assert (
        len(lds[0][0])
        == pq.read_metadata(
            POINTS_ONLY / "points" / "transcripts" / "points.parquet" / "part.0.parquet"
        ).num_rows
    )
    assert not [w for w in caught if "OME-Zarr keys" in str(w.message)]


def test_an_element_that_cannot_be_shown_is_named(tmp_path):
    store = tmp_path / "blobs.zarr"
    shutil.copytree(BLOBS, store)
    shutil.rmtree(store / "points" / "transcripts" / "points.parquet")
    layers, messages = _read(store)
    assert "transcripts" not in layers and "transcripts3d" in layers
    hits = [m for m in messages if "'transcripts'" in m]
    assert len(hits) == 1 and "points.parquet is missing" in hits[0]


# ------------------------------------------------------------ 7. validate and info


def test_validate_names_spatialdata_and_checks_its_elements(tmp_path):
    from napari_ozx.ngff.validate.walk import validate

    ok = validate(POINTS_ONLY)
    assert ok.ok, [str(f) for f in ok.findings]
    (store,) = [f for f in ok.findings if f.code == "spatialdata-store"]
    assert "format 0.2" in store.message and "spatialdata 0.7.3" in store.message
    assert not [f for f in ok.findings if f.code == "not-ome"]
    # the raster elements are checked as OME-Zarr images, points for spatialdata's keys
    rep = validate(BLOBS)
    assert {f.member for f in rep.findings if f.code == "version-deviation"} >= {
        "images/raw",
        "labels/cells",
    }
    broken = tmp_path / "p.zarr"
    shutil.copytree(POINTS_ONLY, broken)
    doc = json.loads((broken / "points" / "transcripts" / "zarr.json").read_text())
    del doc["attributes"]["encoding-type"]
    (broken / "points" / "transcripts" / "zarr.json").write_text(json.dumps(doc))
    (broken / "zarr.json").write_text(
        (broken / "zarr.json").read_text().replace('"ngff:points"', '"x"')
    )
    bad = validate(broken, metadata_only=True)
    assert [f.code for f in bad.findings if f.severity == "error"] == ["spatialdata-points"]


def test_info_json_lists_every_element(capsys):
    from napari_ozx.__main__ import main

    assert main(["info", "--json", str(BLOBS)]) in (0, None)
    report = json.loads(capsys.readouterr().out)
    sd = report["spatialdata"]
    assert sd["version"] == "0.2"
    got = {(e["kind"], e["name"]): e for e in sd["elements"]}
    assert set(got) == {
        ("images", "raw"),
        ("labels", "cells"),
        ("labels", "nuclei"),
        ("shapes", "cells_poly"),
        ("shapes", "spots"),
        ("points", "transcripts"),
        ("points", "transcripts3d"),
        ("tables", "table"),
        ("tables", "spot_table"),
    }
    assert got[("points", "transcripts")]["points"] == 300
    assert got[("shapes", "spots")]["shapes"] == 12
    assert got[("images", "raw")]["shape"] == [2, 32, 32]
    assert got[("points", "transcripts")]["coordinate_systems"] == ["global"]
    assert got[("tables", "table")]["annotates"] == ["cells", "nuclei"]
    assert not any("not OME-Zarr" in p["error"] for p in report["problems"])


def test_a_store_is_re_placed_in_another_coordinate_system(tmp_path):
    """Every layer of a store moves to another coordinate system by its transforms; an
    element without one is hidden (it belongs to no place there, as in spatialdata),
    named in a message."""
    from napari.components import ViewerModel

    from napari_ozx.layers.spatial.placing import place_spatialdata

    store = tmp_path / "blobs.zarr"
    shutil.copytree(BLOBS, store)
    root = json.loads((store / "zarr.json").read_text())
    root.pop("consolidated_metadata")
    (store / "zarr.json").write_text(json.dumps(root))

    def add_system(rel: str, scale: list[float], ome: bool) -> None:
        doc = json.loads((store / rel / "zarr.json").read_text())
        attrs = doc["attributes"]["ome"]["multiscales"][0] if ome else doc["attributes"]
        t = json.loads(json.dumps(attrs["coordinateTransformations"][0]))
        t.update(type="scale", scale=scale)
        t.pop("translation", None)
        t["output"]["name"] = "aligned"
        attrs["coordinateTransformations"].append(t)
        (store / rel / "zarr.json").write_text(json.dumps(doc))

    add_system("images/raw", [1.0, 3.0, 3.0], ome=True)
    add_system("points/transcripts", [3.0, 3.0], ome=False)
    layers, _ = _read(store)
    vm = ViewerModel()
    added = {}
    for data, kw, kind in layers.values():
        got = getattr(vm, f"add_{kind}")(data, **kw)
        for ly in got if isinstance(got, list) else [got]:
            added[ly.name] = ly
    messages: list[str] = []
    moved = place_spatialdata(
        list(vm.layers), str(store), "aligned", lambda w, e: messages.append(f"{w}: {e}")
    )
    assert moved == len(vm.layers)
    pts = added["transcripts"]
    np.testing.assert_allclose(pts.data_to_world(pts.data[5]), 3 * pts.data[5])
    np.testing.assert_allclose(added["dapi"].data_to_world((4, 5)), (12, 15))
    assert any(
        "'spots'" in m and "no transformation to coordinate system 'aligned'" in m for m in messages
    )
    assert not added["spots"].visible and pts.visible
