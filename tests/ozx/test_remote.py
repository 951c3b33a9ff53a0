"""Remote OME-Zarr over HTTP: .ozx by range requests, directories through zarr's fsspec store."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from napari_ozx._reader import get_reader, read
from napari_ozx._sample_data import sample_path
from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.read.open import open_ome_zarr
from tests._support.httpserver import Server
from tests._support.omegen import write_image

#: every test here talks to a local server (tests/_support/httpserver.py or moto's)
pytestmark = pytest.mark.network

pytest.importorskip("aiohttp")


@pytest.fixture(autouse=True, params=["obstore", "fsspec"])
def http_backend(request, monkeypatch):
    """Every test here runs on both HTTP backends: obstore (when installed) and fsspec,
    the pure-Python fallback, which must give the same pixels and the same errors."""
    from napari_ozx.ozx.remote.backends import BACKEND_ENV

    if request.param == "obstore":
        pytest.importorskip("obstore")
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    shutil.copy(sample_path(), root / "cells.ozx")
    data = np.random.default_rng(3).integers(0, 999, (2, 4, 96, 128), dtype=np.uint16)
    write_image(
        root / "img.ome.zarr", data, levels=2, labels={"cells": (data[0] > 800).astype(np.uint8)}
    )
    with Server(root) as srv:
        yield srv, data


def test_get_reader_claims_urls_without_network(served):
    srv, _ = served
    srv.reset()
    assert get_reader(f"{srv.url}/cells.ozx") is not None
    assert get_reader(f"{srv.url}/img.ome.zarr") is not None
    assert get_reader(f"{srv.url}/img.ome.zarr/") is not None
    assert get_reader(f"{srv.url}/picture.tif") is None
    assert srv.requests == []


def test_remote_ozx_reads_metadata_in_few_requests_and_pixels_lazily(served):
    srv, _ = served
    local = read_layer_data(str(sample_path()))
    srv.reset()
    layers = read_layer_data(f"{srv.url}/cells.ozx")
    # size lookup, end records + central directory (one tail read), leading zarr.json
    # entries (one prefetch): metadata of the whole hierarchy in at most 4 requests
    assert len(srv.requests) <= 4, srv.requests
    size = sample_path().stat().st_size
    assert srv.body_bytes < size / 4
    assert [kw["name"] for _, kw, _ in layers] == [kw["name"] for _, kw, _ in local]
    srv.reset()
    plane = np.asarray(layers[0][0][0][:, 8])
    np.testing.assert_array_equal(plane, np.asarray(local[0][0][0][:, 8]))
    assert srv.body_bytes < size / 2  # one plane, not the file


def test_remote_directory(served):
    srv, data = served
    with open_ome_zarr(f"{srv.url}/img.ome.zarr") as oz:
        (img,) = oz.images()
        np.testing.assert_array_equal(np.asarray(img.levels[0]), data)
        assert img.labels[0].name == "cells"


def test_missing_remote_file_is_a_clear_error(served):
    srv, _ = served
    with pytest.raises(OzxError, match=r"404|not found"):
        read_layer_data(f"{srv.url}/nope.ozx")
    assert read(f"{srv.url}/nope.ozx") == [(None,)]


def test_server_error_retried_then_reported(served):
    srv, _ = served
    srv.fail["/cells.ozx"] = 503
    srv.fail_times["/cells.ozx"] = 1  # one transient failure: the retry succeeds
    try:
        assert read_layer_data(f"{srv.url}/cells.ozx")
        srv.fail_times["/cells.ozx"] = 100  # persistent: bounded retries, then a message
        srv.reset()
        with pytest.raises(OzxError, match="503"):
            read_layer_data(f"{srv.url}/cells.ozx")
        from napari_ozx.ozx.remote.source import RETRIES

        # fsspec's size probe (HEAD, then GET) and our bounded retries: no endless loop
        assert len(srv.requests) <= 2 + RETRIES
    finally:
        srv.fail.clear()
        srv.fail_times.clear()


def test_remote_plate_ozx_overview_equals_local(tmp_path_factory):
    """Plates work over HTTP the same way (metadata in a few requests, lazy pixels)."""
    from napari_ozx.ngff.read.plate import HcsPlate
    from tests._support.plategen import built_plate

    paths, _spec = built_plate(tmp_path_factory, "p96_v05")
    root = paths["ozx"].parent
    with Server(root) as srv:
        url = f"{srv.url}/{paths['ozx'].name}"
        with open_ome_zarr(paths["ozx"]) as local, open_ome_zarr(url) as remote:
            srv.reset()
            ov_remote = HcsPlate(remote).overview()
            # every well, field and level document came from the prefetched metadata
            assert len(srv.requests) <= 4, srv.requests
            ov_local = HcsPlate(local).overview()
            np.testing.assert_array_equal(
                ov_remote.data[0, : ov_remote.pitch[0]].compute(),
                ov_local.data[0, : ov_local.pitch[0]].compute(),
            )


def test_remote_plane_of_a_morton_ordered_shard_reads_about_its_stored_bytes(tmp_path):
    """zarr-python writes a shard's inner chunks in Morton order, so one z-plane's chunks
    alternate with the next plane's. A remote read merges only near-adjacent byte ranges:
    one plane costs about its stored bytes (merging the ~chunk-sized gaps, as local reads
    do, transferred 1.75x), in more, concurrent, requests."""
    import struct

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr
    from napari_ozx.ozx.store import OzxStore

    rng = np.random.default_rng(5)
    data = rng.integers(0, 4000, (16, 256, 256), dtype=np.uint16)
    opts = WriteOptions(chunk_yx=64, shard_yx=256, shard_z=16, pyramid_levels=1)
    path = write_ome_zarr(
        tmp_path / "z.ozx",
        ImageSpec(data, [Axis(a, "space") for a in "zyx"]),
        options=opts,
    )
    z, n_inner = 5, 16 * 4 * 4
    with OzxStore(path) as st:
        raw = st.get_sync("0/c/0/0/0").to_bytes()
    index = raw[-(n_inner * 16 + 4) : -4]
    stored = sum(struct.unpack_from("<QQ", index, (z * 16 + k) * 16)[1] for k in range(16))
    with Server(tmp_path) as srv:
        layers = read_layer_data(f"{srv.url}/z.ozx")
        srv.reset()
        level0 = layers[0][0][0] if isinstance(layers[0][0], list) else layers[0][0]
        plane = np.asarray(level0[z])
        got = srv.body_bytes
    np.testing.assert_array_equal(plane, data[z])
    index_bytes = n_inner * 16 + 4
    assert got <= 1.1 * stored + index_bytes, (got, stored)


def test_remote_directory_with_labels_opens_in_napari(served):
    """`napari http://host/img.ome.zarr` with labels failed as a
    whole ("No such file or directory" from stat-ing the URL). It opens through the npe2
    reader, labels included; saving them back says why it cannot, and writes nothing."""
    from napari_ozx.layers.saveback import SaveBackError, save_labels_back

    srv, data = served
    url = f"{srv.url}/img.ome.zarr"
    layers = get_reader(url)(url)
    kinds = [k for _, _, k in layers]
    assert kinds == ["image", "labels"]
    labels_data, labels_kw, _ = layers[1]
    lvl0 = labels_data[0] if labels_kw.get("multiscale") else labels_data
    np.testing.assert_array_equal(np.asarray(lvl0), (data[0] > 800).astype(np.uint8))

    class Layer:  # what save_labels_back needs of a napari Labels layer
        def __init__(self) -> None:
            self.data, self.metadata, self.name = labels_data, labels_kw["metadata"], "cells"

    if labels_kw.get("multiscale"):
        pytest.skip("a large remote pyramid opens read-only: nothing to save back")
    with pytest.raises(SaveBackError, match="over the network"):
        save_labels_back(Layer())


def test_a_server_that_ignores_range_is_named_and_small_objects_read_whole(tmp_path, caplog):
    """Python's http.server answers 200 with the whole body; that was reported
    as "short read ...: truncated or changing file", blaming the file."""
    import logging

    from napari_ozx.ozx.remote import source as remote

    shutil.copy(sample_path(), tmp_path / "cells.ozx")
    with Server(tmp_path) as srv:
        srv.ignore_range = True
        with caplog.at_level(logging.WARNING):
            layers = read_layer_data(f"{srv.url}/cells.ozx")
        assert "does not support HTTP range requests" in caplog.text
        local = read_layer_data(str(sample_path()))
        np.testing.assert_array_equal(
            np.asarray(layers[0][0][0][:, 8]), np.asarray(local[0][0][0][:, 8])
        )
        old = remote.WHOLE_OBJECT_LIMIT
        remote.WHOLE_OBJECT_LIMIT = 1024
        try:
            with pytest.raises(OzxError, match="does not support HTTP range requests"):
                read_layer_data(f"{srv.url}/cells.ozx")
        finally:
            remote.WHOLE_OBJECT_LIMIT = old


def test_a_failing_well_document_is_that_wells_error_not_the_plates(tmp_path):
    """One document that does not arrive no longer throws the plate away: a
    transient failure (HTTP 503 twice) is retried with backoff, one that persists becomes
    that well's error (missing on the map and in the overview, with the reason)."""
    from napari_ozx.ngff.read.plate import open_hcs
    from tests._support.plategen import PlateSpec, write_plate

    write_plate(tmp_path / "p.ome.zarr", PlateSpec(n_rows=2, n_cols=3, fields=1), "0.5")
    with Server(tmp_path) as srv:
        srv.fail = {"/p.ome.zarr/A/2/zarr.json": 503, "/p.ome.zarr/B/3/zarr.json": 503}
        srv.fail_times = {"/p.ome.zarr/A/2/zarr.json": 2}  # then it answers
        plate = open_hcs(f"{srv.url}/p.ome.zarr")
        errors = {w.name: w.error for w in plate.wells}
        assert errors["A2"] is None  # retried
        assert "B/3/zarr.json failed" in errors["B3"] and "503" in errors["B3"]
        assert sum(e is None for e in errors.values()) == 5
        ov = plate.overview()
        assert any("B/3" in k for k in ov.skipped)
        assert np.asarray(ov.levels[-1]).any()
        plate.oz.close()
