"""Small helpers to run work off the GUI thread (superqt workers) and relay progress."""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable
from typing import Any

from qtpy.QtCore import QEvent, QObject, Signal
from superqt.utils import FunctionWorker, WorkerBase, create_worker

logger = logging.getLogger(__name__)

__all__ = ["ProgressRelay", "cleanup_hook", "disconnector", "run_in_thread", "wait_for_workers"]


class ProgressRelay(QObject):
    """A callable ``(done, total)`` safe to call from any thread: it emits
    :attr:`progress`, which Qt delivers in the thread this object lives in (the GUI)."""

    progress = Signal(int, int)

    def __call__(self, done: int, total: int) -> None:
        try:
            self.progress.emit(int(done), int(total))
        except RuntimeError:  # the receiving widget is gone; the work goes on
            pass


def run_in_thread(
    func: Callable[..., Any],
    *args: Any,
    on_result: Callable[[Any], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    on_finished: Callable[[], None] | None = None,
    **kwargs: Any,
) -> FunctionWorker:
    """Run ``func(*args, **kwargs)`` in Qt's thread pool; callbacks run on the GUI thread.

    Errors go to *on_error* (logged when there is none), never re-raised in the GUI.
    """

    def _log(e: BaseException) -> None:
        logger.warning("napari-ozx background task failed: %s", e, exc_info=e)

    connect: dict[str, Any] = {"errored": on_error or _log}
    if on_result is not None:
        connect["returned"] = on_result
    if on_finished is not None:
        connect["finished"] = on_finished
    worker = create_worker(func, *args, _start_thread=False, _connect=connect, **kwargs)
    worker.start()
    return worker  # type: ignore[return-value]


def wait_for_workers(msecs: int = 10_000) -> None:
    """Block until every worker has finished (tests, shutdown)."""
    WorkerBase.await_workers(msecs)


def cleanup_hook(cleanups: list[Callable[[], None]]) -> Callable[..., None]:
    """Runs *cleanups* once; holds no reference to the widget (safe on ``destroyed``)."""

    def run(*_: Any) -> None:
        while cleanups:
            fn = cleanups.pop()
            with contextlib.suppress(Exception):
                fn()

    return run


def disconnector(emitter: Any, callback: Any) -> Callable[[], None]:
    """Disconnect a bound method later without keeping its object alive."""
    ref = weakref.WeakMethod(callback)

    def run() -> None:
        cb = ref()
        if cb is not None:
            emitter.disconnect(cb)

    return run


class ShutdownOnUndock:
    """Mixin for dock widgets (list it before ``QWidget``): when napari removes a dock
    it reparents the widget to nothing; that, or closing it, calls ``shutdown()``, which
    the widget implements to stop workers and release files (idempotently)."""

    _docked = False

    def shutdown(self) -> None:  # pragma: no cover - implemented by the widget
        raise NotImplementedError

    def event(self, e: Any) -> bool:
        if e.type() == QEvent.Type.ParentChange:
            if self.parent() is not None:  # type: ignore[attr-defined]
                self._docked = True
            elif self._docked:
                self.shutdown()
        return super().event(e)  # type: ignore[misc]

    def closeEvent(self, event: Any) -> None:
        self.shutdown()
        super().closeEvent(event)  # type: ignore[misc]
