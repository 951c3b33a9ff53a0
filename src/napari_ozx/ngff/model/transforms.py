"""OME-Zarr 0.6 coordinate transformations: parse, apply to points, invert, compose.

One frozen dataclass per type of the 0.6 specification (identity, mapAxis, projectAxis,
translation, scale, affine, rotation, sequence, byDimension, bijection, displacements,
coordinates), each a :class:`Transform` that parses (:func:`parse_transform`, a
:class:`TransformError` naming it), serialises (``to_json``), maps points (``apply``),
inverts where the spec gives a closed form (``inverse``) and gives its homogeneous matrix
when linear (``matrix``). :func:`compose` chains them; :func:`simplest` writes a matrix as
the least expressive equivalent; :class:`SystemRef` / :func:`system_ref` parse an
``input`` / ``output`` reference. Pure numpy; arrays a transformation stores are loaded
through a ``load_array`` callback. Conventions: ``docs/design/metadata-model.md``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from napari_ozx.errors import TransformError

__all__ = [
    "Affine",
    "Bijection",
    "ByDimension",
    "Coordinates",
    "Displacements",
    "Identity",
    "MapAxis",
    "ProjectAxis",
    "Rotation",
    "Scale",
    "Sequence_",
    "SystemRef",
    "Transform",
    "Translation",
    "VectorField",
    "compose",
    "parse_transform",
    "simplest",
    "system_name",
    "system_ref",
]

#: how far from orthonormal (and from determinant 1) a rotation matrix may be to be read
ROTATION_TOLERANCE = 5e-3

#: loads a Zarr array named by a transformation's ``path`` (relative to the group that
#: holds the transformation): parameters, or a displacement / coordinate field
ArrayLoader = Callable[[str], ArrayLike]
#: loads the displacement / coordinate field at a transformation's ``path``
FieldLoader = Callable[[str], "VectorField | None"]


@dataclass(frozen=True, slots=True)
class SystemRef:
    """A reference to a coordinate system: its ``name`` and, where it is defined in
    another group, that group's ``path`` (spec "input / output")."""

    name: str | None = None
    path: str | None = None

    @classmethod
    def parse(cls, raw: object) -> SystemRef | None:
        """The spec's object ``{"name": ..., "path": ...}``, a bare string (the RFC-5
        conformance suite, the 0.6rc0 test hierarchies) or SpatialData's draft object
        ``{"name": ..., "axes": [...]}`` (:func:`system_ref`); ``None`` when absent, and
        :class:`TransformError` for anything else."""
        if raw is None:
            return None
        ref = system_ref(raw)
        if ref is None:
            raise TransformError(f"invalid coordinate system reference {raw!r}")
        return ref

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.name is not None:
            d["name"] = self.name
        if self.path is not None:
            d["path"] = self.path
        return d

    def __str__(self) -> str:
        return f"{self.path}:{self.name}" if self.path else str(self.name)


def system_ref(raw: object) -> SystemRef | None:
    """The one reading of a transformation's ``input`` / ``output`` (spec "input /
    output"), shared by the reader, the validator and the graph: the spec's object
    ``{"name": ..., "path": ...}`` or a bare string (the name); an empty name or path is
    none. ``None`` when *raw* is neither a string nor an object."""
    if isinstance(raw, str):
        return SystemRef(raw or None)
    if isinstance(raw, Mapping):
        name, path = raw.get("name"), raw.get("path")
        return SystemRef(
            name if isinstance(name, str) and name else None,
            path if isinstance(path, str) and path else None,
        )
    return None


def system_name(raw: object) -> str | None:
    """The coordinate system name an ``input`` / ``output`` names, if any."""
    ref = system_ref(raw)
    return None if ref is None else ref.name


def _apply_matrix(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Points (``(n, in)``) through a homogeneous matrix (``(out+1) x (in+1)``)."""
    out: np.ndarray = p @ m[:-1, :-1].T + m[:-1, -1]
    return out


def _as_points(points: ArrayLike, dim: int | None, what: str) -> np.ndarray:
    p = np.asarray(points, dtype=float)
    if p.ndim == 1:
        p = p[None, :]
    if p.ndim != 2 or (dim is not None and p.shape[1] != dim):
        raise TransformError(
            f"{what}: points of {p.shape[-1] if p.ndim else 0} coordinates, expected {dim}"
        )
    return p


@dataclass(frozen=True, kw_only=True)
class Transform:
    """Base of every transformation type."""

    type: ClassVar[str] = ""
    input: SystemRef | None = None
    output: SystemRef | None = None
    name: str | None = None

    # -- description
    @property
    def label(self) -> str:
        return f"{self.type} transformation {self.name!r}" if self.name else f"{self.type}"

    @property
    def in_dim(self) -> int | None:
        return None

    @property
    def out_dim(self) -> int | None:
        return self.in_dim

    @property
    def is_linear(self) -> bool:
        return self.matrix() is not None

    # -- behaviour (subclasses)
    def apply(self, points: ArrayLike) -> np.ndarray:
        m = self.matrix(_as_points(points, self.in_dim, self.label).shape[1])
        if m is None:  # pragma: no cover - every non-linear type overrides apply
            raise TransformError(f"{self.label} cannot be applied")
        return _apply_matrix(_as_points(points, m.shape[1] - 1, self.label), m)

    def inverse(self) -> Transform:
        raise TransformError(f"{self.label} has no closed-form inverse")

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        """The homogeneous ``(out+1) x (in+1)`` matrix of a linear transformation, else
        None. *n*: the input dimension where the parameters do not fix it."""
        return None

    def params(self) -> dict[str, Any]:
        return {}

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, **self.params()}
        if self.name is not None:
            d["name"] = self.name
        if self.input is not None:
            d["input"] = self.input.to_json()
        if self.output is not None:
            d["output"] = self.output.to_json()
        return d

    def _flipped(self, t: Transform) -> Transform:
        """*t* as this transformation's inverse: input and output swapped."""
        return dataclasses.replace(t, input=self.output, output=self.input, name=None)


def _floats(v: object, what: str) -> tuple[float, ...]:
    if not isinstance(v, list | tuple | np.ndarray) or not len(v):
        raise TransformError(f"{what} must be a non-empty list of numbers, not {v!r}")
    try:
        out = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        raise TransformError(f"{what} must be a list of numbers, not {v!r}") from None
    if any(isinstance(x, bool) for x in v) or not all(math.isfinite(x) for x in out):
        raise TransformError(f"{what} must be finite numbers, not {v!r}")
    return out


def _matrix(v: object, what: str) -> tuple[tuple[float, ...], ...]:
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, list | tuple) or not v:
        raise TransformError(f"{what} must be a 2-D array (a list of rows), not {v!r}")
    rows = tuple(_floats(r, f"{what} row {i}") for i, r in enumerate(v))
    if len({len(r) for r in rows}) != 1:
        raise TransformError(f"{what}: rows of different lengths {[len(r) for r in rows]}")
    return rows


@dataclass(frozen=True, kw_only=True)
class Identity(Transform):
    type: ClassVar[str] = "identity"
    ndim: int | None = None

    @property
    def in_dim(self) -> int | None:
        return self.ndim

    def apply(self, points: ArrayLike) -> np.ndarray:
        return _as_points(points, self.ndim, self.label).copy()

    def inverse(self) -> Transform:
        return self._flipped(self)

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        n = self.ndim or n
        return None if n is None else np.eye(n + 1)

    @property
    def is_linear(self) -> bool:
        return True


@dataclass(frozen=True)
class MapAxis(Transform):
    """``out[i] = in[mapAxis[i]]`` (spec "mapAxis")."""

    type: ClassVar[str] = "mapAxis"
    map_axis: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.map_axis)
        if sorted(self.map_axis) != list(range(n)):
            raise TransformError(
                f"{self.label}: mapAxis {list(self.map_axis)} must list each of the "
                f"{n} input axes 0..{n - 1} exactly once"
            )

    @property
    def in_dim(self) -> int | None:
        return len(self.map_axis)

    def inverse(self) -> Transform:
        inv = [0] * len(self.map_axis)
        for i, j in enumerate(self.map_axis):
            inv[j] = i
        return self._flipped(MapAxis(tuple(inv)))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        k = len(self.map_axis)
        m = np.zeros((k + 1, k + 1))
        for i, j in enumerate(self.map_axis):
            m[i, j] = 1.0
        m[k, k] = 1.0
        return m

    def params(self) -> dict[str, Any]:
        return {"mapAxis": list(self.map_axis)}


@dataclass(frozen=True)
class ProjectAxis(Transform):
    """Drops input dimensions and creates output ones (set to 0) (spec "projectAxis")."""

    type: ClassVar[str] = "projectAxis"
    dropped_inputs: tuple[int, ...] = ()
    created_outputs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for what, v in (
            ("droppedInputs", self.dropped_inputs),
            ("createdOutputs", self.created_outputs),
        ):
            if len(set(v)) != len(v) or any(i < 0 for i in v):
                raise TransformError(f"{self.label}: {what} {list(v)} must be unique indices")

    def _matrix_for(self, n: int) -> np.ndarray:
        kept = [i for i in range(n) if i not in self.dropped_inputs]
        if any(i >= n for i in self.dropped_inputs):
            raise TransformError(f"{self.label}: droppedInputs beyond {n} input axes")
        m_out = len(kept) + len(self.created_outputs)
        if any(i >= m_out for i in self.created_outputs):
            raise TransformError(f"{self.label}: createdOutputs beyond {m_out} output axes")
        m = np.zeros((m_out + 1, n + 1))
        src = iter(kept)
        for o in range(m_out):
            if o not in self.created_outputs:
                m[o, next(src)] = 1.0
        m[m_out, n] = 1.0
        return m

    def apply(self, points: ArrayLike) -> np.ndarray:
        p = _as_points(points, None, self.label)
        return _apply_matrix(p, self._matrix_for(p.shape[1]))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        return None if n is None else self._matrix_for(n)

    @property
    def is_linear(self) -> bool:
        return False  # its dimension changes: no viewer transform shows it

    def inverse(self) -> Transform:
        if self.dropped_inputs:
            raise TransformError(f"{self.label} drops input axes: it has no inverse")
        return self._flipped(ProjectAxis(tuple(self.created_outputs), ()))

    def params(self) -> dict[str, Any]:
        return {
            "droppedInputs": list(self.dropped_inputs),
            "createdOutputs": list(self.created_outputs),
        }


@dataclass(frozen=True)
class Translation(Transform):
    type: ClassVar[str] = "translation"
    translation: tuple[float, ...] = ()

    @property
    def in_dim(self) -> int | None:
        return len(self.translation)

    def inverse(self) -> Transform:
        return self._flipped(Translation(tuple(-v for v in self.translation)))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        k = len(self.translation)
        m = np.eye(k + 1)
        m[:k, k] = self.translation
        return m

    def params(self) -> dict[str, Any]:
        return {"translation": list(self.translation)}


@dataclass(frozen=True)
class Scale(Transform):
    type: ClassVar[str] = "scale"
    scale: tuple[float, ...] = ()

    @property
    def in_dim(self) -> int | None:
        return len(self.scale)

    def inverse(self) -> Transform:
        if any(v == 0 for v in self.scale):
            raise TransformError(f"{self.label}: a zero scale {list(self.scale)} has no inverse")
        return self._flipped(Scale(tuple(1.0 / v for v in self.scale)))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        return np.diag([*self.scale, 1.0])

    def params(self) -> dict[str, Any]:
        return {"scale": list(self.scale)}


@dataclass(frozen=True)
class Affine(Transform):
    """``M x (N+1)`` rows of the homogeneous matrix (spec "affine")."""

    type: ClassVar[str] = "affine"
    affine: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.affine or len(self.affine[0]) < 2:
            raise TransformError(
                f"{self.label}: an affine needs M rows of N+1 values (N >= 1), got "
                f"{[list(r) for r in self.affine]}"
            )

    @property
    def in_dim(self) -> int | None:
        return len(self.affine[0]) - 1

    @property
    def out_dim(self) -> int | None:
        return len(self.affine)

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        m = np.zeros((len(self.affine) + 1, len(self.affine[0])))
        m[:-1] = self.affine
        m[-1, -1] = 1.0
        return m

    def inverse(self) -> Transform:
        m = self.matrix()
        assert m is not None
        if m.shape[0] != m.shape[1] or abs(np.linalg.det(m)) < 1e-12:
            raise TransformError(f"{self.label} is not invertible")
        return self._flipped(Affine(_rows(np.linalg.inv(m)[:-1])))

    def params(self) -> dict[str, Any]:
        return {"affine": [list(r) for r in self.affine]}


def _rows(m: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(x) + 0.0 for x in r) for r in m)


@dataclass(frozen=True)
class Rotation(Transform):
    """An ``N x N`` rotation matrix: orthonormal, determinant 1 (spec "rotation")."""

    type: ClassVar[str] = "rotation"
    rotation: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        r = np.asarray(self.rotation, dtype=float)
        n = r.shape[0] if r.ndim == 2 else 0
        if r.ndim != 2 or r.shape != (n, n) or n == 0:
            raise TransformError(f"{self.label}: a rotation is an N x N matrix, got {r.shape}")
        # a reader's tolerance (ROTATION_TOLERANCE): tools write rotations rounded to a few
        # decimals (the RFC-5 conformance suite's [[0.17, -0.985], [0.985, 0.17]] is
        # orthonormal to 1e-3 only)
        off = float(np.abs(r @ r.T - np.eye(n)).max())  # cheaper than np.allclose here
        if off > ROTATION_TOLERANCE or abs(float(np.linalg.det(r)) - 1.0) > ROTATION_TOLERANCE:
            raise TransformError(
                f"{self.label}: the matrix is not a rotation (rows and columns must be "
                f"orthonormal, determinant 1)"
            )

    @property
    def in_dim(self) -> int | None:
        return len(self.rotation)

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        k = len(self.rotation)
        m = np.eye(k + 1)
        m[:k, :k] = self.rotation
        return m

    def inverse(self) -> Transform:
        r = np.asarray(self.rotation, dtype=float)
        if np.allclose(r @ r.T, np.eye(len(r)), atol=1e-12):
            return self._flipped(Rotation(_rows(r.T)))
        # rounded parameters: the exact inverse of the matrix as given, not its transpose
        inv = np.zeros((len(r), len(r) + 1))
        inv[:, :-1] = np.linalg.inv(r)
        return self._flipped(Affine(_rows(inv)))

    def params(self) -> dict[str, Any]:
        return {"rotation": [list(r) for r in self.rotation]}


@dataclass(frozen=True)
class Sequence_(Transform):  # "Sequence" would shadow collections.abc's
    """Apply the transformations in order: ``f2(f1(f0(x)))`` (spec "sequence")."""

    type: ClassVar[str] = "sequence"
    transformations: tuple[Transform, ...] = ()

    @property
    def in_dim(self) -> int | None:
        return next((t.in_dim for t in self.transformations if t.in_dim is not None), None)

    @property
    def out_dim(self) -> int | None:
        for t in reversed(self.transformations):
            if t.out_dim is not None:
                return t.out_dim
        return None

    def apply(self, points: ArrayLike) -> np.ndarray:
        p = _as_points(points, None, self.label)
        for t in self.transformations:
            p = t.apply(p)
        return p

    def inverse(self) -> Transform:
        return self._flipped(Sequence_(tuple(t.inverse() for t in reversed(self.transformations))))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        n = self.in_dim or n
        m: np.ndarray | None = None if n is None else np.eye(n + 1)
        for t in self.transformations:
            if isinstance(t, Identity) and t.ndim is None:
                continue  # changes nothing, whatever the dimension
            tm = t.matrix(None if m is None else m.shape[0] - 1)
            if tm is None or not t.is_linear:
                return None
            m = tm if m is None else tm @ m
        return m

    @property
    def is_linear(self) -> bool:
        return all(t.is_linear for t in self.transformations)

    def params(self) -> dict[str, Any]:
        return {"transformations": [t.to_json() for t in self.transformations]}


@dataclass(frozen=True)
class ByDimension(Transform):
    """Lower-dimensional transformations on subsets of the axes (spec "byDimension"):
    ``parts`` are ``(input axes, output axes, transformation)``."""

    type: ClassVar[str] = "byDimension"
    parts: tuple[tuple[tuple[int, ...], tuple[int, ...], Transform], ...] = ()

    def __post_init__(self) -> None:
        outs = [o for _, oa, _ in self.parts for o in oa]
        if len(set(outs)) != len(outs):
            raise TransformError(f"{self.label}: an output axis appears in several parts {outs}")
        if sorted(outs) != list(range(len(outs))):
            raise TransformError(
                f"{self.label}: the parts' output axes {sorted(outs)} must be 0..N-1, each once"
            )
        for ia, oa, t in self.parts:
            for what, axes, d in (("input", ia, t.in_dim), ("output", oa, t.out_dim)):
                if d is not None and len(axes) != d:
                    raise TransformError(
                        f"{self.label}: {t.label} acts on {d} axes but lists {what} axes "
                        f"{list(axes)}"
                    )

    @property
    def in_dim(self) -> int | None:
        ins = [i for ia, _, _ in self.parts for i in ia]
        return max(ins) + 1 if ins else None

    @property
    def out_dim(self) -> int | None:
        return sum(len(oa) for _, oa, _ in self.parts)

    def apply(self, points: ArrayLike) -> np.ndarray:
        p = _as_points(points, None, self.label)
        out = np.zeros((p.shape[0], self.out_dim or 0))
        for ia, oa, t in self.parts:
            out[:, list(oa)] = t.apply(p[:, list(ia)])
        return out

    def inverse(self) -> Transform:
        ins = [i for ia, _, _ in self.parts for i in ia]
        if sorted(ins) != list(range(len(ins))):
            raise TransformError(f"{self.label} uses an input axis twice: it has no inverse")
        return self._flipped(ByDimension(tuple((oa, ia, t.inverse()) for ia, oa, t in self.parts)))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        n_in = self.in_dim if n is None else max(n, self.in_dim or 0)
        n_out = self.out_dim or 0
        if n_in is None:
            return None
        m = np.zeros((n_out + 1, n_in + 1))
        for ia, oa, t in self.parts:
            tm = t.matrix(len(ia))
            if tm is None or not t.is_linear:
                return None
            if tm.shape != (len(oa) + 1, len(ia) + 1):
                raise TransformError(f"{self.label}: {t.label} does not fit its axes")
            m[np.ix_(list(oa), list(ia))] = tm[:-1, :-1]
            m[list(oa), n_in] = tm[:-1, -1]
        m[n_out, n_in] = 1.0
        return m

    @property
    def is_linear(self) -> bool:
        return all(t.is_linear for _, _, t in self.parts)

    def params(self) -> dict[str, Any]:
        return {
            "transformations": [
                {**t.to_json(), "inputAxes": list(ia), "outputAxes": list(oa)}
                for ia, oa, t in self.parts
            ]
        }


@dataclass(frozen=True)
class Bijection(Transform):
    """An invertible transformation given with its inverse (spec "bijection")."""

    type: ClassVar[str] = "bijection"
    forward: Transform = field(default_factory=Identity)
    backward: Transform = field(default_factory=Identity)

    @property
    def in_dim(self) -> int | None:
        return self.forward.in_dim

    @property
    def out_dim(self) -> int | None:
        return self.forward.out_dim

    def apply(self, points: ArrayLike) -> np.ndarray:
        return self.forward.apply(points)

    def inverse(self) -> Transform:
        return self._flipped(Bijection(forward=self.backward, backward=self.forward))

    def matrix(self, n: int | None = None) -> np.ndarray | None:
        return self.forward.matrix(n) if self.forward.is_linear else None

    @property
    def is_linear(self) -> bool:
        return self.forward.is_linear

    def params(self) -> dict[str, Any]:
        return {"forward": self.forward.to_json(), "inverse": self.backward.to_json()}


@dataclass(frozen=True)
class VectorField:
    """A displacement / coordinate field: ``data`` with the vector components on axis
    ``vector_axis`` (the axis of type "displacement" / "coordinate"), and the field's own
    array-to-input-space ``scale`` / ``translation`` (of its other axes)."""

    data: np.ndarray
    vector_axis: int
    scale: tuple[float, ...]
    translation: tuple[float, ...]


def _sample(f: VectorField, points: np.ndarray, interpolation: str) -> np.ndarray:
    """The field's vectors at *points* (input-space coordinates): inverse of the field's
    own transformation to array coordinates, then linear (default) or nearest
    interpolation, clamped at the edges."""
    grid = np.moveaxis(f.data, f.vector_axis, -1)
    shape = np.array(grid.shape[:-1])
    idx = (points - np.asarray(f.translation)) / np.asarray(f.scale)
    if interpolation == "nearest":
        i = np.clip(np.rint(idx).astype(int), 0, shape - 1)
        nearest: np.ndarray = grid[tuple(i.T)]
        return nearest
    lo = np.clip(np.floor(idx).astype(int), 0, shape - 1)
    hi = np.clip(lo + 1, 0, shape - 1)
    w = np.clip(idx - lo, 0.0, 1.0)
    out = np.zeros((points.shape[0], grid.shape[-1]))
    d = len(shape)
    for corner in range(1 << d):
        bits = [(corner >> k) & 1 for k in range(d)]
        sel = np.where(bits, hi, lo)
        wt = np.prod(np.where(bits, w, 1.0 - w), axis=1)
        out += wt[:, None] * grid[tuple(sel.T)]
    return out


@dataclass(frozen=True)
class _Field(Transform):
    path: str = ""
    interpolation: str = "linear"
    vectors: VectorField | None = None

    def _vectors(self, points: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        if self.vectors is None:
            raise TransformError(f"{self.label}: its field at {self.path!r} was not loaded")
        p = _as_points(points, self.vectors.data.ndim - 1, self.label)
        return p, _sample(self.vectors, p, self.interpolation)

    def params(self) -> dict[str, Any]:
        return {"path": self.path, "interpolation": self.interpolation}


@dataclass(frozen=True)
class Displacements(_Field):
    type: ClassVar[str] = "displacements"

    def apply(self, points: ArrayLike) -> np.ndarray:
        p, v = self._vectors(points)
        moved: np.ndarray = p + v
        return moved


@dataclass(frozen=True)
class Coordinates(_Field):
    type: ClassVar[str] = "coordinates"

    def apply(self, points: ArrayLike) -> np.ndarray:
        return self._vectors(points)[1]


# ------------------------------------------------------------------ parsing


def parse_transform(
    raw: object,
    *,
    where: str = "",
    load_array: ArrayLoader | None = None,
    load_field: FieldLoader | None = None,
) -> Transform:
    """One transformation from its JSON; raises :class:`TransformError` naming it.

    *load_array* reads parameters stored at ``path`` (scale, translation, affine,
    rotation); *load_field* a displacements / coordinates field. Without them such
    transformations are refused (parameters) or kept unloaded (fields: they then cannot
    be applied)."""
    try:
        return _parse(raw, load_array, load_field)
    except TransformError as e:
        raise TransformError(f"{where}: {e}" if where else str(e)) from None


class _Common(TypedDict):
    """The fields every transformation type has (its keyword arguments)."""

    name: str | None
    input: SystemRef | None
    output: SystemRef | None


@dataclass(frozen=True, slots=True)
class _Raw:
    """One transformation's JSON being parsed, with what its type's parser needs."""

    raw: Mapping[str, object]
    label: str
    common: _Common
    load_array: ArrayLoader | None
    load_field: FieldLoader | None

    def param(self, key: str) -> object:
        """A parameter, inline or stored in a Zarr array at ``path``."""
        if key in self.raw:
            return self.raw[key]
        path = self.raw.get("path")
        if isinstance(path, str) and path:
            if self.load_array is None:
                raise TransformError(
                    f"{self.label}: parameters stored at {path!r} cannot be read here"
                )
            loaded: object = np.asarray(self.load_array(path)).tolist()
            return loaded
        raise TransformError(f"{self.label} has no {key!r}")

    def parse(self, raw: object) -> Transform:
        """A nested transformation (of a sequence, byDimension or bijection)."""
        return _parse(raw, self.load_array, self.load_field)

    def sub(self, key: str) -> tuple[Transform, ...]:
        items = self.raw.get(key)
        if not isinstance(items, list) or not items:
            raise TransformError(
                f"{self.label}: {key!r} must be a non-empty list of transformations"
            )
        return tuple(self.parse(t) for t in items)


def _parse_identity(r: _Raw) -> Transform:
    return Identity(**r.common)


def _parse_map_axis(r: _Raw) -> Transform:
    v = r.raw.get("mapAxis")
    axes = (
        [i for i in v if isinstance(i, int) and not isinstance(i, bool)]
        if isinstance(v, list)
        else []
    )
    if not isinstance(v, list) or len(axes) != len(v):
        raise TransformError(f"{r.label}: mapAxis must be a list of integers, not {v!r}")
    return MapAxis(tuple(axes), **r.common)


def _ints(v: list[object]) -> tuple[int, ...]:
    """Axis indices (``int()`` of each: a non-integer raises TypeError / ValueError)."""
    return tuple(int(i) for i in v)  # type: ignore[call-overload]


def _parse_project_axis(r: _Raw) -> Transform:
    d, c = r.raw.get("droppedInputs", []), r.raw.get("createdOutputs", [])
    if not isinstance(d, list) or not isinstance(c, list):
        raise TransformError(f"{r.label}: droppedInputs / createdOutputs must be lists")
    return ProjectAxis(_ints(d), _ints(c), **r.common)


def _parse_translation(r: _Raw) -> Transform:
    return Translation(_floats(r.param("translation"), r.label), **r.common)


def _parse_scale(r: _Raw) -> Transform:
    return Scale(_floats(r.param("scale"), r.label), **r.common)


def _parse_affine(r: _Raw) -> Transform:
    return Affine(_matrix(r.param("affine"), r.label), **r.common)


def _parse_rotation(r: _Raw) -> Transform:
    return Rotation(_matrix(r.param("rotation"), r.label), **r.common)


def _parse_sequence(r: _Raw) -> Transform:
    return Sequence_(r.sub("transformations"), **r.common)


def _parse_by_dimension(r: _Raw) -> Transform:
    items = r.raw.get("transformations")
    if not isinstance(items, list) or not items:
        raise TransformError(f"{r.label}: 'transformations' must be a non-empty list")
    parts = []
    for it in items:
        if not isinstance(it, Mapping):
            raise TransformError(f"{r.label}: invalid part {it!r}")
        t_raw = it.get("transformation", it)
        if not isinstance(t_raw, Mapping):
            raise TransformError(f"{r.label}: invalid part {it!r}")
        ia = it.get("inputAxes", it.get("input_axes", t_raw.get("inputAxes")))
        oa = it.get("outputAxes", it.get("output_axes", t_raw.get("outputAxes")))
        if not (isinstance(ia, list) and isinstance(oa, list)):
            raise TransformError(f"{r.label}: a part has no inputAxes / outputAxes")
        parts.append((_ints(ia), _ints(oa), r.parse(t_raw)))
    return ByDimension(tuple(parts), **r.common)


def _parse_bijection(r: _Raw) -> Transform:
    fwd, inv = r.raw.get("forward"), r.raw.get("inverse")
    if not isinstance(fwd, Mapping) or not isinstance(inv, Mapping):
        raise TransformError(f"{r.label} needs both 'forward' and 'inverse'")
    return Bijection(forward=r.parse(fwd), backward=r.parse(inv), **r.common)


def _parse_field(r: _Raw) -> Transform:
    path = r.raw.get("path")
    if not isinstance(path, str) or not path:
        raise TransformError(f"{r.label} has no 'path' to its field")
    interp = r.raw.get("interpolation", "linear")
    if interp not in ("linear", "nearest", "bspline-cubic"):
        raise TransformError(f"{r.label}: unknown interpolation {interp!r}")
    fld = r.load_field(path) if r.load_field is not None else None
    cls = Displacements if r.raw.get("type") == "displacements" else Coordinates
    return cls(path=path, interpolation=str(interp), vectors=fld, **r.common)


#: the parser of each transformation type (spec "Transformation types")
_PARSERS: dict[str, Callable[[_Raw], Transform]] = {
    "identity": _parse_identity,
    "mapAxis": _parse_map_axis,
    "projectAxis": _parse_project_axis,
    "translation": _parse_translation,
    "scale": _parse_scale,
    "affine": _parse_affine,
    "rotation": _parse_rotation,
    "sequence": _parse_sequence,
    "byDimension": _parse_by_dimension,
    "bijection": _parse_bijection,
    "displacements": _parse_field,
    "coordinates": _parse_field,
}


def _parse(
    raw: object, load_array: ArrayLoader | None, load_field: FieldLoader | None
) -> Transform:
    if not isinstance(raw, Mapping):
        raise TransformError(f"a transformation must be an object, not {raw!r}")
    kind = raw.get("type")
    name = raw.get("name")
    name = name if isinstance(name, str) else None
    common: _Common = {
        "name": name,
        "input": SystemRef.parse(raw.get("input")),
        "output": SystemRef.parse(raw.get("output")),
    }
    label = f"{kind} transformation {name!r}" if name else f"{kind} transformation"
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise TransformError(f"unknown coordinate transformation type {kind!r}")
    try:
        return parser(_Raw(raw, label, common, load_array, load_field))
    except (TypeError, ValueError) as e:
        raise TransformError(f"{label}: {e}") from None


# ----------------------------------------------------------------- building


def compose(ts: Sequence[Transform]) -> Transform:
    """One transformation applying *ts* in order (a single one as it is)."""
    flat: list[Transform] = []
    for t in ts:
        flat.extend(t.transformations if isinstance(t, Sequence_) and t.name is None else [t])
    if len(flat) == 1:
        return flat[0]
    if not flat:
        return Identity()
    return Sequence_(tuple(flat))


def simplest(m: np.ndarray) -> Transform:
    """The simplest transformation equal to the homogeneous square matrix *m*: identity,
    scale, translation, their sequence, a rotation (then a scale is not allowed to hide:
    ``rotation * scale`` is ``sequence[scale, rotation]``) with a translation, else an
    affine — the spec: "Implementations SHOULD prefer to store transformations as a
    sequence of less expressive transformations where possible"."""
    m = np.asarray(m, dtype=float)
    n = m.shape[0] - 1
    lin, t = m[:n, :n], m[:n, n]
    parts: list[Transform] = []
    if np.allclose(lin, np.diag(np.diag(lin))):
        d = np.diag(lin)
        if not np.allclose(d, 1.0):
            parts.append(Scale(tuple(float(x) for x in d)))
    else:
        # lin = R @ diag(s) with R a rotation when its columns are orthogonal
        s = np.linalg.norm(lin, axis=0)
        r = lin / s if np.all(s > 0) else lin
        if np.allclose(r.T @ r, np.eye(n), atol=1e-9) and np.linalg.det(r) > 0:
            if not np.allclose(s, 1.0):
                parts.append(Scale(tuple(float(x) for x in s)))
            parts.append(Rotation(_rows(r)))
        else:
            return Affine(_rows(m[:n]))
    if not np.allclose(t, 0.0):
        parts.append(Translation(tuple(float(x) for x in t)))
    if not parts:
        return Identity(ndim=n)
    return parts[0] if len(parts) == 1 else Sequence_(tuple(parts))
