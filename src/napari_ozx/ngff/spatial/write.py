"""Writing SpatialData elements as spatialdata 0.7.3 / 0.8.0 write them (no napari).

Each function returns an element's keys (store key -> bytes) for one edit of the store:
:func:`points_keys` (``points/<name>/points.parquet/part.0.parquet``, points format 0.2),
:func:`shapes_keys` (``shapes/<name>/shapes.parquet``, GeoParquet 1.1, shapes format
0.3), :func:`labels_keys` (``labels/<name>/``, an OME-Zarr multiscale halved in y and x by
nearest pixel, ``0.5-dev-spatialdata``, raster format 0.3) and :func:`region_table_keys`
(``tables/<name>/``, an AnnData table annotating one element, table format 0.2).
:func:`transformation` writes a matrix as spatialdata's ``identity`` / ``scale`` /
``translation`` / ``affine``; :func:`store_keys` adds what a store needs around new
elements (container groups, a new root, the root's consolidated metadata rebuilt by zarr,
as ``SpatialData.write_element`` does); :func:`check_name` refuses names spatialdata
refuses. Each layout, key by key: ``docs/design/spatialdata-layers.md``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from napari_ozx.errors import OzxError

__all__ = [
    "ELEMENT_NAME_RULE",
    "ROOT_VERSION",
    "check_name",
    "labels_keys",
    "points_keys",
    "region_table_keys",
    "shapes_keys",
    "store_keys",
    "transformation",
]

#: the root group's ``spatialdata_attrs.version`` spatialdata 0.7 / 0.8 write
ROOT_VERSION = "0.2"
POINTS_VERSION = "0.2"
SHAPES_VERSION = "0.3"
RASTER_VERSION = "0.3"
TABLE_VERSION = "0.2"
#: the multiscales version spatialdata 0.7 / 0.8 write into labels and images
MULTISCALES_VERSION = "0.5-dev-spatialdata"
ELEMENT_NAME_RULE = "letters, digits, '_', '-' and '.', not starting with '__'"
#: labels levels are halved until both of their last two sides are at most this
LEVEL_MIN_SIDE = 256
#: the chunk side of labels levels in y and x
LABELS_CHUNK = 1024


def check_name(name: str, what: str = "element name") -> str:
    """*name* when spatialdata accepts it as an element (or table column) name, else
    :class:`OzxError` naming the rule (spatialdata's ``check_valid_name``)."""
    ok = (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not name.startswith("__")
        and all(c.isalnum() or c in "_-." for c in name)
    )
    if not ok:
        raise OzxError(f"{what} {name!r} is not one spatialdata accepts: {ELEMENT_NAME_RULE}")
    return name


def _system(name: str, axes: Sequence[str]) -> dict[str, Any]:
    return {"name": name, "axes": [{"name": a, "type": "space", "unit": "unit"} for a in axes]}


def transformation(matrix: np.ndarray, axes: Sequence[str], system: str) -> dict[str, Any]:
    """spatialdata's JSON of the transformation *matrix* (homogeneous, over *axes* in
    and out, e.g. ``("x", "y")``) to coordinate system *system*: the simplest of
    ``identity``, ``scale``, ``translation`` and ``affine`` (its rows but the last)
    that is exactly *matrix*."""
    m = np.asarray(matrix, dtype=np.float64)
    n = len(axes)
    if m.shape != (n + 1, n + 1):
        raise OzxError(f"a transformation over {n} axes needs a {n + 1}x{n + 1} matrix")
    if not np.all(np.isfinite(m)):
        raise OzxError("the layer's transform is not finite")
    lin, shift = m[:-1, :-1], m[:-1, -1]
    diagonal = np.array_equal(lin, np.diag(np.diag(lin)))
    out: dict[str, Any]
    if np.array_equal(m, np.eye(n + 1)):
        out = {"type": "identity"}
    elif diagonal and not shift.any() and np.array_equal(m[-1], np.eye(n + 1)[-1]):
        out = {"type": "scale", "scale": [float(v) for v in np.diag(lin)]}
    elif np.array_equal(lin, np.eye(n)) and np.array_equal(m[-1], np.eye(n + 1)[-1]):
        out = {"type": "translation", "translation": [float(v) for v in shift]}
    else:
        out = {"type": "affine", "affine": [[float(v) for v in row] for row in m[:-1]]}
    out["input"] = _system("".join(axes), axes)
    out["output"] = _system(system, axes)
    return out


def _group_doc(attributes: Mapping[str, Any]) -> bytes:
    doc = {"attributes": dict(attributes), "zarr_format": 3, "node_type": "group"}
    return json.dumps(doc, indent=2).encode()


def _prefixed(prefix: str, keys: Mapping[str, bytes]) -> dict[str, bytes]:
    return {f"{prefix}/{k}": v for k, v in keys.items()}


# ------------------------------------------------------------------------- points


def _parquet_bytes(table: Any) -> bytes:
    from napari_ozx.ngff.spatial.files import require

    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def points_keys(
    name: str,
    coords: np.ndarray,
    axes: Sequence[str],
    features: Any,
    transform: Mapping[str, Any],
    *,
    feature_key: str | None = None,
    instance_key: str | None = None,
) -> dict[str, bytes]:
    """The keys of points element *name*: *coords* ``(n, len(axes))`` in the order of
    *axes* (``x``, ``y`` (, ``z``)), *features* a pandas DataFrame of ``n`` rows (its
    columns after the coordinates), *transform* from :func:`transformation`."""
    import pandas as pd

    from napari_ozx.ngff.spatial.files import require

    pa = require("pyarrow")
    check_name(name)
    coords = np.asarray(coords, dtype=np.float64)
    if coords.ndim != 2 or coords.shape[1] != len(axes):
        raise OzxError(f"points need {len(axes)} coordinates each ({', '.join(axes)})")
    frame = pd.DataFrame({a: coords[:, i] for i, a in enumerate(axes)})
    if features is not None and len(features.columns):
        if len(features) != len(frame):
            raise OzxError(f"{len(features)} feature rows for {len(frame)} points")
        clash = [c for c in features.columns if c in axes]
        if clash:
            raise OzxError(f"feature column {clash[0]!r} has the name of a coordinate axis")
        for c in features.columns:
            check_name(str(c), "column name")
        frame = pd.concat([frame, features.reset_index(drop=True)], axis=1)
    for key in (feature_key, instance_key):
        if key is not None and key not in frame.columns:
            raise OzxError(f"points have no column {key!r}")
    table = pa.Table.from_pandas(frame, preserve_index=None)
    attrs: dict[str, Any] = {}
    if instance_key is not None:
        attrs["instance_key"] = instance_key
    if feature_key is not None:
        attrs["feature_key"] = feature_key
    attrs["version"] = POINTS_VERSION
    group = {
        "encoding-type": "ngff:points",
        "axes": list(axes),
        "coordinateTransformations": [dict(transform)],
        "spatialdata_attrs": attrs,
    }
    base = f"points/{name}"
    return {
        f"{base}/points.parquet/part.0.parquet": _parquet_bytes(table),
        f"{base}/zarr.json": _group_doc(group),
    }


# ------------------------------------------------------------------------- shapes


def shapes_keys(
    name: str, polygons: Sequence[np.ndarray], transform: Mapping[str, Any]
) -> dict[str, bytes]:
    """The keys of shapes element *name*: one shapely Polygon per ring of *polygons*
    (each ``(k, 2)`` in ``x``, ``y``; at least 3 vertices; its index ``0 .. n-1``), as
    GeoParquet with WKB geometry, as geopandas writes it for spatialdata."""
    from napari_ozx.ngff.spatial.files import require

    pa = require("pyarrow")
    shapely = require("shapely")
    check_name(name)
    rings = []
    for i, ring in enumerate(polygons):
        r = np.asarray(ring, dtype=np.float64)
        if r.ndim != 2 or r.shape[1] != 2 or len(r) < 3:
            raise OzxError(f"shape {i} is not a polygon of 3 or more 2D vertices")
        rings.append(r)
    wkb = [shapely.to_wkb(shapely.Polygon(r), output_dimension=2) for r in rings]
    field = pa.field(
        "geometry",
        pa.binary(),
        metadata={b"ARROW:extension:name": b"geoarrow.wkb", b"ARROW:extension:metadata": b"{}"},
    )
    column: dict[str, Any] = {
        "encoding": "WKB",
        "crs": None,
        "geometry_types": ["Polygon"] if rings else [],
    }
    if rings:  # GeoParquet's bbox is optional: none for no geometry
        allv = np.concatenate(rings)
        column["bbox"] = [*map(float, allv.min(axis=0)), *map(float, allv.max(axis=0))]
    geo = {
        "primary_column": "geometry",
        "columns": {"geometry": column},
        "version": "1.1.0",
        "creator": {"library": "napari-ozx", "version": _version()},
    }
    n = len(rings)
    pandas_meta = {
        "index_columns": [{"kind": "range", "name": None, "start": 0, "stop": n, "step": 1}],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "geometry",
                "field_name": "geometry",
                "pandas_type": "empty",
                "numpy_type": "object",
                "metadata": None,
            }
        ],
        "attributes": {},
        "creator": {"library": "napari-ozx", "version": _version()},
    }
    schema = pa.schema(
        [field],
        metadata={b"pandas": json.dumps(pandas_meta).encode(), b"geo": json.dumps(geo).encode()},
    )
    table = pa.Table.from_arrays([pa.array(list(wkb), type=pa.binary())], schema=schema)
    group = {
        "encoding-type": "ngff:shapes",
        "axes": ["x", "y"],
        "coordinateTransformations": [dict(transform)],
        "spatialdata_attrs": {"version": SHAPES_VERSION},
    }
    base = f"shapes/{name}"
    return {f"{base}/shapes.parquet": _parquet_bytes(table), f"{base}/zarr.json": _group_doc(group)}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("napari-ozx")
    except PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------- labels


def _levels(data: np.ndarray) -> list[np.ndarray]:
    """Level 0 then each level half the last in the last two axes (every second pixel:
    labels keep their ids), until both sides are at most :data:`LEVEL_MIN_SIDE`."""
    out = [data]
    while max(out[-1].shape[-2:]) > LEVEL_MIN_SIDE and min(out[-1].shape[-2:]) > 1:
        out.append(out[-1][..., ::2, ::2])
    return out


def labels_keys(
    name: str, data: np.ndarray, axes: Sequence[str], transform: Mapping[str, Any]
) -> dict[str, bytes]:
    """The keys of labels element *name*: *data* (integers, axes *axes*: ``("y", "x")`` or
    ``("z", "y", "x")``) as a multiscale (module doc), *transform* over *axes*."""
    import zarr

    from napari_ozx.ngff.tables.write import memory_keys

    check_name(name)
    data = np.asarray(data)
    if data.dtype.kind not in "iu":
        raise OzxError(f"labels need integer pixels, not {data.dtype}")
    if data.ndim != len(axes) or tuple(axes) not in (("y", "x"), ("z", "y", "x")):
        raise OzxError("labels need axes (y, x) or (z, y, x)")
    levels = _levels(data)
    datasets = []
    for i, level in enumerate(levels):
        factor = [data.shape[k] / level.shape[k] for k in range(data.ndim)]
        datasets.append(
            {
                "path": f"s{i}",
                "coordinateTransformations": [{"type": "scale", "scale": factor}],
            }
        )
    ome = {
        "version": MULTISCALES_VERSION,
        "multiscales": [
            {
                "datasets": datasets,
                "name": name,
                "axes": [{"name": a, "type": "space"} for a in axes],
                "coordinateTransformations": [dict(transform)],
            }
        ],
        "image-label": {"version": "0.5"},
    }

    def fill(store: Any) -> None:
        g = zarr.create_group(
            store,
            zarr_format=3,
            attributes={"ome": ome, "spatialdata_attrs": {"version": RASTER_VERSION}},
        )
        for i, level in enumerate(levels):
            chunks = tuple(
                min(max(s, 1), LABELS_CHUNK) if k >= level.ndim - 2 else 1
                for k, s in enumerate(level.shape)
            )
            arr = g.create_array(
                f"s{i}",
                shape=level.shape,
                dtype=level.dtype,
                chunks=chunks,
                fill_value=0,
                dimension_names=tuple(axes),
            )
            arr[...] = level

    return _prefixed(f"labels/{name}", memory_keys(fill))


# ------------------------------------------------------------------------- tables


def region_table_keys(
    name: str,
    region: str,
    instance_key: str,
    instance_ids: np.ndarray,
    features: Any,
    region_key: str = "region",
) -> dict[str, bytes]:
    """The keys of table *name* annotating element *region*: one row per instance id
    (``obs``: *region_key* (categorical, the element's name), *instance_key* (the ids),
    then the columns of *features*, a pandas DataFrame of as many rows)."""
    import pandas as pd

    from napari_ozx.ngff.tables.write import anndata_obs_keys

    check_name(name, "table name")
    ids = np.asarray(instance_ids)
    if ids.dtype.kind not in "iu":
        raise OzxError("a table's instance ids are integers")
    cols = [str(c) for c in features.columns] if features is not None else []
    for c in cols:
        check_name(c, "column name")
    lowered = [c.lower() for c in [region_key, instance_key, *cols]]
    dup = next((c for c in lowered if lowered.count(c) > 1), None)
    if dup is not None:
        raise OzxError(f"column name {dup!r} twice (spatialdata compares them without case)")
    obs: dict[str, Any] = {
        region_key: pd.Series(pd.Categorical([region] * len(ids), categories=[region])),
        instance_key: ids.astype(np.int64),
    }
    if features is not None:
        if len(features) != len(ids):
            raise OzxError(f"{len(features)} feature rows for {len(ids)} instances")
        for c in features.columns:
            obs[str(c)] = features[c].reset_index(drop=True)
    sd = {"region": region, "region_key": region_key, "instance_key": instance_key}
    attributes = {"spatialdata-encoding-type": "ngff:regions_table", **sd, "version": TABLE_VERSION}
    keys = anndata_obs_keys(
        [str(i) for i in range(len(ids))],
        obs,
        uns={"spatialdata_attrs": sd},
        attributes=attributes,
    )
    return _prefixed(f"tables/{name}", keys)


# ------------------------------------------------------------------------- the store


def new_root_document() -> bytes:
    """The root group of a new store: ``spatialdata_attrs.version``."""
    return _group_doc({"spatialdata_attrs": {"version": ROOT_VERSION}})


def store_keys(
    staged: Mapping[str, bytes],
    existing: Callable[[str], bytes | None],
    local_root: str | None,
    removed: Sequence[str] = (),
) -> dict[str, bytes]:
    """What the store needs beside the element keys *staged*: each container group
    (``points``, ``shapes``, ``labels``, ``tables``) that is missing, ``labels``' list
    of names, the root of a new store (*local_root* ``None`` or an empty directory),
    and the root's consolidated metadata when the store has it (or is new), rebuilt by
    zarr from every node of the store as it will be: the existing ones (walked at
    *local_root*, except those under *removed* prefixes) and the staged ones.
    *existing(key)* gives a key's current bytes (``None``: missing)."""
    out: dict[str, bytes] = {}
    root_raw = existing("zarr.json")
    new_store = root_raw is None
    root_doc = json.loads(root_raw) if root_raw is not None else json.loads(new_root_document())
    if root_doc.get("zarr_format") != 3:
        raise OzxError("not a Zarr v3 SpatialData store")
    containers = {k.split("/", 1)[0] for k in staged if "/" in k}
    for c in sorted(containers):
        key = f"{c}/zarr.json"
        raw = existing(key)
        attrs = json.loads(raw).get("attributes", {}) if raw is not None else {}
        if c == "labels":
            names = [k.split("/")[1] for k in staged if k.startswith("labels/")]
            ome = dict(attrs.get("ome") or {})
            listed = [n for n in ome.get("labels", []) if isinstance(n, str)]
            listed += [n for n in dict.fromkeys(names) if n not in listed]
            ome["labels"] = listed
            attrs = {**attrs, "ome": ome}
            out[key] = _group_doc(attrs)
        elif raw is None:
            out[key] = _group_doc({})
    if not new_store and "consolidated_metadata" not in root_doc:
        return out  # spatialdata consolidates only a store that had it
    docs: dict[str, bytes] = {}
    if local_root is not None and not new_store:
        docs.update(_node_documents(local_root))
    for prefix in removed:
        docs = {k: v for k, v in docs.items() if not k.startswith(f"{prefix}/")}
    docs.update({k: v for k, v in staged.items() if k.rsplit("/", 1)[-1] == "zarr.json"})
    docs.update(out)
    root_doc.pop("consolidated_metadata", None)
    docs["zarr.json"] = json.dumps(root_doc).encode()
    out["zarr.json"] = _consolidated(docs)
    return out


def _node_documents(local_root: str) -> dict[str, bytes]:
    """Every ``zarr.json`` of the Zarr hierarchy at *local_root* (groups walked,
    arrays' chunks and parquet files not), by key."""
    out: dict[str, bytes] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        full = os.path.join(local_root, rel)
        doc = os.path.join(full, "zarr.json")
        if not os.path.isfile(doc):
            continue
        with open(doc, "rb") as f:
            raw = f.read()
        out[f"{rel}/zarr.json" if rel else "zarr.json"] = raw
        try:
            node_type = json.loads(raw).get("node_type")
        except ValueError:
            continue
        if node_type != "group":
            continue
        for entry in sorted(os.listdir(full)):
            if entry != "zarr.json" and os.path.isdir(os.path.join(full, entry)):
                stack.append(f"{rel}/{entry}" if rel else entry)
    return out


def _consolidated(docs: Mapping[str, bytes]) -> bytes:
    """The root document with every node of *docs* consolidated in it, by
    ``zarr.consolidate_metadata`` over an in-memory copy of the documents."""
    import zarr

    from napari_ozx.ngff.tables.write import memory_keys, put_keys

    def fill(store: Any) -> None:
        put_keys(store, docs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nodes that are not Zarr (parquet files)
            zarr.consolidate_metadata(store)

    return memory_keys(fill)["zarr.json"]
