"""Running the test suite leaves the user's own settings byte for byte as they were.

A GUI test module that makes napari viewers (tests/test_preferences.py: napari's reader
preferences, File > IO Utilities) runs here in a child pytest whose HOME is a fake user's,
holding that user's napari ``settings.yaml`` (a theme, napari-ozx's reader preference and
another plugin's) and napari-ozx's remembered export options, where napari and napari-ozx
would look for them. Before tests/conftest.py pointed both at a temporary folder, such a
module rewrote napari's file to defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.paths import ROOT

ROOT = ROOT

USER_SETTINGS = b"""\
appearance:
  theme: light
plugins:
  extension2reader:
    '*.zarr/': napari-ozx
    '*.tif': napari-tifffile
schema_version: 0.6.0
"""
USER_OPTIONS = b'{"codec": "gzip", "level": 7}\n'


@pytest.mark.gui
@pytest.mark.slow  # napari in a child pytest, twice
def test_a_gui_test_module_leaves_the_users_settings_alone(tmp_path):
    home = tmp_path / "home"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NAPARI_CONFIG", "NAPARI_OZX_CONFIG_DIR", "XDG_CONFIG_HOME")
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "from napari.utils._base import _DEFAULT_CONFIG_PATH; import platformdirs;"
            "print(_DEFAULT_CONFIG_PATH);"
            "print(platformdirs.user_config_dir('napari-ozx', appauthor=False))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    napari_file, ours = Path(where[0]), Path(where[1]) / "export_options.json"
    assert str(napari_file).startswith(str(home)) and str(ours).startswith(str(home))
    for f, content in ((napari_file, USER_SETTINGS), (ours, USER_OPTIONS)):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(content)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_preferences.py",
            "tests/layers/test_file_save.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    assert napari_file.read_bytes() == USER_SETTINGS
    assert ours.read_bytes() == USER_OPTIONS
