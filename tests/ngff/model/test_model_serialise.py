"""Models serialise as well as parse: model -> JSON -> model for every model and both
written versions, and parse(real file) -> serialise -> parse on the real-world corpus
(the OME-NGFF specification examples and files written by other tools)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.model.metadata import (
    Acquisition,
    Axis,
    Channel,
    Dataset,
    ImageLabel,
    LabelColor,
    Multiscale,
    NodeMetadata,
    Omero,
    Plate,
    PlateWell,
    Well,
    WellImage,
    Window,
    default_version,
    parse_node_attributes,
    zarr_format_for,
)
from tests._support.paths import SHARED

SHARED = SHARED
CASES = SHARED / "realworld" / "cases.json"

AXES = (
    Axis("t", "time", "second"),
    Axis("c", "channel"),
    Axis("z", "space", "micrometer"),
    Axis("y", "space", "micrometer"),
    Axis("x", "space"),
)


def _multiscale(version: str) -> Multiscale:
    return Multiscale(
        version,
        AXES,
        (
            Dataset("0", (1.0, 1.0, 2.0, 0.5, 0.5), (0.0, 0.0, 10.0, 3.0, 4.0)),
            Dataset("1", (1.0, 1.0, 2.0, 1.0, 1.0), (0.0, 0.0, 10.0, 3.25, 4.25)),
            Dataset("s2", (1.0, 1.0, 2.0, 2.0, 2.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
        ),
        name="cells",
        type="mean",
    )


OMERO = Omero(
    (
        Channel("DAPI", "0000FF", Window(10.0, 900.0, 0.0, 65535.0)),
        Channel(None, None, Window(0.0, 1.0), active=False, inverted=True),
        Channel("GFP", "00FF00", None),
    ),
    name="cells",
    default_z=3,
    default_t=0,
    model="color",
)
IMAGE_LABEL = ImageLabel(
    (LabelColor(1, (255, 0, 0, 255)), LabelColor(7, (0, 0, 0, 0))),
    ({"label-value": 1, "area": 12.5, "class": "nucleus"}, {"label-value": 7}),
    source_image="../../",
)


def _plate(version: str) -> Plate:
    return Plate(
        version,
        ("A", "B"),
        ("1", "2", "3"),
        (PlateWell("A/1", 0, 0), PlateWell("B/3", 1, 2)),
        (Acquisition(0, "first", 2), Acquisition(5)),
        field_count=2,
        name="screen",
    )


def _nodes(version: str) -> list[NodeMetadata]:
    return [
        NodeMetadata(version, multiscales=(_multiscale(version),), omero=OMERO),
        NodeMetadata(version, multiscales=(_multiscale(version),), image_label=IMAGE_LABEL),
        NodeMetadata(version, multiscales=(_multiscale(version),), image_label=ImageLabel()),
        NodeMetadata(version, labels=("cells", "nuclei")),
        NodeMetadata(version, plate=_plate(version)),
        NodeMetadata(version, well=Well(version, (WellImage("0", 0), WellImage("1")))),
        NodeMetadata(version, bioformats2raw_layout=3),
        NodeMetadata(version, series=("0", "1")),
    ]


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_every_node_kind_round_trips(version):
    for node in _nodes(version):
        attrs = node.to_attributes(version)
        # the bytes we would write are plain JSON
        attrs = json.loads(json.dumps(attrs))
        back = parse_node_attributes(attrs, zarr_format_for(version))
        assert _same_node(back, node, version), node.kind
        assert back.to_attributes(version) == attrs


def test_version_placement():
    node = _nodes("0.5")[0]
    v5 = node.to_attributes("0.5")
    assert list(v5) == ["ome"] and v5["ome"]["version"] == "0.5"
    assert "version" not in v5["ome"]["multiscales"][0]
    v4 = node.to_attributes("0.4")
    assert "ome" not in v4 and v4["multiscales"][0]["version"] == "0.4"
    assert "version" not in v4["omero"]  # omero carries no version of its own
    assert node.to_attributes("0.4")["multiscales"][0] == _multiscale("0.4").to_json()
    lab = NodeMetadata(image_label=IMAGE_LABEL).to_attributes("0.4")["image-label"]
    assert lab["version"] == "0.4"
    assert NodeMetadata(plate=_plate("0.4")).to_attributes("0.4")["plate"]["version"] == "0.4"
    assert NodeMetadata(well=Well("0.4", ())).to_attributes("0.4")["well"]["version"] == "0.4"


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_each_model_serialises_what_the_spec_names(version):
    assert Axis("x", "space", "nanometer").to_json(version) == {
        "name": "x",
        "type": "space",
        "unit": "nanometer",
    }
    assert Axis("q").to_json(version) == {"name": "q"}
    assert Dataset("0", (2, 0.5), (0, 0)).to_json(version) == {
        "path": "0",
        "coordinateTransformations": [{"type": "scale", "scale": [2.0, 0.5]}],
    }
    assert Dataset("0", (1, 1), (0, 3)).to_json(version)["coordinateTransformations"][1] == {
        "type": "translation",
        "translation": [0.0, 3.0],
    }
    assert Window(1, 2).to_json(version) == {"start": 1, "end": 2}
    assert Channel().to_json(version) == {"active": True}
    assert LabelColor(3, (1, 2, 3, 4)).to_json(version) == {"label-value": 3, "rgba": [1, 2, 3, 4]}
    assert PlateWell("A/1", 0, 0).to_json(version) == {
        "path": "A/1",
        "rowIndex": 0,
        "columnIndex": 0,
    }
    assert Acquisition(2, None, 4).to_json(version) == {"id": 2, "maximumfieldcount": 4}
    assert WellImage("0").to_json(version) == {"path": "0"}
    om = OMERO.to_json(version)
    assert om["rdefs"] == {"model": "color", "defaultZ": 3, "defaultT": 0}
    assert Omero(()).to_json(version) == {"channels": []}


def test_multiscale_level_transforms_are_folded_on_write():
    """A file's multiscale-level transforms come back per dataset, with the same result."""
    attrs = {
        "multiscales": [
            {
                "version": "0.4",
                "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
                "datasets": [
                    {
                        "path": "0",
                        "coordinateTransformations": [
                            {"type": "scale", "scale": [1, 1]},
                            {"type": "translation", "translation": [1, 2]},
                        ],
                    }
                ],
                "coordinateTransformations": [{"type": "scale", "scale": [3, 4]}],
            }
        ]
    }
    m = parse_node_attributes(attrs, 2)
    out = m.to_attributes("0.4")
    assert "coordinateTransformations" not in out["multiscales"][0]
    assert parse_node_attributes(out, 2) == m
    assert m.multiscales[0].datasets[0] == Dataset("0", (3.0, 4.0), (3.0, 8.0))


def test_old_versions_are_written_as_04_05_or_06_only():
    m = parse_node_attributes({"multiscales": [{"version": "0.3", "axes": ["y", "x"],
                                                "datasets": [{"path": "0"}]}]}, 2)  # fmt: skip
    with pytest.raises(MetadataError, match=r"only 0\.6, 0\.5, 0\.4"):
        m.multiscales[0].to_json()
    with pytest.raises(MetadataError, match=r"only 0\.6, 0\.5, 0\.4"):
        m.to_attributes("0.3")
    up = parse_node_attributes(m.to_attributes("0.4"), 2)
    assert up.multiscales[0] == replace(m.multiscales[0], version="0.4")
    assert up.multiscales[0].axes == (Axis("y", "space"), Axis("x", "space"))


def test_version_rules():
    assert zarr_format_for("0.5") == 3 and zarr_format_for("0.4") == 2
    assert zarr_format_for("0.1") == 2
    assert default_version(3) == "0.5" and default_version(2) == "0.4"


# -------------------------------------------------------------- real-world files


def _documents(root: Path) -> list[tuple[str, dict[str, Any], int]]:
    """(node path, attributes, zarr_format) of every group in a case (directory or zip)."""
    files: dict[str, bytes] = {}
    if root.is_dir():
        for f in root.rglob("*"):
            if f.name in ("zarr.json", ".zattrs", ".zgroup", ".zarray") and f.is_file():
                files[f.relative_to(root).as_posix()] = f.read_bytes()
    elif zipfile.is_zipfile(root):
        with zipfile.ZipFile(root) as z:
            for n in z.namelist():
                if n.rsplit("/", 1)[-1] in ("zarr.json", ".zattrs", ".zgroup", ".zarray"):
                    files[n] = z.read(n)
    out = []
    for name, raw in sorted(files.items()):
        node, _, base = name.rpartition("/")
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if base == "zarr.json" and isinstance(doc, dict) and doc.get("node_type") == "group":
            out.append((node, doc.get("attributes") or {}, 3))
        elif base == ".zattrs" and f"{node}/.zarray".lstrip("/") not in files:
            out.append((node, doc, 2))
    return out


def _ndim_hint(root: Path, node: str, attrs: dict[str, Any]) -> int | None:
    ms = attrs.get("multiscales")
    if not (isinstance(ms, list) and ms and isinstance(ms[0], dict)) or not root.is_dir():
        return None
    try:
        path = ms[0]["datasets"][0]["path"]
        meta = json.loads((root / node / path / ".zarray").read_text())
        return len(meta["shape"])
    except (KeyError, IndexError, TypeError, OSError, ValueError):
        return None


def _corpus() -> list[dict[str, Any]]:
    if not CASES.exists():
        return []
    return [c for c in json.loads(CASES.read_text())["cases"] if c["expect"] in ("open", "lenient")]


@pytest.mark.skipif(not CASES.exists(), reason=f"real-world corpus not found at {CASES}")
@pytest.mark.parametrize("case", _corpus(), ids=lambda c: c["name"])
def test_real_world_metadata_survives_serialisation(case):
    root = CASES.parent / case["path"]
    docs = _documents(root)
    if not docs:
        pytest.skip(f"{case['name']}: no readable group metadata at {root}")
    checked = 0
    for node, attrs, zf in docs:
        try:
            meta = parse_node_attributes(attrs, zf, node, _ndim_hint(root, node, attrs))
        except MetadataError:
            continue  # refused by the parser: nothing to serialise
        if not meta.is_ome:
            continue
        version = meta.version if meta.version in ("0.4", "0.5") else "0.4"
        written = json.loads(json.dumps(meta.to_attributes(version)))
        back = parse_node_attributes(written, zarr_format_for(version), node)
        expected = meta
        if meta.version != version:  # 0.1-0.3 and undeclared versions are upgraded
            expected = _with_version(meta, version)
        assert _same_node(back, expected, version), f"{case['name']}:{node or '/'}"
        checked += 1
    if case["expect"] == "open" and case["kind"] in ("image", "plate", "well", "labels-image"):
        assert checked, f"{case['name']}: no OME node parsed"


def _same_node(back: NodeMetadata, expected: NodeMetadata, version: str) -> bool:
    """Equal, except that a 0.4 node whose sections carry no ``version`` (a labels group,
    a bioformats2raw root) cannot say which version it is."""
    if version == "0.4" and back.version is None:
        expected = replace(expected, version=None)
    return back == expected


def _with_version(meta: NodeMetadata, version: str) -> NodeMetadata:
    return replace(
        meta,
        version=version,
        multiscales=tuple(replace(m, version=version) for m in meta.multiscales),
        plate=replace(meta.plate, version=version) if meta.plate else None,
        well=replace(meta.well, version=version) if meta.well else None,
    )


# -------------------------------------------------- our output, read by validators


def _written(tmp_path: Path, version: str) -> Path:
    import numpy as np

    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    axes = [AXES[1], AXES[3], AXES[4]]
    img = ImageSpec(
        np.arange(2 * 40 * 50, dtype="uint16").reshape(2, 40, 50),
        axes,
        scale=[1.0, 0.5, 0.5],
        translation=[0.0, 2.0, 3.0],
        channels=[Channel("a", "FF0000", Window(0, 100)), Channel("b")],
        name="img",
        labels=[
            LabelsSpec(
                "cells",
                np.zeros((2, 40, 50), "uint8"),
                axes,
                colors=[LabelColor(1, (255, 0, 0, 255))],
                properties=[{"label-value": 1, "class": "a"}],
            )
        ],
    )
    target = tmp_path / f"v{version}.ome.zarr"
    opts = WriteOptions(version=version, chunk_yx=16, shard_yx=32)
    return write_ome_zarr(target, img, options=opts)


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_yaozarrs_accepts_every_document_we_write(tmp_path, version):
    yaozarrs = pytest.importorskip("yaozarrs", reason="yaozarrs not installed (optional)")
    root = _written(tmp_path, version)
    name = "zarr.json" if version == "0.5" else ".zattrs"
    kinds = []
    for node in ("", "labels", "labels/cells"):
        doc = (root / node / name).read_bytes()
        kinds.append(type(yaozarrs.validate_ome_json(doc)).__name__)
    assert len(kinds) == 3, kinds


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_ome_zarr_models_opens_what_we_write(tmp_path, version):
    ozm = pytest.importorskip("ome_zarr_models", reason="ome-zarr-models not installed (optional)")
    root = _written(tmp_path, version)
    group = ozm.open_ome_zarr(root, version=version)
    assert type(group).__name__ == "Image"
    labels = ozm.open_ome_zarr(root / "labels" / "cells", version=version)
    assert type(labels).__name__ == "ImageLabel"
