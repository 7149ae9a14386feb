"""What a scholarly landing page says about its paper: PDF link, title, DOI, arXiv ids.

Publisher pages carry Highwire-style ``<meta name="citation_*">`` tags because Google Scholar's
inclusion guidelines ask for them; Dublin Core (``dc.identifier``) and PRISM tags say the same in
other words. The resolver needs the PDF link (:func:`dmlqa.acquire.resolve.citation_pdf_url`) and,
when that PDF is paywalled or missing, the title, DOI and arXiv id the open-access look-ups
(:mod:`dmlqa.acquire.openaccess`) go by. One parser reads them all, so the page is parsed once and
the resolver and the look-ups never disagree about what a page says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

from dmlqa.catalog.urls import absolute_link, arxiv_id, bare_arxiv_id

#: Only so much of a page is read: the head, where the tags are, comes first.
_PAGE_LIMIT = 2 * 1024 * 1024
#: arXiv links a page may name before the rest are ignored (a reference list links hundreds).
_MAX_LINKED = 20

#: A DOI anywhere in a string: ``10.<registrant>/<suffix>``, the suffix up to white space or quotes.
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"'<>]+)")
#: A bare arXiv id as ``citation_arxiv_id`` or ``arXiv:`` spells it (the version is dropped).

_TITLE_NAMES = ("citation_title", "dc.title", "prism.title")
_DOI_NAMES = ("citation_doi", "prism.doi", "bepress_citation_doi", "dc.identifier", "dc.identifier.doi")


@dataclass(frozen=True)
class PageMeta:
    """The paper facts one HTML page states (every field may be unknown).

    ``arxiv_ids`` come from tags that name the page's own preprint; ``linked_arxiv_ids`` are arXiv
    links anywhere on the page, which may be the paper's preprint or works it cites, so they are
    only used once a title check confirms them. ``scholarly`` is True when the page carries any
    ``citation_*`` tag: it presents itself as a paper's landing page.
    """

    pdf_url: str | None = None
    title: str = ""
    doi: str | None = None
    arxiv_ids: tuple[str, ...] = ()
    linked_arxiv_ids: tuple[str, ...] = ()
    scholarly: bool = False


def find_doi(text: str) -> str | None:
    """The first DOI in ``text`` (a URL path, ``doi:10.…``, ``https://doi.org/10.…``), else None.

    Trailing punctuation a sentence or a URL adds (``.``, ``,``, ``)``) is not part of it.
    """
    m = _DOI.search(unquote(text or ""))
    if m is None:
        return None
    found = m.group(1).rstrip(".,;:)]}")
    return found if "/" in found and not found.endswith("/") else None


def url_doi(url: str) -> str | None:
    """The DOI a publisher URL carries in its path (doi.org, ACM, Springer, Wiley, T&F, …), else None.

    Only the path is read: a query string names other things (``?ref=10.1000/x``).
    """
    try:
        path = urlsplit(url.strip()).path
    except ValueError:
        return None
    return find_doi(path)


class _MetaParser(HTMLParser):
    """Collects the first value of each tag of interest, ``<base href>`` and arXiv links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pdf_url: str | None = None
        self.base_href: str | None = None
        self.title = ""
        self.doi: str | None = None
        self.arxiv_ids: list[str] = []
        self.hrefs: list[str] = []
        self.scholarly = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base_href is None:
            href = dict(attrs).get("href")
            if href:
                self.base_href = href.strip()
        elif tag in ("a", "link"):
            href = (dict(attrs).get("href") or "").strip()
            if "arxiv.org/" in href.lower() and len(self.hrefs) < 10 * _MAX_LINKED:
                self.hrefs.append(href)
        elif tag == "meta":
            values = {k.lower(): (v or "") for k, v in attrs}
            name = (values.get("name") or values.get("property") or "").strip().lower()
            content = values.get("content", "").strip()
            if not content:
                return
            if name.startswith("citation_"):
                self.scholarly = True
            if name == "citation_pdf_url" and self.pdf_url is None:
                self.pdf_url = content
            elif name in _TITLE_NAMES and not self.title:
                self.title = " ".join(content.split())
            elif name in _DOI_NAMES and self.doi is None:
                # dc.identifier may hold an ISBN or a URL: only a DOI counts.
                self.doi = find_doi(content)
            elif name == "citation_arxiv_id":
                ident = bare_arxiv_id(content)
                if ident and ident not in self.arxiv_ids:
                    self.arxiv_ids.append(ident)


def _parse(html: bytes) -> _MetaParser:
    parser = _MetaParser()
    try:
        parser.feed(html[:_PAGE_LIMIT].decode("utf-8", errors="replace"))
        parser.close()
    except (AssertionError, ValueError):  # very broken markup: use what was found so far
        pass
    return parser


def page_meta(html: bytes, base_url: str) -> PageMeta:
    """Everything :class:`PageMeta` holds, read from ``html`` whose final URL is ``base_url``.

    ``citation_pdf_url`` and links are made absolute against ``<base href>`` if the page has one,
    else ``base_url``; a value that is not http(s) (``javascript:``) is dropped.
    """
    parser = _parse(html)
    pdf_url = absolute_link(parser.pdf_url, base_url, parser.base_href) if parser.pdf_url else None
    linked: list[str] = []
    for href in parser.hrefs:
        absolute = absolute_link(href, base_url, parser.base_href)
        ident = arxiv_id(absolute) if absolute else None
        if ident and ident not in linked and ident not in parser.arxiv_ids:
            linked.append(ident)
            if len(linked) >= _MAX_LINKED:
                break
    return PageMeta(
        pdf_url=pdf_url,
        title=parser.title,
        doi=parser.doi,
        arxiv_ids=tuple(parser.arxiv_ids),
        linked_arxiv_ids=tuple(linked),
        scholarly=parser.scholarly,
    )
