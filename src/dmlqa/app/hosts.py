"""Which ``Host`` (and ``Origin``) a dmlqa HTTP server answers: one rule for the chat app and ``dmlqa mcp --http``.

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
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Names every server answers: this machine, spelled as a browser would.
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
#: Listening on these means every interface: any of this machine's addresses may be named.
WILDCARDS = ("0.0.0.0", "::", "")
#: How much of a refused name the reply repeats (a header can be kilobytes long).
SHOWN = 80


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
    if value is None:
        return "(none)"
    return repr(value[:SHOWN] + ("…" if len(value) > SHOWN else ""))
