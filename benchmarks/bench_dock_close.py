"""How long closing a dock widget blocks the GUI thread while another widget works.

Before ``OzxDockWidget`` the plate navigator's close called superqt's
``WorkerBase.await_workers``, which waits for every worker in the process. Here a dock
with one short job of its own is closed while a *foreign* job (another dock's, or
napari's) runs for ``FOREIGN_S`` seconds; the time ``close`` takes is measured both ways,
interleaved, median of the repeats.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dock_close.py
"""

from __future__ import annotations

import statistics
import threading
import time

from qtpy.QtWidgets import QApplication
from superqt.utils import WorkerBase

from napari_ozx._qt.base import OzxDockWidget

FOREIGN_S = 1.0
REPEATS = 5


def one(global_wait: bool) -> float:
    own, other = OzxDockWidget(), OzxDockWidget()
    cancel = threading.Event()
    own.start_worker(cancel.wait, 30, cancel=cancel)
    other.start_worker(time.sleep, FOREIGN_S)
    time.sleep(0.05)  # both running
    t = time.perf_counter()
    if global_wait:
        cancel.set()
        WorkerBase.await_workers(10_000)
    own.close()
    took = time.perf_counter() - t
    WorkerBase.await_workers(10_000)
    QApplication.processEvents()
    other.close()
    return took


def main() -> None:
    app = QApplication.instance() or QApplication([])
    assert app is not None
    ours, old = [], []
    for _ in range(REPEATS):
        ours.append(one(False))
        old.append(one(True))
    mo, mg = statistics.median(ours), statistics.median(old)
    print(f"foreign job {FOREIGN_S:.1f} s, median of {REPEATS}")
    print(f"close, own workers only : {mo * 1000:8.1f} ms")
    print(f"close, await_workers    : {mg * 1000:8.1f} ms")
    print(f"ratio await_workers / own: {mg / mo:.0f}x")


if __name__ == "__main__":
    main()
