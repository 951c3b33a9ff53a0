"""A :class:`~napari_ozx.ozx.edit.staged.StagedEdit` applied to a directory store.

:func:`commit_directory` writes everything beside its place first, then puts it in place:
a group the edit creates (or deletes and writes again) is built in a locked ``.partial``
directory (:func:`~napari_ozx.ozx.atomic.create_partial`) and renamed (or swapped,
:func:`~napari_ozx.ozx.atomic.swap_directory`) into place; single files go to temporaries
beside them (:class:`~napari_ozx.ozx.atomic.StagedFiles`), all flushed, then renamed, data
first and documents last (deepest first), so a document never lists what is not on disk;
deletions come last. A failure while building removes every temporary; a failure while
renaming undoes the groups already placed. :func:`unwritable` finds what the edit could
not write. The order, step by step: ``docs/design/saving.md``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from napari_ozx.errors import OzxError
from napari_ozx.ozx.atomic import (
    StagedFiles,
    create_partial,
    fsync_dir,
    fsync_tree,
    release,
    remove_stale_partials,
    swap_directory,
)
from napari_ozx.ozx.edit.staged import StagedEdit, WriteData, under
from napari_ozx.ozx.rfc9 import is_metadata_name

logger = logging.getLogger(__name__)

__all__ = ["commit_directory", "unwritable"]


@dataclass
class _Group:
    """A group built in a ``.partial`` directory, then renamed (or swapped) into place."""

    key: str
    replace: bool
    files: dict[str, bytes] = field(default_factory=dict)
    writers: dict[str, WriteData] = field(default_factory=dict)
    partial: Path | None = None
    fd: int | None = None
    old: Path | None = None  # the replaced copy, removed once everything is placed

    def build(self, root: Path) -> None:
        final = root / self.key
        remove_stale_partials(final)
        self.partial, self.fd = create_partial(final, directory=True)
        for rel, data in self.files.items():
            p = self.partial / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        if self.writers:
            from zarr.storage import LocalStore

            store = LocalStore(self.partial)
            for rel, write_data in self.writers.items():
                write_data(store, rel)
        fsync_tree(self.partial)  # on disk before a document lists it

    def place(self, root: Path, before_replace: Callable[[Path], None] | None) -> None:
        assert self.partial is not None
        final = root / self.key
        if self.replace:
            if before_replace is not None:
                before_replace(final)
            kept: list[Path] = []
            swap_directory(self.partial, final, dispose=kept.append)
            self.old = kept[0] if kept else None
        else:
            os.rename(self.partial, final)  # refuses a non-empty folder made meanwhile
        self.partial = None

    def undo(self, root: Path) -> None:
        final = root / self.key
        if self.old is not None:
            swap_directory(self.old, final)  # the previous copy back, ours removed
            self.old = None
        elif not self.replace:
            shutil.rmtree(final, ignore_errors=True)

    def finish(self) -> None:
        release(self.fd)
        self.fd = None
        for p in (self.partial, self.old):
            if p is not None:
                shutil.rmtree(p, ignore_errors=True)
        self.partial = self.old = None


def _document_order(key: str) -> tuple[int, int]:
    """Documents deepest first (a group's document after what it lists), ``.zattrs``
    after ``.zgroup`` / ``.zarray`` (v2: the attributes make it an OME group last)."""
    return (-key.count("/"), key.rsplit("/", 1)[-1] == ".zattrs")


def _plan(root: Path, edit: StagedEdit) -> tuple[list[_Group], dict[str, bytes]]:
    """The groups to build and the single files to replace."""
    isdir: dict[str, bool] = {}

    def exists(key: str) -> bool:
        if key not in isdir:
            isdir[key] = (root / key).is_dir()
        return isdir[key]

    replaced = sorted((p for p in edit.deleted_prefixes if exists(p)), key=len)
    groups: dict[str, _Group] = {}

    def group_of(key: str, inclusive: bool) -> _Group | None:
        for p in replaced:
            if key == p or under(key, p):
                return groups.setdefault(p, _Group(p, replace=True))
        parts = key.split("/")
        for i in range(1, len(parts) + (1 if inclusive else 0)):
            anc = "/".join(parts[:i])
            if not exists(anc):
                return groups.setdefault(anc, _Group(anc, replace=False))
        return None

    def rel(key: str, g: _Group) -> str:
        return key[len(g.key) + 1 :] if key != g.key else ""

    files: dict[str, bytes] = {}
    for key, data in edit.puts.items():
        g = group_of(key, inclusive=False)
        if g is None:
            files[key] = data
        else:
            g.files[rel(key, g)] = data
    for prefix, write_data in edit.writers.items():
        g = group_of(prefix, inclusive=True)
        if g is None:
            raise OzxError(f"the group {prefix!r} exists: delete it first to write it anew")
        g.writers[rel(prefix, g)] = write_data
    ordered = {k: v for k, v in files.items() if not is_metadata_name(k)}
    docs = sorted((k for k in files if is_metadata_name(k)), key=_document_order)
    ordered.update({k: files[k] for k in docs})
    return sorted(groups.values(), key=lambda g: g.key), ordered


def unwritable(root: Path, edit: StagedEdit) -> Path | None:
    """The first folder the edit would write in without write permission, or None."""
    seen: set[Path] = set()
    for key in edit.staged_keys():
        d = (root / key).parent
        while d != root and not d.exists():
            d = d.parent
        if d in seen:
            continue
        seen.add(d)
        if not os.access(d, os.W_OK):
            return d
    return None


def commit_directory(
    root: Path, edit: StagedEdit, *, before_replace: Callable[[Path], None] | None = None
) -> None:
    """Apply *edit* to the directory store *root* (module doc). *before_replace* is
    called with a group's folder just before it is swapped for its new copy (e.g. to
    hand the old files to readers still using them)."""
    groups, files = _plan(root, edit)
    built: list[_Group] = []
    staged: StagedFiles | None = None
    try:
        for g in groups:
            built.append(g)
            g.build(root)
        staged = StagedFiles({root / k: v for k, v in files.items()})
    except BaseException:
        for g in built:
            g.finish()
        raise
    placed: list[_Group] = []
    try:
        for g in built:
            g.place(root, before_replace)
            placed.append(g)
        staged.publish()
    except BaseException:
        staged.discard()
        for g in reversed(placed):
            g.undo(root)
        for g in built:
            g.finish()
        raise
    for g in built:
        g.finish()
    _delete(root, edit, {g.key for g in groups})
    for d in {(root / k).parent for k in [*files, *(g.key for g in groups)]}:
        fsync_dir(d)


def _delete(root: Path, edit: StagedEdit, placed: set[str]) -> None:
    """The deleted keys and groups removed, but for those in a group just placed (it
    holds only what the edit put there)."""

    def is_new(key: str) -> bool:
        return any(key == p or under(key, p) for p in placed)

    for key in edit.deleted:
        if not is_new(key):
            (root / key).unlink(missing_ok=True)
    for prefix in edit.deleted_prefixes:
        if not is_new(prefix) and (root / prefix).is_dir():
            shutil.rmtree(root / prefix)
    logger.debug("edited %s: %d keys deleted", root, len(edit.deleted))
