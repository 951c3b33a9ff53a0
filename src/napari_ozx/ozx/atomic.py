"""Leave nothing behind: temporary ``.partial`` names, their locks, and an atomic swap.

Every save writes beside its target under a hidden ``.<target>.<random>.partial`` name
(:func:`create_partial`, the one place one is made) and renames it onto the target when
complete. The writer holds an exclusive ``flock`` on it (:func:`hold`), so the next save
removes only dead writers' partials (:func:`remove_stale_partials`).
:func:`swap_directory` replaces a directory atomically (Linux ``renameat2`` exchange; two
renames elsewhere, :func:`recover_directory` repairing a crash between them), and
:func:`replace_files` replaces files inside a hierarchy (temporaries beside their
destinations, flushed, then renamed). Why it is built this way:
``docs/design/ozx-container.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import glob
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = [
    "StagedFiles",
    "create_partial",
    "fsync_dir",
    "fsync_tree",
    "hold",
    "partial_name",
    "recover_directory",
    "release",
    "remove_stale_partials",
    "replace_files",
    "swap_directory",
]

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: open files cannot be deleted anyway
    fcntl = None  # type: ignore[assignment]


def partial_name(target: Path) -> Path:
    """A fresh hidden temporary name beside ``target``."""
    return target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}.partial"


def create_partial(target: Path, *, directory: bool = False) -> tuple[Path, int]:
    """A new, locked ``.partial`` file (or ``directory``) beside ``target`` and the fd
    holding its lock; the one place partials are created.

    Made under a ``.creating`` name (``O_EXCL`` / ``mkdir``: never an existing name, a
    taken one is retried with another), locked, then renamed (the lock follows the
    inode): a concurrent save's sweep (:func:`remove_stale_partials`) never finds it
    unlocked. A file's fd is open for reading and writing (the umask applies, as for a
    normal file); a directory's is read-only. On any failure nothing is left behind.
    Raises :class:`FileExistsError` if no free name was found.
    """
    for _ in range(100):
        path = partial_name(target)
        staging = path.with_suffix(".creating")
        try:
            fd = _create_locked(staging, directory)
        except FileExistsError:
            continue
        try:
            os.rename(staging, path)
        except BaseException:
            release(fd)
            with contextlib.suppress(OSError):
                _remove(staging)
            raise
        return path, fd
    raise FileExistsError(errno.EEXIST, "could not create a temporary name", str(target))


def _create_locked(staging: Path, directory: bool) -> int:
    """Create ``staging`` (a new file or directory) and take its lock; removed again if
    the lock cannot be taken."""
    if directory:
        staging.mkdir()
        try:
            return hold(staging)
        except BaseException:
            staging.rmdir()
            raise
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(staging, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        _lock(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    return fd


def hold(path: Path) -> int:
    """Open ``path`` (file or directory) and take an exclusive lock on it; returns the fd
    (keep it open while writing, :func:`release` it after)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    _lock(fd)
    return fd


def _lock(fd: int) -> None:
    """Take an exclusive, non-blocking lock on ``fd``; closes it when that fails."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise


def release(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_stale_partials(target: Path) -> list[Path]:
    """Remove the ``.partial`` leftovers of dead writers to ``target``; returns them."""
    if fcntl is None:  # pragma: no cover
        return []
    removed = []
    pattern = f".{glob.escape(target.name)}.*.partial"
    for p in Path(target.parent).glob(pattern):
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live writer holds it
        try:
            _remove(p)
            removed.append(p)
            logger.info("removed %s, left by a save that did not finish", p)
        finally:
            os.close(fd)
    if target.exists():  # ``.old`` copies of finished (fallback) swaps are garbage
        for p in Path(target.parent).glob(f".{glob.escape(target.name)}.*.old"):
            _remove(p)
            removed.append(p)
    return removed


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2() if os.name == "posix" else None


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the names ``a`` and ``b``; False where the platform or file system
    cannot (then nothing changed). Raises FileNotFoundError when one of them is missing."""
    fn = _RENAMEAT2
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)  # type: ignore[operator]
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        raise FileNotFoundError(err, os.strerror(err), str(b))
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_directory(
    new: Path,
    target: Path,
    *,
    use_exchange: bool = True,
    dispose: Callable[[Path], None] | None = None,
) -> None:
    """Put the complete directory ``new`` at ``target``; what was there is handed to
    ``dispose`` (default: deleted)."""
    dispose = dispose or _remove
    for _ in range(100):
        if use_exchange:
            try:
                if exchange(new, target):
                    dispose(new)  # ``new`` now names the previous copy
                    return
            except FileNotFoundError:
                try:
                    os.rename(new, target)  # no target (yet): plain rename
                    return
                except OSError as e:
                    if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    continue  # another save created it meanwhile: exchange with that
        break
    # fallback: two renames; dying between them leaves ``.old``, restored by recovery
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}.old"
        os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        dispose(old)


def recover_directory(target: Path) -> Path | None:
    """If ``target`` is missing but a swap left its previous copy under ``.old``, put it
    back; returns the restored copy's former name."""
    if target.exists():
        return None
    olds = sorted(
        Path(target.parent).glob(f".{glob.escape(target.name)}.*.old"),
        key=lambda p: p.stat().st_mtime,
    )
    if not olds:
        return None
    with contextlib.suppress(FileExistsError, OSError):
        os.rename(olds[-1], target)
        logger.warning("%s was missing after an interrupted save: restored", target)
        return olds[-1]
    return None


# ------------------------------------------------------------------ files and fsync


class StagedFiles:
    """New contents for files, written to locked ``.partial`` temporaries beside their
    destinations (:func:`create_partial`) and flushed to disk; nothing is replaced until
    :meth:`publish` renames them into place. :meth:`discard` removes them (a failure
    while staging discards what was staged and re-raises)."""

    def __init__(self, contents: Mapping[Path, bytes | bytearray | memoryview]) -> None:
        self._temps: list[tuple[Path, int, Path]] = []
        try:
            for dest, data in contents.items():
                tmp, fd = create_partial(dest)
                self._temps.append((tmp, fd, dest))
                view = memoryview(data).cast("B")
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
        except BaseException:
            self.discard()
            raise

    def publish(self) -> None:
        """Rename every temporary onto its destination, in the order given."""
        for i, (tmp, fd, dest) in enumerate(self._temps):
            try:
                os.replace(tmp, dest)
            except BaseException:
                self._temps = self._temps[i:]  # still ours to discard
                raise
            release(fd)
        self._temps = []

    def discard(self) -> None:
        for tmp, fd, _ in self._temps:
            release(fd)
            tmp.unlink(missing_ok=True)
        self._temps.clear()


def replace_files(contents: Mapping[Path, bytes | bytearray | memoryview]) -> None:
    """Each destination's bytes replaced atomically: all written to temporaries beside
    them and flushed first, then renamed into place; a failure before the renames
    removes the temporaries and changes nothing."""
    for dest in contents:
        dest.parent.mkdir(parents=True, exist_ok=True)
    StagedFiles(contents).publish()


def fsync_dir(path: Path) -> None:
    """Persist a rename (POSIX); silently skipped where directories cannot be opened."""
    try:
        dfd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def fsync_tree(root: Path) -> None:
    """Every file and folder below *root* flushed to disk."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))
