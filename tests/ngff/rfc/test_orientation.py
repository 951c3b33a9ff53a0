"""RFC-4 anatomical orientation, on images ngff-zarr 0.50 writes with
``to_multiscales(..., orientation=...)``: read into the model and napari's axis labels
(RFC-4 §Coordinate Direction Convention: "The directional orientation values ...
specify the direction from lowest to highest coordinates along the axis"), listed by
``info --json`` and the inspector, kept on save and convert, and checked by ``validate``
with RFC-4 §Proposal's rules.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from napari_ozx.inspection import Inspection
from napari_ozx.inspection.render import info_report, info_text
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.layers.writing import write_layer_data
from napari_ozx.ngff.model.metadata import Axis, parse_node_attributes
from napari_ozx.ngff.model.orientation import (
    ANATOMICAL_VALUES,
    Orientation,
    axis_label,
    family,
    split_axis_label,
)
from napari_ozx.ngff.validate.walk import validate
from napari_ozx.ngff.write.convert import convert
from tests.ngff.rfc.ngffzarr import write_ngff_zarr

pytest.importorskip("ngff_zarr")

LPS = ("z (inferior→superior)", "y (anterior→posterior)", "x (right→left)")


@pytest.fixture(scope="module")
def lps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ngff-zarr's LPS preset (z inferior-to-superior, y anterior-to-posterior, x
    right-to-left) written as 0.5 (on the multiscale's axes) and 0.6 (on the axes of
    its coordinate system)."""
    d = tmp_path_factory.mktemp("lps")
    return {v: write_ngff_zarr(d / f"lps{v}.ome.zarr", v, "LPS") for v in ("0.5", "0.6")}


def _ome(path: Path) -> dict[str, Any]:
    doc = json.loads((path / "zarr.json").read_text())
    out: dict[str, Any] = doc["attributes"]["ome"]
    return out


def _axes(ome: dict[str, Any]) -> list[dict[str, Any]]:
    ms = ome["multiscales"][0]
    out: list[dict[str, Any]] = (
        ms["coordinateSystems"][0]["axes"] if "coordinateSystems" in ms else ms["axes"]
    )
    return out


def test_the_vocabulary_is_rfc4s_24_values_in_12_families() -> None:
    import ngff_zarr as nz

    assert len(ANATOMICAL_VALUES) == len(set(ANATOMICAL_VALUES)) == 24
    # the same 24 as the writer's own enumeration
    assert set(ANATOMICAL_VALUES) == {v.value for v in nz.AnatomicalOrientationValues}
    assert len({family(v) for v in ANATOMICAL_VALUES}) == 12
    assert family("anterior-to-posterior") == family("posterior-to-anterior")
    assert family("rostral-to-caudal") != family("cranial-to-caudal")
    for v in ANATOMICAL_VALUES:
        o = Orientation("anatomical", v)
        assert split_axis_label(axis_label("y", o)) == ("y", o)
    assert split_axis_label("y") == ("y", None)
    assert split_axis_label("y (pixels)") == ("y (pixels)", None)


@pytest.mark.parametrize("version", ["0.5", "0.6"])
def test_orientation_is_read_shown_and_serialised(lps: dict[str, Path], version: str) -> None:
    path = lps[version]
    written = _axes(_ome(path))
    assert written[1]["orientation"] == {"type": "anatomical", "value": "anterior-to-posterior"}
    meta = parse_node_attributes(json.loads((path / "zarr.json").read_text())["attributes"], 3)
    ms = meta.multiscales[0]
    assert [a.orientation for a in ms.axes] == [
        Orientation("anatomical", "inferior-to-superior"),
        Orientation("anatomical", "anterior-to-posterior"),
        Orientation("anatomical", "right-to-left"),
    ]
    # one source of truth: what the model serialises is what ngff-zarr wrote
    assert _axes(meta.to_attributes(version)["ome"]) == written

    (ld,) = read_layer_data(str(path))
    kwargs = ld[1]
    assert tuple(kwargs["axis_labels"]) == LPS
    assert kwargs["metadata"]["napari_ozx"]["orientation"]["y"] == {
        "type": "anatomical",
        "value": "anterior-to-posterior",
    }


def test_info_json_and_the_inspector_show_it(lps: dict[str, Path]) -> None:
    with Inspection(str(lps["0.6"])) as insp:
        report = info_report(insp)
        (image,) = report["images"]
        assert [a.get("orientation", {}).get("value") for a in image["axes"]] == [
            "inferior-to-superior",
            "anterior-to-posterior",
            "right-to-left",
        ]
        assert "orientation: z inferior→superior, y anterior→posterior" in info_text(report)
        details = insp.details(insp.root)  # what the inspector dock renders
        axes = {r.label: r.value for r in details.section("Axes").rows}
        assert axes["y"] == "space, micrometer, anatomical anterior→posterior"


def test_kept_on_save_and_convert(lps: dict[str, Path], tmp_path: Path) -> None:
    src = lps["0.6"]
    want = _axes(_ome(src))
    # File > Save: the layer's labels carry the directions back into the written axes
    saved = write_layer_data(tmp_path / "saved.zarr", read_layer_data(str(src))).target
    assert [a.get("orientation") for a in _axes(_ome(saved))] == [a["orientation"] for a in want]
    # convert: every level copied, the source's metadata kept
    for version in ("0.5", "0.6"):
        out = tmp_path / f"conv{version}.zarr"
        convert(str(src), str(out), _options(version))
        assert [a.get("orientation") for a in _axes(_ome(out))] == [a["orientation"] for a in want]
        (ld,) = read_layer_data(str(out))
        assert tuple(ld[1]["axis_labels"]) == LPS


def _options(version: str) -> Any:
    from napari_ozx.ngff.write.options import WriteOptions

    return WriteOptions(version=version, format="directory")


def _validate_with(src: Path, tmp_path: Path, orientations: list[Any]) -> list[str]:
    p = tmp_path / f"bad{len(list(tmp_path.iterdir()))}.ome.zarr"
    shutil.copytree(src, p)
    doc = json.loads((p / "zarr.json").read_text())
    doc.pop("consolidated_metadata", None)
    for axis, o in zip(_axes(doc["attributes"]["ome"]), orientations, strict=True):
        axis.pop("orientation", None)
        if o is not None:
            axis["orientation"] = o
    (p / "zarr.json").write_text(json.dumps(doc))
    return [f.code for f in validate(str(p)).findings if f.code.startswith("orientation")]


def _a(value: str, type_: str = "anatomical") -> dict[str, str]:
    return {"type": type_, "value": value}


def test_validate_checks_rfc4s_rules(lps: dict[str, Path], tmp_path: Path) -> None:
    src = lps["0.6"]
    assert [f.code for f in validate(str(src)).findings if f.severity == "error"] == []
    # "the three axes must be on distinct anatomical directions": one family each
    assert _validate_with(
        src, tmp_path, [_a("left-to-right"), _a("right-to-left"), _a("inferior-to-superior")]
    ) == ["orientation-family"]
    assert _validate_with(src, tmp_path, [_a("top-to-bottom"), None, None]) == ["orientation-value"]
    assert _validate_with(src, tmp_path, [_a("north-to-south", "geographical"), None, None]) == [
        "orientation-type"
    ]
    assert _validate_with(src, tmp_path, ["anterior-to-posterior", None, None]) == [
        "orientation-object"
    ]
    # optional per axis: some axes without one, null and {} are all fine
    assert _validate_with(src, tmp_path, [None, {}, _a("apex-to-base")]) == []


def test_orientation_only_on_space_axes() -> None:
    from napari_ozx.ngff.model.orientation import orientation_problems

    axes = [
        {"name": "t", "type": "time", "orientation": _a("left-to-right")},
        {"name": "y", "type": "space", "orientation": _a("dorsal-to-ventral")},
        {"name": "x", "type": "space"},
    ]
    assert [c for c, _ in orientation_problems(axes)] == ["orientation-space"]


def test_an_unknown_orientation_is_kept_not_dropped() -> None:
    o = Orientation("geographical", "north-to-south")
    axis = Axis("y", "space", "meter", orientation=o)
    assert axis.to_json("0.6")["orientation"] == {"type": "geographical", "value": "north-to-south"}
    assert axis_label("y", o) == "y (geographical: north-to-south)"
