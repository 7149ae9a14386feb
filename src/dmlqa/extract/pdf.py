"""PDFs: text page by page, each page one block carrying its 1-based number so answers can cite pages.

The text comes from PDFium (pypdfium2), pypdf being the fallback for a document or page PDFium cannot
read. PDFium places spaces by the glyphs' positions, where pypdf's ``extract_text`` trusts the
content stream's own spacing and runs words together on tightly set pages
("partitionofdatawhileperiodicallysynchronizing"): on the snapshot's 29 distinct PDFs 0.18 % of its
tokens are such run-together words against 0.06 % for PDFium, which is also ten times quicker
(``bench/pdf_words.py``, README "Extraction"). pypdf still opens the file first: it tells an
encrypted or damaged file apart, rebuilds a cut-off one, and reads the metadata.

Every way a PDF can be unusable becomes an :class:`~dmlqa.errors.ExtractError` with a short reason:
pypdf raises plain ``ValueError``/``KeyError``/... on damaged files, so its calls are wrapped per
document and per page, and a page that fails is skipped while the others are kept.

A page's footnotes become a block after its text (:func:`footnotes_apart`), and a sentence the page break cuts
is read whole on the page it begins on (:func:`join_page_breaks`).

Tables (:mod:`dmlqa.extract.tables`) become extra blocks after their page's text, one line per data
row with its headers, so that a measured figure can be quoted with what it measures.
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Iterable

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError

from dmlqa.errors import ExtractError
from dmlqa.extract.facts import clean_authors, pdf_year, split_authors
from dmlqa.extract.tables import TABLE_CAPTION, pdf_tables
from dmlqa.extract.text import Extracted, clean_text
from dmlqa.models import Block

log = logging.getLogger(__name__)
# pypdf warns about every small defect of real-world PDFs; those are not our news.
logging.getLogger("pypdf").setLevel(logging.ERROR)

#: A PDF with fewer non-space characters per page than this has no usable text layer.
MIN_PDF_CHARS_PER_PAGE = 20


def extract_pdf(body: bytes, *, url: str = "") -> Extracted:
    """Text of a PDF page by page; each non-empty page becomes a block with its 1-based number."""
    reader = _open_pdf(body, url)
    if reader.is_encrypted:
        # Many PDFs are "encrypted" only against editing: the empty user password opens them.
        try:
            opened = reader.decrypt("")
        except DependencyError as e:
            raise ExtractError(url, "encrypted PDF: AES needs the cryptography package") from e
        except Exception as e:
            raise ExtractError(url, f"encrypted PDF: {_describe(e)}") from e
        if opened == PasswordType.NOT_DECRYPTED:
            raise ExtractError(url, "encrypted PDF: a password is needed")
    try:
        n_pages = len(reader.pages)
    except Exception as e:
        raise ExtractError(url, f"corrupt PDF: {_describe(e)}") from e
    if n_pages == 0:
        raise ExtractError(url, "corrupt PDF: no pages")

    pdfium = pdfium_page_texts(body, n_pages, url)
    raw: list[tuple[int, str]] = []
    errors: list[str] = []
    for i in range(n_pages):
        page_text = pdfium[i] if pdfium is not None else None
        if not (page_text and page_text.strip()):
            try:
                page_text = reader.pages[i].extract_text() or ""
            except Exception as e:
                log.debug("%s: page %d unreadable: %r", url, i + 1, e)
                errors.append(f"page {i + 1}: {_describe(e)}")
                continue
        raw.append((i + 1, page_text))
    if errors:
        log.info("%s: %d of %d PDF pages unreadable (%s)", url, len(errors), n_pages, errors[0])

    apart = {number: footnotes_apart(text) for number, text in raw}
    raw = join_page_breaks([(number, apart[number][0]) for number, _ in raw])
    vocabulary = _hyphenated_vocabulary([*(t for _, t in raw), *(notes for _, notes in apart.values())])
    tables = pdf_tables(body, [(number, t) for number, t in raw if TABLE_CAPTION.search(t)], url=url)
    blocks = []
    for number, page_text in raw:
        for text, section in ((page_text, None), (apart[number][1], FOOTNOTES)):  # the page's text, its footnotes
            t = clean_text(dehyphenate(text, vocabulary))
            if t:
                blocks.append(Block(text=t, page=number, section=section))
        blocks += [Block(text=table.text, page=number, section=table.label) for table in tables.get(number, ())]
    chars = sum(len("".join(b.text.split())) for b in blocks)
    if chars < MIN_PDF_CHARS_PER_PAGE * n_pages:
        if errors and not blocks:
            raise ExtractError(url, f"corrupt PDF: {errors[0]}")
        raise ExtractError(url, "PDF has no text layer (scanned images?)")

    title, authors, date, info = _pdf_metadata(reader)
    first_page = next((t for number, t in raw if number == 1), "")
    year = pdf_year(first_page, created=date, producer=info)
    return Extracted(
        blocks=tuple(blocks), content_type="pdf", title=title, authors=authors, date=date, pages=n_pages,
        year=year,
    )


#: PDFium is not thread-safe, not even across documents; the app may extract an added PDF on one thread.
_PDFIUM_LOCK = threading.Lock()
#: PDFium marks a hyphen it took for a line-end break (and drops the line break after it): U+FFFE in
#: ``get_text_range``, 0x02 elsewhere. Put back as a hyphen and a line break, :func:`dehyphenate` decides.
_PDFIUM_HYPHEN = re.compile(r"[\ufffe\x02](?:\r?\n)?")


def pdfium_page_texts(body: bytes, n_pages: int, url: str = "") -> list[str | None] | None:
    """Each page's text as PDFium reads it (None for a page it cannot read), or None for the whole
    document when PDFium cannot open it or counts its pages otherwise than pypdf (a rebuilt cut-off
    file): then page numbers could disagree, and pypdf reads every page."""
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(body)
        except Exception as e:  # PdfiumError for damaged or encrypted files; anything else is no better
            log.debug("%s: PDFium cannot open it (%r); pypdf reads it", url, e)
            return None
        try:
            if len(doc) != n_pages:
                log.debug("%s: PDFium counts %d pages, pypdf %d; pypdf reads it", url, len(doc), n_pages)
                return None
            out: list[str | None] = []
            for i in range(n_pages):
                try:
                    page = doc[i]
                    try:
                        textpage = page.get_textpage()
                        try:
                            text = textpage.get_text_range()
                        finally:
                            textpage.close()
                    finally:
                        page.close()
                except Exception as e:
                    log.debug("%s: PDFium cannot read page %d: %r", url, i + 1, e)
                    out.append(None)
                    continue
                out.append(_PDFIUM_HYPHEN.sub("-\n", text.replace("\r\n", "\n")))
            return out
        finally:
            doc.close()


_CATALOG = re.compile(rb"(\d+)\s+(\d+)\s+obj\s*<<(?:(?!endobj).){0,2000}?/Type\s*/Catalog\b", re.DOTALL)


def _open_pdf(body: bytes, url: str) -> PdfReader:
    """A reader over ``body``; a truncated file (cut-off download) is given a makeshift trailer.

    pypdf rebuilds a lost cross-reference table by itself but needs the trailer's ``/Root``; when
    the document catalog survived (it often comes first, e.g. in linearised files) the pages
    written before the cut can still be read.
    """
    try:
        reader = PdfReader(io.BytesIO(body), strict=False)
        if not reader.is_encrypted:
            len(reader.pages)  # resolves the page tree: fails here on many damaged files
        return reader
    except Exception as e:  # pypdf raises PyPdfError but also ValueError, KeyError, ...
        error = e
    catalog = _CATALOG.search(body)
    if catalog is not None:
        patched = body + b"\ntrailer\n<< /Root %s %s R >>\nstartxref\n0\n%%%%EOF\n" % catalog.groups()
        try:
            reader = PdfReader(io.BytesIO(patched), strict=False)
            if len(reader.pages) > 0:
                log.info("%s: damaged PDF (%s) read with a rebuilt trailer", url, _describe(error))
                return reader
        except Exception as e:
            log.debug("%s: PDF repair failed too: %r", url, e)
    raise ExtractError(url, f"corrupt PDF: {_describe(error)}") from error


def _pdf_metadata(reader: PdfReader) -> tuple[str | None, tuple[str, ...], str | None, str]:
    """Title, authors, creation date and the producing software ("pdfTeX-1.40.21 LaTeX with
    hyperref") from the document information, where they are sensible."""
    try:
        meta = reader.metadata
        if meta is None:
            return None, (), None, ""
        title = clean_text(str(meta.title or ""))
        author = clean_text(str(meta.author or ""))
        software = clean_text(f"{meta.producer or ''} {meta.creator or ''}")
        try:
            created = meta.creation_date
        except Exception:
            created = None
    except Exception as e:
        log.debug("unreadable PDF metadata: %r", e)
        return None, (), None, ""
    if (
        len(title) < 4
        or title.lower() in {"untitled", "title", "none"}
        or re.search(r"\.(dvi|pdf|tex|docx?|pptx?|ps|indd)$", title, re.IGNORECASE)
        or title.lower().startswith("microsoft word")
    ):
        title = ""
    return (
        title or None,
        clean_authors(split_authors(author)) if author else (),
        created.date().isoformat() if created else None,
        software,
    )


#: A footnote's first line: its number set before its first word ("3One possible way around this ...").
_FOOTNOTE = re.compile(r"\s*(\d{1,2})(?=[A-Z][a-z]+\b)")
_ENDS_SENTENCE = re.compile(r"[.!?)\"”]\s*$")
#: The section of a page's footnotes, a block after the page's text.
FOOTNOTES = "Footnotes"
#: The most lines a footnote takes before its sentence ends; a longer run is no footnote.
FOOTNOTE_LINES = 4


def footnotes_apart(text: str) -> tuple[str, str]:
    """A page's text without its footnotes, and the footnotes without their numbers.

    A footnote sits where the text layer puts it: at the foot of the column it belongs to, between a sentence
    and its rest in the next column or on the next page ("... layers that require" / "3One possible way
    around this limitation is ..." / the rest), which made one sentence of both. Taken apart, the body's
    sentence reads on (:func:`join_page_breaks`) and the footnote is a sentence of its own. A footnote opens a
    line with its number before a capitalised word (a number of 1 to 30) and ends its sentence at a line's end
    within :data:`FOOTNOTE_LINES` lines; "16GB on the V100" or "3D parallelism" open no footnote. The note's
    mark, a number set after a word of the text ("accelerator3."), goes with it.
    """
    lines = text.split("\n")
    body: list[str] = []
    notes: list[str] = []
    numbers: list[str] = []
    i = 0
    while i < len(lines):
        m = _FOOTNOTE.match(lines[i])
        if m and body and 1 <= int(m.group(1)) <= 30:
            end = next((j for j in range(i, min(i + FOOTNOTE_LINES, len(lines))) if _ENDS_SENTENCE.search(lines[j])),
                       None)
            if end is not None:
                notes += [lines[i][m.end():], *lines[i + 1:end + 1]]
                numbers.append(m.group(1))
                i = end + 1
                continue
        body.append(lines[i])
        i += 1
    text = "\n".join(body)
    # the note's mark in the text: "a single accelerator3." is "a single accelerator." (once a number: 30 at most)
    for number in dict.fromkeys(numbers):
        text = re.sub(rf"\b([a-z]{{4,}}){number}(?=[\s.,;:)]|$)", r"\1", text, count=1)
    return text, "\n".join(notes)


#: A line that is only a page number (the page's foot).
_PAGE_NUMBER_LINE = re.compile(r"\s*\d{1,4}\s*")
_HYPHEN_END = re.compile(r"[a-z]-\Z")
#: Where a sentence ends: a full stop, ! or ? (closing quote or bracket allowed), then a capital or the line's end.
_SENTENCE_END = re.compile(r"[.!?][\"”’)\]]?(?=\s+[A-Z(\[]|\s*$)", re.MULTILINE)
#: The most lines of the next page that the end of a sentence begun on a page may take.
CONTINUATION_LINES = 4


def _stops_mid_sentence(line: str) -> bool:
    """Does the line stop inside a sentence: three words or more ending in a small letter, a comma or a
    semicolon, or a word broken by a hyphen?"""
    return bool(_HYPHEN_END.search(line)) or (line[-1:] in _MID_SENTENCE_ENDS and len(line.split(None, 2)) == 3)


_MID_SENTENCE_ENDS = frozenset("abcdefghijklmnopqrstuvwxyz,;-")


def join_page_breaks(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Move the rest of a sentence that runs over a page break back onto the page it begins on.

    Each page is a block, and sentences are split within blocks, so a sentence the page break cuts
    ("... weight gradients are communicated to" / "servers as soon as they are computed, ...") became two
    fragments, neither quotable. When a page's last line stops inside a sentence (a page number below it is
    dropped) and the next page goes on in lower case to a sentence end within its first
    :data:`CONTINUATION_LINES` lines, those words move up: the sentence is cited at the page it begins on.
    A running head or footer between the two parts is dropped with the page number. A page that ends in a
    stamp or an address, or a next page that opens with a heading, a figure's labels or a table, is left as
    it is.
    """
    out = list(pages)
    running = _running_lines(text for _, text in pages)
    for i in range(len(out) - 1):
        (number, text), (following, after) = out[i], out[i + 1]
        if following != number + 1:
            continue
        lines = text.rstrip().split("\n")
        while len(lines) > 1 and _furniture(lines[-1], running):
            lines.pop()
        if not _stops_mid_sentence(lines[-1].rstrip()):
            continue
        rest = after.lstrip("\n").split("\n")
        while len(rest) > 1 and _furniture(rest[0], running):
            rest.pop(0)
        head = rest[0].strip()
        if not head[:1].islower() or not (lines[-1].rstrip().endswith("-") or len(head.split()) >= 3):
            continue
        taken = "\n".join(rest[:CONTINUATION_LINES])
        end = _SENTENCE_END.search(taken)
        if end is None:
            continue
        moved, left = taken[: end.end()], taken[end.end():].lstrip(" ")
        out[i] = (number, "\n".join([*lines[:-1], lines[-1].rstrip(), moved]))
        out[i + 1] = (following, "\n".join([left, *rest[CONTINUATION_LINES:]]).lstrip("\n"))
    return out


def _furniture(line: str, running: set[str]) -> bool:
    """Is the line a page number, or a running head or footer (:func:`_running_lines`)?"""
    return _PAGE_NUMBER_LINE.fullmatch(line) is not None or _unnumbered(line) in running


def _unnumbered(line: str) -> str:
    return " ".join(re.sub(r"\d+", " ", line).split())


def _running_lines(texts: Iterable[str]) -> set[str]:
    """Lines that stand on more than one page once their numbers are taken out: running heads and footers
    ("2021 USENIX Annual Technical Conference 551"), which may sit between a sentence and its rest."""
    seen: dict[str, int] = {}
    for text in texts:
        for line in {_unnumbered(x) for x in text.split("\n")}:
            if len(line) >= 10:
                seen[line] = seen.get(line, 0) + 1
    return {line for line, n in seen.items() if n > 1}


_WORDS = re.compile(r"\w+(?:-\w+)*")
_BROKEN_WORD = re.compile(r"(\w+)-[ \t]*\n[ \t]*([a-z]\w*)")
#: A hyphen at a line end before a digit or a capital is a name's ("ZeRO-" + "3", "Megatron-" + "LM"): kept,
#: with the line break taken out, so the name is not quoted as "ZeRO- 3".
_BROKEN_NAME = re.compile(r"(?<=[A-Za-z0-9])-[ \t]*\n[ \t]*(?=[A-Z0-9])")


def _hyphenated_vocabulary(texts: Iterable[str]) -> set[str]:
    """Lower-cased words (hyphenated compounds included) that occur within a line of ``texts``."""
    vocab: set[str] = set()
    for t in texts:
        vocab.update(w.lower() for w in _WORDS.findall(t))
    return vocab


def dehyphenate(text: str, vocabulary: set[str] | None = None) -> str:
    """Join words broken by a hyphen at a line end ("paralleliz-\\ning" → "parallelizing"; "ZeRO-\\n3" →
    "ZeRO-3").

    A compound that the document writes with a hyphen elsewhere ("data-parallel") keeps its
    hyphen, and so does one broken after its second part ("column-by-" + "column", "state-of-the-" +
    "art": no word is split after a hyphen); without that evidence the parts are joined, which is right
    for most line-end breaks.
    """
    vocab = vocabulary if vocabulary is not None else _hyphenated_vocabulary([text])

    def join(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        hyphenated = f"{a}-{b}".lower()
        if m.start() > 0 and text[m.start() - 1] == "-":
            return f"{a}-{b}"
        if hyphenated in vocab and (a + b).lower() not in vocab:
            return f"{a}-{b}"
        return a + b

    return _BROKEN_NAME.sub("-", _BROKEN_WORD.sub(join, text))


def _describe(e: BaseException) -> str:
    """Short, single-line description of an exception for a report."""
    msg = " ".join(str(e).split())
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
