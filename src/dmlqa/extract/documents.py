"""Extract stage entry points: fetched bytes → located text blocks (:class:`Extracted`) → :class:`Document`.

What the bytes are is decided by :mod:`dmlqa.media`, the rules the fetcher uses too: anything
starting with ``%PDF-`` is a PDF (GitHub serves PDFs as ``application/octet-stream``), a body that
opens like an HTML document is HTML even when labelled ``text/plain``. Then the extractor of the
kind takes over: :mod:`~dmlqa.extract.html` (trafilatura, headings as sections),
:mod:`~dmlqa.extract.pdf` (page by page, pages cited), :mod:`~dmlqa.extract.text` (Markdown split
at its headings, plain text one block). :func:`to_document` joins the text with the catalog's facts
(:mod:`~dmlqa.extract.facts`), and :func:`catalog_card` stands in for a resource with no text.

Every way the bytes can be unusable raises :class:`~dmlqa.errors.ExtractError` with a short,
specific reason for the build report; nothing else escapes.
"""

from __future__ import annotations

import hashlib
import mimetypes
from pathlib import Path

from dmlqa.catalog.local import too_large_reason
from dmlqa.catalog.urls import is_url_title
from dmlqa.errors import ExtractError
from dmlqa.extract.facts import merge_facts
from dmlqa.extract.html import extract_html
from dmlqa.extract.pdf import extract_pdf
from dmlqa.extract.text import Extracted, decode_text, extract_markdown, extract_text
from dmlqa.media import (
    HTML_TYPES,
    MARKDOWN_SUFFIXES,
    MARKDOWN_TYPES,
    PDF_TYPES,
    UNKNOWN_TYPES,
    looks_binary,
    looks_like_html,
    looks_like_pdf,
    not_text_reason,
    parse_content_type,
    url_suffix,
)
from dmlqa.models import Block, Document, Resource, is_et_al

#: text/* types that are not prose worth indexing.
NON_PROSE_TEXT_TYPES = frozenset({"text/css", "text/javascript", "text/calendar", "text/vcard"})
SUFFIX_TYPES = {
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".rst": "text/plain",
    ".text": "text/plain",
}


# -- public entry points ---------------------------------------------------------------------------
def extract_bytes(body: bytes, content_type: str, *, url: str = "", charset: str | None = None) -> Extracted:
    """Extract the text of one fetched body.

    ``content_type`` may be the bare media type or the whole header value (``text/html;
    charset=iso-8859-1``); ``charset`` overrides the one in it. ``url`` names the body in errors and
    tells markdown from plain text when the server says ``text/plain`` (GitHub raw files).
    Raises :class:`ExtractError` when no usable text comes out, and when what comes out is no text
    (:func:`~dmlqa.media.not_text_reason`: binary data served as text, filler): such a body is
    judged once decoded, before its extractor can make something text-like of it, and what the
    extractor returns (a PDF's text layer too) is judged again.
    """
    if not body.strip():
        raise ExtractError(url, "empty body")
    media_type, declared = parse_content_type(content_type)
    kind = detect_kind(body, media_type, url=url)
    charset = charset or declared
    if kind == "pdf":
        extracted = extract_pdf(body, url=url)
    else:
        text = decode_text(body, charset, html=kind == "html")
        _refuse_non_text(text, url)
        if kind == "html":
            extracted = extract_html(text, url=url)
        elif kind == "markdown":
            extracted = extract_markdown(text, url=url)
        else:
            extracted = extract_text(text, url=url)
    _refuse_non_text(extracted.text, url)
    return extracted


def _refuse_non_text(text: str, url: str) -> None:
    reason = not_text_reason(text)
    if reason is not None:
        raise ExtractError(url, reason)


def extract_file(path: Path, *, max_bytes: int | None = None) -> Extracted:
    """Extract a local file: its type comes from the suffix, corrected by sniffing the bytes.

    With ``max_bytes``, a larger file is refused from its size alone (checked before reading, and
    again while reading, in case it grows): it is never loaded whole.
    """
    path = Path(path)
    name = str(path)
    try:
        if max_bytes is not None:
            size = path.stat().st_size
            if size > max_bytes:
                raise ExtractError(name, too_large_reason(size, max_bytes))
            with path.open("rb") as fh:
                body = fh.read(max_bytes + 1)
            if len(body) > max_bytes:
                raise ExtractError(name, too_large_reason(len(body), max_bytes))
        else:
            body = path.read_bytes()
    except OSError as e:
        raise ExtractError(name, f"cannot read file: {e.strerror or e}") from e
    content_type = SUFFIX_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
    if content_type is None:
        # an unknown suffix (README, LICENSE, notes.log): text unless it looks binary
        content_type = "application/octet-stream" if looks_binary(body) else "text/plain"
    return extract_bytes(body, content_type, url=name)


def detect_kind(body: bytes, media_type: str, *, url: str = "") -> str:
    """``"pdf" | "html" | "markdown" | "text"`` for a body, or :class:`ExtractError` if unsupported.

    The bytes win over the label where they are unambiguous (``%PDF-``, an HTML document start);
    the label wins otherwise; the URL's suffix decides for labels that say nothing.
    """
    media_type = media_type.lower()
    if looks_like_pdf(body):
        return "pdf"
    suffix = url_suffix(url)
    if media_type in PDF_TYPES:
        if looks_like_html(body):
            raise ExtractError(url, "declared a PDF but the body is an HTML page (an error or login page?)")
        raise ExtractError(url, "corrupt PDF: no %PDF header")
    if media_type in HTML_TYPES:
        return "html"
    if media_type in MARKDOWN_TYPES:
        return "markdown"
    if media_type.startswith("text/") and media_type not in NON_PROSE_TEXT_TYPES:
        if looks_like_html(body):
            return "html"
        return "markdown" if suffix in MARKDOWN_SUFFIXES else "text"
    if media_type in UNKNOWN_TYPES:
        if looks_like_html(body):
            return "html"
        by_suffix = SUFFIX_TYPES.get(suffix)
        if by_suffix in HTML_TYPES:
            return "html"
        if by_suffix in MARKDOWN_TYPES:
            return "markdown"
        if by_suffix == "text/plain":
            return "text"
    raise ExtractError(url, f"unsupported content type {media_type or 'unknown'}")


def to_document(resource: Resource, extracted: Extracted, *, source_url: str, sha256: str) -> Document:
    """The :class:`Document` of ``resource`` with the text of ``extracted``.

    Catalog facts win over what the body says about itself (a list's title is chosen by a person; a
    PDF's metadata title is often "Microsoft Word - draft3.docx"), except where the catalog has
    nothing: a title that is only the URL; a year and authors as :func:`merge_facts` decides.
    """
    title = resource.title
    if is_url_title(title, resource.url) and extracted.title:
        title = extracted.title
    year, authors = merge_facts(resource, year=extracted.year, authors=extracted.authors)
    return Document(
        doc_id=resource.id,
        url=resource.url,
        title=title,
        blocks=extracted.blocks,
        source_url=source_url,
        content_type=extracted.content_type,
        kind=resource.kind,
        authors=authors,
        venue=resource.venue,
        year=year,
        topics=resource.topics,
        is_card=False,
        sha256=sha256,
    )


def catalog_card(resource: Resource) -> Document:
    """A one-block Document from catalog facts only, so that a resource whose full text could not
    be had can still be found (by title, authors, venue, topic) and cited.

    The text reads like a reference-list entry, e.g. "GPipe: Efficient Training of Giant Neural
    Networks using Pipeline Parallelism. Yanping Huang et al. NeurIPS 2019. Paper. Topics: Papers,
    Pipeline Parallelism. URL: https://arxiv.org/abs/1811.06965" (the URL as the list wrote it).
    """
    parts = [_sentence(resource.title.strip() or resource.url)]
    if resource.authors:
        parts.append(_sentence(_authors_phrase(resource.authors)))
    venue = (resource.venue or "").strip()
    if resource.year and str(resource.year) not in venue:
        venue = f"{venue} {resource.year}".strip()
    if venue:
        parts.append(_sentence(venue))
    parts.append(_sentence(KIND_LABELS.get(resource.kind, resource.kind.capitalize())))
    if resource.topics:
        parts.append(_sentence("Topics: " + ", ".join(resource.topics)))
    # The address as the list wrote it, not the canonical identity: a reader may follow it.
    parts.append(f"URL: {resource.address}")
    text = " ".join(parts)
    return Document(
        doc_id=resource.id,
        url=resource.url,
        title=resource.title,
        blocks=(Block(text=text),),
        source_url=resource.address,
        content_type="card",
        kind=resource.kind,
        authors=resource.authors,
        venue=resource.venue,
        year=resource.year,
        topics=resource.topics,
        is_card=True,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


KIND_LABELS = {
    "paper": "Paper",
    "repo": "Code repository",
    "docs": "Documentation",
    "article": "Article",
    "video": "Video",
    "slides": "Slides",
}


def _authors_phrase(authors: tuple[str, ...]) -> str:
    names = [a for a in authors if not is_et_al(a)]  # a list's "et al." is a marker, not a name
    if len(names) == 1 and len(names) == len(authors):
        return names[0]
    if len(names) == 2 and len(names) == len(authors):
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al." if names else ""


def _sentence(s: str) -> str:
    s = s.strip()
    return s if s.endswith((".", "!", "?")) else s + "."

