"""A remote bioformats2raw file's OME-XML is read in ranges, only up to its last
``Image``: a 20 MB XML costs the open a few MiB, not 20."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support.httpserver import Server
from tests.ngff.omexml import b2r_copy, big_annotations


@pytest.mark.parametrize("kind", ["directory", "ozx"])
def test_remote_xml_read_in_ranges(kind: str, tmp_path: Path) -> None:
    from napari_ozx.layers.reading import read_layer_data
    from tests._support.omegen import zip_dir

    path = b2r_copy(tmp_path, big_annotations(20 << 20))
    if kind == "ozx":
        path = zip_dir(path, tmp_path / "b2r.ozx")
    with Server(tmp_path) as srv:
        ((_, kw, _),) = read_layer_data(f"{srv.url}/{path.name}")
        got = srv.body_bytes
    assert kw["name"] == ["DAPI", "GFP"] and kw["units"][-1] == "micrometer"
    assert got < 4 << 20, got  # the XML's head only (1 MiB ranges), not its 20 MB
