"""Remote stores: :func:`open_remote_store` (a remote ``.ozx`` as an
:class:`~napari_ozx.ozx.store.OzxStore` over range requests, a remote directory as a
:class:`RemoteDirectoryStore`).

``RemoteDirectoryStore`` is zarr's ``FsspecStore`` for a remote directory (HTTP, S3 ...)
that can also read synchronously.

zarr-python reads an ``FsspecStore`` on its event loop; napari-ozx's direct chunk reader
(:mod:`napari_ozx.ngff.read.fastread`) reads from its own threads, a plane's requests all at
once (``threaded_io``). :meth:`RemoteDirectoryStore.get_sync` is that read: through a
synchronous twin of the store's filesystem (fsspec runs it on its own I/O loop, with
pooled keep-alive connections), retried like every remote read
(:func:`~napari_ozx.ozx.remote.source.call_with_retries`), failures naming the object's URL. A
missing object is None (the fill value), as in zarr. A server that ignores ``Range``
(answers 200 with the whole object) still gives the range asked for.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from zarr.storage import FsspecStore, ObjectStore

from napari_ozx.ozx.remote.backends import directory_http_store, http_backend
from napari_ozx.ozx.remote.source import (
    TIMEOUT_S,
    RemoteError,
    RemoteFileSystem,
    RemoteMissing,
    access_denied,
    call_with_retries,
    filesystem,
    fsspec_options,
)
from napari_ozx.ozx.rfc9 import is_archive_name
from napari_ozx.ozx.store import SyncGet

if TYPE_CHECKING:
    from zarr.abc.buffer import Buffer, BufferPrototype
    from zarr.abc.store import ByteRequest

    from napari_ozx.ozx.store import OzxStore

__all__ = ["ObstoreDirectoryStore", "RemoteDirectory", "RemoteDirectoryStore", "open_remote_store"]


class _SyncReads(SyncGet):
    """What both remote directory stores add to zarr's: ``get_sync`` and ``threaded_io``."""

    #: reads can take a round trip: the direct reader runs them concurrently
    threaded_io = True

    url: str = ""
    _ozx_options: Mapping[str, object] | None = None
    _ozx_timeout: float | None = None
    _ozx_sync_fs: RemoteFileSystem | None = None

    def _remember(
        self, url: str, options: Mapping[str, object] | None, timeout: float | None
    ) -> None:
        self.url, self._ozx_options, self._ozx_timeout = url, options, timeout

    def __getstate__(self) -> dict[str, Any]:
        parent = super().__getstate__()
        state = dict(parent if isinstance(parent, dict) else self.__dict__)
        state.pop("_ozx_sync_fs", None)  # made again where it is loaded
        return state

    def _sync_fs(self) -> RemoteFileSystem:
        fs = self._ozx_sync_fs
        if fs is None:
            # the store's own I/O is zarr's, asynchronous; this is a synchronous twin
            fs, _ = filesystem(self.url, self._ozx_options, self._ozx_timeout)
            self._ozx_sync_fs = fs
        return fs

    def _object_path(self, key: str) -> str:
        return f"{self.url}/{key}"

    def read_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        # docstring inherited
        from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

        start: int | None = None
        end: int | None = None
        if isinstance(byte_range, RangeByteRequest):
            start, end = byte_range.start, byte_range.end
        elif isinstance(byte_range, OffsetByteRequest):
            start = byte_range.offset
        elif isinstance(byte_range, SuffixByteRequest):
            start = -byte_range.suffix
        elif byte_range is not None:
            raise ValueError(f"Unexpected byte_range, got {byte_range}.")
        return self._read(key, start, end)

    def _read(self, key: str, start: int | None, end: int | None) -> bytes | None:
        """Bytes ``[start, end)`` of the object ``key`` (a negative start alone: that
        many final bytes), None when there is no such object."""
        if start is not None and start == end:
            return b""
        fs = self._sync_fs()
        path = self._object_path(key)
        url = f"{self.url}/{key}"
        try:
            data = call_with_retries(
                "read", url, fs.cat_file, path, start=start, end=end,
                timeout=self._ozx_timeout,
            )  # fmt: skip
        except RemoteMissing:
            return None
        except RemoteError as e:
            if "not satisfiable" in str(e).lower():  # a range of an empty object (as zarr does)
                return b""
            raise
        if start is not None and start >= 0 and end is not None and len(data) > end - start:
            data = data[start:end]  # the server ignored Range and sent the whole object
        elif start is not None and start < 0 and end is None and len(data) > -start:
            data = data[start:]
        return bytes(data)


class RemoteDirectoryStore(_SyncReads, FsspecStore):
    """A read-only ``FsspecStore`` with ``get_sync`` (see the module docstring)."""

    @classmethod
    def for_url(
        cls,
        url: str,
        storage_options: Mapping[str, object] | None,
        fs_options: Mapping[str, object],
        timeout: float | None,
    ) -> RemoteDirectoryStore:
        store = cls.from_url(url, storage_options=dict(fs_options), read_only=True)
        assert isinstance(store, RemoteDirectoryStore)
        store._remember(url, storage_options, timeout)
        return store

    def with_read_only(self, read_only: bool = False) -> RemoteDirectoryStore:
        clone = super().with_read_only(read_only)
        assert isinstance(clone, RemoteDirectoryStore)
        clone._remember(self.url, self._ozx_options, self._ozx_timeout)
        return clone

    def _object_path(self, key: str) -> str:
        return f"{self.path.rstrip('/')}/{key}"  # fsspec's path of the object

    async def get(
        self,
        key: str,
        prototype: BufferPrototype,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """zarr's read, a refusal (HTTP 401 / 403, S3 ``AccessDenied``) said once as what
        to set (:func:`~napari_ozx.ozx.remote.source.access_denied`), never retried as a
        network fault."""
        try:
            return await super().get(key, prototype, byte_range)
        except PermissionError as e:
            raise RemoteError(access_denied(f"{self.url}/{key}", e, self.fs)) from None


class ObstoreDirectoryStore(_SyncReads, ObjectStore):  # type: ignore[type-arg]
    """A read-only remote HTTP(S) directory on zarr's ``ObjectStore`` over obstore's
    ``HTTPStore``, with ``get_sync``: no fsspec HTTP file system, no aiohttp (see
    :mod:`napari_ozx.ozx.remote.backends`)."""

    @classmethod
    def for_url(cls, url: str, timeout: float | None) -> ObstoreDirectoryStore:
        store = cls(
            directory_http_store(url, TIMEOUT_S if timeout is None else timeout), read_only=True
        )
        store._remember(url, None, timeout)
        return store

    def with_read_only(self, read_only: bool = False) -> ObstoreDirectoryStore:
        clone = super().with_read_only(read_only)
        clone._remember(self.url, self._ozx_options, self._ozx_timeout)
        return clone

    # Listing an HTTP directory is WebDAV's PROPFIND, which plain servers refuse (501 /
    # 405): an OSError, as the callers that can do without a listing expect.
    async def list(self) -> AsyncGenerator[str, None]:
        async for key in self._listed(super().list()):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncGenerator[str, None]:
        async for key in self._listed(super().list_prefix(prefix)):
            yield key

    async def list_dir(self, prefix: str) -> AsyncGenerator[str, None]:
        async for key in self._listed(super().list_dir(prefix)):
            yield key

    async def _listed(self, keys: AsyncIterator[str]) -> AsyncGenerator[str, None]:
        from obstore.exceptions import BaseError

        try:
            async for key in keys:
                yield key
        except BaseError as e:
            reason = str(e).split("\n", 1)[0]
            raise OSError(f"{self.url}: the server does not list directories ({reason})") from None


#: a remote OME-Zarr directory's store, whichever backend reads it
RemoteDirectory = RemoteDirectoryStore | ObstoreDirectoryStore


def open_remote_store(
    url: str, storage_options: Mapping[str, object] | None = None, *, timeout: float | None = None
) -> OzxStore | RemoteDirectory:
    """A read-only zarr store for a remote ``.ozx``/``.zip`` file or OME-Zarr directory.

    ``timeout``: seconds a connection or read may go without data (default
    :data:`TIMEOUT_S`)."""
    if is_archive_name(url):
        from napari_ozx.ozx import store as ozx_store
        from napari_ozx.ozx._zip import TAIL_SIZE
        from napari_ozx.ozx.remote.prefetched import PrefetchedRangeReader

        # the tail (index) and the head (metadata) in the first round trip, no HEAD first
        head = ozx_store.SPECULATIVE_HEAD
        reader = PrefetchedRangeReader(
            url, storage_options, timeout=timeout, tail=TAIL_SIZE, head=head
        )
        return ozx_store.OzxStore(reader)
    return remote_directory_store(url, storage_options, timeout=timeout)


def remote_directory_store(
    url: str, storage_options: Mapping[str, object] | None = None, *, timeout: float | None = None
) -> RemoteDirectory:
    """A read-only zarr store for a remote directory: :class:`ObstoreDirectoryStore` for
    plain HTTP(S) when obstore is installed, else :class:`RemoteDirectoryStore`."""
    url = url.rstrip("/")
    if http_backend(url, storage_options) == "obstore":
        return ObstoreDirectoryStore.for_url(url, timeout)
    return RemoteDirectoryStore.for_url(
        url, storage_options, fsspec_options(url, storage_options, timeout), timeout
    )
