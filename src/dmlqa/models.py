"""The typed records that travel down the pipeline.

A document moves one way: list entry → :class:`Resource` → :class:`FetchResult` →
:class:`Document` → :class:`Chunk` → vectors → :class:`Hit`. Each stage module takes the
previous stage's record and returns its own; only :mod:`dmlqa.pipeline.build` knows the whole order.
Records are frozen so that a stage cannot quietly edit what an earlier stage produced.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote as pct
from urllib.parse import urlencode, urlsplit

#: The resource kinds a catalog entry may have.
KINDS = ("paper", "repo", "docs", "article", "video", "slides")

#: The last element of an author list whose source wrote "A, B et al.": the names are not all of them.
ET_AL = "et al."
_ET_AL_MARKER = re.compile(r",?\s*(?:and\s+)?(?:et\.?\s*al\.?|others)", re.IGNORECASE)


def is_et_al(name: str) -> bool:
    """Is this author-list element the "et al." marker (or "and others") rather than a name?"""
    return _ET_AL_MARKER.fullmatch(name.strip()) is not None


@dataclass(frozen=True)
class Resource:
    """One catalog entry: the facts a list gives about a link, never the list's prose.

    ``url`` is the canonical URL, the resource's *identity* (https, no ``www.``, lower-case GitHub
    owner/repo, one arXiv id for abs/pdf/vN): two spellings of one link meet there. ``aliases`` are
    the *addresses* the lists wrote, exactly as written: what the fetcher requests, because an
    http-only host or a case-sensitive path is lost when the identity is requested instead.
    """

    id: str
    url: str  # canonical URL (identity)
    title: str
    kind: str = "article"
    authors: tuple[str, ...] = ()
    venue: str | None = None
    year: int | None = None
    topics: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # every address a list gave for it, first seen first

    @property
    def address(self) -> str:
        """The URL to request: the first address a list gave (the canonical URL for old catalogs)."""
        return self.aliases[0] if self.aliases else self.url

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["authors"] = list(self.authors)
        d["topics"] = list(self.topics)
        d["lists"] = list(self.lists)
        d["aliases"] = list(self.aliases)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Resource:
        return cls(
            id=d["id"],
            url=d["url"],
            title=d.get("title") or d["url"],
            kind=d.get("kind") or "article",
            authors=tuple(d.get("authors") or ()),
            venue=d.get("venue"),
            year=d.get("year"),
            topics=tuple(d.get("topics") or ()),
            lists=tuple(d.get("lists") or ()),
            aliases=tuple(d.get("aliases") or ()),
        )


@dataclass(frozen=True)
class FetchResult:
    """One HTTP exchange as the pipeline sees it (live or replayed from a WARC archive).

    ``body`` is the decoded entity body (Content-Encoding already undone). ``not_modified`` is
    True for a 304 answer to a conditional GET; then ``body`` is empty and the caller keeps what
    it had.
    """

    url: str  # the URL that was asked for
    final_url: str  # after redirects
    status: int
    content_type: str  # media type only, lower-case, e.g. "application/pdf"
    body: bytes = field(repr=False)  # a repr of every body would be hundreds of MB (asyncio reprs task results)
    headers: dict[str, str] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None
    sha256: str = ""
    fetched_at: str = ""  # ISO-8601 UTC
    from_archive: bool = False
    not_modified: bool = False


@dataclass(frozen=True)
class Block:
    """A run of text with one location: a PDF page, or an HTML/markdown section."""

    text: str
    page: int | None = None  # 1-based PDF page
    section: str | None = None  # nearest heading


_HAS_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def shown_url(url: str, source_url: str) -> str:
    """The link a user is shown for a document: the address its text came from.

    The one copy of this rule, behind :attr:`Document.link` and the index's ``DocRecord.link``, and so
    behind every hit, citation, related item, citation-graph item and BibTeX ``url``. ``source_url``
    is what the fetch read (the final URL after redirects, the PDF behind a landing page) or, for a
    catalog card, the address as the list wrote it. The canonical ``url`` is an identity for merging
    copies (https, no ``www.``): a site may not answer it at all (an http-only host, a local test
    server), so it is shown only when ``source_url`` is no address (a JSON Lines record's place in
    its file).
    """
    return source_url if source_url and _HAS_SCHEME.match(source_url) else url


def view_path(doc_id: str, page: int | None = None, quote: str | None = None) -> str:
    """The app-relative address of a document's archived view, ``/source/<doc_id>?page=N&q=QUOTE``.

    The one copy of this rule, behind ``ask --json``'s ``view``, the chat app's source links and the
    MCP server's: the doc id is percent-encoded as one path segment (``arxiv:1811.06965``, ``local:a%2Fb.pdf``:
    no ``..`` a browser could fold away),
    the quote as a query value, so no document's text can change where the link points.
    """
    query = urlencode([(k, v) for k, v in (("page", page), ("q", quote)) if v not in (None, "")])
    return f"/source/{pct(doc_id, safe=':')}" + (f"?{query}" if query else "")


def is_linkable(url: str | None) -> bool:
    """True when ``url`` may be shown as a link: an absolute http(s) URL with a host, nothing to hide.

    The one copy of this rule, for every place a URL becomes something a reader can follow: the chat
    app's ``<a href>``, BibTeX ``url`` fields, a JSON Lines record's ``url``. ``javascript:``,
    ``data:``, ``file:`` and ``vbscript:`` run code or open the reader's own files; control
    characters can break out of a line or a field (and ``java\tscript:`` reads as ``javascript:``
    to a browser), whitespace has no place in a host. A space in a path is left to the writer to
    encode (the HTML attribute is escaped, BibTeX percent-encodes it). The caller strips the ends.
    """
    if not url or not isinstance(url, str):
        return False
    url = url.strip()
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a bad port or an unbalanced IPv6 bracket
        return False
    return parts.scheme.lower() in ("http", "https") and bool(host) and not any(ch.isspace() for ch in parts.netloc)


@dataclass(frozen=True)
class Document:
    """Extracted text of one resource (or one local file), located block by block.

    ``text`` is the blocks joined by blank lines; chunk offsets index into it.
    """

    doc_id: str
    url: str  # canonical catalog URL: the identity copies merge on, never shown (see shown_url)
    title: str
    blocks: tuple[Block, ...]
    #: where the text came from: the fetched URL after redirects (e.g. the PDF behind a landing page),
    #: the list's address for a card; what users are shown (:attr:`link`)
    source_url: str = ""
    content_type: str = "text"  # pdf | html | markdown | text | card
    kind: str = "article"
    authors: tuple[str, ...] = ()
    venue: str | None = None
    year: int | None = None
    topics: tuple[str, ...] = ()
    is_card: bool = False  # indexed from catalog facts only (full text unavailable)
    sha256: str = ""  # of the source bytes the text was extracted from
    #: every URL the work is known by (canonical URLs and listed addresses of all its copies)
    aliases: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()  # the lists that name it (any of its copies)

    @property
    def text(self) -> str:
        return BLOCK_SEPARATOR.join(b.text for b in self.blocks)

    @property
    def link(self) -> str:
        """The address to show for this document (see :func:`shown_url`)."""
        return shown_url(self.url, self.source_url)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["blocks"] = [asdict(b) for b in self.blocks]
        for key in ("authors", "topics", "aliases", "lists"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Document:
        d = dict(d)
        d["blocks"] = tuple(Block(**b) for b in d["blocks"])
        for key in ("authors", "topics", "aliases", "lists"):
            d[key] = tuple(d.get(key) or ())
        return cls(**d)


BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Reference:
    """One entry of a paper's reference list, parsed (every field but ``raw`` may be unknown).

    ``marker`` is how the paper's text points at it ("12" for "[12]", "Huang et al., 2019" for an
    author-year citation), so the citing sentence can be found; ``ordinal`` is its place in the list.
    """

    raw: str
    ordinal: int = 0
    title: str = ""
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str = ""
    arxiv_id: str | None = None
    doi: str | None = None
    url: str | None = None
    marker: str = ""
    page: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["authors"] = list(self.authors)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Reference:
        d = dict(d)
        d["authors"] = tuple(d.get("authors") or ())
        return cls(**{k: v for k, v in d.items() if k in _REFERENCE_FIELDS})


_REFERENCE_FIELDS = {"raw", "ordinal", "title", "authors", "year", "venue", "arxiv_id", "doi", "url", "marker", "page"}


@dataclass(frozen=True)
class CitationLink:
    """``citing`` names ``reference``; ``cited`` is the knowledge-base document it resolves to (None:
    a work outside the knowledge base); ``context`` is the citing sentence, when the marker was found;
    ``how`` says how it was resolved ("arxiv", "doi", "title")."""

    citing: str
    reference: Reference
    cited: str | None = None
    context: str = ""
    how: str = ""


@dataclass(slots=True)
class Chunk:
    """A passage sized for the embedding model, with everything a citation needs (not frozen: see
    :class:`dmlqa.extract.sentences.Sentence`)."""

    chunk_id: str  # f"{doc_id}#{ordinal}": stable for the same document text
    doc_id: str
    url: str
    title: str
    text: str
    page: int | None = None
    section: str | None = None
    start: int = 0  # character offsets into Document.text
    end: int = 0


@dataclass(frozen=True)
class Hit:
    """One search result."""

    rank: int
    score: float
    doc_id: str
    url: str  # the document's link (shown_url): where its text came from
    title: str
    page: int | None
    section: str | None
    text: str
    chunk_id: str = ""
    kind: str = ""
    venue: str | None = None
    year: int | None = None
    is_card: bool = False
    start: int = 0  # the passage's character offsets in its document's text
    end: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": round(float(self.score), 6),
            "doc_id": self.doc_id,
            "url": self.url,
            "title": self.title,
            "page": self.page,
            "section": self.section,
            "text": self.text,
        }


@dataclass(frozen=True)
class Failure:
    """A resource that could not be (fully) processed, for the build report."""

    url: str
    stage: str  # catalog | fetch | extract | local (a bad file or record in corpus/local) | chunk | embed | index
    error: str

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "stage": self.stage, "error": self.error}


@dataclass(frozen=True)
class Citation:
    """A numbered source of an answer; ``quote`` is verified to occur in the cited passage."""

    n: int
    url: str  # the document's link (shown_url): where its text came from
    title: str
    page: int | None
    quote: str
    doc_id: str = ""
    chunk_id: str = ""
    venue: str | None = None
    year: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "url": self.url, "title": self.title, "page": self.page, "quote": self.quote,
                "view": view_path(self.doc_id, self.page, self.quote)}


@dataclass(frozen=True)
class Answer:
    """What ``ask`` returns: the text with [n] markers, its citations, and how it was made."""

    question: str
    answer: str
    citations: tuple[Citation, ...]
    backend: str  # "extractive" or "llm:<model>"
    refused: bool
    retrieved: tuple[Hit, ...] = ()
    seconds: float = 0.0
    notice: str | None = None  # e.g. why the LLM was not used
    flags: tuple[str, ...] = ()  # e.g. "removed invented citation [9]", "unsupported: <sentence>"
    #: Documents the year filters left out only because their year is unknown (front ends say so).
    undated_excluded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "citations": [c.to_json() for c in self.citations],
            "backend": self.backend,
            "refused": self.refused,
            "retrieved": [h.to_json() for h in self.retrieved],
            "seconds": round(self.seconds, 4),
            "notice": self.notice,
            "flags": list(self.flags),
        }
