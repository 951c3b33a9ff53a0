"""The one byte-bounded LRU cache: inflated ``.ozx`` members (:mod:`.store`), decoded
shard indexes and remote inner chunks (:mod:`napari_ozx.ngff.read.fastread`).

Thread-safe; bounded by the total size of its values (``size(value)``, None values
count 0, so "absent" can be cached too); a value larger than ``max_item`` is not kept;
``min_items`` are kept even over the bound (a cache of one large index still helps).
The bound may be a callable, read at every put, so a module constant patched by a test
or a user applies at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ByteLRU"]

V = TypeVar("V")
_MISSING = object()


class ByteLRU(Generic[V]):
    def __init__(
        self,
        max_bytes: int | Callable[[], int],
        size: Callable[[V], int],
        max_item: Callable[[int], int] = lambda limit: limit,
        min_items: int = 0,
    ) -> None:
        self._max = max_bytes
        self._size = size
        self._max_item = max_item
        self._min_items = min_items
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return self._max() if callable(self._max) else self._max

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def lookup(self, key: Hashable) -> tuple[bool, V | None]:
        """(found, value): a cached None is found."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return False, None
            self._data.move_to_end(key)
            return True, value  # type: ignore[return-value]

    def get(self, key: Hashable) -> V | None:
        return self.lookup(key)[1]

    def _sized(self, value: V | None) -> int:
        return 0 if value is None else self._size(value)

    def put(self, key: Hashable, value: V) -> None:
        limit = self.max_bytes
        n = self._sized(value)
        if n > self._max_item(limit):
            return
        with self._lock:
            old = self._data.pop(key, _MISSING)
            if old is not _MISSING:
                self._bytes -= self._sized(old)  # type: ignore[arg-type]
            self._data[key] = value
            self._bytes += n
            while self._bytes > limit and len(self._data) > self._min_items:
                _, gone = self._data.popitem(last=False)
                self._bytes -= self._sized(gone)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0
