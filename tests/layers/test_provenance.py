"""LayerSource: the one record of where a layer came from, in ``layer.metadata``."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from napari_ozx.layers.provenance import METADATA_KEY, LayerSource, plate_key, plates_in
from napari_ozx.layers.reading import read_layer_data
from tests._support.plategen import built_plate


def _layer(src: LayerSource | None, **extra: object) -> SimpleNamespace:
    meta = {**(src.to_metadata() if src is not None else {}), **extra}
    return SimpleNamespace(metadata=meta)


OVERVIEW = LayerSource(
    "/d/plate.zarr",
    "",
    "plate-overview",
    version="0.5",
    zarr_format=3,
    plate_id="abc",
    plate_path="",
    plate_name="p",
    plate_kind="plate",
    field_index=0,
    overview_level=2,
)


def test_roundtrip_through_json():
    field = dataclasses.replace(
        OVERVIEW, kind="well", node="A/1/0", well="A/1", field_path="A/1/0", channel=1
    )
    for src in (OVERVIEW, field, LayerSource("/d/cells.ozx", "labels/nuclei", "labels")):
        meta = json.loads(json.dumps(src.to_metadata()))  # a session file, a copy
        assert list(meta) == [METADATA_KEY]
        assert LayerSource.from_metadata(meta) == src


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {},
        "x",
        {"ome_zarr": {"source": "/d/a.zarr", "path": ""}},  # the old loose keys
        {METADATA_KEY: "x"},
        {METADATA_KEY: {"source": "/d/a.zarr"}},  # no format: not ours
        {METADATA_KEY: {"format": 99, "source": "/d/a.zarr"}},  # a future format
        {METADATA_KEY: {"format": 1, "source": ""}},
        {METADATA_KEY: {"format": 1, "source": "/d/a.zarr", "kind": "movie"}},
        {METADATA_KEY: {"format": 1, "source": "/d/a.zarr", "levels": "3"}},
        {METADATA_KEY: {"format": 1, "source": "/d/a.zarr", "channel": True}},
        {METADATA_KEY: {"format": 1, "source": "/d/a.zarr", "plate_kind": "dish"}},
    ],
)
def test_foreign_or_damaged_metadata_is_none(metadata):
    assert LayerSource.from_metadata(metadata) is None
    assert LayerSource.of(SimpleNamespace(metadata=metadata)) is None
    assert plates_in([SimpleNamespace(metadata=metadata)]) == []


def test_unknown_fields_are_ignored():
    meta = OVERVIEW.to_metadata()
    meta[METADATA_KEY]["added_later"] = [1, 2]
    assert LayerSource.from_metadata(meta) == OVERVIEW


def test_plates_in_layers():
    other = dataclasses.replace(OVERVIEW, plate_id="def", source="/d/other.ozx")
    field = dataclasses.replace(OVERVIEW, kind="well", node="A/1/0", well="A/1")
    layers = [
        _layer(LayerSource("/d/cells.ozx")),  # not a plate
        _layer(None, foreign=1),
        _layer(OVERVIEW),
        _layer(field),  # same plate
        object(),  # no metadata at all
        _layer(other),
        _layer(dataclasses.replace(OVERVIEW, channel=1)),
    ]
    assert plates_in(layers) == [OVERVIEW, other]
    no_id = dataclasses.replace(OVERVIEW, plate_id=None)
    assert plate_key(no_id) == ("path", "/d/plate.zarr", "")
    assert plates_in([_layer(no_id), _layer(no_id)]) == [no_id]


def test_reader_layers_carry_their_source(tmp_path_factory):
    paths, _ = built_plate(tmp_path_factory, "well_v05")
    layers = read_layer_data(str(paths["ozx"]))
    srcs = [
        LayerSource.from_metadata(kw["metadata"][0] if t == "image" else kw["metadata"])
        for _, kw, t in layers
    ]
    assert all(s is not None and s.kind == "well" and s.plate_kind == "well" for s in srcs)
    assert [s.field_index for s in srcs] == [0, 0, 1, 1, 2, 2]
    assert [s.node for s in srcs][:2] == ["0", "0/labels/cells"]
    assert len({s.plate_id for s in srcs}) == 1


def test_inspector_layer_source():
    pytest.importorskip("qtpy")
    from napari_ozx._qt.inspector import layer_source

    image = LayerSource("/d/cells.ozx", "labels/nuclei", "labels")
    assert layer_source(image.to_metadata()) == ("/d/cells.ozx", "labels/nuclei")
    # a plate overview points at the plate, a field at its own node
    assert layer_source(OVERVIEW.to_metadata()) == ("/d/plate.zarr", "")
    field = dataclasses.replace(OVERVIEW, kind="well", node="A/1/0", well="A/1")
    assert layer_source(field.to_metadata()) == ("/d/plate.zarr", "A/1/0")
    assert layer_source({}) is None and layer_source(None) is None
    assert layer_source({"ome_zarr": {"source": "/d/a"}}) is None
