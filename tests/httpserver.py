"""A real HTTP/1.1 server on 127.0.0.1 for fetch tests, programmed route by route.

The fetcher's behaviour (retries, timeouts, size caps, redirects, robots.txt, concurrency
limits) only shows against real sockets, so tests run this stdlib ThreadingHTTPServer in a
background thread and assert both on what the client got and on what the server saw
(requests per path, request headers, most requests in flight at once, aborted bodies).

Usage::

    server = LocalServer()
    server.route("/a", Reply(200, body=b"hi"))
    server.route("/flaky", [Reply(500), Reply(200, body=b"ok")])   # successive answers, last repeats
    server.route("/dyn", lambda req: Reply(304) if req.headers.get("If-None-Match") else Reply(200))
    ...
    server.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

logger = logging.getLogger(__name__)


@dataclass
class Reply:
    """One programmed answer."""

    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay: float = 0.0  # seconds to wait before answering
    repeat: int = 1  # the body is sent this many times (big bodies without big test data)
    chunked: bool = False  # Transfer-Encoding: chunked, no Content-Length
    content_length: int | None = None  # advertise this instead of the true length
    content_type: str = "text/html; charset=utf-8"


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    at: float


Handler = Reply | list[Reply] | Callable[[SeenRequest], Reply]


@dataclass
class _Route:
    handler: Handler
    calls: int = 0


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 with an ephemeral port; see the module docstring."""

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[SeenRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0  # most requests being answered at the same moment
        self.bytes_sent: dict[str, int] = {}
        self.aborted: list[str] = []  # paths whose body the client stopped reading
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                owner._handle(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                logger.debug("server: " + format, *args)

        class _Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                logger.debug("server: client went away", exc_info=True)

        self._server = _Server(("127.0.0.1", 0), _Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    # -- programming -------------------------------------------------------------------------------
    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, handler: Handler) -> None:
        with self._lock:
            self._routes[path] = _Route(handler)

    def hits(self, path: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path == path)

    def seen(self, path: str) -> list[SeenRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- serving -----------------------------------------------------------------------------------
    def _pick(self, request: SeenRequest) -> Reply:
        with self._lock:
            route = self._routes.get(request.path) or self._routes.get(request.path.split("?", 1)[0])
            if route is None:
                return Reply(404, body=b"<html><body>not found</body></html>")
            route.calls += 1
            n = route.calls
        handler = route.handler
        if isinstance(handler, Reply):
            return handler
        if isinstance(handler, list):
            return handler[min(n, len(handler)) - 1]
        return handler(request)

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        request = SeenRequest("GET", h.path, {k: v for k, v in h.headers.items()}, time.monotonic())
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self._pick(request)
            if reply.delay and self._stop.wait(reply.delay):
                h.close_connection = True
                return
            self._send(h, request.path, reply)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _send(self, h: BaseHTTPRequestHandler, path: str, reply: Reply) -> None:
        sent = 0
        try:
            h.send_response(reply.status)
            names = {k.lower() for k, _ in reply.headers}
            if "content-type" not in names:
                h.send_header("Content-Type", reply.content_type)
            for k, v in reply.headers:
                h.send_header(k, v)
            total = len(reply.body) * reply.repeat
            if reply.chunked:
                h.send_header("Transfer-Encoding", "chunked")
            elif "content-length" not in names:
                h.send_header(
                    "Content-Length", str(reply.content_length if reply.content_length is not None else total)
                )
            h.end_headers()
            for _ in range(reply.repeat):
                if not reply.body:
                    break
                if reply.chunked:
                    h.wfile.write(f"{len(reply.body):x}\r\n".encode() + reply.body + b"\r\n")
                else:
                    h.wfile.write(reply.body)
                sent += len(reply.body)
                if self._stop.is_set():
                    break
            if reply.chunked:
                h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            with self._lock:
                self.aborted.append(path)
            h.close_connection = True
        finally:
            with self._lock:
                self.bytes_sent[path] = self.bytes_sent.get(path, 0) + sent
