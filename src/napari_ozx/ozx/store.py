"""``OzxStore``: a read-only zarr-python 3 store over a single-file ``.ozx`` (RFC-9) archive.

The central directory is parsed once (``_zip.read_zip_index``) into ``name -> entry``; a
STORED member's byte range is one ``os.pread`` (no lock, no seek), listing is a sorted key
list, deflated members are inflated whole and kept in a small LRU. Local reads run inline
in zarr's event loop; file objects of unknown kind (remote) go through threads
(``threaded_io``). CRC-32: whole small members on read, and each member of a local archive
once before its first partial read (``verify_members``); remote archives skip the latter.

Reading a member (data offsets, refusals, CRC checks, inflate limits) is
:class:`~napari_ozx.ozx.members.MemberReader`'s; telling a missing key from a corrupted
member name is :class:`~napari_ozx.ozx.lookalikes.MissingKeys`'. Why not zarr's
``ZipStore``, and the costs measured: ``docs/design/ozx-container.md``.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import io
import logging
import os
import threading
from collections.abc import AsyncIterator, Iterable
from typing import TypedDict

from zarr.abc.buffer import Buffer, BufferPrototype
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.buffer import default_buffer_prototype

from napari_ozx._compat import zarr_store_set_open
from napari_ozx.errors import ReadOnlyStoreError, ZipFormatError
from napari_ozx.ozx import rfc9
from napari_ozx.ozx._zip import (
    BinaryFile,
    FileObjRangeReader,
    FileRangeReader,
    RangeReader,
    ZipEntry,
    ZipIndex,
    read_zip_index,
)
from napari_ozx.ozx.lookalikes import MissingKeys
from napari_ozx.ozx.lru import ByteLRU
from napari_ozx.ozx.members import MAX_DEFLATE_RATIO, MemberChecks, MemberReader
from napari_ozx.ozx.protocol import ArchiveSummary
from napari_ozx.ozx.records import METHOD_DEFLATED, method_name

__all__ = ["BytesStore", "OzxStore", "SyncGet", "byte_bounds"]


def _to_buffer(data: bytes | None, prototype: BufferPrototype | None) -> Buffer | None:
    if data is None:
        return None
    return (prototype or default_buffer_prototype()).buffer.from_bytes(data)


logger = logging.getLogger(__name__)


class _Options(TypedDict):
    """:class:`OzxStore`'s keyword arguments, kept for clones and pickles."""

    deflate_cache_bytes: int
    max_inflate_bytes: int
    verify_crc_max: int
    threaded_io: bool | None
    verify_members: bool | None


class _PickleState(TypedDict):
    source: str | RangeReader | BinaryFile
    options: _Options


#: file objects whose reads are local (page cache / memory): read inline
_LOCAL_FILE_TYPES = (io.BytesIO, io.BufferedReader, io.BufferedRandom, io.FileIO)


def byte_bounds(byte_range: ByteRequest | None, size: int) -> tuple[int, int]:
    """``(start, stop)`` within a member of ``size`` bytes, clamped like a file read."""
    if byte_range is None:
        return 0, size
    if isinstance(byte_range, RangeByteRequest):
        start, stop = byte_range.start, byte_range.end
        if start < 0 or stop < start:
            raise ValueError(f"invalid byte range {byte_range}")
        return min(start, size), min(stop, size)
    if isinstance(byte_range, OffsetByteRequest):
        if byte_range.offset < 0:
            raise ValueError(f"invalid byte range {byte_range}")
        return min(byte_range.offset, size), size
    if isinstance(byte_range, SuffixByteRequest):
        if byte_range.suffix < 0:
            raise ValueError(f"invalid byte range {byte_range}")
        return max(0, size - byte_range.suffix), size
    raise TypeError(f"Unexpected byte_range, got {byte_range!r}")  # zarr's wording


class BytesStore(Store):
    """A zarr store whose reads are plain bytes (an archive member, a staged chunk):
    :meth:`get` wraps what :meth:`get_bytes` returns in the caller's buffer."""

    async def get_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        """The bytes of ``key`` (optionally a range), or None when there is no such key."""
        raise NotImplementedError

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        # docstring inherited
        return _to_buffer(await self.get_bytes(key, byte_range), prototype)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # docstring inherited
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]


class SyncGet:
    """zarr's ``get_sync`` (its ``SupportsGetSync`` protocol) over :meth:`read_bytes`."""

    def read_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        """The bytes of ``key`` (optionally a range), or None when there is no such key."""
        raise NotImplementedError

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """Synchronous :meth:`get` (zarr's ``SupportsGetSync`` protocol)."""
        return _to_buffer(self.read_bytes(key, byte_range), prototype)


class _Members:
    """``key -> entry`` of the file members (directory records excluded), looked up in
    the index on demand. The index keeps a compact table, not one object per member
    (an archive of 1,000,000 members must open in well under a second), so recently used
    entries are cached here (thread-safe LRU)."""

    def __init__(self, index: ZipIndex) -> None:
        self._by_name = index.by_name
        self.get = functools.lru_cache(maxsize=1 << 16)(self._lookup)

    def _lookup(self, key: str) -> ZipEntry | None:
        entry = self._by_name.get(key)
        return None if entry is None or entry.is_dir else entry

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __getitem__(self, key: str) -> ZipEntry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry


def _file_names(index: ZipIndex) -> list[str]:
    """Sorted names of the file members (directory records excluded)."""
    return sorted(n for n in index.by_name if not n.endswith("/"))


class _Shared:
    """Parsed state shared by stores cloned from one another (immutable after build)."""

    def __init__(self, index: ZipIndex) -> None:
        self.index = index
        self.members = _Members(index)
        self._keys: list[str] | None = None
        self._children: dict[str, tuple[str, ...]] | None = None
        self._lock = threading.RLock()  # children() builds on keys
        #: CRC-checked members and inflate limits, shared by the stores' member readers
        self.checks = MemberChecks()
        # (given the index, not this object: no reference cycle keeps a large index alive)
        self.missing = MissingKeys(functools.partial(_file_names, index), self.members.__getitem__)

    @property
    def keys(self) -> list[str]:
        """Sorted names of the file members, built on first use (listing only)."""
        keys = self._keys
        if keys is None:
            with self._lock:
                if self._keys is None:
                    self._keys = _file_names(self.index)
                keys = self._keys
        return keys

    def children(self) -> dict[str, tuple[str, ...]]:
        """``directory -> sorted child names`` ("" is the root), built on first use."""
        children = self._children
        if children is not None:
            return children
        with self._lock:
            if self._children is None:
                tree: dict[str, set[str]] = {}
                for key in self.keys:
                    parent, _, child = key.rpartition("/")
                    while True:
                        siblings = tree.get(parent)
                        if siblings is None:
                            tree[parent] = {child}
                        elif child in siblings:
                            break  # this directory and its ancestors are already known
                        else:
                            siblings.add(child)
                        if not parent:
                            break
                        parent, _, child = parent.rpartition("/")
                self._children = {d: tuple(sorted(c)) for d, c in tree.items()}
            return self._children


#: a remote archive's leading bytes fetched with its central directory at open (RFC-9's
#: metadata comes first; more is fetched once the directory says it is needed)
SPECULATIVE_HEAD = 256 << 10


class OzxStore(SyncGet, BytesStore):
    """Read-only zarr v3 store over an ``.ozx`` / ``.zip`` archive.

    Parameters
    ----------
    source
        Path of the archive, or an open binary file-like object with ``seek``/``read``
        (``io.BytesIO``, ``open(path, "rb")``, an fsspec file). A file object stays owned
        by the caller: :meth:`close` does not close it.
    read_only
        Must be True (the default); writing goes through ``napari_ozx.ozx.write_store``.
    deflate_cache_bytes
        Byte budget of the LRU that keeps inflated DEFLATED members (members bigger than a
        quarter of it are inflated per read and not kept).
    max_inflate_bytes
        Refuse to inflate a member that declares more than this many bytes.
    verify_crc_max
        Verify the CRC-32 of whole reads of STORED members up to this size.
    verify_members
        Before serving the first byte range of a STORED member (a shard's index or inner
        chunk), check the CRC-32 of the whole member once (cached). ``None`` (default):
        on for local files, off for remote readers (where it would download whole shards).
    threaded_io
        Run reads of the async methods in ``asyncio.to_thread`` instead of inline. ``None``
        (default) chooses: inline for local paths, ``io.BytesIO`` and ``open(path, "rb")``
        (microsecond reads), threads for other file objects (fsspec/remote files, whose
        reads may take milliseconds and must not stall zarr's event loop).

    The central directory is parsed in the constructor, so a broken or unsupported file
    raises :class:`~napari_ozx.errors.ZipFormatError` /
    :class:`~napari_ozx.errors.UnsupportedZipFeature` right away.
    """

    supports_writes: bool = False
    supports_deletes: bool = False
    supports_listing: bool = True

    def __init__(
        self,
        source: str | os.PathLike[str] | RangeReader | BinaryFile,
        *,
        read_only: bool = True,
        deflate_cache_bytes: int = 64 * 1024 * 1024,
        max_inflate_bytes: int = 1 << 31,
        verify_crc_max: int = 1 << 20,
        threaded_io: bool | None = None,
        verify_members: bool | None = None,
    ) -> None:
        if not read_only:
            raise ReadOnlyStoreError(
                "OzxStore is read-only; create .ozx files with napari_ozx.ozx.writer"
            )
        super().__init__(read_only=True)
        self._options: _Options = {
            "deflate_cache_bytes": deflate_cache_bytes,
            "max_inflate_bytes": max_inflate_bytes,
            "verify_crc_max": verify_crc_max,
            "threaded_io": threaded_io,
            "verify_members": verify_members,
        }
        if isinstance(source, str | os.PathLike):
            self._path: str | None = os.path.abspath(os.fspath(source))
            self._fobj: RangeReader | BinaryFile | None = None
            reader: RangeReader = FileRangeReader(self._path)
            self._owns_reader = True
        elif isinstance(source, RangeReader):  # e.g. a remote FsspecRangeReader
            self._path = None
            self._fobj = source
            reader = source
            self._owns_reader = True
        elif hasattr(source, "seek") and hasattr(source, "read"):
            self._path = None
            self._fobj = source
            reader = FileObjRangeReader(source)
            self._owns_reader = False  # the file object belongs to the caller
        else:
            raise TypeError(
                "OzxStore source must be a path or a binary file-like object with seek/read, "
                f"got {type(source).__name__}"
            )
        early = None
        if getattr(reader, "remote", False) and hasattr(reader, "prefetch_head"):
            # RFC-9 puts the metadata first: its likely extent is fetched while the end
            # records and central directory are (one round trip instead of two)
            from napari_ozx.ozx.members import member_pool

            early = member_pool().submit(reader.prefetch_head, SPECULATIVE_HEAD)
        try:
            index = read_zip_index(reader)
        except BaseException:
            if early is not None:
                early.exception()  # (its own error, if any, is the tail's too)
            if self._owns_reader:
                reader.close()
            raise
        if early is not None:
            early.result()
        self._setup(reader, _Shared(index))
        prefetch = getattr(reader, "prefetch_head", None)
        if prefetch is not None:
            # RFC-9 puts every zarr.json first: one request brings the whole metadata
            meta = [e.header_offset for e in index.entries if e.name.endswith("zarr.json")]
            data = [e.header_offset for e in index.entries if not e.name.endswith("zarr.json")]
            if meta and (not data or max(meta) < min(data)):
                prefetch(min(data) if data else index.cd_offset)
        if index.duplicates:
            logger.warning(
                "%s: %d duplicated member name(s), reading the last record of each (e.g. %r)",
                self._label(),
                len(index.duplicates),
                index.duplicates[0],
            )

    def _setup(self, reader: RangeReader, shared: _Shared) -> None:
        self._shared = shared
        self._members = shared.members
        options = self._options
        local = isinstance(reader, FileRangeReader) or isinstance(
            getattr(reader, "fobj", None), _LOCAL_FILE_TYPES
        )
        threaded = options.get("threaded_io")
        if threaded is None:
            threaded = not local
        self._threaded = bool(threaded)
        verify = options.get("verify_members")
        if verify is None:
            # local: the first partial read of a member checks its whole CRC-32 (one
            # sequential pass, cached); remote: that pass would download the whole shard
            verify = local
        self._member_reader = MemberReader(
            reader,
            shared.checks,
            cd_offset=shared.index.cd_offset,
            path=self._path,
            fobj=self._fobj,
            deflate_cache_bytes=options["deflate_cache_bytes"],
            max_inflate_bytes=options["max_inflate_bytes"],
            verify_crc_max=options["verify_crc_max"],
            verify_members=bool(verify),
        )
        self._closed = False
        zarr_store_set_open(self, True)

    # ------------------------------------------------------------------ properties

    @property
    def index(self) -> ZipIndex:
        """The parsed central directory."""
        return self._shared.index

    # ------------------------------------------------------- Container protocol

    def member_size(self, key: str) -> int | None:
        """Declared uncompressed size of ``key`` (see :class:`~.protocol.Container`)."""
        entry = self._shared.index.by_name.get(key)
        if entry is None or entry.is_dir:
            return None
        if (
            entry.method == METHOD_DEFLATED
            and entry.uncompressed_size > MAX_DEFLATE_RATIO * entry.compressed_size + 1024
        ):
            return None  # a size deflate cannot produce: reading it reports that lie precisely
        return entry.uncompressed_size

    def stored_sizes(self) -> tuple[list[str], list[int]]:
        """Sorted file-member names and their stored sizes."""
        by_name = self._shared.index.by_name
        names = sorted(n for n, e in by_name.items() if not e.is_dir)
        return names, [by_name[n].compressed_size for n in names]

    def missing_root_reason(self) -> str:
        """What the archive holds instead of a root ``zarr.json`` (RFC-9)."""
        names = [e.name for e in self._shared.index.entries]
        nested = [n for n in names if rfc9.is_nested_archive_name(n)]
        if nested:
            return (
                f"the archive holds a nested archive {nested[0]!r} "
                f"({rfc9.NOT_EMBEDDED.citation}: {rfc9.NOT_EMBEDDED.text})"
            )
        tops = sorted({n.split("/", 1)[0] for n in names if rfc9.is_zarr_json(n) and "/" in n})
        if len(tops) == 1:
            return (
                f"no root zarr.json; the hierarchy is in {tops[0]}/: zip the folder's "
                f"contents, not the folder ({rfc9.ROOT.citation}: {rfc9.ROOT.text})"
            )
        return f"no root zarr.json ({rfc9.ROOT.citation}: {rfc9.ROOT.text})"

    def archive_summary(self) -> ArchiveSummary:
        """End-record and central-directory facts (see :class:`~.protocol.Container`)."""
        from collections import Counter

        index = self._shared.index
        try:
            comment = index.comment.decode("utf-8")
        except UnicodeDecodeError:
            comment = repr(index.comment)
        methods = Counter(method_name(e.method) for e in index.entries if not e.is_dir)
        return ArchiveSummary(
            path=self._label(),
            file_size=index.file_size,
            entries=len(index.entries),
            zip64=index.zip64,
            comment=comment,
            methods=dict(methods),
            duplicates=len(index.duplicates),
            stored_bytes=sum(e.compressed_size for e in index.entries),
        )

    @property
    def comment(self) -> bytes:
        """The archive comment (RFC-9: UTF-8 JSON ``{"ome": {"version": ...}}``)."""
        return self._shared.index.comment

    @property
    def path(self) -> str | None:
        """Absolute path of the archive, or None for a file-object source."""
        return self._path

    @property
    def reader(self) -> RangeReader:
        return self._member_reader.reader

    @property
    def _reader(self) -> RangeReader:
        """:attr:`reader`, settable (the member reader then reads through the new one)."""
        return self._member_reader.reader

    @_reader.setter
    def _reader(self, reader: RangeReader) -> None:
        self._member_reader.reader = reader

    @property
    def _inflated(self) -> ByteLRU[bytes]:
        """The LRU of inflated DEFLATED members."""
        return self._member_reader.inflated

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def threaded_io(self) -> bool:
        """Whether the async methods read in ``asyncio.to_thread`` (else inline)."""
        return self._threaded

    def _label(self) -> str:
        return self._member_reader.label()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        if self._path is not None:
            return f"OzxStore({self._path!r}{state})"
        return f"OzxStore(<file object {self._label()}>{state})"

    def __str__(self) -> str:
        return f"ozx://{self._label()}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OzxStore):
            return False
        if self._path is not None or other._path is not None:
            return self._path == other._path
        return self._fobj is other._fobj

    def __hash__(self) -> int:
        return hash(("OzxStore", self._path if self._path is not None else id(self._fobj)))

    # ------------------------------------------------------------------ lifecycle

    async def _open(self) -> None:
        if self._closed:
            self._reopen()
        zarr_store_set_open(self, True)

    def _reopen(self) -> None:
        if self._path is None:
            if getattr(self._fobj, "closed", False):
                raise ValueError(f"cannot reopen {self!r}: its file object is closed")
            self._closed = False
            return
        reader = FileRangeReader(self._path)
        if reader.size != self._shared.index.file_size:
            reader.close()
            raise ZipFormatError(
                f"{self._path}: file changed size since it was opened "
                f"({self._shared.index.file_size} -> {reader.size} bytes)"
            )
        self._member_reader.reopen(reader)
        self._closed = False

    def close(self) -> None:
        """Close the file descriptor (path sources); file objects are left open."""
        if not self._closed:
            self._closed = True
            if self._owns_reader:
                self._reader.close()
            self._inflated.clear()
        super().close()

    def with_read_only(self, read_only: bool = False) -> OzxStore:
        """A new store on the same archive (sharing the parsed index). Only read-only."""
        if not read_only:
            raise ReadOnlyStoreError(
                "OzxStore is read-only; create .ozx files with napari_ozx.ozx.writer"
            )
        clone = object.__new__(type(self))
        Store.__init__(clone, read_only=True)
        clone._options = self._options.copy()
        clone._path = self._path
        clone._fobj = self._fobj
        if self._path is not None:
            reader: RangeReader = FileRangeReader(self._path)
            clone._owns_reader = True
        else:
            reader = self._reader  # shared: its lock serialises seek+read on the one object
            clone._owns_reader = False
        clone._setup(reader, self._shared)
        return clone

    def __getstate__(self) -> _PickleState:
        if self._path is not None:
            return {"source": self._path, "options": self._options}
        # file objects that pickle (fsspec files do) travel as themselves
        assert self._fobj is not None  # (set whenever there is no path)
        return {"source": self._fobj, "options": self._options}

    def __setstate__(self, state: _PickleState) -> None:
        self.__init__(state["source"], **state["options"])  # type: ignore[misc]

    # ------------------------------------------------------------------ reading

    def read_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        # docstring inherited
        if self._closed:
            raise ValueError(f"I/O operation on closed {self!r}")
        entry = self._members.get(key)
        if entry is None:
            self._shared.missing.check(key, self._reader, self._label)
            return None
        span = None if byte_range is None else functools.partial(byte_bounds, byte_range)
        return self._member_reader.read(entry, span)

    def limit_inflate(self, prefix: str, max_bytes: int) -> None:
        """Refuse to inflate members under ``prefix`` (an array's chunk keys) that declare
        more than ``max_bytes``: the OME layer knows from the array metadata how big an
        encoded chunk or shard can be, the store alone only knows its global cap."""
        self._member_reader.limit_inflate(prefix, max_bytes)

    async def get_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        # docstring inherited; local preads run inline (see module docstring for why)
        if self._threaded:
            return await asyncio.to_thread(self.read_bytes, key, byte_range)
        return self.read_bytes(key, byte_range)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # docstring inherited
        from_bytes = prototype.buffer.from_bytes
        requests = list(key_ranges)
        if self._threaded:
            datas = await asyncio.to_thread(self._read_many, requests)
        else:
            datas = self._read_many(requests)
        return [None if data is None else from_bytes(data) for data in datas]

    def _read_many(self, requests: list[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        return [self.read_bytes(key, byte_range) for key, byte_range in requests]

    async def exists(self, key: str) -> bool:
        # docstring inherited
        return key in self._members

    async def getsize(self, key: str) -> int:
        # docstring inherited
        entry = self._members.get(key)
        if entry is None:
            raise FileNotFoundError(key)
        return entry.uncompressed_size

    async def getsize_prefix(self, prefix: str) -> int:
        # docstring inherited
        members = self._members
        return sum(members[k].uncompressed_size for k in self._iter_prefix(prefix))

    # ------------------------------------------------------------------ listing

    def _iter_prefix(self, prefix: str) -> Iterable[str]:
        keys = self._shared.keys
        if not prefix:
            return list(keys)
        i = bisect.bisect_left(keys, prefix)
        out = []
        n = len(keys)
        while i < n and keys[i].startswith(prefix):
            out.append(keys[i])
            i += 1
        return out

    async def list(self) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._shared.keys:
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._iter_prefix(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for name in self._shared.children().get(prefix.strip("/"), ()):
            yield name

    async def is_empty(self, prefix: str) -> bool:
        # docstring inherited
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        keys = self._shared.keys
        i = bisect.bisect_left(keys, prefix)
        return not (i < len(keys) and keys[i].startswith(prefix))

    # ------------------------------------------------------------------ writing: refused

    def _refuse(self, what: str) -> ReadOnlyStoreError:
        return ReadOnlyStoreError(
            f"cannot {what}: {self!r} is read-only (.ozx archives are written once, with "
            "napari_ozx.ozx.writer)"
        )

    def _check_writable(self) -> None:
        raise self._refuse("write")

    async def set(self, key: str, value: Buffer) -> None:
        raise self._refuse(f"set {key!r}")

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        raise self._refuse(f"set {key!r}")

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        raise self._refuse("set keys")

    async def delete(self, key: str) -> None:
        raise self._refuse(f"delete {key!r}")

    async def delete_dir(self, prefix: str) -> None:
        raise self._refuse(f"delete {prefix!r}")

    async def clear(self) -> None:
        raise self._refuse("clear")

    def set_sync(self, key: str, value: Buffer) -> None:
        raise self._refuse(f"set {key!r}")

    def delete_sync(self, key: str) -> None:
        raise self._refuse(f"delete {key!r}")
