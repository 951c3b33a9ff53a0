"""ZIP record layouts (PKWARE APPNOTE 6.3.x): one definition of every record ``.ozx`` uses.

Each record has its signature, its :class:`struct.Struct` (:data:`LOCAL_HEADER` 4.3.7,
:data:`CENTRAL_HEADER` 4.3.12, :data:`EXTRA_HEADER` 4.5.3, :data:`ZIP64_EOCD` 4.3.14,
:data:`ZIP64_LOCATOR` 4.3.15, :data:`EOCD` 4.3.16, :data:`DATA_DESCRIPTOR` 4.3.9), a
:class:`~typing.NamedTuple` naming its fields, and a ``pack_*`` / ``unpack_*`` pair (the
ZIP64 extra: :func:`pack_zip64_extra` / :func:`read_zip64_extra`). The parser, the writer,
the validator and the tests' hand-made archives all take the layouts from here;
``zip64=False`` builds the archives other tools write. The parser's hot loop uses
``CENTRAL_HEADER.unpack_from`` directly (a named tuple per record costs several times
more). Bytes only: no Zarr, no OME, no I/O; a bad record raises
:class:`~napari_ozx.errors.ZipFormatError`.
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

from napari_ozx.errors import ZipFormatError

__all__ = [
    "CENTRAL_HEADER",
    "DATA_DESCRIPTOR",
    "DATA_DESCRIPTOR_ZIP64",
    "EOCD",
    "EXTRA_HEADER",
    "LOCAL_HEADER",
    "ZIP64_EOCD",
    "ZIP64_LOCATOR",
    "CentralHeader",
    "DataDescriptor",
    "EndOfCentralDirectory",
    "LocalHeader",
    "Zip64EndOfCentralDirectory",
    "Zip64Locator",
    "dos_date_time",
    "method_name",
    "pack_central_header",
    "pack_data_descriptor",
    "pack_eocd",
    "pack_local_header",
    "pack_zip64_eocd",
    "pack_zip64_extra",
    "pack_zip64_locator",
    "read_zip64_extra",
    "unpack_central_header",
    "unpack_data_descriptor",
    "unpack_eocd",
    "unpack_local_header",
    "unpack_zip64_eocd",
    "unpack_zip64_locator",
]

# --------------------------------------------------------------------------- signatures

SIG_LOCAL = b"PK\x03\x04"
SIG_CENTRAL = b"PK\x01\x02"
SIG_EOCD = b"PK\x05\x06"
SIG_ZIP64_EOCD = b"PK\x06\x06"
SIG_ZIP64_LOCATOR = b"PK\x06\x07"
SIG_DATA_DESCRIPTOR = b"PK\x07\x08"

# --------------------------------------------------------------------------- layouts

#: sig, version needed, flags, method, time, date, crc, csize, usize, name len, extra len
LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
#: sig, made by, needed, flags, method, time, date, crc, csize, usize, name len, extra len,
#: comment len, disk start, internal attrs, external attrs, local header offset
CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")  # 46 bytes
#: sig, this disk, cd disk, entries on this disk, entries total, cd size, cd offset, comment len
EOCD = struct.Struct("<4sHHHHIIH")  # 22 bytes
#: sig, disk with the zip64 eocd, zip64 eocd offset, total disks
ZIP64_LOCATOR = struct.Struct("<4sIQI")  # 20 bytes
#: sig, record size (after this field), made by, needed, this disk, cd disk,
#: entries on this disk, entries total, cd size, cd offset
ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")  # 56 bytes
#: extra-field block header: id, data size
EXTRA_HEADER = struct.Struct("<HH")
#: sig, crc, csize, usize (32-bit sizes) / the same with 64-bit sizes (ZIP64 entries)
DATA_DESCRIPTOR = struct.Struct("<4sIII")  # 16 bytes
DATA_DESCRIPTOR_ZIP64 = struct.Struct("<4sIQQ")  # 24 bytes
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")

#: size of the ZIP64 record after its leading signature and size fields (APPNOTE 4.3.14.1)
ZIP64_EOCD_BODY = ZIP64_EOCD.size - 12
#: ZIP64 extra fields as the writer emits them: header + (usize, csize) in a local header,
#: header + (usize, csize, offset) in a central header
LOCAL_ZIP64_EXTRA_SIZE = EXTRA_HEADER.size + 16
CENTRAL_ZIP64_EXTRA_SIZE = EXTRA_HEADER.size + 24

# --------------------------------------------------------------------------- field values

MAX_COMMENT = 0xFFFF
U16_MAX = 0xFFFF
U32_MAX = 0xFFFFFFFF
ZIP64_EXTRA_ID = 0x0001

VERSION_ZIP64 = 45  #: 4.5: ZIP64
VERSION_DEFAULT = 20  #: 2.0: deflate, directories
HOST_UNIX = 3
VERSION_MADE_BY = (HOST_UNIX << 8) | VERSION_ZIP64
EXTERNAL_ATTR = 0o100644 << 16  #: regular file, rw-r--r-- (UNIX mode in the high 16 bits)
DOS_EPOCH = (0, (1 << 5) | 1)  #: 1980-01-01 00:00:00 as (dos_time, dos_date)

METHOD_STORED = 0
METHOD_DEFLATED = 8
_METHOD_NAMES = {
    0: "stored",
    1: "shrunk",
    6: "imploded",
    8: "deflated",
    9: "deflate64",
    12: "bzip2",
    14: "lzma",
    93: "zstandard",
    95: "xz",
    96: "jpeg",
    97: "wavpack",
    98: "ppmd",
    99: "aes-encrypted",
}

FLAG_ENCRYPTED = 0x0001
FLAG_DATA_DESCRIPTOR = 0x0008
FLAG_STRONG_ENCRYPTION = 0x0040
FLAG_UTF8 = 0x0800


def method_name(method: int) -> str:
    """Human-readable name of a ZIP compression method number."""
    name = _METHOD_NAMES.get(method)
    return f"{name} (method {method})" if name else f"method {method}"


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


# --------------------------------------------------------------------------- named forms


class LocalHeader(NamedTuple):
    signature: bytes
    version_needed: int
    flags: int
    method: int
    dos_time: int
    dos_date: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    name_length: int
    extra_length: int


class CentralHeader(NamedTuple):
    signature: bytes
    version_made_by: int
    version_needed: int
    flags: int
    method: int
    dos_time: int
    dos_date: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    name_length: int
    extra_length: int
    comment_length: int
    disk_start: int
    internal_attr: int
    external_attr: int
    header_offset: int


class EndOfCentralDirectory(NamedTuple):
    signature: bytes
    disk: int
    cd_disk: int
    entries_on_disk: int
    entries: int
    cd_size: int
    cd_offset: int
    comment_length: int


class Zip64Locator(NamedTuple):
    signature: bytes
    zip64_eocd_disk: int
    zip64_eocd_offset: int
    total_disks: int


class Zip64EndOfCentralDirectory(NamedTuple):
    signature: bytes
    record_size: int
    version_made_by: int
    version_needed: int
    disk: int
    cd_disk: int
    entries_on_disk: int
    entries: int
    cd_size: int
    cd_offset: int


class DataDescriptor(NamedTuple):
    signature: bytes  #: ``b""`` when the optional signature is absent
    crc32: int
    compressed_size: int
    uncompressed_size: int


def unpack_local_header(buf: bytes | memoryview, offset: int = 0) -> LocalHeader:
    """The fixed 30 bytes of a local file header at ``offset`` (signature not checked)."""
    return LocalHeader._make(LOCAL_HEADER.unpack_from(buf, offset))


def unpack_central_header(buf: bytes | memoryview, offset: int = 0) -> CentralHeader:
    """The fixed 46 bytes of a central directory header (signature not checked)."""
    return CentralHeader._make(CENTRAL_HEADER.unpack_from(buf, offset))


def unpack_eocd(buf: bytes | memoryview, offset: int = 0) -> EndOfCentralDirectory:
    """The fixed 22 bytes of the classic end of central directory record."""
    return EndOfCentralDirectory._make(EOCD.unpack_from(buf, offset))


def unpack_zip64_locator(buf: bytes | memoryview, offset: int = 0) -> Zip64Locator:
    """The 20-byte ZIP64 end of central directory locator."""
    return Zip64Locator._make(ZIP64_LOCATOR.unpack_from(buf, offset))


def unpack_zip64_eocd(buf: bytes | memoryview, offset: int = 0) -> Zip64EndOfCentralDirectory:
    """The fixed 56 bytes of the ZIP64 end of central directory record."""
    return Zip64EndOfCentralDirectory._make(ZIP64_EOCD.unpack_from(buf, offset))


def unpack_data_descriptor(
    buf: bytes | memoryview, offset: int = 0, *, zip64: bool = False
) -> DataDescriptor:
    """A data descriptor at ``offset``, with or without its optional signature.

    ``zip64`` selects 64-bit size fields (APPNOTE 4.3.9.2). Raises :class:`ZipFormatError`
    when ``buf`` is too short for the form found.
    """
    has_sig = bytes(buf[offset : offset + 4]) == SIG_DATA_DESCRIPTOR
    sizes = "<QQ" if zip64 else "<II"
    need = (4 if has_sig else 0) + 4 + struct.calcsize(sizes)
    if offset < 0 or offset + need > len(buf):
        raise ZipFormatError(f"data descriptor at offset {offset} is cut off")
    p = offset + (4 if has_sig else 0)
    (crc,) = U32.unpack_from(buf, p)
    csize, usize = struct.unpack_from(sizes, buf, p + 4)
    return DataDescriptor(SIG_DATA_DESCRIPTOR if has_sig else b"", crc, csize, usize)


# --------------------------------------------------------------------------- ZIP64 extra


def pack_zip64_extra(*values: int) -> bytes:
    """A ZIP64 extended-information extra field carrying ``values`` as 64-bit numbers.

    The caller passes only the values whose classic field is saturated, in the order
    uncompressed size, compressed size, local header offset (APPNOTE 4.5.3).
    """
    body = b"".join(U64.pack(v) for v in values)
    return EXTRA_HEADER.pack(ZIP64_EXTRA_ID, len(body)) + body


def read_zip64_extra(
    extra: bytes | memoryview, usize: int, csize: int, hoff: int, disk: int, index: int
) -> tuple[int, int, int, int, bool]:
    """Substitute the ZIP64 extended-information values for saturated 32/16-bit fields.

    Only fields whose classic value is saturated are present, in the fixed order
    uncompressed size, compressed size, local header offset, disk number. Returns the
    resolved ``(usize, csize, hoff, disk, found)``; ``index`` names the central directory
    entry in errors. Every read is bounded by the block's declared length, and that by the
    extra area, so a lying length raises :class:`ZipFormatError`.
    """
    p = 0
    n = len(extra)
    found = False
    while p + 4 <= n:
        hid, hlen = EXTRA_HEADER.unpack_from(extra, p)
        p += 4
        if p + hlen > n:
            raise ZipFormatError(f"central directory entry {index}: corrupt extra field")
        if hid == ZIP64_EXTRA_ID and not found:
            found = True
            q = p
            lim = p + hlen
            try:
                if usize == U32_MAX:
                    if q + 8 > lim:
                        raise IndexError
                    (usize,) = U64.unpack_from(extra, q)
                    q += 8
                if csize == U32_MAX:
                    if q + 8 > lim:
                        raise IndexError
                    (csize,) = U64.unpack_from(extra, q)
                    q += 8
                if hoff == U32_MAX:
                    if q + 8 > lim:
                        raise IndexError
                    (hoff,) = U64.unpack_from(extra, q)
                    q += 8
                if disk == U16_MAX:
                    if q + 4 > lim:
                        raise IndexError
                    (disk,) = U32.unpack_from(extra, q)
            except IndexError:
                raise ZipFormatError(
                    f"central directory entry {index}: ZIP64 extra field is too short for "
                    "the values it must carry"
                ) from None
        p += hlen
    return usize, csize, hoff, disk, found


# --------------------------------------------------------------------------- packing


def pack_local_header(
    name: bytes,
    crc: int,
    size: int,
    *,
    compressed_size: int | None = None,
    method: int = METHOD_STORED,
    flags: int = 0,
    dos_time: int = 0,
    dos_date: int = 0x21,
    zip64: bool = True,
) -> bytes:
    """Local file header + name + extra.

    ``size`` is the uncompressed size; ``compressed_size`` defaults to it (STORED). With
    ``zip64`` (the writer's only form) both 32-bit size fields hold ``0xFFFFFFFF`` and the
    real sizes are in a ZIP64 extra field (uncompressed then compressed, as APPNOTE 4.5.3
    requires for local headers); without it the sizes must fit in 32 bits.
    """
    csize = size if compressed_size is None else compressed_size
    if zip64:
        extra = pack_zip64_extra(size, csize)
        c32 = u32 = U32_MAX
        version = VERSION_ZIP64
    else:
        if csize >= U32_MAX or size >= U32_MAX:
            raise ValueError("member too large for a non-ZIP64 local header")
        extra = b""
        c32, u32 = csize, size
        version = VERSION_DEFAULT
    head = LOCAL_HEADER.pack(
        SIG_LOCAL, version, flags, method, dos_time, dos_date, crc & U32_MAX, c32, u32,
        len(name), len(extra),
    )  # fmt: skip
    return head + name + extra


def pack_central_header(
    name: bytes,
    crc: int,
    size: int,
    offset: int,
    *,
    compressed_size: int | None = None,
    method: int = METHOD_STORED,
    flags: int = 0,
    dos_time: int = 0,
    dos_date: int = 0x21,
    external_attr: int = EXTERNAL_ATTR,
    zip64: bool = True,
) -> bytes:
    """Central directory header + name + extra.

    With ``zip64`` the sizes and the local header offset are ``0xFFFFFFFF`` in the fixed
    part and carried as 64-bit values in the extra field (uncompressed size, compressed
    size, offset); without it they must fit in 32 bits.
    """
    csize = size if compressed_size is None else compressed_size
    if zip64:
        extra = pack_zip64_extra(size, csize, offset)
        u32 = c32 = off32 = U32_MAX
        version = VERSION_ZIP64
    else:
        if max(csize, size, offset) >= U32_MAX:
            raise ValueError("member too large / too far for a non-ZIP64 central header")
        extra = b""
        u32, c32, off32 = size, csize, offset
        version = VERSION_DEFAULT
    head = CENTRAL_HEADER.pack(
        SIG_CENTRAL, (HOST_UNIX << 8) | version, version, flags, method, dos_time, dos_date,
        crc & U32_MAX, c32, u32, len(name), len(extra),
        0,  # file comment length
        0,  # disk number start
        0,  # internal attributes
        external_attr, off32,
    )  # fmt: skip
    return head + name + extra


def pack_zip64_eocd(count: int, cd_size: int, cd_offset: int) -> bytes:
    """ZIP64 end of central directory record (version 1, no extensible data)."""
    return ZIP64_EOCD.pack(
        SIG_ZIP64_EOCD,
        ZIP64_EOCD_BODY,
        VERSION_MADE_BY,
        VERSION_ZIP64,
        0,  # number of this disk
        0,  # disk with the start of the central directory
        count,
        count,
        cd_size,
        cd_offset,
    )


def pack_zip64_locator(zip64_eocd_offset: int) -> bytes:
    """ZIP64 end of central directory locator (single disk)."""
    return ZIP64_LOCATOR.pack(SIG_ZIP64_LOCATOR, 0, zip64_eocd_offset, 1)


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
        EOCD.pack(
            SIG_EOCD, 0, 0, n, n, min(cd_size, U32_MAX), min(cd_offset, U32_MAX), len(comment)
        )
        + comment
    )


def pack_data_descriptor(crc: int, compressed_size: int, size: int, *, zip64: bool) -> bytes:
    """A data descriptor with its signature (``zip64``: 64-bit sizes). Our writer never
    emits one (it knows sizes up front); tests use it to build what streaming zippers write."""
    if zip64:
        return DATA_DESCRIPTOR_ZIP64.pack(SIG_DATA_DESCRIPTOR, crc & U32_MAX, compressed_size, size)
    return DATA_DESCRIPTOR.pack(SIG_DATA_DESCRIPTOR, crc & U32_MAX, compressed_size, size)
