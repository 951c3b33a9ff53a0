"""The chunk layouts napari-ozx decodes and encodes itself, without zarr-python.

:func:`chunk_layout` decides from an array's metadata whether napari-ozx reproduces its
stored bytes exactly, or says why not (zarr-python does it then): a regular grid, a
fixed-size numeric data type, C order; Zarr v3 ``bytes`` then any of ``zstd``, ``blosc``,
``gzip``, ``crc32c``, optionally inside one ``sharding_indexed`` codec (index little-endian
``bytes`` [+ ``crc32c``], at its start or end); Zarr v2 without filters, any numcodecs
compressor. :class:`ChunkLayout` turns a stored chunk into pixels and back with
zarr-python's own codecs, and reads and builds shards (inner chunks in Morton order,
:func:`morton_order`), so the fast reader (:mod:`.fastread`) and the label save-back
(:mod:`napari_ozx.layers.saveback`) make one decision. Broken data raises
:class:`~napari_ozx.errors.ChunkDecodeError`. ``gzip`` streams carry their write time: an
encoded chunk equals zarr's up to that header field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_ozx.errors import ChunkDecodeError

if TYPE_CHECKING:
    import zarr

__all__ = ["EMPTY", "ChunkLayout", "chunk_layout", "morton_order"]

#: offset and length of an inner chunk that is not stored (the fill value)
EMPTY = np.uint64(2**64 - 1)

#: one codec step of a chunk's bytes (encode or decode), bytes-like in and out
Step = Callable[[Any], Any]


def _crc32c(data: Any) -> bytes:
    import google_crc32c

    return np.uint32(google_crc32c.value(data)).tobytes()


def _crc32c_decode(data: Any) -> np.ndarray:
    """The ``crc32c`` codec's decode: the bytes without their 4-byte CRC-32C trailer,
    after checking it."""
    view = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    if len(view) < 4:
        raise ChunkDecodeError(f"crc32c: {len(view)} bytes, too short to hold a checksum")
    body, stored = view[:-4], view[-4:].tobytes()
    computed = _crc32c(body)
    if computed != stored:
        raise ChunkDecodeError(
            f"stored and computed CRC-32C do not match (stored {stored!r}, computed {computed!r})"
        )
    return body


def _crc32c_encode(data: Any) -> bytes:
    b = bytes(data)
    return b + _crc32c(b)


def _blosc(config: dict[str, Any]) -> Any:
    """numcodecs' Blosc as zarr-python's ``blosc`` codec makes it (numcodecs >= 0.16
    takes the typesize; before, the uint8 buffer's itemsize, 1, was used)."""
    import numcodecs

    shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[str(config["shuffle"])]
    kw = {
        "cname": str(config["cname"]),
        "clevel": int(config["clevel"]),
        "shuffle": shuffle,
        "blocksize": int(config.get("blocksize") or 0),
    }
    try:
        return numcodecs.Blosc(**kw, typesize=int(config["typesize"]))
    except TypeError:  # pragma: no cover - numcodecs < 0.16
        return numcodecs.Blosc(**kw)


def _steps(codecs: Sequence[Any]) -> tuple[list[Step], list[Step]] | str:
    """(encoders, decoders in decode order) for zarr v3 bytes->bytes codecs, or why not."""
    import numcodecs
    from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec

    enc: list[Step] = []
    dec: list[Step] = []
    for c in codecs:
        if type(c) is Crc32cCodec:
            enc.append(_crc32c_encode)
            dec.append(_crc32c_decode)
        elif type(c) is ZstdCodec:
            z = numcodecs.Zstd(level=c.level, checksum=c.checksum)
            enc.append(z.encode)
            dec.append(z.decode)
        elif type(c) is BloscCodec:
            b = _blosc(c.to_dict()["configuration"])  # type: ignore[arg-type]
            enc.append(b.encode)
            dec.append(b.decode)
        elif type(c) is GzipCodec:
            g = numcodecs.GZip(level=c.level)
            enc.append(g.encode)
            dec.append(g.decode)
        else:
            return "codec " + type(c).__name__
    return enc, dec[::-1]


def _stored_dtype(codec: Any, dtype: np.dtype) -> np.dtype | None:
    """The dtype the v3 ``bytes`` codec stores *dtype* as (its endianness applied)."""
    from zarr.codecs import BytesCodec

    if type(codec) is not BytesCodec:
        return None
    endian = getattr(codec.endian, "value", codec.endian)  # an Endian enum before zarr 3.4
    if dtype.itemsize == 1 or endian is None:
        return dtype
    return dtype.newbyteorder("<" if endian == "little" else ">")


class ChunkLayout:
    """How one array's chunks (the inner chunks when sharded) are stored, and their
    decode / encode. ``chunk`` is the decoded unit; ``shard`` the stored unit when
    sharded (else None)."""

    def __init__(
        self,
        array: zarr.Array,
        chunk: tuple[int, ...],
        shard: tuple[int, ...] | None,
        stored_dtype: np.dtype,
        steps: tuple[list[Step], list[Step]],
        *,
        typed: bool = False,
        index_end: bool = True,
        index_crc: bool = False,
    ) -> None:
        self.shape = tuple(int(s) for s in array.shape)
        self.dtype = np.dtype(array.dtype)
        self.fill = np.asarray(array.fill_value, dtype=self.dtype)
        self.prefix = array.path.strip("/")
        self.encode_key = array.metadata.encode_chunk_key
        self.chunk = chunk
        self.shard = shard
        self.stored_dtype = stored_dtype
        self.encoders, self.decoders = steps
        self.typed = typed  # the first encoder takes the typed chunk (a v2 compressor)
        self.index_end = index_end
        self.index_crc = index_crc
        if shard is not None:
            self.per_shard = tuple(s // c for s, c in zip(shard, chunk, strict=True))
            self.n_per_shard = int(np.prod(self.per_shard))
            self.index_size = 16 * self.n_per_shard + (4 if index_crc else 0)

    def key(self, coords: tuple[int, ...]) -> str:
        """The store key of chunk (or shard) *coords*."""
        k = self.encode_key(coords)
        return f"{self.prefix}/{k}" if self.prefix else k

    # ------------------------------------------------------------------ chunks

    def decode(self, raw: Any) -> np.ndarray:
        """A stored chunk's values: ``chunk``-shaped, in the stored dtype (a read-only
        view when nothing was decompressed)."""
        data: Any = raw
        try:
            for dec in self.decoders:
                data = dec(data)
        except ChunkDecodeError:
            raise
        except Exception as e:  # the codec's own error (corrupt stream)
            raise ChunkDecodeError(f"{type(e).__name__}: {e}") from e
        # bytes and arrays (what the codecs return) directly: a memoryview in the chain of
        # a cached chunk is two more objects for the garbage collector to track
        buf = data if isinstance(data, bytes | np.ndarray) else memoryview(data).cast("B")
        try:
            return np.frombuffer(buf, dtype=self.stored_dtype).reshape(self.chunk)
        except ValueError as e:
            raise ChunkDecodeError(f"decoded chunk does not fit {self.chunk}: {e}") from e

    def is_fill(self, values: np.ndarray) -> bool:
        """Whether every value is the fill value (zarr then leaves the chunk out)."""
        same = values == self.fill
        if self.dtype.kind in "fc":
            same |= np.isnan(values) & np.isnan(self.fill)
        return bool(same.all())

    def encode(self, values: np.ndarray) -> bytes:
        """A whole chunk's stored bytes, as zarr-python encodes *values* (``chunk``-shaped)."""
        arr = np.ascontiguousarray(values, dtype=self.stored_dtype)
        data: Any = arr if self.typed else arr.reshape(-1).view(np.uint8)
        for enc in self.encoders:
            data = enc(data)
        return data if isinstance(data, bytes) else bytes(memoryview(data).cast("B"))

    # ------------------------------------------------------------------ shards

    def decode_index(self, raw: Any, where: str = "shard") -> np.ndarray:
        """A shard index's ``(per_shard..., 2)`` uint64 offsets and lengths."""
        raw = bytes(raw)  # small (16 bytes per inner chunk)
        if len(raw) != self.index_size:
            raise ChunkDecodeError(
                f"{where} index is {len(raw)} bytes, expected {self.index_size} (truncated shard)"
            )
        body = raw
        if self.index_crc:
            body = raw[:-4]
            if _crc32c(body) != raw[-4:]:
                raise ChunkDecodeError(f"{where} index does not match its checksum (CRC-32C)")
        return np.frombuffer(body, dtype="<u8").reshape((*self.per_shard, 2))

    def whole_index(self, shard: Any, where: str = "shard") -> np.ndarray:
        """The index of a whole stored shard, taken from its bytes."""
        n = self.index_size
        if len(shard) < n:
            return self.decode_index(shard, where)  # raises: shorter than its index
        return self.decode_index(shard[-n:] if self.index_end else shard[:n], where)

    def inner(
        self, shard: Any, index: np.ndarray, local: tuple[int, ...], where: str = "shard"
    ) -> Any:
        """Inner chunk *local*'s bytes in a whole *shard* (None: not stored)."""
        off, n = index[local]
        if off == EMPTY and n == EMPTY:
            return None
        if int(off) + int(n) > len(shard):
            raise ChunkDecodeError(f"a chunk of {where} lies outside it (truncated shard)")
        return shard[int(off) : int(off) + int(n)]

    def stored_chunks(self, shard: Any, where: str = "shard") -> dict[tuple[int, ...], Any]:
        """Every stored inner chunk of a whole *shard*: local coords -> its bytes."""
        index = self.whole_index(shard, where)
        stored = ~((index[..., 0] == EMPTY) & (index[..., 1] == EMPTY))
        out = {}
        for local in map(tuple, np.argwhere(stored).tolist()):
            out[local] = self.inner(shard, index, local, where)
        return out

    def build_shard(self, chunks: dict[tuple[int, ...], bytes]) -> bytes | None:
        """A shard's bytes from its stored inner chunks (None when there are none), as
        zarr-python writes it: inner chunks in Morton order, the index at ``index_end``."""
        if not chunks:
            return None
        offsets = np.full((*self.per_shard, 2), EMPTY, dtype="<u8")
        parts: list[bytes] = []
        at = 0 if self.index_end else self.index_size
        for local in morton_order(self.per_shard):
            b = chunks.get(local)
            if b is None:
                continue
            offsets[local] = (at, len(b))
            parts.append(b)
            at += len(b)
        index = offsets.tobytes()
        if self.index_crc:
            index += _crc32c(index)
        return b"".join([*parts, index] if self.index_end else [index, *parts])


@functools.lru_cache(maxsize=16)
def morton_order(per: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The inner chunks of a shard in zarr-python's (Morton) write order: by their
    compressed Morton code (bits interleaved over the axes that still have bits)."""
    bits = [(n - 1).bit_length() for n in per]
    coords = np.indices(per).reshape(len(per), -1).T
    code = np.zeros(len(coords), dtype=np.int64)
    out_bit = 0
    for b in range(max(bits, default=0)):
        for d, nb in enumerate(bits):
            if b < nb:
                code |= ((coords[:, d] >> b) & 1) << out_bit
                out_bit += 1
    return [tuple(int(x) for x in c) for c in coords[np.argsort(code, kind="stable")]]


def _simple_dtype(dtype: np.dtype) -> bool:
    return dtype.kind in "biuf" and not dtype.hasobject and dtype.fields is None


def chunk_layout(array: zarr.Array) -> ChunkLayout | str:
    """*array*'s :class:`ChunkLayout`, or why its chunks are not ones we reproduce."""
    md = array.metadata
    dtype = np.dtype(array.dtype)
    if not _simple_dtype(dtype):
        return f"data type {dtype}"
    if array.fill_value is None:
        return "no fill value"
    if md.zarr_format == 2:
        return _v2_layout(array, md, dtype)
    from zarr.codecs import Crc32cCodec, ShardingCodec

    grid = md.to_dict().get("chunk_grid", {})  # the document's own words
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        return f"chunk grid {grid.get('name') if isinstance(grid, dict) else grid!r}"
    outer = tuple(int(n) for n in grid["configuration"]["chunk_shape"])
    codecs = list(md.codecs)
    if len(codecs) == 1 and type(codecs[0]) is ShardingCodec:
        sc = codecs[0]
        inner = list(sc.codecs)
        idx = list(sc.index_codecs)
        chunk = tuple(int(n) for n in sc.chunk_shape)
        names = "codecs " + ", ".join(type(c).__name__ for c in inner + idx)
        if not inner or any(o % c for o, c in zip(outer, chunk, strict=True)):
            return "inner chunks that do not divide the shard"  # pragma: no cover - zarr refuses
        stored = _stored_dtype(inner[0], dtype)
        steps = _steps(inner[1:])
        idx_ok = (
            bool(idx)
            and _stored_dtype(idx[0], np.dtype("<u8")) == np.dtype("<u8")
            and (len(idx) == 1 or (len(idx) == 2 and type(idx[1]) is Crc32cCodec))
        )
        if stored is None or isinstance(steps, str) or not idx_ok:
            return names
        return ChunkLayout(
            array,
            chunk,
            outer,
            stored,
            steps,
            # an enum before zarr 3.4, then a str
            index_end=getattr(sc.index_location, "value", sc.index_location) == "end",
            index_crc=len(idx) == 2,
        )
    stored = _stored_dtype(codecs[0], dtype) if codecs else None
    steps = _steps(codecs[1:])
    if stored is None or isinstance(steps, str):
        return "codecs " + ", ".join(type(c).__name__ for c in codecs)
    return ChunkLayout(array, outer, None, stored, steps)


def _v2_layout(array: zarr.Array, md: Any, dtype: np.dtype) -> ChunkLayout | str:
    """The layout of a Zarr v2 array (*md*: its zarr v2 metadata, whose type zarr keeps in
    a private module)."""
    if md.filters or getattr(md, "order", "C") != "C":
        return "Zarr v2 filters or F order"
    comp = md.compressor
    if comp is None:
        return ChunkLayout(array, tuple(md.chunks), None, dtype, ([], []), typed=True)
    if not (callable(getattr(comp, "decode", None)) and callable(getattr(comp, "encode", None))):
        return f"compressor {comp!r}"
    # zarr-python hands the v2 compressor the typed chunk (Blosc takes its typesize there)
    return ChunkLayout(
        array, tuple(md.chunks), None, dtype, ([comp.encode], [comp.decode]), typed=True
    )
