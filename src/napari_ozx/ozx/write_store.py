"""``OzxWriteStore``: a write-only, append-only zarr-python 3 store streaming into a new ``.ozx``.

A :class:`zarr.abc.store.Store` over an :class:`~napari_ozx.ozx.writer.OzxWriter`: whole-shard
writes (``arr[...] = data``, ``dask.array.store``) stream each shard into the archive once.
Metadata documents stay in memory until the first data entry, then are written first,
sorted (:func:`~napari_ozx.ozx.rfc9.metadata_sort_key`); a ``zarr.json`` created or changed
later raises :class:`~napari_ozx.ozx.writer.OzxOrderError` (unless ``strict_order=False``).
What an append-only archive cannot do (rewrite a data key, delete, ``clear``) raises
:class:`~napari_ozx.ozx.writer.DuplicateEntryError` / ``OzxOrderError``;
``tests/ozx/test_store_conformance.py`` runs zarr's ``StoreTests`` and says which it
refuses and why. Use it as a context manager: it commits on success, and an exception
inside the block creates or replaces nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from zarr.abc.buffer import Buffer
from zarr.abc.store import (
    ByteRequest,
)

from napari_ozx._compat import zarr_store_check_writable, zarr_store_set_open
from napari_ozx.ozx.rfc9 import DEFAULT_COMMENT, is_metadata_name
from napari_ozx.ozx.store import BytesStore, byte_bounds
from napari_ozx.ozx.writer import (
    CommitOnExit,
    DuplicateEntryError,
    OzxOrderError,
    OzxWriter,
    ProgressCallback,
    WriterOptions,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["OzxWriteStore"]

logger = logging.getLogger(__name__)


class OzxWriteStore(CommitOnExit, BytesStore):
    """Write-only, append-only zarr-python 3 store that streams into a new ``.ozx``.

    Parameters
    ----------
    target
        Target path (a new :class:`OzxWriter` is created with the remaining arguments) or
        an existing :class:`OzxWriter`.
    comment, strict_order, progress, **writer_kwargs
        Passed to :class:`OzxWriter`.

    Behaviour
    ---------
    * Metadata keys (``zarr.json``...) live in memory: ``get``/``exists``/``list`` see
      them, and zarr may rewrite them (nested groups, attribute updates) as long as no data
      key was written yet. The first data key writes them all, root first, breadth-first.
      Creating or changing metadata later raises :class:`OzxOrderError`.
    * A data key (chunk or shard) is appended once. Setting it again (or deleting it once
      written) raises :class:`DuplicateEntryError`: zarr rewrites a shard only for a write
      that covers part of it, so align writes (dask chunks) to whole shards.
    * ``get`` of a written data key reads it back from the temporary file (zarr's sharding
      codec reads before every write; for a new shard that read finds nothing).
    * Deleting a key that does not exist is a no-op (zarr deletes shards that are entirely
      ``fill_value`` instead of writing them; missing entries read back as fill value).

    Finishing
    ---------
    :meth:`commit` finalises and renames the archive onto the target; :meth:`abort`
    discards it. ``close()`` commits unless the store was aborted (or already committed).
    zarr itself never calls ``close()``; the store's context manager commits when its
    block ends normally and aborts when the block raises. Reading data back after commit
    is not supported; open the committed ``.ozx`` with a reader store instead.

    The store cannot be pickled (it owns an open file): use dask's threaded scheduler,
    not processes or ``distributed``.
    """

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True

    def __init__(
        self,
        target: str | os.PathLike[str] | OzxWriter,
        *,
        comment: bytes | str | None = DEFAULT_COMMENT,
        strict_order: bool = True,
        progress: ProgressCallback | None = None,
        **writer_kwargs: Unpack[WriterOptions],
    ) -> None:
        super().__init__(read_only=False)
        if isinstance(target, OzxWriter):
            self._writer = target
        else:
            self._writer = OzxWriter(
                target, comment, strict_order=strict_order, progress=progress, **writer_kwargs
            )
        self._meta: dict[str, bytes] = self._writer.pending_metadata()
        self._meta_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def writer(self) -> OzxWriter:
        return self._writer

    @property
    def path(self) -> Path:
        return self._writer.target

    def commit(self) -> Path:
        """Finish the archive and move it onto the target (see :meth:`OzxWriter.commit`)."""
        path = self._writer.commit()
        zarr_store_set_open(self, False)
        return path

    def abort(self) -> None:
        """Discard everything written; the target is left untouched."""
        self._writer.abort()
        zarr_store_set_open(self, False)

    def close(self) -> None:
        """Commit unless aborted or already committed."""
        self._writer.close()
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("an OzxWriteStore cannot be pickled (it owns an open file)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OzxWriteStore) and other._writer is self._writer

    def __hash__(self) -> int:
        return id(self._writer)

    def __str__(self) -> str:
        return f"ozx+write://{self._writer.target}"

    def __repr__(self) -> str:
        return f"OzxWriteStore({str(self._writer.target)!r})"

    # ------------------------------------------------------------------ reads

    async def get_bytes(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        # docstring inherited
        meta = self._meta.get(key)
        if meta is not None:
            start, stop = byte_bounds(byte_range, len(meta))
            return meta[start:stop]
        if not self._writer.is_written(key):
            return None
        start, stop = byte_bounds(byte_range, self._writer.size_of(key))
        logger.debug("reading back %s [%d:%d] from the partial .ozx", key, start, stop)
        return await asyncio.to_thread(self._writer.read, key, start, stop)

    async def exists(self, key: str) -> bool:
        return key in self._meta or self._writer.is_written(key)

    async def getsize(self, key: str) -> int:
        meta = self._meta.get(key)
        if meta is not None:
            return len(meta)
        if self._writer.is_written(key):
            return self._writer.size_of(key)
        raise FileNotFoundError(key)

    def _all_keys(self) -> list[str]:
        keys = list(self._meta)
        keys.extend(n for n in self._writer.names if n not in self._meta)
        return keys

    async def list(self) -> AsyncIterator[str]:
        for key in self._all_keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in self._all_keys():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        lead = "" if prefix == "" else prefix + "/"
        seen: set[str] = set()
        for key in self._all_keys():
            if not key.startswith(lead):
                continue
            child = key[len(lead) :].split("/", 1)[0]
            if child and child not in seen:
                seen.add(child)
                yield child

    # ------------------------------------------------------------------ writes

    async def set(self, key: str, value: Buffer) -> None:
        zarr_store_check_writable(self)
        if not isinstance(value, Buffer):
            raise TypeError(f"OzxWriteStore.set(): value must be a Buffer, not {type(value)}")
        if is_metadata_name(key):
            self._set_metadata(key, value.to_bytes())
            return
        view = value.as_buffer_like()
        try:
            await asyncio.to_thread(self._writer.add, key, view)
        except DuplicateEntryError:
            raise DuplicateEntryError(self._rewrite_message(key, "write")) from None

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        zarr_store_check_writable(self)
        if is_metadata_name(key):
            with self._meta_lock:
                if key in self._meta:
                    return
                self._set_metadata_locked(key, value.to_bytes())
            return
        if not self._writer.is_written(key):
            await self.set(key, value)

    def _set_metadata(self, key: str, data: bytes) -> None:
        with self._meta_lock:
            self._set_metadata_locked(key, data)

    def _set_metadata_locked(self, key: str, data: bytes) -> None:
        if self._writer.metadata_flushed and self._meta.get(key) == data:
            return  # unchanged: nothing to write
        try:
            self._writer.add(key, data, overwrite=True)
        except DuplicateEntryError:
            raise OzxOrderError(
                f"{key!r} was already written to {self._writer.target}; metadata cannot be "
                "changed after data was written: set all attributes before writing data"
            ) from None
        self._meta[key] = data

    async def delete(self, key: str) -> None:
        zarr_store_check_writable(self)
        if is_metadata_name(key):
            with self._meta_lock:
                if key in self._meta:
                    self._writer.discard_metadata(key)  # raises once written
                    del self._meta[key]
            return
        if self._writer.is_written(key):
            raise DuplicateEntryError(self._rewrite_message(key, "delete"))
        # never written: nothing to do (zarr deletes all-fill-value shards)

    def _rewrite_message(self, key: str, what: str) -> str:
        return (
            f"cannot {what} {key!r}: it was already written to {self._writer.target}, and an "
            ".ozx entry is written exactly once. zarr rewrites a shard when a write covers "
            "only part of it: align writes (e.g. dask chunks) to whole shards"
        )
