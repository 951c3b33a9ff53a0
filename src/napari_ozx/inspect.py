"""What the metadata inspector shows, without Qt: a lazy hierarchy tree and node details.

:class:`Inspection` opens one OME-Zarr source (directory or ``.ozx``) read-only and
answers three questions, each from metadata only (no pixel is ever read):

* :meth:`Inspection.children` - the child nodes of a tree node, loaded on first request
  and cached (a plate lists its rows and wells from the plate metadata alone; a well
  reads its own ``zarr.json`` only when it is expanded, so a 1536-well plate costs one
  document until the user opens a well);
* :meth:`Inspection.details` - a readable summary (axes, levels, channels, label
  colours, plate / well layout), array facts (shape, dtype, chunk and shard shape,
  codecs, number of chunks, stored size and compression ratio), ZEP 10 extensions and
  the raw ``zarr.json`` / ``.zattrs`` JSON;
* :meth:`Inspection.archive` - for an ``.ozx``: entry count, ZIP64, comment,
  compression methods and the RFC-9 validator's findings.

The inspector must also show files that the reader refuses (an unknown must-understand
extension, invalid metadata): such problems become a node's ``error`` instead of an
exception. Every method is thread-safe, so a GUI can call them from worker threads.

Nothing here imports napari or Qt.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import math
import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MetadataError, OzxError
from .ngff.extensions import UNDERSTOOD, check_document
from .ngff.models import Multiscale, NodeMetadata, parse_node_attributes
from .ngff.open import join_path

logger = logging.getLogger(__name__)

__all__ = [
    "ArchiveFacts",
    "ArrayFacts",
    "ExtensionInfo",
    "Inspection",
    "NodeDetails",
    "Row",
    "Section",
    "TreeNode",
    "format_bytes",
    "pretty_json",
]

_META_FILES = ("zarr.json", ".zarray", ".zattrs", ".zgroup")
#: at most this many rows of one list (label colours, wells ...) in a summary section
MAX_ROWS = 64

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


# ----------------------------------------------------------------------- helpers


def format_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _shape(s: Sequence[int] | None) -> str:
    return "–" if s is None else " × ".join(str(int(v)) for v in s) or "scalar"


def _num(v: float) -> str:
    return f"{v:g}"


def _nums(vs: Sequence[float]) -> str:
    return ", ".join(_num(v) for v in vs)


def pretty_json(doc: Any, indent: int = 2, width: int = 88) -> str:
    """Indented JSON in which short lists of numbers or strings (shapes, scales,
    colours) stay on one line."""

    def short(v: Any) -> str | None:
        if isinstance(v, list) and all(not isinstance(x, dict | list) for x in v):
            s = json.dumps(v, ensure_ascii=False)
            return s if len(s) <= width else None
        return None

    def dump(v: Any, level: int) -> str:
        pad, inner = " " * (indent * level), " " * (indent * (level + 1))
        one = short(v)
        if one is not None:
            return one
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = [
                f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dump(x, level + 1)}"
                for k, x in v.items()
            ]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(v, list):
            if not v:
                return "[]"
            return "[\n" + ",\n".join(f"{inner}{dump(x, level + 1)}" for x in v) + f"\n{pad}]"
        return json.dumps(v, ensure_ascii=False)

    return dump(doc, 0)


# -------------------------------------------------------------------- tree nodes


@dataclass(eq=False)
class TreeNode:
    """One row of the hierarchy tree.

    ``children`` is None until :meth:`Inspection.children` loaded it; ``expandable``
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


# ----------------------------------------------------------------------- details


@dataclass(frozen=True)
class Row:
    label: str
    value: str
    color: str | None = None  # "#RRGGBB" or "#RRGGBBAA": a swatch to draw beside the row


@dataclass(frozen=True)
class Section:
    title: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class ExtensionInfo:
    name: str
    must_understand: bool
    understood: bool
    configuration: Mapping[str, Any] = field(default_factory=dict)
    where: str = "extensions"  # "extensions" list, or "key" for an ignorable top-level key


@dataclass(frozen=True)
class ArrayFacts:
    path: str
    zarr_format: int
    shape: tuple[int, ...]
    dtype: str
    chunk_shape: tuple[int, ...]  # the unit a reader decodes (inner chunks when sharded)
    shard_shape: tuple[int, ...] | None
    codecs: tuple[str, ...]
    fill_value: Any
    dimension_names: tuple[str | None, ...] | None
    n_chunks: int  # inner chunks in the whole grid
    n_shards: int | None
    nbytes: int  # uncompressed size of the whole array
    stored_bytes: int  # bytes actually stored under the array's prefix
    stored_objects: int  # files / entries actually stored under it
    itemsize: int | None = None

    @property
    def chunks_per_shard(self) -> int | None:
        if self.shard_shape is None:
            return None
        return math.prod(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))

    @property
    def ratio(self) -> float | None:
        """Compression ratio: uncompressed bytes / stored bytes (None if nothing is stored)."""
        return self.nbytes / self.stored_bytes if self.stored_bytes else None

    def rows(self) -> tuple[Row, ...]:
        rows = [
            Row("Shape", _shape(self.shape)),
            Row("Data type", self.dtype),
            Row("Chunk shape", _shape(self.chunk_shape)),
            Row("Shard shape", _shape(self.shard_shape) if self.shard_shape else "not sharded"),
        ]
        if self.shard_shape:
            rows.append(Row("Chunks per shard", str(self.chunks_per_shard)))
        rows.append(Row("Number of chunks", f"{self.n_chunks:,}"))
        if self.n_shards is not None:
            rows.append(Row("Number of shards", f"{self.n_shards:,}"))
        rows += [
            Row("Codecs", " → ".join(self.codecs) or "none"),
            Row("Fill value", json.dumps(self.fill_value)),
            Row("Uncompressed size", format_bytes(self.nbytes)),
            Row(
                "Stored size",
                f"{format_bytes(self.stored_bytes)} in {self.stored_objects:,} "
                f"{'entries' if self.stored_objects != 1 else 'entry'}",
            ),
            Row(
                "Compression ratio",
                f"{self.ratio:.2f} : 1" if self.ratio else "– (no chunk stored)",
            ),
            Row("Zarr format", str(self.zarr_format)),
        ]
        if self.dimension_names:
            rows.append(Row("Dimension names", ", ".join(str(n) for n in self.dimension_names)))
        return tuple(rows)


@dataclass(frozen=True)
class NodeDetails:
    node: TreeNode
    kind: str
    sections: tuple[Section, ...] = ()
    array: ArrayFacts | None = None
    extensions: tuple[ExtensionInfo, ...] = ()
    raw_json: str = ""  # pretty-printed documents of the node, each headed by its file name
    raw_files: tuple[str, ...] = ()
    error: str | None = None

    def section(self, title: str) -> Section | None:
        for s in self.sections:
            if s.title == title:
                return s
        return None

    def text(self) -> str:
        """Plain-text rendering (tests, copy to clipboard, logs)."""
        out = []
        if self.error:
            out.append(f"Error: {self.error}")
        for s in self.sections:
            out.append(f"[{s.title}]")
            out += [
                f"  {r.label}: {r.value}" + (f" ({r.color})" if r.color else "") for r in s.rows
            ]
        if self.array is not None:
            out.append("[Array]")
            out += [f"  {r.label}: {r.value}" for r in self.array.rows()]
        for e in self.extensions:
            out.append(
                f"[Extension] {e.name} must_understand={e.must_understand} understood={e.understood}"
            )
        return "\n".join(out)


@dataclass(frozen=True)
class ArchiveFacts:
    path: str
    file_size: int
    entries: int
    zip64: bool
    comment: str
    methods: Mapping[str, int]  # compression method name -> number of entries
    duplicates: int
    stored_bytes: int  # sum of compressed entry sizes
    findings: tuple[Any, ...] = ()  # napari_ozx.ozx.validate.Finding
    validation_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.validation_error is None and not any(
            f.severity == "error" for f in self.findings
        )

    def counts(self) -> dict[str, int]:
        c = Counter(f.severity for f in self.findings)
        return {s: c.get(s, 0) for s in ("error", "warning", "info")}

    def rows(self) -> tuple[Row, ...]:
        methods = ", ".join(f"{m}: {n:,}" for m, n in sorted(self.methods.items())) or "–"
        counts = self.counts()
        verdict = (
            f"cannot validate: {self.validation_error}"
            if self.validation_error
            else ("conformant" if self.ok else "NOT conformant")
            + f" ({counts['error']} errors, {counts['warning']} warnings)"
        )
        return (
            Row("File", self.path),
            Row("File size", format_bytes(self.file_size)),
            Row("Entries", f"{self.entries:,}"),
            Row("ZIP64", "yes" if self.zip64 else "no"),
            Row("Comment", self.comment or "(none)"),
            Row("Compression", methods),
            Row("Duplicate names", str(self.duplicates)),
            Row("RFC-9", verdict),
        )


# ---------------------------------------------------------------- raw documents


@dataclass(frozen=True)
class _Raw:
    """One node's documents as stored, plus what we make of them."""

    path: str
    zarr_format: int
    node_type: str  # "group" | "array"
    doc: Mapping[str, Any]  # zarr.json, or .zarray (v2 arrays), or {} (v2 groups)
    attrs: Mapping[str, Any]
    files: tuple[tuple[str, Any], ...]  # (file name, parsed JSON) as stored
    meta: NodeMetadata | None = None
    extensions: tuple[ExtensionInfo, ...] = ()
    error: str | None = None


def _extensions_of(doc: Mapping[str, Any]) -> tuple[ExtensionInfo, ...]:
    """ZEP 10 extensions of a zarr.json, listed tolerantly (the inspector shows broken files)."""
    out = []
    raw = doc.get("extensions")
    for r in raw if isinstance(raw, list) else ():
        if isinstance(r, str):
            out.append(ExtensionInfo(r, True, r in UNDERSTOOD))
        elif isinstance(r, Mapping):
            name = str(r.get("name"))
            must = r.get("must_understand", True)
            conf = r.get("configuration")
            out.append(
                ExtensionInfo(
                    name,
                    must is not False,
                    name in UNDERSTOOD,
                    dict(conf) if isinstance(conf, Mapping) else {},
                )
            )
    for key, value in doc.items():
        if isinstance(value, Mapping) and "must_understand" in value and key != "extensions":
            out.append(
                ExtensionInfo(
                    key,
                    value.get("must_understand") is not False,
                    False,
                    {k: v for k, v in value.items() if k != "must_understand"},
                    "key",
                )
            )
    return tuple(out)


# ------------------------------------------------------------------- inspection


class Inspection:
    """An open, read-only look at one OME-Zarr source. Close it (or use ``with``)."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        from .ngff.open import open_store
        from .ozx.store import OzxStore

        self.source = os.fspath(source)
        self._store = open_store(self.source)
        #: a single-file archive (local or remote), as opposed to a directory
        self.is_ozx = isinstance(self._store, OzxStore)
        local = Path(self.source)
        self._local_dir: Path | None = local if not self.is_ozx and local.is_dir() else None
        self._lock = threading.RLock()
        self._raw: dict[str, _Raw | None] = {}
        self._zarr_format: int | None = None
        self._entry_sizes: tuple[list[str], list[int]] | None = None
        self._archive: ArchiveFacts | None = None
        self._closed = False
        try:
            raw = self._read([""])[0]
            if raw is None:
                raise OzxError(f"{self.source}: no zarr.json or .zattrs at the root")
        except BaseException:
            self.close()
            raise
        self.root = self._make_node("", raw, None, title=self.name)

    # -- identity / lifetime -------------------------------------------------------
    @property
    def name(self) -> str:
        base = os.path.basename(self.source.rstrip("/\\")) or self.source
        return base

    @property
    def zarr_format(self) -> int | None:
        return self._zarr_format

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    def __enter__(self) -> Inspection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Inspection({self.source!r}{', closed' if self._closed else ''})"

    # -- reading ---------------------------------------------------------------------
    def _read(self, paths: Sequence[str]) -> list[_Raw | None]:
        """Raw documents of *paths* (cached; missing ones are None), read concurrently."""
        with self._lock:
            if self._closed:
                raise OzxError(f"{self.source}: the inspection is closed")
            todo = [p for p in dict.fromkeys(paths) if p not in self._raw]
        if todo:
            from zarr.core.sync import sync

            results = sync(self._read_async(todo))
            with self._lock:
                for p, r in zip(todo, results, strict=True):
                    self._raw.setdefault(p, r)
        with self._lock:
            return [self._raw[p] for p in paths]

    async def _read_async(self, paths: Sequence[str]) -> list[_Raw | None]:
        from .ngff.open import get_bytes

        store = self._store

        async def get_json(key: str) -> tuple[Any, str | None] | None:
            data = await get_bytes(store, key)
            if data is None:
                return None
            try:
                return json.loads(data), None
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                return None, f"{key}: invalid JSON ({e})"

        async def one(p: str) -> _Raw | None:
            fmt = self._zarr_format
            if fmt in (None, 3):
                got = await get_json(join_path(p, "zarr.json"))
                if got is not None:
                    doc, err = got
                    if err or not isinstance(doc, dict):
                        return _Raw(
                            p,
                            3,
                            "group",
                            {},
                            {},
                            (("zarr.json", doc),),
                            error=err or "zarr.json is not a JSON object",
                        )
                    return self._raw_v3(p, doc)
                if fmt == 3:
                    return None
            zattrs, zgroup, zarray = await asyncio.gather(
                get_json(join_path(p, ".zattrs")),
                get_json(join_path(p, ".zgroup")),
                get_json(join_path(p, ".zarray")),
            )
            if zattrs is None and zgroup is None and zarray is None:
                return None
            files = tuple(
                (n, g[0])
                for n, g in ((".zarray", zarray), (".zgroup", zgroup), (".zattrs", zattrs))
                if g is not None
            )
            errors = [g[1] for g in (zattrs, zgroup, zarray) if g is not None and g[1]]
            attrs = zattrs[0] if zattrs is not None and isinstance(zattrs[0], dict) else {}
            is_array = zarray is not None and isinstance(zarray[0], dict)
            doc = zarray[0] if is_array else {}
            raw = _Raw(
                p,
                2,
                "array" if is_array else "group",
                doc,
                attrs,
                files,
                error=errors[0] if errors else None,
            )
            return self._with_meta(raw)

        results = await asyncio.gather(*(one(p) for p in paths))
        if self._zarr_format is None:
            for r in results:
                if r is not None:
                    self._zarr_format = r.zarr_format
                    break
        return list(results)

    def _raw_v3(self, p: str, doc: dict[str, Any]) -> _Raw:
        attrs = doc.get("attributes") if isinstance(doc.get("attributes"), dict) else {}
        node_type = "array" if doc.get("node_type") == "array" else "group"
        err = None
        if doc.get("zarr_format") != 3:
            err = "zarr.json: zarr_format is not 3"
        else:
            try:
                check_document(doc, p)
            except OzxError as e:
                err = f"the reader refuses this node: {e}"
        raw = _Raw(
            p,
            3,
            node_type,
            doc,
            attrs,
            (("zarr.json", doc),),
            extensions=_extensions_of(doc),
            error=err,
        )
        return self._with_meta(raw)

    @staticmethod
    def _with_meta(raw: _Raw) -> _Raw:
        if raw.node_type != "group":
            return raw
        try:
            meta = parse_node_attributes(raw.attrs, raw.zarr_format, node=raw.path)
        except MetadataError as e:
            return _Raw(**{**raw.__dict__, "error": raw.error or str(e)})
        return _Raw(**{**raw.__dict__, "meta": meta})

    def _raw_of(self, path: str) -> _Raw | None:
        return self._read([path])[0]

    # -- tree --------------------------------------------------------------------------
    def _make_node(
        self,
        path: str,
        raw: _Raw | None,
        parent: TreeNode | None,
        title: str | None = None,
        kind: str | None = None,
    ) -> TreeNode:
        name = title or (path.rsplit("/", 1)[-1] if path else self.name)
        if raw is None:
            return TreeNode(
                kind or GROUP, path, name, "missing", False, f"no node at {path or '/'!r}", parent
            )
        if raw.node_type == "array":
            shape = raw.doc.get("shape") or []
            dt = raw.doc.get("data_type") or raw.doc.get("dtype")
            return TreeNode(
                kind or ARRAY, path, name, f"{_shape(shape)}  {dt}", False, raw.error, parent
            )
        meta = raw.meta
        mk = meta.kind if meta is not None else "none"
        if kind is None:
            kind = {
                "image": IMAGE,
                "labels-image": LABEL_IMAGE,
                "labels-group": LABELS,
                "plate": PLATE,
                "well": WELL,
                "collection": COLLECTION,
            }.get(mk, GROUP)
        info = ""
        if meta is not None and meta.multiscales:
            ms = meta.multiscales[0]
            info = f"{len(ms.datasets)} level{'s' if len(ms.datasets) != 1 else ''} · {''.join(ms.axis_names)}"
            if meta.version:
                info += f" · {meta.version}"
        elif meta is not None and meta.plate is not None:
            p = meta.plate
            info = f"{len(p.rows)}×{len(p.columns)} · {len(p.wells)} wells"
        elif meta is not None and meta.well is not None:
            info = f"{len(meta.well.images)} field{'s' if len(meta.well.images) != 1 else ''}"
        elif meta is not None and meta.labels:
            info = f"{len(meta.labels)} label image{'s' if len(meta.labels) != 1 else ''}"
        return TreeNode(kind, path, name, info, True, raw.error, parent)

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
        if node.kind in (LEVEL, ARRAY) or not node.expandable:
            return []
        if node.kind == ROW:  # rows are built with their wells
            return []
        raw = self._raw_of(node.path)
        if raw is None or raw.node_type != "group":
            return []
        meta = raw.meta
        if meta is None:
            return self._listed_children(node)
        if meta.multiscales:
            return self._image_children(node, meta.multiscales[0])
        if meta.plate is not None:
            return self._plate_children(node, meta)
        if meta.well is not None:
            paths = [join_path(node.path, im.path) for im in meta.well.images]
            out = []
            for im, p in zip(meta.well.images, paths, strict=True):
                acq = f"acquisition {im.acquisition}" if im.acquisition is not None else ""
                out.append(TreeNode(FIELD, p, f"Field {im.path}", acq, True, None, node))
            return out
        if meta.labels:
            paths = [join_path(node.path, n) for n in meta.labels]
            return [
                self._make_node(p, r, node, kind=LABEL_IMAGE if r is not None else None)
                for p, r in zip(paths, self._read(paths), strict=True)
            ]
        if meta.series:
            paths = list(meta.series)
            return [
                self._make_node(p, r, node) for p, r in zip(paths, self._read(paths), strict=True)
            ]
        return self._listed_children(node)

    def _image_children(self, node: TreeNode, ms: Multiscale) -> list[TreeNode]:
        paths = [join_path(node.path, d.path) for d in ms.datasets]
        labels_path = join_path(node.path, "labels")
        raws = self._read([*paths, labels_path] if node.kind != LABEL_IMAGE else paths)
        out = []
        for i, (ds, p, r) in enumerate(zip(ms.datasets, paths, raws, strict=False)):
            n = self._make_node(
                p,
                r,
                node,
                title=f"Level {i}" + (f" ({ds.path})" if ds.path != str(i) else ""),
                kind=LEVEL,
            )
            n.level = i
            out.append(n)
        if node.kind != LABEL_IMAGE:
            lab = raws[-1]
            if (
                lab is not None
                and lab.node_type == "group"
                and lab.meta is not None
                and lab.meta.labels
            ):
                out.append(self._make_node(labels_path, lab, node, title="labels", kind=LABELS))
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
            row = TreeNode(
                ROW,
                join_path(node.path, rname),
                f"Row {rname}",
                f"{len(wells)} well{'s' if len(wells) != 1 else ''}",
                True,
                None,
                node,
            )
            row.children = [
                TreeNode(
                    WELL,
                    join_path(node.path, w.path),
                    f"{rname}{plate.columns[w.column]}",
                    w.path,
                    True,
                    None,
                    row,
                )
                for w in wells
            ]
            rows.append(row)
        return rows

    def _listed_children(self, node: TreeNode) -> list[TreeNode]:
        """Children of a plain Zarr group, found by listing the store."""
        from zarr.core.sync import sync

        async def listing() -> list[str]:
            return [k async for k in self._store.list_dir(node.path)]

        names = sorted({n.rstrip("/") for n in sync(listing())} - set(_META_FILES))
        paths = [join_path(node.path, n) for n in names if not n.startswith(".")]
        raws = self._read(paths)
        return [
            self._make_node(p, r, node) for p, r in zip(paths, raws, strict=True) if r is not None
        ]

    def find(self, path: str) -> list[TreeNode]:
        """Load the tree down to *path* and return the chain root..node (as far as found)."""
        path = path.strip("/")
        chain = [self.root]
        node = self.root
        while node.path != path:
            best = None
            for c in self.children(node):
                if c.path == path or path.startswith(c.path + "/"):
                    if best is None or len(c.path) > len(best.path):
                        best = c
            if best is None:
                break
            chain.append(best)
            node = best
        return chain

    # -- details -----------------------------------------------------------------------
    def details(self, node: TreeNode) -> NodeDetails:
        """Everything the detail pane shows for *node* (metadata reads only)."""
        if node.kind == ROW:
            wells = node.children or []
            return NodeDetails(
                node,
                node.kind,
                (
                    Section(
                        "Row",
                        (
                            Row("Name", node.title.removeprefix("Row ")),
                            Row("Wells", ", ".join(w.title for w in wells)),
                        ),
                    ),
                ),
            )
        raw = self._raw_of(node.path)
        if raw is None:
            return NodeDetails(
                node, node.kind, error=node.error or f"no Zarr node at {node.path or '/'!r}"
            )
        sections: list[Section] = []
        facts = None
        if raw.node_type == "array":
            facts = self._array_facts(raw)
            parent = node.parent
            praw = self._raw_of(parent.path) if parent is not None else None
            if (
                praw is not None
                and praw.meta is not None
                and praw.meta.multiscales
                and node.level is not None
            ):
                ms = praw.meta.multiscales[0]
                ds = ms.datasets[node.level]
                sections.append(
                    Section(
                        "Level",
                        (
                            Row("Dataset path", ds.path),
                            Row("Level", f"{node.level} (of {len(ms.datasets)} levels)"),
                            Row("Scale", self._per_axis(ms, ds.scale)),
                            Row("Translation", self._per_axis(ms, ds.translation)),
                        ),
                    )
                )
        else:
            sections += self._group_sections(node, raw)
            if raw.meta is not None and raw.meta.multiscales:  # the full-resolution array
                facts = self.array_facts(
                    join_path(node.path, raw.meta.multiscales[0].datasets[0].path)
                )
        return NodeDetails(
            node,
            node.kind,
            tuple(sections),
            facts,
            raw.extensions,
            self._raw_text(raw),
            tuple(n for n, _ in raw.files),
            raw.error,
        )

    @staticmethod
    def _per_axis(ms: Multiscale, values: Sequence[float]) -> str:
        return ", ".join(f"{a.name} {_num(v)}" for a, v in zip(ms.axes, values, strict=False))

    @staticmethod
    def _raw_text(raw: _Raw) -> str:
        parts = []
        for name, doc in raw.files:
            text = pretty_json(doc)
            parts.append(text if len(raw.files) == 1 else f"// {name}\n{text}")
        return "\n\n".join(parts)

    def _group_sections(self, node: TreeNode, raw: _Raw) -> list[Section]:
        meta = raw.meta
        secs: list[Section] = []
        if meta is None:
            return [
                Section(
                    "Group",
                    (Row("Zarr format", str(raw.zarr_format)), Row("OME-Zarr", "invalid metadata")),
                )
            ]
        general = [
            Row("Kind", {"none": "Zarr group (no OME metadata)"}.get(meta.kind, meta.kind)),
            Row("OME-Zarr version", meta.version or "not declared"),
            Row("Zarr format", str(raw.zarr_format)),
        ]
        if meta.multiscales:
            ms = meta.multiscales[0]
            if ms.name:
                general.append(Row("Name", ms.name))
            general.append(Row("Levels", str(len(ms.datasets))))
            if ms.type:
                general.append(Row("Downsampling", ms.type))
            if len(meta.multiscales) > 1:
                general.append(Row("Multiscales", f"{len(meta.multiscales)} (the first is shown)"))
        secs.append(
            Section(
                {
                    IMAGE: "Image",
                    FIELD: "Image",
                    LABEL_IMAGE: "Label image",
                    PLATE: "Plate",
                    WELL: "Well",
                    LABELS: "Labels",
                    COLLECTION: "Collection",
                }.get(node.kind, "Group"),
                tuple(general),
            )
        )
        if meta.multiscales:
            ms = meta.multiscales[0]
            secs.append(
                Section(
                    "Axes",
                    tuple(
                        Row(a.name, ", ".join(x for x in (a.type or "untyped", a.unit) if x))
                        for a in ms.axes
                    ),
                )
            )
            level_paths = [join_path(node.path, d.path) for d in ms.datasets]
            level_raws = self._read(level_paths)
            rows = []
            for i, (d, lr) in enumerate(zip(ms.datasets, level_raws, strict=True)):
                shape = lr.doc.get("shape") if lr is not None and lr.node_type == "array" else None
                txt = f"{_shape(shape) if shape else 'missing'} · scale {_nums(d.scale)}"
                if any(d.translation):
                    txt += f" · translation {_nums(d.translation)}"
                rows.append(Row(f"{i} ({d.path})" if d.path != str(i) else str(i), txt))
            secs.append(Section("Levels", tuple(rows)))
        if meta.omero is not None and meta.omero.channels:
            rows = []
            for i, ch in enumerate(meta.omero.channels):
                parts = []
                if ch.window is not None:
                    w = ch.window
                    parts.append(f"window {_num(w.start)}–{_num(w.end)}")
                    if w.min is not None and w.max is not None:
                        parts.append(f"range {_num(w.min)}–{_num(w.max)}")
                parts.append("active" if ch.active else "hidden")
                if ch.inverted:
                    parts.append("inverted")
                if ch.color:
                    parts.append(f"#{ch.color}")
                rows.append(
                    Row(
                        ch.label or f"channel {i}",
                        " · ".join(parts),
                        f"#{ch.color}" if ch.color else None,
                    )
                )
            secs.append(Section("Channels", tuple(rows)))
        if meta.image_label is not None:
            il = meta.image_label
            rows = [
                Row(
                    str(c.value),
                    "rgba(" + ", ".join(str(x) for x in c.rgba) + ")",
                    "#" + "".join(f"{x:02X}" for x in c.rgba),
                )
                for c in il.colors[:MAX_ROWS]
            ]
            if len(il.colors) > MAX_ROWS:
                rows.append(Row("…", f"{len(il.colors) - MAX_ROWS} more colours"))
            info = [Row("Colours", str(len(il.colors))), Row("Properties", str(len(il.properties)))]
            if il.source_image:
                info.append(Row("Source image", il.source_image))
            if il.properties:
                keys = sorted({k for p in il.properties for k in p if k != "label-value"})
                info.append(Row("Property keys", ", ".join(keys) or "–"))
            secs.append(Section("Image label", tuple(info)))
            if rows:
                secs.append(Section("Label colours", tuple(rows)))
        if meta.labels:
            secs.append(
                Section("Label images", tuple(Row(str(i), n) for i, n in enumerate(meta.labels)))
            )
        if meta.plate is not None:
            p = meta.plate
            rows = [
                Row("Name", p.name or "–"),
                Row("Rows", f"{len(p.rows)} ({p.rows[0]}…{p.rows[-1]})" if p.rows else "0"),
                Row(
                    "Columns",
                    f"{len(p.columns)} ({p.columns[0]}…{p.columns[-1]})" if p.columns else "0",
                ),
                Row("Wells", str(len(p.wells))),
            ]
            if p.field_count is not None:
                rows.append(Row("Fields per well", str(p.field_count)))
            secs.append(Section("Layout", tuple(rows)))
            if p.acquisitions:
                secs.append(
                    Section(
                        "Acquisitions",
                        tuple(
                            Row(
                                str(a.id),
                                (a.name or "–")
                                + (
                                    f" · up to {a.maximum_field_count} fields"
                                    if a.maximum_field_count
                                    else ""
                                ),
                            )
                            for a in p.acquisitions
                        ),
                    )
                )
        if meta.well is not None:
            secs.append(
                Section(
                    "Fields",
                    tuple(
                        Row(
                            im.path,
                            f"acquisition {im.acquisition}" if im.acquisition is not None else "–",
                        )
                        for im in meta.well.images[:MAX_ROWS]
                    ),
                )
            )
        if meta.series:
            secs.append(
                Section(
                    "Series", tuple(Row(str(i), s) for i, s in enumerate(meta.series[:MAX_ROWS]))
                )
            )
        return secs

    # -- arrays --------------------------------------------------------------------------
    def array_facts(self, path: str) -> ArrayFacts | None:
        raw = self._raw_of(path)
        return self._array_facts(raw) if raw is not None and raw.node_type == "array" else None

    def _array_facts(self, raw: _Raw) -> ArrayFacts:
        import numpy as np

        doc = raw.doc
        shape = tuple(int(s) for s in doc.get("shape") or ())
        shard: tuple[int, ...] | None = None
        codecs: list[str] = []
        if raw.zarr_format == 3:
            dtype = doc.get("data_type")
            grid = doc.get("chunk_grid") or {}
            outer = tuple(
                int(c) for c in (grid.get("configuration") or {}).get("chunk_shape") or shape
            )
            chunk = outer
            for c in doc.get("codecs") or []:
                name, conf = _codec_parts(c)
                if name == "sharding_indexed":
                    shard = outer
                    chunk = tuple(int(x) for x in conf.get("chunk_shape") or outer)
                    codecs += [_describe_codec(x) for x in conf.get("codecs") or []]
                    codecs += [
                        f"{_describe_codec(x)} (index)"
                        for x in conf.get("index_codecs") or []
                        if _codec_parts(x)[0] != "bytes"
                    ]
                else:
                    codecs.append(_describe_codec(c))
            names = doc.get("dimension_names")
            dims = tuple(names) if isinstance(names, list) else None
        else:
            dtype = doc.get("dtype")
            chunk = tuple(int(c) for c in doc.get("chunks") or shape)
            for f in doc.get("filters") or []:
                codecs.append(_describe_codec(f))
            comp = doc.get("compressor")
            if comp:
                codecs.append(_describe_codec(comp))
            dims = None
        try:
            itemsize: int | None = (
                np.dtype(str(dtype)).itemsize if not isinstance(dtype, dict) else None
            )
        except TypeError:
            itemsize = None
        n_chunks = (
            math.prod(math.ceil(s / c) for s, c in zip(shape, chunk, strict=False) if c)
            if shape
            else 1
        )
        n_shards = (
            math.prod(math.ceil(s / c) for s, c in zip(shape, shard, strict=False) if c)
            if shard
            else None
        )
        stored, objects = self.stored_size(raw.path)
        return ArrayFacts(
            path=raw.path,
            zarr_format=raw.zarr_format,
            shape=shape,
            dtype=str(dtype),
            chunk_shape=chunk,
            shard_shape=shard,
            codecs=tuple(codecs),
            fill_value=doc.get("fill_value"),
            dimension_names=dims,
            n_chunks=n_chunks,
            n_shards=n_shards,
            nbytes=math.prod(shape) * (itemsize or 0),
            stored_bytes=stored,
            stored_objects=objects,
            itemsize=itemsize,
        )

    def stored_size(self, prefix: str) -> tuple[int, int]:
        """Bytes and number of stored objects under *prefix*, metadata documents excluded.

        ``.ozx``: the sizes of the archive's entries (as stored, from the central
        directory); directory: the sizes of the files on disk (or as the store reports them).
        """
        total = count = 0
        if self.is_ozx:
            names, sizes = self._entries()
            start = prefix + "/" if prefix else ""
            lo = bisect.bisect_left(names, start)
            hi = bisect.bisect_left(names, start + "\U0010ffff") if start else len(names)
            for name, size in zip(names[lo:hi], sizes[lo:hi], strict=True):
                if name.rsplit("/", 1)[-1] not in _META_FILES:
                    total += size
                    count += 1
            return total, count
        if self._local_dir is None:  # a remote directory: ask the store
            return self._listed_size(prefix)
        root = os.path.join(self._local_dir, *prefix.split("/")) if prefix else str(self._local_dir)
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f in _META_FILES:
                    continue
                try:
                    total += os.stat(os.path.join(dirpath, f)).st_size
                    count += 1
                except OSError:
                    continue
        return total, count

    def _listed_size(self, prefix: str) -> tuple[int, int]:
        from zarr.core.sync import sync

        store = self._store

        async def run() -> tuple[int, int]:
            keys = [k async for k in store.list_prefix(prefix + "/" if prefix else "")]
            keys = [k for k in keys if k.rsplit("/", 1)[-1] not in _META_FILES]
            sizes = await asyncio.gather(*(store.getsize(k) for k in keys))
            return sum(sizes), len(keys)

        try:
            return sync(run())
        except (OSError, NotImplementedError, ValueError):
            return 0, 0

    def _entries(self) -> tuple[list[str], list[int]]:
        with self._lock:
            if self._entry_sizes is None:
                by_name = self._store.index.by_name  # type: ignore[attr-defined]
                names = sorted(n for n, e in by_name.items() if not e.is_dir)
                self._entry_sizes = (names, [by_name[n].compressed_size for n in names])
            return self._entry_sizes

    # -- archive -------------------------------------------------------------------------
    def archive(self) -> ArchiveFacts | None:
        """Facts about the ``.ozx`` container and its RFC-9 findings (None for a directory)."""
        if not self.is_ozx:
            return None
        with self._lock:
            if self._archive is not None:
                return self._archive
        from .ozx._zip import method_name
        from .ozx.validate import validate

        index = self._store.index  # type: ignore[attr-defined]
        methods = Counter(method_name(e.method) for e in index.entries if not e.is_dir)
        try:
            comment = index.comment.decode("utf-8")
        except UnicodeDecodeError:
            comment = repr(index.comment)
        findings: tuple[Any, ...] = ()
        err = None
        try:
            findings = tuple(validate(self._store).findings)
        except (OzxError, OSError, ValueError) as e:
            err = str(e)
        facts = ArchiveFacts(
            path=self.source,
            file_size=index.file_size,
            entries=len(index.entries),
            zip64=index.zip64,
            comment=comment,
            methods=dict(methods),
            duplicates=len(index.duplicates),
            stored_bytes=sum(e.compressed_size for e in index.entries),
            findings=findings,
            validation_error=err,
        )
        with self._lock:
            self._archive = facts
        return facts


def _codec_parts(c: Any) -> tuple[str, Mapping[str, Any]]:
    if isinstance(c, str):
        return c, {}
    if isinstance(c, Mapping):
        if "name" in c:
            conf = c.get("configuration")
            return str(c["name"]), conf if isinstance(conf, Mapping) else {}
        if "id" in c:  # numcodecs (Zarr v2)
            return str(c["id"]), {k: v for k, v in c.items() if k != "id"}
    return str(c), {}


def _describe_codec(c: Any) -> str:
    name, conf = _codec_parts(c)
    if name == "bytes":
        return f"bytes ({conf['endian']})" if conf.get("endian") else "bytes"
    if name in ("zstd", "gzip", "zlib"):
        return f"{name} level {conf['level']}" if "level" in conf else name
    if name == "blosc":
        cname = conf.get("cname", "?")
        level = conf.get("clevel", "?")
        shuffle = conf.get("shuffle")
        shuffle = (
            {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}.get(shuffle, shuffle)
            if shuffle is not None
            else None
        )
        return f"blosc {cname} level {level}" + (f" {shuffle}" if shuffle else "")
    if name == "transpose":
        return f"transpose {conf.get('order')}"
    return name
