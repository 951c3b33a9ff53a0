"""The wheel a user installs: the licence it declares ships in it (BSD-3-Clause), the
bundled sample too (File > Open Sample), the README's screenshots not."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests._support.paths import ROOT

ROOT = ROOT


def test_wheel_carries_the_licence_and_the_sample_but_no_screenshots(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("napari_ozx-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        licence = next(n for n in names if n.endswith("/LICENSE"))
        assert "BSD 3-Clause" in z.read(licence).decode()
    assert "License-Expression: BSD-3-Clause" in meta
    assert "napari_ozx/resources/cells.ozx" in names
    assert not [n for n in names if n.endswith(".png")]
    assert "napari_ozx/py.typed" in names
