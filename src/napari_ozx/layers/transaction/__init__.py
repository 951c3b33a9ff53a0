"""One edit of an opened OME-Zarr, all or nothing: :class:`EditTransaction`.

Every feature that changes a file in place (a label save-back, new labels, a ROI table,
a SpatialData element) is a short caller of it: the fingerprint taken when the file was
opened is checked on entry and at commit; keys are staged (``put`` / ``delete`` /
``delete_prefix``, ``put_writer`` for a group streamed at commit);
:meth:`EditTransaction.commit` applies the edit through :mod:`napari_ozx.ozx.edit` (a
directory in place, an ``.ozx`` rebuilt beside itself) and keeps the viewer right
(:mod:`.viewer`). Leaving the ``with`` block without committing changes nothing and leaves
nothing behind. Every failure is one :class:`SaveBackError` (:func:`refusal`,
:func:`save_errors`), reason first, the file named. An example, and the steps:
``docs/design/saving.md``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from napari_ozx.errors import OzxError
from napari_ozx.ozx.edit import (
    CopyAhead,
    Fingerprint,
    StagedEdit,
    WriteData,
    check_key,
    commit_directory,
    rebuild_archive,
    unwritable,
)

if TYPE_CHECKING:
    from napari_ozx.layers.editable import EditableLabels
    from napari_ozx.ngff.read.open import OmeZarr
    from napari_ozx.ozx.store import OzxStore

__all__ = [
    "EditTransaction",
    "Fingerprint",
    "SaveBackError",
    "WriteData",
    "check_node_name",
    "group_transaction",
    "refusal",
    "save_errors",
]


_NODE_NAME = re.compile(r"^[\w][\w.\-]*$")


class SaveBackError(OzxError):
    """A save into an opened file was refused or failed; the file is untouched."""


def refusal(target: Path, reason: str) -> SaveBackError:
    """A save refused before anything is written: the reason, then the file."""
    return SaveBackError(f"{reason}: {target} (nothing was written)")


def check_node_name(target: Path, name: str, what: str) -> None:
    """Refuse *name* for a new node (a label image, a table: *what*) unless it is letters,
    digits, ``_``, ``-`` and ``.``, not starting with ``.``."""
    if not _NODE_NAME.match(name):
        raise refusal(
            target,
            f"{name!r} is not a {what} name (letters, digits, '_', '-', '.'; not starting "
            "with '.')",
        )


@contextlib.contextmanager
def save_errors(action: str, target: Path) -> Iterator[None]:
    """Every failure of a save as one :class:`SaveBackError`, reason first: our own
    errors as they are, a file-system error by its reason (the file is unchanged: saves
    write beside it and rename)."""
    try:
        yield
    except SaveBackError:
        raise
    except OzxError as e:
        raise SaveBackError(f"{e} ({action} {target})") from e
    except OSError as e:
        raise SaveBackError(f"{e.strerror or e} ({action} {target}; the file is unchanged)") from e


class EditTransaction:
    """One all-or-nothing edit of the local OME-Zarr *target* (module doc).

    Parameters
    ----------
    target
        A local OME-Zarr directory or ``.ozx`` file.
    action
        What the save is, for messages: ``"saving labels 'cells' into"`` gives
        "... (saving labels 'cells' into /data/img.ozx)".
    expect
        The :class:`Fingerprint` taken when the data being saved was opened; a file that
        changed since is refused. ``None``: not checked.
    store
        The archive already opened as an :class:`~napari_ozx.ozx.store.OzxStore` (its
        descriptor is reused, and not closed here); default: opened on first need.

    Raises
    ------
    SaveBackError
        On entry and at :meth:`commit`: the file is missing, changed since *expect*, read
        only, or the edit failed (the file is then unchanged).
    """

    def __init__(
        self,
        target: Path | str,
        *,
        action: str = "save",
        expect: Fingerprint | None = None,
        store: OzxStore | None = None,
    ) -> None:
        self.target = Path(target)
        self.action = action
        self.expect = expect
        self._edit = StagedEdit()
        self._store = store
        self._own_store = False
        self._ahead: CopyAhead | None = None
        self._done = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> EditTransaction:
        self.check()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._done:  # left without commit(), or by an exception
            self.abort()

    def check(self) -> None:
        """Refuse (:class:`SaveBackError`) a target that no longer exists or changed
        since *expect* was taken."""
        if not self.target.exists():
            raise refusal(self.target, "the file no longer exists")
        if self.expect is not None and not self.expect.unchanged():
            raise refusal(self.target, "the file changed since it was opened")

    @property
    def is_archive(self) -> bool:
        return self.target.is_file()

    def abort(self) -> None:
        """Discard the edit (nothing on disk changes; a copy started ahead is removed)."""
        self._done = True
        if self._ahead is not None:
            self._ahead.abort()
            self._ahead = None
        self._close_store()

    def _close_store(self) -> None:
        if self._own_store and self._store is not None:
            self._store.close()
            self._store = None

    def _base(self) -> OzxStore:
        if self._store is None:
            from napari_ozx.ozx.store import OzxStore

            self._store = OzxStore(self.target)
            self._own_store = True
        return self._store

    # ------------------------------------------------------------------ staging

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        """Stage *key* (relative to the store's root, ``/``-separated) as *data*."""
        self._edit.put(key, data)

    def delete(self, key: str) -> None:
        """Stage the removal of *key* (nothing happens if it is absent)."""
        self._edit.delete(key)

    def delete_prefix(self, prefix: str) -> None:
        """Stage the removal of every key under ``prefix/`` (a group); keys put under it
        afterwards make its new content (the group is replaced as a whole)."""
        self._edit.delete_prefix(prefix)

    def put_writer(self, prefix: str, write_data: WriteData) -> None:
        """Stage the group *prefix* (absent, or deleted by :meth:`delete_prefix` first)
        as written by ``write_data(store, prefix_in_store)`` at commit: a writable zarr
        store (the group's new ``.partial`` folder, or the new archive) and where in it
        the group is. Its chunks go straight to disk, never all in memory. For an
        ``.ozx`` it creates its arrays before writing their chunks (zarr does)."""
        check_key(prefix)
        if self.exists_group(prefix) and self._edit.deleted_group(prefix) is None:
            raise refusal(
                self.target, f"{prefix!r} exists; delete it first to write it anew (a bug)"
            )
        self._edit.put_writer(prefix, write_data)

    def copy_ahead(self, changing: Iterable[str]) -> None:
        """``.ozx``: start copying the archive's members into the new one on a thread
        now, up to the first data member of a group in *changing* (the edit changes
        only chunks of those groups). Nothing for a directory."""
        if self.is_archive and self._ahead is None:
            self._check_writable()
            self._ahead = CopyAhead(self.target, self._base(), changing)

    # ------------------------------------------------------------------ reading

    def exists(self, key: str) -> bool:
        """*key* is in the store as it was (staged changes are not seen)."""
        if not self.is_archive:
            return (self.target / check_key(key)).is_file()
        entry = self._base().index.by_name.get(key)
        return entry is not None and not entry.is_dir

    def exists_group(self, prefix: str) -> bool:
        """Some key lies under ``prefix/`` in the store as it was."""
        if not self.is_archive:
            return (self.target / check_key(prefix)).is_dir()
        lead = prefix + "/"
        return any(n.startswith(lead) for n in self._base().index.by_name)

    def get(self, key: str) -> bytes | None:
        """*key*'s bytes in the store as it was, or None."""
        if not self.is_archive:
            p = self.target / check_key(key)
            return p.read_bytes() if p.is_file() else None
        if not self.exists(key):
            return None
        buf = self._base().get_sync(key)
        return None if buf is None else buf.to_bytes()

    # ------------------------------------------------------------------ commit

    def _check_writable(self) -> None:
        if self.is_archive:
            if not os.access(self.target.parent, os.W_OK) or not os.access(self.target, os.W_OK):
                raise refusal(self.target, "the file or its folder is read-only")
            return
        where = unwritable(self.target, self._edit)
        if where is not None:
            raise refusal(self.target, f"the folder {where} is read-only (no write permission)")

    def commit(self, *, follow: Iterable[EditableLabels] = (), changed: str | None = None) -> Path:
        """Apply the staged edit, all or nothing; returns the target.

        For an ``.ozx``, every open layer reading the old archive then reads the new
        one, except readers of the array *changed* (a save-back's own labels, whose
        members changed); *follow* are editable labels that count as having opened the
        new file (they hold the saved edits). Raises :class:`SaveBackError`.
        """
        from napari_ozx.layers.transaction.viewer import (
            after_archive,
            after_directory,
            keep_for_readers,
        )

        if self._done:
            raise SaveBackError(f"this edit of {self.target} is already finished")
        try:
            with save_errors(self.action, self.target):
                self.check()
                if self._edit.empty and self._ahead is None:
                    return self.target
                self._check_writable()
                if not self.is_archive:
                    commit_directory(self.target, self._edit, before_replace=keep_for_readers)
                    after_directory(self.target, self._edit)
                    return self.target
                before = Fingerprint.of(self.target)
                ahead, self._ahead = self._ahead, None
                rebuild_archive(self.target, self._base(), self._edit, ahead)
                self._close_store()  # before the others move: nothing of ours holds it
                after_archive(self.target, before, list(follow), changed)
                return self.target
        finally:
            self.abort()


@contextlib.contextmanager
def group_transaction(
    target: Path, group: str, action: str
) -> Iterator[tuple[EditTransaction, OmeZarr]]:
    """An :class:`EditTransaction` of *target* that adds to its group *group* (an
    image's ``labels`` or ``tables``), and the file opened (closed afterwards). Its
    fingerprint is the group's document as read now: a save that changed it meanwhile is
    refused rather than lost. Every failure in the block is one :class:`SaveBackError`
    (:func:`save_errors`)."""
    from napari_ozx.ngff.read.documents import join_path
    from napari_ozx.ngff.read.open import open_ome_zarr

    opened = Fingerprint.of(target, [join_path(group, d) for d in ("zarr.json", ".zattrs")])
    with save_errors(action, target), EditTransaction(target, action=action, expect=opened) as tx:
        oz = open_ome_zarr(str(target))
        try:
            yield tx, oz
        finally:
            oz.close()
