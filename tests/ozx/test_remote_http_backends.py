"""The two HTTP backends of remote reads: obstore (``[remote]`` extra) and fsspec.

obstore serves plain ``http(s)://`` URLs when it is installed: no fsspec or aiohttp
import at open, one connection pool per server. fsspec is the fallback (not installed,
storage options given, a URL with a query, or ``NAPARI_OZX_HTTP_BACKEND=fsspec``). Both
run under the same retry and error code, so a user sees the same pixels and the same
messages whichever one reads. Against a real local server (tests/_support/httpserver.py).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from napari_ozx.ozx.remote.backends import BACKEND_ENV, ObstoreHTTP, http_backend
from napari_ozx.ozx.remote.source import (
    FsspecRangeReader,
    ObjectChangedError,
    RemoteError,
    filesystem,
)
from napari_ozx.ozx.store import OzxStore
from tests._support.httpserver import Server
from tests._support.paths import ROOT

pytestmark = pytest.mark.network

BACKENDS = ["obstore", "fsspec"]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    if request.param == "obstore":
        pytest.importorskip("obstore")
    else:
        pytest.importorskip("aiohttp")
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param


@pytest.fixture
def www(tmp_path):
    payload = bytes(range(256)) * 512  # 128 KiB
    (tmp_path / "a.ozx").write_bytes(payload)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "zarr.json").write_bytes(b'{"zarr_format": 3}')
    with Server(tmp_path) as srv:
        yield srv, tmp_path, payload


def test_the_backend_is_obstore_for_plain_http_urls_when_installed(monkeypatch):
    pytest.importorskip("obstore")
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert http_backend("http://127.0.0.1:1/a.ozx", None) == "obstore"
    assert http_backend("https://example.org/a/b.ome.zarr", {}) == "obstore"
    # fsspec's own options and URLs obstore does not take stay with fsspec
    assert http_backend("http://127.0.0.1:1/a.ozx", {"headers": {"X": "1"}}) == "fsspec"
    assert http_backend("http://127.0.0.1:1/a.ozx?sig=abc", None) == "fsspec"
    assert http_backend("s3://bucket/a.ozx", None) == "fsspec"
    monkeypatch.setenv(BACKEND_ENV, "fsspec")
    assert http_backend("http://127.0.0.1:1/a.ozx", None) == "fsspec"


def test_ranges_sizes_and_suffixes_agree_between_backends(www, backend):
    srv, _, payload = www
    url = f"{srv.url}/a.ozx"
    fs, path = filesystem(url)
    assert isinstance(fs, ObstoreHTTP) == (backend == "obstore")
    assert fs.info(path)["size"] == len(payload)
    assert fs.cat_file(path, start=100, end=300) == payload[100:300]
    reader = FsspecRangeReader(url)
    assert reader.size == len(payload)
    assert reader.read(len(payload) - 10, 10) == payload[-10:]
    # a directory's keys through the same file system (the direct reader's get_sync)
    dfs, dpath = filesystem(f"{srv.url}/dir")
    assert dfs.cat_file(f"{dpath}/zarr.json") == b'{"zarr_format": 3}'


def test_the_same_errors_from_both_backends(www, monkeypatch):
    """A missing object, a server error and a replaced object read the same, reason
    first, naming the URL, whichever backend read them."""
    pytest.importorskip("obstore")
    srv, _, _ = www
    messages: dict[str, list[str]] = {}
    for name in BACKENDS:
        monkeypatch.setenv(BACKEND_ENV, name)
        got = messages.setdefault(name, [])
        with pytest.raises(RemoteError) as e:
            FsspecRangeReader(f"{srv.url}/missing.ozx")
        got.append(str(e.value))
        reader = FsspecRangeReader(f"{srv.url}/a.ozx")
        srv.fail["/a.ozx"] = 500
        srv.fail_times["/a.ozx"] = 100
        try:
            with pytest.raises(RemoteError) as e:
                reader.read(0, 64)
            got.append(str(e.value))
        finally:
            srv.fail.clear()
            srv.fail_times.clear()
    assert messages["obstore"][0] == messages["fsspec"][0]
    assert messages["obstore"][0].endswith("missing.ozx: not found (HTTP 404 or no such object)")
    for text in (messages["obstore"][1], messages["fsspec"][1]):
        assert text.startswith(f"{srv.url}/a.ozx: range read failed: HTTP 500"), text


def test_a_transient_failure_is_retried(www, backend):
    srv, _, payload = www
    reader = FsspecRangeReader(f"{srv.url}/a.ozx")
    srv.fail["/a.ozx"] = 503
    srv.fail_times["/a.ozx"] = 1
    try:
        assert reader.read(0, 16) == payload[:16]
    finally:
        srv.fail.clear()
        srv.fail_times.clear()


def test_an_object_replaced_while_open_is_named(www, backend):
    srv, root, _ = www
    reader = FsspecRangeReader(f"{srv.url}/a.ozx")
    assert reader.validator
    reader.read(0, 64)
    st = os.stat(root / "a.ozx")
    os.utime(root / "a.ozx", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new version
    with pytest.raises(ObjectChangedError, match=r"a\.ozx.*changed"):
        reader.read(0, 64)


def test_without_validators_ranges_still_read(www, backend):
    srv, _, payload = www
    srv.validators = False
    reader = FsspecRangeReader(f"{srv.url}/a.ozx")
    assert reader.read(1000, 24) == payload[1000:1024]


def test_a_read_that_times_out_names_the_url(www, backend):
    srv, _, _ = www
    reader = FsspecRangeReader(f"{srv.url}/a.ozx", timeout=0.3)
    srv.delay = 1.5
    with pytest.raises(RemoteError, match=r"a\.ozx.*timed out after 0\.3 s"):
        reader.read(0, 64)


def test_a_server_ignoring_range_is_served_from_memory(www, backend, caplog):
    import logging

    srv, _, payload = www
    srv.ignore_range = True
    reader = FsspecRangeReader(f"{srv.url}/a.ozx")
    with caplog.at_level(logging.WARNING):
        assert reader.read(500, 20) == payload[500:520]
    assert "does not support HTTP range requests" in caplog.text
    srv.reset()
    assert reader.read(4000, 20) == payload[4000:4020]
    assert srv.requests == []  # from memory


def test_the_reader_pickles_to_the_same_object(www, backend):
    srv, _, payload = www
    reader = FsspecRangeReader(f"{srv.url}/a.ozx")
    clone = pickle.loads(pickle.dumps(reader))
    assert clone.read(7, 9) == payload[7:16]


@pytest.mark.parametrize("name", ["cells.ozx", "img.ome.zarr"])
def test_opening_remote_data_with_obstore_imports_no_aiohttp(tmp_path, name):
    """The first open pays no import of fsspec's HTTP file system and aiohttp (hundreds
    of ms on a busy machine; zarr itself imports fsspec's core when it is installed),
    for an ``.ozx`` and for a directory."""
    pytest.importorskip("obstore")
    from napari_ozx._sample_data import sample_path
    from tests._support.omegen import write_image

    (tmp_path / "cells.ozx").write_bytes(sample_path().read_bytes())
    data = np.arange(2 * 16 * 32 * 32, dtype=np.uint16).reshape(2, 16, 32, 32)
    write_image(tmp_path / "img.ome.zarr", data, levels=2)
    code = (
        "import sys\n"
        "from napari_ozx.layers.reading import read_layer_data\n"
        "import numpy as np\n"
        "layers = read_layer_data(sys.argv[1])\n"
        "np.asarray(layers[0][0][0][:, 8])\n"
        "print(sorted(m for m in ('fsspec.implementations.http', 'aiohttp') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != BACKEND_ENV}
    with Server(tmp_path) as srv:
        out = subprocess.run(
            [sys.executable, "-c", code, f"{srv.url}/{name}"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_remote_ozx_store_reads_the_same_pixels_on_both_backends(monkeypatch, tmp_path):
    pytest.importorskip("obstore")
    from napari_ozx._sample_data import sample_path
    from napari_ozx.ozx.remote.store import open_remote_store

    (tmp_path / "cells.ozx").write_bytes(sample_path().read_bytes())
    planes = []
    with Server(tmp_path) as srv:
        for name in BACKENDS:
            monkeypatch.setenv(BACKEND_ENV, name)
            store = open_remote_store(f"{srv.url}/cells.ozx")
            assert isinstance(store, OzxStore)
            import zarr

            group = zarr.open_group(store, mode="r")
            planes.append(np.asarray(group["0"][:, 8]))
    np.testing.assert_array_equal(planes[0], planes[1])
