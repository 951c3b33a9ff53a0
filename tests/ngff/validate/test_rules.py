"""OME-Zarr metadata rules (ngff.rules / ngff.validate) on hand-made files, valid and broken
one rule at a time, plus the reader refusals that go with them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napari_ozx.__main__ import main, validate_path
from napari_ozx._reader import read_layer_data
from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ngff.validate.rules import MAX_PER_CODE, RULES
from napari_ozx.ngff.validate.walk import validate_ome
from tests._support.omegen import write_image, zip_dir
from tests._support.paths import CORPUS
from tests._support.plategen import PlateSpec, write_plate


def _edit(path: Path, node: str, fn: Callable[[dict[str, Any]], None]) -> None:
    """Apply *fn* to the zarr.json (v3) or .zattrs (v2) document of *node*."""
    f = path / node / "zarr.json"
    if not f.exists():
        f = path / node / ".zattrs"
    doc = json.loads(f.read_text())
    fn(doc)
    f.write_text(json.dumps(doc))


def _ome(doc: dict[str, Any]) -> dict[str, Any]:
    """The OME section of a zarr.json or .zattrs document."""
    return doc["attributes"]["ome"] if "attributes" in doc else doc


def _codes(path: Path, severity: str = "error") -> list[str]:
    return [f.code for f in validate_ome(path) if f.severity == severity]


@pytest.fixture
def image05(tmp_path: Path) -> Path:
    p = tmp_path / "img.zarr"
    data = np.arange(2 * 32 * 32, dtype=np.uint16).reshape(2, 32, 32)
    lab = (np.arange(32 * 32).reshape(32, 32) % 3).astype(np.uint8)
    write_image(p, data, "cyx", "0.5", levels=2, labels={"cells": lab})
    return p


@pytest.fixture
def image04(tmp_path: Path) -> Path:
    p = tmp_path / "img04.zarr"
    data = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    write_image(p, data, "yx", "0.4", levels=2)
    return p


def test_valid_image_with_labels_has_no_error_dir_and_ozx(image05: Path, tmp_path: Path) -> None:
    assert _codes(image05) == []
    ozx = zip_dir(image05, tmp_path / "img.ozx")
    assert _codes(ozx) == []
    code, report = validate_path(str(ozx), deep=False)
    assert code == 0, report


def test_every_finding_quotes_its_rule(image05: Path) -> None:
    _edit(image05, "", lambda d: _ome(d)["multiscales"][0]["axes"].reverse())
    findings = validate_ome(image05)
    assert findings
    for f in findings:
        assert f.rule == RULES[f.code].text and f.section == RULES[f.code].section
        assert f.node and f.message
    d = findings[0].to_dict()
    assert {"severity", "code", "message", "member", "rule", "section"} <= set(d)


def test_axes_out_of_order(image05: Path) -> None:
    _edit(image05, "", lambda d: _ome(d)["multiscales"][0]["axes"].reverse())
    assert "axes-order" in _codes(image05)


def test_translation_before_scale(image05: Path) -> None:
    def swap(d: dict[str, Any]) -> None:
        ds = _ome(d)["multiscales"][0]["datasets"][0]
        ds["coordinateTransformations"] = [
            {"type": "translation", "translation": [0, 1, 1]},
            *ds["coordinateTransformations"],
        ]

    _edit(image05, "", swap)
    assert _codes(image05) == ["transform-translation"]


def test_scale_of_wrong_length(image05: Path) -> None:
    def short(d: dict[str, Any]) -> None:
        _ome(d)["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"] = [1, 2]

    _edit(image05, "", short)
    assert _codes(image05) == ["transform-length"]


def test_ome_namespace_missing_in_zarr_v3(image05: Path) -> None:
    def flatten(d: dict[str, Any]) -> None:
        ome = d["attributes"].pop("ome")
        ome.pop("version")
        d["attributes"].update(ome)

    _edit(image05, "", flatten)
    assert "ome-namespace" in _codes(image05)


def test_version_inconsistent_within_hierarchy(image05: Path) -> None:
    _edit(image05, "labels", lambda d: _ome(d).update(version="0.4"))
    codes = _codes(image05)
    assert "version-inconsistent" in codes and "zarr-format" in codes


def test_unknown_version_is_an_error_and_refused_by_the_reader(image05: Path) -> None:
    _edit(image05, "", lambda d: _ome(d).update(version="0.6.dev4"))
    assert _codes(image05) == ["version-unknown"]
    with pytest.raises(MetadataError, match=r"0\.6\.dev4"):
        read_layer_data(str(image05))


def test_label_rules(image05: Path) -> None:
    def colours(d: dict[str, Any]) -> None:
        _ome(d)["image-label"]["colors"] = [
            {"label-value": 1, "rgba": [0, 0, 0, 256]},
            {"label-value": 1, "rgba": [0, 0, 0, 0]},
            {"rgba": [1, 2, 3, 4]},
        ]
        _ome(d)["image-label"]["version"] = 0.5
        _ome(d)["multiscales"][0]["datasets"].pop()

    _edit(image05, "labels/cells", colours)
    assert sorted(_codes(image05)) == [
        "label-levels",
        "label-rgba",
        "label-value",
        "label-value-unique",
        "label-version",
    ]


def test_label_image_of_float_type(image05: Path) -> None:
    _edit(image05, "labels/cells/0", lambda d: d.update(data_type="float32", fill_value=0.0))
    assert "label-dtype" in _codes(image05)


def test_listed_label_missing(image05: Path) -> None:
    _edit(image05, "labels", lambda d: _ome(d)["labels"].append("nuclei"))
    assert _codes(image05) == ["label-missing"]


def test_dimension_names_differ_from_axes(image05: Path) -> None:
    _edit(image05, "1", lambda d: d.update(dimension_names=["c", "x", "y"]))
    assert _codes(image05) == ["dimension-names"]


def test_level_larger_than_the_one_before(image05: Path) -> None:
    # its scale says it is coarser: padded beyond the data (webknossos), a warning
    _edit(image05, "1", lambda d: d.update(shape=[2, 64, 64]))
    assert _codes(image05) == [] and "dataset-padded" in _codes(image05, "warning")
    # the same scale as the level before: out of order, an error
    _edit(
        image05,
        "",
        lambda d: _ome(d)["multiscales"][0]["datasets"][1]["coordinateTransformations"][0].update(
            scale=_ome(d)["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
        ),
    )
    assert "dataset-order" in _codes(image05)


def test_zep10_must_understand_extension(image05: Path) -> None:
    _edit(image05, "0", lambda d: d.update(extensions=[{"name": "x.unknown"}]))
    assert "zarr-extension" in _codes(image05)


def test_v04_should_rules_are_warnings(image04: Path) -> None:
    def strip(d: dict[str, Any]) -> None:
        ms = d["multiscales"][0]
        del ms["version"], ms["name"]
        ms["axes"][0].pop("unit")

    _edit(image04, "", strip)
    assert _codes(image04) == []
    warnings = _codes(image04, "warning")
    assert {"multiscales-version", "multiscales-name", "axis-unit"} <= set(warnings)
    code, _ = validate_path(str(image04), deep=False)
    assert code == 0


def test_omero_schema_rules(image04: Path) -> None:
    def omero(d: dict[str, Any]) -> None:
        good = {"color": "FF0000", "window": {"start": 0, "end": 9, "min": 0, "max": 9}}
        d["omero"] = {"channels": [{"color": 255, "window": {"start": "0", "end": 10}}, good]}

    _edit(image04, "", omero)
    assert sorted(_codes(image04)) == ["omero-color", "omero-window"]
    assert "omero-channel-count" in _codes(image04, "warning")  # 2 channels, no channel axis


def test_no_space_axis_is_refused_by_the_reader(image04: Path) -> None:
    def types(d: dict[str, Any]) -> None:
        d["multiscales"][0]["axes"] = [{"name": "t", "type": "time"}, {"name": "a"}]

    _edit(image04, "", types)
    assert "space-axes" in _codes(image04)
    with pytest.raises(MetadataError, match="no space axis"):
        read_layer_data(str(image04))


def test_label_image_opened_on_its_own_has_a_name(image05: Path) -> None:
    layers = read_layer_data(str(image05 / "labels" / "cells"))
    assert [kw["name"] for _, kw, _ in layers] == ["cells"]


def test_lenient_file_reads_with_one_warning_naming_the_rule(
    image05: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def drop_scale(d: dict[str, Any]) -> None:
        _ome(d)["multiscales"][0]["datasets"][1]["coordinateTransformations"] = []

    _edit(image05, "", drop_scale)
    with caplog.at_level(logging.WARNING, logger="napari_ozx"):
        assert read_layer_data(str(image05))
    msgs = [r.getMessage() for r in caplog.records if "breaks an OME-Zarr rule" in r.getMessage()]
    assert len(msgs) == 1 and RULES["transform-scale"].text in msgs[0]


# ------------------------------------------------------------------------ plates


@pytest.fixture
def plate(tmp_path: Path) -> tuple[Path, PlateSpec]:
    spec = PlateSpec(n_rows=2, n_cols=2, fields=2, size=(16, 16), labels=False, acquisitions=2)
    return write_plate(tmp_path / "plate.zarr", spec, "0.5"), spec


def test_valid_plate_has_no_error(plate: tuple[Path, PlateSpec]) -> None:
    assert _codes(plate[0]) == []


def test_well_indices_contradict_path(plate: tuple[Path, PlateSpec]) -> None:
    def swap(d: dict[str, Any]) -> None:
        w = _ome(d)["plate"]["wells"][0]
        w["rowIndex"], w["columnIndex"] = 1, 1

    _edit(plate[0], "", swap)
    assert _codes(plate[0]) == ["well-index-mismatch"]


def test_plate_names_and_well_paths(plate: tuple[Path, PlateSpec]) -> None:
    def names(d: dict[str, Any]) -> None:
        p = _ome(d)["plate"]
        p["columns"].append({"name": "2"})
        p["rows"][0]["name"] = "A-1"

    _edit(plate[0], "", names)
    codes = _codes(plate[0])
    assert codes.count("plate-name-chars") == 2 and "well-path" in codes


def test_field_without_acquisition_when_plate_has_several(plate: tuple[Path, PlateSpec]) -> None:
    _edit(plate[0], "A/1", lambda d: _ome(d)["well"]["images"][0].pop("acquisition"))
    assert _codes(plate[0]) == ["well-acquisition"]


def test_plate_fields_are_checked(plate: tuple[Path, PlateSpec]) -> None:
    _edit(plate[0], "B/2/1", lambda d: _ome(d)["multiscales"][0].pop("axes"))
    assert _codes(plate[0]) == ["axes-missing"]


def test_absent_wells_are_capped(tmp_path: Path) -> None:
    spec = PlateSpec(n_rows=4, n_cols=8, fields=1, size=(8, 8), labels=False, levels=1)
    spec.missing_groups = {(r, c) for r in range(4) for c in range(8)} - {(0, 0)}
    path = write_plate(tmp_path / "p.zarr", spec, "0.5")
    findings = validate_ome(path)
    assert [f.code for f in findings].count("well-missing") == MAX_PER_CODE
    assert any(f.code == "findings-truncated" and "11 more" in f.message for f in findings)


def test_plate_with_a_well_of_too_many_dimensions_still_opens(
    plate: tuple[Path, PlateSpec],
) -> None:
    path, _ = plate
    for level in ("0", "1"):
        _edit(path, f"A/2/0/{level}", lambda d: d.update(shape=[1, *d["shape"]]))
        _edit(path, f"A/2/0/{level}", lambda d: d.update(dimension_names=None))
        _edit(
            path,
            f"A/2/0/{level}",
            lambda d: d["chunk_grid"]["configuration"].update(
                chunk_shape=[1, *d["chunk_grid"]["configuration"]["chunk_shape"]]
            ),
        )
    assert "dataset-ndim" in _codes(path)
    layers = read_layer_data(str(path))  # was: unexpected IndexError for the whole plate
    assert any(kind == "image" for _, _, kind in layers)


# -------------------------------------------------------------- bioformats2raw


def test_bioformats2raw_rules(tmp_path: Path) -> None:
    p = tmp_path / "b2r.zarr"
    write_image(p, np.zeros((16, 16), np.uint8), "yx", "0.5", levels=1, group_path="0")
    (p / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"ome": {"version": "0.5", "bioformats2raw.layout": 3}},
            }
        )
    )
    assert _codes(p) == []
    _edit(p, "", lambda d: _ome(d).update({"bioformats2raw.layout": 2}))
    assert _codes(p) == ["bf2raw-layout"]
    _edit(p, "", lambda d: _ome(d).update({"bioformats2raw.layout": 3}))
    (p / "OME").mkdir()
    (p / "OME" / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"ome": {"version": "0.5", "series": ["0", "7"]}},
            }
        )
    )
    assert _codes(p) == ["bf2raw-series"]


def test_cli_exit_codes(image05: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(image05)]) == 0
    capsys.readouterr()
    _edit(image05, "", lambda d: _ome(d)["multiscales"][0]["axes"].pop(0))
    assert main(["validate", "--json", str(image05)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any(f["code"] == "dataset-ndim" for f in report["findings"])
    assert main(["validate", str(tmp_path / "absent.zarr")]) == 2


def test_validator_never_raises_on_garbage(tmp_path: Path) -> None:
    p = tmp_path / "g.zarr"
    p.mkdir()
    (p / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {
                    "ome": {
                        "version": "0.5",
                        "multiscales": [{"axes": [1, None], "datasets": [{"path": 3}, "x"]}],
                        "omero": [],
                        "plate": {"rows": "A", "wells": [{}]},
                        "image-label": {"colors": [None], "properties": 3},
                    }
                },
            }
        )
    )
    codes = _codes(p)
    assert {"plate-rows-columns", "plate-wells"} <= set(codes)
    with pytest.raises(OzxError):
        read_layer_data(str(p))


def test_intermediate_label_group_must_not_hold_metadata(tmp_path: Path) -> None:
    p = tmp_path / "nested.zarr"
    data = np.zeros((32, 32), np.uint16)
    write_image(p, data, "yx", "0.5", levels=1)
    write_image(p, data.astype(np.uint8), "yx", "0.5", levels=1, group_path="labels/orig/0")
    _edit(p, "labels/orig/0", lambda d: _ome(d).update({"image-label": {"colors": []}}))
    (p / "labels" / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"ome": {"version": "0.5", "labels": ["orig/0"]}},
            }
        )
    )
    assert _codes(p) == []
    _edit(
        p, "labels/orig", lambda d: d.update(attributes={"ome": {"version": "0.5", "labels": []}})
    )
    assert _codes(p) == ["label-intermediate"]


def test_paths_leaving_the_hierarchy_are_reported_not_read() -> None:
    corpus = CORPUS / "files"
    labels = validate_ome(corpus / "labels_escaping_path.ozx")
    assert any(f.code == "label-missing" and "outside" in f.message for f in labels)
    levels = validate_ome(corpus / "ms_dataset_path_dotdot.ozx")
    assert [f.code for f in levels if f.severity == "error"] == ["dataset-path"]
