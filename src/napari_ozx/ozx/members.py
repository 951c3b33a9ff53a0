"""``MemberReader``: the bytes of an ``.ozx`` archive's members, checked (no zarr).

:class:`MemberReader` reads members through one :class:`~napari_ozx.ozx._zip.RangeReader`
for :class:`~napari_ozx.ozx.store.OzxStore`: a member's local header read once and its data
offset cached (a STORED range is one ``pread``); encrypted members and methods other than
STORED / DEFLATED refused (:class:`~napari_ozx.errors.UnsupportedZipFeature`); CRC-32 on
whole reads up to ``verify_crc_max`` and, with ``verify_members``, of the whole member once
before its first range (in :data:`VERIFY_BLOCK` pieces); DEFLATED members inflated whole
within the inflate limits (global, per array: :meth:`MemberReader.limit_inflate`,
deflate's maximum ratio), checked and kept in a byte-bounded LRU. :class:`MemberChecks` is
what a store and its clones share: members checked, per-array limits.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from napari_ozx.errors import UnsupportedZipFeature, ZipFormatError
from napari_ozx.ozx._zip import RangeReader, ZipEntry, data_offset, local_name_length
from napari_ozx.ozx.lru import ByteLRU
from napari_ozx.ozx.pools import shared_pool
from napari_ozx.ozx.records import (
    FLAG_ENCRYPTED,
    FLAG_STRONG_ENCRYPTION,
    LOCAL_HEADER,
    METHOD_DEFLATED,
    METHOD_STORED,
    method_name,
)

__all__ = [
    "MAX_DEFLATE_RATIO",
    "METADATA_NAMES",
    "VERIFY_BLOCK",
    "MemberChecks",
    "MemberReader",
    "Span",
    "member_pool",
]

#: encrypted members take the checked (refusing) path
_UNREADABLE_FLAGS = FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION

#: metadata documents: never capped by an array's inflate limit (nor sought as look-alikes)
METADATA_NAMES = ("zarr.json", ".zattrs", ".zgroup", ".zarray", ".zmetadata")

#: piece size of the one-time CRC pass over a STORED member
VERIFY_BLOCK = 4 << 20

#: remote readers: the first range of a member is read with its local header at once,
#: assuming a local extra field of at most this many bytes (a ZIP64 extra is 20; a
#: longer one costs a second read, never a wrong byte)
SPECULATE_EXTRA = 512


def member_pool() -> ThreadPoolExecutor:
    """The shared pool that reads members' local headers (and first bytes) ahead."""
    return shared_pool("ozx-member", 8)


#: deflate cannot expand data by more than ~1032:1; a bigger declared ratio is a lie.
MAX_DEFLATE_RATIO = 1032


#: ``size -> (start, stop)``: the byte range to read of a member of ``size`` bytes
Span = Callable[[int], tuple[int, int]]


class MemberChecks:
    """What every reader of one parsed archive shares about its members."""

    def __init__(self) -> None:
        #: STORED members whose whole-member CRC-32 was checked (see ``verify_members``)
        self.verified: set[str] = set()
        self.verify_lock = threading.Lock()
        #: array prefix ("0/", "labels/x/1/") -> most bytes one member there may declare
        self.inflate_limits: dict[str, int] = {}


class MemberReader:
    """Reads the members of one archive through ``reader`` (see the module docstring).

    ``checks`` is shared with the other readers of the same parsed index; the data
    offsets and the inflated-member LRU are this reader's own. ``path`` / ``fobj`` name
    the archive in messages.
    """

    def __init__(
        self,
        reader: RangeReader,
        checks: MemberChecks,
        *,
        cd_offset: int,
        path: str | None,
        fobj: object,
        deflate_cache_bytes: int,
        max_inflate_bytes: int,
        verify_crc_max: int,
        verify_members: bool,
    ) -> None:
        self.reader = reader
        self._checks = checks
        self._cd_offset = cd_offset
        self._path = path
        self._fobj = fobj
        self._offsets: dict[str, int] = {}
        #: inflated DEFLATED members (at most a quarter of the budget each)
        self.inflated: ByteLRU[bytes] = ByteLRU(deflate_cache_bytes, len)
        self._max_inflate = max_inflate_bytes
        self._verify_crc_max = verify_crc_max
        self.verify_members = verify_members

    def label(self) -> str:
        """The archive's name in messages: its path, else its reader's or file object's."""
        if self._path is not None:
            return self._path
        return self.reader.name or repr(self._fobj)

    def reopen(self, reader: RangeReader) -> None:
        """Read through ``reader`` (the same archive, reopened) from now on."""
        self.reader = reader
        self._offsets.clear()

    def read(self, entry: ZipEntry, span: Span | None = None) -> bytes:
        """The bytes of ``entry``, or of the range ``span`` gives for its size."""
        key = entry.name
        if entry.method == METHOD_STORED and not entry.flags & _UNREADABLE_FLAGS:
            off = self._offsets.get(key)
            if off is None:
                if entry.compressed_size != entry.uncompressed_size:
                    raise ZipFormatError(
                        f"{self.label()}: stored member {key!r} has compressed size "
                        f"{entry.compressed_size} != uncompressed size "
                        f"{entry.uncompressed_size}"
                    )
                if (
                    span is not None
                    and getattr(self.reader, "remote", False)
                    and not self.verify_members
                ):
                    start, stop = span(entry.uncompressed_size)
                    return self._first_range(entry, start, stop)
                off = self._data_offset(entry)
            size = entry.uncompressed_size
            if span is None:
                data = self.reader.read(off, size)
                verified = self._checks.verified
                if size <= self._verify_crc_max or (self.verify_members and key not in verified):
                    if zlib.crc32(data) != entry.crc32:
                        raise ZipFormatError(
                            f"{self.label()}: CRC-32 mismatch in member {key!r} (corrupt file)"
                        )
                    if self.verify_members:
                        with self._checks.verify_lock:
                            verified.add(key)
                return data
            start, stop = span(size)
            if self.verify_members and key not in self._checks.verified:
                self._verify_member(entry, off)
            return self.reader.read(off + start, stop - start)
        self._check_readable(entry)
        data = self._inflate(entry)
        if span is None:
            return data
        start, stop = span(len(data))
        return data[start:stop]

    def _first_range(self, entry: ZipEntry, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of a STORED member whose local header was never read,
        over a remote reader: the header (where the data begins) and a window that holds
        the range for any local extra field up to :data:`SPECULATE_EXTRA` bytes are read
        concurrently, one round trip instead of two (a shard's index is then known one
        round trip after its first use). The header is checked as always."""
        lead = entry.header_offset + LOCAL_HEADER.size + local_name_length(entry)
        end = min(lead + SPECULATE_EXTRA + stop, self._cd_offset, self.reader.size)
        header = member_pool().submit(self._data_offset, entry)
        try:
            window = self.reader.read(lead + start, max(end - lead - start, 0))
        finally:
            off = header.result()  # its error (a bad header) wins over the window's
        skip = off - lead  # the local extra field's length
        if skip >= 0 and off + stop <= end:
            return window[skip : skip + stop - start]
        return self.reader.read(off + start, stop - start)  # a longer extra: read exactly

    def _data_offset(self, entry: ZipEntry) -> int:
        off = data_offset(self.reader, entry, limit=self._cd_offset)
        self._offsets[entry.name] = off
        return off

    def _check_readable(self, entry: ZipEntry) -> None:
        if entry.is_encrypted:
            raise UnsupportedZipFeature(
                f"{self.label()}: member {entry.name!r} is encrypted; encrypted ZIP entries "
                "are not supported"
            )
        if entry.method not in (METHOD_STORED, METHOD_DEFLATED):
            raise UnsupportedZipFeature(
                f"{self.label()}: member {entry.name!r} uses compression "
                f"{method_name(entry.method)}; only stored and deflated members are supported"
            )

    def _verify_member(self, entry: ZipEntry, off: int) -> None:
        """Check the CRC-32 of a whole STORED member once, before serving any range of it.

        A ZIP CRC covers the whole member, so this is one sequential pass over it (in
        :data:`VERIFY_BLOCK` pieces, so memory stays bounded), done synchronously on the
        first read and remembered per member for every reader sharing these checks: a
        flipped bit in a shard is an error on first sight, never wrong pixels. Cost
        measured by ``benchmarks/bench_store.py`` (first vs later tile reads of a shard).
        """
        crc = 0
        pos, end = off, off + entry.uncompressed_size
        while pos < end:  # outside any lock: two threads may both check a member, harmlessly
            n = min(VERIFY_BLOCK, end - pos)
            crc = zlib.crc32(self.reader.read(pos, n), crc)
            pos += n
        if crc != entry.crc32:
            raise ZipFormatError(
                f"CRC-32 mismatch in member {entry.name!r} of {self.label()} "
                "(corrupt file: its bytes are not what was written)"
            )
        with self._checks.verify_lock:
            self._checks.verified.add(entry.name)

    # ------------------------------------------------------------------ inflating

    def limit_inflate(self, prefix: str, max_bytes: int) -> None:
        """Refuse to inflate members under ``prefix`` (an array's chunk keys) that declare
        more than ``max_bytes`` (for every reader sharing these checks)."""
        prefix = prefix.strip("/")
        limits = dict(self._checks.inflate_limits)
        limits[f"{prefix}/" if prefix else ""] = int(max_bytes)
        self._checks.inflate_limits = limits

    def _inflate_limit(self, key: str) -> int:
        limits = self._checks.inflate_limits
        if limits:
            parent = key
            while True:
                parent = parent.rpartition("/")[0]
                cap = limits.get(f"{parent}/" if parent else "")
                if cap is not None:
                    return min(cap, self._max_inflate)
                if not parent:
                    break
        return self._max_inflate

    def _inflate(self, entry: ZipEntry) -> bytes:
        key = entry.name
        cached = self.inflated.get(key)
        if cached is not None:
            return cached
        usize, csize = entry.uncompressed_size, entry.compressed_size
        if usize > self._max_inflate:
            raise UnsupportedZipFeature(
                f"{self.label()}: deflated member {key!r} declares {usize} bytes; refusing to "
                f"inflate more than {self._max_inflate} bytes (store it uncompressed)"
            )
        cap = self._inflate_limit(key) if not key.endswith(METADATA_NAMES) else usize
        if usize > cap:
            raise ZipFormatError(
                f"{self.label()}: deflated member {key!r} declares {usize} bytes, more than "
                f"its array allows for one chunk or shard ({cap} bytes): corrupt or hostile"
            )
        if usize > csize * MAX_DEFLATE_RATIO + 1024:
            raise ZipFormatError(
                f"{self.label()}: deflated member {key!r} claims {csize} -> {usize} bytes, "
                "more than deflate can expand (corrupt or hostile file)"
            )
        off = self._offsets.get(key)
        if off is None:
            off = self._data_offset(entry)
        raw = self.reader.read(off, csize)
        inflater = zlib.decompressobj(-15)
        try:
            data = inflater.decompress(raw, usize + 1)
        except zlib.error as exc:
            raise ZipFormatError(
                f"{self.label()}: member {key!r} is not a valid deflate stream ({exc})"
            ) from None
        if len(data) != usize or not inflater.eof:
            raise ZipFormatError(
                f"{self.label()}: member {key!r} inflates to "
                f"{'more than ' if len(data) > usize or not inflater.eof else ''}{len(data)} "
                f"bytes, central directory says {usize}"
            )
        if zlib.crc32(data) != entry.crc32:
            raise ZipFormatError(
                f"{self.label()}: CRC-32 mismatch in member {key!r} (corrupt file)"
            )
        if usize <= self.inflated.max_bytes // 4:
            self.inflated.put(key, data)
        return data
