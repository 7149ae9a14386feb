"""Download stage: polite, bounded, safe HTTP fetching with archiving and replay.

:class:`Fetcher` turns a URL into a :class:`~dmlqa.models.FetchResult` or raises a
:class:`~dmlqa.errors.FetchError` whose ``reason`` is short enough to show in a build report.
Everything a crawler of third-party sites owes its hosts and its user lives here:

* bounded concurrency, overall and per host, so a long list never hammers one site;
* timeouts and a bounded number of retries with exponential backoff (timeouts, connection
  errors, 429 and 5xx), honouring ``Retry-After`` but refusing to wait longer than configured;
* a streamed size cap, so a mislabelled multi-gigabyte file never lands in memory;
* redirects followed by hand, so every hop gets the same checks (scheme, address, robots.txt);
* robots.txt per origin (RFC 9309, see :meth:`Fetcher._load_robots` for the policy);
* refusal of non-http(s) URLs and of hosts on private, loopback, link-local, … addresses
  (server-side request forgery: a catalog is third-party input);
* conditional GET from the manifest's validators, so a rebuild re-downloads only what changed;
* every network response written to a WARC archive, and archived responses replayed instead
  of the network (``--archive``), with ``offline`` guaranteeing no network use at all.

:mod:`dmlqa.acquire.archive` holds the storage side (WARC writer, manifest, replay); this module only
uses those objects, so it imports nothing from there at run time.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import ipaddress
import logging
import random
import socket
import ssl
import time
import urllib.robotparser
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
from warcio.exceptions import ArchiveLoadFailed

from dmlqa.errors import DmlqaError, FetchError
from dmlqa.models import FetchResult
from dmlqa.settings import FetchConfig

if TYPE_CHECKING:  # only types: dmlqa.acquire.archive imports this module at run time
    from dmlqa.acquire.archive import ArchivedResponse, ArchiveReplay, ArchiveWriter, Manifest, ManifestEntry

logger = logging.getLogger(__name__)

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

_KIB = 1024
_MIB = 1024 * 1024


# -- small pure helpers ---------------------------------------------------------------------------


def utc_now_iso() -> str:
    """The current time as ISO-8601 UTC with a ``Z`` (also a valid WARC-Date)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_size(n: int) -> str:
    """``50 MB``, ``1.5 MB``, ``10 KB``, ``900 bytes``: sizes in reasons must read at a glance."""
    if n >= _MIB:
        return f"{n // _MIB} MB" if n % _MIB == 0 else f"{n / _MIB:.1f} MB"
    if n >= _KIB:
        return f"{n // _KIB} KB" if n % _KIB == 0 else f"{n / _KIB:.1f} KB"
    return f"{n} bytes"


def status_text(status: int, reason: str = "") -> str:
    """``HTTP 404 Not Found``: the standard phrase when known, else what the server said."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = reason.strip()
    return f"HTTP {status} {phrase}".rstrip()


def media_type(declared: str | None) -> str:
    """``Text/HTML; charset=utf-8`` → ``text/html``."""
    return (declared or "").split(";", 1)[0].strip().lower()


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


_MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")
_MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<meta", b"<title")


def _looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    while head.startswith(b"<!--"):  # leading comments (e.g. "<!-- generated by ... -->")
        end = head.find(b"-->")
        if end < 0:
            return False
        head = head[end + 3 :].lstrip()
    return head.startswith(_HTML_STARTS)


def _looks_like_text(body: bytes) -> bool:
    sample = body[:4096]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sample's end is still text.
        return exc.start >= len(sample) - 3
    return True


def sniff_content_type(body: bytes, declared: str | None, url: str = "") -> str:
    """The media type the *bytes* are, which is what extraction must go by.

    Servers get this wrong both ways: PDFs come as ``application/octet-stream`` (GitHub raw,
    the snapshot) and error pages come as ``application/pdf``. So the body decides first
    (``%PDF`` → PDF, HTML markup → HTML), then the declared type, then the URL's suffix.
    Returns ``application/pdf``, ``text/html``, ``text/markdown``, ``text/plain``, or the
    declared type (``application/octet-stream`` when nothing is known) for anything else.
    """
    if body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"%PDF"):
        return "application/pdf"
    declared_type = media_type(declared)
    if _looks_like_html(body) or declared_type in _HTML_TYPES:
        return "text/html"
    path = urlsplit(url).path.lower() if url else ""
    if declared_type in _MARKDOWN_TYPES or (
        path.endswith(_MARKDOWN_SUFFIXES) and declared_type in ("", "text/plain", "application/octet-stream")
    ):
        return "text/markdown"
    if declared_type.startswith("text/"):
        return "text/plain"
    if declared_type and declared_type != "application/octet-stream":
        return declared_type
    if body and _looks_like_text(body):
        return "text/plain"
    return "application/octet-stream"


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


def _format_seconds(s: float) -> str:
    return f"{s:g}s" if s < 100 else f"{s:.0f}s"


async def _getaddrinfo(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, via the event loop (module-level so tests can stub it)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# -- internal records -----------------------------------------------------------------------------


class _Fail(Exception):
    """A hop failed; :meth:`Fetcher.fetch` turns it into a FetchError naming the asked URL."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class _Exchange:
    """One HTTP response as seen by the redirect loop, from the network or from an archive."""

    url: str
    status: int
    reason: str
    headers: list[tuple[str, str]]  # already storable (decoded-body consistent)
    body: bytes
    fetched_at: str
    from_archive: bool = False
    warc_path: str | None = None
    warc_offset: int | None = None
    attempts: int = 1


@dataclass
class _RobotsPolicy:
    """robots.txt of one origin: a parser, or a blanket verdict with the reason for it."""

    parser: urllib.robotparser.RobotFileParser | None = None
    allow_all: bool = False
    reason: str = "disallowed by robots.txt"

    def allows(self, agent: str, url: str) -> bool:
        if self.parser is not None:
            return self.parser.can_fetch(agent, url)
        return self.allow_all


# -- the fetcher ----------------------------------------------------------------------------------


class Fetcher:
    """Fetches URLs politely and safely; an async context manager around one httpx client.

    ``archive`` receives every network response, ``manifest`` one row per :meth:`fetch` call
    (and supplies validators for conditional GET), ``replay`` answers from WARC files before the
    network is asked, and ``offline`` forbids the network altogether (no DNS, no sockets).
    ``transport`` replaces httpx's network transport (tests).
    """

    def __init__(
        self,
        config: FetchConfig,
        *,
        archive: ArchiveWriter | None = None,
        manifest: Manifest | None = None,
        replay: ArchiveReplay | None = None,
        offline: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.archive = archive
        self.manifest = manifest
        self.replay = replay
        self.offline = offline
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._global = asyncio.Semaphore(max(1, config.concurrency))
        self._per_host: dict[str, asyncio.Semaphore] = {}
        self._host_verdicts: dict[tuple[str, int], str | None] = {}
        self._robots: dict[str, _RobotsPolicy] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}
        #: robots.txt matches on the product token ("dmlqa"), not the whole User-Agent string.
        self._agent = config.user_agent.split("/", 1)[0].split()[0] if config.user_agent.strip() else "*"
        self.stats: dict[str, int] = {
            "fetches": 0,
            "requests": 0,
            "retries": 0,
            "redirects": 0,
            "from_archive": 0,
            "not_modified": 0,
            "robots_fetched": 0,
            "refused": 0,
            "errors": 0,
            "bytes": 0,
        }

    # -- lifecycle ---------------------------------------------------------------------------------
    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        """The client, created on first network use (an offline fetcher never makes one)."""
        if self._client is None:
            c = self.config
            self._client = httpx.AsyncClient(
                transport=self._transport,
                follow_redirects=False,  # each hop is checked by _fetch
                timeout=httpx.Timeout(c.timeout),
                limits=httpx.Limits(max_connections=max(1, c.concurrency)),
                headers={"User-Agent": c.user_agent, "Accept": ACCEPT},
            )
        return self._client

    # -- public API --------------------------------------------------------------------------------
    async def fetch(self, url: str, *, conditional: bool = True) -> FetchResult:
        """GET ``url`` following redirects; a 2xx result, or not_modified for a 304.

        With ``conditional`` and a manifest that holds validators for ``url`` from an earlier
        200, the request carries If-None-Match / If-Modified-Since. Raises :class:`FetchError`
        (always with ``url`` as given) for anything else. The outcome is recorded in the manifest.
        """
        self.stats["fetches"] += 1
        try:
            result, final = await self._fetch(url, conditional)
        except _Fail as fail:
            self.stats["errors"] += 1
            logger.info("fetch failed: %s: %s", url, fail.reason)
            if self.manifest is not None:
                self.manifest.record(url=url, error=fail.reason, status=fail.status)
            raise FetchError(url, fail.reason, status=fail.status) from None
        if self.manifest is not None:
            self.manifest.record(result, warc_path=final.warc_path, warc_offset=final.warc_offset)
        return result

    async def previous(self, url: str) -> FetchResult | None:
        """The body stored for ``url``'s last 200 (from the archive the manifest points at), if any.

        A 304 carries no body; the resolver needs the old landing page to find its PDF link.
        """
        if self.manifest is None:
            return None
        return await asyncio.to_thread(self.manifest.previous_copy, url)

    # -- the redirect loop -------------------------------------------------------------------------
    async def _fetch(self, url: str, conditional: bool) -> tuple[FetchResult, _Exchange]:
        entry = self.manifest.entry(url) if conditional and self.manifest is not None else None
        current = url.strip()
        redirects = 0
        while True:
            try:
                exchange, sent_validators = await self._one_hop(current, entry)
            except _Fail as fail:
                if redirects:
                    raise _Fail(f"redirected to {current}: {fail.reason}", fail.status) from None
                raise
            status = exchange.status
            if 300 <= status < 400 and status != 304:
                location = header_dict(exchange.headers).get("location", "").strip()
                if not location:
                    raise _Fail(f"{status_text(status, exchange.reason)} without a Location header", status)
                redirects += 1
                self.stats["redirects"] += 1
                if redirects > self.config.max_redirects:
                    raise _Fail(f"too many redirects (more than {self.config.max_redirects})")
                current = urljoin(current, location).split("#", 1)[0]
                continue
            if status == 304:
                if not sent_validators or entry is None:
                    raise _Fail("HTTP 304 Not Modified to an unconditional request", status)
                self.stats["not_modified"] += 1
                fresh = header_dict(exchange.headers)
                return (
                    FetchResult(
                        url=url,
                        final_url=exchange.url,
                        status=304,
                        content_type=entry.content_type or "",
                        body=b"",
                        headers=fresh,
                        etag=fresh.get("etag") or entry.etag,
                        last_modified=fresh.get("last-modified") or entry.last_modified,
                        sha256=entry.sha256 or "",
                        fetched_at=exchange.fetched_at,
                        from_archive=exchange.from_archive,
                        not_modified=True,
                    ),
                    exchange,
                )
            if 200 <= status < 300:
                if len(exchange.body) > self.config.max_bytes:  # archived bodies skip the stream cap
                    raise _Fail(f"body larger than the {format_size(self.config.max_bytes)} limit", status)
                return self._result(url, exchange), exchange
            text = status_text(status, exchange.reason)
            if exchange.attempts > 1:
                text += f" after {exchange.attempts} attempts"
            raise _Fail(text, status)

    def _result(self, url: str, exchange: _Exchange) -> FetchResult:
        headers = header_dict(exchange.headers)
        body = exchange.body
        return FetchResult(
            url=url,
            final_url=exchange.url,
            status=exchange.status,
            content_type=sniff_content_type(body, headers.get("content-type"), exchange.url),
            body=body,
            headers=headers,
            etag=headers.get("etag"),
            last_modified=headers.get("last-modified"),
            sha256=hashlib.sha256(body).hexdigest(),
            fetched_at=exchange.fetched_at,
            from_archive=exchange.from_archive,
        )

    async def _one_hop(self, url: str, entry: ManifestEntry | None) -> tuple[_Exchange, bool]:
        """One URL of a redirect chain: from the replay archive if it has it, else the network."""
        scheme, host, port = self._check_url(url)
        if self.replay is not None:
            try:
                hit = await asyncio.to_thread(self.replay.lookup, url)
            except (DmlqaError, ArchiveLoadFailed, OSError, EOFError, zlib.error, ValueError) as exc:
                raise _Fail(f"archived copy unreadable ({exc})") from None
            if hit is not None:
                self.stats["from_archive"] += 1
                return _exchange_from_archive(hit), False
        if self.offline:
            raise _Fail("not in the archive (offline)")
        await self._check_host(host, port)
        if self.config.respect_robots and not await self._robots_allow(scheme, host, port, url):
            self.stats["refused"] += 1
            raise _Fail(self._robots[_origin(scheme, host, port)].reason)
        headers: dict[str, str] = {}
        # Validators belong to the URL whose 200 they came from: the previous final URL.
        if entry is not None and entry.ok and entry.final_url == url:
            if entry.etag:
                headers["If-None-Match"] = entry.etag
            if entry.last_modified:
                headers["If-Modified-Since"] = entry.last_modified
        exchange = await self._request(url, headers)
        return exchange, bool(headers)

    # -- checks ------------------------------------------------------------------------------------
    def _check_url(self, url: str) -> tuple[str, str, int]:
        try:
            parts = urlsplit(url.strip())
            scheme = parts.scheme.lower()
            if scheme not in ALLOWED_SCHEMES:
                self.stats["refused"] += 1
                got = scheme or "no scheme"
                raise _Fail(f"refused: only http and https URLs are fetched (got {got!r})")
            host = parts.hostname
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:  # bad port, bad IPv6 literal
            raise _Fail(f"invalid URL ({exc})") from None
        if not host:
            raise _Fail("invalid URL (no host)")
        return scheme, host, port

    async def _check_host(self, host: str, port: int) -> None:
        """Refuse hosts on non-public addresses (SSRF) unless allow_private_hosts.

        IP literals are judged directly; names are resolved with the loop's getaddrinfo and
        refused if *any* address is non-public, so a name cannot smuggle one in among public
        ones. Verdicts are cached per host for the fetcher's life. httpx resolves again when it
        connects, so a DNS server that answers differently the second time (rebinding) is not
        stopped; pinning the address would break TLS name checks through httpx.
        """
        if self.config.allow_private_hosts:
            return
        key = (host, port)
        if key not in self._host_verdicts:
            self._host_verdicts[key] = await self._host_verdict(host, port)
        verdict = self._host_verdicts[key]
        if verdict is not None:
            self.stats["refused"] += 1
            raise _Fail(verdict)

    async def _host_verdict(self, host: str, port: int) -> str | None:
        hint = "(pass --allow-private-hosts to allow)"
        try:
            literal = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            literal = None
        if literal is not None:
            kind = address_kind(literal)
            return f"refused: {host} is {_article(kind)} {kind} address {hint}" if kind else None
        try:
            addresses = await _getaddrinfo(host, port)
        except (socket.gaierror, UnicodeError, OSError):
            return f"DNS lookup failed for {host}"
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address.split("%", 1)[0])
            except ValueError:
                continue
            kind = address_kind(ip)
            if kind:
                return f"refused: {host} resolves to {address}, {_article(kind)} {kind} address {hint}"
        if not addresses:
            return f"DNS lookup failed for {host}"
        return None

    # -- robots.txt --------------------------------------------------------------------------------
    async def _robots_allow(self, scheme: str, host: str, port: int, url: str) -> bool:
        origin = _origin(scheme, host, port)
        if origin not in self._robots:
            lock = self._robots_locks.setdefault(origin, asyncio.Lock())
            async with lock:  # concurrent first requests to a host wait for one robots.txt fetch
                if origin not in self._robots:
                    self._robots[origin] = await self._load_robots(origin)
        return self._robots[origin].allows(self._agent, url)

    async def _load_robots(self, origin: str) -> _RobotsPolicy:
        """Fetch and judge ``origin/robots.txt`` following RFC 9309 2.3.1.

        * 2xx: parse it (urllib.robotparser; first 512 KiB only).
        * 4xx (e.g. 401, 403, 404, 410) "unavailable": everything is allowed.
        * 429, 5xx, or no answer at all after the usual retries "unreachable": RFC 9309 says
          assume complete disallow, so every URL of the origin is refused for this fetcher's
          life (a build run), with the reason saying why (for no answer at all, the network
          reason itself, e.g. "connection refused (4 attempts)"). 429 is treated as
          unreachable, as Google does: it asks us to slow down, it does not say "no file".
        * More than five redirects: "unavailable", so allowed (RFC 9309 2.3.1.2).
        Redirect hops are checked like any other hop (scheme, address).
        """
        self.stats["robots_fetched"] += 1
        url = f"{origin}/robots.txt"
        unreachable = "robots.txt unreachable ({}), so everything there counts as disallowed (RFC 9309)"
        for _hop in range(ROBOTS_MAX_REDIRECTS + 1):
            try:
                _scheme, host, port = self._check_url(url)
                await self._check_host(host, port)
                exchange = await self._request(url, {}, robots=True)
            except _Fail as fail:
                # No HTTP answer at all: the host itself is unreachable, and saying so is clearer
                # than blaming robots.txt. Still "disallow" for the run, so a dead host costs one
                # round of retries, not one per URL.
                logger.info("robots.txt %s: %s", url, fail.reason)
                return _RobotsPolicy(reason=fail.reason)
            status = exchange.status
            if 300 <= status < 400:
                location = header_dict(exchange.headers).get("location")
                if not location:
                    return _RobotsPolicy(allow_all=True)
                url = urljoin(url, location)
                continue
            if 200 <= status < 300:
                parser = urllib.robotparser.RobotFileParser(url)
                parser.parse(exchange.body.decode("utf-8", errors="replace").splitlines())
                return _RobotsPolicy(parser=parser)
            if 400 <= status < 500 and status != 429:
                return _RobotsPolicy(allow_all=True)
            text = status_text(status, exchange.reason)
            if exchange.attempts > 1:
                text += f" after {exchange.attempts} attempts"
            return _RobotsPolicy(reason=unreachable.format(text))
        return _RobotsPolicy(allow_all=True)

    # -- the network -------------------------------------------------------------------------------
    def _host_slots(self, host: str) -> asyncio.Semaphore:
        slots = self._per_host.get(host)
        if slots is None:
            slots = self._per_host[host] = asyncio.Semaphore(max(1, self.config.per_host))
        return slots

    async def _request(self, url: str, headers: dict[str, str], *, robots: bool = False) -> _Exchange:
        """GET one URL with retries; returns the last response (any status) or raises _Fail."""
        c = self.config
        attempt = 0
        while True:
            attempt += 1
            try:
                exchange = await self._send(url, headers, robots=robots)
            except httpx.TimeoutException:
                problem = f"timed out after {_format_seconds(c.timeout)}"
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                problem = _describe_network_error(exc, url)
                if problem.startswith(("DNS lookup failed", "TLS")):
                    raise _Fail(problem) from None  # another try will not change these
            except httpx.TransportError as exc:  # proxy and local protocol errors: not transient
                raise _Fail(f"network error ({exc.__class__.__name__}: {exc})") from None
            else:
                exchange.attempts = attempt
                if exchange.status not in RETRY_STATUSES or attempt > c.retries:
                    return exchange
                wait = parse_retry_after(header_dict(exchange.headers).get("retry-after"))
                if wait is not None and wait > c.max_retry_after:
                    raise _Fail(
                        f"{status_text(exchange.status, exchange.reason)} with Retry-After "
                        f"{_format_seconds(wait)} (over the {_format_seconds(c.max_retry_after)} limit)",
                        exchange.status,
                    )
                delay = max(wait or 0.0, self._backoff(attempt))
                self.stats["retries"] += 1
                logger.info("%s: HTTP %d, retrying in %.2fs", url, exchange.status, delay)
                await asyncio.sleep(delay)
                continue
            if attempt > c.retries:
                raise _Fail(f"{problem} ({attempt} attempts)" if attempt > 1 else problem)
            delay = self._backoff(attempt)
            self.stats["retries"] += 1
            logger.info("%s: %s, retrying in %.2fs", url, problem, delay)
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with a little jitter, so retries from many tasks do not align."""
        base = float(self.config.backoff) * 2.0 ** (attempt - 1)
        return base + random.uniform(0, base / 10)

    async def _send(self, url: str, headers: dict[str, str], *, robots: bool) -> _Exchange:
        """One GET, body streamed under the size cap, the response archived."""
        cap = self.config.max_bytes
        too_big: _Fail | None = None
        truncated = False
        host = urlsplit(url).hostname or ""
        # Host slot first, so a request waiting for a busy host does not hold a global slot.
        async with self._host_slots(host), self._global:
            self.stats["requests"] += 1
            logger.debug("GET %s", url)
            try:
                async with self._http().stream("GET", url, headers=headers) as response:
                    fetched_at = utc_now_iso()
                    status = response.status_code
                    keep_all = 200 <= status < 300 and not robots
                    limit = cap if keep_all else (ROBOTS_BODY_LIMIT if robots else ERROR_BODY_LIMIT)
                    chunks: list[bytes] = []
                    size = 0
                    declared = response.headers.get("content-length", "")
                    if keep_all and declared.isdigit() and int(declared) > cap:
                        too_big = _Fail(f"body larger than the {format_size(cap)} limit", status)
                    else:
                        async for chunk in response.aiter_bytes():
                            size += len(chunk)
                            if size > limit:
                                if keep_all:
                                    too_big = _Fail(f"body larger than the {format_size(cap)} limit", status)
                                    chunks = []
                                else:  # only kept for the archive / robots: the start is enough
                                    chunks.append(chunk[: len(chunk) - (size - limit)])
                                truncated = True
                                break
                            chunks.append(chunk)
                    body = b"".join(chunks)
                    raw_headers = response.headers.multi_items()
                    reason = response.reason_phrase
            except httpx.DecodingError as exc:
                raise _Fail(f"could not decode the response body ({exc})") from None
            except httpx.InvalidURL as exc:
                raise _Fail(f"invalid URL ({exc})") from None
            except httpx.UnsupportedProtocol as exc:
                raise _Fail(f"refused: {exc}") from None
        self.stats["bytes"] += len(body)
        stored = storable_headers(raw_headers, len(body))
        exchange = _Exchange(
            url=url, status=status, reason=reason, headers=stored, body=body, fetched_at=fetched_at
        )
        if self.archive is not None:
            exchange.warc_offset = await asyncio.to_thread(
                self.archive.write,
                url=url,
                status=status,
                reason=reason,
                headers=stored,
                body=body,
                fetched_at=fetched_at,
                truncated=truncated or too_big is not None,
            )
            exchange.warc_path = str(self.archive.path) if self.archive.path else None
        if too_big is not None:
            raise too_big
        return exchange


# -- helpers used by Fetcher ----------------------------------------------------------------------


def _origin(scheme: str, host: str, port: int) -> str:
    default = 443 if scheme == "https" else 80
    netloc = f"[{host}]" if ":" in host else host
    if port != default:
        netloc = f"{netloc}:{port}"
    return urlunsplit((scheme, netloc, "", "", ""))


def _exchange_from_archive(hit: ArchivedResponse) -> _Exchange:
    return _Exchange(
        url=hit.url,
        status=hit.status,
        reason=hit.reason,
        headers=storable_headers(hit.headers, len(hit.body)),
        body=hit.body,
        fetched_at=hit.fetched_at,
        from_archive=True,
        warc_path=str(hit.path),
        warc_offset=hit.offset,
    )


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return chain


def _describe_network_error(exc: httpx.HTTPError, url: str) -> str:
    """A few words for a transport failure; DNS and TLS problems are named as such."""
    host = urlsplit(url).hostname or url
    chain = _causes(exc)
    text = " ".join(str(e) for e in chain).lower()
    if (
        any(isinstance(e, socket.gaierror) for e in chain)
        or "name or service not known" in text
        or ("nodename nor servname" in text or "temporary failure in name resolution" in text)
    ):
        return f"DNS lookup failed for {host}"
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
