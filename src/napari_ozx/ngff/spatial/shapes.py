"""SpatialData shapes: circles and polygons, every geometry kept.

Format 0.2+ keeps a GeoParquet file, ``shapes/<name>/shapes.parquet`` (WKB geometry,
decoded by shapely's vectorised ``from_wkb``); format 0.1 ragged arrays (``coords``,
``offset0``.., ``Index``, ``radius``, the geometry type in ``spatialdata_attrs.geos``),
decoded by shapely's ``from_ragged_array``. Circles are Point geometries with a
``radius`` column; polygons are Polygons and MultiPolygons, whose parts are all kept
(:attr:`Polygons.part_of`), holes included (:attr:`Polygons.ring_is_hole`).

Coordinates are given in napari's order (``y``, ``x``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.read.documents import child_names, join_path
from napari_ozx.ngff.spatial.elements import Element
from napari_ozx.ngff.spatial.files import parquet_parts, parquet_schema, read_parquet, require

__all__ = ["Circles", "Polygons", "read_shapes", "shapes_rows"]


@dataclass(frozen=True)
class Circles:
    element: Element
    centres: np.ndarray  #: (n, 2) y, x
    radii: np.ndarray  #: (n,)
    index: np.ndarray  #: each circle's instance id (the GeoDataFrame's index)
    features: dict[str, np.ndarray]  #: every other column

    def __len__(self) -> int:
        return len(self.radii)


@dataclass(frozen=True)
class Polygons:
    """Every ring of every part of every geometry: ``rings[i]`` an ``(m, 2)`` array of
    (y, x) vertices (closing vertex dropped), ``geometry_of[i]`` the row it belongs to,
    ``part_of[i]`` its part (0 for a Polygon), ``ring_is_hole[i]`` an interior ring."""

    element: Element
    vertices: np.ndarray  #: (v, 2) y, x: every ring's vertices, one after another
    ring_offsets: np.ndarray  #: (r + 1,) where each ring starts in :attr:`vertices`
    geometry_of: np.ndarray  #: (r,)
    part_of: np.ndarray  #: (r,)
    ring_is_hole: np.ndarray  #: (r,) bool
    index: np.ndarray  #: each geometry's instance id
    features: dict[str, np.ndarray]  #: one value per geometry
    geometry_types: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.index)

    @property
    def n_rings(self) -> int:
        return len(self.geometry_of)

    def rings(self) -> list[np.ndarray]:
        o = self.ring_offsets
        return [self.vertices[o[i] : o[i + 1]] for i in range(len(o) - 1)]


def _yx(xy: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(xy[:, ::-1], dtype=np.float64)


def _yx_kept(xy: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The rows of *xy* where *keep*, as (y, x), column-major: one gather per column
    (no (x, y) copy to reverse afterwards; each column contiguous for its readers)."""
    idx = np.flatnonzero(keep)
    out = np.empty((len(idx), 2), dtype=np.float64, order="F")
    np.take(np.asarray(xy[:, 1], dtype=np.float64), idx, out=out[:, 0])
    np.take(np.asarray(xy[:, 0], dtype=np.float64), idx, out=out[:, 1])
    return out


def _index_column(schema: Any) -> str | None:
    """The GeoDataFrame's index column (pandas metadata of the parquet file)."""
    meta = schema.metadata or {}
    raw = meta.get(b"pandas")
    if raw is None:
        return None
    try:
        cols = json.loads(raw).get("index_columns", [])
    except ValueError:
        return None
    return cols[0] if cols and isinstance(cols[0], str) else None


def _geometry_column(schema: Any) -> str:
    raw = (schema.metadata or {}).get(b"geo")
    if raw is not None:
        try:
            col = json.loads(raw).get("primary_column")
            if isinstance(col, str):
                return col
        except ValueError:
            pass
    return "geometry"


def _numpy_columns(table: Any) -> dict[str, np.ndarray]:
    pa = require("pyarrow")
    out: dict[str, np.ndarray] = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        values = col.to_numpy(zero_copy_only=False)
        if values.dtype.kind in "USO":
            values = np.asarray(values, dtype=object)
        out[name] = values
    return out


def _geometries(root: Any, element: Element) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """(shapely geometries, index, other columns) of a shapes element, either format."""
    shapely = require("shapely")
    where = f"({root.source}, shapes {element.name!r})"
    version = element.version
    if version == "0.1" or "geos" in element.spatialdata_attrs:
        return _ragged(root, element, where)
    keys = parquet_parts(root, join_path(element.path, "shapes.parquet"))
    if not keys:
        raise MetadataError(f"shapes.parquet is missing {where}")
    schema = parquet_schema(root, keys[0]).schema_arrow
    table = read_parquet(root, keys)
    geom = _geometry_column(schema)
    if geom not in table.column_names:
        raise MetadataError(f"the geometry column {geom!r} is missing {where}")
    wkb = table.column(geom).combine_chunks()
    try:
        geoms = shapely.from_wkb(np.asarray(wkb.to_numpy(zero_copy_only=False), dtype=object))
    except Exception as e:  # shapely's GEOSException: not WKB
        raise MetadataError(f"its geometry is not WKB ({e}) {where}") from None
    index_col = _index_column(schema)
    rest = table.drop_columns([geom])
    cols = _numpy_columns(rest)
    index = cols.pop(index_col) if index_col in cols else np.arange(table.num_rows)
    return geoms, index, cols


def _ragged(
    root: Any, element: Element, where: str
) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """Shapes format 0.1: ``coords`` plus ``offset0``.. arrays, ``Index``, ``radius``."""
    shapely = require("shapely")
    geos = element.spatialdata_attrs.get("geos")
    code = geos.get("type") if isinstance(geos, dict) else None
    if not isinstance(code, int):
        raise MetadataError(f"spatialdata_attrs.geos.type is missing (shapes format 0.1) {where}")
    names = set(child_names(root, element.path))

    def array(name: str) -> np.ndarray:
        (node,) = root.arrays([join_path(element.path, name)])
        return np.asarray(node.array[...])

    if "coords" not in names:
        raise MetadataError(f"the coords array is missing (shapes format 0.1) {where}")
    coords = array("coords")
    offsets = tuple(array(f"offset{i}").astype(np.int64) for i in range(3) if f"offset{i}" in names)
    try:
        geoms = shapely.from_ragged_array(shapely.GeometryType(code), coords, offsets or None)
    except Exception as e:
        raise MetadataError(f"its ragged arrays do not make geometries ({e}) {where}") from None
    index = array("Index") if "Index" in names else np.arange(len(geoms))
    cols: dict[str, np.ndarray] = {}
    if "radius" in names:
        cols["radius"] = array("radius")
    return geoms, index, cols


def read_shapes(root: Any, element: Element) -> Circles | Polygons:
    """A shapes element: :class:`Circles` when every geometry is a Point with a radius,
    else :class:`Polygons` (Polygons and MultiPolygons; other geometry types refused)."""
    shapely = require("shapely")
    geoms, index, cols = _geometries(root, element)
    where = f"({root.source}, shapes {element.name!r})"
    types = shapely.get_type_id(geoms)
    kinds = sorted({shapely.GeometryType(int(t)).name for t in np.unique(types)})
    if len(geoms) and np.all(types == shapely.GeometryType.POINT):
        if "radius" not in cols:
            raise MetadataError(f"points without a radius column are no circles {where}")
        radius = np.asarray(cols.pop("radius"), dtype=np.float64)
        xy = shapely.get_coordinates(geoms)
        return Circles(element, _yx(xy), radius, index, cols)
    allowed = {int(shapely.GeometryType.POLYGON), int(shapely.GeometryType.MULTIPOLYGON)}
    bad = sorted(
        {shapely.GeometryType(int(t)).name for t in np.unique(types)}
        - {shapely.GeometryType(t).name for t in allowed}
    )
    if bad:
        raise MetadataError(f"geometry types {', '.join(bad)} are not circles or polygons {where}")
    return _polygons(element, geoms, index, cols, tuple(kinds))


def _polygons(
    element: Element,
    geoms: Any,
    index: np.ndarray,
    cols: dict[str, np.ndarray],
    kinds: tuple[str, ...],
) -> Polygons:
    """Every ring of every part, through shapely's ``to_ragged_array`` (one pass in C:
    Polygons and MultiPolygons together come back as MultiPolygons)."""
    shapely = require("shapely")
    if not len(geoms):
        empty = np.zeros(0, dtype=np.int64)
        return Polygons(
            element,
            np.zeros((0, 2)),
            np.zeros(1, np.int64),
            empty,
            empty,
            np.zeros(0, bool),
            index,
            cols,
            kinds,
        )
    simple = _simple_polygons(shapely, geoms)
    if simple is not None:  # Polygons without holes (cell boundaries): no ring objects
        gtype, xy, offsets = shapely.GeometryType.POLYGON, *simple
    else:
        gtype, xy, offsets = shapely.to_ragged_array(geoms)
    if gtype == shapely.GeometryType.POLYGON:
        ring_off, part_off = offsets
        geom_off = np.arange(len(part_off), dtype=np.int64)  # one part per geometry
    else:
        ring_off, part_off, geom_off = offsets
    ring_off = np.asarray(ring_off, dtype=np.int64)
    part_off = np.asarray(part_off, dtype=np.int64)
    geom_off = np.asarray(geom_off, dtype=np.int64)
    n_rings = len(ring_off) - 1
    rings_per_part = np.diff(part_off)
    parts_per_geom = np.diff(geom_off)
    ring_part = np.repeat(np.arange(len(rings_per_part)), rings_per_part)
    part_geom = np.repeat(np.arange(len(parts_per_geom)), parts_per_geom)
    part_no = np.arange(len(part_geom)) - np.repeat(geom_off[:-1], parts_per_geom)
    hole = np.ones(n_rings, dtype=bool)
    hole[part_off[:-1][rings_per_part > 0]] = False  # each part's first ring: exterior
    # drop each ring's closing vertex (napari closes polygons itself)
    n_per_ring = np.diff(ring_off)
    keep = np.ones(len(xy), dtype=bool)
    keep[(ring_off[1:] - 1)[n_per_ring > 0]] = False
    new_off = np.r_[0, np.cumsum(np.maximum(n_per_ring - 1, 0))].astype(np.int64)
    return Polygons(
        element,
        _yx_kept(xy, keep),
        new_off,
        part_geom[ring_part],
        part_no[ring_part],
        hole,
        index,
        cols,
        kinds,
    )


def _simple_polygons(shapely: Any, geoms: Any) -> tuple[np.ndarray, tuple[np.ndarray, ...]] | None:
    """``(coordinates, (ring offsets, part offsets))`` as ``to_ragged_array`` gives them
    when every geometry is a non-empty Polygon without holes (one ring each), from the
    coordinates alone (``to_ragged_array`` makes a shapely object of every ring first);
    None otherwise."""
    if not np.all(shapely.get_type_id(geoms) == shapely.GeometryType.POLYGON):
        return None
    if np.any(shapely.get_num_interior_rings(geoms)):
        return None
    counts = shapely.get_num_coordinates(geoms)
    if not np.all(counts > 0):
        return None
    ring_off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ring_off[1:])
    return shapely.get_coordinates(geoms), (ring_off, np.arange(len(counts) + 1))


def shapes_rows(root: Any, element: Element) -> int | None:
    """How many geometries a shapes element holds, from metadata (parquet footer or the
    ``Index`` array's shape); None when it cannot tell."""
    try:
        if element.version == "0.1" or "geos" in element.spatialdata_attrs:
            (docs,) = root.read_docs([join_path(element.path, "Index")])
            return int(docs.document["shape"][0]) if docs is not None else None
        keys = parquet_parts(root, join_path(element.path, "shapes.parquet"))
        return sum(int(parquet_schema(root, k).metadata.num_rows) for k in keys) if keys else None
    except Exception:
        return None
