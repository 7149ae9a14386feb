"""``dmlqa show``, the app's archived view ``/source/<doc_id>`` and the MCP ``show`` tool, over a real home.

The home is built once per module by a real ``dmlqa build`` against a real HTTP server on 127.0.0.1:
a three-page PDF and an HTML page (one of them hostile: markup and console markup in its title and
text). The server is closed before anything is shown, so every read below comes from the home's own
archive (WARC + documents store), as it must offline. Expectations come from the fixture texts.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from fixtures_docs import build_pdf, html_page, prose
from httpserver import LocalServer, Reply
from test_mcp import _serve_stdio
from typer.testing import CliRunner

import dmlqa
from dmlqa.app.cli import app
from dmlqa.catalog.store import write_catalog
from dmlqa.models import Citation, Resource, view_path
from dmlqa.query.show import locate, render_page

runner = CliRunner()

PAGE2 = ("The bubble overhead is amortised when the number of micro-batches is at least four times the number "
         "of stages. ")
PAGES = ["GPipe: pipeline parallelism. " + prose(8, seed=2), PAGE2 + prose(8, seed=3),
         "Conclusion. " + prose(5, seed=4)]
HOSTILE_TITLE = 'Evil <script>alert(1)</script> [bold]docs[/bold]'
HOSTILE_LINE = "Run <script>alert(2)</script> and <img src=x onerror=alert(3)> before ring allreduce starts."
DOCS_QUOTE = "Tensor Fusion batches small allreduce operations into one larger buffer"
DOCS = html_page(HOSTILE_TITLE, [("Fusion", [DOCS_QUOTE + " to cut latency. " + prose(6, seed=5)]),
                                 ("Setup", [HOSTILE_LINE + " " + prose(4, seed=6)])])


def dmlqa_cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("show")
    server = LocalServer()
    server.route("/robots.txt", Reply(404, body=b""))
    server.route("/gpipe.pdf", Reply(200, body=build_pdf(PAGES), content_type="application/pdf"))
    server.route("/fusion.html", Reply(200, body=DOCS.encode(), content_type="text/html; charset=utf-8"))
    try:
        kb = dmlqa.KnowledgeBase(root / "kb", create=True, allow_private_hosts=True)
        write_catalog(kb.settings.catalog_path, [
            Resource(id="web:gpipe", url=server.url("/gpipe.pdf"), title="GPipe", kind="paper", year=2019),
            Resource(id="web:fusion", url=server.url("/fusion.html"), title="Tensor Fusion", kind="docs")])
        report = kb.build()
        assert report.documents == 2, report
    finally:
        server.close()  # everything below reads the home's archive alone
    return kb.home


def _ids(home: Path) -> tuple[str, str]:
    docs = dmlqa.KnowledgeBase(home).documents()
    pdf = next(d.doc_id for d in docs.values() if d.content_type == "pdf")
    html = next(d.doc_id for d in docs.values() if d.content_type == "html")
    return pdf, html


# -- locating a quote ------------------------------------------------------------------------------------


def test_quotes_are_found_through_hyphenation_spacing_case_and_quote_marks() -> None:
    text = "We fill the pipe-\nline with micro-batches; the “bubble”   shrinks.\n\nSee the ﬁgure."
    for quote, expected in [("fill the pipeline with micro-batches", "fill the pipe-\nline with micro-batches"),
                            ('the "bubble" SHRINKS.', "the “bubble”   shrinks"),
                            ("pipeline … bubble", "pipe-\nline with micro-batches; the “bubble"),
                            ("see the figure", "See the ﬁgure")]:
        span = locate(text, quote)
        assert span is not None and text[span[0]:span[1]] == expected, quote
    assert locate(text, "the bubble grows") is None and locate(text, "…") is None


def test_the_page_image_paints_the_quote_and_only_when_it_is_on_the_page() -> None:
    pdf = build_pdf(PAGES)
    plain_page = render_page(pdf, 2)
    assert plain_page is not None and plain_page.startswith(b"\x89PNG")
    assert render_page(pdf, 2, "at least four times the number") != plain_page
    assert render_page(pdf, 2, "a sentence the page does not hold") == plain_page
    assert render_page(pdf, 4) is None and render_page(b"%PDF-1.4 broken", 1) is None


# -- the CLI ---------------------------------------------------------------------------------------------


def test_show_finds_a_quote_on_a_pdf_page_offline(home: Path) -> None:
    pdf, _ = _ids(home)
    res = dmlqa_cli("--home", str(home), "show", pdf, "--page", "2", "--quote", "number of micro batches is AT LEAST "
                    "four times", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"doc_id", "title", "url", "page", "text", "quote_found"}
    assert out["doc_id"] == pdf and out["page"] == 2 and out["quote_found"] is True
    assert out["text"].startswith("The bubble overhead") and "Conclusion" not in out["text"]
    # without --page the quote's own page is shown; named by title, as `related` reads targets
    res = dmlqa_cli("--home", str(home), "show", "GPipe", "--quote", PAGE2.strip(), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["page"] == 2
    # on another page it is not found, and the note says where it is
    res = dmlqa_cli("--home", str(home), "show", pdf, "--page", "1", "--quote", PAGE2.strip(), "--json")
    assert json.loads(res.stdout)["quote_found"] is False and "it is on page 2" in res.stderr


def test_show_an_html_passage_prints_document_text_as_text(home: Path) -> None:
    _, html = _ids(home)
    res = dmlqa_cli("--home", str(home), "show", html, "--quote", DOCS_QUOTE.lower(), "--json")
    out = json.loads(res.stdout)
    assert out["page"] is None and out["quote_found"] is True and DOCS_QUOTE in out["text"]
    assert out["url"].startswith("http://127.0.0.1:")
    table = dmlqa_cli("--home", str(home), "show", html, "--quote", "before ring allreduce")
    assert table.exit_code == 0, table.output
    assert "[bold]docs[/bold]" in table.stdout and "<script>alert(2)</script>" in table.stdout  # never markup


@pytest.mark.parametrize(("args", "message"), [
    (["no such paper at all here"], "names no document"),
    (["GPipe", "--page", "9"], "has pages 1-3: page 9"),
    (["Tensor Fusion", "--page", "1"], "without pages"),
])
def test_show_errors_are_one_line(home: Path, args: list[str], message: str) -> None:
    res = dmlqa_cli("--home", str(home), "show", *args)
    assert res.exit_code != 0 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.output


def test_ask_json_citations_carry_their_view(home: Path) -> None:
    res = dmlqa_cli("--home", str(home), "ask", "When is the bubble overhead amortised?", "--json", "--no-llm")
    assert res.exit_code == 0, res.output
    cites = json.loads(res.stdout)["citations"]
    assert cites and all(c["view"].startswith("/source/") for c in cites)
    c = Citation(1, "https://x.org", "t", 3, "a & b <c>", doc_id="local:a/b c.pdf")
    assert c.to_json()["view"] == "/source/local:a%2Fb%20c.pdf?page=3&q=a+%26+b+%3Cc%3E"


# -- the app's archived view -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(home: Path) -> str:
    from dmlqa.app.ui import serve

    port = _free_port()
    demo = serve(dmlqa.KnowledgeBase(home), host="127.0.0.1", port=port, password="", block=False,
                 say=lambda *_: None)
    yield f"http://127.0.0.1:{port}"
    demo.close()


def test_the_archived_view_renders_the_pdf_page_with_the_quote_marked(home: Path, app_url: str) -> None:
    pdf, _ = _ids(home)
    r = httpx.get(app_url + view_path(pdf, 2, "micro-batches is at least four times"), timeout=120)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none': no script at all
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert re.search(r"<mark[^>]*>micro-batches is at least four times</mark>", r.text)
    png = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', r.text)
    assert png is not None and len(png.group(1)) > 1000
    # the first page shows its own text, and no mark for a quote that is not on it
    first = httpx.get(app_url + view_path(pdf, 1, "four times the number of stages"), timeout=120)
    assert first.status_code == 200 and "GPipe: pipeline parallelism" in first.text and "<mark" not in first.text


def test_the_archived_view_of_a_hostile_page_stays_inert(home: Path, app_url: str) -> None:
    _, html = _ids(home)
    r = httpx.get(app_url + view_path(html, None, "before ring allreduce starts"), timeout=120)
    assert r.status_code == 200
    assert "<script" not in r.text and "<img src=x" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text and "&lt;img src=x onerror=alert(3)&gt;" in r.text
    assert "<mark" in r.text and 'href="http://127.0.0.1:' in r.text  # the original address, linked


@pytest.mark.parametrize("path", ["/source/arxiv:0000.00000", "/source/web:nothing?page=2", "PDF?page=7",
                                  "PDF?page=x", "HTML?page=1"])
def test_unknown_documents_and_pages_are_404_pages(home: Path, app_url: str, path: str) -> None:
    pdf, html = _ids(home)
    path = path.replace("PDF", view_path(pdf)).replace("HTML", view_path(html))
    r = httpx.get(app_url + path, timeout=120)
    assert r.status_code == 404 and "<h1>Not in the knowledge base</h1>" in r.text and "Traceback" not in r.text


# -- MCP -------------------------------------------------------------------------------------------------


def test_mcp_show_returns_the_archived_text(home: Path) -> None:
    pdf, _ = _ids(home)
    results: dict[str, Any] = {}

    async def session(client: Any) -> None:
        results["ok"] = await client.call_tool("show", {"target": pdf, "page": 2, "quote": "at least four times"})
        results["bad"] = await client.call_tool("show", {"target": pdf, "page": 9})

    assert _serve_stdio(home, session) == []
    ok = results["ok"].structured_content
    assert not results["ok"].is_error and ok["quote_found"] is True and ok["page"] == 2
    assert ok["text"].startswith("The bubble overhead") and ok["view"] == view_path(pdf, 2, "at least four times")
    assert results["bad"].is_error and "page 9" in results["bad"].content[0].text
