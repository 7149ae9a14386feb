"""robots.txt matching per RFC 9309: wildcards, end anchors, the longest match, Allow on a tie.

The policy is judged on the RFC's own examples (sections 2.2.2, 2.2.3 and 5.1) through
:func:`load_robots`, the function the fetcher uses, so decoding and parsing are the product's; then
once through the real fetcher against a robots.txt served by a local HTTP server. The standard
library's parser fails most of these (it reads ``*`` and ``$`` literally and takes the first match).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

import pytest
from httpserver import LocalServer, Reply

from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.robots import RobotsAnswer, RobotsPolicy, load_robots
from dmlqa.errors import FetchError
from dmlqa.models import FetchResult
from dmlqa.settings import FetchConfig

ORIGIN = "https://example.com"
HTML = b"<!DOCTYPE html><html><head><title>t</title></head><body><p>hello</p></body></html>"


def policy(robots_txt: str | bytes) -> RobotsPolicy:
    """The policy :func:`load_robots` makes of ``robots_txt`` served with status 200."""
    body = robots_txt.encode() if isinstance(robots_txt, str) else robots_txt

    async def hop(url: str) -> RobotsAnswer:
        assert url == f"{ORIGIN}/robots.txt"
        return RobotsAnswer(status=200, reason="OK", location=None, body=body)

    return asyncio.run(load_robots(ORIGIN, hop))


def verdicts(robots_txt: str, agent: str, paths: Iterable[str]) -> dict[str, bool]:
    """Whether ``agent`` may fetch each of ``paths`` under ``robots_txt``."""
    judged = policy(robots_txt)
    return {path: judged.allows(agent, ORIGIN + path) for path in paths}


def test_wildcard_and_end_anchor() -> None:
    """``*`` matches any run of characters; ``$`` ties the pattern to the end of path and query."""
    expected = {
        "/a/draft-1.html": False,
        "/a/b/draft-xy.html": False,  # "*" spans slashes too
        "/a/draft-1.html?x=1": True,  # "$": the query is part of what is matched, so this is not the end
        "/a/draft-1.htmlx": True,
        "/draft-1.html": True,  # the pattern needs a "/" both before and after the first "*"
        "/a/final.html": True,
    }
    assert verdicts("User-agent: *\nDisallow: /*/draft-*.html$\n", "dmlqa", expected) == expected


def test_rfc_special_characters() -> None:
    """RFC 9309 2.2.3: a pattern with ``*`` in the middle, and one anchored with ``$``."""
    rules = "User-agent: *\nDisallow: /\nAllow: /path/file-with-a-*.html\nAllow: /this/path/exactly$\n"
    expected = {
        "/path/file-with-a-b.html": True,
        "/path/file-with-a-.html": True,  # "*" also matches nothing
        "/path/file.html": False,
        "/this/path/exactly": True,
        "/this/path/exactly/not": False,
    }
    assert verdicts(rules, "dmlqa", expected) == expected


def test_longest_match_wins_over_first() -> None:
    """A longer Allow beats a shorter Disallow written before it, and the other way round (RFC 9309 2.2.2)."""
    rules = (
        "User-agent: *\n"
        "Disallow: /private/\nAllow: /private/open-letter.html\n"
        "Allow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    )
    expected = {
        "/private/open-letter.html": True,
        "/private/diary.html": False,
        "/example/page/": True,
        "/example/page/disallowed.gif": False,
    }
    assert verdicts(rules, "dmlqa", expected) == expected


def test_longest_match_counts_wildcards_and_anchors() -> None:
    """Match length is the pattern's length: ``/*.html`` outweighs ``/page``; ``/$`` outweighs ``/``."""
    rules = "User-agent: *\nAllow: /page\nDisallow: /*.html\nAllow: /$\nDisallow: /\n"
    expected = {"/page": True, "/page.html": False, "/": True, "/other": False}
    assert verdicts(rules, "dmlqa", expected) == expected


def test_allow_wins_a_tie() -> None:
    expected = {"/folder": True, "/folder/page": True}
    assert verdicts("User-agent: *\nDisallow: /folder\nAllow: /folder\n", "dmlqa", expected) == expected


def test_rfc_example_groups() -> None:
    """RFC 9309 5.1: one group per agent (the most specific wins), groups shared, empty groups allow all."""
    rules = (
        "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n"
        "User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\n"
        "User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\n"
        "User-Agent: quxbot\n"
    )
    anyone = {
        "/example/page.html": False,
        "/example/allowed.gif": False,
        "/other.gif": False,
        "/publications/x": True,
        "/elsewhere": True,
    }
    assert verdicts(rules, "dmlqa", anyone) == anyone
    foobot = {
        "/example/page.html": True,
        "/example/allowed.gif": True,
        "/other.gif": False,
        "/publications/x": False,
        "/elsewhere": False,
    }
    assert verdicts(rules, "foobot", foobot) == foobot
    for agent in ("barbot", "bazbot"):
        assert verdicts(rules, agent, anyone) == {path: path != "/example/page.html" for path in anyone}
    assert verdicts(rules, "quxbot", anyone) == dict.fromkeys(anyone, True)


def test_percent_encoding_is_matched_both_ways() -> None:
    """RFC 9309 2.2.2: a rule and a URL match whether a character is written as itself or %-encoded."""
    expected = {"/foo/bar/ツ": False, "/%C3%BC/x": False, "/foo/bar/x": True}
    assert verdicts("User-agent: *\nDisallow: /foo/bar/%E3%83%84\nDisallow: /ü\n", "dmlqa", expected) == expected


def test_byte_order_mark_does_not_hide_the_first_line() -> None:
    judged = policy(b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n")
    assert not judged.allows("dmlqa", f"{ORIGIN}/x")
    assert judged.allows("dmlqa", f"{ORIGIN}/y")


# -- through the fetcher --------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[LocalServer]:
    s = LocalServer()
    yield s
    s.close()


def test_fetcher_honours_wildcards_and_longest_match(server: LocalServer) -> None:
    """The real fetcher, a real robots.txt over HTTP: refused URLs are never requested, allowed ones are."""
    server.route(
        "/robots.txt",
        Reply(
            200,
            body=b"User-agent: *\nDisallow: /private/\nAllow: /private/open-letter.html\nDisallow: /*/draft-*.html$\n",
            content_type="text/plain",
        ),
    )
    paths = ["/private/open-letter.html", "/private/diary.html", "/docs/draft-2.html", "/docs/final.html"]
    for path in paths:
        server.route(path, Reply(200, body=HTML))
    # Generous timeouts: nothing here tests time, and a busy machine can be slow to answer.
    cfg = FetchConfig(allow_private_hosts=True, timeout=60.0, retries=0)

    async def go() -> list[FetchResult | BaseException]:
        async with Fetcher(cfg) as fetcher:
            return await asyncio.gather(*(fetcher.fetch(server.url(p)) for p in paths), return_exceptions=True)

    got = dict(zip(paths, asyncio.run(go()), strict=True))
    for path in ("/private/open-letter.html", "/docs/final.html"):
        result = got[path]
        assert isinstance(result, FetchResult) and result.status == 200 and result.body == HTML
        assert server.hits(path) == 1
    for path in ("/private/diary.html", "/docs/draft-2.html"):
        error = got[path]
        assert isinstance(error, FetchError) and error.reason == "disallowed by robots.txt"
        assert error.url == server.url(path)
        assert server.hits(path) == 0
    assert server.hits("/robots.txt") == 1
