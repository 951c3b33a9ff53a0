"""Remote ``.ozx`` over HTTP(S), S3 ... through fsspec: byte ranges only.

:class:`FsspecRangeReader` is a :class:`~napari_ozx.ozx._zip.RangeReader`: every read is
one range request (``fs.cat_file(path, start, end)``), thread-safe and lock-free, so the
same central-directory parser and :class:`~napari_ozx.ozx.store.OzxStore` serve remote
files: the end records and central directory in one tail request, the leading
``zarr.json`` entries (RFC-9 puts them first) in one more, then only the ranges of the
chunks napari shows.

Failures name the URL and the reason (HTTP status, timeout); transient ones (5xx,
connection errors, timeouts) are retried a bounded number of times with backoff.
fsspec is an optional dependency (``pip install napari-ozx[remote]``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..errors import OzxError, ZipFormatError
from ._zip import RangeReader

logger = logging.getLogger(__name__)

REMOTE_SCHEMES = ("http://", "https://", "s3://", "gs://", "gcs://", "az://", "abfs://")
RETRIES = 3
TIMEOUT_S = 30.0
PREFETCH_LIMIT = 8 << 20  # leading metadata fetched in one request, at most this much


class RemoteError(OzxError, OSError):
    """A remote read failed (status code or network error), after bounded retries."""


def is_url(source: Any) -> bool:
    return isinstance(source, str) and source.lower().startswith(REMOTE_SCHEMES)


def _status(exc: BaseException) -> int | None:
    for attr in ("status", "status_code", "code"):
        v = getattr(exc, attr, None)
        if isinstance(v, int):
            return v
    return None


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, FileNotFoundError | PermissionError):
        return False
    st = _status(exc)
    if st is not None:
        return st >= 500 or st == 429
    return isinstance(exc, TimeoutError | ConnectionError | OSError) or type(exc).__name__ in (
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ClientPayloadError",
    )


def call_with_retries(what: str, url: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run *fn*; retry transient failures; raise :class:`RemoteError` naming *url*."""
    delay = 0.2
    for attempt in range(1, RETRIES + 1):
        try:
            return fn(*args, **kwargs)
        except FileNotFoundError:
            raise RemoteError(f"{url}: not found (HTTP 404 or no such object)") from None
        except PermissionError as e:
            raise RemoteError(f"{url}: access denied ({e})") from None
        except Exception as e:
            st = _status(e)
            reason = f"HTTP {st}" if st is not None else type(e).__name__
            if attempt < RETRIES and _transient(e):
                logger.warning(
                    "%s %s failed (%s), retry %d/%d", what, url, reason, attempt, RETRIES - 1
                )
                time.sleep(delay)
                delay *= 4
                continue
            detail = str(e).splitlines()[0] if str(e) else ""
            raise RemoteError(
                f"{url}: {what} failed: {reason}{': ' + detail if detail else ''}"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _options(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    opts = dict(storage_options or {})
    if url.lower().startswith(("http://", "https://")):
        try:
            import aiohttp

            opts.setdefault("client_kwargs", {}).setdefault(
                "timeout", aiohttp.ClientTimeout(total=TIMEOUT_S)
            )
        except ImportError:  # pragma: no cover
            pass
    return opts


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - depends on the environment
        raise OzxError(
            f"{url}: reading remote files needs fsspec (pip install 'napari-ozx[remote]')"
        ) from None
    return fsspec.core.url_to_fs(url, **_options(url, storage_options))


class FsspecRangeReader(RangeReader):
    """Range reads of one remote object; one request per read (or none, if prefetched)."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.name = url
        self.url = url
        self._storage_options = storage_options
        self._fs, self._path = filesystem(url, storage_options)
        self.size = self._size()
        self._head = b""  # prefetched bytes [0, len(_head))
        self._lock = threading.Lock()
        self._closed = False
        self.requests = 0
        self.bytes_read = 0

    def _size(self) -> int:
        try:
            size = self._fs.size(self._path)
        except FileNotFoundError:
            size = None  # fsspec's HTTP size lookup reports every failure as "not found"
        except Exception:
            size = None
        if size is None:
            # a one-byte range read raises the real error (status code), with retries
            call_with_retries("read", self.url, self._fs.cat_file, self._path, start=0, end=1)
            size = call_with_retries("size lookup", self.url, self._fs.size, self._path)
        if size is None:
            raise RemoteError(
                f"{self.url}: the server does not report the file size (Content-Length)"
            )
        return int(size)

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        if length == 0:
            return b""
        head = self._head
        if offset + length <= len(head):
            return head[offset : offset + length]
        data = call_with_retries(
            "range read", self.url, self._fs.cat_file, self._path, start=offset, end=offset + length
        )
        with self._lock:
            self.requests += 1
            self.bytes_read += len(data)
        if len(data) != length:
            raise ZipFormatError(
                f"{self.url}: short read at {offset} ({len(data)} of {length} bytes): truncated or changing file"
            )
        return data

    def prefetch_head(self, end: int) -> None:
        """Fetch bytes ``[0, end)`` in one request and serve later reads there from memory."""
        end = min(end, self.size, PREFETCH_LIMIT)
        if end > len(self._head):
            self._head = self.read(0, end)

    def close(self) -> None:
        self._closed = True
        self._head = b""

    @property
    def closed(self) -> bool:
        return self._closed

    def __reduce__(self) -> Any:
        return (FsspecRangeReader, (self.url, self._storage_options))


def open_remote_store(url: str, storage_options: dict[str, Any] | None = None) -> Any:
    """A read-only zarr store for a remote ``.ozx``/``.zip`` file or OME-Zarr directory."""
    path = url.split("?", 1)[0].rstrip("/").lower()
    if path.endswith((".ozx", ".zip")):
        from .store import OzxStore

        return OzxStore(FsspecRangeReader(url, storage_options))
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(
        url.rstrip("/"), storage_options=_options(url, storage_options), read_only=True
    )
