"""File > IO Utilities > Open URL…: a remote OME-Zarr opened from napari itself, in a
real napari window, against the project's local servers (the HTTP server of
``tests/_support/httpserver.py`` and moto's S3 server of ``tests/ozx/test_s3.py``).

The dock is driven as a user drives it: the URL typed into its box, *Open* clicked or
Enter pressed, *Cancel* clicked. The read runs in a worker; the layers appear when it is
done, with the served pixels; errors are shown in the dock, reason first; a cancelled open
adds nothing; the URLs that opened are offered again by the next dock. The screenshot goes
to the test's temporary folder (and, with NAPARI_OZX_SCREENSHOTS=DIR, to DIR for a person
to look at).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from qtpy.QtCore import Qt

from napari_ozx._preferences import (
    RECENT_URLS_MAX,
    carries_secret,
    recent_urls,
    recent_urls_path,
    remember_url,
)
from napari_ozx._sample_data import sample_path
from napari_ozx.layers.reading import read_layer_data
from tests._support.httpserver import Server
from tests._support.omegen import write_image

try:  # moto's S3 server, as the S3 tests run it (skipped there, and here, without moto)
    from tests.ozx import test_s3 as s3_support
except pytest.skip.Exception:
    s3_support = None
else:
    s3 = s3_support.s3  # the module-scoped server fixture

pytestmark = pytest.mark.usefixtures("config_dir")

DOCK = "Open URL…"  # display_name in napari.yaml
OPEN_TIMEOUT_MS = 60_000  # a bound on a hang, not a speed requirement


def _keep(shot: Path) -> None:
    out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out) / shot.name)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The bundled sample as an .ozx, a 2-channel image with labels as a folder, and a
    plain Zarr array (Zarr, but not OME-Zarr), over HTTP."""
    import zarr

    root = tmp_path_factory.mktemp("www")
    shutil.copy(sample_path(), root / "cells.ozx")
    data = np.random.default_rng(43).integers(0, 999, (2, 4, 48, 64), dtype=np.uint16)
    cells = (data[0] > 800).astype(np.uint8)
    write_image(root / "img.ome.zarr", data, levels=2, labels={"cells": cells})
    zarr.create_array(root / "plain.zarr", shape=(4, 4), dtype="u1")
    with Server(root) as srv:
        yield srv, data, cells


def _menu_action(menu, text: str):
    """The action named *text* in *menu* or its submenus (None when there is none)."""
    for action in menu.actions():
        sub = action.menu()
        if sub is not None:
            found = _menu_action(sub, text)
            if found is not None:
                return found
        elif text in action.text().replace("&&", "&"):
            return action
    return None


def _dock(viewer, qtbot=None):
    from napari_ozx._qt.open_url import OpenUrlWidget

    found = [w for w in viewer.window.dock_widgets.values() if isinstance(w, OpenUrlWidget)]
    if found:
        return found[0]
    _, w = viewer.window.add_plugin_dock_widget("napari-ozx", DOCK)
    return w


def _open(qtbot, w, url: str, *, enter: bool = False) -> str:
    """Type *url*, click Open (or press Enter); wait for the end; return how it ended."""
    w.set_url(url)
    with qtbot.waitSignal(w.open_finished, timeout=OPEN_TIMEOUT_MS) as blocker:
        if enter:
            qtbot.keyClick(w.url_combo.lineEdit(), Qt.Key.Key_Return)
        else:
            qtbot.mouseClick(w.open_button, Qt.MouseButton.LeftButton)
        # loading is shown until the worker's result is back on the GUI thread
        assert w.busy and not w.open_button.isEnabled() and w.cancel_button.isEnabled()
        assert not w.progress.isHidden() and w.status.text().startswith("Opening ")
    assert not w.busy and w.progress.isHidden() and not w.cancel_button.isEnabled()
    return blocker.args[0]


def _level0(layer) -> np.ndarray:
    data = layer.data
    return np.asarray(data[0] if layer.multiscale else data)


@pytest.mark.gui
@pytest.mark.network
def test_open_http_ozx_and_folder_from_the_file_menu(make_napari_viewer, qtbot, served, tmp_path):
    from napari_ozx._qt.open_url import OpenUrlWidget

    srv, data, cells = served
    viewer = make_napari_viewer(show=True)
    # File > IO Utilities > "Open URL… (napari-ozx OME-Zarr)" docks the widget
    action = _menu_action(viewer.window.file_menu, DOCK)
    assert action is not None, "no Open URL… entry in the File menu"
    action.trigger()
    docked = [w for w in viewer.window.dock_widgets.values() if isinstance(w, OpenUrlWidget)]
    assert len(docked) == 1
    w = docked[0]
    assert w.recent() == []

    # an .ozx over HTTP: the same layers and pixels as the local file
    ozx_url = f"{srv.url}/cells.ozx"
    assert _open(qtbot, w, ozx_url) == "opened", w.status.text()
    local = read_layer_data(str(sample_path()))
    names = [kw["name"] for _, kw, _ in local]
    assert [layer.name for layer in viewer.layers] == [*names[0], names[1]]
    image, labels = (d[0] if isinstance(d, list) else d for d, _, _ in local)
    for c in range(image.shape[0]):
        np.testing.assert_array_equal(_level0(viewer.layers[c]), np.asarray(image[c]))
    np.testing.assert_array_equal(_level0(viewer.layers[2]), np.asarray(labels))
    assert w.status.text().startswith("Opened cells.ozx: 3 layers")

    # a folder over HTTP, pasted in quotes, with Enter instead of the button: the served
    # array, exactly
    dir_url = f"{srv.url}/img.ome.zarr"
    assert _open(qtbot, w, f" '{dir_url}' ", enter=True) == "opened", w.status.text()
    new = list(viewer.layers)[3:]
    assert len(new) == 3
    for c in range(2):
        np.testing.assert_array_equal(_level0(new[c]), data[c])
    np.testing.assert_array_equal(_level0(new[2]), cells)
    assert new[2].name == "cells"

    shot = tmp_path / "open_url.png"
    viewer.screenshot(str(shot), canvas_only=False)
    assert shot.stat().st_size > 0
    _keep(shot)

    # recent URLs, newest first, offered by the next dock (another instance)
    assert w.recent() == [dir_url, ozx_url]
    other = OpenUrlWidget(viewer)
    qtbot.addWidget(other)
    assert other.recent() == [dir_url, ozx_url]
    assert other.url == ""  # offered, not pre-filled: Enter on an empty box opens nothing
    assert json.loads(recent_urls_path().read_text())["urls"] == [dir_url, ozx_url]


@pytest.mark.gui
@pytest.mark.network
def test_errors_reason_first_in_the_dock_and_no_layer(make_napari_viewer, qtbot, served):
    srv, _, _ = served
    viewer = make_napari_viewer()
    w = _dock(viewer)
    cases = {
        # a missing .ozx: the server's 404
        "nope.ozx": r"^not found \(HTTP 404",
        # Zarr, but not OME-Zarr
        "plain.zarr": r"not an OME-Zarr group",
        # a folder URL with nothing there (no zarr.json / .zattrs: 404s)
        "missing.ome.zarr": r"^no Zarr group",
    }
    for name, reason in cases.items():
        url = f"{srv.url}/{name}"
        assert _open(qtbot, w, url) == "error"
        first, *rest = w.status.text().splitlines()
        assert first.endswith(f"({name})"), first  # the reason first, then the name
        assert not first.startswith(("http", "napari-ozx")), first
        assert re.search(reason, first), first
        assert rest == [f"napari-ozx cannot open {url}"]
        assert "Traceback" not in w.status.text()
        assert w.status.styleSheet()  # shown as an error
    assert len(viewer.layers) == 0
    assert w.recent() == [] and recent_urls() == []  # failed URLs are not remembered
    # an empty box: a hint, no worker
    qtbot.waitUntil(lambda: not w.workers, timeout=OPEN_TIMEOUT_MS)
    assert w.open_url("  ") is None and not w.workers
    assert "Paste the URL" in w.status.text()


@pytest.mark.gui
@pytest.mark.network
def test_cancel_during_a_slow_open_adds_nothing(make_napari_viewer, qtbot, served):
    srv, _, _ = served
    viewer = make_napari_viewer()
    w = _dock(viewer)
    url = f"{srv.url}/cells.ozx"
    srv.reset()
    srv.latency = 0.4  # a distant server: the open takes several round trips
    try:
        w.set_url(url)
        qtbot.mouseClick(w.open_button, Qt.MouseButton.LeftButton)
        assert w.busy and len(w.workers) == 1
        qtbot.waitUntil(lambda: len(srv.requests) >= 1, timeout=OPEN_TIMEOUT_MS)
        with qtbot.waitSignal(w.open_finished, timeout=5_000) as blocker:
            qtbot.mouseClick(w.cancel_button, Qt.MouseButton.LeftButton)
        assert blocker.args == ["cancelled"]
        # at once: the dock is idle again, and says nothing is added
        assert not w.busy and w.open_button.isEnabled() and w.progress.isHidden()
        assert w.status.text() == "Cancelled: nothing of cells.ozx is added."
        # the worker ends with its request in flight; its layers never arrive
        qtbot.waitUntil(lambda: not w.workers, timeout=OPEN_TIMEOUT_MS)
        qtbot.wait(200)  # whatever the worker emitted last is delivered by now
    finally:
        srv.latency = 0.0
    assert len(viewer.layers) == 0
    assert w.status.text() == "Cancelled: nothing of cells.ozx is added."
    assert recent_urls() == []
    # and the dock opens the next URL as usual
    assert _open(qtbot, w, url) == "opened"
    assert len(viewer.layers) == 3


@pytest.mark.gui
@pytest.mark.network
@pytest.mark.skipif(s3_support is None, reason="the S3 tests need moto[server], s3fs and boto3")
def test_s3_public_opens_and_refused_credentials_are_the_reason(
    make_napari_viewer, qtbot, s3, monkeypatch, tmp_path
):
    endpoint, data = s3
    s3_support._isolate(monkeypatch, tmp_path)  # no AWS configuration of the user's
    s3_support._drop_s3fs_instances()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setattr(s3_support.remote, "_s3_anon_cache", {})
    viewer = make_napari_viewer()
    w = _dock(viewer)
    try:
        # a public bucket, no credentials anywhere: opens anonymously, exact pixels
        url = f"s3://{s3_support.PUBLIC}/x.ozx"
        assert _open(qtbot, w, url) == "opened", w.status.text()
        assert [_level0(layer).tolist() for layer in viewer.layers] == data.tolist()
        # the private bucket refuses unsigned requests: that is the reason shown
        private = f"s3://{s3_support.PRIVATE}/x.ozx"
        assert _open(qtbot, w, private) == "error"
        first = w.status.text().splitlines()[0]
        assert first.endswith("(x.ozx)") and not first.startswith("s3:"), first
        assert any(s in first.lower() for s in ("forbidden", "denied", "refused", "403")), first
        assert "Traceback" not in w.status.text()
        assert len(viewer.layers) == 2
        assert w.recent() == [url]
    finally:
        s3_support._drop_s3fs_instances()


def test_recent_urls_newest_first_bounded_and_without_secrets(config_dir):
    assert recent_urls() == []
    for i in range(RECENT_URLS_MAX + 3):
        remember_url(f"https://example.org/{i}.ozx")
    remember_url("https://example.org/5.ozx")  # again: moves to the front, once
    urls = recent_urls()
    assert len(urls) == RECENT_URLS_MAX
    assert urls[:2] == [
        "https://example.org/5.ozx",
        f"https://example.org/{RECENT_URLS_MAX + 2}.ozx",
    ]
    assert urls.count("https://example.org/5.ozx") == 1
    # a URL that is a credential is never written to the (plain-text) file
    for secret in (
        "https://user:pw@example.org/a.ozx",
        "https://bucket.s3.amazonaws.com/a.ozx?X-Amz-Signature=abc&X-Amz-Credential=k",
        "https://acct.blob.core.windows.net/c/a.ozx?sv=1&sig=abc",
    ):
        assert carries_secret(secret)
        remember_url(secret)
    assert recent_urls() == urls
    text = recent_urls_path().read_text()
    assert "pw@" not in text and "Signature" not in text and "sig=" not in text
    assert not carries_secret("s3://bucket/img.ome.zarr")
    # a damaged file never blocks opening: no recent URLs, and the next open rewrites it
    recent_urls_path().write_text("{not json")
    assert recent_urls() == []
    assert remember_url("s3://bucket/img.ome.zarr") == ["s3://bucket/img.ome.zarr"]
