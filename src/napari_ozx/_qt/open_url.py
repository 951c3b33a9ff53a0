"""The *Open URL* dock: open a remote OME-Zarr (``https://``, ``s3://`` …) from napari.

napari's File menu opens local files and folders only. Here the user pastes the URL of an
``.ozx`` file or an OME-Zarr folder (or picks one of the recent ones) and presses *Open*
or Enter. The read (:func:`napari_ozx.layers.reading.read_layer_data`, the reader's
own) runs in a worker thread; the dock shows that it is busy and how long it has been
going. *Cancel* returns at once: the read's result, when it arrives, is dropped, so the
layers of a cancelled open are never added (the request in flight cannot be interrupted;
the worker ends with it). Errors are shown in the dock, reason first, never a traceback:
the :class:`~napari_ozx.errors.OzxError` message of the layer that failed (not found,
access refused, not OME-Zarr …). URLs that opened are remembered in napari-ozx's config
folder (:func:`napari_ozx._preferences.remember_url`) and offered in the URL box.

Opened from *File > IO Utilities > Open URL…* or the *Plugins* menu.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import TYPE_CHECKING

from qtpy.QtCore import Qt, QTimer, Signal
from qtpy.QtWidgets import (
    QComboBox,
    QCompleter,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import WorkerBase

from napari_ozx._preferences import PreferenceError, recent_urls, remember_url
from napari_ozx._qt.base import OzxDockWidget
from napari_ozx._viewer_hooks import after_read
from napari_ozx.errors import OzxError, headline, reason_of
from napari_ozx.layers.reading import LayerData, read_layer_data
from napari_ozx.ozx.remote import is_url

if TYPE_CHECKING:
    import napari
    from napari.layers import Layer

logger = logging.getLogger(__name__)

__all__ = ["OpenUrlWidget", "read_url"]

PLACEHOLDER = "https://…/image.ozx  or  s3://bucket/image.ome.zarr"
HINT = "An OME-Zarr .ozx file or folder, at an https:// or s3:// URL."
HINT_TIP = (
    "http://, https:// and s3:// URLs of a single-file .ozx or an OME-Zarr folder (gs:// "
    "and az:// through fsspec, with gcsfs / adlfs installed). Public S3 buckets are read "
    "anonymously; otherwise AWS_PROFILE or the AWS_* variables give the credentials, "
    "AWS_ENDPOINT_URL an S3-compatible store."
)
ERROR_STYLE = "color: #e06c5a;"


def _name(url: str) -> str:
    """The last part of *url* (what the status line names; the full URL is its tooltip)."""
    return url.rstrip("/").rsplit("/", 1)[-1] or url


def _clean(text: str) -> str:
    """A pasted URL without the blanks and the quotes a shell or a document put around it."""
    text = text.strip()
    while len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].strip()
    return text


def read_url(url: str, warnings: list[str]) -> list[LayerData]:
    """The layer data of *url*, as napari-ozx's reader reads it (raises OzxError).

    What the read reports without failing (a broken labels image or table) is appended
    to *warnings*, one reason-first line each. Runs in the dock's worker thread."""
    source = url if is_url(url) else os.path.expanduser(url)

    def report(what: str, err: BaseException) -> None:
        context = what.replace(source, "", 1).strip()
        warnings.append(headline(reason_of(err, source), source, context))

    return read_layer_data(source, report=report)


class OpenUrlWidget(OzxDockWidget):
    """Paste a URL, press Open (or Enter): its layers are added when the read is done."""

    #: emitted with "opened", "cancelled" or "error" when an open ends
    open_finished = Signal(str)

    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self._job = 0  # the open whose result is wanted; 0 when none is
        self._jobs = 0
        self._url = ""
        self._started = 0.0

        hint = QLabel(HINT)
        hint.setWordWrap(True)
        hint.setToolTip(HINT_TIP)
        self.url_combo = QComboBox()
        self.url_combo.setEditable(True)
        # Enter opens; it must not also add the text to the list (recents are kept on success)
        self.url_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.url_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.url_combo.setMinimumContentsLength(24)
        self.url_combo.setToolTip("Recent URLs are in the list; typing filters them")
        edit = self.url_combo.lineEdit()
        assert edit is not None  # an editable combo box has one
        edit.setPlaceholderText(PLACEHOLDER)
        edit.setClearButtonEnabled(True)
        edit.returnPressed.connect(self.open_url)
        completer = self.url_combo.completer()
        if completer is not None:  # recents matching anywhere, not only at the start
            completer.setFilterMode(Qt.MatchFlag.MatchContains)
            completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
            completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)

        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Open the URL (Enter)")
        self.open_button.clicked.connect(self.open_url)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop waiting: nothing of this URL is added")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.cancel_button)

        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy: no fraction is known before the read ends
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._tick)

        lay = QVBoxLayout(self)
        lay.addWidget(hint)
        lay.addWidget(self.url_combo)
        lay.addLayout(buttons)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addStretch(1)
        self.load_recent()

    # ------------------------------------------------------------------ state
    @property
    def busy(self) -> bool:
        """Whether an open is under way (not cancelled, not finished)."""
        return self._job != 0

    @property
    def url(self) -> str:
        """The URL in the box."""
        return _clean(self.url_combo.currentText())

    def set_url(self, url: str) -> None:
        self.url_combo.setEditText(url)

    def load_recent(self) -> list[str]:
        """Offer the remembered URLs (newest first) in the box's list; the text stays."""
        text = self.url_combo.currentText()
        urls = recent_urls()
        self.url_combo.clear()
        self.url_combo.addItems(urls)
        self.url_combo.setEditText(text)
        return urls

    def recent(self) -> list[str]:
        """The URLs the box offers, in order."""
        return [self.url_combo.itemText(i) for i in range(self.url_combo.count())]

    # ------------------------------------------------------------------ actions
    def open_url(self, url: str | None = None) -> WorkerBase | None:
        """Open *url* (default: the box's text) in a worker; its layers are added when it
        is done. None when nothing was started (empty box, already busy, closed)."""
        url = _clean(url if isinstance(url, str) else self.url)
        if self.busy:
            return None
        if not url:
            self._show("Paste the URL of an OME-Zarr .ozx file or folder first.", error=True)
            return None
        if self._viewer is None:
            self._show("No napari viewer to open the URL in.", error=True)
            return None
        self._jobs += 1
        job = self._jobs
        self._job, self._url = job, url
        warnings: list[str] = []
        self._set_busy(True)
        worker = self.start_worker(
            read_url,
            url,
            warnings,
            returned=functools.partial(self._opened, job, url, warnings),
            errored=functools.partial(self._failed, job, url),
        )
        if worker is None:
            self._job = 0
            self._set_busy(False)
        return worker

    def cancel(self) -> None:
        """Stop waiting for the current open: its result, whenever it comes, is dropped."""
        if not self.busy:
            return
        url, self._job = self._url, 0
        self._set_busy(False)
        self._show(f"Cancelled: nothing of {_name(url)} is added.", tooltip=url)
        self.open_finished.emit("cancelled")

    # ------------------------------------------------------------------ results
    def _opened(self, job: int, url: str, warnings: list[str], data: list[LayerData]) -> None:
        if job != self._job:
            return  # cancelled (or the widget moved on): never added
        self._job = 0
        self._set_busy(False)
        if not data:
            self._show(f"{headline('no image found', url)}\n{url}", error=True, tooltip=url)
            self.open_finished.emit("error")
            return
        try:
            layers = self._add(data)
        except Exception as e:  # napari refused a layer: say why, add nothing
            logger.warning("adding the layers of %s failed", url, exc_info=True)
            self._show(
                f"{headline(f'napari cannot show it: {type(e).__name__}: {e}', url)}\n{url}",
                error=True,
                tooltip=url,
            )
            self.open_finished.emit("error")
            return
        try:
            remember_url(url)
        except PreferenceError as e:
            logger.warning("%s", e)
        self.load_recent()
        lines = [f"Opened {_name(url)}: {len(layers)} layer{'s' * (len(layers) != 1)}"]
        lines += warnings
        self._show("\n".join(lines), tooltip=url)
        for w in warnings:
            self.notify_warning(w, url)
        self.open_finished.emit("opened")

    def _add(self, data: list[LayerData]) -> list[Layer]:
        viewer = self._viewer
        assert viewer is not None
        after_read(data)  # the docks, framing and overlays a read wants, as File > Open
        added: list[Layer] = []
        try:
            for layer_data, kwargs, kind in data:
                out = getattr(viewer, f"add_{kind}")(layer_data, **kwargs)
                added.extend(out if isinstance(out, list) else [out])
        except Exception:
            for layer in added:
                if layer in viewer.layers:
                    viewer.layers.remove(layer)
            raise
        return added

    def _failed(self, job: int, url: str, err: BaseException) -> None:
        if job != self._job:
            return
        self._job = 0
        self._set_busy(False)
        if isinstance(err, OzxError | OSError):
            reason = reason_of(err, url, os.path.expanduser(url))
        else:  # a bug of ours: the reason, not a traceback (that goes to the log)
            logger.error("unexpected error opening %s", url, exc_info=err)
            reason = f"unexpected {type(err).__name__}: {err} (please report this)"
        self._show(
            f"{headline(reason, url)}\nnapari-ozx cannot open {url}", error=True, tooltip=url
        )
        self.open_finished.emit("error")

    # ------------------------------------------------------------------ display
    def _set_busy(self, busy: bool) -> None:
        self.open_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.url_combo.setEnabled(not busy)
        self.progress.setVisible(busy)
        if busy:
            self._started = time.monotonic()
            self._tick()
            self._clock.start()
        else:
            self._clock.stop()

    def _tick(self) -> None:
        seconds = int(time.monotonic() - self._started)
        after = f" {seconds} s" if seconds else ""
        self._show(f"Opening {_name(self._url)}…{after}", tooltip=self._url)

    def _show(self, text: str, *, error: bool = False, tooltip: str = "") -> None:
        self.status.setText(text)
        self.status.setToolTip(tooltip)
        self.status.setStyleSheet(ERROR_STYLE if error else "")

    def shutdown(self) -> None:
        """Drop the open under way and stop the clock (idempotent)."""
        self._job = 0
        self._clock.stop()
        super().shutdown()
