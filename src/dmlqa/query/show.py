"""The archived source behind a citation: a PDF page or an HTML passage, with the quote located.

``dmlqa show``, the app's ``/source/<doc_id>`` view and the MCP ``show`` tool all read it from here,
offline, from the home alone: the text from ``corpus/documents.sqlite`` (the blocks carry their PDF
page), and a PDF page's image from the very bytes the text was extracted from (the WARC record the
manifest names by sha256, or the file under ``corpus/local``).

Every read is checked against the one index version the caller pinned: the stored text and the
archived bytes are used only when their sha256 is the one that version indexed, so a build that
publishes meanwhile cannot put another text beside this version's citation; when the stored text
has moved on, the page is pieced together from the version's own chunks.

A quote is located tolerantly: an answer's quote may have been de-hyphenated, re-spaced or had its
quotation marks cleaned, so both sides are compared as their lower-case letters and digits alone,
and the match is mapped back to offsets in the original text.
"""

from __future__ import annotations

import hashlib
import io
import re
import unicodedata
from dataclasses import dataclass

from dmlqa.acquire.manifest import archived_body
from dmlqa.catalog.local import LOCAL_PREFIX
from dmlqa.errors import NotInIndexError
from dmlqa.index.docstore import read_document
from dmlqa.index.versions import IndexVersion
from dmlqa.models import BLOCK_SEPARATOR, Block, view_path
from dmlqa.paths import DOCUMENTS_FILE, LOCAL_DIR, MANIFEST_FILE
from dmlqa.settings import Settings

__all__ = ["REGION_CHARS", "SourceView", "locate", "render_page", "show"]

#: How much of an HTML source is shown around its quote (or from its start): a passage to read, not the
#: whole page (a documentation site can run to megabytes of text).
REGION_CHARS = 4_000
#: The widest a rendered page is (pixels): readable beside its text, small enough to inline.
PAGE_WIDTH_PX = 1_000
#: What a quote's boxes are painted with (RGBA: a translucent yellow, the text under it still legible).
HIGHLIGHT = (255, 221, 0, 110)


@dataclass(frozen=True)
class SourceView:
    """What :func:`show` returns: the archived text of one PDF page or one HTML passage.

    ``url`` is the document's shown link (``DocRecord.link``); ``page`` is None for a source without
    pages; ``quote_span`` is the quote's ``[start, end)`` in ``text`` when found; ``image`` is the
    page rendered as PNG with the quote highlighted (only when asked for and the PDF's bytes are
    archived); ``notice`` says, for instance, that the quote is on another page.
    """

    doc_id: str
    title: str
    url: str
    page: int | None
    text: str
    quote_found: bool
    quote_span: tuple[int, int] | None = None
    content_type: str = "text"
    pages: int | None = None
    view: str = ""
    image: bytes | None = None
    notice: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"doc_id": self.doc_id, "title": self.title, "url": self.url, "page": self.page, "text": self.text,
                "quote_found": self.quote_found}


# -- locating a quote ---------------------------------------------------------------------------------

_ELLIPSIS = re.compile(r"\s*(?:\u2026|\.\.\.)\s*")


def _normalise(text: str) -> tuple[str, list[int]]:
    """``text`` as its letters and digits alone, case-folded, and for each of them its offset in ``text``.

    Spaces, hyphens and punctuation are all dropped, so that every spelling the extractors and an
    answer's cleaning produce of one passage compares equal: "pipe-\nline", "pipeline", "micro-batches",
    "micro batches", “quoted” and "quoted". Compatibility forms fold (the "ﬁ" ligature → "fi").
    """
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if ch.isalnum():
            for c in unicodedata.normalize("NFKC", ch).casefold():
                if c.isalnum():
                    out.append(c)
                    origin.append(i)
    return "".join(out), origin


def locate(text: str, quote: str) -> tuple[int, int] | None:
    """``[start, end)`` of ``quote`` in ``text``, found tolerantly (see the module docstring); None if absent.

    A quote shortened with an ellipsis ("pipeline … bubble") matches its parts in order.
    """
    parts = [p for p in (_normalise(q)[0] for q in _ELLIPSIS.split(quote)) if p]
    if not parts:
        return None
    norm, origin = _normalise(text)
    start = end = None
    at = 0
    for part in parts:
        found = norm.find(part, at)
        if found < 0:
            return None
        if start is None:
            start = found
        at = end = found + len(part)
    return origin[start], origin[end - 1] + 1


# -- the text of one version's document ---------------------------------------------------------------


@dataclass(frozen=True)
class _Located:
    block: Block
    start: int  # offset of the block in the document's text
    end: int


def _blocks(settings: Settings, version: IndexVersion, doc_id: str) -> list[_Located]:
    """The document's blocks as ``version`` indexed them, each with its offsets in the document's text."""
    sha = version.doc_sha256(doc_id)
    doc = read_document(settings.corpus_dir / DOCUMENTS_FILE, doc_id)
    if doc is not None and (sha is None or doc.sha256 == sha):
        out, at = [], 0
        for b in doc.blocks:
            out.append(_Located(b, at, at + len(b.text)))
            at += len(b.text) + len(BLOCK_SEPARATOR)
        return out
    return _blocks_from_chunks(version, doc_id)


def _blocks_from_chunks(version: IndexVersion, doc_id: str) -> list[_Located]:
    """The blocks pieced together from the version's chunks (overlaps removed), one per page or section
    run: what this version indexed, when the stored text is already a later build's."""
    chunks = sorted(version.chunks(version.doc_rows(doc_id)).values(), key=lambda c: c.start)
    out: list[_Located] = []
    for c in chunks:
        last = out[-1] if out else None
        if last is not None and last.block.page == c.page and c.start <= last.end + len(BLOCK_SEPARATOR):
            tail = c.text[max(0, last.end - c.start):]
            gap = BLOCK_SEPARATOR if c.start > last.end else ""
            out[-1] = _Located(Block(last.block.text + gap + tail, last.block.page, last.block.section),
                               last.start, max(last.end, c.end))
        else:
            out.append(_Located(Block(c.text, c.page, c.section), c.start, c.end))
    return out


def _pdf_bytes(settings: Settings, version: IndexVersion, doc_id: str) -> bytes | None:
    """The PDF this version's text of ``doc_id`` was extracted from: its file under corpus/local, or the
    archived response the manifest holds with that sha256; None when neither is at hand."""
    sha = version.doc_sha256(doc_id)
    if not sha:
        return None
    if doc_id.startswith(LOCAL_PREFIX):
        local = (settings.corpus_dir / LOCAL_DIR).resolve()
        path = (local / doc_id.removeprefix(LOCAL_PREFIX)).resolve()
        if path.is_relative_to(local) and path.is_file():
            data = path.read_bytes()
            return data if hashlib.sha256(data).hexdigest() == sha else None
        return None
    return archived_body(settings.corpus_dir / MANIFEST_FILE, sha)


def _page_count(pdf: bytes) -> int | None:
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(pdf)
    except pdfium.PdfiumError:
        return None
    try:
        return len(doc)
    finally:
        doc.close()


# -- the view -----------------------------------------------------------------------------------------


def _region(text: str, span: tuple[int, int] | None) -> tuple[int, int]:
    """About :data:`REGION_CHARS` of ``text`` around ``span`` (from the start without one), cut at
    paragraph, then line, then word boundaries so that the passage reads whole."""
    if len(text) <= REGION_CHARS:
        return 0, len(text)
    if span is None:
        lo, hi = 0, REGION_CHARS
    else:
        room = max(0, REGION_CHARS - (span[1] - span[0])) // 2
        lo, hi = max(0, span[0] - room), min(len(text), span[1] + room)
    if lo > 0:
        for sep in ("\n\n", "\n", " "):
            cut = text.find(sep, lo, span[0] if span else hi)
            if cut >= 0:
                lo = cut + len(sep)
                break
    if hi < len(text):
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, span[1] if span else lo, hi)
            if cut >= 0:
                hi = cut
                break
    return lo, hi


def show(settings: Settings, version: IndexVersion, doc_id: str, *, page: int | None = None,
         quote: str | None = None, image: bool = False, notice: str | None = None) -> SourceView:
    """The archived text of ``doc_id`` in ``version``: page ``page`` of a PDF (the quote's page, else the
    first, when None), or the passage of an HTML (or other) source around ``quote``.

    ``image`` also renders a PDF page (:func:`render_page`) from its archived bytes; ``notice`` is what
    the caller has to say already (how it read a title). Raises
    :class:`~dmlqa.errors.NotInIndexError` for a page the document does not have.
    """
    rec = version.docs[doc_id]
    quote = (quote or "").strip() or None
    blocks = _blocks(settings, version, doc_id)
    full = BLOCK_SEPARATOR.join(b.block.text for b in blocks) if blocks else ""
    paged = rec.content_type == "pdf" or any(b.block.page is not None for b in blocks)
    if not paged:
        if page is not None:
            raise NotInIndexError(f"{doc_id} is a {rec.content_type} source without pages: leave the page out")
        span = locate(full, quote) if quote else None
        lo, hi = _region(full, span)
        shown = (span[0] - lo, span[1] - lo) if span else None
        return SourceView(doc_id, rec.title, rec.link, None, full[lo:hi], span is not None, shown,
                          rec.content_type, None, view_path(doc_id, None, quote), notice=notice)

    pdf = _pdf_bytes(settings, version, doc_id) if rec.content_type == "pdf" else None
    known = [b.block.page for b in blocks if b.block.page is not None]
    pages = (_page_count(pdf) if pdf else None) or max(known, default=0) or None
    whole = locate(full, quote) if quote else None
    found_on = next((b.block.page for b in blocks if b.start <= whole[0] < b.end + len(BLOCK_SEPARATOR)),
                    None) if whole else None
    if page is None:
        page = found_on or min(known, default=1)
    if not pages or not 1 <= page <= pages:
        have = f"pages 1-{pages}" if pages else "no pages"
        raise NotInIndexError(f"{doc_id} has {have}: page {page} is not one of them")
    on_page = [b for b in blocks if b.block.page == page]
    text = BLOCK_SEPARATOR.join(b.block.text for b in on_page)
    span = locate(text, quote) if quote else None
    if quote and span is None and found_on is not None and found_on != page:
        notice = "; ".join(n for n in (notice, f"the quote is not on page {page}: it is on page {found_on}") if n)
    elif quote and span is None and whole is not None and on_page and found_on == page:
        # it starts on this page and runs over the page's end: mark what this page holds of it
        span = (whole[0] - on_page[0].start, len(text))
    png = render_page(pdf, page, quote) if image and pdf else None
    return SourceView(doc_id, rec.title, rec.link, page, text, span is not None, span, rec.content_type, pages,
                      view_path(doc_id, page, quote), png, notice)


def render_page(pdf: bytes, page: int, quote: str | None = None) -> bytes | None:
    """Page ``page`` (1-based) of ``pdf`` as PNG, the quote's boxes painted over; None when pdfium cannot
    read the page (a damaged file shows its text alone).

    The quote is located in pdfium's own text of the page (not the extractor's, whose offsets differ),
    read character by character so that indices match the character boxes.
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c
    from PIL import Image, ImageDraw

    try:
        doc = pdfium.PdfDocument(pdf)
    except pdfium.PdfiumError:
        return None
    try:
        if not 1 <= page <= len(doc):
            return None
        p = doc[page - 1]
        width, height = p.get_size()
        scale = min(2.0, PAGE_WIDTH_PX / max(width, 1.0))
        img = p.render(scale=scale).to_pil().convert("RGBA")
        boxes: list[tuple[float, float, float, float]] = []
        if quote:
            tp = p.get_textpage()
            chars = "".join(chr(pdfium_c.FPDFText_GetUnicode(tp.raw, i) or 32) for i in range(tp.count_chars()))
            span = locate(chars, quote)
            if span:
                boxes = [tp.get_rect(i) for i in range(tp.count_rects(span[0], span[1] - span[0]))]
        if boxes:
            layer = Image.new("RGBA", img.size, (0, 0, 0, 0))
            draw = ImageDraw.Draw(layer)
            for left, bottom, right, top in boxes:  # PDF points, origin bottom-left
                draw.rectangle([left * scale, (height - top) * scale, right * scale, (height - bottom) * scale],
                               fill=HIGHLIGHT)
            img = Image.alpha_composite(img, layer)
        out = io.BytesIO()
        img.convert("RGB").save(out, "PNG", optimize=False)
        return out.getvalue()
    except pdfium.PdfiumError:
        return None
    finally:
        doc.close()

