"""PDF words stay apart: PDFium reads the text, pypdf is the fallback (extract/pdf.py, bench/pdf_words.py)."""

from __future__ import annotations

import io

import pytest
from fixtures_docs import build_pdf, pdf_file, prose
from fpdf.fonts import CORE_FONTS_CHARWIDTHS
from pypdf import PdfReader

from dmlqa.extract import pdf as pdf_module
from dmlqa.extract.documents import extract_bytes
from dmlqa.extract.pdf import pdfium_page_texts

WORDS = "Each GPU maintains a full copy of the model and trains on its own partition of data".split()


def _spaced_by_position(words: list[str], gap: int = -300) -> bytes:
    """A one-page PDF that writes no space characters: words are set apart by ``gap`` thousandths of
    an em in a TJ array, as TeX sets justified lines. Its Helvetica declares a wide space glyph
    (1200), so a reader that measures gaps against the font's space, as pypdf does, runs them together.
    """
    widths = " ".join(str(1200 if c == 32 else CORE_FONTS_CHARWIDTHS["helvetica"][chr(c)]) for c in range(32, 127))
    content = b"BT /F1 10 Tf 72 740 Td [" + b" ".join(b"(%s) %d" % (w.encode(), gap) for w in words) + b"] TJ ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 4 0 R >> >> >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 "
        b"/Widths [" + widths.encode() + b"] >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    return pdf_file(objects)


def test_words_set_apart_by_position_stay_apart() -> None:
    body = _spaced_by_position(WORDS)
    # the fixture reproduces what the snapshot's papers show: pypdf's own text runs the words together
    assert "partitionofdata" in (PdfReader(io.BytesIO(body)).pages[0].extract_text() or "")
    ex = extract_bytes(body, "application/pdf")
    assert [b.page for b in ex.blocks] == [1]
    assert ex.blocks[0].text.split() == WORDS


def test_pdfium_line_end_hyphen_is_given_back_for_dehyphenation() -> None:
    body = build_pdf(["We study pipeline paral-\nlelism with data-\nparallel and data-parallel ranks. " + prose(5)])
    pages = pdfium_page_texts(body, 1)
    # PDFium marks both breaks as its own line-end hyphen and drops the line break; both come back
    assert pages is not None and "paral-\nlelism" in pages[0] and "data-\nparallel" in pages[0]
    assert "\ufffe" not in pages[0] and "\r" not in pages[0]
    text = extract_bytes(body, "application/pdf").text
    assert "pipeline parallelism" in text and "data-parallel and data-parallel" in text


def test_pages_pdfium_cannot_read_come_from_pypdf_with_their_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = [prose(25, i) for i in range(3)]

    def pdfium_reads_only_page_1(body: bytes, n_pages: int, url: str = "") -> list[str | None]:
        texts = pdfium_page_texts(body, n_pages, url)
        assert texts is not None
        return [texts[0], None, ""]

    monkeypatch.setattr(pdf_module, "pdfium_page_texts", pdfium_reads_only_page_1)
    ex = extract_bytes(build_pdf(pages), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 2, 3]
    assert [" ".join(b.text.split()) for b in ex.blocks] == pages


def test_a_pdf_pdfium_cannot_open_is_read_by_pypdf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_module, "pdfium_page_texts", lambda body, n_pages, url="": None)
    ex = extract_bytes(build_pdf([prose(25, 0), prose(25, 1)]), "application/pdf")
    assert [b.page for b in ex.blocks] == [1, 2]


def test_pdfium_refuses_a_document_whose_page_count_differs() -> None:
    body = build_pdf([prose(25, 0), prose(25, 1)])
    assert pdfium_page_texts(body, 2) is not None
    assert pdfium_page_texts(body, 3) is None  # pypdf counted otherwise: page numbers would disagree
    assert pdfium_page_texts(b"%PDF-1.4 not a pdf at all", 1) is None
