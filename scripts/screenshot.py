"""Open an OME-Zarr file in a real napari window and save a screenshot of the whole window.

python scripts/screenshot.py resources/cells.ozx shot.png   (run under xvfb-run if headless)
"""

from __future__ import annotations

import sys
import time

import napari
from qtpy.QtWidgets import QApplication


def settle(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        QApplication.processEvents()
        time.sleep(0.02)


def main(source: str, out: str) -> None:
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1200, 800)
    t0 = time.perf_counter()
    layers = viewer.open(source, plugin="napari-ozx")
    opened = time.perf_counter() - t0
    if viewer.dims.ndim > 2:
        viewer.dims.set_point(0, viewer.dims.range[0].stop / 2)
    settle(1.0)
    viewer.screenshot(out, canvas_only=False)
    print(f"opened {source} in {opened:.2f} s: {[lyr.name for lyr in layers]}; screenshot: {out}")
    viewer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "screenshot.png")
