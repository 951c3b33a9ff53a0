"""Images with tables, written by ngio 1.1.3 itself (Fractal / ngio table specification V1),
and SpatialData-shaped stores written with anndata, for ``tests/ngff/tables/test_tables.py``.

Nothing is committed: the fixtures are written in the test session (ngio and anndata
compute with dask: under dask's array query planning they run in a child process without
it, see ``classic_dask.py``). ngio and anndata are
imported only inside these functions (the testing extra pins ngio, which brings anndata,
pandas, polars and pyarrow).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests._support.classic_dask import in_child_without_query_planning

BACKENDS = ("anndata", "parquet", "csv", "json")
PIXEL = 0.65  # x / y pixel size (micrometres)
Z_SPACING = 1.5
TRANSLATION = (0.0, 3.0, 10.0, -5.0)  # c, z, y, x: ignored by ngio's ROI mapping
SHAPE = (2, 4, 96, 120)


@dataclass
class NgioImage:
    path: Path
    version: str
    image: np.ndarray
    labels: np.ndarray
    #: table name -> (type, backend)
    tables: dict[str, tuple[str, str]] = field(default_factory=dict)
    features: Any = None  # the feature table's pandas DataFrame as written


def rois() -> list[Any]:
    """ROIs that exercise ngio's mapping: aligned, within ngio's 1 % rounding, partial
    pixels, outside the array (clipped), no z (written as 0 / 1), partial z, stage
    positions in *_micrometer_original."""
    from ngio import Roi

    return [
        Roi.from_values(
            name="FOV_1",
            slices={"x": (0.0, 39.0), "y": (0.0, 31.2), "z": (0.0, 6.0)},
            x_micrometer_original=-1448.3,
            y_micrometer_original=-1517.7,
        ),
        Roi.from_values(
            name="FOV_2",
            slices={"x": (39.0, 39.0), "y": (31.2, 31.2)},
            x_micrometer_original=-1409.3,
            y_micrometer_original=-1486.5,
        ),
        Roi.from_values(  # starts within 1 % of pixel 20 / 8; lengths of partial pixels
            name="rounded",
            slices={"x": (13.003, 7.3), "y": (5.2003, 4.1), "z": (1.5, 3.0)},
            x_micrometer_original=0.0,
            y_micrometer_original=0.0,
        ),
        Roi.from_values(  # past the x end and before the y start: clipped
            name="outside",
            slices={"x": (70.0, 20.0), "y": (-3.0, 10.0), "z": (0.0, 1.0)},
            x_micrometer_original=0.0,
            y_micrometer_original=0.0,
        ),
    ]


def nuclei_labels() -> np.ndarray:
    """The z, y, x label image ``nuclei``: objects 1 and 2 inside, 3 at the border."""
    labels = np.zeros(SHAPE[1:], dtype=np.uint32)
    labels[0:2, 5:15, 10:30] = 1
    labels[1:4, 30:50, 40:70] = 2
    labels[3, 80:96, 100:120] = 3
    return labels


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """ngio's and anndata's future warnings (pyramid modes, zarr v2) are not ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@in_child_without_query_planning
def write_ngio_image(path: Path, version: str = "0.5", extra_rois: int = 0) -> NgioImage:
    """A czyx image (translated) with labels ``nuclei`` and, in every backend, a ROI table
    ``fov_<backend>``, a masking ROI table ``nuclei_roi_<backend>``, a feature table
    ``feat_<backend>`` and a condition table ``cond_<backend>`` (zero-padded strings).
    *extra_rois*: also a ROI table ``many`` with that many ROIs."""
    import pandas as pd
    from ngio import ConditionTable, FeatureTable, Roi, RoiTable, create_ome_zarr_from_array

    with quiet():
        rng = np.random.default_rng(33)
        image = rng.integers(0, 4000, SHAPE, dtype=np.uint16)
        oz = create_ome_zarr_from_array(
            str(path),
            image,
            pixelsize=PIXEL,
            z_spacing=Z_SPACING,
            levels=2,
            translation=TRANSLATION,
            axes_names="czyx",
            ngff_version=version,
            overwrite=True,
            consolidation_mode="auto",
        )
        labels = nuclei_labels()
        lab = oz.derive_label("nuclei")
        lab.set_array(labels)
        lab.consolidate(mode="auto")
        out = NgioImage(path, version, image, labels)
        masking = oz.build_masking_roi_table("nuclei")
        features = pd.DataFrame(
            {
                "label": [1, 2, 3],
                "area": [200.0, 1800.0, 320.0],
                "kind": ["round", "long", "edge"],
                "n_neighbours": [1, 1, 0],
            }
        )
        out.features = features
        conditions = pd.DataFrame(
            {
                "row": ["B", "C"],
                "column": ["05", "12"],
                "drug": ["DMSO", "nocodazole"],
                "concentration": [0.0, 1.5],
            }
        )
        for be in BACKENDS:
            oz.add_table(f"fov_{be}", RoiTable(rois=rois()), backend=be)
            oz.add_table(f"nuclei_roi_{be}", masking, backend=be)
            oz.add_table(
                f"feat_{be}",
                FeatureTable(features, reference_label="nuclei"),
                backend=be,
            )
            oz.add_table(f"cond_{be}", ConditionTable(conditions), backend=be)
            out.tables.update(
                {
                    f"fov_{be}": ("roi_table", be),
                    f"nuclei_roi_{be}": ("masking_roi_table", be),
                    f"feat_{be}": ("feature_table", be),
                    f"cond_{be}": ("condition_table", be),
                }
            )
        if extra_rois:
            many = [
                Roi.from_values(
                    name=f"tile_{i}", slices={"x": (i % 10 * 5.2, 5.2), "y": (i // 10 * 5.2, 5.2)}
                )
                for i in range(extra_rois)
            ]
            oz.add_table("many", RoiTable(rois=many), backend="anndata")
            out.tables["many"] = ("roi_table", "anndata")
    return out


@in_child_without_query_planning
def write_big_feature_table(path: Path, rows: int) -> None:
    """A feature table ``big`` of *rows* rows on the image at *path*'s ``nuclei``."""
    import pandas as pd
    from ngio import FeatureTable, open_ome_zarr_container

    with quiet():
        oz = open_ome_zarr_container(str(path), mode="r+")
        n = np.arange(1, rows + 1)
        df = pd.DataFrame({"label": n, "area": n * 0.5, "mean": n * 0.25})
        oz.add_table("big", FeatureTable(df, reference_label="nuclei"), backend="anndata")


def _ngio_open(path: Path) -> Any:
    """ngio's container of a directory, or of an ``.ozx`` through zarr's ``ZipStore``."""
    from ngio import open_ome_zarr_container

    if Path(path).suffix == ".ozx":
        from zarr.storage import ZipStore

        return open_ome_zarr_container(ZipStore(path, mode="r"), mode="r")
    return open_ome_zarr_container(str(path), mode="r")


@in_child_without_query_planning
def ngio_dataframes(path: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """The tables as ngio itself reads them (pandas, indexed by their index key), all in
    one call (one child process under query planning)."""
    with quiet():
        oz = _ngio_open(path)
        return {name: oz.get_table(name).dataframe for name in names}


@in_child_without_query_planning
def ngio_roi_pixels(path: Path, names: tuple[str, ...]) -> dict[str, dict[str, np.ndarray]]:
    """Per ROI table, each ROI's pixels of level 0 as ngio reads them
    (``Image.get_roi``): the reference for napari-ozx's ROI -> pixel mapping."""
    with quiet():
        oz = _ngio_open(path)
        img = oz.get_image()
        out = {}
        for name in names:
            table = oz.get_generic_roi_table(name)
            out[name] = {str(r.get_name()): np.asarray(img.get_roi(r)) for r in table.rois()}
        return out


# ---------------------------------------------------------------------- SpatialData


def _zarr_json(path: Path, attrs: dict[str, Any]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
    )


def _label_element(root: Path, name: str, data: np.ndarray) -> None:
    import zarr

    g = zarr.open_group(root / "labels" / name, mode="w", zarr_format=3)
    g.create_array("0", data=data, chunks=data.shape, dimension_names=["y", "x"])
    g.attrs["ome"] = {
        "version": "0.5",
        "image-label": {},
        "multiscales": [
            {
                "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
                "datasets": [
                    {
                        "path": "0",
                        "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0]}],
                    }
                ],
            }
        ],
    }


@in_child_without_query_planning
def write_spatialdata(path: Path, attrs_in: str = "group") -> dict[str, dict[int, float]]:
    """A SpatialData-shaped store: labels elements ``a`` and ``b`` with overlapping ids
    (1, 2) and one AnnData table annotating both (``region`` = its ``region`` column,
    instance ids in ``cell_id``). *attrs_in*: ``"group"`` (the table group's attributes,
    spatialdata >= 0.4) or ``"uns"`` (``uns/spatialdata_attrs`` only, as before).
    Returns the expected ``area`` per element and label."""
    import anndata as ad
    import pandas as pd

    _zarr_json(path, {"spatialdata_attrs": {"version": "0.2"}})
    _zarr_json(path / "images", {})
    _zarr_json(path / "labels", {})
    _zarr_json(path / "tables", {})
    a = np.zeros((16, 16), np.uint32)
    a[1:4, 1:4], a[8:12, 8:12] = 1, 2
    b = np.zeros((16, 16), np.uint32)
    b[2:6, 2:6], b[10:14, 1:5] = 1, 2
    _label_element(path, "a", a)
    _label_element(path, "b", b)
    obs = pd.DataFrame(
        {
            "region": pd.Categorical(["a", "b", "a", "b", "c"]),
            "cell_id": [1, 1, 2, 2, 1],
            "kind": ["x", "y", "z", "w", "v"],
        },
        index=[f"r{i}" for i in range(5)],
    )
    area = np.array([[9.0], [16.0], [16.0], [16.0], [1.0]])
    table = ad.AnnData(X=area, obs=obs, var=pd.DataFrame(index=["area"]))
    table.uns["spatialdata_attrs"] = {
        "region": ["a", "b", "c"],
        "region_key": "region",
        "instance_key": "cell_id",
    }
    with quiet():
        ad.settings.zarr_write_format = 3
        table.write_zarr(str(path / "tables" / "table"))
    if attrs_in == "group":
        doc_path = path / "tables" / "table" / "zarr.json"
        doc = json.loads(doc_path.read_text())
        doc["attributes"].update(
            {
                "spatialdata-encoding-type": "ngff:regions_table",
                "region": ["a", "b", "c"],
                "region_key": "region",
                "instance_key": "cell_id",
                "version": "0.2",
            }
        )
        doc_path.write_text(json.dumps(doc))
    return {"a": {1: 9.0, 2: 16.0}, "b": {1: 16.0, 2: 16.0}}
