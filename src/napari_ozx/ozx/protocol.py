"""What the OME layer (:mod:`napari_ozx.ngff`) may ask of a container store.

zarr's ``Store`` API answers "give me these bytes"; a single-file container knows more
before any byte is read: each member's declared size, what the archive holds when the
root ``zarr.json`` is missing, and a summary of the archive for the inspector and the
CLI. The OME layer asks for those through :class:`Container` only, so it never reaches
into ZIP records (central-directory entries, compression method numbers) itself.

A store that is not a container (``LocalStore``, ``FsspecStore``) simply does not
implement the protocol; :func:`as_container` returns ``None`` for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ArchiveSummary", "Container", "as_container"]


@dataclass(frozen=True)
class ArchiveSummary:
    """Facts about a container archive, read from its end records and central directory."""

    path: str  #: the archive's path or URL
    file_size: int
    entries: int  #: member records in the central directory (duplicates counted)
    zip64: bool  #: ZIP64 end records present
    comment: str  #: the archive comment, decoded (``repr`` of the bytes if not UTF-8)
    methods: Mapping[str, int]  #: compression method name -> number of file members
    duplicates: int  #: names with more than one record
    stored_bytes: int  #: sum of the members' stored (compressed) sizes


@runtime_checkable
class Container(Protocol):
    """A zarr store backed by one archive whose member table is known up front."""

    def member_size(self, key: str) -> int | None:
        """The uncompressed size the archive declares for ``key``, before reading it.

        ``None`` when there is no such member, or when the declared size is one the
        store refuses by itself on reading (a deflate ratio no encoder can produce), so
        that the precise error comes from the read.
        """
        ...

    def stored_sizes(self) -> tuple[Sequence[str], Sequence[int]]:
        """Sorted names of the file members and their stored (compressed) sizes."""
        ...

    def missing_root_reason(self) -> str:
        """Why the archive has no root ``zarr.json``, phrased as a reason (RFC-9)."""
        ...

    def archive_summary(self) -> ArchiveSummary:
        """End-record and central-directory facts for inspectors and the CLI."""
        ...


def as_container(store: object) -> Container | None:
    """``store`` as a :class:`Container`, or ``None`` if it is not one."""
    return store if isinstance(store, Container) else None
