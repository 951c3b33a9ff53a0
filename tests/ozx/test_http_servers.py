"""The local HTTP servers the remote tests and benchmarks read from (tests/_support/httpserver.py).

``bench_browse.py`` measures napari against :class:`FastServer` (asyncio, a fraction of
the CPU per request of Python's ``http.server``), the tests against :class:`Server`.
Both must give the same answers, byte for byte and header for header where a reader
looks (ranges, sizes, validators, statuses), so that what is measured is what is tested.
"""

from __future__ import annotations

import http.client
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.read.fastpaths import set_readahead_mb
from tests._support.httpserver import FastServer, Server, byte_range
from tests._support.omegen import write_image, zip_dir

pytestmark = pytest.mark.network

PAYLOAD = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    r = tmp_path_factory.mktemp("www")
    (r / "blob.bin").write_bytes(PAYLOAD)
    return r


@pytest.fixture(params=["threaded", "asyncio"])
def srv(request, root) -> Iterator[Server | FastServer]:
    s = Server(root, keep_alive=True) if request.param == "threaded" else FastServer(root)
    with s:
        yield s


def _conn(srv: Server | FastServer) -> http.client.HTTPConnection:
    u = urlsplit(srv.url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


def _get(conn, path: str, method: str = "GET", **headers: str):
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    return r, r.read()


def test_byte_range_forms():
    assert byte_range("bytes=10-19", 100) == (10, 20)
    assert byte_range("bytes=90-", 100) == (90, 100)
    assert byte_range("bytes=-30", 100) == (70, 100)
    assert byte_range("bytes=-300", 100) == (0, 100)
    assert byte_range("bytes=95-200", 100) == (95, 100)
    assert byte_range("bytes=100-", 100)[0] >= 100  # not satisfiable


def test_both_servers_answer_alike_on_one_kept_alive_connection(srv):
    conn = _conn(srv)
    try:
        r, body = _get(conn, "/blob.bin")
        assert (r.status, body) == (200, PAYLOAD)
        assert r.getheader("Accept-Ranges") == "bytes"
        etag = r.getheader("ETag")
        assert etag and r.getheader("Last-Modified")
        r, body = _get(conn, "/blob.bin", Range="bytes=100-299")
        assert (r.status, body) == (206, PAYLOAD[100:300])
        assert r.getheader("Content-Range") == f"bytes 100-299/{len(PAYLOAD)}"
        r, body = _get(conn, "/blob.bin", Range="bytes=-22")
        assert (r.status, body) == (206, PAYLOAD[-22:])
        r, body = _get(conn, "/blob.bin", Range=f"bytes={len(PAYLOAD)}-")
        assert r.status == 416
        assert r.getheader("Content-Range") == f"bytes */{len(PAYLOAD)}"
        r, body = _get(conn, "/blob.bin", "HEAD")
        assert (r.status, body) == (200, b"")
        assert r.getheader("Content-Length") == str(len(PAYLOAD))
        r, body = _get(conn, "/blob.bin", **{"If-Match": etag})
        assert r.status == 200
        r, body = _get(conn, "/blob.bin", **{"If-Match": '"other"'})
        assert r.status == 412
        r, body = _get(conn, "/missing.bin")
        assert r.status == 404
        r, body = _get(conn, "/../" + Path(__file__).name)
        assert r.status == 404  # nothing outside the served directory
    finally:
        conn.close()
    assert len(srv.requests) == 9, "every request is logged, on one connection"
    assert srv.requests[1] == ("GET", "/blob.bin", "bytes=100-299")
    assert srv.body_bytes == 2 * len(PAYLOAD) + 200 + 22
    srv.reset()
    assert (srv.requests, srv.body_bytes) == ([], 0)


def test_both_servers_give_the_same_validator(root):
    tags = []
    for s in (Server(root, keep_alive=True), FastServer(root)):
        with s:
            conn = _conn(s)
            tags.append(_get(conn, "/blob.bin", "HEAD")[0].getheader("ETag"))
            conn.close()
    assert tags[0] == tags[1]


@pytest.mark.parametrize("name", ["img.ozx", "img.ome.zarr"])
def test_an_image_read_through_the_fast_server_is_exact(tmp_path, name, caplog):
    """What bench_browse reads through FastServer: the same pixels as on disk, from range
    requests logged after the server's latency, with no request failed and retried.
    Read whole, with read-ahead off, so that nothing is still being fetched when the
    server stops."""
    data = np.random.default_rng(7).integers(0, 4000, (2, 4, 64, 64), dtype=np.uint16)
    write_image(tmp_path / "img.ome.zarr", data, levels=2, chunks=(1, 1, 32, 32))
    zip_dir(tmp_path / "img.ome.zarr", tmp_path / "img.ozx")
    set_readahead_mb(0)
    try:
        with FastServer(tmp_path) as srv:
            srv.latency = 0.005
            (levels, _meta, kind), *_ = read_layer_data(f"{srv.url}/{name}")
            assert kind == "image"
            np.testing.assert_array_equal(np.asarray(levels[0]), data)
            assert srv.requests and srv.body_bytes > 0
    finally:
        set_readahead_mb(None)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
