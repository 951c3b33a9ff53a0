"""Check a whole OME-Zarr hierarchy (directory or ``.ozx``) against :mod:`.rules`.

:func:`validate_ome` walks from the root: images and their levels, ``labels`` groups and
their label images (against the image's level count), plates, every listed well and its
fields, bioformats2raw series. Documents are read through the one document reader
(:func:`~napari_ozx.ngff.read.documents.read_documents`: size caps, Zarr v3 before v2), a batch per
level of the hierarchy, so a plate of 384 wells costs a few concurrent rounds, not 384 sequential
ones.

Nothing is parsed into the typed models first: a node that breaks a rule is reported and
the walk goes on, where the opener would stop at its first error.

:func:`validate` is the whole check (``napari_ozx.validate``, ``napari-ozx validate``):
the container's RFC-9 rules for an ``.ozx``, these rules, and whether the reader opens it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from napari_ozx.errors import OzxError, UnsupportedExtensionError
from napari_ozx.ngff.model.extensions import check_document
from napari_ozx.ngff.model.metadata import is_collection_document, ome_section
from napari_ozx.ngff.model.versions import version_key
from napari_ozx.ngff.read.documents import NodeDocuments, read_documents
from napari_ozx.ngff.validate import rules
from napari_ozx.ngff.validate.rules import Finding, ImageFacts, PlateFacts, Reporter
from napari_ozx.ozx.validate import ValidationReport, validate_rfc9

if TYPE_CHECKING:
    from zarr.abc.store import Store

__all__ = ["DocumentReader", "ValidationReport", "validate", "validate_documents", "validate_ome"]

Doc = tuple[int, dict[str, Any], dict[str, Any]]
#: bioformats2raw without an OME/series list: at most this many numbered groups are probed
MAX_SERIES = 10_000


class DocumentReader(Protocol):
    """What the walk needs: the opener's batch document reader."""

    def read_docs(self, paths: Sequence[str]) -> Sequence[NodeDocuments | None]: ...


class _Documents:
    """The document reader over a store, without parsing the root first (an
    :class:`~napari_ozx.ngff.read.open.OmeZarr` refuses to exist when the root is invalid; we want
    to say why)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read_docs(self, paths: Sequence[str]) -> list[NodeDocuments | None]:
        return list(read_documents(self.store, paths))


def validate_ome(
    source: str | os.PathLike[str] | Store, metadata_only: bool = False
) -> list[Finding]:
    """Every OME-Zarr metadata finding for a directory, ``.ozx`` or store.

    ``metadata_only``: check the documents that are there without requiring the nodes
    they name to exist (arrays, wells, fields, label images): what a metadata-only
    hierarchy (the ngff-spec conformance suites) can be checked for.

    Raises :class:`OSError` / :class:`OzxError` only when the source cannot be opened
    at all (no such file, not a readable archive).
    """
    from napari_ozx.ngff.read.open import open_store

    store = open_store(source)
    try:
        return validate_documents(_Documents(store), metadata_only=metadata_only)
    finally:
        if store is not source:
            store.close()


def validate(
    source: str | os.PathLike[str] | Store,
    *,
    deep: bool = False,
    metadata_only: bool = False,
    strict: bool = False,
) -> ValidationReport:
    """Check a directory or ``.ozx`` the way ``napari-ozx validate`` does.

    The container (RFC-9, for a file: :func:`napari_ozx.ozx.validate.validate_rfc9`), the
    OME-Zarr metadata rules (:func:`validate_ome`) and, unless *metadata_only*, whether the
    reader opens it (its error as an ``ome-metadata`` finding).

    Parameters
    ----------
    source : str, os.PathLike or zarr.abc.store.Store
        A directory, an ``.ozx`` file, an ``OzxStore`` or another zarr store.
    deep : bool, default False
        Also check every archive member's CRC-32 (reads the whole file).
    metadata_only : bool, default False
        Check the documents only: nothing they name has to exist, the reader is not tried.
    strict : bool, default False
        A broken SHOULD that the strict schemas require (:data:`.rules.STRICT_CODES`) fails
        :attr:`~napari_ozx.ozx.validate.ValidationReport.ok` too.

    Returns
    -------
    ValidationReport
        Every finding, with ``ok`` (no error).

    Raises
    ------
    FileNotFoundError
        A path that does not exist.
    ZipFormatError
        A file that is no ZIP archive at all.
    """
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ozx.store import OzxStore

    strict_codes = rules.STRICT_CODES if strict else frozenset()
    findings: list[Finding] = []
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(source))
        label = str(source)
        if path.is_file():
            findings.extend(validate_rfc9(path, deep=deep).findings)
    else:
        label = str(getattr(source, "path", None) or source)
        if isinstance(source, OzxStore):
            findings.extend(validate_rfc9(source, deep=deep).findings)
    try:
        ome = validate_ome(source, metadata_only=metadata_only)
    except (OzxError, OSError) as e:
        ome = []
        findings.append(Finding("error", "ome-metadata", str(e)))
    findings.extend(ome)
    if not metadata_only and not any(f.code == "not-ome" for f in ome):
        # (not OME-Zarr: that finding says it all; the reader would only repeat it)
        try:
            with open_ome_zarr(source) as oz:
                if oz.root.meta.kind not in ("plate", "well"):
                    for img in oz.images():
                        _ = img.labels
        except (OzxError, OSError) as e:
            findings.append(Finding("error", "ome-metadata", str(e)))
    return ValidationReport(findings, source=label, deep=deep, strict_codes=strict_codes)


def validate_documents(
    docs: DocumentReader, fields: bool = True, metadata_only: bool = False, tables: bool = True
) -> list[Finding]:
    """The findings for the hierarchy *docs* reads. ``fields=False`` checks a plate and
    its wells but not the wells' fields (what a reader can afford on every open: the plate
    reader reads those well documents anyway); ``tables=False`` leaves images' tables
    (:mod:`napari_ozx.ngff.tables`) out."""
    walker = _Walker(docs, fields, metadata_only, tables)
    walker.run()
    found = walker.r.finish()
    if metadata_only:
        found = [f for f in found if f.code not in rules.CROSS_REFERENCE_CODES]
    return found


@dataclass(frozen=True, slots=True)
class _Group:
    path: str
    zarr_format: int
    attrs: Mapping[str, Any]
    ome: Mapping[str, Any]
    version: str


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def _escapes(path: str) -> bool:
    """A node path that would leave the hierarchy ('..' segments, backslashes)."""
    return ".." in path.split("/") or "\\" in path


class _Unreadable:
    """A node whose document could not be read (already reported)."""


_UNREADABLE = _Unreadable()


class _Walker:
    def __init__(
        self, docs: DocumentReader, fields: bool, metadata_only: bool = False, tables: bool = True
    ) -> None:
        self.docs = docs
        self.fields = fields
        self.metadata_only = metadata_only
        self.with_tables = tables
        self.r = Reporter()
        self.hierarchy_version: str | None = None
        self.cache: dict[str, Doc | _Unreadable | None] = {}

    # -- reading -----------------------------------------------------------------
    def read(self, paths: Sequence[str]) -> list[Doc | _Unreadable | None]:
        self.prefetch(paths)
        return [self.cache[p] for p in paths]

    def prefetch(self, paths: Sequence[str]) -> None:
        """Read the documents of *paths* (one concurrent batch) into the cache."""
        todo = list(dict.fromkeys(p for p in paths if p not in self.cache))
        for p in [p for p in todo if _escapes(p)]:  # never read outside the hierarchy
            self.cache[p] = None
            todo.remove(p)
        for p, res in zip(todo, self._read(todo), strict=True):
            self.cache[p] = res

    def prefetch_images(self, groups: Sequence[str]) -> None:
        """Read image groups, then all their levels and ``labels`` groups, in two batches
        (a plate's fields one by one would cost a round trip each)."""
        self.prefetch(groups)
        children: list[str] = []
        for g in groups:
            res = self.cache.get(g)
            if not isinstance(res, tuple):
                continue
            ome, _ = ome_section(res[2], res[0])
            ms = ome.get("multiscales")
            first = ms[0] if isinstance(ms, list) and ms and isinstance(ms[0], Mapping) else {}
            datasets = first.get("datasets") if isinstance(first, Mapping) else None
            for d in datasets if isinstance(datasets, list) else []:
                if isinstance(d, Mapping) and isinstance(d.get("path"), str):
                    children.append(_join(g, d["path"]))
            children.append(_join(g, "labels"))
        self.prefetch(children)

    def _read(self, paths: Sequence[str]) -> list[Doc | _Unreadable | None]:
        if not paths:
            return []
        try:
            batch = list(self.docs.read_docs(paths))
            return [self._normalise(p, res) for p, res in zip(paths, batch, strict=True)]
        except (OzxError, OSError):
            pass
        out: list[Doc | _Unreadable | None] = []
        for p in paths:  # one at a time, to say which node is unreadable
            try:
                (res,) = self.docs.read_docs([p])
                out.append(self._normalise(p, res))
            except (OzxError, OSError) as e:
                self.r.add("node-unreadable", p, str(e))
                out.append(_UNREADABLE)
        return out

    def _normalise(self, path: str, res: NodeDocuments | None) -> Doc | _Unreadable | None:
        """A node's documents as (zarr_format, document, attributes). The reader keeps a
        node's document problem with the node (``error``): it is reported here, ZEP 10
        problems by :meth:`zep10` (with their rule)."""
        if res is None:
            return None
        err, doc, fmt = res.error, dict(res.document), res.zarr_format
        if err is not None and (fmt == 2 or not doc):
            self.r.add("node-unreadable", path, str(err))
            return _UNREADABLE
        if err is not None:
            try:
                check_document(doc, path)
            except OzxError:
                pass  # a ZEP 10 problem: zep10() reports it with its rule
            else:
                self.r.add("node-unreadable", path, str(err))
                return _UNREADABLE
        return fmt, doc, dict(res.attributes)

    def zep10(self, path: str, doc: Mapping[str, object], fmt: int) -> dict[str, Any]:
        if fmt != 3:
            return dict(doc)
        try:
            checked, _ = check_document(doc, path)
        except UnsupportedExtensionError as e:
            self.r.add("zarr-extension", path, str(e))
            return dict(doc)
        except OzxError as e:
            self.r.add("zarr-extension", path, str(e))
            return dict(doc)
        return checked

    def group(self, path: str, res: Doc) -> _Group | None:
        """Version / namespace / ZEP 10 rules of one group; None when it is no group or
        its version is unknown (nothing else can be checked)."""
        fmt, doc, attrs = res
        doc = self.zep10(path, doc, fmt)
        if doc.get("node_type", "group") != "group":
            return None
        ome, version = ome_section(attrs, fmt)
        v = rules.check_node_version(self.r, path, fmt, attrs, ome, version, self.hierarchy_version)
        if v is None:
            return None
        if self.hierarchy_version is None and fmt == 3 and version is not None:
            self.hierarchy_version = version
        return _Group(path, fmt, attrs, ome, v)

    def array_docs(self, paths: Sequence[str]) -> list[Mapping[str, Any] | None]:
        out: list[Mapping[str, Any] | None] = []
        for p, res in zip(paths, self.read(paths), strict=True):
            if not isinstance(res, tuple):
                out.append(None if res is None else {"shape": None})
                continue
            fmt, doc, _ = res
            doc = self.zep10(p, doc, fmt)
            out.append(doc if doc.get("node_type", "array") == "array" else None)
        return out

    # -- the walk ----------------------------------------------------------------
    def run(self) -> None:
        (res,) = self.read([""])
        if isinstance(res, _Unreadable):
            return
        if res is None:
            self.r.add("not-ome", "", "no Zarr group at the root")
            return
        if res[1].get("node_type", "group") != "group":
            self.r.add("not-ome", "", "the root is a Zarr array, not a group")
            return
        g = self.group("", res)
        if g is not None:
            self.node(g)

    def node(self, g: _Group) -> None:
        ome = g.ome
        b2r = ome.get("bioformats2raw.layout", g.attrs.get("bioformats2raw.layout"))
        if b2r is not None:
            rules.check_bf2raw(self.r, g.path, b2r)
            from napari_ozx.ngff.validate.omexml import check_ome_xml  # OME/METADATA.ome.xml

            check_ome_xml(self, g)
        if "plate" in ome:
            self.plate(g)
        elif "scene" in ome and version_key(g.version) >= (0, 6):
            self.scene(g)
        elif "well" in ome:
            self.well(g, None)
        elif "multiscales" in ome:
            self.image(g)
        elif "labels" in ome:
            self.labels_group(g, None)
        elif b2r is not None:
            self.collection(g)
        elif "image-label" in ome:
            rules.check_image_label(self.r, g.path, ome, False, g.version)
        elif not g.path and isinstance(g.attrs.get("spatialdata_attrs"), Mapping):
            from napari_ozx.ngff.validate.spatialdata import check_spatialdata

            check_spatialdata(self, g)  # its elements: OME-Zarr images, points, shapes
        elif not g.path and is_collection_document(ome):
            from napari_ozx.ngff.validate.collection import check_collection

            check_collection(self, g)  # RFC-8 (draft): its image members
        else:
            keys = sorted(g.attrs)[:8]
            self.r.add("not-ome", g.path, f"no OME-Zarr keys in the attributes (keys {keys})")

    def image(self, g: _Group, label_levels: int | None = None, listed: bool = False) -> None:
        path, ome = g.path, g.ome
        is_label = listed or "image-label" in ome
        if is_label:
            rules.check_image_label(self.r, path, ome, listed, g.version)
        all_facts = rules.check_multiscales(self.r, path, ome, g.version, g.zarr_format)
        first: ImageFacts | None = all_facts[0] if all_facts else None
        shape0: Sequence[int] | None = None
        for k, facts in enumerate(all_facts):
            if self.metadata_only:
                break
            docs = self.array_docs([_join(path, p) for p in facts.paths])
            rules.check_levels(self.r, path, facts, docs, is_label)
            if k == 0 and docs and docs[0] is not None and isinstance(docs[0].get("shape"), list):
                shape0 = docs[0]["shape"]
        if "omero" in ome and first is not None:
            rules.check_omero(
                self.r, path, ome["omero"], rules.channel_count(first, shape0), g.version
            )
        if label_levels is not None and first is not None and first.levels != label_levels:
            self.r.add(
                "label-levels",
                path,
                f"{first.levels} levels; the image has {label_levels}",
            )
        if not is_label and first is not None:
            lpath = _join(path, "labels")
            (res,) = self.read([lpath])
            if isinstance(res, tuple):
                lg = self.group(lpath, res)
                if lg is not None:
                    self.labels_group(lg, first.levels)
            if self.with_tables:
                self.tables(path)

    def tables(self, image: str) -> None:
        """An image's tables (Fractal / ngio table specification V1): the ``tables``
        group's list, each table's attributes and, unless metadata only, its columns."""
        tpath = _join(image, "tables")
        (res,) = self.read([tpath])
        if not isinstance(res, tuple) or res[1].get("node_type", "group") != "group":
            return
        names = rules.check_tables_group(self.r, tpath, res[2])
        paths = [_join(tpath, n) for n in names]
        attrs: dict[str, Mapping[str, Any]] = {}
        for n, p, tres in zip(names, paths, self.read(paths), strict=True):
            if tres is None:
                if not self.metadata_only:
                    self.r.add("table-missing", tpath, f"listed table {n!r} does not exist")
            elif isinstance(tres, tuple):
                attrs[p] = tres[2]
        columns: dict[str, tuple[str, ...]] = {}
        if not self.metadata_only and attrs:
            columns = self._table_columns(image, set(attrs))
        for p, a in attrs.items():
            rules.check_table(self.r, p, a, columns.get(p))

    def _table_columns(self, image: str, paths: set[str]) -> dict[str, tuple[str, ...]]:
        """Each readable table's columns (from its metadata:
        :func:`~napari_ozx.ngff.tables.read.list_tables`); a table whose data cannot be read is
        reported."""
        from napari_ozx.errors import TableError
        from napari_ozx.ngff.tables.read import StoreDocuments, list_tables

        store = getattr(self.docs, "store", None)
        if store is None:
            return {}
        src: Any = self.docs if hasattr(self.docs, "source") else StoreDocuments(store, "")
        try:
            infos = list_tables(src, image)
        except (TableError, OSError):
            return {}  # the tables group itself: reported above
        out = {}
        for info in infos:
            if info.path not in paths:
                continue
            if info.columns:  # (a ROI table's missing columns: table-roi-columns)
                out[info.path] = (*info.columns, *([info.index_key] if info.index_key else []))
            elif info.error is not None and info.backend is not None and info.type is not None:
                # (a type or backend the specification does not know: reported as such)
                self.r.add("table-unreadable", info.path, info.error)
        return out

    def labels_group(self, g: _Group, image_levels: int | None) -> None:
        names = rules.check_labels_group(self.r, g.path, g.ome)
        paths = [_join(g.path, n) for n in names]
        between = sorted(
            {_join(g.path, *n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 1)}
        )
        for p, res in zip(between, self.read(between), strict=True):
            if isinstance(res, tuple):
                ome, _ = ome_section(res[2], res[0])
                if rules.ome_keys(ome):
                    self.r.add("label-intermediate", p, f"OME keys {rules.ome_keys(ome)}")
        for p, res in zip(paths, self.read(paths), strict=True):
            if isinstance(res, _Unreadable):
                continue
            if res is None:
                if self.metadata_only and not _escapes(p):
                    continue
                why = "lies outside the labels group" if _escapes(p) else "does not exist"
                self.r.add("label-missing", g.path, f"listed label {p!r} {why}")
                continue
            lg = self.group(p, res)
            if lg is None:
                if res[1].get("node_type", "group") != "group":
                    self.r.add("label-missing", g.path, f"listed label {p!r} is an array")
                continue
            if "multiscales" not in lg.ome:
                self.r.add("label-multiscales", p, "listed label has no 'multiscales'")
                continue
            self.image(lg, image_levels, listed=True)

    def plate(self, g: _Group) -> None:
        facts = rules.check_plate(self.r, g.path, g.ome["plate"], g.version)
        paths = [_join(g.path, w) for w in facts.wells]
        self.prefetch(paths)
        if self.fields:
            fields: list[str] = []
            for p in paths:
                res = self.cache.get(p)
                if isinstance(res, tuple):
                    ome, _ = ome_section(res[2], res[0])
                    well = ome.get("well")
                    images = well.get("images") if isinstance(well, Mapping) else None
                    for im in images if isinstance(images, list) else []:
                        if isinstance(im, Mapping) and isinstance(im.get("path"), str):
                            fields.append(_join(p, im["path"]))
            self.prefetch_images(fields)
        for wg in self._listed(g.path, paths, "well-missing", "listed well", "well"):
            self.well(wg, facts)

    def _listed(
        self, parent: str, paths: list[str], code: str, noun: str, key: str
    ) -> list[_Group]:
        """The groups at *paths* (listed by *parent*) that exist and carry *key*; every
        other one is a *code* finding on *parent* saying why."""
        found = []
        for p, res in zip(paths, self.read(paths), strict=True):
            if isinstance(res, _Unreadable):
                continue
            if res is None:
                if not self.metadata_only:
                    self.r.add(code, parent, f"{noun} {p!r} does not exist")
                continue
            child = self.group(p, res)
            if child is None:
                if res[1].get("node_type", "group") != "group":
                    self.r.add(code, parent, f"{noun} {p!r} is an array")
                continue
            if key not in child.ome:
                self.r.add(code, parent, f"{noun} {p!r} has no {key!r} metadata")
                continue
            found.append(child)
        return found

    def well(self, g: _Group, plate: PlateFacts | None) -> None:
        fields = rules.check_well(self.r, g.path, g.ome["well"], g.version, plate)
        if not self.fields and plate is not None:
            return
        paths = [_join(g.path, f) for f in fields]
        self.prefetch_images(paths)
        for fg in self._listed(g.path, paths, "field-missing", "field", "multiscales"):
            self.image(fg)

    def scene(self, g: _Group) -> None:
        """A 0.6 scene: its own rules, the images its transformations name, and the graph
        they make together (parameters against dimensions, connectedness)."""
        from napari_ozx.errors import TransformError
        from napari_ozx.ngff.model.graph import graph_from_hierarchy

        scene = g.ome["scene"]
        rules.check_scene(self.r, g.path, scene)
        if not isinstance(scene, Mapping):
            return
        paths = []
        for t in scene.get("coordinateTransformations") or []:
            for side in ("input", "output"):
                ref = t.get(side) if isinstance(t, Mapping) else None
                p = ref.get("path") if isinstance(ref, Mapping) else None
                if isinstance(p, str) and p.strip("/"):
                    paths.append(_join(g.path, p))
        paths = list(dict.fromkeys(paths))
        self.prefetch_images(paths)
        for ig in self._listed(g.path, paths, "scene-transforms", "scene image", "multiscales"):
            self.image(ig)

        def read_ome(path: str) -> Mapping[str, Any] | None:
            (res,) = self.read([path])
            if not isinstance(res, tuple):
                return None
            return ome_section(res[2], res[0])[0]

        try:
            graph = graph_from_hierarchy(read_ome, g.path)
            graph.check_cycles()
        except TransformError as e:
            self.r.add("transform-params", g.path, str(e))
            return
        named = [k for k in graph.systems() if k[1]]
        if named:
            reach = graph.reachable(named[0])
            for k in named:
                if k not in reach:
                    self.r.add(
                        "graph-connected",
                        g.path,
                        f"coordinate system {k[1]!r}"
                        + (f" of {k[0]!r}" if k[0] else "")
                        + f" is not linked to {named[0][1]!r}",
                    )

    def collection(self, g: _Group) -> None:
        ome_path = _join(g.path, "OME")
        (res,) = self.read([ome_path])
        series: list[str] | None = None
        if isinstance(res, tuple):
            _, _, attrs = res
            ome, _ = ome_section(attrs, res[0])
            raw = ome.get("series", attrs.get("series"))
            if raw is not None:
                series = rules.check_series(self.r, ome_path, raw)
        if series is None:
            series = self._numbered_groups(g.path)
            if not series:
                self.r.add("bf2raw-images", g.path, "no OME/series and no group '0'")
                return
        paths = [_join(g.path, s) for s in series]
        self.prefetch_images(paths)
        for p, res in zip(paths, self.read(paths), strict=True):
            if isinstance(res, _Unreadable):
                continue
            sg = self.group(p, res) if res is not None else None
            if sg is None or "multiscales" not in sg.ome:
                if res is None or sg is not None:
                    self.r.add("bf2raw-series", g.path, f"series {p!r} is not an image group")
                continue
            self.image(sg)

    def _numbered_groups(self, path: str) -> list[str]:
        found: list[str] = []
        batch = 8
        while len(found) < MAX_SERIES:
            names = [str(i) for i in range(len(found), len(found) + batch)]
            results = self.read([_join(path, n) for n in names])
            for n, res in zip(names, results, strict=True):
                if not isinstance(res, tuple):
                    return found
                found.append(n)
            batch = min(batch * 2, 256)
        return found
