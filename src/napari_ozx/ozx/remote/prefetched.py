"""A remote ``.ozx`` opened in one round trip: :class:`PrefetchedRangeReader`.

Where :class:`~napari_ozx.ozx.remote.source.FsspecRangeReader` sends a ``HEAD`` and then
reads the archive's tail and head (two round trips in a row), this reader sends both reads
at once: the tail as a suffix range, whose answer gives the size and validators, and the
head (every ``zarr.json``, RFC-9) as ``bytes=0-M``
(``tests/ngff/read/test_first_open_roundtrips.py`` counts the round trips). The version
stays pinned: a head answered by another version of the object is dropped and read again,
pinned; every later request carries the validator. Only obstore's HTTP(S) reads report an
answer's metadata; other file systems keep the ``HEAD`` first, and an object a suffix range
cannot answer (HTTP 416) is looked up with ``HEAD``. Design notes:
``docs/design/reading.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from napari_ozx.ozx.remote.backends import ObstoreHTTP
from napari_ozx.ozx.remote.source import FsspecRangeReader, RemoteError, call_with_retries

__all__ = ["PrefetchedRangeReader"]


class PrefetchedRangeReader(FsspecRangeReader):
    """An :class:`FsspecRangeReader` whose first round trip brings the object's last
    ``tail`` bytes and first ``head`` bytes (see the module docstring)."""

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        tail: int = 0,
        head: int = 0,
    ) -> None:
        self._want = (max(int(tail), 0), max(int(head), 0))
        self._early_head = b""
        self._early_whole = b""  # the whole object, answered for the tail
        self._tail_at = 0
        self._tail = b""  # prefetched bytes [_tail_at, size)
        super().__init__(url, storage_options, timeout=timeout)
        if self._early_whole:  # served from memory when small enough, else refused
            whole, self._early_whole = self._early_whole, b""
            self._whole(whole)
        if self._early_head and len(self._head) < len(self._early_head):
            self._head = self._early_head  # (the parent's __init__ starts with none)
        self._early_head = b""

    def _size(self) -> int:
        tail, head = self._want
        if not tail or not isinstance(self._fs, ObstoreHTTP):
            return super()._size()
        fs = self._fs
        early: Future[tuple[bytes, dict[str, Any]]] | None = None
        if head:
            from napari_ozx.ozx.members import member_pool

            # a guess, sent once (no retries): if it fails, it is read again, pinned and
            # retried, when it is needed
            early = member_pool().submit(fs.cat_file_info, self._path, start=0, end=head)
        try:
            data, info = call_with_retries(
                "read", self.url, fs.cat_file_info, self._path, start=-tail,
                timeout=self.timeout,
            )  # fmt: skip
        except RemoteError as e:
            _drop(early)
            if "HTTP 416" not in str(e):
                raise
            return super()._size()  # an empty object: the HEAD path says what it is
        size = info.get("size")
        if not isinstance(size, int):
            _drop(early)
            return super()._size()
        self._pin_version(info)
        if len(data) > tail and len(data) == size:  # the server ignores Range: all of it
            self._early_whole = data
            head = 0
        else:
            self._tail_at, self._tail = size - len(data), data
        if early is not None:
            try:
                got, got_info = early.result()
            except Exception:
                got, got_info = b"", {}  # read again (and reported) when it is needed
            if head and _same_version(info, got_info) and len(got) == min(head, size):
                self._early_head = got
        return size

    def read(self, offset: int, length: int) -> bytes:
        tail = self._tail
        if tail and offset >= self._tail_at and length > 0:
            self._check(offset, length)
            rel = offset - self._tail_at
            if rel + length <= len(tail):
                return tail[rel : rel + length]
        return super().read(offset, length)

    def close(self) -> None:
        self._tail = b""
        super().close()


def _drop(early: Future[Any] | None) -> None:
    """Let the guessed head read go: cancelled, or finished and its outcome ignored."""
    if early is not None and not early.cancel():
        early.exception()


def _same_version(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Whether two answers' details name one version of one object (size and ETag, else
    Last-Modified; a server that sends neither: the size alone)."""
    if a.get("size") != b.get("size"):
        return False
    for key in ("ETag", "Last-Modified"):
        if a.get(key) or b.get(key):
            return a.get(key) == b.get(key)
    return True
