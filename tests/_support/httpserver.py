"""A tiny range-capable HTTP server on 127.0.0.1 for remote-reading tests.

Serves one directory; supports HEAD, ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n``;
counts requests and body bytes; can be told to fail paths with a status code. HTTP/1.0
(a connection per request) unless ``keep_alive``: HTTP/1.1 with persistent connections,
as cloud object stores answer (the benchmarks use it; the tests keep a connection per
request, so that no pooled connection outlives a test).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


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
                    import time

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
                etag = f'"{st.st_mtime_ns:x}-{size:x}"'
                if outer.validators:
                    want = self.headers.get("If-Match")
                    if want is not None and want != etag:
                        self.send_response(412)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                if rng and outer.delay:
                    import time

                    time.sleep(outer.delay)
                start, end = 0, size
                if rng and rng.startswith("bytes=") and not outer.ignore_range:
                    a, _, b = rng[6:].partition("-")
                    if a == "":
                        start, end = max(size - int(b), 0), size
                    else:
                        start = int(a)
                        end = min(int(b) + 1, size) if b else size
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
                    from email.utils import formatdate

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
