"""Download stage: polite, bounded, safe HTTP fetching with archiving and replay.

:class:`Fetcher` turns a URL into a :class:`~dmlqa.models.FetchResult` or raises a
:class:`~dmlqa.errors.FetchError` whose ``reason`` is short enough to show in a build report.
Everything a crawler of third-party sites owes its hosts and its user lives here:

* bounded concurrency, overall and per host, so a long list never hammers one site;
* timeouts and a bounded number of retries with exponential backoff (timeouts, connection
  errors, 429 and 5xx), honouring ``Retry-After`` but refusing to wait longer than configured;
* a streamed size cap, so a mislabelled multi-gigabyte file never lands in memory;
* redirects followed by hand, so every hop gets the same checks (scheme, address, robots.txt);
* robots.txt per origin (RFC 9309, see :func:`dmlqa.acquire.robots.load_robots` for the policy);
* refusal of non-http(s) URLs and of hosts on private, loopback, link-local, … addresses
  (server-side request forgery: a catalog is third-party input), with every connection made to
  the address that was checked, never to a second lookup (DNS rebinding);
* conditional GET from the manifest's validators, so a rebuild re-downloads only what changed;
* every network response written to a WARC archive, and archived responses replayed instead
  of the network (``--archive``), with ``offline`` guaranteeing no network use at all.

The storage side (:mod:`dmlqa.acquire.archive`, :mod:`dmlqa.acquire.manifest`) knows nothing of
this module; the guards and words for failures are :mod:`dmlqa.acquire.http`, robots.txt policy is
:mod:`dmlqa.acquire.robots`, and what a body is (:func:`dmlqa.media.sniff_content_type`) is decided
where the extractor decides it too.
"""

from __future__ import annotations

import asyncio
import logging
import random
import zlib
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlsplit

import httpx
from warcio.exceptions import ArchiveLoadFailed

from dmlqa.acquire.archive import ArchivedResponse, ArchiveReplay, ArchiveWriter
from dmlqa.acquire.http import (
    ACCEPT,
    ALLOWED_SCHEMES,
    DNS_FAILED,
    EARLIER,
    ERROR_BODY_LIMIT,
    RETRY_STATUSES,
    ROBOTS_BODY_LIMIT,
    HostCheck,
    PinnedTransport,
    bad_location,
    check_host,
    describe_network_error,
    format_seconds,
    header_dict,
    is_bad_location,
    origin,
    parse_retry_after,
    redirect_target,
    response_result,
    status_text,
    storable_headers,
    utc_now_iso,
)
from dmlqa.acquire.manifest import Manifest, ManifestEntry
from dmlqa.acquire.robots import RobotsAnswer, RobotsPolicy, load_robots, robots_agent
from dmlqa.errors import DmlqaError, FetchError
from dmlqa.fsutil import format_size
from dmlqa.models import FetchResult
from dmlqa.settings import FetchConfig

logger = logging.getLogger(__name__)


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
    body: bytes = field(repr=False)
    fetched_at: str
    from_archive: bool = False
    warc_path: str | None = None
    warc_offset: int | None = None
    attempts: int = 1


# -- the fetcher ----------------------------------------------------------------------------------


class Fetcher:
    """Fetches URLs politely and safely; an async context manager around one httpx client.

    ``archive`` receives every network response, ``manifest`` one row per :meth:`fetch` call
    (and supplies validators for conditional GET), ``replay`` answers from WARC files before the
    network is asked, and ``offline`` forbids the network altogether (no DNS, no sockets).
    ``transport`` replaces httpx's network transport (tests); without it, and unless private hosts are
    allowed, connections go through :class:`~dmlqa.acquire.http.PinnedTransport` to checked addresses.
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
        self._host_checks: dict[tuple[str, int], HostCheck] = {}
        self._host_locks: dict[tuple[str, int], asyncio.Lock] = {}
        #: host -> why its name did not resolve: asked once per build, then every URL of it fails at once
        self._unresolved: dict[str, str] = {}
        self._robots: dict[str, RobotsPolicy] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}
        self._agent = robots_agent(config.user_agent)
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
            "responses": 0,  # HTTP answers from the network, any status: 0 means no server was reached
            "unresolved_skips": 0,  # hops failed at once because their host failed DNS earlier
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
            limits = httpx.Limits(max_connections=max(1, c.concurrency))
            transport = self._transport
            if transport is None and not c.allow_private_hosts:
                # The guard's lookup is the only one: a second (httpx's own) may answer differently.
                # An environment proxy would resolve names itself, so a pinned client does not use one.
                transport = PinnedTransport(self._check_host, limits=limits)
            self._client = httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,  # each hop is checked by _fetch
                timeout=httpx.Timeout(c.timeout),
                limits=limits,
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

    def crawl_delay(self, url: str) -> float | None:
        """The delay robots.txt of ``url``'s origin asks of this agent, once that robots.txt was read.

        The fetcher's own politeness is its per-host concurrency; callers that pace a host request by
        request (the open-access look-ups, :mod:`dmlqa.acquire.openaccess`) read the delay here, so
        robots.txt is fetched once and by the same rules.
        """
        try:
            parts = urlsplit(url.strip())
            scheme, host = parts.scheme.lower(), parts.hostname
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            return None
        policy = self._robots.get(origin(scheme, host, port)) if host else None
        return policy.crawl_delay(self._agent) if policy is not None else None

    def unresolvable(self, url: str) -> bool:
        """Whether ``url``'s host failed DNS earlier in this fetcher's life (a build run).

        Asking it again fails at once without a lookup, so a caller that paces requests
        (:mod:`dmlqa.acquire.pacing`) must not wait before it: with no network, 150 arXiv
        look-ups would otherwise sit out 3 s each only to fail.
        """
        try:
            host = urlsplit(url.strip()).hostname
        except ValueError:
            return False
        return bool(host) and host in self._unresolved

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
                try:
                    target = redirect_target(current, location)
                except ValueError as exc:  # the server will send the same again: not retried
                    raise _Fail(bad_location(location, exc), status) from None
                redirects += 1
                self.stats["redirects"] += 1
                if redirects > self.config.max_redirects:
                    raise _Fail(f"too many redirects (more than {self.config.max_redirects})")
                current = target
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
        return response_result(
            url,
            final_url=exchange.url,
            status=exchange.status,
            headers=exchange.headers,
            body=exchange.body,
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
            raise _Fail(self._robots[origin(scheme, host, port)].reason)
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
            _ = httpx.URL(url.strip()).host  # the request's own parser, IDNA included, must accept it too
        except (ValueError, httpx.InvalidURL) as exc:  # bad port, bad IPv6 literal, bad IDNA host
            raise _Fail(f"invalid URL ({exc})") from None
        if not host:
            raise _Fail("invalid URL (no host)")
        return scheme, host, port

    async def _check_host(self, host: str, port: int) -> tuple[str, ...]:
        """The addresses ``host`` may be reached at; fails at once for a host whose name did not resolve
        earlier in this build, and refuses hosts on non-public addresses (SSRF) unless allow_private_hosts.

        The rule is :func:`~dmlqa.acquire.http.check_host`: one lookup per host and port at a time,
        cached for the fetcher's life. The same call is the pin of :class:`PinnedTransport`, so a
        connection goes to an address checked here and never to a second lookup, which a DNS server
        could answer differently (rebinding); redirects and robots.txt connect the same way. A name
        that does not resolve fails every later URL of that host without a second lookup, a retry
        or a pacing wait. With allow_private_hosts nothing is resolved or pinned (a test transport
        or a proxy may reach names this machine cannot resolve): httpx's own lookup, when it fails,
        marks the host the same way (:meth:`_request`); the empty tuple means "connect by name".
        """
        name = host.lower()
        self._raise_if_unresolved(name)
        if self.config.allow_private_hosts:
            return ()
        key = (name, port)
        if key not in self._host_checks:
            async with self._host_locks.setdefault(key, asyncio.Lock()):  # concurrent URLs: one lookup
                self._raise_if_unresolved(name)
                if key not in self._host_checks:
                    checked = await check_host(host, port)
                    self._host_checks[key] = checked
                    if checked.refusal is not None and checked.refusal.startswith(DNS_FAILED):
                        self._unresolved[name] = checked.refusal
        checked = self._host_checks[key]
        if checked.refusal is not None:
            if not checked.refusal.startswith(DNS_FAILED):
                self.stats["refused"] += 1
            raise _Fail(checked.refusal)
        return checked.addresses

    def _raise_if_unresolved(self, host: str) -> None:
        reason = self._unresolved.get(host)
        if reason is not None:
            self.stats["unresolved_skips"] += 1
            raise _Fail(f"{reason} {EARLIER}")

    # -- robots.txt --------------------------------------------------------------------------------
    async def _robots_allow(self, scheme: str, host: str, port: int, url: str) -> bool:
        key = origin(scheme, host, port)
        if key not in self._robots:
            lock = self._robots_locks.setdefault(key, asyncio.Lock())
            async with lock:  # concurrent first requests to a host wait for one robots.txt fetch
                if key not in self._robots:
                    self.stats["robots_fetched"] += 1
                    self._robots[key] = await load_robots(key, self._robots_hop)
                    return self._robots[key].allows(self._agent, url)
            self._raise_if_unresolved(host.lower())  # waited for another URL whose robots.txt found no such name
        return self._robots[key].allows(self._agent, url)

    async def _robots_hop(self, url: str) -> RobotsAnswer | str:
        """One robots.txt request with the checks of any other hop; why it failed when no answer came."""
        try:
            _scheme, host, port = self._check_url(url)
            await self._check_host(host, port)
            exchange = await self._request(url, {}, robots=True)
        except _Fail as fail:
            return fail.reason
        location = header_dict(exchange.headers).get("location")
        return RobotsAnswer(exchange.status, exchange.reason, location, exchange.body, exchange.attempts)

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
                problem = f"timed out after {format_seconds(c.timeout)}"
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                problem = describe_network_error(exc, url)
                if problem.startswith(DNS_FAILED):  # resolved before, not now: the host's other URLs fail fast
                    self._unresolved.setdefault((urlsplit(url).hostname or "").lower(), problem)
                if problem.startswith((DNS_FAILED, "TLS")):
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
                        f"{format_seconds(wait)} (over the {format_seconds(c.max_retry_after)} limit)",
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
                    self.stats["responses"] += 1
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
            except (httpx.RemoteProtocolError, UnicodeError) as exc:
                # httpx parses a Location even when it does not follow it; a bad one is the server's
                # answer, not a dropped connection, and would come again: never retried.
                if is_bad_location(exc):
                    raise _Fail(bad_location(None, exc)) from None
                raise
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
