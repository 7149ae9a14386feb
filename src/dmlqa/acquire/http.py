"""HTTP helpers of the acquire stage: the guards every request passes and the words for what went wrong.

Pure functions (and the one DNS lookup, with the transport that connects to what it checked) shared
by the fetcher, robots.txt handling and the archive, so that each rule exists once: which URLs and
addresses may be asked at all (a catalog is third-party input, so non-public addresses are refused:
server-side request forgery, DNS rebinding included), where a Location points, which statuses are worth
a retry and how long ``Retry-After`` may make us wait, how headers are stored next to a *decoded*
body, how a response (live or replayed) becomes a :class:`~dmlqa.models.FetchResult`, and how a
transport failure is told to a user in a few words.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from dmlqa.media import sniff_content_type
from dmlqa.models import FetchResult

ALLOWED_SCHEMES = ("http", "https")
#: Statuses worth another attempt: the server may answer differently in a moment.
#: 501 and 505 are 5xx but say "never", so they are not retried.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524, 529})
#: Bodies of error statuses and redirects are only kept for the archive; no need for all of them.
ERROR_BODY_LIMIT = 256 * 1024
#: RFC 9309 2.5: crawlers must parse at least the first 500 KiB of a robots.txt.
ROBOTS_BODY_LIMIT = 512 * 1024
#: RFC 9309 2.3.1.2: follow at least five consecutive redirects for robots.txt.
ROBOTS_MAX_REDIRECTS = 5
ACCEPT = "text/html,application/xhtml+xml,application/pdf,text/markdown,text/plain;q=0.9,*/*;q=0.5"
#: Headers that describe the transfer, not the entity; wrong once the body is stored decoded.
TRANSFER_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})
#: How every failed name lookup begins ("DNS lookup failed for HOST"): the fetcher and the build's
#: no-network check recognise one by it.
DNS_FAILED = "DNS lookup failed"
#: Added to the reason of a URL whose host failed DNS before in the same build (no second lookup).
EARLIER = "(earlier in this build)"
#: What a refusal of a non-public host tells the user to do if the host is meant.
PRIVATE_HOSTS_HINT = "(pass --allow-private-hosts to allow)"


# -- times, statuses, headers ---------------------------------------------------------------------


def utc_now_iso() -> str:
    """The current time as ISO-8601 UTC with a ``Z`` (also a valid WARC-Date)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_text(status: int, reason: str = "") -> str:
    """``HTTP 404 Not Found``: the standard phrase when known, else what the server said."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = reason.strip()
    return f"HTTP {status} {phrase}".rstrip()


def storable_headers(headers: Iterable[tuple[str, str]], body_length: int) -> list[tuple[str, str]]:
    """Headers consistent with a *decoded* body of ``body_length`` bytes.

    httpx undoes Content-Encoding and chunking, so a stored or replayed response must not claim
    either any more, and its Content-Length must be the decoded length.
    """
    out = [(k, v) for k, v in headers if k.lower() not in TRANSFER_HEADERS]
    out.append(("Content-Length", str(body_length)))
    return out


def header_dict(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case names; repeated headers joined with ``, `` (RFC 9110 5.3)."""
    out: dict[str, str] = {}
    for k, v in headers:
        key = k.lower()
        out[key] = f"{out[key]}, {v}" if key in out else v
    return out


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date), None if unusable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=UTC)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def format_seconds(s: float) -> str:
    """``2.5s``, ``120s``: a wait or a timeout as reasons show it."""
    return f"{s:g}s" if s < 100 else f"{s:.0f}s"


def origin(scheme: str, host: str, port: int) -> str:
    """``https://host`` (the port only when it is not the scheme's default): robots.txt's scope."""
    default = 443 if scheme == "https" else 80
    netloc = f"[{host}]" if ":" in host else host
    if port != default:
        netloc = f"{netloc}:{port}"
    return urlunsplit((scheme, netloc, "", "", ""))


# -- which hosts may be asked ---------------------------------------------------------------------


def address_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address is not a public internet host (``"loopback"``, …), None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            return address_kind(embedded)
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-public"
    return None


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


async def _getaddrinfo(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, via the event loop (module-level so tests can stub it).

    The only name lookup of a guarded fetch: :class:`PinnedBackend` connects to what this returned.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class HostCheck:
    """The verdict on one host and port: why it must not be asked, else the addresses that were checked.

    The addresses are what a connection may go to; a second lookup could answer differently (DNS
    rebinding), so nothing resolves the name again.
    """

    refusal: str | None
    addresses: tuple[str, ...] = ()


async def check_host(host: str, port: int) -> HostCheck:
    """Resolve ``host`` once and check *every* address: a refusal (a reason for the report), or the addresses.

    IP literals are judged directly; names are refused if *any* address is non-public, so a name
    cannot smuggle one in among public ones.
    """
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        kind = address_kind(literal)
        if kind:
            return HostCheck(f"refused: {host} is {_article(kind)} {kind} address {PRIVATE_HOSTS_HINT}")
        return HostCheck(None, (host,))
    try:
        resolved = await _getaddrinfo(host, port)
    except (socket.gaierror, UnicodeError, OSError):
        return HostCheck(f"{DNS_FAILED} for {host}")
    addresses: list[str] = []
    for address in resolved:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:  # not an address at all: nothing that could be checked, so nothing to connect to
            continue
        kind = address_kind(ip)
        if kind:
            return HostCheck(
                f"refused: {host} resolves to {address}, {_article(kind)} {kind} address {PRIVATE_HOSTS_HINT}"
            )
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        return HostCheck(f"{DNS_FAILED} for {host}")
    return HostCheck(None, tuple(addresses))


#: What a connection is pinned by: the checked addresses of a host and port (raises when it is refused).
PinAddresses = Callable[[str, int], Awaitable[Sequence[str]]]


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer with the name lookup replaced by the guard's: connects only to checked addresses.

    httpcore hands :meth:`connect_tcp` the URL's host name and later starts TLS with that same name
    (SNI and the certificate check), and the Host header is built from the URL: so connecting to
    the pinned address changes nothing but *where* the socket goes.
    """

    def __init__(self, pin: PinAddresses, inner: httpcore.AsyncNetworkBackend) -> None:
        self._pin = pin
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._pin(host, port)
        refused: httpcore.ConnectError | None = None
        for address in addresses:  # like socket.create_connection: the next address when one refuses
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore.ConnectError as exc:
                refused = exc
        raise refused or httpcore.ConnectError(f"no checked address for {host}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport whose connections go through :class:`PinnedBackend`.

    httpx takes no network backend as an argument, but the httpcore pool it builds does: this is
    the one place that reaches in, and tests/test_rebinding.py fails if it stops working.
    """

    def __init__(self, pin: PinAddresses, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        pool = self._pool
        if not isinstance(pool, httpcore.AsyncConnectionPool) or isinstance(
            pool, (httpcore.AsyncHTTPProxy, httpcore.AsyncSOCKSProxy)
        ):
            raise TypeError("address pinning needs a direct connection pool (no proxy)")
        pool._network_backend = PinnedBackend(pin, pool._network_backend)


# -- redirects ------------------------------------------------------------------------------------

#: How httpx words a Location it cannot parse (it parses it even when it does not follow redirects).
_HTTPX_BAD_LOCATION = "Invalid URL in location header"
#: The start of every failure for a Location that is not a URL: not retried (the server will send it again).
BAD_LOCATION = "redirect to an unparsable Location"


def redirect_target(base: str, location: str) -> str:
    """The URL a ``Location`` header points to (fragment dropped), or ValueError saying why it is not one.

    Both parsers the next hop meets must accept it: urllib's (the fetcher's checks) and httpx's
    (the request, including the IDNA form of the host).
    """
    target = urljoin(base, location).split("#", 1)[0]
    _ = urlsplit(target).port  # raises for a bad port
    try:
        _ = httpx.URL(target).host
    except httpx.InvalidURL as exc:
        raise ValueError(str(exc)) from None
    return target


def bad_location(location: str | None, why: object) -> str:
    """The reason for a redirect whose Location does not parse; a long Location is cut, not echoed whole."""
    why = str(why).removeprefix(_HTTPX_BAD_LOCATION).strip(" :.")
    if location is None:
        return f"{BAD_LOCATION}: {why}"
    shown = location if len(location) <= 200 else f"{location[:200]}…"
    return f"{BAD_LOCATION}: {shown!r} ({why})"


def is_bad_location(exc: BaseException) -> bool:
    """Whether httpx failed on a response because its Location is not a URL (not a transport problem)."""
    return isinstance(exc, UnicodeError) or (
        isinstance(exc, httpx.RemoteProtocolError) and str(exc).startswith(_HTTPX_BAD_LOCATION)
    )


# -- what went wrong ------------------------------------------------------------------------------


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return chain


def describe_network_error(exc: httpx.HTTPError, url: str) -> str:
    """A few words for a transport failure; DNS and TLS problems are named as such."""
    host = urlsplit(url).hostname or url
    chain = _causes(exc)
    text = " ".join(str(e) for e in chain).lower()
    if (
        any(isinstance(e, socket.gaierror) for e in chain)
        or "name or service not known" in text
        or ("nodename nor servname" in text or "temporary failure in name resolution" in text)
    ):
        return f"{DNS_FAILED} for {host}"
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain) or "certificate verify failed" in text:
        return f"TLS certificate verification failed for {host}"
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return f"TLS handshake with {host} failed"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in text:
        return "connection refused"
    if any(isinstance(e, ConnectionResetError) for e in chain) or "reset by peer" in text:
        return "connection reset by the server"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection without a valid response"
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect to {host}"
    return f"network error ({exc.__class__.__name__})"


def response_result(
    asked: str,
    *,
    final_url: str,
    status: int,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    fetched_at: str,
    from_archive: bool,
) -> FetchResult:
    """The :class:`FetchResult` of one response, live or archived: one copy of how the content
    type is sniffed and the body hashed, so replay and the network give the same result."""
    fields = header_dict(headers)
    return FetchResult(
        url=asked,
        final_url=final_url,
        status=status,
        content_type=sniff_content_type(body, fields.get("content-type"), final_url),
        body=body,
        headers=fields,
        etag=fields.get("etag"),
        last_modified=fields.get("last-modified"),
        sha256=hashlib.sha256(body).hexdigest(),
        fetched_at=fetched_at,
        from_archive=from_archive,
    )
