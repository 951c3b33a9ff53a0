"""Remote ``.ozx`` over HTTP(S), S3 ... through fsspec: byte ranges only.

:class:`FsspecRangeReader` is a :class:`~napari_ozx.ozx._zip.RangeReader`: every read is one
range request, so the same parser and :class:`~napari_ozx.ozx.store.OzxStore` serve remote
files (the tail, the leading ``zarr.json`` entries, then the chunks napari shows). The
object is pinned at open (ETag or Last-Modified, size; ``If-Match`` on every request): one
replaced while read is an :class:`ObjectChangedError`. Failures name the URL and the
reason; transient ones are retried with backoff; reads time out after :data:`TIMEOUT_S`.
Remote shards are not CRC-checked whole (napari-ozx's chunks carry their own checksum).
Also the S3 options (anonymous without credentials, profiles, endpoints) and
``access_denied``. fsspec is optional (``pip install napari-ozx[remote]``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from napari_ozx.errors import OzxError, ZipFormatError
from napari_ozx.ozx._zip import RangeReader
from napari_ozx.ozx.remote.backends import ObstoreHTTP, http_backend

logger = logging.getLogger(__name__)

RETRIES = 3
TIMEOUT_S = 30.0
PREFETCH_LIMIT = 8 << 20  # leading metadata fetched in one request, at most this much
#: a server that ignores ``Range`` (answers 200 with the whole object, as Python's
#: ``http.server`` does): objects up to this size are then read whole, once, and served
#: from memory; larger ones are refused with the reason
WHOLE_OBJECT_LIMIT = 512 << 20


class RemoteError(OzxError, OSError):
    """A remote read failed (status code or network error), after bounded retries."""


class RemoteMissing(RemoteError):
    """The remote object does not exist (HTTP 404 or no such key)."""


class ObjectChangedError(RemoteError):
    """The remote object changed (ETag / Last-Modified / size) since it was opened."""


_T = TypeVar("_T")


class RemoteFileSystem(Protocol):
    """What napari-ozx asks of an fsspec file system (its synchronous API)."""

    def info(self, path: str, **kwargs: object) -> dict[str, Any]:
        """Details of one object (``size``, ``ETag`` ...: fsspec's own keys and values)."""
        ...

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: object
    ) -> bytes:
        """Bytes ``[start, end)`` of one object."""
        ...


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


def call_with_retries(
    what: str,
    url: str,
    fn: Callable[..., _T],
    *args: object,
    timeout: float | None = None,
    **kwargs: object,
) -> _T:
    """Run *fn*; retry transient failures; raise :class:`RemoteError` naming *url*
    (:class:`RemoteMissing` for a missing object)."""
    delay = 0.2
    for attempt in range(1, RETRIES + 1):
        try:
            return fn(*args, **kwargs)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise RemoteMissing(f"{url}: not found (HTTP 404 or no such object)") from None
        except PermissionError as e:  # a refusal: retrying cannot help
            raise RemoteError(access_denied(url, e, _file_system_of(fn))) from None
        except Exception as e:
            st = _status(e)
            if st == 412:
                raise ObjectChangedError(
                    f"{url}: the remote object changed since it was opened (its ETag / "
                    "Last-Modified no longer matches); reopen it to read the new version"
                ) from None
            reason = f"HTTP {st}" if st is not None else type(e).__name__
            if isinstance(e, TimeoutError):
                reason = f"timed out after {timeout or TIMEOUT_S:g} s without a response"
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


S3_SCHEMES = ("s3://", "s3a://")


def _file_system_of(fn: Callable[..., object]) -> object:
    """The file system whose method *fn* is (fsspec's synchronous methods wrap the bound
    asynchronous ones), or None."""
    import inspect

    return getattr(inspect.unwrap(fn), "__self__", None)


def access_denied(url: str, exc: BaseException, fs: object = None) -> str:
    """The one message of a refused read (HTTP 401 / 403, S3 ``AccessDenied``): the
    reason, then what to set. *fs*: the file system that was refused (an s3fs one says
    whether the request was anonymous)."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    message = f"{url}: access denied ({detail})"
    if not url.lower().startswith(S3_SCHEMES):
        return message
    if getattr(fs, "anon", False) is True:
        return (
            f"{message}: no AWS credentials were found, so it was read anonymously, and "
            "the bucket is not public. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
            "AWS_PROFILE (a profile of ~/.aws/credentials), or pass "
            "storage_options={'profile': ...}"
        )
    return (
        f"{message}: the AWS credentials in use (environment, AWS_PROFILE or "
        "storage_options) may not read it. Check them, or for a public bucket pass "
        "storage_options={'anon': True}"
    )


#: storage options (of s3fs) by which a caller decides how to authenticate: when any is
#: given it is used as it is, never overridden by :func:`_s3_anonymous`
_S3_AUTH_OPTIONS = ("anon", "key", "secret", "token", "username", "password", "session")
_S3_AUTH_CLIENT_KWARGS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
_s3_anon_cache: dict[tuple[Any, ...], bool] = {}
_s3_anon_lock = threading.Lock()


def _s3_credentials_key(profile: str | None) -> tuple[Any, ...]:
    """What botocore's credential lookup depends on, cheaply: the profile, ``HOME`` and
    the ``AWS_*`` variables (values of the profile and file ones, only the presence of
    the others, so no secret is kept)."""
    import os

    env = tuple(
        sorted(
            (k, v if k.endswith(("_FILE", "PROFILE")) else None)
            for k, v in os.environ.items()
            if k.startswith("AWS_") and "ENDPOINT" not in k
        )
    )
    return (profile, os.environ.get("HOME"), env)


def _s3_anonymous(url: str, profile: str | None) -> bool:
    """Whether to read *url* anonymously: True when botocore finds no credentials in the
    standard places (environment, ``AWS_PROFILE`` / *profile*, the shared credentials and
    config files, container or instance roles ...). Decided once per process for a
    profile and environment (the lookup can probe the instance metadata service), and
    said once in the log. Credentials that are found are used as they are: if they are
    wrong, the read fails naming them, never retried anonymously."""
    import importlib

    key = _s3_credentials_key(profile)
    anon = _s3_anon_cache.get(key)
    if anon is not None:
        return anon
    with _s3_anon_lock:
        anon = _s3_anon_cache.get(key)
        if anon is not None:
            return anon
        try:  # (imported by name: botocore ships no type information)
            session = importlib.import_module("botocore.session")
        except ImportError:  # pragma: no cover - s3fs needs botocore
            return False
        try:
            credentials = session.Session(profile=profile).get_credentials()
        except Exception as e:  # a missing profile, a broken config file, SSO ...
            import os

            name = profile or os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE")
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise RemoteError(
                f"{url}: AWS credentials could not be loaded"
                f"{f' (profile {name!r})' if name else ''}: {detail}"
            ) from None
        anon = credentials is None
        _s3_anon_cache[key] = anon
    if anon:
        logger.info(
            "%s: no AWS credentials found (environment, AWS profile, ~/.aws files): "
            "reading S3 anonymously, which works for public buckets only",
            url,
        )
    return anon


def _s3_options(url: str, storage_options: Mapping[str, object], timeout: float) -> dict[str, Any]:
    """s3fs options: anonymous when the caller gave no credentials and none are found,
    the read timeout. The endpoint (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, a
    profile's ``endpoint_url``) is botocore's own setting: not repeated here."""
    opts: dict[str, Any] = dict(storage_options)  # s3fs's keyword arguments
    client_kwargs = opts.get("client_kwargs") or {}
    explicit = any(k in opts for k in _S3_AUTH_OPTIONS) or any(
        k in client_kwargs for k in _S3_AUTH_CLIENT_KWARGS
    )
    if not explicit and _s3_anonymous(url, opts.get("profile") or None):
        opts["anon"] = True
    # s3fs reads a whole object (no range: a metadata document, an unsharded chunk) as
    # HEAD then GET when it may split it over connections: one GET is one round trip
    opts.setdefault("max_concurrency", 1)
    opts["config_kwargs"] = dict(opts.get("config_kwargs") or {})
    opts["config_kwargs"].setdefault("connect_timeout", timeout)
    opts["config_kwargs"].setdefault("read_timeout", timeout)
    return opts


def fsspec_options(
    url: str, storage_options: Mapping[str, object] | None, timeout: float | None = None
) -> dict[str, Any]:
    """The keyword arguments of the fsspec file system for *url*: *storage_options*
    with the timeouts and (S3) the credentials decision added."""
    opts: dict[str, Any] = dict(storage_options or {})  # fsspec's keyword arguments
    if url.lower().startswith(S3_SCHEMES):
        return _s3_options(url, opts, TIMEOUT_S if timeout is None else float(timeout))
    if url.lower().startswith(("http://", "https://")):
        try:
            import aiohttp

            t = TIMEOUT_S if timeout is None else float(timeout)
            opts["client_kwargs"] = dict(opts.get("client_kwargs") or {})
            opts["client_kwargs"].setdefault(
                "timeout", aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t)
            )
        except ImportError:  # pragma: no cover
            pass
    return opts


def filesystem(
    url: str, storage_options: Mapping[str, object] | None = None, timeout: float | None = None
) -> tuple[RemoteFileSystem, str]:
    if http_backend(url, storage_options) == "obstore":
        return ObstoreHTTP(url, TIMEOUT_S if timeout is None else float(timeout)), url
    try:
        import fsspec
    except ImportError:  # pragma: no cover - depends on the environment
        raise OzxError(
            f"{url}: reading remote files needs fsspec (pip install 'napari-ozx[remote]')"
        ) from None
    fs, path = fsspec.core.url_to_fs(url, **fsspec_options(url, storage_options, timeout))
    return fs, path


class FsspecRangeReader(RangeReader):
    """Range reads of one remote object; one request per read (or none, if prefetched)."""

    #: every read is a round trip: readers of members overlap what they can
    #: (:meth:`~napari_ozx.ozx.members.MemberReader.read`)
    remote = True

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        self.name = url
        self.url = url
        self._storage_options = storage_options
        self.timeout = TIMEOUT_S if timeout is None else float(timeout)
        self._fs, self._path = filesystem(url, storage_options, self.timeout)
        self._pin: dict[str, str] = {}  # request headers that pin the opened version
        self.validator: str | None = None
        self.size = self._size()
        self._head = b""  # prefetched bytes [0, len(_head))
        self._lock = threading.Lock()
        self._closed = False
        self.requests = 0
        self.bytes_read = 0

    def _size(self) -> int:
        try:
            info = self._fs.info(self._path)
            size = info.get("size")
        except FileNotFoundError:
            info, size = {}, None  # fsspec's HTTP lookup reports every failure as "not found"
        except Exception:
            info, size = {}, None
        if size is None:
            # a one-byte range read raises the real error (status code), with retries
            call_with_retries(
                "read", self.url, self._fs.cat_file, self._path, start=0, end=1,
                timeout=self.timeout,
            )  # fmt: skip
            info = call_with_retries(
                "size lookup", self.url, self._fs.info, self._path, timeout=self.timeout
            )
            size = info.get("size")
        self._pin_version(info)
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
        # (fsspec's HTTP file system takes request headers; the others take none)
        pin: dict[str, Any] = {"headers": self._pin} if self._pin else {}
        data: bytes = call_with_retries(
            "range read",
            self.url,
            self._fs.cat_file,
            self._path,
            start=offset,
            end=offset + length,
            timeout=self.timeout,
            **pin,
        )
        with self._lock:
            self.requests += 1
            self.bytes_read += len(data)
        if len(data) == self.size and length < self.size:
            # the whole object for a range: the server ignores Range
            self._whole(data)
            return data[offset : offset + length]
        if len(data) != length:
            raise ZipFormatError(
                f"{self.url}: short read at {offset} ({len(data)} of {length} bytes): "
                "truncated or changing file"
            )
        return data

    def _whole(self, data: bytes) -> None:
        """The server sent the whole object for a range request: keep it (when small
        enough) and serve every later read from memory, or refuse saying so."""
        mib = self.size / 2**20
        if self.size > WHOLE_OBJECT_LIMIT:
            raise RemoteError(
                f"{self.url}: the server does not support HTTP range requests (it sends the "
                f"whole {mib:.0f} MiB object for every read); napari-ozx reads such objects "
                f"whole only up to {WHOLE_OBJECT_LIMIT >> 20} MiB: serve it with a server "
                "that supports ranges (nginx, Apache, an object store)"
            )
        if len(self._head) < self.size:
            logger.warning(
                "%s: the server does not support HTTP range requests: read whole (%.1f MiB) "
                "and served from memory",
                self.url,
                mib,
            )
            self._head = data

    def _pin_version(self, info: Mapping[str, object]) -> None:
        """Remember the version opened; HTTP range requests then carry a precondition."""
        etag = info.get("ETag") or info.get("etag") or info.get("e_tag")
        modified = info.get("Last-Modified") or info.get("LastModified")
        self.validator = str(etag or modified) if (etag or modified) else None
        if not self.url.lower().startswith(("http://", "https://")):
            return  # other fsspec backends take no request headers; size is still checked
        if etag and not str(etag).startswith("W/"):
            self._pin = {"If-Match": str(etag)}
        elif modified:
            self._pin = {"If-Unmodified-Since": str(modified)}

    def prefetch_head(self, end: int) -> None:
        """Fetch bytes ``[0, end)`` in one request and serve later reads there from memory."""
        end = min(end, self.size, PREFETCH_LIMIT)
        if end > len(self._head):
            head = self.read(0, end)
            if len(self._head) < self.size:  # (not already the whole object, see _whole)
                self._head = head

    def close(self) -> None:
        self._closed = True
        self._head = b""

    @property
    def closed(self) -> bool:
        return self._closed

    def __reduce__(self) -> tuple[Callable[..., FsspecRangeReader], tuple[object, ...]]:
        return (_rebuild, (self.url, self._storage_options, self.timeout))


def _rebuild(
    url: str, storage_options: Mapping[str, object] | None, timeout: float
) -> FsspecRangeReader:
    return FsspecRangeReader(url, storage_options, timeout=timeout)
