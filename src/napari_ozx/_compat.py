"""Everything napari-ozx uses that another package does not promise, in one place.

The rest of the package uses public API only: no private name (``_x``) of napari, npe2,
vispy, zarr or dask, as an attribute, an import or a module name, outside this module
(``tests/test_compat.py`` checks it by parsing every module with ``ast``, and checks each
item below against the installed versions, so a release that changes one fails a test
instead of a user's read).

Each use says what it is for, what it was checked against, and what happens when it is
gone:

* ``zarr_sync``: ``zarr.core.sync.sync`` runs a coroutine on zarr's own event loop.
  zarr's async objects (stores, ``AsyncArray``) are bound to that loop, so batched
  metadata reads must run there; zarr has no public equivalent. Checked against zarr
  3.1.6 and 3.4.2.
* ``npe2_reading_plugin``: the plugin npe2 is reading with, found on the call stack
  (``npe2.io_utils._read`` and its ``plugin_name`` argument). npe2 passes a reader
  nothing but the path; this tells "the user picked napari-ozx" from "napari asks every
  reader". Checked against npe2 0.10.0; if npe2 reorganises, it answers None and
  the reader declines as before.
* ``new_dask_view``: a classic ``dask.array.Array`` (subclass) made without
  ``Array.__new__``: its name, chunks and meta set through dask's ``_name`` / ``_chunks``
  properties and ``_meta`` / ``_cached_keys`` slots. napari makes up to three views per
  tile; the public constructor (normalising chunks and meta, annotating a graph layer
  the view does not have yet) costs several times as much as setting the slots, a
  noticeable part of a tile read. Checked against dask 2026.8.0; where those slots or
  properties are not there, the public constructor is used (same array, slower).
* ``dask_query_planning``: whether ``dask.array.Array`` is the query-planning (array
  expression) class, read from dask's own config the way ``dask.array`` reads it. Our
  direct tile path subclasses the classic ``Array``; under query planning levels are
  ``LevelArray`` instead (:func:`napari_ozx.ngff.read.lazy.lazy_array`).
* ``zarr_store_set_open`` / ``zarr_store_check_writable``: our stores subclass
  ``zarr.abc.store.Store``, whose open flag (``_is_open``) and write check
  (``_check_writable``) are its subclass protocol without a public name. Checked
  against zarr 3.1.6 and 3.4.2.
* ``napari_qt_loaded``: whether napari's Qt front end (``napari._qt``) is imported, i.e.
  a window may exist; asked without importing Qt. Checked against napari 0.6 to 0.9.2;
  if napari renames the package, it answers False and the viewer hooks do nothing.
* ``napari_max_3d_texture``: the GPU's largest 3D texture, from
  ``napari._vispy.utils.gl.get_max_texture_sizes``. Checked against napari 0.9.2; when it
  is gone (or there is no GL), the default every OpenGL 3D texture supports.
* ``napari_displayed_axes``: a layer's displayed axes (``layer._slice_input.displayed``,
  the layer's own axes, which differ from the viewer's when the layer has fewer
  dimensions). Checked against napari 0.9.2; when it is gone, the last 2 or 3 of the
  layer's axes (what napari displays by default).
* ``napari_layer_state``: a layer's constructor arguments (``layer._get_state()``), to
  remake a labels layer as editable with everything else kept. Checked against napari
  0.9.2; no fallback (the caller says the layer could not be made editable).
* ``napari_colormap_display_name``: a colormap's display name (``Colormap._display_name``,
  its name as napari's menus show it). Checked against napari 0.9.2; "" when gone.
* ``napari_unproxied``: the object behind napari's ``PublicOnlyProxy`` (its
  ``__wrapped__``: napari hands a plugin's dock a proxy of the viewer, and every layer
  reached through it is a new proxy, so identity and weak references need the layer
  itself). Checked against napari 0.9.2; the object itself when it is no proxy.
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
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
    "napari_colormap_display_name",
    "napari_displayed_axes",
    "napari_layer_state",
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


def napari_displayed_axes(layer: Layer) -> list[int]:
    """The axes of *layer* (its own numbering) napari displays."""
    slice_input = getattr(layer, "_slice_input", None)
    displayed = getattr(slice_input, "displayed", None)
    if displayed is not None:
        return [int(a) for a in displayed]
    ndisplay = int(getattr(slice_input, "ndisplay", 2) or 2)
    return list(range(max(layer.ndim - ndisplay, 0), layer.ndim))


def napari_layer_state(layer: Layer) -> dict[str, Any]:
    """*layer*'s constructor arguments, as napari itself copies a layer."""
    return dict(layer._get_state())


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
