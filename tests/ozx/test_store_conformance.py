"""zarr's own store conformance suite (``zarr.testing.store.StoreTests``) on our stores.

``OzxStore`` is read-only: the ``set`` hook rebuilds the archive with :class:`OzxWriter`
(atomic replace) and re-opens the store object in place, so every read-side test runs
unchanged. Tests whose subject is writing through the store are overridden to assert that
the store refuses with :class:`ReadOnlyStoreError`, and, where the test also checks a read
(``exists``, ``list``, ``getsize_prefix``...), that read is still checked with the data put
in through the hook.

``OzxWriteStore`` is write-only and append-only: each data key is written once, metadata
can change only until the first data key. It runs with ``strict_order=False`` because
zarr's tests write metadata and data keys in arbitrary order (the RFC-9 order is the
writer's own policy, tested in ``test_ozx_writer.py``). Overrides state what it cannot
honour and assert the refusal.

``StoreTests`` is written for pytest-asyncio, which this project does not depend on:
:func:`_sync_tests` turns each ``async def test_*`` into a plain test that runs the
coroutine with ``zarr.core.sync.sync`` (zarr's own event-loop thread, as zarr's
synchronous API does), and the async ``store`` fixture is replaced by a sync one.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, default_buffer_prototype
from zarr.core.buffer.cpu import Buffer as CpuBuffer
from zarr.core.sync import _collect_aiterator, sync
from zarr.testing.store import StoreTests
from zarr.testing.utils import assert_bytes_equal

from napari_ozx.errors import ReadOnlyStoreError
from napari_ozx.ozx.rfc9 import is_metadata_name
from napari_ozx.ozx.store import OzxStore
from napari_ozx.ozx.write_store import OzxWriteStore
from napari_ozx.ozx.writer import DuplicateEntryError, OzxOrderError, OzxWriteError, OzxWriter

T = TypeVar("T", bound=type)


def _synced(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # keeps the signature (fixtures) and the parametrize marks
    def run(*args: Any, **kwargs: Any) -> Any:
        return sync(fn(*args, **kwargs))

    return run


def _sync_tests(cls: T) -> T:
    """Make every inherited or own ``async def test_*`` of ``cls`` a synchronous test."""
    for name in dir(cls):
        fn = getattr(cls, name)
        if name.startswith("test_") and inspect.iscoroutinefunction(fn):
            setattr(cls, name, _synced(fn))
    return cls


# --------------------------------------------------------------------------- OzxStore


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def _write_archive(path: Path, members: dict[str, bytes]) -> None:
    with OzxWriter(path, require_root_metadata=False, fsync=False) as w:
        for key in sorted(members, key=lambda k: not is_metadata_name(k)):  # RFC-9 order
            w.add(key, members[key])


def _rebuild(store: OzxStore, items: dict[str, bytes]) -> None:
    """Put ``items`` into the archive behind ``store`` (replacing it atomically) and
    re-open the store object on the new archive; no store method is used."""
    assert store.path is not None
    path = Path(store.path)
    members = _members(path)
    members.update(items)
    _write_archive(path, members)
    options = dict(store._options)
    store.close()
    store.__init__(path, **options)  # type: ignore[misc]


@_sync_tests
class TestOzxStore(StoreTests[OzxStore, CpuBuffer]):
    store_cls = OzxStore
    buffer_cls = CpuBuffer

    @pytest.fixture
    def store(self, open_kwargs: dict[str, Any]) -> Iterator[OzxStore]:
        store = sync(self.store_cls.open(**open_kwargs))
        yield store
        store.close()

    @pytest.fixture
    def store_not_open(self, store_kwargs: dict[str, Any]) -> Iterator[OzxStore]:
        store = self.store_cls(**store_kwargs)
        yield store
        store.close()

    async def set(self, store: OzxStore, key: str, value: Buffer) -> None:
        _rebuild(store, {key: value.to_bytes()})

    async def set_many(self, store: OzxStore, items: dict[str, Buffer]) -> None:
        _rebuild(store, {k: v.to_bytes() for k, v in items.items()})

    async def get(self, store: OzxStore, key: str) -> Buffer:
        assert store.path is not None
        return self.buffer_cls.from_bytes(_members(Path(store.path))[key])

    @pytest.fixture
    def store_kwargs(self, tmp_path: Path) -> dict[str, Any]:
        path = tmp_path / "conformance.ozx"
        _write_archive(path, {})
        return {"source": str(path)}

    def test_store_repr(self, store: OzxStore) -> None:
        assert repr(store) == f"OzxStore({store.path!r})"
        assert str(store) == f"ozx://{store.path}"

    def test_store_supports_writes(self, store: OzxStore) -> None:
        assert not store.supports_writes
        assert not store.supports_deletes

    def test_store_supports_listing(self, store: OzxStore) -> None:
        assert store.supports_listing

    # ---- open/close: the archive is parsed in the constructor

    async def test_store_context_manager(self, open_kwargs: dict[str, Any]) -> None:
        """Overridden: an OzxStore is open from construction (its central directory is
        parsed in ``__init__``, so a broken file fails there), hence opening it again is
        a no-op rather than "store is already open". Leaving the block still closes it."""
        with await self.store_cls.open(**open_kwargs) as store:
            assert store._is_open
            await store._open()
            assert store._is_open
        assert not store._is_open
        assert store.closed

    async def test_get_not_open(self, store_not_open: OzxStore) -> None:
        """Overridden: a constructed OzxStore is already open (see above); reading it
        without ``open()`` must work, which is what this test is after."""
        assert store_not_open._is_open
        data = self.buffer_cls.from_bytes(b"\x01\x02\x03\x04")
        await self.set(store_not_open, "c/0", data)
        observed = await store_not_open.get("c/0", prototype=default_buffer_prototype())
        assert_bytes_equal(observed, data)

    # ---- read-only: the store is always read-only

    def test_store_read_only(self, store: OzxStore) -> None:
        """Overridden: OzxStore is read-only by construction (the base test wants a
        writable store); ``read_only`` is still immutable."""
        assert store.read_only
        with pytest.raises(AttributeError):
            store.read_only = False  # type: ignore[misc]

    @pytest.mark.parametrize("read_only", [True, False])
    async def test_store_open_read_only(self, open_kwargs: dict[str, Any], read_only: bool) -> None:
        """Overridden: ``read_only=False`` is refused with ReadOnlyStoreError (an .ozx is
        written once, by the writer), ``read_only=True`` opens."""
        open_kwargs["read_only"] = read_only
        if not read_only:
            with pytest.raises(ReadOnlyStoreError):
                await self.store_cls.open(**open_kwargs)
            return
        store = await self.store_cls.open(**open_kwargs)
        assert store._is_open and store.read_only

    async def test_read_only_store_raises(self, open_kwargs: dict[str, Any]) -> None:
        """Overridden: zarr expects its own ValueError wording; ours is ReadOnlyStoreError
        (an OzxError and PermissionError) naming the store and the writer to use."""
        store = await self.store_cls.open(**{**open_kwargs, "read_only": True})
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            await store.set("foo", self.buffer_cls.from_bytes(b"bar"))
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            await store.delete("foo")

    async def test_with_read_only_store(self, open_kwargs: dict[str, Any]) -> None:
        """Overridden: there is no writable copy of an OzxStore; ``with_read_only(False)``
        raises ReadOnlyStoreError, ``with_read_only(True)`` is a reader on the same
        archive that also refuses writes."""
        store = await self.store_cls.open(**open_kwargs)
        await self.set(store, "foo", self.buffer_cls.from_bytes(b"bar"))
        with pytest.raises(ReadOnlyStoreError):
            store.with_read_only(read_only=False)
        reader = store.with_read_only(read_only=True)
        assert reader.read_only and reader == store
        observed = await reader.get("foo", prototype=default_buffer_prototype())
        assert observed is not None and observed.to_bytes() == b"bar"
        with pytest.raises(ReadOnlyStoreError):
            await reader.set("foo", self.buffer_cls.from_bytes(b"baz"))
        with pytest.raises(ReadOnlyStoreError):
            await reader.delete("foo")
        reader.close()

    async def test_serializable_store(self, store: OzxStore) -> None:
        """Overridden: the pickled store must equal the original and read the same bytes;
        the base test's write through the store is refused instead."""
        await self.set(store, "foo", self.buffer_cls.from_bytes(b"\x01\x02\x03\x04"))
        new_store = pickle.loads(pickle.dumps(store))
        assert new_store == store
        assert new_store.read_only == store.read_only
        observed = await new_store.get("foo", prototype=default_buffer_prototype())
        assert observed is not None and observed.to_bytes() == b"\x01\x02\x03\x04"
        with pytest.raises(ReadOnlyStoreError):
            await new_store.set("foo", self.buffer_cls.from_bytes(b"x"))
        new_store.close()

    # ---- tests about writing through the store: refused

    @pytest.mark.parametrize("key", ["zarr.json", "c/0", "foo/c/0.0", "foo/0/0"])
    async def test_set(self, store: OzxStore, key: str) -> None:  # type: ignore[override]
        """Overridden: writing through a read-only store raises ReadOnlyStoreError and
        leaves the archive unchanged."""
        with pytest.raises(ReadOnlyStoreError):
            await store.set(key, self.buffer_cls.from_bytes(b"\x01"))
        assert not await store.exists(key)
        assert store.path is not None and _members(Path(store.path)) == {}

    async def test_set_not_open(self, store_not_open: OzxStore) -> None:
        """Overridden: refused like :meth:`test_set`, open or not."""
        with pytest.raises(ReadOnlyStoreError):
            await store_not_open.set("c/0", self.buffer_cls.from_bytes(b"\x01"))

    async def test_set_many(self, store: OzxStore) -> None:
        """Overridden: ``_set_many`` is refused as a whole, nothing is written."""
        with pytest.raises(ReadOnlyStoreError):
            await store._set_many([("zarr.json", self.buffer_cls.from_bytes(b"{}"))])
        assert not await store.exists("zarr.json")

    async def test_set_if_not_exists(self, store: OzxStore) -> None:
        """Overridden: ``set_if_not_exists`` is a write, refused even for an existing key;
        the existing value stays."""
        await self.set(store, "k", self.buffer_cls.from_bytes(b"0000"))
        for key in ("k", "k2"):
            with pytest.raises(ReadOnlyStoreError):
                await store.set_if_not_exists(key, self.buffer_cls.from_bytes(b"1111"))
        result = await store.get("k", default_buffer_prototype())
        assert result is not None and result.to_bytes() == b"0000"
        assert not await store.exists("k2")

    async def test_exists(self, store: OzxStore) -> None:
        """Overridden: data is put in through the hook instead of ``store.set``."""
        assert not await store.exists("foo")
        await self.set(store, "foo/zarr.json", self.buffer_cls.from_bytes(b"bar"))
        assert await store.exists("foo/zarr.json")
        assert not await store.exists("foo")

    async def test_delete(self, store: OzxStore) -> None:
        """Overridden (the base test skips stores without deletes): deleting is refused
        with ReadOnlyStoreError and the member stays."""
        await self.set(store, "foo/zarr.json", self.buffer_cls.from_bytes(b"bar"))
        with pytest.raises(ReadOnlyStoreError):
            await store.delete("foo/zarr.json")
        assert await store.exists("foo/zarr.json")

    async def test_delete_dir(self, store: OzxStore) -> None:
        """Overridden: ``delete_dir`` is refused and nothing goes away."""
        await self.set(store, "foo/c/0", self.buffer_cls.from_bytes(b"chunk"))
        with pytest.raises(ReadOnlyStoreError):
            await store.delete_dir("foo")
        assert await store.exists("foo/c/0")

    async def test_delete_nonexistent_key_does_not_raise(self, store: OzxStore) -> None:
        """Overridden: a read-only store refuses every delete, even of a missing key (a
        silent no-op would suggest the store is writable)."""
        with pytest.raises(ReadOnlyStoreError):
            await store.delete("nonexistent_key")

    async def test_clear(self, store: OzxStore) -> None:
        """Overridden: ``clear`` is refused and the archive keeps its members."""
        await self.set(store, "key", self.buffer_cls.from_bytes(b"something"))
        with pytest.raises(ReadOnlyStoreError):
            await store.clear()
        assert not await store.is_empty("")

    def test_set_sync(self, store: OzxStore) -> None:
        """Overridden: ``set_sync`` exists (zarr's protocol) and refuses."""
        with pytest.raises(ReadOnlyStoreError):
            store.set_sync("sync_set", self.buffer_cls.from_bytes(b"\x01"))

    def test_delete_sync(self, store: OzxStore) -> None:
        """Overridden: ``delete_sync`` refuses; the member stays readable via get_sync."""
        sync(self.set(store, "sync_delete", self.buffer_cls.from_bytes(b"\x01\x02")))
        with pytest.raises(ReadOnlyStoreError):
            store.delete_sync("sync_delete")
        result = store.get_sync("sync_delete")
        assert result is not None and result.to_bytes() == b"\x01\x02"

    def test_delete_sync_missing(self, store: OzxStore) -> None:
        """Overridden: refused like :meth:`test_delete_nonexistent_key_does_not_raise`."""
        with pytest.raises(ReadOnlyStoreError):
            store.delete_sync("nonexistent_sync")

    # ---- zarr 3.4's sync / async parity laws write through the store: the write is
    # refused, and the parity of the reads is checked with data put in by the hook

    @pytest.mark.parametrize("direction", ["set_async_get_sync", "set_sync_get_async"])
    async def test_sync_async_set_get_parity(self, store: OzxStore, direction: str) -> None:
        data = self.buffer_cls.from_bytes(b"\x01\x02\x03\x04")
        with pytest.raises(ReadOnlyStoreError):
            if direction == "set_async_get_sync":
                await store.set("parity_set_get", data)
            else:
                store.set_sync("parity_set_get", data)
        await self.set(store, "parity_set_get", data)
        got_sync = store.get_sync("parity_set_get")
        got_async = await store.get("parity_set_get", prototype=default_buffer_prototype())
        assert got_sync is not None and got_async is not None
        assert_bytes_equal(got_sync, data)
        assert_bytes_equal(got_async, data)

    @pytest.mark.parametrize(
        "byte_range",
        [
            None,
            RangeByteRequest(1, 4),
            OffsetByteRequest(1),
            SuffixByteRequest(1),
            RangeByteRequest(10, 20),
        ],
        ids=["none", "range", "offset", "suffix", "range-past-eof"],
    )
    async def test_get_sync_byte_range_parity(
        self, store: OzxStore, byte_range: ByteRequest | None
    ) -> None:
        await self.set(store, "parity_byte_range", self.buffer_cls.from_bytes(b"\x01\x02\x03\x04"))
        got_sync = store.get_sync("parity_byte_range", byte_range=byte_range)
        got_async = await store.get(
            "parity_byte_range", prototype=default_buffer_prototype(), byte_range=byte_range
        )
        if got_async is None:
            assert got_sync is None
        else:
            assert got_sync is not None
            assert_bytes_equal(got_sync, got_async)

    # ---- read tests whose data the base test writes through the store

    async def test_getsize_prefix(self, store: OzxStore) -> None:
        """Overridden: the four members are put in through the hook."""
        data = self.buffer_cls.from_bytes(b"\x01\x02\x03\x04")
        keys = ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]
        await self.set_many(store, dict.fromkeys(keys, data))
        await self.set(store, "cx", data)  # a sibling that merely shares the text prefix
        assert await store.getsize_prefix("c/") == 4 * len(data)

    async def test_list(self, store: OzxStore) -> None:
        """Overridden: members put in through the hook."""
        assert await _collect_aiterator(store.list()) == ()
        data = self.buffer_cls.from_bytes(b"")
        items = {"foo/zarr.json": data, **{f"foo/c/{i}": data for i in range(10)}}
        await self.set_many(store, items)
        assert sorted(await _collect_aiterator(store.list())) == sorted(items)

    async def test_list_prefix(self, store: OzxStore) -> None:
        """Overridden: members put in through the hook."""
        prefixes = ("", "a/", "a/b/", "a/b/c/")
        data = self.buffer_cls.from_bytes(b"")
        items = {p + "zarr.json": data for p in prefixes}
        await self.set_many(store, items)
        for prefix in prefixes:
            observed = sorted(await _collect_aiterator(store.list_prefix(prefix)))
            assert observed == sorted(k for k in items if k.startswith(prefix))

    async def test_list_empty_path(self, store: OzxStore) -> None:
        """Overridden: members put in through the hook."""
        data = self.buffer_cls.from_bytes(b"")
        items = {"foo/bar/zarr.json": data, "foo/bar/c/1": data, "foo/baz/c/0": data}
        await self.set_many(store, items)
        assert sorted(await _collect_aiterator(store.list())) == sorted(items)
        assert sorted(await _collect_aiterator(store.list_prefix(""))) == sorted(items)
        observed = sorted(await _collect_aiterator(store.list_prefix("foo/bar/")))
        assert observed == ["foo/bar/c/1", "foo/bar/zarr.json"]

    async def test_list_dir(self, store: OzxStore) -> None:
        """Overridden: members put in through the hook, in the base test's two rounds."""
        rounds = [
            ("foo", {"foo/zarr.json": b"bar", "foo/c/1": b"\x01"}),
            (
                "foo/bar",
                {
                    "foo/bar/foobar_first_child": b"1",
                    "foo/bar/foobar_second_child/zarr.json": b"2",
                },
            ),
        ]
        assert await _collect_aiterator(store.list_dir("")) == ()
        for root, items in rounds:
            assert await _collect_aiterator(store.list_dir(root)) == ()
            await self.set_many(store, {k: self.buffer_cls.from_bytes(v) for k, v in items.items()})
            expected = sorted({k.removeprefix(root + "/").split("/")[0] for k in items})
            assert sorted(await _collect_aiterator(store.list_dir(root))) == expected
            assert sorted(await _collect_aiterator(store.list_dir(root + "/"))) == expected


# --------------------------------------------------------------------------- OzxWriteStore


@_sync_tests
class TestOzxWriteStore(StoreTests[OzxWriteStore, CpuBuffer]):
    store_cls = OzxWriteStore
    buffer_cls = CpuBuffer

    async def set(self, store: OzxWriteStore, key: str, value: Buffer) -> None:
        """Append through the store's writer, not the store. The store mirrors the
        metadata documents it holds in memory, so a metadata key is mirrored here too."""
        data = value.to_bytes()
        if is_metadata_name(key):
            store.writer.add(key, data, overwrite=True)
            store._meta[key] = data
        else:
            store.writer.add(key, data)

    async def get(self, store: OzxWriteStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes(store.writer.read(key))

    @pytest.fixture
    def store_kwargs(self, tmp_path: Path) -> dict[str, Any]:
        return {
            "target": tmp_path / "conformance.ozx",
            "strict_order": False,
            "require_root_metadata": False,
            "fsync": False,
        }

    @pytest.fixture
    def store(self, open_kwargs: dict[str, Any]) -> Iterator[OzxWriteStore]:
        store = sync(self.store_cls.open(**open_kwargs))
        yield store
        store.abort()  # leave no temporary file behind (a no-op after commit)

    @pytest.fixture
    def store_not_open(self, store_kwargs: dict[str, Any]) -> Iterator[OzxWriteStore]:
        store = self.store_cls(**store_kwargs)
        yield store
        store.abort()

    def test_store_repr(self, store: OzxWriteStore) -> None:
        assert repr(store) == f"OzxWriteStore({str(store.path)!r})"
        assert str(store) == f"ozx+write://{store.path}"

    def test_store_supports_writes(self, store: OzxWriteStore) -> None:
        assert store.supports_writes and store.supports_deletes

    def test_store_supports_listing(self, store: OzxWriteStore) -> None:
        assert store.supports_listing

    def test_store_eq(self, store: OzxWriteStore, store_kwargs: dict[str, Any]) -> None:
        """Overridden: two write stores on one target are two archives in progress (the
        later commit wins), so they are not equal; a store equals itself."""
        assert store == store
        other = self.store_cls(**store_kwargs)
        try:
            assert other != store
            assert self.store_cls(store.writer) == store  # same writer, same archive
        finally:
            other.abort()

    async def test_serializable_store(self, store: OzxWriteStore) -> None:
        """Overridden: the store owns an open temporary file and refuses to be pickled
        (use dask's threaded scheduler, not processes)."""
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(store)

    @pytest.mark.parametrize("read_only", [True, False])
    async def test_store_open_read_only(
        self, open_kwargs: dict[str, Any], read_only: bool, tmp_path: Path
    ) -> None:
        """Overridden: a write-only store has no read-only mode; ``read_only=True`` is not
        an accepted argument."""
        open_kwargs["read_only"] = read_only
        with pytest.raises(TypeError):
            await self.store_cls.open(**open_kwargs)
        assert not list(tmp_path.iterdir())  # the refused writer left nothing behind
        del open_kwargs["read_only"]
        store = await self.store_cls.open(**open_kwargs)
        assert store._is_open and not store.read_only
        store.abort()

    async def test_read_only_store_raises(self, open_kwargs: dict[str, Any]) -> None:
        """Overridden: there is no read-only OzxWriteStore to test (see above)."""
        with pytest.raises(TypeError):
            await self.store_cls.open(**{**open_kwargs, "read_only": True})

    async def test_with_read_only_store(self, store: OzxWriteStore) -> None:
        """Overridden: no read-only view of an archive in progress: read the committed
        file with OzxStore instead."""
        with pytest.raises(NotImplementedError):
            store.with_read_only(read_only=True)

    async def test_store_context_manager(self, open_kwargs: dict[str, Any]) -> None:
        """Extended: leaving the block commits the archive, which OzxStore then reads."""
        await super().test_store_context_manager(open_kwargs)
        target = Path(open_kwargs["target"])
        assert target.exists()
        with OzxStore(target) as reader:
            assert await _collect_aiterator(reader.list()) == ()

    # ---- what an append-only archive cannot do

    async def test_delete_dir(self, store: OzxWriteStore) -> None:
        """Overridden: written entries cannot be removed from an append-only archive, so
        ``delete_dir`` over written keys raises; metadata still in memory can go."""
        await store.set("zarr.json", self.buffer_cls.from_bytes(b"root"))
        await store.set("foo/zarr.json", self.buffer_cls.from_bytes(b"bar"))
        await store.delete_dir("foo")  # only buffered metadata below foo/: allowed
        assert not await store.exists("foo/zarr.json")
        await store.set("foo/c/0", self.buffer_cls.from_bytes(b"chunk"))  # flushes metadata
        with pytest.raises(OzxWriteError):
            await store.delete_dir("foo")
        assert await store.exists("zarr.json") and await store.exists("foo/c/0")

    async def test_clear(self, store: OzxWriteStore) -> None:
        """Overridden: ``clear`` would delete written entries: refused."""
        await self.set(store, "key", self.buffer_cls.from_bytes(b"something"))
        with pytest.raises(DuplicateEntryError):
            await store.clear()
        assert not await store.is_empty("")

    async def test_rewrite_refused(self, store: OzxWriteStore) -> None:
        """Not in StoreTests: the rule behind the overrides above. A data key is written
        once; metadata is frozen once data was written."""
        await store.set("zarr.json", self.buffer_cls.from_bytes(b"{}"))
        await store.set("c/0", self.buffer_cls.from_bytes(b"\x01"))
        with pytest.raises(DuplicateEntryError, match="align"):
            await store.set("c/0", self.buffer_cls.from_bytes(b"\x02"))
        with pytest.raises(OzxOrderError):
            await store.set("zarr.json", self.buffer_cls.from_bytes(b'{"a": 1}'))
        await store.set("zarr.json", self.buffer_cls.from_bytes(b"{}"))  # unchanged: fine

    # ---- zarr's synchronous protocol: not implemented, so zarr uses the async path

    def test_get_sync(self, store: OzxWriteStore) -> None:
        """Overridden: OzxWriteStore does not implement ``get_sync`` (the base test would
        skip); zarr falls back to ``get``, which this checks instead."""
        assert not hasattr(store, "get_sync")
        sync(self.set(store, "sync_get", self.buffer_cls.from_bytes(b"\x01\x02")))
        result = sync(store.get("sync_get", default_buffer_prototype()))
        assert result is not None and result.to_bytes() == b"\x01\x02"

    def test_get_sync_missing(self, store: OzxWriteStore) -> None:
        """Overridden: see :meth:`test_get_sync`; a missing key reads as None."""
        assert sync(store.get("nonexistent", default_buffer_prototype())) is None

    def test_set_sync(self, store: OzxWriteStore) -> None:
        """Overridden: no ``set_sync`` (writes go through ``asyncio.to_thread``)."""
        assert not hasattr(store, "set_sync")

    def test_delete_sync(self, store: OzxWriteStore) -> None:
        """Overridden: no ``delete_sync``; ``delete`` of a never-written key is a no-op
        (zarr deletes all-fill-value shards instead of writing them)."""
        assert not hasattr(store, "delete_sync")
        sync(store.delete("sync_delete"))
        assert not sync(store.exists("sync_delete"))

    def test_delete_sync_missing(self, store: OzxWriteStore) -> None:
        """Overridden: see :meth:`test_delete_sync`."""
        assert not hasattr(store, "delete_sync")
