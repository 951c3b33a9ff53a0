"""A :class:`~napari_ozx.ozx.edit.staged.StagedEdit` applied to an ``.ozx``: a new
archive beside the old one, renamed onto it.

Every member the edit does not replace or delete is copied byte for byte
(:meth:`~napari_ozx.ozx.writer.OzxWriter.copy_member`: in the kernel, its CRC-32 trusted
only when the member is STORED and its local header agrees). Order: the old metadata and
the edit's documents (the writer keeps RFC-9's ``zarr.json``-first, breadth-first
order), the groups written by functions, then the old data in the archive's order, a
replaced member's new bytes in its place, the edit's other new keys last. The archive
comment is kept. The old file is only read, through its own open store, while the new
one is written to a locked ``.partial`` file; a failure removes that file and the old
archive is untouched.

:class:`CopyAhead` starts the copy on a thread while the caller still computes its
edit: members in the archive's order up to the first whose data the edit may change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from napari_ozx.errors import OzxError
from napari_ozx.ozx.edit.staged import StagedEdit, under
from napari_ozx.ozx.rfc9 import is_metadata_name

if TYPE_CHECKING:
    from napari_ozx.ozx._zip import ZipEntry
    from napari_ozx.ozx.store import OzxStore
    from napari_ozx.ozx.writer import OzxWriter

__all__ = ["CopyAhead", "rebuild_archive"]


def _members(base: OzxStore) -> list[ZipEntry]:
    """The archive's file members in the order they are stored."""
    return sorted(
        (e for e in base.index.by_name.values() if not e.is_dir), key=lambda e: e.header_offset
    )


class CopyAhead:
    """The new archive for *target* (opened as *base*), its leading members copied on a
    thread: in the archive's order, up to the first data member below one of the groups
    in *changing* (their documents are copied: an edit of those groups changes data
    only). :func:`rebuild_archive` takes it over; :meth:`abort` discards it."""

    def __init__(self, target: Path, base: OzxStore, changing: Iterable[str]) -> None:
        from napari_ozx.ozx.writer import OzxWriter

        self.base = base
        self.members = _members(base)
        self.changing = tuple(p.strip("/") for p in changing)
        self.writer = OzxWriter(target, comment=base.comment or None)
        self.copied = 0  # members[:copied] are in the new archive
        self._error: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="napari-ozx copy ahead")
        self._thread.start()

    def _may_change(self, name: str) -> bool:
        return not is_metadata_name(name) and any(under(name, p) for p in self.changing)

    def _run(self) -> None:
        try:
            for e in self.members:
                if self._may_change(e.name) or self._stopping.is_set():
                    return
                self.writer.copy_member(self.base, e.name)
                self.copied += 1
        except BaseException as e:  # re-raised by join() on the committing thread
            self._error = e

    def join(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        """Stop copying (after the member being copied) and remove the new archive."""
        self._stopping.set()
        self._thread.join()
        self.writer.abort()


def rebuild_archive(
    target: Path, base: OzxStore, edit: StagedEdit, ahead: CopyAhead | None = None
) -> None:
    """Write the ``.ozx`` *target* (opened as *base*) anew with *edit* applied and rename
    it onto *target* (module doc); *ahead* is a :class:`CopyAhead` started for it."""
    from napari_ozx.ozx.write_store import OzxWriteStore
    from napari_ozx.ozx.writer import OzxWriter

    writer: OzxWriter = (
        ahead.writer if ahead is not None else OzxWriter(target, comment=base.comment or None)
    )
    try:
        members = _members(base)
        if ahead is not None:
            ahead.join()
            members = ahead.members[ahead.copied :]
            if any(edit.removes(e.name) for e in ahead.members[: ahead.copied]):
                raise OzxError("the edit changes a member that was copied ahead (not saved)")
        kept = [e for e in members if e.name in edit.puts or not edit.removes(e.name)]
        old = {e.name for e in (ahead.members if ahead is not None else members)}
        for e in kept:
            if is_metadata_name(e.name) and e.name not in edit.puts:
                writer.copy_member(base, e.name)
        for key, doc in edit.puts.items():
            if is_metadata_name(key):
                writer.add(key, doc)
        if edit.writers:
            store = OzxWriteStore(writer)
            for prefix, write_data in edit.writers.items():
                write_data(store, prefix)
        for e in kept:
            if is_metadata_name(e.name):
                continue
            if e.name in edit.puts:
                writer.add(e.name, edit.puts[e.name])
            else:
                writer.copy_member(base, e.name)
        for key, data in edit.puts.items():
            if key not in old and not is_metadata_name(key):
                writer.add(key, data)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
