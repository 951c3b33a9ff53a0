"""Tiny range-capable HTTP servers on 127.0.0.1 for remote-reading tests and benchmarks.

:class:`Server` serves one directory; supports HEAD, ``Range: bytes=a-b`` / ``bytes=a-`` /
``bytes=-n``; counts requests and body bytes; can be told to fail paths with a status
code. HTTP/1.0 (a connection per request) unless ``keep_alive``: HTTP/1.1 with persistent
connections, as cloud object stores answer (the tests keep a connection per request, so
that no pooled connection outlives a test).

:class:`FastServer` answers the same requests (ranges, HEAD, validators, ``latency``, the
request log) from one asyncio event loop, with keep-alive, and nothing else (no injected
failures). It is for the benchmarks: a server on the client's own cores should take as
little of their CPU as it can, since a remote object store takes none. Python's
``http.server`` parses every request with the email package on a thread of its own, about
1 ms of CPU per request on this project's 2-core machine, all of it under one GIL: a
plane's 26 concurrent requests, 50 ms latency each, came back after 79-90 ms, where one
came back after 52. This one costs about 0.2 ms a request (the 26: 64-77 ms).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


def byte_range(rng: str, size: int) -> tuple[int, int]:
    """``[start, end)`` of a ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` header
    (``start >= size``: not satisfiable)."""
    a, _, b = rng[len("bytes=") :].partition("-")
    if a == "":
        return max(size - int(b), 0), size
    return int(a), (min(int(b) + 1, size) if b else size)


def _etag(st: os.stat_result) -> str:
    return f'"{st.st_mtime_ns:x}-{st.st_size:x}"'


class Server:
    def __init__(self, root: Path, backlog: int = 128, keep_alive: bool = False) -> None:
        self.root = root
        self.requests: list[tuple[str, str, str | None]] = []
        self.body_bytes = 0
        self.fail: dict[str, int] = {}  # path suffix -> status
        self.fail_times: dict[str, int] = {}  # path suffix -> how many times to fail
        self.delay = 0.0  # seconds to wait before answering a ranged GET
        self.validators = True  # send ETag / Last-Modified and honour If-Match
        #: answer every GET with 200 and the whole body, as Python's http.server does
        self.ignore_range = False
        self.latency = 0.0  # seconds before answering any request (a distant server)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            if keep_alive:
                protocol_version = "HTTP/1.1"
                # headers and body are two writes: without this, Nagle's algorithm holds
                # the body until the client's delayed ACK of the headers (~40 ms)
                disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def _file(self) -> Path | None:
                rel = unquote(self.path.split("?", 1)[0]).lstrip("/")
                p = (outer.root / rel).resolve()
                return p if p.is_file() and outer.root.resolve() in p.parents else None

            def _maybe_fail(self) -> bool:
                for suffix, status in outer.fail.items():
                    if self.path.endswith(suffix):
                        left = outer.fail_times.get(suffix)
                        if left is not None:
                            if left <= 0:
                                continue
                            outer.fail_times[suffix] = left - 1
                        self.send_response(status)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return True
                return False

            def do_HEAD(self) -> None:
                self._serve(head=True)

            def do_GET(self) -> None:
                self._serve(head=False)

            def _serve(self, head: bool) -> None:
                if outer.latency:
                    time.sleep(outer.latency)
                rng = self.headers.get("Range")
                with outer._lock:
                    outer.requests.append((self.command, self.path, rng))
                if self._maybe_fail():
                    return
                f = self._file()
                if f is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                st = f.stat()
                size = st.st_size
                etag = _etag(st)
                if outer.validators:
                    want = self.headers.get("If-Match")
                    if want is not None and want != etag:
                        self.send_response(412)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                if rng and outer.delay:
                    time.sleep(outer.delay)
                start, end = 0, size
                if rng and rng.startswith("bytes=") and not outer.ignore_range:
                    start, end = byte_range(rng, size)
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
                else:
                    self.send_response(200)
                if not outer.ignore_range:
                    self.send_header("Accept-Ranges", "bytes")
                if outer.validators:
                    self.send_header("ETag", etag)
                    self.send_header("Last-Modified", formatdate(st.st_mtime, usegmt=True))
                self.send_header("Content-Length", str(end - start))
                self.end_headers()
                if head:
                    return
                with open(f, "rb") as fh:
                    fh.seek(start)
                    data = fh.read(end - start)
                with outer._lock:
                    outer.body_bytes += len(data)
                self.wfile.write(data)

        class _Server(ThreadingHTTPServer):
            # socketserver's default listen backlog is 5: concurrent range requests
            # beyond it were dropped and retried after 1 s (a stall real servers,
            # with backlogs of 128+, do not have); Server(root, backlog=5) is that server
            request_queue_size = backlog

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.body_bytes = 0

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class FastServer:
    """:class:`Server`'s answers (GET / HEAD, ranges, 404, 416, ETag / Last-Modified and
    ``If-Match``), HTTP/1.1 keep-alive, ``latency`` before every answer, ``requests`` and
    ``body_bytes``, served by one asyncio event loop on a thread of its own."""

    def __init__(self, root: Path, backlog: int = 256) -> None:
        self.root = root.resolve()
        self.requests: list[tuple[str, str, str | None]] = []
        self.body_bytes = 0
        self.latency = 0.0  # seconds before answering any request (a distant server)
        self._backlog = backlog
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._port = 0
        self.thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def reset(self) -> None:
        self.requests.clear()
        self.body_bytes = 0

    def __enter__(self) -> FastServer:
        self.thread.start()

        async def start() -> None:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", 0, backlog=self._backlog
            )
            self._port = self._server.sockets[0].getsockname()[1]

        asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            # every connection's task, those accepted meanwhile included, ends here (asyncio
            # would log a task cancelled before it ran as an error: it is not one here)
            self._loop.set_exception_handler(lambda _loop, _context: None)
            while tasks := asyncio.all_tasks() - {asyncio.current_task()}:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self.thread.join(5)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # headers and body are one write here, but a client's next request must not wait
        # for a delayed ACK either
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *rest = head.decode("latin-1").split("\r\n")
                method, path, _ = line.split(" ", 2)
                headers = {}
                for h in rest:
                    k, sep, v = h.partition(":")
                    if sep:
                        headers[k.strip().lower()] = v.strip()
                if self.latency:
                    await asyncio.sleep(self.latency)
                rng = headers.get("range")
                self.requests.append((method, path, rng))
                writer.write(self._answer(method, path, rng, headers.get("if-match")))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.CancelledError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, method: str, path: str, rng: str | None, if_match: str | None) -> bytes:
        rel = unquote(path.split("?", 1)[0]).lstrip("/")
        f = (self.root / rel).resolve()
        if not (f.is_file() and self.root in f.parents):
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        st = f.stat()
        size, etag = st.st_size, _etag(st)
        if if_match is not None and if_match != etag:
            return b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n"
        start, end = 0, size
        status, extra = "200 OK", ""
        if rng and rng.startswith("bytes="):
            start, end = byte_range(rng, size)
            if start >= size:
                return (
                    f"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\n"
                    "Content-Length: 0\r\n\r\n"
                ).encode()
            status, extra = (
                "206 Partial Content",
                f"Content-Range: bytes {start}-{end - 1}/{size}\r\n",
            )
        body = b""
        if method == "GET":
            with open(f, "rb") as fh:
                fh.seek(start)
                body = fh.read(end - start)
            self.body_bytes += len(body)
        return (
            f"HTTP/1.1 {status}\r\n{extra}Accept-Ranges: bytes\r\nETag: {etag}\r\n"
            f"Last-Modified: {formatdate(st.st_mtime, usegmt=True)}\r\n"
            f"Content-Length: {end - start}\r\n\r\n"
        ).encode() + body
