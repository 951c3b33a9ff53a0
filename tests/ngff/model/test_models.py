"""Metadata models: every OME-Zarr version normalised to one model (RFC-2, NGFF 0.2)."""

from __future__ import annotations

import pytest

from napari_ozx.errors import MetadataError, UnsupportedExtensionError
from napari_ozx.ngff.model.extensions import check_document
from napari_ozx.ngff.model.metadata import has_ome_keys, parse_node_attributes

AXES_04 = [
    {"name": "c", "type": "channel"},
    {"name": "z", "type": "space", "unit": "micrometer"},
    {"name": "y", "type": "space", "unit": "micrometer"},
    {"name": "x", "type": "space", "unit": "micrometer"},
]


def _ms(**extra):
    return {
        "axes": AXES_04,
        "datasets": [
            {
                "path": "0",
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1, 2, 0.5, 0.5]},
                    {"type": "translation", "translation": [0, 10, 3, 4]},
                ],
            },
            {
                "path": "1",
                "coordinateTransformations": [{"type": "scale", "scale": [1, 2, 1, 1]}],
            },
        ],
        **extra,
    }


def test_v05_ome_namespace():
    attrs = {"ome": {"version": "0.5", "multiscales": [_ms(name="img")]}}
    m = parse_node_attributes(attrs, 3)
    assert m.version == "0.5" and m.kind == "image"
    ms = m.multiscales[0]
    assert ms.axis_names == ("c", "z", "y", "x")
    assert ms.channel_axis == 0
    assert ms.axes[1].unit == "micrometer"
    assert ms.datasets[0].scale == (1, 2, 0.5, 0.5)
    assert ms.datasets[0].translation == (0, 10, 3, 4)
    assert ms.datasets[1].translation == (0, 0, 0, 0)
    assert ms.name == "img"


def test_v04_top_level_with_multiscale_level_transform():
    ms = _ms(version="0.4")
    # multiscale-level transforms apply after the dataset's (0.4 "multiscales")
    ms["coordinateTransformations"] = [
        {"type": "scale", "scale": [1, 1, 2, 2]},
        {"type": "translation", "translation": [0, 0, 100, 0]},
    ]
    m = parse_node_attributes({"multiscales": [ms]}, 2)
    d0 = m.multiscales[0].datasets[0]
    assert m.version == "0.4"
    assert d0.scale == (1, 2, 1.0, 1.0)
    assert d0.translation == (0, 10, 106, 8)


@pytest.mark.parametrize("version", ["0.1", "0.2"])
def test_v01_v02_axes_implied_from_ndim(version):
    attrs = {"multiscales": [{"version": version, "datasets": [{"path": "0"}, {"path": "1"}]}]}
    m5 = parse_node_attributes(attrs, 2)
    assert m5.multiscales[0].axis_names == ("t", "c", "z", "y", "x")
    m3 = parse_node_attributes(attrs, 2, ndim_hint=3)
    assert m3.multiscales[0].axis_names == ("z", "y", "x")
    assert m3.multiscales[0].channel_axis is None
    assert m3.multiscales[0].datasets[1].scale == (1, 1, 1)


def test_v03_axes_as_strings():
    attrs = {
        "multiscales": [{"version": "0.3", "axes": ["c", "y", "x"], "datasets": [{"path": "0"}]}]
    }
    ms = parse_node_attributes(attrs, 2).multiscales[0]
    assert [a.type for a in ms.axes] == ["channel", "space", "space"]
    assert ms.channel_axis == 0


def test_omero_colours_windows():
    attrs = {
        "ome": {
            "version": "0.5",
            "multiscales": [_ms()],
            "omero": {
                "channels": [
                    {
                        "label": "DAPI",
                        "color": "0000ff",
                        "window": {"start": 5, "end": 500, "min": 0, "max": 65535},
                    },
                    {"label": "GFP", "color": "#00FF00", "active": False},
                    {"color": "nonsense", "window": {"start": 10, "end": 5}},
                ],
                "rdefs": {"defaultZ": 3, "model": "color"},
            },
        }
    }
    om = parse_node_attributes(attrs, 3).omero
    assert [c.label for c in om.channels] == ["DAPI", "GFP", None]
    assert [c.color for c in om.channels] == ["0000FF", "00FF00", None]
    assert om.channels[0].window.start == 5 and om.channels[0].window.end == 500
    assert om.channels[1].active is False and om.channels[1].window is None
    assert om.channels[2].window is None  # end <= start is no window
    assert om.default_z == 3


def test_image_label_colors_and_properties():
    attrs = {
        "ome": {
            "version": "0.5",
            "multiscales": [_ms()],
            "image-label": {
                "colors": [
                    {"label-value": 1, "rgba": [255, 0, 0, 255]},
                    {"label-value": 2, "rgba": [1, 2]},
                ],
                "properties": [{"label-value": 1, "area": 12}],
                "source": {"image": "../../"},
            },
        }
    }
    m = parse_node_attributes(attrs, 3)
    assert m.kind == "labels-image"
    assert [(c.value, c.rgba) for c in m.image_label.colors] == [(1, (255, 0, 0, 255))]
    assert m.image_label.properties[0]["area"] == 12
    assert m.image_label.source_image == "../../"


def test_plate_and_well_all_versions():
    v04 = {
        "plate": {
            "version": "0.4",
            "rows": [{"name": "A"}, {"name": "B"}],
            "columns": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
            "wells": [
                {"path": "A/1", "rowIndex": 0, "columnIndex": 0},
                {"path": "B/3", "rowIndex": 1, "columnIndex": 2},
            ],
            "acquisitions": [{"id": 0, "maximumfieldcount": 2}],
            "field_count": 2,
        }
    }
    p = parse_node_attributes(v04, 2).plate
    assert [(w.row, w.column) for w in p.wells] == [(0, 0), (1, 2)]
    assert p.acquisitions[0].maximum_field_count == 2
    v02 = {"plate": {**v04["plate"], "version": "0.2", "wells": [{"path": "B/2"}]}}
    assert parse_node_attributes(v02, 2).plate.wells[0].column == 1
    well = parse_node_attributes(
        {"ome": {"version": "0.5", "well": {"images": [{"path": "0", "acquisition": 0}]}}}, 3
    )
    assert well.kind == "well" and well.well.images[0].acquisition == 0


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({"ome": {"version": "0.5", "multiscales": []}}, "non-empty"),
        ({"ome": {"version": "0.5", "multiscales": [{"axes": AXES_04}]}}, "datasets"),
        (
            {
                "ome": {
                    "version": "0.5",
                    "multiscales": [
                        {
                            "axes": AXES_04,
                            "datasets": [
                                {
                                    "path": "0",
                                    "coordinateTransformations": [
                                        {"type": "scale", "scale": [1, 1]}
                                    ],
                                }
                            ],
                        }
                    ],
                }
            },
            "one value per axis",
        ),
        (
            {
                "ome": {
                    "version": "0.5",
                    "multiscales": [
                        {
                            "axes": AXES_04,
                            "datasets": [
                                {
                                    "path": "0",
                                    "coordinateTransformations": [
                                        {"type": "scale", "scale": [1, 0, 1, 1]}
                                    ],
                                }
                            ],
                        }
                    ],
                }
            },
            "positive",
        ),
        (
            {
                "ome": {
                    "version": "0.5",
                    "multiscales": [
                        {
                            "axes": AXES_04,
                            "datasets": [
                                {"path": "0", "coordinateTransformations": [{"type": "affine"}]}
                            ],
                        }
                    ],
                }
            },
            "unsupported coordinate transformation",
        ),
        (
            {
                "ome": {
                    "version": "0.5",
                    "multiscales": [
                        {"axes": [{"name": "x"}, {"name": "x"}], "datasets": [{"path": "0"}]}
                    ],
                }
            },
            "duplicate axis",
        ),
        (
            {
                "ome": {
                    "version": "0.5",
                    "multiscales": [{"axes": AXES_04, "datasets": [{"path": "../x"}]}],
                }
            },
            "invalid or duplicate",
        ),
        (
            {
                "ome": {
                    "version": "0.5",
                    "plate": {
                        "rows": [{"name": "A"}],
                        "columns": [{"name": "1"}],
                        "wells": [{"path": "A/1", "rowIndex": 3, "columnIndex": 0}],
                    },
                }
            },
            "outside the plate",
        ),
    ],
)
def test_invalid_metadata_is_a_clear_error(attrs, match):
    with pytest.raises(MetadataError, match=match):
        parse_node_attributes(attrs, 3, node="img")


def test_non_ome_attributes():
    m = parse_node_attributes({"foo": 1}, 3)
    assert not m.is_ome and m.kind == "none"
    assert not has_ome_keys({"foo": 1})
    assert has_ome_keys({"ome": {"version": "0.5", "multiscales": []}})
    assert has_ome_keys({"multiscales": []})


# ----------------------------------------------------------- ZEP 9 / ZEP 10


def _array_doc(**extra):
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
        **extra,
    }


def test_zep10_optional_extension_is_stripped_and_statistics_used():
    doc = _array_doc(
        extensions=[
            {
                "name": "array-statistics",
                "must_understand": False,
                "configuration": {"min": 5, "max": 1023},
            },
            {"name": "https://example.com/zarr/whatever", "must_understand": False},
        ]
    )
    clean, exts = check_document(doc, "0")
    assert "extensions" not in clean
    assert exts.statistics.min == 5 and exts.statistics.max == 1023
    assert [e.understood for e in exts.extensions] == [True, False]


@pytest.mark.parametrize(
    "ext",
    [{"name": "example.offset", "configuration": {"offset": [1]}}, "example.skip_empty_chunks"],
)
def test_zep10_unknown_must_understand_extension_refused(ext):
    # ZEP 10 "extensions": must_understand defaults to true -> the node must not load
    with pytest.raises(UnsupportedExtensionError, match="example"):
        check_document(_array_doc(extensions=[ext]), "labels/cells/0")


def test_zep9_unknown_top_level_key():
    clean, exts = check_document(_array_doc(future_thing={"must_understand": False, "x": 1}), "0")
    assert "future_thing" not in clean and exts.ignored_keys == ("future_thing",)
    with pytest.raises(UnsupportedExtensionError, match="future_thing"):
        check_document(_array_doc(future_thing={"x": 1}), "0")


@pytest.mark.parametrize(
    "bad", [[], "x", [{"name": "Bad Name!"}], [{"name": "ok", "must_understand": "no"}]]
)
def test_zep10_malformed_extensions(bad):
    with pytest.raises(MetadataError):
        check_document(_array_doc(extensions=bad), "0")
