"""Stream an OME-Zarr hierarchy into a new single-file ``.ozx`` (RFC-9): :class:`OzxWriter`.

An append-only ZIP writer meeting every MUST and SHOULD of RFC-9: every entry STORED with
its CRC-32 in the local header (no data descriptor), ZIP64 always, all ``zarr.json``
entries first (root, then breadth-first), the archive comment, safe unique names. The
rules and their quoted text are :mod:`napari_ozx.ozx.rfc9`'s, the record layouts
:mod:`napari_ozx.ozx.records`'. The archive goes to a hidden temporary file beside the
target, renamed onto it only once complete. Entries may be added from many threads
(``pwrite`` outside the lock). The zarr store over it is
:class:`~napari_ozx.ozx.write_store.OzxWriteStore`; this module does not import zarr.
Why not zarr's ``ZipStore``: ``docs/design/ozx-container.md``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypedDict

from napari_ozx.errors import MetadataError, OzxError
from napari_ozx.ozx import rfc9
from napari_ozx.ozx.atomic import create_partial, fsync_dir, remove_stale_partials
from napari_ozx.ozx.records import (
    FLAG_UTF8,
    MAX_COMMENT,
    SIG_EOCD,
    dos_date_time,
    pack_central_header,
    pack_eocd,
    pack_local_header,
    pack_zip64_eocd,
    pack_zip64_locator,
)
from napari_ozx.ozx.rfc9 import DEFAULT_COMMENT, is_metadata_name, metadata_sort_key

if TYPE_CHECKING:
    from types import TracebackType

    from napari_ozx.ozx.store import OzxStore


__all__ = [
    "DEFAULT_COMMENT",
    "CommitOnExit",
    "DuplicateEntryError",
    "InvalidEntryNameError",
    "OzxOrderError",
    "OzxWriteError",
    "OzxWriter",
    "ProgressCallback",
    "WriterClosedError",
    "WriterOptions",
    "copy_range",
]

logger = logging.getLogger(__name__)

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


def _as_bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
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


_COPY_BUF = 8 << 20  # fallback copy: pread/pwrite of 8 MiB (measured: larger buys nothing)
#: ``os.copy_file_range`` copies in the kernel (no user-space buffer; a reflink or a
#: server-side copy where the file system can). Tests switch it off to compare the paths.
_USE_COPY_FILE_RANGE = hasattr(os, "copy_file_range")
_CFR_FALLBACK_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("EXDEV", "ENOSYS", "EOPNOTSUPP", "EINVAL", "EBADF", "ETXTBSY")
    if hasattr(errno, n)
)


def copy_range(src_fd: int, src_offset: int, dst_fd: int, dst_offset: int, size: int) -> None:
    """Copy ``size`` bytes between two descriptors at explicit offsets (no file position
    is used or changed): ``os.copy_file_range`` where available, else (or when the kernel
    refuses it, e.g. ``EXDEV`` across file systems) a ``pread``/``pwrite`` loop with an
    8 MiB buffer. Raises :class:`OzxWriteError` if the source ends early."""
    if _USE_COPY_FILE_RANGE:
        try:
            while size > 0:
                n = os.copy_file_range(src_fd, dst_fd, min(size, _MAX_IO), src_offset, dst_offset)
                if n <= 0:
                    raise OzxWriteError("the source archive ended before the member did")
                size -= n
                src_offset += n
                dst_offset += n
            return
        except OSError as e:
            if e.errno not in _CFR_FALLBACK_ERRNOS:
                raise
    while size > 0:
        chunk = os.pread(src_fd, min(size, _COPY_BUF), src_offset)
        if not chunk:
            raise OzxWriteError("the source archive ended before the member did")
        _write_all_at(dst_fd, chunk, dst_offset)
        size -= len(chunk)
        src_offset += len(chunk)
        dst_offset += len(chunk)


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


class WriterOptions(TypedDict, total=False):
    """:class:`OzxWriter`'s keyword arguments that stores over it pass through."""

    date_time: time.struct_time | tuple[int, ...] | None
    fsync: bool
    require_root_metadata: bool


class CommitOnExit:
    """A ``with`` block around a write: :meth:`close` (commit) when the block ends
    normally, :meth:`abort` (nothing left behind) when it raises."""

    if TYPE_CHECKING:  # the class's own; none here, so ``super().close()`` passes by

        def close(self) -> None: ...

        def abort(self) -> None: ...

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


class OzxWriter(CommitOnExit):
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
        if not rfc9.has_ozx_extension(target.name):
            logger.warning(
                "%s (%s); writing %s", rfc9.EXTENSION.text, rfc9.EXTENSION.citation, target
            )
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a directory")
        self._target = target

        remove_stale_partials(target)
        try:
            # held while we live (locked): the next save removes it if we die
            temp, fd = create_partial(target)
        except FileExistsError as e:  # pragma: no cover
            raise OzxWriteError(f"could not create a temporary file beside {target}") from e
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
        name_b = rfc9.check_entry_name(name, InvalidEntryNameError)
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
                        f"{name!r} added after data entries were written: create all "
                        "groups/arrays and attributes before writing data (or use "
                        f"strict_order=False). {rfc9.ORDER.citation}: {rfc9.ORDER.text}"
                    )
        crc = zlib.crc32(view)  # outside the lock: releases the GIL for large buffers
        header, entry = self._reserve(name, name_b, crc, view.nbytes, view)
        if _HAVE_PWRITE:
            self._write_reserved(
                header, entry, lambda: _write_all_at(self._fd, view, entry.data_offset)
            )
        if self._progress is not None:
            self._progress(self._bytes_done, self._entries_done)

    def _reserve(
        self, name: str, name_b: bytes, crc: int, size: int, view: memoryview | None = None
    ) -> tuple[bytes, _Entry]:
        """Reserve data entry *name*'s local header and *size* bytes (the archive open, the
        metadata flushed first, the name new); without ``pwrite``, *view* is written there
        under the lock."""
        flags = 0 if name.isascii() else FLAG_UTF8
        with self._lock:
            self._check_open_locked()
            if not self._meta_flushed:
                self._flush_metadata_locked()
            if name in self._by_name:
                raise DuplicateEntryError(
                    f"{name!r} is already in the archive; entries can be written only once"
                )
            header, entry = self._reserve_locked(name, name_b, flags, crc, size)
            if view is not None and not _HAVE_PWRITE:  # pragma: no cover - non-POSIX
                self._write_or_fail_locked(entry, header, view)
                entry.done = True
                self._bytes_done += len(header) + entry.size
                self._entries_done += 1
                self._cond.notify_all()
                self._inflight -= 1
        return header, entry

    def _write_reserved(self, header: bytes, entry: _Entry, write_data: Callable[[], None]) -> None:
        """Write a reserved entry's local header and data (``write_data``) at their
        offsets, then mark it done; a failure fails the writer."""
        try:
            _write_all_at(self._fd, header, entry.offset)
            write_data()
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

    def add_copy(self, name: str, src_fd: int, src_offset: int, size: int, crc: int) -> None:
        """Append one STORED entry whose bytes are copied from another file (thread-safe).

        ``size`` bytes at ``src_offset`` of the open descriptor ``src_fd`` become the
        entry's data, copied by :func:`copy_range` (``os.copy_file_range``, in the kernel)
        and **not** read into Python: ``crc`` is written as the entry's CRC-32 unverified.
        Only pass a CRC the source archive vouches for (the member is STORED and its local
        header agrees with its central record: :func:`~napari_ozx.ozx._zip.stored_extent`).
        Copying unchanged members this way is what makes a label save-back cost about a
        file copy instead of a read, a CRC pass and a write of every member.

        Metadata documents are read and added with :meth:`add` (they are buffered and
        sorted; small). Same errors as :meth:`add`.
        """
        name_b = rfc9.check_entry_name(name, InvalidEntryNameError)
        if size < 0 or not 0 <= crc <= 0xFFFFFFFF:
            raise ValueError(f"{name!r}: invalid size {size} or CRC-32 {crc}")
        if is_metadata_name(name) or not _HAVE_PWRITE:
            data = _read_exact_at(src_fd, size, src_offset) if size else b""
            if zlib.crc32(data) != crc:
                raise OzxWriteError(f"{name!r}: the copied bytes do not match their CRC-32")
            self.add(name, data)
            return
        header, entry = self._reserve(name, name_b, crc, size)
        self._write_reserved(
            header,
            entry,
            lambda: copy_range(src_fd, src_offset, self._fd, entry.data_offset, size),
        )
        if self._progress is not None:
            self._progress(self._bytes_done, self._entries_done)

    def add_copy_from(self, store: OzxStore, name: str) -> bool:
        """Copy member *name* of an open :class:`~napari_ozx.ozx.store.OzxStore` (local
        file) with :meth:`add_copy` if its recorded CRC-32 can be trusted
        (:func:`~napari_ozx.ozx._zip.stored_extent`); returns False, adding nothing, when
        it cannot (not a local file, not STORED, local header disagrees): the caller then
        reads the member and uses :meth:`add`, which re-checksums it."""
        from napari_ozx.ozx._zip import FileRangeReader, stored_extent

        reader = store.reader
        index = store.index
        entry = index.by_name.get(name)
        if entry is None or not isinstance(reader, FileRangeReader):
            return False
        off = stored_extent(reader, entry, limit=index.cd_offset)
        if off is None:
            return False
        self.add_copy(name, reader.fd, off, entry.compressed_size, entry.crc32)
        return True

    def copy_member(self, store: OzxStore, name: str) -> None:
        """Member *name* of *store* (an open OzxStore) byte for byte: the kernel copy of
        :meth:`add_copy_from` where its CRC-32 can be trusted, else read and re-checksummed
        by :meth:`add`."""
        if self.add_copy_from(store, name):
            return
        raw = store.get_sync(name)  # decoded bytes
        if raw is None:
            raise OzxError(f"member {name!r} could not be read")
        self.add(name, raw.as_numpy_array().data)

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
                        "an .ozx must contain the root zarr.json of its OME-Zarr hierarchy "
                        f"({rfc9.ROOT.citation}: {rfc9.ROOT.text})"
                    )
                order = self._central_order_locked()
            cd = b"".join(
                pack_central_header(
                    e.name_bytes,
                    e.crc,
                    e.size,
                    e.offset,
                    method=rfc9.WRITE_METHOD,
                    flags=e.flags,
                    dos_time=self._dos_time,
                    dos_date=self._dos_date,
                    zip64=rfc9.WRITE_ZIP64,
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
            fsync_dir(self._target.parent)
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
            name_b,
            crc,
            size,
            method=rfc9.WRITE_METHOD,
            flags=flags,
            dos_time=self._dos_time,
            dos_date=self._dos_date,
            zip64=rfc9.WRITE_ZIP64,
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
