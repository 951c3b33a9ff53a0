"""RFC-9 (zipped OME-Zarr, ``.ozx``) conformance findings.

:func:`validate` reads an archive's end records and central directory (raising
:class:`~napari_ozx.errors.ZipFormatError` when it cannot: the CLI's exit status 2) and
reports every problem as a :class:`Finding`: ``error`` (a MUST broken, or unsafe or corrupt
content), ``warning`` (a SHOULD not followed, or a harmless oddity), ``info`` (a summary).
Each finding quotes its rule; the rules and predicates are :mod:`napari_ozx.ozx.rfc9`'s,
the ones the writer obeys, and :data:`CHECKS` maps finding codes to a severity and a rule.
Member-level findings of one code are capped at :data:`MAX_PER_CODE`, so a broken
100k-entry archive still gives a readable report.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import posixpath
import sys
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_ozx.errors import ZipFormatError
from napari_ozx.ozx import rfc9
from napari_ozx.ozx._zip import (
    BinaryFile,
    FileObjRangeReader,
    FileRangeReader,
    LocalExtent,
    RangeReader,
    ZipEntry,
    ZipIndex,
    read_local_header,
    read_zip_index,
)
from napari_ozx.ozx.findings import Finding, Severity
from napari_ozx.ozx.records import (
    METHOD_DEFLATED,
    METHOD_STORED,
    SIG_DATA_DESCRIPTOR,
    SIG_EOCD,
    SIG_LOCAL,
    method_name,
)

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from napari_ozx.ozx.store import OzxStore

#: a zarr.json document, parsed (a JSON object; its values are narrowed where read)
_Document = Mapping[str, object]

__all__ = [
    "CHECKS",
    "RULES",
    "Finding",
    "Severity",
    "ValidationReport",
    "validate",
    "validate_rfc9",
]

logger = logging.getLogger(__name__)


#: At most this many findings per code; the rest are counted in one summary finding.
MAX_PER_CODE = 20
#: Biggest zarr.json we are willing to read.
MAX_METADATA_BYTES = 64 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024
_ZIP_MAGICS = (SIG_LOCAL, SIG_EOCD, SIG_DATA_DESCRIPTOR)

# --------------------------------------------------------------------------- rules (quoted)
# RFC-9's own rules, with their quoted text and section, are in napari_ozx.ozx.rfc9; the
# ZIP hygiene and integrity rules below are this validator's (APPNOTE, not RFC-9).

H_NAMES = (
    "ZIP hygiene (APPNOTE 4.4.17): member names are relative paths with forward slashes, "
    "no drive letter or leading slash; '..' segments let an extractor write outside its "
    "target directory."
)
H_DUPLICATES = (
    "ZIP hygiene: each member name should occur once; readers disagree on which duplicate "
    "wins (zipfile, zarr's ZipStore and napari-ozx read the last one)."
)
H_ENCRYPTION = "ZIP hygiene: encrypted members cannot be read by OME-Zarr tools."
H_METHOD = (
    "ZIP hygiene: only STORED (0) and DEFLATED (8) members are widely readable; RFC-9 "
    "recommends STORED."
)
H_CRC = "ZIP integrity (APPNOTE 4.4.7): the CRC-32 of a member's data must match its record."
H_OVERLAP = "ZIP integrity: members' local headers and data must not overlap each other."
H_LOCAL = (
    "ZIP integrity (APPNOTE 4.3.7): every central directory record points at a local file "
    "header with the same name and method, and its data lies before the central directory."
)
H_DATA_DESCRIPTOR = (
    "ZIP hygiene: data descriptors (flag bit 3) on STORED members hide the sizes from the "
    "local header, which breaks streaming readers; RFC-9 writers know sizes up front."
)
H_TRAILING = "ZIP hygiene: nothing should follow the end of central directory record."
H_ZARR = "Zarr v3: zarr.json is a JSON object with zarr_format 3 and node_type group or array."
H_DIRECTORY = "ZIP: directory entries (names ending in '/') are ignored by Zarr readers."

#: code -> (severity, rule): an :class:`~napari_ozx.ozx.rfc9.Rule` or a hygiene rule's text.
#: The severity is the finding's, not the rule's: "root-not-ome" cites a MUST but only
#: warns (a plain Zarr hierarchy is readable, just not OME-Zarr).
CHECKS: dict[str, tuple[Severity, rfc9.Rule | str]] = {
    # RFC-9 MUST / SHALL NOT
    "multi-part": ("error", rfc9.SINGLE_PART),
    "root-zarr-json-missing": ("error", rfc9.ROOT),
    "root-zarr-json-invalid": ("error", rfc9.ROOT),
    "nested-archive": ("error", rfc9.NOT_EMBEDDED),
    "disconnected-node": ("error", rfc9.ONE_HIERARCHY),
    # RFC-9 SHOULD
    "zip64-missing": ("warning", rfc9.ZIP64),
    "compressed-entry": ("warning", rfc9.STORED),
    "sharding-not-used": ("warning", rfc9.SHARDING),
    "root-zarr-json-not-first-local": ("warning", rfc9.ORDER),
    "root-zarr-json-not-first-cd": ("warning", rfc9.ORDER),
    "zarr-json-order-local": ("warning", rfc9.ORDER),
    "zarr-json-order-cd": ("warning", rfc9.ORDER),
    "comment-missing": ("warning", rfc9.COMMENT),
    "comment-invalid": ("warning", rfc9.COMMENT),
    "ome-version-mismatch": ("warning", rfc9.COMMENT),
    "root-not-ome": ("warning", rfc9.ONE_HIERARCHY),
    "file-extension": ("warning", rfc9.EXTENSION),
    # hygiene and integrity
    "duplicate-name": ("error", H_DUPLICATES),
    "unsafe-name": ("error", H_NAMES),
    "encrypted-entry": ("error", H_ENCRYPTION),
    "unsupported-compression": ("error", H_METHOD),
    "crc-mismatch": ("error", H_CRC),
    "overlapping-entries": ("error", H_OVERLAP),
    "bad-local-header": ("error", H_LOCAL),
    "member-unreadable": ("error", H_LOCAL),
    "zarr-json-invalid": ("error", H_ZARR),
    "data-descriptor": ("warning", H_DATA_DESCRIPTOR),
    "trailing-data": ("warning", H_TRAILING),
    "directory-entries": ("info", H_DIRECTORY),
    "summary": ("info", "RFC-9: Zipped OME-Zarr"),
    "findings-truncated": ("info", "napari-ozx: at most 20 findings per code are listed."),
}

#: code -> (severity, quoted rule text): what :attr:`Finding.rule` carries
RULES: dict[str, tuple[Severity, str]] = {
    code: (severity, str(rule)) for code, (severity, rule) in CHECKS.items()
}


@dataclass
class ValidationReport:
    """The findings of a validation (:func:`validate_rfc9`, or :func:`napari_ozx.validate`:
    the OME-Zarr rules and the container); :attr:`ok` when nothing fails.

    Parameters
    ----------
    findings : list of Finding, optional
        Every finding, in the order found.
    source : str, optional
        What was validated.
    deep : bool, default False
        Whether every member's CRC-32 was checked.
    strict_codes : frozenset of str, optional
        Warnings with these codes fail :attr:`ok` too (``strict``: the SHOULDs the strict
        schemas require, :data:`napari_ozx.ngff.validate.rules.STRICT_CODES`).
    """

    findings: list[Finding] = field(default_factory=list)
    source: str | None = None
    deep: bool = False
    #: warnings with these codes fail :attr:`ok` too (``strict``: the SHOULDs the strict
    #: schemas require, :data:`napari_ozx.ngff.validate.rules.STRICT_CODES`)
    strict_codes: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed, but those in :attr:`strict_codes`)."""
        return not any(
            f.severity == "error" or (f.severity == "warning" and f.code in self.strict_codes)
            for f in self.findings
        )

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def codes(self) -> set[str]:
        return {f.code for f in self.findings}

    def by_code(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]

    def to_dict(self) -> dict[str, Any]:
        counts = Counter(f.severity for f in self.findings)
        return {
            "source": self.source,
            "ok": self.ok,
            "deep": self.deep,
            "counts": {s: counts.get(s, 0) for s in ("error", "warning", "info")},
            "findings": [f.to_dict() for f in self.findings],
        }

    def __str__(self) -> str:
        head = f"{self.source or '<archive>'}: {'OK' if self.ok else 'NOT CONFORMANT'}"
        return "\n".join([head, *(f"  {f}" for f in self.findings)])


# --------------------------------------------------------------------------- helpers


def _node_dir(name: str) -> str:
    return name[: -len("zarr.json")].rstrip("/")


class _Collector:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self._counts: Counter[str] = Counter()

    def add(self, code: str, message: str, member: str | None = None) -> None:
        self._counts[code] += 1
        if self._counts[code] > MAX_PER_CODE:
            return
        severity, rule = RULES[code]
        self.findings.append(Finding(severity, code, message, member, rule))

    def finish(self) -> list[Finding]:
        for code, n in self._counts.items():
            if n > MAX_PER_CODE:
                severity, rule = RULES["findings-truncated"]
                self.findings.append(
                    Finding(
                        severity,
                        "findings-truncated",
                        f"{n - MAX_PER_CODE} more {code!r} findings not listed ({n} in all)",
                        None,
                        rule,
                    )
                )
        order = {"error": 0, "warning": 1, "info": 2}
        return sorted(self.findings, key=lambda f: order[f.severity])


def _read_local(reader: RangeReader, entry: ZipEntry, cd_offset: int) -> LocalExtent:
    """Read and check the local header of ``entry`` against its central record.

    A data descriptor (flag bit 3) may follow the data; its length varies (12-24 bytes)
    and the flag can lie, so overlaps are judged on header + name + extra + data only.
    """
    return read_local_header(reader, entry, limit=cd_offset)


def _iter_member(reader: RangeReader, entry: ZipEntry, local: LocalExtent) -> Iterable[bytes]:
    """The uncompressed bytes of a STORED/DEFLATED member in chunks, with a bomb guard."""
    pos, stop = local.data_offset, local.data_offset + entry.compressed_size
    if entry.method == METHOD_STORED:
        while pos < stop:
            n = min(_CHUNK, stop - pos)
            yield reader.read(pos, n)
            pos += n
        return
    inflater = zlib.decompressobj(-15)
    produced = 0
    limit = entry.uncompressed_size
    while pos < stop or inflater.unconsumed_tail:
        if inflater.unconsumed_tail:
            raw = inflater.unconsumed_tail
        else:
            n = min(_CHUNK, stop - pos)
            raw = reader.read(pos, n)
            pos += n
        try:
            out = inflater.decompress(raw, max(1, min(_CHUNK, limit + 1 - produced)))
        except zlib.error as exc:
            raise ZipFormatError(f"not a valid deflate stream ({exc})") from None
        produced += len(out)
        if produced > limit:
            raise ZipFormatError(f"inflates to more than the declared {limit} bytes")
        yield out
        if inflater.eof:
            break
    if produced != limit or not inflater.eof:
        raise ZipFormatError(f"inflates to {produced} bytes, central directory says {limit}")


def _read_member(reader: RangeReader, entry: ZipEntry, local: LocalExtent) -> bytes:
    return b"".join(_iter_member(reader, entry, local))


def _head_bytes(reader: RangeReader, entry: ZipEntry, local: LocalExtent, n: int = 4) -> bytes:
    if entry.method == METHOD_STORED:
        return reader.read(local.data_offset, min(n, entry.compressed_size))
    raw = reader.read(local.data_offset, min(entry.compressed_size, 4096))
    try:
        return zlib.decompressobj(-15).decompress(raw, n)
    except zlib.error:
        return b""


# --------------------------------------------------------------------------- validate


def validate_rfc9(
    source: str | os.PathLike[str] | OzxStore | BinaryFile, *, deep: bool = False
) -> ValidationReport:
    """Check an ``.ozx`` archive against RFC-9 (the container only).

    The OME-Zarr rules too: :func:`napari_ozx.validate`.

    Parameters
    ----------
    source : str, os.PathLike, OzxStore or binary file object
        The archive.
    deep : bool, default False
        Also verify every member's CRC-32 (reads the whole file); otherwise only the
        ``zarr.json`` documents are read in full.

    Returns
    -------
    ValidationReport
        Every finding, each quoting its RFC-9 rule.

    Raises
    ------
    ZipFormatError
        The archive cannot be parsed at all.
    """
    reader, index, label, path, owned = _open(source)
    try:
        col = _Collector()
        _validate(reader, index, path, deep, col)
        return ValidationReport(findings=col.finish(), source=label, deep=deep)
    finally:
        if owned:
            reader.close()


#: the RFC-9 validator's name before :func:`napari_ozx.validate` covered the OME-Zarr rules
validate = validate_rfc9


def _is_ozx_store(source: object) -> TypeIs[OzxStore]:
    # An OzxStore can only exist if its module (and zarr) is imported; don't import zarr here.
    store_mod = sys.modules.get("napari_ozx.ozx.store")
    return store_mod is not None and isinstance(source, store_mod.OzxStore)


def _open(
    source: str | os.PathLike[str] | OzxStore | BinaryFile,
) -> tuple[RangeReader, ZipIndex, str | None, str | None, bool]:
    if _is_ozx_store(source):
        return source.reader, source.index, str(source), source.path, False
    path: str | None
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        reader: RangeReader = FileRangeReader(path)
        owned = True
    elif hasattr(source, "seek") and hasattr(source, "read"):
        reader = FileObjRangeReader(source)
        path = reader.name
        owned = False
    else:
        raise TypeError(f"cannot validate a {type(source).__name__}")
    try:
        index = read_zip_index(reader, allow_multi_part=True)
    except BaseException:
        if owned:
            reader.close()
        raise
    return reader, index, path, path, owned


def _validate(
    reader: RangeReader, index: ZipIndex, path: str | None, deep: bool, col: _Collector
) -> None:
    """Every check, in report order: container, entries, local headers, metadata."""
    _check_container(index, path, col)
    _check_entries(index, col)
    locals_ = _check_local_headers(reader, index, deep, col)
    metadata = _read_metadata(reader, index, locals_, col)
    by_name = index.by_name
    _check_root(by_name, col)
    _check_hierarchy(metadata, by_name, col)
    _check_order(index.entries, locals_, col, have_root="zarr.json" in by_name)
    _check_sharding(metadata, col)
    version = _check_version(metadata.get("zarr.json"), index.comment, col)
    _add_summary(index, metadata, version, col)


def _check_container(index: ZipIndex, path: str | None, col: _Collector) -> None:
    """Container-level: parts, ZIP64 end records, trailing bytes, file extension."""
    if index.multi_part:
        col.add("multi-part", "the end records' disk numbers say this archive is split/spanned")
    if not index.zip64:
        col.add(
            "zip64-missing",
            "no ZIP64 end of central directory record/locator (Python's zipfile, for one, "
            "writes them only for archives that need them)",
        )
    if index.trailing_bytes > 0:
        col.add("trailing-data", f"{index.trailing_bytes} bytes follow the end of the archive")
    if path is not None and not rfc9.has_ozx_extension(path):
        col.add("file-extension", f"file name {os.path.basename(path)!r} does not end in .ozx")


def _check_entries(index: ZipIndex, col: _Collector) -> None:
    """Names and entry flags: duplicates, unsafe names, encryption, compression methods,
    data descriptors, directory entries."""
    entries = index.entries
    if index.duplicates:
        name_counts = Counter(e.name for e in entries)
        for name in index.duplicates:
            col.add("duplicate-name", f"{name_counts[name]} members are named {name!r}", name)
    dirs = 0
    compressed: list[str] = []
    descriptors: list[str] = []
    for e in entries:
        name = e.name
        for name_problem in rfc9.name_problems(name):
            if name_problem.kind in rfc9.UNSAFE_NAME_KINDS:
                col.add("unsafe-name", f"member name {name!r} {name_problem.reason}", name)
        if e.is_dir:
            dirs += 1
        if e.is_encrypted:
            col.add("encrypted-entry", f"member {name!r} is encrypted", name)
        if e.method not in (METHOD_STORED, METHOD_DEFLATED):
            col.add(
                "unsupported-compression",
                f"member {name!r} uses {method_name(e.method)}",
                name,
            )
        elif rfc9.is_compressed(e.method) and not e.is_dir:
            compressed.append(name)
        if e.method == METHOD_STORED and e.has_data_descriptor and not e.is_dir:
            descriptors.append(name)
    if compressed:
        col.add(
            "compressed-entry",
            f"{len(compressed)} of {len(entries)} members are compressed by the ZIP layer "
            f"(first: {compressed[0]!r})",
            compressed[0],
        )
    if descriptors:
        col.add(
            "data-descriptor",
            f"{len(descriptors)} STORED members use data descriptors (first: {descriptors[0]!r})",
            descriptors[0],
        )
    if dirs:
        col.add("directory-entries", f"{dirs} directory entries (ignored)")


def _check_local_headers(
    reader: RangeReader, index: ZipIndex, deep: bool, col: _Collector
) -> dict[int, LocalExtent]:
    """Local headers: each checked against its central record, overlaps, nested archives
    and (``deep``) the CRC-32 of every member but the zarr.json documents. Returns the
    local extents by entry index (none for a multi-part archive)."""
    locals_: dict[int, LocalExtent] = {}
    if index.multi_part:
        return locals_
    entries = index.entries
    for e in entries:
        try:
            locals_[e.index] = _read_local(reader, e, index.cd_offset)
        except ZipFormatError as exc:
            col.add("bad-local-header", str(exc), e.name)
    ordered = sorted((e for e in entries if e.index in locals_), key=lambda e: e.header_offset)
    for prev, cur in itertools.pairwise(ordered):
        if cur.header_offset < locals_[prev.index].end:
            col.add(
                "overlapping-entries",
                f"member {cur.name!r} (offset {cur.header_offset}) starts inside member "
                f"{prev.name!r} (ends at {locals_[prev.index].end})",
                cur.name,
            )
    _check_nested(reader, entries, locals_, col)
    if deep:
        for e in entries:
            loc = locals_.get(e.index)
            if loc is None or e.is_dir or e.is_encrypted or e.method not in (0, 8):
                continue
            if rfc9.is_zarr_json(e.name):
                continue  # checked by _read_metadata
            _check_crc(reader, e, loc, col)
    return locals_


def _check_nested(
    reader: RangeReader,
    entries: Sequence[ZipEntry],
    locals_: dict[int, LocalExtent],
    col: _Collector,
) -> None:
    """Members named like an ``.ozx``, or whose data starts like a ZIP archive."""
    for e in entries:
        loc = locals_.get(e.index)
        if e.is_dir or e.is_encrypted:
            continue
        if rfc9.is_nested_archive_name(e.name):
            col.add("nested-archive", f"member {e.name!r} is named like an .ozx", e.name)
            continue
        if loc is None or e.compressed_size == 0 or e.method not in (0, 8):
            continue
        try:
            head = _head_bytes(reader, e, loc)
        except ZipFormatError:
            head = b""
        if head[:4] in _ZIP_MAGICS:
            col.add("nested-archive", f"member {e.name!r} is itself a ZIP archive", e.name)


def _read_metadata(
    reader: RangeReader, index: ZipIndex, locals_: dict[int, LocalExtent], col: _Collector
) -> dict[str, _Document]:
    """Read every readable zarr.json (size-capped, CRC-checked, parsed, shape-checked):
    ``name -> document`` of the valid ones."""
    metadata: dict[str, _Document] = {}
    for name, e in index.by_name.items():
        if not rfc9.is_zarr_json(name):
            continue
        loc = locals_.get(e.index)
        if loc is None or e.is_encrypted or e.method not in (0, 8):
            continue
        if e.uncompressed_size > MAX_METADATA_BYTES:
            col.add(
                "zarr-json-invalid",
                f"{name!r} declares {e.uncompressed_size} bytes; not read",
                name,
            )
            continue
        try:
            raw = _read_member(reader, e, loc)
        except ZipFormatError as exc:
            col.add("member-unreadable", f"cannot read {name!r}: {exc}", name)
            continue
        if zlib.crc32(raw) != e.crc32:
            col.add("crc-mismatch", f"CRC-32 of {name!r} does not match its record", name)
        code = "root-zarr-json-invalid" if name == "zarr.json" else "zarr-json-invalid"
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            col.add(code, f"{name!r} is not valid UTF-8 JSON: {exc}", name)
            continue
        problem = _zarr_json_problem(doc)
        if problem:
            col.add(code, f"{name!r}: {problem}", name)
            continue
        metadata[name] = doc
    return metadata


def _check_root(by_name: Mapping[str, ZipEntry], col: _Collector) -> None:
    """A root zarr.json, or a hint where the hierarchy is instead."""
    if "zarr.json" in by_name:
        return
    nested = sorted((n for n in by_name if rfc9.is_zarr_json(n)), key=rfc9.name_depth)
    hint = (
        f"; found {nested[0]!r}: zip the contents of the hierarchy's directory, not the "
        "directory itself"
        if nested
        else ""
    )
    col.add("root-zarr-json-missing", f"no zarr.json at the archive root{hint}", None)


def _check_sharding(metadata: Mapping[str, _Document], col: _Collector) -> None:
    """Every array sharded (RFC-9 SHOULD)."""
    for name, doc in metadata.items():
        if doc.get("node_type") == "array" and not _uses_sharding(doc):
            col.add("sharding-not-used", f"array {_node_dir(name) or '/'!r} is not sharded", name)


def _check_version(root: _Document | None, comment: bytes, col: _Collector) -> object:
    """The root's ``attributes.ome``, the archive comment and whether their OME-Zarr
    versions agree. Returns the version (the root's, else the comment's), or None."""
    root_version = None
    if root is not None:
        attrs = root.get("attributes")
        ome = attrs.get("ome") if isinstance(attrs, dict) else None
        if isinstance(ome, dict):
            root_version = ome.get("version")
        else:
            col.add(
                "root-not-ome",
                "root zarr.json has no attributes.ome: a Zarr hierarchy, but not OME-Zarr",
                "zarr.json",
            )
    comment_version = _check_comment(comment, col)
    if (
        comment_version is not None
        and root_version is not None
        and str(comment_version) != str(root_version)
    ):
        col.add(
            "ome-version-mismatch",
            f"archive comment says OME-Zarr {comment_version!r}, root zarr.json says "
            f"{root_version!r}",
            "zarr.json",
        )
    return root_version or comment_version


def _add_summary(
    index: ZipIndex, metadata: Mapping[str, _Document], version: object, col: _Collector
) -> None:
    """The closing info finding: entries, groups, arrays, ZIP64, OME-Zarr version."""
    arrays = sum(1 for d in metadata.values() if d.get("node_type") == "array")
    groups = sum(1 for d in metadata.values() if d.get("node_type") == "group")
    col.add(
        "summary",
        f"{len(index.entries)} entries, {groups} groups, {arrays} arrays, "
        f"ZIP64 end records {'present' if index.zip64 else 'absent'}, "
        f"OME-Zarr version {version or 'unknown'}",
    )


def _check_crc(reader: RangeReader, e: ZipEntry, loc: LocalExtent, col: _Collector) -> None:
    crc = 0
    try:
        for chunk in _iter_member(reader, e, loc):
            crc = zlib.crc32(chunk, crc)
    except ZipFormatError as exc:
        col.add("member-unreadable", f"cannot read {e.name!r}: {exc}", e.name)
        return
    if crc != e.crc32:
        col.add("crc-mismatch", f"CRC-32 of {e.name!r} does not match its record", e.name)


def _zarr_json_problem(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    if doc.get("zarr_format") != 3:
        return f"zarr_format is {doc.get('zarr_format')!r}, expected 3"
    if doc.get("node_type") not in ("group", "array"):
        return f"node_type is {doc.get('node_type')!r}, expected 'group' or 'array'"
    return None


def _uses_sharding(doc: _Document) -> bool:
    codecs = doc.get("codecs")
    if not isinstance(codecs, list):
        return False
    return any(isinstance(c, dict) and c.get("name") == "sharding_indexed" for c in codecs)


def _check_hierarchy(
    metadata: Mapping[str, _Document], by_name: Mapping[str, ZipEntry], col: _Collector
) -> None:
    """Every node's parent directories must be group nodes back to the root (Zarr v3 has no
    implicit groups), otherwise the archive holds more than one hierarchy."""
    nodes = {_node_dir(n): n for n in by_name if rfc9.is_zarr_json(n)}
    if "" not in nodes:
        return  # reported as root-zarr-json-missing
    for d, name in sorted(nodes.items()):
        if not d:
            continue
        parent = d
        while parent:
            parent = posixpath.dirname(parent)
            pname = nodes.get(parent)
            if pname is None:
                col.add(
                    "disconnected-node",
                    f"node {d!r} has no zarr.json in its parent {parent or '/'!r}: it is not "
                    "part of the root hierarchy",
                    name,
                )
                break
            pdoc = metadata.get(pname)
            if pdoc is not None and pdoc.get("node_type") == "array":
                col.add(
                    "disconnected-node",
                    f"node {d!r} lies inside array {parent or '/'!r}",
                    name,
                )
                break


def _check_order(
    entries: Sequence[ZipEntry],
    locals_: dict[int, LocalExtent],
    col: _Collector,
    have_root: bool,
) -> None:
    cd_seq = list(entries)
    local_seq = sorted((e for e in entries if e.index in locals_), key=lambda e: e.header_offset)
    for seq, where, suffix in (
        (local_seq, "in local file order", "local"),
        (cd_seq, "in the central directory", "cd"),
    ):
        if not seq:
            continue
        if have_root and seq[0].name != "zarr.json":
            col.add(
                f"root-zarr-json-not-first-{suffix}",
                f"the first entry {where} is {seq[0].name!r}, not the root zarr.json",
                "zarr.json",
            )
        problem = rfc9.order_problem([e.name for e in seq], where)
        if problem is not None:
            col.add(f"zarr-json-order-{suffix}", problem[0], problem[1])


def _check_comment(comment: bytes, col: _Collector) -> str | None:
    version, problem = rfc9.comment_version(comment)
    if problem is not None:
        col.add("comment-missing" if not comment else "comment-invalid", problem)
    return version
