"""RFC-8 collections, draft, on fixtures written after the draft's own
examples (:mod:`.rfc8_examples`) around images written by ngff-zarr 0.50: every image node
listed by a ``zarr`` path ("Path interface": "Implementations MUST append `zarr.json` to
the path"), relative or absolute, is opened and placed by the collection's scene
("Coordinate transformations"), with one warning that RFC-8 is a draft; ``info`` lists the
nodes; ``validate`` walks the members. A file with none of this opens as before.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from napari_ozx._reader import get_reader
from napari_ozx.inspection import Inspection
from napari_ozx.inspection.render import info_report, info_text
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.model.collection import DRAFT_NOTE
from napari_ozx.ngff.validate.walk import validate
from tests.ngff.rfc.ngffzarr import SCALE, pixels, write_ngff_zarr
from tests.ngff.rfc.rfc8_examples import TILE_TRANSLATIONS, write_nested, write_tiles

pytest.importorskip("ngff_zarr")


@pytest.fixture(scope="module")
def tiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiles(tmp_path_factory.mktemp("rfc8") / "tiles.zarr")


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rfc8n")
    return write_nested(d / "nested.zarr", d / "outside")


def _drafts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if DRAFT_NOTE in r.getMessage()]


def test_tiles_open_each_placed_by_the_collections_scene(
    tiles: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert get_reader(str(tiles)) is not None  # claimed (declined before)
    reports: list[str] = []
    with caplog.at_level(logging.WARNING):
        lds = read_layer_data(str(tiles), report=lambda w, e: reports.append(f"{w}: {e}"))
    assert len(_drafts(caplog)) == 1  # one warning that RFC-8 is a draft
    assert not reports
    assert [k["name"] for _, k, _ in lds] == ["Tile 0", "Tile 1"]
    for (data, kwargs, kind), shift in zip(lds, TILE_TRANSLATIONS.values(), strict=True):
        assert kind == "image"
        np.testing.assert_array_equal(np.asarray(data[0]), pixels())
        assert tuple(kwargs["scale"]) == tuple(SCALE.values())
        # "translation [0, 0, 100]" from the tile's system to "world": level 0's origin
        assert tuple(kwargs["translate"]) == tuple(shift)
        assert kwargs["metadata"]["napari_ozx"]["scene_system"] == "world"


def test_relative_absolute_and_outside_members_open(
    nested: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reports: list[str] = []
    with caplog.at_level(logging.WARNING):
        lds = read_layer_data(str(nested), report=lambda w, e: reports.append(f"{w}: {e}"))
    assert [k["name"] for _, k, _ in lds] == ["raw", "seg", "far"]
    nodes = [k["metadata"]["napari_ozx"]["node"] for _, k, _ in lds]
    assert nodes[:2] == ["raw", "more/seg"]  # ./raw and a file:// URL under the root
    assert lds[2][1]["metadata"]["napari_ozx"]["source"].endswith("far.zarr")
    for data, _, _ in lds:
        np.testing.assert_array_equal(np.asarray(data[0]), pixels())
    (draft,) = _drafts(caplog)
    # what is listed but not opened is named, not dropped silently
    assert "elsewhere: a 'json' path" in draft and "inline: an inline multiscale" in draft
    (outside,) = reports  # the scene cannot name an image in another folder
    assert "far.zarr" in outside and "outside the collection" in outside


def test_info_lists_the_nodes(nested: Path) -> None:
    with Inspection(str(nested)) as insp:
        report = info_report(insp)
        details = insp.details(insp.root)
    col = report["collection"]
    assert col["name"] == "nested-example"
    assert [(n["name"], n["opened"]) for n in col["nodes"]] == [
        ("raw", True),
        ("seg", True),
        ("far", True),
        ("elsewhere", False),
        ("inline", False),
    ]
    assert col["nodes"][1]["within"] == ["inner"] and col["nodes"][1]["location"] == "more/seg"
    assert json.loads(json.dumps(report)) == report  # --json prints it as it is
    assert "collection 'nested-example' (RFC-8, draft): 5 nodes" in info_text(report)
    assert not report["problems"]
    section = next(s for s in details.sections if s.title.startswith("Collection"))
    assert [r.label for r in section.rows][:2] == ["raw", "inner / seg"]


def test_validate_walks_the_members(tiles: Path, tmp_path: Path) -> None:
    report = validate(str(tiles))
    codes = {f.code: f.severity for f in report.findings}
    assert codes.get("collection-draft") == "warning"
    assert "not-ome" not in codes and "error" not in codes.values(), report.findings
    # a member that is no image is named
    broken = tmp_path / "broken.zarr"
    doc = json.loads((tiles / "zarr.json").read_text())
    doc["attributes"]["ome"]["nodes"][0]["path"]["path"] = "./missing.zarr"
    broken.mkdir()
    (broken / "zarr.json").write_text(json.dumps(doc))
    codes = [f.code for f in validate(str(broken)).findings]
    assert "collection-member" in codes


def test_an_image_without_any_of_this_opens_as_before(tmp_path: Path, store_reads, caplog):
    """No extra request: a plain 0.6 image reads its own documents and nothing else,
    and gives no warning."""
    p = write_ngff_zarr(tmp_path / "plain.ome.zarr", "0.6")
    store_reads.clear()
    with caplog.at_level(logging.WARNING):
        (ld,) = read_layer_data(str(p))
    assert tuple(ld[1]["axis_labels"]) == ("z", "y", "x")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert {"zarr.json", "scale0/image/zarr.json", "scale1/image/zarr.json"} <= set(store_reads)
    # only documents (no chunk) of the image, its levels and the groups an image may have
    nodes = {"", "scale0/image", "scale1/image", "labels", "tables"}
    docs = {"zarr.json", ".zattrs", ".zgroup", ".zarray"}
    assert all(k.rpartition("/")[0] in nodes and k.rpartition("/")[2] in docs for k in store_reads)
