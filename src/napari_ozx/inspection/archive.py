"""Facts about a single-file container and its RFC-9 conformance.

Read through :class:`napari_ozx.ozx.protocol.Container` (``archive_summary``) and the
RFC-9 validator (:func:`napari_ozx.ozx.validate.validate`); nothing here parses ZIP
records itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from napari_ozx.errors import OzxError
from napari_ozx.inspection._text import format_bytes
from napari_ozx.inspection.facts import Row
from napari_ozx.ozx.protocol import as_container

if TYPE_CHECKING:
    from zarr.abc.store import Store

    from napari_ozx.ozx.store import OzxStore

__all__ = ["ArchiveFacts", "MetadataFacts", "archive_facts", "metadata_facts"]


@dataclass(frozen=True)
class ArchiveFacts:
    path: str
    file_size: int
    entries: int
    zip64: bool
    comment: str
    methods: Mapping[str, int]  # compression method name -> number of entries
    duplicates: int
    stored_bytes: int  # sum of compressed entry sizes
    findings: tuple[Any, ...] = ()  # napari_ozx.ozx.validate.Finding
    validation_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.validation_error is None and not any(
            f.severity == "error" for f in self.findings
        )

    def counts(self) -> dict[str, int]:
        c = Counter(f.severity for f in self.findings)
        return {s: c.get(s, 0) for s in ("error", "warning", "info")}

    def verdict(self) -> str:
        counts = self.counts()
        if self.validation_error:
            return f"cannot validate: {self.validation_error}"
        return ("conformant" if self.ok else "NOT conformant") + (
            f" ({counts['error']} errors, {counts['warning']} warnings)"
        )

    def rows(self) -> tuple[Row, ...]:
        methods = ", ".join(f"{m}: {n:,}" for m, n in sorted(self.methods.items())) or "–"
        return (
            Row("File", self.path),
            Row("File size", format_bytes(self.file_size)),
            Row("Entries", f"{self.entries:,}"),
            Row("ZIP64", "yes" if self.zip64 else "no"),
            Row("Comment", self.comment or "(none)"),
            Row("Compression", methods),
            Row("Duplicate names", str(self.duplicates)),
            Row("RFC-9", self.verdict()),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able facts (``napari-ozx info --json``)."""
        return {
            "path": self.path,
            "size": self.file_size,
            "entries": self.entries,
            "zip64": self.zip64,
            "comment": self.comment,
            "methods": dict(self.methods),
            "duplicates": self.duplicates,
            "stored_bytes": self.stored_bytes,
            "rfc9": {
                "ok": self.ok,
                **self.counts(),
                "validation_error": self.validation_error,
                "findings": [f.to_dict() for f in self.findings],
            },
        }


def archive_facts(store: Store) -> ArchiveFacts | None:
    """The archive facts of a container store (``None`` for a directory or remote tree).

    Validation reads the central directory and every ``zarr.json`` (not the chunks); a
    validator failure becomes ``validation_error``.
    """
    container = as_container(store)
    if container is None:
        return None
    from napari_ozx.ozx.validate import validate

    summary = container.archive_summary()
    findings: tuple[Any, ...] = ()
    err = None
    try:
        findings = tuple(validate(cast("OzxStore", store)).findings)  # the container store
    except (OzxError, OSError, ValueError) as e:
        err = str(e)
    return ArchiveFacts(
        path=summary.path,
        file_size=summary.file_size,
        entries=summary.entries,
        zip64=summary.zip64,
        comment=summary.comment,
        methods=dict(summary.methods),
        duplicates=summary.duplicates,
        stored_bytes=summary.stored_bytes,
        findings=findings,
        validation_error=err,
    )


@dataclass(frozen=True)
class MetadataFacts:
    """The OME-Zarr metadata validator's verdict on a whole hierarchy (any container).

    ``findings`` are :class:`napari_ozx.ngff.validate.rules.Finding`; ``version`` is the root's
    OME-Zarr version as its metadata states it (None if it states none).
    """

    source: str
    version: str | None
    findings: tuple[Any, ...] = ()
    error: str | None = None  #: why the hierarchy could not be validated at all

    @property
    def ok(self) -> bool:
        return self.error is None and not any(f.severity == "error" for f in self.findings)

    def counts(self) -> dict[str, int]:
        c = Counter(f.severity for f in self.findings)
        return {s: c.get(s, 0) for s in ("error", "warning", "info")}

    def badge(self) -> str:
        """One line for a pass/fail badge: ``PASS · OME-Zarr 0.5 · 2 warnings``."""
        spec = f"OME-Zarr {self.version}" if self.version else "OME-Zarr (version not stated)"
        if self.error is not None:
            return f"NOT VALIDATED · {spec} · {self.error}"
        c = self.counts()
        tail = f" · {c['error']} errors" if c["error"] else ""
        tail += f" · {c['warning']} warnings" if c["warning"] else ""
        return ("PASS · " if self.ok else "FAIL · ") + spec + tail


def metadata_facts(store: Store, source: str, version: str | None) -> MetadataFacts:
    """Validate the OME-Zarr metadata of the hierarchy in *store* (never raises for a
    broken file: an unreadable hierarchy becomes ``error``)."""
    from napari_ozx.ngff.validate.walk import validate_ome

    try:
        findings = tuple(validate_ome(store))
    except (OzxError, OSError, ValueError) as e:
        return MetadataFacts(source, version, (), str(e))
    return MetadataFacts(source, version, findings)
