"""A remote OME-Zarr directory's first open: its metadata in two round trips.

The root (its format not known yet) is asked for in both Zarr formats at once, and an
image's ``labels/`` and ``tables/`` groups come in the batch of its levels, on both HTTP
backends. Against a real local server (tests/_support/httpserver.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from napari_ozx.ozx.remote.backends import BACKEND_ENV
from tests._support.httpserver import Server

pytestmark = pytest.mark.network


@pytest.fixture(params=["obstore", "fsspec"])
def backend(request, monkeypatch):
    pytest.importorskip("obstore" if request.param == "obstore" else "aiohttp")
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param


@pytest.fixture
def remote_v04_dir(tmp_path):
    from tests._support.omegen import write_image

    data = np.arange(2 * 8 * 64 * 64, dtype=np.uint16).reshape(2, 8, 64, 64)
    write_image(
        tmp_path / "img.ome.zarr",
        data,
        version="0.4",
        levels=2,
        labels={"cells": (data[0] % 7 == 0).astype(np.uint8)},
    )
    with Server(tmp_path) as srv:
        yield f"{srv.url}/img.ome.zarr", data


def test_a_remote_v2_root_asks_for_both_formats_at_once(remote_v04_dir, monkeypatch, backend):
    """The root of a remote directory (format not known yet): its Zarr v2 documents are
    requested together with zarr.json, not after zarr.json's 404 (a round trip saved)."""
    from napari_ozx.ngff.read import documents
    from napari_ozx.ngff.read.open import open_ome_zarr

    url, _ = remote_v04_dir
    events: list[tuple[str, str]] = []
    orig = documents._read_json

    async def spy(store, key, *args, **kwargs):
        events.append(("start", key))
        try:
            return await orig(store, key, *args, **kwargs)
        finally:
            events.append(("end", key))

    monkeypatch.setattr(documents, "_read_json", spy)
    with open_ome_zarr(url) as oz:
        assert oz.zarr_format == 2
    assert events.index(("start", ".zattrs")) < events.index(("end", "zarr.json"))


def test_a_remote_images_labels_and_tables_come_with_its_levels(
    remote_v04_dir, monkeypatch, backend
):
    """The labels/ and tables/ groups of a remote image are read in the batch of its
    levels (one round trip), and not asked for again when the reader lists them."""
    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.ngff.read import open as open_mod

    url, data = remote_v04_dir
    batches: list[list[str]] = []
    orig = open_mod.read_documents

    def spy(store, paths, *args, **kwargs):
        batches.append(list(paths))
        return orig(store, paths, *args, **kwargs)

    monkeypatch.setattr(open_mod, "read_documents", spy)
    layers = read_layer_data(url)
    assert [kind for _, _, kind in layers] == ["image", "labels"]
    np.testing.assert_array_equal(np.asarray(layers[0][0][0]), data)
    levels = next(b for b in batches if "0" in b)
    assert {"labels", "tables"} <= set(levels)
    later = [p for b in batches[batches.index(levels) + 1 :] for p in b]
    assert "labels" not in later and "tables" not in later
