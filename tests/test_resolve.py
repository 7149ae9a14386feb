"""Resolvers: candidate URLs, citation_pdf_url, and fetch_resource's fallbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpserver import LocalServer, Reply

from dmlqa.acquire.archive import ArchiveReplay, ArchiveWriter
from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.manifest import Manifest
from dmlqa.acquire.resolve import Resolved, candidate_urls, citation_pdf_url, fetch_resource
from dmlqa.catalog.urls import arxiv_id
from dmlqa.errors import FetchError
from dmlqa.settings import FetchConfig

PDF = b"%PDF-1.5\n1 0 obj\n<<>>\nendobj\n%%EOF\n"


def config(**changes: Any) -> FetchConfig:
    # A generous timeout: with no retries, a slow answer from a busy machine would fail the test.
    base: dict[str, Any] = {"allow_private_hosts": True, "timeout": 60.0, "retries": 0, "backoff": 0.01}
    base.update(changes)
    return FetchConfig(**base)


def landing(pdf_href: str | None, abstract: str = "We present a thing.") -> bytes:
    meta = f'<meta name="citation_pdf_url" content="{pdf_href}">' if pdf_href else ""
    return (
        f"<!DOCTYPE html><html><head><title>Paper</title>{meta}</head>"
        f"<body><h1>Paper</h1><p>{abstract}</p></body></html>"
    ).encode()


def resolve_with(fetcher_kwargs: dict[str, Any], url: str, cfg: FetchConfig | None = None) -> Resolved:
    async def go() -> Resolved:
        async with Fetcher(cfg or config(), **fetcher_kwargs) as fetcher:
            return await fetch_resource(fetcher, url)

    return asyncio.run(go())


@pytest.fixture
def server() -> Any:
    s = LocalServer()
    yield s
    s.close()


# -- candidate_urls -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "pdf"),
    [
        ("https://arxiv.org/abs/1811.06965", "https://arxiv.org/pdf/1811.06965"),
        ("http://arxiv.org/abs/1811.06965", "https://arxiv.org/pdf/1811.06965"),
        ("https://arxiv.org/abs/2405.07719v5", "https://arxiv.org/pdf/2405.07719"),
        ("https://www.arxiv.org/abs/2006.09503v3/", "https://arxiv.org/pdf/2006.09503"),
        ("https://arxiv.org/pdf/2207.10551v1", "https://arxiv.org/pdf/2207.10551"),
        ("https://arxiv.org/pdf/1910.02054v3.pdf", "https://arxiv.org/pdf/1910.02054"),
        ("https://export.arxiv.org/abs/cs/0112017v1", "https://arxiv.org/pdf/cs/0112017"),
        ("https://arxiv.org/abs/math.GT/0309136", "https://arxiv.org/pdf/math.GT/0309136"),
        ("https://openreview.net/forum?id=qrwe7XHTmYb", "https://openreview.net/pdf?id=qrwe7XHTmYb"),
        (
            "https://github.com/NVIDIA/Megatron-LM",
            "https://raw.githubusercontent.com/NVIDIA/Megatron-LM/HEAD/README.md",
        ),
        (
            "https://github.com/horovod/horovod/",
            "https://raw.githubusercontent.com/horovod/horovod/HEAD/README.md",
        ),
        ("https://github.com/o/r.git", "https://raw.githubusercontent.com/o/r/HEAD/README.md"),
        (
            "https://github.com/NVIDIA/Megatron-LM/blob/main/docs/user-guide/parallelism-guide.md",
            "https://raw.githubusercontent.com/NVIDIA/Megatron-LM/main/docs/user-guide/parallelism-guide.md",
        ),
    ],
)
def test_resolved_url_first_original_last(url: str, pdf: str) -> None:
    assert candidate_urls(url) == [pdf, url]


@pytest.mark.parametrize(
    "url",
    [
        "https://arxiv.org/pdf/1811.06965",  # already the resolved form: no duplicate
        "https://openreview.net/pdf?id=abc",
        "https://doi.org/10.1145/3341301.3359646",  # followed by redirects, then citation_pdf_url
        "https://dl.acm.org/doi/10.1145/3341301.3359646",
        "https://github.com/topics/distributed",
        "https://github.com/NVIDIA",
        "https://github.com/o/r/blob/main/train.py",
        "https://arxiv.org/list/cs.DC/recent",
        "https://www.deepspeed.ai/tutorials/zero/",
    ],
)
def test_urls_without_a_rule_are_tried_as_they_are(url: str) -> None:
    assert candidate_urls(url) == [url]


def test_arxiv_id() -> None:
    assert arxiv_id("https://arxiv.org/abs/2405.07719v5") == "2405.07719"
    assert arxiv_id("https://example.org/abs/2405.07719") is None
    assert arxiv_id("https://arxiv.org/abs/not-an-id") is None


# -- citation_pdf_url -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "base", "expected"),
    [
        (
            landing("https://dl.acm.org/doi/pdf/10.1/x"),
            "https://dl.acm.org/doi/10.1/x",
            "https://dl.acm.org/doi/pdf/10.1/x",
        ),
        (
            landing("/system/files/a.pdf"),
            "https://www.usenix.org/conference/p",
            "https://www.usenix.org/system/files/a.pdf",
        ),
        (landing("files/a.pdf"), "https://site.org/paper/abs.html", "https://site.org/paper/files/a.pdf"),
        (landing("../pdf/a.pdf#page=2"), "https://site.org/paper/abs.html", "https://site.org/pdf/a.pdf"),
        (
            b'<html><head><base href="https://cdn.site.org/p/">'
            b'<META CONTENT="a.pdf" NAME="Citation_PDF_URL">',
            "https://site.org/",
            "https://cdn.site.org/p/a.pdf",
        ),
        (
            b'<meta property="citation_pdf_url" content="https://x.org/1.pdf">'
            b'<meta name="citation_pdf_url" content="https://x.org/2.pdf">',
            "https://x.org/",
            "https://x.org/1.pdf",
        ),
        (landing(None), "https://site.org/", None),
        (landing("javascript:alert(1)"), "https://site.org/", None),
        (b"\xff\xfe not html at all", "https://site.org/", None),
    ],
)
def test_citation_pdf_url(html: bytes, base: str, expected: str | None) -> None:
    assert citation_pdf_url(html, base) == expected


# -- fetch_resource over the local server ---------------------------------------------------------


def test_landing_page_leads_to_its_pdf(server: LocalServer) -> None:
    server.route("/paper", Reply(200, body=landing("files/paper.pdf")))
    server.route("/files/paper.pdf", Reply(200, body=PDF, content_type="application/octet-stream"))
    resolved = resolve_with({}, server.url("/paper"))
    assert resolved.url == server.url("/paper")
    assert resolved.document.final_url == server.url("/files/paper.pdf")
    assert resolved.document.content_type == "application/pdf"
    assert resolved.landing is not None and b"We present a thing." in resolved.landing.body
    assert resolved.notes == ()


def test_landing_page_whose_pdf_is_missing_is_the_document(server: LocalServer) -> None:
    server.route("/paper", Reply(200, body=landing("/gone.pdf")))
    server.route("/gone.pdf", Reply(404))
    resolved = resolve_with({}, server.url("/paper"))
    assert resolved.document.final_url == server.url("/paper")
    assert b"We present a thing." in resolved.document.body
    assert resolved.landing is None
    assert resolved.notes == (
        f"citation_pdf_url {server.url('/gone.pdf')} failed: HTTP 404 Not Found; using the landing page",
    )


def test_citation_pdf_url_that_is_not_a_pdf(server: LocalServer) -> None:
    server.route("/paper", Reply(200, body=landing("/paywall")))
    server.route("/paywall", Reply(200, body=b"<html><body>please log in</body></html>"))
    resolved = resolve_with({}, server.url("/paper"))
    assert resolved.document.final_url == server.url("/paper")
    assert "is text/html, not a PDF" in resolved.notes[0]


def test_redirect_to_landing_page_then_pdf(server: LocalServer) -> None:
    """What a doi.org link does: a redirect to the publisher's landing page."""
    server.route("/10.1145/1", Reply(302, headers=[("Location", "/doi/abs/1")]))
    server.route("/doi/abs/1", Reply(200, body=landing("../pdf/1")))
    server.route("/doi/pdf/1", Reply(200, body=PDF, content_type="application/pdf"))
    resolved = resolve_with({}, server.url("/10.1145/1"))
    assert resolved.document.final_url == server.url("/doi/pdf/1")
    assert resolved.landing is not None and resolved.landing.final_url == server.url("/doi/abs/1")


def test_unchanged_landing_page_still_leads_to_its_pdf(server: LocalServer, tmp_path: Path) -> None:
    """On a rebuild the landing page answers 304: its stored copy still names the PDF."""

    def cached(body: bytes, etag: str, content_type: str) -> Callable[[Any], Reply]:
        def answer(request: Any) -> Reply:
            if request.headers.get("If-None-Match") == etag:
                return Reply(304, headers=[("ETag", etag)])
            return Reply(200, body=body, headers=[("ETag", etag)], content_type=content_type)

        return answer

    server.route("/paper", cached(landing("/p.pdf"), '"l1"', "text/html"))
    server.route("/p.pdf", cached(PDF, '"p1"', "application/pdf"))
    with Manifest(tmp_path / "m.sqlite") as manifest, ArchiveWriter(tmp_path / "archive") as archive:
        first = resolve_with({"manifest": manifest, "archive": archive}, server.url("/paper"))
        second = resolve_with({"manifest": manifest, "archive": archive}, server.url("/paper"))
    assert first.document.body == PDF
    assert second.document.not_modified and second.document.final_url == server.url("/p.pdf")
    assert second.landing is not None and b"We present a thing." in second.landing.body
    assert server.hits("/paper") == 2 and server.hits("/p.pdf") == 2  # no unconditional refetch


# -- fetch_resource with site rules (mock transport: these hosts are not on the local server) ------


def mock(routes: dict[str, tuple[int, bytes, str]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        status, body, content_type = routes.get(str(request.url), (404, b"not found", "text/html"))
        return httpx.Response(status, content=body, headers={"Content-Type": content_type})

    return httpx.MockTransport(handler)


def test_resolved_url_fails_so_the_original_is_fetched() -> None:
    abs_page = b"<html><head><title>arXiv abs</title></head><body>Abstract text</body></html>"
    original = "https://arxiv.org/abs/2101.00001v2"
    transport = mock({original: (200, abs_page, "text/html")})
    resolved = resolve_with({"transport": transport}, original)
    assert resolved.url == resolved.document.final_url == original
    assert resolved.document.body == abs_page
    assert resolved.notes == (
        f"https://arxiv.org/pdf/2101.00001 failed: HTTP 404 Not Found; trying {original}",
    )


def test_github_readme_first_then_repository_page() -> None:
    readme = b"# Project\n\nWhat it does."
    transport = mock(
        {
            "https://raw.githubusercontent.com/o/r/HEAD/README.md": (
                200,
                readme,
                "text/plain; charset=utf-8",
            ),
            "https://github.com/o2/r2": (200, b"<html><body>repo page</body></html>", "text/html"),
        }
    )
    got = resolve_with({"transport": transport}, "https://github.com/o/r")
    assert got.document.final_url == "https://raw.githubusercontent.com/o/r/HEAD/README.md"
    assert got.document.content_type == "text/markdown" and got.document.body == readme
    fallback = resolve_with({"transport": transport}, "https://github.com/o2/r2")
    assert fallback.document.final_url == "https://github.com/o2/r2"
    assert "README.md failed: HTTP 404 Not Found" in fallback.notes[0]


def test_nothing_usable_raises_with_the_original_url_and_best_reason(tmp_path: Path) -> None:
    # Offline, the resolved PDF is "not in the archive", but the archive's 410 for the
    # original says more.
    with ArchiveWriter(tmp_path) as writer:
        writer.write(
            url="https://arxiv.org/abs/2101.00002",
            status=410,
            reason="Gone",
            headers=[],
            body=b"",
            fetched_at="2026-01-01T00:00:00Z",
        )
    assert writer.path is not None
    replay = ArchiveReplay([writer.path])
    with pytest.raises(FetchError) as info:
        resolve_with({"replay": replay, "offline": True}, "https://arxiv.org/abs/2101.00002")
    assert info.value.url == "https://arxiv.org/abs/2101.00002"
    assert info.value.reason == "HTTP 410 Gone" and info.value.status == 410

    with pytest.raises(FetchError) as info:
        resolve_with({"replay": replay, "offline": True}, "https://arxiv.org/abs/2101.00003")
    assert info.value.reason == "not in the archive (offline)"


def test_openreview_pdf_is_not_fetched_twice() -> None:
    forum = "https://openreview.net/forum?id=abc"
    pdf = "https://openreview.net/pdf?id=abc"
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        if str(request.url) == forum:
            return httpx.Response(200, content=landing(pdf), headers={"Content-Type": "text/html"})
        return httpx.Response(503)

    resolved = resolve_with({"transport": httpx.MockTransport(handler)}, forum, config(respect_robots=False))
    assert resolved.document.final_url == forum
    assert asked.count(pdf) == 1
    assert resolved.notes[-1] == (
        f"citation_pdf_url {pdf} failed: HTTP 503 Service Unavailable; using the landing page"
    )


# -- open copies are looked for only for papers (tests/test_openaccess.py has the look-ups) ---------


@pytest.mark.parametrize("kind", ["article", "docs", "repo", "video", "slides"])
def test_a_page_that_is_no_paper_gets_no_open_copy_look_up(server: LocalServer, kind: str) -> None:
    """A blog post that lost its text must not become some paper with the same title."""
    server.route("/post", Reply(403))
    cfg = config(openalex_api=server.url("/openalex"), arxiv_api=server.url("/arxiv-api"))

    async def go() -> Resolved:
        async with Fetcher(cfg) as fetcher:
            return await fetch_resource(
                fetcher, server.url("/post"), title="How we trained a trillion parameter model", kind=kind,
                known_arxiv_ids=["1910.02054"] if kind != "article" else (),
            )

    with pytest.raises(FetchError) as info:
        asyncio.run(go())
    assert info.value.reason == "HTTP 403 Forbidden"
    assert {r.path for r in server.requests} == {"/robots.txt", "/post"}


def test_landing_page_without_paper_facts_is_reported_as_before(server: LocalServer) -> None:
    """A paper's landing page that names no DOI, arXiv id or usable title: nothing to look up by."""
    server.route("/paper", Reply(200, body=landing(None)))
    cfg = config(openalex_api=server.url("/openalex"), arxiv_api=server.url("/arxiv-api"))

    async def go() -> Resolved:
        async with Fetcher(cfg) as fetcher:
            return await fetch_resource(fetcher, server.url("/paper"), title="GPipe", kind="paper")

    resolved = asyncio.run(go())
    assert resolved.document.final_url == server.url("/paper")
    assert resolved.open_copy is None and resolved.notes == () and resolved.landing is None
    assert {r.path for r in server.requests} == {"/robots.txt", "/paper"}


def test_a_pdf_reached_as_listed_carries_no_open_copy(server: LocalServer) -> None:
    server.route("/paper", Reply(200, body=landing("/p.pdf")))
    server.route("/p.pdf", Reply(200, body=PDF, content_type="application/pdf"))
    resolved = resolve_with({}, server.url("/paper"))
    assert resolved.open_copy is None and resolved.document.final_url == server.url("/p.pdf")
