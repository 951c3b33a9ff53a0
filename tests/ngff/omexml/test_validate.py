"""``validate`` checks bioformats2raw's rules about ``OME/METADATA.ome.xml``,
quoting OME-Zarr 0.4/0.5 §bf2raw "Details"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from napari_ozx.ngff.validate.walk import validate_ome
from tests.ngff.omexml import DATA, XML, b2r_copy


def _codes(path: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in validate_ome(path):
        out.setdefault(f.code, []).append(f)
    return out


@pytest.mark.parametrize("name", ["b2r_04.zarr", "b2r_two.zarr", "b2r_plate.zarr"])
def test_real_tools_files_pass(name: str) -> None:
    assert not [c for c in _codes(DATA / name) if c.startswith("bf2raw")]


def test_metadata_only_must_be_used(tmp_path: Path) -> None:
    xml = (DATA / "b2r_04.zarr" / XML).read_bytes()
    codes = _codes(b2r_copy(tmp_path, xml.replace(b"<MetadataOnly/>", b'<TiffData IFD="0"/>')))
    (f,) = codes["bf2raw-metadata-only"]
    assert f.severity == "error" and "TiffData" in f.message
    assert "MUST use <MetadataOnly/> elements" in f.rule


def test_series_must_match_the_image_elements(tmp_path: Path) -> None:
    path = tmp_path / "two.zarr"
    shutil.copytree(DATA / "b2r_two.zarr", path)
    doc = json.loads((path / "OME" / "zarr.json").read_text())
    doc["attributes"]["ome"]["series"] = ["0"]  # the XML has two Image elements
    (path / "OME" / "zarr.json").write_text(json.dumps(doc))
    (f,) = _codes(path)["bf2raw-xml-images"]
    assert "1 images" in f.message and "2 Image elements" in f.message
    assert "MUST match the order of the Image elements" in f.rule


def test_an_xml_without_image_elements_is_a_warning(tmp_path: Path) -> None:
    # the spec's own bf2raw example (as the real-world corpus builds it) carries an empty
    # <OME/>: it describes none of the images, so there is no order to contradict
    empty = b'<?xml version="1.0" encoding="UTF-8"?>'
    empty += b'<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06"/>'
    codes = _codes(b2r_copy(tmp_path, empty))
    assert "bf2raw-xml-images" not in codes
    (f,) = codes["bf2raw-xml-no-images"]
    assert f.severity == "warning" and "no Image elements" in f.message
    assert "SHOULD have OME metadata representing the entire collection" in f.rule


def test_invalid_and_missing_xml(tmp_path: Path) -> None:
    bad = b2r_copy(tmp_path, b"<OME><Image ID='Image:0'>")
    assert _codes(bad)["bf2raw-xml-invalid"][0].severity == "error"
    (bad / XML).unlink()
    assert _codes(bad)["bf2raw-xml-missing"][0].severity == "warning"


def test_plate_without_series(tmp_path: Path) -> None:
    path = tmp_path / "plate.zarr"
    shutil.copytree(DATA / "b2r_plate.zarr", path)
    doc = json.loads((path / "OME" / "zarr.json").read_text())
    del doc["attributes"]["ome"]["series"]
    (path / "OME" / "zarr.json").write_text(json.dumps(doc))
    (f,) = _codes(path)["bf2raw-plate-series"]
    assert "Matching series metadata SHOULD be provided" in f.rule
