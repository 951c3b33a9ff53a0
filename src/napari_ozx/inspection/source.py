""":class:`Inspection`: the lazy tree of one source plus the facts about its nodes.

It answers three questions, each from metadata only (no pixel is ever read):

* :meth:`~.tree.Hierarchy.children` - a node's children, loaded on first request;
* :meth:`Inspection.details` - a node's summary sections, array facts (shape, dtype,
  chunk and shard shape, codecs, number of chunks, stored size and compression ratio),
  ZEP 10 extensions and its documents as stored;
* :meth:`Inspection.archive` - for an ``.ozx``: the container's facts and the RFC-9
  validator's findings (computed once);
* :meth:`Inspection.table_preview` - a table's first rows (the one question that reads
  data: the table's columns, capped in bytes).

Every method is thread-safe, so a GUI can call them from worker threads.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from pathlib import Path
from typing import Any

from napari_ozx.errors import OzxError
from napari_ozx.inspection._text import pretty_json
from napari_ozx.inspection.archive import ArchiveFacts, MetadataFacts, archive_facts, metadata_facts
from napari_ozx.inspection.facts import (
    ArrayFacts,
    NodeDetails,
    Row,
    Section,
    array_facts,
    extension_infos,
    group_sections,
    level_section,
)
from napari_ozx.inspection.tables import TablePreview, preview_table, table_facts
from napari_ozx.inspection.tree import (
    COLLECTION,
    FIELD,
    IMAGE,
    LABEL_IMAGE,
    LABELS,
    PLATE,
    ROW,
    TABLE,
    TABLES,
    WELL,
    Hierarchy,
    NodeRead,
    TreeNode,
)
from napari_ozx.ngff.read.documents import METADATA_FILES, join_path, run_sync
from napari_ozx.ngff.read.open import array_node
from napari_ozx.ozx.protocol import as_container

__all__ = ["Inspection"]

_SECTION_TITLE = {
    IMAGE: "Image",
    FIELD: "Image",
    LABEL_IMAGE: "Label image",
    PLATE: "Plate",
    WELL: "Well",
    LABELS: "Labels",
    COLLECTION: "Collection",
}

#: the preview of a table node's first rows is this many rows
PREVIEW_ROWS = 20


class Inspection(Hierarchy):
    """An open, read-only look at one OME-Zarr source. Close it (or use ``with``)."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        super().__init__(source)
        local = Path(self.source)
        self._local_dir: Path | None = local if not self.is_ozx and local.is_dir() else None
        self._stored: tuple[list[str], list[int]] | None = None
        self._archive: ArchiveFacts | None = None
        self._metadata: MetadataFacts | None = None

    # -- details -----------------------------------------------------------------------
    def details(self, node: TreeNode) -> NodeDetails:
        """Everything the detail pane shows for *node* (metadata reads only)."""
        if node.kind == ROW:
            wells = node.children or []
            rows = (
                Row("Name", node.title.removeprefix("Row ")),
                Row("Wells", ", ".join(w.title for w in wells)),
            )
            return NodeDetails(node, node.kind, (Section("Row", rows),))
        if node.kind in (TABLE, TABLES):
            return self._table_details(node)
        read = self.read(node.path)
        if read is None:
            return NodeDetails(
                node, node.kind, error=node.error or f"no Zarr node at {node.path or '/'!r}"
            )
        sections: list[Section] = []
        facts: ArrayFacts | None = None
        error = read.error
        if read.is_array:
            facts, problem = self._facts(read)
            error = error or problem
            parent = self.read(node.parent.path) if node.parent is not None else None
            if (
                parent is not None
                and parent.meta is not None
                and parent.meta.multiscales
                and node.level is not None
                and node.level < len(parent.meta.multiscales[0].datasets)
            ):
                sections.append(level_section(parent.meta.multiscales[0], node.level))
        else:
            meta = read.meta
            shapes: list[Any] = []
            if meta is not None and meta.multiscales:
                ms = meta.multiscales[0]
                levels = self.read_many([join_path(node.path, d.path) for d in ms.datasets])
                shapes = [_level_shape(r) for r in levels]
                if levels and levels[0] is not None and levels[0].is_array:
                    facts = self._facts(levels[0])[0]  # the full-resolution array
            title = _SECTION_TITLE.get(node.kind, "Group")
            sections += group_sections(title, read.docs.zarr_format, meta, shapes)
            if meta is not None and meta.multiscales and node.kind in (IMAGE, FIELD):
                from napari_ozx.inspection.omexml import xml_section  # bioformats2raw

                xml = xml_section(self, node.path)
                if xml is not None:
                    sections.append(xml)
        return NodeDetails(
            node,
            node.kind,
            tuple(sections),
            facts,
            extension_infos(read.docs.extensions),
            _raw_text(read),
            tuple(n for n, _ in read.docs.files),
            error,
        )

    def _table_details(self, node: TreeNode) -> NodeDetails:
        """A table node: its facts from its metadata; the tables node: every table."""
        if node.kind == TABLE and node.table is not None:
            rows = tuple(Row(k, v) for k, v in table_facts(node.table))
            sections = (Section("Table", (*rows[:1], *_table_owner(node), *rows[1:])),)
        else:
            kids = self.children(node)
            sections = (Section("Tables", tuple(Row(k.title, k.info) for k in kids)),)
        read = self.read(node.path)
        if read is None:
            return NodeDetails(node, node.kind, sections, error=node.error)
        return NodeDetails(
            node,
            node.kind,
            sections,
            None,
            extension_infos(read.docs.extensions),
            _raw_text(read),
            tuple(n for n, _ in read.docs.files),
            node.error,
        )

    def table_preview(self, node: TreeNode, rows: int = PREVIEW_ROWS) -> TablePreview | None:
        """The first *rows* rows of a table node's table (None for another node); a
        table that cannot be read, or is too large to preview, says why."""
        if node.kind != TABLE or node.table is None:
            return None
        return preview_table(self, node.table, rows)

    # -- arrays --------------------------------------------------------------------------
    def array_facts(self, path: str) -> ArrayFacts | None:
        """Facts about the array at *path* (None if it is no array zarr can describe)."""
        read = self.read(path)
        return self._facts(read)[0] if read is not None and read.is_array else None

    def _facts(self, read: NodeRead) -> tuple[ArrayFacts | None, str | None]:
        try:
            node = array_node(self.store, self.source, read.docs)
            return array_facts(node, self.stored_size(read.path)), None
        except OzxError as e:
            return None, str(e)

    def stored_size(self, prefix: str) -> tuple[int, int]:
        """Bytes and number of stored objects under *prefix*, metadata documents excluded.

        ``.ozx``: the members' stored sizes from the container's member table;
        directory: the sizes of the files on disk (or as the store reports them).
        """
        if self.is_ozx:
            names, sizes = self._member_sizes()
            start = prefix + "/" if prefix else ""
            lo = bisect.bisect_left(names, start)
            hi = bisect.bisect_left(names, start + "\U0010ffff") if start else len(names)
            kept = [
                s
                for n, s in zip(names[lo:hi], sizes[lo:hi], strict=True)
                if n.rsplit("/", 1)[-1] not in METADATA_FILES
            ]
            return sum(kept), len(kept)
        if self._local_dir is None:  # a remote directory: ask the store
            return self._listed_size(prefix)
        total = count = 0
        root = os.path.join(self._local_dir, *prefix.split("/")) if prefix else str(self._local_dir)
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f in METADATA_FILES:
                    continue
                try:
                    total += os.stat(os.path.join(dirpath, f)).st_size
                    count += 1
                except OSError:
                    continue
        return total, count

    def _listed_size(self, prefix: str) -> tuple[int, int]:
        store = self.store

        async def run() -> tuple[int, int]:
            keys = [k async for k in store.list_prefix(prefix + "/" if prefix else "")]
            keys = [k for k in keys if k.rsplit("/", 1)[-1] not in METADATA_FILES]
            sizes = await asyncio.gather(*(store.getsize(k) for k in keys))
            return sum(sizes), len(keys)

        try:
            result: tuple[int, int] = run_sync(run())
        except (OSError, NotImplementedError, ValueError):
            return 0, 0
        return result

    def _member_sizes(self) -> tuple[list[str], list[int]]:
        with self._lock:
            if self._stored is None:
                container = as_container(self.store)
                assert container is not None
                names, sizes = container.stored_sizes()
                self._stored = (list(names), list(sizes))
            return self._stored

    # -- archive -------------------------------------------------------------------------
    def archive(self) -> ArchiveFacts | None:
        """Facts about the ``.ozx`` container and its RFC-9 findings (None for a directory).

        Computed once; concurrent first calls may both validate, one result is kept."""
        if not self.is_ozx:
            return None
        with self._lock:
            if self._archive is not None:
                return self._archive
            if self._closed:
                raise OzxError(f"{self.source}: the inspection is closed")
        facts = archive_facts(self.store)
        with self._lock:
            if self._archive is None:
                self._archive = facts
            return self._archive

    def metadata(self) -> MetadataFacts:
        """The OME-Zarr metadata validator's findings for the whole hierarchy, for
        directories and archives alike (computed once, like :meth:`archive`)."""
        with self._lock:
            if self._metadata is not None:
                return self._metadata
            if self._closed:
                raise OzxError(f"{self.source}: the inspection is closed")
        root = self.read("")
        meta = root.meta if root is not None else None
        version = meta.version if meta is not None else None
        facts = metadata_facts(self.store, self.source, version)
        with self._lock:
            if self._metadata is None:
                self._metadata = facts
            return self._metadata


def _table_owner(node: TreeNode) -> tuple[Row, ...]:
    """The image (or plate) a table node belongs to: the node above its ``tables``
    group, by title and path."""
    tables = node.parent
    owner = tables.parent if tables is not None else None
    if owner is None:
        return ()
    label = {PLATE: "Plate", WELL: "Well"}.get(owner.kind, "Image")
    return (Row(label, f"{owner.title} (/{owner.path})"),)


def _level_shape(read: NodeRead | None) -> list[int] | str:
    """A level's shape as its document states it, or why there is none."""
    if read is None:
        return "missing"
    shape = read.docs.document.get("shape")
    if read.is_array and not read.error and isinstance(shape, list):
        return shape
    return "unreadable"


def _raw_text(read: NodeRead) -> str:
    files = read.docs.files
    parts = []
    for name, doc in files:
        text = pretty_json(doc) if doc is not None else "(not valid JSON)"
        parts.append(text if len(files) == 1 else f"// {name}\n{text}")
    return "\n\n".join(parts)
