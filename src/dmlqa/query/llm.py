"""The LLM answer backend: any OpenAI-compatible chat endpoint, streamed.

Ollama, vLLM, llama.cpp's server, LM Studio and OpenAI itself all speak the chat-completions
protocol, so one client (the official ``openai`` package) reaches them all; the settings name
the base URL, the model and, where the endpoint wants one, the API key.

The messages come from :mod:`dmlqa.query.prompt` (rules, fenced sources, fenced question); the
reply is streamed as text deltas, with any reasoning removed by
:class:`dmlqa.query.reasoning.ReasoningFilter`; what it says is checked afterwards by
:func:`dmlqa.query.citations.check_citations`.

Every failure (refused connection, HTTP error, unknown model, timeout, a stream that stalls
or never ends) becomes an :class:`LLMError` with a reason a user can read, so the caller can
fall back to the extractive answer and say why.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dmlqa.errors import LLMError
from dmlqa.models import Hit
from dmlqa.query.prompt import build_messages
from dmlqa.query.reasoning import ReasoningFilter

log = logging.getLogger(__name__)

#: Sent as the API key to endpoints that need none (the client insists on some value).
PLACEHOLDER_KEY = "not-needed"


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to ask. ``timeout`` bounds connecting and every wait for the next token."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    max_tokens: int = 512
    temperature: float = 0.1
    #: Longest a whole answer may take; None means ``10 × timeout``.
    total_timeout: float | None = None
    max_retries: int = 0  # retries of the initial request by the client (never mid-stream)

    @classmethod
    def from_settings(cls, settings: Any) -> LLMConfig | None:
        """The config for ``settings`` (a :class:`dmlqa.settings.Settings`), or None when no LLM is set up."""
        section = settings.llm
        base_url = (section.base_url or "").strip()
        model = (section.model or "").strip()
        if not base_url or not model:
            return None
        return cls(base_url=base_url, model=model, api_key=section.api_key or None,
                   timeout=float(section.timeout or 60.0))

    @property
    def deadline(self) -> float:
        return self.total_timeout if self.total_timeout is not None else 10 * self.timeout


def normalise_base_url(url: str) -> str:
    """``http://host:11434`` → ``http://host:11434/v1``: every supported server serves the API under /v1."""
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc and parts.path in ("", "/"):
        return url + "/v1"
    return url


# -- the backend -------------------------------------------------------------------------------------------

_DONE = object()
#: Delta fields that carry a model's reasoning beside ``content``; their text is never shown.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


@dataclass(frozen=True)
class _Reasoning:
    chars: int


@dataclass(frozen=True)
class _Finish:
    reason: str


class LLMBackend:
    """Streams answers from one model at one OpenAI-compatible endpoint.

    The client (and its connection pool) is created on first use and shared by later calls;
    calls from several threads at once are fine.
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.base_url = normalise_base_url(config.base_url)
        self.name = f"llm:{config.model}"
        self._client: Any = None
        self._lock = threading.Lock()
        #: The endpoint sent a ``</think>`` with no opening tag: its chat template opens the block.
        self._orphan_close = False

    def __repr__(self) -> str:
        return f"LLMBackend({self.base_url!r}, model={self.config.model!r})"

    def client(self) -> Any:
        """The ``openai.OpenAI`` client, built on first use."""
        with self._lock:
            if self._client is None:
                import openai  # imported here: the CLI should not pay for it when no LLM is configured

                self._client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=self.config.api_key or PLACEHOLDER_KEY,
                    timeout=self.config.timeout,
                    max_retries=self.config.max_retries,
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> LLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answering ---------------------------------------------------------------------------------------
    def stream(self, question: str, passages: Sequence[Hit]) -> Iterator[str]:
        """Yield the answer's text as it arrives; raise :class:`LLMError` on failure (maybe after some text).

        The HTTP exchange runs in a worker thread so that two limits hold whatever the server does:
        no wait for the next piece longer than ``timeout`` and no answer longer than ``deadline``.
        Closing the iterator early cancels the request.
        """
        messages = build_messages(question, passages)
        items: queue.Queue[Any] = queue.Queue()
        cancel = threading.Event()
        worker = threading.Thread(
            target=self._produce, args=(messages, items, cancel), name="dmlqa-llm", daemon=True
        )
        start = time.monotonic()
        worker.start()
        got_text = False
        reasoning = 0  # characters of reasoning sent beside the content (reasoning_content deltas)
        finish: str | None = None
        thinking = ReasoningFilter(expect_close=self._orphan_close)
        try:
            while True:
                left = self.config.deadline - (time.monotonic() - start)
                if left <= 0:
                    raise LLMError(self._timeout_reason(got_text, total=True))
                try:
                    item = items.get(timeout=min(self.config.timeout, left))
                except queue.Empty:
                    total = time.monotonic() - start >= self.config.deadline
                    busy = got_text or bool(reasoning or thinking.reasoning_chars or thinking.buffer)
                    raise LLMError(self._timeout_reason(busy, total=total)) from None
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise self._error(item, got_text or bool(thinking.buffer)) from None
                if isinstance(item, _Reasoning):  # never shown; it only proves the model is working
                    reasoning += item.chars
                    continue
                if isinstance(item, _Finish):
                    finish = item.reason
                    continue
                text = thinking.feed(item)
                if text:
                    got_text = True
                    yield text
            text = thinking.flush()
            if text.strip():
                got_text = True
                yield text
        finally:
            cancel.set()  # the worker stops at its next chunk, or when its read times out
            if thinking.saw_orphan_close:
                self._orphan_close = True  # hold back the opening of this endpoint's next answers
        if not got_text:
            reasoning += thinking.reasoning_chars
            if reasoning:
                why = (f"ran out of tokens (max_tokens {self.config.max_tokens})" if finish == "length"
                       else "stopped")
                raise LLMError(
                    f"LLM endpoint {self.base_url} sent only reasoning and no answer: model {self.config.model!r} "
                    f"{why} after {reasoning} characters of reasoning"
                )
            raise LLMError(f"LLM endpoint {self.base_url} returned an empty answer (model {self.config.model!r})")

    def complete(self, question: str, passages: Sequence[Hit]) -> str:
        """The whole answer as one string (streamed underneath, so the same limits apply)."""
        return "".join(self.stream(question, passages))

    def list_models(self) -> list[str]:
        """The model ids the endpoint offers (a cheap reachability check); raises :class:`LLMError`."""
        try:
            return [m.id for m in self.client().models.list()]
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable LLMError
            raise self._error(exc, False) from None

    # -- internals ---------------------------------------------------------------------------------------
    def _produce(self, messages: list[dict[str, str]], items: queue.Queue[Any], cancel: threading.Event) -> None:
        """Worker: run the request, put text deltas, then _DONE or the exception, on ``items``."""
        try:
            stream = self._create(messages)
            try:
                for chunk in stream:
                    if cancel.is_set():
                        return
                    for choice in getattr(chunk, "choices", None) or ():
                        delta = getattr(choice, "delta", None)
                        if delta is not None:
                            # vLLM, llama.cpp, DeepSeek: reasoning_content; Ollama, newer vLLM: reasoning.
                            thought = sum(len(t) for f in REASONING_FIELDS
                                          if isinstance(t := getattr(delta, f, None), str))
                            if thought:
                                items.put(_Reasoning(thought))
                            content = getattr(delta, "content", None)
                            if isinstance(content, str) and content:
                                items.put(content)
                        if getattr(choice, "finish_reason", None):
                            items.put(_Finish(str(choice.finish_reason)))
            finally:
                stream.close()
            items.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises LLMError
            if not cancel.is_set():
                items.put(exc)

    def _create(self, messages: list[dict[str, str]]) -> Any:
        """Open the streamed request, adapting once to servers that reject ``max_tokens`` or ``temperature``."""
        import openai

        params: dict[str, Any] = {"max_tokens": self.config.max_tokens, "temperature": self.config.temperature}
        for _ in range(3):
            try:
                return self.client().chat.completions.create(
                    model=self.config.model, messages=messages, stream=True, **params
                )
            except openai.BadRequestError as exc:
                message = _message(exc).lower()
                if "max_tokens" in params and "max_tokens" in message and "max_completion_tokens" in message:
                    params["max_completion_tokens"] = params.pop("max_tokens")  # OpenAI reasoning models
                elif "temperature" in params and "temperature" in message:
                    params.pop("temperature")
                else:
                    raise
                log.info("LLM endpoint rejected a parameter; retrying with %s", sorted(params))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _timeout_reason(self, got_text: bool, *, total: bool) -> str:
        if total:
            return (f"LLM endpoint {self.base_url} timed out after {self.config.deadline:g}s "
                    "(the answer took too long to finish)")
        where = "stalled mid-answer" if got_text else "no reply"
        return f"LLM endpoint {self.base_url} timed out after {self.config.timeout:g}s ({where})"

    def _error(self, exc: BaseException, got_text: bool) -> LLMError:
        """Translate whatever the client raised into an LLMError with a readable reason."""
        import openai

        url = self.base_url
        model = self.config.model
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, openai.APITimeoutError) or _is_timeout(exc):
            return LLMError(self._timeout_reason(got_text, total=False))
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _message(exc)
            if status == 404 and "model" in detail.lower():
                return LLMError(f"model {model!r} not found at the endpoint {url} ({_short(detail)})", status=status)
            if status == 404:
                return LLMError(
                    f"LLM endpoint {url} returned HTTP 404: {_short(detail)} "
                    "(check the base URL: OpenAI-compatible servers usually serve under /v1)",
                    status=status,
                )
            if status in (401, 403):
                return LLMError(
                    f"LLM endpoint {url} refused the API key (HTTP {status}): {_short(detail)} "
                    "(set DMLQA_LLM_API_KEY or OPENAI_API_KEY)",
                    status=status,
                )
            return LLMError(f"LLM endpoint {url} returned HTTP {status}: {_short(detail)}", status=status)
        # openai < 2 lets transport errors raised mid-stream through unwrapped.
        transport = any(type(e).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore") for e in _chain(exc))
        if isinstance(exc, openai.APIConnectionError) or (transport and not isinstance(exc, openai.APIError)):
            if got_text:
                return LLMError(f"LLM endpoint {url} dropped the connection mid-answer ({_cause(exc)})")
            return LLMError(f"LLM endpoint {url} unreachable ({_cause(exc)})")
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            return LLMError(f"LLM endpoint {url} reported an error: {_short(_message(exc))}")
        if isinstance(exc, openai.OpenAIError | ValueError | OSError):
            return LLMError(f"LLM endpoint {url} failed: {_short(str(exc) or type(exc).__name__)}")
        log.warning("unexpected error from the LLM client", exc_info=exc)
        return LLMError(f"LLM request to {url} failed: {type(exc).__name__}: {_short(str(exc))}")


def _message(exc: BaseException) -> str:
    """The server's own error message when it sent one (OpenAI-style ``{"error": {"message": ...}}``)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body.strip():
        return body
    return str(getattr(exc, "message", "") or exc)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) or type(e).__name__.endswith("Timeout") for e in _chain(exc))


def _cause(exc: BaseException) -> str:
    """Why a connection failed, in a few words: 'connection refused', 'host not found', ..."""
    for e in _chain(exc):
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
    text = " ".join(str(e) for e in _chain(exc)).lower()
    if "refused" in text:
        return "connection refused"
    if any(s in text for s in ("name or service not known", "nodename nor servname", "getaddrinfo",
                               "name resolution", "no address associated")):
        return "host not found"
    if "unsupportedprotocol" in text.replace(" ", "") or "missing an 'http://' or 'https://'" in text or any(
        type(e).__name__ == "UnsupportedProtocol" for e in _chain(exc)
    ):
        return "the base URL must start with http:// or https://"
    if "network is unreachable" in text or "no route to host" in text:
        return "network unreachable"
    if "certificate" in text or "ssl" in text:
        return "TLS error: " + _short(str(list(_chain(exc))[-1]), 120)
    if "incomplete" in text or "peer closed" in text or "without sending" in text:
        return "the server closed the connection"
    innermost = list(_chain(exc))[-1]
    return _short(str(innermost) or type(innermost).__name__, 120)
