"""``convert`` keeps bioformats2raw's OME-XML when it keeps the images, and says so when
it cannot (issue 41 item 6)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from napari_ozx.ngff.write.convert import convert_summary
from tests.ngff.omexml import DATA, XML


def test_a_plate_keeps_its_xml_series_and_layout(tmp_path: Path) -> None:
    target = tmp_path / "plate.zarr"
    summary = convert_summary(DATA / "b2r_plate.zarr", target)
    assert summary.notes == ()
    assert (target / XML).read_bytes() == (DATA / "b2r_plate.zarr" / XML).read_bytes()
    ome = json.loads((target / "OME" / "zarr.json").read_text())["attributes"]["ome"]
    assert ome["series"] == ["A/1/0", "A/1/1"]
    root = json.loads((target / "zarr.json").read_text())["attributes"]["ome"]
    assert root["bioformats2raw.layout"] == 3
    from napari_ozx.layers.reading import well_layer_data
    from napari_ozx.ngff.read.plate import open_hcs

    layers, _ = well_layer_data(open_hcs(target), "A/1")  # still placed by the XML
    assert layers[1][1]["translate"] == pytest.approx((6.5, 13.0))


def test_a_write_that_cannot_keep_it_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="napari_ozx.ngff.write.omexml"):
        one = convert_summary(DATA / "b2r_04.zarr", tmp_path / "one.zarr")
        ozx = convert_summary(DATA / "b2r_plate.zarr", tmp_path / "plate.ozx")
    assert "METADATA.ome.xml not written" in one.notes[0]
    assert "image alone" in one.message()
    assert ".ozx" in ozx.notes[0]
    assert not (tmp_path / "one.zarr" / XML).exists()
    assert len(caplog.records) == 2
    # what the XML filled is kept in the OME-Zarr metadata of the image written alone
    attrs = json.loads((tmp_path / "one.zarr" / ".zattrs").read_text())
    assert attrs["multiscales"][0]["axes"][-1]["unit"] == "micrometer"
    assert [c["label"] for c in attrs["omero"]["channels"]] == ["DAPI", "GFP"]


def test_save_as_of_layers_from_a_b2r_file_says_the_xml_is_not_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """File > Save writes the layers as new images: the source's XML would no longer
    match them, so the summary (File > Save's notification) says it is not written."""
    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.layers.writing import write_layer_data_summary

    ((data, kw, _), _) = read_layer_data(str(DATA / "b2r_two.zarr"))
    # the first channel as napari holds it: one layer, its own record
    meta = {
        "name": kw["name"][0],
        "scale": kw["scale"],
        "translate": kw["translate"],
        "units": kw["units"],
        "axis_labels": kw["axis_labels"],
        "metadata": kw["metadata"][0],
    }
    layers = [(data[0], meta, "image")]
    with caplog.at_level(logging.WARNING, logger="napari_ozx.ngff.write.omexml"):
        summary = write_layer_data_summary(tmp_path / "saved.zarr", layers)
    assert "METADATA.ome.xml of" in summary.message() and "not written" in summary.notes[-1]
    assert not (tmp_path / "saved.zarr" / XML).exists()
    assert len(caplog.records) == 1
