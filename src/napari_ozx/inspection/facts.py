"""Facts about one node, for people: summary sections, array facts, ZEP 10 extensions.

Everything comes from metadata (no pixel is read). Array facts are read off zarr's own
parsed metadata objects (the array the opener would build,
:func:`~napari_ozx.ngff.read.open.array_node`): shapes, data type and the codec pipeline as zarr
understands it, so the inspector, the CLI and the reader cannot disagree about what a codec is.
Stored sizes come from the container's member table (``ozx.protocol.Container.stored_sizes``) or the
directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_ozx.inspection._text import format_bytes, num_text, nums_text, shape_text
from napari_ozx.inspection.tree import TreeNode
from napari_ozx.ngff.model.extensions import NodeExtensions
from napari_ozx.ngff.model.metadata import Multiscale, NodeMetadata

if TYPE_CHECKING:
    from napari_ozx._compat import ZarrArrayMetadata
    from napari_ozx.ngff.model.metadata import Axis, CoordinateSystem
    from napari_ozx.ngff.model.transforms import SystemRef, Transform
    from napari_ozx.ngff.read.open import ArrayNode

__all__ = [
    "MAX_ROWS",
    "ArrayFacts",
    "ExtensionInfo",
    "NodeDetails",
    "Row",
    "Section",
    "array_facts",
    "describe_codec",
    "extension_infos",
    "group_sections",
    "level_section",
]

#: at most this many rows of one list (label colours, wells ...) in a summary section
MAX_ROWS = 64


@dataclass(frozen=True)
class Row:
    label: str
    value: str
    color: str | None = None  # "#RRGGBB" or "#RRGGBBAA": a swatch to draw beside the row


@dataclass(frozen=True)
class Section:
    title: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class ExtensionInfo:
    name: str
    must_understand: bool
    understood: bool
    configuration: Mapping[str, Any] = field(default_factory=dict)
    where: str = "extensions"  # "extensions" list, or "key" for an extension-like top-level key


def extension_infos(exts: NodeExtensions) -> tuple[ExtensionInfo, ...]:
    """The ZEP 10 pass's findings (:mod:`napari_ozx.ngff.model.extensions`), refused ones
    included."""
    out = [
        ExtensionInfo(e.name, e.must_understand, e.understood, dict(e.configuration))
        for e in exts.extensions
    ]
    out += [
        ExtensionInfo(e.name, e.must_understand, e.understood, dict(e.configuration), "key")
        for e in exts.keys
    ]
    return tuple(out)


@dataclass(frozen=True)
class ArrayFacts:
    path: str
    zarr_format: int
    shape: tuple[int, ...]
    dtype: str
    chunk_shape: tuple[int, ...]  # the unit a reader decodes (inner chunks when sharded)
    shard_shape: tuple[int, ...] | None
    codecs: tuple[str, ...]
    fill_value: Any
    dimension_names: tuple[str | None, ...] | None
    n_chunks: int  # inner chunks in the whole grid
    n_shards: int | None
    nbytes: int  # uncompressed size of the whole array
    stored_bytes: int  # bytes actually stored under the array's prefix
    stored_objects: int  # files / entries actually stored under it
    itemsize: int | None = None

    @property
    def chunks_per_shard(self) -> int | None:
        if self.shard_shape is None:
            return None
        return math.prod(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))

    @property
    def ratio(self) -> float | None:
        """Compression ratio: uncompressed bytes / stored bytes (None if nothing is stored)."""
        return self.nbytes / self.stored_bytes if self.stored_bytes else None

    def rows(self) -> tuple[Row, ...]:
        rows = [
            Row("Shape", shape_text(self.shape)),
            Row("Data type", self.dtype),
            Row("Chunk shape", shape_text(self.chunk_shape)),
            Row("Shard shape", shape_text(self.shard_shape) if self.shard_shape else "not sharded"),
        ]
        if self.shard_shape:
            rows.append(Row("Chunks per shard", str(self.chunks_per_shard)))
        rows.append(Row("Number of chunks", f"{self.n_chunks:,}"))
        if self.n_shards is not None:
            rows.append(Row("Number of shards", f"{self.n_shards:,}"))
        rows += [
            Row("Codecs", " → ".join(self.codecs) or "none"),
            Row("Fill value", json.dumps(self.fill_value)),
            Row("Uncompressed size", format_bytes(self.nbytes)),
            Row(
                "Stored size",
                f"{format_bytes(self.stored_bytes)} in {self.stored_objects:,} "
                f"{'entries' if self.stored_objects != 1 else 'entry'}",
            ),
            Row(
                "Compression ratio",
                f"{self.ratio:.2f} : 1" if self.ratio else "– (no chunk stored)",
            ),
            Row("Zarr format", str(self.zarr_format)),
        ]
        if self.dimension_names:
            rows.append(Row("Dimension names", ", ".join(str(n) for n in self.dimension_names)))
        return tuple(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able facts (``napari-ozx info --json``)."""
        return {
            "path": self.path,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "chunks": list(self.chunk_shape),
            "shards": list(self.shard_shape) if self.shard_shape else None,
            "codecs": list(self.codecs),
            "fill_value": self.fill_value,
            "dimension_names": list(self.dimension_names) if self.dimension_names else None,
            "n_chunks": self.n_chunks,
            "n_shards": self.n_shards,
            "nbytes": self.nbytes,
            "stored_bytes": self.stored_bytes,
            "stored_objects": self.stored_objects,
        }


@dataclass(frozen=True)
class NodeDetails:
    node: TreeNode
    kind: str
    sections: tuple[Section, ...] = ()
    array: ArrayFacts | None = None
    extensions: tuple[ExtensionInfo, ...] = ()
    raw_json: str = ""  # pretty-printed documents of the node, each headed by its file name
    raw_files: tuple[str, ...] = ()
    error: str | None = None

    def section(self, title: str) -> Section | None:
        for s in self.sections:
            if s.title == title:
                return s
        return None

    def text(self) -> str:
        """Plain-text rendering (tests, copy to clipboard, logs)."""
        out = []
        if self.error:
            out.append(f"Error: {self.error}")
        for s in self.sections:
            out.append(f"[{s.title}]")
            out += [
                f"  {r.label}: {r.value}" + (f" ({r.color})" if r.color else "") for r in s.rows
            ]
        if self.array is not None:
            out.append("[Array]")
            out += [f"  {r.label}: {r.value}" for r in self.array.rows()]
        for e in self.extensions:
            out.append(
                f"[Extension] {e.name} must_understand={e.must_understand} "
                f"understood={e.understood}"
            )
        return "\n".join(out)


# --------------------------------------------------------------------------- arrays


def _enum_text(v: object) -> str:
    return str(getattr(v, "value", v))


def describe_codec(codec: object) -> str:
    """One codec as people read it, from zarr's codec object (v3) or numcodecs (v2)."""
    from zarr.codecs import (
        BloscCodec,
        BytesCodec,
        Crc32cCodec,
        GzipCodec,
        TransposeCodec,
        ZstdCodec,
    )

    if isinstance(codec, BytesCodec):
        return f"bytes ({_enum_text(codec.endian)})" if codec.endian is not None else "bytes"
    if isinstance(codec, ZstdCodec):
        return f"zstd level {codec.level}" + (" checksum" if codec.checksum else "")
    if isinstance(codec, GzipCodec):
        return f"gzip level {codec.level}"
    if isinstance(codec, BloscCodec):
        return f"blosc {_enum_text(codec.cname)} level {codec.clevel} {_enum_text(codec.shuffle)}"
    if isinstance(codec, TransposeCodec):
        return f"transpose {list(codec.order)}"
    if isinstance(codec, Crc32cCodec):
        return "crc32c"
    codec_id = getattr(codec, "codec_id", None)  # numcodecs (Zarr v2 filters / compressor)
    if codec_id is not None:
        if codec_id == "blosc":
            number = getattr(codec, "shuffle", None)
            shuffle = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}.get(
                number if isinstance(number, int) else -9, "auto shuffle"
            )
            cname, clevel = getattr(codec, "cname"), getattr(codec, "clevel")  # noqa: B009
            return f"blosc {cname} level {clevel} {shuffle}"
        level = getattr(codec, "level", None)
        return f"{codec_id} level {level}" if level is not None else str(codec_id)
    to_dict = getattr(codec, "to_dict", None)
    try:  # another zarr v3 codec: its registered name
        if to_dict is None:
            raise AttributeError("to_dict")
        return str(to_dict()["name"])
    except (AttributeError, KeyError, TypeError):
        return type(codec).__name__


def describe_codecs(metadata: ZarrArrayMetadata) -> tuple[str, ...]:
    """The codec pipeline of zarr's parsed array metadata; a sharding codec shows as its
    inner codecs (the shard shape is a fact of its own) plus non-trivial index codecs."""
    from zarr.codecs import BytesCodec, ShardingCodec

    out: list[str] = []
    if metadata.zarr_format == 3:
        for c in metadata.codecs:
            if isinstance(c, ShardingCodec):
                out += [describe_codec(x) for x in c.codecs]
                out += [
                    f"{describe_codec(x)} (index)"
                    for x in c.index_codecs
                    if not isinstance(x, BytesCodec)
                ]
            else:
                out.append(describe_codec(c))
        return tuple(out)
    out += [describe_codec(f) for f in metadata.filters or ()]
    if metadata.compressor is not None:
        out.append(describe_codec(metadata.compressor))
    return tuple(out)


def _grid(shape: Sequence[int], unit: Sequence[int]) -> int:
    return math.prod(math.ceil(s / c) for s, c in zip(shape, unit, strict=False) if c)


def array_facts(node: ArrayNode, stored: tuple[int, int]) -> ArrayFacts:
    """Facts about one array; raises :class:`OzxError` when zarr refuses its metadata."""
    a = node.array  # zarr's parsed metadata, no I/O; OzxError if zarr refuses it
    meta = a.metadata
    shape = tuple(int(s) for s in a.shape)
    chunks = tuple(int(c) for c in a.chunks)
    shards = tuple(int(s) for s in a.shards) if a.shards else None
    names = getattr(meta, "dimension_names", None)
    try:
        itemsize: int | None = int(a.dtype.itemsize)
    except (AttributeError, TypeError):
        itemsize = None
    return ArrayFacts(
        path=node.path,
        zarr_format=node.zarr_format,
        shape=shape,
        dtype=str(a.dtype),
        chunk_shape=chunks,
        shard_shape=shards,
        codecs=describe_codecs(meta),
        fill_value=node.document.get("fill_value"),
        dimension_names=tuple(names) if names is not None else None,
        n_chunks=_grid(shape, chunks) if shape else 1,
        n_shards=(_grid(shape, shards) if shape else 1) if shards else None,
        nbytes=math.prod(shape) * (itemsize or 0),
        stored_bytes=stored[0],
        stored_objects=stored[1],
        itemsize=itemsize,
    )


# --------------------------------------------------------------------------- groups


def _per_axis(ms: Multiscale, values: Sequence[float]) -> str:
    return ", ".join(f"{a.name} {num_text(v)}" for a, v in zip(ms.axes, values, strict=False))


def level_section(ms: Multiscale, level: int) -> Section:
    """The "Level" section of one pyramid level."""
    ds = ms.datasets[level]
    return Section(
        "Level",
        (
            Row("Dataset path", ds.path),
            Row("Level", f"{level} (of {len(ms.datasets)} levels)"),
            Row("Scale", _per_axis(ms, ds.scale)),
            Row("Translation", _per_axis(ms, ds.translation)),
        ),
    )


def group_sections(
    title: str,
    zarr_format: int,
    meta: NodeMetadata | None,
    level_shapes: Sequence[Sequence[int] | str | None] = (),
) -> list[Section]:
    """The summary of a group: *title* names its first section ("Image", "Plate" ...);
    *level_shapes* are the shapes of the first multiscale's levels, or why there is
    none ("missing", "unreadable")."""
    if meta is None:
        return [
            Section(
                "Group",
                (Row("Zarr format", str(zarr_format)), Row("OME-Zarr", "invalid metadata")),
            )
        ]
    secs: list[Section] = []
    general = [
        Row("Kind", {"none": "Zarr group (no OME metadata)"}.get(meta.kind, meta.kind)),
        Row("OME-Zarr version", meta.version or "not declared"),
        Row("Zarr format", str(zarr_format)),
    ]
    if meta.multiscales:
        ms = meta.multiscales[0]
        if ms.name:
            general.append(Row("Name", ms.name))
        general.append(Row("Levels", str(len(ms.datasets))))
        if ms.type:
            general.append(Row("Downsampling", ms.type))
        if len(meta.multiscales) > 1:
            general.append(Row("Multiscales", f"{len(meta.multiscales)} (the first is shown)"))
    secs.append(Section(title, tuple(general)))
    if meta.multiscales:
        secs += _multiscale_sections(meta.multiscales[0], level_shapes)
    if meta.omero is not None and meta.omero.channels:
        secs.append(_channels_section(meta))
    if meta.image_label is not None:
        secs += _image_label_sections(meta)
    if meta.labels:
        secs.append(
            Section("Label images", tuple(Row(str(i), n) for i, n in enumerate(meta.labels)))
        )
    if meta.plate is not None:
        secs += _plate_sections(meta)
    if meta.well is not None:
        rows = tuple(
            Row(im.path, f"acquisition {im.acquisition}" if im.acquisition is not None else "–")
            for im in meta.well.images[:MAX_ROWS]
        )
        secs.append(Section("Fields", rows))
    if meta.series:
        rows = tuple(Row(str(i), s) for i, s in enumerate(meta.series[:MAX_ROWS]))
        secs.append(Section("Series", rows))
    if meta.collection is not None:  # RFC-8 (draft): every node, opened or why not
        rows = tuple(
            Row(
                " / ".join((*m.within, m.name)),
                f"{m.type} · {m.path or 'inline'} · "
                + ("opened" if m.is_image else f"not opened: {m.why_not_opened}"),
            )
            for m in meta.collection.members[:MAX_ROWS]
        )
        secs.append(Section(f"Collection {meta.collection.name!r} (RFC-8, draft)", rows))
    if meta.scene is not None:
        sc = meta.scene
        secs.append(
            Section("Scene images", tuple(Row(str(i), p) for i, p in enumerate(sc.image_paths)))
        )
        secs += _coordinate_sections(
            sc.coordinate_systems,
            sc.transformations,
            shown=sc.coordinate_systems[0].name if sc.coordinate_systems else None,
        )
    return secs


def _multiscale_sections(
    ms: Multiscale, level_shapes: Sequence[Sequence[int] | str | None]
) -> list[Section]:
    axes = tuple(
        Row(a.name, ", ".join(x for x in (a.type or "untyped", a.unit, _direction(a)) if x))
        for a in ms.axes
    )
    rows = []
    shapes = list(level_shapes) + [None] * (len(ms.datasets) - len(level_shapes))
    for i, (d, shape) in enumerate(zip(ms.datasets, shapes, strict=False)):
        what = shape if isinstance(shape, str) else shape_text(shape) if shape else "missing"
        txt = f"{what} · scale {nums_text(d.scale)}"
        if any(d.translation):
            txt += f" · translation {nums_text(d.translation)}"
        rows.append(Row(f"{i} ({d.path})" if d.path != str(i) else str(i), txt))
    secs = [Section("Axes", axes), Section("Levels", tuple(rows))]
    if ms.coordinate_systems or ms.transformations:
        secs += _coordinate_sections(
            ms.systems, ms.transformations, intrinsic=ms.intrinsic, shown=ms.default_system
        )
    return secs


def _direction(axis: Axis) -> str | None:
    """An axis's RFC-4 orientation for people: "anatomical anterior→posterior"."""
    o = axis.orientation
    return None if o is None else f"{o.type} {o.direction}" if o.known else o.direction


def _ref_text(ref: SystemRef | None) -> str:
    if ref is None:
        return "?"
    name, path = getattr(ref, "name", None), getattr(ref, "path", None)
    return f"{path}:{name}" if path else str(name)


def transformation_text(t: Transform) -> str:
    """One line for a 0.6 transformation: type, input -> output, parameters."""
    doc = dict(t.to_json())
    for k in ("type", "input", "output", "name"):
        doc.pop(k, None)
    params = json.dumps(doc, separators=(", ", ": "))
    if len(params) > 160:
        params = params[:157] + "..."
    head = f"{_ref_text(t.input)} → {_ref_text(t.output)}"
    return f"{head} · {params}" if doc else head


def _coordinate_sections(
    systems: Sequence[CoordinateSystem],
    transformations: Sequence[Transform],
    intrinsic: str | None = None,
    shown: str | None = None,
) -> list[Section]:
    rows = []
    for c in systems:
        axes = ", ".join(
            f"{a.name} ({', '.join(x for x in (a.unit, _direction(a)) if x)})"
            if a.unit or a.orientation
            else a.name
            for a in c.axes
        )
        notes = [
            n for n, on in (("intrinsic", c.name == intrinsic), ("shown", c.name == shown)) if on
        ]
        rows.append(Row(c.name, axes + (f" · {', '.join(notes)}" if notes else "")))
    trows = tuple(
        Row(
            f"{getattr(t, 'type', '?')}" + (f" {t.name!r}" if getattr(t, "name", None) else ""),
            transformation_text(t),
        )
        for t in transformations[:MAX_ROWS]
    )
    out = [Section("Coordinate systems", tuple(rows))] if rows else []
    if trows:
        out.append(Section("Transformations", trows))
    return out


def _channels_section(meta: NodeMetadata) -> Section:
    assert meta.omero is not None
    rows = []
    for i, ch in enumerate(meta.omero.channels):
        parts = []
        if ch.window is not None:
            w = ch.window
            parts.append(f"window {num_text(w.start)}–{num_text(w.end)}")
            if w.min is not None and w.max is not None:
                parts.append(f"range {num_text(w.min)}–{num_text(w.max)}")
        parts.append("active" if ch.active else "hidden")
        if ch.inverted:
            parts.append("inverted")
        if ch.color:
            parts.append(f"#{ch.color}")
        rows.append(
            Row(ch.label or f"channel {i}", " · ".join(parts), f"#{ch.color}" if ch.color else None)
        )
    return Section("Channels", tuple(rows))


def _image_label_sections(meta: NodeMetadata) -> list[Section]:
    il = meta.image_label
    assert il is not None
    rows = [
        Row(
            str(c.value),
            "rgba(" + ", ".join(str(x) for x in c.rgba) + ")",
            "#" + "".join(f"{x:02X}" for x in c.rgba),
        )
        for c in il.colors[:MAX_ROWS]
    ]
    if len(il.colors) > MAX_ROWS:
        rows.append(Row("…", f"{len(il.colors) - MAX_ROWS} more colours"))
    info = [Row("Colours", str(len(il.colors))), Row("Properties", str(len(il.properties)))]
    if il.source_image:
        info.append(Row("Source image", il.source_image))
    if il.properties:
        keys = sorted({k for p in il.properties for k in p if k != "label-value"})
        info.append(Row("Property keys", ", ".join(keys) or "–"))
    out = [Section("Image label", tuple(info))]
    if rows:
        out.append(Section("Label colours", tuple(rows)))
    return out


def _plate_sections(meta: NodeMetadata) -> list[Section]:
    p = meta.plate
    assert p is not None
    rows = [
        Row("Name", p.name or "–"),
        Row("Rows", f"{len(p.rows)} ({p.rows[0]}…{p.rows[-1]})" if p.rows else "0"),
        Row("Columns", f"{len(p.columns)} ({p.columns[0]}…{p.columns[-1]})" if p.columns else "0"),
        Row("Wells", str(len(p.wells))),
    ]
    if p.field_count is not None:
        rows.append(Row("Fields per well", str(p.field_count)))
    out = [Section("Layout", tuple(rows))]
    if p.acquisitions:
        acq = tuple(
            Row(
                str(a.id),
                (a.name or "–")
                + (f" · up to {a.maximum_field_count} fields" if a.maximum_field_count else ""),
            )
            for a in p.acquisitions
        )
        out.append(Section("Acquisitions", acq))
    return out
