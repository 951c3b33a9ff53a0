"""What the XML says, shown (names, dates, wavelengths, each with its source), and a
plate's fields placed by their ``WellSample`` positions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from napari_ozx.inspection.render import info_report, info_text
from napari_ozx.inspection.source import Inspection
from tests.ngff.omexml import DATA, b2r_copy, big_annotations


def test_info_json_shows_the_xml_as_structured_keys() -> None:
    with Inspection(DATA / "b2r_04.zarr") as insp:
        report = info_report(insp)
    xml = report["images"][0]["ome_xml"]
    assert xml["name"] == "Embryo 1"
    assert xml["acquisition_date"] == "2024-03-05T10:20:30"
    assert xml["description"] == "Embryo 1, lateral view"
    assert xml["objective"] == {
        "nominal_magnification": 60.0,
        "lens_na": 1.4,
        "immersion": "Oil",
        "model": "Plan Apo 60x",
    }
    dapi = xml["channels"][0]
    assert dapi["excitation_wavelength"] == {"value": 405.0, "unit": "nm"}
    assert dapi["emission_wavelength"] == {"value": 450.0, "unit": "nm"}
    assert dapi["fluor"] == "DAPI"
    assert xml["time_increment"] == {"value": 500.0, "unit": "ms"}
    assert xml["annotations"][0] == {
        "id": "Annotation:0",
        "kind": "map",
        "namespace": "openmicroscopy.org/omero/client/mapAnnotation",
        "value": [["Genotype", "wild type"], ["Stage", "E12.5"]],
    }
    assert xml["sources"]["scale x"] == "OME-XML"
    json.dumps(report)  # JSON-able
    text = info_text(report)
    assert "objective: 60x NA 1.4 Oil" in text
    assert "Genotype=wild type" in text


def test_inspector_section_names_where_values_came_from() -> None:
    with Inspection(DATA / "b2r_two.zarr") as insp:
        first = next(n for n in insp.children(insp.root) if n.path == "0")
        details = insp.details(first)
    section = details.section("OME-XML")
    assert section is not None
    rows = {r.label: r.value for r in section.rows}
    assert rows["Name"] == "Embryo 1"
    assert rows["Source of scale x"] == "OME-Zarr"  # the multiscale says 0.5 micrometer
    assert rows["Source of channel names"] == "OME-XML"


def test_info_finds_annotations_at_the_end_of_a_huge_xml(tmp_path: Path) -> None:
    """The map annotation sits after 30 MB of original metadata; ``info`` still
    shows it (its timing is in benchmarks/bench_omexml.py)."""
    path = b2r_copy(tmp_path, big_annotations(30 << 20))
    out = subprocess.run(
        [sys.executable, "-m", "napari_ozx", "info", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    xml = json.loads(out)["images"][0]["ome_xml"]
    assert [a["id"] for a in xml["annotations"]] == ["Annotation:0", "Annotation:1"]


# ------------------------------------------------ fields at their WellSample positions


def test_plate_fields_are_placed_by_their_well_sample_positions() -> None:
    """yaozarrs wrote both fields without a translation; the XML's WellSample says
    the second sits 13 µm right and 6.5 µm down of the first."""
    from napari_ozx.layers.reading import well_layer_data
    from napari_ozx.ngff.read.plate import open_hcs

    plate = open_hcs(DATA / "b2r_plate.zarr")
    layers, errors = well_layer_data(plate, "A/1")
    assert not errors
    (_, first, _), (_, second, _) = layers
    assert first["translate"] == pytest.approx((0.0, 0.0))
    assert second["translate"] == pytest.approx((6.5, 13.0))
    assert second["units"] == ("micrometer", "micrometer")
    assert second["scale"] == pytest.approx((0.65, 0.65))  # the field's XML Image too
