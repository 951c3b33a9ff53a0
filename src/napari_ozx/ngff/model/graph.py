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
from typing import Any

import numpy as np

from napari_ozx.errors import TransformError
from napari_ozx.ngff.model.transforms import (
    Identity,
    SystemRef,
    Transform,
    VectorField,
    compose,
    parse_transform,
)

logger = logging.getLogger(__name__)

__all__ = ["SystemKey", "TransformGraph", "graph_from_hierarchy", "key_text", "parse_key"]

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
    systems_: dict[SystemKey, tuple[int, Any]] = field(default_factory=dict)
    edges: list[_Edge] = field(default_factory=list)

    def add_system(self, key: SystemKey, ndim: int, axes: Any = None) -> None:
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


def _join(base: str, rel: str, what: str) -> str:
    parts = [p for p in base.split("/") if p]
    if rel.startswith(("/", "\\")):
        raise TransformError(f"{what}: the path {rel!r} must be relative to its group")
    for seg in rel.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts:
                raise TransformError(f"{what}: the path {rel!r} leaves the hierarchy's root")
            parts.pop()
        else:
            parts.append(seg)
    return "/".join(parts)


def _axes(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else []


def graph_from_hierarchy(
    read_ome: Callable[[str], Mapping[str, Any] | None],
    root: str = "",
    read_array: Callable[[str], Any] | None = None,
) -> TransformGraph:
    """The graph of the hierarchy at *root*: ``read_ome(path)`` gives the ``ome``
    attributes of the group at *path* (``None`` where there is none); *read_array(path)*
    an array's values, for parameters stored at ``path`` and displacement / coordinate
    fields (without it those transformations cannot be applied).

    Raises :class:`TransformError` for a path that leaves the root, a transformation that
    does not fit its systems, an unknown type or unparseable parameters."""
    g = TransformGraph()
    loaded: set[str] = set()

    def loader(group: str) -> tuple[Any, Any]:
        def load_array(rel: str) -> Any:
            if read_array is None:
                raise TransformError(f"parameters at {rel!r} cannot be read here")
            return read_array(_join(group, rel, "path"))

        def load_field(rel: str) -> VectorField | None:
            path = _join(group, rel, "field path")
            try:
                return _field(path)
            except (TransformError, KeyError, TypeError, ValueError, IndexError, OSError) as e:
                # the graph stands without it: only applying this transformation fails
                logger.warning("the field at %r cannot be read: %s", path, e)
                return None

        return load_array, load_field

    def _field(path: str) -> VectorField:
        ome = read_ome(path)
        ms = (ome or {}).get("multiscales")
        if not isinstance(ms, list) or not ms or read_array is None:
            raise TransformError(f"the field at {path!r} is not a readable multiscale image")
        m = ms[0]
        systems = m.get("coordinateSystems") or []
        axes = _axes(systems[0].get("axes")) if systems else _axes(m.get("axes"))
        vec = next(
            (i for i, a in enumerate(axes) if a.get("type") in ("displacement", "coordinate")),
            None,
        )
        ds = m["datasets"][0]
        data = np.asarray(read_array(_join(path, ds["path"], "dataset path")), dtype=float)
        if vec is None:
            vec = data.ndim - 1
        scale = [1.0] * data.ndim
        trans = [0.0] * data.ndim
        for t in _flatten(ds.get("coordinateTransformations") or []):
            if t.get("type") == "scale":
                scale = [s * v for s, v in zip(scale, t["scale"], strict=False)]
                trans = [s * v for s, v in zip(trans, t["scale"], strict=False)]
            elif t.get("type") == "translation":
                trans = [a + b for a, b in zip(trans, t["translation"], strict=False)]
        keep = [i for i in range(data.ndim) if i != vec]
        return VectorField(data, vec, tuple(scale[i] for i in keep), tuple(trans[i] for i in keep))

    def key(group: str, ref: SystemRef | None, what: str) -> SystemKey:
        if ref is None or ref.name is None:
            raise TransformError(f"{what} names no coordinate system")
        path = _join(group, ref.path, what) if ref.path else group
        if ref.path:
            image(path)
        return (path, ref.name)

    def image(path: str) -> None:
        if path in loaded:
            return
        loaded.add(path)
        ome = read_ome(path)
        if ome is None:
            raise TransformError(f"no group at {path or '/'!r} (named by a transformation)")
        ms = ome.get("multiscales")
        if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
            return  # a plain group (a scene's subgroup without an image): nothing to add
        m = ms[0]
        systems = m.get("coordinateSystems")
        if not isinstance(systems, list):
            return  # 0.4 / 0.5: no named systems to link
        for cs in systems:
            if isinstance(cs, Mapping) and isinstance(cs.get("name"), str):
                g.add_system((path, cs["name"]), len(_axes(cs.get("axes"))), cs.get("axes"))
        load_array, load_field = loader(path)
        for i, d in enumerate(m.get("datasets") or []):
            if not isinstance(d, Mapping) or not isinstance(d.get("path"), str):
                continue
            cts = d.get("coordinateTransformations") or []
            if not cts or not isinstance(cts, list):
                continue
            ts = [
                parse_transform(t, where=f"{path or '/'} datasets[{i}]", load_array=load_array)
                for t in cts
            ]
            out_ref = next((t.output for t in ts if t.output is not None), None)
            if out_ref is None or out_ref.name is None:
                continue
            dst = (path, out_ref.name)
            arr = (_join(path, d["path"], "dataset path"), "")
            g.add_system(arr, g.ndim(dst) or 0)
            g.add_transform(compose(ts), arr, dst)
        for i, raw in enumerate(m.get("coordinateTransformations") or []):
            where = f"{path or '/'} multiscales coordinateTransformations[{i}]"
            t = parse_transform(raw, where=where, load_array=load_array, load_field=load_field)
            g.add_transform(t, key(path, t.input, where), key(path, t.output, where))

    ome = read_ome(root)
    if ome is None:
        raise TransformError(f"no group at {root or '/'!r}")
    scene = ome.get("scene")
    if isinstance(scene, Mapping):
        for cs in scene.get("coordinateSystems") or []:
            if isinstance(cs, Mapping) and isinstance(cs.get("name"), str):
                g.add_system((root, cs["name"]), len(_axes(cs.get("axes"))), cs.get("axes"))
        load_array, load_field = loader(root)
        pending = []
        for i, raw in enumerate(scene.get("coordinateTransformations") or []):
            where = f"{root or '/'} scene coordinateTransformations[{i}]"
            t = parse_transform(raw, where=where, load_array=load_array, load_field=load_field)
            pending.append((t, key(root, t.input, where), key(root, t.output, where)))
        for t, src, dst in pending:  # every image is loaded: dimensions are known
            g.add_transform(t, src, dst)
    if isinstance(ome.get("multiscales"), list):
        image(root)
    return g


def _flatten(ts: list[Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for t in ts:
        if isinstance(t, Mapping) and t.get("type") == "sequence":
            out.extend(_flatten(t.get("transformations") or []))
        elif isinstance(t, Mapping):
            out.append(t)
    return out
