"""Everything napari-ozx uses that another package does not promise, in one place.

The rest of the package uses public API only: no private name (``_x``) of napari, npe2,
vispy, zarr or dask, as an attribute, an import or a module name, outside this module
(``tests/test_compat.py`` checks it with ``ast``, and checks each use here against the
installed versions, so a release that changes one fails a test instead of a user's read).
The uses: zarr's event loop (:func:`zarr_sync`) and its Store's open flag and write check
(:func:`zarr_store_set_open`, :func:`zarr_store_check_writable`); npe2's read loop
(:func:`npe2_reading_plugin`); dask's Array slots for fast views (:func:`new_dask_view`)
and its query-planning switch (:func:`dask_query_planning`); napari's Qt-loaded test,
GPU texture size, layer displayed axes, layer state, colormap display name,
unproxied layers, the hook before slicing and a level lock without reslicing
(``napari_*``). What each is for, the releases it was checked against and what
happens when it is gone: ``docs/design/private-apis.md`` (a new use is added there too).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    import dask.array as da
    from napari.layers import Layer
    from napari.utils.colormaps import Colormap
    from zarr.abc.store import Store
    from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata

__all__ = [
    "CHECKED_AGAINST",
    "dask_query_planning",
    "fast_dask_views",
    "napari_before_slicing",
    "napari_colormap_display_name",
    "napari_displayed_axes",
    "napari_layer_state",
    "napari_lock_level_quietly",
    "napari_max_3d_texture",
    "napari_qt_loaded",
    "new_dask_view",
    "npe2_reading_plugin",
    "zarr_store_check_writable",
    "zarr_store_set_open",
    "zarr_sync",
]

#: the releases each item was checked against (tests/test_compat.py)
CHECKED_AGAINST = {
    "zarr": ("3.1.6", "3.4.2"),
    "dask": ("2026.8.0",),
    "npe2": ("0.10.0",),
    "napari": ("0.9.2",),
}


#: zarr's parsed array metadata (``zarr.Array.metadata``), for annotations only: zarr
#: names its classes in the private ``zarr.core.metadata`` only
ZarrArrayMetadata: TypeAlias = "ArrayV2Metadata | ArrayV3Metadata"

_R = TypeVar("_R")
_View = TypeVar("_View", bound="da.Array")


def zarr_sync(coro: Coroutine[object, object, _R]) -> _R:
    """Run *coro* on zarr's event loop and return its result (thread-safe)."""
    from zarr.core.sync import sync

    return sync(coro)


def zarr_store_set_open(store: Store, is_open: bool) -> None:
    """Mark our ``zarr.abc.store.Store`` subclass *store* open or closed."""
    store._is_open = is_open


def zarr_store_check_writable(store: Store) -> None:
    """zarr's own check that *store* may be written (raises when read-only)."""
    store._check_writable()


def napari_qt_loaded() -> bool:
    """Whether napari's Qt front end is imported (a window may exist); imports nothing."""
    return "napari._qt" in sys.modules


def napari_max_3d_texture(default: int = 2048) -> int:
    """The GPU's largest 3D texture edge, else *default* (no GL, or napari moved it)."""
    try:
        from napari._vispy.utils.gl import get_max_texture_sizes

        return int(get_max_texture_sizes()[1] or default)
    except Exception:  # no GL here: a size every OpenGL 3D texture supports
        return default


def napari_displayed_axes(layer: Layer, ndisplay: int | None = None) -> list[int]:
    """The axes of *layer* (its own numbering) napari displays, or would display with
    *ndisplay* axes (the last of its axis order, as napari picks them)."""
    slice_input = getattr(layer, "_slice_input", None)
    order = getattr(slice_input, "order", None)
    if ndisplay is not None and order is not None:
        return [int(a) for a in tuple(order)[-ndisplay:]]
    displayed = getattr(slice_input, "displayed", None)
    if displayed is not None and ndisplay is None:
        return [int(a) for a in displayed]
    if ndisplay is None:
        ndisplay = int(getattr(slice_input, "ndisplay", 2) or 2)
    return list(range(max(layer.ndim - ndisplay, 0), layer.ndim))


def napari_before_slicing(viewer: Any, callback: Callable[[], None]) -> bool:
    """Call *callback* whenever *viewer* is about to slice its layers (a slider moved, 2D /
    3D switched, a layer refreshed), before napari reads anything. napari calls its own
    event callbacks before any plugin's, so a plugin's ``dims`` callback comes after
    napari's read; this wraps the viewer's layer slicer (private: ``_layer_slicer.submit``)
    instead. False, and nothing done, where napari has no such slicer. *callback* must
    not raise (what it raises is logged and the slicing goes on)."""
    slicer = getattr(viewer, "_layer_slicer", None)
    submit = getattr(slicer, "submit", None)
    if slicer is None or submit is None or not callable(submit):
        return False

    def before(*args: Any, **kwargs: Any) -> Any:
        try:
            callback()
        except Exception:
            logging.getLogger(__name__).warning("napari-ozx: before slicing", exc_info=True)
        return submit(*args, **kwargs)

    slicer.submit = before
    return True


def napari_lock_level_quietly(layer: Layer, level: int) -> None:
    """Lock *layer* on *level* without napari reslicing it now (napari's slicing that
    follows, e.g. of a dims change, reads that level); reslices where napari cannot."""
    block = getattr(layer, "_block_refresh", None)
    if block is None:
        layer.locked_data_level = level
        return
    with block():
        layer.locked_data_level = level


def napari_layer_state(layer: Layer) -> dict[str, Any]:
    """*layer*'s constructor arguments, as napari itself copies a layer."""
    return dict(layer._get_state())


def napari_canvas_size(viewer: Any) -> tuple[float, float]:
    """(height, width) of *viewer*'s canvas in screen pixels: ``viewer.canvas.size``
    since napari 0.9, ``viewer._canvas_size`` before."""
    canvas = getattr(viewer, "canvas", None)
    size = getattr(canvas, "size", None) or viewer._canvas_size
    h, w = tuple(size)[-2:]
    return float(h), float(w)


def napari_points_replace(layer: Any, coords: Any, features: Any, colours: Any) -> bool:
    """Replace every point of the Points *layer* in one go: coordinates, features, face
    colours (one per point), the other per-point values napari's current ones; one data
    event, one refresh. napari's ``data`` setter resizes its per-point arrays through
    Python tuples of every index and ``np.delete`` (about 2 s for 600,000 points); here
    each is set whole. False (nothing changed) when napari's internals differ: the
    caller then uses the public setters."""
    import numpy as np

    face, border = getattr(layer, "_face", None), getattr(layer, "_border", None)
    if face is None or border is None or not hasattr(layer, "_feature_table"):
        return False
    if str(getattr(face, "color_mode", "")) != "direct":
        return False
    try:
        from napari.layers.base._base_constants import ActionType
    except ImportError:
        return False
    n = len(coords)
    size = float(np.asarray(layer.current_size).ravel()[0])
    width = float(np.asarray(layer.current_border_width).ravel()[0])
    rgba = np.asarray(border.current_color, np.float32).reshape(-1)[:4]
    layer.selected_data = set()
    with layer.events.blocker_all(), border.events.blocker_all(), face.events.blocker_all():
        layer._data = np.asarray(coords)
        layer._feature_table.set_values(features, num_data=n)
        face.colors = np.asarray(colours, np.float32).reshape(n, 4)
        border.colors = np.broadcast_to(rgba, (n, 4)).copy()
        layer._shown = np.ones(n, dtype=bool)
        layer._size = np.full(n, size, dtype=np.asarray(layer._size).dtype)
        layer._border_width = np.full(n, width, dtype=np.asarray(layer._border_width).dtype)
        layer._symbol = np.full(n, layer.current_symbol, dtype=object)
    layer._update_dims()
    layer._reset_editable()
    layer.events.data(
        value=layer.data,
        action=ActionType.CHANGED,
        data_indices=(),
        vertex_indices=((),),
    )
    layer.events.features()
    layer.events.face_color()
    layer.refresh()
    return True


def napari_unproxied(obj: _R) -> _R:
    """*obj* itself when napari hands it over as a ``PublicOnlyProxy``."""
    inner = getattr(obj, "__wrapped__", None)
    return obj if inner is None else inner


def napari_colormap_display_name(cm: Colormap) -> str:
    """The name napari's menus show for colormap *cm* ("" when napari has none)."""
    return str(getattr(cm, "_display_name", "") or "")


def npe2_reading_plugin(max_depth: int = 12, skip: int = 2) -> str | None:
    """The ``plugin_name`` npe2's read loop was called with (None: not named, or not
    called from npe2). *skip* frames above this one are the caller's own."""
    frame: FrameType | None
    try:
        frame = sys._getframe(skip)
    except ValueError:  # pragma: no cover - shallow stack
        return None
    for _ in range(max_depth):
        if frame is None:
            return None
        if frame.f_code.co_name == "_read" and frame.f_globals.get("__name__") == "npe2.io_utils":
            name = frame.f_locals.get("plugin_name")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def dask_query_planning() -> bool:
    """Whether ``dask.array.Array`` is the array-expression class (query planning)."""
    import dask.array as da

    return da.Array.__module__.startswith("dask.array._array_expr")


def fast_dask_views() -> bool:
    """Whether :func:`new_dask_view` can skip dask's constructor (the slots and
    properties it sets are there)."""
    import dask.array as da

    slots = set(getattr(da.Array, "__slots__", ()))
    props = all(isinstance(da.Array.__dict__.get(n), property) for n in ("_name", "_chunks"))
    return {"__name", "__chunks", "_cached_keys", "_meta"} <= slots and props


def new_dask_view(
    cls: type[_View], name: str, chunks: tuple[tuple[int, ...], ...], meta: object
) -> _View:
    """An instance of *cls* (a subclass of the classic ``dask.array.Array`` whose graph
    is set later) with exact *chunks* and *meta*, made the fast way where
    :func:`fast_dask_views`, else by dask's public constructor with an empty graph."""
    if _FAST_VIEWS is None:
        _init_views()
    if _FAST_VIEWS:
        obj: Any = object.__new__(cls)
        obj._cached_keys = None
        obj._name = name
        obj._chunks = chunks
        obj._meta = meta
        return obj
    import dask.array as da

    return da.Array.__new__(cls, _EMPTY_GRAPH, name, chunks, meta=meta)


_FAST_VIEWS: bool | None = None
_EMPTY_GRAPH: Any = None


def _init_views() -> None:
    global _FAST_VIEWS, _EMPTY_GRAPH
    from dask.highlevelgraph import HighLevelGraph

    _EMPTY_GRAPH = HighLevelGraph({}, {})
    _FAST_VIEWS = fast_dask_views()
