"""Progress from worker threads to the GUI (workers themselves: :mod:`.base`)."""

from __future__ import annotations

import contextlib
import logging

from qtpy.QtCore import QObject, Signal

logger = logging.getLogger(__name__)

__all__ = ["ProgressRelay"]


class ProgressRelay(QObject):
    """A callable ``(done, total)`` safe to call from any thread: it emits
    :attr:`progress`, which Qt delivers in the thread this object lives in (the GUI)."""

    progress = Signal(int, int)

    def __call__(self, done: int, total: int) -> None:
        with contextlib.suppress(RuntimeError):  # the receiving widget is gone; work goes on
            self.progress.emit(int(done), int(total))
