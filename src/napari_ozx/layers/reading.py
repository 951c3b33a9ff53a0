"""OME model -> napari layer data: images, labels, plate overviews and wells.

:mod:`napari_ozx.ngff` parses and opens; this module maps the typed model to napari
layer keyword arguments (scale, translate, axis labels, units, colormaps, contrast
limits, label colours and features), each layer with its :class:`LayerSource` in
``metadata``; an image's tables go through :mod:`.tables` (ROI tables as Shapes layers,
feature tables as its labels' features). It imports neither Qt nor napari, so a headless
``npe2.read`` stays headless, and it never shows anything: problems that do not stop a
read (a broken label image or table, a field of a well that cannot be opened) go to the
*report* callback the caller passes (the npe2 reader turns them into napari
notifications), else to the log.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import LayerKind, LayerSource
from napari_ozx.ngff.model.metadata import SPACE_UNITS, TIME_UNITS
from napari_ozx.ngff.model.orientation import axis_label

if TYPE_CHECKING:
    from napari_ozx.ngff.model.graph import TransformGraph
    from napari_ozx.ngff.model.metadata import Axis, Channel, Multiscale, Scene
    from napari_ozx.ngff.model.transforms import Transform
    from napari_ozx.ngff.read.open import Image as OmeImage
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ngff.read.plate import HcsPlate, Overview, OverviewImage, WellInfo

logger = logging.getLogger(__name__)

__all__ = [
    "GRID_FIELDS_MAX",
    "LayerData",
    "Report",
    "image_layer_data",
    "label_to_world",
    "labels_layer_data",
    "overview_layer_data",
    "placement",
    "plate_layer_data",
    "read_layer_data",
    "scene_layer_data",
    "scene_systems",
    "table_layer_data",
    "well_layer_data",
]

LayerData = tuple[Any, dict[str, Any], str]


class Placement(TypedDict, total=False):
    """Where a layer is shown (:func:`placement`): napari's transform keywords."""

    scale: tuple[float, ...]
    translate: tuple[float, ...]
    axis_labels: tuple[str, ...]
    units: tuple[str, ...]
    affine: np.ndarray


_T = TypeVar("_T")
#: called with (what, error) for a problem that does not stop the read
Report = Callable[[str, OzxError], None]

GRID_FIELDS_MAX = 16  # a well opened on its own shows up to this many fields as a grid

# omero colours that match a built-in napari colormap get its name
_NAMED_COLORMAPS = {
    "FF0000": "red",
    "00FF00": "green",
    "0000FF": "blue",
    "FF00FF": "magenta",
    "00FFFF": "cyan",
    "FFFF00": "yellow",
    "FFFFFF": "gray",
    "000000": "gray",
}


def _log_report(what: str, err: OzxError) -> None:
    logger.warning("napari-ozx: %s: %s", what, err)


def read_layer_data(
    path: str, report: Report | None = None, system: str | None = None
) -> list[LayerData]:
    """Layer data for every image (and its labels) in *path*; raises OzxError.

    A plate gives its overview, a well its fields (see :func:`plate_layer_data`); a 0.6
    scene its images placed in one coordinate system (*system*, see
    :func:`scene_layer_data`); a SpatialData store its elements. Each kind of root has
    its own reader (:data:`_READERS`; an image, a label image or a labels group: the
    images' reader).
    """
    from napari_ozx.ngff.read.open import open_ome_zarr

    root = open_ome_zarr(path)
    report = report or _log_report
    read = _READERS.get(root.root.meta.kind, _images_layers)
    layers = read(root, report, system)
    if read is _images_layers and _written_by_spatialdata(root):
        # an element of a SpatialData store opened alone: its store's tables
        from napari_ozx.layers.spatial.store import element_store_tables

        element_store_tables(path, [ld for ld in layers if ld[2] == "labels"], report)
    warn_broken_rules(root)
    return layers


def _plate_layers(root: OmeZarr, report: Report, system: object) -> list[LayerData]:
    return plate_layer_data(root, report)


def _scene_layers(root: OmeZarr, report: Report, system: str | None) -> list[LayerData]:
    return scene_layer_data(root, report, system)


def _images_layers(root: OmeZarr, report: Report, system: object) -> list[LayerData]:
    """The root image (or label image) or a labels group's label images."""
    return [ld for image in root.images() for ld in _image_layers(root, image, report)]


def _collection_layers(root: OmeZarr, report: Report, system: object) -> list[LayerData]:
    """A bioformats2raw collection: each series, named by its image when there are
    several (:func:`_series_named`)."""
    images = root.images()
    return [
        ld
        for image in images
        for ld in _image_layers(root, image, report, by_series=len(images) > 1)
    ]


def _spatialdata_layers(root: OmeZarr, report: Report, system: object) -> list[LayerData]:
    """A SpatialData store: its images and labels (a label image is one by its
    container), the tables' features on those labels, then its points and shapes
    (:mod:`.spatial`)."""
    from napari_ozx.layers.spatial.store import spatialdata_store_layers

    out: list[LayerData] = []
    labels: dict[str, list[LayerData]] = {}
    for path, container in root.spatialdata_elements():
        image = root.image(path)
        if container != "labels":
            out.extend(_image_layers(root, image, report))
            continue
        lds = labels_layer_data(image)
        out.extend(lds)
        labels[path.rsplit("/", 1)[-1]] = lds
    if labels:
        _spatialdata_tables(root, labels, report)
    out.extend(spatialdata_store_layers(root, report, raster=out))
    return out


#: the reader of each kind of root (:attr:`NodeMetadata.kind`); the others read images
_READERS: dict[str, Callable[[OmeZarr, Report, Any], list[LayerData]]] = {
    "plate": _plate_layers,
    "well": _plate_layers,
    "scene": _scene_layers,
    "spatialdata": _spatialdata_layers,
    "collection": _collection_layers,
}


def _image_layers(
    root: OmeZarr, image: OmeImage, report: Report, by_series: bool = False
) -> list[LayerData]:
    """An image's layer, then its label images' and its tables' (a broken label image
    or table is reported, never hides the image); a label image's labels layers."""
    if image.meta.image_label is not None:
        return labels_layer_data(image)
    ld = image_layer_data(image, report=report)
    if by_series:
        ld = _series_named(ld, image)
    out = [ld]
    by_label: dict[str, list[LayerData]] = {}
    for label in image.labels:
        try:
            lds = labels_layer_data(label, to_world=label_to_world(image, label))
        except OzxError as e:
            report(f"{root.source} (labels {label.name!r})", e)
            continue
        out.extend(lds)
        by_label[label.path.rsplit("/", 1)[-1]] = lds
    out.extend(_table_layers(root, image, ld[1], by_label, report))
    return out


def _series_named(ld: LayerData, image: OmeImage) -> LayerData:
    """*ld* with its image's name before each layer name (``Embryo 2: DAPI``): the XML's
    ``Image@Name``, else the image's path (bioformats2raw: its series)."""
    from napari_ozx.ngff.read.omexml import series_label

    label = series_label(image)
    data, kwargs, kind = ld
    names = kwargs.get("name")
    one = lambda n: n if str(n).startswith(f"{label}: ") else f"{label}: {n}"  # noqa: E731
    kwargs = {**kwargs, "name": [one(n) for n in names] if isinstance(names, list) else one(names)}
    return (data, kwargs, kind)


def _table_layers(
    root: OmeZarr,
    image: OmeImage,
    image_kwargs: dict[str, object],
    labels: dict[str, list[LayerData]],
    report: Report,
) -> list[LayerData]:
    """The image's tables (:mod:`.tables`): ROI tables as Shapes layer data, feature
    tables as its labels' ``features``. A table never stops the read."""
    from napari_ozx.layers.tables import image_table_layers

    try:
        return image_table_layers(root, image, image_kwargs, labels, report)
    except OzxError as e:
        report(f"{root.source} (tables of {image.path or '/'!r})", e)
    except Exception:  # a table must never stop a read that worked
        logger.warning("napari-ozx: tables of %s not shown", root.source, exc_info=True)
    return []


def _spatialdata_tables(root: OmeZarr, labels: dict[str, list[LayerData]], report: Report) -> None:
    from napari_ozx.layers.tables import spatialdata_features

    try:
        spatialdata_features(root, labels, report)
    except OzxError as e:
        report(f"{root.source} (tables)", e)
    except Exception:  # a table must never stop a read that worked
        logger.warning("napari-ozx: tables of %s not shown", root.source, exc_info=True)


def table_layer_data(
    path: str, table: str, image: str = "", report: Report | None = None
) -> LayerData:
    """A ROI (or masking ROI) table as napari Shapes layer data, whatever its size.

    The reader reads only small tables when an image opens; this reads any. For a feature
    table use :func:`napari_ozx.read_table` and
    :func:`napari_ozx.layers.tables.labels_features` on its labels layer.

    Parameters
    ----------
    path : str
        The OME-Zarr directory, ``.ozx`` file or URL.
    table : str
        The table's name.
    image : str, default ""
        The image's group in the hierarchy; "" is the root.
    report : callable, optional
        Called as ``report(message, error)`` for what cannot be shown.

    Returns
    -------
    tuple
        napari layer data ``(data, attributes, "shapes")``, placed as the image is.

    Raises
    ------
    TableError
        The table cannot be read, or is not a ROI table.
    """
    from napari_ozx.errors import TableError
    from napari_ozx.layers.tables import roi_shapes_layer_data
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.tables.read import read_table

    with open_ome_zarr(path) as root:
        data = read_table(root, table, image)
        if not data.info.is_roi:
            raise TableError(
                f"a {data.info.type} is no ROI table: not a Shapes layer", table, str(path)
            )
        img = root.image(image)
        kwargs = image_layer_data(img, report=report)[1]
        return roi_shapes_layer_data(data, img, kwargs, report)


def label_to_world(image: OmeImage, label: OmeImage) -> Transform | None:
    """Where a label image of *image* is shown: its own coordinate systems when it has
    more than its intrinsic one, else the image's (0.6 "labels": without a transformation
    between them, the label image's intrinsic system "is usually understood to be the
    same as" the image's), so labels stay on their image wherever that is shown."""
    ims, lms = image.multiscale, label.multiscale
    if len(lms.systems) > 1 or ims.default_system == ims.intrinsic:
        return None
    try:
        return ims.transform_to(ims.default_system)
    except OzxError:
        return None  # the image's own placement reports it


def _scene(root: OmeZarr) -> Scene:
    scene = root.root.meta.scene
    if scene is None:
        raise OzxError(f"{root.source}: not an OME-Zarr scene")
    return scene


def scene_systems(root: OmeZarr) -> list[tuple[str, str]]:
    """The coordinate systems a scene's images can be shown in, as ``(path, name)``: the
    scene's own (path ``""``) first, in file order, then each image's."""
    scene = _scene(root)
    out = [("", c.name) for c in scene.coordinate_systems]
    for image in root.images():
        out.extend((image.path, c.name) for c in image.multiscale.systems)
    return list(dict.fromkeys(out))


def default_scene_system(root: OmeZarr, images: Sequence[OmeImage]) -> tuple[str, str]:
    """Where a scene is shown by default: the scene's first coordinate system (the
    spec's recommendation), else the first image's intrinsic system."""
    scene = _scene(root)
    if scene.coordinate_systems:
        return ("", scene.coordinate_systems[0].name)
    if not images:
        raise OzxError(f"{root.source}: the scene names no image")
    return (images[0].path, images[0].multiscale.intrinsic)


def parse_system(text: str) -> tuple[str, str]:
    """A coordinate system named by the user: ``name`` (the scene's own) or
    ``path:name`` (a system of the image at *path*)."""
    from napari_ozx.ngff.model.graph import parse_key

    return parse_key(text)


def scene_to_world(
    graph: TransformGraph, image: OmeImage, target: tuple[str, str], report: Report, what: str
) -> Transform | None:
    """The transformation from *image*'s intrinsic system to the scene's *target*, or
    None (reported: the image is then shown in its own system)."""
    try:
        return graph.path((image.path, image.multiscale.intrinsic), target)
    except OzxError as e:
        report(what, OzxError(f"not placed in {':'.join(target).lstrip(':')!r}: {e}"))
        return None


def _member_to_world(
    root: OmeZarr,
    graph: TransformGraph,
    image: OmeImage,
    target: tuple[str, str],
    report: Report,
    what: str,
) -> Transform | None:
    """Where an RFC-8 collection places a member image: through its scene where a
    transformation names the image; else in the image's own coordinate system (silently
    where the collection places it nowhere, reported where it lies outside the
    collection, which its scene cannot name)."""
    if image.root is not root:
        where = image.root.source
        report(what, OzxError(f"{where} is outside the collection: shown in its own system"))
        return None
    if image.path not in _scene(root).image_paths:
        return None
    return scene_to_world(graph, image, target, report, what)


def _member_named(ld: LayerData, image: OmeImage, member: str) -> LayerData:
    """An RFC-8 member's layer named by its node (``Tile 0``, ``Tile 0: DAPI``)."""
    data, kwargs, kind = ld
    names = kwargs.get("name")

    def one(n: object) -> str:
        return member if n == image.name else f"{member}: {n}"

    kwargs = {**kwargs, "name": [one(n) for n in names] if isinstance(names, list) else one(names)}
    return (data, kwargs, kind)


def scene_layer_data(
    root: OmeZarr, report: Report | None = None, system: str | tuple[str, str] | None = None
) -> list[LayerData]:
    """A 0.6 scene: each image it names (and its labels) placed in one coordinate system.

    *system* is ``(path, name)`` or its text form (:func:`parse_system`); default:
    :func:`default_scene_system`. The transformation from each image's intrinsic system
    to it is found through the hierarchy's transformation graph (inverting what the spec
    allows). An image that cannot reach it is shown in its own intrinsic system, with one
    report naming the image and the reason: never drawn in a place the metadata does not
    give it.
    """
    report = report or _log_report
    images = root.images()
    target = parse_system(system) if isinstance(system, str) else system
    target = target or default_scene_system(root, images)
    graph = root.transform_graph
    out: list[LayerData] = []
    for image in images:
        what = f"{root.source} ({image.path})"
        member = root.collection.name_of(image, image.root is root) if root.collection else None
        if member is None:
            to_world = scene_to_world(graph, image, target, report, what)
        else:
            to_world = _member_to_world(root, graph, image, target, report, what)
        src = dataclasses.replace(layer_source(image), scene_system=":".join(target).lstrip(":"))
        ld = image_layer_data(image, src, to_world=to_world, report=report)
        out.append(ld if member is None else _member_named(ld, image, member))
        for label in image.labels:
            try:
                lsrc = dataclasses.replace(src, node=label.path, kind="labels")
                out.extend(labels_layer_data(label, lsrc, to_world=to_world, report=report))
            except OzxError as e:
                report(f"{what} (labels {label.name!r})", e)
    return out


def _written_by_spatialdata(root: OmeZarr) -> bool:
    """A SpatialData store, or one of its elements opened alone (its version
    "0.5-dev-spatialdata")."""
    meta = root.root.meta
    return meta.kind == "spatialdata" or "spatialdata" in str(meta.declared_version or "")


def warn_broken_rules(root: OmeZarr) -> None:
    """A file that breaks an OME-Zarr MUST but still reads gets one logged warning naming
    the first broken rule (the plate and its wells, not every field's pyramid). What
    spatialdata writes in every store (``WRITTEN_BY_SPATIALDATA``: omero channels with
    a label only, its transformations) is normal input there: not warned about
    (``validate`` still reports it)."""
    from napari_ozx.ngff.validate.walk import validate_documents
    from napari_ozx.ozx.protocol import as_container
    from napari_ozx.ozx.remote import is_url

    if is_url(root.source):  # each document is a round trip: `napari-ozx validate` it
        return
    try:
        findings = validate_documents(root, fields=False, tables=False)
    except Exception:  # the check must never stop a read that worked
        logger.debug("rule check of %s failed", root.source, exc_info=True)
        return
    normal: frozenset[str] = frozenset()
    if _written_by_spatialdata(root):
        from napari_ozx.ngff.validate.spatialdata import WRITTEN_BY_SPATIALDATA

        normal = WRITTEN_BY_SPATIALDATA  # what spatialdata always writes: normal input
    errors = [
        (f.node, f.message, f.section, f.rule)
        for f in findings
        if f.severity == "error" and f.code not in normal
    ]
    if root.zarr_format == 2 and as_container(root.store) is not None:
        from napari_ozx.ozx import rfc9

        where = rfc9.ROOT.citation
        errors.insert(0, ("/", "Zarr v2 (.zattrs) in a ZIP archive", where, rfc9.ROOT.text))
    if not errors:
        return
    node, message, section, rule = errors[0]
    logger.warning(
        "%s breaks an OME-Zarr rule%s: %s: %s. %s: %s (napari-ozx validate lists all)",
        root.source,
        " (and more)" if len(errors) > 1 else "",
        node,
        message,
        section,
        rule,
    )


# ---------------------------------------------------------------- image layers


def _units(axes: Sequence[Axis]) -> tuple[str, ...]:
    out = []
    for a in axes:
        u = a.unit
        out.append(u if u in SPACE_UNITS or u in TIME_UNITS else "pixel")
    return tuple(out)


def _labels(axes: Sequence[Axis]) -> tuple[str, ...]:
    """napari's axis labels: each axis name with its RFC-4 direction, low to high
    coordinates (``y (anterior→posterior)``), so the sliders and status bar name it."""
    return tuple(axis_label(a.name, a.orientation) for a in axes)


def orientations(ms: Multiscale) -> dict[str, dict[str, str]] | None:
    """The RFC-4 orientations of an image's axes (its intrinsic system's, then those of
    its other coordinate systems), by axis name, as written; None where there are none."""
    out: dict[str, dict[str, str]] = {}
    for axis in (*ms.axes, *(a for s in ms.systems for a in s.axes)):
        if axis.orientation is not None:
            out.setdefault(axis.name, axis.orientation.to_json())
    return out or None


def _drop(seq: Sequence[_T], axis: int | None) -> tuple[_T, ...]:
    return tuple(v for i, v in enumerate(seq) if i != axis)


def _colormap(color: str | None) -> str | None:
    if color is None:
        return None
    return _NAMED_COLORMAPS.get(color, f"#{color.lower()}")


def layer_source(image: OmeImage | OverviewImage, kind: LayerKind = "image") -> LayerSource:
    """The :class:`LayerSource` of an opened image (or label image)."""
    return LayerSource(
        source=str(image.root.source),
        node=image.path,
        kind=kind,
        version=image.multiscale.version,
        zarr_format=image.root.zarr_format,
        levels=len(image.levels),
        pyramid=pyramid_record(image),
        orientation=orientations(image.multiscale),
    )


#: a multiscale's ``metadata`` larger than this (as JSON) is not carried in layer metadata
_PYRAMID_METADATA_MAX = 64 << 10


def pyramid_record(image: OmeImage | OverviewImage) -> dict[str, Any] | None:
    """What a save needs to write *image*'s levels as stored (``None``: one level): per
    level, over the layer's axes (the channel axis dropped), its array path, shape, and
    scale and translation relative to level 0 (factor of level 0's scale, offset in
    level-0 pixels), which hold wherever the layer is moved to; the multiscale's ``type``
    and ``metadata``. JSON-able: it lives in the layer's metadata."""
    ms = image.multiscale
    levels = image.levels
    if len(levels) < 2:
        return None
    keep = [i for i in range(ms.ndim) if i != ms.channel_axis]
    s0, t0 = ms.datasets[0].scale, ms.datasets[0].translation
    rec: dict[str, Any] = {
        "paths": [ds.path for ds in ms.datasets],
        "shapes": [[int(lvl.shape[i]) for i in keep] for lvl in levels],
        "factors": [[ds.scale[i] / s0[i] if s0[i] else 1.0 for i in keep] for ds in ms.datasets],
        "offsets": [
            [(ds.translation[i] - t0[i]) / s0[i] if s0[i] else 0.0 for i in keep]
            for ds in ms.datasets
        ],
    }
    if ms.type:
        rec["type"] = ms.type
    if ms.metadata:
        try:
            if len(json.dumps(ms.metadata)) <= _PYRAMID_METADATA_MAX:
                rec["metadata"] = dict(ms.metadata)
        except (TypeError, ValueError):
            pass
    return rec


def _metadata(src: LayerSource, channels: int | None) -> dict[str, Any] | list[dict[str, Any]]:
    """Layer metadata: one dict, or one per channel when napari splits a channel axis
    (napari hands each channel layer its own element of a list)."""
    if channels is None:
        return src.to_metadata()
    return [dataclasses.replace(src, channel=i).to_metadata() for i in range(channels)]


# ------------------------------------------------------------------- placement


def placement(
    ms: Multiscale,
    to_world: Transform | None = None,
    system: str | None = None,
    report: Report | None = None,
    what: str = "",
) -> Placement:
    """napari's ``scale`` / ``translate`` (and ``affine`` where those do not suffice),
    ``axis_labels`` and ``units`` that put every level-0 pixel where the metadata says.

    Level 0 maps to the intrinsic system by its dataset scale and translation; from there
    the image is shown in *system* (default: the first coordinate system it lists, see
    :attr:`Multiscale.default_system`) through its multiscale-level transformations, or
    through *to_world* (a transformation from the intrinsic system, e.g. to a scene's
    system). A per-axis scale and translation folds into napari's ``scale`` /
    ``translate``; any other linear result (rotation, affine, mapAxis, sequences and
    byDimension of those) becomes napari's ``affine``, applied after them as in the spec.
    A path that is not linear (displacements, coordinates, projectAxis) or cannot be
    computed shows the image in its intrinsic system, reported once, naming why.
    """
    c = ms.channel_axis
    ds0 = ms.datasets[0]
    out: Placement = {
        "scale": _drop(ds0.scale, c),
        "translate": _drop(ds0.translation, c),
        "axis_labels": _drop(_labels(ms.axes), c),
        "units": _drop(_units(ms.axes), c),
    }
    target = system or ms.default_system
    if to_world is None and target == ms.intrinsic:
        return out
    try:
        t = to_world if to_world is not None else ms.transform_to(target)
        m = t.matrix(ms.ndim)  # an identity (SpatialData writes them) needs the size
        if m is None:
            raise OzxError(
                f"the {getattr(t, 'type', '?')} transformation to {target!r} is not linear: "
                f"shown in its intrinsic coordinate system {ms.intrinsic!r}"
            )
        m = np.asarray(m, dtype=float)
        if m.shape != (ms.ndim + 1, ms.ndim + 1):
            raise OzxError(
                f"the transformation to {target!r} changes the number of dimensions "
                f"({ms.ndim} -> {m.shape[0] - 1}): shown in its intrinsic coordinate "
                f"system {ms.intrinsic!r}"
            )
    except OzxError as e:
        (report or _log_report)(what or str(ms.name or "image"), e)
        return out
    system_ = ms.system(target) if to_world is None else None
    sys_axes = system_.axes if system_ else None
    if sys_axes is not None:  # outputs named in another order (SpatialData: c, x, y)
        m, sys_axes = _in_input_order(m, ms.axes, sys_axes)
    keep = [i for i in range(ms.ndim) if i != c]
    if c is not None and not (
        np.allclose(np.delete(m[c, :], c), 0) and np.allclose(np.delete(m[:, c], c), 0)
    ):
        logger.warning("%s: the transformation mixes the channel axis; channels kept apart", what)
    sub = m[np.ix_([*keep, ms.ndim], [*keep, ms.ndim])]
    lin = sub[:-1, :-1]
    if sys_axes is not None and len(sys_axes) == ms.ndim:
        out["axis_labels"] = _drop(_labels(sys_axes), c)
        out["units"] = _drop(_units(sys_axes), c)
    if np.allclose(lin, np.diag(np.diag(lin))):
        d = np.diag(lin)
        out["scale"] = tuple(float(a * b) for a, b in zip(out["scale"], d, strict=True))
        out["translate"] = tuple(
            float(a * b + t) for a, b, t in zip(out["translate"], d, sub[:-1, -1], strict=True)
        )
    else:
        out["affine"] = sub
    return out


def _in_input_order(
    m: np.ndarray, in_axes: Sequence[Axis], out_axes: Sequence[Axis]
) -> tuple[np.ndarray, tuple[Axis, ...]]:
    """*m*'s rows (one per output axis) and the output axes in the order of the input
    axes of the same names, when the outputs are those axes in another order (SpatialData
    writes an affine's outputs as ``c, x, y`` over inputs ``c, y, x``): the layer keeps
    its data's axis order, and the placement is the one the scene dock gives by axis
    name (:func:`napari_ozx.ngff.spatial.elements.to_system`). Else both unchanged."""
    names_in, names_out = [a.name for a in in_axes], [a.name for a in out_axes]
    if names_in == names_out or sorted(names_in) != sorted(names_out):
        return m, tuple(out_axes)
    if len(set(names_in)) != len(names_in) or m.shape[0] != len(names_out) + 1:
        return m, tuple(out_axes)
    rows = [names_out.index(n) for n in names_in]
    return m[[*rows, len(rows)], :], tuple(out_axes[i] for i in rows)


def image_layer_data(
    image: OmeImage | OverviewImage,
    source: LayerSource | None = None,
    to_world: Transform | None = None,
    report: Report | None = None,
) -> LayerData:
    ms = image.multiscale
    levels = image.levels
    c = ms.channel_axis
    omero = image.meta.omero
    stats = image.arrays[0].extensions.statistics
    n_channels = levels[0].shape[c] if c is not None else 1

    kwargs: dict[str, Any] = {
        "name": image.name,
        **placement(ms, to_world, report=report, what=f"{image.root.source} ({image.name})"),
        "multiscale": len(levels) > 1,
        "metadata": _metadata(source or layer_source(image), n_channels if c is not None else None),
    }
    channels = list(omero.channels) if omero else []
    if len(channels) != n_channels:
        if channels:
            logger.warning(
                "%s: omero lists %d channels for %d in the data; ignoring omero",
                image.root.source,
                len(channels),
                n_channels,
            )
        channels = []

    def limits(ch: Channel | None) -> list[float] | None:
        if ch is not None and ch.window is not None:
            return [ch.window.start, ch.window.end]
        if (
            stats is not None
            and stats.min is not None
            and stats.max is not None
            and stats.max > stats.min
        ):
            return [float(stats.min), float(stats.max)]
        return None

    if c is not None:
        kwargs["channel_axis"] = c
        if channels:
            kwargs["name"] = [ch.label or f"{image.name} c{i}" for i, ch in enumerate(channels)]
            cmaps = [_colormap(ch.color) for ch in channels]
            if all(cm is not None for cm in cmaps):
                kwargs["colormap"] = cmaps
            kwargs["visible"] = [ch.active for ch in channels]
            lims = [limits(ch) for ch in channels]
            if all(lim is not None for lim in lims):
                kwargs["contrast_limits"] = lims
        else:
            kwargs["name"] = [f"{image.name} c{i}" for i in range(n_channels)]
            lim = limits(None)
            if lim is not None:
                kwargs["contrast_limits"] = [lim] * n_channels
    else:
        ch = channels[0] if channels else None
        if ch is not None:
            if ch.label:
                kwargs["name"] = ch.label
            cm = _colormap(ch.color)
            if cm is not None:
                kwargs["colormap"] = cm
            kwargs["visible"] = ch.active
        lim = limits(ch)
        if lim is not None:
            kwargs["contrast_limits"] = lim
    data = levels if len(levels) > 1 else levels[0]
    return (data, kwargs, "image")


# --------------------------------------------------------------- label layers


def labels_layer_data(
    label: OmeImage,
    source: LayerSource | None = None,
    to_world: Transform | None = None,
    report: Report | None = None,
) -> list[LayerData]:
    """One labels layer per channel of a label image (napari labels have no channels)."""
    ms = label.multiscale
    levels = label.levels
    c = ms.channel_axis
    il = label.meta.image_label
    src = source or layer_source(label, "labels")
    base: dict[str, Any] = {
        **placement(ms, to_world, report=report, what=f"{label.root.source} ({label.name})"),
        "multiscale": len(levels) > 1,
    }
    if il is not None and il.colors:
        cmap: dict[Any, Any] = {None: (0.6, 0.6, 0.6, 1.0), 0: (0.0, 0.0, 0.0, 0.0)}
        cmap.update({lc.value: tuple(x / 255 for x in lc.rgba) for lc in il.colors})
        base["colormap"] = cmap
    if il is not None and il.properties:
        base["features"] = _features(il.properties)

    if not np.issubdtype(levels[0].dtype, np.integer):
        levels = [lvl.astype(np.int64) for lvl in levels]
    n = levels[0].shape[c] if c is not None else 1
    out = []
    for i in range(n):
        if c is not None:
            index = tuple(i if ax == c else slice(None) for ax in range(len(ms.axes)))
            lv = [lvl[index] for lvl in levels]
        else:
            lv = levels
        kw = dict(
            base,
            name=label.name if n == 1 else f"{label.name} c{i}",
            metadata=(dataclasses.replace(src, channel=i) if c is not None else src).to_metadata(),
        )
        from napari_ozx.layers.editable import labels_entry  # editable level 0 where cheap

        out.append(labels_entry(lv, kw))
    return out


def _features(properties: Sequence[Mapping[str, object]]) -> dict[str, list[object]]:
    """image-label ``properties`` -> a features table keyed by label value ('index')."""
    keys: list[str] = []
    for p in properties:
        keys.extend(k for k in p if k != "label-value" and k not in keys)
    table: dict[str, list[object]] = {"index": [p["label-value"] for p in properties]}
    for k in keys:
        table[k] = [p.get(k) for p in properties]
    return table


# ------------------------------------------------------------------ HCS plates


def plate_layer_data(root: OmeZarr, report: Report | None = None) -> list[LayerData]:
    """A plate: its lazy overview (an image layer per channel) and the row / column names
    (a text-only Points layer). A well opened on its own: its fields at full resolution
    side by side as a grid (only the first when it has more than ``GRID_FIELDS_MAX``),
    with their labels. Reads metadata only.

    The layers carry a plate :class:`LayerSource`; the plate navigator finds the plate
    from it (the reader only asks napari to show the navigator).
    """
    from napari_ozx.ngff.read.plate import HcsPlate

    report = report or _log_report
    plate = HcsPlate(root)
    if plate.kind == "well":
        well = plate.wells[0]
        fields = None if len(well.fields) <= GRID_FIELDS_MAX else [0]
        out, errors = well_layer_data(plate, well, fields=fields, grid=True)
        for e in errors:
            report(str(root.source), OzxError(e))
        if not out:
            raise OzxError(f"no field of well {well.name!r} can be read")
        return out
    return overview_layer_data(plate.overview(), report)


def plate_source(plate: HcsPlate, kind: LayerKind = "plate-overview") -> LayerSource:
    """The plate part of a :class:`LayerSource` (node: the plate group)."""
    return LayerSource(
        source=str(plate.oz.source),
        node=plate.path,
        kind=kind,
        zarr_format=plate.oz.zarr_format,
        plate_id=plate.id,
        plate_path=plate.path,
        plate_name=plate.name,
        plate_kind=cast("Literal['plate', 'well']", plate.kind),
    )


def overview_layer_data(ov: Overview, report: Report | None = None) -> list[LayerData]:
    """The overview's image layer data (channel axis split by napari) and the well labels
    (and, for a plate with a condition table, each well's conditions:
    :func:`napari_ozx.layers.tables.well_condition_points`)."""
    plate = ov.plate
    image = ov.as_image()
    src = dataclasses.replace(
        plate_source(plate),
        version=image.multiscale.version,
        field_index=ov.field_index,
        acquisition=ov.acquisition,
        overview_level=ov.level,
    )
    data, kw, kind = image_layer_data(image, src)
    names = kw["name"]
    kw["name"] = (
        [f"overview {n}" for n in names] if isinstance(names, list) else f"overview {names}"
    )
    y, x = ov.yx
    units = _units(ov.axes)
    ann = ov.annotations()
    sy, sx = ov.yx_scale
    points_kw: dict[str, Any] = {
        "name": f"{plate.name} wells",
        "features": {"label": [a[2] for a in ann]},
        "text": {"string": "{label}", "color": "white", "size": 10, "anchor": "center"},
        "size": min(sy * ov.pitch[0], sx * ov.pitch[1]) * 0.5,
        "face_color": "transparent",
        "border_color": "transparent",
        "axis_labels": (ov.axes[y].name, ov.axes[x].name),
        "units": (units[y], units[x]),
        "metadata": src.to_metadata(),
    }
    points = np.array([(a[0], a[1]) for a in ann], dtype=float).reshape(-1, 2)
    if plate.kind == "plate" and _has_tables(plate):
        from napari_ozx.layers.tables import well_condition_points

        points = well_condition_points(ov, points, points_kw, report)
    return [(data, kw, kind), (points, points_kw, "points")]


def _has_tables(plate: HcsPlate) -> bool:
    """Whether the plate has a ``tables`` group, where a condition table would be (or
    one that cannot be read, which the tables code reports); without one the plate opens
    without importing the tables code or looking further."""
    from napari_ozx.ngff.read.documents import join_path

    (docs,) = plate.oz.read_docs([join_path(plate.path, "tables")], kind="ome-group")
    return docs is not None


def well_layer_data(
    plate: HcsPlate,
    well: WellInfo | str,
    fields: Sequence[int] | None = None,
    grid: bool = False,
    acquisition: int | None = None,
    overview: Overview | None = None,
) -> tuple[list[LayerData], list[str]]:
    """Full-resolution layer data (images + labels) of a well's fields, placed on its
    overview tile (or as a grid), and the messages of the fields that failed.

    Each field's tables come too, as a plain image's do (:mod:`.tables`): its small ROI
    tables as Shapes layers placed in the plate mosaic exactly as the field is (made
    from the field's layer data after placing), its feature tables as its labels'
    ``features``."""
    opened = plate.open_fields(well, fields, acquisition)
    well = plate.well(well if isinstance(well, str) else well.path)  # now read
    images = [im for im in opened if not isinstance(im, OzxError)]
    errors = [f"well {well.name}: {e}" for e in opened if isinstance(e, OzxError)]
    offsets = plate.placements(well, images, grid=grid, overview=overview)
    base = plate_source(plate, "well")
    field_paths = [f.path for f in well.fields]
    out: list[LayerData] = []
    for img, off in zip(images, offsets, strict=True):
        field = img.path.rsplit("/", 1)[-1]
        prefix = f"{well.name} f{field}" if well.name else f"f{field}"
        src = dataclasses.replace(
            base,
            well=well.path,
            field_path=img.path,
            field_index=field_paths.index(img.path) if img.path in field_paths else None,
        )
        lds: list[tuple[LayerData, OmeImage]] = [
            (image_layer_data(img, _node(src, img)), img),
        ]
        by_label: dict[str, list[LayerData]] = {}
        try:
            for label in img.labels:
                got = labels_layer_data(label, _node(src, label))
                by_label[label.path.rsplit("/", 1)[-1]] = got
                lds.extend((ld, label) for ld in got)
        except OzxError as e:  # a broken label must not hide the field
            errors.append(f"well {well.name} field {field} labels: {e}")
        for (data, kw, kind), node in lds:
            _place(kw, node, off, prefix)
            out.append((data, kw, kind))

        # the field's tables (:func:`_table_layers`) from its placed image layer data: ROI
        # layers named after the field ("B3 f0 FOV_ROI_table"), problems in *errors*
        def report(_what: str, err: OzxError, prefix: str = prefix) -> None:
            errors.append(f"{prefix}: {err}")

        tables = _table_layers(plate.oz, img, lds[0][0][1], by_label, report)
        for _data, kw, _kind in tables:
            kw["name"] = f"{prefix} {kw['name']}"
        out.extend(tables)
    return out, errors


def _node(src: LayerSource, image: OmeImage) -> LayerSource:
    return dataclasses.replace(
        src,
        node=image.path,
        version=image.multiscale.version,
        levels=len(image.levels),
        pyramid=pyramid_record(image),
        orientation=orientations(image.multiscale),
    )


def _place(
    kw: dict[str, object], image: OmeImage, off: tuple[float, float, float], prefix: str
) -> None:
    from napari_ozx.ngff.read.plate import yx_axes

    ms = image.multiscale
    c = ms.channel_axis
    y, x = yx_axes(ms.axes)
    keep = [i for i in range(ms.ndim) if i != c]
    dy, dx, zoom = off
    t = list(cast("Sequence[float]", kw["translate"]))
    sc = list(cast("Sequence[float]", kw["scale"]))
    iy, ix = keep.index(y), keep.index(x)
    t[iy], t[ix] = t[iy] * zoom + dy, t[ix] * zoom + dx
    sc[iy], sc[ix] = sc[iy] * zoom, sc[ix] * zoom
    kw["translate"] = tuple(t)
    kw["scale"] = tuple(sc)
    names = kw["name"]
    kw["name"] = (
        [f"{prefix} {n}" for n in names] if isinstance(names, list) else f"{prefix} {names}"
    )
