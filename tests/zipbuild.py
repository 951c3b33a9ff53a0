"""Hand-built ZIP records for tests: archives no writer of ours would produce
(no ZIP64, other methods, lying fields), to test the reader and the validator."""

from __future__ import annotations

from napari_ozx.ozx._zip import (
    _EXTRA_HEADER,
    _U64,
    CENTRAL_HEADER,
    EOCD,
    FLAG_UTF8,
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

_DOS_EPOCH = (0, (1 << 5) | 1)  # 1980-01-01 00:00:00 as (time, date)


def _zip64_extra(*values: int) -> bytes:
    body = b"".join(_U64.pack(v) for v in values)
    return _EXTRA_HEADER.pack(ZIP64_EXTRA_ID, len(body)) + body


def build_local_header(
    name: bytes,
    *,
    crc32: int,
    compressed_size: int,
    uncompressed_size: int,
    method: int = METHOD_STORED,
    flags: int = FLAG_UTF8,
    zip64: bool = True,
    dos_time: tuple[int, int] = _DOS_EPOCH,
) -> bytes:
    """A local file header (+ name + extra). With ``zip64`` both sizes go into a ZIP64
    extra field and the 32-bit fields are saturated (as APPNOTE 4.5.3 requires)."""
    if zip64:
        extra = _zip64_extra(uncompressed_size, compressed_size)
        csize = usize = U32_MAX
        version = 45
    else:
        if compressed_size >= U32_MAX or uncompressed_size >= U32_MAX:
            raise ValueError("member too large for a non-ZIP64 local header")
        extra = b""
        csize, usize = compressed_size, uncompressed_size
        version = 20
    head = LOCAL_HEADER.pack(
        SIG_LOCAL, version, flags, method, dos_time[0], dos_time[1], crc32, csize, usize,
        len(name), len(extra),
    )  # fmt: skip
    return head + name + extra


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
    dos_time: tuple[int, int] = _DOS_EPOCH,
    external_attr: int = 0o100644 << 16,
) -> bytes:
    """A central directory header (+ name + extra). With ``zip64`` the sizes and the local
    header offset always go into a ZIP64 extra field (saturated 32-bit fields)."""
    if zip64:
        extra = _zip64_extra(uncompressed_size, compressed_size, header_offset)
        usize = csize = hoff = U32_MAX
        version = 45
    else:
        if max(compressed_size, uncompressed_size, header_offset) >= U32_MAX:
            raise ValueError("member too large / too far for a non-ZIP64 central header")
        extra = b""
        usize, csize, hoff = uncompressed_size, compressed_size, header_offset
        version = 20
    head = CENTRAL_HEADER.pack(
        SIG_CENTRAL, (3 << 8) | version, version, flags, method, dos_time[0], dos_time[1],
        crc32, csize, usize, len(name), len(extra), 0, 0, 0, external_attr, hoff,
    )  # fmt: skip
    return head + name + extra


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
        z_offset = cd_offset + cd_size
        out += ZIP64_EOCD.pack(
            SIG_ZIP64_EOCD, ZIP64_EOCD.size - 12, (3 << 8) | 45, 45, 0, 0, count, count,
            cd_size, cd_offset,
        )  # fmt: skip
        out += ZIP64_LOCATOR.pack(SIG_ZIP64_LOCATOR, 0, z_offset, 1)
        c16 = min(count, U16_MAX)
        c_size = min(cd_size, U32_MAX)
        c_off = min(cd_offset, U32_MAX)
    else:
        if count >= U16_MAX or cd_size >= U32_MAX or cd_offset >= U32_MAX:
            raise ValueError("archive needs ZIP64 end records")
        c16, c_size, c_off = count, cd_size, cd_offset
    out += EOCD.pack(SIG_EOCD, 0, 0, c16, c16, c_size, c_off, len(comment)) + comment
    return out
