"""The colours an AnnData table keeps for its categorical columns (scanpy's convention).

scanpy, squidpy and spatialdata-plot keep a categorical ``obs`` column's colours in
``uns["<column>_colors"]``: one colour string per category, in the order of the
column's ``categories``. :func:`category_colors` reads them with the categories they go
with, so a viewer colours each category as the analysis did. Metadata and two small
arrays per coloured column; nothing else of the table is read.
"""

from __future__ import annotations

from typing import Any

from napari_ozx.errors import OzxError
from napari_ozx.ngff.read.documents import join_path
from napari_ozx.ngff.tables.read import TableInfo, _AnnDataLayout, _arrays, _opened

__all__ = ["category_colors"]

#: at most this many categories (a colour list larger than this is ignored)
MAX_CATEGORIES = 100_000


def category_colors(source: Any, info: TableInfo) -> dict[str, dict[str, str]]:
    """column -> category -> colour string, for each categorical ``obs`` column of the
    AnnData table *info* that has ``uns["<column>_colors"]`` (at least one colour per
    category). {} for another table, or when they cannot be read (never raises)."""
    if info.backend != "anndata":
        return {}
    try:
        with _opened(source) as src:
            obs = _AnnDataLayout()._layout(src, info).obs_order
            if not obs:
                return {}
            p = info.path
            cols = list(obs)
            colour_docs = src.read_docs([join_path(p, "uns", f"{c}_colors") for c in cols])
            wanted = [
                (c, d)
                for c, d in zip(cols, colour_docs, strict=True)
                if d is not None and d.error is None and d.node_type == "array"
            ]
            if not wanted:
                return {}
            cat_docs = src.read_docs([join_path(p, "obs", c, "categories") for c, _ in wanted])
            pairs = [
                (c, d, k)
                for (c, d), k in zip(wanted, cat_docs, strict=True)
                if k is not None and k.error is None and k.node_type == "array"
            ]
            docs = [x for _, d, k in pairs for x in (d, k)]
            values = _arrays(src, docs, max_bytes=MAX_CATEGORIES * 16)
    except (OzxError, OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[str, dict[str, str]] = {}
    for i, (c, _d, _k) in enumerate(pairs):
        colours, cats = values[2 * i].ravel().tolist(), values[2 * i + 1].ravel().tolist()
        if len(colours) >= len(cats) and all(isinstance(x, str) for x in colours):
            out[c] = {str(cat): str(col) for cat, col in zip(cats, colours, strict=False)}
    return out
