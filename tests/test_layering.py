"""Architecture guards: the core imports neither Qt nor napari; the manifest is valid."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "napari_ozx.ozx",
        "napari_ozx.ozx.store",
        "napari_ozx.ngff",
        "napari_ozx.ngff.open",
        "napari_ozx.layers.provenance",
        "napari_ozx.layers.reading",
        "napari_ozx.layers.writing",
        "napari_ozx.layers.export",
        "napari_ozx._reader",
        "napari_ozx._writer",
    ],
)
def test_core_loads_no_qt_and_no_napari(module):
    code = (
        f"import sys, {module}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('PyQt5','PyQt6','PySide2','PySide6','qtpy','napari','vispy','superqt'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_npe2_manifest_validates():
    from npe2 import PluginManifest

    pm = PluginManifest.from_distribution("napari-ozx")
    assert pm.name == "napari-ozx"
    assert any("*.ozx" in r.filename_patterns for r in pm.contributions.readers)
    # the reader asks napari for the plate navigator by these names: they must exist
    from napari_ozx._reader import NAVIGATOR_NAME, PLUGIN_NAME

    assert pm.name == PLUGIN_NAME
    commands = {c.id: c.python_name for c in pm.contributions.commands}
    (widget,) = [w for w in pm.contributions.widgets if w.display_name == NAVIGATOR_NAME]
    assert commands[widget.command] == "napari_ozx._qt.plate_navigator:PlateNavigator"
    out = subprocess.run(["npe2", "validate", "napari-ozx"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
