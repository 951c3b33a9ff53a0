"""Saving napari Shapes, Points and Labels layers into a SpatialData store
(:func:`napari_ozx.save_to_spatialdata`): the element's data and transformation, the
table of its features, the store's other files untouched, refusals changing nothing, and
napari-ozx reopening what it wrote where it was drawn."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

DATA = Path(__file__).resolve().parents[2] / "ngff" / "spatial" / "data"


def shapes_layer():
    from napari.layers import Shapes

    return Shapes(
        [
            np.array([[10.0, 10.0], [10.0, 40.0], [30.0, 40.0]]),
            np.array([[50.0, 50.0], [50.0, 70.0], [60.0, 70.0], [60.0, 50.0]]),
            np.array([[5.0, 60.0], [5.0, 80.0], [25.0, 80.0], [25.0, 60.0]]),
        ],
        shape_type=["polygon", "rectangle", "ellipse"],
        features=pd.DataFrame(
            {"kind": pd.Categorical(["tumour", "stroma", "tumour"]), "score": [1.0, 2.0, 3.5]}
        ),
        name="regions",
        scale=(2.0, 2.0),
        translate=(3.0, -4.0),
    )


def points_layer():
    from napari.layers import Points

    return Points(
        np.array([[1.0, 2.0], [3.0, 4.0], [5.5, 6.25]]),
        features={"gene": pd.Categorical(["ACTB", "CD3E", "ACTB"]), "n": [1, 2, 3]},
        name="marks",
        translate=(10.0, 20.0),
        rotate=90,
    )


def labels_layer(shape=(40, 50)):
    from napari.layers import Labels

    lab = np.zeros(shape, np.int32)
    lab[5:10, 5:12] = 1
    lab[20:30, 30:45] = 2
    return Labels(
        lab,
        scale=(2.0, 2.0),
        translate=(1.0, 1.0),
        name="cells fixed",
        features=pd.DataFrame({"index": [1, 2], "cell_type": ["T", "B"]}),
    )


def world(layer, data):
    return np.array([layer.data_to_world(v) for v in np.asarray(data)])


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def blobs(tmp_path):
    target = tmp_path / "blobs.zarr"
    shutil.copytree(DATA / "blobs.zarr", target)
    return target


def test_save_returns_element_paths_and_keeps_every_other_file(blobs):
    from napari_ozx import save_to_spatialdata

    before = snapshot(blobs)
    assert save_to_spatialdata(shapes_layer(), blobs) == "shapes/regions"
    assert save_to_spatialdata(points_layer(), blobs) == "points/marks"
    assert save_to_spatialdata(labels_layer(), blobs) == "labels/cells_fixed"
    after = snapshot(blobs)
    # only the root (consolidated metadata) and the labels container's list change
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"zarr.json", "labels/zarr.json"}
    new = set(after) - set(before)
    assert new and all(
        k.split("/")[:2]
        in (
            ["shapes", "regions"],
            ["points", "marks"],
            ["labels", "cells_fixed"],
            ["tables", "regions_table"],
            ["tables", "cells_fixed_table"],
        )
        for k in new
    )
    labels_doc = json.loads((blobs / "labels" / "zarr.json").read_text())
    assert labels_doc["attributes"]["ome"]["labels"] == ["cells", "nuclei", "cells_fixed"]


def test_root_consolidated_metadata_is_what_zarr_consolidates(blobs, tmp_path):
    import zarr

    from napari_ozx import save_to_spatialdata

    save_to_spatialdata(shapes_layer(), blobs)
    save_to_spatialdata(labels_layer(), blobs)
    ours = json.loads((blobs / "zarr.json").read_text())
    redo = tmp_path / "redo.zarr"
    shutil.copytree(blobs, redo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the parquet files are not Zarr nodes
        zarr.consolidate_metadata(zarr.storage.LocalStore(redo))
    theirs = json.loads((redo / "zarr.json").read_text())
    assert ours["attributes"] == theirs["attributes"]  # spatialdata_attrs untouched
    assert ours["consolidated_metadata"] == theirs["consolidated_metadata"]
    assert "shapes/regions" in ours["consolidated_metadata"]["metadata"]
    assert "tables/cells_fixed_table/obs/cell_type" in ours["consolidated_metadata"]["metadata"]


def test_existing_name_without_overwrite_is_refused_and_changes_nothing(blobs):
    from napari_ozx import OzxError, save_to_spatialdata
    from napari_ozx.layers.spatial.save import ElementExistsError

    save_to_spatialdata(shapes_layer(), blobs)
    before = snapshot(blobs)
    with pytest.raises(ElementExistsError, match=r"^shapes/regions exists") as e:
        save_to_spatialdata(shapes_layer(), blobs)
    assert isinstance(e.value, OzxError)
    # a name another kind of element has is refused too, even with overwrite
    with pytest.raises(ElementExistsError, match="labels element named 'cells'"):
        save_to_spatialdata(shapes_layer(), blobs, "cells", overwrite=True)
    assert snapshot(blobs) == before


def test_overwrite_replaces_the_element_and_its_table(blobs):
    from napari.layers import Shapes

    from napari_ozx import save_to_spatialdata
    from napari_ozx.ngff.tables.read import read_table

    save_to_spatialdata(shapes_layer(), blobs)
    one = Shapes(
        [np.array([[0.0, 0.0], [0.0, 5.0], [5.0, 5.0]])],
        shape_type="polygon",
        features={"kind": ["x"]},
        name="regions",
    )
    save_to_spatialdata(one, blobs, overwrite=True)
    table = read_table(str(blobs), "regions_table")
    assert list(table.columns["kind"]) == ["x"]
    meta = json.loads((blobs / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert "tables/regions_table/obs/score" not in meta  # the old table's column is gone


def test_lines_paths_ozx_and_other_layers_are_refused(tmp_path, blobs):
    from napari.layers import Image, Shapes

    from napari_ozx import save_to_spatialdata
    from napari_ozx.layers.spatial.save import SpatialDataSaveError

    before = snapshot(blobs)
    lines = Shapes(
        [np.array([[0.0, 0.0], [5.0, 5.0]]), np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 0.0]])],
        shape_type=["line", "path"],
    )
    with pytest.raises(
        SpatialDataSaveError, match=r"^Shapes layer .* lines or paths \(shapes 0, 1\)"
    ):
        save_to_spatialdata(lines, blobs)
    with pytest.raises(
        SpatialDataSaveError, match=r"^a zipped store \(.ozx\).*spatialdata does not"
    ):
        save_to_spatialdata(shapes_layer(), tmp_path / "cells.ozx")
    with pytest.raises(SpatialDataSaveError, match="has no shapes"):
        save_to_spatialdata(Shapes(name="empty"), blobs)
    with pytest.raises(SpatialDataSaveError, match="only Shapes, Points and Labels"):
        save_to_spatialdata(Image(np.zeros((4, 4))), blobs)
    with pytest.raises(SpatialDataSaveError, match="not one spatialdata accepts"):
        save_to_spatialdata(shapes_layer(), blobs, "bad/name")
    assert snapshot(blobs) == before
    assert not (tmp_path / "cells.ozx").exists()


def test_missing_store_is_created_and_reopens_where_drawn(tmp_path):
    from napari_ozx import save_to_spatialdata
    from napari_ozx.layers.reading import read_layer_data

    store = tmp_path / "new.zarr"
    layers = [shapes_layer(), points_layer(), labels_layer()]
    for layer in layers:
        save_to_spatialdata(layer, store)
    root = json.loads((store / "zarr.json").read_text())
    assert root["attributes"]["spatialdata_attrs"]["version"] == "0.2"
    assert "consolidated_metadata" in root
    opened = {kw["name"]: (data, kw, kind) for data, kw, kind in read_layer_data(str(store))}
    _same_in_world(layers, opened)


def _layer(data, kw, kind):
    import napari.layers

    cls = {"shapes": napari.layers.Shapes, "points": napari.layers.Points}
    if kind == "labels":
        return napari.layers.Labels(
            np.asarray(data[0] if isinstance(data, list) else data),
            **{k: v for k, v in kw.items() if k in ("scale", "translate", "affine")},
        )
    args = {k: v for k, v in kw.items() if k in ("affine", "scale", "translate", "shape_type")}
    return cls[kind](data, **args)


def _same_in_world(drawn, opened):
    from napari_ozx.layers.spatial.save import _ellipse

    sh, pts, lab = drawn
    data, kw, kind = opened["regions"]
    back = _layer(data, kw, kind)
    assert kind == "shapes"
    for i, (ring, t) in enumerate(zip(sh.data, sh.shape_type, strict=True)):
        expect = world(sh, _ellipse(ring) if t == "ellipse" else ring)
        np.testing.assert_allclose(world(back, back.data[i])[: len(expect)], expect, atol=1e-9)
    assert list(kw["features"]["kind"]) == ["tumour", "stroma", "tumour"]
    data, kw, kind = opened["marks"]
    back = _layer(data, kw, kind)
    np.testing.assert_allclose(world(back, back.data), world(pts, pts.data), atol=1e-9)
    assert list(kw["features"]["gene"]) == ["ACTB", "CD3E", "ACTB"]
    data, kw, kind = opened["cells_fixed"]
    assert kind == "labels"
    back = _layer(data, kw, kind)
    np.testing.assert_array_equal(np.asarray(back.data), lab.data)
    corners = np.array([[0, 0], [39, 49], [7, 3]])
    np.testing.assert_allclose(world(back, corners), world(lab, corners), atol=1e-9)
    assert list(kw["features"]["cell_type"]) == ["T", "B"]


def test_a_failed_save_into_a_new_store_leaves_nothing(tmp_path, monkeypatch):
    from napari_ozx import OzxError, save_to_spatialdata
    from napari_ozx.layers.transaction import EditTransaction

    def fail(self, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(EditTransaction, "commit", fail)
    with pytest.raises((OzxError, OSError)):
        save_to_spatialdata(points_layer(), tmp_path / "new.zarr")
    assert list(tmp_path.iterdir()) == []


def test_saved_in_a_named_coordinate_system(tmp_path):
    from napari_ozx import save_to_spatialdata
    from napari_ozx.layers.spatial.save import default_system

    store = tmp_path / "two.zarr"
    shutil.copytree(DATA / "two_systems.zarr", store)
    assert default_system(store) == "global"
    save_to_spatialdata(points_layer(), store, "aligned_marks", coordinate_system="aligned")
    doc = json.loads((store / "points" / "aligned_marks" / "zarr.json").read_text())
    (t,) = doc["attributes"]["coordinateTransformations"]
    assert t["output"]["name"] == "aligned"
    assert t["type"] == "affine"  # rotated 90 degrees, then moved


def test_large_labels_are_written_as_several_levels(tmp_path):
    from napari_ozx import save_to_spatialdata

    store = tmp_path / "big.zarr"
    save_to_spatialdata(labels_layer((600, 300)), store, "big")
    ome = json.loads((store / "labels" / "big" / "zarr.json").read_text())["attributes"]["ome"]
    datasets = ome["multiscales"][0]["datasets"]
    assert [d["path"] for d in datasets] == ["s0", "s1", "s2"]
    assert datasets[1]["coordinateTransformations"][0]["scale"] == [2.0, 2.0]
    assert ome["multiscales"][0]["coordinateTransformations"][0]["type"] == "affine"
