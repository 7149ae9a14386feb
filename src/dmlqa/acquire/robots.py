"""robots.txt: what the Robots Exclusion Protocol (RFC 9309) lets the fetcher ask of an origin.

Kept apart from the fetcher so the policy reads in one place: how an answer (or no answer) for
``/robots.txt`` becomes a verdict for every URL of its origin. The fetcher supplies the one thing
this module cannot do itself, a checked request for one URL (:data:`RobotsHop`), so robots.txt
requests pass the same scheme, address, retry and size guards as any other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urljoin

from protego import Protego

from dmlqa.acquire.http import ROBOTS_MAX_REDIRECTS, status_text

logger = logging.getLogger(__name__)

UNREACHABLE = "robots.txt unreachable ({}), so everything there counts as disallowed (RFC 9309)"


@dataclass(frozen=True)
class RobotsAnswer:
    """One HTTP answer for a robots.txt URL, as far as the policy needs it."""

    status: int
    reason: str
    location: str | None
    body: bytes
    attempts: int = 1


#: One checked GET of a robots.txt URL: its answer, or why there was none (a reason string).
RobotsHop = Callable[[str], Awaitable["RobotsAnswer | str"]]


@dataclass
class RobotsPolicy:
    """robots.txt of one origin: a parser, or a blanket verdict with the reason for it.

    The parser is protego, not ``urllib.robotparser``: the standard library predates RFC 9309, so it
    reads ``*`` and ``$`` in paths literally and applies the first matching rule where the RFC says
    the longest match wins (and Allow wins a tie), refusing what a site allows and fetching what it
    forbids.
    """

    parser: Protego | None = None
    allow_all: bool = False
    reason: str = "disallowed by robots.txt"

    def allows(self, agent: str, url: str) -> bool:
        if self.parser is not None:
            return self.parser.can_fetch(url, agent)
        return self.allow_all

    def crawl_delay(self, agent: str) -> float | None:
        """Seconds to leave between requests: ``Crawl-delay``, or ``Request-rate`` as seconds per request.

        Neither is in RFC 9309, but many sites (arXiv among them) state one and expect it kept.
        """
        if self.parser is None:
            return None
        delays = []
        delay = self.parser.crawl_delay(agent)
        if delay is not None:
            delays.append(float(delay))
        rate = self.parser.request_rate(agent)
        if rate is not None and rate.requests > 0:
            delays.append(rate.seconds / rate.requests)
        return max(delays) if delays else None


def robots_agent(user_agent: str) -> str:
    """The product token robots.txt groups match on (``dmlqa``), not the whole User-Agent string."""
    return user_agent.split("/", 1)[0].split()[0] if user_agent.strip() else "*"


async def load_robots(origin: str, hop: RobotsHop) -> RobotsPolicy:
    """Fetch and judge ``origin/robots.txt`` following RFC 9309 2.3.1.

    * 2xx: parse it (protego, RFC 9309 matching; the fetcher keeps the first 512 KiB only).
    * 4xx (e.g. 401, 403, 404, 410) "unavailable": everything is allowed.
    * 429, 5xx, or no answer at all after the usual retries "unreachable": RFC 9309 says
      assume complete disallow, so every URL of the origin is refused for the fetcher's
      life (a build run), with the reason saying why (for no answer at all, the network
      reason itself, e.g. "connection refused (4 attempts)"). 429 is treated as
      unreachable, as Google does: it asks us to slow down, it does not say "no file".
    * More than five redirects: "unavailable", so allowed (RFC 9309 2.3.1.2).
    Redirect hops are checked like any other hop (scheme, address) by ``hop``.
    """
    url = f"{origin}/robots.txt"
    for _hop in range(ROBOTS_MAX_REDIRECTS + 1):
        answer = await hop(url)
        if isinstance(answer, str):
            # No HTTP answer at all: the host itself is unreachable, and saying so is clearer
            # than blaming robots.txt. Still "disallow" for the run, so a dead host costs one
            # round of retries, not one per URL.
            logger.info("robots.txt %s: %s", url, answer)
            return RobotsPolicy(reason=answer)
        status = answer.status
        if 300 <= status < 400:
            if not answer.location:
                return RobotsPolicy(allow_all=True)
            url = urljoin(url, answer.location)
            continue
        if 200 <= status < 300:
            # utf-8-sig: a leading byte-order mark would otherwise hide the first line's directive.
            return RobotsPolicy(parser=Protego.parse(answer.body.decode("utf-8-sig", errors="replace")))
        if 400 <= status < 500 and status != 429:
            return RobotsPolicy(allow_all=True)
        text = status_text(status, answer.reason)
        if answer.attempts > 1:
            text += f" after {answer.attempts} attempts"
        return RobotsPolicy(reason=UNREACHABLE.format(text))
    return RobotsPolicy(allow_all=True)
