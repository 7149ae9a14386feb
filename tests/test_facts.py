"""Facts a document states about itself (year, authors) and year filters that never drop silently.

The first half feeds real bytes (HTML with citation meta tags, PDFs written here with an arXiv stamp,
a copyright or venue line, junk /Author values) through the extractor; the second builds a real home
through the CLI from a local HTTP server (real fetch, extraction, embedding, index) and checks that
the extracted facts reach the index, survive a rebuild, and that ``--since`` says what it left out.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fixtures_docs import build_pdf, html_page, prose
from httpserver import LocalServer, Reply
from pypdf import PdfReader, PdfWriter
from typer.testing import CliRunner

from dmlqa.app.cli import app
from dmlqa.catalog.store import write_catalog
from dmlqa.extract.documents import extract_bytes, to_document
from dmlqa.extract.facts import clean_author, merge_authors, pdf_year, split_authors, valid_year
from dmlqa.extract.text import Extracted
from dmlqa.index.versions import open_current
from dmlqa.models import Block, Resource
from dmlqa.query.search import Filters, allowed_docs, undated_excluded
from dmlqa.settings import load_settings

runner = CliRunner()


def with_info(pdf: bytes, **info: str) -> bytes:
    """``pdf`` with document-information entries (``Author="Copyright"`` → ``/Author (Copyright)``)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.add_metadata({f"/{k}": v for k, v in info.items()})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def page(head: str, body: str = "") -> bytes:
    text = body or prose(8)
    return f"<!DOCTYPE html><html><head><title>T</title>{head}</head><body><article><h1>Title</h1>" \
           f"<p>{text}</p></article></body></html>".encode()


# -- HTML -----------------------------------------------------------------------------------------------


def test_html_citation_meta_gives_year_and_every_author() -> None:
    head = (
        '<meta name="citation_title" content="Reducing Activation Recomputation">'
        '<meta name="citation_author" content="Korthikanti, Vijay">'
        '<meta name="citation_author" content="Jared Casper">'
        '<meta name="citation_author" content="Copyright">'
        '<meta name="citation_author" content="admin@example.org">'
        '<meta name="citation_author" content="Sangkug Lym">'
        '<meta name="citation_publication_date" content="2022/05/10">'
    )
    ex = extract_bytes(page(head), "text/html", url="https://example.org/paper")
    assert ex.year == 2022 and ex.date == "2022/05/10"
    assert ex.authors == ("Vijay Korthikanti", "Jared Casper", "Sangkug Lym")


@pytest.mark.parametrize(("head", "year"), [
    ('<meta name="citation_online_date" content="2021-03-04">', 2021),
    ('<meta name="citation_year" content="2017">', 2017),
    ('<meta name="DC.date.issued" content="2016-11-02">', 2016),
    ('<meta name="dc.date" content="13 May 2020">', 2020),
    ('<meta property="article:published_time" content="2023-08-18T10:00:00+00:00">', 2023),
    ('<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [{"@type": "WebPage"},'
     '{"@type": "ScholarlyArticle", "datePublished": "2018-02-21"}]}</script>', 2018),
    # an unusable first date does not hide a good later one; nonsense years are not years
    ('<meta name="citation_date" content="n.d."><meta name="dc.date" content="2019">', 2019),
    ('<meta name="citation_publication_date" content="3020/01/01">', None),
    ('<meta name="citation_publication_date" content="1492">', None),
])
def test_html_year_sources(head: str, year: int | None) -> None:
    assert extract_bytes(page(head), "text/html", url="https://example.org/p").year == year


def test_html_footer_copyright_is_no_date_and_junk_author_is_no_author() -> None:
    body = html_page("Tensor fusion", [("Fusion", [prose(8)])], head_extra='<meta name="author" content="Copyright">')
    ex = extract_bytes(body.encode(), "text/html", url="https://docs.example.org/fusion")
    assert ex.year is None  # the page furniture says "Copyright 2026 Example Corp."
    assert ex.authors == ()


# -- PDF -------------------------------------------------------------------------------------------------


def test_pdf_arxiv_stamp_gives_the_year_and_copyright_is_not_an_author() -> None:
    pdf = with_info(
        build_pdf([
            "arXiv:1910.02054v3 [cs.LG] 13 May 2020\nZeRO: Memory Optimizations Toward Training Trillion Parameter "
            "Models. " + prose(8),
            "Deep learning models keep growing (Brown et al., 2023). " + prose(8, seed=1),
        ]),
        Author="Copyright", CreationDate="D:20240101000000Z", Producer="pdfTeX-1.40.21",
    )
    ex = extract_bytes(pdf, "application/pdf", url="https://arxiv.org/pdf/1910.02054")
    assert ex.year == 2020  # the stamp, not the creation date
    assert ex.authors == ()


@pytest.mark.parametrize(("first_page", "year"), [
    ("arXiv:2205.05198v1  [cs.LG]  10 May 2022", 2022),
    ("arXiv:1811.06965v5 [cs.CV]", 2018),  # stamp without a readable date: the id's year
    ("Some text.\nSC20, November 9-19, 2020, Atlanta, GA, USA\n", 2020),
    ("33rd Conference on Neural Information Processing Systems (NeurIPS 2019), Vancouver, Canada.", 2019),
    ("ASPLOS ’20, March 16–20, 2020, Lausanne, Switzerland", 2020),
    ("Learning, Honolulu, Hawaii, USA. PMLR 202, 2023. Copyright\n2023 by the author(s).", 2023),
    ("c© 2018 Copyright held by the owner/author(s).", 2018),
    ("As shown at the Conference (Smith et al., 2015), pipelines help.", None),  # a citation
    ("No dates anywhere on this page.", None),
])
def test_pdf_first_page_years(first_page: str, year: int | None) -> None:
    assert pdf_year(first_page) == year


@pytest.mark.parametrize(("created", "producer", "first_page", "year"), [
    ("2019-03-01", "pdfTeX-1.40.21", "We train on ImageNet (2012) and WMT (2018).", 2019),
    ("2019-03-01", "pdfTeX-1.40.21", "", 2019),
    ("2019-03-01", "Skia/PDF m119", "", None),  # printed from a browser: the print date
    ("2025-02-25", "PyPDF2", "ImageNet-2012 and the 2019 results", None),  # years after what the page names
    ("2017-01-01", "pdfTeX", "Results of the 2019 challenge", None),  # the page names a later year
    ("1901-01-01", "pdfTeX", "", None),
])
def test_pdf_creation_date_only_when_plausible(created: str, producer: str, first_page: str,
                                               year: int | None) -> None:
    assert pdf_year(first_page, created=created, producer=producer) == year


def test_pdf_author_field_split_and_cleaned() -> None:
    pdf = with_info(
        build_pdf(["Scaling data parallel training. " + prose(10)]),
        Author="Rajbhandari, Samyam; Rasley, Jeff; Microsoft Word - zero.docx",
    )
    ex = extract_bytes(pdf, "application/octet-stream", url="https://example.org/zero.pdf")
    assert ex.authors == ("Samyam Rajbhandari", "Jeff Rasley")
    assert ex.year is None  # no date on the page and no creation date
    plain = extract_bytes(with_info(build_pdf([prose(10)]), Author="Ada Lovelace, Charles Babbage and Alan Turing"),
                          "application/pdf")
    assert plain.authors == ("Ada Lovelace", "Charles Babbage", "Alan Turing")


@pytest.mark.parametrize(("text", "names"), [
    ("Deepak Narayanan , Aaron Harlap† , Matei Zaharia Microsoft Research †Carnegie Mellon University Stanford",
     ["Deepak Narayanan ", " Aaron Harlap† ",
      " Matei Zaharia Microsoft Research †Carnegie Mellon University Stanford"]),
    ("Smith, John", ["Smith, John"]),
    ("Jeff Rasley, Samyam Rajbhandari, and Yuxiong He", ["Jeff Rasley", " Samyam Rajbhandari", "Yuxiong He"]),
])
def test_split_authors(text: str, names: list[str]) -> None:
    assert split_authors(text) == names


@pytest.mark.parametrize("junk", [
    "Copyright", "Admin", "Administrator", "Unknown", "user", "Windows User", "Microsoft Word - paper.docx",
    "jdoe@example.org", "https://example.org/team", "www.example.org", "Author 2", "J", "A.", "\\textbf{Smith}",
    "$^1$ University", "x" * 61, "jsmith", "© 2021 ACM", "All rights reserved", "",
])
def test_junk_author_strings_are_rejected(junk: str) -> None:
    assert clean_author(junk) is None


@pytest.mark.parametrize(("raw", "clean"), [
    ("Korthikanti, Vijay", "Vijay Korthikanti"), ("Aaron Harlap†", "Aaron Harlap"), ("Zhang~Wei", "Zhang Wei"),
    ("Yanping Huang et al.", "Yanping Huang"), ("NVIDIA", "NVIDIA"), ("Christopher Ré", "Christopher Ré"),
])
def test_author_strings_are_tidied(raw: str, clean: str) -> None:
    assert clean_author(raw) == clean


# -- merging with the catalog ---------------------------------------------------------------------------


GPIPE_ALL = ("Yanping Huang", "Youlong Cheng", "Ankur Bapna", "Orhan Firat")


@pytest.mark.parametrize(("catalog", "extracted", "expected"), [
    (("Yanping Huang",), GPIPE_ALL, GPIPE_ALL),  # the list wrote "Yanping Huang et al."
    (("Y. Huang",), GPIPE_ALL, GPIPE_ALL),
    (("Yanping Huang et al.",), GPIPE_ALL, GPIPE_ALL),
    (("Ankur Bapna", "Yanping Huang"), GPIPE_ALL, GPIPE_ALL),  # a strict superset, in another order
    ((), GPIPE_ALL, GPIPE_ALL),
    (("Yanping Huang",), (), ("Yanping Huang",)),
    (("Someone Else",), GPIPE_ALL, ("Someone Else",)),  # another work's authors (a wrong PDF): keep the list's
    (GPIPE_ALL, ("Yanping Huang", "Youlong Cheng"), GPIPE_ALL),  # shorter: the list's fuller one stays
])
def test_merge_authors(catalog: tuple, extracted: tuple, expected: tuple) -> None:
    assert merge_authors(catalog, extracted) == expected


def test_to_document_takes_year_and_authors_by_the_one_rule() -> None:
    ex = Extracted(blocks=(Block("text", page=1),), content_type="pdf", authors=GPIPE_ALL + ("Copyright",), year=2019)
    undated = Resource(id="a", url="https://arxiv.org/abs/1811.06965", title="GPipe", authors=("Yanping Huang",))
    doc = to_document(undated, ex, source_url=undated.url, sha256="x")
    assert (doc.year, doc.authors) == (2019, GPIPE_ALL)
    dated = Resource(id="a", url="https://arxiv.org/abs/1811.06965", title="GPipe", year=2018)
    assert to_document(dated, ex, source_url=dated.url, sha256="x").year == 2018  # the catalog's wins
    bad = Resource(id="a", url="https://arxiv.org/abs/1811.06965", title="GPipe", year=20190)
    assert to_document(bad, ex, source_url=bad.url, sha256="x").year == 2019
    assert valid_year("2020") == 2020 and valid_year(True) is None and valid_year(10**25) is None


# -- a real home: facts reach the index; year filters report what they leave out --------------------------

STAMPED_PDF = with_info(build_pdf([
    "arXiv:2205.05198v1 [cs.LG] 10 May 2022\nReducing Activation Recomputation in Large Transformer Models. "
    "Selective activation recomputation stores the cheap activations and recomputes only the attention "
    "softmax, so that sequence parallelism and tensor parallelism save memory. " + prose(8),
    "Activation recomputation trades compute for memory during the backward pass. " + prose(8, seed=3),
]), Author="Copyright", Producer="pdfTeX-1.40.21")
CITED_HTML = page(
    '<meta name="citation_author" content="Lovelace, Ada">'
    '<meta name="citation_author" content="Babbage, Charles">'
    '<meta name="citation_author" content="Menabrea, Luigi">'
    '<meta name="citation_publication_date" content="2021/06/01">',
    "Gradient checkpointing recomputes activations in the backward pass to train deeper networks in less "
    "memory. " + prose(8, seed=5),
)
UNDATED_HTML = html_page("Activation checkpointing guide", [("Checkpointing", [
    "Activation checkpointing recomputes activations during the backward pass instead of storing them. "
    + prose(8, seed=7)])])


def catalog(server: LocalServer) -> list[Resource]:
    return [
        Resource(id="web:recompute", url=server.url("/2205.05198.pdf"), title="Reducing Activation Recomputation",
                 kind="paper", topics=("Memory",)),
        Resource(id="web:checkpoint", url=server.url("/checkpointing"), title="Gradient checkpointing",
                 kind="paper", authors=("Ada Lovelace",), topics=("Memory",)),
        Resource(id="web:guide", url=server.url("/guide.html"), title="Activation checkpointing guide",
                 kind="docs", topics=("Memory",)),
        Resource(id="web:old", url=server.url("/old.html"), title="Old pipeline notes", kind="article",
                 year=2016, topics=("Pipelines",)),
    ]


def dmlqa(home: Path, *args: str):  # noqa: ANN201
    return runner.invoke(app, ["--home", str(home), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    server = LocalServer()
    server.route("/robots.txt", Reply(404, body=b""))
    server.route("/2205.05198.pdf", Reply(200, body=STAMPED_PDF, content_type="application/pdf"))
    server.route("/checkpointing", Reply(200, body=CITED_HTML))
    server.route("/guide.html", Reply(200, body=UNDATED_HTML.encode()))
    server.route("/old.html", Reply(200, body=html_page("Old pipeline notes", [("Pipelines", [
        "Pipelines split a model into stages across machines. " + prose(6, seed=9)])]).encode()))
    root = tmp_path_factory.mktemp("facts") / "kb"
    try:
        assert dmlqa(root, "init").exit_code == 0
        write_catalog(root / "corpus" / "catalog.jsonl", catalog(server))
        for _ in range(2):  # the second build reuses the stored documents: their facts must survive
            r = dmlqa(root, "build", "--json", "--allow-private-hosts")
            assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["reused_documents"] == 4
    finally:
        server.close()
    return root


def test_extracted_facts_reach_the_index_and_survive_a_rebuild(home: Path) -> None:
    docs = open_current(load_settings(home).index_dir).docs
    assert docs["web:recompute"].year == 2022 and tuple(docs["web:recompute"].authors) == ()
    assert docs["web:checkpoint"].year == 2021
    assert tuple(docs["web:checkpoint"].authors) == ("Ada Lovelace", "Charles Babbage", "Luigi Menabrea")
    assert docs["web:guide"].year is None and docs["web:old"].year == 2016


def test_undated_excluded_counts_only_what_the_year_alone_drops(home: Path) -> None:
    version = open_current(load_settings(home).index_dir)
    since = Filters(since=2020)
    assert allowed_docs(version, since) == {"web:recompute", "web:checkpoint"}
    assert undated_excluded(version, since) == 1  # the guide; the 2016 notes are dated, not counted
    kept = Filters(since=2020, include_undated=True)
    assert allowed_docs(version, kept) == {"web:recompute", "web:checkpoint", "web:guide"}
    assert undated_excluded(version, kept) == 0
    assert undated_excluded(version, Filters(until=2020)) == 1
    assert undated_excluded(version, Filters(since=2020, kinds=("paper",))) == 0  # the guide is docs anyway
    assert undated_excluded(version, Filters(kinds=("docs",))) == 0  # no year range, nothing to report


NOTE = "note: 1 document of unknown year was left out by --since 2020; add --include-undated to keep them"


@pytest.mark.parametrize("fmt", [(), ("--json",)])
def test_search_says_what_since_left_out(home: Path, fmt: tuple[str, ...]) -> None:
    r = dmlqa(home, "search", "activation recomputation", "--since", "2020", "--per-doc", *fmt)
    assert r.exit_code == 0, r.output
    assert r.stderr.strip().splitlines() == [NOTE]
    if fmt:
        hits = json.loads(r.stdout)  # stdout stays pure JSON of the same shape
        assert isinstance(hits, list) and {h["doc_id"] for h in hits} == {"web:recompute", "web:checkpoint"}
    kept = dmlqa(home, "search", "activation recomputation", "--since", "2020", "--per-doc", "--include-undated",
                 "--json")
    assert kept.exit_code == 0 and "unknown year" not in kept.stderr
    assert "web:guide" in {h["doc_id"] for h in json.loads(kept.stdout)}
    unfiltered = dmlqa(home, "search", "activation recomputation", "--json")
    assert "unknown year" not in unfiltered.stderr


def test_until_note_names_the_flag(home: Path) -> None:
    r = dmlqa(home, "search", "pipelines", "--until", "2021", "--json")
    assert r.exit_code == 0 and r.stderr.strip() == NOTE.replace("--since 2020", "--until 2021")


@pytest.mark.parametrize("fmt", [("--format", "table"), ("--json",), ("--format", "bibtex")])
def test_related_says_what_since_left_out(home: Path, fmt: tuple[str, ...]) -> None:
    r = dmlqa(home, "related", "activation recomputation", "--since", "2020", *fmt)
    assert r.exit_code == 0, r.output
    assert NOTE in r.stderr.splitlines()
    if fmt == ("--json",):
        res = json.loads(r.stdout)
        assert set(res) == {"query", "target", "notice", "items"}
        assert res["items"][0]["doc_id"] == "web:recompute"
        assert {i["doc_id"] for i in res["items"]} == {"web:recompute", "web:checkpoint"}
    kept = dmlqa(home, "related", "activation recomputation", "--since", "2020", "--include-undated", "--json")
    assert "unknown year" not in kept.stderr
    assert "web:guide" in {i["doc_id"] for i in json.loads(kept.stdout)["items"]}


def test_related_to_an_undated_document_does_not_count_itself(home: Path) -> None:
    r = dmlqa(home, "related", "web:guide", "--since", "2020", "--json")
    assert r.exit_code == 0 and "unknown year" not in r.stderr
    assert json.loads(r.stdout)["target"] == "web:guide"


@pytest.mark.parametrize("fmt", [(), ("--json",)])
def test_ask_says_what_since_left_out(home: Path, fmt: tuple[str, ...]) -> None:
    r = dmlqa(home, "ask", "What does activation recomputation trade?", "--since", "2020", "--no-llm", *fmt)
    assert r.exit_code == 0, r.output
    assert NOTE in r.stderr.splitlines()
    if fmt:
        answer = json.loads(r.stdout)
        assert "web:guide" not in {h["doc_id"] for h in answer["retrieved"]}
        assert "undated_excluded" not in answer  # the JSON keeps its shape
    kept = dmlqa(home, "ask", "What does activation recomputation trade?", "--since", "2020", "--include-undated",
                 "--no-llm", "--json")
    assert kept.exit_code == 0 and "unknown year" not in kept.stderr
    assert "web:guide" in {h["doc_id"] for h in json.loads(kept.stdout)["retrieved"]}
