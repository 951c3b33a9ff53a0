"""What a read does to the napari viewer it was read into (called by :mod:`._reader`).

* docks the plate navigator when a plate (or well) was read, the scene dock when a 0.6
  scene or a SpatialData store of several coordinate systems was, the categories dock when
  a SpatialData store with something to colour by was, by their manifest names (one per
  window; the widgets find what they show from the layers' records);
* keeps the current slice's physical time in the canvas overlay, and shows the features
  of the polygon under the cursor (napari-ozx's polygon Surfaces) in the status bar;
* in 3D, renders each multiscale layer from the finest level that fits
  (:mod:`napari_ozx.layers.levels`), its coarsest level shown until that one is read
  (:mod:`napari_ozx._refine3d`);
* frames a read of several layers into an empty viewer once its last layer is in (napari
  fits the camera to the first layer added only).

Only when napari's Qt front end is already imported; never imports Qt, never raises.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from napari_ozx._compat import (
    napari_before_slicing,
    napari_displayed_axes,
    napari_max_3d_texture,
    napari_qt_loaded,
)
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.reading import LayerData
from napari_ozx.ngff.model.metadata import TIME_UNITS

if TYPE_CHECKING:
    from napari.utils.events import Event
    from napari.viewer import Viewer
    from napari.window import Window

logger = logging.getLogger(__name__)

__all__ = [
    "CATEGORIES_DOCK_NAME",
    "NAVIGATOR_NAME",
    "SCENE_DOCK_NAME",
    "after_read",
    "apply_3d_levels",
    "frame_when_added",
    "hover_polygons",
    "show_dock",
    "show_physical_time",
    "show_plate_navigator",
    "text_overlay",
    "time_text",
    "warm_3d",
]

PLUGIN_NAME = "napari-ozx"  # name in napari.yaml (as _reader.PLUGIN_NAME)
NAVIGATOR_NAME = "Plate navigator"  # display_name of the plate navigator widget
SCENE_DOCK_NAME = "Scene coordinate system"  # display_name of the scene dock
CATEGORIES_DOCK_NAME = "Categories"  # display_name of the categories dock


def after_read(layers: Sequence[LayerData]) -> None:
    """The docks and overlays the layers just read want (never raises)."""
    if any(_is_plate(ld) for ld in layers):
        show_plate_navigator()
    if any(_is_scene(ld) for ld in layers):
        show_dock(SCENE_DOCK_NAME, lambda src: src.scene_system is not None)
    stores = _spatialdata_scenes(layers)
    if stores:  # a SpatialData store with more than one coordinate system
        show_dock(SCENE_DOCK_NAME, lambda src: src.source in stores)
    if any(_has_categories(ld) for ld in layers):  # genes, a table's columns
        show_dock(CATEGORIES_DOCK_NAME, lambda src: True)
    if any(ld[2] == "surface" for ld in layers):
        hover_polygons()
    if any(_is_lod(ld) for ld in layers):
        keep_lod_on_view()
    if layers:
        show_physical_time()
    if len(layers) > 1:
        frame_when_added(layers)
    warm_first_slices(layers)


# ---------------------------------------------------------------------- remote images


def warm_first_slices(layers: Sequence[LayerData]) -> None:
    """Remote images: fetch what napari's first slices of them will read while napari
    makes their layers (never raises). napari slices a layer as it is added, at the
    viewer's point (0 on every axis in an empty viewer), then moves to the middle step of
    every axis (``Dims._go_to_center_step``) and slices it again; each layer's thumbnail
    is its coarsest level. :meth:`~napari_ozx.ngff.read.browse.Browse.warm` fetches those
    planes of the coarsest level and the other levels' shard indexes there, so each
    first read costs one round trip (its chunks)."""
    from napari_ozx.ngff.read.lazy import source_reader

    seen: set[int] = set()
    for data, kwargs, kind in layers:
        try:
            if kind != "image" or kwargs.get("rgb"):
                continue
            level0 = data[0] if isinstance(data, list | tuple) else data
            hint = getattr(source_reader(level0), "browse", None)
            if hint is None or id(hint[0]) in seen:
                continue
            seen.add(id(hint[0]))
            shape = tuple(level0.shape)
            channel = kwargs.get("channel_axis")
            axes = [k for k in range(len(shape) - 2) if k != channel]
            first = dict.fromkeys(axes, 0)
            middle = {k: (shape[k] - 1) // 2 for k in axes}
            hint[0].warm([first] if first == middle else [first, middle])
        except Exception:  # a hint: napari reads what it needs anyway
            logger.debug("warming the first slices failed", exc_info=True)


# ---------------------------------------------------------------------- framing


def frame_when_added(layers: Sequence[LayerData]) -> None:
    """Fit the current viewer's camera to all of *layers* once napari has added them,
    when they are read into an empty viewer (never raises).

    napari fits the view to the first layer added to an empty viewer only
    (``ViewerModel._on_add_layer``); the rest of a scene, a plate's fields or a
    SpatialData store's elements may lie outside it. So, when the viewer is empty now
    (napari is about to frame this read's first layer), the view is fitted again to
    everything right after napari inserted the last of these layers, and kept fitted
    while the window's layout settles (:func:`_keep_framed`: a dock docked by the read
    narrows the canvas after the layers are in). A viewer that already shows layers keeps
    its view (napari leaves it alone too), and as soon as a layer that is not one of
    this read's is inserted the wait ends without touching the camera. Only when
    napari's Qt front end is already imported (a window exists).
    """
    if not napari_qt_loaded():
        return
    try:
        import napari

        viewer = napari.current_viewer()
        if viewer is None or len(viewer.layers):
            return
        expected = Counter(src for ld in layers for src in _sources(ld))
        if None in expected:  # a layer we cannot recognise when napari adds it
            return
        _frame_on_insert(viewer, expected)
    except Exception:
        logger.warning("napari-ozx: the view will not be fitted to the read", exc_info=True)


def _source(ld: LayerData) -> LayerSource | None:
    """The source of (the first layer napari makes of) *ld*."""
    meta = ld[1].get("metadata")
    return LayerSource.from_metadata(meta[0] if isinstance(meta, list) and meta else meta)


def _sources(ld: LayerData) -> list[LayerSource | None]:
    """The source of every layer napari makes of *ld*: one per channel when it splits a
    channel axis (a list of metadata, one each), else one."""
    meta = ld[1].get("metadata")
    metas = meta if isinstance(meta, list) and meta else [meta]
    return [LayerSource.from_metadata(m) for m in metas]


def _frame_on_insert(viewer: Viewer, expected: Counter[LayerSource | None]) -> None:
    """Frame *viewer*'s layers once they are exactly *expected* (by their sources); stop
    waiting, leaving the camera alone, once it holds any other layer."""
    emitter = viewer.layers.events.inserted

    def on_inserted(_event: Event) -> None:
        present = Counter(LayerSource.of(layer) for layer in viewer.layers)
        if present != expected and not present - expected:
            return  # more of the read's layers to come
        try:
            emitter.disconnect(on_inserted)
        except Exception:  # already gone: nothing to undo
            logger.debug("framing hook already disconnected", exc_info=True)
        if present == expected:
            _keep_framed(viewer)

    # last: after napari's own handler has taken the layer into the dims and extents
    emitter.connect(on_inserted, position="last")


def _camera_state(viewer: Viewer) -> tuple[object, ...]:
    cam = viewer.scene.camera
    return (tuple(cam.center), float(cam.zoom), tuple(cam.angles))


def _keep_framed(viewer: Viewer) -> None:
    """Fit *viewer*'s view to its layers now, and again whenever its canvas changes size
    while the camera is still where this fit left it: a dock docked by the read narrows
    the canvas only once Qt lays the window out, after the layers are in, and napari
    keeps the zoom across a resize. Stops at the user's first move: the camera moved,
    the mouse on the canvas (napari's cursor position), a layer added or removed, 2D /
    3D switched. (napari's emitters call a copy of their callbacks: disconnecting while
    one is being called is safe.)"""
    fitted: list[tuple[object, ...]] = []
    hooks: list[tuple[Any, Callable[..., Any]]] = []

    def fit() -> None:
        try:
            viewer.reset_view()
            fitted[:] = [_camera_state(viewer)]
        except Exception:
            logger.warning("napari-ozx: could not fit the view", exc_info=True)
            stop()

    def on_size(*_: object) -> None:
        if fitted and _camera_state(viewer) == fitted[0]:
            fit()
        else:  # moved since (by the user, or by someone else): theirs now
            stop()

    def stop(*_: object) -> None:
        for emitter, callback in hooks:
            try:
                emitter.disconnect(callback)
            except Exception:  # already gone: nothing to undo
                logger.debug("framing hook already disconnected", exc_info=True)
        hooks.clear()

    fit()
    if not fitted:
        return
    hooks.extend(
        [
            (viewer.canvas.events.size, on_size),
            (viewer.cursor.events.position, stop),  # the mouse moved on the canvas
            (viewer.layers.events.inserted, stop),
            (viewer.layers.events.removed, stop),
            (viewer.dims.events.ndisplay, stop),
        ]
    )
    for emitter, callback in hooks:
        emitter.connect(callback)


# ------------------------------------------------------------------------ time


def time_text(viewer: Viewer) -> str:
    """Where the sliders are in physical time, e.g. ``"t = 7.5 second"``: for every time
    axis (by unit) of a napari-ozx layer that is not displayed, the world coordinate of
    the current slice with the axis label and unit. Empty when there is none."""
    point = tuple(viewer.dims.point)
    displayed = set(viewer.dims.displayed)
    out: dict[int, str] = {}
    for layer in viewer.layers:
        if LayerSource.of(layer) is None:
            continue
        labels = tuple(getattr(layer, "axis_labels", ()))
        units = [str(u) for u in getattr(layer, "units", ())]
        for k, unit in enumerate(units):
            world = len(point) - len(units) + k
            if unit in TIME_UNITS and world >= 0 and world not in displayed and world not in out:
                label = labels[k] if k < len(labels) else "t"
                out[world] = f"{label} = {point[world]:.6g} {unit}"
    return ", ".join(out[i] for i in sorted(out))


def apply_3d_levels(viewer: Viewer) -> None:
    """In 3D, render each napari-ozx multiscale layer from the finest level that fits the
    GPU and the memory budget (:mod:`napari_ozx.layers.levels`), shown coarsest first and
    refined once read off the GUI thread (:mod:`napari_ozx._refine3d`), instead of napari's
    coarsest; back in 2D, give napari its automatic choice again. Never raises."""
    from napari_ozx._refine3d import cancel as cancel_refine
    from napari_ozx._refine3d import refine, refining
    from napari_ozx.layers.levels import VOLUME_COPIES, budget_3d, choose_3d_level
    from napari_ozx.layers.provenance import LEVEL_3D_KEY, LOCKED_3D_KEY

    three_d = viewer.dims.ndisplay == 3
    max_texture = napari_max_3d_texture(2048) if three_d else 2048
    ours = [
        layer
        for layer in list(viewer.layers)
        if LayerSource.of(layer) is not None and getattr(layer, "multiscale", False)
    ]
    budget = budget_3d() // max(1, len(ours))  # shared by the layers shown together
    for layer in ours:
        try:
            if not three_d:
                cancel_refine(layer)
                if layer.metadata.pop(LOCKED_3D_KEY, None) and layer.locked_data_level is not None:
                    layer.locked_data_level = None
                continue
            pinned = layer.metadata.get(LEVEL_3D_KEY)
            displayed = napari_displayed_axes(layer)
            level = (
                int(pinned)
                if isinstance(pinned, int) and not isinstance(pinned, bool)
                else choose_3d_level(
                    layer.level_shapes,
                    displayed,
                    layer.data[0].dtype.itemsize,
                    max_texture,
                    budget,
                    VOLUME_COPIES,
                )
            )
            locked = layer.metadata.get(LOCKED_3D_KEY)
            busy = refining(layer)
            if busy == level or (locked and busy is None and layer.locked_data_level == level):
                continue  # already shown at that level, or being read for it
            if layer.locked_data_level is None or locked:
                refine(viewer, layer, level)  # the coarsest now, *level* once read
        except Exception:
            logger.warning("napari-ozx: 3D level not chosen for %s", layer.name, exc_info=True)


def warm_3d(viewer: Viewer, layers: Sequence[Any]) -> None:
    """Read the coarsest level of each napari-ozx multiscale layer of *layers* as 3D
    shows it, off the GUI thread, so that turning 3D shows it at once
    (:func:`napari_ozx._refine3d.warm`). Never raises."""
    from napari_ozx._refine3d import warm

    for layer in layers:
        if layer is not None and LayerSource.of(layer) is not None:
            warm(viewer, layer)


def text_overlay(viewer: Viewer) -> Any:
    """napari's canvas text overlay (``viewer.canvas.overlays['text']`` since 0.9, before
    that ``viewer.text_overlay``)."""
    overlays = getattr(getattr(viewer, "canvas", None), "overlays", None)
    if overlays is not None and "text" in overlays:
        return overlays["text"]
    return viewer.text_overlay


#: viewers whose time overlay we keep up to date
_TIMED: weakref.WeakSet[Any] = weakref.WeakSet()


def _viewer_once(installed: weakref.WeakSet[Any]) -> tuple[Any, bool]:
    """napari's current viewer (None when there is none) and whether it is new to
    *installed* (it is added then): what a once-per-viewer hook installs on."""
    import napari

    viewer = napari.current_viewer()
    if viewer is None:
        return None, False
    new = viewer not in installed
    installed.add(viewer)
    return viewer, new


def show_physical_time() -> None:
    """Keep two things up to date in the current viewer, installed once per viewer after
    a read (never raises): the physical time of the current slice in the canvas text
    overlay (napari's sliders show indices only), updated whenever a slider moves or
    layers change; and, when the view turns 3D, the level of each multiscale layer
    (:func:`apply_3d_levels`)."""
    if not napari_qt_loaded():  # headless: no viewer, and never import Qt here
        return
    try:
        viewer, new = _viewer_once(_TIMED)
        if not new:
            return
        ref = weakref.ref(viewer)

        def update(*_: object) -> None:
            v = ref()
            if v is None:
                return
            try:
                text = time_text(v)
                overlay = text_overlay(v)
                overlay.text = text
                overlay.visible = bool(text)
            except Exception:  # a viewer being closed
                logger.debug("time overlay not updated", exc_info=True)

        def on_ndisplay(*_: object) -> None:
            v = ref()
            if v is not None:
                update()
                apply_3d_levels(v)

        def on_point() -> None:
            v = ref()
            if v is not None:
                from napari_ozx._refine3d import follow_point

                follow_point(v)

        def on_inserted(event: Event) -> None:
            v = ref()
            if v is not None:
                warm_3d(v, [getattr(event, "value", None)])
            update()

        def on_removed(event: Event) -> None:
            from napari_ozx._refine3d import flush, forget

            forget(getattr(event, "value", None))  # a 3D read in flight stops
            v = ref()
            if v is not None:
                flush(v)  # the other layers' reads, if they waited for this one
            update()

        napari_before_slicing(viewer, on_point)  # a slider move in 3D: the coarsest first
        viewer.dims.events.point.connect(update)
        viewer.dims.events.ndisplay.connect(on_ndisplay)
        viewer.layers.events.inserted.connect(on_inserted)
        viewer.layers.events.removed.connect(on_removed)
        update()
        warm_3d(viewer, list(viewer.layers))
    except Exception:
        logger.warning("napari-ozx: could not show the physical time", exc_info=True)


def _is_plate(layer_data: LayerData) -> bool:
    src = _source(layer_data)
    return src is not None and src.is_plate


def _is_scene(ld: LayerData) -> bool:
    src = _source(ld)
    return src is not None and src.scene_system is not None


def _spatialdata_scenes(layers: Sequence[LayerData]) -> set[str]:
    """The SpatialData stores among *layers* whose elements lie in more than one
    coordinate system (the ``systems`` of their layers' ``SPATIAL_KEY`` records)."""
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    out: set[str] = set()
    for ld in layers:
        meta = ld[1].get("metadata")
        first = meta[0] if isinstance(meta, list) and meta else meta
        rec = first.get(SPATIAL_KEY) if isinstance(first, dict) else None
        if isinstance(rec, dict) and len(rec.get("systems") or ()) > 1:
            out.add(str(rec.get("source")))
    return out


def _is_lod(ld: LayerData) -> bool:
    """A points element shown through level of detail (:mod:`napari_ozx._lod`)."""
    from napari_ozx.layers.spatial.lod import LOD_KEY

    meta = ld[1].get("metadata")
    return isinstance(meta, dict) and LOD_KEY in meta


def keep_lod_on_view() -> None:
    """In the current viewer, keep the level-of-detail points on the view
    (:func:`napari_ozx._lod.install`). Only with napari's Qt front end; never raises."""
    if not napari_qt_loaded():
        return
    try:
        import napari

        from napari_ozx._lod import install

        viewer = napari.current_viewer()
        if viewer is not None:
            install(viewer)
    except Exception:
        logger.warning("napari-ozx: level of detail not installed", exc_info=True)


def _has_categories(ld: LayerData) -> bool:
    """A SpatialData element's layer with something to colour by: points coloured by
    their ``feature_key`` (genes), a table's colours, labels with a table's rows."""
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    meta = ld[1].get("metadata")
    first = meta[0] if isinstance(meta, list) and meta else meta
    if not isinstance(first, dict):
        return False
    rec = first.get(SPATIAL_KEY)
    if not isinstance(rec, dict):
        return False
    from napari_ozx.layers.categories.colouring import CATEGORIES_KEY  # SpatialData only

    if rec.get("colour_by") or CATEGORIES_KEY in first:
        return True
    features = ld[1].get("features")
    return ld[2] == "labels" and features is not None and len(features) > 1


#: viewers whose polygon Surfaces get hover
_HOVERING: weakref.WeakSet[Any] = weakref.WeakSet()


def hover_polygons() -> None:
    """In the current viewer (installed once), every polygon Surface napari-ozx made
    shows the features of the polygon under the cursor in the status bar
    (:func:`napari_ozx.layers.categories.hover.install_hover`), those inserted from now
    on and those already there. Only with napari's Qt front end; never raises."""
    if not napari_qt_loaded():
        return
    try:
        from napari_ozx.layers.categories.hover import install_hover

        viewer, new = _viewer_once(_HOVERING)
        if viewer is None:
            return
        if new:
            viewer.layers.events.inserted.connect(
                lambda event: install_hover(getattr(event, "value", None))
            )
        for layer in viewer.layers:
            install_hover(layer)
    except Exception:
        logger.warning("napari-ozx: polygon hover not installed", exc_info=True)


def show_plate_navigator() -> None:
    """Ask napari to show the plate navigator in the current window, if there is one."""
    show_dock(NAVIGATOR_NAME, lambda src: src.is_plate)


def show_dock(name: str, wanted: Callable[[LayerSource], bool]) -> None:
    """Ask napari to show our dock widget *name* in the current window, if there is one.

    Only when napari's Qt front end is already imported (a window exists): a headless
    read never imports Qt from here. Docking goes through napari's own API by the
    widget's manifest name (one per window); the widget then finds its plates or scenes
    from the layers. On the GUI thread it docks at once (before napari adds the layers);
    from a worker thread it docks when napari inserts a layer *wanted* accepts (napari
    does that on the GUI thread). Never raises.
    """
    if not napari_qt_loaded():
        return
    try:
        import napari

        viewer = napari.current_viewer()
        window = getattr(viewer, "window", None) if viewer is not None else None
        if window is None or not hasattr(window, "add_plugin_dock_widget"):
            return
        if threading.current_thread() is threading.main_thread():
            _dock(window, name)
        else:
            _dock_on_insert(viewer, name, wanted)
    except Exception:
        logger.warning("napari-ozx: could not show the %s", name, exc_info=True)


def _dock(window: Window, name: str = NAVIGATOR_NAME) -> None:
    try:
        window.add_plugin_dock_widget(PLUGIN_NAME, name)
    except Exception:
        logger.warning("napari-ozx: could not show the %s", name, exc_info=True)


def _dock_on_insert(
    viewer: Viewer, name: str = NAVIGATOR_NAME, wanted: Callable[[LayerSource], bool] | None = None
) -> None:
    """Dock when the first wanted layer is inserted (on the GUI thread), once."""
    emitter = viewer.layers.events.inserted
    wanted = wanted or (lambda src: src.is_plate)

    def on_inserted(event: Event) -> None:
        src = LayerSource.of(getattr(event, "value", None))
        if src is None or not wanted(src):
            return
        try:
            emitter.disconnect(on_inserted)
        except Exception:  # already gone: nothing to undo
            logger.debug("%s hook already disconnected", name, exc_info=True)
        _dock(viewer.window, name)

    emitter.connect(on_inserted)
