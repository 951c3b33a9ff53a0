"""``convert`` keeps bioformats2raw's OME-XML when it keeps the images (into a directory
or an ``.ozx``), and says so once when it cannot (OME-Zarr 0.5
§"bioformats2raw.layout")."""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

import pytest

from napari_ozx.ngff.validate.walk import validate_ome
from napari_ozx.ngff.write.convert import convert_summary
from napari_ozx.ozx.validate import validate_rfc9
from tests.ngff.omexml import DATA, XML


def _member(target: Path, name: str) -> bytes:
    """A member of the written hierarchy: a file of a directory, an entry of an ``.ozx``."""
    if target.is_dir():
        return (target / name).read_bytes()
    with zipfile.ZipFile(target) as z:
        return z.read(name)


@pytest.fixture(scope="module")
def plate_targets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("convert")
    written = {}
    for name in ("plate.zarr", "plate.ozx"):
        summary = convert_summary(DATA / "b2r_plate.zarr", out / name)
        assert summary.notes == ()  # nothing to say: everything was kept
        written[name] = summary.target
    return written


@pytest.mark.parametrize("name", ["plate.zarr", "plate.ozx"])
def test_a_plate_keeps_its_xml_series_and_layout(plate_targets: dict[str, Path], name: str) -> None:
    """A directory and an ``.ozx`` alike: the XML byte for byte (an archive member after
    every ``zarr.json``, RFC-9 "zarr.json first"), the ``OME`` group's ``series`` and the
    root's ``bioformats2raw.layout``; validate finds nothing about bioformats2raw."""
    target = plate_targets[name]
    assert _member(target, XML) == (DATA / "b2r_plate.zarr" / XML).read_bytes()
    ome = json.loads(_member(target, "OME/zarr.json"))["attributes"]["ome"]
    assert ome["series"] == ["A/1/0", "A/1/1"]
    root = json.loads(_member(target, "zarr.json"))["attributes"]["ome"]
    assert root["bioformats2raw.layout"] == 3
    assert "plate" in root  # the plate's own metadata is still there
    findings = validate_ome(target)
    assert not [f for f in findings if f.code.startswith("bf2raw") or f.severity == "error"]
    if name.endswith(".ozx"):
        assert validate_rfc9(target).ok


@pytest.mark.parametrize("name", ["plate.zarr", "plate.ozx"])
def test_the_written_xml_is_read_back(plate_targets: dict[str, Path], name: str) -> None:
    """Our reader reads the kept XML from the target: channel names, and the fields placed
    by the XML's WellSample positions (the OME-Zarr metadata places them nowhere)."""
    from napari_ozx.layers.reading import well_layer_data
    from napari_ozx.ngff.read.omexml import ome_xml
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.read.plate import open_hcs

    with open_ome_zarr(plate_targets[name]) as oz:
        xml = ome_xml(oz)
    assert xml is not None
    assert [[c.name for c in im.channels] for im in xml.images] == [["DAPI", "GFP"]] * 2
    layers, _ = well_layer_data(open_hcs(plate_targets[name]), "A/1")
    assert [lyr[1]["name"] for lyr in layers] == [
        ["A1 f0 DAPI", "A1 f0 GFP"],
        ["A1 f1 DAPI", "A1 f1 GFP"],
    ]
    assert layers[1][1]["translate"] == pytest.approx((6.5, 13.0))


@pytest.mark.parametrize("name", ["one.zarr", "one.ozx"])
def test_an_image_written_alone_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """The collection's one image written at the target's root is no longer the
    collection its XML describes: one warning naming what is dropped, no XML."""
    target = tmp_path / name
    with caplog.at_level(logging.WARNING, logger="napari_ozx.ngff.write.omexml"):
        summary = convert_summary(DATA / "b2r_04.zarr", target)
    (note,) = summary.notes
    assert [r.getMessage() for r in caplog.records] == [f"{target}: {note}"]
    assert note.startswith(f"{XML} (and its OME series and bioformats2raw.layout) not written")
    assert "image alone" in note and "collection of 1 image " in note
    with pytest.raises((FileNotFoundError, KeyError)):
        _member(target, XML)
    # what the XML filled is kept in the OME-Zarr metadata of the image written alone
    from napari_ozx.layers.reading import read_layer_data

    ((_, kw, _),) = read_layer_data(str(target))
    assert kw["name"] == ["DAPI", "GFP"]
    assert kw["units"][-1] == "micrometer"


def _first_channel_of_the_first_image() -> list:
    from napari_ozx.layers.reading import read_layer_data

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
    return [(data[0], meta, "image")]


@pytest.mark.parametrize("how", ["File > Save", "export panel"])
def test_saving_one_image_of_a_collection_names_what_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """File > Save (and the export panel) write the layers as new images: the source's XML
    would no longer match them, so one warning (File > Save's notification) names the
    XML, the source and the images left out, and no XML is written."""
    from napari_ozx.layers.export import export_layers_summary
    from napari_ozx.layers.writing import write_layer_data
    from napari_ozx.ngff.write.options import WriteOptions

    layers = _first_channel_of_the_first_image()
    target = tmp_path / "saved.ozx"
    with caplog.at_level(logging.WARNING, logger="napari_ozx.ngff.write.omexml"):
        if how == "File > Save":
            summary = write_layer_data(target, layers)
        else:
            summary = export_layers_summary(target, layers, WriteOptions())
    assert len(caplog.records) == 1
    note = summary.notes[-1]
    assert note in summary.message() and caplog.records[0].getMessage().endswith(note)
    assert note.startswith(f"{XML} (and its OME series and bioformats2raw.layout) of b2r_two.zarr")
    assert "(image 0 saved as new images; 1 of its 2 left out)" in note
    assert "not written" in note
    with pytest.raises(KeyError):
        _member(target, XML)
