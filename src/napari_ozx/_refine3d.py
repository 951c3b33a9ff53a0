"""3D that refines from coarse to fine: the coarsest level at once, the chosen one when read.

napari renders a multiscale layer in 3D from one level, read on the GUI thread when the
view turns 3D: the level that fits the GPU and the memory budget
(:mod:`napari_ozx.layers.levels`) can take seconds to read, over the network many, and
napari shows nothing and answers nothing meanwhile. :func:`refine` instead locks the
layer on its coarsest level (small: read at once), reads the chosen level's volume on a
worker thread (napari's thread workers), and then locks the layer on it: napari's request
for that volume is served from what was read (:func:`~napari_ozx.ngff.read.lazy.prepare_view`),
so neither switch freezes napari for more than one draw. Back in 2D, or when the layer is
removed, a read still in flight stops at its next step and what it read is dropped.

Called by :func:`napari_ozx._viewer_hooks.apply_3d_levels` on the GUI thread; napari's Qt
front end is loaded then (the workers' results come back on the GUI thread).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx._compat import napari_displayed_axes
from napari_ozx.layers.provenance import LOCKED_3D_KEY

if TYPE_CHECKING:
    from napari.layers import Layer
    from napari.viewer import Viewer

logger = logging.getLogger(__name__)

__all__ = [
    "cancel",
    "flush",
    "follow_point",
    "forget",
    "level_view",
    "refine",
    "refining",
    "warm",
]

#: layer -> the stop flag of its read in flight and the level it reads (one per layer)
_IN_FLIGHT: weakref.WeakKeyDictionary[Any, tuple[threading.Event, int]] = (
    weakref.WeakKeyDictionary()
)


def level_view(viewer: Viewer, layer: Layer, level: int, ndisplay: int | None = None) -> Any:
    """The view of *layer*'s *level* napari asks for in 3D at the viewer's current point:
    the displayed axes whole (those napari would display with *ndisplay* axes, else
    those it displays now), the others at the point's index on that level (napari's
    rounding: the data point divided by the level's downsampling, clipped, rounded)."""
    data = layer.data[level]
    displayed = set(napari_displayed_axes(layer, ndisplay))
    if len(displayed) == data.ndim:
        return data
    point = np.asarray(layer.world_to_data(viewer.dims.point), dtype=float)
    factors = np.asarray(layer.downsample_factors[level], dtype=float)
    index: list[int | slice] = []
    for d, n in enumerate(data.shape):
        if d in displayed:
            index.append(slice(None))
        else:
            p = float(np.clip(point[d] / factors[d], 0, n - 1))
            index.append(int(np.round(p)))
    return data[tuple(index)]


def refining(layer: Layer) -> int | None:
    """The level a read in flight for *layer* reads, else None."""
    got = _IN_FLIGHT.get(layer)
    return None if got is None else got[1]


def cancel(layer: Layer | None) -> None:
    """Stop *layer*'s read in flight, if any (it stops at its next step; nothing kept)."""
    try:
        got = _IN_FLIGHT.pop(layer, None)
    except TypeError:  # not a layer (napari's event without one)
        return
    if got is not None:
        got[0].set()


def forget(layer: Layer | None) -> None:
    """*layer* is gone: stop its read in flight and drop its coarsest volume kept in
    memory (the channels of an image share their levels: a level outlives one layer)."""
    from napari_ozx.ngff.read import lazy

    cancel(layer)
    try:
        view = _WARM.pop(layer, None)
    except TypeError:  # not a layer
        return
    if view is not None:
        lazy.forget_prepared(view)


def _still_3d(viewer: Viewer, layer: Layer) -> bool:
    """*layer* is still in *viewer*, which is 3D, and its level still ours to choose."""
    return (
        layer in viewer.layers
        and viewer.dims.ndisplay == 3
        and bool(layer.metadata.get(LOCKED_3D_KEY))
    )


def _finished(layer: Layer | None, stop: threading.Event) -> None:
    got = _IN_FLIGHT.get(layer) if layer is not None else None
    if got is not None and got[0] is stop:
        _IN_FLIGHT.pop(layer, None)


def _box(view: Any) -> object:
    """What identifies the box of the level view *view* (its level and index)."""
    from napari_ozx.ngff.read import lazy

    return lazy.view_box(view)


def refine(viewer: Viewer, layer: Layer, level: int) -> None:
    """Show *layer* from its coarsest level now (napari's own choice in 3D), read *level*
    off the GUI thread, then lock it on *level*, together with the viewer's other layers
    read meanwhile (one redraw). A coarsest *level* is locked at once. Never raises."""
    cancel(layer)
    coarsest = len(layer.level_shapes) - 1
    layer.metadata[LOCKED_3D_KEY] = True
    try:
        view = level_view(viewer, layer, level)
    except Exception:
        logger.warning("napari-ozx: 3D view of %s not planned", layer.name, exc_info=True)
        _SHOWN.pop(layer, None)
        layer.locked_data_level = level
        return
    _SHOWN[layer] = (level, _box(view))
    if level >= coarsest:
        layer.locked_data_level = coarsest
        return
    if layer.locked_data_level is not None or layer.data_level != coarsest:
        layer.locked_data_level = coarsest  # napari shows the coarsest already: no reslice
    _read(viewer, layer, level, view)


def _read(viewer: Viewer, layer: Layer, level: int, view: Any) -> None:
    """Read *view* (of *layer*'s *level*) on a worker; lock *layer* on *level* once read."""
    from napari.qt.threading import create_worker

    from napari_ozx.ngff.read import lazy

    stop = threading.Event()
    _IN_FLIGHT[layer] = (stop, level)
    ref = weakref.ref(layer)

    def done(ok: object) -> None:
        lay = ref()
        _finished(lay, stop)
        if lay is None or ok is not True or stop.is_set():
            lazy.forget_prepared(view)
        else:
            _READY.append((ref, level, view, stop))
        flush(viewer)

    def failed(exc: BaseException) -> None:
        lay = ref()
        _finished(lay, stop)
        lazy.forget_prepared(view)
        logger.warning(
            "napari-ozx: level %d of %s not read for 3D (the coarsest level stays): %s",
            level,
            getattr(lay, "name", "?"),
            exc,
        )
        flush(viewer)

    worker = create_worker(lazy.prepare_view, view, stop.is_set, _start_thread=False)
    worker.returned.connect(done)
    worker.errored.connect(failed)
    worker.start()


#: layer -> the level it is shown from in 3D by :func:`refine` and the box of that view
_SHOWN: weakref.WeakKeyDictionary[Any, tuple[int, object]] = weakref.WeakKeyDictionary()
#: layer -> its coarsest level's 3D view kept in memory (:func:`warm`, :func:`follow_point`)
_WARM: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
#: the largest coarsest-level volume :func:`warm` keeps for a layer
WARM_MAX = 32 << 20
#: how long :func:`warm` lets napari's first 2D reads go first (seconds)
WARM_DELAY_S = 0.5


def _keep_coarsest(layer: Layer, view: Any) -> None:
    """*view* is now *layer*'s kept coarsest volume; the one kept before is dropped."""
    from napari_ozx.ngff.read import lazy

    old = _WARM.get(layer)
    _WARM[layer] = view
    if old is not None and _box(old) != _box(view):
        lazy.forget_prepared(old)


def _warm_read(view: Any, wanted: Callable[[], bool]) -> bool:
    """Worker: napari's 3D camera module, and *view*'s pixels, kept for every request
    while *wanted()* (a slider moved on meanwhile: nothing read, or nothing kept)."""
    from napari_ozx.ngff.read import lazy

    time.sleep(WARM_DELAY_S)  # the 2D view's own reads first (the same connections)
    # napari's 3D camera imports it on its first 3D frame (a pause on the GUI thread)
    with contextlib.suppress(ImportError):
        importlib.import_module("scipy.spatial.transform")
    if not wanted():
        return False
    if lazy.is_prepared(view):
        return True
    ok = lazy.prepare_view(view, lambda: not wanted(), keep=True)
    if ok and not wanted():
        lazy.forget_prepared(view)
        return False
    return ok


def warm(viewer: Viewer, layer: Layer) -> None:
    """Read *layer*'s coarsest level as napari shows it in 3D (at the viewer's point) off
    the GUI thread and keep it, so that turning 3D, and napari's thumbnails, are served
    from memory instead of a read on the GUI thread. Only for a multiscale layer with
    more than two axes whose coarsest volume is at most :data:`WARM_MAX` bytes and more
    than one plane deep; once per point, after :data:`WARM_DELAY_S`. Never raises."""
    from napari.qt.threading import create_worker

    try:
        if not getattr(layer, "multiscale", False) or layer.ndim < 3:
            return
        coarsest = len(layer.level_shapes) - 1
        view = level_view(viewer, layer, coarsest, ndisplay=3)
        if view.nbytes > WARM_MAX or 1 in view.shape:  # too big, or flat: no 3D to speak of
            return
        if layer in _WARM and _box(_WARM[layer]) == _box(view):
            return
        _keep_coarsest(layer, view)
        ref = weakref.ref(layer)

        def wanted() -> bool:
            lay = ref()
            return lay is not None and _WARM.get(lay) is view

        worker = create_worker(_warm_read, view, wanted, _start_thread=False)
        worker.errored.connect(
            lambda exc: logger.debug("napari-ozx: coarsest level not read ahead: %s", exc)
        )
        worker.start()
    except Exception:
        logger.debug("napari-ozx: coarsest level of %s not read ahead", layer.name, exc_info=True)


def follow_point(viewer: Viewer) -> None:
    """A slider moved. In 2D, the coarsest volumes read ahead (:func:`warm`) follow it
    (time; z is displayed in 3D). In 3D, for each layer :func:`refine` shows whose volume
    it moves (time, a channel axis), show the coarsest level at the new point now (read
    once and kept: napari's slice and its thumbnail share it) and read the chosen level
    there off the GUI thread, as when turning 3D. Called before napari slices
    (:func:`napari_ozx._compat.napari_before_slicing`), so napari reads the coarsest level,
    not the chosen one. GUI thread; never raises."""
    from napari_ozx._compat import napari_lock_level_quietly
    from napari_ozx.ngff.read import lazy

    if viewer.dims.ndisplay != 3:  # 2D: the coarsest volume read ahead follows the slider
        for layer in list(_WARM.keys()):
            if layer in viewer.layers:
                warm(viewer, layer)
        return
    for layer in list(viewer.layers):
        shown = _SHOWN.get(layer)
        if shown is None or not layer.metadata.get(LOCKED_3D_KEY):
            continue
        try:
            level, box = shown
            view = level_view(viewer, layer, level)
            if _box(view) == box:
                continue  # a displayed axis moved: the same volume
            cancel(layer)
            coarsest = len(layer.level_shapes) - 1
            coarse = view if level >= coarsest else level_view(viewer, layer, coarsest)
            if coarse.nbytes <= WARM_MAX:
                _keep_coarsest(layer, coarse)
                if not lazy.is_prepared(coarse):
                    lazy.prepare_view(coarse, keep=True)
            _SHOWN[layer] = (level, _box(view))
            if level < coarsest:
                napari_lock_level_quietly(layer, coarsest)
                _read(viewer, layer, level, view)
        except Exception:
            logger.warning("napari-ozx: 3D view of %s not moved", layer.name, exc_info=True)


#: reads finished while others of the same viewer were in flight: (layer, level, view, stop)
_READY: list[tuple[weakref.ref[Any], int, Any, threading.Event]] = []


def flush(viewer: Viewer) -> None:
    """Once none of *viewer*'s layers is being read, lock every layer read meanwhile on
    its level in one go (one redraw), or drop what was read for a layer no longer wanted.
    GUI thread; never raises."""
    from napari_ozx.ngff.read import lazy

    try:
        if any(lay in viewer.layers for lay in list(_IN_FLIGHT)):
            return
        ready, _READY[:] = list(_READY), []
        for ref, level, view, stop in ready:
            lay = ref()
            if lay is None or stop.is_set() or not _still_3d(viewer, lay):
                lazy.forget_prepared(view)
            else:
                lay.locked_data_level = level
    except Exception:
        logger.warning("napari-ozx: 3D levels not applied", exc_info=True)
