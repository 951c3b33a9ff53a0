"""Architecture guards: the core imports neither Qt nor napari; the manifest is valid."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support.paths import ROOT


@pytest.mark.parametrize(
    "module",
    [
        "napari_ozx.ozx",
        "napari_ozx.ozx.store",
        "napari_ozx.ngff",
        "napari_ozx.ngff.read.open",
        "napari_ozx.layers.provenance",
        "napari_ozx.layers.reading",
        "napari_ozx.layers.writing",
        "napari_ozx.layers.export",
        "napari_ozx.inspection",
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
    from napari_ozx._reader import PLUGIN_NAME
    from napari_ozx._viewer_hooks import NAVIGATOR_NAME

    assert pm.name == PLUGIN_NAME
    commands = {c.id: c.python_name for c in pm.contributions.commands}
    (widget,) = [w for w in pm.contributions.widgets if w.display_name == NAVIGATOR_NAME]
    assert commands[widget.command] == "napari_ozx._qt.plate_navigator:PlateNavigator"
    out = subprocess.run(["npe2", "validate", "napari-ozx"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_module_shadows_the_stdlib_inspect():

    src = ROOT / "src" / "napari_ozx"
    assert not list(src.rglob("inspect.py")) and not (src / "inspect").exists()


def test_inspection_imports_only_ngff_ozx_errors():
    """The inspection sits below layers, the entry points and the widgets."""
    import ast

    pkg = ROOT / "src" / "napari_ozx" / "inspection"
    allowed = (
        "napari_ozx.ngff",
        "napari_ozx.ozx",
        "napari_ozx.errors",
        "napari_ozx._compat",  # everything may import it (architecture.md)
        "napari_ozx.inspection",
    )
    for f in pkg.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = "napari_ozx." * (node.level == 2) + "napari_ozx.inspection." * (
                    node.level == 1
                )
                target = (base + (node.module or "")).rstrip(".")
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
            elif isinstance(node, ast.Import):
                target = node.names[0].name
            else:
                continue
            top = target.split(".")[0]
            assert top not in ("napari", "qtpy", "PyQt5", "PyQt6", "PySide2", "PySide6")
            if top == "napari_ozx":
                assert target.startswith(allowed), f"{f.name} imports {target}"
