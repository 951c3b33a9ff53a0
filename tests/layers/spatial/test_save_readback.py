"""spatialdata itself reads what :func:`napari_ozx.save_to_spatialdata` wrote: shapes,
points and labels drawn in napari (with features), read back by spatialdata 0.7.3 and
0.8.0, the real packages, each in its own venv (``scripts/spatialdata-venvs.sh``; the
places ``NAPARI_OZX_SD073`` / ``NAPARI_OZX_SD080`` override): exact geometry after
``spatialdata.transform(element, to_coordinate_system=...)`` equal to napari's world
coordinates, the labels' pixels and transformation, the tables' features and attributes.

Slow (spatialdata imports in a child process: ~5 s of CPU each, more on a busy machine);
skipped with the reason when a venv is absent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.layers.spatial.test_save_spatialdata import (
    DATA,
    labels_layer,
    points_layer,
    shapes_layer,
    world,
)

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

REPO = Path(__file__).resolve().parents[3]
SCRIPT = Path(__file__).with_name("readback_spatialdata.py")
VENVS = {
    "0.7.3": os.environ.get("NAPARI_OZX_SD073") or str(REPO / ".venv-sd073"),
    "0.8.0": os.environ.get("NAPARI_OZX_SD080") or str(REPO / ".venv-sd080"),
}


def _python(version: str) -> str:
    py = Path(VENVS[version]) / "bin" / "python"
    if not py.is_file():
        pytest.skip(
            f"no spatialdata {version} venv at {VENVS[version]}: "
            f"run scripts/spatialdata-venvs.sh to build it"
        )
    return str(py)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A copy of blobs.zarr with one shapes, points and labels element saved from napari,
    and the layers they came from."""
    from napari_ozx import save_to_spatialdata

    store = tmp_path_factory.mktemp("readback") / "blobs.zarr"
    shutil.copytree(DATA / "blobs.zarr", store)
    # labels large enough for three levels (halved down to 256 pixels a side)
    layers = {
        "regions": shapes_layer(),
        "marks": points_layer(),
        "cells_fixed": labels_layer((520, 300)),
    }
    for layer in layers.values():
        save_to_spatialdata(layer, store)
    return store, layers


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.7.3", "0.8.0"])
def test_spatialdata_reads_what_napari_drew(saved, version):
    from napari_ozx.layers.spatial.save import _ellipse

    py = _python(version)
    store, layers = saved
    run = subprocess.run(
        [py, str(SCRIPT), str(store), "global"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=store.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["version"] == version

    sh = layers["regions"]
    shapes = got["shapes"]["regions"]
    assert shapes["types"] == ["Polygon"] * 3
    assert shapes["index"] == [0, 1, 2]
    for i, (ring, t) in enumerate(zip(sh.data, sh.shape_type, strict=True)):
        expect = world(sh, _ellipse(ring) if t == "ellipse" else ring)[:, ::-1]  # x, y
        exterior = np.asarray(shapes["exteriors"][i])
        np.testing.assert_allclose(exterior[:-1], expect, rtol=0, atol=1e-9)
    table = got["tables"]["regions_table"]
    assert table["attrs"] == {
        "region": "regions",
        "region_key": "region",
        "instance_key": "instance_id",
    }
    assert table["obs"]["region"] == ["regions"] * 3
    assert table["obs"]["instance_id"] == ["0", "1", "2"]
    assert table["obs"]["kind"] == ["tumour", "stroma", "tumour"]
    assert table["obs"]["score"] == ["1.0", "2.0", "3.5"]

    pts = layers["marks"]
    cols = got["points"]["marks"]["columns"]
    xy = np.array([cols["x"], cols["y"]], dtype=float).T
    np.testing.assert_allclose(xy, world(pts, pts.data)[:, ::-1], rtol=0, atol=1e-9)
    assert cols["gene"] == ["ACTB", "CD3E", "ACTB"]
    assert cols["n"] == ["1", "2", "3"]

    lab = layers["cells_fixed"]
    labels = got["labels"]["cells_fixed"]
    assert labels["dims"] == ["y", "x"]
    assert labels["shapes"] == [[520, 300], [260, 150], [130, 75]]
    np.testing.assert_array_equal(np.asarray(labels["pixels"]), lab.data)
    corners = np.array([[0.0, 0.0], [39.0, 49.0], [7.0, 3.0]])
    m = np.asarray(labels["matrix"])
    mapped = (m[:2, :2] @ corners.T).T + m[:2, 2]
    np.testing.assert_allclose(mapped, world(lab, corners), rtol=0, atol=1e-9)
    table = got["tables"]["cells_fixed_table"]
    assert table["obs"]["instance_id"] == ["1", "2"]
    assert table["obs"]["cell_type"] == ["T", "B"]
    assert table["attrs"]["region"] == "cells_fixed"
    # the store's own elements are still read as they were
    assert set(got["shapes"]) == {"regions", "cells_poly", "spots"}
    assert set(got["labels"]) == {"cells", "nuclei", "cells_fixed"}
