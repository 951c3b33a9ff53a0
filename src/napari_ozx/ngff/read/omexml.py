"""bioformats2raw's ``OME/METADATA.ome.xml``, read lazily from the opened store.

Only a ``bioformats2raw.layout`` root is asked for its XML (any other file costs nothing
more). The member is read in :data:`CHUNK_BYTES` ranges through the store's public API
(a directory's file with plain reads, an ``.ozx`` member or a remote object with
``get_sync`` ranges, any other store with zarr's ``get``), and only as far as the parser
(:func:`napari_ozx.ngff.model.omexml.parse_ome_xml`) asks: to the end of the last
``Image``. The result is kept per opened hierarchy, so the reader, the plate reader and
the inspection read it once, and what it says about the XML (a reason it was ignored, an
older schema, no ``MetadataOnly``) is logged once.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.omexml import (
    XML_KEY,
    OmeXml,
    OmeXmlError,
    XmlAnnotation,
    XmlFill,
    XmlWellSample,
    fill_multiscale,
    parse_ome_xml,
    scan_annotations,
)
from napari_ozx.ngff.read.documents import local_root, run_sync
from napari_ozx.ozx.protocol import as_container

if TYPE_CHECKING:
    from zarr.abc.store import Store

#: an opened hierarchy (``open.OmeZarr``) and its images (``open.Image``); the opener
#: imports this module, so their types are not imported here
OmeZarr = Any
Image = Any

logger = logging.getLogger(__name__)

__all__ = [
    "CHUNK_BYTES",
    "XML_KEY",
    "annotations_of",
    "has_ome_xml",
    "member_chunks",
    "ome_xml",
    "read_ome_xml",
    "with_ome_xml",
]

#: bytes per read of the XML (a range request for a remote store)
CHUNK_BYTES = 1 << 20

_cache: weakref.WeakKeyDictionary[Any, OmeXml | None] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def member_chunks(store: Store, key: str, chunk: int = CHUNK_BYTES) -> Generator[bytes, None, None]:
    """The bytes of *key* in *store*, *chunk* at a time, read as they are consumed;
    nothing when there is no such key. A deflated ``.ozx`` member is inflated once."""
    root = local_root(store, exact=True)
    if root is not None:
        try:
            fh = open(os.path.join(root, key), "rb")  # noqa: SIM115 - closed below
        except (FileNotFoundError, NotADirectoryError):
            return
        with fh:
            while data := fh.read(chunk):
                yield data
        return
    container = as_container(store)
    if container is not None:
        size = container.member_size(key)
        if size is None:
            return
        names, stored = container.stored_sizes()
        import bisect

        i = bisect.bisect_left(names, key)
        if i < len(names) and names[i] == key and stored[i] != size:
            chunk = max(chunk, size)  # deflated: inflated whole anyway, so once
    from zarr.abc.store import RangeByteRequest
    from zarr.buffer import default_buffer_prototype

    proto = default_buffer_prototype()
    get_sync = getattr(store, "get_sync", None)
    start = 0
    while True:
        rng = RangeByteRequest(start, start + chunk)
        try:
            if callable(get_sync):
                buf = get_sync(key, prototype=proto, byte_range=rng)
            else:
                buf = run_sync(store.get(key, prototype=proto, byte_range=rng))
        except FileNotFoundError:
            return
        if buf is None:
            return
        data = buf.to_bytes()
        if not data:
            return
        yield data
        if len(data) < chunk:
            return
        start += len(data)


def has_ome_xml(root: OmeZarr) -> bool:
    """Whether *root* is a bioformats2raw layout, the only kind asked for its XML."""
    return root.root.meta.bioformats2raw_layout is not None


def ome_xml(root: OmeZarr) -> OmeXml | None:
    """The parsed XML of *root* (instruments, plates and images; not the annotations),
    read once per opened hierarchy; None when there is none or it cannot be read (the
    reason logged once, as a warning)."""
    with _lock:
        if root in _cache:
            return _cache[root]
    result = read_ome_xml(root.store, root.source) if has_ome_xml(root) else None
    with _lock:
        _cache[root] = result
    return result


def read_ome_xml(store: Store, source: str) -> OmeXml | None:
    """The XML of a bioformats2raw layout at *store* (see :func:`ome_xml`), uncached;
    what it says about the XML is logged (warnings), each once."""
    where = f"{source}: {XML_KEY}"
    chunks = member_chunks(store, XML_KEY)
    try:
        result = parse_ome_xml(chunks, where=where)
    except OmeXmlError as e:
        logger.warning("%s", e)
        return None
    except (OzxError, OSError) as e:
        logger.warning("%s: cannot be read (%s); ignored", where, e)
        return None
    finally:
        chunks.close()
    if not result.images and not result.well_samples:
        if result.stopped_at:  # (0: there is no such member, nothing to say)
            logger.warning("%s: no Image elements; ignored", where)
        return None
    for note in result.notes:
        logger.warning("%s", note)
    return result


def annotations_of(
    store: Store, xml: OmeXml, refs: Sequence[str], source: str = ""
) -> dict[str, XmlAnnotation]:
    """The annotations *refs* name (an image's ``AnnotationRef`` IDs), found in the part
    of the XML after the images (:func:`~napari_ozx.ngff.model.omexml.scan_annotations`:
    a byte search, not a parse of the whole annotation section)."""
    if not refs:
        return {}
    chunks = member_chunks(store, XML_KEY)
    skipped = 0
    # the parser read ahead of the last Image it used by less than this
    start = max(0, xml.stopped_at - (1 << 16))

    def after_images() -> Iterator[bytes]:
        nonlocal skipped
        for data in chunks:
            if skipped + len(data) <= start:
                skipped += len(data)
                continue
            yield data[max(0, start - skipped) :]
            skipped = start

    try:
        return scan_annotations(after_images(), refs, xml.namespaces)
    except (OzxError, OSError) as e:
        logger.warning("%s: %s: annotations cannot be read (%s)", source, XML_KEY, e)
        return {}
    finally:
        chunks.close()


def with_ome_xml(root: OmeZarr, images: list[Image], indices: Sequence[int]) -> list[Image]:
    """*images* (the series of *root*, the ``indices``-th ``Image`` elements) with what
    the XML fills in (:func:`~napari_ozx.ngff.model.omexml.fill_multiscale`) and the
    XML's record (``Image.ome_xml``, a :class:`XmlFill`)."""
    xml = ome_xml(root)
    if xml is None:
        return images
    out = []
    xims = [xml.image(i) for i in indices]
    names = [x.name for x in xims if x is not None and x.name]
    for image, xim in zip(images, xims, strict=True):
        if xim is None:
            out.append(image)
            continue
        new = fill_image(image, xim, len(images))
        if xim.name:  # two series of one name are told apart by their paths
            label = xim.name if names.count(xim.name) == 1 else f"{xim.name} ({image.path})"
            new.ome_xml = replace(new.ome_xml, label=label)
        out.append(new)
    return out


def fill_image(image: Image, xim: Any, series_count: int = 1) -> Image:
    """One image with its XML's fill (see :func:`with_ome_xml`)."""
    ms = image.multiscale
    c = ms.channel_axis
    n_channels = image.arrays[0].shape[c] if c is not None and image.arrays else 1
    new_ms, omero, fill = fill_multiscale(ms, image.meta.omero, xim, n_channels)
    fill = replace(fill, series_count=series_count)
    group = image.group
    if omero is not image.meta.omero:
        group = replace(group, meta=replace(group.meta, omero=omero))
    new = replace(image, group=group, multiscale=new_ms)
    new.ome_xml = fill
    return new


__all__ += ["XmlFill", "fill_image"]


def series_label(image: Image) -> str:
    """How a layer tells its image apart from the other series of its file: the XML's
    ``Image@Name``, else the image's path."""
    fill = image.ome_xml
    name = fill.label if isinstance(fill, XmlFill) else None
    return name or image.path or image.root.name


__all__ += ["series_label"]


# ------------------------------------------------------------------------ plates

#: metres per OME-Zarr length unit, for stage positions given in another unit than the
#: field's pixels
_METRES = {
    "kilometer": 1e3,
    "meter": 1.0,
    "decimeter": 1e-1,
    "centimeter": 1e-2,
    "millimeter": 1e-3,
    "micrometer": 1e-6,
    "nanometer": 1e-9,
    "picometer": 1e-12,
    "angstrom": 1e-10,
    "inch": 0.0254,
    "foot": 0.3048,
}


def well_sample_for(xml: OmeXml, plate: Any, path: str) -> XmlWellSample | None:
    """The ``WellSample`` of the field at *path* (``row/column/field``) of *plate* (a
    ``metadata.Plate``): the XML ``Well`` at the row's and column's indices, its samples
    in document order, the field's number among them (bioformats2raw names a well's
    field groups 0, 1, ... in that order)."""
    parts = path.strip("/").split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    try:
        row, col = plate.rows.index(parts[0]), plate.columns.index(parts[1])
    except ValueError:
        return None
    samples = [s for s in xml.well_samples if s.row == row and s.column == col]
    k = int(parts[2])
    return samples[k] if k < len(samples) else None


def field_with_xml(root: OmeZarr, path: str, image: Image) -> Image:
    """A plate field's image with what its ``WellSample``'s XML ``Image`` fills in."""
    plate = root.root.meta.plate
    xml = ome_xml(root) if plate is not None else None
    if xml is None:
        return image
    sample = well_sample_for(xml, plate, path)
    xim = xml.image_by_id(sample.image_ref) if sample and sample.image_ref else None
    if xim is None:
        return image
    new = fill_image(image, xim)
    new.ome_xml = replace(new.ome_xml, sample=sample)
    return new


def stage_offsets(images: Sequence[Image]) -> list[tuple[float, float]] | None:
    """Where the XML's stage positions put each field of a well relative to the first
    (y, x in the fields' own units), or None: when the OME-Zarr metadata places them
    (their translations differ), or a field has no position, or the positions' unit
    cannot be converted to the fields' (pixels without a physical size)."""
    from napari_ozx.ngff.model.axes import yx_axes
    from napari_ozx.ngff.model.omexml import length_unit

    if len(images) < 2:
        return None
    origins = set()
    points = []
    for img in images:
        fill = img.ome_xml
        sample = getattr(fill, "sample", None)
        if sample is None or sample.position_x is None or sample.position_y is None:
            return None
        y, x = yx_axes(img.multiscale.axes)
        ds = img.multiscale.datasets[0]
        origins.add((ds.translation[y], ds.translation[x]))
        pos = []
        for q, ax in ((sample.position_y, y), (sample.position_x, x)):
            src = _METRES.get(length_unit(q.unit) or "")
            dst = _METRES.get(img.multiscale.axes[ax].unit or "")
            if src is None or dst is None:
                return None
            pos.append(q.value * src / dst)
        points.append((pos[0], pos[1]))
    if len(origins) > 1:
        return None  # the OME-Zarr metadata places them: it wins
    y0, x0 = points[0]
    return [(py - y0, px - x0) for py, px in points]


__all__ += ["field_with_xml", "stage_offsets", "well_sample_for"]
