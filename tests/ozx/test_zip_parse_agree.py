"""The central directory's two parsers agree: whatever the vectorised ``_parse_fast``
accepts, the record-by-record ``_parse_slow`` accepts too, with the same columns (names,
offsets, sizes, ZIP64 flags, extra fields). ``_parse_fast`` may decline (``None``) where
anything is unusual; it must never answer differently."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from napari_ozx.errors import OzxError
from napari_ozx.ozx._zip import _parse_fast, _parse_slow
from napari_ozx.ozx.records import LOCAL_HEADER, U32_MAX, pack_central_header

COLUMNS = ("hoff", "method", "flags", "crc", "csize", "usize", "z64", "names", "nlen")
COLUMNS += ("extras", "elen")

_NAME = st.text(alphabet=st.sampled_from("abcxyz0129/._-é"), min_size=1, max_size=24).map(
    lambda s: s.encode("utf-8")
)


@st.composite
def central_directories(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """A central directory of 1-12 members laid out one after another, some ZIP64, some
    names non-ASCII, and optionally one byte overwritten (hostile input)."""
    n = draw(st.integers(1, 12))
    parts: list[bytes] = []
    offset = 0
    for _ in range(n):
        name = draw(_NAME)
        zip64 = draw(st.booleans()) or offset >= 2**31  # (a far offset needs ZIP64)
        limit = 2**40 if zip64 else 2**20
        size = draw(st.integers(0, limit))
        csize = draw(st.one_of(st.just(size), st.integers(0, limit)))
        flags = draw(st.sampled_from([0, 0x800, 0x8, 0x808]))
        method = draw(st.sampled_from([0, 8]))
        crc = draw(st.integers(0, U32_MAX))
        parts.append(
            pack_central_header(
                name,
                crc,
                size,
                offset,
                compressed_size=csize,
                method=method,
                flags=flags,
                zip64=zip64,
            )
        )
        offset += LOCAL_HEADER.size + len(name) + csize
    buf = bytearray(b"".join(parts))
    cd_offset = offset + draw(st.integers(0, 64))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(buf) - 1))
        buf[at] = draw(st.integers(0, 255))
    return bytes(buf), n, cd_offset


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(central_directories())
def test_parse_fast_and_parse_slow_agree(case: tuple[bytes, int, int]) -> None:
    buf, count, cd_offset = case
    try:
        fast = _parse_fast(buf, count, cd_offset)
    except OzxError:
        fast = None  # (a precise error of its own: the slow parser decides)
    try:
        slow, multi_part = _parse_slow(buf, count, cd_offset, False)
    except OzxError as e:  # ZipFormatError, UnsupportedZipFeature
        assert fast is None, f"fast parsed what slow refuses: {e}"
        return
    assert not multi_part
    if fast is None:
        return  # declined: the slow parser's answer stands
    for col in COLUMNS:
        a, b = getattr(fast, col), getattr(slow, col)
        assert np.array_equal(np.asarray(a), np.asarray(b)), col
    assert [fast.entry(i) for i in range(count)] == [slow.entry(i) for i in range(count)]


def test_a_plain_directory_takes_the_fast_path() -> None:
    """(so the property above compares two answers, not one answer with a fallback)"""
    parts, offset = [], 0
    for i in range(5):
        name = f"a/{i}".encode()
        parts.append(pack_central_header(name, i, 100, offset, zip64=bool(i % 2)))
        offset += LOCAL_HEADER.size + len(name) + 100
    buf = b"".join(parts)
    fast = _parse_fast(buf, 5, offset)
    assert fast is not None
    slow, _ = _parse_slow(buf, 5, offset, False)
    assert [fast.entry(i) for i in range(5)] == [slow.entry(i) for i in range(5)]
