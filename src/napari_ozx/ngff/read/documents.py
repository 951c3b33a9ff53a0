"""The one reader of Zarr metadata documents: ``zarr.json``, ``.zattrs``, ``.zgroup``,
``.zarray``.

:func:`read_documents` reads a batch of nodes' documents for the opener
(:class:`~.open.OmeZarr`), plates and the inspection: Zarr v3 first, the v2 trio once the
hierarchy is known not to be v3; a remote store's concurrently in zarr's event loop, local
directories and containers with synchronous reads on a few threads. A document larger
than :data:`MAX_METADATA_BYTES` is refused before it is read; each must be a JSON object,
and a ``zarr.json`` goes through the ZEP 10 pass
(:func:`~napari_ozx.ngff.model.extensions.read_extensions`). A problem with one node's
documents becomes its :attr:`NodeDocuments.error` (documents read so far kept), never the
batch's. Why local reads bypass zarr's event loop: ``docs/design/reading.md``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ngff.model.extensions import NodeExtensions, read_extensions
from napari_ozx.ozx.protocol import Container, as_container

if TYPE_CHECKING:
    from zarr.abc.buffer import BufferPrototype
    from zarr.abc.store import Store

__all__ = [
    "MAX_METADATA_BYTES",
    "METADATA_FILES",
    "DocumentReadError",
    "DocumentSource",
    "NodeDocuments",
    "child_names",
    "get_bytes",
    "join_path",
    "loads_object",
    "local_root",
    "read_documents",
    "run_sync",
]

MAX_METADATA_BYTES = 16 << 20  # no real zarr.json comes near this
#: the names of metadata documents (everything else under a node is chunk data)
METADATA_FILES = ("zarr.json", ".zarray", ".zattrs", ".zgroup")


def join_path(*parts: str, key: str | None = None) -> str:
    """Join store paths; the result never leaves the hierarchy root.

    Every path taken from metadata (labels, bioformats2raw series, plate wells and fields,
    multiscale datasets) goes through here, so a ``..`` segment or an absolute path after
    the first part raises :class:`MetadataError` (naming ``key``, the metadata field)
    instead of reading beside or above the root of a directory store.
    """
    segments: list[str] = []
    for i, part in enumerate(parts):
        if not part:
            continue
        if i and (part.startswith(("/", "\\")) or (len(part) > 1 and part[1] == ":")):
            raise MetadataError(
                f"absolute path in metadata: {key or 'path'} {part!r} (relative to "
                f"{parts[0] or '/'!r}) must be a relative path under the hierarchy root"
            )
        for seg in part.split("/"):
            if seg in ("", "."):
                continue
            if seg == ".." or "\\" in seg:
                raise MetadataError(
                    f"path leaves the hierarchy root: {key or 'path'} {part!r} (relative to "
                    f"{parts[0] or '/'!r}); refusing to read outside the root"
                )
            segments.append(seg)
    return "/".join(segments)


def run_sync(coro: Any) -> Any:
    """Run *coro* in zarr's event loop (thread-safe; callable from any thread)."""
    from napari_ozx._compat import zarr_sync

    return zarr_sync(coro)


#: documents of a remote store requested at once (one batch: a plate's wells), and how
#: often a transient failure (timeout, reset, HTTP 429 / 5xx) is retried, with backoff.
#: 48 is what benchmarks/bench_plate1536.py --remote chose: more made a server with a
#: small listen backlog drop connections, fewer left a well-served one waiting
REMOTE_CONCURRENCY = 48
REMOTE_ATTEMPTS = 4
REMOTE_BACKOFF_S = 0.25


class _Limiter:
    """How many requests of a batch are in flight: :data:`REMOTE_CONCURRENCY` at first,
    halved on every transient failure (a server with a small listen backlog drops what
    it cannot queue), grown back by one per few successes."""

    def __init__(self, limit: int = REMOTE_CONCURRENCY) -> None:
        self.max = self.limit = limit
        self.inflight = 0
        self.successes = 0
        self.cond = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: self.inflight < self.limit)
            self.inflight += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self.cond:
            self.inflight -= 1
            self.cond.notify_all()

    def failed(self) -> None:
        self.limit = max(2, self.limit // 2)
        self.successes = 0

    def succeeded(self) -> None:
        self.successes += 1
        if self.limit < self.max and self.successes >= 4:
            self.limit += 1
            self.successes = 0


class DocumentReadError(OzxError):
    """A metadata document could not be read (after retries): that node's problem."""


def _transient(e: BaseException) -> bool:
    if isinstance(e, PermissionError):  # a refusal (401 / 403): the same answer again
        return False
    status = next(
        (v for a in ("status", "status_code") if isinstance(v := getattr(e, a, None), int)),
        None,
    )
    if status is not None:
        return status == 429 or status >= 500
    return isinstance(e, TimeoutError | ConnectionError | OSError) or type(e).__name__ in (
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ClientPayloadError",
        "SocketTimeoutError",
    )


async def get_bytes(store: Store, key: str, limit: _Limiter | None = None) -> bytes | None:
    """One metadata document's bytes, ``None`` if absent; size-capped for containers.

    A remote store's transient failures are retried with backoff; one that persists is
    a :class:`DocumentReadError` naming the key and the reason. *limit* bounds how many
    requests of a batch are in flight (a server with a small listen backlog otherwise
    drops them)."""
    from zarr.buffer import default_buffer_prototype

    _check_metadata_size(store, key)
    delay = REMOTE_BACKOFF_S
    for attempt in range(1, REMOTE_ATTEMPTS + 1):
        try:
            if limit is None:
                buf = await store.get(key, prototype=default_buffer_prototype())
            else:
                async with limit:
                    buf = await store.get(key, prototype=default_buffer_prototype())
        except OzxError:
            raise
        except FileNotFoundError:
            return None
        except Exception as e:  # a remote store's network error: name the key and the reason
            if attempt < REMOTE_ATTEMPTS and _transient(e):
                if limit is not None:
                    limit.failed()
                await asyncio.sleep(delay)
                delay *= 3
                continue
            raise DocumentReadError(
                f"reading {key} failed: {type(e).__name__}: {e}"
                + (f" (after {attempt} attempts)" if attempt > 1 else "")
            ) from e
        if limit is not None:
            limit.succeeded()
        return None if buf is None else buf.to_bytes()
    raise AssertionError("unreachable")  # pragma: no cover


def _check_metadata_size(store: Store, key: str) -> None:
    """Refuse absurd metadata documents before reading them (an .ozx knows sizes upfront)."""
    container = as_container(store)
    if container is not None:
        _check_member_size(container, key)


def _check_member_size(container: Container, key: str) -> None:
    size = container.member_size(key)
    if size is None or size <= MAX_METADATA_BYTES:
        return
    raise _too_large(key, size)


def loads_object(data: bytes, key: str) -> dict[str, Any]:
    """Parse one document, which must be a JSON object (:class:`MetadataError` if not)."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise MetadataError(f"{key}: invalid JSON ({e})") from None
    except RecursionError:
        raise MetadataError(f"{key}: invalid JSON (nested too deeply)") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"{key}: expected a JSON object")
    return doc


@dataclass(frozen=True)
class NodeDocuments:
    """One node's metadata documents as stored, and what the ZEP 10 pass made of them."""

    path: str
    zarr_format: int
    node_type: str  #: "group" or "array" (what the documents say; v3: as stored)
    #: ``zarr.json`` as stored; for Zarr v2 the ``.zarray`` (arrays) or a group stub,
    #: with ``node_type`` added
    document: dict[str, Any] = field(repr=False)
    attributes: dict[str, Any] = field(repr=False)
    #: (file name, parsed JSON or ``None`` when it is not valid JSON), in reading order
    files: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    #: the document zarr-python accepts (``extensions`` and ignorable keys removed)
    checked: dict[str, Any] = field(default_factory=dict, repr=False)
    extensions: NodeExtensions = field(default_factory=NodeExtensions)
    #: why the reader refuses this node (invalid JSON, ZEP 10 ...), or None
    error: OzxError | None = None

    def raise_error(self) -> None:
        """Raise the node's problem as a fresh exception.

        Raising the stored instance would attach a traceback whose frames reference
        these documents, which reference the instance: a cycle that keeps the store
        (and its file descriptor) alive until a GC pass.
        """
        if self.error is not None:
            raise _fresh(self.error)


def _fresh(error: OzxError) -> OzxError:
    """A traceback-free copy of *error* (same class, arguments and attributes)."""
    copy = type(error).__new__(type(error), *error.args)
    copy.__dict__.update(error.__dict__)
    return copy


#: what :func:`_prefetch_local` found for a key: its bytes, ``None`` (absent) or the
#: error that makes it a problem of its node (too large)
Prefetched = Mapping[str, "bytes | MetadataError | None"]


def local_root(store: object, *, exact: bool = False) -> str | None:
    """The folder on this machine whose files are the keys of *store*: a zarr
    ``LocalStore``'s ``root``; ``None`` for every other store (an ``OzxStore``, even of a
    local file: its keys are members of one archive; remote, memory and wrapping stores).

    *exact*: a subclass of ``LocalStore`` gives ``None`` too, for a caller that reads the
    files itself and so would bypass what a subclass does on reading."""
    from zarr.storage import LocalStore

    if exact and type(store) is not LocalStore:
        return None
    return os.fspath(store.root) if isinstance(store, LocalStore) else None


def remote_directory(store: Store) -> bool:
    """Whether *store* is a remote directory, where every document read is a round trip
    (a remote ``.ozx`` has its documents from the archive's head, read at open)."""
    return bool(getattr(store, "threaded_io", False)) and as_container(store) is None


def _local_container(store: Store) -> bool:
    """Whether *store* is a container whose members are read inline (a local ``.ozx``:
    not ``threaded_io``) and that has the synchronous ``get_sync``."""
    return (
        as_container(store) is not None
        and getattr(store, "threaded_io", None) is False
        and callable(getattr(store, "get_sync", None))
    )


def _read_file(root: str, key: str) -> bytes | MetadataError | Exception | None:
    try:
        with open(os.path.join(root, key), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_METADATA_BYTES:
                return _too_large(key, size)
            return fh.read(MAX_METADATA_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return e


def _read_member(
    store: Any, key: str, prototype: BufferPrototype
) -> bytes | MetadataError | Exception | None:
    """:func:`get_bytes`' first attempt, synchronous: the size cap, then the store's
    ``get_sync`` (its checks and errors are those of its ``get``)."""
    try:
        _check_member_size(store, key)  # (the store is the container: no check per key)
        buf = store.get_sync(key, prototype=prototype)
    except MetadataError as e:  # too large, or the store's: a problem of this node
        return e
    except OzxError:  # the container's (ZIP records, CRC-32 ...): raised, as get_bytes does
        raise
    except FileNotFoundError:
        return None
    except Exception as e:  # reported by get_bytes, which reads it again (and retries)
        return e
    return None if buf is None else buf.to_bytes()


def _prefetch_local(
    source: str | Store, keys: Sequence[str]
) -> dict[str, bytes | MetadataError | None]:
    """Read *keys* directly (see the module docstring): under *source*, a folder, or as
    members of *source*, a local container store (:func:`_local_container`). A key
    whose read fails other than by absence (or, for a container, than by the container's
    own :class:`OzxError`, which is raised) is left out, so the store reads it and
    reports it as before."""

    if isinstance(source, str):
        root = source

        def one(key: str) -> tuple[str, bytes | MetadataError | Exception | None]:
            return key, _read_file(root, key)

    else:
        from zarr.buffer import default_buffer_prototype

        store, proto = source, default_buffer_prototype()  # once: it reads zarr's config

        def one(key: str) -> tuple[str, bytes | MetadataError | Exception | None]:
            return key, _read_member(store, key, proto)

    # the first documents in this thread: from the page cache a read is cheap and
    # threads only add hand-offs (one thread beats batches over threads, which beat a
    # task per file); slower (a cold disk, a network file system), the rest go to a few
    # threads in batches, which keeps their latencies overlapping
    head = 64
    t0 = time.perf_counter()
    found = [one(k) for k in keys[:head]]
    rest = keys[head:]
    if rest and (time.perf_counter() - t0) / head > 100e-6:
        batches = [rest[i : i + 256] for i in range(0, len(rest), 256)]
        with ThreadPoolExecutor(8, thread_name_prefix="ozx-docs") as pool:
            found += [
                kv for batch in pool.map(lambda b: [one(k) for k in b], batches) for kv in batch
            ]
    else:
        found += [one(k) for k in rest]
    return {k: v for k, v in found if isinstance(v, bytes | MetadataError | None)}


def _too_large(key: str, size: int) -> MetadataError:
    return MetadataError(
        f"{key} is too large ({size:,} bytes; metadata documents are "
        f"limited to {MAX_METADATA_BYTES:,} bytes)"
    )


async def _read_json(
    store: Store, key: str, pre: Prefetched | None = None, limit: _Limiter | None = None
) -> tuple[Any, OzxError | None] | None:
    """(parsed object or None, error) of one document, or None if it is absent."""
    try:
        if pre is not None and key in pre:
            got = pre[key]
            if isinstance(got, MetadataError):
                raise got
            data = got
        else:
            data = await get_bytes(store, key, limit)
    except (MetadataError, DocumentReadError) as e:  # a problem of this node only
        return None, e
    if data is None:
        return None
    try:
        return loads_object(data, key), None
    except MetadataError as e:
        try:  # keep a valid non-object for display; an unparsable one is None
            value = json.loads(data)
        except (ValueError, RecursionError):
            value = None
        return value, e


#: the Zarr v2 documents to look for, by what the caller expects the node to be
_V2_NAMES = {
    None: (".zarray", ".zgroup", ".zattrs"),
    "group": (".zgroup", ".zattrs"),
    # a group that is only of use with OME attributes (a plate's well or field): its
    # .zattrs says it all (absent, it is missing either way)
    "ome-group": (".zattrs",),
    # a level of a known image: its .zattrs (xarray's _ARRAY_DIMENSIONS at most) is not
    # used by anything that asks for arrays by kind
    "array": (".zarray",),
}


async def _read_node(
    store: Store,
    path: str,
    zarr_format: int | None,
    pre: Prefetched | None = None,
    kind: str | None = None,
    limit: _Limiter | None = None,
) -> NodeDocuments | None:
    names = _V2_NAMES[kind]
    found: list[tuple[Any, OzxError | None] | None] | None = None
    if zarr_format is None and pre is None and remote_directory(store):
        # a remote directory whose format is not known yet (its root): both formats'
        # documents in one round trip, rather than Zarr v2's after zarr.json's 404
        got, *found = await asyncio.gather(
            _read_json(store, join_path(path, "zarr.json"), pre, limit),
            *(_read_json(store, join_path(path, n), pre, limit) for n in names),
        )
        if got is not None:
            return _v3_node(path, got)
    elif zarr_format in (None, 3):
        got = await _read_json(store, join_path(path, "zarr.json"), pre, limit)
        if got is not None:
            return _v3_node(path, got)
        if zarr_format == 3:
            return None
    if found is not None:
        pass  # read above, with zarr.json
    elif pre is not None:  # already read: no I/O to overlap
        found = [await _read_json(store, join_path(path, n), pre) for n in names]
    else:
        found = list(
            await asyncio.gather(
                *(_read_json(store, join_path(path, n), pre, limit) for n in names)
            )
        )
    if all(g is None for g in found):
        return None
    by_name = dict(zip(names, found, strict=True))
    got2 = [by_name.get(n) for n in _V2_NAMES[None]]
    zarray, _zgroup, zattrs = got2
    names = _V2_NAMES[None]
    files = tuple((n, g[0]) for n, g in zip(names, got2, strict=True) if g is not None)
    errors = [g[1] for g in got2 if g is not None and g[1] is not None]
    attrs = zattrs[0] if zattrs is not None and isinstance(zattrs[0], dict) else {}
    if zarray is not None and isinstance(zarray[0], dict):
        doc = {**zarray[0], "node_type": "array"}
        checked = {k: v for k, v in doc.items() if k != "node_type"}
        checked["attributes"] = attrs
    else:
        doc = {"zarr_format": 2, "node_type": "group"}
        checked = dict(doc)
    return NodeDocuments(
        path,
        2,
        str(doc["node_type"]),
        doc,
        attrs,
        files,
        checked,
        error=errors[0] if errors else None,
    )


def _v3_node(path: str, got: tuple[Any, OzxError | None]) -> NodeDocuments:
    doc, err = got
    if err is not None or not isinstance(doc, dict):
        return NodeDocuments(path, 3, "group", {}, {}, (("zarr.json", doc),), error=err)
    return _v3(path, doc)


def _v3(path: str, doc: dict[str, Any]) -> NodeDocuments:
    attrs = doc.get("attributes")
    node_type = str(doc.get("node_type"))
    checked, exts, err = read_extensions(doc, path)
    if doc.get("zarr_format") != 3:
        err = MetadataError(f"{join_path(path, 'zarr.json')}: zarr_format is not 3")
    return NodeDocuments(
        path,
        3,
        node_type,
        doc,
        attrs if isinstance(attrs, dict) else {},
        (("zarr.json", doc),),
        checked,
        exts,
        err,
    )


def _prefetch_container(
    store: Store,
    paths: Sequence[str],
    zarr_format: int | None,
    kind: Literal["group", "ome-group", "array"] | None,
) -> dict[str, bytes | MetadataError | None]:
    """A local container's documents of *paths*: the members :func:`_read_node` reads
    through the event loop, no others (a member lookup is a central-directory search, a
    read checks a CRC-32): every node's ``zarr.json``, then the Zarr v2 documents of the
    nodes that have none."""
    pre: dict[str, bytes | MetadataError | None] = {}
    v2 = list(paths)
    if zarr_format in (None, 3):
        pre = _prefetch_local(store, [join_path(p, "zarr.json") for p in paths])
        v2 = (
            []
            if zarr_format == 3
            else [p for p in paths if pre.get(join_path(p, "zarr.json"), b"") is None]
        )
    if v2:
        pre.update(_prefetch_local(store, [join_path(p, n) for p in v2 for n in _V2_NAMES[kind]]))
    return pre


def read_documents(
    store: Store,
    paths: Sequence[str],
    zarr_format: int | None = None,
    kind: Literal["group", "ome-group", "array"] | None = None,
) -> list[NodeDocuments | None]:
    """The documents of every node in *paths* (``None`` where there is no node), read
    concurrently. *zarr_format* is the hierarchy's format once known (``None``: try v3,
    then v2). *kind*: what the caller knows the nodes to be (a plate's wells and fields
    are groups, their levels arrays): Zarr v2 then skips the other kind's document, a
    third of the reads of a large plate. Only store failures (I/O, network) raise; see
    the module docstring."""

    pre: Prefetched | None = None
    root = local_root(store, exact=True)
    if root is not None:
        names = [
            *(("zarr.json",) if zarr_format in (None, 3) else ()),
            *(_V2_NAMES[kind] if zarr_format in (None, 2) else ()),
        ]
        pre = _prefetch_local(root, [join_path(p, n) for p in paths for n in names])
    elif _local_container(store):
        pre = _prefetch_container(store, paths, zarr_format, kind)

    if pre is not None:
        # every document was read above: parse them here, without an event-loop round
        # trip per node (which adds up over a large plate's thousands of nodes)
        out = []
        for p in paths:
            coro = _read_node(store, p, zarr_format, pre, kind)
            try:
                coro.send(None)
            except StopIteration as done:
                out.append(done.value)
                continue
            except RuntimeError:  # it wanted I/O after all: needs the event loop
                pass
            coro.close()  # (a document not read above: read through the store)
            out.append(run_sync(_read_node(store, p, zarr_format, pre, kind)))
        return out

    async def all_() -> list[NodeDocuments | None]:
        # a remote store: bounded requests in flight, each retried (see get_bytes)
        limit = _Limiter() if len(paths) > 1 else None
        return list(
            await asyncio.gather(
                *(_read_node(store, p, zarr_format, pre, kind, limit) for p in paths)
            )
        )

    return list(run_sync(all_()))


class DocumentSource(Protocol):
    """What reads a hierarchy's documents: its store and :meth:`read_docs` (the opener,
    :class:`~napari_ozx.ngff.read.open.OmeZarr`, is one)."""

    @property
    def store(self) -> Store: ...

    def read_docs(
        self, paths: Sequence[str], kind: Literal["group", "ome-group", "array"] | None = None
    ) -> Sequence[NodeDocuments | None]: ...


def child_names(src: DocumentSource, path: str) -> list[str]:
    """The names of the nodes directly under *path* in *src*: from the root's Zarr v3
    consolidated metadata when it has it, else a listing of the store (empty where the
    store cannot list, or *path* is absent). Metadata documents and hidden names are
    left out."""
    (root,) = src.read_docs([""])
    consolidated = None
    if root is not None and root.zarr_format == 3:
        cm = root.document.get("consolidated_metadata")
        consolidated = cm.get("metadata") if isinstance(cm, Mapping) else None
    if isinstance(consolidated, Mapping):
        prefix = f"{path}/"
        return [
            k[len(prefix) :]
            for k in consolidated
            if k.startswith(prefix) and "/" not in k[len(prefix) :]
        ]
    store = src.store

    async def listing() -> list[str]:
        return [p.rstrip("/") async for p in store.list_dir(path)]

    try:
        names = run_sync(listing())
    except (OSError, NotImplementedError):
        return []
    return [n for n in names if n and not n.startswith(".") and n not in METADATA_FILES]
