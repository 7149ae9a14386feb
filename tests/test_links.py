"""Links that open (issue 18, item 2): every URL a user is shown is the address its text came from.

The canonical URL (https, no ``www.``) is the identity copies merge on; a server may not answer it at
all. So a hit, a citation, a related item, a citation-graph item, a BibTeX ``url``, the MCP tools and
the app show where the text was fetched (the final URL after redirects), or, for a catalog card, the
address as the list wrote it. Two real builds, as a user makes them: a markdown list of plain
``http://127.0.0.1`` links against a real HTTP server (a page, a redirect, a dead link), and a list of
``www.`` hosts and an arXiv + proceedings pair replayed offline from a WARC written here (no test can
serve a ``www.`` host or arxiv.org for real). What each test expects comes from the list and the
server, never from the product's output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures_docs import build_pdf, html_page, landing_page, prose
from httpserver import LocalServer, Reply
from typer.testing import CliRunner

import dmlqa
from dmlqa.acquire.archive import ArchiveWriter
from dmlqa.app.cli import app
from dmlqa.app.ui_chat import api_answer, make_filters
from dmlqa.app.ui_service import ChatService
from dmlqa.catalog.urls import canonicalize
from dmlqa.models import Block, Document, shown_url
from dmlqa.pipeline.works import merge_works
from dmlqa.settings import load_settings

runner = CliRunner()


def cli(home: Path, *args: str) -> Any:
    result = runner.invoke(app, ["--home", str(home), *args])
    assert result.exit_code == 0, result.output
    return result


def urls_in(value: Any) -> list[str]:
    """Every ``"url"`` value anywhere in a JSON document."""
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "url" and isinstance(v, str)] + [
            u for v in value.values() for u in urls_in(v)]
    if isinstance(value, list):
        return [u for v in value for u in urls_in(v)]
    return []


# -- the rule ------------------------------------------------------------------------------------------


def test_the_link_is_where_the_text_came_from_and_the_identity_only_without_an_address() -> None:
    fetched = Document("web:a", "https://dmtk.io", "DMTK", (Block("x"),), source_url="http://www.dmtk.io/")
    assert fetched.link == "http://www.dmtk.io/"
    # a JSON Lines record's source is its place in its file, no address: its own url is shown
    record = Document("r1", "https://example.org/r1", "R", (Block("x"),), source_url="records.jsonl#r1")
    assert record.link == "https://example.org/r1"
    assert shown_url("https://example.org/x", "") == "https://example.org/x"


def test_a_merged_away_entry_is_reported_under_the_address_its_list_wrote() -> None:
    """The build report names a duplicate by its catalog entry as listed, not by its identity."""
    listed = "http://www.Example.org/Papers/zero.html"
    identity = canonicalize(listed)
    assert identity != listed
    text = (Block("ZeRO partitions optimizer states."),)
    survivor = Document("arxiv:1910.02054", "https://arxiv.org/abs/1910.02054", "ZeRO", text,
                        source_url="https://arxiv.org/pdf/1910.02054", kind="paper", sha256="s",
                        aliases=("https://arxiv.org/abs/1910.02054",))
    copy = Document("web:example.org/papers/zero.html", identity, "ZeRO", text,
                    source_url="https://arxiv.org/pdf/1910.02054", kind="paper", sha256="s", aliases=(identity, listed))
    merged, dups = merge_works([copy, survivor])
    assert [d.doc_id for d in merged] == ["arxiv:1910.02054"]
    assert dups[0].url == listed and identity not in dups[0].reason


# -- a live build: http on 127.0.0.1, a redirect, a dead link ------------------------------------------

FUSION = ("Tensor Fusion batches many small allreduce operations into one buffer of 128 MB before it "
          "sends them over the network. ")
TIMELINE = ("The Horovod timeline records every collective operation of each worker, so a slow "
            "reduction shows up as a long bar. ")
GONE_TITLE = "Gradient checkpointing trades recomputation for activation memory"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LocalServer]:
    server = LocalServer()
    server.route("/robots.txt", Reply(404, body=b""))
    server.route("/guide.html", Reply(200, body=html_page("Fusion guide", [("Fusion", [FUSION + prose(5)])]).encode()))
    server.route("/old/timeline.html", Reply(301, headers=[("Location", "/new/timeline.html")]))
    server.route("/new/timeline.html", Reply(200, body=html_page(
        "Horovod timeline", [("Timeline", [TIMELINE + prose(5, seed=1)])]).encode()))
    server.route("/gone", Reply(404, body=b"gone"))
    root = tmp_path_factory.mktemp("links-live")
    listing = root / "awesome.md"
    listing.write_text(
        "# Live links\n\n## Guides\n\n"
        f"- [Fusion guide]({server.url('/guide.html')})\n"
        f"- [Horovod timeline]({server.url('/old/timeline.html')})\n"
        f"- [{GONE_TITLE}]({server.url('/gone')})\n",
        encoding="utf-8",
    )
    home = root / "kb"
    cli(home, "init")
    cli(home, "catalog", "import", str(listing))
    build = runner.invoke(app, ["--home", str(home), "build", "--json", "--allow-private-hosts"])
    assert build.exit_code == 0, build.output
    assert "https://127.0.0.1" not in build.stdout  # failures and duplicates: addresses as listed
    yield home, server
    server.close()


def test_http_pages_redirects_and_cards_link_to_their_addresses(live: tuple[Path, LocalServer]) -> None:
    home, server = live
    page, moved, gone = server.url("/guide.html"), server.url("/new/timeline.html"), server.url("/gone")
    assert page.startswith("http://127.0.0.1:")  # the identity would be https://127.0.0.1:..., which nothing serves
    kb = dmlqa.KnowledgeBase(home)
    hit = kb.search("small allreduce operations fused into one buffer", k=1)[0]
    assert hit.title == "Fusion guide" and hit.url == page
    hit = kb.search("timeline of collective operations per worker", k=1)[0]
    assert hit.title == "Horovod timeline" and hit.url == moved  # the final URL after the redirect
    card = next(h for h in kb.search(GONE_TITLE, k=5) if h.is_card)
    assert card.url == gone and f"URL: {gone}" in card.text  # the card's own text names the address too

    answer = kb.ask("How large is the Tensor Fusion buffer?")
    assert not answer.refused and answer.citations
    assert {c.url for c in answer.citations} <= {page, moved, gone} and page in {c.url for c in answer.citations}
    related = kb.related(page, k=5)
    assert related.items and {i.url for i in related.items} <= {moved, gone}
    assert f"url = {{{moved}}}" in kb.bibtex(related.items) or f"\\url{{{moved}}}" in kb.bibtex(related.items)

    # The CLI's JSON (what scripts read) and the status say the same.
    for args in (("search", "Horovod timeline fusion buffer", "-k", "10", "--json"),
                 ("ask", "How large is the Tensor Fusion buffer?", "--json"),
                 ("related", page, "--format", "json"), ("status", "--json")):
        out = cli(home, *args).stdout
        assert "https://127.0.0.1" not in out, args
        assert all(u.startswith(server.url("/")) for u in urls_in(json.loads(out))), args
    bib = cli(home, "related", page, "--format", "bibtex").stdout
    assert moved in bib and "https://127.0.0.1" not in bib


def test_the_app_links_to_the_fetched_addresses(live: tuple[Path, LocalServer]) -> None:
    home, server = live
    service = ChatService(load_settings(home))
    body = api_answer(service, "How large is the Tensor Fusion buffer?", use_llm=False)
    assert "error" not in body and body["citations"]
    assert server.url("/guide.html") in {c["url"] for c in body["citations"]}
    html = "".join(service.stream_html("How large is the Tensor Fusion buffer?", make_filters()[0], use_llm=False))
    assert f'href="{server.url("/guide.html")}"' in html and "https://127.0.0.1" not in html
    rows, table = service.related_rows(server.url("/guide.html"))
    assert rows and "https://127.0.0.1" not in table and f'href="{server.url("/guide.html")}"' in table


# -- an offline build: www. hosts and an arXiv + proceedings pair, from a WARC ------------------------------

DMTK = "http://www.dmtk-example.io/"
TITLE_A = "Gradient Sharding With Elastic Pipeline Stages For Giant Models"
TITLE_B = "Hierarchical Parameter Servers For Sparse Embedding Tables At Scale"
ARXIV_A, ARXIV_B = "https://arxiv.org/abs/2004.12345", "https://arxiv.org/abs/2004.54321"
PROC = "https://www.mlsys-example.org/paper/2020"
LANDING_A, PDF_A = f"{PROC}/hash/aaa-Abstract.html", f"{PROC}/file/aaa-Paper.pdf"
LANDING_B, PDF_B = f"{PROC}/hash/bbb-Abstract.html", f"{PROC}/file/bbb-Paper.pdf"
ARXIV_ONLY = "Elastic stages regroup pipeline layers whenever a worker joins the job. "
PROC_ONLY = "The camera-ready version measures the regrouping on sixty-four accelerators. "
SPARSE = "Sparse embedding tables are sharded over a hierarchy of host memory and solid state drives. "
CITING = "Its pipeline follows elastic stages [1]. "


def _warc(directory: Path) -> Path:
    pdf = "application/pdf"
    records = [
        (DMTK, "text/html; charset=utf-8", html_page("DMTK", [("About", [
            "The distributed machine learning toolkit trains topic models with a parameter server. " + prose(5)])])
         .encode()),
        ("https://arxiv.org/pdf/2004.12345", pdf, build_pdf([ARXIV_ONLY + prose(8, seed=2), prose(8, seed=3)])),
        (LANDING_A, "text/html; charset=utf-8", landing_page(TITLE_A, "We shard gradients.", PDF_A).encode()),
        (PDF_A, pdf, build_pdf([PROC_ONLY + prose(8, seed=4), prose(8, seed=5)])),
        # paper B: arXiv has no copy in the archive (a card), the proceedings one has the text
        (LANDING_B, "text/html; charset=utf-8", landing_page(TITLE_B, "We shard embeddings.", PDF_B).encode()),
        (PDF_B, pdf, build_pdf([SPARSE + CITING + prose(8, seed=6), prose(6, seed=7),
                                "References\n[1] A. Author and B. Author. " + TITLE_A + ". arXiv:2004.12345, 2020.\n"
                                "[2] C. Author. Some unrelated work on compilers. In PLDI, 2019.\n"])),
    ]
    with ArchiveWriter(directory) as writer:
        for url, ctype, body in records:
            writer.write(url=url, status=200, reason="OK", headers=[("Content-Type", ctype)], body=body,
                         fetched_at="2026-03-01T10:00:00Z")
        assert writer.path is not None
        return writer.path


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("links-warc")
    warc = _warc(root)
    listing = root / "list.md"
    listing.write_text(
        "# Offline links\n\n## Tools\n\n"
        f"- [DMTK]({DMTK})\n\n"
        "## Papers\n\n"
        f"- [{TITLE_A}]({ARXIV_A})\n- [{TITLE_A}]({LANDING_A})\n"
        f"- [{TITLE_B}]({ARXIV_B})\n- [{TITLE_B}]({LANDING_B})\n",
        encoding="utf-8",
    )
    home = root / "kb"
    cli(home, "init")
    cli(home, "catalog", "import", str(listing))
    catalog = [json.loads(x) for x in (home / "corpus" / "catalog.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in catalog if r["title"] in (TITLE_A, TITLE_B)} == {"paper"}
    assert canonicalize(DMTK) != DMTK and canonicalize(LANDING_B) != LANDING_B  # identities differ from addresses
    result = runner.invoke(app, ["--home", str(home), "build", "--archive", str(warc), "--offline", "--json"])
    assert result.exit_code == 0, result.output
    return home, json.loads(result.stdout)


def test_www_hosts_and_merged_copies_link_to_the_copy_whose_text_is_used(archived: tuple[Path, dict]) -> None:
    home, report = archived
    # Two merges: A's proceedings copy into arXiv (both have text), B's arXiv card into its proceedings text.
    assert {d["url"] for d in report["duplicates"]} == {LANDING_A, ARXIV_B}
    kb = dmlqa.KnowledgeBase(home)
    assert kb.search("parameter server toolkit for topic models", k=1)[0].url == DMTK  # http and www. kept
    a = kb.search("elastic stages regroup pipeline layers when a worker joins", k=1)[0]
    assert a.title == TITLE_A and a.url == "https://arxiv.org/pdf/2004.12345"  # arXiv's text, arXiv's PDF
    assert not any(PROC_ONLY.strip(". ") in h.text for h in kb.search(PROC_ONLY, k=10))  # one text per work
    b = kb.search("embedding tables sharded over host memory and SSDs", k=1)[0]
    assert b.title == TITLE_B and b.url == PDF_B and b.page == 1  # the proceedings' text, at its www. address

    related = kb.related(TITLE_B, k=5)
    assert {i.url for i in related.items} <= {DMTK, "https://arxiv.org/pdf/2004.12345"} and related.items
    bib = kb.bibtex(related.items)
    assert DMTK in bib and "dmtk-example.io/}" in bib and "https://dmtk-example.io" not in bib

    cited_by = kb.cited_by(ARXIV_A)
    assert [i.url for i in cited_by.items] == [PDF_B]  # B cites A: shown at B's address
    cites = kb.cites(LANDING_B)
    assert cites.target.url == PDF_B and [i.url for i in cites.items] == ["https://arxiv.org/pdf/2004.12345"]
    out = cli(home, "cited-by", ARXIV_A, "--json").stdout
    assert PDF_B in out and "https://mlsys-example.org" not in out


def test_eval_still_matches_gold_urls_that_name_the_work(archived: tuple[Path, dict], tmp_path: Path) -> None:
    """A question set names works as lists do (a landing page); the answer shows the PDF it quotes."""
    home, _ = archived
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "b", "question": "Where are the sparse embedding tables sharded?",
                                     "gold_urls": [LANDING_B]}) + "\n", encoding="utf-8")
    answer = dmlqa.KnowledgeBase(home).ask("Where are the sparse embedding tables sharded?")
    assert answer.citations and answer.citations[0].url == PDF_B  # not the gold URL's spelling
    scores = dmlqa.KnowledgeBase(home).evaluate(questions, llm=False)
    assert scores["recall@1"] == 1.0 and scores["citation_hit_rate"] == 1.0


def test_mcp_tools_show_the_fetched_addresses(archived: tuple[Path, dict]) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    home, _ = archived
    command = [sys.executable, "-m", "dmlqa.app.cli", "--home", str(home), "mcp"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    results: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(180):
            async with Client(params, read_timeout_seconds=120) as client:
                results["search"] = await client.call_tool("search", {"query": "sparse embedding tables", "k": 5})
                results["ask"] = await client.call_tool("ask", {"question": "Where are the embedding tables sharded?"})
                results["related"] = await client.call_tool("related", {"target": TITLE_B, "k": 5})
                results["cites"] = await client.call_tool("cites", {"target": LANDING_B})

    anyio.run(main)
    for name, result in results.items():
        assert not result.is_error, name
        found = urls_in(result.structured_content)
        assert found, name
        assert set(found) <= {DMTK, PDF_B, "https://arxiv.org/pdf/2004.12345"}, (name, found)
    assert PDF_B in urls_in(results["search"].structured_content)
