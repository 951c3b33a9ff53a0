"""Writing tables: a ROI table in AnnData's Zarr layout, and an image's ``tables/`` carried
into a write (``convert``).

:func:`roi_table_keys` builds a ROI table as ngio 1.1 writes a ``RoiTable`` with its
default ``anndata`` backend, with zarr in memory in the image's Zarr format (no
``anndata`` dependency; ``tests/ngff/tables/test_tables_write.py`` compares it with
ngio's); :func:`tables_group_keys` the ``tables`` group's document. :class:`SourceTables`
/ :class:`TableCopy` carry a source's ``tables/`` into a write: documents planned with the
hierarchy's (RFC-9 order in an ``.ozx``), then chunks and files; byte for byte within a
Zarr format, rewritten by zarr across formats; a table that cannot be rewritten is left
out with a note in the ``WriteSummary``. The layout written, key by key:
``docs/design/tables.md``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.read.documents import join_path, run_sync

if TYPE_CHECKING:
    from zarr.abc.store import Store

logger = logging.getLogger(__name__)

__all__ = [
    "ROI_INDEX_KEY",
    "ROI_TABLE_ATTRIBUTES",
    "SourceTables",
    "TableCopy",
    "anndata_obs_keys",
    "memory_keys",
    "put_keys",
    "roi_table_keys",
    "source_tables",
    "tables_group_keys",
]

#: the index of ngio's ROI tables (the ROI names)
ROI_INDEX_KEY = "FieldIndex"
#: ngio's attributes of a ROI table group, after AnnData's encoding attributes
ROI_TABLE_ATTRIBUTES: dict[str, Any] = {
    "backend": "anndata",
    "index_key": ROI_INDEX_KEY,
    "index_type": "str",
    "table_version": "1",
    "type": "roi_table",
}
# AnnData's element encodings (anndata 0.12, as it writes them)
_ANNDATA: dict[str, Any] = {"encoding-type": "anndata", "encoding-version": "0.1.0"}
_DATAFRAME: dict[str, Any] = {"encoding-type": "dataframe", "encoding-version": "0.2.0"}
_ARRAY: dict[str, Any] = {"encoding-type": "array", "encoding-version": "0.2.0"}
_STRINGS: dict[str, Any] = {"encoding-type": "string-array", "encoding-version": "0.2.0"}
_DICT: dict[str, Any] = {"encoding-type": "dict", "encoding-version": "0.1.0"}
_STRING: dict[str, Any] = {"encoding-type": "string", "encoding-version": "0.2.0"}
_CATEGORICAL: dict[str, Any] = {"encoding-type": "categorical", "encoding-version": "0.2.0"}
_EMPTY_DICTS = ("layers", "obsm", "obsp", "uns", "varm", "varp")

#: chunks and files are copied this many at a time (one trip through zarr's event loop
#: each; a table's chunks are small, so a batch holds little)
_DATA_BATCH = 32
_V2_DOCS = (".zgroup", ".zarray", ".zattrs")
_V2_CONSOLIDATED = ".zmetadata"


def _format(zarr_format: int) -> Literal[2, 3]:
    if zarr_format not in (2, 3):
        raise OzxError(f"Zarr format {zarr_format} is neither 2 nor 3")
    return 2 if zarr_format == 2 else 3


def _is_doc(key: str) -> bool:
    base = key.rsplit("/", 1)[-1]
    return base == "zarr.json" or base in _V2_DOCS or base == _V2_CONSOLIDATED


def memory_keys(fill: Callable[[Any], object]) -> dict[str, bytes]:
    """The keys zarr writes when *fill* is given an in-memory store."""
    from zarr.storage import MemoryStore

    out: dict[str, Any] = {}
    fill(MemoryStore(out))
    return {k: v.to_bytes() for k, v in out.items()}


# ------------------------------------------------------------------------ ROI tables


def roi_table_keys(
    names: Sequence[str], columns: Mapping[str, np.ndarray], zarr_format: int
) -> dict[str, bytes]:
    """Every key of a ROI table group (relative to it) in AnnData's Zarr layout, as ngio
    writes a ``RoiTable`` (module doc): *names* the ROI names (the ``FieldIndex``),
    *columns* the float columns in their order (``x_micrometer`` ...)."""
    import zarr

    n = len(names)
    cols = list(columns)
    if any(len(np.asarray(columns[c])) != n for c in cols):
        raise OzxError("every ROI column needs one value per ROI")
    matrix = np.zeros((n, len(cols)), dtype=np.float64)
    for j, c in enumerate(cols):
        matrix[:, j] = np.asarray(columns[c], dtype=np.float64)

    def fill(store: Any) -> None:
        root = zarr.create_group(
            store, zarr_format=_format(zarr_format), attributes={**_ANNDATA, **ROI_TABLE_ATTRIBUTES}
        )
        obs = root.create_group(
            "obs", attributes={"column-order": [], "_index": ROI_INDEX_KEY, **_DATAFRAME}
        )
        _strings_array(obs, ROI_INDEX_KEY, [str(v) for v in names])
        var = root.create_group(
            "var", attributes={"column-order": [], "_index": "_index", **_DATAFRAME}
        )
        _strings_array(var, "_index", cols)
        x = root.create_array(
            "X",
            shape=matrix.shape,
            dtype=np.float64,
            chunks=tuple(max(s, 1) for s in matrix.shape),
            attributes=_ARRAY,
        )
        if matrix.size:
            x[...] = matrix
        for name in _EMPTY_DICTS:
            root.create_group(name, attributes=_DICT)

    return memory_keys(fill)


def _obs_column(g: Any, name: str, values: Any) -> None:
    """One ``obs`` column in AnnData's encoding: a pandas categorical as ``categorical``
    (``categories`` strings, ``codes``), strings as ``string-array``, numbers and
    booleans as ``array``. Raises :class:`OzxError` for anything else."""
    cats = getattr(getattr(values, "cat", None), "categories", None)
    if cats is not None:
        sub = g.create_group(name, attributes={"ordered": bool(values.cat.ordered), **_CATEGORICAL})
        _strings_array(sub, "categories", [str(c) for c in cats])
        codes = np.asarray(values.cat.codes)
        arr = sub.create_array(
            "codes",
            shape=codes.shape,
            dtype=codes.dtype,
            chunks=(max(len(codes), 1),),
            attributes=_ARRAY,
        )
        if len(codes):
            arr[...] = codes
        return
    col = np.asarray(values)
    if col.dtype.kind in "biuf":
        arr = g.create_array(
            name, shape=col.shape, dtype=col.dtype, chunks=(max(len(col), 1),), attributes=_ARRAY
        )
        if len(col):
            arr[...] = col
        return
    if col.dtype.kind == "U" or (
        col.dtype.kind == "O" and all(isinstance(v, str) for v in col.tolist())
    ):
        _strings_array(g, name, [str(v) for v in col.tolist()])
        return
    raise OzxError(
        f"column {name!r} holds {col.dtype} values; a table column holds numbers, "
        f"booleans, strings or categories"
    )


def _strings_array(g: Any, name: str, values: Sequence[str]) -> None:
    arr = g.create_array(
        name,
        shape=(len(values),),
        dtype=str,
        chunks=(max(len(values), 1),),
        attributes=_STRINGS,
    )
    if len(values):
        arr[...] = np.asarray(values, dtype=object)


def _uns_value(g: Any, name: str, value: Any) -> None:
    """One ``uns`` entry: a dict as a ``dict`` group, a string as a ``string`` scalar,
    a list of strings as a ``string-array`` (AnnData's encodings)."""
    if isinstance(value, Mapping):
        sub = g.create_group(name, attributes=_DICT)
        for k, v in value.items():
            _uns_value(sub, str(k), v)
    elif isinstance(value, str):
        arr = g.create_array(name, shape=(), dtype=str, attributes=_STRING)
        arr[()] = value
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        _strings_array(g, name, list(value))
    else:
        raise OzxError(f"uns entry {name!r}: only dicts, strings and lists of strings")


def anndata_obs_keys(
    index: Sequence[str],
    obs: Mapping[str, Any],
    *,
    uns: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """Every key (relative to the table group) of an AnnData table with no ``X``: the
    ``obs`` dataframe (*index* its row names, *obs* its columns in their order: pandas
    categoricals, strings, numbers or booleans), an empty ``var``, *uns* (nested dicts
    of strings and lists of strings) and the empty ``layers`` / ``obsm`` / ``obsp`` /
    ``varm`` / ``varp`` groups, each in the encoding anndata 0.12 writes; the group's
    own *attributes* after AnnData's. Zarr v3, zarr's default codecs."""
    import zarr

    n = len(index)
    for name, col in obs.items():
        if len(col) != n:
            raise OzxError(f"column {name!r} has {len(col)} values for {n} rows")

    def fill(store: Any) -> None:
        root = zarr.create_group(
            store, zarr_format=3, attributes={**_ANNDATA, **dict(attributes or {})}
        )
        cols = list(obs)
        g = root.create_group(
            "obs", attributes={"column-order": cols, "_index": "_index", **_DATAFRAME}
        )
        _strings_array(g, "_index", [str(i) for i in index])
        for name in cols:
            _obs_column(g, name, obs[name])
        var = root.create_group(
            "var", attributes={"column-order": [], "_index": "_index", **_DATAFRAME}
        )
        _strings_array(var, "_index", [])
        for name in _EMPTY_DICTS:
            if name == "uns":
                u = root.create_group("uns", attributes=_DICT)
                for k, v in (uns or {}).items():
                    _uns_value(u, k, v)
            else:
                root.create_group(name, attributes=_DICT)

    return memory_keys(fill)


def tables_group_keys(
    attributes: Mapping[str, Any] | None, name: str, zarr_format: int
) -> dict[str, bytes]:
    """The ``tables`` group's document(s) listing *name* too: its *attributes* as they
    are (``None``: a new group) with *name* appended to ``tables``. Zarr v2: ``.zattrs``
    only when the group exists (its ``.zgroup`` does not change)."""
    import zarr

    attrs = dict(attributes or {})
    listed = attrs.get("tables")
    listed = [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []
    if name not in listed:
        listed.append(name)
    attrs["tables"] = listed
    out = memory_keys(
        lambda s: zarr.create_group(s, zarr_format=_format(zarr_format), attributes=attrs)
    )
    if attributes is not None and zarr_format == 2:
        out.pop(".zgroup", None)
    return out


# ------------------------------------------------------------------ carrying tables


@dataclass(eq=False)
class SourceTables:
    """An image's (or plate's) ``tables/`` group in an opened source hierarchy, to be
    carried into a write (:class:`TableCopy`). *store* must stay open until the write
    is done (``convert`` writes inside its ``with open_ome_zarr(...)``)."""

    store: Store
    path: str  #: the tables group's path in the source ("tables", "B/3/0/tables")
    zarr_format: int
    source: str  #: the file or URL, for notes
    kind: str = "image"  #: what the tables belong to: "image" or "plate"
    #: per target Zarr format: (tables carried, notes), once planned
    _planned: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )

    @property
    def owner(self) -> str:
        """The image (or plate) the tables belong to, for notes."""
        parent = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
        return f"{self.kind} {parent!r}" if parent else f"the {self.kind}"

    def planned(self, zarr_format: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(tables carried, notes on tables left out) into a target of *zarr_format*:
        from the write when it happened, else planned now (reads the source)."""
        if zarr_format not in self._planned:
            TableCopy(self, "", zarr_format)
        return self._planned[zarr_format]


def source_tables(oz: Any, image: str, kind: str = "image") -> SourceTables | None:
    """The ``tables/`` group of the image (or, *kind* ``"plate"``, the plate) at *image*
    of an opened hierarchy *oz* (:class:`~napari_ozx.ngff.read.open.OmeZarr`), or ``None`` when it
    has none."""
    path = join_path(image, "tables")
    (docs,) = oz.read_docs([path])
    if docs is None:
        return None
    zf = int(docs.zarr_format or oz.zarr_format or 3)
    return SourceTables(oz.store, path, zf, oz.source, kind)


def _list_keys(store: Store, prefix: str) -> list[str]:
    async def listing() -> list[str]:
        return [k async for k in store.list_prefix(prefix)]

    return sorted(run_sync(listing()))


def _get(store: Store, key: str) -> bytes:
    from zarr.buffer import default_buffer_prototype

    buf = run_sync(store.get(key, prototype=default_buffer_prototype()))
    if buf is None:
        raise OzxError(f"{key} is listed but cannot be read")
    data: bytes = buf.to_bytes()
    return data


def _get_many(store: Store, keys: Sequence[str]) -> list[bytes]:
    """Several keys' bytes, read concurrently (one trip through zarr's event loop)."""
    from zarr.buffer import default_buffer_prototype

    proto = default_buffer_prototype()

    async def every() -> list[Any]:
        return list(await asyncio.gather(*(store.get(k, prototype=proto) for k in keys)))

    out = []
    for key, buf in zip(keys, run_sync(every()) if keys else [], strict=True):
        if buf is None:
            raise OzxError(f"{key} is listed but cannot be read")
        out.append(buf.to_bytes())
    return out


def put_keys(store: Store, items: Mapping[str, bytes]) -> None:
    """Store every key of *items* (concurrently, one trip through zarr's event loop)."""
    from zarr.buffer import default_buffer_prototype

    proto = default_buffer_prototype()

    async def every() -> None:
        await asyncio.gather(*(store.set(k, proto.buffer.from_bytes(v)) for k, v in items.items()))

    if items:
        run_sync(every())


class TableCopy:
    """One ``tables/`` subtree planned for a target of *zarr_format* under *prefix* (the
    image's path in the target): :attr:`documents` (target key -> bytes, every group and
    array document), written first, then :meth:`write_data` (chunks and files).

    Planning reads the source's listing and documents (and, across Zarr formats, every
    table's values, to know it converts). A table that cannot be carried is left out with
    a note (:attr:`notes`); a source that cannot be listed leaves all out, with a note."""

    def __init__(self, tables: SourceTables, prefix: str, zarr_format: int) -> None:
        self.tables = tables
        self.prefix = prefix
        self.zarr_format = zarr_format
        self.documents: dict[str, bytes] = {}
        self.notes: list[str] = []
        self.carried: list[str] = []
        self._data: list[str] = []  # source keys copied as they are
        self._converted: list[str] = []  # table names rewritten in the target format
        self._plan()
        tables._planned[zarr_format] = (tuple(self.carried), tuple(self.notes))

    # -- planning -------------------------------------------------------------------

    def _target(self, rel: str) -> str:
        return join_path(self.prefix, "tables", rel)

    def _note(self, name: str, why: str) -> None:
        t = self.tables
        self.notes.append(f"table {name!r} of {t.owner} not carried over: {why}")
        logger.warning("%s: table %r of %s not carried over: %s", t.source, name, t.owner, why)

    def _plan(self) -> None:
        t = self.tables
        lead = t.path + "/"
        try:
            keys = [k[len(lead) :] for k in _list_keys(t.store, lead)]
        except (OSError, NotImplementedError) as e:
            why = f"the source's tables cannot be listed ({type(e).__name__}: {e})"
            self.notes.append(f"the tables of {t.owner} not carried over: {why}")
            logger.warning("%s: tables of %s not carried over: %s", t.source, t.owner, why)
            return
        by_table: dict[str, list[str]] = {}
        for rel in keys:
            head, _, rest = rel.partition("/")
            by_table.setdefault(head if rest else "", []).append(rel)
        own = by_table.pop("", [])
        listed = self._listed(own)
        # the listed tables in their order, then anything else in the group
        names = [n for n in listed if n in by_table] + sorted(
            n for n in by_table if n not in listed
        )
        same = t.zarr_format == self.zarr_format
        for name in names:
            rels = by_table[name]
            if same:
                self._copy_documents(rels)
                self.carried.append(name)
                continue
            try:
                converted = _convert_subtree(t, name, rels, self.zarr_format)
            except Exception as e:  # zarr's and numcodecs' errors are of many types
                logger.debug("table %r not converted", name, exc_info=True)
                self._note(name, _reason(e, self.zarr_format))
                continue
            for rel, data in converted.items():
                if _is_doc(rel):
                    self.documents[self._target(rel)] = data
            self._converted.append(name)
            self.carried.append(name)
        # the tables group itself
        if same:
            self._copy_documents(own)
        else:
            attrs = _group_attributes(t, own)
            dropped = {n for n in names if n not in self.carried}
            if isinstance(attrs.get("tables"), list) and dropped:
                attrs["tables"] = [n for n in attrs["tables"] if n not in dropped]
            for rel, data in _group_keys(attrs, self.zarr_format).items():
                self.documents[self._target(rel)] = data
            self._data.extend(rel for rel in own if not _is_doc(rel))

    def _copy_documents(self, rels: Sequence[str]) -> None:
        """Same Zarr format: *rels*' documents planned as they are, the rest copied with
        the data."""
        t = self.tables
        docs = [rel for rel in rels if _is_doc(rel)]
        values = _get_many(t.store, [f"{t.path}/{rel}" for rel in docs])
        for rel, data in zip(docs, values, strict=True):
            self.documents[self._target(rel)] = data
        self._data.extend(rel for rel in rels if not _is_doc(rel))

    def _listed(self, own: Sequence[str]) -> list[str]:
        try:
            names = _group_attributes(self.tables, own).get("tables")
        except (OzxError, ValueError):
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    # -- writing --------------------------------------------------------------------

    def write_documents(self, store: Store) -> None:
        """Every planned document into *store* (before any data of the write)."""
        put_keys(store, self.documents)

    def write_data(self, store: Store) -> None:
        """Every chunk and file: copied byte for byte (same format) or re-encoded (across
        formats), one table at a time."""
        t = self.tables
        lead = t.path + "/"
        for i in range(0, len(self._data), _DATA_BATCH):
            batch = self._data[i : i + _DATA_BATCH]
            values = _get_many(t.store, [f"{lead}{r}" for r in batch])
            put_keys(store, {self._target(r): v for r, v in zip(batch, values, strict=True)})
        if not self._converted:
            return
        keys = [k[len(lead) :] for k in _list_keys(t.store, lead)]
        for name in self._converted:
            rels = [r for r in keys if r.startswith(name + "/")]
            converted = _convert_subtree(t, name, rels, self.zarr_format)
            put_keys(
                store,
                {self._target(rel): v for rel, v in converted.items() if not _is_doc(rel)},
            )


def _reason(e: BaseException, zarr_format: int) -> str:
    text = str(e) or type(e).__name__
    return f"it cannot be rewritten as Zarr v{zarr_format} ({text})"


def _doc_json(t: SourceTables, key: str) -> dict[str, Any]:
    try:
        doc = json.loads(_get(t.store, key))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OzxError(f"{key} is not a JSON document ({e})") from None
    if not isinstance(doc, dict):
        raise OzxError(f"{key} is not a JSON object")
    return doc


def _group_attributes(t: SourceTables, own: Sequence[str]) -> dict[str, Any]:
    """The attributes of the tables group (its own document keys *own*)."""
    if t.zarr_format == 3:
        if "zarr.json" not in own:
            return {}
        attrs = _doc_json(t, f"{t.path}/zarr.json").get("attributes", {})
    else:
        attrs = _doc_json(t, f"{t.path}/.zattrs") if ".zattrs" in own else {}
    return dict(attrs) if isinstance(attrs, dict) else {}


def _group_keys(attrs: Mapping[str, Any], zarr_format: int) -> dict[str, bytes]:
    import zarr

    return memory_keys(
        lambda s: zarr.create_group(s, zarr_format=_format(zarr_format), attributes=dict(attrs))
    )


def _nodes(t: SourceTables, rels: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The zarr nodes among *rels* (keys relative to the tables group): node path ->
    "group" / "array", and the keys that belong to no node's documents or chunks (plain
    files: ``table.parquet``, ``table.csv``)."""
    nodes: dict[str, str] = {}
    present = set(rels)
    for rel in rels:
        node, _, base = rel.rpartition("/")
        if t.zarr_format == 3 and base == "zarr.json":
            kind = _doc_json(t, f"{t.path}/{rel}").get("node_type")
            if kind not in ("group", "array"):
                raise OzxError(f"{rel} has node_type {kind!r}")
            nodes[node] = str(kind)
        elif t.zarr_format == 2 and base in _V2_DOCS:
            if base == ".zarray":
                nodes[node] = "array"
            elif node not in nodes and f"{node}/.zarray" not in present:
                nodes[node] = "group"
    arrays = [n for n, k in nodes.items() if k == "array"]
    files = []
    for rel in rels:
        if _is_doc(rel):
            continue
        if any(rel.startswith(a + "/") for a in arrays):
            continue  # a chunk: re-encoded
        files.append(rel)
    return nodes, files


def _convert_subtree(
    t: SourceTables, name: str, rels: Sequence[str], zarr_format: int
) -> dict[str, bytes]:
    """Table *name* (its keys *rels*, relative to the tables group) rewritten in
    *zarr_format*: every group with its attributes, every array with its values, data
    type, fill value, chunk shape and attributes (zarr's default codecs), plain files as
    they are. Keys relative to the tables group."""
    import zarr

    nodes, files = _nodes(t, rels)
    if name not in nodes:
        raise OzxError("it is not a group (no group document)")

    def fill(store: Any) -> None:
        for node in sorted(nodes, key=lambda p: (p.count("/"), p)):
            src_path = f"{t.path}/{node}"
            if nodes[node] == "group":
                g = zarr.open_group(
                    store=t.store,
                    path=src_path,
                    mode="r",
                    zarr_format=_format(t.zarr_format),
                )
                zarr.create_group(
                    store, path=node, zarr_format=_format(zarr_format), attributes=g.attrs.asdict()
                )
                continue
            a = zarr.open_array(
                store=t.store,
                path=src_path,
                mode="r",
                zarr_format=_format(t.zarr_format),
            )
            values = a[...]
            chunks = a.shards or a.chunks
            b = zarr.create_array(
                store,
                name=node,
                shape=a.shape,
                dtype=a.metadata.dtype,
                chunks=tuple(max(int(c), 1) for c in chunks) if a.shape else "auto",
                fill_value=a.fill_value,
                attributes=a.attrs.asdict(),
                zarr_format=_format(zarr_format),
            )
            if a.size:
                b[...] = values
            back = b[...]
            if not _same_values(values, back):
                raise OzxError(f"array {node!r} reads back different values")

    out = memory_keys(fill)
    for rel in files:
        out[rel] = _get(t.store, f"{t.path}/{rel}")
    return out


def _same_values(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in ("f", "c"):
        return bool(np.array_equal(a, b, equal_nan=True))
    if a.dtype.kind in ("O", "U", "T", "S") or b.dtype.kind in ("O", "U", "T", "S"):
        return [str(v) for v in a.ravel().tolist()] == [str(v) for v in b.ravel().tolist()]
    return bool(np.array_equal(a, b))
