"""ZIP central-directory reader for ``.ozx`` archives (PKWARE APPNOTE 6.3.x; no Zarr, no OME).

:func:`read_zip_index` reads the file's tail once (:data:`TAIL_SIZE`), finds the end
records (ZIP64 ones too) and parses the central directory into a :class:`ZipIndex` (from
the tail, or with exactly one more read), vectorised with numpy when it is well formed.
No count or size field is trusted before it is bounded by the file size: hostile files
raise :class:`~napari_ozx.errors.ZipFormatError` or
:class:`~napari_ozx.errors.UnsupportedZipFeature`, nothing else. :func:`read_local_header`
finds where an entry's data starts and checks it against its central record.

Byte sources are :class:`RangeReader` objects: :class:`FileRangeReader` (``os.pread``,
lock-free) and :class:`FileObjRangeReader` (any seekable file object, under a lock).
Record layouts are :mod:`napari_ozx.ozx.records`'; design notes in
``docs/design/ozx-container.md``.
"""

from __future__ import annotations

import logging
import os
import stat
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, overload

import numpy as np

from napari_ozx.errors import UnsupportedZipFeature, ZipFormatError
from napari_ozx.ozx.records import (
    CENTRAL_HEADER,
    EOCD,
    FLAG_DATA_DESCRIPTOR,
    FLAG_ENCRYPTED,
    FLAG_STRONG_ENCRYPTION,
    FLAG_UTF8,
    LOCAL_HEADER,
    MAX_COMMENT,
    METHOD_STORED,
    SIG_CENTRAL,
    SIG_EOCD,
    SIG_LOCAL,
    SIG_ZIP64_EOCD,
    SIG_ZIP64_LOCATOR,
    U16,
    U32_MAX,
    ZIP64_EOCD,
    ZIP64_EOCD_BODY,
    ZIP64_EXTRA_ID,
    ZIP64_LOCATOR,
    method_name,
    read_zip64_extra,
    unpack_eocd,
    unpack_local_header,
    unpack_zip64_eocd,
    unpack_zip64_locator,
)

__all__ = [
    "TAIL_SIZE",
    "BinaryFile",
    "FileObjRangeReader",
    "FileRangeReader",
    "LocalExtent",
    "RangeReader",
    "ZipEntry",
    "ZipIndex",
    "data_offset",
    "local_header_name",
    "open_reader",
    "read_local_header",
    "read_zip_index",
    "stored_extent",
]

logger = logging.getLogger(__name__)

#: Bytes read from the end of the file in one go. Must hold the EOCD with the longest
#: possible comment plus the ZIP64 locator and ZIP64 EOCD (65,633 bytes); the rest is room
#: for the central directory itself (~1,500 entries of an .ozx), so small archives open
#: with a single read.
TAIL_SIZE = 128 * 1024
assert EOCD.size + MAX_COMMENT + ZIP64_LOCATOR.size + ZIP64_EOCD.size <= TAIL_SIZE


# --------------------------------------------------------------------------- readers

_T = TypeVar("_T")


class BinaryFile(Protocol):
    """A seekable binary file-like object (``io.BytesIO``, ``open(p, "rb")``, an fsspec
    file): what :class:`FileObjRangeReader` reads."""

    def seek(self, offset: int, whence: int = ..., /) -> object: ...
    def tell(self) -> int: ...
    def read(self, size: int = ..., /) -> bytes | bytearray | None: ...
    def close(self) -> None: ...


class RangeReader:
    """Random access to the bytes of one file.

    Subclasses set :attr:`size` (total length, fixed at open) and implement :meth:`read`.
    ``read(offset, length)`` returns exactly ``length`` bytes or raises
    :class:`ZipFormatError` when the file ends earlier (a truncated archive); the bound is
    checked against :attr:`size` *before* any buffer is allocated.
    """

    size: int
    name: str | None = None

    def read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - trivial default
        """Release the underlying resource (idempotent)."""

    @property
    def closed(self) -> bool:  # pragma: no cover - overridden
        return False

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0:
            raise ValueError(f"negative offset or length: offset={offset}, length={length}")
        if offset + length > self.size:
            raise ZipFormatError(
                f"unexpected end of file: {length} bytes wanted at offset {offset}, but the "
                f"file is {self.size} bytes long (truncated or corrupt archive?)"
            )

    def _short(self, offset: int, length: int, got: int) -> ZipFormatError:
        return ZipFormatError(
            f"unexpected end of file: {length} bytes wanted at offset {offset}, got {got} "
            f"(file shrank or is truncated)"
        )


_HAVE_PREAD = hasattr(os, "pread")


class FileRangeReader(RangeReader):
    """Reads a local file with ``os.pread`` on one descriptor: no lock, no seek, one syscall.

    Safe to share between threads. On platforms without ``pread`` (Windows) it falls back
    to ``lseek`` + ``read`` under a lock.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.name = self.path
        flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.path, flags)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ZipFormatError(f"{self.path!r} is not a regular file")
            self.size = st.st_size
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._lock = None if _HAVE_PREAD else threading.Lock()

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def read(self, offset: int, length: int) -> bytes:
        fd = self._fd
        if fd < 0:
            raise ValueError(f"read from closed reader for {self.path!r}")
        if offset < 0 or length < 0 or offset + length > self.size:
            self._check(offset, length)
        if self._lock is None:
            data = os.pread(fd, length, offset)
            if len(data) == length:
                return data
            # Short read: > 2 GiB requests on Linux, or the file shrank. Continue.
            parts = [data]
            got = len(data)
            while got < length:
                chunk = os.pread(fd, length - got, offset + got)
                if not chunk:
                    raise self._short(offset, length, got)
                parts.append(chunk)
                got += len(chunk)
            return b"".join(parts)
        with self._lock:  # pragma: no cover - Windows only
            os.lseek(fd, offset, os.SEEK_SET)
            parts = []
            got = 0
            while got < length:
                chunk = os.read(fd, length - got)
                if not chunk:
                    raise self._short(offset, length, got)
                parts.append(chunk)
                got += len(chunk)
            return b"".join(parts)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # *_close* is bound at definition: at interpreter exit module globals (os,
        # contextlib) may already be gone when a leftover reader is collected
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            try:  # noqa: SIM105 (contextlib may be gone at exit)
                _close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd={self._fd}"
        return f"FileRangeReader({self.path!r}, size={self.size}, {state})"


class FileObjRangeReader(RangeReader):
    """Reads any seekable binary file-like object (``io.BytesIO``, ``open(p, 'rb')``, fsspec
    files...). ``seek`` + ``read`` pairs run under a lock so threads can share it.

    The file object belongs to the caller unless ``close_file=True``.
    """

    def __init__(self, fobj: BinaryFile, *, close_file: bool = False) -> None:
        if not (hasattr(fobj, "seek") and hasattr(fobj, "read")):
            raise TypeError(f"expected a binary file-like object with seek/read, got {fobj!r}")
        self.fobj = fobj
        self.name = _fobj_name(fobj)
        self._close_file = close_file
        self._closed = False
        self._lock = threading.Lock()
        with self._lock:
            end = fobj.seek(0, os.SEEK_END)
            if not isinstance(end, int):  # some file-likes return None from seek
                end = fobj.tell()
        self.size = int(end)

    @property
    def closed(self) -> bool:
        return self._closed

    def read(self, offset: int, length: int) -> bytes:
        if self._closed:
            raise ValueError(f"read from closed reader for {self.fobj!r}")
        self._check(offset, length)
        with self._lock:
            self.fobj.seek(offset)
            data = self.fobj.read(length)
            if data is None:
                data = b""
            if len(data) != length:
                parts = [bytes(data)]
                got = len(data)
                while got < length:
                    chunk = self.fobj.read(length - got)
                    if not chunk:
                        raise self._short(offset, length, got)
                    parts.append(bytes(chunk))
                    got += len(chunk)
                return b"".join(parts)
        return data if type(data) is bytes else bytes(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._close_file:
            self.fobj.close()

    def __repr__(self) -> str:
        return f"FileObjRangeReader({self.fobj!r}, size={self.size})"


def _fobj_name(fobj: object) -> str | None:
    for attr in ("path", "name"):
        value = getattr(fobj, attr, None)
        if isinstance(value, str | os.PathLike):
            return os.fspath(value)
    return None


def open_reader(
    source: str | os.PathLike[str] | RangeReader | BinaryFile,
) -> tuple[RangeReader, bool]:
    """A reader for a path or a file-like object, and whether the caller owns (must close) it."""
    if isinstance(source, RangeReader):
        return source, False
    if isinstance(source, str | os.PathLike):
        return FileRangeReader(source), True
    if hasattr(source, "seek") and hasattr(source, "read"):
        return FileObjRangeReader(source), True
    raise TypeError(
        f"expected a path, a binary file-like object or a RangeReader, got {type(source).__name__}"
    )


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True, slots=True)
class ZipEntry:
    """One central directory record, with ZIP64 values already substituted."""

    name: str
    index: int  #: position in the central directory
    header_offset: int  #: offset of the local file header
    method: int
    flags: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    zip64_extra: bool  #: the record carries a ZIP64 extended-information extra field
    extra: bytes  #: raw central-directory extra field

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")

    @property
    def is_encrypted(self) -> bool:
        return bool(self.flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION))

    @property
    def has_data_descriptor(self) -> bool:
        return bool(self.flags & FLAG_DATA_DESCRIPTOR)

    @property
    def utf8(self) -> bool:
        return bool(self.flags & FLAG_UTF8)


@dataclass(frozen=True, slots=True)
class ZipIndex:
    """What the end records and the central directory of an archive say."""

    #: central-directory order, duplicates kept. A lazy sequence over a compact table
    #: (:class:`_EntryTable`): a :class:`ZipEntry` is built when one is asked for.
    entries: Sequence[ZipEntry]
    #: name -> entry. For duplicated names the LAST record wins, like Python's ``zipfile``
    #: and zarr's ``ZipStore`` (which append a new record when a key is rewritten, so the
    #: last one holds the data the writer meant).
    by_name: Mapping[str, ZipEntry]
    duplicates: tuple[str, ...]  #: names with more than one record, in first-seen order
    comment: bytes  #: archive comment from the classic EOCD record
    zip64: bool  #: ZIP64 end of central directory locator + record present
    cd_offset: int
    cd_size: int
    eocd_offset: int  #: offset of the classic EOCD record
    zip64_eocd_offset: int | None  #: offset of the ZIP64 EOCD record, if any
    file_size: int
    #: disk numbers say the archive is split/spanned. Only ever True when parsed with
    #: ``allow_multi_part=True``; otherwise that raises :class:`UnsupportedZipFeature`.
    multi_part: bool = False

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def trailing_bytes(self) -> int:
        """Bytes after the end of the EOCD comment (0 for a well-formed archive)."""
        return self.file_size - (self.eocd_offset + EOCD.size + len(self.comment))

    def get(self, name: str) -> ZipEntry | None:
        return self.by_name.get(name)


# --------------------------------------------------------------------------- parsing


def _find_eocd(tail: bytes) -> tuple[int, bool]:
    """Position of the EOCD record in ``tail`` and whether its comment ends the file exactly.

    Scans backwards. A candidate whose comment length reaches exactly to the end of the file
    wins; failing that, the last structurally possible candidate is used (trailing junk after
    the archive). Signatures inside the comment itself are skipped by the exactness rule.
    """
    n = len(tail)
    end = n - EOCD.size + len(SIG_EOCD)  # signature must start at <= n - 22
    lo = max(0, n - EOCD.size - MAX_COMMENT)
    fallback = -1
    while end > lo:
        pos = tail.rfind(SIG_EOCD, lo, end)
        if pos < 0:
            break
        (clen,) = U16.unpack_from(tail, pos + 20)
        stop = pos + EOCD.size + clen
        if stop == n:
            return pos, True
        if stop < n and fallback < 0:
            fallback = pos
        end = pos + len(SIG_EOCD) - 1
    if fallback >= 0:
        return fallback, False
    raise ZipFormatError(
        "not a ZIP archive: end of central directory record not found "
        "(truncated file, or not a .ozx/.zip at all)"
    )


def _multi_part(what: str) -> UnsupportedZipFeature:
    return UnsupportedZipFeature(
        f"multi-part (split or spanned) ZIP archives are not supported ({what}); "
        "RFC-9: OME-Zarr zip files SHALL NOT be split into multiple parts"
    )


def read_zip_index(reader: RangeReader, *, allow_multi_part: bool = False) -> ZipIndex:
    """Parse the end records and the central directory of the archive behind ``reader``.

    Raises :class:`ZipFormatError` for anything that is not a consistent ZIP archive and
    :class:`UnsupportedZipFeature` for multi-part archives (unless ``allow_multi_part``, in
    which case :attr:`ZipIndex.multi_part` is set and parsing continues best-effort, as the
    validator wants).
    """
    tail = _Tail.read(reader)
    end = _read_end_records(tail, allow_multi_part)
    _check_end_records(end, allow_multi_part)
    buf = tail.central_directory(end.cd_offset, end.cd_size)
    table, mp = _parse_central_directory(buf, end.n_total, end.cd_offset, allow_multi_part)
    del buf
    return ZipIndex(
        entries=_EntrySequence(table),
        by_name=_NameMap(table),
        duplicates=table.duplicates,
        comment=bytes(end.comment),
        zip64=end.zip64_eocd_offset is not None,
        cd_offset=end.cd_offset,
        cd_size=end.cd_size,
        eocd_offset=end.eocd_offset,
        zip64_eocd_offset=end.zip64_eocd_offset,
        file_size=tail.size,
        multi_part=end.multi_part or mp,
    )


@dataclass(frozen=True, slots=True)
class _Tail:
    """The last :data:`TAIL_SIZE` bytes of an archive, read once, and the reader behind."""

    reader: RangeReader
    size: int  #: of the whole file
    start: int  #: offset of :attr:`data` in the file
    data: bytes

    @classmethod
    def read(cls, reader: RangeReader) -> _Tail:
        size = reader.size
        if size < EOCD.size:
            raise ZipFormatError(f"not a ZIP archive: file is only {size} bytes long")
        tail_len = min(size, TAIL_SIZE)
        start = size - tail_len
        return cls(reader, size, start, reader.read(start, tail_len))

    def window(self, offset: int, length: int) -> bytes | memoryview:
        """Bytes at an absolute offset: from the tail buffer if inside it, else one read."""
        if offset < 0 or offset + length > self.size:
            raise ZipFormatError(
                f"record at offset {offset} (+{length} bytes) lies outside the file "
                f"({self.size} bytes)"
            )
        if offset >= self.start:
            rel = offset - self.start
            return memoryview(self.data)[rel : rel + length]
        return self.reader.read(offset, length)

    def central_directory(self, cd_offset: int, cd_size: int) -> bytes:
        """The central directory's bytes: a slice of the tail when it lies inside it,
        else read (:func:`_read_central_directory`)."""
        if cd_offset >= self.start:
            rel = cd_offset - self.start
            return self.data[rel : rel + cd_size]
        return _read_central_directory(self.reader, cd_offset, cd_size)


@dataclass(slots=True)
class _EndRecords:
    """What the classic end record (overridden by the ZIP64 one, if any) says."""

    eocd_offset: int
    comment: bytes
    disk_no: int
    cd_disk: int
    n_disk: int
    n_total: int
    cd_size: int
    cd_offset: int
    cd_limit: int  #: where the central directory must end: the first end record
    zip64_eocd_offset: int | None = None
    multi_part: bool = False


def _read_end_records(tail: _Tail, allow_multi_part: bool) -> _EndRecords:
    """The EOCD record, then the ZIP64 locator and ZIP64 EOCD record if present."""
    pos, _exact = _find_eocd(tail.data)
    (_, disk_no, cd_disk, n_disk, n_total, cd_size, cd_offset, clen) = unpack_eocd(tail.data, pos)
    eocd_offset = tail.start + pos
    end = _EndRecords(
        eocd_offset=eocd_offset,
        comment=tail.data[pos + EOCD.size : pos + EOCD.size + clen],
        disk_no=disk_no,
        cd_disk=cd_disk,
        n_disk=n_disk,
        n_total=n_total,
        cd_size=cd_size,
        cd_offset=cd_offset,
        cd_limit=eocd_offset,
    )
    loc_offset = eocd_offset - ZIP64_LOCATOR.size
    if loc_offset >= 0 and bytes(tail.window(loc_offset, 4)) == SIG_ZIP64_LOCATOR:
        _read_zip64_end(end, tail, loc_offset, allow_multi_part)
    return end


def _read_zip64_end(end: _EndRecords, tail: _Tail, loc_offset: int, allow_multi_part: bool) -> None:
    """Follow the ZIP64 locator at ``loc_offset`` to the ZIP64 EOCD record, whose values
    replace the classic record's in ``end``."""
    _, z_disk, z_offset, total_disks = unpack_zip64_locator(
        tail.window(loc_offset, ZIP64_LOCATOR.size)
    )
    if z_disk != 0 or total_disks > 1:
        if not allow_multi_part:
            raise _multi_part(f"ZIP64 locator: disk {z_disk}, {total_disks} disks")
        end.multi_part = True
    if z_offset + ZIP64_EOCD.size > loc_offset:
        raise ZipFormatError(
            f"ZIP64 end of central directory record offset {z_offset} is out of range"
        )
    rec = tail.window(z_offset, ZIP64_EOCD.size)
    (sig, rec_size, _made, _need, disk64, cd_disk64, n_disk64, n_total64, cd_size64,
     cd_offset64) = unpack_zip64_eocd(rec)  # fmt: skip
    if sig != SIG_ZIP64_EOCD:
        raise ZipFormatError(
            f"ZIP64 end of central directory record not found at offset {z_offset}"
        )
    if rec_size < ZIP64_EOCD_BODY or z_offset + 12 + rec_size > loc_offset:
        raise ZipFormatError(f"ZIP64 end of central directory record size {rec_size} is bad")
    end.zip64_eocd_offset = z_offset
    end.disk_no, end.cd_disk, end.n_disk, end.n_total = disk64, cd_disk64, n_disk64, n_total64
    end.cd_size, end.cd_offset = cd_size64, cd_offset64
    end.cd_limit = z_offset


def _check_end_records(end: _EndRecords, allow_multi_part: bool) -> None:
    """Disk numbers (multi-part), and a central directory that fits before its end records
    and in the size its entry count allows: checked before anything is allocated."""
    if end.disk_no != 0 or end.cd_disk != 0 or end.n_disk != end.n_total:
        if not allow_multi_part:
            raise _multi_part(
                f"disk {end.disk_no}, central directory on disk {end.cd_disk}, "
                f"{end.n_disk} of {end.n_total} entries on this disk"
            )
        end.multi_part = True
    cd_offset, cd_size, n_total = end.cd_offset, end.cd_size, end.n_total
    if cd_offset + cd_size > end.cd_limit:
        raise ZipFormatError(
            f"central directory (offset {cd_offset}, {cd_size} bytes) runs past its end "
            f"records at offset {end.cd_limit} (corrupt or truncated archive)"
        )
    if n_total * CENTRAL_HEADER.size > cd_size:
        raise ZipFormatError(
            f"end record claims {n_total} entries but the central directory is only {cd_size} bytes"
        )
    if cd_size > n_total * _MAX_CENTRAL_RECORD:
        raise ZipFormatError(
            f"end record claims a central directory of {cd_size} bytes for {n_total} "
            f"entries; {n_total} records take at most {n_total * _MAX_CENTRAL_RECORD} bytes"
        )


#: the largest possible central directory record: header + name + extra + comment
_MAX_CENTRAL_RECORD = CENTRAL_HEADER.size + 3 * 0xFFFF
#: a central directory beyond the tail buffer is read in pieces of this size, each walked
#: before the next is read: a lying size (say 8 GiB over a sparse file) stops at the first
#: piece that is not a sequence of central records, not after allocating all of it
_CD_PIECE = 16 << 20
_NAME_EXTRA_COMMENT = struct.Struct("<HHH")


def _read_central_directory(reader: RangeReader, cd_offset: int, cd_size: int) -> bytes:
    """The central directory's bytes, read piece by piece and checked as they come."""
    if cd_size <= _CD_PIECE:
        return reader.read(cd_offset, cd_size)
    buf = bytearray()
    pos = 0  # start of the next record in buf
    got = 0
    sig_len = len(SIG_CENTRAL)
    while got < cd_size:
        n = min(_CD_PIECE, cd_size - got)
        buf += reader.read(cd_offset + got, n)
        got += n
        end = len(buf)
        while pos + CENTRAL_HEADER.size <= end:
            if buf[pos : pos + sig_len] != SIG_CENTRAL:
                raise ZipFormatError(
                    f"bad central directory header signature at offset {cd_offset + pos} "
                    f"(the end record's central directory size {cd_size} is a lie?)"
                )
            nlen, elen, klen = _NAME_EXTRA_COMMENT.unpack_from(buf, pos + 28)
            pos += CENTRAL_HEADER.size + nlen + elen + klen
    return bytes(buf)


# ------------------------------------------------------------------ compact entry table

#: FNV-1a, 64 bit, over at most this many leading bytes of a name (plus its length)
_HASH_PREFIX = 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1


def _name_hash(key: bytes) -> int:
    """The hash :meth:`_EntryTable._hashes` computes for every name, for one name."""
    h = _FNV_OFFSET
    for byte in key[:_HASH_PREFIX]:
        h = ((h ^ byte) * _FNV_PRIME) & _M64
    return ((h ^ len(key)) * _FNV_PRIME) & _M64


class _EntryTable:
    """The central directory as columns: ~60 bytes per entry instead of a Python object.

    Why: an archive with 1,000,000 members took 6.7 s and +457 MiB to open when each
    record became a ``ZipEntry`` in a tuple and a dict (benchmarks/bench_compiled.py).
    Here each field is one numpy array, the names (UTF-8 of the decoded names) and the
    raw extra fields are one byte blob each, and ``name -> record`` is a binary search in
    the sorted 64-bit name hashes (verified against the name bytes, so a collision is
    never a wrong answer). Entries are built on demand.
    """

    def __init__(
        self,
        *,
        hoff: np.ndarray,
        method: np.ndarray,
        flags: np.ndarray,
        crc: np.ndarray,
        csize: np.ndarray,
        usize: np.ndarray,
        z64: np.ndarray,
        names: np.ndarray,
        noff: np.ndarray,
        nlen: np.ndarray,
        extras: np.ndarray,
        eoff: np.ndarray,
        elen: np.ndarray,
    ) -> None:
        self.hoff, self.method, self.flags, self.crc = hoff, method, flags, crc
        self.csize, self.usize, self.z64 = csize, usize, z64
        self.names, self.noff, self.nlen = names, noff, nlen
        self.extras, self.eoff, self.elen = extras, eoff, elen
        self.count = len(hoff)
        hashes = self._hashes()
        self.order = np.argsort(hashes, kind="stable").astype(
            np.uint32 if self.count < 2**32 else np.int64
        )
        self.sorted_hashes = hashes[self.order]
        del hashes
        self._find_duplicates()

    # -- names ------------------------------------------------------------------

    def _hashes(self) -> np.ndarray:
        n = self.count
        h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
        prime = np.uint64(_FNV_PRIME)
        nlen = self.nlen
        width = int(min(int(nlen.max()) if n else 0, _HASH_PREFIX))
        if width:
            # the first `width` bytes of every name as rows (zero padded past its end)
            padded = np.concatenate((self.names, np.zeros(width, np.uint8)))
            rows = np.lib.stride_tricks.as_strided(
                padded, shape=(len(self.names) + 1, width), strides=(1, 1), writeable=False
            )[self.noff.astype(np.int64)]
            for c in range(width):
                live = nlen > c
                h = np.where(live, (h ^ rows[:, c].astype(np.uint64)) * prime, h)
            del rows
        return (h ^ nlen.astype(np.uint64)) * prime

    def name_bytes(self, i: int) -> bytes:
        o = int(self.noff[i])
        return self.names[o : o + int(self.nlen[i])].tobytes()

    def name(self, i: int) -> str:
        return self.name_bytes(i).decode("utf-8")

    def lookup(self, name: str) -> int:
        """Index of the LAST record named ``name``, or -1."""
        try:
            key = name.encode("utf-8")
        except UnicodeEncodeError:
            return -1
        h = np.uint64(_name_hash(key))
        sh = self.sorted_hashes
        j = int(np.searchsorted(sh, h, side="right")) - 1
        while j >= 0 and sh[j] == h:  # stable sort: larger record index further right
            i = int(self.order[j])
            if self.name_bytes(i) == key:
                return i
            j -= 1
        return -1

    def _find_duplicates(self) -> None:
        sh = self.sorted_hashes
        same = np.flatnonzero(sh[1:] == sh[:-1]) if self.count > 1 else np.empty(0, np.int64)
        not_last: set[int] = set()
        not_first: set[int] = set()
        dups: dict[int, str] = {}  # first index -> name
        if len(same):
            # runs of equal hashes: duplicates (or, rarely, collisions), grouped by name
            starts = same[np.concatenate(([True], same[1:] != same[:-1] + 1))]
            for st in starts.tolist():
                end = st + 1
                while end < self.count and sh[end] == sh[st]:
                    end += 1
                groups: dict[bytes, list[int]] = {}
                for j in range(st, end):
                    i = int(self.order[j])
                    groups.setdefault(self.name_bytes(i), []).append(i)
                for key, members in groups.items():
                    if len(members) > 1:
                        members.sort()
                        not_last.update(members[:-1])
                        not_first.update(members[1:])
                        dups[members[0]] = key.decode("utf-8")
        self.not_last = frozenset(not_last)
        self.not_first = frozenset(not_first)
        self.duplicates = tuple(dups[i] for i in sorted(dups))
        self.unique = self.count - len(not_first)

    # -- entries ----------------------------------------------------------------

    def entry(self, i: int) -> ZipEntry:
        eo, el = int(self.eoff[i]), int(self.elen[i])
        return ZipEntry(
            self.name(i),
            i,
            int(self.hoff[i]),
            int(self.method[i]),
            int(self.flags[i]),
            int(self.crc[i]),
            int(self.csize[i]),
            int(self.usize[i]),
            bool(self.z64[i]),
            self.extras[eo : eo + el].tobytes(),
        )

    @property
    def nbytes(self) -> int:
        arrays = (self.hoff, self.method, self.flags, self.crc, self.csize, self.usize)
        more = (self.z64, self.names, self.noff, self.nlen, self.extras, self.eoff, self.elen)
        return sum(a.nbytes for a in (*arrays, *more, self.order, self.sorted_hashes))


class _EntrySequence(Sequence[ZipEntry]):
    """``ZipIndex.entries``: central-directory order, entries built when asked for."""

    __slots__ = ("_table",)

    def __init__(self, table: _EntryTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return self._table.count

    @overload
    def __getitem__(self, i: int) -> ZipEntry: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[ZipEntry, ...]: ...
    def __getitem__(self, i: int | slice) -> ZipEntry | tuple[ZipEntry, ...]:
        if isinstance(i, slice):
            return tuple(self._table.entry(k) for k in range(*i.indices(self._table.count)))
        n = self._table.count
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("entry index out of range")
        return self._table.entry(i)

    def __iter__(self) -> Iterator[ZipEntry]:
        entry = self._table.entry
        for i in range(self._table.count):
            yield entry(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<{self._table.count} ZIP entries>"


class _NameMap(Mapping[str, ZipEntry]):
    """``ZipIndex.by_name``: name -> last record of that name, in first-seen order
    (what a dict filled in central-directory order holds), looked up by name hash."""

    __slots__ = ("_table",)

    def __init__(self, table: _EntryTable) -> None:
        self._table = table

    def __getitem__(self, name: str) -> ZipEntry:
        i = self._table.lookup(name) if isinstance(name, str) else -1
        if i < 0:
            raise KeyError(name)
        return self._table.entry(i)

    @overload
    def get(self, name: str) -> ZipEntry | None: ...
    @overload
    def get(self, name: str, default: ZipEntry) -> ZipEntry: ...
    @overload
    def get(self, name: str, default: _T) -> ZipEntry | _T: ...
    def get(self, name: str, default: object = None) -> object:
        i = self._table.lookup(name) if isinstance(name, str) else -1
        return default if i < 0 else self._table.entry(i)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._table.lookup(name) >= 0

    def __len__(self) -> int:
        return self._table.unique

    def __iter__(self) -> Iterator[str]:
        t = self._table
        skip = t.not_first
        for i in range(t.count):
            if i not in skip:
                yield t.name(i)

    def index_of(self, name: str) -> int:
        """Central-directory position of the record ``name`` resolves to, or -1."""
        return self._table.lookup(name)

    def __repr__(self) -> str:
        return f"<{len(self)} ZIP member names>"


def _gather_blob(b: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes ``b[starts[i] : starts[i] + lens[i]]`` of all i, concatenated.

    Short fields (names, extra fields; the usual case) are copied as rows of a strided
    ``(n, width)`` view and masked; long ones byte column by byte column."""
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, np.uint8)
    width = int(lens.max())
    if width <= 64:
        fits = starts + width <= len(b)
        if fits.all():
            view = np.lib.stride_tricks.as_strided(
                b, shape=(len(b) - width + 1, width), strides=(1, 1), writeable=False
            )
            rows = view[starts]
            packed: np.ndarray = rows[np.arange(width) < lens[:, None]]
            return packed
    out = np.empty(total, np.uint8)
    off = _offsets(lens).astype(np.int64)
    idx = np.flatnonzero(lens)
    c = 0
    while len(idx):
        out[off[idx] + c] = b[starts[idx] + c]
        c += 1
        idx = idx[lens[idx] > c]
    return out


def _offsets(lens: np.ndarray) -> np.ndarray:
    ends = np.cumsum(lens, dtype=np.int64)
    off: np.ndarray = ends - lens
    return off.astype(np.uint32) if len(ends) and ends[-1] < 2**32 else off


def _parse_fast(buf: bytes, count: int, cd_offset: int) -> _EntryTable | None:
    """Vectorised parse of a well-formed central directory; ``None`` when anything is
    unusual (a record signature inside a name, extra fields other than one ZIP64 block,
    non-ASCII names, multi-disk, out-of-range offsets...): :func:`_parse_slow` then
    parses record by record and raises the precise error if there is one."""
    end = len(buf)
    if count == 0 or end < CENTRAL_HEADER.size:
        return None
    b = np.frombuffer(buf, np.uint8)
    # unaligned views: element k of views[n] is the little-endian n-byte integer at byte k
    views = {
        n: np.ndarray((end - n + 1,), dtype=f"<u{n}", buffer=buf, offset=0, strides=(1,))
        for n in (2, 4, 8)
    }
    cand = np.flatnonzero(views[4] == 0x02014B50)  # "PK\x01\x02"
    if len(cand) < count:
        return None
    pos = cand[:count]
    del cand
    if pos[0] != 0 or int(pos[-1]) + CENTRAL_HEADER.size > end:
        return None

    def u(off: int, nbytes: int) -> np.ndarray:
        column: np.ndarray = views[nbytes][pos + off]
        return column

    nlen, elen, klen = u(28, 2), u(30, 2), u(32, 2)
    nxt = pos + CENTRAL_HEADER.size + nlen + elen + klen
    if not np.array_equal(nxt[:-1], pos[1:]) or int(nxt[-1]) > end:
        return None
    del nxt
    disk = u(34, 2)
    if disk.any():
        return None
    del disk
    flags, method, crc = u(8, 2), u(10, 2), u(16, 4)
    csize, usize, hoff = u(20, 4).astype(np.uint64), u(24, 4).astype(np.uint64), u(42, 4)
    hoff = hoff.astype(np.uint64)
    name_start = pos + CENTRAL_HEADER.size
    extra_start = name_start + nlen
    names = _gather_blob(b, name_start, nlen)
    if names.size and int(names.max()) >= 0x80:
        return None  # non-ASCII names: decoded (cp437 / UTF-8) record by record
    z64 = np.zeros(count, np.bool_)
    has_extra = elen > 0
    if has_extra.any():
        ex = np.flatnonzero(has_extra)
        es = extra_start[ex]
        el = elen[ex].astype(np.int64)
        if (el < 4).any():
            return None

        def eu(at: np.ndarray, nbytes: int) -> np.ndarray:
            if (at + nbytes > end).any():  # pragma: no cover - the chain check bounds it
                raise ZipFormatError("central directory extra field runs past its end")
            values: np.ndarray = views[nbytes][at]
            return values

        hid, hlen = eu(es, 2), eu(es + 2, 2).astype(np.int64)
        if (hid != ZIP64_EXTRA_ID).any() or (hlen + 4 != el).any():
            return None
        z64[ex] = True
        q = es + 4
        lim = es + el
        sat = np.uint64(U32_MAX)
        for col in (usize, csize, hoff):
            need = col[ex] == sat
            if need.any():
                if (q[need] + 8 > lim[need]).any():
                    return None
                col[ex[need]] = eu(q[need], 8)
                q = q + need * 8
    # every entry's data must end before the central directory
    cd = np.uint64(cd_offset)
    if (hoff > cd).any() or (csize > cd).any():  # (and no uint64 wrap-around below)
        return None
    if (hoff + np.uint64(LOCAL_HEADER.size) + csize > cd).any():
        return None
    extras = _gather_blob(b, extra_start, elen)
    return _EntryTable(
        hoff=hoff,
        method=method,
        flags=flags,
        crc=crc,
        csize=csize,
        usize=usize,
        z64=z64,
        names=names,
        noff=_offsets(nlen),
        nlen=nlen.astype(np.uint32),
        extras=extras,
        eoff=_offsets(elen),
        elen=elen,
    )


def _parse_central_directory(
    buf: bytes, count: int, cd_offset: int, allow_multi_part: bool
) -> tuple[_EntryTable, bool]:
    table = _parse_fast(buf, count, cd_offset)
    if table is not None:
        return table, False
    return _parse_slow(buf, count, cd_offset, allow_multi_part)


def _parse_slow(
    buf: bytes, count: int, cd_offset: int, allow_multi_part: bool
) -> tuple[_EntryTable, bool]:
    unpack = CENTRAL_HEADER.unpack_from
    hsize = CENTRAL_HEADER.size
    end = len(buf)
    cols: dict[str, list[int]] = {
        k: [] for k in ("hoff", "method", "flags", "crc", "csize", "usize", "z64")
    }
    names: list[bytes] = []
    extras: list[bytes] = []
    multi_part = False
    pos = 0
    for i in range(count):
        if pos + hsize > end:
            raise ZipFormatError(f"central directory truncated at entry {i} of {count}")
        (sig, _made, _need, flags, method, _time, _date, crc, csize, usize, nlen, elen, klen,
         disk, _iattr, _eattr, hoff) = unpack(buf, pos)  # fmt: skip
        if sig != SIG_CENTRAL:
            raise ZipFormatError(
                f"bad central directory header signature at entry {i} (offset {cd_offset + pos})"
            )
        name_start = pos + hsize
        extra_start = name_start + nlen
        extra_end = extra_start + elen
        nxt = extra_end + klen
        if nxt > end:
            raise ZipFormatError(f"central directory entry {i} runs past the directory's end")
        raw_name = buf[name_start:extra_start]
        extra = buf[extra_start:extra_end]
        has_z64 = False
        if elen:
            usize, csize, hoff, disk, has_z64 = read_zip64_extra(extra, usize, csize, hoff, disk, i)
        if raw_name.isascii():
            name = raw_name.decode("ascii")  # fast path: cp437 and UTF-8 agree on ASCII
        elif flags & FLAG_UTF8:
            try:
                name = raw_name.decode("utf-8")
            except UnicodeDecodeError:
                raise ZipFormatError(
                    f"central directory entry {i}: name is flagged UTF-8 but is not valid UTF-8"
                ) from None
        else:
            name = raw_name.decode("cp437")
        if disk != 0:
            if not allow_multi_part:
                raise _multi_part(f"entry {name!r} starts on disk {disk}")
            multi_part = True
        elif hoff + LOCAL_HEADER.size + csize > cd_offset:
            raise ZipFormatError(
                f"entry {name!r}: local header offset {hoff} / compressed size {csize} "
                f"point past the central directory at offset {cd_offset}"
            )
        for k, v in (
            ("hoff", hoff),
            ("method", method),
            ("flags", flags),
            ("crc", crc),
            ("csize", csize),
            ("usize", usize),
            ("z64", has_z64),
        ):
            cols[k].append(v)
        names.append(name.encode("utf-8", "surrogatepass"))
        extras.append(bytes(extra))
        pos = nxt
    nlen = np.array([len(n) for n in names], np.uint32)
    elen = np.array([len(e) for e in extras], np.uint16)
    table = _EntryTable(
        hoff=np.array(cols["hoff"], np.uint64),
        method=np.array(cols["method"], np.uint16),
        flags=np.array(cols["flags"], np.uint16),
        crc=np.array(cols["crc"], np.uint32),
        csize=np.array(cols["csize"], np.uint64),
        usize=np.array(cols["usize"], np.uint64),
        z64=np.array(cols["z64"], np.bool_),
        names=np.frombuffer(b"".join(names), np.uint8),
        noff=_offsets(nlen),
        nlen=nlen,
        extras=np.frombuffer(b"".join(extras), np.uint8),
        eoff=_offsets(elen),
        elen=elen,
    )
    return table, multi_part


@dataclass(frozen=True, slots=True)
class LocalExtent:
    """Where a member's bytes lie, as its local file header says."""

    data_offset: int  #: first data byte
    end: int  #: one past the last data byte (a data descriptor, if any, is not counted)


def local_name_length(entry: ZipEntry) -> int:
    """Length of the name ``entry``'s local header must hold (:func:`read_local_header`
    refuses any other)."""
    return len(_local_name(entry))


def _local_name(entry: ZipEntry) -> bytes:
    encoding = "utf-8" if entry.flags & FLAG_UTF8 else "cp437"
    try:
        return entry.name.encode(encoding)
    except UnicodeEncodeError:
        return entry.name.encode("utf-8")


def read_local_header(
    reader: RangeReader, entry: ZipEntry, *, limit: int | None = None
) -> LocalExtent:
    """Read the local file header of ``entry`` and check it against its central record.

    The one local-header check of the package: the store (via :func:`data_offset`) and
    the validator both use it. ``limit`` (normally the central directory offset) bounds
    where the header and the data may end; it defaults to the file size. Raises
    :class:`ZipFormatError` when the header is missing or cut off, names another member,
    disagrees on the method, or its data runs past ``limit``.
    """
    expected = _local_name(entry)
    bound = reader.size if limit is None else min(limit, reader.size)
    offset = entry.header_offset
    # header and name in one read: a central record pointing at another member's local
    # header (same size, other data) must not serve that member's bytes
    want = LOCAL_HEADER.size + len(expected)
    if offset + LOCAL_HEADER.size > reader.size:
        raise ZipFormatError(f"entry {entry.name!r}: local header at {offset} is cut off")
    head = reader.read(offset, min(want, reader.size - offset))
    (sig, _need, _flags, method, _t, _d, _crc, _cs, _us, nlen, elen) = unpack_local_header(head)
    if sig != SIG_LOCAL:
        raise ZipFormatError(f"entry {entry.name!r}: no local file header at offset {offset}")
    if nlen != len(expected) or head[LOCAL_HEADER.size :] != expected:
        raise ZipFormatError(
            f"entry {entry.name!r}: the local header at offset {offset} names "
            f"another member (central directory and local headers disagree)"
        )
    if method != entry.method:
        raise ZipFormatError(
            f"entry {entry.name!r}: local header says {method_name(method)}, central "
            f"directory says {method_name(entry.method)}"
        )
    start = offset + LOCAL_HEADER.size + nlen + elen
    end = start + entry.compressed_size
    if end > bound:
        raise ZipFormatError(
            f"entry {entry.name!r}: data ({entry.compressed_size} bytes at offset {start}) "
            f"runs past offset {bound}"
        )
    return LocalExtent(start, end)


def stored_extent(reader: RangeReader, entry: ZipEntry, *, limit: int | None = None) -> int | None:
    """Data offset of ``entry`` if its stored bytes may be copied with its recorded CRC-32.

    That is: the member is STORED, unencrypted, without a data descriptor, its compressed
    and uncompressed sizes are equal, and its local header (checked by
    :func:`read_local_header`: right name, same method, data inside ``limit``) also
    carries the same CRC-32 and sizes (ZIP64 extra resolved). Then the central record
    describes the bytes that are there, and a copy needs no CRC pass. Returns None when
    any of this fails (the caller re-reads and recomputes instead); never raises for a
    disagreeing member, only for I/O errors.
    """
    if (
        entry.method != METHOD_STORED
        or entry.is_encrypted
        or entry.has_data_descriptor
        or entry.compressed_size != entry.uncompressed_size
    ):
        return None
    try:
        extent = read_local_header(reader, entry, limit=limit)
    except ZipFormatError:
        return None
    # local header + name + extra, all before the data
    head = reader.read(entry.header_offset, extent.data_offset - entry.header_offset)
    (_sig, _need, flags, _m, _t, _d, crc, cs, us, nlen, _elen) = unpack_local_header(head)
    if flags & FLAG_DATA_DESCRIPTOR or crc != entry.crc32:
        return None
    extra = head[LOCAL_HEADER.size + nlen :]
    try:
        us, cs, _, _, _ = read_zip64_extra(extra, us, cs, 0, 0, entry.index)
    except ZipFormatError:
        return None
    if us != entry.uncompressed_size or cs != entry.compressed_size:
        return None
    return extent.data_offset


def data_offset(reader: RangeReader, entry: ZipEntry, *, limit: int | None = None) -> int:
    """Absolute offset of the first data byte of ``entry`` (see :func:`read_local_header`)."""
    return read_local_header(reader, entry, limit=limit).data_offset


def local_header_name(reader: RangeReader, entry: ZipEntry) -> bytes:
    """Raw name bytes stored in the local header of ``entry`` (for validation)."""
    head = reader.read(entry.header_offset, LOCAL_HEADER.size)
    local = unpack_local_header(head)
    if local.signature != SIG_LOCAL:
        raise ZipFormatError(
            f"entry {entry.name!r}: no local file header at offset {entry.header_offset}"
        )
    return reader.read(entry.header_offset + LOCAL_HEADER.size, local.name_length)
