"""What a served dmlqa app lets in and keeps: Host names, its password, and per-session state.

One module for the bounds of both HTTP servers (the chat app and ``dmlqa mcp --http``), so a front
end imports one thing to be guarded.

**Host names.** Which ``Host`` (and ``Origin``) a dmlqa HTTP server answers.

A server on 127.0.0.1 is still reachable from any web page the user opens: the page's site can
re-point its own name at 127.0.0.1 (DNS rebinding), and the browser then treats the local server as
that site and lets the page read its answers. Such requests carry the attacker's name in ``Host``,
so a server that answers only the names it is really served under is out of reach. Those names
are ``localhost``, loopback addresses, the ``--host`` it listens on and whatever the user configures
(``[ui] allowed_hosts``). An IP address is accepted when the server listens on it (or on every
interface): rebinding needs a name, and a request that names one of our addresses reached us on purpose.

A cross-site ``Origin`` (another site's page posting to us, or ``null`` from a sandboxed frame) is
refused by the same rule, as the MCP SDK's own check did. Refusals are ``421 Misdirected Request``
(``403`` for an origin) with a one-line body; no request reaches the app behind.

**Sessions.** Gradio keeps, per session, its own copy of the page's configuration plus every ``gr.State`` (the
chat's asked questions): about 80 KB. A browser tab is one session, and so is every call of the
HTTP ``/ask`` API, and Gradio forgets a session only past 10,000 of them, so a busy app grew by
hundreds of MB. The app caps them at ``[ui] max_sessions`` (Gradio's own least-recently-used
eviction, given that capacity) and drops those idle longer than ``[ui] session_max_age_s`` (this
module, from a background thread). A dropped session loses only its follow-up context: the chat
shown in the browser is sent with every question.

**Password.** The chat app asks for one (user ``dmlqa``) when ``[ui] password`` or
``DMLQA_UI_PASSWORD`` is set, and warns when it listens beyond this machine.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dmlqa.errors import quoted
from dmlqa.settings import Settings, UIConfig

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Names every server answers: this machine, spelled as a browser would.
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
#: Listening on these means every interface: any of this machine's addresses may be named.
WILDCARDS = ("0.0.0.0", "::", "")


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_name(value: str | None) -> str | None:
    """The lower-case name (or bare IP address) of a ``Host`` header value, or None when it is malformed.

    ``Example.org:8080`` -> ``example.org``; ``[::1]:7860`` -> ``::1``; a trailing dot is dropped.
    """
    if not value or any(ch in value for ch in "/?#@\\ \t\r\n"):
        return None
    try:
        parts = urlsplit(f"//{value}")
        parts.port  # noqa: B018 - raises ValueError on a port that is no number
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return name or None


@dataclass(frozen=True)
class HostRule:
    """The names a server answers; see the module's docstring for why."""

    names: frozenset[str]
    any_address: bool = False
    listen: str = ""

    @classmethod
    def serving(cls, listen: str, extra: Iterable[str] = ()) -> HostRule:
        """The rule of a server listening on ``listen`` (its ``--host``), plus the ``extra`` names configured."""
        listen = listen.strip("[]").lower()
        names = {*LOCAL_NAMES, *(n.strip("[]").lower().rstrip(".") for n in extra if n.strip())}
        if listen not in WILDCARDS:
            names.add(listen)
        return cls(frozenset(names), any_address=listen in WILDCARDS, listen=listen)

    def allows(self, host: str | None) -> bool:
        """Whether a request whose ``Host`` header is ``host`` is for this server (any port)."""
        name = host_name(host)
        if name is None:
            return False
        if name in self.names:
            return True
        addr = _address(name)
        return addr is not None and (addr.is_loopback or self.any_address)

    def allows_origin(self, origin: str | None) -> bool:
        """Whether a request's ``Origin`` header (absent on same-site navigations) is one of ours."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self.allows(parts.netloc)


class HostGuard:
    """ASGI middleware: requests and websockets for a name ``rule`` does not allow never reach ``app``."""

    def __init__(self, app: ASGIApp, rule: HostRule) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: the app's start and stop
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        host, origin = headers.get("host"), headers.get("origin")
        if not self.rule.allows(host):
            status, text = 421, f"misdirected request: this server does not answer for host {_shown(host)}"
        elif not self.rule.allows_origin(origin):
            status, text = 403, f"forbidden: requests from origin {_shown(origin)} are not accepted"
        else:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # closing before accepting is answered with HTTP 403
            await send({"type": "websocket.close", "code": 1008})
            return
        body = (text + "\n").encode("utf-8", "replace")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _shown(value: str | None) -> str:
    return "(none)" if value is None else quoted(value)  # a header can be kilobytes long


# -- sessions ---------------------------------------------------------------------------------------

log = logging.getLogger(__name__)

#: The longest pause between two sweeps for idle sessions (seconds).
SWEEP_EVERY = 60.0


@dataclass(frozen=True)
class SessionLimits:
    """How many sessions the app keeps, and for how long after their last request (seconds)."""

    max_sessions: int = UIConfig.max_sessions
    max_age_s: float = UIConfig.session_max_age_s

    @classmethod
    def of(cls, ui: UIConfig) -> SessionLimits:
        return cls(ui.max_sessions, ui.session_max_age_s)

    @property
    def sweep_every(self) -> float:
        """Seconds between sweeps: often enough that a session outlives its age by at most half of it."""
        return max(1.0, min(SWEEP_EVERY, self.max_age_s / 2))


def expire_sessions(holder: Any, max_age_s: float, now: datetime.datetime | None = None) -> int:
    """Drop the sessions of Gradio's ``StateHolder`` unused for more than ``max_age_s``; returns how many.

    ``now`` is for tests; Gradio stamps each use with the naive local ``datetime.now()``, so it is compared with that.
    """
    now = now or datetime.datetime.now()
    limit = datetime.timedelta(seconds=max_age_s)
    dropped = 0
    with holder.lock:
        for session, used in list(holder.time_last_used.items()):
            if now - used > limit:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
                dropped += 1
    return dropped


def sweep_sessions(demo: Any, limits: SessionLimits, stop: threading.Event) -> None:
    """Until ``stop`` is set, drop the idle sessions of the running Blocks ``demo`` (a daemon thread's loop)."""
    while not stop.wait(limits.sweep_every):
        holder = getattr(demo, "state_holder", None)  # set when the app starts
        if holder is None:
            continue
        if not getattr(demo, "is_running", True):  # closed (``block=False`` callers, tests)
            return
        try:
            dropped = expire_sessions(holder, limits.max_age_s)
        except Exception:  # noqa: BLE001 - a Gradio change must not end the app; the log says why
            log.warning("dropping idle sessions failed", exc_info=True)
            continue
        if dropped:
            log.info("dropped %d idle sessions (kept %d)", dropped, len(holder.session_data))


# -- listening and the password -----------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, *, password: bool) -> str | None:
    """The warning to print when the app listens beyond this machine (None on loopback)."""
    if is_loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::", "[::]") else host
    msg = f"the app listens on {where}: anyone who can reach this machine on that port can use it"
    if not password:
        msg += "; set DMLQA_UI_PASSWORD to require a password"
    return msg


def ui_password(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The app's password: the ``ui_password`` setting (dmlqa.toml or ``DMLQA_UI_PASSWORD``)."""
    return settings.ui.password or env.get("DMLQA_UI_PASSWORD") or None
