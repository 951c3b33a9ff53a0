"""S3 as people use it, against a real S3 server on 127.0.0.1 (moto's server mode).

A public bucket opens with no credentials configured (anonymously, said once in the
log); credentials come from the environment or an AWS profile; the endpoint of an
S3-compatible store from ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` or the profile;
explicit storage options always win; a refusal is one message saying what to set, at
once (never retried as a network fault). Both a ``.ozx`` (range reads) and an OME-Zarr
directory (zarr's fsspec store), the public bucket public by its bucket policy alone.
The user's own AWS configuration is never read: every test runs with ``HOME`` and the
AWS files in its temporary folder and no ``AWS_*`` variables but those it sets.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import urllib.request

import numpy as np
import pytest

pytest.importorskip(
    "moto.server", reason="the S3 tests need moto's server: pip install 'moto[server]'"
)
pytest.importorskip("s3fs", reason="reading S3 needs s3fs: pip install 'napari-ozx[remote]'")
pytest.importorskip("boto3", reason="the S3 test fixture uploads with boto3 (moto[server])")

import s3fs
from moto.server import ThreadedMotoServer

from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr
from napari_ozx.ozx.remote import source as remote
from napari_ozx.ozx.remote.source import RemoteError
from napari_ozx.ozx.remote.store import open_remote_store

#: every test here talks to a local server (tests/_support/httpserver.py or moto's)
pytestmark = pytest.mark.network

PUBLIC, PRIVATE = "public-bucket", "private-bucket"
NAMES = ("x.ozx", "x.ome.zarr")
KEY, SECRET = "AKIAOZXTESTKEY", "ozx-test-secret"  # moto accepts any signed request
LOGGER = "napari_ozx.ozx.remote.source"


def _isolate(mp: pytest.MonkeyPatch, home: os.PathLike[str]) -> None:
    """No AWS configuration of the user's: HOME and the AWS files in *home*."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            mp.delenv(k)
    mp.setenv("HOME", str(home))
    mp.setenv("AWS_CONFIG_FILE", os.path.join(home, "aws-config"))
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.path.join(home, "aws-credentials"))
    # no probing of an EC2 instance metadata service that is not there (1 s per lookup)
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _moto_api(endpoint: str, what: str, body: bytes = b"") -> None:
    req = urllib.request.Request(
        f"{endpoint}/moto-api/{what}",
        data=body,
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(req, timeout=10):
        pass


def _drop_s3fs_instances() -> None:
    """Forget s3fs's cached filesystems (they keep the endpoint and credentials they were
    made with), closing their clients first, each on the event loop it was made on:
    fsspec's for the synchronous ones, zarr's for those of zarr's store."""
    from fsspec.asyn import sync
    from zarr.core.sync import sync as zarr_sync

    for fs in list(s3fs.S3FileSystem._cache.values()):
        if fs._s3 is not None:
            if fs.asynchronous:
                zarr_sync(fs._s3.close())
            else:
                sync(fs.loop, fs._s3.close)
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A running S3 server with the same image as ``.ozx`` and as a directory in a
    public bucket (anyone may read) and in a private one (signed requests only)."""
    import boto3

    root = tmp_path_factory.mktemp("s3")
    data = np.random.default_rng(30).integers(0, 4000, (2, 8, 64, 64), dtype=np.uint16)
    axes = [Axis("c", "channel"), Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    for name in NAMES:
        write_ome_zarr(root / name, ImageSpec(data, axes), options=WriteOptions(pyramid_levels=2))
    assert (root / "x.ozx").is_file() and (root / "x.ome.zarr").is_dir()

    before = set(threading.enumerate())
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    server_threads = set(threading.enumerate()) - before
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            _isolate(mp, tmp_path_factory.mktemp("home"))
            client = boto3.session.Session().client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id=KEY,
                aws_secret_access_key=SECRET,
            )
            for bucket in (PUBLIC, PRIVATE):
                client.create_bucket(Bucket=bucket)
                for path in sorted(root.rglob("*")):
                    if path.is_file():
                        key = path.relative_to(root).as_posix()
                        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            # public by its bucket policy alone (no object ACLs), as public buckets are. S3
            # lets s3:GetObject answer HEAD requests too; moto asks for "s3:HeadObject"
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "PublicRead",
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": ["s3:GetObject", "s3:HeadObject"],
                        "Resource": [f"arn:aws:s3:::{PUBLIC}/*"],
                    }
                ],
            }
            client.put_bucket_policy(Bucket=PUBLIC, Policy=json.dumps(policy))
            client.close()
        yield endpoint, data
    finally:
        try:
            _moto_api(endpoint, "reset")  # moto's state is the process's: leave none
        finally:
            server.stop()
            _drop_s3fs_instances()
    for t in server_threads:
        t.join(30)  # a bound on the wait, not a speed requirement
    assert not any(t.is_alive() for t in server_threads), "the S3 server thread is still running"


@pytest.fixture(autouse=True)
def aws(monkeypatch, tmp_path):
    """Per test: no AWS configuration but what the test writes, fresh s3fs instances
    and a fresh anonymous-or-not decision."""
    _isolate(monkeypatch, tmp_path)
    for name in ("aws-config", "aws-credentials"):  # present and empty, as on a new machine
        (tmp_path / name).touch()
    _drop_s3fs_instances()
    remote._s3_anon_cache.clear()
    yield tmp_path
    _drop_s3fs_instances()
    remote._s3_anon_cache.clear()


def _level0(url: str, storage_options: dict | None = None) -> np.ndarray:
    if storage_options is None:
        layers = read_layer_data(url)
        return np.asarray(layers[0][0][0])
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(open_remote_store(url, storage_options)) as oz:
        (img,) = oz.images()
        return np.asarray(img.levels[0])


def _anonymous_messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "anonymously" in r.getMessage()]


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_public_bucket_opens_without_credentials(s3, monkeypatch, caplog, variable):
    endpoint, data = s3
    monkeypatch.setenv(variable, endpoint)
    caplog.set_level(logging.INFO, logger=LOGGER)
    for name in (*NAMES, *NAMES):  # each twice: the decision is made and logged once
        url = f"s3://{PUBLIC}/{name}"
        np.testing.assert_array_equal(_level0(url), data)
    assert remote.fsspec_options(f"s3://{PUBLIC}/x.ozx", None)["anon"] is True
    (message,) = _anonymous_messages(caplog)
    assert f"s3://{PUBLIC}/" in message and "no AWS credentials found" in message


def test_anonymous_reads_are_unsigned(s3, monkeypatch):
    # the private bucket refuses unsigned requests: anonymous really is anonymous
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    for name in NAMES:
        with pytest.raises(OzxError):
            read_layer_data(f"s3://{PRIVATE}/{name}")


def test_profile_credentials_and_endpoint(s3, monkeypatch, aws, caplog):
    endpoint, data = s3
    (aws / "aws-credentials").write_text(
        f"[myprofile]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n"
    )
    # the endpoint of an S3-compatible store in the profile, as the AWS CLI reads it
    (aws / "aws-config").write_text(
        f"[profile myprofile]\nregion = us-east-1\nendpoint_url = {endpoint}\n"
    )
    monkeypatch.setenv("AWS_PROFILE", "myprofile")
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert "anon" not in remote.fsspec_options(f"s3://{PRIVATE}/x.ozx", None)
    for name in NAMES:  # the private bucket: only signed requests get through
        np.testing.assert_array_equal(_level0(f"s3://{PRIVATE}/{name}"), data)
    assert _anonymous_messages(caplog) == []


def test_profile_in_storage_options(s3, aws):
    endpoint, data = s3
    (aws / "aws-credentials").write_text(
        f"[other]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n"
    )
    (aws / "aws-config").write_text(f"[profile other]\nendpoint_url = {endpoint}\n")
    opts = {"profile": "other"}
    assert "anon" not in remote.fsspec_options(f"s3://{PRIVATE}/x.ozx", opts)
    np.testing.assert_array_equal(_level0(f"s3://{PRIVATE}/x.ozx", opts), data)


def test_environment_credentials(s3, monkeypatch):
    endpoint, data = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert "anon" not in remote.fsspec_options(f"s3://{PRIVATE}/x.ozx", None)
    for name in NAMES:
        np.testing.assert_array_equal(_level0(f"s3://{PRIVATE}/{name}"), data)


def test_missing_profile_is_a_clear_error(s3, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "nosuchprofile")
    url = f"s3://{PUBLIC}/x.ozx"
    with pytest.raises(RemoteError, match=r"s3://public-bucket/x\.ozx: .*'nosuchprofile'"):
        read_layer_data(url)


def test_wrong_endpoint_is_a_clear_error(s3, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed}")
    # botocore's own retries with backoff (5 attempts by default) only make it slower
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    url = f"s3://{PUBLIC}/x.ozx"
    with pytest.raises(RemoteError, match=r"^s3://public-bucket/x\.ozx: "):
        open_remote_store(url, timeout=2)
    with pytest.raises(OzxError):
        read_layer_data(f"s3://{PUBLIC}/x.ome.zarr")


def test_explicit_anon_wins_over_found_credentials(s3, monkeypatch):
    endpoint, data = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    opts = {"anon": True}
    assert remote.fsspec_options(f"s3://{PRIVATE}/x.ozx", opts)["anon"] is True
    np.testing.assert_array_equal(_level0(f"s3://{PUBLIC}/x.ozx", opts), data)
    with pytest.raises(OzxError, match="access denied"):
        _level0(f"s3://{PRIVATE}/x.ozx", opts)


def test_explicit_credentials_win_over_anonymous(s3, monkeypatch, caplog):
    endpoint, data = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    caplog.set_level(logging.INFO, logger=LOGGER)
    opts = {"key": KEY, "secret": SECRET}
    assert "anon" not in remote.fsspec_options(f"s3://{PRIVATE}/x.ozx", opts)
    for name in NAMES:
        np.testing.assert_array_equal(_level0(f"s3://{PRIVATE}/{name}", opts), data)
    assert _anonymous_messages(caplog) == []
    assert remote._s3_anon_cache == {}  # no credential lookup at all


def test_explicit_anon_false_is_not_overridden(s3, monkeypatch):
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    opts = {"anon": False}
    assert remote.fsspec_options(f"s3://{PUBLIC}/x.ozx", opts)["anon"] is False
    with pytest.raises(RemoteError, match=r"^s3://public-bucket/x\.ozx: .*credentials"):
        open_remote_store(f"s3://{PUBLIC}/x.ozx", opts)


def test_invalid_credentials_are_not_retried_anonymously(s3, monkeypatch):
    # credentials that are found are used, even for a public bucket: wrong ones are a
    # clear error, not a silent anonymous read (the server checks keys from here on)
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    url = f"s3://{PUBLIC}/x.ozx"
    assert "anon" not in remote.fsspec_options(url, None)
    _moto_api(endpoint, "reset-auth", b"0")
    try:
        with pytest.raises(RemoteError, match=r"^s3://public-bucket/x\.ozx: access denied"):
            open_remote_store(url)
    finally:
        _moto_api(endpoint, "reset-auth", b"inf")


#: a request line of werkzeug's access log (refusals and errors in terminal colours)
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST|DELETE) /([^ ?]+)')


def _server_requests(caplog, bucket: str) -> list[tuple[str, str]]:
    """(method, object path) of the requests the S3 server answered for *bucket*, from
    its access log (moto's server runs in this process: werkzeug logs each request)."""
    out = []
    for r in caplog.records:
        m = _REQUEST.search(r.getMessage()) if r.name == "werkzeug" else None
        if m and m.group(2).startswith(f"{bucket}/"):
            out.append((m.group(1), m.group(2)))
    return out


def test_public_bucket_policy_both_routes_one_request_per_object(s3, monkeypatch, caplog):
    # a public folder opens as a public .ozx does; each document and
    # chunk of the folder is one GET (s3fs sent a HEAD before each whole-object GET: a
    # second round trip, and refused by a store that grants reads but not HEAD)
    endpoint, data = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    caplog.set_level(logging.INFO, logger="werkzeug")
    for name in NAMES:
        np.testing.assert_array_equal(_level0(f"s3://{PUBLIC}/{name}"), data)
    assert remote.fsspec_options(f"s3://{PUBLIC}/x.ome.zarr", None)["anon"] is True
    folder = [r for r in _server_requests(caplog, PUBLIC) if "/x.ome.zarr/" in r[1]]
    assert ("GET", f"{PUBLIC}/x.ome.zarr/zarr.json") in folder
    assert any(p.startswith(f"{PUBLIC}/x.ome.zarr/0/c/") for _, p in folder)  # chunks
    assert [r for r in folder if r[0] == "HEAD"] == []
    assert len(folder) == len(set(folder)), "an object of the folder was read twice"


@pytest.mark.parametrize("name", NAMES)
def test_refusal_is_one_message_and_not_retried(s3, monkeypatch, caplog, name):
    # no credentials anywhere, a bucket that is not public: one clear
    # message saying what to set, at the first refusal (it was retried 4 times as a
    # network fault: "reading zarr.json failed: PermissionError: Forbidden (after 4 attempts)")
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    caplog.set_level(logging.INFO, logger="werkzeug")
    caplog.set_level(logging.INFO, logger=LOGGER)
    url = f"s3://{PRIVATE}/{name}"
    with pytest.raises(RemoteError) as info:
        read_layer_data(url)
    message = str(info.value)
    assert message.startswith(f"{url}") and message.count("access denied") == 1
    for what in ("anonymously", "not public", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "profile"):
        assert what in message
    assert "attempts" not in message and "retry" not in caplog.text
    requests = _server_requests(caplog, PRIVATE)
    assert requests, "the server saw no request"
    assert len(requests) == len(set(requests)), f"a refused read was repeated: {requests}"


def test_refusal_with_credentials_says_to_check_them(s3, monkeypatch):
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    _moto_api(endpoint, "reset-auth", b"0")  # the server checks keys from here on
    try:
        with pytest.raises(RemoteError, match=r"access denied .*credentials in use"):
            read_layer_data(f"s3://{PUBLIC}/x.ome.zarr")
    finally:
        _moto_api(endpoint, "reset-auth", b"inf")
