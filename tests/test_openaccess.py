"""Open copies of paywalled papers, against local servers that answer as arXiv and OpenAlex do.

Three real HTTP servers on 127.0.0.1 (tests/httpserver.py): ``web`` plays the publisher, OpenAlex
(``/works/doi:…``) and a repository holding PDFs; ``api`` plays the arXiv API (``/api/query``);
``arxiv`` plays arxiv.org itself, reached through a transport that sends requests for that host to
it, so the fetcher still sees and archives ``https://arxiv.org/pdf/<id>``. The answers follow the
documented formats: an OpenAlex Work object (``best_oa_location`` {is_oa, landing_page_url,
pdf_url, …}, ``open_access.oa_url``) and the arXiv API's Atom 1.0 feed (``<entry><id>
http://arxiv.org/abs/ID</id><title>…</title><link title="pdf" …/>``, errors as an entry under
``/api/errors``). Nothing here touches the network.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fixtures_docs import build_pdf
from httpserver import LocalServer, Reply, SeenRequest
from warcio.archiveiterator import ArchiveIterator

from dmlqa.acquire.archive import ArchiveReplay, ArchiveWriter
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.manifest import Manifest
from dmlqa.acquire.openaccess import (
    openalex_locations,
    paper_hints,
    parse_arxiv_feed,
    title_key,
    titles_match,
)
from dmlqa.acquire.pacing import ARXIV_API_INTERVAL, min_interval, set_min_interval
from dmlqa.acquire.pagemeta import page_meta, url_doi
from dmlqa.acquire.resolve import Resolved, fetch_resource
from dmlqa.acquire.robots import RobotsPolicy
from dmlqa.errors import FetchError
from dmlqa.settings import FetchConfig, Settings

TITLE = "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
WRAPPED = "ZeRO: Memory Optimizations Toward Training Trillion\n  Parameter Models"  # as arXiv wraps it
GPIPE = "GPipe: Efficient Training of Giant Neural Networks"
OTHER = "ZeRO-Offload: Democratizing Billion-Scale Model Training"
AID = "1910.02054"
DOI = "10.1145/3341301.3359646"
PDF = build_pdf([f"{TITLE}. Large deep learning models offer significant accuracy gains."])
FAST = 0.05  # the arXiv API interval in tests that are not about it


# -- the servers ------------------------------------------------------------------------------------


class ToLocal(httpx.AsyncBaseTransport):
    """Sends requests for the named hosts to a local server; the fetcher keeps the real URL."""

    def __init__(self, hosts: dict[str, LocalServer]) -> None:
        self.hosts = hosts
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        server = self.hosts.get(request.url.host)
        if server is not None:
            request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=server.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def web() -> Any:
    s = LocalServer()
    yield s
    s.close()


@pytest.fixture
def api() -> Any:
    s = LocalServer()
    yield s
    s.close()


@pytest.fixture
def arxiv() -> Any:
    s = LocalServer()
    s.route(f"/pdf/{AID}", Reply(200, body=PDF, content_type="application/pdf"))
    yield s
    s.close()


def config(web: LocalServer, api: LocalServer, **changes: Any) -> FetchConfig:
    base: dict[str, Any] = {
        "allow_private_hosts": True, "timeout": 60.0, "retries": 0, "backoff": 0.01,  # a busy machine is slow
        "openalex_api": web.url(""), "arxiv_api": api.url("/api/query"),
    }
    base.update(changes)
    return FetchConfig(**base)


def landing(*, meta: str = "", body: str = "") -> bytes:
    """A publisher landing page with Highwire tags but no PDF link (the PDF is behind the paywall)."""
    return (
        f'<!DOCTYPE html><html><head><title>{TITLE} | Proceedings</title>'
        f'<meta name="citation_title" content="{TITLE}">{meta}</head>'
        f"<body><h1>{TITLE}</h1><p>Abstract: we develop ZeRO.</p>{body}</body></html>"
    ).encode()


def work(*, pdf_url: str | None = None, landing_url: str | None = None, oa_url: str | None = None) -> bytes:
    """An OpenAlex Work object (the fields this code reads, and some it does not)."""
    best = None
    if pdf_url or landing_url:
        best = {"is_oa": True, "landing_page_url": landing_url, "pdf_url": pdf_url, "license": "cc-by",
                "version": "submittedVersion", "is_accepted": False, "is_published": False,
                "source": {"display_name": "arXiv (Cornell University)", "type": "repository"}}
    primary = {"is_oa": False, "landing_page_url": f"https://doi.org/{DOI}", "pdf_url": None,
               "source": {"display_name": "Proceedings", "type": "conference"}}
    return json.dumps({
        "id": "https://openalex.org/W2981540061", "doi": f"https://doi.org/{DOI}", "title": TITLE,
        "display_name": TITLE, "publication_year": 2020, "type": "article", "primary_location": primary,
        "locations": [primary] + ([best] if best else []), "best_oa_location": best,
        "open_access": {"is_oa": best is not None, "oa_status": "green" if best else "closed",
                        "oa_url": oa_url, "any_repository_has_fulltext": best is not None},
    }).encode()


def feed(*entries: tuple[str, str]) -> bytes:
    """An arXiv API answer: an Atom feed with OpenSearch counts and one <entry> per (id, title)."""
    items = "".join(
        f"""
  <entry>
    <id>http://arxiv.org/abs/{ident}v3</id>
    <updated>2020-05-13T01:00:43Z</updated>
    <published>2019-10-04T17:29:39Z</published>
    <title>{title}</title>
    <summary>  Large deep learning models offer significant accuracy gains.</summary>
    <author><name>Samyam Rajbhandari</name></author>
    <arxiv:comment xmlns:arxiv="http://arxiv.org/schemas/atom">SC20</arxiv:comment>
    <link href="http://arxiv.org/abs/{ident}v3" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/{ident}v3" rel="related" type="application/pdf"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.LG"
      scheme="http://arxiv.org/schemas/atom"/>
  </entry>"""
        for ident, title in entries
    )
    os = 'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"'
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query?search_query%3Dti&amp;max_results%3D3" rel="self"
    type="application/atom+xml"/>
  <title type="html">ArXiv Query: search_query=ti&amp;id_list=&amp;start=0&amp;max_results=3</title>
  <id>http://arxiv.org/api/vbx0pQcp2sFtXmbpwN6Ai4GHNmM</id>
  <updated>2024-01-01T00:00:00-05:00</updated>
  <opensearch:totalResults {os}>{len(entries)}</opensearch:totalResults>
  <opensearch:startIndex {os}>0</opensearch:startIndex>
  <opensearch:itemsPerPage {os}>3</opensearch:itemsPerPage>{items}
</feed>""".encode()


ERROR_FEED = b"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title type="html">ArXiv Query: search_query=&amp;id_list=1234</title>
  <id>http://arxiv.org/api/abc</id>
  <entry>
    <id>http://arxiv.org/api/errors#incorrect_id_format_for_1234</id>
    <title>Error</title>
    <summary>incorrect id format for 1234</summary>
  </entry>
</feed>"""


def as_json(body: bytes) -> Reply:
    return Reply(200, body=body, content_type="application/json")


def atom(body: bytes) -> Reply:
    return Reply(200, body=body, content_type="application/atom+xml; charset=UTF-8")


def api_calls(api: LocalServer) -> list[SeenRequest]:
    """The arXiv API requests the server saw (robots.txt aside), in order."""
    return [r for r in api.requests if urlsplit(r.path).path == "/api/query"]


def query(request: SeenRequest) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(request.path).query).items()}


def resolve(
    cfg: FetchConfig, url: str, arxiv: LocalServer, *, interval: float = FAST, **kwargs: Any
) -> Resolved:
    async def go() -> Resolved:
        async with Fetcher(cfg, transport=ToLocal({"arxiv.org": arxiv}), **kwargs.pop("fetcher", {})) as fetcher:
            set_min_interval(fetcher, cfg.arxiv_api, interval)
            return await fetch_resource(fetcher, url, **kwargs)

    return asyncio.run(go())


def openalex_path(doi: str = DOI) -> str:
    return f"/works/doi:{doi}"


# -- each route ---------------------------------------------------------------------------------------


def test_arxiv_id_from_the_landing_page(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route("/doi/abs/1", Reply(200, body=landing(meta=f'<meta name="citation_arxiv_id" content="{AID}v3">')))
    got = resolve(config(web, api), web.url("/doi/abs/1"), arxiv)
    assert got.open_copy is not None
    assert (got.open_copy.source, got.open_copy.ident, got.open_copy.via) == ("arxiv", AID, "landing page")
    assert got.document.url == f"https://arxiv.org/pdf/{AID}" and got.document.body == PDF
    assert got.document.content_type == "application/pdf"
    assert got.landing is not None and b"Abstract: we develop ZeRO." in got.landing.body  # kept as fallback
    assert got.notes[-1] == f"open copy via arXiv {AID} (landing page): https://arxiv.org/pdf/{AID}"
    assert api.requests == []  # a known id needs no look-up


def test_arxiv_id_from_the_catalog_and_from_the_caller(
    web: LocalServer, api: LocalServer, arxiv: LocalServer
) -> None:
    web.route("/paper", Reply(200, body=landing()))
    web.route("/paywalled", Reply(403, body=b"<html><body>Subscribe</body></html>"))
    cfg = config(web, api)
    # The listed page answers first, so the resolver never reached the arXiv alias on its own.
    by_alias = resolve(cfg, web.url("/paper"), arxiv, aliases=[f"https://arxiv.org/abs/{AID}v2"])
    assert by_alias.open_copy is not None and by_alias.open_copy.via == "catalog"
    by_caller = resolve(cfg, web.url("/paywalled"), arxiv, kind="paper", known_arxiv_ids=[f"arXiv:{AID}v3"])
    assert by_caller.open_copy is not None and by_caller.open_copy.via == "known id"
    assert by_caller.landing is None and by_caller.document.body == PDF
    assert by_caller.notes[0] == f"{web.url('/paywalled')} failed: HTTP 403 Forbidden"


def test_openalex_best_oa_location_by_doi(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route(f"/doi/{DOI}", Reply(403, body=b"<html><body>Access denied</body></html>"))
    web.route(openalex_path(), as_json(work(pdf_url=web.url("/repo/zero.pdf"))))
    web.route("/repo/zero.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    got = resolve(config(web, api), web.url(f"/doi/{DOI}"), arxiv, title=TITLE)
    assert got.open_copy is not None
    copy = got.open_copy
    assert (copy.source, copy.ident, copy.via) == ("openalex", DOI, "OpenAlex best_oa_location")
    assert got.document.final_url == web.url("/repo/zero.pdf") and got.document.body == PDF
    assert got.notes[-1] == f"open copy via OpenAlex best_oa_location for DOI {DOI}: {web.url('/repo/zero.pdf')}"
    assert api.requests == []  # OpenAlex answered: no title search


@pytest.mark.parametrize("status", [401, 402, 451, "robots"])
def test_any_refusal_of_the_publisher_page_leads_to_the_open_copy(
    web: LocalServer, api: LocalServer, arxiv: LocalServer, status: int | str
) -> None:
    if status == "robots":
        web.route("/robots.txt", Reply(200, body=b"User-agent: *\nDisallow: /doi/\n", content_type="text/plain"))
    else:
        web.route(f"/doi/{DOI}", Reply(int(status)))
    web.route(openalex_path(), as_json(work(pdf_url=web.url("/repo/zero.pdf"))))
    web.route("/repo/zero.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    got = resolve(config(web, api), web.url(f"/doi/{DOI}"), arxiv)
    assert got.open_copy is not None and got.open_copy.source == "openalex"
    assert got.notes[0].startswith(f"{web.url(f'/doi/{DOI}')} failed: ")
    assert web.hits(f"/doi/{DOI}") == (0 if status == "robots" else 1)


def test_openalex_oa_url_landing_page_leads_to_its_pdf(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    """A repository landing page as the only open location: its citation_pdf_url is followed."""
    web.route("/abs", Reply(200, body=landing(meta=f'<meta name="citation_doi" content="{DOI}">')))
    web.route(openalex_path(), as_json(work(oa_url=web.url("/repo/item/7"))))
    item = b'<html><head><meta name="citation_pdf_url" content="7.pdf"></head></html>'
    web.route("/repo/item/7", Reply(200, body=item))
    web.route("/repo/item/7.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    got = resolve(config(web, api), web.url("/abs"), arxiv, interval=10.0)  # no arXiv request may happen
    assert got.open_copy is not None and got.open_copy.via == "OpenAlex open_access.oa_url"
    assert got.document.final_url == web.url("/repo/item/7.pdf")


def test_arxiv_api_by_title(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route("/paper/123", Reply(403))
    api.route("/api/query", atom(feed(("1811.06965", GPIPE), (AID, WRAPPED))))
    got = resolve(config(web, api), web.url("/paper/123"), arxiv, title=TITLE, kind="paper")
    assert got.open_copy is not None
    assert (got.open_copy.source, got.open_copy.ident, got.open_copy.via) == ("arxiv", AID, "arXiv API title search")
    assert got.document.url == f"https://arxiv.org/pdf/{AID}"
    [asked] = api_calls(api)
    assert query(asked) == {"search_query": f'ti:"{title_key(TITLE)}"', "max_results": "3"}
    assert arxiv.hits("/pdf/1811.06965") == 0


def test_linked_arxiv_id_is_taken_only_after_a_title_check(
    web: LocalServer, api: LocalServer, arxiv: LocalServer
) -> None:
    """A landing page links its references' preprints too: only the one with the paper's title counts."""
    links = '<a href="https://arxiv.org/abs/1811.06965">[12] GPipe</a> <a href="https://arxiv.org/abs/1910.02054v1">preprint</a>'
    web.route("/abs", Reply(200, body=landing(body=links)))
    api.route("/api/query", atom(feed(("1811.06965", GPIPE), (AID, TITLE))))
    got = resolve(config(web, api), web.url("/abs"), arxiv)
    assert got.open_copy is not None and (got.open_copy.ident, got.open_copy.via) == (AID, "landing page link")
    [asked] = api_calls(api)
    assert query(asked)["id_list"] == f"1811.06965,{AID}"
    assert arxiv.hits("/pdf/1811.06965") == 0


# -- preference, politeness, switches -----------------------------------------------------------------


def test_order_of_preference(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route(f"/doi/{DOI}", Reply(403))
    web.route("/repo/zero.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    api.route("/api/query", atom(feed((AID, TITLE))))
    web.route(openalex_path(), as_json(work(pdf_url=web.url("/repo/zero.pdf"))))
    cfg = config(web, api)
    url = web.url(f"/doi/{DOI}")

    first = resolve(cfg, url, arxiv, title=TITLE, known_arxiv_ids=[AID])  # 1. a known arXiv id
    assert first.open_copy is not None and first.open_copy.via == "known id"
    assert web.hits(openalex_path()) == 0 and api.requests == []

    second = resolve(cfg, url, arxiv, title=TITLE)  # 2. OpenAlex by DOI before the title search
    assert second.open_copy is not None and second.open_copy.source == "openalex"
    assert web.hits(openalex_path()) == 1 and api.requests == []

    web.route(openalex_path(), Reply(404, body=b'{"error": "not found"}', content_type="application/json"))
    third = resolve(cfg, url, arxiv, title=TITLE)  # 3. the arXiv API by title, last
    assert third.open_copy is not None and third.open_copy.via == "arXiv API title search"
    openalex_at = web.seen(openalex_path())[-1].at
    assert openalex_at < api_calls(api)[0].at


def test_arxiv_api_requests_are_spaced_by_the_interval(
    web: LocalServer, api: LocalServer, arxiv: LocalServer
) -> None:
    for path in ("/a", "/b", "/c"):
        web.route(path, Reply(403))
    api.route("/api/query", atom(feed((AID, TITLE), ("1811.06965", GPIPE))))
    arxiv.route("/pdf/1811.06965", Reply(200, body=PDF, content_type="application/pdf"))
    cfg = config(web, api)
    interval = 0.5

    async def go() -> list[Resolved]:
        async with Fetcher(cfg, transport=ToLocal({"arxiv.org": arxiv})) as fetcher:
            assert min_interval(fetcher, cfg.arxiv_api) == ARXIV_API_INTERVAL == 3.0  # arXiv's terms
            set_min_interval(fetcher, cfg.arxiv_api, interval)
            papers = (("/a", TITLE), ("/b", GPIPE), ("/c", TITLE))  # /c: the same question as /a
            return list(await asyncio.gather(*(
                fetch_resource(fetcher, web.url(p), title=t, kind="paper") for p, t in papers
            )))

    results = asyncio.run(go())
    assert [r.open_copy.ident if r.open_copy else None for r in results] == [AID, "1811.06965", AID]
    times = sorted(r.at for r in api_calls(api))
    assert len(times) == 2 and times[1] - times[0] >= interval  # asked once per title, paced
    assert api.max_in_flight == 1


def test_robots_crawl_delay_spaces_look_ups(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route("/robots.txt", Reply(200, body=b"User-agent: *\nCrawl-delay: 1\n", content_type="text/plain"))
    web.route(f"/doi/{DOI}", Reply(403))
    web.route(openalex_path(), as_json(work(pdf_url=web.url("/repo/zero.pdf"))))
    web.route("/repo/zero.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    got = resolve(config(web, api), web.url(f"/doi/{DOI}"), arxiv)
    assert got.open_copy is not None
    assert web.seen("/repo/zero.pdf")[0].at - web.seen(openalex_path())[0].at >= 1.0


def test_crawl_delay_and_request_rate_from_robots_txt() -> None:
    from protego import Protego

    parser = Protego.parse("User-agent: *\nCrawl-delay: 2\nRequest-rate: 1/5\n\nUser-agent: fast\nCrawl-delay: 1\n")
    assert RobotsPolicy(parser=parser).crawl_delay("dmlqa") == 5.0
    assert RobotsPolicy(parser=parser).crawl_delay("fast") == 1.0
    assert RobotsPolicy(allow_all=True).crawl_delay("dmlqa") is None


def test_open_access_off_asks_nothing(web: LocalServer, api: LocalServer, arxiv: LocalServer) -> None:
    web.route(f"/doi/{DOI}", Reply(403))
    web.route("/abs", Reply(200, body=landing(meta=f'<meta name="citation_arxiv_id" content="{AID}">')))
    cfg = config(web, api, open_access=False)
    with pytest.raises(FetchError) as info:
        resolve(cfg, web.url(f"/doi/{DOI}"), arxiv, title=TITLE, known_arxiv_ids=[AID])
    assert info.value.reason == "HTTP 403 Forbidden"
    page = resolve(cfg, web.url("/abs"), arxiv, title=TITLE)
    assert page.open_copy is None and page.notes == () and page.document.final_url == web.url("/abs")
    assert web.hits(openalex_path()) == 0 and api.requests == [] and arxiv.requests == []
    flat = Settings().with_overrides(open_access=False)
    assert flat.fetch.open_access is False


def test_every_response_is_archived_and_replays_offline(
    web: LocalServer, api: LocalServer, arxiv: LocalServer, tmp_path: Path
) -> None:
    web.route("/paper/9", Reply(403, body=b"<html><body>Subscribe</body></html>"))
    api.route("/api/query", atom(feed((AID, TITLE))))
    cfg = config(web, api)
    with Manifest(tmp_path / "m.sqlite") as manifest, ArchiveWriter(tmp_path / "archive") as writer:
        live = resolve(cfg, web.url("/paper/9"), arxiv, title=TITLE, kind="paper",
                       fetcher={"archive": writer, "manifest": manifest})
        assert manifest.entry(f"https://arxiv.org/pdf/{AID}") is not None
    assert live.open_copy is not None and writer.path is not None
    with writer.path.open("rb") as fh:
        records = [r for r in ArchiveIterator(fh) if r.rec_type == "response"]
        archived = {r.rec_headers.get_header("WARC-Target-URI") for r in records}
    api_url = cfg.arxiv_api + "?" + urlsplit(api_calls(api)[0].path).query
    assert {web.url("/paper/9"), api_url, f"https://arxiv.org/pdf/{AID}"} <= archived
    assert {web.url("/robots.txt"), api.url("/robots.txt"), "https://arxiv.org/robots.txt"} <= archived

    seen = len(web.requests) + len(api.requests) + len(arxiv.requests)
    started = time.monotonic()
    again = resolve(cfg, web.url("/paper/9"), arxiv, interval=120.0, title=TITLE, kind="paper",
                    fetcher={"replay": ArchiveReplay([writer.path]), "offline": True})
    assert time.monotonic() - started < 60  # replay waits for no interval (one would be 120 s; slack for load)
    assert again.open_copy is not None and again.document.from_archive and again.document.body == PDF
    assert len(web.requests) + len(api.requests) + len(arxiv.requests) == seen


def test_offline_without_the_look_ups_in_the_archive_is_quiet(
    web: LocalServer, api: LocalServer, arxiv: LocalServer, tmp_path: Path
) -> None:
    """Offline, look-ups that are not archived fail at once and change nothing in the report."""
    page_url = "https://dl.acm.org/doi/10.1145/3341301.3359646"
    with ArchiveWriter(tmp_path) as writer:
        writer.write(url=page_url, status=200, reason="OK", headers=[("Content-Type", "text/html")],
                     body=landing(), fetched_at="2026-01-01T00:00:00Z")
    assert writer.path is not None
    kwargs: dict[str, Any] = {"title": TITLE, "kind": "paper", "interval": 120.0}
    offline = {"replay": ArchiveReplay([writer.path]), "offline": True}
    started = time.monotonic()
    on = resolve(config(web, api), page_url, arxiv, fetcher=offline, **kwargs)
    off = resolve(config(web, api, open_access=False), page_url, arxiv, fetcher=dict(offline), **kwargs)
    assert time.monotonic() - started < 60  # no 120 s interval waited out (slack for a busy machine)
    assert on == off and on.open_copy is None and on.notes == ()
    with pytest.raises(FetchError) as info:
        resolve(config(web, api), "https://dl.acm.org/doi/10.1/none", arxiv, fetcher={"offline": True}, **kwargs)
    assert info.value.reason == "not in the archive (offline)"


# -- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("openalex", "arxiv_api", "expected"),
    [
        (Reply(404, body=b"{}"), None, f"OpenAlex (DOI {DOI}): not found (HTTP 404)"),
        (Reply(200, body=b'{"id": "https://openalex.org/W1", ', content_type="application/json"), None,
         f"OpenAlex (DOI {DOI}): the answer is not JSON"),
        (Reply(200, body=b"[1, 2]", content_type="application/json"), None, "the answer is not a Work object"),
        (as_json(work()), None, f"OpenAlex (DOI {DOI}): no open-access location"),
        ("paywalled", None, "OpenAlex best_oa_location {web}/pay.pdf: HTTP 403 Forbidden"),
        ("html", None, "OpenAlex best_oa_location {web}/login is text/html, not a PDF"),
        (None, atom(feed()), f"arXiv API: no entry titled {TITLE!r}"),
        (None, atom(feed(("2101.06840", OTHER))), f"arXiv API: no entry titled {TITLE!r} (nearest: {OTHER!r})"),
        (None, atom(ERROR_FEED), "arXiv API title search: arXiv API error: incorrect id format for 1234"),
        (None, Reply(200, body=b"Rate exceeded.", content_type="text/plain"),
         "the answer is not XML ('Rate exceeded.')"),
        (None, atom(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><feed/>'), "declares a DTD"),
        (None, Reply(503), "arXiv API title search: HTTP 503 Service Unavailable"),
    ],
)
def test_bad_answers_end_as_reasons(
    web: LocalServer, api: LocalServer, arxiv: LocalServer, openalex: Any, arxiv_api: Reply | None, expected: str
) -> None:
    doi_meta = f'<meta name="citation_doi" content="{DOI}">' if openalex is not None else ""
    web.route("/abs", Reply(200, body=landing(meta=doi_meta)))
    web.route("/pay.pdf", Reply(403))
    web.route("/login", Reply(200, body=b"<html><body>Please sign in</body></html>"))
    if openalex == "paywalled":
        openalex = as_json(work(pdf_url=web.url("/pay.pdf")))
    elif openalex == "html":
        openalex = as_json(work(pdf_url=web.url("/login")))
    if openalex is not None:
        web.route(openalex_path(), openalex)
    api.route("/api/query", arxiv_api or atom(feed()))
    got = resolve(config(web, api), web.url("/abs"), arxiv)
    assert got.open_copy is None and got.document.final_url == web.url("/abs")
    assert got.notes[-1].startswith("no open copy: ")
    assert expected.format(web=web.url("").rstrip("/")) in got.notes[-1]
    assert arxiv.requests == []


def test_redirect_to_a_private_address_is_refused() -> None:
    """An open location that redirects into the local network is refused like any other hop."""
    publisher, repo = "http://93.184.215.14", "http://93.184.215.15"

    def answer(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if url == f"{publisher}/works/doi:{DOI}":
            body = work(pdf_url=f"{repo}/x.pdf")
            return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})
        if url == f"{repo}/x.pdf":
            return httpx.Response(302, headers={"Location": "http://127.0.0.1:9/x.pdf"})
        if url == f"{publisher}/doi/{DOI}":
            return httpx.Response(200, content=landing(), headers={"Content-Type": "text/html"})
        return httpx.Response(404)

    cfg = FetchConfig(timeout=2.0, retries=0, openalex_api=publisher, arxiv_api=f"{publisher}/api/query")

    async def go() -> Resolved:
        async with Fetcher(cfg, transport=httpx.MockTransport(answer)) as fetcher:
            set_min_interval(fetcher, cfg.arxiv_api, FAST)
            return await fetch_resource(fetcher, f"{publisher}/doi/{DOI}")

    got = asyncio.run(go())
    assert got.open_copy is None
    assert f"OpenAlex best_oa_location {repo}/x.pdf: redirected to http://127.0.0.1:9/x.pdf: refused" in got.notes[-1]


# -- the parts ----------------------------------------------------------------------------------------


def test_titles_match_up_to_spelling_only() -> None:
    assert titles_match(TITLE, WRAPPED)
    assert titles_match(TITLE, "ZeRO: memory optimizations towards training trillion-parameter models")
    assert not titles_match(TITLE, OTHER)
    assert not titles_match("ZeRO", "ZeRO")  # too short to name one work
    assert title_key("Ｚｅｒｏ: Mémoire optimisée, vraiment") == "zero memoire optimisee vraiment"


def test_page_meta_reads_what_publishers_tag() -> None:
    html = (
        b'<html><head><base href="https://cdn.site.org/p/">'
        b'<meta name="citation_title" content="  A   Paper  Title ">'
        b'<meta name="DC.Identifier" content="ISBN 978-3-16">'
        b'<meta name="dc.identifier" content="doi:10.1000/XYZ.1.">'
        b'<meta name="citation_arxiv_id" content="arXiv:2101.00001v2">'
        b'<meta name="citation_pdf_url" content="a.pdf"></head><body>'
        b'<a href="https://arxiv.org/abs/2101.00001">self</a><a href="//arxiv.org/pdf/1811.06965v5">ref</a>'
        b"</body></html>"
    )
    meta = page_meta(html, "https://site.org/x")
    assert meta.pdf_url == "https://cdn.site.org/p/a.pdf" and meta.title == "A Paper Title"
    assert meta.doi == "10.1000/XYZ.1" and meta.arxiv_ids == ("2101.00001",)
    assert meta.linked_arxiv_ids == ("1811.06965",) and meta.scholarly
    assert not page_meta(b"\xff\xfe<html>", "https://site.org/").scholarly
    springer = "https://link.springer.com/article/10.1007/s11227-021-03.pdf?ref=10.2/x"
    assert url_doi(springer) == "10.1007/s11227-021-03.pdf"
    assert url_doi("https://example.org/blog/post") is None


def test_hints_from_catalog_caller_and_page() -> None:
    meta = page_meta(landing(meta=f'<meta name="citation_doi" content="{DOI}">'), "https://pub.org/abs")
    hints = paper_hints(["https://pub.org/abs", f"https://arxiv.org/abs/{AID}v2"], title="pub.org/abs",
                        known_arxiv_ids=["bogus", "1811.06965"], meta=meta)
    assert hints.arxiv_ids == ((AID, "catalog"), ("1811.06965", "known id"))
    assert hints.doi == DOI and hints.titles == (TITLE,)  # a URL spelled as a title is none
    assert hints.search_arxiv is False  # it is on arXiv already: a title search finds the same copy


def test_formats_parse_as_documented() -> None:
    [entry] = parse_arxiv_feed(feed((AID, WRAPPED)))
    assert (entry.ident, entry.title, entry.pdf_url) == (AID, TITLE, f"http://arxiv.org/pdf/{AID}v3")
    assert parse_arxiv_feed(feed()) == []
    body = work(pdf_url="https://arxiv.org/pdf/1910.02054v3", landing_url="https://arxiv.org/abs/1910.02054",
                oa_url="https://arxiv.org/pdf/1910.02054v3")
    assert openalex_locations(body) == [
        ("https://arxiv.org/pdf/1910.02054v3", "OpenAlex best_oa_location"),
        ("https://arxiv.org/abs/1910.02054", "OpenAlex best_oa_location landing page"),
    ]
    with pytest.raises(ValueError, match="not JSON"):
        openalex_locations(b"\xff")
