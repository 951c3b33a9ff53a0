"""A real napari window for the GUI benchmarks (bench_browse, bench_3d): made the same
size every time, and the Qt event loop run until something holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def open_window(napari: Any) -> tuple[Any, Any]:
    """A shown 1200 x 900 napari viewer and its vispy scene canvas."""
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1200, 900)
    return viewer, viewer.window._qt_viewer.canvas._scene_canvas


def run_until(pred: Callable[[], object], limit: float) -> bool:
    """Run the Qt event loop until ``pred()`` holds or *limit* seconds pass; whether it
    holds."""
    from qtpy.QtCore import QEventLoop, QTimer

    perf = time.perf_counter
    loop = QEventLoop()
    deadline = perf() + limit
    t = QTimer()
    t.setInterval(5)

    def check() -> None:
        if pred() or perf() > deadline:
            loop.quit()

    t.timeout.connect(check)
    t.start()
    if not pred():
        loop.exec()
    t.stop()
    return bool(pred())
