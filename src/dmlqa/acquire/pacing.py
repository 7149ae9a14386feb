"""Per-host pacing: a minimum interval between requests to one host, on top of the fetcher's limits.

The fetcher's politeness is bounded concurrency, which suits fetching a list's documents. Look-up
APIs ask for more: arXiv's terms allow one request every three seconds on one connection, and some
sites state a ``Crawl-delay`` in robots.txt. :func:`paced_fetch` keeps both for the requests that go
through it (the open-access look-ups of :mod:`dmlqa.acquire.openaccess`): requests to one host wait
in turn, and the next starts at least the host's interval after the previous one *ended*, which is
never less polite than counting from its start.

Pacing is per :class:`~dmlqa.acquire.fetch.Fetcher` (one build run), kept beside it rather than in
it so the fetcher's own request path is unchanged. Replayed answers, offline runs and hosts whose name
did not resolve earlier in the build (:meth:`~dmlqa.acquire.fetch.Fetcher.unresolvable`) use no
network, so they wait for nothing.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.http import format_seconds
from dmlqa.errors import FetchError
from dmlqa.models import FetchResult

#: arXiv API terms of use: "no more than one request every three seconds".
ARXIV_API_INTERVAL = 3.0


@dataclass
class _Pacer:
    intervals: dict[str, float] = field(default_factory=dict)  # host key -> seconds, set by callers
    next_at: dict[str, float] = field(default_factory=dict)  # host key -> monotonic time of the next start
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)


_PACERS: weakref.WeakKeyDictionary[Fetcher, _Pacer] = weakref.WeakKeyDictionary()


def host_key(url: str) -> str:
    """``host:port`` of a URL, lower-case: what one interval applies to (a test's two local servers differ)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return url
    return f"{(parts.hostname or '').lower()}:{port}"


def _pacer(fetcher: Fetcher) -> _Pacer:
    pacer = _PACERS.get(fetcher)
    if pacer is None:
        pacer = _PACERS[fetcher] = _Pacer()
        pacer.intervals[host_key(fetcher.config.arxiv_api)] = ARXIV_API_INTERVAL
    return pacer


def set_min_interval(fetcher: Fetcher, url: str, seconds: float) -> None:
    """Leave at least ``seconds`` between two paced requests of ``fetcher`` to ``url``'s host.

    The arXiv API host (``fetch.arxiv_api``) starts at :data:`ARXIV_API_INTERVAL`; tests that point
    it at a local server set a shorter interval here so they stay fast.
    """
    _pacer(fetcher).intervals[host_key(url)] = max(0.0, float(seconds))


def min_interval(fetcher: Fetcher, url: str) -> float:
    """Seconds between paced requests to ``url``'s host: the set interval or robots.txt's delay, the longer."""
    pacer = _pacer(fetcher)
    return max(pacer.intervals.get(host_key(url), 0.0), fetcher.crawl_delay(url) or 0.0)


async def paced_fetch(fetcher: Fetcher, url: str, *, conditional: bool = True) -> FetchResult:
    """:meth:`Fetcher.fetch`, waiting first until ``url``'s host may be asked again.

    A robots.txt delay longer than ``fetch.max_retry_after`` is not waited out: the request is refused
    with a :class:`FetchError` saying so, as an over-long ``Retry-After`` is.
    """
    if fetcher.offline or fetcher.unresolvable(url):  # no request can leave: nothing to wait for
        return await fetcher.fetch(url, conditional=conditional)
    pacer = _pacer(fetcher)
    key = host_key(url)
    lock = pacer.locks.setdefault(key, asyncio.Lock())
    async with lock:  # one request at a time per host, as arXiv asks
        if fetcher.unresolvable(url):  # the request before this one found the name does not resolve
            return await fetcher.fetch(url, conditional=conditional)
        delay = min_interval(fetcher, url)
        cap = fetcher.config.max_retry_after
        if delay > cap:
            raise FetchError(
                url, f"robots.txt asks for {format_seconds(delay)} between requests "
                f"(over the {format_seconds(cap)} limit)"
            )
        wait = pacer.next_at.get(key, 0.0) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        used_network = True
        try:
            result = await fetcher.fetch(url, conditional=conditional)
            used_network = not result.from_archive
            return result
        finally:
            # A failure may have reached the host too: count it; a name that did not resolve reached nobody.
            if used_network and not fetcher.unresolvable(url):
                pacer.next_at[key] = time.monotonic() + min_interval(fetcher, url)
