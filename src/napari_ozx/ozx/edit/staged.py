"""What one edit of a store changes, staged before anything is written.

:class:`StagedEdit` holds the keys an edit puts (their bytes), the groups it writes
through a function (:data:`WriteData`: large data streamed at commit, never held in
memory), and the keys and groups it deletes; later calls override earlier ones on the
same key. :class:`Fingerprint` is what must not have changed between opening a file and
committing an edit to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from napari_ozx.errors import OzxError
from napari_ozx.ozx.rfc9 import check_entry_name

if TYPE_CHECKING:
    from zarr.abc.store import Store

__all__ = ["EditError", "Fingerprint", "StagedEdit", "WriteData", "check_key", "under"]


class EditError(OzxError, ValueError):
    """An edit that cannot be staged (overlapping groups, a key in a written group)."""


#: writes a group at commit: called with a writable zarr store and the group's key
#: prefix in it (``write_data(store, "labels/cells")``); it may create the group's arrays
#: (documents first, as zarr does) and writes their chunks
WriteData = Callable[["Store", str], None]


def check_key(key: str) -> str:
    """*key* if it is a store key an edit may name (relative, ``/``-separated, no ``..``
    or empty part: RFC-9's entry-name rules); else
    :class:`~napari_ozx.ozx.writer.InvalidEntryNameError`."""
    from napari_ozx.ozx.writer import InvalidEntryNameError

    check_entry_name(key, InvalidEntryNameError)
    if key.endswith("/") or any(p in ("", ".", "..") for p in key.split("/")):
        raise InvalidEntryNameError(f"{key!r} is not a store key")
    return key


def under(key: str, prefix: str) -> bool:
    """*key* lies inside the group *prefix*."""
    return key.startswith(prefix + "/")


class StagedEdit:
    """The changes of one edit: ``puts`` (key -> bytes), ``writers`` (group prefix ->
    :data:`WriteData`), ``deleted`` keys and ``deleted_prefixes`` (groups)."""

    def __init__(self) -> None:
        self.puts: dict[str, bytes] = {}
        self.writers: dict[str, WriteData] = {}
        self.deleted: set[str] = set()
        self.deleted_prefixes: set[str] = set()

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        key = check_key(key)
        self._refuse_inside_writer(key)
        self.deleted.discard(key)
        self.puts[key] = data if isinstance(data, bytes) else bytes(data)

    def put_writer(self, prefix: str, write_data: WriteData) -> None:
        """The group *prefix* (absent from the store, or deleted by this edit) is
        written by *write_data* at commit."""
        prefix = check_key(prefix)
        for p in self.writers:
            if p == prefix or under(p, prefix) or under(prefix, p):
                raise EditError(f"{prefix!r} overlaps the group {p!r} written by this edit")
        if any(under(k, prefix) for k in self.puts):
            raise EditError(
                f"keys under {prefix!r} were put by this edit; let its function write them"
            )
        self.writers[prefix] = write_data

    def delete(self, key: str) -> None:
        key = check_key(key)
        self.puts.pop(key, None)
        self.deleted.add(key)

    def delete_prefix(self, prefix: str) -> None:
        """Every key of the group *prefix* (and what this edit staged in it) removed."""
        prefix = check_key(prefix)
        self.puts = {k: v for k, v in self.puts.items() if not under(k, prefix)}
        self.writers = {
            p: w for p, w in self.writers.items() if p != prefix and not under(p, prefix)
        }
        self.deleted = {k for k in self.deleted if not under(k, prefix)}
        self.deleted_prefixes = {
            p for p in self.deleted_prefixes if p != prefix and not under(p, prefix)
        }
        self.deleted_prefixes.add(prefix)

    def _refuse_inside_writer(self, key: str) -> None:
        for p in self.writers:
            if under(key, p):
                raise EditError(f"{key!r} lies in the group {p!r} written by a function")

    # ------------------------------------------------------------------ queries

    def removes(self, key: str) -> bool:
        """The store's *key* is replaced or removed by this edit (its old bytes are not
        kept)."""
        return (
            key in self.puts
            or key in self.deleted
            or any(under(key, p) for p in self.deleted_prefixes)
            or any(under(key, p) for p in self.writers)
        )

    def deleted_group(self, key: str) -> str | None:
        """The outermost group deleted by this edit that holds *key*, or None."""
        found = [p for p in self.deleted_prefixes if under(key, p) or key == p]
        return min(found, key=len) if found else None

    @property
    def empty(self) -> bool:
        return not (self.puts or self.writers or self.deleted or self.deleted_prefixes)

    def staged_keys(self) -> Iterable[str]:
        """Every key and group this edit names."""
        yield from self.puts
        yield from self.writers
        yield from self.deleted
        yield from self.deleted_prefixes


@dataclass(frozen=True)
class Fingerprint:
    """What must not change between opening *path* and committing an edit to it: an
    archive's size, modification time and inode; for a directory, the size and
    modification time of the listed *documents* (keys below it; e.g. the array document
    an editor read). Take one with :meth:`of`, compare with :meth:`unchanged`."""

    path: str = field(compare=False)  # the same file, however it is named
    documents: tuple[str, ...] = ()
    stamp: tuple[object, ...] = ()

    @classmethod
    def of(cls, path: str | os.PathLike[str], documents: Iterable[str] = ()) -> Fingerprint:
        p = os.fspath(path)
        docs = tuple(documents)
        stamp: tuple[object, ...]
        if os.path.isdir(p):
            stamp = tuple(_doc_stamp(Path(p, d), d) for d in docs)
        elif os.path.isfile(p):
            st = os.stat(p)
            stamp = ("archive", st.st_size, st.st_mtime_ns, st.st_ino)
        else:
            stamp = ("missing",)
        return cls(p, docs, stamp)

    def now(self) -> Fingerprint:
        """The same fingerprint taken again."""
        return Fingerprint.of(self.path, self.documents)

    def unchanged(self) -> bool:
        return self.now() == self

    @property
    def inode(self) -> int | None:
        """The archive's inode (None for a directory)."""
        if len(self.stamp) == 4 and self.stamp[0] == "archive":
            inode = self.stamp[3]
            return inode if isinstance(inode, int) else None
        return None


def _doc_stamp(p: Path, doc: str) -> tuple[object, ...]:
    try:
        st = p.stat()
    except FileNotFoundError:
        return (doc, None)
    return (doc, st.st_size, st.st_mtime_ns)
