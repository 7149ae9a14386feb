"""One rule for what a body is: the fetcher's sniffing and the extractor's dispatch agree."""

from __future__ import annotations

import pytest

from dmlqa.errors import ExtractError
from dmlqa.extract.documents import detect_kind
from dmlqa.media import (
    charset,
    looks_binary,
    looks_like_html,
    looks_like_pdf,
    looks_like_text,
    media_type,
    parse_content_type,
    sniff_content_type,
    url_suffix,
)

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"


def test_content_type_header() -> None:
    assert parse_content_type('Text/HTML; Charset="ISO-8859-1"') == ("text/html", "ISO-8859-1")
    assert parse_content_type(None) == ("", None)
    assert media_type("application/PDF") == "application/pdf"
    assert charset("text/plain; format=flowed; charset=utf-8") == "utf-8"


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html><html><body>x</body></html>",
        b"\xef\xbb\xbf  <html lang=en>",
        b"<?xml version='1.0' encoding='utf-8'?>\n<!DOCTYPE html>\n<html>",
        b"<!-- generated -->\n<!-- twice -->\n<HEAD><title>t</title>",
        b'<meta charset="utf-8"><title>Only a title</title><p>text',
        b"<title>Title first</title>",
    ],
)
def test_html_openings(body: bytes) -> None:
    assert looks_like_html(body)
    assert sniff_content_type(body, "text/plain", "") == "text/html"
    assert detect_kind(body, "text/plain") == "html"


@pytest.mark.parametrize(
    "body",
    [
        b"# README\n\n<p align=center><img src=logo.png></p>",
        b"<htmlish>not a document",
        b"<!-- a comment that never ends <html>",
        b"plain words <html> later",
    ],
)
def test_not_html(body: bytes) -> None:
    assert not looks_like_html(body)


def test_a_page_that_mentions_the_pdf_header_stays_html() -> None:
    page = b"<html><body><p>Every PDF starts with %PDF-1.7 and ends with %%EOF.</p></body></html>"
    assert looks_like_html(page) and not looks_like_pdf(page)
    assert sniff_content_type(page, "application/pdf", "") == "text/html"
    assert detect_kind(page, "text/html") == "html"


@pytest.mark.parametrize("body", [PDF, b"\n  %PDF-1.7 ...", b"\xef\xbb\xbf%PDF-1.5\n", b"junk\r\n%PDF-1.4\n" + PDF[9:]])
def test_pdf_by_its_header(body: bytes) -> None:
    assert looks_like_pdf(body)
    assert sniff_content_type(body, "application/octet-stream", "") == "application/pdf"
    assert detect_kind(body, "application/octet-stream") == "pdf"


def test_text_and_binary_are_one_rule() -> None:
    latin1 = ("A r\u00e9sum\u00e9 of the caf\u00e9 talk \u2013 data parallelism, then pipelines. " * 3).encode("cp1252")
    assert looks_like_text(latin1) and not looks_binary(latin1)
    # no useful label: the fetcher calls it text because the extractor can read it as text
    assert sniff_content_type(latin1, "application/octet-stream", "") == "text/plain"
    # a stray control character does not make a text binary; a mostly-control body is binary
    assert looks_like_text(b"hello\x00 world\x07 and many more words of ordinary text")
    for binary in (b"\x89PNG\r\n\x1a\n\x00\x00", b"\x00\x01\x02binary", bytes(range(256)) * 4):
        assert looks_binary(binary) and not looks_like_text(binary)
        assert sniff_content_type(binary, "application/octet-stream", "") == "application/octet-stream"
    assert not looks_like_text(b"")


def test_declared_pdf_that_is_not_one() -> None:
    with pytest.raises(ExtractError, match="declared a PDF but the body is an HTML page"):
        detect_kind(b"<title>Sign in</title><form>", "application/pdf", url="https://x.org/p.pdf")
    with pytest.raises(ExtractError, match="corrupt PDF: no %PDF header"):
        detect_kind(b"just words", "application/pdf", url="https://x.org/p.pdf")


def test_url_suffix() -> None:
    assert url_suffix("https://raw.githubusercontent.com/o/r/HEAD/README.MD?x=1") == ".md"
    assert url_suffix("notes/paper.final.pdf") == ".pdf"
    assert url_suffix("https://example.org/") == ""
    assert url_suffix("https://example.org/.hidden") == ""
    assert sniff_content_type(b"# T", "text/plain", "https://x.org/a/README.mdown") == "text/markdown"
    assert detect_kind(b"# T", "text/plain", url="https://x.org/a/README.mdown") == "markdown"
