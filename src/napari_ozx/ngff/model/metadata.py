"""Typed OME-Zarr metadata, versions 0.1 to 0.6, in one model: 0.6's.

:func:`parse_node_attributes` takes the attributes of one node (a ``zarr.json``'s
``attributes`` or a ``.zattrs``) and returns a :class:`NodeMetadata` of frozen dataclasses:
:class:`Multiscale` (coordinate systems, a :class:`Dataset` per level with its scale /
translation to the image's intrinsic system :data:`INTRINSIC`, transformations to other
systems), :class:`Omero`, :class:`ImageLabel`, :class:`Plate`, :class:`Well`,
:class:`Scene`. 0.1-0.5 are parsed into the same shape, once, here (implied axes, folded
multiscale transforms). Every model serialises itself for 0.4, 0.5 or 0.6
(:meth:`NodeMetadata.to_attributes`), so the writer never writes JSON by hand; what 0.4 /
0.5 cannot hold raises :class:`MetadataError` naming it. :data:`OME_KEYS`: the keys that
make a group OME-Zarr. No file reads, no zarr, napari or Qt.

Version by version, and why not yaozarrs or ome-zarr-models:
``docs/design/metadata-model.md``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

import numpy as np

from napari_ozx.errors import MetadataError
from napari_ozx.ngff.model.orientation import Orientation
from napari_ozx.ngff.model.scale_translation import (
    fold_scale_translation,
    is_scale_translation,
)
from napari_ozx.ngff.model.transforms import Transform, system_name
from napari_ozx.ngff.model.versions import (
    KNOWN_VERSIONS,
    is_06_draft,
    needs_06_shape,
    normalise_version,
    version_key,
)

if TYPE_CHECKING:
    from napari_ozx.ngff.model.collection import Collection

logger = logging.getLogger(__name__)

__all__ = [
    "Acquisition",
    "Axis",
    "Channel",
    "CoordinateSystem",
    "Dataset",
    "ImageLabel",
    "LabelColor",
    "Multiscale",
    "NodeMetadata",
    "Omero",
    "Plate",
    "PlateWell",
    "Scene",
    "Well",
    "WellImage",
    "Window",
    "parse_node_attributes",
]

# Units the OME-Zarr specification allows for space and time axes (UDUNITS-2 names).
SPACE_UNITS = frozenset(
    [
        "angstrom",
        "attometer",
        "centimeter",
        "decimeter",
        "exameter",
        "femtometer",
        "foot",
        "gigameter",
        "hectometer",
        "inch",
        "kilometer",
        "megameter",
        "meter",
        "micrometer",
        "mile",
        "millimeter",
        "nanometer",
        "parsec",
        "petameter",
        "picometer",
        "terameter",
        "yard",
        "yoctometer",
        "yottameter",
        "zeptometer",
        "zettameter",
    ]
)
TIME_UNITS = frozenset(
    [
        "attosecond",
        "centisecond",
        "day",
        "decisecond",
        "exasecond",
        "femtosecond",
        "gigasecond",
        "hectosecond",
        "hour",
        "kilosecond",
        "megasecond",
        "microsecond",
        "millisecond",
        "minute",
        "nanosecond",
        "petasecond",
        "picosecond",
        "second",
        "terasecond",
        "yoctosecond",
        "yottasecond",
        "zeptosecond",
        "zettasecond",
    ]
)
_IMPLIED_AXES = ("t", "c", "z", "y", "x")
_AXIS_TYPE_BY_NAME = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
_HEX_COLOR = re.compile(r"^#?([0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")


def _err(node: str, msg: str) -> MetadataError:
    return MetadataError(f"{node or '/'}: {msg}")


#: the OME-Zarr versions :meth:`NodeMetadata.to_attributes` (and every ``to_json``) writes
WRITE_VERSIONS = ("0.6", "0.5", "0.4")
#: the name of the intrinsic coordinate system given to 0.1-0.5 images (which have one,
#: unnamed) and to images written from napari layers
INTRINSIC = "physical"


def zarr_format_for(version: str) -> Literal[2, 3]:
    """The Zarr format an OME-Zarr *version* is stored in: 3 from 0.5 (RFC-2), else 2.
    ``"auto"``, the writer's default before it resolves (0.5, or 0.6 when a layer needs
    it), is Zarr v3 too."""
    return 3 if version == "auto" or version_key(version) >= (0, 5) else 2


def default_version(zarr_format: int) -> str:
    """The OME-Zarr version assumed when a node declares none."""
    return "0.5" if zarr_format == 3 else "0.4"


def _check_version(version: str) -> None:
    if version not in WRITE_VERSIONS:
        raise MetadataError(
            f"cannot write OME-Zarr {version!r} metadata: only {', '.join(WRITE_VERSIONS)}"
        )


def _versioned(version: str, section: dict[str, object]) -> dict[str, Any]:
    """0.4 puts a ``version`` key in each section; 0.5 has one in the ``ome`` wrapper."""
    return {**section, "version": version} if version == "0.4" else section


# --------------------------------------------------------------------------- axes


@dataclass(frozen=True, slots=True)
class Axis:
    name: str
    # "space" | "time" | "channel" | 0.6's "array" | "coordinate" | "displacement" | custom
    type: str | None = None
    unit: str | None = None
    discrete: bool | None = None  # 0.6
    long_name: str | None = None  # 0.6 ``longName``
    #: RFC-4 anatomical orientation (:mod:`.orientation`), kept as written in every version
    orientation: Orientation | None = None

    @property
    def is_channel(self) -> bool:
        return self.type == "channel" or (self.type is None and self.name == "c")

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        _check_version(version)
        d: dict[str, Any] = {"name": self.name}
        if self.type:
            d["type"] = self.type
        if self.unit:
            d["unit"] = self.unit
        if self.orientation is not None:  # RFC-4, as ngff-zarr writes it in 0.4-0.6
            d["orientation"] = self.orientation.to_json()
        if version_key(version) >= (0, 6):
            if self.discrete is not None:
                d["discrete"] = self.discrete
            if self.long_name:
                d["longName"] = self.long_name
        return d


@dataclass(frozen=True, slots=True)
class CoordinateSystem:
    """A named coordinate system (0.6 ``coordinateSystems`` entry): its axes, in order."""

    name: str
    axes: tuple[Axis, ...]

    @property
    def ndim(self) -> int:
        return len(self.axes)

    def to_json(self, version: str = "0.6") -> dict[str, Any]:
        return {"name": self.name, "axes": [a.to_json(version) for a in self.axes]}


def _parse_system(raw: object, node: str) -> CoordinateSystem:
    if not isinstance(raw, Mapping):
        raise _err(node, f"a coordinate system must be an object, not {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _err(node, f"coordinate system {raw!r} has no name")
    return CoordinateSystem(name, _parse_axes(raw.get("axes"), "0.6", None, f"{node} ({name})"))


def _parse_systems(raw: object, node: str) -> tuple[CoordinateSystem, ...]:
    if not isinstance(raw, list) or not raw:
        raise _err(node, "'coordinateSystems' must be a non-empty list")
    systems = tuple(_parse_system(r, node) for r in raw)
    names = [c.name for c in systems]
    if len(set(names)) != len(names):
        raise _err(node, f"duplicate coordinate system names {names}")
    return systems


def _parse_axes(raw: object, version: str, ndim: int | None, node: str) -> tuple[Axis, ...]:
    if raw is None:
        if ndim is None:
            ndim = 5
        if ndim > 5:
            raise _err(node, f"{ndim}-D data without 'axes' cannot be interpreted")
        names = _IMPLIED_AXES[5 - ndim :]
        return tuple(Axis(n, _AXIS_TYPE_BY_NAME[n]) for n in names)
    if not isinstance(raw, list) or not raw:
        raise _err(node, "'axes' must be a non-empty list")
    axes = []
    for a in raw:
        if isinstance(a, str):  # 0.3
            axes.append(Axis(a, _AXIS_TYPE_BY_NAME.get(a)))
        elif isinstance(a, Mapping) and isinstance(a.get("name"), str):
            unit = a.get("unit")
            discrete = a.get("discrete")
            long_name = a.get("longName")
            axes.append(
                Axis(
                    a["name"],
                    a.get("type") if isinstance(a.get("type"), str) else None,
                    unit if isinstance(unit, str) and unit else None,
                    discrete if isinstance(discrete, bool) else None,
                    long_name if isinstance(long_name, str) and long_name else None,
                    Orientation.parse(a.get("orientation")),
                )
            )
        else:
            raise _err(node, f"invalid axis entry {a!r}")
    axis_names = [a.name for a in axes]
    if len(set(axis_names)) != len(axis_names):
        raise _err(node, f"duplicate axis names {axis_names}")
    return tuple(axes)


# --------------------------------------------------------------------- transforms


@dataclass(frozen=True, slots=True)
class Dataset:
    """One pyramid level: its array path and its physical scale / translation (the level's
    transformation to the intrinsic coordinate system)."""

    path: str
    scale: tuple[float, ...]
    translation: tuple[float, ...]

    def to_json(self, version: str = "0.5", intrinsic: str = INTRINSIC) -> dict[str, Any]:
        """Transforms per dataset (any 0.4/0.5 multiscale-level ones were folded in on
        parsing); the translation only when it is not zero. 0.6 writes the one
        transformation its "multiscales" section allows: a ``scale`` or a ``sequence`` of a
        scale and a translation, from the array (``input.path``) to the intrinsic system."""
        _check_version(version)
        scale: dict[str, Any] = {"type": "scale", "scale": [float(v) for v in self.scale]}
        ct: list[dict[str, Any]] = [scale]
        if any(self.translation):
            ct.append({"type": "translation", "translation": [float(v) for v in self.translation]})
        if version_key(version) >= (0, 6):
            one = ct[0] if len(ct) == 1 else {"type": "sequence", "transformations": ct}
            ct = [{**one, "input": {"path": self.path}, "output": {"name": intrinsic}}]
        return {"path": self.path, "coordinateTransformations": ct}


# -------------------------------------------------------------------- multiscales


@dataclass(frozen=True, slots=True)
class Multiscale:
    """One multiscale image, in the 0.6 model for every version.

    ``axes`` are those of the *intrinsic* coordinate system (the one every level's
    ``Dataset`` transformation maps to); 0.1-0.5 images have only that system (named
    :data:`INTRINSIC`), their multiscale-level scale / translation folded into the datasets.
    0.6 images may define more ``coordinate_systems`` (in file order: the first is where a
    viewer shows the image) and multiscale-level ``transformations`` linking the intrinsic
    system to them (:class:`~.transforms.Transform` objects, parsed when read).
    """

    version: str
    axes: tuple[Axis, ...]
    datasets: tuple[Dataset, ...]
    name: str | None = None
    type: str | None = None  # downsampling method, e.g. "gaussian"
    coordinate_systems: tuple[CoordinateSystem, ...] = ()
    intrinsic: str = INTRINSIC
    transformations: tuple[Transform, ...] = ()
    metadata: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def channel_axis(self) -> int | None:
        for i, a in enumerate(self.axes):
            if a.is_channel:
                return i
        return None

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def systems(self) -> tuple[CoordinateSystem, ...]:
        """Every coordinate system of the image (the intrinsic one at least)."""
        return self.coordinate_systems or (CoordinateSystem(self.intrinsic, self.axes),)

    def system(self, name: str) -> CoordinateSystem | None:
        return next((c for c in self.systems if c.name == name), None)

    @property
    def default_system(self) -> str:
        """Where a viewer shows the image: the first coordinate system listed (a writer that
        means another place than the intrinsic system lists that one first)."""
        return self.systems[0].name

    def to_json(self, version: str | None = None) -> dict[str, Any]:
        """One ``multiscales`` entry for *version* (default: the model's own).

        0.4 and 0.5 have no named coordinate systems: an image whose other systems are
        reached by more than a scale and a translation cannot be written there, and saying
        so (:class:`MetadataError` naming the transformation) beats dropping it."""
        v = version or self.version
        _check_version(v)
        if version_key(v) >= (0, 6):
            d: dict[str, Any] = {
                "coordinateSystems": [c.to_json(v) for c in self.systems],
                "datasets": [ds.to_json(v, self.intrinsic) for ds in self.datasets],
            }
            if self.transformations:
                d["coordinateTransformations"] = [t.to_json() for t in self.transformations]
        else:
            ms = self.folded()
            d = {
                "axes": [a.to_json(v) for a in ms.axes],
                "datasets": [ds.to_json(v) for ds in ms.datasets],
            }
        if self.type is not None:
            d["type"] = self.type
        if self.name:
            d["name"] = self.name
        if self.metadata:  # 0.4-0.6: "information about the downscaling method"
            d["metadata"] = dict(self.metadata)
        return _versioned(v, d)

    def folded(self) -> Multiscale:
        """This image with only its intrinsic system, for 0.4 / 0.5: where the default
        system is reached from the intrinsic one by a per-axis scale and translation, those
        are folded into the datasets (0.4's multiscale-level transform says the same);
        any other transformation raises :class:`MetadataError` naming it."""
        if not self.transformations and len(self.systems) == 1:
            return self
        target = self.default_system
        blocking = [t for t in self.transformations if not is_scale_translation(t)]
        if target == self.intrinsic:
            if blocking:
                raise _err(
                    self.name or "",
                    f"OME-Zarr 0.4 / 0.5 cannot store the {_describe(blocking[0])} to "
                    f"coordinate system {_output_name(blocking[0])!r} (write OME-Zarr 0.6)",
                )
            return replace(self, coordinate_systems=(), transformations=())
        t = self.transform_to(target)
        m = t.matrix()
        lin = None if m is None else np.asarray(m, dtype=float)
        if lin is None or not _is_diagonal(lin[:-1, :-1]):
            raise _err(
                self.name or "",
                f"OME-Zarr 0.4 / 0.5 cannot store the {_describe(t)} from {self.intrinsic!r} "
                f"to {target!r}, where the image is shown (write OME-Zarr 0.6)",
            )
        sc = np.diag(lin[:-1, :-1])
        tr = lin[:-1, -1]
        datasets = tuple(
            Dataset(
                d.path,
                tuple(float(a * b) for a, b in zip(d.scale, sc, strict=True)),
                tuple(float(a * b + c) for a, b, c in zip(d.translation, sc, tr, strict=True)),
            )
            for d in self.datasets
        )
        axes = (self.system(target) or self.systems[0]).axes
        return replace(
            self,
            axes=axes,
            datasets=datasets,
            coordinate_systems=(),
            intrinsic=INTRINSIC,
            transformations=(),
        )

    def transform_to(self, system: str, source: str | None = None) -> Transform:
        """The transformation from *source* (default: the intrinsic system) to *system*,
        through this image's multiscale-level transformations (inverted where their type
        allows). Raises :class:`~napari_ozx.errors.TransformError` when there is none."""
        from napari_ozx.ngff.model.graph import TransformGraph

        g = TransformGraph()
        for c in self.systems:
            g.add_system(("", c.name), c.ndim, c.axes)
        for t in self.transformations:
            i, o = _input_name(t), _output_name(t)
            if i is None or o is None or self.system(i) is None or self.system(o) is None:
                continue  # into a labels image: not a system of this image
            if (t.output and t.output.path) or (t.input and t.input.path):
                continue
            g.add_transform(t, ("", i), ("", o))
        return g.path(("", source or self.intrinsic), ("", system))


def _input_name(t: Transform) -> str | None:
    return t.input.name if t.input is not None else None


def _output_name(t: Transform) -> str | None:
    return t.output.name if t.output is not None else None


def _describe(t: Transform) -> str:
    return f"{t.type} transformation {t.name!r}" if t.name else f"{t.type} transformation"


def _is_diagonal(m: np.ndarray) -> bool:
    return bool(m.shape[0] == m.shape[1] and np.allclose(m, np.diag(np.diag(m))))


def with_implied_scales(ms: Multiscale, shapes: Sequence[Sequence[int]]) -> Multiscale:
    """0.1-0.3 have no coordinateTransformations: a level's scale is implied by the ratio
    of the level-0 shape to its own (translation stays 0)."""
    s0 = shapes[0]
    datasets = tuple(
        replace(d, scale=tuple(a / b if b else 1.0 for a, b in zip(s0, shp, strict=True)))
        for d, shp in zip(ms.datasets, shapes, strict=True)
    )
    return replace(ms, datasets=datasets)


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where a multiscale's levels land: the intrinsic system's axes, every coordinate
    system, the multiscale-level transformations (0.6), and the multiscale-level scale /
    translation (0.4 / 0.5) folded into each level."""

    axes: tuple[Axis, ...]
    systems: tuple[CoordinateSystem, ...] = ()
    intrinsic: str = INTRINSIC
    transformations: tuple[Transform, ...] = ()
    scale: tuple[float, ...] | None = None  #: None: ones
    translation: tuple[float, ...] | None = None  #: None: zeros


def _frame_06(raw: Mapping[str, object], datasets_raw: list[object], node: str) -> _Frame:
    """0.6: the axes live in the intrinsic coordinate system, the one every dataset's
    transformation outputs; multiscale-level transformations link it to others."""
    systems = _parse_systems(raw.get("coordinateSystems"), node)
    outputs: set[str | None] = {
        system_name(t.get("output"))
        for d in datasets_raw
        if isinstance(d, Mapping) and isinstance(d.get("coordinateTransformations"), list)
        for t in d["coordinateTransformations"]
        if isinstance(t, Mapping)
    } - {None}
    if len(outputs) > 1:
        raise _err(
            node,
            f"the datasets' transformations output different coordinate systems "
            f"{sorted(str(o) for o in outputs)}: one intrinsic system expected",
        )
    intrinsic = next((o for o in outputs if o), None) or systems[0].name
    found = next((c for c in systems if c.name == intrinsic), None)
    if found is None:
        raise _err(
            node,
            f"the datasets' transformations output coordinate system {intrinsic!r}, "
            f"which 'coordinateSystems' does not define",
        )
    transformations = _parse_transformations(raw.get("coordinateTransformations"), node)
    return _Frame(found.axes, systems, intrinsic, transformations)


def _frame_draft(
    raw: Mapping[str, object],
    ms_raw: list[Mapping[str, object]],
    version: str,
    ndim_hint: int | None,
    node: str,
) -> _Frame:
    """The 0.6 draft form (SpatialData's "0.5-dev-spatialdata"): multiscale-level
    transformations whose input / output carry their own axes."""
    axes = _parse_axes(raw.get("axes"), version, ndim_hint, node)
    transformations = _parse_transformations(ms_raw, node)
    intrinsic = system_name(ms_raw[0].get("input")) or INTRINSIC
    found_systems = {intrinsic: CoordinateSystem(intrinsic, axes)}
    for t in ms_raw:
        for side in ("input", "output"):
            ref = t.get(side)
            name = system_name(ref)
            if name and name not in found_systems and isinstance(ref, Mapping):
                sys_axes = _parse_axes(ref.get("axes"), "0.6", None, f"{node} ({name})")
                found_systems[name] = CoordinateSystem(name, sys_axes)
    # shown in the first system that is not the intrinsic one
    others = [c for n, c in found_systems.items() if n != intrinsic]
    return _Frame(axes, (*others, found_systems[intrinsic]), intrinsic, transformations)


def _frame(
    raw: Mapping[str, object],
    datasets_raw: list[object],
    version: str,
    node: str,
    ndim_hint: int | None,
) -> _Frame:
    """The frame of a multiscale in whichever form its version writes it."""
    ms_raw = raw.get("coordinateTransformations")
    if "coordinateSystems" in raw or (version_key(version) >= (0, 6) and "axes" not in raw):
        return _frame_06(raw, datasets_raw, node)
    if _draft_transformations(ms_raw):
        return _frame_draft(raw, ms_raw, version, ndim_hint, node)
    axes = _parse_axes(raw.get("axes"), version, ndim_hint, node)
    scale, translation = fold_scale_translation(ms_raw, len(axes), node)
    return _Frame(axes, scale=scale, translation=translation)


def _parse_datasets(datasets_raw: list[object], frame: _Frame, node: str) -> tuple[Dataset, ...]:
    """Each level's scale / translation to the intrinsic system (the dataset's own
    transformation first, then the multiscale-level one)."""
    ndim = len(frame.axes)
    g_scale = frame.scale or (1.0,) * ndim
    g_translation = frame.translation or (0.0,) * ndim
    datasets = []
    seen = set()
    for d in datasets_raw:
        if not isinstance(d, Mapping) or not isinstance(d.get("path"), str) or not d["path"]:
            raise _err(node, f"invalid dataset {d!r}")
        path = d["path"].strip("/")
        if path in seen or ".." in path.split("/"):
            raise _err(node, f"invalid or duplicate dataset path {d['path']!r}")
        seen.add(path)
        s, t = fold_scale_translation(d.get("coordinateTransformations"), ndim, f"{node}/{path}")
        scale = tuple(a * b for a, b in zip(s, g_scale, strict=True))
        translation = tuple(
            a * gs + gt for a, gs, gt in zip(t, g_scale, g_translation, strict=True)
        )
        datasets.append(Dataset(path, scale, translation))
    return tuple(datasets)


def _parse_multiscale(
    raw: object, version: str, node: str, ndim_hint: int | None = None
) -> Multiscale:
    if not isinstance(raw, Mapping):
        raise _err(node, "a 'multiscales' entry must be an object")
    datasets_raw = raw.get("datasets")
    if not isinstance(datasets_raw, list) or not datasets_raw:
        raise _err(node, "multiscales has no 'datasets'")
    frame = _frame(raw, datasets_raw, version, node, ndim_hint)
    name = raw.get("name")
    kind = raw.get("type")
    meta = raw.get("metadata")
    return Multiscale(
        version=version,
        axes=frame.axes,
        datasets=_parse_datasets(datasets_raw, frame, node),
        name=name if isinstance(name, str) and name else None,
        type=kind if isinstance(kind, str) else None,
        coordinate_systems=frame.systems,
        intrinsic=frame.intrinsic,
        transformations=frame.transformations,
        metadata=meta if isinstance(meta, Mapping) else None,
    )


def _draft_transformations(raw: object) -> TypeGuard[list[Mapping[str, object]]]:
    """Multiscale-level transformations with ``input`` / ``output`` (the 0.6 draft form
    that SpatialData writes under 0.5-dev-spatialdata) rather than 0.4's plain ones."""
    return (
        isinstance(raw, list)
        and bool(raw)
        and all(isinstance(t, Mapping) and "input" in t and "output" in t for t in raw)
    )


def _parse_transformations(raw: object, node: str) -> tuple[Transform, ...]:
    """0.6 transformations (of a multiscale or a scene), parsed by :mod:`.transforms`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _err(node, "'coordinateTransformations' must be a list")
    from napari_ozx.ngff.model.transforms import parse_transform

    return tuple(
        parse_transform(t, where=f"{node or '/'} coordinateTransformations[{i}]")
        for i, t in enumerate(raw)
    )


# ------------------------------------------------------------------------- omero


@dataclass(frozen=True, slots=True)
class Window:
    start: float
    end: float
    min: float | None = None
    max: float | None = None

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end}
        if self.min is not None:
            d["min"] = self.min
        if self.max is not None:
            d["max"] = self.max
        return d


@dataclass(frozen=True, slots=True)
class Channel:
    label: str | None = None
    color: str | None = None  # "RRGGBB" upper case, no '#'
    window: Window | None = None
    active: bool = True
    inverted: bool = False

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        d: dict[str, Any] = {"active": self.active}
        if self.label:
            d["label"] = self.label
        if self.color:
            d["color"] = self.color
        if self.window is not None:
            d["window"] = self.window.to_json(version)
        if self.inverted:
            d["inverted"] = True
        return d


@dataclass(frozen=True, slots=True)
class Omero:
    channels: tuple[Channel, ...]
    name: str | None = None
    default_z: int | None = None
    default_t: int | None = None
    model: str | None = None  # "color" | "greyscale"

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        _check_version(version)
        d: dict[str, Any] = {"channels": [c.to_json(version) for c in self.channels]}
        rdefs: dict[str, Any] = {}
        if self.model is not None:
            rdefs["model"] = self.model
        if self.default_z is not None:
            rdefs["defaultZ"] = self.default_z
        if self.default_t is not None:
            rdefs["defaultT"] = self.default_t
        if rdefs:
            d["rdefs"] = rdefs
        if self.name:
            d["name"] = self.name
        return d


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if v == v else None


def _parse_omero(raw: object, node: str) -> Omero | None:
    if not isinstance(raw, Mapping):
        return None
    chans = []
    for c in raw.get("channels") or []:
        if not isinstance(c, Mapping):
            continue
        color = c.get("color")
        if isinstance(color, str) and _HEX_COLOR.match(color):
            color = color.lstrip("#").upper()[:6]
        else:
            color = None
        window = None
        w = c.get("window")
        if isinstance(w, Mapping):
            start, end = _num(w.get("start")), _num(w.get("end"))
            lo, hi = _num(w.get("min")), _num(w.get("max"))
            if start is None:
                start = lo
            if end is None:
                end = hi
            if start is not None and end is not None and end > start:
                window = Window(start, end, lo, hi)
        label = c.get("label")
        chans.append(
            Channel(
                label=str(label) if label is not None and str(label) else None,
                color=color,
                window=window,
                active=bool(c.get("active", True)),
                inverted=bool(c.get("inverted", False)),
            )
        )
    rdefs_raw = raw.get("rdefs")
    rdefs: Mapping[str, Any] = rdefs_raw if isinstance(rdefs_raw, Mapping) else {}
    name = raw.get("name")

    def _int(v: object) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return Omero(
        channels=tuple(chans),
        name=name if isinstance(name, str) else None,
        default_z=_int(rdefs.get("defaultZ")),
        default_t=_int(rdefs.get("defaultT")),
        model=rdefs.get("model") if isinstance(rdefs.get("model"), str) else None,
    )


# ------------------------------------------------------------------------ labels


@dataclass(frozen=True, slots=True)
class LabelColor:
    value: int
    rgba: tuple[int, int, int, int]

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        return {"label-value": self.value, "rgba": list(self.rgba)}


@dataclass(frozen=True, slots=True)
class ImageLabel:
    colors: tuple[LabelColor, ...] = ()
    properties: tuple[Mapping[str, Any], ...] = ()
    source_image: str | None = None

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        _check_version(version)
        d: dict[str, Any] = {"version": version} if version == "0.4" else {}
        if self.colors:
            d["colors"] = [c.to_json(version) for c in self.colors]
        if self.properties:
            d["properties"] = [dict(p) for p in self.properties]
        if self.source_image:
            d["source"] = {"image": self.source_image}
        return d


def _parse_image_label(raw: object, node: str) -> ImageLabel | None:
    if not isinstance(raw, Mapping):
        return None
    colors = []
    for c in raw.get("colors") or []:
        if not isinstance(c, Mapping):
            continue
        v, rgba = c.get("label-value"), c.get("rgba")
        if (
            isinstance(v, int)
            and not isinstance(v, bool)
            and isinstance(rgba, list)
            and len(rgba) == 4
            and all(isinstance(x, int) and 0 <= x <= 255 for x in rgba)
        ):
            colors.append(LabelColor(v, tuple(rgba)))
        else:
            logger.warning("%s: ignoring invalid label colour %r", node, c)
    props = tuple(
        dict(p)
        for p in raw.get("properties") or []
        if isinstance(p, Mapping) and isinstance(p.get("label-value"), int)
    )
    src = raw.get("source")
    src_img = src.get("image") if isinstance(src, Mapping) else None
    return ImageLabel(tuple(colors), props, src_img if isinstance(src_img, str) else None)


# ------------------------------------------------------------------------- plate


@dataclass(frozen=True, slots=True)
class Acquisition:
    id: int
    name: str | None = None
    maximum_field_count: int | None = None

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            d["name"] = self.name
        if self.maximum_field_count is not None:
            d["maximumfieldcount"] = self.maximum_field_count
        return d


@dataclass(frozen=True, slots=True)
class PlateWell:
    path: str  # "A/1"
    row: int
    column: int

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        return {"path": self.path, "rowIndex": self.row, "columnIndex": self.column}


@dataclass(frozen=True, slots=True)
class Plate:
    version: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    wells: tuple[PlateWell, ...]
    acquisitions: tuple[Acquisition, ...] = ()
    field_count: int | None = None
    name: str | None = None

    def to_json(self, version: str | None = None) -> dict[str, Any]:
        v = version or self.version
        _check_version(v)
        d: dict[str, Any] = {}
        if self.name is not None:
            d["name"] = self.name
        if self.acquisitions:
            d["acquisitions"] = [a.to_json(v) for a in self.acquisitions]
        d["rows"] = [{"name": r} for r in self.rows]
        d["columns"] = [{"name": c} for c in self.columns]
        d["wells"] = [w.to_json(v) for w in self.wells]
        if self.field_count is not None:
            d["field_count"] = self.field_count
        return _versioned(v, d)


def _names(raw: object, key: str, node: str) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise _err(node, f"plate has no '{key}' list")
    out = []
    for r in raw:
        n = r.get("name") if isinstance(r, Mapping) else None
        if not isinstance(n, str) or not n:
            raise _err(node, f"invalid plate {key} entry {r!r}")
        out.append(n)
    return tuple(out)


def _parse_plate(raw: object, version: str, node: str) -> Plate:
    if not isinstance(raw, Mapping):
        raise _err(node, "'plate' must be an object")
    rows = _names(raw.get("rows"), "rows", node)
    cols = _names(raw.get("columns"), "columns", node)
    wells = []
    for w in raw.get("wells") or []:
        if not isinstance(w, Mapping) or not isinstance(w.get("path"), str):
            raise _err(node, f"invalid plate well {w!r}")
        path = w["path"].strip("/")
        r, c = w.get("rowIndex"), w.get("columnIndex")
        if not (isinstance(r, int) and isinstance(c, int)):
            # 0.1-0.3: derive the indices from the "row/column" path
            parts = path.split("/")
            if len(parts) != 2 or parts[0] not in rows or parts[1] not in cols:
                raise _err(node, f"well path {path!r} does not name a row and column")
            r, c = rows.index(parts[0]), cols.index(parts[1])
        if not (0 <= r < len(rows) and 0 <= c < len(cols)):
            raise _err(node, f"well {path!r} lies outside the plate")
        wells.append(PlateWell(path, r, c))
    acqs = []
    for a in raw.get("acquisitions") or []:
        if isinstance(a, Mapping) and isinstance(a.get("id"), int):
            mfc = a.get("maximumfieldcount")
            acqs.append(
                Acquisition(
                    a["id"],
                    a.get("name") if isinstance(a.get("name"), str) else None,
                    mfc if isinstance(mfc, int) else None,
                )
            )
    fc = raw.get("field_count")
    name = raw.get("name")
    return Plate(
        version=version,
        rows=rows,
        columns=cols,
        wells=tuple(wells),
        acquisitions=tuple(acqs),
        field_count=fc if isinstance(fc, int) else None,
        name=name if isinstance(name, str) else None,
    )


@dataclass(frozen=True, slots=True)
class WellImage:
    path: str
    acquisition: int | None = None

    def to_json(self, version: str = "0.5") -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path}
        if self.acquisition is not None:
            d["acquisition"] = self.acquisition
        return d


@dataclass(frozen=True, slots=True)
class Well:
    version: str
    images: tuple[WellImage, ...]

    def to_json(self, version: str | None = None) -> dict[str, Any]:
        v = version or self.version
        _check_version(v)
        return _versioned(v, {"images": [i.to_json(v) for i in self.images]})


def _parse_well(raw: object, version: str, node: str) -> Well:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("images"), list):
        raise _err(node, "'well' must be an object with an 'images' list")
    imgs = []
    for i in raw["images"]:
        if not isinstance(i, Mapping) or not isinstance(i.get("path"), str):
            raise _err(node, f"invalid well image {i!r}")
        acq = i.get("acquisition")
        imgs.append(WellImage(i["path"].strip("/"), acq if isinstance(acq, int) else None))
    return Well(version, tuple(imgs))


# ------------------------------------------------------------------------- scene


@dataclass(frozen=True, slots=True)
class Scene:
    """0.6 ``scene`` metadata: images placed in shared coordinate systems.

    ``transformations`` link systems of the scene itself (``input`` / ``output`` without a
    ``path``) and of its multiscale images (``path`` names the image group, relative to the
    scene's group)."""

    transformations: tuple[Transform, ...]
    coordinate_systems: tuple[CoordinateSystem, ...] = ()

    @property
    def image_paths(self) -> tuple[str, ...]:
        """The image groups the scene's transformations name, in order of appearance."""
        out: dict[str, None] = {}
        for t in self.transformations:
            for ref in (t.input, t.output):
                path = ref.path if ref is not None else None
                if path is not None and path.strip("/"):
                    out.setdefault(path.strip("/"), None)
        return tuple(out)

    def to_json(self, version: str = "0.6") -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.coordinate_systems:
            d["coordinateSystems"] = [c.to_json(version) for c in self.coordinate_systems]
        d["coordinateTransformations"] = [t.to_json() for t in self.transformations]
        return d


def _parse_scene(raw: object, node: str) -> Scene:
    if not isinstance(raw, Mapping):
        raise _err(node, "'scene' must be an object")
    systems = _parse_systems(raw["coordinateSystems"], node) if "coordinateSystems" in raw else ()
    ts = raw.get("coordinateTransformations")
    if not isinstance(ts, list):
        raise _err(node, "'scene' has no 'coordinateTransformations' list")
    return Scene(_parse_transformations(ts, f"{node}/scene"), systems)


# ---------------------------------------------------------------------- one node


@dataclass(frozen=True, slots=True)
class NodeMetadata:
    """Everything OME about one group, normalised across versions."""

    version: str | None = None
    multiscales: tuple[Multiscale, ...] = ()
    omero: Omero | None = None
    image_label: ImageLabel | None = None
    labels: tuple[str, ...] = ()  # the names listed by a ``labels`` group
    plate: Plate | None = None
    well: Well | None = None
    bioformats2raw_layout: int | None = None
    series: tuple[str, ...] = ()  # bioformats2raw ``OME`` group
    scene: Scene | None = None  # 0.6
    #: a SpatialData store's root (``spatialdata_attrs``, no OME keys of its own): its
    #: ``images/`` and ``labels/`` elements are OME-Zarr images and label images
    spatialdata: bool = False
    #: an RFC-8 collection root (draft): the nodes it lists (:mod:`.collection`)
    collection: Collection | None = field(default=None, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: the version as the node states it ("0.6rc0", "0.6.dev4", "0.5-dev-spatialdata" ...);
    #: ``version`` is the one it is read as (:func:`.versions.normalise_version`)
    declared_version: str | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        if self.plate is not None:
            return "plate"
        if self.well is not None:
            return "well"
        if self.multiscales:
            return "labels-image" if self.image_label is not None else "image"
        if self.scene is not None:
            return "scene"
        if self.labels:
            return "labels-group"
        if self.spatialdata:
            return "spatialdata"
        if self.collection is not None:
            return "rfc8-collection"
        if self.bioformats2raw_layout is not None or self.series:
            return "collection"
        return "none"

    @property
    def is_ome(self) -> bool:
        return self.kind != "none"

    def to_attributes(self, version: str | None = None) -> dict[str, Any]:
        """The group attributes for OME-Zarr *version* (default: the node's own): 0.5
        wraps everything in ``{"ome": {"version": ...}}`` (RFC-2), 0.4 puts each section
        at the top level with its own ``version``. Parsing the result gives this model
        back (with *version*)."""
        v = version or self.version or "0.5"
        _check_version(v)
        d: dict[str, Any] = {}
        if self.bioformats2raw_layout is not None:
            d["bioformats2raw.layout"] = self.bioformats2raw_layout
        if self.multiscales:
            d["multiscales"] = [m.to_json(v) for m in self.multiscales]
        if self.omero is not None:
            d["omero"] = self.omero.to_json(v)
        if self.image_label is not None:
            d["image-label"] = self.image_label.to_json(v)
        if self.labels:
            d["labels"] = list(self.labels)
        if self.plate is not None:
            d["plate"] = self.plate.to_json(v)
        if self.well is not None:
            d["well"] = self.well.to_json(v)
        if self.series:
            d["series"] = list(self.series)
        if self.scene is not None:
            if version_key(v) < (0, 6):
                raise _err("", f"OME-Zarr {v} has no scenes (write OME-Zarr 0.6)")
            d["scene"] = self.scene.to_json(v)
        return {"ome": {"version": v, **d}} if version_key(v) >= (0, 5) else d


#: The keys that make a group's attributes OME-Zarr metadata (0.1-0.6: at the top level up
#: to 0.4, in the ``ome`` object from 0.5); the reader's "is this OME-Zarr at all" and the
#: validator's "OME keys outside the ``ome`` namespace" both ask this one set.
OME_KEYS = frozenset(
    [
        "multiscales",
        "omero",
        "plate",
        "well",
        "labels",
        "image-label",
        "scene",
        "bioformats2raw.layout",
    ]
)


def ome_section(
    attrs: Mapping[str, object], zarr_format: int
) -> tuple[Mapping[str, Any], str | None]:
    """Return the mapping that holds OME keys and the version it declares."""
    ome = attrs.get("ome")
    if zarr_format == 3 and isinstance(ome, Mapping):
        v = ome.get("version")
        return ome, str(v) if v is not None else None
    # Zarr v2 (0.1-0.4) or v3 written without the "ome" namespace (pre-release 0.5)
    version = None
    for key in ("multiscales", "plate", "well", "image-label"):
        sec = attrs.get(key)
        if isinstance(sec, list) and sec and isinstance(sec[0], Mapping):
            sec = sec[0]
        if isinstance(sec, Mapping) and sec.get("version") is not None:
            version = str(sec["version"])
            break
    return attrs, version


def parse_node_attributes(
    attrs: Mapping[str, object],
    zarr_format: int,
    node: str = "",
    ndim_hint: int | None = None,
) -> NodeMetadata:
    """Parse the OME metadata of one group's attributes.

    ``ndim_hint`` is the dimensionality of the first dataset, needed only for 0.1/0.2
    files whose axes are implied.  Raises :class:`MetadataError` when OME metadata is
    present but invalid; returns an empty ``NodeMetadata`` (``is_ome`` false) when none.
    """
    if not isinstance(attrs, Mapping):
        raise _err(node, "attributes must be a JSON object")
    ome, declared = ome_section(attrs, zarr_format)
    version = None if declared is None else normalise_version(declared, node)
    if needs_06_shape(declared):
        # a draft or development tag opens only where its metadata has 0.6's shape
        # (coordinateSystems)
        ms_list = ome.get("multiscales")
        if isinstance(ms_list, list) and any(
            isinstance(m, Mapping) and "coordinateSystems" not in m for m in ms_list
        ):
            what = "a draft of 0.6" if is_06_draft(declared) else "a development version"
            raise _err(
                node,
                f"unsupported OME-Zarr version {declared!r}: {what} whose "
                f"multiscales have no coordinateSystems (napari-ozx reads "
                f"{', '.join(KNOWN_VERSIONS)})",
            )
    if zarr_format == 3 and version is not None and version_key(version) < (0, 5):
        logger.warning("%s: OME-Zarr %s metadata in Zarr v3 (RFC-2 expects 0.5)", node, version)
    v = version or default_version(zarr_format)

    multiscales: tuple[Multiscale, ...] = ()
    ms_raw = ome.get("multiscales")
    if ms_raw is not None:
        if not isinstance(ms_raw, list) or not ms_raw:
            raise _err(node, "'multiscales' must be a non-empty list")
        multiscales = tuple(_parse_multiscale(m, v, node, ndim_hint) for m in ms_raw)

    labels_raw = ome.get("labels")
    labels = (
        tuple(dict.fromkeys(x.strip("/") for x in labels_raw if isinstance(x, str) and x))
        if isinstance(labels_raw, list)
        else ()
    )
    plate = _parse_plate(ome["plate"], v, node) if "plate" in ome else None
    well = _parse_well(ome["well"], v, node) if "well" in ome else None
    scene = (
        _parse_scene(ome["scene"], node) if "scene" in ome and version_key(v) >= (0, 6) else None
    )
    b2r = attrs.get("bioformats2raw.layout", ome.get("bioformats2raw.layout"))
    series_raw = ome.get("series", attrs.get("series"))
    series = (
        tuple(s for s in series_raw if isinstance(s, str)) if isinstance(series_raw, list) else ()
    )
    return NodeMetadata(
        version=version,
        multiscales=multiscales,
        omero=_parse_omero(ome.get("omero"), node),
        image_label=_parse_image_label(ome.get("image-label"), node),
        labels=labels,
        plate=plate,
        well=well,
        bioformats2raw_layout=b2r if isinstance(b2r, int) else None,
        series=series,
        scene=scene,
        spatialdata=isinstance(attrs.get("spatialdata_attrs"), Mapping),
        collection=_collection(ome),
        raw=attrs,
        declared_version=declared,
    )


def has_ome_keys(attrs: Mapping[str, object]) -> bool:
    """Cheap check used by ``get_reader``: does a node look like OME-Zarr at all?"""
    ome = attrs.get("ome")
    if isinstance(ome, Mapping):
        attrs = ome
    return (
        any(k in attrs for k in OME_KEYS)
        or isinstance(attrs.get("spatialdata_attrs"), Mapping)  # a SpatialData store
        or is_collection_document(attrs)  # an RFC-8 collection (draft)
    )


def is_collection_document(ome: object) -> bool:
    """Whether an ``ome`` object is an RFC-8 collection node (cheap: ``get_reader``; the
    collection model, :mod:`.collection`, is imported only to parse one)."""
    return (
        isinstance(ome, Mapping)
        and ome.get("type") == "collection"
        and isinstance(ome.get("nodes"), list)
    )


def _collection(ome: Mapping[str, Any]) -> Collection | None:
    if not is_collection_document(ome):
        return None
    from napari_ozx.ngff.model.collection import parse_collection

    return parse_collection(ome)
