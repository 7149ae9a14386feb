"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests of the LLM backend.

It speaks enough of the chat-completions protocol for the official ``openai`` client:
``POST /v1/chat/completions`` (streamed as server-sent events, or one JSON body) and
``GET /v1/models``. Each request's headers and JSON body are recorded; each reply is
programmable (text, deltas, delays, an HTTP error, a hang, a dropped connection), and so is the
shape of the stream, as real local servers send it: content cut at awkward places (``chunk_size``,
``chunks``), reasoning in ``reasoning_content``/``reasoning`` deltas beside the content (vLLM,
llama.cpp, DeepSeek, Ollama), or raw delta objects (``events``). A ``responder`` picks the reply
from the request (for runs over many questions).

    with FakeOpenAI() as server:
        server.queue(Reply(text="Ring all-reduce is bandwidth-optimal [1]."))
        ...  # point an OpenAI client at server.url
        server.requests[0].body["messages"]
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server answers to the next chat-completions request."""

    text: str = "Data parallelism replicates the model on every worker [1]."
    #: The deltas to stream; by default ``text`` split after each space (so several deltas).
    chunks: list[str] | None = None
    status: int = 200
    #: Body of an error answer (status >= 400); default an OpenAI-style error object.
    error: dict[str, Any] | None = None
    delay_first: float = 0.0  # seconds before the response headers
    delay_between: float = 0.0  # seconds between streamed deltas
    hang: bool = False  # never answer (until the server stops)
    hang_after: int | None = None  # stream this many deltas, then hang
    drop_after: int | None = None  # stream this many deltas, then close the connection mid-body
    #: Stream this many deltas, then wait until this event is set before sending the rest.
    gate: threading.Event | None = None
    gate_after: int = 1
    finish_reason: str = "stop"
    #: Cut ``text`` every this many characters (through tags, markers and words) instead of at spaces.
    chunk_size: int | None = None
    #: Reasoning sent before the content as deltas of ``reasoning_field`` (the content field null).
    reasoning: list[str] | None = None
    reasoning_field: str = "reasoning_content"
    #: Raw delta objects to stream instead (e.g. ``{"reasoning_content": "..", "content": "A"}``).
    events: list[dict[str, Any]] | None = None

    def deltas(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        if self.chunk_size:
            return [self.text[i : i + self.chunk_size] for i in range(0, len(self.text), self.chunk_size)]
        parts = self.text.split(" ")
        return [p + " " for p in parts[:-1]] + [parts[-1]]

    def delta_objects(self) -> list[dict[str, Any]]:
        """The ``delta`` of each streamed chunk after the first (role) one."""
        if self.events is not None:
            return [dict(e) for e in self.events]
        thoughts = [{self.reasoning_field: r, "content": None} for r in self.reasoning or ()]
        return thoughts + [{"content": t} for t in self.deltas()]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


@dataclass
class FakeOpenAI:
    """The server; use as a context manager. ``url`` is the base URL to give the client."""

    models: list[str] = field(default_factory=lambda: ["fake-model"])
    default: Reply = field(default_factory=Reply)
    #: When set (and nothing is queued), the reply to each chat request is ``responder(request body)``.
    responder: Callable[[Any], Reply] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------------
    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order; then with ``default``."""
        with self._lock:
            self._replies.extend(replies)

    def next_reply(self, body: Any = None) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return self.responder(body) if self.responder is not None else self.default

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when it is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up: expected in these tests
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    # -- helpers -------------------------------------------------------------------------------
    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.fake.record(RecordedRequest(self.command, self.path, headers, body))

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _hang(self) -> None:
        while not self.fake.sleep(0.05):
            pass
        self.close_connection = True

    # -- routes --------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._record(None)
        if self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._record(body)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        reply = self.fake.next_reply(body)
        if reply.hang:
            self._hang()
            return
        if self.fake.sleep(reply.delay_first):
            return
        if reply.status >= 400:
            error = reply.error or {
                "error": {"message": f"fake server error {reply.status}", "type": "server_error", "code": None}
            }
            self._send_json(reply.status, error)
            return
        model = body.get("model") if isinstance(body, dict) else None
        if model not in self.fake.models:
            msg = f"model '{model}' not found, try pulling it first"
            self._send_json(404, {"error": {"message": msg, "type": "not_found_error", "code": None}})
            return
        if isinstance(body, dict) and body.get("stream"):
            self._stream(reply, model)
        else:
            reasoning = "".join(reply.reasoning or ()) or None
            self._send_json(200, _completion(model, reply.text, reply.finish_reason, reasoning, reply.reasoning_field))

    def _stream(self, reply: Reply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        created = int(time.time())

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(chunk)}\n\n".encode()

        try:
            self._write_chunk(event({"role": "assistant", "content": ""}))
            for i, delta in enumerate(reply.delta_objects()):
                if reply.hang_after is not None and i == reply.hang_after:
                    self._hang()
                    return
                if reply.drop_after is not None and i == reply.drop_after:
                    self.close_connection = True
                    return  # the chunked body never ends: the client sees a broken stream
                if reply.gate is not None and i == reply.gate_after:
                    while not reply.gate.wait(0.05):
                        if self.fake.sleep(0):
                            return
                if i and self.fake.sleep(reply.delay_between):
                    return
                self._write_chunk(event(delta))
            self._write_chunk(event({}, reply.finish_reason))
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def _completion(
    model: str, text: str, finish_reason: str, reasoning: str | None = None, reasoning_field: str = "reasoning_content"
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message[reasoning_field] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
