"""HTTP(S) range reads through obstore (Rust, ``object_store``), when it is installed.

:class:`ObstoreHTTP` is a :class:`~napari_ozx.ozx.remote.source.RemoteFileSystem`: ``info``
(size and validators) and ``cat_file`` (one byte range, optionally pinned by ``If-Match``
/ ``If-Unmodified-Since``), without fsspec or aiohttp, one connection pool per server,
requests on obstore's threads without the GIL. Both backends run under
:func:`~napari_ozx.ozx.remote.source.call_with_retries`: obstore's retries are off and its
errors mapped onto what that function reads (:class:`FileNotFoundError`,
:class:`PermissionError`, an HTTP ``status``), so retries, messages and
:class:`~napari_ozx.ozx.remote.source.ObjectChangedError` are the same. A server ignoring
``Range`` answers with the whole object, as for fsspec. :func:`http_backend` chooses:
obstore for plain ``http(s)://`` URLs when importable; ``NAPARI_OZX_HTTP_BACKEND=fsspec``
forces fsspec.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from obstore.store import HTTPStore

#: environment variable choosing the HTTP backend: "obstore", "fsspec" or unset (auto)
BACKEND_ENV = "NAPARI_OZX_HTTP_BACKEND"

_STATUS = re.compile(r"status code: (\d{3})")
_stores: dict[tuple[str, float], HTTPStore] = {}
_stores_lock = threading.Lock()


class HTTPStatusError(OSError):
    """A non-2xx answer obstore reported, with its status (read by the retry logic)."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


def http_backend(url: str, storage_options: Mapping[str, object] | None) -> str:
    """``"obstore"`` or ``"fsspec"``: which library reads the HTTP(S) object *url*."""
    choice = os.environ.get(BACKEND_ENV, "").strip().lower()
    if choice == "fsspec":
        return "fsspec"
    plain = url.lower().startswith(("http://", "https://")) and "?" not in url
    if not plain or storage_options:
        return "fsspec"  # fsspec's options (headers, auth, client_kwargs) are fsspec's
    try:
        import obstore  # noqa: F401
    except ImportError:
        return "fsspec"
    return "obstore"


def _origin_and_key(url: str) -> tuple[str, str]:
    """``("http://host:port", "path/of/object")``: one store (connection pool) per server,
    objects named by their unquoted path (obstore quotes it again)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", unquote(parts.path.lstrip("/"))


def _store(base: str, timeout: float) -> HTTPStore:
    key = (base, timeout)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            from obstore.store import HTTPStore

            t = f"{max(int(timeout * 1000), 1)}ms"
            store = HTTPStore.from_url(
                base,
                client_options={"allow_http": True, "timeout": t, "connect_timeout": t},
                retry_config={"max_retries": 0, "retry_timeout": _dt.timedelta(seconds=timeout)},
            )
            _stores[key] = store
        return store


def directory_http_store(url: str, timeout: float) -> HTTPStore:
    """The obstore store zarr's own reads of the HTTP(S) directory *url* go through
    (``ObjectStore``): obstore's retries on, as zarr has no retry of its own."""
    from obstore.store import HTTPStore

    t = f"{max(int(timeout * 1000), 1)}ms"
    return HTTPStore.from_url(
        url,
        client_options={"allow_http": True, "timeout": t, "connect_timeout": t},
        retry_config={"max_retries": 2, "retry_timeout": _dt.timedelta(seconds=timeout)},
    )


def _mapped(exc: Exception, url: str) -> Exception:
    """*exc* from obstore as the exception the retry logic understands."""
    from obstore import exceptions as oe

    text = str(exc).split("\n", 1)[0]
    if isinstance(exc, FileNotFoundError | oe.NotFoundError):
        return FileNotFoundError(url)
    if isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError):
        return PermissionError(text)
    if isinstance(exc, oe.PreconditionError):
        return HTTPStatusError(text, 412)
    m = _STATUS.search(text)
    if m:
        return HTTPStatusError(text, int(m.group(1)))
    if re.search(r"timed ?out|kind: Timeout", str(exc), re.IGNORECASE):
        return TimeoutError(text)  # (the kind is in obstore's debug lines, not the first)
    return ConnectionError(text)


def _http_date(value: object) -> str | None:
    if not isinstance(value, _dt.datetime) or value.timestamp() <= 0:
        return None  # obstore reports a missing Last-Modified as the epoch
    return email.utils.format_datetime(value.astimezone(_dt.UTC), usegmt=True)


class ObstoreHTTP:
    """Reads of HTTP(S) objects under *url* (paths are full URLs, as fsspec's), through
    the pooled obstore ``HTTPStore`` of their server."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        origin, _ = _origin_and_key(url)
        self._origin = origin
        self._store = _store(origin, timeout)

    def _key(self, path: str) -> str:
        origin, key = _origin_and_key(path)
        if origin != self._origin:
            raise ValueError(f"{path} is not on {self._origin}")
        return key

    def info(self, path: str, **kwargs: object) -> dict[str, object]:
        import obstore

        try:
            meta = obstore.head(self._store, self._key(path))
        except Exception as e:
            raise _mapped(e, path) from None
        return {
            "size": meta["size"],
            "ETag": meta.get("e_tag"),
            "Last-Modified": _http_date(meta.get("last_modified")),
        }

    def cat_file(
        self,
        path: str,
        start: int | None = None,
        end: int | None = None,
        **kwargs: object,
    ) -> bytes:
        return self._get(path, start, end, kwargs)[0]

    def cat_file_info(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: object
    ) -> tuple[bytes, dict[str, object]]:
        """:meth:`cat_file`'s bytes and :meth:`info`'s details (size, validators) of the
        object they came from, in one request: a suffix range (``start`` negative) tells
        the size of an object and its last bytes in one round trip."""
        data, meta = self._get(path, start, end, kwargs)
        info = {
            "size": meta["size"],
            "ETag": meta.get("e_tag"),
            "Last-Modified": _http_date(meta.get("last_modified")),
        }
        return data, info

    def _get(
        self, path: str, start: int | None, end: int | None, kwargs: Mapping[str, object]
    ) -> tuple[bytes, Any]:
        """The bytes of one ranged GET and obstore's metadata of their object."""
        import obstore
        from obstore import exceptions as oe

        options: dict[str, object] = {}
        headers = kwargs.get("headers")
        if isinstance(headers, Mapping):
            if "If-Match" in headers:
                options["if_match"] = str(headers["If-Match"])
            elif "If-Unmodified-Since" in headers:
                when = email.utils.parsedate_to_datetime(str(headers["If-Unmodified-Since"]))
                options["if_unmodified_since"] = when
        if start is not None and start < 0 and end is None:
            options["range"] = {"suffix": -int(start)}
        elif start is not None and end is None:
            options["range"] = {"offset": int(start)}
        elif start is not None and end is not None:
            options["range"] = (int(start), int(end))
        key = self._key(path)
        try:
            got = obstore.get(self._store, key, options=options)  # type: ignore[arg-type]
            return bytes(got.bytes()), got.meta
        except oe.NotSupportedError:
            # the server ignores Range: the whole object, as fsspec gives it, and the
            # reader decides whether to serve it from memory
            whole = {k: v for k, v in options.items() if k != "range"}
            try:
                got = obstore.get(self._store, key, options=whole)  # type: ignore[arg-type]
                return bytes(got.bytes()), got.meta
            except Exception as e:
                raise _mapped(e, path) from None
        except Exception as e:
            raise _mapped(e, path) from None


def backend_name(fs: object) -> Literal["obstore", "fsspec"]:
    return "obstore" if isinstance(fs, ObstoreHTTP) else "fsspec"
