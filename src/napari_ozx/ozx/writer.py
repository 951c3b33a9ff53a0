"""Stream an OME-Zarr hierarchy into a new single-file ``.ozx`` (RFC-9).

Two layers live here:

:class:`OzxWriter`
    A small, self-contained, append-only ZIP writer that produces archives meeting every
    MUST and SHOULD of RFC-9 (zipped OME-Zarr):

    * every entry is STORED (Zarr codecs already compress), CRC-32 in the local header,
      never a data descriptor (general-purpose flag bit 3 is never set);
    * ZIP64 **always**: a ZIP64 extended-information extra field in every local and central
      header, plus the ZIP64 end of central directory record and locator before the classic
      end record, whatever the archive size;
    * all ``zarr.json`` entries come first, root first then breadth-first, in the local
      entry order **and** in the central directory; other entries follow in write order;
    * the archive comment defaults to ``{"ome":{"version":"0.5"}}``;
    * no duplicate names, no absolute names, no ``..``, no backslashes, no nested ``.ozx``;
    * the archive is written to a hidden temporary file beside the target and renamed onto
      it (:func:`os.replace`) only once complete, so a failed or cancelled save leaves an
      existing file untouched and never a half-written file under the target name.

    Entries can be added from many threads at once: the CRC-32 is computed outside any
    lock, the lock only reserves the byte range at the end of the file, and the bytes are
    written with :func:`os.pwrite` outside the lock (platforms without ``pwrite`` write
    under a separate I/O lock).

:class:`OzxWriteStore`
    A write-only (append-only) zarr-python 3 :class:`zarr.abc.store.Store` over an
    :class:`OzxWriter`, so that ``zarr.create_group``/``zarr.create_array`` with
    ``shards=...`` and whole-shard writes (``arr[...] = data``, ``dask.array.store``,
    ``da.to_zarr`` with dask chunks aligned to shards) stream each shard into the archive
    exactly once. Metadata documents are kept in memory (and may be rewritten) until the
    first data entry arrives; then they are written, sorted, as the first entries.

Why not ``zarr.storage.ZipStore``? It delegates to :mod:`zipfile`, which writes ZIP64
records only when the archive needs them (RFC-9 asks for ZIP64 irrespective of size),
cannot order entries (``zarr.json`` files land wherever zarr happens to write them), has
no way to overwrite or delete, so every rewrite of a key appends a *duplicate* entry (a
partial-shard write rewrites the whole shard: bioio-ome-zarr produced a 9.1 GB file for
88 MB of data that way), serialises every read and write on one global lock, and gives
no control over the archive comment.

Typical use::

    with OzxWriteStore("image.ozx") as store:          # commits on success
        root = zarr.create_group(store=store, attributes={"ome": {...}})
        arr = root.create_array("0", shape=..., chunks=..., shards=..., ...)
        # ... create every group/array and set all attributes first ...
        arr[...] = data                                # whole shards, each written once
    # an exception inside the block aborts: no file is created or replaced

Metadata must be complete before data is written: a ``zarr.json`` that is created or
changed after the first data entry raises :class:`OzxOrderError` (unless
``strict_order=False``, which appends it out of RFC-9 order; changing an already written
document is never possible).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.core.buffer.core import default_buffer_prototype

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ozx._zip import (
    CENTRAL_HEADER,
    EOCD,
    LOCAL_HEADER,
    MAX_COMMENT,
    METHOD_STORED,
    SIG_CENTRAL,
    SIG_EOCD,
    SIG_LOCAL,
    SIG_ZIP64_EOCD,
    SIG_ZIP64_LOCATOR,
    U16_MAX,
    U32_MAX,
    ZIP64_EOCD,
    ZIP64_EXTRA_ID,
    ZIP64_LOCATOR,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType


__all__ = [
    "DEFAULT_COMMENT",
    "DuplicateEntryError",
    "InvalidEntryNameError",
    "OzxOrderError",
    "OzxWriteError",
    "OzxWriteStore",
    "OzxWriter",
    "WriterClosedError",
]

logger = logging.getLogger(__name__)

DEFAULT_COMMENT = b'{"ome":{"version":"0.5"}}'

# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class OzxWriteError(OzxError):
    """Writing an ``.ozx`` failed or was refused."""


class InvalidEntryNameError(OzxWriteError, ValueError):
    """An entry name that RFC-9 / safe ZIP practice forbids (``..``, absolute, ``.ozx``...)."""


class DuplicateEntryError(OzxWriteError, ValueError):
    """The name is already in the archive; an ``.ozx`` entry can be written only once."""


class OzxOrderError(OzxWriteError, ValueError):
    """Metadata (``zarr.json``) added or changed after data entries were written."""


class WriterClosedError(OzxWriteError, RuntimeError):
    """The writer was already committed, aborted or failed."""


# --------------------------------------------------------------------------------------
# ZIP record packing (APPNOTE 6.3.x). Exposed for tests and the validator.
# --------------------------------------------------------------------------------------

VERSION_NEEDED = 45  # 4.5: ZIP64
VERSION_MADE_BY = (3 << 8) | 45  # host 3 = UNIX, spec 4.5
FLAG_UTF8 = 1 << 11
EXTERNAL_ATTR = (0o100644 & 0xFFFF) << 16  # regular file, rw-r--r--

# one definition of the record layouts, shared with the reader (_zip.py)
_LOCAL = LOCAL_HEADER
_CENTRAL = CENTRAL_HEADER
_ZIP64_EOCD = ZIP64_EOCD
_ZIP64_LOCATOR = ZIP64_LOCATOR
_EOCD = EOCD
_EXTRA_HEADER = struct.Struct("<HH")

LOCAL_HEADER_FIXED = _LOCAL.size
CENTRAL_HEADER_FIXED = _CENTRAL.size
ZIP64_EOCD_SIZE = _ZIP64_EOCD.size
ZIP64_LOCATOR_SIZE = _ZIP64_LOCATOR.size
EOCD_FIXED = _EOCD.size
LOCAL_ZIP64_EXTRA_SIZE = 4 + 16
CENTRAL_ZIP64_EXTRA_SIZE = 4 + 24


def dos_date_time(t: time.struct_time | tuple[int, ...] | None = None) -> tuple[int, int]:
    """Return ``(dos_time, dos_date)`` for a local time (default: now), clamped to 1980-2107."""
    if t is None:
        t = time.localtime()
    year, month, day, hour, minute, second = tuple(t)[:6]
    if year < 1980:
        year, month, day, hour, minute, second = 1980, 1, 1, 0, 0, 0
    elif year > 2107:
        year, month, day, hour, minute, second = 2107, 12, 31, 23, 59, 58
    dos_time = (hour << 11) | (minute << 5) | (second // 2)
    dos_date = ((year - 1980) << 9) | (month << 5) | day
    return dos_time, dos_date


def pack_local_header(
    name: bytes, crc: int, size: int, *, flags: int = 0, dos_time: int = 0, dos_date: int = 0x21
) -> bytes:
    """Local file header of a STORED entry with the ZIP64 extra field (always).

    Both 32-bit size fields hold ``0xFFFFFFFF``; the real sizes are in the extra field
    (uncompressed then compressed, as APPNOTE 4.5.3 requires for local headers).
    """
    extra = _EXTRA_HEADER.pack(ZIP64_EXTRA_ID, 16) + struct.pack("<QQ", size, size)
    head = _LOCAL.pack(
        SIG_LOCAL,
        VERSION_NEEDED,
        flags,
        METHOD_STORED,
        dos_time,
        dos_date,
        crc & U32_MAX,
        U32_MAX,
        U32_MAX,
        len(name),
        len(extra),
    )
    return head + name + extra


def pack_central_header(
    name: bytes,
    crc: int,
    size: int,
    offset: int,
    *,
    flags: int = 0,
    dos_time: int = 0,
    dos_date: int = 0x21,
) -> bytes:
    """Central directory header of a STORED entry with the ZIP64 extra field (always).

    Sizes and the local header offset are ``0xFFFFFFFF`` in the fixed part and carried as
    64-bit values in the extra field (uncompressed size, compressed size, offset).
    """
    extra = _EXTRA_HEADER.pack(ZIP64_EXTRA_ID, 24) + struct.pack("<QQQ", size, size, offset)
    head = _CENTRAL.pack(
        SIG_CENTRAL,
        VERSION_MADE_BY,
        VERSION_NEEDED,
        flags,
        METHOD_STORED,
        dos_time,
        dos_date,
        crc & U32_MAX,
        U32_MAX,
        U32_MAX,
        len(name),
        len(extra),
        0,  # file comment length
        0,  # disk number start
        0,  # internal attributes
        EXTERNAL_ATTR,
        U32_MAX,
    )
    return head + name + extra


def pack_zip64_eocd(count: int, cd_size: int, cd_offset: int) -> bytes:
    """ZIP64 end of central directory record (version 1, no extensible data)."""
    return _ZIP64_EOCD.pack(
        SIG_ZIP64_EOCD,
        ZIP64_EOCD_SIZE - 12,  # size of the remaining record
        VERSION_MADE_BY,
        VERSION_NEEDED,
        0,  # number of this disk
        0,  # disk with the start of the central directory
        count,
        count,
        cd_size,
        cd_offset,
    )


def pack_zip64_locator(zip64_eocd_offset: int) -> bytes:
    """ZIP64 end of central directory locator (single disk)."""
    return _ZIP64_LOCATOR.pack(SIG_ZIP64_LOCATOR, 0, zip64_eocd_offset, 1)


def pack_eocd(count: int, cd_size: int, cd_offset: int, comment: bytes = b"") -> bytes:
    """Classic end of central directory record followed by the archive comment.

    Values that fit are written as-is (so readers that ignore ZIP64 end records still see
    correct numbers for small archives); values that do not fit are set to ``0xFFFF`` /
    ``0xFFFFFFFF`` and the ZIP64 record holds them (APPNOTE 4.4.1.4).
    """
    if len(comment) > MAX_COMMENT:
        raise ValueError(f"ZIP archive comment is {len(comment)} bytes; the maximum is 65535")
    n = min(count, U16_MAX)
    return (
        _EOCD.pack(
            SIG_EOCD, 0, 0, n, n, min(cd_size, U32_MAX), min(cd_offset, U32_MAX), len(comment)
        )
        + comment
    )


# --------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------

_METADATA_BASENAMES = ("zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata")


def is_metadata_name(name: str) -> bool:
    """True for Zarr metadata documents (``zarr.json``; Zarr v2 ``.zgroup`` etc. too)."""
    return name.rsplit("/", 1)[-1] in _METADATA_BASENAMES


def metadata_sort_key(name: str) -> tuple[int, int, list[str]]:
    """Order of metadata entries: ``zarr.json`` files first, root first, breadth-first
    (depth = number of ``/``, then by path segments); Zarr v2 documents after them."""
    parts = name.split("/")
    return (0 if parts[-1] == "zarr.json" else 1, len(parts), parts)


def check_entry_name(name: str) -> bytes:
    """Validate a member name and return its UTF-8 encoding.

    Refuses empty names, absolute names (``/x``, ``C:...``), backslashes, empty, ``.`` or
    ``..`` segments, NUL characters, directory entries (trailing ``/``) and names ending
    in ``.ozx`` (RFC-9: no nested OME-Zarr zip files).
    """
    if not isinstance(name, str):
        raise InvalidEntryNameError(f"entry name must be str, not {type(name).__name__}")
    if not name:
        raise InvalidEntryNameError("empty entry name")
    if "\\" in name:
        raise InvalidEntryNameError(f"entry name {name!r} contains a backslash")
    if "\x00" in name:
        raise InvalidEntryNameError(f"entry name {name!r} contains a NUL character")
    if name.startswith("/") or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
        raise InvalidEntryNameError(f"entry name {name!r} is absolute")
    for seg in name.split("/"):
        if seg in ("", ".", ".."):
            raise InvalidEntryNameError(
                f"entry name {name!r} has an empty, '.' or '..' path segment"
            )
    if name.lower().endswith(".ozx"):
        raise InvalidEntryNameError(
            f"entry name {name!r}: an .ozx must not contain another .ozx (RFC-9)"
        )
    encoded = name.encode("utf-8")
    if len(encoded) > U16_MAX:
        raise InvalidEntryNameError(f"entry name is {len(encoded)} bytes; the maximum is 65535")
    return encoded


def _as_bytes_view(data: Any) -> memoryview:
    view = memoryview(data)
    if not view.contiguous:
        raise TypeError("entry data must be a contiguous buffer")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# --------------------------------------------------------------------------------------
# Low-level I/O helpers
# --------------------------------------------------------------------------------------

_HAVE_PWRITE = hasattr(os, "pwrite") and hasattr(os, "pread")
_MAX_IO = 1 << 30  # bytes per syscall; Linux caps a single write at ~2 GiB anyway


def _write_all_at(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view.nbytes:
        n = os.pwrite(fd, view[:_MAX_IO], offset)
        if n <= 0:  # pragma: no cover - pwrite raises instead on real errors
            raise OSError("short write")
        view = view[n:]
        offset += n


def _read_exact_at(fd: int, size: int, offset: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.pread(fd, min(size, _MAX_IO), offset)
        if not chunk:
            raise OzxWriteError("unexpected end of the temporary .ozx file")
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _cleanup_temp(fd: int, path: str) -> None:
    """Close and delete the temporary file (finaliser; must not reference the writer)."""
    with contextlib.suppress(OSError):
        os.close(fd)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:  # pragma: no cover
        logger.warning("could not remove temporary file %s: %s", path, e)


@dataclass(slots=True)
class _Entry:
    name: str
    name_bytes: bytes
    flags: int
    crc: int
    size: int
    offset: int  # of the local header
    data_offset: int
    done: bool = False


# --------------------------------------------------------------------------------------
# OzxWriter
# --------------------------------------------------------------------------------------

_OPEN, _FINISHING, _COMMITTED, _ABORTED, _FAILED = (
    "open",
    "finishing",
    "committed",
    "aborted",
    "failed",
)

ProgressCallback = Callable[[int, int], None]


class OzxWriter:
    """Append-only, thread-safe streaming writer of an RFC-9 ``.ozx`` archive.

    Parameters
    ----------
    target_path
        Final location of the archive. Nothing is created there until :meth:`commit`.
    comment
        ZIP archive comment (``str`` is UTF-8 encoded; ``None`` for none). At most 65535
        bytes, and it must not contain an end-of-central-directory signature.
    strict_order
        If true (default), adding a metadata document (``zarr.json``) after the first data
        entry raises :class:`OzxOrderError`. If false it is appended where it arrives (the
        central directory still lists all ``zarr.json`` first).
    progress
        Optional ``progress(bytes_written, entries_written)`` called after every entry is
        written (from the adding thread, outside the lock). An exception raised by the
        callback propagates out of :meth:`add`, which lets a caller cancel a save; the
        caller then aborts.
    date_time
        Modification time stored for all entries (local time tuple); default: now.
    fsync
        Flush the temporary file to disk before renaming it onto the target (default).
    require_root_metadata
        RFC-9 requires a root ``zarr.json``; if true (default) :meth:`commit` refuses an
        archive without one (raising :class:`~napari_ozx.errors.MetadataError`).

    Metadata documents (``zarr.json``, and Zarr v2 ``.zgroup``/``.zarray``/``.zattrs``/
    ``.zmetadata``) are buffered in memory until the first data entry is added (or until
    :meth:`commit`) and then written sorted: root ``zarr.json`` first, then breadth-first.
    While buffered they may be replaced with ``add(name, data, overwrite=True)`` or removed
    with :meth:`discard_metadata`.

    The writer is a context manager: it commits when the block ends normally and aborts
    when it raises. :meth:`commit` (alias :meth:`finish`) waits for in-flight writes,
    writes the central directory and end records, fsyncs and renames the temporary file
    onto the target with :func:`os.replace`; any failure during commit aborts. On POSIX a
    reader holding the old file open keeps reading the old inode, so saving over a file
    that is being viewed is safe (on Windows the rename fails while it is open).
    """

    def __init__(
        self,
        target_path: str | os.PathLike[str],
        comment: bytes | str | None = DEFAULT_COMMENT,
        *,
        strict_order: bool = True,
        progress: ProgressCallback | None = None,
        date_time: time.struct_time | tuple[int, ...] | None = None,
        fsync: bool = True,
        require_root_metadata: bool = True,
    ) -> None:
        if comment is None:
            comment_b = b""
        elif isinstance(comment, str):
            comment_b = comment.encode("utf-8")
        else:
            comment_b = bytes(comment)
        if len(comment_b) > MAX_COMMENT:
            raise ValueError(f"ZIP archive comment is {len(comment_b)} bytes; maximum is 65535")
        if SIG_EOCD in comment_b:
            raise ValueError("the archive comment must not contain an end-of-central-directory")
        self._comment = comment_b
        self._strict = bool(strict_order)
        self._progress = progress
        self._dos_time, self._dos_date = dos_date_time(date_time)
        self._fsync = fsync
        self._require_root = require_root_metadata

        target = Path(os.fspath(target_path)).absolute()
        if not target.name.lower().endswith(".ozx"):
            logger.warning("RFC-9 recommends the .ozx extension; writing %s", target)
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a directory")
        self._target = target

        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        flags |= getattr(os, "O_CLOEXEC", 0)
        for _ in range(100):
            temp = target.parent / f".{target.name}.{secrets.token_hex(6)}.partial"
            try:
                fd = os.open(temp, flags, 0o666)  # the umask applies, like a normal file
            except FileExistsError:
                continue
            break
        else:  # pragma: no cover
            raise OzxWriteError(f"could not create a temporary file beside {target}")
        self._temp = temp
        self._fd = fd
        self._finalizer = weakref.finalize(self, _cleanup_temp, fd, str(temp))

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._io_lock = threading.Lock()  # only used where os.pwrite is missing
        self._state = _OPEN
        self._error: BaseException | None = None
        self._end = 0  # reserved end of the local entries
        self._bytes_done = 0
        self._entries_done = 0
        self._inflight = 0
        self._entries: list[_Entry] = []  # local (file) order
        self._by_name: dict[str, _Entry] = {}
        self._pending_meta: dict[str, bytes] = {}
        self._meta_flushed = False
        logger.debug("writing %s via %s", target, temp)

    # ------------------------------------------------------------------ properties

    @property
    def target(self) -> Path:
        """Final path of the archive."""
        return self._target

    @property
    def temp_path(self) -> Path:
        """The hidden temporary file the archive is written to until committed."""
        return self._temp

    @property
    def comment(self) -> bytes:
        return self._comment

    @property
    def strict_order(self) -> bool:
        return self._strict

    @property
    def bytes_written(self) -> int:
        """Bytes written to the file so far (after commit: the archive size)."""
        return self._bytes_done

    @property
    def entry_count(self) -> int:
        """Entries accepted so far, including metadata still buffered in memory."""
        with self._lock:
            return len(self._by_name) + len(self._pending_meta)

    @property
    def names(self) -> tuple[str, ...]:
        """Accepted entry names in central-directory order (metadata first, BFS)."""
        with self._lock:
            order = self._central_order_locked()
            pending = list(self._pending_meta)
        meta = [e.name for e in order if is_metadata_name(e.name)] + pending
        meta.sort(key=metadata_sort_key)
        return tuple(meta + [e.name for e in order if not is_metadata_name(e.name)])

    @property
    def metadata_flushed(self) -> bool:
        """True once metadata was written to the file (no more changes possible)."""
        return self._meta_flushed

    @property
    def is_open(self) -> bool:
        return self._state == _OPEN

    @property
    def committed(self) -> bool:
        return self._state == _COMMITTED

    @property
    def aborted(self) -> bool:
        return self._state in (_ABORTED, _FAILED)

    # ------------------------------------------------------------------ queries

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._by_name or name in self._pending_meta

    def is_written(self, name: str) -> bool:
        """True if ``name`` was added as an entry of the file (not merely buffered)."""
        with self._lock:
            return name in self._by_name

    def pending_metadata(self) -> dict[str, bytes]:
        """Copy of the metadata documents still buffered in memory."""
        with self._lock:
            return dict(self._pending_meta)

    def size_of(self, name: str) -> int:
        with self._lock:
            if name in self._pending_meta:
                return len(self._pending_meta[name])
            entry = self._by_name.get(name)
        if entry is None:
            raise KeyError(name)
        return entry.size

    def read(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Read back (part of) an entry: buffered metadata or written bytes (``pread``).

        Meant for the rare read-before-write of zarr (e.g. a partial shard update); waits
        for the entry's write to complete if it is still in flight.
        """
        with self._cond:
            if name in self._pending_meta:
                return self._pending_meta[name][start:end]
            entry = self._by_name.get(name)
            if entry is None:
                raise KeyError(name)
            while not entry.done and self._state == _OPEN:
                self._cond.wait()
            if self._state != _OPEN or not entry.done:
                raise WriterClosedError(f"cannot read {name!r}: the writer is {self._state}")
            self._inflight += 1  # keep the fd open while we read
        try:
            stop = entry.size if end is None else max(0, min(end, entry.size))
            start = max(0, min(start, stop))
            if stop == start:
                return b""
            if _HAVE_PWRITE:
                return _read_exact_at(self._fd, stop - start, entry.data_offset + start)
            with self._io_lock:  # pragma: no cover - non-POSIX
                os.lseek(self._fd, entry.data_offset + start, os.SEEK_SET)
                return os.read(self._fd, stop - start)
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()

    # ------------------------------------------------------------------ adding

    def add(
        self, name: str, data: bytes | bytearray | memoryview, *, overwrite: bool = False
    ) -> None:
        """Append one STORED entry (thread-safe).

        Metadata documents are buffered until the first data entry (``overwrite=True``
        replaces a buffered one). Raises :class:`DuplicateEntryError` for a name already
        present, :class:`InvalidEntryNameError` for a forbidden name,
        :class:`OzxOrderError` for metadata after data in strict mode and
        :class:`WriterClosedError` once committed or aborted.
        """
        name_b = check_entry_name(name)
        view = _as_bytes_view(data)
        if is_metadata_name(name):
            with self._lock:
                self._check_open_locked()
                if not self._meta_flushed:
                    if name in self._pending_meta and not overwrite:
                        raise DuplicateEntryError(f"{name!r} was already added")
                    self._pending_meta[name] = view.tobytes()
                    return
                if self._strict:
                    raise OzxOrderError(
                        f"{name!r} added after data entries were written: RFC-9 wants every "
                        "zarr.json first; create all groups/arrays and attributes before "
                        "writing data (or use strict_order=False)"
                    )
        crc = zlib.crc32(view)  # outside the lock: releases the GIL for large buffers
        flags = 0 if name.isascii() else FLAG_UTF8
        with self._lock:
            self._check_open_locked()
            if not self._meta_flushed:
                self._flush_metadata_locked()
            if name in self._by_name:
                raise DuplicateEntryError(
                    f"{name!r} is already in the archive; entries can be written only once"
                )
            header, entry = self._reserve_locked(name, name_b, flags, crc, view.nbytes)
            if not _HAVE_PWRITE:  # pragma: no cover - non-POSIX: write under the lock
                self._write_or_fail_locked(entry, header, view)
                entry.done = True
                self._bytes_done += len(header) + entry.size
                self._entries_done += 1
                self._cond.notify_all()
                self._inflight -= 1
        if _HAVE_PWRITE:
            try:
                _write_all_at(self._fd, header, entry.offset)
                _write_all_at(self._fd, view, entry.data_offset)
            except BaseException as exc:
                with self._cond:
                    self._fail_locked(exc)
                    self._inflight -= 1
                    self._cond.notify_all()
                raise
            with self._cond:
                entry.done = True
                self._bytes_done += len(header) + entry.size
                self._entries_done += 1
                self._inflight -= 1
                self._cond.notify_all()
        if self._progress is not None:
            self._progress(self._bytes_done, self._entries_done)

    def add_metadata(self, mapping: Mapping[str, bytes | bytearray | memoryview]) -> None:
        """Add (or replace, while still buffered) several metadata documents at once."""
        for name, data in mapping.items():
            if not is_metadata_name(name):
                raise ValueError(f"{name!r} is not a Zarr metadata document")
            self.add(name, data, overwrite=True)

    def discard_metadata(self, name: str) -> bool:
        """Remove a buffered metadata document; False if there is none by that name.

        Raises :class:`OzxOrderError` if it was already written to the file.
        """
        with self._lock:
            self._check_open_locked()
            if name in self._pending_meta:
                del self._pending_meta[name]
                return True
            if name in self._by_name:
                raise OzxOrderError(f"cannot remove {name!r}: it was already written")
            return False

    def flush_metadata(self) -> None:
        """Write the buffered metadata now (normally automatic at the first data entry)."""
        with self._lock:
            self._check_open_locked()
            if not self._meta_flushed:
                self._flush_metadata_locked()

    # ------------------------------------------------------------------ finishing

    def commit(self) -> Path:
        """Finish the archive and atomically move it onto the target. Returns the target.

        Waits for entries still being written, writes the central directory and the end
        records, fsyncs and renames. Idempotent once committed. Any failure discards the
        temporary file (the target is untouched) and re-raises.
        """
        with self._cond:
            if self._state == _COMMITTED:
                return self._target
            if self._state != _OPEN:
                raise WriterClosedError(f"cannot commit: the writer is {self._state}")
            self._state = _FINISHING
            while self._inflight:
                self._cond.wait()
            self._inflight += 1  # the commit itself: abort() waits for it
        try:
            with self._lock:
                if self._error is not None:
                    raise OzxWriteError(f"an entry failed to write: {self._error}") from self._error
                if not self._meta_flushed:
                    self._flush_metadata_locked()
                if self._require_root and "zarr.json" not in self._by_name:
                    raise MetadataError(
                        "an .ozx must contain the root zarr.json of its OME-Zarr hierarchy"
                    )
                order = self._central_order_locked()
            cd = b"".join(
                pack_central_header(
                    e.name_bytes,
                    e.crc,
                    e.size,
                    e.offset,
                    flags=e.flags,
                    dos_time=self._dos_time,
                    dos_date=self._dos_date,
                )
                for e in order
            )
            cd_offset = self._end
            tail = (
                cd
                + pack_zip64_eocd(len(order), len(cd), cd_offset)
                + pack_zip64_locator(cd_offset + len(cd))
                + pack_eocd(len(order), len(cd), cd_offset, self._comment)
            )
            self._write_at(tail, cd_offset)
            if self._fsync:
                os.fsync(self._fd)
            with self._lock:
                if self._state != _FINISHING:
                    raise WriterClosedError("the write was aborted while committing")
            self._finalizer.detach()
            fd, self._fd = self._fd, -1
            os.close(fd)
            os.replace(self._temp, self._target)
            with self._lock:
                self._state = _COMMITTED
                self._bytes_done += len(tail)
        except BaseException as exc:
            logger.debug("commit of %s failed: %r", self._target, exc)
            with self._lock:
                if self._state != _COMMITTED:
                    self._state = _FAILED
                    if self._error is None:
                        self._error = exc
            self._discard_temp()
            raise
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()
        if self._fsync:
            _fsync_dir(self._target.parent)
        logger.debug("wrote %s: %d entries, %d bytes", self._target, len(order), self._bytes_done)
        return self._target

    finish = commit

    def close(self) -> None:
        """Commit if still open; no-op once committed; clean up once aborted or failed."""
        if self._state == _OPEN:
            self.commit()
        elif self._state != _COMMITTED:
            self.abort()

    def abort(self) -> None:
        """Discard the write: wait for in-flight entries, delete the temporary file.

        The target is never touched. Safe to call more than once; a no-op after commit.
        """
        with self._cond:
            if self._state == _COMMITTED:
                return
            if self._state in (_OPEN, _FINISHING):
                self._state = _ABORTED
            while self._inflight:
                self._cond.wait()
            if self._state == _COMMITTED:  # a concurrent commit got there first
                return
        self._discard_temp()
        logger.debug("aborted writing %s", self._target)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"OzxWriter({str(self._target)!r}, state={self._state})"

    def __getstate__(self) -> None:
        raise TypeError("an OzxWriter cannot be pickled (it owns an open file)")

    # ------------------------------------------------------------------ internals

    def _check_open_locked(self) -> None:
        if self._state != _OPEN:
            detail = f": {self._error}" if self._error is not None else ""
            raise WriterClosedError(f"the .ozx writer for {self._target} is {self._state}{detail}")

    def _fail_locked(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        if self._state == _OPEN:
            self._state = _FAILED

    def _discard_temp(self) -> None:
        if self._finalizer.alive:
            self._finalizer()  # closes the fd and deletes the temporary file, once
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._temp)
        self._fd = -1

    def _reserve_locked(
        self, name: str, name_b: bytes, flags: int, crc: int, size: int
    ) -> tuple[bytes, _Entry]:
        header = pack_local_header(
            name_b, crc, size, flags=flags, dos_time=self._dos_time, dos_date=self._dos_date
        )
        offset = self._end
        entry = _Entry(name, name_b, flags, crc, size, offset, offset + len(header))
        self._end = entry.data_offset + size
        self._by_name[name] = entry
        self._entries.append(entry)
        self._inflight += 1
        return header, entry

    def _write_at(self, data: bytes | memoryview, offset: int) -> None:
        if _HAVE_PWRITE:
            _write_all_at(self._fd, data, offset)
        else:  # pragma: no cover - non-POSIX
            with self._io_lock:
                os.lseek(self._fd, offset, os.SEEK_SET)
                view = memoryview(data)
                while view.nbytes:
                    view = view[os.write(self._fd, view[:_MAX_IO]) :]

    def _write_or_fail_locked(self, entry: _Entry, header: bytes, view: memoryview) -> None:
        try:
            self._write_at(header, entry.offset)
            self._write_at(view, entry.data_offset)
        except BaseException as exc:
            self._fail_locked(exc)
            self._inflight -= 1
            self._cond.notify_all()
            raise

    def _flush_metadata_locked(self) -> None:
        """Write all buffered metadata, sorted, at the current end (small; under the lock)."""
        self._meta_flushed = True
        for name in sorted(self._pending_meta, key=metadata_sort_key):
            data = self._pending_meta[name]
            header, entry = self._reserve_locked(
                name,
                name.encode("utf-8"),
                0 if name.isascii() else FLAG_UTF8,
                zlib.crc32(data),
                len(data),
            )
            try:
                self._write_at(header + data, entry.offset)
            except BaseException as exc:
                self._fail_locked(exc)
                self._inflight -= 1
                raise
            entry.done = True
            self._inflight -= 1
            self._bytes_done += len(header) + len(data)
            self._entries_done += 1
        self._pending_meta.clear()

    def _central_order_locked(self) -> list[_Entry]:
        """Written entries in central-directory order: metadata (sorted) first, then the
        others in the order they were written."""
        meta = [e for e in self._entries if is_metadata_name(e.name)]
        meta.sort(key=lambda e: metadata_sort_key(e.name))
        return meta + [e for e in self._entries if not is_metadata_name(e.name)]


def _fsync_dir(path: Path) -> None:
    """Persist a rename (POSIX); silently skipped where directories cannot be opened."""
    try:
        dfd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# --------------------------------------------------------------------------------------
# zarr Store
# --------------------------------------------------------------------------------------


def _byte_range_bounds(size: int, byte_range: ByteRequest | None) -> tuple[int, int]:
    if byte_range is None:
        return 0, size
    if isinstance(byte_range, RangeByteRequest):
        start, stop = byte_range.start, min(byte_range.end, size)
    elif isinstance(byte_range, OffsetByteRequest):
        start, stop = byte_range.offset, size
    elif isinstance(byte_range, SuffixByteRequest):
        start, stop = max(size - byte_range.suffix, 0), size
    else:
        raise TypeError(f"unexpected byte range {byte_range!r}")
    start = max(0, min(start, size))
    return start, max(start, stop)


class OzxWriteStore(Store):
    """Write-only, append-only zarr-python 3 store that streams into a new ``.ozx``.

    Parameters
    ----------
    target
        Target path (a new :class:`OzxWriter` is created with the remaining arguments) or
        an existing :class:`OzxWriter`.
    comment, strict_order, progress, **writer_kwargs
        Passed to :class:`OzxWriter`.

    Behaviour
    ---------
    * Metadata keys (``zarr.json``...) live in memory: ``get``/``exists``/``list`` see
      them, and zarr may rewrite them (nested groups, attribute updates) as long as no data
      key was written yet. The first data key writes them all, root first, breadth-first.
      Creating or changing metadata later raises :class:`OzxOrderError`.
    * A data key (chunk or shard) is appended once. Setting it again (or deleting it once
      written) raises :class:`DuplicateEntryError`: zarr rewrites a shard only for a write
      that covers part of it, so align writes (dask chunks) to whole shards.
    * ``get`` of a written data key reads it back from the temporary file (zarr's sharding
      codec reads before every write; for a new shard that read finds nothing).
    * Deleting a key that does not exist is a no-op (zarr deletes shards that are entirely
      ``fill_value`` instead of writing them; missing entries read back as fill value).

    Finishing
    ---------
    :meth:`commit` finalises and renames the archive onto the target; :meth:`abort`
    discards it. ``close()`` commits unless the store was aborted (or already committed).
    zarr itself never calls ``close()``; the store's context manager commits when its
    block ends normally and aborts when the block raises. Reading data back after commit
    is not supported; open the committed ``.ozx`` with a reader store instead.

    The store cannot be pickled (it owns an open file): use dask's threaded scheduler,
    not processes or ``distributed``.
    """

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True

    def __init__(
        self,
        target: str | os.PathLike[str] | OzxWriter,
        *,
        comment: bytes | str | None = DEFAULT_COMMENT,
        strict_order: bool = True,
        progress: ProgressCallback | None = None,
        **writer_kwargs: Any,
    ) -> None:
        super().__init__(read_only=False)
        if isinstance(target, OzxWriter):
            self._writer = target
        else:
            self._writer = OzxWriter(
                target, comment, strict_order=strict_order, progress=progress, **writer_kwargs
            )
        self._meta: dict[str, bytes] = self._writer.pending_metadata()
        self._meta_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def writer(self) -> OzxWriter:
        return self._writer

    @property
    def path(self) -> Path:
        return self._writer.target

    def commit(self) -> Path:
        """Finish the archive and move it onto the target (see :meth:`OzxWriter.commit`)."""
        path = self._writer.commit()
        self._is_open = False
        return path

    def abort(self) -> None:
        """Discard everything written; the target is left untouched."""
        self._writer.abort()
        self._is_open = False

    def close(self) -> None:
        """Commit unless aborted or already committed."""
        self._writer.close()
        super().close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("an OzxWriteStore cannot be pickled (it owns an open file)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OzxWriteStore) and other._writer is self._writer

    def __hash__(self) -> int:
        return id(self._writer)

    def __str__(self) -> str:
        return f"ozx+write://{self._writer.target}"

    def __repr__(self) -> str:
        return f"OzxWriteStore({str(self._writer.target)!r})"

    # ------------------------------------------------------------------ reads

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        if prototype is None:
            prototype = default_buffer_prototype()
        meta = self._meta.get(key)
        if meta is not None:
            start, stop = _byte_range_bounds(len(meta), byte_range)
            return prototype.buffer.from_bytes(meta[start:stop])
        if not self._writer.is_written(key):
            return None
        size = self._writer.size_of(key)
        start, stop = _byte_range_bounds(size, byte_range)
        logger.debug("reading back %s [%d:%d] from the partial .ozx", key, start, stop)
        data = await asyncio.to_thread(self._writer.read, key, start, stop)
        return prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        return [await self.get(key, prototype, br) for key, br in key_ranges]

    async def exists(self, key: str) -> bool:
        return key in self._meta or self._writer.is_written(key)

    async def getsize(self, key: str) -> int:
        meta = self._meta.get(key)
        if meta is not None:
            return len(meta)
        if self._writer.is_written(key):
            return self._writer.size_of(key)
        raise FileNotFoundError(key)

    def _all_keys(self) -> list[str]:
        keys = list(self._meta)
        keys.extend(n for n in self._writer.names if n not in self._meta)
        return keys

    async def list(self) -> AsyncIterator[str]:
        for key in self._all_keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in self._all_keys():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        lead = "" if prefix == "" else prefix + "/"
        seen: set[str] = set()
        for key in self._all_keys():
            if not key.startswith(lead):
                continue
            child = key[len(lead) :].split("/", 1)[0]
            if child and child not in seen:
                seen.add(child)
                yield child

    # ------------------------------------------------------------------ writes

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        if not isinstance(value, Buffer):
            raise TypeError(f"OzxWriteStore.set(): value must be a Buffer, not {type(value)}")
        if is_metadata_name(key):
            self._set_metadata(key, value.to_bytes())
            return
        view = value.as_buffer_like()
        try:
            await asyncio.to_thread(self._writer.add, key, view)
        except DuplicateEntryError:
            raise DuplicateEntryError(self._rewrite_message(key, "write")) from None

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        self._check_writable()
        if is_metadata_name(key):
            with self._meta_lock:
                if key in self._meta:
                    return
                self._set_metadata_locked(key, value.to_bytes())
            return
        if not self._writer.is_written(key):
            await self.set(key, value)

    def _set_metadata(self, key: str, data: bytes) -> None:
        with self._meta_lock:
            self._set_metadata_locked(key, data)

    def _set_metadata_locked(self, key: str, data: bytes) -> None:
        if self._writer.metadata_flushed and self._meta.get(key) == data:
            return  # unchanged: nothing to write
        try:
            self._writer.add(key, data, overwrite=True)
        except DuplicateEntryError:
            raise OzxOrderError(
                f"{key!r} was already written to {self._writer.target}; metadata cannot be "
                "changed after data was written: set all attributes before writing data"
            ) from None
        self._meta[key] = data

    async def delete(self, key: str) -> None:
        self._check_writable()
        if is_metadata_name(key):
            with self._meta_lock:
                if key in self._meta:
                    self._writer.discard_metadata(key)  # raises once written
                    del self._meta[key]
            return
        if self._writer.is_written(key):
            raise DuplicateEntryError(self._rewrite_message(key, "delete"))
        # never written: nothing to do (zarr deletes all-fill-value shards)

    def _rewrite_message(self, key: str, what: str) -> str:
        return (
            f"cannot {what} {key!r}: it was already written to {self._writer.target}, and an "
            ".ozx entry is written exactly once. zarr rewrites a shard when a write covers "
            "only part of it: align writes (e.g. dask chunks) to whole shards"
        )
