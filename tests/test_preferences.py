"""One documented step makes napari-ozx napari's reader for OME-Zarr folders.

napari's builtin reader also claims ``*.zarr`` (and fails on OME-Zarr groups with "No
arrays found"), so without a preference napari asks which plugin to use, builtins
preselected. ``napari-ozx set-default-reader`` (and the File > IO Utilities command)
records napari-ozx in napari's ``extension2reader`` settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from napari_ozx._preferences import PLUGIN, READER_PATTERNS

ENV_KEYS = ("NAPARI_CONFIG",)


def _run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NAPARI_CONFIG=str(cfg))
    return subprocess.run(
        [sys.executable, "-m", "napari_ozx", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _prefs(cfg: Path) -> dict[str, str]:
    data = yaml.safe_load(cfg.read_text()) if cfg.exists() else {}
    return dict(((data or {}).get("plugins") or {}).get("extension2reader") or {})


@pytest.mark.slow  # the CLI in child processes, several times
def test_cli_sets_and_undoes_the_preference_keeping_others(tmp_path: Path) -> None:
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(yaml.safe_dump({"plugins": {"extension2reader": {"*.tif": "other-plugin"}}}))
    out = _run(cfg, "set-default-reader")
    assert out.returncode == 0, out.stderr
    prefs = _prefs(cfg)
    assert all(prefs[p] == PLUGIN for p in READER_PATTERNS), prefs
    assert prefs["*.tif"] == "other-plugin"
    assert "*.ome.zarr/ -> napari-ozx" in out.stdout
    again = _run(cfg, "set-default-reader")
    assert again.returncode == 0 and "already" in again.stdout
    undo = _run(cfg, "set-default-reader", "--undo")
    assert undo.returncode == 0, undo.stderr
    assert _prefs(cfg) == {"*.tif": "other-plugin"}


def test_napari_resolves_folders_to_napari_ozx_after_the_step(tmp_path: Path) -> None:
    cfg = tmp_path / "settings.yaml"
    assert _run(cfg, "set-default-reader").returncode == 0
    folder = tmp_path / "image.ome.zarr"
    folder.mkdir()
    plain = tmp_path / "plain.zarr"
    plain.mkdir()
    code = (
        "import sys\n"
        "from napari.plugins.utils import get_preferred_reader\n"
        "print(get_preferred_reader(sys.argv[1]), get_preferred_reader(sys.argv[2]),"
        " get_preferred_reader('https://host/x.zarr'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(plain)],
        capture_output=True,
        text=True,
        env=dict(os.environ, NAPARI_CONFIG=str(cfg)),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [PLUGIN, PLUGIN, PLUGIN]


@pytest.mark.gui
def test_viewer_open_folder_without_naming_a_plugin(make_napari_viewer, tmp_path: Path) -> None:
    """After the step, napari opens a folder with napari-ozx, no dialog, no error.

    Both ways napari resolves a reader from the preferences: ``viewer.open(path,
    plugin=None)`` (napari 0.9's ``viewer.open`` defaults to ``plugin="napari"``, its
    builtins, which bypasses preferences by design) and the Qt path that
    ``napari folder`` and drag-and-drop take (``QtViewer._qt_open``).
    """
    from napari_ozx._preferences import make_default_reader
    from napari_ozx._sample_data import sample_path
    from napari_ozx.ngff.write.convert import convert

    folder = tmp_path / "cells.ome.zarr"
    convert(str(sample_path()), str(folder))
    changed = make_default_reader()
    try:
        viewer = make_napari_viewer()
        layers = viewer.open(str(folder), plugin=None)
        assert [lyr.name for lyr in layers] == ["Nuclei", "Membrane", "nuclei"]
        assert all(lyr.source.reader_plugin == PLUGIN for lyr in layers)
        viewer.layers.clear()
        viewer.window._qt_viewer._qt_open([str(folder)], stack=False)
        assert [lyr.name for lyr in viewer.layers] == ["Nuclei", "Membrane", "nuclei"]
        assert all(lyr.source.reader_plugin == PLUGIN for lyr in viewer.layers)
    finally:
        if changed:
            make_default_reader(undo=True)


@pytest.mark.gui
@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda d: (d / "zarr.json").write_text(
                '{"zarr_format": 3, "node_type": "group", "attributes": {}}'
            ),
            "no OME-Zarr metadata",
        ),
        (lambda d: (d / ".zgroup").write_text('{"zarr_format": 2}'), "no OME-Zarr metadata"),
        (lambda d: None, "no Zarr group"),
    ],
    ids=["plain-v3-group", "plain-v2-group", "empty-folder"],
)
def test_a_folder_picked_with_napari_ozx_gets_a_reason(
    make_napari_viewer, tmp_path: Path, make, reason: str
) -> None:
    """Picking napari-ozx for a folder that is not OME-Zarr (the reader dialog, a saved
    preference, or ``plugin="napari-ozx"``) says why in the toast, reason first, instead
    of npe2's bare "refused the file". Asked without a plugin named, napari-ozx still
    declines such folders, so napari's other readers may open a plain Zarr group (what
    the real-world corpus expects)."""
    from napari.utils.notifications import notification_manager

    from napari_ozx._reader import get_reader

    folder = tmp_path / "not-ome.zarr"
    folder.mkdir()
    make(folder)
    assert get_reader(str(folder)) is None  # nobody chose us: decline, others may try

    viewer = make_napari_viewer()
    toasts: list[str] = []

    def collect(n: object) -> None:
        toasts.append(str(getattr(n, "message", n)))

    notification_manager.notification_ready.connect(collect)
    try:
        layers = viewer.open(str(folder), plugin=PLUGIN)
    finally:
        notification_manager.notification_ready.disconnect(collect)
    assert layers == []
    assert len(toasts) == 1, toasts
    assert reason in toasts[0][:80], toasts[0]
    assert "not-ome.zarr" in toasts[0][:80]
