"""Hand-built ZIP records for tests: archives no writer of ours would produce
(no ZIP64, other methods, lying fields), to test the reader and the validator.

The layouts come from :mod:`napari_ozx.ozx.records` (the one definition the writer and the
parser use too); these wrappers only choose the values a test wants.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

from napari_ozx.ozx.records import (
    DOS_EPOCH,
    EXTERNAL_ATTR,
    FLAG_UTF8,
    MAX_COMMENT,
    METHOD_STORED,
    U16_MAX,
    U32_MAX,
    pack_central_header,
    pack_eocd,
    pack_local_header,
    pack_zip64_eocd,
    pack_zip64_locator,
)


def build_local_header(
    name: bytes,
    *,
    crc32: int,
    compressed_size: int,
    uncompressed_size: int,
    method: int = METHOD_STORED,
    flags: int = FLAG_UTF8,
    zip64: bool = True,
    dos_time: tuple[int, int] = DOS_EPOCH,
) -> bytes:
    """A local file header (+ name + extra). With ``zip64`` both sizes go into a ZIP64
    extra field and the 32-bit fields are saturated (as APPNOTE 4.5.3 requires)."""
    return pack_local_header(
        name,
        crc32,
        uncompressed_size,
        compressed_size=compressed_size,
        method=method,
        flags=flags,
        dos_time=dos_time[0],
        dos_date=dos_time[1],
        zip64=zip64,
    )


def build_central_header(
    name: bytes,
    *,
    header_offset: int,
    crc32: int,
    compressed_size: int,
    uncompressed_size: int,
    method: int = METHOD_STORED,
    flags: int = FLAG_UTF8,
    zip64: bool = True,
    dos_time: tuple[int, int] = DOS_EPOCH,
    external_attr: int = EXTERNAL_ATTR,
) -> bytes:
    """A central directory header (+ name + extra). With ``zip64`` the sizes and the local
    header offset always go into a ZIP64 extra field (saturated 32-bit fields)."""
    return pack_central_header(
        name,
        crc32,
        uncompressed_size,
        header_offset,
        compressed_size=compressed_size,
        method=method,
        flags=flags,
        dos_time=dos_time[0],
        dos_date=dos_time[1],
        external_attr=external_attr,
        zip64=zip64,
    )


def build_end_records(
    *,
    count: int,
    cd_offset: int,
    cd_size: int,
    comment: bytes = b"",
    zip64: bool = True,
) -> bytes:
    """End records to append right after a central directory that starts at ``cd_offset``:
    ZIP64 EOCD + ZIP64 locator (if ``zip64``) + classic EOCD with ``comment``."""
    if len(comment) > MAX_COMMENT:
        raise ValueError(f"archive comment longer than {MAX_COMMENT} bytes")
    out = b""
    if zip64:
        out += pack_zip64_eocd(count, cd_size, cd_offset)
        out += pack_zip64_locator(cd_offset + cd_size)
    elif count >= U16_MAX or cd_size >= U32_MAX or cd_offset >= U32_MAX:
        raise ValueError("archive needs ZIP64 end records")
    return out + pack_eocd(count, cd_size, cd_offset, comment)


def zip_directory(src: Path, dst: Path) -> Path:
    """*dst*: a STORED ``.ozx`` of the directory *src* made by Python's ``zipfile``,
    ``zarr.json`` entries first, breadth first (RFC-9's order), as served by the remote
    read tests."""
    files = sorted(p for p in src.rglob("*") if p.is_file())
    files.sort(key=lambda p: (p.name != "zarr.json", len(p.relative_to(src).parts)))
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zf:
        for p in files:
            zf.write(p, p.relative_to(src).as_posix())
    return dst


def central_record_offset(data: bytes | bytearray, name: str) -> int:
    """Where *name*'s central-directory record starts in the archive bytes *data*."""
    enc, pos = name.encode(), 0
    while True:
        pos = data.index(b"PK\x01\x02", pos)
        n = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + n] == enc:
            return pos
        pos += 4
