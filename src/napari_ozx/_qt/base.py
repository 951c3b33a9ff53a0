"""One lifecycle for every napari-ozx dock widget: :class:`OzxDockWidget`.

A dock holds viewer event connections, background workers and whatever a subclass
registers with :meth:`OzxDockWidget.add_cleanup` (open files, cancel flags). They are
recorded in a Qt-free ``_Lifecycle`` whose one idempotent ``close`` runs however the dock
ends: closed (``closeEvent``), undocked by napari (reparented to nothing), or its window
closed / the widget deleted (``destroyed``, when the Python wrapper must not be touched).
Closing waits for *this widget's* workers only, for a bounded time (superqt's
``await_workers`` would wait on every worker of napari and the other docks). User-facing
reports go through :func:`notify` (``notify_error`` / ``notify_warning`` /
``notify_info``): the reason first and the short file name, the full path and the
exception in the details.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from qtpy.QtCore import QEvent, Qt
from qtpy.QtGui import QCloseEvent
from qtpy.QtWidgets import QWidget
from superqt.utils import WorkerBase, create_worker

from napari_ozx.errors import headline

if TYPE_CHECKING:
    import napari
    from napari.utils.notifications import Notification

logger = logging.getLogger(__name__)

__all__ = ["OzxDockWidget", "notify"]

#: how long closing a widget may block the GUI thread waiting for its own workers
CLOSE_WAIT_MS = 5_000

_R = TypeVar("_R")

#: an event callback (napari ``EventEmitter``, psygnal or Qt signal)
Callback = Callable[..., object]


class Emitter(Protocol):
    """Anything a dock connects to: napari ``EventEmitter``, psygnal or Qt signals."""

    def connect(self, callback: Callback, /) -> object: ...

    def disconnect(self, callback: Callback, /) -> object: ...


def _ref(callback: Callback) -> Callable[[], Callback | None]:
    """A weak reference for bound methods (the record must not keep the widget alive);
    plain functions are kept (nothing else may hold them)."""
    if inspect.ismethod(callback):
        return weakref.WeakMethod(callback)
    return lambda: callback


class _Lifecycle:
    """What a dock widget holds, without a reference to the widget (see module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self._lock = threading.Lock()
        self._connections: list[tuple[Emitter, Callable[[], Callback | None]]] = []
        self._cleanups: list[Callable[[], None]] = []
        # worker -> (set when its function has returned, cancel flag handed to it)
        self.workers: dict[WorkerBase, tuple[threading.Event, threading.Event | None]] = {}

    def connected(self, emitter: Emitter, callback: Callback) -> None:
        self._connections.append((emitter, _ref(callback)))

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        self._cleanups.append(fn)

    def add_worker(
        self, worker: WorkerBase, done: threading.Event, cancel: threading.Event | None
    ) -> None:
        with self._lock:
            self.workers[worker] = (done, cancel)

    def discard_worker(self, worker: WorkerBase) -> None:
        with self._lock:
            self.workers.pop(worker, None)

    def disconnect_all(self) -> None:
        conns, self._connections = self._connections, []
        for emitter, ref in conns:
            cb = ref()
            if cb is None:  # a weakly connected method whose object is gone
                continue
            try:
                emitter.disconnect(cb)
            except (TypeError, ValueError, RuntimeError, KeyError) as e:
                logger.debug("%s: disconnecting %r: %s", self.name, cb, e)

    def close(self, *_: object, wait_ms: int = CLOSE_WAIT_MS) -> None:
        """Disconnect, stop and wait (bounded) for the own workers, run the cleanups.

        Idempotent; safe from ``destroyed`` (touches no Qt object of the widget)."""
        if self.closed:
            return
        self.closed = True
        self.disconnect_all()
        with self._lock:
            workers = list(self.workers.items())
        for worker, (_done, cancel) in workers:
            if cancel is not None:
                cancel.set()
            with contextlib.suppress(RuntimeError):  # its QObject may be gone already
                worker.quit()
        deadline = time.monotonic() + wait_ms / 1000
        for worker, (done, _cancel) in workers:
            if not done.wait(max(0.0, deadline - time.monotonic())):
                logger.warning("%s: a background task still runs after close", self.name)
                break
            self.discard_worker(worker)
        cleanups, self._cleanups = self._cleanups, []
        for fn in reversed(cleanups):
            try:
                fn()
            except Exception as e:  # one failing cleanup must not skip the others
                logger.warning("%s: cleanup failed: %s", self.name, e)


class OzxDockWidget(QWidget):
    """Base of the napari-ozx dock widgets: viewer connections, workers, notifications.

    Subclasses connect to viewer events with :meth:`connect_event`, start background work
    with :meth:`start_worker`, register other cleanups with :meth:`add_cleanup` and report
    with :meth:`notify_error` / :meth:`notify_warning` / :meth:`notify_info`. All of it
    ends in :meth:`shutdown`, which runs once, however the widget goes away.
    """

    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._viewer = napari_viewer
        self._docked = False
        self._life = _Lifecycle(type(self).__name__)
        # destroyed is emitted while the C++ object dies: the slot holds the record only
        self.destroyed.connect(self._life.close)

    # ------------------------------------------------------------------ connections
    @property
    def closed(self) -> bool:
        return self._life.closed

    def connect_event(self, emitter: Emitter, callback: Callback) -> None:
        """``emitter.connect(callback)``, undone by :meth:`shutdown`.

        *emitter* is anything with ``connect``/``disconnect`` (napari ``EventEmitter``,
        psygnal or Qt signals). Not connected at all once the widget is closed."""
        if self.closed:
            return
        emitter.connect(callback)
        self._life.connected(emitter, callback)

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        """Run *fn* (once, after the workers stopped) when the widget goes away.

        *fn* must not reference the widget: it may run from ``destroyed``."""
        self._life.add_cleanup(fn)

    # ------------------------------------------------------------------ workers
    def start_worker(
        self,
        func: Callable[..., _R],
        *args: object,
        returned: Callable[[_R], None] | None = None,
        errored: Callable[[BaseException], None] | None = None,
        finished: Callable[[], None] | None = None,
        cancel: threading.Event | None = None,
        **kwargs: object,
    ) -> WorkerBase | None:
        """Run ``func(*args, **kwargs)`` in superqt's thread pool, owned by this widget.

        Callbacks run on the GUI thread and only while the widget is open. Errors go to
        *errored* (logged when there is none), never re-raised in the GUI. *cancel* is set
        when the widget closes (for work that polls a flag, like the writer); a generator
        function is aborted at its next ``yield``. None once the widget is closed.
        """
        if self.closed:
            return None
        life = self._life

        def guard(cb: Callable[..., None]) -> Callable[..., None]:
            def run(*a: object) -> None:
                if not life.closed:
                    cb(*a)

            return run

        def log(e: BaseException) -> None:
            logger.warning("%s: background task failed: %s", life.name, e, exc_info=e)

        on_error = guard(errored) if errored is not None else log
        # errors go to on_error only (without _connect superqt re-raises them in the GUI)
        worker = create_worker(
            functools.partial(func, *args, **kwargs),
            _start_thread=False,
            _connect={"errored": on_error},
        )
        # set in the worker thread as its last act (returned/errored are emitted before):
        # what closing waits on, even while the GUI thread is blocked there (superqt's stub
        # types ``finished`` as a one-argument signal and the connection type as a class)
        done = threading.Event()
        worker.finished.connect(done.set, Qt.ConnectionType.DirectConnection)  # type: ignore[arg-type]
        if returned is not None:
            worker.returned.connect(guard(returned))
        if finished is not None:
            worker.finished.connect(guard(finished))

        def gone(*_: object) -> None:
            life.discard_worker(worker)

        worker.finished.connect(gone)
        life.add_worker(worker, done, cancel)
        worker.start()
        return worker

    @property
    def workers(self) -> set[WorkerBase]:
        """This widget's workers that have not finished."""
        return set(self._life.workers)

    # ------------------------------------------------------------------ reporting
    def notify_error(
        self,
        reason: str,
        path: str | os.PathLike[str] | None = None,
        exc: BaseException | str | None = None,
    ) -> None:
        notify("error", reason, path, exc)

    def notify_warning(
        self,
        reason: str,
        path: str | os.PathLike[str] | None = None,
        exc: BaseException | str | None = None,
    ) -> None:
        notify("warning", reason, path, exc)

    def notify_info(
        self,
        reason: str,
        path: str | os.PathLike[str] | None = None,
        *,
        headline_names_file: bool = True,
    ) -> None:
        notify("info", reason, path, headline_names_file=headline_names_file)

    # ------------------------------------------------------------------ lifetime
    def shutdown(self) -> None:
        """Disconnect from the viewer, stop this widget's workers, run the cleanups.

        Idempotent. Subclasses that extend it call ``super().shutdown()``."""
        self._life.close()

    def event(self, e: QEvent | None) -> bool:
        # napari removes a dock by reparenting its widget to nothing
        if e is not None and e.type() == QEvent.Type.ParentChange:
            if self.parent() is not None:
                self._docked = True
            elif self._docked:
                self.shutdown()
        return super().event(e)

    def closeEvent(self, event: QCloseEvent | None) -> None:
        self.shutdown()
        super().closeEvent(event)


def notify(
    severity: str,
    reason: str,
    path: str | os.PathLike[str] | None = None,
    exc: BaseException | str | None = None,
    *,
    headline_names_file: bool = True,
) -> Notification | None:
    """Tell the user: napari notification ``"<reason> (<file name>)"`` whose ``details``
    (and *Details* button) hold the full path and the exception. Also logged. Returns
    the notification (None without napari). ``headline_names_file=False``: *reason*
    names the file itself, the headline is *reason* alone."""
    full = os.fspath(path) if path is not None else None
    message = headline(reason, full) if headline_names_file else reason
    lines = [reason]
    if full:
        lines.append(f"File: {full}")
    if exc is not None:
        lines.append(f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else exc)
    details = "\n".join(str(x) for x in lines)
    level = {"error": logging.ERROR, "warning": logging.WARNING}.get(severity, logging.INFO)
    logger.log(level, "%s", details.replace("\n", "; "))
    try:
        from napari.utils.notifications import Notification, notification_manager
    except ImportError:  # pragma: no cover - napari is a dependency; keep the log only
        return None

    def show_details() -> None:
        from qtpy.QtWidgets import QMessageBox

        box = QMessageBox(QMessageBox.Icon.Information, "napari-ozx", message)
        box.setDetailedText(details)
        box.exec()

    note = Notification(message, severity, actions=[("Details", show_details)], details=details)
    notification_manager.dispatch(note)
    return note
