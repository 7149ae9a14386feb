"""Text is data everywhere (issue 19, item 3): what a document or a user gave is printed literally.

A title holding rich markup (``[/bold]``, ``[link=…]…[/link]``, ``[pdf]``) or a terminal escape
sequence must reach the terminal as the characters it is made of: no MarkupError traceback, no
clickable OSC 8 hyperlink, no vanished words, no escape sequence obeyed. And a URL that is not http(s)
(``javascript:``, ``data:``, ``file:``) is never offered as a link: not in BibTeX, not as a record's url.

Two small real homes: one built by ``dmlqa add`` of a JSON Lines file and an offline ``dmlqa build``
(search, ask, related, cites, status, BibTeX), one written with a citation graph whose documents and
references carry the same titles (cites, cited-by, suggest). The CLI runs in process with its consoles
forced to a wide colour terminal, so rich would emit hyperlinks and styles if it were told to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rebuild_fixtures import build_json, make_home, page_markdown, write_archive
from rich.console import Console
from typer.testing import CliRunner

from dmlqa.app import render
from dmlqa.app.cli import app
from dmlqa.app.ui_render import link, safe_url
from dmlqa.catalog.local import parse_record
from dmlqa.index.embed import embed_texts
from dmlqa.index.versions import dense_text, publish, write_version
from dmlqa.models import Block, Chunk, Document, Reference, is_linkable
from dmlqa.pipeline.graph import citation_graph
from dmlqa.query.bibtex import to_bibtex
from dmlqa.query.relatedness import Related

BOLD = "Pipeline stalls [/bold] explained"
LINK = "[link=https://evil.example/]GPipe[/link]"
TAGS = "Ring allreduce [pdf] [blog]"
#: an OSC 8 hyperlink written into the title itself: rich passes ESC through unless it is replaced
ESC_TITLE = "Trap \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ here"
ESC_SHOWN = "Trap \u241b]8;;https://evil.example/\u241b\\click\u241b]8;;\u241b\\ here"
OSC8 = "\x1b]8;"
BAD_URLS = ("javascript:alert(document.cookie)", "data:text/html,<script>alert(1)</script>", "file:///etc/passwd",
            "vbscript:msgbox(1)", "JavaScript:alert(1)")

RECORDS = [
    {"id": "stalls[/bold]", "title": BOLD, "url": BAD_URLS[0], "year": 2020,
     "text": "Pipeline stalls happen when a stage waits for activations; the idle time is the pipeline bubble."},
    {"id": "gpipe", "title": LINK, "url": BAD_URLS[1], "year": 2019,
     "text": "GPipe splits each mini-batch into micro-batches so that pipeline stages overlap their work."},
    {"id": "ring", "title": TAGS, "url": "https://example.org/ring", "year": 2017,
     "text": "Ring allreduce passes gradient chunks around a ring of workers so every link carries equal data."},
    {"id": "trap", "title": ESC_TITLE, "url": BAD_URLS[2], "year": 2021,
     "text": "Terminal escape sequences in titles must be shown, never obeyed by the reader's terminal emulator."},
    # a bad record whose reason quotes the value: the reason is printed by add and by status
    {"id": "badyear", "title": "x", "text": "t", "year": "[/bold]"},
]


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture()
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's consoles as a wide colour terminal: links would come out as OSC 8, markup as styles."""
    monkeypatch.setattr(render, "out", Console(force_terminal=True, width=200, soft_wrap=True,
                                                color_system="truecolor"))
    monkeypatch.setattr(render, "err", Console(stderr=True, force_terminal=True, width=200, soft_wrap=True,
                                                color_system="truecolor"))


def run(*args: str) -> Run:
    # catch_exceptions=False: a MarkupError must fail the test as the traceback a user would see
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def assert_literal(output: str, *titles: str) -> None:
    for title in titles:
        assert title in output, f"{title!r} not printed literally in:\n{output}"
    assert OSC8 not in output, f"a terminal hyperlink was printed:\n{output!r}"


# -- a home built from a JSON Lines file ------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """A home with the records added (``dmlqa add`` output kept) and built offline beside one web page."""
    tmp = tmp_path_factory.mktemp("markup")
    root = tmp / "home"
    make_home(root, ["zero"])
    archive = write_archive(tmp / "archive", {"zero": page_markdown("zero")})
    src = tmp / "records.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(render, "err", Console(stderr=True, force_terminal=True, width=200, soft_wrap=True))
        added = run("--home", str(root), "add", str(src))
    assert added.code == 0, added.err
    build_json(root, archive)
    return root, added


def test_add_prints_a_bad_records_reason_literally(built: tuple[Path, Run]) -> None:
    _, added = built
    assert_literal(added.err, 'record badyear: bad "year" "[/bold]"')


@pytest.mark.parametrize(("query", "title"), [
    ("pipeline stalls idle stage bubble", BOLD),
    ("GPipe micro-batches overlap pipeline stages", LINK),
    ("ring allreduce gradient chunks workers", TAGS),
    ("terminal escape sequences in titles", ESC_SHOWN),
])
def test_search_prints_titles_literally(built: tuple[Path, Run], terminal: None, query: str, title: str) -> None:
    root, _ = built
    res = run("--home", str(root), "search", query, "-k", "5")
    assert res.code == 0, res.err
    assert_literal(res.out, title)
    assert "\x1b]8;;https://evil.example/" not in res.out and "\x1b\\click" not in res.out


def test_ask_sources_and_related_print_titles_literally(built: tuple[Path, Run], terminal: None) -> None:
    root, _ = built
    res = run("--home", str(root), "ask", "What is the pipeline bubble when stages stall?", "--no-llm")
    assert res.code == 0, res.err
    assert_literal(res.out, BOLD)
    res = run("--home", str(root), "related", "gpipe", "-k", "10")
    assert res.code == 0, res.err
    # the table's title names the target; its rows the others (folded cells: compare without breaks)
    assert_literal(res.out, "Related to gpipe")
    flat = "".join(line.strip() for line in res.out.splitlines())
    for title in (BOLD, TAGS):
        assert title.replace(" ", "") in flat.replace(" ", "").replace("│", ""), res.out


def test_cites_heads_print_the_target_literally(built: tuple[Path, Run], terminal: None) -> None:
    root, _ = built
    for cmd in ("cites", "cited-by"):
        res = run("--home", str(root), cmd, "stalls[/bold]")
        assert res.code == 0, res.err
        assert_literal(res.out, BOLD)


def test_status_prints_doc_ids_and_reasons_literally(built: tuple[Path, Run], terminal: None) -> None:
    root, _ = built
    res = run("--home", str(root), "status")
    assert res.code == 0, res.err
    flat = res.out.replace("│", "").replace("\n", "").replace(" ", "")
    assert "+stalls[/bold]" in flat, res.out  # the run history names what a run added
    assert OSC8 not in res.out
    res = run("--home", str(root), "status", "--failures")
    assert res.code == 0, res.err
    assert_literal(res.out, 'record badyear: bad "year" "[/bold]"')


def test_records_with_code_urls_keep_no_url(built: tuple[Path, Run], terminal: None) -> None:
    root, _ = built
    res = run("--home", str(root), "search", "pipeline stalls idle stage bubble", "-k", "5", "--json")
    shown = {h["doc_id"]: h["url"] for h in json.loads(res.out)}
    assert shown["stalls[/bold]"] == "records.jsonl#stalls[/bold]"
    assert not any(u.lower().startswith(("javascript:", "data:", "file:")) for u in shown.values()), shown
    res = run("--home", str(root), "related", "ring", "-k", "10", "--format", "bibtex")
    assert res.code == 0, res.err
    assert "@" in res.out and "javascript" not in res.out.lower() and "data:" not in res.out, res.out
    assert "url = {https://example.org/ring}" not in res.out  # the target itself is no related item


# -- a home with a citation graph ---------------------------------------------------------------------


@dataclass(frozen=True)
class Parsed:
    """Stands in for dmlqa.extract.references.ParsedReferences (same fields)."""

    references: tuple[Reference, ...] = ()
    contexts: dict[int, str] = field(default_factory=dict)
    skipped: int = 0


def paper(doc_id: str, title: str, text: str, year: int) -> Document:
    return Document(doc_id=doc_id, url=f"https://example.org/{doc_id}", title=title, blocks=(Block(text=text),),
                    content_type="pdf", kind="paper", year=year)


CITED_TWICE = "Adam [/bold] [link=https://evil.example/]optimizer[/link] [pdf] \x1b[2J"
GRAPH_DOCS = [
    paper("p-link", LINK, "GPipe pipelines micro-batches across accelerators.", 2019),
    paper("p-bold", BOLD, "Stalls in a pipeline leave stages idle waiting for activations.", 2020),
    paper("p-tags", TAGS, "Ring allreduce shares gradient chunks between workers.", 2021),
]
PARSED = {
    "p-bold": Parsed((Reference(raw=LINK, ordinal=1, title=LINK, year=2019, marker="1"),
                      Reference(raw=CITED_TWICE, ordinal=2, title=CITED_TWICE, year=2015, marker="2")),
                     {1: "As [link=https://evil.example/]GPipe[/link] [1] shows, [/bold] bubbles cost time."}),
    "p-tags": Parsed((Reference(raw=LINK, ordinal=1, title=LINK, year=2019, marker="1"),
                      Reference(raw=CITED_TWICE, ordinal=2, title=CITED_TWICE, year=2015, marker="2")), {}),
}


@pytest.fixture(scope="module")
def graph_home(tmp_path_factory: pytest.TempPathFactory, encoder) -> Path:  # noqa: ANN001
    home = tmp_path_factory.mktemp("markup-graph")
    assert run("--home", str(home), "init").code == 0
    graph = citation_graph(GRAPH_DOCS, parse=lambda d: PARSED.get(d.doc_id, Parsed()))
    chunks = [Chunk(chunk_id=f"{d.doc_id}#0", doc_id=d.doc_id, url=d.url, title=d.title, text=d.blocks[0].text,
                    end=len(d.blocks[0].text)) for d in GRAPH_DOCS]
    vecs = embed_texts([dense_text(c.title, c.section, c.text) for c in chunks], encoder).vectors
    meta = {"model": "bundled:all-MiniLM-L6-v2", "encoder": "onnx-int8", "encoder_key": encoder.key}
    publish(home / "index", write_version(home / "index", GRAPH_DOCS, chunks, vecs, meta, ann_threshold=1000,
                                          citations=graph.rows()))
    return home


def test_cites_cited_by_and_suggest_tables_print_literally(graph_home: Path, terminal: None) -> None:
    res = run("--home", str(graph_home), "cited-by", "p-link")
    assert res.code == 0, res.err
    assert_literal(res.out, f"Cited by {LINK} (2019): 2")
    flat = res.out.replace("│", "").replace("\n", "").replace(" ", "")
    assert BOLD.replace(" ", "") in flat and TAGS.replace(" ", "") in flat, res.out
    assert "[/bold]bubblescosttime" in flat, res.out  # the citing sentence
    res = run("--home", str(graph_home), "cites", "p-bold")
    assert res.code == 0, res.err
    assert_literal(res.out, f"Cites {BOLD} (2020): 1")
    res = run("--home", str(graph_home), "suggest")
    assert res.code == 0, res.err
    flat = res.out.replace("│", "").replace("\n", "").replace(" ", "")
    shown = CITED_TWICE.replace("\x1b", "\u241b").replace(" ", "")  # ESC [2J would clear the screen
    assert shown in flat and OSC8 not in res.out and "\x1b[2J" not in res.out, res.out


# -- the one rule for links ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", [*BAD_URLS, "https://", "http:///path", "https://exa mple.org/", "//example.org/x",
                                 "https://example.org/\x1b]8;;", "www.example.org/x", "", "local/notes.md"])
def test_only_http_urls_with_a_host_are_links(url: str) -> None:
    assert not is_linkable(url)
    assert safe_url(url) is None and "<a " not in link(url, "t")


def test_http_urls_are_links() -> None:
    for url in ("https://arxiv.org/abs/1811.06965", "HTTP://example.org", " http://[::1]:8080/x "):
        assert is_linkable(url)
    assert link("https://arxiv.org/abs/1", "t").startswith('<a href="https://arxiv.org/abs/1"')


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_record_with_a_code_url_keeps_none_and_bibtex_names_none(url: str) -> None:
    doc = parse_record({"id": "r1", "text": "t", "title": "T", "url": url}, "r.jsonl")
    assert not isinstance(doc, str) and doc.url == "r.jsonl#r1" and doc.link == "r.jsonl#r1"
    item = Related(doc_id="r1", title="T", url=url, score=1.0, reason="", kind="article")
    bib = to_bibtex([item])
    assert "url" not in bib and url.split(":")[0].lower() not in bib.lower(), bib
