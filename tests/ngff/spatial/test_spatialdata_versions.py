"""Stores written by spatialdata 0.8.0 open as the same stores written by 0.7.3 do
(``make_fixtures.py`` writes both, from the same seeded values: ``data/`` by 0.7.3,
``data/sd080/`` by 0.8.0).

What 0.8.0 (with anndata 0.13 and ome-zarr-py 0.18, what it installs) changed on disk,
from a diff of the two versions' documents: tables' arrays sharded
(``sharding_indexed``), string indexes as ``nullable-string-array`` groups (``values`` +
``mask``), each raster level with a zero ``translation`` after its ``scale``, an image's
multiscale named ``image`` and its ``omero`` block written after the multiscales, the
root's ``spatialdata_software_version``. Points and shapes parquet files differ only in
their writers' metadata; every element's ``coordinateTransformations`` is the same.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests._support.paths import TESTS

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

DATA = TESTS / "ngff" / "spatial" / "data"
SD080 = DATA / "sd080"
STORES = ["blobs", "two_systems", "raster_systems"]


def _layers(path, system=None):
    from napari_ozx.layers.reading import read_layer_data

    messages: list[str] = []
    lds = read_layer_data(str(path), report=lambda w, e: messages.append(str(e)), system=system)
    return lds, [m.replace(str(path), "<store>") for m in messages]


def _normal(value, path):
    """*value* with the store's path replaced, arrays and frames as plain lists."""
    if isinstance(value, str):
        return value.replace(str(path), "<store>")
    if isinstance(value, dict):
        return {k: _normal(v, path) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v, path) for v in value]
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame
        return {c: _normal(value[c].tolist(), path) for c in value.columns}
    if isinstance(value, np.ndarray):
        return _normal(value.tolist(), path)
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # a lazy array
        return ("array", tuple(value.shape), str(value.dtype), np.asarray(value).tolist())
    return value


def test_the_newer_stores_were_written_by_spatialdata_080():
    assert json.loads((SD080 / "VERSION.json").read_text())["spatialdata"] == "0.8.0"
    for name in STORES:
        root = json.loads((SD080 / f"{name}.zarr" / "zarr.json").read_text())["attributes"]
        assert root["spatialdata_attrs"]["spatialdata_software_version"] == "0.8.0"
    # what 0.8.0 changed: a sharded table array, a nullable string index
    obs = SD080 / "blobs.zarr" / "tables" / "table" / "obs"
    assert (
        json.loads((obs / "_index" / "zarr.json").read_text())["attributes"]["encoding-type"]
        == "nullable-string-array"
    )
    codecs = json.loads((obs / "area" / "zarr.json").read_text())["codecs"]
    assert codecs[0]["name"] == "sharding_indexed"


@pytest.mark.parametrize("name", STORES)
def test_a_store_by_080_opens_as_the_same_store_by_073(name):
    from napari_ozx.layers.spatial.store import spatialdata_systems
    from napari_ozx.ngff.read.open import open_ome_zarr

    old, new = DATA / f"{name}.zarr", SD080 / f"{name}.zarr"
    with open_ome_zarr(str(old)) as a, open_ome_zarr(str(new)) as b:
        systems = spatialdata_systems(a)
        assert spatialdata_systems(b) == systems
    for system in systems:
        (la, ma), (lb, mb) = _layers(old, system), _layers(new, system)
        assert mb == ma
        assert [(kw.get("name"), kind) for _, kw, kind in lb] == [
            (kw.get("name"), kind) for _, kw, kind in la
        ]
        for (da, ka, kind), (db, kb, _) in zip(la, lb, strict=True):
            assert _normal(db, new) == _normal(da, old), (system, kind, ka.get("name"))
            assert _normal(kb, new) == _normal(ka, old), (system, kind, ka.get("name"))
