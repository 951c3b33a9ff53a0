"""The coordinate systems of an OME-Zarr 0.6 hierarchy and the transformations between
them: a graph whose nodes are systems and whose edges are transformations (spec
"coordinateTransformations", "Graph connectedness").

A system is keyed by ``(group path, name)``: ``("", "world")`` is a scene's own system,
``("tileA", "physical")`` the system "physical" of the image at ``tileA``, and an array's
own (discrete) system is ``("tileA/s0", "")``. :meth:`TransformGraph.path` finds the
transformation from one system to another, walking edges forwards or, where the type has
a closed-form inverse (or is a ``bijection``), backwards; it prefers forward and linear
edges. :func:`graph_from_hierarchy` builds the graph from a hierarchy's metadata: a
``scene`` at the root, the images it names, their multiscale-level transformations and the
label images those reach.

Works on the raw ``ome`` attributes (a callback reads them), so it serves the reader, the
validator and ``napari-ozx transform`` alike; no zarr, napari or Qt here.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from napari_ozx.errors import TransformError
from napari_ozx.ngff.model.scale_translation import plain_scale_translation
from napari_ozx.ngff.model.transforms import (
    ArrayLoader,
    FieldLoader,
    Identity,
    SystemRef,
    Transform,
    VectorField,
    compose,
    parse_transform,
)

logger = logging.getLogger(__name__)

__all__ = [
    "SystemKey",
    "TransformGraph",
    "graph_from_hierarchy",
    "key_text",
    "parse_key",
    "resolve_path",
]

SystemKey = tuple[str, str]


def key_text(key: SystemKey) -> str:
    """``name`` for a scene's (root) system, ``path:name`` otherwise."""
    path, name = key
    return f"{path}:{name}" if path else name


def parse_key(text: str) -> SystemKey:
    """A coordinate system named by a person: ``name`` (a system of the root group: a
    scene's own, or the root image's) or ``path:name`` (one of the group at *path*)."""
    path, sep, name = text.rpartition(":")
    return (path.strip("/"), name) if sep else ("", text)


@dataclass
class _Edge:
    src: SystemKey
    dst: SystemKey
    transform: Transform


@dataclass
class TransformGraph:
    systems_: dict[SystemKey, tuple[int, object]] = field(default_factory=dict)
    edges: list[_Edge] = field(default_factory=list)

    def add_system(self, key: SystemKey, ndim: int, axes: object = None) -> None:
        self.systems_.setdefault(key, (ndim, axes))

    def systems(self) -> list[SystemKey]:
        return list(self.systems_)

    def ndim(self, key: SystemKey) -> int | None:
        got = self.systems_.get(key)
        return got[0] if got else None

    def add_transform(self, t: Transform, src: SystemKey, dst: SystemKey) -> None:
        """Add *t* from *src* to *dst*; raises :class:`TransformError` when its parameters
        do not fit the systems' dimensions (spec: "The parameter values ... MUST be
        compatible with input and output space dimensionality")."""
        for what, key, d in (("input", src, t.in_dim), ("output", dst, t.out_dim)):
            n = self.ndim(key)
            if n is not None and d is not None and n != d:
                raise TransformError(
                    f"{t.label} from {key_text(src)!r} to {key_text(dst)!r}: its parameters "
                    f"have {d} {what} dimensions, coordinate system {key_text(key)!r} has {n}"
                )
        n_in = self.ndim(src)
        if n_in is not None and t.is_linear:
            m = t.matrix(n_in)
            n_out = self.ndim(dst)
            if m is not None and n_out is not None and m.shape != (n_out + 1, n_in + 1):
                raise TransformError(
                    f"{t.label} maps {m.shape[1] - 1} to {m.shape[0] - 1} dimensions, "
                    f"not {key_text(src)!r} ({n_in}) to {key_text(dst)!r} ({n_out})"
                )
        self.edges.append(_Edge(src, dst, t))

    def _check(self, key: SystemKey) -> None:
        if key not in self.systems_:
            known = ", ".join(repr(key_text(k)) for k in self.systems_ if k[1])
            raise TransformError(
                f"unknown coordinate system {key_text(key)!r} (known: {known or 'none'})"
            )

    def _steps(self, key: SystemKey) -> list[tuple[float, SystemKey, Transform | None, _Edge]]:
        """Edges out of *key*: ``(cost, next, transform or None if not computable, edge)``."""
        out: list[tuple[float, SystemKey, Transform | None, _Edge]] = []
        for e in self.edges:
            if e.src == key:
                out.append((1.0 if e.transform.is_linear else 1.5, e.dst, e.transform, e))
            if e.dst == key:
                try:
                    inv: Transform | None = e.transform.inverse()
                except TransformError:
                    inv = None
                cost = 1.01 if e.transform.is_linear else 1.51
                out.append((cost, e.src, inv, e))
        return out

    def path(self, src: SystemKey, dst: SystemKey) -> Transform:
        """The transformation from *src* to *dst* (``input`` / ``output`` set to them)."""
        self._check(src)
        self._check(dst)
        ref_in, ref_out = SystemRef(src[1], src[0] or None), SystemRef(dst[1], dst[0] or None)
        if src == dst:
            return Identity(ndim=self.ndim(src), input=ref_in, output=ref_out)
        tie = itertools.count()
        queue: list[tuple[float, int, SystemKey, list[Transform]]] = [(0.0, next(tie), src, [])]
        done: set[SystemKey] = set()
        blocked: list[Transform] = []
        while queue:
            cost, _, key, ts = heapq.heappop(queue)
            if key in done:
                continue
            done.add(key)
            if key == dst:
                return dataclasses.replace(compose(ts), input=ref_in, output=ref_out)
            for c, nxt, t, e in self._steps(key):
                if nxt in done:
                    continue
                if t is None:
                    blocked.append(e.transform)
                    continue
                heapq.heappush(queue, (cost + c, next(tie), nxt, [*ts, t]))
        if blocked:
            raise TransformError(
                f"no computable path from {key_text(src)!r} to {key_text(dst)!r}: "
                f"the {blocked[0].label} would have to be inverted, and it has no inverse"
            )
        raise TransformError(
            f"coordinate system {key_text(dst)!r} cannot be reached from {key_text(src)!r}: "
            f"no transformation links them"
        )

    def reachable(self, src: SystemKey) -> set[SystemKey]:
        """Every system linked to *src* (in either direction, computable or not)."""
        seen = {src}
        todo = [src]
        while todo:
            k = todo.pop()
            for e in self.edges:
                for a, b in ((e.src, e.dst), (e.dst, e.src)):
                    if a == k and b not in seen:
                        seen.add(b)
                        todo.append(b)
        return seen

    def check_cycles(self, atol: float = 1e-6) -> None:
        """Raise :class:`TransformError` when two linear paths between the same systems
        disagree (an edge against the path around it without that edge)."""
        for e in self.edges:
            m = e.transform.matrix(self.ndim(e.src))
            if m is None or not e.transform.is_linear:
                continue
            others = TransformGraph(self.systems_, [x for x in self.edges if x is not e])
            try:
                alt = others.path(e.src, e.dst)
            except TransformError:
                continue
            am = alt.matrix(self.ndim(e.src))
            if am is None or not alt.is_linear or am.shape != m.shape:
                continue
            if not np.allclose(am, m, atol=atol):
                raise TransformError(
                    f"the transformations between {key_text(e.src)!r} and "
                    f"{key_text(e.dst)!r} disagree: {e.transform.label} and the path "
                    f"around it give different coordinates"
                )


# ------------------------------------------------------------------ building


def resolve_path(base: str, rel: str) -> str | None:
    """The store path of *rel* (``.`` and ``..`` segments allowed) relative to the group
    at *base*, or None when it climbs above the hierarchy's root."""
    parts = [p for p in base.split("/") if p]
    for seg in rel.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(seg)
    return "/".join(parts)


def _join(base: str, rel: str, what: str) -> str:
    if rel.startswith(("/", "\\")):
        raise TransformError(f"{what}: the path {rel!r} must be relative to its group")
    path = resolve_path(base, rel)
    if path is None:
        raise TransformError(f"{what}: the path {rel!r} leaves the hierarchy's root")
    return path


def _axes(raw: object) -> list[object]:
    return raw if isinstance(raw, list) else []


def _axis_type(a: object) -> object:
    return a.get("type") if isinstance(a, Mapping) else None


class _Builder:
    """Builds a :class:`TransformGraph` from a hierarchy's ``ome`` attributes: each image
    once (:meth:`image`), then the scene's transformations between them."""

    def __init__(
        self,
        read_ome: Callable[[str], Mapping[str, object] | None],
        read_array: Callable[[str], ArrayLike] | None,
    ) -> None:
        self.read_ome = read_ome
        self.read_array = read_array
        self.g = TransformGraph()
        self.loaded: set[str] = set()

    # -- loading what transformations name
    def loaders(self, group: str) -> tuple[ArrayLoader, FieldLoader]:
        """The parameter and field loaders of the transformations of *group* (their
        ``path`` is relative to it)."""

        def load_array(rel: str) -> ArrayLike:
            if self.read_array is None:
                raise TransformError(f"parameters at {rel!r} cannot be read here")
            return self.read_array(_join(group, rel, "path"))

        def load_field(rel: str) -> VectorField | None:
            path = _join(group, rel, "field path")
            try:
                return self.field(path)
            except (TransformError, KeyError, TypeError, ValueError, IndexError, OSError) as e:
                # the graph stands without it: only applying this transformation fails
                logger.warning("the field at %r cannot be read: %s", path, e)
                return None

        return load_array, load_field

    def field(self, path: str) -> VectorField:
        """The displacement / coordinate field stored as the image at *path*: its first
        level, the vector axis, and the level's scale / translation to input space."""
        ome = self.read_ome(path)
        ms = (ome or {}).get("multiscales")
        if not isinstance(ms, list) or not ms or self.read_array is None:
            raise TransformError(f"the field at {path!r} is not a readable multiscale image")
        m = ms[0]
        systems = m.get("coordinateSystems") or []
        axes = _axes(systems[0].get("axes")) if systems else _axes(m.get("axes"))
        vec = next(
            (i for i, a in enumerate(axes) if _axis_type(a) in ("displacement", "coordinate")),
            None,
        )
        ds = m["datasets"][0]
        data = np.asarray(self.read_array(_join(path, ds["path"], "dataset path")), dtype=float)
        if vec is None:
            vec = data.ndim - 1
        folded = plain_scale_translation(ds.get("coordinateTransformations") or [], data.ndim)
        if folded is None:
            raise TransformError(
                f"the field at {path!r}: its level's transformation is no plain scale and "
                f"translation"
            )
        scale, trans = folded
        keep = [i for i in range(data.ndim) if i != vec]
        return VectorField(data, vec, tuple(scale[i] for i in keep), tuple(trans[i] for i in keep))

    def key(self, group: str, ref: SystemRef | None, what: str) -> SystemKey:
        """The system *ref* names from *group* (loading the image it names by path)."""
        if ref is None or ref.name is None:
            raise TransformError(f"{what} names no coordinate system")
        path = _join(group, ref.path, what) if ref.path else group
        if ref.path:
            self.image(path)
        return (path, ref.name)

    def add_systems(self, group: str, systems: object) -> None:
        for cs in systems if isinstance(systems, list) else []:
            if isinstance(cs, Mapping) and isinstance(cs.get("name"), str):
                axes = cs.get("axes")
                self.g.add_system((group, cs["name"]), len(_axes(axes)), axes)

    # -- an image
    def image(self, path: str) -> None:
        """The coordinate systems of the image at *path*, each level's transformation to
        its intrinsic system and its multiscale-level transformations."""
        if path in self.loaded:
            return
        self.loaded.add(path)
        ome = self.read_ome(path)
        if ome is None:
            raise TransformError(f"no group at {path or '/'!r} (named by a transformation)")
        ms = ome.get("multiscales")
        if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
            return  # a plain group (a scene's subgroup without an image): nothing to add
        m = ms[0]
        if not isinstance(m.get("coordinateSystems"), list):
            return  # 0.4 / 0.5: no named systems to link
        self.add_systems(path, m["coordinateSystems"])
        load_array, load_field = self.loaders(path)
        for i, d in enumerate(m.get("datasets") or []):
            self.dataset(path, i, d, load_array)
        for i, raw in enumerate(m.get("coordinateTransformations") or []):
            where = f"{path or '/'} multiscales coordinateTransformations[{i}]"
            t = parse_transform(raw, where=where, load_array=load_array, load_field=load_field)
            self.g.add_transform(t, self.key(path, t.input, where), self.key(path, t.output, where))

    def dataset(self, path: str, i: int, d: object, load_array: ArrayLoader) -> None:
        """Level *i* of the image at *path*: its array's system and the transformation
        from it to the intrinsic system."""
        if not isinstance(d, Mapping) or not isinstance(d.get("path"), str):
            return
        cts = d.get("coordinateTransformations") or []
        if not cts or not isinstance(cts, list):
            return
        ts = [
            parse_transform(t, where=f"{path or '/'} datasets[{i}]", load_array=load_array)
            for t in cts
        ]
        out_ref = next((t.output for t in ts if t.output is not None), None)
        if out_ref is None or out_ref.name is None:
            return
        dst = (path, out_ref.name)
        arr = (_join(path, d["path"], "dataset path"), "")
        self.g.add_system(arr, self.g.ndim(dst) or 0)
        self.g.add_transform(compose(ts), arr, dst)

    # -- a scene
    def scene(self, root: str, scene: Mapping[str, object]) -> None:
        """A scene's own systems and its transformations between images (added once every
        image they name is loaded: then the dimensions are known)."""
        self.add_systems(root, scene.get("coordinateSystems"))
        load_array, load_field = self.loaders(root)
        pending = []
        raws = scene.get("coordinateTransformations") or []
        if not isinstance(raws, list):
            raise TransformError(
                f"{root or '/'} scene coordinateTransformations: a list of transformations, "
                f"not {raws!r}"
            )
        for i, raw in enumerate(raws):
            where = f"{root or '/'} scene coordinateTransformations[{i}]"
            t = parse_transform(raw, where=where, load_array=load_array, load_field=load_field)
            pending.append((t, self.key(root, t.input, where), self.key(root, t.output, where)))
        for t, src, dst in pending:
            self.g.add_transform(t, src, dst)


def graph_from_hierarchy(
    read_ome: Callable[[str], Mapping[str, object] | None],
    root: str = "",
    read_array: Callable[[str], ArrayLike] | None = None,
) -> TransformGraph:
    """The graph of the hierarchy at *root*: ``read_ome(path)`` gives the ``ome``
    attributes of the group at *path* (``None`` where there is none); *read_array(path)*
    an array's values, for parameters stored at ``path`` and displacement / coordinate
    fields (without it those transformations cannot be applied).

    Raises :class:`TransformError` for a path that leaves the root, a transformation that
    does not fit its systems, an unknown type or unparseable parameters."""
    b = _Builder(read_ome, read_array)
    ome = read_ome(root)
    if ome is None:
        raise TransformError(f"no group at {root or '/'!r}")
    scene = ome.get("scene")
    if isinstance(scene, Mapping):
        b.scene(root, scene)
    if isinstance(ome.get("multiscales"), list):
        b.image(root)
    return b.g
