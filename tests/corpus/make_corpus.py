#!/usr/bin/env python
"""Generate the hostile / broken OME-Zarr corpus used by ``tests/test_corpus.py``.

    python tests/corpus/make_corpus.py            # rewrites tests/corpus/files/ + expected.json
    python tests/corpus/make_corpus.py --out DIR  # writes DIR/files/ + DIR/expected.json

Every file is built by hand in this script, byte by byte: the Zarr metadata (JSON written
with fixed key order), the shards (a raw-block zstd frame per inner chunk, a CRC-32C'd
shard index), the ZIP records and, for the deflate bomb, the deflate stream. Nothing comes
from zarr-python, zlib's compressor or napari-ozx's own writer, so the output is
byte-identical on every run and on every machine (``tests/test_corpus.py`` checks this),
and a file is exactly as broken as the case says.

The starting point is a tiny valid OME-Zarr 0.5 image (``valid.ozx``): axes ``c, y, x``,
2 channels, 2 pyramid levels, sharded, zstd, with one label image ``labels/cells``, zipped
(RFC-9) with every ``zarr.json`` first in breadth-first order, ZIP64 end records and the
``{"ome": {"version": "0.5"}}`` archive comment. Each other case changes one thing.

``expected.json`` maps file name -> what napari-ozx must do with it:

``stage``
    where the problem must surface: ``get_reader`` (napari-ozx declines the path: it is not
    ours; ``error`` then names what ``read_layer_data`` raises if called anyway), ``open``
    (``napari_ozx._reader.read_layer_data`` raises), ``read`` (opening succeeds, computing
    the level-0 pixels raises; never made-up pixels).
``error``
    the exception class name (a class of :mod:`napari_ozx.errors`), or null when the file
    must open (a documented fallback) and its level-0 pixels must equal the valid image's.
``match``
    a regular expression the error message must match (it names the reason).
``rule``
    the specification text the case is about.
``xfail`` (optional)
    ``{aspect: reason}``: a known napari-ozx bug; ``tests/test_corpus.py`` marks that
    aspect ``xfail(strict=True)``. Aspects: ``outcome``, ``read_null``, ``budget``.
``labels`` (optional, fallback cases)
    whether the label layer must be present (true) or skipped (false).
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
MAX_FILE_SIZE = 64 * 1024

# --------------------------------------------------------------------------- the image

SEED = 20260509
SHAPE = (2, 32, 64)  # c, y, x
INNER = (1, 16, 16)  # inner (read) chunk
AXES = [
    {"name": "c", "type": "channel"},
    {"name": "y", "type": "space", "unit": "micrometer"},
    {"name": "x", "type": "space", "unit": "micrometer"},
]
LABEL_AXES = AXES[1:]
COMMENT = b'{"ome":{"version":"0.5"}}'


def noise(n: int, salt: int) -> np.ndarray:
    """``n`` pseudo-random uint64 (splitmix64 of a counter): the same bits on every numpy
    version, unlike ``numpy.random`` whose Generator methods may change their streams."""
    with np.errstate(over="ignore"):
        x = (np.arange(n, dtype=np.uint64) + np.uint64(salt)) * np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def noise_bytes(n: int, salt: int) -> bytes:
    return (noise(n, salt) & np.uint64(0xFF)).astype(np.uint8).tobytes()


def base_arrays() -> dict[str, np.ndarray]:
    """Every array of the valid image: node path -> pixels (deterministic)."""
    img = (noise(int(np.prod(SHAPE)), SEED) % np.uint64(4000)).astype(np.uint16).reshape(SHAPE)
    lab = (img[0] // 1000).astype(np.uint8)  # 4 label values: 0..3
    return {
        "0": img,
        "1": np.ascontiguousarray(img[:, ::2, ::2]),
        "labels/cells/0": lab,
        "labels/cells/1": np.ascontiguousarray(lab[::2, ::2]),
    }


# --------------------------------------------------------------------------- codecs by hand


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def zstd_frame(raw: bytes) -> bytes:
    """A valid zstd frame holding ``raw`` in one raw (uncompressed) block.

    Frame header descriptor 0xA0: single segment, 4-byte frame content size, no checksum,
    no dictionary (RFC 8878 3.1.1.1). Block header: last block, type Raw, size.
    """
    assert len(raw) < 128 * 1024
    header = b"\x28\xb5\x2f\xfd" + bytes([0xA0]) + struct.pack("<I", len(raw))
    block = ((len(raw) << 3) | 1).to_bytes(3, "little")
    return header + block + raw


def encode_shard(
    block: np.ndarray,
    inner: tuple[int, ...],
    chunk_bytes: Callable[[tuple[int, ...], bytes], bytes] | None = None,
) -> bytes:
    """The ``sharding_indexed`` encoding (index at the end, bytes + crc32c index codecs) of
    one shard; inner chunks are ``bytes`` (little endian) + ``zstd``. ``chunk_bytes`` may
    replace the encoded bytes of an inner chunk (to corrupt it)."""
    grid = tuple(-(-s // c) for s, c in zip(block.shape, inner, strict=True))
    body = bytearray()
    index = []
    for pos in np.ndindex(*grid):
        sl = tuple(slice(p * c, (p + 1) * c) for p, c in zip(pos, inner, strict=True))
        chunk = np.zeros(inner, dtype=block.dtype)
        part = block[sl]
        chunk[tuple(slice(0, s) for s in part.shape)] = part
        enc = zstd_frame(chunk.astype(chunk.dtype.newbyteorder("<")).tobytes())
        if chunk_bytes is not None:
            enc = chunk_bytes(pos, enc)
        index.append((len(body), len(enc)))
        body += enc
    idx = np.array(index, dtype="<u8").tobytes()
    return bytes(body) + idx + struct.pack("<I", crc32c(idx))


def array_doc(
    shape: tuple[int, ...],
    dtype: str,
    shard: tuple[int, ...],
    inner: tuple[int, ...],
    dims: list[str],
) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(inner),
                    "codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
                    ],
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": "end",
                },
            }
        ],
        "attributes": {},
        "dimension_names": dims,
    }


# --------------------------------------------------------------------------- hierarchy


@dataclass
class Tree:
    """An OME-Zarr hierarchy: ``zarr.json`` documents by node path, and raw members."""

    docs: dict[str, Any] = field(default_factory=dict)  #: node path -> zarr.json document
    chunks: dict[str, bytes] = field(default_factory=dict)  #: key -> bytes
    raw: dict[str, bytes] = field(default_factory=dict)  #: key -> bytes, replaces a doc

    def files(self) -> list[tuple[str, bytes]]:
        """Members in RFC-9 order: zarr.json breadth-first, then the chunks by name."""
        meta: dict[str, bytes] = {}
        for path, doc in self.docs.items():
            key = f"{path}/zarr.json" if path else "zarr.json"
            meta[key] = json.dumps(doc, indent=1).encode()
        for key, data in self.raw.items():
            if key.endswith("zarr.json"):
                meta[key] = data
        order = sorted(meta, key=lambda k: (k.count("/"), k))
        out = [(k, meta[k]) for k in order]
        rest = {**self.chunks, **{k: v for k, v in self.raw.items() if k not in meta}}
        out += [(k, rest[k]) for k in sorted(rest)]
        return out


def multiscales(name: str, axes: list[dict[str, Any]], n_levels: int = 2) -> dict[str, Any]:
    datasets = []
    for i in range(n_levels):
        s = [1.0] * (len(axes) - 2) + [0.5 * 2**i, 0.5 * 2**i]
        datasets.append(
            {"path": str(i), "coordinateTransformations": [{"type": "scale", "scale": s}]}
        )
    return {"name": name, "axes": [dict(a) for a in axes], "datasets": datasets}


OMERO = {
    "channels": [
        {
            "label": "DAPI",
            "color": "0000FF",
            "active": True,
            "window": {"start": 0, "end": 3000, "min": 0, "max": 65535},
        },
        {
            "label": "GFP",
            "color": "00FF00",
            "active": True,
            "window": {"start": 100, "end": 3500, "min": 0, "max": 65535},
        },
    ],
    "rdefs": {"model": "color"},
}


def base_tree(
    chunk_bytes: Callable[[str, tuple[int, ...], bytes], bytes] | None = None,
) -> Tree:
    """The valid image. ``chunk_bytes(array_path, inner_pos_in_shard, encoded)`` may
    corrupt inner chunks of the channel-0 shard."""
    arrays = base_arrays()
    t = Tree()
    t.docs[""] = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {
            "ome": {
                "version": "0.5",
                "multiscales": [multiscales("corpus", AXES)],
                "omero": json.loads(json.dumps(OMERO)),
            }
        },
    }
    t.docs["labels"] = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {"version": "0.5", "labels": ["cells"]}},
    }
    t.docs["labels/cells"] = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {
            "ome": {
                "version": "0.5",
                "multiscales": [multiscales("cells", LABEL_AXES)],
                "image-label": {
                    "colors": [
                        {"label-value": v, "rgba": [60 * v, 255 - 60 * v, 128, 255]}
                        for v in (1, 2, 3)
                    ],
                    "source": {"image": "../../"},
                },
            }
        },
    }
    for path, arr in arrays.items():
        is_label = path.startswith("labels/")
        dims = ["y", "x"] if is_label else ["c", "y", "x"]
        inner = INNER[1:] if is_label else INNER
        shard = arr.shape if is_label else (1, *arr.shape[1:])
        dtype = "uint8" if is_label else "uint16"
        t.docs[path] = array_doc(arr.shape, dtype, shard, inner, dims)
        grid = tuple(s // c for s, c in zip(arr.shape, shard, strict=True))
        for pos in np.ndindex(*grid):
            sl = tuple(slice(p * c, (p + 1) * c) for p, c in zip(pos, shard, strict=True))
            cb = None
            if chunk_bytes is not None and not is_label and pos[0] == 0:

                def cb(p, e, _path=path):
                    return chunk_bytes(_path, p, e)

            key = f"{path}/c/" + "/".join(str(p) for p in pos)
            t.chunks[key] = encode_shard(arr[sl], inner, cb)
    return t


# --------------------------------------------------------------------------- ZIP writer

LOCAL_FIELDS = (
    "sig",
    "need",
    "flags",
    "method",
    "time",
    "date",
    "crc",
    "csize",
    "usize",
    "nlen",
    "elen",
)
LOCAL = struct.Struct("<4sHHHHHIIIHH")
CENTRAL_FIELDS = (
    "sig",
    "made",
    "need",
    "flags",
    "method",
    "time",
    "date",
    "crc",
    "csize",
    "usize",
    "nlen",
    "elen",
    "clen",
    "disk",
    "iattr",
    "eattr",
    "hoff",
)
CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
EOCD_FIELDS = ("sig", "disk", "cd_disk", "n_disk", "n_total", "cd_size", "cd_offset", "clen")
EOCD = struct.Struct("<4sHHHHIIH")
Z64_FIELDS = (
    "sig",
    "rec_size",
    "made",
    "need",
    "disk",
    "cd_disk",
    "n_disk",
    "n_total",
    "cd_size",
    "cd_offset",
)
Z64 = struct.Struct("<4sQHHIIQQQQ")
LOC_FIELDS = ("sig", "disk", "offset", "total_disks")
LOC = struct.Struct("<4sIQI")
DOS_TIME, DOS_DATE = 0, (45 << 9) | (1 << 5) | 1  # 2025-01-01 00:00:00
STORED, DEFLATED = 0, 8
UTF8 = 0x0800


def deflate_stored_blocks(data: bytes) -> bytes:
    """A valid raw deflate stream made of stored blocks (no compressor needed)."""
    out = bytearray()
    for i in range(0, max(len(data), 1), 65535):
        part = data[i : i + 65535]
        last = i + 65535 >= len(data)
        out += bytes([1 if last else 0]) + struct.pack("<HH", len(part), len(part) ^ 0xFFFF)
        out += part
    return bytes(out)


class BitWriter:
    """LSB-first bit packer for deflate."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def bits(self, value: int, count: int) -> None:
        self.acc |= value << self.n
        self.n += count
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def code(self, code: int, length: int) -> None:
        """A Huffman code (stored MSB first)."""
        rev = int(f"{code:0{length}b}"[::-1], 2)
        self.bits(rev, length)

    def finish(self) -> bytes:
        if self.n:
            self.out.append(self.acc & 0xFF)
            self.acc = self.n = 0
        return bytes(self.out)


def complete_lengths(symbols: list[int]) -> dict[int, int]:
    """Huffman code lengths for ``symbols`` that form a complete prefix code (Kraft sum 1),
    as inflate requires: ``a`` symbols one level shallower than the other ``b``."""
    n = len(symbols)
    assert n >= 2
    d = (n - 1).bit_length()
    a = 2**d - n  # at depth d - 1
    return {s: (d - 1 if i < a else d) for i, s in enumerate(symbols)}


def deflate_zeros(n_repeats: int, prefix: bytes = b"") -> tuple[bytes, int]:
    """A raw deflate stream (one dynamic-Huffman block) of ``prefix`` followed by zero
    bytes: one literal 0 and ``n_repeats`` copies of <length 258, distance 1>, ~1 bit each.
    Returns (stream, inflated size). Hand-built so the bytes never depend on zlib."""
    # literal/length alphabet used: the prefix's bytes, 0, 256 (end), 285 (length 258).
    # Code lengths: 285 -> 1 bit; everything else shares the remaining tree.
    lits = sorted(set(prefix) | {0})
    lengths = {s: d + 1 for s, d in complete_lengths([*lits, 256]).items()}
    lengths[285] = 1  # the other half of the tree: <length 258> costs one bit
    dist_lengths = {0: 1, 1: 1}  # two distance codes, 1 bit each (a complete tree)
    hlit = 286  # codes 0..285
    hdist = 2
    ll = [lengths.get(i, 0) for i in range(hlit)] + [dist_lengths[0], dist_lengths[1]]
    # code-length alphabet: send the lengths with run-length codes 0..18
    cl_syms: list[tuple[int, int, int]] = []  # (symbol, extra value, extra bits)
    i = 0
    while i < len(ll):
        v = ll[i]
        run = 1
        while i + run < len(ll) and ll[i + run] == v:
            run += 1
        if v == 0 and run >= 3:
            take = min(run, 138)
            if take >= 11:
                cl_syms.append((18, take - 11, 7))
            else:
                cl_syms.append((17, take - 3, 3))
            i += take
            continue
        cl_syms.append((v, 0, 0))
        i += 1
    cl_len = complete_lengths(sorted({s for s, _, _ in cl_syms}))
    order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
    hclen = max(i for i, s in enumerate(order) if s in cl_len) + 1
    hclen = max(hclen, 4)

    def canonical(lens: dict[int, int]) -> dict[int, tuple[int, int]]:
        codes: dict[int, tuple[int, int]] = {}
        code = 0
        prev = 0
        for sym, ln in sorted(lens.items(), key=lambda kv: (kv[1], kv[0])):
            if ln == 0:
                continue
            code <<= ln - prev
            prev = ln
            codes[sym] = (code, ln)
            code += 1
        return codes

    cl_codes = canonical(cl_len)
    ll_codes = canonical({s: ln for s, ln in enumerate(ll[:hlit]) if ln})
    d_codes = canonical(dist_lengths)

    w = BitWriter()
    w.bits(1, 1)  # BFINAL
    w.bits(2, 2)  # BTYPE = dynamic
    w.bits(hlit - 257, 5)
    w.bits(hdist - 1, 5)
    w.bits(hclen - 4, 4)
    for s in order[:hclen]:
        w.bits(cl_len.get(s, 0), 3)
    for s, extra, nbits in cl_syms:
        w.code(*cl_codes[s])
        if nbits:
            w.bits(extra, nbits)
    for b in prefix:
        w.code(*ll_codes[b])
    w.code(*ll_codes[0])
    # <length 258 (code 285, no extra bits), distance 1 (code 0)>: 2 bits per repeat
    rep = BitWriter()
    rep.code(*ll_codes[285])
    rep.code(*d_codes[0])
    assert rep.n == 2
    pair = rep.acc
    left = n_repeats
    while left and w.n:
        w.bits(pair, 2)
        left -= 1
    w.out += bytes([pair | pair << 2 | pair << 4 | pair << 6]) * (left // 4)
    for _ in range(left % 4):
        w.bits(pair, 2)
    w.code(*ll_codes[256])
    return w.finish(), len(prefix) + 1 + 258 * n_repeats


@dataclass
class Member:
    name: str | bytes
    data: bytes = b""
    method: int = STORED
    payload: bytes | None = None  #: bytes stored in the archive (default: data, deflated)
    flags: int = UTF8
    zip64: bool = False  #: sizes and offset in a ZIP64 extra field
    usize: int | None = None
    local: dict[str, Any] = field(default_factory=dict)  #: field overrides
    central: dict[str, Any] = field(default_factory=dict)
    z64_extra: bytes | None = None  #: replaces the ZIP64 extra field
    descriptor: bool = False  #: streaming style: sizes/CRC in a data descriptor (flag bit 3)


@dataclass
class Layout:
    local: list[int] = field(default_factory=list)
    data: list[int] = field(default_factory=list)
    central: list[int] = field(default_factory=list)
    cd_offset: int = 0
    cd_size: int = 0
    z64_offset: int | None = None
    loc_offset: int | None = None
    eocd_offset: int = 0


def _pack(st: struct.Struct, names: tuple[str, ...], values: dict[str, Any]) -> bytes:
    return st.pack(*(values[n] for n in names))


def build_zip(
    members: list[Member],
    *,
    zip64_end: bool = True,
    comment: bytes = COMMENT,
    eocd: dict[str, Any] | None = None,
    z64: dict[str, Any] | None = None,
    locator: dict[str, Any] | None = None,
    prefix: bytes = b"",
) -> tuple[bytes, Layout]:
    out = bytearray(prefix)
    lay = Layout()
    records = []
    for m in members:
        name = m.name.encode() if isinstance(m.name, str) else m.name
        payload = m.payload
        if payload is None:
            payload = m.data if m.method != DEFLATED else deflate_stored_blocks(m.data)
        crc = zlib.crc32(m.data)
        usize = len(m.data) if m.usize is None else m.usize
        csize = len(payload)
        offset = len(out)
        if m.zip64:
            lextra = (
                m.z64_extra
                if m.z64_extra is not None
                else struct.pack("<HHQQ", 1, 16, usize, csize)
            )
            cextra = (
                m.z64_extra
                if m.z64_extra is not None
                else struct.pack("<HHQQQ", 1, 24, usize, csize, offset)
            )
            l32 = (0xFFFFFFFF, 0xFFFFFFFF)
            c32 = (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
            need = 45
        else:
            lextra = cextra = b""
            l32 = (csize, usize)
            c32 = (csize, usize, offset)
            need = 20
        lv = {
            "sig": b"PK\x03\x04",
            "need": need,
            "flags": m.flags,
            "method": m.method,
            "time": DOS_TIME,
            "date": DOS_DATE,
            "crc": crc,
            "csize": l32[0],
            "usize": l32[1],
            "nlen": len(name),
            "elen": len(lextra),
        }
        if m.descriptor:
            lv.update(flags=m.flags | 0x8, crc=0, csize=0, usize=0)
        lv.update(m.local)
        lay.local.append(offset)
        out += _pack(LOCAL, LOCAL_FIELDS, lv) + name + lextra
        lay.data.append(len(out))
        out += payload
        if m.descriptor:
            out += b"PK\x07\x08" + struct.pack("<III", crc, csize, usize)
        cv = {
            "sig": b"PK\x01\x02",
            "made": (3 << 8) | need,
            "need": need,
            "flags": m.flags,
            "method": m.method,
            "time": DOS_TIME,
            "date": DOS_DATE,
            "crc": crc,
            "csize": c32[0],
            "usize": c32[1],
            "nlen": len(name),
            "elen": len(cextra),
            "clen": 0,
            "disk": 0,
            "iattr": 0,
            "eattr": 0o100644 << 16,
            "hoff": c32[2],
        }
        if m.descriptor:
            cv["flags"] = m.flags | 0x8
        cv.update(m.central)
        records.append(_pack(CENTRAL, CENTRAL_FIELDS, cv) + name + cextra)
    lay.cd_offset = len(out)
    for r in records:
        lay.central.append(len(out))
        out += r
    lay.cd_size = len(out) - lay.cd_offset
    n = len(members)
    if zip64_end:
        lay.z64_offset = len(out)
        zv = {
            "sig": b"PK\x06\x06",
            "rec_size": Z64.size - 12,
            "made": (3 << 8) | 45,
            "need": 45,
            "disk": 0,
            "cd_disk": 0,
            "n_disk": n,
            "n_total": n,
            "cd_size": lay.cd_size,
            "cd_offset": lay.cd_offset,
        }
        zv.update(z64 or {})
        out += _pack(Z64, Z64_FIELDS, zv)
        lay.loc_offset = len(out)
        lv2 = {"sig": b"PK\x06\x07", "disk": 0, "offset": lay.z64_offset, "total_disks": 1}
        lv2.update(locator or {})
        out += _pack(LOC, LOC_FIELDS, lv2)
    lay.eocd_offset = len(out)
    ev = {
        "sig": b"PK\x05\x06",
        "disk": 0,
        "cd_disk": 0,
        "n_disk": n,
        "n_total": n,
        "cd_size": lay.cd_size,
        "cd_offset": lay.cd_offset,
        "clen": len(comment),
    }
    ev.update(eocd or {})
    out += _pack(EOCD, EOCD_FIELDS, ev) + comment
    return bytes(out), lay


def members_of(tree: Tree) -> list[Member]:
    return [Member(k, v) for k, v in tree.files()]


def ozx(tree: Tree | None = None, **kw: Any) -> bytes:
    return build_zip(members_of(tree or base_tree()), **kw)[0]


def index_of(members: list[Member], name: str) -> int:
    return next(i for i, m in enumerate(members) if m.name == name)


def patch(data: bytes, offset: int, fmt: str, *values: Any) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


# --------------------------------------------------------------------------- cases

APPNOTE = "PKWARE APPNOTE 6.3.10"
R_ZIP = f"{APPNOTE} 4.3.6 'Overall .ZIP file format' (end of central directory record)"
R_CD = f"{APPNOTE} 4.3.12 'Central directory structure'"
R_LOCAL = f"{APPNOTE} 4.3.7 'Local file header'"
R_ZIP64 = f"{APPNOTE} 4.3.14/4.3.15 'Zip64 end of central directory record/locator'"
R_Z64EXTRA = f"{APPNOTE} 4.5.3 'Zip64 Extended Information Extra Field'"
R_CRC = f"{APPNOTE} 4.4.7 'CRC-32'"
R_METHOD = f"{APPNOTE} 4.4.5 'compression method'"
R_ENCRYPT = f"{APPNOTE} 4.4.4 'general purpose bit flag' bit 0 (encrypted file)"
R_MULTI = "RFC-9 'OME-Zarr zip files' 4: OME-Zarr zip files SHALL NOT be split into multiple parts."
R_ROOT = (
    "RFC-9 'OME-Zarr zip files' 2: The root of the ZIP archive MUST correspond to "
    "the root of the OME-Zarr hierarchy. The ZIP file MUST contain the the OME-Zarr's "
    "root-level zarr.json."
)
R_NESTED = (
    "RFC-9 'OME-Zarr zip files' 3: OME-Zarr zip files SHALL NOT be embedded in a "
    "parent OME-Zarr hierarchy (as a sub-hierarchy or otherwise)."
)
R_ONE = "RFC-9 'OME-Zarr zip files' 1: The ZIP file MUST contain exactly one OME-Zarr hierarchy."
R_NAMES = (
    f"{APPNOTE} 4.4.17 'file name': a relative path, no drive letter or leading "
    "slash, forward slashes"
)
R_DUP = "ZIP hygiene: each member name occurs once (napari-ozx documents: the last record wins)"
R_BOMB = (
    f"{APPNOTE} 4.4.9 'uncompressed size' (a DEFLATED member must inflate to exactly "
    "the declared size)"
)
R_ZARR_JSON = (
    "Zarr v3 core 'Metadata': the zarr.json document is a JSON object with "
    "zarr_format 3 and node_type 'group' or 'array'"
)
R_ZARR_V3 = (
    "RFC-2: Images that use the new version of OME-Zarr metadata MUST NOT use Zarr "
    "version 2 any more."
)
R_OME_GROUP = (
    "OME-Zarr 0.5 'multiscales metadata': a multiscale image is a Zarr group whose "
    "attributes hold ome.multiscales"
)
R_MS_DATASETS = (
    "OME-Zarr 0.5 'multiscales metadata': Each dictionary in multiscales MUST "
    "contain the field 'datasets', which is a list of dictionaries"
)
R_DIMNAMES = (
    "RFC-2: The dimension_names attribute in the Zarr metadata must match the axes "
    "names in the OME-Zarr metadata."
)
R_LEVELS = (
    "OME-Zarr 0.5 'multiscales metadata': The 'path's MUST be ordered from largest "
    "(i.e. highest resolution) to smallest. Each 'datasets' dictionary MUST have the "
    "same number of dimensions and MUST NOT have more than 5 dimensions."
)
R_MISSING_LEVEL = (
    "OME-Zarr 0.5 'multiscales metadata': each dataset 'path' contains the path "
    "to the array for this resolution relative to the current zarr group"
)
R_SCALE = (
    "OME-Zarr 0.5 'coordinateTransformations metadata': The length of the scale and "
    "translation array MUST be equal to the number of dimensions"
)
R_SCALE_POS = (
    "OME-Zarr 0.5 'coordinateTransformations metadata': scale values are the "
    "physical pixel size (positive)"
)
R_AXES = (
    "OME-Zarr 0.5 'axes metadata': Each 'axes' object MUST contain the field 'name' "
    "... the 'name' values MUST be unique across all axes"
)
R_ZEP10 = (
    "ZEP 10 'extensions': If an extension includes \"must_understand\": true (the "
    "default) and the implementation does not support it, the node must not be loaded "
    "and an appropriate error should be raised."
)
R_ZEP10_OPT = (
    "ZEP 10 'extensions': For extensions with \"must_understand\": false, "
    "implementers may safely ignore unrecognized entries."
)
R_ZEP9_KEY = (
    "ZEP 9 'Using must_understand': New keys in the metadata MAY contain objects "
    "that have a must_understand key with value false. In that case, the key may be "
    "ignored ... implementations MUST fail if they cannot parse the key."
)
R_EXT_POINT = (
    "Zarr v3 core 'Extension points' (codecs, data types, chunk grids, chunk key "
    "encodings): an implementation MUST fail to open an array whose {what} it does "
    "not support"
)
R_CODEC = (
    "Zarr v3 core 'Chunk encoding': a chunk that cannot be decoded is an error; an "
    "implementation never returns made-up pixels"
)
R_SHARD = (
    "Zarr v3 sharding codec 'Binary shard format': the shard index holds (offset, "
    "nbytes) of each inner chunk within the shard; index protected by crc32c"
)
R_LABELS = (
    "OME-Zarr 0.5 'labels metadata' (napari-ozx documented fallback: a label image "
    "that cannot be opened is skipped with a warning, the image still opens)"
)
R_OMERO = (
    "OME-Zarr 0.5 'omero metadata' is transitional and optional (napari-ozx documented "
    "fallback: invalid omero is ignored, the image opens without it)"
)
R_JSON = "RFC 8259 (JSON); Zarr v3 core: metadata documents are JSON objects"
R_GET_READER = (
    "napari-ozx get_reader: a path that is not OME-Zarr (no .ozx suffix, no "
    "OME-Zarr metadata) is declined (None), never an exception"
)


@dataclass
class Case:
    name: str
    build: Callable[[], bytes | dict[str, bytes]]
    expected: dict[str, Any]


CASES: list[Case] = []


def case(
    name: str, stage: str, error: str | None, match: str | None, rule: str, **extra: Any
) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def deco(fn: Callable[[], Any]) -> Callable[[], Any]:
        exp = {"stage": stage, "error": error, "match": match, "rule": rule}
        exp.update(extra)
        CASES.append(Case(name, fn, exp))
        return fn

    return deco


def valid_members() -> list[Member]:
    return members_of(base_tree())


def valid_zip() -> tuple[bytes, Layout, list[Member]]:
    ms = valid_members()
    data, lay = build_zip(ms)
    return data, lay, ms


# ---- the reference ----------------------------------------------------------------------


@case(
    "valid.ozx",
    "read",
    None,
    None,
    "RFC-9 'OME-Zarr zip files' (a conformant file: it must open with the right pixels)",
    labels=True,
)
def _valid() -> bytes:
    return ozx()


# ---- ZIP container: not a zip / truncated -------------------------------------------------


@case("zip_empty.ozx", "open", "ZipFormatError", r"(?i)not a zip.*0 bytes|only 0 bytes", R_ZIP)
def _empty() -> bytes:
    return b""


@case(
    "zip_garbage.ozx", "open", "ZipFormatError", r"(?i)end of central directory.*not found", R_ZIP
)
def _garbage() -> bytes:
    return noise_bytes(4096, SEED + 1)


@case("zip_text.ozx", "open", "ZipFormatError", r"(?i)not a zip", R_ZIP)
def _text() -> bytes:
    # a zarr.json saved with the .ozx extension
    return json.dumps(base_tree().docs[""], indent=1).encode()


@case(
    "zip_trunc_local_header.ozx",
    "open",
    "ZipFormatError",
    r"(?i)not a zip archive.*20 bytes",
    R_ZIP,
)
def _trunc_head() -> bytes:
    return valid_zip()[0][:20]


@case(
    "zip_trunc_in_data.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_ZIP,
)
def _trunc_data() -> bytes:
    data, lay, _ = valid_zip()
    return data[: lay.cd_offset // 2]


@case(
    "zip_trunc_in_cd.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_CD,
)
def _trunc_cd() -> bytes:
    data, lay, _ = valid_zip()
    return data[: lay.cd_offset + lay.cd_size // 2]


@case(
    "zip_trunc_in_zip64_eocd.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_ZIP64,
)
def _trunc_z64() -> bytes:
    data, lay, _ = valid_zip()
    assert lay.z64_offset is not None
    return data[: lay.z64_offset + 30]


@case(
    "zip_trunc_in_eocd.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_ZIP,
)
def _trunc_eocd() -> bytes:
    data, lay, _ = valid_zip()
    return data[: lay.eocd_offset + 12]


@case(
    "zip_trunc_in_comment.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_ZIP,
)
def _trunc_comment() -> bytes:
    # the EOCD is intact but its comment length now runs past the end of the file
    return valid_zip()[0][:-5]


@case(
    "zip_trunc_tail_cut.ozx",
    "open",
    "ZipFormatError",
    r"(?i)end of central directory.*not found",
    R_ZIP,
)
def _trunc_tail() -> bytes:
    # cut just after a shard: everything from the central directory on is lost
    data, lay, _ = valid_zip()
    return data[: lay.cd_offset]


@case("zip_prepended_junk.ozx", "open", "ZipFormatError", r"(?i)central directory|local", R_CD)
def _prepended() -> bytes:
    # 100 bytes in front, offsets not adjusted: every recorded offset is now wrong
    return b"#!/bin/sh\n" + b"\x00" * 90 + valid_zip()[0]


# ---- ZIP container: end records that lie -------------------------------------------------


def _classic(**eocd: Any) -> bytes:
    return build_zip(valid_members(), zip64_end=False, eocd=eocd)[0]


@case(
    "eocd_cd_offset_beyond_eof.ozx",
    "open",
    "ZipFormatError",
    r"(?i)central directory.*(past|outside|beyond)",
    R_ZIP,
)
def _cd_off() -> bytes:
    return _classic(cd_offset=0x7FFF0000)


@case(
    "eocd_cd_size_beyond_eof.ozx",
    "open",
    "ZipFormatError",
    r"(?i)central directory.*(past|outside|beyond)",
    R_ZIP,
)
def _cd_size() -> bytes:
    return _classic(cd_size=0x7FFF0000)


@case(
    "eocd_cd_offset_into_data.ozx",
    "open",
    "ZipFormatError",
    r"(?i)central directory header signature",
    R_CD,
)
def _cd_off_data() -> bytes:
    return _classic(cd_offset=100)


@case("eocd_absurd_entry_count.ozx", "open", "ZipFormatError", r"(?i)claims 65534 entries", R_ZIP)
def _absurd_count() -> bytes:
    return _classic(n_disk=0xFFFE, n_total=0xFFFE)


@case(
    "eocd_count_mismatch.ozx",
    "open",
    "UnsupportedZipFeature",
    r"(?i)multi-part.*13 of 14 entries on this disk",
    R_MULTI,
)
def _count_mismatch() -> bytes:
    # entries on this disk != total entries
    n = len(valid_members())
    return _classic(n_disk=n, n_total=n + 1)


@case("eocd_multi_disk.ozx", "open", "UnsupportedZipFeature", r"(?i)multi-part", R_MULTI)
def _multi_disk() -> bytes:
    return _classic(disk=2, cd_disk=2)


@case(
    "zip64_absurd_entry_count.ozx",
    "open",
    "ZipFormatError",
    r"(?i)claims 4611686018427387904 entries",
    R_ZIP64,
)
def _z64_count() -> bytes:
    return build_zip(
        valid_members(),
        z64={"n_disk": 2**62, "n_total": 2**62},
        eocd={"n_disk": 0xFFFF, "n_total": 0xFFFF},
    )[0]


@case(
    "zip64_cd_offset_beyond_eof.ozx",
    "open",
    "ZipFormatError",
    r"(?i)central directory.*(past|outside|beyond)",
    R_ZIP64,
)
def _z64_cd_off() -> bytes:
    return build_zip(valid_members(), z64={"cd_offset": 2**63 + 5}, eocd={"cd_offset": 0xFFFFFFFF})[
        0
    ]


@case(
    "zip64_locator_out_of_range.ozx",
    "open",
    "ZipFormatError",
    r"(?i)zip64.*(out of range|outside|not found)",
    R_ZIP64,
)
def _z64_loc() -> bytes:
    return build_zip(valid_members(), locator={"offset": 2**64 - 20})[0]


@case(
    "zip64_locator_points_at_data.ozx",
    "open",
    "ZipFormatError",
    r"(?i)zip64 end of central directory record not found",
    R_ZIP64,
)
def _z64_loc_data() -> bytes:
    return build_zip(valid_members(), locator={"offset": 0})[0]


@case("zip64_record_size_lies.ozx", "open", "ZipFormatError", r"(?i)zip64.*size", R_ZIP64)
def _z64_recsize() -> bytes:
    return build_zip(valid_members(), z64={"rec_size": 2**60})[0]


@case("zip64_locator_multi_disk.ozx", "open", "UnsupportedZipFeature", r"(?i)multi-part", R_MULTI)
def _z64_disks() -> bytes:
    return build_zip(valid_members(), locator={"total_disks": 3})[0]


@case("zip_spanned_marker.ozx", "open", "UnsupportedZipFeature", r"(?i)multi-part", R_MULTI)
def _spanned() -> bytes:
    # the first segment of a split archive: spanning signature, the central directory and
    # end records of the last disk (disk 1 of 0..1)
    ms = valid_members()
    return build_zip(ms, prefix=b"PK\x07\x08", zip64_end=False, eocd={"disk": 1, "cd_disk": 1})[0]


@case(
    "cd_entry_on_other_disk.ozx", "open", "UnsupportedZipFeature", r"(?i)multi-part.*disk", R_MULTI
)
def _entry_disk() -> bytes:
    ms = valid_members()
    ms[-1].central["disk"] = 1
    return build_zip(ms)[0]


# ---- ZIP container: central / local records that lie ------------------------------------


@case(
    "cd_bad_signature.ozx",
    "open",
    "ZipFormatError",
    r"(?i)bad central directory header signature",
    R_CD,
)
def _cd_sig() -> bytes:
    ms = valid_members()
    ms[0].central["sig"] = b"PK\x01\x09"
    return build_zip(ms)[0]


@case(
    "local_bad_signature_root.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'zarr\.json'.*no local file header",
    R_LOCAL,
)
def _local_sig_root() -> bytes:
    ms = valid_members()
    ms[0].local["sig"] = b"XX\x03\x04"
    return build_zip(ms)[0]


@case(
    "local_bad_signature_shard.ozx",
    "read",
    "ZipFormatError",
    r"(?i)'0/c/0/0/0'.*no local file header",
    R_LOCAL,
)
def _local_sig_shard() -> bytes:
    ms = valid_members()
    ms[index_of(ms, "0/c/0/0/0")].local["sig"] = b"PK\x00\x00"
    return build_zip(ms)[0]


@case(
    "local_method_mismatch.ozx",
    "open",
    "ZipFormatError",
    r"(?i)local header says deflated.*central directory says stored",
    R_LOCAL,
)
def _local_method() -> bytes:
    ms = valid_members()
    ms[0].local["method"] = DEFLATED
    return build_zip(ms)[0]


@case("cd_size_beyond_eof.ozx", "open", "ZipFormatError", r"(?i)'0/c/1/0/0'.*(past|beyond)", R_CD)
def _cd_csize() -> bytes:
    ms = valid_members()
    i = index_of(ms, "0/c/1/0/0")
    ms[i].central.update(csize=0x7FFFFFFF, usize=0x7FFFFFFF)
    return build_zip(ms)[0]


@case(
    "cd_offset_beyond_eof.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'labels/cells/0/c/0/0'.*(past|beyond)",
    R_CD,
)
def _cd_hoff() -> bytes:
    ms = valid_members()
    ms[index_of(ms, "labels/cells/0/c/0/0")].central["hoff"] = 0x7FFFFFF0
    return build_zip(ms)[0]


@case(
    "cd_stored_size_mismatch.ozx",
    "read",
    "ZipFormatError",
    r"(?i)'0/c/0/0/0'.*compressed size.*uncompressed size",
    R_CD,
)
def _stored_sizes() -> bytes:
    # STORED member whose uncompressed size (what readers slice by) exceeds its data
    ms = valid_members()
    i = index_of(ms, "0/c/0/0/0")
    ms[i].usize = len(ms[i].data) + 4096
    return build_zip(ms)[0]


@case(
    "zip64_extra_sizes_huge.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'0/c/0/0/0'.*(past|beyond)",
    R_Z64EXTRA,
)
def _z64_extra_huge() -> bytes:
    ms = valid_members()
    m = ms[index_of(ms, "0/c/0/0/0")]
    m.zip64 = True
    m.z64_extra = struct.pack("<HHQQQ", 1, 24, 2**64 - 1, 2**64 - 1, 0)
    return build_zip(ms)[0]


@case(
    "zip64_extra_too_short.ozx",
    "open",
    "ZipFormatError",
    r"(?i)zip64 extra field is too short",
    R_Z64EXTRA,
)
def _z64_extra_short() -> bytes:
    ms = valid_members()
    m = ms[index_of(ms, "1/zarr.json")]
    m.zip64 = True
    m.z64_extra = struct.pack("<HHQ", 1, 8, len(m.data))  # 3 values needed, 1 given
    return build_zip(ms)[0]


@case(
    "cd_extra_field_overrun.ozx",
    "open",
    "ZipFormatError",
    r"(?i)(corrupt extra field|runs past)",
    R_CD,
)
def _extra_overrun() -> bytes:
    ms = valid_members()
    m = ms[index_of(ms, "0/zarr.json")]
    m.zip64 = True
    m.z64_extra = struct.pack("<HH", 0x5455, 400) + b"\x00" * 8
    return build_zip(ms)[0]


@case("cd_name_invalid_utf8.ozx", "open", "ZipFormatError", r"(?i)utf-8", R_CD)
def _bad_utf8() -> bytes:
    ms = valid_members()
    ms.append(Member(b"notes-\xff\xfe.txt", b"hello"))
    return build_zip(ms)[0]


@case(
    "local_name_length_lies.ozx",
    "read",
    "ZipFormatError",
    r"(?i)'0/c/1/0/0'.*(runs past|names another member)",
    R_LOCAL,
)
def _local_nlen() -> bytes:
    # the local header of a shard claims a 65535-byte name: its data would start far away
    ms = valid_members()
    ms[index_of(ms, "0/c/1/0/0")].local["nlen"] = 0xFFFF
    return build_zip(ms)[0]


@case(
    "cd_offset_points_to_other_member.ozx",
    "read",
    "ZipFormatError",
    r"(?i)'0/c/1/0/0'.*(name|local header)|CRC-32.*'0/c/1/0/0'",
    R_LOCAL + " (the local header repeats the name: a central record pointing at another "
    "member's header is corrupt)",
)
def _cd_other_member() -> bytes:
    ms = valid_members()
    _, lay = build_zip(ms)
    ms[index_of(ms, "0/c/1/0/0")].central["hoff"] = lay.local[index_of(ms, "0/c/0/0/0")]
    return build_zip(ms)[0]


R_CRC_PARTIAL = R_CRC + " (the ZIP CRC-32 is the only integrity check of these bytes)"


@case(
    "shard_stored_bitflip.ozx", "read", "ZipFormatError", r"(?i)CRC-32.*'0/c/0/0/0'", R_CRC_PARTIAL
)
def _bitflip_stored() -> bytes:
    data, lay, ms = valid_zip()
    pos = lay.data[index_of(ms, "0/c/0/0/0")] + 12 + 10  # inner chunk 0: frame header 12 B
    return data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1 :]


@case("shard_deflated_bitflip.ozx", "read", "ZipFormatError", r"(?i)CRC-32.*'0/c/0/0/0'", R_CRC)
def _bitflip_deflated() -> bytes:
    ms = valid_members()
    i = index_of(ms, "0/c/0/0/0")
    ms[i] = Member(ms[i].name, ms[i].data, method=DEFLATED)
    data, lay = build_zip(ms)
    pos = lay.data[i] + 5 + 12 + 10  # stored deflate block header 5 B, frame header 12 B
    return data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1 :]


# ---- ZIP container: unusual but valid (must open, right pixels) ----------------------------


@case(
    "zip_data_descriptors.ozx",
    "read",
    None,
    None,
    f"{APPNOTE} 4.3.9 'Data descriptor' (streaming writers: sizes and CRC after the data, "
    "the central directory has them)",
    labels=True,
)
def _descriptors() -> bytes:
    ms = valid_members()
    for m in ms:
        m.descriptor = True
    return build_zip(ms)[0]


@case(
    "zip_classic_no_comment.ozx",
    "read",
    None,
    None,
    "RFC-9 recommendations (ZIP64, archive comment) are SHOULDs: a plain ZIP still opens",
    labels=True,
)
def _classic_plain() -> bytes:
    return build_zip(valid_members(), zip64_end=False, comment=b"")[0]


@case(
    "zip_deflated_members.ozx",
    "read",
    None,
    None,
    "RFC-9 'ZIP-level compression SHOULD be disabled' (a SHOULD: deflated members still open)",
    labels=True,
)
def _deflated_all() -> bytes:
    ms = [Member(m.name, m.data, method=DEFLATED) for m in valid_members()]
    return build_zip(ms)[0]


@case(
    "zip_zip64_everywhere.ozx",
    "read",
    None,
    None,
    "RFC-9 'The ZIP64 format extension SHOULD be used' (ZIP64 extra fields on every entry)",
    labels=True,
)
def _zip64_all() -> bytes:
    ms = valid_members()
    for m in ms:
        m.zip64 = True
    return build_zip(ms)[0]


# ---- ZIP container: features we refuse -------------------------------------------------


@case(
    "encrypted_root_zarr_json.ozx",
    "open",
    "UnsupportedZipFeature",
    r"(?i)'zarr\.json'.*encrypted",
    R_ENCRYPT,
)
def _enc_root() -> bytes:
    ms = valid_members()
    ms[0].flags |= 0x1
    return build_zip(ms)[0]


@case(
    "encrypted_shard.ozx", "read", "UnsupportedZipFeature", r"(?i)'0/c/1/0/0'.*encrypted", R_ENCRYPT
)
def _enc_shard() -> bytes:
    ms = valid_members()
    ms[index_of(ms, "0/c/1/0/0")].flags |= 0x1
    return build_zip(ms)[0]


@case(
    "method_bzip2_root.ozx", "open", "UnsupportedZipFeature", r"(?i)'zarr\.json'.*bzip2", R_METHOD
)
def _bzip2() -> bytes:
    ms = valid_members()
    ms[0].method = 12
    return build_zip(ms)[0]


@case("method_lzma_shard.ozx", "read", "UnsupportedZipFeature", r"(?i)'0/c/0/0/0'.*lzma", R_METHOD)
def _lzma() -> bytes:
    ms = valid_members()
    ms[index_of(ms, "0/c/0/0/0")].method = 14
    return build_zip(ms)[0]


# ---- ZIP container: deflate ------------------------------------------------------------


@case(
    "deflate_bomb_small_declared.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'zarr\.json'.*inflates to more than",
    R_BOMB,
)
def _bomb_small() -> bytes:
    # the root zarr.json: a real document followed by ~60 MB of zeros, declared 300 bytes
    # (the bomb takes all the room: the archive holds nothing else)
    doc = valid_members()[0].data
    stream, total = deflate_zeros(240_000, prefix=doc)
    assert total > 60_000_000
    return build_zip([Member("zarr.json", doc, method=DEFLATED, payload=stream, usize=300)])[0]


@case(
    "deflate_bomb_honest_size.ozx",
    "open",
    "MetadataError",
    r"(?i)zarr\.json.*(too (big|large)|bytes|invalid JSON)",
    "napari-ozx: metadata documents are small; never a huge allocation from one member "
    f"({APPNOTE} 4.4.9 'uncompressed size')",
)
def _bomb_honest() -> bytes:
    # the root zarr.json declares (truthfully) ~62 MB: 1 byte of '{' and zeros
    stream, total = deflate_zeros(240_000, prefix=b"{")
    data, lay = build_zip([Member("zarr.json", b"", method=DEFLATED, payload=stream, usize=total)])
    # crc of the inflated content, computed without materialising it twice
    crc = zlib.crc32(b"\x00", zlib.crc32(b"{"))
    block = bytes(258 * 1000)
    for _ in range(240):
        crc = zlib.crc32(block, crc)
    data = patch(data, lay.local[0] + 14, "<I", crc)
    data = patch(data, lay.central[0] + 16, "<I", crc)
    return data


@case(
    "deflate_ratio_lie.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'zarr\.json'.*more than deflate can expand",
    R_BOMB,
)
def _ratio() -> bytes:
    ms = valid_members()
    doc = ms[0].data
    ms[0] = Member("zarr.json", doc, method=DEFLATED, usize=2**30)
    return build_zip(ms)[0]


@case(
    "deflate_invalid_stream.ozx",
    "open",
    "ZipFormatError",
    r"(?i)'zarr\.json'.*not a valid deflate stream",
    R_METHOD,
)
def _bad_deflate() -> bytes:
    ms = valid_members()
    doc = ms[0].data
    ms[0] = Member("zarr.json", doc, method=DEFLATED, payload=b"\xff" * 64)
    return build_zip(ms)[0]


@case(
    "crc_mismatch_deflated_root.ozx",
    "open",
    "ZipFormatError",
    r"(?i)CRC-32 mismatch.*'zarr\.json'",
    R_CRC,
)
def _crc_deflated() -> bytes:
    ms = valid_members()
    doc = ms[0].data
    ms[0] = Member("zarr.json", doc, method=DEFLATED)
    data, lay = build_zip(ms)
    bad = zlib.crc32(doc) ^ 0x1
    data = patch(data, lay.local[0] + 14, "<I", bad)
    return patch(data, lay.central[0] + 16, "<I", bad)


@case(
    "crc_mismatch_stored_root.ozx",
    "open",
    "ZipFormatError",
    r"(?i)CRC-32 mismatch.*'zarr\.json'",
    R_CRC,
)
def _crc_stored() -> bytes:
    data, lay, _ms = valid_zip()
    # flip one byte of the document ("corpus" -> "corpuS"), CRC unchanged
    pos = data.index(b'"corpus"', lay.data[0]) + 6
    return data[:pos] + b"S" + data[pos + 1 :]


# ---- ZIP container: names ---------------------------------------------------------------


@case("names_duplicate.ozx", "read", None, None, R_DUP, labels=True)
def _dups() -> bytes:
    # two records named 0/c/0/0/0: a garbage one first, the real shard last (last wins)
    ms = valid_members()
    i = index_of(ms, "0/c/0/0/0")
    ms.insert(i, Member("0/c/0/0/0", b"\xde\xad\xbe\xef" * 64))
    return build_zip(ms)[0]


@case(
    "names_dotdot_extra_member.ozx",
    "read",
    None,
    None,
    R_NAMES + " (napari-ozx never extracts: such members are unreachable and ignored)",
    labels=True,
)
def _dotdot_extra() -> bytes:
    ms = valid_members()
    ms.append(Member("../../../../tmp/evil.sh", b"#!/bin/sh\necho pwned\n"))
    return build_zip(ms)[0]


@case("names_dotdot_hierarchy.ozx", "open", "NotOmeZarrError", r"(?i)zarr\.json|zarr group", R_ROOT)
def _dotdot_all() -> bytes:
    return build_zip([Member("../" + str(m.name), m.data) for m in valid_members()])[0]


@case("names_absolute.ozx", "open", "NotOmeZarrError", r"(?i)zarr\.json|zarr group", R_NAMES)
def _absolute() -> bytes:
    return build_zip([Member("/" + str(m.name), m.data) for m in valid_members()])[0]


@case("names_backslash.ozx", "open", "MetadataError", r"(?i)'0'.*missing|backslash", R_NAMES)
def _backslash() -> bytes:
    # zarr.json files of the arrays were written with Windows separators
    ms = valid_members()
    for m in ms:
        if m.name != "zarr.json":
            m.name = str(m.name).replace("/", "\\")
    return build_zip(ms)[0]


@case("nested_ozx.ozx", "open", "NotOmeZarrError", r"(?i)nested|inner\.ozx", R_NESTED)
def _nested() -> bytes:
    inner = ozx()
    return build_zip([Member("inner.ozx", inner)])[0]


@case(
    "no_root_zarr_json.ozx",
    "open",
    "NotOmeZarrError",
    r"(?i)(root|top).*zarr\.json|image\.zarr/",
    R_ROOT,
)
def _subfolder() -> bytes:
    return build_zip([Member("image.zarr/" + str(m.name), m.data) for m in valid_members()])[0]


@case("zip_empty_archive.ozx", "open", "NotOmeZarrError", r"(?i)zarr\.json|zarr group", R_ROOT)
def _empty_archive() -> bytes:
    return build_zip([])[0]


# ---- metadata: JSON / Zarr ---------------------------------------------------------------


def with_root(raw: bytes) -> bytes:
    t = base_tree()
    del t.docs[""]
    t.raw["zarr.json"] = raw
    return ozx(t)


@case("json_invalid.ozx", "open", "MetadataError", r"(?i)zarr\.json.*invalid JSON", R_JSON)
def _bad_json() -> bytes:
    return with_root(b'{"zarr_format": 3, "node_type": "group", "attributes": {')


@case("json_binary.ozx", "open", "MetadataError", r"(?i)zarr\.json.*invalid JSON", R_JSON)
def _binary_json() -> bytes:
    return with_root(b"\xff\xfe\x00\xd8" + bytes(range(256)))


@case("json_deep_nesting.ozx", "open", "MetadataError", r"(?i)zarr\.json.*(JSON|nest|deep)", R_JSON)
def _deep_json() -> bytes:
    return with_root(
        b'{"zarr_format": 3, "node_type": "group", "attributes": '
        + b"[" * 10_000
        + b"]" * 10_000
        + b"}"
    )


@case("json_is_list.ozx", "open", "MetadataError", r"(?i)zarr\.json.*JSON object", R_ZARR_JSON)
def _list_json() -> bytes:
    return with_root(b'[{"zarr_format": 3, "node_type": "group"}]')


@case(
    "zarr_format_2_in_zarr_json.ozx",
    "open",
    "MetadataError",
    r"(?i)zarr\.json.*zarr_format",
    R_ZARR_V3,
)
def _zf2() -> bytes:
    t = base_tree()
    t.docs[""]["zarr_format"] = 2
    return ozx(t)


@case("non_ome_group.ozx", "open", "NotOmeZarrError", r"(?i)no OME-Zarr metadata", R_OME_GROUP)
def _non_ome() -> bytes:
    t = base_tree()
    t.docs[""]["attributes"] = {"project": "not an image"}
    return ozx(t)


@case("root_is_array.ozx", "open", "NotOmeZarrError", r"(?i)is an array", R_OME_GROUP)
def _root_array() -> bytes:
    t = base_tree()
    t.docs[""] = t.docs["0"]
    t.chunks = {k.removeprefix("0/"): v for k, v in t.chunks.items() if k.startswith("0/")}
    for k in list(t.docs):
        if k:
            del t.docs[k]
    return ozx(t)


@case(
    "group_unknown_key.ozx",
    "open",
    "UnsupportedExtensionError",
    r"(?i)'storage_magic'.*'/'",
    R_ZEP9_KEY,
)
def _unknown_key() -> bytes:
    t = base_tree()
    t.docs[""]["storage_magic"] = {"level": 9}
    return ozx(t)


@case("group_unknown_key_optional.ozx", "read", None, None, R_ZEP9_KEY, labels=True)
def _unknown_key_opt() -> bytes:
    t = base_tree()
    t.docs[""]["viewer_hints"] = {"must_understand": False, "zoom": 2}
    return ozx(t)


# ---- metadata: OME multiscales ------------------------------------------------------------


def root_ms(t: Tree) -> dict[str, Any]:
    return t.docs[""]["attributes"]["ome"]["multiscales"][0]


@case("ms_empty_list.ozx", "open", "MetadataError", r"(?i)multiscales.*non-empty", R_MS_DATASETS)
def _ms_empty() -> bytes:
    t = base_tree()
    t.docs[""]["attributes"]["ome"]["multiscales"] = []
    return ozx(t)


@case("ms_no_datasets.ozx", "open", "MetadataError", r"(?i)datasets", R_MS_DATASETS)
def _ms_nods() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"] = []
    return ozx(t)


@case(
    "ms_dataset_path_dotdot.ozx",
    "open",
    "MetadataError",
    r"(?i)dataset path.*\.\.",
    R_MISSING_LEVEL,
)
def _ms_dotdot() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][1]["path"] = "../labels/cells/0"
    return ozx(t)


@case(
    "dimension_names_mismatch.ozx",
    "open",
    "MetadataError",
    r"(?i)dimension_names.*do not match",
    R_DIMNAMES,
)
def _dimnames() -> bytes:
    t = base_tree()
    t.docs["0"]["dimension_names"] = ["c", "x", "y"]
    return ozx(t)


@case("level_missing.ozx", "open", "MetadataError", r"(?i)level '1' is missing", R_MISSING_LEVEL)
def _missing_level() -> bytes:
    t = base_tree()
    del t.docs["1"]
    t.chunks = {k: v for k, v in t.chunks.items() if not k.startswith("1/")}
    return ozx(t)


@case(
    "level_shapes_grow.ozx", "open", "MetadataError", r"(?i)larger than the level before", R_LEVELS
)
def _levels_grow() -> bytes:
    # larger and not coarser (the same scale as level 0): out of order. A larger level
    # whose scale says it is coarser is a padded one (webknossos) and opens cropped
    t = base_tree()
    t.docs["1"]["shape"] = [2, 64, 128]
    ds = root_ms(t)["datasets"]
    ds[1]["coordinateTransformations"] = ds[0]["coordinateTransformations"]
    return ozx(t)


@case("level_ndim_differs.ozx", "open", "MetadataError", r"(?i)dimensions", R_LEVELS)
def _levels_ndim() -> bytes:
    t = base_tree()
    doc = t.docs["1"]
    doc["shape"] = [1, 2, 16, 32]
    doc["dimension_names"] = None
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [1, 1, 16, 32]
    doc["codecs"][0]["configuration"]["chunk_shape"] = [1, 1, 16, 16]
    return ozx(t)


@case("scale_wrong_length.ozx", "open", "MetadataError", r"(?i)scale.*one value per axis", R_SCALE)
def _scale_len() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][0]["coordinateTransformations"][0]["scale"] = [1.0, 0.5]
    return ozx(t)


@case("scale_zero.ozx", "open", "MetadataError", r"(?i)scale.*positive", R_SCALE_POS)
def _scale_zero() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][0]["coordinateTransformations"][0]["scale"] = [1.0, 0.0, 0.5]
    return ozx(t)


@case("scale_negative.ozx", "open", "MetadataError", r"(?i)scale.*positive", R_SCALE_POS)
def _scale_neg() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][1]["coordinateTransformations"][0]["scale"] = [1.0, -1.0, 1.0]
    return ozx(t)


@case("scale_not_numbers.ozx", "open", "MetadataError", r"(?i)scale.*numbers", R_SCALE)
def _scale_str() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][0]["coordinateTransformations"][0]["scale"] = [1, "a", {}]
    return ozx(t)


@case(
    "transform_unknown_type.ozx",
    "open",
    "MetadataError",
    r"(?i)unsupported coordinate transformation type 'affine'",
    R_SCALE,
)
def _affine() -> bytes:
    t = base_tree()
    root_ms(t)["datasets"][0]["coordinateTransformations"] = [
        {"type": "affine", "affine": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}
    ]
    return ozx(t)


@case("axes_duplicate_names.ozx", "open", "MetadataError", r"(?i)duplicate axis names", R_AXES)
def _dup_axes() -> bytes:
    t = base_tree()
    root_ms(t)["axes"][2]["name"] = "y"
    for p in ("0", "1"):
        t.docs[p]["dimension_names"] = ["c", "y", "y"]
    return ozx(t)


@case("axes_invalid_entry.ozx", "open", "MetadataError", r"(?i)invalid axis", R_AXES)
def _bad_axis() -> bytes:
    t = base_tree()
    root_ms(t)["axes"][1] = {"type": "space"}
    return ozx(t)


# ---- metadata: ZEP 10 extensions ------------------------------------------------------------


@case(
    "ext_must_understand_array.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.offset.*'0'",
    R_ZEP10,
)
def _ext_array() -> bytes:
    t = base_tree()
    t.docs["0"]["extensions"] = [
        {"name": "example.offset", "configuration": {"offset": [0, 12, 0]}, "must_understand": True}
    ]
    return ozx(t)


@case(
    "ext_must_understand_default_array.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.chunk-permutation.*'1'",
    R_ZEP10,
)
def _ext_array_default() -> bytes:
    # no must_understand key: it defaults to true
    t = base_tree()
    t.docs["1"]["extensions"] = [
        {"name": "example.chunk-permutation", "configuration": {"order": [2, 1, 0]}}
    ]
    return ozx(t)


@case(
    "ext_must_understand_group.ozx",
    "open",
    "UnsupportedExtensionError",
    r"https://example\.org/zarr/consolidated-v9.*'/'",
    R_ZEP10,
)
def _ext_group() -> bytes:
    t = base_tree()
    t.docs[""]["extensions"] = [
        {"name": "https://example.org/zarr/consolidated-v9", "must_understand": True}
    ]
    return ozx(t)


@case(
    "ext_shorthand_name_group.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.encryption.*'/'",
    R_ZEP10,
)
def _ext_short() -> bytes:
    # ZEP 9: a short-hand name string is an extension object with just a name
    t = base_tree()
    t.docs[""]["extensions"] = ["example.encryption"]
    return ozx(t)


@case(
    "ext_invalid_name.ozx",
    "open",
    "MetadataError",
    r"(?i)extension name.*ZEP 9",
    "ZEP 9 'Raw names': raw names match ^[a-z0-9-_.]+$ (else a URI)",
)
def _ext_badname() -> bytes:
    t = base_tree()
    t.docs["0"]["extensions"] = [{"name": "Example Offset!", "must_understand": False}]
    return ozx(t)


@case(
    "ext_empty_list.ozx",
    "open",
    "MetadataError",
    r"(?i)extensions.*non-empty",
    "ZEP 10 'extensions': The contained array MUST either have one or more extensions or "
    "the object MUST be omitted entirely.",
)
def _ext_empty() -> bytes:
    t = base_tree()
    t.docs[""]["extensions"] = []
    return ozx(t)


@case("ext_optional_array.ozx", "read", None, None, R_ZEP10_OPT, labels=True)
def _ext_opt_array() -> bytes:
    t = base_tree()
    for p in ("0", "1", "labels/cells/0"):
        t.docs[p]["extensions"] = [
            {
                "name": "example.provenance",
                "configuration": {"by": "corpus"},
                "must_understand": False,
            },
            {"name": "https://example.org/ext/render-hints", "must_understand": False},
        ]
    return ozx(t)


@case("ext_optional_group.ozx", "read", None, None, R_ZEP10_OPT, labels=True)
def _ext_opt_group() -> bytes:
    t = base_tree()
    for p in ("", "labels", "labels/cells"):
        t.docs[p]["extensions"] = [
            {
                "name": "example.collection-hints",
                "must_understand": False,
                "configuration": {"note": "ignore me"},
            }
        ]
    return ozx(t)


@case(
    "ext_statistics_understood.ozx",
    "read",
    None,
    None,
    "ZEP 10 example 'example.array-statistics' (napari-ozx understands it: contrast "
    "limits without reading pixels)",
    labels=True,
)
def _ext_stats() -> bytes:
    t = base_tree()
    t.docs["0"]["extensions"] = [
        {
            "name": "example.array-statistics",
            "configuration": {"min": 0, "max": 3999},
            "must_understand": True,
        }
    ]
    return ozx(t)


# ---- metadata: Zarr extension points -----------------------------------------------------------


@case(
    "unknown_codec.ozx",
    "open",
    "UnsupportedExtensionError",
    r"blosc9000",
    R_EXT_POINT.format(what="codec"),
)
def _codec() -> bytes:
    t = base_tree()
    t.docs["0"]["codecs"][0]["configuration"]["codecs"][1] = {
        "name": "blosc9000",
        "configuration": {"level": 3},
    }
    return ozx(t)


@case(
    "unknown_codec_top_level.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.rot13",
    R_EXT_POINT.format(what="codec"),
)
def _codec_top() -> bytes:
    t = base_tree()
    t.docs["1"]["codecs"].append({"name": "example.rot13"})
    return ozx(t)


@case(
    "unknown_data_type.ozx",
    "open",
    "UnsupportedExtensionError",
    r"uint12",
    R_EXT_POINT.format(what="data type"),
)
def _dtype() -> bytes:
    t = base_tree()
    t.docs["0"]["data_type"] = "uint12"
    return ozx(t)


@case(
    "unknown_chunk_grid.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.rectilinear",
    R_EXT_POINT.format(what="chunk grid"),
)
def _grid() -> bytes:
    t = base_tree()
    t.docs["0"]["chunk_grid"] = {
        "name": "example.rectilinear",
        "configuration": {"chunk_shapes": [[1, 1], [32], [64]]},
    }
    return ozx(t)


@case(
    "unknown_chunk_key_encoding.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.hashed",
    R_EXT_POINT.format(what="chunk key encoding"),
)
def _cke() -> bytes:
    t = base_tree()
    t.docs["0"]["chunk_key_encoding"] = {
        "name": "example.hashed",
        "configuration": {"algorithm": "sha1"},
    }
    return ozx(t)


@case(
    "unknown_storage_transformer.ozx",
    "open",
    "UnsupportedExtensionError",
    r"example\.transposer",
    R_EXT_POINT.format(what="storage transformer"),
)
def _st() -> bytes:
    t = base_tree()
    t.docs["0"]["storage_transformers"] = [{"name": "example.transposer"}]
    return ozx(t)


SHAPE_BUG = (
    "the array's 'shape' is used unvalidated by ngff/read/open.py _check_levels, which "
    "compares the level shapes before zarr ever validates the document"
)


@case(
    "array_shape_invalid.ozx",
    "open",
    "MetadataError",
    r"(?i)invalid.*shape|shape.*invalid",
    "Zarr v3 core 'shape': an array of non-negative integers",
)
def _shape_bad() -> bytes:
    t = base_tree()
    t.docs["0"]["shape"] = [2, -32, "64"]
    return ozx(t)


@case(
    "array_shape_absurd.ozx",
    "open",
    "MetadataError",
    r"(?i)(too (many|large)|chunks)",
    "napari-ozx: never a hang or a huge allocation from metadata alone (Zarr v3 core 'chunk_grid')",
)
def _shape_absurd() -> bytes:
    # 2**40 x 2**40 pixels in 16 x 16 chunks: 2**72 chunks, no data at all
    t = base_tree()
    t.docs["0"]["shape"] = [2, 2**40, 2**40]
    t.docs["0"]["chunk_grid"]["configuration"]["chunk_shape"] = [1, 32, 64]
    t.docs["1"]["shape"] = [2, 2**39, 2**39]
    t.docs["1"]["chunk_grid"]["configuration"]["chunk_shape"] = [1, 16, 32]
    return ozx(t)


@case(
    "array_shape_strings.ozx",
    "open",
    "MetadataError",
    r"(?i)shape",
    "Zarr v3 core 'shape': an array of non-negative integers",
)
def _shape_str() -> bytes:
    t = base_tree()
    t.docs["0"]["shape"] = [2, 32, "64"]
    return ozx(t)


@case(
    "array_fill_value_invalid.ozx",
    "open",
    "MetadataError",
    r"(?i)^(?!.*must_understand).*fill.?value",
    "Zarr v3 core 'fill_value': a value of the array's data type",
)
def _fill() -> bytes:
    t = base_tree()
    t.docs["0"]["fill_value"] = "banana"
    return ozx(t)


@case(
    "shard_shape_not_multiple.ozx",
    "open",
    "MetadataError",
    r"(?i)^(?!.*must_understand).*divisible",
    rule="Zarr v3 sharding codec: the shard shape MUST be a multiple of the inner chunk shape",
)
def _shard_mult() -> bytes:
    t = base_tree()
    t.docs["0"]["codecs"][0]["configuration"]["chunk_shape"] = [1, 16, 24]
    return ozx(t)


# ---- pixels: chunks that do not decode ---------------------------------------------------------


@case("chunk_corrupt_zstd.ozx", "read", "OzxError", r"0/c/0/0/0.*(zstd|decod)", R_CODEC)
def _bad_zstd() -> bytes:
    def corrupt(path: str, pos: tuple[int, ...], enc: bytes) -> bytes:
        if path == "0" and pos == (0, 0, 1):
            return enc[:9] + b"\xa5" * 40 + enc[49:]  # block header and data scrambled
        return enc

    return ozx(base_tree(corrupt))


@case("chunk_zstd_wrong_size.ozx", "read", "OzxError", r"0/c/0/0/0.*(size|shape|decod)", R_CODEC)
def _short_zstd() -> bytes:
    # a valid zstd frame that holds fewer bytes than an inner chunk needs
    def short(path: str, pos: tuple[int, ...], enc: bytes) -> bytes:
        if path == "0" and pos == (0, 1, 3):
            return zstd_frame(b"\x01\x02" * 17)
        return enc

    return ozx(base_tree(short))


@case(
    "shard_index_beyond_shard.ozx",
    "read",
    "OzxError",
    r"0/c/0/0/0.*(shard|index|range|beyond|past)",
    R_SHARD,
)
def _shard_index() -> bytes:
    t = base_tree()
    key = "0/c/0/0/0"
    shard = bytearray(t.chunks[key])
    n = 8  # inner chunks in a level-0 shard
    idx_off = len(shard) - (16 * n + 4)
    idx = np.frombuffer(bytes(shard[idx_off : idx_off + 16 * n]), "<u8").reshape(n, 2).copy()
    idx[2, 0] = 1_000_000  # inner chunk 2 starts 1 MB into a ~5 KB shard
    raw = idx.tobytes()
    shard[idx_off:] = raw + struct.pack("<I", crc32c(raw))
    t.chunks[key] = bytes(shard)
    return ozx(t)


@case("shard_index_bad_checksum.ozx", "read", "OzxError", r"0/c/1/0/0.*(checksum|crc)", R_SHARD)
def _shard_crc() -> bytes:
    t = base_tree()
    key = "0/c/1/0/0"
    shard = bytearray(t.chunks[key])
    shard[-1] ^= 0xFF
    t.chunks[key] = bytes(shard)
    return ozx(t)


@case(
    "shard_truncated.ozx", "read", "OzxError", r"0/c/0/0/0.*(shard|index|checksum|decod)", R_SHARD
)
def _shard_trunc() -> bytes:
    t = base_tree()
    key = "0/c/0/0/0"
    t.chunks[key] = t.chunks[key][:1500]
    return ozx(t)


# ---- documented fallbacks --------------------------------------------------------------------


@case("labels_listed_missing.ozx", "read", None, None, R_LABELS, labels=False)
def _labels_missing() -> bytes:
    t = base_tree()
    for k in [k for k in t.docs if k.startswith("labels/")]:
        del t.docs[k]
    t.chunks = {k: v for k, v in t.chunks.items() if not k.startswith("labels/")}
    return ozx(t)


@case("labels_broken_json.ozx", "read", None, None, R_LABELS, labels=False)
def _labels_json() -> bytes:
    t = base_tree()
    del t.docs["labels/cells"]
    t.raw["labels/cells/zarr.json"] = b'{"zarr_format": 3, "node_type": "gr'
    return ozx(t)


@case("labels_escaping_path.ozx", "read", None, None, R_LABELS, labels=False)
def _labels_escape() -> bytes:
    t = base_tree()
    t.docs["labels"]["attributes"]["ome"]["labels"] = ["../../../etc"]
    return ozx(t)


@case("omero_garbage.ozx", "read", None, None, R_OMERO, labels=True)
def _omero() -> bytes:
    t = base_tree()
    t.docs[""]["attributes"]["ome"]["omero"] = {
        "channels": [
            17,
            {"color": 12345, "window": "wide", "label": ["x"], "active": "maybe"},
            None,
        ],
        "rdefs": "none",
    }
    return ozx(t)


@case("omero_not_an_object.ozx", "read", None, None, R_OMERO, labels=True)
def _omero_list() -> bytes:
    t = base_tree()
    t.docs[""]["attributes"]["ome"]["omero"] = ["garbage", 1, 2, 3]
    return ozx(t)


@case("labels_unknown_extension.ozx", "read", None, None, R_LABELS + "; " + R_ZEP10, labels=False)
def _labels_ext() -> bytes:
    t = base_tree()
    t.docs["labels/cells/0"]["extensions"] = [{"name": "example.sparse-labels"}]
    return ozx(t)


FLOOD_READ = "read() runs the same code, so it hangs the same way"


@case(
    "labels_flood.ozx",
    "read",
    None,
    None,
    "napari-ozx: a label image listed many times is one label layer, and listing it must "
    "not cost time or memory per entry (OME-Zarr 0.5 'labels': the names of the label "
    "images)",
    labels=True,
)
def _labels_flood() -> bytes:
    t = base_tree()
    t.docs["labels"]["attributes"]["ome"]["labels"] = ["cells"] * 2000
    return ozx(t)


@case(
    "collection_series_flood.ozx",
    "open",
    "MetadataError",
    r"(?i)series|duplicate",
    "bioformats2raw layout: OME/zarr.json 'series' lists the paths of the images (each "
    "once); napari-ozx must not open one image per repeated entry",
)
def _series_flood() -> bytes:
    t = base_tree()
    moved = Tree()
    moved.docs[""] = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {"version": "0.5", "bioformats2raw.layout": 3}},
    }
    moved.docs["OME"] = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {"version": "0.5", "series": ["0"] * 4000}},
    }
    for k, v in t.docs.items():
        moved.docs[f"0/{k}".rstrip("/")] = v
    moved.chunks = {f"0/{k}": v for k, v in t.chunks.items()}
    return ozx(moved)


# ---- not ours: get_reader declines ---------------------------------------------------------------


@case("junk_not_a_zip.zip", "get_reader", "ZipFormatError", r"(?i)not a zip", R_GET_READER)
def _junk_zip() -> bytes:
    return b"PK\x03\x04" + noise_bytes(1000, SEED + 2)


@case(
    "junk_zip_without_zarr.zip",
    "get_reader",
    "NotOmeZarrError",
    r"(?i)zarr\.json|zarr group",
    R_GET_READER,
)
def _plain_zip() -> bytes:
    return build_zip([Member("readme.txt", b"just a zip\n")], comment=b"")[0]


@case(
    "junk_plain_zarr_dir.zarr",
    "get_reader",
    "NotOmeZarrError",
    r"(?i)no OME-Zarr metadata",
    R_GET_READER,
)
def _plain_dir() -> dict[str, bytes]:
    return {"zarr.json": b'{"zarr_format": 3, "node_type": "group", "attributes": {}}\n'}


@case(
    "junk_dir_invalid_json.zarr", "get_reader", "MetadataError", r"(?i)invalid JSON", R_GET_READER
)
def _dir_json() -> dict[str, bytes]:
    return {"zarr.json": b'{"zarr_format": 3, "node_type": '}


@case(
    "dir_level_invalid_json.zarr",
    "open",
    "MetadataError",
    r"(?i)0/zarr\.json.*invalid JSON",
    R_JSON,
)
def _dir_level() -> dict[str, bytes]:
    files = dict(base_tree().files())
    files["0/zarr.json"] = b'{\n  "zarr_format": 3,\n'
    return {k: v for k, v in files.items() if k.endswith("zarr.json")}


# --------------------------------------------------------------------------- main


def generate(out: Path) -> dict[str, dict[str, Any]]:
    files = out / "files"
    if files.exists():
        shutil.rmtree(files)
    files.mkdir(parents=True)
    expected: dict[str, dict[str, Any]] = {}
    seen = set()
    for c in CASES:
        assert c.name not in seen, c.name
        seen.add(c.name)
        content = c.build()
        if isinstance(content, dict):
            total = 0
            for rel, data in content.items():
                p = files / c.name / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
                total += len(data)
            size = total
        else:
            (files / c.name).write_bytes(content)
            size = len(content)
        if size >= MAX_FILE_SIZE:
            raise SystemExit(f"{c.name}: {size} bytes, over the {MAX_FILE_SIZE} limit")
        expected[c.name] = c.expected
    (out / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return expected


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="writes OUT/files and OUT/expected.json")
    args = ap.parse_args(argv)
    exp = generate(args.out)
    print(f"{len(exp)} cases written to {args.out / 'files'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
