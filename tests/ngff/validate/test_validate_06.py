"""``napari-ozx validate`` on OME-Zarr 0.6: each rule on a hand-made hierarchy (valid and
broken), files other tools and we write, --strict and --metadata-only, and 0.5
findings (no empty "ome-namespace"; a 0.5 labels group without version)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.__main__ import validate_path
from tests._support.ome06gen import rotation2, system, write_group, write_image06


def _codes(path: Path, **kw) -> tuple[int, dict[str, str]]:
    code, rep = validate_path(str(path), deep=False, **kw)
    return code, {f["code"]: f["severity"] for f in rep["findings"]}


def _edit(path: Path, fn) -> None:
    doc = json.loads((path / "zarr.json").read_text())
    fn(doc["attributes"]["ome"])
    (path / "zarr.json").write_text(json.dumps(doc))


def _image(tmp_path: Path, **kw) -> Path:
    p = tmp_path / "img.zarr"
    write_image06(p, np.zeros((16, 16), np.uint8), scale=[0.5, 0.5], translation=[1, 1], **kw)
    _edit(p, lambda o: o["multiscales"][0].update(type="strided", metadata={"m": 1}))
    return p


def test_a_valid_06_image_has_no_error(tmp_path):
    p = _image(
        tmp_path,
        systems=[system("world", "yx")],
        transformations=[
            {
                "type": "rotation",
                "rotation": rotation2(10),
                "input": {"name": "physical"},
                "output": {"name": "world"},
            }
        ],
    )
    code, codes = _codes(p)
    assert code == 0, codes
    assert _codes(p, strict=True)[0] == 0


def test_what_we_and_ngff_zarr_write_validates(tmp_path):
    from napari_ozx.layers.writing import write_layer_data

    data = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    layers = [(data, {"name": "r", "rotate": 30.0}, "image")]
    out = write_layer_data(tmp_path / "r.ozx", layers).target
    code, codes = _codes(out)
    assert code == 0, codes
    pytest.importorskip("ngff_zarr")
    from tests._support.thirdparty import write_ngff_zarr_image

    write_ngff_zarr_image(tmp_path / "nz.ome.zarr", data, ["y", "x"], "0.6")
    code, codes = _codes(tmp_path / "nz.ome.zarr")
    assert code == 0, codes


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        # "multiscales": a dataset's transformation is a scale or sequence[scale, translation]
        (
            lambda m: m["datasets"][0].update(
                coordinateTransformations=[
                    {
                        "type": "translation",
                        "translation": [1, 1],
                        "input": {"path": "s0"},
                        "output": {"name": "physical"},
                    }
                ]
            ),
            "ds-transform-06",
        ),
        # its input names the dataset's path
        (
            lambda m: m["datasets"][0]["coordinateTransformations"][0].update(input={"path": "s1"}),
            "ds-transform-input",
        ),
        # its output is a coordinate system of the multiscales
        (
            lambda m: m["datasets"][0]["coordinateTransformations"][0].update(
                output={"name": "nowhere"}
            ),
            "ds-transform-output",
        ),
        # "coordinateSystems" is required, names unique
        (lambda m: m.pop("coordinateSystems"), "cs-missing"),
        (lambda m: m["coordinateSystems"].append(m["coordinateSystems"][0]), "cs-name"),
        # multiscale-level: one side is the intrinsic system
        (
            lambda m: m.update(
                coordinateSystems=[*m["coordinateSystems"], system("a", "yx"), system("b", "yx")],
                coordinateTransformations=[{"type": "identity", "input": "a", "output": "b"}],
            ),
            "ms-transform-io",
        ),
        # into a labels image: identity, scale or translation only
        (
            lambda m: m.update(
                coordinateTransformations=[
                    {
                        "type": "rotation",
                        "rotation": rotation2(5),
                        "input": {"name": "physical"},
                        "output": {"name": "physical", "path": "labels/cells"},
                    }
                ]
            ),
            "ms-transform-io",
        ),
        # parameters fit the systems' dimensions
        (
            lambda m: m.update(
                coordinateSystems=[*m["coordinateSystems"], system("w", "yx")],
                coordinateTransformations=[
                    {"type": "scale", "scale": [1, 2, 3], "input": "physical", "output": "w"}
                ],
            ),
            "transform-params",
        ),
        (
            lambda m: m.update(
                coordinateSystems=[*m["coordinateSystems"], system("w", "yx")],
                coordinateTransformations=[{"type": "warp", "input": "physical", "output": "w"}],
            ),
            "transform-params",
        ),
        # every system linked (graph connectedness)
        (
            lambda m: m.update(coordinateSystems=[*m["coordinateSystems"], system("lost", "yx")]),
            "graph-connected",
        ),
    ],
)
def test_each_06_multiscales_rule(tmp_path, edit, rule):
    p = _image(tmp_path)
    _edit(p, lambda o: edit(o["multiscales"][0]))
    code, codes = _codes(p)
    assert code == 1 and codes.get(rule) == "error", codes


def test_scene_rules(tmp_path):
    root = tmp_path / "scene.zarr"
    write_image06(root / "a", np.zeros((8, 8), np.uint8))
    good = {
        "coordinateSystems": [system("world", "yx")],
        "coordinateTransformations": [
            {
                "type": "translation",
                "translation": [1, 2],
                "input": {"name": "physical", "path": "a"},
                "output": {"name": "world"},
            }
        ],
    }
    write_group(root, {"scene": good})
    assert _codes(root)[0] == 0
    write_group(root, {"scene": {"coordinateSystems": good["coordinateSystems"]}})
    assert _codes(root)[1].get("scene-transforms") == "error"
    lost = {**good, "coordinateSystems": [system("world", "yx"), system("lost", "yx")]}
    write_group(root, {"scene": lost})
    assert _codes(root)[1].get("graph-connected") == "error"
    missing = {
        **good,
        "coordinateTransformations": [
            {**good["coordinateTransformations"][0], "input": {"name": "physical", "path": "b"}}
        ],
    }
    write_group(root, {"scene": missing})
    assert _codes(root)[0] == 1


def test_strict_fails_on_the_strict_schemas_shoulds(tmp_path):
    p = _image(tmp_path)
    _edit(p, lambda o: o["multiscales"][0].pop("name"))
    code, codes = _codes(p)
    assert code == 0 and codes["multiscales-name"] == "warning"
    assert _codes(p, strict=True)[0] == 1


def test_metadata_only_needs_no_arrays(tmp_path):
    p = _image(tmp_path)
    for level in ("s0", "s1"):
        for f in (p / level).rglob("*"):
            if f.is_file():
                f.unlink()
    assert _codes(p)[0] == 1  # the levels are missing
    assert _codes(p, metadata_only=True)[0] == 0


def test_draft_and_spatialdata_versions_are_named_not_refused(tmp_path):
    p = _image(tmp_path)
    _edit(p, lambda o: o.update(version="0.6.dev4"))
    code, codes = _codes(p)
    assert code == 0 and codes["version-draft"] == "warning"
    _edit(p, lambda o: o.update(version="0.5-dev-spatialdata"))
    assert _codes(p)[1]["version-deviation"] == "warning"


def test_plain_zarr_group_says_not_ome_only(tmp_path):
    """No "ome-namespace: OME keys []" beside "not OME-Zarr"."""
    (tmp_path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    code, codes = _codes(tmp_path)
    assert code == 1 and set(codes) == {"not-ome"}, codes


@pytest.mark.parametrize(
    ("version", "severity", "code"), [("0.5", "warning", 0), ("0.6", "error", 1)]
)
def test_labels_group_without_version(tmp_path, version, severity, code):
    """Ome-zarr 0.21 writes {"ome": {"labels": [...]}} for 0.5; no 0.5
    schema or MUST covers that group, 0.6's "MUST contain a version key" does."""
    p = tmp_path / "img.zarr"
    lab = np.zeros((16, 16), np.uint8)
    if version == "0.6":
        write_image06(p, lab)
        write_image06(
            p / "labels" / "cells",
            lab,
            extra_ome={"image-label": {"colors": [{"label-value": 1, "rgba": [1, 2, 3, 255]}]}},
        )
    else:
        from tests._support.omegen import write_image

        write_image(p, lab, "yx", "0.5", levels=1, labels={"cells": lab})
    (p / "labels" / "zarr.json").write_text(
        json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"labels": ["cells"]}}}
        )
    )
    got, codes = _codes(p)
    assert codes.get("labels-group-version") == severity, codes
    assert "version-missing" not in codes
    assert got == code
