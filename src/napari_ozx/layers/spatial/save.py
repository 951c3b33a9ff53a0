"""Save a napari Shapes, Points or Labels layer into a SpatialData store.

:func:`save_to_spatialdata` maps the layer to one element (encodings:
:mod:`napari_ozx.ngff.spatial.write`) and writes it in one
:class:`~napari_ozx.layers.transaction.EditTransaction`, all or nothing: Shapes -> shapes
(polygons, rectangles, ellipses as :data:`ELLIPSE_VERTICES`-gons; lines and paths
refused), Points -> points (``features`` as columns), Labels -> a multiscale labels
element; a Shapes or Labels layer's ``features`` -> the table ``<name>_table``. The
element's transformation to the coordinate system is the layer's data-to-world transform,
so spatialdata places it where napari draws it; the default system is the one the store's
images are shown in (:func:`default_system`), else ``global``. Nothing else in the store
changes but the containers' documents and the root's consolidated metadata. The mapping in
full: ``docs/design/spatialdata-layers.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from napari_ozx.errors import OzxError

__all__ = [
    "ELLIPSE_VERTICES",
    "ElementExistsError",
    "SpatialDataSaveError",
    "default_name",
    "default_system",
    "layer_kind",
    "save_to_spatialdata",
    "store_systems",
]

#: how many vertices the polygon of a napari ellipse has
ELLIPSE_VERTICES = 64
#: the table columns that name a row's element and instance
REGION_KEY = "region"
INSTANCE_KEY = "instance_id"


class SpatialDataSaveError(OzxError, ValueError):
    """A layer that cannot be saved into a SpatialData store.

    Parameters
    ----------
    reason : str
        Why, said first in the message (:attr:`reason`).
    store : str, default ""
        The store.
    """

    def __init__(self, reason: str, store: str = "") -> None:
        self.reason = reason
        self.store = store
        super().__init__(f"{reason} ({store})" if store else reason)


class ElementExistsError(SpatialDataSaveError):
    """The store has an element (or table) of that name and ``overwrite`` is false."""


def _fail(reason: str, store: str, cls: type[SpatialDataSaveError] = SpatialDataSaveError) -> Any:
    raise cls(reason, store)


def _target(store: str | os.PathLike[str]) -> str:
    text = os.fspath(store)
    if "://" in text:
        _fail("saving into a SpatialData store works on a local directory only", text)
    if text.lower().rstrip("/\\").endswith(".ozx") or (os.path.isfile(text) and _is_zip(text)):
        _fail(
            "a zipped store (.ozx) cannot take a SpatialData element: spatialdata does not "
            "read zip stores; choose a .zarr directory",
            text,
        )
    if os.path.exists(text) and not os.path.isdir(text):
        _fail("not a directory", text)
    return os.path.abspath(text)


def _is_zip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def _root_state(path: str) -> dict[str, Any] | None:
    """The root group's document of the store at *path*; ``None`` for a new store (a
    missing or empty directory). Refuses what is not a Zarr v3 SpatialData store."""
    import json

    if not os.path.isdir(path) or not os.listdir(path):
        return None
    doc = os.path.join(path, "zarr.json")
    if not os.path.isfile(doc):
        if os.path.isfile(os.path.join(path, ".zgroup")):
            _fail(
                "a Zarr v2 SpatialData store (spatialdata before 0.3) cannot take new "
                "elements here; rewrite it with a current spatialdata first",
                path,
            )
        _fail("not a SpatialData store (no zarr.json at its root)", path)
    with open(doc, "rb") as f:
        try:
            root = json.loads(f.read())
        except ValueError as e:
            _fail(f"its zarr.json is not JSON: {e}", path)
    attrs = root.get("attributes") if isinstance(root, Mapping) else None
    if not isinstance(attrs, Mapping) or not isinstance(attrs.get("spatialdata_attrs"), Mapping):
        _fail("not a SpatialData store (no spatialdata_attrs in its root attributes)", path)
    return dict(root)


def default_system(store: str | os.PathLike[str]) -> str:
    """The coordinate system a new element of *store* is placed in: the one napari-ozx
    shows the store's images and labels in (their first system), else ``global``."""
    return store_systems(store)[0]


def store_systems(store: str | os.PathLike[str]) -> list[str]:
    """The coordinate systems an element saved into *store* can be placed in: the
    default (:func:`default_system`) first, then every other of the store's; ``global``
    alone for a store that does not exist yet."""
    from napari_ozx.layers.spatial.store import spatialdata_systems
    from napari_ozx.ngff.read.open import open_ome_zarr

    path = _target(store)
    if _root_state(path) is None:
        return ["global"]
    with open_ome_zarr(path) as root:
        return spatialdata_systems(root)


def _existing(path: str) -> dict[str, str]:
    """Element name -> its container, for every element of the store at *path*."""
    out: dict[str, str] = {}
    for kind in ("images", "labels", "points", "shapes", "tables"):
        d = os.path.join(path, kind)
        if not os.path.isdir(d):
            continue
        for n in os.listdir(d):
            if os.path.isfile(os.path.join(d, n, "zarr.json")):
                out[n] = kind
    return out


def _world_matrix(layer: Any) -> np.ndarray:
    """The homogeneous data-to-world matrix of *layer* (napari's axis order)."""
    from napari.utils.transforms import Affine

    n = layer.ndim
    d2p = Affine(
        scale=layer.scale, translate=layer.translate, rotate=layer.rotate, shear=layer.shear, ndim=n
    )
    full = np.asarray(layer.affine.affine_matrix, dtype=float) @ d2p.affine_matrix
    return np.asarray(full, dtype=float)


def _reordered(m: np.ndarray, order: list[int]) -> np.ndarray:
    """*m* (homogeneous) with its axes taken in *order* (input and output)."""
    idx = [*order, m.shape[0] - 1]
    return m[np.ix_(idx, idx)]


def layer_kind(layer: Any) -> str | None:
    """The element kind a layer becomes (``"shapes"``, ``"points"``, ``"labels"``), or
    None for a layer a SpatialData store does not take."""
    from napari.layers import Labels, Points, Shapes

    for cls, kind in ((Shapes, "shapes"), (Points, "points"), (Labels, "labels")):
        if isinstance(layer, cls):
            return kind
    return None


def default_name(layer: Any) -> str:
    """The layer's name as an element name (characters spatialdata refuses become ``_``)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(layer.name)).lstrip("_") or "layer"
    return name if name not in (".", "..") else "layer"


def _ellipse(corners: np.ndarray) -> np.ndarray:
    """The polygon of :data:`ELLIPSE_VERTICES` vertices of the ellipse napari stores by
    the four corners of its bounding box (in order around it)."""
    c = corners.mean(axis=0)
    u = (corners[1] + corners[2]) / 2 - c
    v = (corners[2] + corners[3]) / 2 - c
    t = np.linspace(0.0, 2 * np.pi, ELLIPSE_VERTICES, endpoint=False)
    return c + np.cos(t)[:, None] * u + np.sin(t)[:, None] * v


def _features(layer: Any, drop: tuple[str, ...] = ()) -> Any:
    feats = getattr(layer, "features", None)
    if feats is None or not len(feats.columns):
        return None
    keep = [c for c in feats.columns if c not in drop]
    return feats[keep] if keep else None


def _shapes_keys(layer: Any, name: str, system: str, store: str) -> dict[str, bytes]:
    from napari_ozx.ngff.spatial.write import shapes_keys, transformation

    if layer.ndim != 2:
        _fail(f"a {layer.ndim}D Shapes layer: spatialdata shapes are 2D", store)
    types = list(layer.shape_type)
    if not types:
        _fail(f"Shapes layer {layer.name!r} has no shapes (spatialdata reads none empty)", store)
    bad = [i for i, t in enumerate(types) if t in ("line", "path")]
    if bad:
        which = ", ".join(str(i) for i in bad[:5]) + (" ..." if len(bad) > 5 else "")
        _fail(
            f"Shapes layer {layer.name!r} has lines or paths (shapes {which}): spatialdata "
            f"shapes hold polygons and circles only; delete them or make them polygons",
            store,
        )
    rings = []
    for data, t in zip(layer.data, types, strict=True):
        yx = np.asarray(data, dtype=np.float64)
        if t == "ellipse":
            yx = _ellipse(yx)
        rings.append(yx[:, ::-1])  # napari (y, x) -> spatialdata (x, y)
    m = _reordered(_world_matrix(layer), [1, 0])
    keys = shapes_keys(name, rings, transformation(m, ("x", "y"), system))
    feats = _features(layer, drop=(INSTANCE_KEY, "part", "hole"))
    if feats is not None:
        keys.update(_table_keys(name, np.arange(len(rings)), feats))
    return keys


def _table_keys(name: str, ids: np.ndarray, feats: Any) -> dict[str, bytes]:
    from napari_ozx.ngff.spatial.write import region_table_keys

    return region_table_keys(f"{name}_table", name, INSTANCE_KEY, ids, feats, REGION_KEY)


def _points_keys(layer: Any, name: str, system: str, store: str) -> dict[str, bytes]:
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY
    from napari_ozx.ngff.spatial.write import points_keys, transformation

    n = layer.ndim
    if n not in (2, 3):
        _fail(f"a {n}D Points layer: spatialdata points are 2D or 3D", store)
    axes = ("x", "y") if n == 2 else ("x", "y", "z")
    order = [1, 0] if n == 2 else [2, 1, 0]
    coords = np.asarray(layer.data, dtype=np.float64)[:, order]
    m = _reordered(_world_matrix(layer), order)
    feats = _features(layer)
    rec = layer.metadata.get(SPATIAL_KEY) if isinstance(layer.metadata, Mapping) else None
    key = rec.get("colour_by") if isinstance(rec, Mapping) else None
    feature_key = key if feats is not None and key in feats.columns else None
    return points_keys(
        name, coords, axes, feats, transformation(m, axes, system), feature_key=feature_key
    )


def _labels_keys(layer: Any, name: str, system: str, store: str) -> dict[str, bytes]:
    from napari_ozx.ngff.spatial.write import labels_keys, transformation

    data = layer.data[0] if layer.multiscale else layer.data
    n = len(data.shape)
    if n not in (2, 3):
        _fail(f"a {n}D Labels layer: spatialdata labels are 2D or 3D", store)
    axes = ("y", "x") if n == 2 else ("z", "y", "x")
    pixels = np.asarray(data)
    keys = labels_keys(name, pixels, axes, transformation(_world_matrix(layer), axes, system))
    feats = _features(layer, drop=("index",))
    if feats is not None:
        all_feats = layer.features
        if "index" in all_feats.columns:
            ids = np.asarray(all_feats["index"])
        else:
            ids = np.arange(len(all_feats))
        if ids.dtype.kind not in "iu":
            _fail("the Labels layer's 'index' feature (the label values) is not integers", store)
        keys.update(_table_keys(name, ids, feats))
    return keys


def save_to_spatialdata(
    layer: Any,
    store: str | os.PathLike[str],
    name: str | None = None,
    *,
    coordinate_system: str | None = None,
    overwrite: bool = False,
) -> str:
    """Save *layer* as an element of the SpatialData store *store*, all or nothing.

    Every other file of the store stays as it is.

    Parameters
    ----------
    layer : napari.layers.Shapes, Points or Labels
        The layer; a Shapes or Labels layer's ``features`` also become the table
        ``<name>_table``.
    store : str or os.PathLike
        A SpatialData ``.zarr`` directory (created when missing).
    name : str, optional
        The element's name (default: the layer's name, characters spatialdata refuses
        become ``_``).
    coordinate_system : str, optional
        The system the element is placed in (default: the one the store's images are
        shown in, else ``global``).
    overwrite : bool, default False
        Replace an element (or table) of that name.

    Returns
    -------
    str
        The element's path in the store: ``"shapes/<name>"``, ``"points/<name>"`` or
        ``"labels/<name>"``.

    Raises
    ------
    ElementExistsError
        The element (or table) exists and *overwrite* is false; nothing changes.
    SpatialDataSaveError
        The layer cannot be saved (an :class:`~napari_ozx.errors.OzxError` saying why).
    """
    from napari_ozx.layers.transaction import EditTransaction
    from napari_ozx.ngff.spatial.write import check_name, store_keys

    path = _target(store)
    kind = layer_kind(layer)
    if kind is None:
        _fail(
            f"a {type(layer).__name__} layer: only Shapes, Points and Labels layers go into "
            f"a SpatialData store",
            path,
        )
    try:
        name = check_name(name if name is not None else default_name(layer))
        system = check_name(coordinate_system, "coordinate system") if coordinate_system else None
    except OzxError as e:
        _fail(str(e), path)
    assert kind is not None and name is not None
    root = _root_state(path)
    system = system or (default_system(path) if root is not None else "global")
    existing = _existing(path) if root is not None else {}
    table = f"{name}_table"
    removed: list[str] = []
    have = existing.get(name)
    if have is not None and have != kind:
        _fail(
            f"the store has a {have} element named {name!r} (spatialdata names are unique "
            f"across kinds); choose another name",
            path,
            ElementExistsError,
        )
    if have == kind:
        if not overwrite:
            _fail(
                f"{kind}/{name} exists; pass overwrite=True to replace it", path, ElementExistsError
            )
        removed.append(f"{kind}/{name}")
    build = {"shapes": _shapes_keys, "points": _points_keys, "labels": _labels_keys}[kind]
    try:
        keys = build(layer, name, system, path)
    except SpatialDataSaveError:
        raise
    except OzxError as e:
        _fail(str(e), path)
    writes_table = any(k.startswith(f"tables/{table}/") for k in keys)
    if existing.get(table) is not None:
        if existing[table] != "tables":
            _fail(f"the store has a {existing[table]} element named {table!r}", path)
        if writes_table and not overwrite:
            _fail(f"tables/{table} exists; pass overwrite=True", path, ElementExistsError)
        if overwrite and (writes_table or _annotates(path, table, name)):
            removed.append(f"tables/{table}")
    created = not os.path.isdir(path)
    if created:  # the transaction edits a folder that exists: an empty one, removed on failure
        os.makedirs(path)
    try:
        with EditTransaction(Path(path), action=f"saving {kind} {name!r} into", expect=None) as tx:
            for prefix in removed:
                tx.delete_prefix(prefix)
            keys.update(store_keys(keys, tx.get, path if root is not None else None, removed))
            for key in sorted(keys):
                tx.put(key, keys[key])
            tx.commit()
    except BaseException:
        if created and os.path.isdir(path) and not os.listdir(path):
            os.rmdir(path)
        raise
    return f"{kind}/{name}"


def _annotates(path: str, table: str, element: str) -> bool:
    """Whether table *table* of the store at *path* annotates *element* (only)."""
    import json

    try:
        with open(os.path.join(path, "tables", table, "zarr.json"), "rb") as f:
            attrs = json.loads(f.read()).get("attributes", {})
    except (OSError, ValueError):
        return False
    region = attrs.get("region")
    return region == element or region == [element]
