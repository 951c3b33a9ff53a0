"""A spatial index of a large points element: its points sorted by the tile of a grid.

Built at open, held in memory, nothing written anywhere (:func:`build_index`). The
parquet files are read one file and one column at a time with pyarrow (no pandas):
``y`` and ``x`` as float32, each other column as numpy (categories and text as codes,
integers narrowed when every value fits, ``z`` as float32); then every column is put in
tile order (one stable radix sort of 16-bit tile keys), so a rectangle's points are one
slice per row of tiles (:meth:`PointsIndex.query`). ``z`` is a feature: a 2D view draws
every point of a rectangle whatever its z. About 21 bytes per point for Xenium's
columns (x, y, z, gene, cell id, quality value): 840 MiB for 40,000,000 points.
:meth:`PointsIndex.density` bins the points (or some categories') into pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.spatial.elements import Element

__all__ = ["PointsIndex", "build_index", "plane_extent"]

#: at most this many tiles per side (their keys fit 16 bits: numpy's radix sort)
MAX_TILES_SIDE = 256
#: about this many points per tile
POINTS_PER_TILE = 512


@dataclass
class PointsIndex:
    """The points of an element in tile order (see the module)."""

    element: Element
    y: np.ndarray  #: float32, tile order
    x: np.ndarray  #: float32, tile order
    origin: tuple[float, float]  #: (y, x) of the grid's corner
    tile: tuple[float, float]  #: (height, width) of a tile
    grid: tuple[int, int]  #: tiles (rows, columns)
    offsets: np.ndarray  #: int64, rows * columns + 1: tile k holds [offsets[k], offsets[k+1])
    columns: dict[str, np.ndarray] = field(default_factory=dict)  #: features, tile order
    categories: dict[str, list[str]] = field(default_factory=dict)  #: column -> its values
    feature_key: str | None = None
    extent: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  #: y0, x0, y1, x1

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def nbytes(self) -> int:
        return int(
            self.y.nbytes
            + self.x.nbytes
            + self.offsets.nbytes
            + sum(c.nbytes for c in self.columns.values())
        )

    def _tile_range(self, lo: float, hi: float, axis: int) -> tuple[int, int]:
        n = self.grid[axis]
        a = int(np.floor((lo - self.origin[axis]) / self.tile[axis]))
        b = int(np.floor((hi - self.origin[axis]) / self.tile[axis]))
        return max(a, 0), min(b, n - 1)

    def candidates(self, y0: float, x0: float, y1: float, x1: float) -> list[tuple[int, int]]:
        """The slices (start, stop) of the tiles that meet the rectangle, one per row."""
        r0, r1 = self._tile_range(y0, y1, 0)
        c0, c1 = self._tile_range(x0, x1, 1)
        if r0 > r1 or c0 > c1:
            return []
        cols = self.grid[1]
        out = []
        for r in range(r0, r1 + 1):
            a, b = int(self.offsets[r * cols + c0]), int(self.offsets[r * cols + c1 + 1])
            if b > a:
                out.append((a, b))
        return out

    def estimate(self, y0: float, x0: float, y1: float, x1: float) -> int:
        """How many points the tiles that meet the rectangle hold (at least its points)."""
        return sum(b - a for a, b in self.candidates(y0, x0, y1, x1))

    def query(
        self,
        y0: float,
        x0: float,
        y1: float,
        x1: float,
        keep: tuple[str, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The positions (int64, ascending) of the points with ``y0 <= y <= y1`` and
        ``x0 <= x <= x1``; with *keep* ``(column, mask over its categories)``, only
        those whose category the mask keeps."""
        parts = []
        for a, b in self.candidates(y0, x0, y1, x1):
            y, x = self.y[a:b], self.x[a:b]
            inside = (y >= y0) & (y <= y1) & (x >= x0) & (x <= x1)
            if keep is not None:
                inside &= _kept(self.columns[keep[0]][a:b], keep[1])
            parts.append(np.flatnonzero(inside) + a)
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def category_counts(self, column: str) -> np.ndarray:
        """The points of each category of *column* (the whole element)."""
        codes = self.columns[column]
        n = len(self.categories[column])
        return np.bincount(codes[codes >= 0].astype(np.intp), minlength=n)[:n]

    def density(
        self,
        pixel: float,
        keep: tuple[str, np.ndarray] | None = None,
        extent: tuple[float, float, float, float] | None = None,
        chunk: int = 4_000_000,
    ) -> np.ndarray:
        """Points per pixel ((rows, columns) float32) of a grid of *pixel* square pixels
        from the corner of *extent* (default: the points'), over it (a point outside
        counts in the nearest pixel); only the kept categories' with *keep*."""
        y0, x0, y1, x1 = self.extent if extent is None else extent
        h = max(1, int(np.ceil((y1 - y0) / pixel)))
        w = max(1, int(np.ceil((x1 - x0) / pixel)))
        counts = np.zeros(h * w, np.int64)
        for s in range(0, len(self), chunk):
            y, x = self.y[s : s + chunk], self.x[s : s + chunk]
            py = np.clip(((y - y0) / pixel).astype(np.intp), 0, h - 1)
            px = np.clip(((x - x0) / pixel).astype(np.intp), 0, w - 1)
            flat = py * w + px
            if keep is not None:
                flat = flat[_kept(self.columns[keep[0]][s : s + chunk], keep[1])]
            counts += np.bincount(flat, minlength=h * w)
        return counts.reshape(h, w).astype(np.float32)


def plane_extent(root: Any, element: Element) -> tuple[float, float, float, float] | None:
    """(y0, x0, y1, x1) of the points *element* from its parquet files' statistics (the
    footers only), None when a file has none."""
    from napari_ozx.ngff.spatial.files import parquet_schema
    from napari_ozx.ngff.spatial.points import points_keys

    lo = {"y": np.inf, "x": np.inf}
    hi = {"y": -np.inf, "x": -np.inf}
    try:
        for key in points_keys(root, element):
            f = parquet_schema(root, key)
            names = f.schema_arrow.names
            for g in range(f.metadata.num_row_groups):
                rg = f.metadata.row_group(g)
                if rg.num_rows == 0:
                    continue
                for a in ("y", "x"):
                    st = rg.column(names.index(a)).statistics
                    if st is None or not st.has_min_max:
                        return None
                    lo[a], hi[a] = min(lo[a], float(st.min)), max(hi[a], float(st.max))
    except (ValueError, OSError, MetadataError):
        return None
    if not all(np.isfinite(v) for v in (*lo.values(), *hi.values())):
        return None
    # as float32 holds them (the index's coordinates)
    f32 = [float(np.float32(v)) for v in (lo["y"], lo["x"], hi["y"], hi["x"])]
    return f32[0], f32[1], f32[2], f32[3]


def _kept(codes: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Which of *codes* (-1: none) the category *mask* keeps (a code -1 never)."""
    table = np.append(mask.astype(bool), False)
    return table[codes.astype(np.intp)]  # -1 takes the appended False


def _column(table: Any, name: str) -> np.ndarray:
    """One column of an arrow table as numpy (chunks joined)."""
    col = table.column(name)
    chunks = [c.to_numpy(zero_copy_only=False) for c in col.chunks]
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integers in the smallest of int32 / int64 that holds them all; floats of 64 bits
    kept (a value is never changed)."""
    if values.dtype.kind in "iu" and values.dtype.itemsize > 4 and len(values):
        lo, hi = values.min(), values.max()
        if lo >= np.iinfo(np.int32).min and hi <= np.iinfo(np.int32).max:
            return values.astype(np.int32)
    return values


def _codes_dtype(n: int) -> type[np.signedinteger[Any]]:
    return np.int16 if n < 2**15 else np.int32


def build_index(root: Any, element: Element, tiles: tuple[int, int] | None = None) -> PointsIndex:
    """Read the points *element* of the store *root* into a :class:`PointsIndex` (see
    the module). *tiles*: the grid (rows, columns), else about :data:`POINTS_PER_TILE`
    points per tile, at most :data:`MAX_TILES_SIDE` a side."""
    from napari_ozx.ngff.spatial.files import (
        parquet_schema,
        read_parquet,
        release_unused,
        require,
    )
    from napari_ozx.ngff.spatial.points import points_keys, unnamed_index_columns

    pa = require("pyarrow")
    where = f"({root.source}, points {element.name!r})"
    keys = points_keys(root, element)
    if not keys:
        raise MetadataError(f"points.parquet is missing {where}")
    files = [parquet_schema(root, k) for k in keys]
    schema = files[0].schema_arrow
    sizes = [int(f.metadata.num_rows) for f in files]
    n = sum(sizes)
    if "x" not in schema.names or "y" not in schema.names:
        raise MetadataError(f"the coordinate columns x, y are missing {where}")
    # the plane's coordinates, as float32, one file at a time
    y = np.empty(n, np.float32)
    x = np.empty(n, np.float32)
    start = 0
    for key, size in zip(keys, sizes, strict=True):
        t = read_parquet(root, [key], ["y", "x"])
        y[start : start + size] = _column(t, "y")
        x[start : start + size] = _column(t, "x")
        start += size
        del t
    release_unused()
    if n:
        y0, y1 = float(np.min(y)), float(np.max(y))
        x0, x1 = float(np.min(x)), float(np.max(x))
    else:
        y0 = y1 = x0 = x1 = 0.0
    if tiles is None:
        side = int(np.clip(np.sqrt(max(n, 1) / POINTS_PER_TILE), 1, MAX_TILES_SIDE))
        tiles = (side, side)
    rows, cols = (max(1, min(int(t), MAX_TILES_SIDE)) for t in tiles)
    th = max((y1 - y0) / rows, 1e-6)
    tw = max((x1 - x0) / cols, 1e-6)
    # tile key: row * cols + column, 16 bits (radix sort)
    key16 = np.minimum(((y - y0) / th).astype(np.int32), rows - 1).astype(np.uint16)
    key16 *= np.uint16(cols)
    key16 += np.minimum(((x - x0) / tw).astype(np.int32), cols - 1).astype(np.uint16)
    counts = np.bincount(key16, minlength=rows * cols)
    offsets = np.zeros(rows * cols + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    order = np.argsort(key16, kind="stable")
    del key16
    y = y[order]
    x = x[order]
    # every other column, one file at a time, then in tile order
    unnamed = unnamed_index_columns(schema)
    columns: dict[str, np.ndarray] = {}
    categories: dict[str, list[str]] = {}
    for name in schema.names:
        if name in ("x", "y") or name in unnamed:
            continue
        ftype = schema.field(name).type
        if (
            pa.types.is_dictionary(ftype)
            or pa.types.is_string(ftype)
            or pa.types.is_large_string(ftype)
        ):
            values, cats = _read_categorical(root, keys, sizes, name)
            categories[name] = cats
        else:
            parts = []
            for key in keys:
                parts.append(_column(read_parquet(root, [key], [name]), name))
            values = _narrow(np.concatenate(parts) if len(parts) > 1 else parts[0])
            if values.dtype == np.float64 and name == "z":
                values = values.astype(np.float32)
        columns[name] = values[order]
        del values
        release_unused()
    del order
    release_unused()
    fk = element.spatialdata_attrs.get("feature_key")
    return PointsIndex(
        element=element,
        y=y,
        x=x,
        origin=(y0, x0),
        tile=(th, tw),
        grid=(rows, cols),
        offsets=offsets,
        columns=columns,
        categories=categories,
        feature_key=fk if isinstance(fk, str) and fk in categories else None,
        extent=(y0, x0, y1, x1),
    )


def _read_categorical(
    root: Any, keys: list[str], sizes: list[int], name: str
) -> tuple[np.ndarray, list[str]]:
    """A text or dictionary column as codes into one list of categories (the first
    file's dictionary order, then values met later), -1 for a missing value."""
    import pyarrow.compute as pc

    from napari_ozx.ngff.spatial.files import read_parquet

    cats: list[str] = []
    lookup: dict[str, int] = {}
    parts = []
    for key in keys:
        col = read_parquet(root, [key], [name]).column(name).combine_chunks()
        if not hasattr(col, "dictionary"):
            col = pc.dictionary_encode(col)
        dictionary = [str(v) for v in col.dictionary.to_pylist()]
        for v in dictionary:
            if v not in lookup:
                lookup[v] = len(cats)
                cats.append(v)
        remap = np.asarray([lookup[v] for v in dictionary] + [-1], np.int64)
        idx = col.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        parts.append(remap[idx].astype(np.int32))
    codes = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return codes.astype(_codes_dtype(len(cats))), cats
