"""Level of detail's camera hook: the points of the view, replaced off the GUI thread.

For each level-of-detail points element (:mod:`napari_ozx.layers.spatial.lod`), a camera
move turns the canvas into a rectangle of the layer's data coordinates
(:func:`view_rect`); a worker (napari's thread workers, as :mod:`napari_ozx._refine3d`)
waits until the camera has stayed put for :data:`DEBOUNCE` seconds, selects the points
of that rectangle and a margin, and the GUI thread puts them into the Points layer in
one go. One worker per element at a time; a view inside the rectangle held asks
nothing. Above the layer's cap the Points layer is emptied and the overview shown, else
the overview is hidden. The index itself, and the overview after a change of the
categories shown, are computed on workers too.

In 3D the layers stay 2D and keep the points of the last 2D view. Installed by
:mod:`napari_ozx._viewer_hooks` after a read, once per viewer; never raises.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx._compat import napari_canvas_size
from napari_ozx.layers.spatial.lod import LodPoints, ViewData, apply_view, contrast_of, lod_of

if TYPE_CHECKING:
    from napari.viewer import Viewer

logger = logging.getLogger(__name__)

__all__ = ["DEBOUNCE", "install", "view_rect"]

#: seconds the camera stays put before the points of its view are selected
DEBOUNCE = 0.05

_INSTALLED: weakref.WeakSet[Any] = weakref.WeakSet()


def view_rect(viewer: Viewer, layer: Any) -> tuple[float, float, float, float]:
    """The rectangle (y0, x0, y1, x1, *layer*'s data coordinates) the canvas shows."""
    cam = _camera(viewer)
    cy, cx = (float(v) for v in tuple(cam.center)[-2:])
    h, w = napari_canvas_size(viewer)
    zoom = float(cam.zoom) or 1.0
    hy, hx = h / 2 / zoom, w / 2 / zoom
    corners = [(cy + a * hy, cx + b * hx) for a in (-1, 1) for b in (-1, 1)]
    data = np.asarray([layer.world_to_data(c)[-2:] for c in corners], dtype=float)
    lo, hi = data.min(axis=0), data.max(axis=0)
    return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


def _camera(viewer: Viewer) -> Any:
    scene = getattr(viewer, "scene", None)  # napari 0.9; before, viewer.camera
    return scene.camera if scene is not None else viewer.camera


def _covers(outer: tuple[float, ...], inner: tuple[float, ...]) -> bool:
    return (
        outer[0] <= inner[0]
        and outer[1] <= inner[1]
        and outer[2] >= inner[2]
        and (outer[3] >= inner[3])
    )


class _Updater:
    """Keeps one element's Points layer on the view (see the module)."""

    def __init__(self, viewer: Viewer, lod: LodPoints) -> None:
        self.viewer = weakref.ref(viewer)
        self.lod = lod
        self.want: tuple[float, float, float, float] | None = None
        self.busy = False
        self.stale = True  # what is held no longer answers the filter
        self.lock = threading.Lock()
        lod.on_filter = self.filter_changed

    def request(self) -> None:
        viewer, pts = self.viewer(), self.lod.points_layer
        if viewer is None or pts is None or pts not in viewer.layers:
            return
        if viewer.dims.ndisplay != 2:
            return
        try:
            rect = view_rect(viewer, pts)
        except Exception:
            logger.debug("napari-ozx: view not known", exc_info=True)
            return
        with self.lock:
            self.want = rect
        shown = self.lod.shown
        if (
            not self.stale
            and shown is not None
            and shown.positions is not None
            and _covers(shown.rect, rect)
        ):
            return  # the points held hold the view's
        if not self.busy:
            self._start()

    def _start(self) -> None:
        from napari.qt.threading import create_worker

        self.busy = True
        worker = create_worker(self._work, _start_thread=False)
        worker.returned.connect(self._done)
        worker.errored.connect(self._failed)
        worker.start()

    def _work(self) -> tuple[tuple[float, float, float, float], ViewData] | None:
        """Worker thread: wait for the camera to stop, then select the view's points."""
        last = None
        while True:
            with self.lock:
                rect = self.want
            if rect is None or rect == last:
                break
            last = rect
            time.sleep(DEBOUNCE)
        if rect is None:
            return None
        return rect, self.lod.view(rect)

    def _done(self, result: tuple[tuple[float, float, float, float], ViewData] | None) -> None:
        self.busy = False
        try:
            if result is not None:
                _rect, data = result
                pts = self.lod.points_layer
                if pts is not None:
                    apply_view(pts, data)
                    self.lod.shown = data
                    self.stale = False
                    ov = self.lod.overview_layer
                    if ov is not None:
                        ov.visible = data.positions is None
            with self.lock:
                again = self.want is not None and (result is None or self.want != result[0])
            if again:
                self.request()
        except Exception:
            logger.warning("napari-ozx: points of the view not shown", exc_info=True)

    def _failed(self, exc: BaseException) -> None:
        self.busy = False
        logger.warning("napari-ozx: points of the view not selected: %s", exc)

    def filter_changed(self, lod: LodPoints) -> None:
        """The categories shown changed: the view's points again, the overview on a
        worker."""
        from napari.qt.threading import create_worker

        self.stale = True
        self.request()

        def done(levels: list[np.ndarray]) -> None:
            ov = lod.overview_layer
            if ov is not None:
                ov.data = levels
                ov.contrast_limits = contrast_of(levels[0])
                ov.name = lod.describe()

        worker = create_worker(lod.overview_levels, _start_thread=False)
        worker.returned.connect(done)
        worker.start()


def _build(lod: LodPoints, updater: _Updater) -> None:
    """Index *lod*'s points on a worker (its layers are in already), then show the
    overview and the view's points."""
    from napari.qt.threading import create_worker

    build = lod.build
    if build is None or lod.ready:
        return
    lod.build = None  # once

    def work() -> list[np.ndarray]:
        lod.attach(build())
        return lod.overview_levels()

    def done(levels: list[np.ndarray]) -> None:
        ov = lod.overview_layer
        if ov is not None:
            ov.data = levels
            ov.contrast_limits = contrast_of(levels[0])
        updater.stale = True
        updater.request()

    def failed(exc: BaseException) -> None:
        logger.warning("napari-ozx: the points of %s not indexed: %s", lod.name, exc)

    worker = create_worker(work, _start_thread=False)
    worker.returned.connect(done)
    worker.errored.connect(failed)
    worker.start()


def install(viewer: Viewer) -> None:
    """Keep *viewer*'s level-of-detail points on its view (once per viewer; those
    inserted later too). Never raises."""
    try:
        if viewer in _INSTALLED:
            _bind_all(viewer)
            return
        _INSTALLED.add(viewer)
        ref = weakref.ref(viewer)
        updaters: dict[int, _Updater] = {}

        def on_camera(*_: object) -> None:
            for up in list(updaters.values()):
                up.request()

        def on_inserted(event: Any) -> None:
            layer = getattr(event, "value", None)
            lod = lod_of(layer)
            v = ref()
            if lod is None or v is None:
                return
            lod.bind(layer)
            if id(lod) not in updaters:
                updaters[id(lod)] = _Updater(v, lod)
            if not lod.ready:
                _build(lod, updaters[id(lod)])
            updaters[id(lod)].request()

        def on_removed(event: Any) -> None:
            lod = lod_of(getattr(event, "value", None))
            if lod is not None and lod.points_layer is None:
                updaters.pop(id(lod), None)

        cam = _camera(viewer)
        cam.events.center.connect(on_camera)
        cam.events.zoom.connect(on_camera)
        viewer.dims.events.ndisplay.connect(on_camera)
        viewer.layers.events.inserted.connect(on_inserted)
        viewer.layers.events.removed.connect(on_removed)
        size_events = getattr(
            getattr(getattr(viewer, "canvas", None), "events", None), "size", None
        )
        if size_events is not None:
            size_events.connect(on_camera)
        for layer in list(viewer.layers):
            on_inserted(type("E", (), {"value": layer})())
    except Exception:
        logger.warning("napari-ozx: level of detail not kept on the view", exc_info=True)


def _bind_all(viewer: Viewer) -> None:
    for layer in list(viewer.layers):
        lod = lod_of(layer)
        if lod is not None:
            lod.bind(layer)
