"""The lazy hierarchy tree: nodes whose children are read when they are expanded.

:class:`Hierarchy` opens one source read-only and caches each node's documents (read
through :mod:`napari_ozx.ngff.read.documents`, parsed by
:mod:`napari_ozx.ngff.model.metadata`) as :class:`TreeNode` records whose children load on first
request: an image's levels and ``labels`` in one batch; a plate's rows and wells from its
metadata alone, a well's documents only when expanded (a 1536-well plate costs one
document until a well is opened); a ``tables`` node's tables (:mod:`.tables`) when
expanded; a plain Zarr group's listing. Problems (an unknown must-understand extension,
invalid JSON or OME metadata) become a node's ``error``, never an exception, so the tree
shows what the reader refuses. Thread-safe: a GUI calls it from worker threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.inspection._text import shape_text
from napari_ozx.inspection.tables import TableDocs, table_summary
from napari_ozx.ngff.model.metadata import Multiscale, NodeMetadata, parse_node_attributes
from napari_ozx.ngff.read.documents import (
    METADATA_FILES,
    NodeDocuments,
    join_path,
    read_documents,
    run_sync,
)
from napari_ozx.ngff.read.open import open_store
from napari_ozx.ozx.protocol import as_container

if TYPE_CHECKING:
    from zarr.abc.store import Store

__all__ = [
    "ARRAY",
    "COLLECTION",
    "FIELD",
    "GROUP",
    "IMAGE",
    "LABELS",
    "LABEL_IMAGE",
    "LEVEL",
    "PLATE",
    "ROW",
    "TABLE",
    "TABLES",
    "WELL",
    "Hierarchy",
    "NodeRead",
    "TreeNode",
]

# node kinds
GROUP, IMAGE, LABEL_IMAGE, LABELS, LEVEL, ARRAY = (
    "group",
    "image",
    "label-image",
    "labels",
    "level",
    "array",
)
PLATE, ROW, WELL, FIELD, COLLECTION = "plate", "row", "well", "field", "collection"
TABLES, TABLE = "tables", "table"

_KIND_OF_META = {
    "image": IMAGE,
    "labels-image": LABEL_IMAGE,
    "labels-group": LABELS,
    "plate": PLATE,
    "well": WELL,
    "collection": COLLECTION,
    "scene": COLLECTION,  # a 0.6 scene: its images, like a collection's series
}


@dataclass(eq=False)
class TreeNode:
    """One row of the hierarchy tree.

    ``children`` is None until :meth:`Hierarchy.children` loaded it; ``expandable``
    says whether it may have any (so a view can show an expander without loading).
    """

    kind: str
    path: str  # Zarr path of the node in the hierarchy ("" = root)
    title: str
    info: str = ""  # a short second column: shape and dtype, well count ...
    expandable: bool = False
    error: str | None = None
    parent: TreeNode | None = field(default=None, repr=False)
    children: list[TreeNode] | None = field(default=None, repr=False)
    #: the multiscale dataset index of a level node
    level: int | None = None
    #: a table node's :class:`~napari_ozx.ngff.tables.read.TableInfo`
    table: Any = field(default=None, repr=False)

    @property
    def loaded(self) -> bool:
        return self.children is not None

    def ancestors(self) -> list[TreeNode]:
        out, n = [], self.parent
        while n is not None:
            out.append(n)
            n = n.parent
        return out

    def __repr__(self) -> str:
        return f"TreeNode({self.kind!r}, {self.path!r}, {self.title!r})"


@dataclass(frozen=True)
class NodeRead:
    """One node's documents and what the inspection makes of them."""

    docs: NodeDocuments
    meta: NodeMetadata | None = None  # groups whose OME metadata parses
    error: str | None = None  # the documents' or the metadata's problem

    @property
    def path(self) -> str:
        return self.docs.path

    @property
    def is_array(self) -> bool:
        return self.docs.node_type == "array"


def _read(docs: NodeDocuments) -> NodeRead:
    error = str(docs.error) if docs.error is not None else None
    if docs.node_type == "array" or (docs.error is not None and not docs.document):
        return NodeRead(docs, None, error)
    try:
        meta = parse_node_attributes(docs.attributes, docs.zarr_format, node=docs.path)
    except MetadataError as e:
        return NodeRead(docs, None, error or str(e))
    return NodeRead(docs, meta, error)


class Hierarchy:
    """An open, read-only, lazily loaded tree of one source. Close it (or use ``with``)."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        self.source = os.fspath(source)
        self._store: Store = open_store(self.source)
        #: a single-file archive (local or remote), as opposed to a directory
        self.is_ozx = as_container(self._store) is not None
        self._lock = threading.RLock()
        self._reads: dict[str, NodeRead | None] = {}
        self._zarr_format: int | None = None
        self._closed = False
        try:
            root = self.read("")
            if root is None:
                raise OzxError(f"{self.source}: no zarr.json or .zattrs at the root")
        except BaseException:
            self.close()
            raise
        self.root = self._make_node("", root, None, title=self.name)

    # -- identity / lifetime -------------------------------------------------------
    @property
    def name(self) -> str:
        return os.path.basename(self.source.rstrip("/\\")) or self.source

    @property
    def zarr_format(self) -> int | None:
        return self._zarr_format

    @property
    def store(self) -> Store:
        return self._store

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r}{', closed' if self._closed else ''})"

    # -- documents ---------------------------------------------------------------------
    def paths_read(self) -> tuple[str, ...]:
        """The node paths whose documents were read so far, in reading order."""
        with self._lock:
            return tuple(self._reads)

    def read_many(self, paths: Sequence[str]) -> list[NodeRead | None]:
        """The documents of *paths* (cached; None where there is no node), read concurrently."""
        with self._lock:
            if self._closed:
                raise OzxError(f"{self.source}: the inspection is closed")
            todo = [p for p in dict.fromkeys(paths) if p not in self._reads]
            fmt = self._zarr_format
        if todo:
            results = read_documents(self._store, todo, fmt)
            with self._lock:
                for p, r in zip(todo, results, strict=True):
                    self._reads.setdefault(p, None if r is None else _read(r))
                    if self._zarr_format is None and r is not None:
                        self._zarr_format = r.zarr_format
        with self._lock:
            return [self._reads[p] for p in paths]

    def read(self, path: str) -> NodeRead | None:
        return self.read_many([path])[0]

    # -- tree ----------------------------------------------------------------------------
    def _make_node(
        self,
        path: str,
        read: NodeRead | None,
        parent: TreeNode | None,
        title: str | None = None,
        kind: str | None = None,
    ) -> TreeNode:
        name = title or (path.rsplit("/", 1)[-1] if path else self.name)
        if read is None:
            return TreeNode(
                kind or GROUP, path, name, "missing", False, f"no node at {path or '/'!r}", parent
            )
        if read.is_array:
            doc = read.docs.document
            shape = doc.get("shape")
            dt = doc.get("data_type") or doc.get("dtype")
            info = f"{shape_text(shape if isinstance(shape, list) else [])}  {dt}"
            return TreeNode(kind or ARRAY, path, name, info, False, read.error, parent)
        meta = read.meta
        kind = kind or _KIND_OF_META.get(meta.kind if meta is not None else "none", GROUP)
        info = ""
        if meta is not None and meta.multiscales:
            ms = meta.multiscales[0]
            n = len(ms.datasets)
            info = f"{n} level{'s' if n != 1 else ''} · {''.join(ms.axis_names)}"
            if meta.version:
                info += f" · {meta.version}"
        elif meta is not None and meta.plate is not None:
            p = meta.plate
            info = f"{len(p.rows)}×{len(p.columns)} · {len(p.wells)} wells"
        elif meta is not None and meta.well is not None:
            n = len(meta.well.images)
            info = f"{n} field{'s' if n != 1 else ''}"
        elif meta is not None and meta.labels:
            n = len(meta.labels)
            info = f"{n} label image{'s' if n != 1 else ''}"
        return TreeNode(kind, path, name, info, True, read.error, parent)

    def children(self, node: TreeNode) -> list[TreeNode]:
        """The children of *node*, loaded on first call (reads their metadata only)."""
        if node.children is not None:
            return node.children
        try:
            kids = self._load_children(node)
        except OzxError as e:
            node.error = node.error or str(e)
            kids = []
        with self._lock:
            if node.children is None:
                node.children = kids
                node.expandable = bool(kids)
            return node.children

    def _load_children(self, node: TreeNode) -> list[TreeNode]:
        if node.kind in (LEVEL, ARRAY, ROW, TABLE) or not node.expandable:
            return []  # rows are built with their wells
        if node.kind == TABLES:
            return self._table_children(node)
        read = self.read(node.path)
        if read is None or read.is_array:
            return []
        meta = read.meta
        if meta is None:
            return self._listed_children(node)
        if meta.multiscales:
            return self._image_children(node, meta.multiscales[0])
        if meta.plate is not None:
            return self._plate_children(node, meta)
        if meta.well is not None:
            out = []
            for im in meta.well.images:
                acq = f"acquisition {im.acquisition}" if im.acquisition is not None else ""
                p = join_path(node.path, im.path, key="images path")
                out.append(TreeNode(FIELD, p, f"Field {im.path}", acq, True, None, node))
            return out
        if meta.labels:
            paths = [join_path(node.path, n, key="labels") for n in meta.labels]
            return [
                self._make_node(p, r, node, kind=LABEL_IMAGE if r is not None else None)
                for p, r in zip(paths, self.read_many(paths), strict=True)
            ]
        if meta.series or meta.scene is not None:
            if meta.scene is not None:
                paths = [join_path(node.path, p, key="scene path") for p in meta.scene.image_paths]
            else:
                paths = list(meta.series)
            return [
                self._make_node(p, r, node)
                for p, r in zip(paths, self.read_many(paths), strict=True)
            ]
        return self._listed_children(node)

    def _image_children(self, node: TreeNode, ms: Multiscale) -> list[TreeNode]:
        paths = [join_path(node.path, d.path, key="datasets path") for d in ms.datasets]
        labels_path = join_path(node.path, "labels")
        tables_path = join_path(node.path, "tables")
        extra = [labels_path, tables_path] if node.kind != LABEL_IMAGE else []
        reads = self.read_many([*paths, *extra])
        out = []
        for i, (ds, p, r) in enumerate(zip(ms.datasets, paths, reads, strict=False)):
            title = f"Level {i}" + (f" ({ds.path})" if ds.path != str(i) else "")
            n = self._make_node(p, r, node, title=title, kind=LEVEL)
            n.level = i
            out.append(n)
        if node.kind != LABEL_IMAGE:
            lab = reads[len(paths)]
            if lab is not None and lab.meta is not None and lab.meta.labels:
                out.append(self._make_node(labels_path, lab, node, title="labels", kind=LABELS))
            out.extend(self._tables_node(node, reads[-1]))
        return out

    def _tables_node(self, parent: TreeNode, read: NodeRead | None) -> list[TreeNode]:
        """The ``tables`` group of an image or plate, when it lists tables."""
        if read is None or read.is_array:
            return []
        names = read.docs.attributes.get("tables") if read.error is None else None
        if read.error is None and not (isinstance(names, list) and names):
            return []
        n = len(names) if isinstance(names, list) else 0
        info = f"{n} table{'s' if n != 1 else ''}" if read.error is None else ""
        return [TreeNode(TABLES, read.path, "tables", info, True, read.error, parent)]

    def _table_children(self, node: TreeNode) -> list[TreeNode]:
        """One node per table of the image (or plate) above *node*, from its metadata."""
        from napari_ozx.ngff.tables.read import list_tables

        image = node.parent.path if node.parent is not None else ""
        out = []
        for info in list_tables(TableDocs(self), image):
            kid = TreeNode(TABLE, info.path, info.name, table_summary(info), False, info.error)
            kid.parent, kid.table = node, info
            out.append(kid)
        return out

    def _plate_children(self, node: TreeNode, meta: NodeMetadata) -> list[TreeNode]:
        plate = meta.plate
        assert plate is not None
        by_row: dict[int, list[Any]] = {}
        for w in plate.wells:
            by_row.setdefault(w.row, []).append(w)
        rows = []
        for r in sorted(by_row):
            wells = sorted(by_row[r], key=lambda w: w.column)
            rname = plate.rows[r]
            n = len(wells)
            row = TreeNode(
                ROW,
                join_path(node.path, rname),
                f"Row {rname}",
                f"{n} well{'s' if n != 1 else ''}",
                True,
                None,
                node,
            )
            row.children = [
                TreeNode(
                    WELL,
                    join_path(node.path, w.path, key="wells path"),
                    f"{rname}{plate.columns[w.column]}",
                    w.path,
                    True,
                    None,
                    row,
                )
                for w in wells
            ]
            rows.append(row)
        return rows + self._tables_node(node, self.read(join_path(node.path, "tables")))

    def _listed_children(self, node: TreeNode) -> list[TreeNode]:
        """Children of a plain Zarr group, found by listing the store."""

        async def listing() -> list[str]:
            return [k async for k in self._store.list_dir(node.path)]

        names = sorted({n.rstrip("/") for n in run_sync(listing())} - set(METADATA_FILES))
        paths = [join_path(node.path, n) for n in names if not n.startswith(".")]
        return [
            self._make_node(p, r, node)
            for p, r in zip(paths, self.read_many(paths), strict=True)
            if r is not None
        ]

    def find(self, path: str) -> list[TreeNode]:
        """Load the tree down to *path* and return the chain root..node (as far as found)."""
        path = path.strip("/")
        chain = [self.root]
        node = self.root
        while node.path != path:
            best = None
            for c in self.children(node):
                inside = c.path == path or path.startswith(c.path + "/")
                if inside and (best is None or len(c.path) > len(best.path)):
                    best = c
            if best is None:
                break
            chain.append(best)
            node = best
        return chain
