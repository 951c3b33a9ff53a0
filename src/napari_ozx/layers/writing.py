"""napari layer data -> :class:`~napari_ozx.ngff.write.specs.ImageSpec` / ``LabelsSpec``.

Image layers sharing shape, dtype and scale become **one** image with a channel axis
(names, colours, contrast limits, visibility in ``omero``); label layers go under its
``labels/`` (a lone labels layer becomes a label image); a rotate / shear / affine becomes
the spec's ``to_world``. Lazy and multiscale layers are streamed shard by shard; a
multiscale layer napari-ozx opened keeps its stored pyramid (:func:`stored_pyramid`, from
the record the reader put in its metadata: levels, their scale and translation, the
multiscale's ``type`` / ``metadata``) unless ``WriteOptions.rebuild_pyramid``; others get
the writer's pyramid. Works on napari's ``(data, attributes, kind)`` tuples, without
napari or Qt; the npe2 writer (``_writer.py``) adds progress and remembered options.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.ngff.model.metadata import (
    SPACE_UNITS,
    TIME_UNITS,
    Axis,
    Channel,
    LabelColor,
    Window,
)
from napari_ozx.ngff.model.orientation import split_axis_label
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.specs import (
    ImageSpec,
    LabelsSpec,
    Progress,
    SceneSpec,
    StoredLevel,
    StoredPyramid,
    WriteSummary,
)
from napari_ozx.ngff.write.writer import summarize_write, write_ome_zarr

if TYPE_CHECKING:
    import threading

    from napari_ozx.ngff.write.specs import ArrayData

logger = logging.getLogger(__name__)

__all__ = [
    "FullLayerData",
    "image_spec_from_layers",
    "labels_spec_from_layer",
    "layer_axes",
    "specs_from_layers",
    "stored_pyramid",
    "unique_name",
    "with_xml_note",
    "write_layer_data",
]

FullLayerData = tuple[Any, dict[str, Any], str]
_OME_NAMES = ("t", "c", "z", "y", "x")


# --------------------------------------------------------------------- axes


def layer_axes(
    labels: Sequence[str] | None, units: Sequence[object] | None, ndim: int, with_channel: bool
) -> list[Axis]:
    """OME axes for a napari layer of *ndim* dims (+ a leading channel axis if asked).

    napari's own axis labels are kept when they are OME names (t, z, y, x ...); its
    defaults ('-1', 'axis 0' ...) become the conventional ``t z y x`` by position. A label
    the reader gave an RFC-4 direction (``y (anterior→posterior)``) is that name with that
    orientation, written back on its space axis.
    """
    split = [split_axis_label(str(x)) for x in (labels or ())]
    names = [n for n, _ in split]
    orients = [o for _, o in split] if len(split) == ndim else [None] * ndim
    if (
        len(names) != ndim
        or len(set(names)) != ndim
        or not all(n in _OME_NAMES and n != "c" for n in names)
    ):
        if ndim > 4:
            raise OzxError(
                f"cannot save {ndim}-D layers as OME-Zarr (at most t, z, y, x besides channels)"
            )
        names = list(("t", "z", "y", "x")[4 - ndim :])
    unit_strs = [str(u) if u is not None else "" for u in (units or [None] * ndim)]
    axes = []
    for n, u, o in zip(names, unit_strs, orients, strict=False):
        kind = "time" if n == "t" else "space"
        ok = TIME_UNITS if kind == "time" else SPACE_UNITS
        orientation = o if kind == "space" else None
        axes.append(Axis(n, kind, u if u in ok else None, orientation=orientation))
    if with_channel:
        pos = 1 if names and names[0] == "t" else 0
        axes.insert(pos, Axis("c", "channel"))
    return axes


def _hex(cmap: object) -> str | None:
    from napari_ozx.layers.colormaps import (
        colormap_hex,  # names ("green") too, not only colour lists
    )

    return colormap_hex(cmap)


def layer_placement(
    meta: Mapping[str, object], ndim: int
) -> tuple[list[float], list[float], np.ndarray | None, str]:
    """A napari layer's place as OME-Zarr: ``(scale, translation, to_world, kind)``.

    napari maps data to world by ``affine @ (translate + rotate @ shear @ scale)``. When
    that is a per-axis scale and translation (no rotation, shear or affine beyond them),
    it is the level-0 scale and translation and ``to_world`` is ``None``. Otherwise the
    intrinsic system is level 0 scaled to the layer's pixel size (``scale``, no
    translation) and ``to_world`` the homogeneous matrix from it to napari's world, which
    only OME-Zarr 0.6 stores; *kind* names it for messages ("rotation", "shear or
    affine")."""
    scale = [float(s) for s in cast("Sequence[float]", meta.get("scale", [1.0] * ndim))]
    translate = [float(t) for t in cast("Sequence[float]", meta.get("translate", [0.0] * ndim))]
    rotate, shear, affine = meta.get("rotate"), meta.get("shear"), meta.get("affine")
    if rotate is None and shear is None and affine is None:
        return scale, translate, None, ""
    from napari.utils.transforms import Affine

    d2p = Affine(scale=scale, translate=translate, rotate=rotate, shear=shear, ndim=ndim)
    full = d2p.affine_matrix
    if affine is not None:
        extra = np.asarray(getattr(affine, "affine_matrix", affine), dtype=float)
        if extra.shape == full.shape:
            full = extra @ full
    lin = full[:-1, :-1]
    if np.allclose(lin, np.diag(np.diag(lin))):
        return [float(v) for v in np.diag(lin)], [float(v) for v in full[:-1, -1]], None, ""
    to_world = full @ np.diag([*(1.0 / np.asarray(scale)), 1.0])
    r = to_world[:-1, :-1]
    kind = "rotation" if np.allclose(r @ r.T, np.eye(ndim), atol=1e-9) else "shear or affine"
    return scale, [0.0] * ndim, to_world, kind


def _with_channel(m: np.ndarray | None, c: int) -> np.ndarray | None:
    """*m* with an identity row and column for a channel axis inserted at *c*."""
    if m is None:
        return None
    n = m.shape[0]
    out = np.eye(n + 1)
    keep = [i for i in range(n + 1) if i != c]
    out[np.ix_(keep, keep)] = m
    return out


def _levels(data: object, meta: Mapping[str, object]) -> list[ArrayData] | None:
    """A multiscale layer's levels (``None``: one level)."""
    levels = cast("Sequence[ArrayData]", data)
    if (meta.get("multiscale") or isinstance(data, list | tuple)) and len(levels) > 1:
        return list(levels)
    return None


def _record(data: object, meta: Mapping[str, object]) -> dict[str, Any] | None:
    """The stored-pyramid record of a multiscale layer napari-ozx opened, when it still
    describes the layer's levels (their number and shapes), else ``None``."""
    levels = _levels(data, meta)
    src = LayerSource.from_metadata(meta.get("metadata"))
    rec = src.pyramid if src is not None else None
    if levels is None or not isinstance(rec, dict):
        return None
    try:
        n, ndim = len(levels), levels[0].ndim
        shapes = [tuple(int(v) for v in s) for s in rec["shapes"]]
        factors = [[float(v) for v in f] for f in rec["factors"]]
        offsets = [[float(v) for v in o] for o in rec["offsets"]]
        paths = [str(p) for p in rec["paths"]]
    except (KeyError, TypeError, ValueError):
        return None
    if (
        len(shapes) != n
        or len(factors) != n
        or len(offsets) != n
        or len(paths) != n
        or [tuple(int(v) for v in lvl.shape) for lvl in levels] != shapes
        or any(len(v) != ndim for v in (*factors, *offsets))
    ):
        return None
    return rec


def stored_pyramid(
    layers: Sequence[FullLayerData],
    scale: Sequence[float],
    translation: Sequence[float],
    channel_axis: int | None = None,
) -> StoredPyramid | None:
    """The pyramid *layers* (one image's channels, or one labels layer) have as stored,
    placed by level 0's *scale* and *translation* (as written, the channel axis at
    *channel_axis* included): ``None`` unless every layer is a multiscale layer opened by
    napari-ozx with the same stored levels."""
    recs = [_record(d, m) for d, m, _ in layers]
    first = recs[0]
    if first is None or any(
        r is None
        or {k: r[k] for k in ("shapes", "factors", "offsets")}
        != {k: first[k] for k in ("shapes", "factors", "offsets")}
        for r in recs
    ):
        return None
    all_levels = [_levels(d, m) or [] for d, m, _ in layers]
    lower = []
    for i in range(1, len(first["shapes"])):
        f, o = list(first["factors"][i]), list(first["offsets"][i])
        if channel_axis is not None:
            import dask.array as da
            from dask import is_dask_collection

            f.insert(channel_axis, 1.0)
            o.insert(channel_axis, 0.0)
            parts = [lv[i] for lv in all_levels]
            data = da.stack(
                [p if is_dask_collection(p) else da.asarray(p) for p in parts], axis=channel_axis
            )
        else:
            data = all_levels[0][i]
        sc = [float(s) * float(k) for s, k in zip(scale, f, strict=True)]
        tr = [float(t) + float(d) * float(s) for t, d, s in zip(translation, o, scale, strict=True)]
        lower.append(StoredLevel(data, sc, tr, str(first["paths"][i])))
    meta = first.get("metadata")
    kind = first.get("type")
    return StoredPyramid(
        tuple(lower),
        str(first["paths"][0]),
        kind if isinstance(kind, str) else None,
        meta if isinstance(meta, dict) else None,
    )


def _level0(data: object, meta: Mapping[str, object]) -> ArrayData:
    if meta.get("multiscale") or (
        isinstance(data, list | tuple) and len(data) and hasattr(data[0], "shape")
    ):
        return cast("Sequence[ArrayData]", data)[0]
    return cast("ArrayData", data)


# ------------------------------------------------------------------- specs


def image_spec_from_layers(images: list[FullLayerData]) -> ImageSpec:
    datas = [_level0(d, m) for d, m, _ in images]
    first_meta = images[0][1]
    shape, dtype = datas[0].shape, np.dtype(datas[0].dtype)
    scale, translate, to_world, kind = layer_placement(first_meta, len(shape))

    def same_place(meta: Mapping[str, object]) -> bool:
        sc, tr, tw, _ = layer_placement(meta, len(shape))
        if tw is None or to_world is None:
            return tw is None and to_world is None and sc == scale and tr == translate
        return sc == scale and tr == translate and bool(np.allclose(tw, to_world))

    for d, (_, m, _) in zip(datas, images, strict=True):
        if d.shape != shape or np.dtype(d.dtype) != dtype or not same_place(m):
            names = [m.get("name") for _, m, _ in images]
            raise OzxError(
                f"image layers {names} differ in shape, data type or place (scale, "
                "translate, rotate, shear, affine) and cannot be saved as the channels of "
                "one OME-Zarr image: save them one at a time"
            )
    multi = len(images) > 1
    axes = layer_axes(first_meta.get("axis_labels"), first_meta.get("units"), len(shape), multi)
    if multi:
        import dask.array as da
        from dask import is_dask_collection

        c = next(i for i, a in enumerate(axes) if a.type == "channel")
        data = da.stack([d if is_dask_collection(d) else da.asarray(d) for d in datas], axis=c)
        scale.insert(c, 1.0)
        translate.insert(c, 0.0)
        to_world = _with_channel(to_world, c)
    else:
        data = datas[0]
    channels = []
    for _, m, _ in images:
        lims = m.get("contrast_limits")
        window = (
            Window(float(lims[0]), float(lims[1]))
            if lims is not None and lims[1] > lims[0]
            else None
        )
        channels.append(
            Channel(
                label=m.get("name"),
                color=_hex(m.get("colormap")),
                window=window,
                active=bool(m.get("visible", True)),
            )
        )
    name = _common_name([m.get("name") or "" for _, m, _ in images])
    c_axis = next((i for i, a in enumerate(axes) if a.type == "channel"), None) if multi else None
    return ImageSpec(
        data,
        axes,
        scale,
        translate,
        channels,
        name,
        to_world=to_world,
        to_world_kind=kind,
        pyramid=stored_pyramid(images, scale, translate, c_axis),
    )


def _common_name(names: list[str]) -> str | None:
    if len(names) == 1:
        return names[0] or None
    prefix = re.sub(r"[\s_\-:]*c?\d*$", "", _prefix(names))
    return prefix or None


def _prefix(names: list[str]) -> str:
    p = names[0]
    for n in names[1:]:
        while not n.startswith(p):
            p = p[:-1]
    return p


def labels_spec_from_layer(layer: FullLayerData, used: set[str]) -> LabelsSpec:
    d, m, _ = layer
    data = _level0(d, m)
    if not np.issubdtype(np.dtype(data.dtype), np.integer):
        raise OzxError(f"labels layer {m.get('name')!r} is not of an integer type")
    axes = layer_axes(m.get("axis_labels"), m.get("units"), data.ndim, False)
    colors: list[LabelColor] = []
    cmap = m.get("colormap")
    color_dict = getattr(cmap, "color_dict", None)
    if color_dict:
        for k, v in color_dict.items():
            if k is None or k == 0 or not isinstance(k, int | np.integer):
                continue
            r, g, b, a = (round(float(x) * 255) for x in np.asarray(v)[:4])
            colors.append(LabelColor(int(k), (r, g, b, a)))
    props: list[dict[str, Any]] = []
    feats = m.get("features")
    if feats is not None and len(feats) and "index" in feats:
        for rec in feats.to_dict("records"):  # keeps any column name ('class', 'cell type')
            value = int(rec.pop("index"))
            if value == 0:
                continue
            props.append({"label-value": value, **{str(c): _jsonable(v) for c, v in rec.items()}})
    name = re.sub(r"[^\w.\-]+", "_", m.get("name") or "labels").strip("_") or "labels"
    base, i = name, 1
    while name in used:
        i += 1
        name = f"{base}_{i}"
    used.add(name)
    scale, translate, to_world, kind = layer_placement(m, data.ndim)
    return LabelsSpec(
        name,
        data,
        axes,
        scale,
        translate,
        colors,
        props,
        to_world=to_world,
        to_world_kind=kind,
        pyramid=stored_pyramid([layer], scale, translate),
    )


def _jsonable(v: object) -> object:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and v != v:
        return None
    return v


# ----------------------------------------------------------------- writing


def _same_place(images: list[FullLayerData]) -> bool:
    """Whether image layers can be the channels of one image (same shape, dtype, place)."""
    try:
        image_spec_from_layers(images)
    except OzxError:
        return False
    return True


def unique_name(base: str, used: set[str]) -> str:
    """*base*, or ``base_2``, ``base_3`` ... the first not in *used*; added to *used*."""
    name, i = base, 1
    while name in used:
        i += 1
        name = f"{base}_{i}"
    used.add(name)
    return name


def _scene_spec(images: list[FullLayerData], lspecs: list[LabelsSpec]) -> SceneSpec:
    """Image layers placed differently, saved together: a 0.6 scene, one image each; a
    labels layer goes with the image whose level-0 shape and place it shares."""
    specs = [image_spec_from_layers([im]) for im in images]
    used: set[str] = set()
    paths = []
    for im in images:
        name = re.sub(r"[^\w.\-]+", "_", im[1].get("name") or "image").strip("_") or "image"
        paths.append(unique_name(name, used))
    for lab in lspecs:
        home = next(
            (
                sp
                for sp in specs
                if tuple(sp.data.shape) == tuple(lab.data.shape)
                and list(sp.scale or []) == list(lab.scale or [])
                and list(sp.translation or []) == list(lab.translation or [])
                and ((sp.to_world is None) == (lab.to_world is None))
                and (
                    sp.to_world is None
                    or lab.to_world is None
                    or np.allclose(sp.to_world, lab.to_world)
                )
            ),
            None,
        )
        if home is None:
            raise OzxError(
                f"labels {lab.name!r} match none of the image layers saved with them (shape "
                "and place): save them with their image, or on their own"
            )
        home.labels = [*home.labels, lab]
    return SceneSpec(specs, paths)


def specs_from_layers(
    layers: Sequence[FullLayerData],
) -> tuple[ImageSpec | SceneSpec | None, list[LabelsSpec]]:
    """The image (image layers as its channels) and label images *layers* save as; image
    layers that cannot be channels of one image (placed or shaped differently) make an
    OME-Zarr 0.6 scene, one image each, their labels with them."""
    images = [lyr for lyr in layers if lyr[2] == "image"]
    labels = [lyr for lyr in layers if lyr[2] == "labels"]
    others = [lyr[1].get("name") for lyr in layers if lyr[2] not in ("image", "labels")]
    if others:
        raise OzxError(f"OME-Zarr holds images and labels only; cannot save {others}")
    used: set[str] = set()
    lspecs = [labels_spec_from_layer(lyr, used) for lyr in labels]
    if len(images) > 1 and not _same_place(images):
        return _scene_spec(images, lspecs), []
    return (image_spec_from_layers(images) if images else None), lspecs


def write_layer_data(
    path: str | os.PathLike[str],
    layers: Sequence[FullLayerData],
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> WriteSummary:
    """Save image and label layer data to *path* (``.ozx`` or directory); what was written
    (its :meth:`~napari_ozx.ngff.write.writer.WriteSummary.message` is File > Save's
    notification). Raises :class:`~napari_ozx.ngff.write.writer.WriteCancelled` when
    *cancel* is set; nothing is then left at *path*."""
    image, lspecs = specs_from_layers(layers)
    out = write_ome_zarr(path, image, lspecs, options, progress=progress, cancel=cancel)
    return with_xml_note(summarize_write(out, image, lspecs, options), layers)


def with_xml_note(summary: WriteSummary, layers: Sequence[FullLayerData]) -> WriteSummary:
    """*summary* of a save of *layers* with the one note (and warning) naming each
    bioformats2raw source whose OME-XML is not written, and the images it leaves out:
    saved layers are new images, not the collection the XML describes."""
    from dataclasses import replace

    from napari_ozx.ngff.write.omexml import dropped_xml_note

    saved: dict[str, list[str]] = {}
    for _, meta, _ in layers:
        src = LayerSource.from_metadata(meta.get("metadata"))
        if src is not None:
            saved.setdefault(src.source, []).append(src.field_path or src.node)
    note = dropped_xml_note(saved, summary.target) if saved else None
    return summary if note is None else replace(summary, notes=(*summary.notes, note))
