"""Extract stage: fetched bytes → located text blocks (:class:`Extracted`) → :class:`Document`.

What the bytes are is decided by sniffing first and by the declared type second: anything starting
with ``%PDF-`` is a PDF (GitHub serves PDFs as ``application/octet-stream``), a body that opens like
an HTML document is HTML even when labelled ``text/plain``. Then:

* HTML goes through trafilatura (boilerplate removal) after page chrome that trafilatura's fallback
  extractors sometimes keep (nav bars, headers, footers, cookie banners) has been pruned; headings
  become the ``section`` of the blocks under them.
* PDFs are read page by page with pypdf; each page is one block carrying its 1-based page number so
  that answers can cite pages. A page that fails is skipped, the others are kept.
* Markdown is split at its headings; plain text is one block.

Every way the bytes can be unusable raises :class:`~dmlqa.errors.ExtractError` with a short,
specific reason for the build report; nothing else escapes (pypdf in particular raises plain
``ValueError``/``KeyError``/... on damaged files, so its calls are wrapped per document and per page).
"""

from __future__ import annotations

import codecs
import datetime
import hashlib
import io
import json
import logging
import mimetypes
import re
import unicodedata
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import charset_normalizer
import lxml.etree
import lxml.html
import trafilatura
from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError

from dmlqa.catalog.urls import arxiv_year
from dmlqa.errors import ExtractError
from dmlqa.models import BLOCK_SEPARATOR, Block, Document, Resource, is_et_al

log = logging.getLogger(__name__)
# pypdf warns about every small defect of real-world PDFs; those are not our news.
logging.getLogger("pypdf").setLevel(logging.ERROR)

PDF_TYPES = frozenset({"application/pdf", "application/x-pdf", "application/acrobat"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
#: Declared types that say nothing about the content: decided by sniffing and the URL's suffix.
UNKNOWN_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
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

#: A page whose text (title lines aside) has fewer words than this has nothing worth indexing.
MIN_HTML_WORDS = 5
#: A PDF with fewer non-space characters per page than this has no usable text layer.
MIN_PDF_CHARS_PER_PAGE = 20

#: Page chrome removed before trafilatura sees the page. trafilatura drops most of it by itself,
#: but its fallback extractors (used on thin pages such as publisher landing pages) keep nav bars.
PRUNE_XPATH = [
    "//nav",
    "//footer",
    "//header[not(ancestor::article) and not(ancestor::main)]",
    "//*[@role='navigation' or @role='banner' or @role='contentinfo']",
    "//*[@role='dialog' or @role='alertdialog']",
    "//*[contains(translate(@id, 'COOKIE', 'cookie'), 'cookie')]",
    "//*[contains(translate(@class, 'COOKIE', 'cookie'), 'cookie')]",
    "//*[contains(@id, 'consent') or contains(@class, 'consent')]",
    "//*[contains(@class, 'skip-link') or contains(@class, 'skip-to-content')]",
    "//*[contains(@class, 'breadcrumb') or contains(@id, 'breadcrumb')]",
    "//*[contains(@aria-label, 'readcrumb')]",
    "//*[contains(@class, 'edit-page') or contains(@class, 'edit-this-page')]",
    "//*[contains(@class, 'edit-link')]",
    "//*[contains(@class, 'feedback')]",
    "//a[contains(@href, '/edit/')]",
]
#: trafilatura's "extensive" date search reads the footer's "© 2026" as a publication date.
DATE_PARAMS = {"extensive_search": False, "original_date": True}


@dataclass(frozen=True)
class Extracted:
    """Text of one body, block by block, with the metadata the body itself carries."""

    blocks: tuple[Block, ...]
    content_type: str  # "pdf" | "html" | "markdown" | "text"
    title: str | None = None
    authors: tuple[str, ...] = ()
    date: str | None = None  # the date string the body states (or the PDF's creation date)
    pages: int | None = None  # PDFs
    #: ``citation_pdf_url`` of a publisher landing page: where the full text is (absolute URL).
    pdf_url: str | None = None
    #: Publication year the body states (meta tags, arXiv stamp, copyright line), validated.
    year: int | None = None

    @property
    def text(self) -> str:
        """All blocks joined, as a :class:`Document` built from them would show them."""
        return BLOCK_SEPARATOR.join(b.text for b in self.blocks)


# -- public entry points ---------------------------------------------------------------------------
def extract_bytes(body: bytes, content_type: str, *, url: str = "", charset: str | None = None) -> Extracted:
    """Extract the text of one fetched body.

    ``content_type`` may be the bare media type or the whole header value (``text/html;
    charset=iso-8859-1``); ``charset`` overrides the one in it. ``url`` names the body in errors and
    tells markdown from plain text when the server says ``text/plain`` (GitHub raw files).
    Raises :class:`ExtractError` when no usable text comes out.
    """
    if not body.strip():
        raise ExtractError(url, "empty body")
    media_type, declared = _parse_content_type(content_type)
    kind = detect_kind(body, media_type, url=url)
    charset = charset or declared
    if kind == "pdf":
        return extract_pdf(body, url=url)
    if kind == "html":
        return extract_html(body, url=url, charset=charset)
    if _looks_binary(body):
        raise ExtractError(url, "binary data, not text (no PDF, HTML, markdown or text could be read from it)")
    text = decode_text(body, charset)
    if kind == "markdown":
        return extract_markdown(text, url=url)
    return extract_text(text, url=url)


def _looks_binary(body: bytes) -> bool:
    """An image, an archive or random bytes: in the first 8 KB, over a tenth of the characters are
    control characters or bytes that are no UTF-8 (a legacy-encoded text has a few, not that many)."""
    head = body[:8192].decode("utf-8", errors="replace")
    bad = sum(1 for ch in head if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\f\r"))
    return bad > 0.1 * max(1, len(head))


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
                raise ExtractError(name, _too_large(size, max_bytes))
            with path.open("rb") as fh:
                body = fh.read(max_bytes + 1)
            if len(body) > max_bytes:
                raise ExtractError(name, _too_large(len(body), max_bytes))
        else:
            body = path.read_bytes()
    except OSError as e:
        raise ExtractError(name, f"cannot read file: {e.strerror or e}") from e
    content_type = SUFFIX_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
    if content_type is None:
        # an unknown suffix (README, LICENSE, notes.log): text unless it looks binary
        content_type = "application/octet-stream" if b"\x00" in body[:8192] else "text/plain"
    return extract_bytes(body, content_type, url=name)


def _too_large(size: int, cap: int) -> str:
    from dmlqa.catalog.local import too_large_reason

    return too_large_reason(size, cap)


def detect_kind(body: bytes, media_type: str, *, url: str = "") -> str:
    """``"pdf" | "html" | "markdown" | "text"`` for a body, or :class:`ExtractError` if unsupported.

    The bytes win over the label where they are unambiguous (``%PDF-``, an HTML document start);
    the label wins otherwise; the URL's suffix decides for labels that say nothing.
    """
    media_type = media_type.lower()
    if _is_pdf(body):
        return "pdf"
    suffix = _url_suffix(url)
    if media_type in PDF_TYPES:
        if _looks_html(body):
            raise ExtractError(url, "declared a PDF but the body is an HTML page (an error or login page?)")
        raise ExtractError(url, "corrupt PDF: no %PDF header")
    if media_type in HTML_TYPES:
        return "html"
    if media_type in MARKDOWN_TYPES:
        return "markdown"
    if media_type.startswith("text/") and media_type not in NON_PROSE_TEXT_TYPES:
        if _looks_html(body):
            return "html"
        return "markdown" if suffix in (".md", ".markdown") else "text"
    if media_type in UNKNOWN_TYPES:
        if _looks_html(body):
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
    if _is_url_title(title, resource.url) and extracted.title:
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
    Pipeline Parallelism. URL: https://arxiv.org/abs/1811.06965".
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
    parts.append(f"URL: {resource.url}")
    text = " ".join(parts)
    return Document(
        doc_id=resource.id,
        url=resource.url,
        title=resource.title,
        blocks=(Block(text=text),),
        source_url=resource.url,
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


# -- HTML ------------------------------------------------------------------------------------------
def extract_html(body: bytes, *, url: str = "", charset: str | None = None) -> Extracted:
    """Main text of an HTML page, one block per heading-delimited section."""
    text = decode_text(body, charset, html=True)
    try:
        # Parse our own decoding as UTF-8 bytes: lxml refuses str input that carries an XML
        # encoding declaration, and a forced parser encoding keeps a lying <meta charset> out.
        tree = lxml.html.document_fromstring(
            text.encode("utf-8", "surrogatepass"), parser=lxml.html.HTMLParser(encoding="utf-8")
        )
    except (lxml.etree.ParserError, ValueError) as e:
        raise ExtractError(url, "no readable text in the HTML page") from e
    meta = _meta_tags(tree)
    try:
        result = trafilatura.bare_extraction(
            tree,
            url=url if url.startswith(("http://", "https://")) else None,
            include_comments=False,
            favor_recall=True,
            with_metadata=True,
            prune_xpath=PRUNE_XPATH,
            date_extraction_params=DATE_PARAMS,
        )
    except Exception as e:  # trafilatura is robust, but a crash in it must not stop a build
        log.warning("trafilatura failed on %s: %r", url, e)
        result = None

    title = _first(meta, "citation_title", "dc.title") or (result.title if result else None) or None
    title = clean_text(title) if title else None
    blocks = _html_blocks(result.text or "", result.body) if result is not None else []
    if _word_count(blocks, title) < MIN_HTML_WORDS:
        # Scholarly landing pages that render the abstract with scripts still carry it in their
        # metadata. Elsewhere a meta description is a marketing line, not worth indexing alone.
        scholarly = any(name.startswith(("citation_", "dc.")) for name in meta)
        abstract = _first(meta, "citation_abstract", "dc.description", "description", "og:description")
        abstract = clean_text(abstract) if abstract and scholarly else ""
        if len(abstract.split()) < MIN_HTML_WORDS:
            raise ExtractError(url, "no readable text in the HTML page")
        blocks = [Block(f"{title}\n{abstract}" if title else abstract, section="Abstract")]

    authors = _html_authors(meta, result.author if result is not None else None)
    date, year = _html_date(meta, tree, result.date if result is not None else None)
    pdf_url = _first(meta, "citation_pdf_url")
    return Extracted(
        blocks=tuple(blocks),
        content_type="html",
        title=title,
        authors=authors,
        date=date,
        pdf_url=urljoin(url, pdf_url) if pdf_url else None,
        year=year,
    )


#: Meta tags that state when a page's work was published, most specific first.
HTML_DATE_META = (
    "citation_publication_date",
    "citation_date",
    "citation_online_date",
    "citation_year",
    "citation_cover_date",
    "dc.date.issued",
    "dc.date",
    "dcterms.issued",
    "dcterms.date",
    "prism.publicationdate",
    "article:published_time",
)
#: One-author-per-tag meta tags (Google Scholar's ``citation_author`` and Dublin Core's creator).
HTML_AUTHOR_META = ("citation_author", "dc.creator", "dcterms.creator")


def _html_authors(meta: dict[str, list[str]], trafilatura_author: str | None) -> tuple[str, ...]:
    """Authors a page names: repeated ``citation_author`` tags first, then ``<meta name=author>``,
    then trafilatura's guess; junk ("Copyright", "admin", e-mail addresses) rejected throughout."""
    for name in HTML_AUTHOR_META:
        if meta.get(name):
            found = clean_authors(meta[name])
            if found:
                return found
    for raw in (_first(meta, "author"), trafilatura_author):
        if raw:
            found = clean_authors(split_authors(raw))
            if found:
                return found
    return ()


def _html_date(
    meta: dict[str, list[str]], tree: lxml.html.HtmlElement, trafilatura_date: str | None
) -> tuple[str | None, int | None]:
    """(date string, year) from the page's meta tags, its JSON-LD ``datePublished``, or trafilatura."""
    candidates = [v for name in HTML_DATE_META for v in meta.get(name, [])[:1]]
    candidates += _json_ld_dates(tree)
    if trafilatura_date:
        candidates.append(trafilatura_date)
    for c in candidates:
        year = year_of(c)
        if year is not None:
            return c, year
    return (candidates[0] if candidates else None), None


def _json_ld_dates(tree: lxml.html.HtmlElement) -> list[str]:
    """``datePublished`` values of the page's JSON-LD blocks (schema.org articles, papers)."""
    found: list[str] = []
    for el in tree.iter("script"):
        if "ld+json" not in (el.get("type") or "").lower() or not el.text or len(el.text) > 200_000:
            continue
        try:
            data = json.loads(el.text)
        except ValueError:
            continue
        stack = [data]
        while stack and len(found) < 5:
            item = stack.pop()
            if isinstance(item, dict):
                value = item.get("datePublished")
                if isinstance(value, str):
                    found.append(value)
                stack.extend(v for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                stack.extend(v for v in item if isinstance(v, dict | list))
    return found


def _meta_tags(tree: lxml.html.HtmlElement) -> dict[str, list[str]]:
    """``<meta name|property=... content=...>`` values by lower-case name, in page order."""
    found: dict[str, list[str]] = {}
    for el in tree.iter("meta"):
        name = (el.get("name") or el.get("property") or "").strip().lower()
        content = (el.get("content") or "").strip()
        if name and content:
            found.setdefault(name, []).append(content)
    return found


def _first(meta: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        if meta.get(name):
            return meta[name][0]
    return None


_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")


def _html_blocks(text: str, body: lxml.etree._Element | None) -> list[Block]:
    """Split trafilatura's text at the headings it kept (``<head>`` elements of its output tree).

    Some pages (READMEs rendered by a lenient Markdown engine) also carry Markdown as literal
    text: ``#`` lines outside code are taken as headings too, and links reduced to their text.
    """
    heads: deque[str] = deque()
    code_lines: set[str] = set()
    if body is not None:
        heads.extend(h for h in (_norm("".join(el.itertext())) for el in body.iter("head")) if h)
        for el in body.iter("code"):
            code_lines.update(_norm(line) for line in "".join(el.itertext()).split("\n"))
    items: list[tuple[str, str | None]] = []
    for line in text.split("\n"):
        n = _norm(line)
        # Look a few headings ahead: trafilatura may drop a heading from the text but not the tree.
        hit = next((i for i, h in enumerate(list(heads)[:4]) if h == n), None) if n else None
        if hit is not None:
            for _ in range(hit + 1):
                heads.popleft()
            items.append((line, n))
            continue
        if n and n not in code_lines:
            line = _LINK.sub(r"\1", _IMAGE.sub(r"\1", line))
            m = _ATX.match(line)
            if m:
                heading = _norm(m.group(2))
                items.append((heading, heading))
                continue
            if (
                _SETEXT.match(line)
                and len(n) >= 3
                and items
                and items[-1][1] is None
                and items[-1][0].strip()
            ):
                heading = _norm(items[-1][0])
                items[-1] = (heading, heading)
                continue
        items.append((line, None))
    return _sectionize(items)


def _sectionize(items: Iterable[tuple[str, str | None]]) -> list[Block]:
    """Group ``(line, heading-or-None)`` items into one block per section.

    A heading keeps its text as the first line of its block (its words help retrieval). A heading
    directly followed by another heading has no block of its own: its line moves into the next
    section's block, so nothing is lost and no chunk consists of a lone heading.
    """
    blocks: list[Block] = []
    section: str | None = None
    lines: list[str] = []
    has_body = False

    def flush() -> None:
        t = clean_text("\n".join(lines))
        if t:
            blocks.append(Block(text=t, section=section))

    for line, heading in items:
        if heading is not None:
            if has_body:
                flush()
                lines = []
            section = heading
            lines.append(line)
            has_body = False
        else:
            lines.append(line)
            has_body = has_body or bool(line.strip())
    if has_body or not blocks:
        flush()
    return blocks


def _word_count(blocks: Iterable[Block], title: str | None) -> int:
    """Words of the blocks, not counting lines that merely repeat the title."""
    t = _norm(title or "")
    return sum(len(line.split()) for b in blocks for line in b.text.split("\n") if _norm(line) != t)


def _norm(s: str) -> str:
    return " ".join(s.split())


# -- PDF -------------------------------------------------------------------------------------------
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

    raw: list[tuple[int, str]] = []
    errors: list[str] = []
    for i in range(n_pages):
        try:
            page_text = reader.pages[i].extract_text() or ""
        except Exception as e:
            log.debug("%s: page %d unreadable: %r", url, i + 1, e)
            errors.append(f"page {i + 1}: {_describe(e)}")
            continue
        raw.append((i + 1, page_text))
    if errors:
        log.info("%s: %d of %d PDF pages unreadable (%s)", url, len(errors), n_pages, errors[0])

    vocabulary = _hyphenated_vocabulary(t for _, t in raw)
    blocks = []
    for number, page_text in raw:
        t = clean_text(dehyphenate(page_text, vocabulary))
        if t:
            blocks.append(Block(text=t, page=number))
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


_WORDS = re.compile(r"\w+(?:-\w+)*")
_BROKEN_WORD = re.compile(r"(\w+)-[ \t]*\n[ \t]*([a-z]\w*)")


def _hyphenated_vocabulary(texts: Iterable[str]) -> set[str]:
    """Lower-cased words (hyphenated compounds included) that occur within a line of ``texts``."""
    vocab: set[str] = set()
    for t in texts:
        vocab.update(w.lower() for w in _WORDS.findall(t))
    return vocab


def dehyphenate(text: str, vocabulary: set[str] | None = None) -> str:
    """Join words broken by a hyphen at a line end ("paralleliz-\\ning" → "parallelizing").

    A compound that the document writes with a hyphen elsewhere ("data-parallel") keeps its
    hyphen; without that evidence the parts are joined, which is right for most line-end breaks.
    """
    vocab = vocabulary if vocabulary is not None else _hyphenated_vocabulary([text])

    def join(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        hyphenated = f"{a}-{b}".lower()
        if hyphenated in vocab and (a + b).lower() not in vocab:
            return f"{a}-{b}"
        return a + b

    return _BROKEN_WORD.sub(join, text)


# -- markdown and plain text -----------------------------------------------------------------------
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
#: Inline HTML in Markdown (READMEs centre logos with <p align="center"><img ...>).
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")


def extract_markdown(text: str, *, url: str = "") -> Extracted:
    """Markdown split at its ATX (``#``) and setext headings; fenced code is kept as text but its
    ``#`` comment lines are not headings. Links and images are reduced to their text, inline HTML
    tags (outside code) dropped."""
    text = _HTML_COMMENT.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    title = None
    front = re.match(r"---\n(.*?)\n(?:---|\.\.\.)\n", text, re.DOTALL)
    if front:
        text = text[front.end() :]
        m = re.search(r"^title:\s*[\"']?(.+?)[\"']?\s*$", front.group(1), re.MULTILINE)
        title = m.group(1).strip() if m else None
    items: list[tuple[str, str | None]] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            else:
                items.append((line, None))
            continue
        if m:
            fence = m.group(1)
            continue
        line = _HTML_TAG.sub("", _LINK.sub(r"\1", _IMAGE.sub(r"\1", line)))
        h = _ATX.match(line)
        if h:
            heading = _norm(h.group(2))
            items.append((heading, heading))
            title = title or (heading if len(h.group(1)) == 1 else None)
            continue
        if _SETEXT.match(line) and items and items[-1][1] is None and items[-1][0].strip():
            heading = _norm(items[-1][0])
            items[-1] = (heading, heading)
            title = title or (heading if line.strip().startswith("=") else None)
            continue
        items.append((line, None))
    blocks = _sectionize(items)
    if not blocks:
        raise ExtractError(url, "no text in the markdown file")
    return Extracted(blocks=tuple(blocks), content_type="markdown", title=title)


def extract_text(text: str, *, url: str = "") -> Extracted:
    """Plain text as a single block."""
    cleaned = clean_text(text)
    if not cleaned:
        raise ExtractError(url, "no text in the file")
    return Extracted(blocks=(Block(text=cleaned),), content_type="text")


# -- decoding and cleaning -------------------------------------------------------------------------
#: Labels that WHATWG maps to windows-1252: servers say latin-1 and mean cp1252 (curly quotes, €).
_CP1252_ALIASES = frozenset({"iso8859-1", "ascii", "cp1252"})
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.\-]+)", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9_.\-]+)", re.IGNORECASE)


def decode_text(body: bytes, charset: str | None = None, *, html: bool = False) -> str:
    """Decode a text body; never raises.

    Order: byte-order mark; the declared charset (header, then ``<meta>``/XML declaration for
    HTML) if the bytes are valid in it; UTF-8 if they are valid UTF-8; windows-1252 when the text
    decoded that way looks like Western prose (charset detectors are unreliable on short Western
    text); charset_normalizer's guess; windows-1252 with replacement characters as the last resort.
    """
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if body.startswith(bom):
            return body[len(bom) :].decode(encoding, errors="replace")
    declared = [charset]
    if html:
        head = body[:4096]
        declared += [
            m.group(1).decode("ascii") for m in (_META_CHARSET.search(head), _XML_ENCODING.search(head)) if m
        ]
    for label in declared:
        codec = _codec(label)
        if codec is None:
            continue
        if codec == "cp1252":
            # Servers send "charset=iso-8859-1" by default for pages that are really UTF-8; valid
            # multi-byte UTF-8 is practically never intended as latin-1.
            try:
                return body.decode("utf-8")
            except UnicodeDecodeError:
                return _decode_cp1252(body)
        try:
            return body.decode(codec)
        except UnicodeDecodeError:
            log.debug("body is not valid %s as declared", codec)
            if codec == "utf-8" and _mostly_utf8(body):
                return body.decode("utf-8", errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    western = _decode_cp1252(body)
    if _looks_western(western):
        return western
    best = charset_normalizer.from_bytes(body[:200_000]).best()
    if best is not None and best.encoding:
        try:
            return body.decode(best.encoding, errors="replace")
        except LookupError:
            pass
    return western


def _codec(label: str | None) -> str | None:
    """Python codec name for a charset label, cp1252 for the labels browsers read as cp1252."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    return "cp1252" if name in _CP1252_ALIASES else name


def _decode_cp1252(body: bytes) -> str:
    """windows-1252, with the five bytes it leaves undefined read as latin-1 (as browsers do)."""
    try:
        return body.decode("cp1252")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="_dmlqa_latin1")


def _latin1_fallback(e: UnicodeError) -> tuple[str, int]:
    """Codec error handler: undecodable bytes become the latin-1 character of the same value."""
    if not isinstance(e, UnicodeDecodeError):
        raise e
    return e.object[e.start : e.end].decode("latin-1"), e.end


codecs.register_error("_dmlqa_latin1", _latin1_fallback)


def _mostly_utf8(body: bytes) -> bool:
    """Valid UTF-8 apart from a few stray bytes (a cp1252 character pasted into a UTF-8 page)."""
    bad = body.decode("utf-8", errors="replace").count("\ufffd")
    return bad <= max(2, len(body) // 1000)


_WESTERN_PUNCT = frozenset("“”‘’‚„–—…€•™©®°±×÷·«»§¶¢£¥¹²³¼½¾¿¡ ")


def _looks_western(text: str) -> bool:
    """True when a cp1252 reading is plausible: few non-ASCII characters, nearly all of them Latin
    letters or common typographic punctuation (Cyrillic or CJK bytes read as cp1252 give mostly
    non-ASCII letter soup and are left to the charset detector)."""
    non_ascii = [c for c in text if ord(c) > 127]
    if not non_ascii:
        return True
    letters = sum(1 for c in text if c.isalpha())
    if len(non_ascii) > 0.25 * max(letters, 1):
        return False
    plausible = sum(1 for c in non_ascii if c in _WESTERN_PUNCT or (c.isalpha() and ord(c) < 0x250))
    return plausible >= 0.9 * len(non_ascii)


_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})
#: C0/C1 controls except tab and newline, plus soft hyphens, zero-width characters and BOMs.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200d\u2060\ufeff\ufffe\uffff]")
_ODD_SPACES = re.compile(r"[\t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")


def clean_text(text: str) -> str:
    """Normalise text for indexing: NFC, ligatures expanded, invisible/control characters dropped,
    runs of spaces collapsed, lines stripped, at most one blank line in a row."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _INVISIBLE.sub("", text.translate(_LIGATURES))
    text = _ODD_SPACES.sub(" ", text)
    text = re.sub(r" {2,}", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


# -- facts: year and authors -----------------------------------------------------------------------
#: Publication years outside ``MIN_YEAR`` .. next year are misreadings (a page count, a version).
MIN_YEAR = 1950


def max_year() -> int:
    """The latest plausible publication year: next year (proceedings are dated ahead)."""
    return datetime.date.today().year + 1


def valid_year(value: object) -> int | None:
    """``value`` as a publication year (an int or a 4-digit string in 1950..next year), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*\d{4}\s*", value):
        value = int(value)
    if isinstance(value, int) and MIN_YEAR <= value <= max_year():
        return value
    return None


_YEAR_IN = re.compile(r"(?<!\d)(1[89]\d\d|2\d\d\d)(?!\d)")


def year_of(date: str | None) -> int | None:
    """The year of a date as pages write it ("2020/05/13", "2020-05-13T10:00Z", "13 May 2020")."""
    if not date:
        return None
    m = _YEAR_IN.search(date)
    return valid_year(int(m.group(1))) if m else None


_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
#: The stamp arXiv prints up the left margin of page 1: "arXiv:1910.02054v3 [cs.LG] 13 May 2020".
_ARXIV_STAMP = re.compile(
    r"arXiv:\s*(?P<id>\d{4}\.\d{4,5}|[a-z][a-z.\-]*/\d{7})(?:v\d+)?\s*\[[^\]\n]{1,24}\]"
    rf"(?:\s*(?P<day>\d{{1,2}})\s+(?:{_MONTHS})[a-z]*\.?\s+(?P<year>\d{{4}}))?",
    re.IGNORECASE,
)
#: "© 2021 Association for Computing Machinery", "Copyright 2020 by the author(s)", "c© 2018".
_COPYRIGHT_YEAR = re.compile(r"(?:©|\bCopyright\b)\s*(?:©\s*)?(?:(?:19|20)\d\d\s*[-–]\s*)?((?:19|20)\d\d)\b")
#: A line naming a venue: "33rd Conference on ... (NeurIPS 2019)", "SC20, November 9-19, 2020".
_VENUE_WORD = re.compile(r"\b(?:Conference|Symposium|Proceedings|Workshop|Transactions|Journal)\b")
_VENUE_ACRONYM = re.compile(
    r"\b(?:NeurIPS|NIPS|ICML|ICLR|MLSys|SysML|OSDI|SOSP|NSDI|EuroSys|PPoPP|ASPLOS|ISCA|MICRO|HPCA|VLDB|"
    r"SIGMOD|KDD|HPDC|IPDPS|SoCC|ATC|SC|CVPR|ICCV|ECCV|AAAI|IJCAI|ACL|EMNLP|NAACL|SIGCOMM|FAST|ICS|CLUSTER)"
    r"\s?['’‘]?\s?(?P<yy>\d{2}|\d{4})\b"
)
#: Producers that print a page rather than typeset a paper: their creation date is the print date.
_PRINTERS = re.compile(r"skia|chrom|print|quartz|wkhtml|safari|firefox|mozilla|webkit|cairo|electron", re.I)


def pdf_year(first_page: str, *, created: str | None = None, producer: str = "") -> int | None:
    """The publication year a PDF states on its first page, else (if plausible) its creation year.

    In order: arXiv's margin stamp (the date of that version; its id when the date is unreadable), a
    copyright line, a venue line ("SC20, November 9-19, 2020", "(NeurIPS 2019)"), and last the
    metadata's creation date, only when the producer typesets rather than prints and no year on the
    page contradicts it (a later year mentioned, or one more than two years after every year named).
    """
    m = _ARXIV_STAMP.search(first_page)
    if m:
        year = valid_year(int(m.group("year"))) if m.group("year") else None
        year = year or arxiv_year(m.group("id"))
        if year:
            return year
    for m in _COPYRIGHT_YEAR.finditer(first_page):
        if year := valid_year(int(m.group(1))):
            return year
    for line in first_page.splitlines():
        if "et al" in line:  # a citation, not the paper's own venue
            continue
        acronym = _VENUE_ACRONYM.search(line)
        if acronym is None and not _VENUE_WORD.search(line):
            continue
        years = [y for y in map(int, re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", line)) if valid_year(y)]
        if years:
            return years[0]
        if acronym is not None and len(acronym.group("yy")) == 2 and (year := valid_year(2000 + int(acronym["yy"]))):
            return year
    year = year_of(created)
    if year is None or _PRINTERS.search(producer or ""):
        return None
    named = [y for y in map(int, _YEAR_IN.findall(first_page)) if valid_year(y)]
    if named and (max(named) > year or year > max(named) + 2):
        return None
    return year


#: Author strings that name no person: placeholders of authoring tools and page furniture.
_JUNK_AUTHOR_WORDS = frozenset({
    "copyright", "admin", "administrator", "unknown", "user", "anonymous", "microsoft", "owner", "root",
    "guest", "default", "none", "null", "n/a", "untitled", "author", "authors", "editor", "webmaster",
})
_MAX_AUTHOR_CHARS = 60
#: Footnote marks after names in PDF metadata ("Aaron Harlap†").
_NAME_MARKS = re.compile(r"[†‡*§¶⋆∗]+")
_ET_AL = re.compile(r"(?:,?\s*(?:and\s+)?(?:et\.?\s*al\.?|others))\s*$", re.IGNORECASE)


def clean_author(name: str) -> str | None:
    """One author's name, tidied ("Rajbhandari, Samyam" → "Samyam Rajbhandari"), or None for junk.

    Junk: placeholder words ("Copyright", "Admin", "user", "Unknown", "Microsoft Word - x.docx"), e-mail
    addresses, URLs, anything with digits or LaTeX markup, one letter, a login, or over 60 characters.
    """
    n = _NAME_MARKS.sub("", clean_text(name).replace("~", " "))
    n = _ET_AL.sub("", " ".join(n.split())).strip(" ,;:")
    n = re.sub(r"^by\s+", "", n, flags=re.IGNORECASE)
    if "," in n:
        last, _, first = n.partition(",")
        if "," in first or not first.strip() or len(last.split()) > 3:
            return None
        n = f"{first.strip()} {last.strip()}"
    words = n.split()
    lowered = n.lower()
    if (
        not words
        or len(n) > _MAX_AUTHOR_CHARS
        or len(words) > 6
        or sum(c.isalpha() for c in n) < 2
        or re.search(r"[\d@\\{}$^_|<>#%=/]|://|\bwww\.|\.(?:com|org|net|edu|io)\b", n)
        or "©" in n
        or "rights reserved" in lowered
        or _JUNK_AUTHOR_WORDS & set(lowered.replace(".", " ").split())
        or (len(words) == 1 and (n.islower() or len(n) < 3))
    ):
        return None
    return n


def clean_authors(names: Iterable[str]) -> tuple[str, ...]:
    """The names that are names (see :func:`clean_author`), tidied, each once, in order."""
    out: dict[str, str] = {}
    for raw in names:
        n = clean_author(raw)
        if n is not None:
            out.setdefault(n.casefold(), n)
    return tuple(out.values())


def split_authors(text: str) -> list[str]:
    """An author field as one string ("A B; C D", "A B, C D and E F", "Smith, John") → its names.

    Semicolons separate names when present (each may be "Last, First"); otherwise commas, " and " and
    "&" do, except in a lone "Last, First".
    """
    text = " ".join(text.split())
    if ";" in text:
        return [p for p in text.split(";") if p.strip()]
    last, comma, first = text.partition(",")
    if (
        comma
        and "," not in first
        and not re.search(r"\s(?:and|&)\s", text)
        and len(last.split()) == 1
        and 1 <= len(first.split()) <= 2
    ):
        return [text]
    return [p for p in re.split(r",|\s+and\s+|\s*&\s*", text) if p.strip()]


def _person_key(name: str) -> tuple[str, str]:
    """(surname, first initial), accent- and case-free: "Y. Huang" and "Yanping Huang" share a surname."""
    n = unicodedata.normalize("NFKD", _ET_AL.sub("", name)).encode("ascii", "ignore").decode().lower()
    if "," in n:
        last, _, first = n.partition(",")
        n = f"{first} {last}"
    words = re.findall(r"[a-z][a-z'\-]*", n)
    if not words:
        return ("", "")
    return (words[-1], words[0][0] if len(words) > 1 else "")


def same_author(a: str, b: str) -> bool:
    """True when two spellings name one person (same surname; first initials agree where both exist)."""
    ka, kb = _person_key(a), _person_key(b)
    return bool(ka[0]) and ka[0] == kb[0] and (not ka[1] or not kb[1] or ka[1] == kb[1])


def merge_authors(catalog: Sequence[str], extracted: Sequence[str]) -> tuple[str, ...]:
    """The author list of a document: the catalog's, unless it has none, or the body names more
    authors in a list that starts with the catalog's first author or contains all of the catalog's
    (lists often write only "A et al."). The one place this rule lives."""
    catalog, extracted = tuple(catalog), tuple(extracted)
    named = [a for a in catalog if not is_et_al(a)]
    if not extracted:
        return catalog
    if not named:
        return extracted
    if len(extracted) > len(named) and (
        same_author(extracted[0], named[0]) or all(any(same_author(c, e) for e in extracted) for c in named)
    ):
        return extracted
    return catalog


def merge_facts(
    resource: Resource, *, year: int | None, authors: Sequence[str]
) -> tuple[int | None, tuple[str, ...]]:
    """(year, authors) of a document from its catalog entry and what its own text states.

    The catalog's year wins when it has a valid one (a person chose it; a PDF's date may be a later
    version's); otherwise the body's validated year. Authors as :func:`merge_authors` decides.
    """
    return (
        valid_year(resource.year) or valid_year(year),
        merge_authors(resource.authors, clean_authors(authors)),
    )


# -- small helpers ---------------------------------------------------------------------------------
def _parse_content_type(value: str) -> tuple[str, str | None]:
    """``("text/html", "iso-8859-1")`` from ``"text/html; charset=ISO-8859-1"``."""
    media_type, _, params = (value or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return media_type.strip().lower(), charset


def _is_pdf(body: bytes) -> bool:
    # The PDF header may follow a little junk (readers accept it within the first 1024 bytes), but
    # an HTML page that merely mentions "%PDF-" near its top is still HTML.
    if body.lstrip()[:5] == b"%PDF-":
        return True
    return b"%PDF-" in body[:1024] and not _looks_html(body)


_HTML_START = re.compile(
    rb"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b",
    re.IGNORECASE | re.DOTALL,
)


def _looks_html(body: bytes) -> bool:
    head = body[:2048]
    if head.startswith(codecs.BOM_UTF8):
        head = head[3:]
    return bool(_HTML_START.match(head))


def _url_suffix(url: str) -> str:
    path = urlsplit(url).path if "://" in url else url
    return Path(path).suffix.lower()


def _is_url_title(title: str, url: str) -> bool:
    """True when a catalog title carries no information beyond the link itself."""
    t = title.strip()
    return not t or t == url or bool(re.match(r"^(?:https?://|www\.)\S+$", t))


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


def _describe(e: BaseException) -> str:
    """Short, single-line description of an exception for a report."""
    msg = " ".join(str(e).split())
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
