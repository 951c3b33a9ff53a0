"""Keep open lazy arrays correct when the directory they read is replaced by a save.

A layer opened from an OME-Zarr *directory* reads files below it by key; a save onto the
same path swaps in a new tree, whose keys may be missing (zarr answers with fill value:
silent zeros) or hold another layout. So before the swap every live reader
(:func:`register`, :func:`live_readers`) is re-pointed (:func:`repoint`) at a hard-linked
clone of the old tree (:func:`retain_for_readers`), hidden beside the target and removed
once its last reader is gone; without hard links the old tree itself is kept
(:func:`adopt_old_tree`). An ``.ozx`` keeps its inode open, so needs none of this; when
napari-ozx rebuilds one copying its members, :func:`follow_archive` moves the readers to
the new file so the old one's space is freed.

Why a clone, and not a rename or the new tree: ``docs/design/saving.md``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from napari_ozx.ngff.read.documents import local_root

if TYPE_CHECKING:
    import zarr
    from zarr.abc.store import Store

logger = logging.getLogger(__name__)


class ArrayReader(Protocol):
    """What reads one zarr array and can be re-pointed at another (a lazy level's
    source): its ``array``; an optional ``reader`` attribute is its fast path."""

    array: zarr.Array


__all__ = [
    "follow_archive",
    "live_readers",
    "register",
    "repoint",
    "retain_for_readers",
    "set_array",
]

_lock = threading.Lock()
# realpath of a store root -> readers (objects with a zarr ``array`` attribute) reading it
_readers: dict[str, weakref.WeakSet[ArrayReader]] = {}
# retained tree -> number of live readers still pointing at it
_retained: dict[str, int] = {}
# realpath of an .ozx -> readers reading it (through any OzxStore opened on that path)
_archives: dict[str, weakref.WeakSet[ArrayReader]] = {}


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def register(reader: ArrayReader, store: object) -> None:
    """Remember that *reader* (``reader.array`` is a zarr array) reads *store*.

    Local directory stores and local ``.ozx`` archives are tracked; anything else is
    ignored.
    """
    root = local_root(store)
    if root is None:
        archive = _archive_path(store)
        if archive is not None:
            with _lock:
                _archives.setdefault(_key(archive), weakref.WeakSet()).add(reader)
        return
    with _lock:
        _readers.setdefault(_key(root), weakref.WeakSet()).add(reader)


def _archive_path(store: object) -> str | None:
    from napari_ozx.ozx.store import OzxStore

    if isinstance(store, OzxStore) and store.path is not None:
        return os.fspath(store.path)
    return None


def _inode(store: object) -> int | None:
    """The inode an archive store reads (its open descriptor's), or None."""
    fd = getattr(getattr(store, "reader", None), "fd", None)
    if not isinstance(fd, int) or fd < 0:
        return None
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


def follow_archive(
    path: str | os.PathLike[str],
    old_inode: int,
    new_store: Store,
    changed: Collection[str] = (),
) -> int:
    """The ``.ozx`` *path* was replaced by a rebuild whose members are the old file's bytes
    (except the arrays in *changed*): every live reader of the old file (inode
    *old_inode*) now reads *new_store*, and its fast path's cached shard indexes (offsets
    in the old file) are dropped. Readers of a *changed* array keep the old file. Returns
    how many readers moved."""
    import zarr
    from zarr import AsyncArray
    from zarr.storage import StorePath

    with _lock:
        readers = list(_archives.get(_key(path), ()))
    moved = 0
    for r in readers:
        old = r.array.store_path.store
        if old is new_store or r.array.path in changed or _inode(old) != old_inode:
            continue
        aa = AsyncArray(metadata=r.array.metadata, store_path=StorePath(new_store, r.array.path))
        set_array(r, zarr.Array(aa))
        moved += 1
    return moved


def live_readers(tree: str | os.PathLike[str]) -> list[tuple[ArrayReader, str]]:
    """(reader, path of its store root relative to *tree*) for every live reader whose
    store root is *tree* or lies inside it."""
    top = _key(tree)
    out: list[tuple[ArrayReader, str]] = []
    with _lock:
        for root, readers in list(_readers.items()):
            if root == top:
                rel = ""
            elif root.startswith(top + os.sep):
                rel = os.path.relpath(root, top)
            else:
                continue
            out.extend((r, rel) for r in list(readers))
            if not readers:
                del _readers[root]
    return out


def repoint(reader: ArrayReader, new_root: str | os.PathLike[str]) -> None:
    """Make *reader* read the same array (same metadata, same key) below *new_root*."""
    import zarr
    from zarr import AsyncArray
    from zarr.storage import LocalStore, StorePath

    old = reader.array
    store = LocalStore(Path(new_root), read_only=True)
    aa = AsyncArray(metadata=old.metadata, store_path=StorePath(store, old.path))
    set_array(reader, zarr.Array(aa))
    with _lock:
        _readers.setdefault(_key(new_root), weakref.WeakSet()).add(reader)
        for root, readers in _readers.items():
            if root != _key(new_root):
                readers.discard(reader)


def set_array(reader: ArrayReader, array: zarr.Array) -> None:
    """Point *reader* at *array*, dropping its fast path (and that path's cached shard
    indexes, which describe the files it read before)."""
    reader.array = array
    if hasattr(reader, "reader"):
        from napari_ozx.ngff.read.fastread import fast_reader

        setattr(reader, "reader", fast_reader(array) or array)  # noqa: B010


def retain_for_readers(target: Path) -> Path | None:
    """Before *target* (a directory) is replaced: give its live readers a stable copy.

    Returns the hard-linked clone the readers now read (kept until they are gone), or
    ``None`` when nothing reads *target*. Raises ``OSError`` when the clone cannot be
    made; the caller then keeps the old tree itself (:func:`adopt_old_tree`).
    """
    readers = live_readers(target)
    if not readers:
        return None
    clone = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.open"
    try:
        _link_tree(target, clone)
    except OSError:
        shutil.rmtree(clone, ignore_errors=True)
        raise
    _hand_over(readers, clone)
    return clone


def adopt_old_tree(old: Path, target: Path) -> bool:
    """After a swap without a clone: re-point the readers of *target* at *old* (the
    renamed previous tree). Returns True when *old* must be kept for them."""
    readers = live_readers(target)
    if not readers:
        return False
    _hand_over(readers, old)
    return True


def _hand_over(readers: list[tuple[ArrayReader, str]], tree: Path) -> None:
    key = _key(tree)
    with _lock:
        _retained[key] = _retained.get(key, 0) + len(readers)
    for reader, rel in readers:
        repoint(reader, tree / rel if rel else tree)
        weakref.finalize(reader, _release, key)


def _release(key: str) -> None:
    with _lock:
        n = _retained.get(key, 0) - 1
        if n > 0:
            _retained[key] = n
            return
        _retained.pop(key, None)
        _readers.pop(key, None)
    shutil.rmtree(key, ignore_errors=True)
    logger.debug("removed %s: no open layer reads it any more", key)


def retained_trees() -> list[str]:
    """The kept trees still read by open layers (for tests and diagnostics)."""
    with _lock:
        return sorted(_retained)


def _link_tree(src: Path, dst: Path) -> None:
    """*dst* = a copy of the directory *src* whose files are hard links (no data copied)."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        out = dst if rel == "." else dst / rel
        out.mkdir(parents=True, exist_ok=rel != ".")
        for name in filenames:
            os.link(os.path.join(dirpath, name), out / name)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
