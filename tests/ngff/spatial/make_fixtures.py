"""Write the SpatialData stores under ``tests/ngff/spatial/data/`` with spatialdata itself.

spatialdata pins a dask older than the project's, so this runs in a virtual environment
of its own, never in the project's: ``scripts/spatialdata-venvs.sh`` builds
``.venv-sd073`` (``"spatialdata==0.7.3" "anndata<0.13"``: anndata 0.13 stores ``X`` as a
layer named None, which spatialdata 0.7.3's table validation refuses) and ``.venv-sd080``
(``"spatialdata==0.8.0"``)::

    bash scripts/spatialdata-venvs.sh
    .venv-sd073/bin/python tests/ngff/spatial/make_fixtures.py
    .venv-sd080/bin/python tests/ngff/spatial/make_fixtures.py

spatialdata 0.7.x rewrites the stores of ``data/`` (a few hundred KB), 0.8.0 those of
:data:`NEWER_STORES` in ``data/sd080/`` (:func:`out_dir`); each records spatialdata's
version in its directory's ``VERSION.json``. Every value is fixed (seeded), so a rerun
with the same versions writes the same element values.

Stores:

* ``blobs.zarr``: image ``raw`` (c, y, x, scaled 2x into "global"), labels ``cells`` and
  ``nuclei`` (overlapping instance ids 1..6), points ``transcripts`` (2D, ``gene`` the
  feature_key, ``cell_id`` the instance_key, translated), points ``transcripts3d`` (x, y,
  z), shapes ``spots`` (circles: Point + radius, scaled), shapes ``cells_poly``
  (polygons and one MultiPolygon of two parts), table ``table`` annotating ``cells`` and
  ``nuclei`` (instance ids overlap) and table ``spot_table`` annotating ``spots``;
* ``points_only.zarr``: one points element and nothing else;
* ``two_systems.zarr``: image ``raw``, labels ``cells``, points ``transcripts``, shapes
  ``spots`` (circles) and ``cells_poly`` (polygons) in "global" (as in ``blobs.zarr``)
  and in "aligned" (the same, then :data:`ALIGN`: rotated 90 degrees, scaled 1.5x,
  moved); labels ``nuclei`` in "global" only;
* ``legacy_shapes.zarr``: shapes in spatialdata's shapes format 0.1 (ragged ``coords``
  / ``offset*`` / ``Index`` / ``radius`` arrays), written by spatialdata's own
  ``ShapesFormatV01``;
* ``points_table.zarr``: points ``transcripts`` (``cell_id`` 0..9) and ``transcripts_b``
  (``cell_id`` 3..12), both annotated by table ``cell_table`` (``cell_id`` the
  instance_key; rows for ids 0..7 of ``transcripts``, 3..12 of ``transcripts_b``: the
  ids overlap, ``transcripts`` 8 and 9 have no row; its ``quality`` column clashes with
  the points' own);
* ``raster_systems.zarr``: image ``raw`` (c, y, x) and labels ``cells`` only, placed in
  "global" by :data:`REORDER` (an affine over (x, y), so spatialdata writes its output
  axes ``c, x, y`` after the input's ``c, y, x``) and in "aligned" by a scale.

``python make_fixtures.py NAME ...`` rewrites only the stores named (e.g.
``points_table``), leaving the others and ``VERSION.json`` as they are.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
GENES = ["ACTB", "GAPDH", "MKI67", "CD3E"]
#: "global" -> "aligned" of ``two_systems.zarr`` over (x, y): x' = 100 - 1.5 y, y' = 10 + 1.5 x
ALIGN = [[0.0, -1.5, 100.0], [1.5, 0.0, 10.0], [0.0, 0.0, 1.0]]
#: "global" of ``raster_systems.zarr`` over (x, y): x' = 2 x + 5, y' = 3 y + 7
REORDER = [[2.0, 0.0, 5.0], [0.0, 3.0, 7.0], [0.0, 0.0, 1.0]]


def _points_frame(rng: np.random.Generator, n: int, three_d: bool):
    import pandas as pd

    frame = {
        "x": rng.uniform(0, 64, n).round(2),
        "y": rng.uniform(0, 64, n).round(2),
    }
    if three_d:
        frame["z"] = rng.uniform(0, 8, n).round(2)
    frame["gene"] = pd.Categorical(rng.choice(GENES, n), categories=GENES)
    frame["cell_id"] = rng.integers(0, 7, n).astype(np.int64)
    frame["quality"] = rng.uniform(0, 40, n).round(1).astype(np.float32)
    return pd.DataFrame(frame)


def _labels(offset: int) -> np.ndarray:
    lab = np.zeros((32, 32), np.uint32)
    for i in range(6):
        r, c = divmod(i, 3)
        lab[2 + 14 * r + offset : 10 + 14 * r + offset, 2 + 10 * c : 8 + 10 * c] = i + 1
    return lab


def blobs(path: Path) -> None:
    import geopandas as gpd
    import pandas as pd
    from anndata import AnnData
    from shapely import MultiPolygon, Point, Polygon
    from spatialdata import SpatialData
    from spatialdata.models import (
        Image2DModel,
        Labels2DModel,
        PointsModel,
        ShapesModel,
        TableModel,
    )
    from spatialdata.transformations import Scale, Translation

    rng = np.random.default_rng(42)
    image = Image2DModel.parse(
        rng.integers(0, 255, (2, 32, 32), dtype=np.uint8),
        dims=("c", "y", "x"),
        c_coords=["dapi", "cd3"],
        transformations={"global": Scale([2.0, 2.0], axes=("y", "x"))},
    )
    scale = {"global": Scale([2.0, 2.0], axes=("y", "x"))}
    cells = Labels2DModel.parse(_labels(0), dims=("y", "x"), transformations=scale)
    nuclei = Labels2DModel.parse(_labels(1), dims=("y", "x"), transformations=scale)
    points = PointsModel.parse(
        _points_frame(rng, 300, False),
        coordinates={"x": "x", "y": "y"},
        feature_key="gene",
        instance_key="cell_id",
        transformations={"global": Translation([1.5, -0.5], axes=("x", "y"))},
    )
    points3d = PointsModel.parse(
        _points_frame(rng, 120, True),
        coordinates={"x": "x", "y": "y", "z": "z"},
        feature_key="gene",
        instance_key="cell_id",
    )
    centres = [Point(4.0 + 6 * i, 5.0 + 3 * (i % 4)) for i in range(12)]
    spots = ShapesModel.parse(
        gpd.GeoDataFrame(
            {"radius": np.linspace(1.0, 3.0, 12), "kind": ["spot"] * 12},
            geometry=centres,
            index=pd.Index(np.arange(100, 112), name="spot_id"),
        ),
        transformations={"global": Scale([2.0, 2.0], axes=("x", "y"))},
    )
    polys = [
        Polygon([(1, 1), (9, 1), (9, 7), (1, 7)]),
        Polygon([(20, 20), (30, 22), (26, 34)]),
        Polygon(
            [(40, 40), (56, 40), (56, 56), (40, 56)],
            holes=[[(44, 44), (50, 44), (50, 50), (44, 50)]],
        ),
        MultiPolygon(
            [
                Polygon([(10, 40), (16, 40), (16, 46)]),
                Polygon([(20, 50), (28, 50), (28, 58), (20, 58)]),
            ]
        ),
    ]
    cells_poly = ShapesModel.parse(
        gpd.GeoDataFrame(
            {"area_um2": [shape.area for shape in polys], "label": ["a", "b", "c", "d"]},
            geometry=polys,
        ),
        transformations={"global": Scale([2.0, 2.0], axes=("x", "y"))},
    )
    # one table annotating two labels elements whose instance ids overlap (1..6 each)
    ids = np.concatenate([np.arange(1, 7), np.arange(1, 7)])
    region = pd.Categorical(["cells"] * 6 + ["nuclei"] * 6)
    obs = pd.DataFrame(
        {"region": region, "instance_id": ids, "area": np.arange(12, dtype=float) * 10 + 5},
        index=[f"r{i}" for i in range(12)],
    )
    table = TableModel.parse(
        AnnData(
            X=np.arange(24, dtype=np.float32).reshape(12, 2),
            obs=obs,
            var=pd.DataFrame(index=["gene_a", "gene_b"]),
        ),
        region=["cells", "nuclei"],
        region_key="region",
        instance_key="instance_id",
    )
    spot_obs = pd.DataFrame(
        {
            "region": pd.Categorical(["spots"] * 12),
            "spot_id": np.arange(100, 112),
            "counts": np.arange(12, dtype=np.int64) * 3,
        },
        index=[f"s{i}" for i in range(12)],
    )
    spot_table = TableModel.parse(
        AnnData(obs=spot_obs), region="spots", region_key="region", instance_key="spot_id"
    )
    SpatialData(
        images={"raw": image},
        labels={"cells": cells, "nuclei": nuclei},
        points={"transcripts": points, "transcripts3d": points3d},
        shapes={"spots": spots, "cells_poly": cells_poly},
        tables={"table": table, "spot_table": spot_table},
    ).write(path)


def two_systems(path: Path) -> None:
    import geopandas as gpd
    from shapely import Point, Polygon
    from spatialdata import SpatialData
    from spatialdata.models import Image2DModel, Labels2DModel, PointsModel, ShapesModel
    from spatialdata.transformations import Affine, Scale, Sequence, Translation

    rng = np.random.default_rng(11)
    align = Affine(ALIGN, input_axes=("x", "y"), output_axes=("x", "y"))

    def both(to_global):
        return {"global": to_global, "aligned": Sequence([to_global, align])}

    scale = Scale([2.0, 2.0], axes=("y", "x"))
    image = Image2DModel.parse(
        rng.integers(0, 255, (2, 32, 32), dtype=np.uint8),
        dims=("c", "y", "x"),
        c_coords=["dapi", "cd3"],
        transformations=both(scale),
    )
    cells = Labels2DModel.parse(_labels(0), dims=("y", "x"), transformations=both(scale))
    nuclei = Labels2DModel.parse(_labels(1), dims=("y", "x"), transformations={"global": scale})
    points = PointsModel.parse(
        _points_frame(rng, 100, False),
        coordinates={"x": "x", "y": "y"},
        feature_key="gene",
        instance_key="cell_id",
        transformations=both(Translation([1.5, -0.5], axes=("x", "y"))),
    )
    spots = ShapesModel.parse(
        gpd.GeoDataFrame(
            {"radius": np.linspace(1.0, 3.0, 6)},
            geometry=[Point(4.0 + 8 * i, 6.0 + 4 * (i % 3)) for i in range(6)],
        ),
        transformations=both(Scale([2.0, 2.0], axes=("x", "y"))),
    )
    cells_poly = ShapesModel.parse(
        gpd.GeoDataFrame(
            geometry=[
                Polygon([(1, 1), (9, 1), (9, 7), (1, 7)]),
                Polygon([(20, 20), (30, 22), (26, 34)]),
            ]
        ),
        transformations=both(Scale([2.0, 2.0], axes=("x", "y"))),
    )
    SpatialData(
        images={"raw": image},
        labels={"cells": cells, "nuclei": nuclei},
        points={"transcripts": points},
        shapes={"spots": spots, "cells_poly": cells_poly},
    ).write(path)


def points_only(path: Path) -> None:
    from spatialdata import SpatialData
    from spatialdata.models import PointsModel

    rng = np.random.default_rng(7)
    points = PointsModel.parse(
        _points_frame(rng, 500, False),
        coordinates={"x": "x", "y": "y"},
        feature_key="gene",
        instance_key="cell_id",
    )
    SpatialData(points={"transcripts": points}).write(path)


def legacy_shapes(path: Path) -> None:
    import geopandas as gpd
    from shapely import MultiPolygon, Point, Polygon
    from spatialdata import SpatialData
    from spatialdata._io.format import ShapesFormatV01, SpatialDataContainerFormatV01
    from spatialdata.models import ShapesModel

    circles = ShapesModel.parse(
        gpd.GeoDataFrame(
            {"radius": [1.0, 2.0, 3.0]}, geometry=[Point(2, 3), Point(10, 12), Point(20, 5)]
        )
    )
    polys = ShapesModel.parse(
        gpd.GeoDataFrame(
            geometry=[
                Polygon([(0, 0), (4, 0), (4, 4)]),
                MultiPolygon(
                    [
                        Polygon([(10, 10), (14, 10), (14, 14)]),
                        Polygon([(20, 20), (24, 20), (24, 24)]),
                    ]
                ),
            ]
        )
    )
    SpatialData(shapes={"circles": circles, "polygons": polys}).write(
        path, sdata_formats=[SpatialDataContainerFormatV01(), ShapesFormatV01()]
    )


def points_table(path: Path) -> None:
    import pandas as pd
    from anndata import AnnData
    from spatialdata import SpatialData
    from spatialdata.models import PointsModel, TableModel

    rng = np.random.default_rng(5)
    a = _points_frame(rng, 200, False)
    a["cell_id"] = np.arange(200, dtype=np.int64) % 10
    b = _points_frame(rng, 80, False)
    b["cell_id"] = np.arange(80, dtype=np.int64) % 10 + 3

    def parse(frame):
        return PointsModel.parse(
            frame,
            coordinates={"x": "x", "y": "y"},
            feature_key="gene",
            instance_key="cell_id",
        )

    ids_a, ids_b = np.arange(0, 8), np.arange(3, 13)
    n_a, n_b = len(ids_a), len(ids_b)
    obs = pd.DataFrame(
        {
            "region": pd.Categorical(["transcripts"] * n_a + ["transcripts_b"] * n_b),
            "cell_id": np.concatenate([ids_a, ids_b]),
            "area": np.concatenate([ids_a * 10.0 + 1, ids_b * 100.0 + 2]),
            "cell_type": pd.Categorical([f"a{i}" for i in ids_a] + [f"b{i}" for i in ids_b]),
            "quality": np.arange(n_a + n_b, dtype=np.float64),
        },
        index=[f"c{i}" for i in range(n_a + n_b)],
    )
    table = TableModel.parse(
        AnnData(obs=obs),
        region=["transcripts", "transcripts_b"],
        region_key="region",
        instance_key="cell_id",
    )
    SpatialData(
        points={"transcripts": parse(a), "transcripts_b": parse(b)},
        tables={"cell_table": table},
    ).write(path)


def raster_systems(path: Path) -> None:
    from spatialdata import SpatialData
    from spatialdata.models import Image2DModel, Labels2DModel
    from spatialdata.transformations import Affine, Scale

    rng = np.random.default_rng(3)

    def systems():
        return {
            "global": Affine(REORDER, input_axes=("x", "y"), output_axes=("x", "y")),
            "aligned": Scale([2.0, 2.0], axes=("y", "x")),
        }

    image = Image2DModel.parse(
        rng.integers(0, 255, (2, 16, 24), dtype=np.uint8),
        dims=("c", "y", "x"),
        c_coords=["dapi", "cd3"],
        transformations=systems(),
    )
    lab = np.zeros((16, 24), np.uint32)
    lab[2:6, 3:9] = 1
    lab[9:14, 12:20] = 2
    cells = Labels2DModel.parse(lab, dims=("y", "x"), transformations=systems())
    SpatialData(images={"raw": image}, labels={"cells": cells}).write(path)


STORES = {
    "blobs": blobs,
    "points_only": points_only,
    "two_systems": two_systems,
    "legacy_shapes": legacy_shapes,
    "points_table": points_table,
    "raster_systems": raster_systems,
}


#: the stores written by a spatialdata other than 0.7 (into ``data/sd<version>/``): the
#: ones whose files a spatialdata release can change (rasters, points, shapes, tables,
#: two coordinate systems, affine rasters), not the legacy format nor near-copies
NEWER_STORES = ("blobs", "two_systems", "raster_systems")


def out_dir(version: str) -> Path:
    """Where spatialdata *version* writes: ``data/`` for 0.7.x (the stores most tests
    open), ``data/sd080/`` for 0.8.0 and so on."""
    if version.startswith("0.7."):
        return DATA
    return DATA / ("sd" + "".join(version.split(".")[:3]))


def main(names: list[str] | None = None) -> None:
    import anndata
    import spatialdata

    out = out_dir(spatialdata.__version__)
    if names:  # only these stores, the others and VERSION.json left as they are
        for name in names:
            target = out / f"{name}.zarr"
            if target.exists():
                shutil.rmtree(target)
            STORES[name](target)
        return
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.zarr"):  # never another version's directory
        shutil.rmtree(old)
    for name, write in STORES.items():
        if out == DATA or name in NEWER_STORES:
            write(out / f"{name}.zarr")
    (out / "VERSION.json").write_text(
        json.dumps(
            {"spatialdata": spatialdata.__version__, "anndata": anndata.__version__}, indent=1
        )
        + "\n"
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
