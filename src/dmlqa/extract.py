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
import hashlib
import io
import logging
import mimetypes
import re
import unicodedata
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import charset_normalizer
import lxml.etree
import lxml.html
import trafilatura
from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError

from dmlqa.errors import ExtractError
from dmlqa.models import BLOCK_SEPARATOR, Block, Document, Resource

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
    date: str | None = None
    pages: int | None = None  # PDFs
    #: ``citation_pdf_url`` of a publisher landing page: where the full text is (absolute URL).
    pdf_url: str | None = None

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
    text = decode_text(body, charset)
    if kind == "markdown":
        return extract_markdown(text, url=url)
    return extract_text(text, url=url)


def extract_file(path: Path) -> Extracted:
    """Extract a local file: its type comes from the suffix, corrected by sniffing the bytes."""
    path = Path(path)
    name = str(path)
    try:
        body = path.read_bytes()
    except OSError as e:
        raise ExtractError(name, f"cannot read file: {e.strerror or e}") from e
    content_type = SUFFIX_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
    if content_type is None:
        # an unknown suffix (README, LICENSE, notes.log): text unless it looks binary
        content_type = "application/octet-stream" if b"\x00" in body[:8192] else "text/plain"
    return extract_bytes(body, content_type, url=name)


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
    nothing: a title that is only the URL, or no authors.
    """
    title = resource.title
    if _is_url_title(title, resource.url) and extracted.title:
        title = extracted.title
    return Document(
        doc_id=resource.id,
        url=resource.url,
        title=title,
        blocks=extracted.blocks,
        source_url=source_url,
        content_type=extracted.content_type,
        kind=resource.kind,
        authors=resource.authors or extracted.authors,
        venue=resource.venue,
        year=resource.year,
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

    authors = tuple(a for a in (clean_text(x) for x in meta.get("citation_author", [])) if a)
    if not authors and result is not None and result.author:
        authors = tuple(a.strip() for a in result.author.split(";") if a.strip())
    date = _first(meta, "citation_publication_date", "citation_date", "dc.date") or (
        result.date if result else None
    )
    pdf_url = _first(meta, "citation_pdf_url")
    return Extracted(
        blocks=tuple(blocks),
        content_type="html",
        title=title,
        authors=authors,
        date=date,
        pdf_url=urljoin(url, pdf_url) if pdf_url else None,
    )


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

    title, authors, date = _pdf_metadata(reader)
    return Extracted(
        blocks=tuple(blocks), content_type="pdf", title=title, authors=authors, date=date, pages=n_pages
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


def _pdf_metadata(reader: PdfReader) -> tuple[str | None, tuple[str, ...], str | None]:
    """Title, authors and creation date from the document information, where they are sensible."""
    try:
        meta = reader.metadata
        if meta is None:
            return None, (), None
        title = clean_text(str(meta.title or ""))
        author = clean_text(str(meta.author or ""))
        try:
            created = meta.creation_date
        except Exception:
            created = None
    except Exception as e:
        log.debug("unreadable PDF metadata: %r", e)
        return None, (), None
    if (
        len(title) < 4
        or title.lower() in {"untitled", "title", "none"}
        or re.search(r"\.(dvi|pdf|tex|docx?|pptx?|ps|indd)$", title, re.IGNORECASE)
        or title.lower().startswith("microsoft word")
    ):
        title = ""
    authors: list[str] = []
    if author:
        authors = [a for a in re.split(r";|\band\b", author) if a.strip()]
        if len(authors) == 1 and author.count(",") >= 2:
            authors = author.split(",")
    return (
        title or None,
        tuple(a.strip() for a in authors if a.strip()),
        created.date().isoformat() if created else None,
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
    if len(authors) == 1:
        return authors[0]
    if len(authors) == 2:
        return f"{authors[0]} and {authors[1]}"
    return f"{authors[0]} et al."


def _sentence(s: str) -> str:
    s = s.strip()
    return s if s.endswith((".", "!", "?")) else s + "."


def _describe(e: BaseException) -> str:
    """Short, single-line description of an exception for a report."""
    msg = " ".join(str(e).split())
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
