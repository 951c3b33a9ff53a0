"""Open an OME-Zarr hierarchy (directory or ``.ozx``) lazily.

``open_ome_zarr(source)`` reads metadata only: each node's ``zarr.json`` (or ``.zattrs``
/ ``.zarray`` for Zarr v2) once, concurrently where there are several, through our own
metadata pass (:mod:`~napari_ozx.ngff.model.extensions`) and typed models
(:mod:`~napari_ozx.ngff.model.metadata`). Arrays are built from those parsed documents, so
zarr-python does not read them again, and every pyramid level is exposed as a dask array whose
chunks follow the Zarr (inner) chunks. Nothing reads pixel data until a chunk is computed; then
:mod:`.fastread` reads it directly where it can (zarr-python otherwise).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from napari_ozx.errors import (
    ChunkDecodeError,
    MetadataError,
    NotOmeZarrError,
    OzxError,
    UnsupportedExtensionError,
)
from napari_ozx.ngff.model.axes import is_spatial
from napari_ozx.ngff.model.extensions import NodeExtensions
from napari_ozx.ngff.model.metadata import (
    Multiscale,
    NodeMetadata,
    is_collection_document,
    parse_node_attributes,
    with_implied_scales,
)
from napari_ozx.ngff.read.documents import (
    NodeDocuments,
    child_names,
    join_path,
    read_documents,
    remote_directory,
)
from napari_ozx.ozx.protocol import as_container
from napari_ozx.ozx.rfc9 import ARCHIVE_SUFFIXES

if TYPE_CHECKING:
    import dask.array as da
    import zarr
    from zarr.abc.store import Store

    from napari_ozx.ngff.read.collection import OpenedCollection

logger = logging.getLogger(__name__)

__all__ = [
    "ArrayNode",
    "GroupNode",
    "Image",
    "OmeZarr",
    "array_node",
    "join_path",
    "open_ome_zarr",
    "open_store",
    "transform_points",
]

# below this many bytes a dask chunk costs more in scheduling than in reading
_MIN_DASK_CHUNK_BYTES = 4 << 20  # see _dask_chunks
_MAX_DASK_CHUNKS = 1 << 18
MAX_CHUNKS_PER_AXIS = 1 << 24


# ----------------------------------------------------------------------- stores


def open_store(source: str | os.PathLike[str] | Store) -> Store:
    """A read-only zarr store for a local directory or ``.ozx``/``.zip`` file."""
    from zarr.abc.store import Store

    if isinstance(source, Store):
        return source
    from napari_ozx.ozx.remote import is_url

    if is_url(source):
        from napari_ozx.ozx.remote.store import open_remote_store

        return open_remote_store(str(source))
    path = Path(source)
    if path.is_dir():
        from zarr.storage import LocalStore

        return LocalStore(path, read_only=True)
    if path.is_file():
        from napari_ozx.ozx.store import OzxStore

        return OzxStore(path)
    if path.exists():
        raise OzxError(f"{path}: not a regular file or directory")
    raise FileNotFoundError(f"{path}: no such file or directory")


# ------------------------------------------------------------------------ nodes


@dataclass(frozen=True)
class _Node:
    """Where a node is: its store, its path in it and the Zarr format of its document."""

    store: Store = field(repr=False)
    path: str
    zarr_format: int


@dataclass(frozen=True)
class ArrayNode(_Node):
    """One Zarr array: its parsed document and a lazily built zarr array."""

    document: Mapping[str, Any] = field(repr=False)
    extensions: NodeExtensions = field(default_factory=NodeExtensions)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.document["shape"])

    @cached_property
    def array(self) -> zarr.Array:
        import zarr
        from zarr import AsyncArray
        from zarr.storage import StorePath

        try:
            aa = AsyncArray(
                metadata=cast(Any, dict(self.document)),
                store_path=StorePath(self.store, self.path),
            )
        except OzxError:
            raise
        except Exception as e:  # zarr's refusal of a codec, data type, grid ...
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            feature = unsupported_feature(self.document, self.zarr_format)
            if feature is not None:
                raise UnsupportedExtensionError(
                    f"{feature} ({msg})", self.path, "array feature"
                ) from e
            raise MetadataError(f"{self.path}: invalid array metadata: {msg}") from e
        arr = zarr.Array(aa)
        limit = getattr(self.store, "limit_inflate", None)
        if limit is not None:
            limit(join_path(self.path, ""), _max_encoded_chunk(arr))
        return arr

    @property
    def chunks(self) -> tuple[int, ...]:
        """The shape of the unit zarr decodes: inner chunks when sharded."""
        a = self.array
        return tuple(a.chunks)

    @property
    def shards(self) -> tuple[int, ...] | None:
        return self.array.shards

    def dask(self, name_token: str, source: str = "") -> da.Array:

        a = self.array
        chunks = _dask_chunks(a.shape, a.chunks, a.shards, a.dtype.itemsize)
        counts = [-(-s // c) if c else 0 for s, c in zip(a.shape, chunks, strict=True)]
        if any(n > MAX_CHUNKS_PER_AXIS for n in counts):
            raise MetadataError(
                f"{self.path}: shape {a.shape} needs {counts} chunks per axis: too many to index"
            )
        name = "ozx-" + hashlib.sha1(f"{name_token}/{self.path}".encode()).hexdigest()[:16]
        reader = _ChunkReader(a, source or name_token, name)
        from napari_ozx.ngff.read.live import (
            register,  # a save over this directory re-points the reader
        )

        register(reader, self.store)
        from napari_ozx.ngff.read.lazy import lazy_array  # napari's tiles read reader[box] directly

        # fancy=True: dask then fuses a slice of a chunk into the chunk's own read (dask's
        # getter_nofancy path never does), so a tile of a large dask chunk reads only the
        # inner chunks it touches (ngff.fastread)
        return lazy_array(reader, chunks, name, a.dtype, fancy=True)


def _browse(levels: list[Any], channel_axis: int | None, active: list[int] | None) -> None:
    """Remote levels read directly: one :class:`~napari_ozx.ngff.read.browse.Browse` for the
    image, which fetches a plane's sibling reads and reads ahead (see there)."""
    from napari_ozx.ngff.read.lazy import source_reader

    chunk_readers = [source_reader(lv) for lv in levels]
    fast = [getattr(r, "reader", None) for r in chunk_readers]
    if not fast or not all(getattr(f, "remote", False) for f in fast):
        return
    from napari_ozx.ngff.read.browse import Browse

    browse = Browse(fast, channel_axis, active)
    for i, r in enumerate(chunk_readers):
        r.browse = (browse, i)


def array_node(store: Store, source: str, docs: NodeDocuments) -> ArrayNode:
    """The ArrayNode of an array's documents, its shape and fill value checked first."""
    validate_array_document(docs.checked, f"{source}:{docs.path}")
    return ArrayNode(store, docs.path, docs.zarr_format, docs.checked, docs.extensions)


def unsupported_feature(doc: Mapping[str, Any], zarr_format: int) -> str | None:
    """What in an array document this zarr-python cannot handle although it may be valid
    (a codec, data type, chunk grid or key encoding it has no implementation of), asked
    of zarr's and numcodecs' public registries; None when all are known (a refusal is
    then invalid metadata)."""
    if zarr_format == 2:
        import numcodecs

        for conf in [doc.get("compressor"), *(doc.get("filters") or [])]:
            if isinstance(conf, dict):
                try:
                    numcodecs.get_codec(dict(conf))
                except Exception:
                    return f"unknown codec {conf.get('id')!r}"
        return None
    from zarr.registry import data_type_registry, get_chunk_key_encoding_class, get_codec_class

    def named(x: Any) -> str | None:
        return x if isinstance(x, str) else x.get("name") if isinstance(x, dict) else None

    def codecs(items: Any) -> Iterator[str]:
        for c in items if isinstance(items, list) else []:
            name = named(c)
            if name is not None:
                yield name
            conf = c.get("configuration") if isinstance(c, dict) else None
            if isinstance(conf, dict):  # sharding's inner and index codecs
                yield from codecs(conf.get("codecs"))
                yield from codecs(conf.get("index_codecs"))

    for name in codecs(doc.get("codecs")):
        try:
            get_codec_class(name)
        except Exception:
            return f"unknown codec {name!r}"
    try:
        data_type_registry.match_json(doc.get("data_type"), zarr_format=3)
    except Exception:
        return f"unknown data type {named(doc.get('data_type'))!r}"
    transformers = doc.get("storage_transformers")
    if isinstance(transformers, list) and transformers:  # zarr-python reads none yet
        return "storage transformers " + ", ".join(repr(named(t)) for t in transformers)
    grid = named(doc.get("chunk_grid"))
    if grid is not None and grid != "regular":
        return f"chunk grid {grid!r}"
    encoding = named(doc.get("chunk_key_encoding"))
    if encoding is not None:
        try:
            get_chunk_key_encoding_class(encoding)
        except Exception:
            return f"unknown chunk key encoding {encoding!r}"
    return None


def validate_array_document(doc: Mapping[str, Any], where: str) -> None:
    """What zarr would misreport or crash on: shape and fill_value, checked first."""
    shape = doc.get("shape")
    if not isinstance(shape, list | tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise MetadataError(
            f"{where}: invalid array shape {shape!r} (expected non-negative integers)"
        )
    names = doc.get("dimension_names")
    if names is not None and (
        not isinstance(names, list) or not all(n is None or isinstance(n, str) for n in names)
    ):
        raise MetadataError(
            f"{where}: invalid dimension_names {names!r} (expected a list of names or nulls)"
        )
    for key in ("chunk_grid", "chunk_key_encoding"):
        value = doc.get(key)
        if value is not None and not isinstance(value, Mapping | str):
            raise MetadataError(f"{where}: invalid {key} {value!r} (expected an object)")
    if doc.get("zarr_format") == 3:
        grid = doc.get("chunk_grid")
        conf = grid.get("configuration") if isinstance(grid, Mapping) else None
        chunk = conf.get("chunk_shape") if isinstance(conf, Mapping) else None
        regular = not isinstance(grid, Mapping) or grid.get("name", "regular") == "regular"
        if regular and (
            not isinstance(chunk, list)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in chunk)
        ):
            raise MetadataError(
                f"{where}: invalid chunk_grid {grid!r} (expected a regular grid with a "
                "chunk_shape of positive integers)"
            )
        codecs = doc.get("codecs", [])
        if not isinstance(codecs, list):
            raise MetadataError(f"{where}: invalid codecs {codecs!r} (expected a list)")
        for c in codecs:
            if not isinstance(c, Mapping) or c.get("name") != "sharding_indexed":
                continue
            conf = c.get("configuration")
            if not isinstance(conf, Mapping):
                raise MetadataError(f"{where}: invalid sharding_indexed configuration {conf!r}")
            inner = conf.get("chunk_shape")
            if (
                not isinstance(inner, list)
                or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in inner)
                or not all(isinstance(conf.get(k, []), list) for k in ("codecs", "index_codecs"))
            ):
                raise MetadataError(f"{where}: invalid sharding_indexed configuration {conf!r}")
    dtype = str(doc.get("data_type") or doc.get("dtype") or "")
    fv = doc.get("fill_value")
    if fv is None or not dtype:
        return
    kind = dtype.lstrip("<>|=")[:1]
    ok = True
    if dtype == "bool" or kind == "b":
        ok = isinstance(fv, bool | int)
    elif dtype.startswith(("int", "uint")) or kind in ("i", "u"):
        ok = isinstance(fv, int) and not isinstance(fv, bool)
    elif dtype.startswith("float") or kind == "f":
        ok = (isinstance(fv, int | float) and not isinstance(fv, bool)) or (
            isinstance(fv, str) and (fv in ("NaN", "Infinity", "-Infinity") or fv.startswith("0x"))
        )
    if not ok:
        raise MetadataError(f"{where}: invalid fill_value {fv!r} for data type {dtype}")


def _max_encoded_chunk(arr: zarr.Array) -> int:
    """The most bytes one stored chunk (or shard) of ``arr`` can honestly take: its
    decoded size, plus what compressors may add on incompressible data (under 1/8 here;
    zstd/blosc/deflate add far less), a 16-byte index entry per inner chunk and 64 KiB of
    headers. A member declaring more is refused before it is inflated."""
    outer = arr.shards or arr.chunks
    inner = arr.chunks
    itemsize = max(int(getattr(arr.dtype, "itemsize", 0) or 0), 1)
    raw = math.prod(outer) * itemsize
    n_inner = math.prod(-(-o // max(i, 1)) for o, i in zip(outer, inner, strict=True))
    return raw + raw // 8 + 16 * n_inner + (64 << 10)


def _dask_chunks(
    shape: Sequence[int], chunks: Sequence[int], shards: Sequence[int] | None, itemsize: int
) -> tuple[int, ...]:
    """Dask chunks = Zarr read chunks, grown along the last (y, x) axes to ~4 MiB (and
    while the array would have more than :data:`_MAX_DASK_CHUNKS` of them), never past
    a shard (so one dask task never straddles two shards).

    Why large: dask's cost per task and per compute is a multiple of a chunk's decode, so
    a plane in small tasks is slower than in large ones (benchmarks/bench_compiled.py).
    Why that does not
    slow tiles: napari's views of a level (:class:`~.lazy.LazyArray`) read their box
    directly, without dask's tasks, and :mod:`.fastread` decodes only the inner chunks
    the box touches. Computations that do go through dask (``da.stack``, writes) fuse a
    slice into the chunk read (``fancy=True``) when dask's task fusion is on; napari
    turns fusion off, and then a 256x256 tile of a 1024x1024 dask chunk read all 16
    inner chunks, which is why napari no longer goes through the scheduler.
    """
    out = [max(min(c, s), 1) for c, s in zip(chunks, shape, strict=True)]  # 0-size axes
    limit = list(shards) if shards else list(shape)
    limit = [min(lv, s) for lv, s in zip(limit, shape, strict=True)]
    nbytes = int(np.prod(out)) * itemsize
    count = int(np.prod([-(-s // c) if c else 0 for s, c in zip(shape, out, strict=True)]))
    grew = True
    while grew and (nbytes < _MIN_DASK_CHUNK_BYTES or count > _MAX_DASK_CHUNKS):
        grew = False
        for ax in (len(out) - 1, len(out) - 2):  # x and y in turn: square tiles
            if (
                ax >= 0
                and (nbytes < _MIN_DASK_CHUNK_BYTES or count > _MAX_DASK_CHUNKS)
                and out[ax] * 2 <= limit[ax]
                and limit[ax] % (out[ax] * 2) == 0
            ):
                count = count // (-(-shape[ax] // out[ax])) * (-(-shape[ax] // (out[ax] * 2)))
                out[ax] *= 2
                nbytes *= 2
                grew = True
    return tuple(out)


class _ChunkReader:
    """The zarr array as dask sees it: the same reads, but a chunk that fails to decode
    raises :class:`ChunkDecodeError` naming the source, the array and the chunk, instead
    of zarr's bare ``RuntimeError``/``ValueError`` (never garbage pixels either way)."""

    def __init__(self, array: zarr.Array, source: str, token: str = "") -> None:
        self.array = array
        self.source = source
        self.token = token or f"{source}/{array.path}"
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim
        from napari_ozx.ngff.read.fastread import fast_reader

        self.reader: Any = fast_reader(array) or array
        #: (the image's Browse, this level) for remote images read directly (``_browse``)
        self.browse: tuple[Any, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["browse"] = None  # napari's browsing is this process's (dask workers read)
        return state

    def __dask_tokenize__(self) -> tuple[str, str]:
        # dask's query planning tokenises every operand, by default by pickling it and
        # loading it back (a remote store would be reopened each time): the opened
        # source and the array's path identify what it reads
        return ("ozx-chunk-reader", self.token)

    def __getitem__(self, sel: Any) -> Any:
        sel = sel if isinstance(sel, tuple) else (sel,)
        fancy = [isinstance(s, list | np.ndarray) for s in sel]
        try:
            if not any(fancy):
                return self.reader[sel]
            # dask (fancy=True) may hand over integer lists: read the box, then take
            # along each such axis (orthogonal, as dask means it)
            box = tuple(slice(None) if f else s for s, f in zip(sel, fancy, strict=False))
            out = np.asarray(self.reader[box])
            axis = 0
            for s, f in zip(sel, fancy, strict=False):
                if f:
                    out = np.take(out, np.asarray(s), axis=axis)
                if not isinstance(s, int | np.integer):
                    axis += 1
            return out
        except ChunkDecodeError as e:  # from the direct path (.chunks): name where
            raise self._decode_error(sel, str(e)) from e
        except OzxError:
            raise
        except Exception as e:  # zarr-python's codec / checksum / short-data failures
            raise self._decode_error(sel, f"{type(e).__name__}: {e}") from e

    def _decode_error(self, sel: Any, reason: str) -> ChunkDecodeError:
        kind = "shard" if self.array.shards else "chunk"
        return ChunkDecodeError(
            f"{self.source}: {self._key(sel)}: {kind} data could not be decoded ({reason})"
        )

    def _key(self, sel: Any) -> str:
        """The stored key (shard or chunk) where the failed selection starts."""
        a = self.array
        grid = a.shards or a.chunks
        starts = [
            s.start or 0 if isinstance(s, slice) else int(s) if np.ndim(s) == 0 else 0
            for s in (sel if isinstance(sel, tuple) else (sel,))
        ]
        starts += [0] * (a.ndim - len(starts))
        coords = tuple(st // g for st, g in zip(starts, grid, strict=True))
        key = a.metadata.encode_chunk_key(coords)
        prefix = a.path.strip("/")
        return f"{prefix}/{key}" if prefix else key


@dataclass(frozen=True)
class GroupNode(_Node):
    """One Zarr group: its attributes and the OME metadata parsed from them."""

    attributes: Mapping[str, Any] = field(repr=False)
    meta: NodeMetadata
    extensions: NodeExtensions = field(default_factory=NodeExtensions)


@dataclass
class Image:
    """A multiscale image (or label image): metadata plus one lazy array per level.

    Made by :meth:`OmeZarr.images` / :meth:`OmeZarr.image`; :attr:`levels` are the arrays
    napari shows, :attr:`labels` its label images.

    Parameters
    ----------
    root : OmeZarr
        The hierarchy it belongs to.
    group : GroupNode
        Its group (path, attributes, parsed metadata).
    multiscale : Multiscale
        Its parsed multiscale metadata.
    arrays : list of ArrayNode
        One per level, finest first.
    crops : list of tuple of int or None, optional
        Per level, the shape a padded level is cropped to (webknossos), else None.
    ome_xml : optional
        What bioformats2raw's OME-XML says of this image (:mod:`.omexml`), or None.
    """

    root: OmeZarr = field(repr=False)
    group: GroupNode
    multiscale: Multiscale
    arrays: list[ArrayNode] = field(repr=False)
    #: per level, the shape a padded level is cropped to (webknossos), else None
    crops: list[tuple[int, ...] | None] = field(default_factory=list, repr=False)
    #: what bioformats2raw's OME-XML says of this image (``ngff.read.omexml``), or None
    ome_xml: Any = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return self.group.path

    @property
    def meta(self) -> NodeMetadata:
        return self.group.meta

    @property
    def name(self) -> str:
        if self.meta.image_label is not None or self.path.split("/")[-2:-1] == ["labels"]:
            # a label image opened on its own is the root: it is named after the source
            return self.path.rsplit("/", 1)[-1] or self.root.name
        if self.multiscale.name:
            return self.multiscale.name
        if self.meta.omero and self.meta.omero.name:
            return self.meta.omero.name
        return self.path.rsplit("/", 1)[-1] if self.path else self.root.name

    @cached_property
    def levels(self) -> list[da.Array]:
        token = self.root.token
        out = []
        for i, a in enumerate(self.arrays):
            lvl = a.dask(token, self.root.source)
            crop = self.crops[i] if i < len(self.crops) else None
            out.append(lvl if crop is None else lvl[tuple(slice(0, n) for n in crop)])
        omero = self.meta.omero
        active = None
        if omero is not None and omero.channels:
            active = [i for i, ch in enumerate(omero.channels) if ch.active]
        _browse(out, self.multiscale.channel_axis, active)
        return out

    @property
    def dtype(self) -> np.dtype:
        return self.arrays[0].array.dtype

    @cached_property
    def labels(self) -> list[Image]:
        """Label images listed by ``<image>/labels`` (empty when there are none)."""
        lpath = join_path(self.path, "labels")
        grp = self.root._group_or_none(lpath)
        if grp is None or not grp.meta.labels:
            return []
        out = []
        for name in grp.meta.labels:
            try:
                img = self.root.image(join_path(lpath, name, key="labels"))
            except (OzxError, OSError) as e:
                logger.warning("%s: label image %r skipped: %s", self.root.source, name, e)
                continue
            out.append(img)
        return out


class OmeZarr:
    """An opened OME-Zarr hierarchy: its metadata read once, its images with lazy levels.

    Made by :func:`open_ome_zarr`; a context manager (:meth:`close`).

    Parameters
    ----------
    store : zarr.abc.store.Store
        The store the hierarchy is read from.
    source : str
        Its path or URL, for messages and pickling.
    owns_store : bool, default True
        Close *store* when the hierarchy is closed.
    """

    def __init__(self, store: Store, source: str, owns_store: bool = True) -> None:
        self.store = store
        self.source = source
        self._owns_store = owns_store
        self.zarr_format: int | None = None
        #: node path -> its documents, read once (the opener, plates and the reader's
        #: rule check all ask for the same nodes; metadata is a snapshot taken at open)
        self._docs: dict[str, NodeDocuments | None] = {}
        self._docs_lock = threading.Lock()
        self.root = self.group("")
        #: an RFC-8 collection root, shown as a 0.6 scene (:mod:`.collection`)
        self.collection: OpenedCollection | None = None
        if is_collection_document(self.root.attributes.get("ome")):
            from napari_ozx.ngff.read.collection import open_collection

            g = self.root
            self.collection = open_collection(self.source, g.attributes.get("ome"))
            meta = self.collection.meta
            self.root = GroupNode(g.store, "", g.zarr_format, g.attributes, meta, g.extensions)

    # -- identity ------------------------------------------------------------
    @property
    def name(self) -> str:
        base = os.path.basename(self.source.rstrip("/\\")) or self.source
        for suf in (".ome.zarr", ".zarr", *ARCHIVE_SUFFIXES):
            if base.lower().endswith(suf) and len(base) > len(suf):
                return base[: -len(suf)]
        return base

    @cached_property
    def token(self) -> str:
        """Identifies this version of the data (dask names, caches)."""
        try:
            st = os.stat(self.source)
            return f"{os.path.abspath(self.source)}:{st.st_mtime_ns}:{st.st_size}"
        except OSError:
            return f"{self.source}:{id(self)}"

    # -- metadata --------------------------------------------------------------
    def read_docs(
        self, paths: Sequence[str], kind: Literal["group", "ome-group", "array"] | None = None
    ) -> list[NodeDocuments | None]:
        """For each node path its documents (:mod:`.documents`), or None if absent.

        All nodes are read concurrently; Zarr v3 is tried first (0.5 preferred over 0.4,
        RFC-2), then v2 once the hierarchy is known to be v2. A node's document problems
        are its ``error``, raised by :meth:`make_group` / :meth:`make_array`. *kind*: see
        :func:`.documents.read_documents`.
        """
        with self._docs_lock:
            todo = [p for p in dict.fromkeys(paths) if p not in self._docs]
        if todo:
            read = read_documents(self.store, todo, self.zarr_format, kind)
            with self._docs_lock:
                for p, docs in zip(todo, read, strict=True):
                    self._docs.setdefault(p, docs)
        with self._docs_lock:
            return [self._docs[p] for p in paths]

    def group(self, path: str) -> GroupNode:
        g = self._group_or_none(path)
        if g is None:
            raise NotOmeZarrError(
                f"{self.source}: no Zarr group at {path or '/'!r}"
                f"{self._why_no_root() if not path else ''}"
            )
        return g

    def _why_no_root(self) -> str:
        """For an archive without a root zarr.json: what it holds instead (RFC-9)."""
        container = as_container(self.store)
        return "" if container is None else f": {container.missing_root_reason()}"

    def _group_or_none(self, path: str) -> GroupNode | None:
        (res,) = self.read_docs([path])
        return None if res is None else self.make_group(path, res)

    def make_group(self, path: str, docs: NodeDocuments) -> GroupNode:
        """A GroupNode from one ``read_docs`` result (raises the node's document error)."""
        if self.zarr_format is None:
            self.zarr_format = docs.zarr_format
        docs.raise_error()
        if docs.node_type != "group":
            raise NotOmeZarrError(f"{self.source}:{path or '/'} is an array, not an OME-Zarr group")
        meta = parse_node_attributes(docs.attributes, docs.zarr_format, node=path)
        return GroupNode(self.store, path, docs.zarr_format, docs.attributes, meta, docs.extensions)

    def arrays(self, paths: Sequence[str]) -> list[ArrayNode]:
        return [
            self.make_array(p, res) for p, res in zip(paths, self.read_docs(paths), strict=True)
        ]

    def make_array(self, p: str, docs: NodeDocuments | None) -> ArrayNode:
        """An ArrayNode from one ``read_docs`` result (batch readers such as plates)."""
        if docs is None:
            raise MetadataError(f"{self.source}: pyramid level {p!r} is missing")
        docs.raise_error()
        if docs.node_type != "array":
            raise MetadataError(f"{self.source}: {p!r} is a group, expected an array")
        return array_node(self.store, self.source, docs)

    def image(self, path: str, group: GroupNode | None = None) -> Image:
        group = group or self.group(path)
        if not group.meta.multiscales:
            raise NotOmeZarrError(f"{self.source}: {path or '/'!r} is not a multiscale image")
        ms = group.meta.multiscales[0]
        levels = [join_path(path, d.path, key="datasets path") for d in ms.datasets]
        if remote_directory(self.store) and group.meta.image_label is None:
            # a remote directory: the image's labels/ and tables/ groups, read later, come
            # in the same round trip as its levels (an absent one is one quick 404)
            self.read_docs([*levels, join_path(path, "labels"), join_path(path, "tables")])
        arrays = self.arrays(levels)
        if ms.version in ("0.1", "0.2") and arrays and arrays[0].document.get("shape"):
            # axes are implied by the dimensionality: re-parse with the real ndim
            ndim = len(arrays[0].shape)
            if ndim != ms.ndim:
                meta = parse_node_attributes(group.attributes, group.zarr_format, path, ndim)
                group = GroupNode(
                    group.store, path, group.zarr_format, group.attributes, meta, group.extensions
                )
                ms = meta.multiscales[0]
        if ms.version in ("0.1", "0.2", "0.3"):
            ms = with_implied_scales(ms, [a.shape for a in arrays])
        _check_space_axes(self.source, path, ms)
        crops = _check_levels(self.source, path, ms, arrays)
        for a in arrays:  # fail now, not at first draw, on codecs zarr cannot decode
            _ = a.array
        return Image(self, group, ms, arrays, crops)

    def images(self) -> list[Image]:
        """The images a viewer shows for this source: the root image, the series of a
        bioformats2raw collection, or the label images of a ``labels`` group."""
        meta = self.root.meta
        kind = meta.kind
        if kind in ("image", "labels-image"):
            return [self.image("", self.root)]
        if kind == "labels-group":
            return [self.image(self._under_root(name, "labels")) for name in meta.labels]
        if kind == "collection":
            series = [self.image(self._under_root(p, "series")) for p in self._series_paths()]
            from napari_ozx.ngff.read.omexml import with_ome_xml  # fills what they lack

            return with_ome_xml(self, series, range(len(series)))
        if kind == "scene":
            assert meta.scene is not None
            if self.collection is not None:  # RFC-8: every image member, in its order
                from napari_ozx.ngff.read.collection import external_images

                inside = [self.image(p) for p in self.collection.image_paths]
                return inside + external_images(self.collection, open_ome_zarr)
            return [self.image(self._under_root(p, "scene path")) for p in meta.scene.image_paths]
        if kind == "spatialdata":
            return [self.image(p) for p, _ in self.spatialdata_elements()]
        if kind in ("plate", "well"):
            raise MetadataError(f"{self.source}: HCS {kind}s are opened by the plate reader")
        raise NotOmeZarrError(f"{self.source}: no OME-Zarr metadata (not an image, plate or label)")

    def spatialdata_elements(self) -> list[tuple[str, str]]:
        """A SpatialData store's raster elements: ``(path, "images" | "labels")`` for each
        OME-Zarr group under its ``images/`` and ``labels/`` containers, in name order
        (from the root's consolidated metadata when it has it, else a listing)."""
        out = []
        for container in ("images", "labels"):
            for name in sorted(child_names(self, container)):
                path = join_path(container, name, key=container)
                grp = self._group_or_none(path)
                if grp is not None and grp.meta.multiscales:
                    out.append((path, container))
        return out

    def ome_attributes(self, path: str) -> Mapping[str, Any] | None:
        """The OME attributes of the group at *path* (the ``ome`` object of a Zarr v3
        group, a Zarr v2 group's ``.zattrs``), or ``None`` where there is no group."""
        if not path and self.collection is not None:
            return self.collection.scene_ome
        grp = self._group_or_none(path)
        if grp is None:
            return None
        ome = grp.attributes.get("ome")
        return ome if grp.zarr_format == 3 and isinstance(ome, Mapping) else grp.attributes

    @cached_property
    def transform_graph(self) -> Any:
        """The coordinate systems of the hierarchy (a scene's and its images') linked by
        their transformations: :class:`~napari_ozx.ngff.model.graph.TransformGraph`. Raises
        :class:`~napari_ozx.errors.TransformError` for a path that leaves the root, a
        transformation that does not fit its systems, or a cycle that disagrees."""
        from napari_ozx.ngff.model.graph import graph_from_hierarchy

        def read_array(path: str) -> np.ndarray:  # parameters and fields stored as arrays
            return np.asarray(self.arrays([path])[0].array[...])

        return graph_from_hierarchy(self.ome_attributes, read_array=read_array)

    def _under_root(self, path: str, key: str) -> str:
        try:
            return join_path("", path, key=key)
        except MetadataError as e:
            raise MetadataError(f"{e} ({self.source})") from None

    def _series_paths(self) -> list[str]:
        ome = self._group_or_none("OME")
        if ome is not None and ome.meta.series:
            series = list(ome.meta.series)
            if len(set(series)) != len(series):
                raise MetadataError(
                    f"{self.source}: OME/series lists duplicate series "
                    f"({len(series)} entries, {len(set(series))} distinct)"
                )
            return series
        found = []
        # bioformats2raw without an OME/ series list: consecutive integer groups
        for i in range(10_000):
            if self._group_or_none(str(i)) is None:
                break
            found.append(str(i))
        if not found:
            raise MetadataError(f"{self.source}: bioformats2raw collection without series")
        return found

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> OmeZarr:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = self.root.meta.kind
        return f"OmeZarr({self.source!r}, zarr_format={self.zarr_format}, kind={kind!r})"


def _check_space_axes(source: str, path: str, ms: Multiscale) -> None:
    """Refuse an image without a space axis: napari would show a time or channel axis as
    if it were y / x. (Other counts of space axes are readable; the validator reports them.)
    """
    if any(is_spatial(a) for a in ms.axes):
        return
    raise MetadataError(
        f"{source}:{path or '/'}: no space axis in {list(ms.axis_names)} "
        '(the "axes" MUST contain 2 or 3 entries of "type:space")'
    )


def _extents(ms: Multiscale, shape0: Sequence[int]) -> list[tuple[int, ...]]:
    """Each level's extent of level 0's data, from the scales: ceil(shape0 * s0 / sN)."""
    s0 = ms.datasets[0].scale
    return [
        tuple(
            max(1, math.ceil(n * a / b - 1e-9)) if b > 0 else n
            for n, a, b in zip(shape0, s0, ds.scale, strict=True)
        )
        for ds in ms.datasets
    ]


def _check_levels(
    source: str, path: str, ms: Multiscale, arrays: list[ArrayNode]
) -> list[tuple[int, ...] | None]:
    """Refuse pyramids whose levels disagree with the axes or with each other; return,
    per level, the shape to crop it to (or None).

    A level larger than the one before is refused, except where its scale says it is
    coarser and the data fits level 0's extent at its scale: webknossos pads its coarse
    levels to a large array with the data in the corner (the levels are still ordered by
    resolution, as the spec asks). Those levels are cropped to that extent, with one
    warning."""
    where = f"{source}:{path or '/'}"
    prev: tuple[int, ...] | None = None
    crops: list[tuple[int, ...] | None] = []
    extents = _extents(ms, arrays[0].shape) if arrays and len(arrays[0].shape) == ms.ndim else []
    for i, (ds, arr) in enumerate(zip(ms.datasets, arrays, strict=True)):
        shape = arr.shape
        if len(shape) != ms.ndim:
            raise MetadataError(
                f"{where}: level {ds.path!r} has {len(shape)} dimensions, axes name {ms.ndim}"
            )
        names = arr.document.get("dimension_names")
        if (
            arr.zarr_format == 3
            and names is not None
            and list(names) != list(ms.axis_names)
            and any(n is not None for n in names)
        ):
            raise MetadataError(
                f"{where}: dimension_names {list(names)} of level {ds.path!r} "
                f"do not match the axes {list(ms.axis_names)} (RFC-2)"
            )
        crop = None
        if prev is not None and any(s > p for s, p in zip(shape, prev, strict=True)):
            ext = extents[i] if extents else None
            pairs = list(zip(ms.datasets[i - 1].scale, ds.scale, strict=True))
            coarser = all(b >= a for a, b in pairs) and any(b > a for a, b in pairs)
            if ext is None or not coarser or any(e > p for e, p in zip(ext, prev, strict=True)):
                raise MetadataError(
                    f"{where}: level {ds.path!r} {shape} is larger than the level before {prev}"
                )
            crop = tuple(min(s, e) for s, e in zip(shape, ext, strict=True))
            logger.warning(
                "%s: level %r %s is padded beyond the data (as webknossos writes): shown "
                "cropped to %s, level 0's extent at its scale",
                where,
                ds.path,
                shape,
                crop,
            )
            shape = crop
        crops.append(crop)
        prev = shape
    return crops


def transform_points(
    source: str | os.PathLike[str] | Store, src: str, dst: str, points: Any
) -> np.ndarray:
    """Map *points* (``(n, D)``) from coordinate system *src* to *dst* of the hierarchy
    at *source* (a scene's or an image's systems, named as
    :func:`~napari_ozx.ngff.model.graph.parse_key` reads them). Raises
    :class:`~napari_ozx.errors.TransformError` for an unknown system or a path that cannot be
    computed."""
    from napari_ozx.ngff.model.graph import parse_key

    with open_ome_zarr(source) as root:
        graph = root.transform_graph
        return np.asarray(graph.path(parse_key(src), parse_key(dst)).apply(points))


def open_ome_zarr(source: str | os.PathLike[str] | Store) -> OmeZarr:
    """Open an OME-Zarr hierarchy, reading its metadata only.

    Parameters
    ----------
    source : str, os.PathLike or zarr.abc.store.Store
        A local directory, a local ``.ozx`` / ``.zip`` file, an ``https://`` or ``s3://``
        URL of either, or a zarr store (kept open when the result is closed).

    Returns
    -------
    OmeZarr
        The opened hierarchy (a context manager: closing it closes the store it opened);
        :meth:`OmeZarr.images` gives its images with lazy levels.

    Raises
    ------
    FileNotFoundError
        A local path that does not exist.
    NotOmeZarrError
        No Zarr group, or a group without OME-Zarr metadata, at the root.
    MetadataError
        Invalid OME-Zarr metadata.
    ZipFormatError
        A file that is not a readable ZIP archive.
    """
    store = open_store(source)
    name = os.fspath(source) if isinstance(source, str | os.PathLike) else repr(source)
    try:
        return OmeZarr(store, name, owns_store=store is not source)
    except BaseException:
        if store is not source:
            store.close()
        raise
