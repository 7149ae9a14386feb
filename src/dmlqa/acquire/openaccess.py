"""Open copies of paywalled papers: arXiv and OpenAlex, asked through the build's own fetcher.

Why: a publisher page that answers 403, sits behind a paywall or robots.txt, or shows only an
abstract leaves a paper as a catalog card or an abstract, though most distributed-ML papers have a
legal open copy (an arXiv preprint, an author's or a repository's copy). :func:`find_open_copy`
tries, surest and cheapest first:

1. an arXiv id already known: from the catalog's addresses, the landing page's
   ``citation_arxiv_id``, or the caller (e.g. ids that citing papers' references give); arXiv links
   elsewhere on the landing page only after the arXiv API confirms the title (a landing page also
   links the works it cites);
2. OpenAlex by DOI: ``GET {openalex_api}/works/doi:{doi}``, a Work object whose
   ``best_oa_location.pdf_url`` (then other open ``locations``, ``open_access.oa_url`` and the best
   location's landing page) names the copy;
3. the arXiv API by title: ``GET {arxiv_api}?search_query=ti:"…"&max_results=3``, an Atom feed;
   only an entry whose normalised title matches closely (:data:`TITLE_MATCH`) is taken.

Every request goes through the :class:`~dmlqa.acquire.fetch.Fetcher` (address checks, robots.txt,
WARC archive, manifest, offline replay), paced per host by :mod:`dmlqa.acquire.pacing` (arXiv's
one request every three seconds, robots.txt ``Crawl-delay``). A copy counts only if its bytes are a
PDF. Whatever goes wrong (a 404, malformed JSON or XML, a wrong-title entry, a paywalled or HTML
"PDF", a redirect to a private address) becomes one line of :attr:`Search.tried`, never an exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from urllib.parse import quote, urlencode

from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.pacing import paced_fetch
from dmlqa.acquire.pagemeta import PageMeta, find_doi, page_meta, url_doi
from dmlqa.catalog.urls import arxiv_id, bare_arxiv_id, guess_kind, is_url_title, site, title_key
from dmlqa.errors import FetchError
from dmlqa.models import FetchResult

logger = logging.getLogger(__name__)

#: Least difflib ratio between two normalised titles taken as the same paper. Titles of one work
#: differ by case and punctuation (erased) and, between preprint and published version, by a word
#: or two ("toward"/"towards": ratio ~0.97); sequels and namesakes share a prefix and little else
#: ("ZeRO: Memory Optimizations…" against "ZeRO-Offload: Democratizing…": ~0.4).
TITLE_MATCH = 0.92
#: Entries asked of the arXiv API per title: the right one is near the top or absent.
_ARXIV_RESULTS = 3
#: Titles searched per paper (a landing page's and the list's, when they differ).
_MAX_TITLE_SEARCHES = 2
#: Locations tried from one OpenAlex work.
_MAX_OPENALEX_URLS = 4
#: Kinds that are not papers whatever their page looks like.
_NOT_PAPERS = ("repo", "docs", "video", "slides")
_ATOM = "{http://www.w3.org/2005/Atom}"
_QUIET = "not in the archive"  # an offline miss: no answer at all, nothing worth reporting


@dataclass(frozen=True)
class OpenCopy:
    """An open copy found for a paper: the PDF fetched, and where it came from.

    ``source`` is ``"arxiv"`` (``ident`` an arXiv id) or ``"openalex"`` (``ident`` the DOI);
    ``via`` names the route: ``"catalog"``, ``"landing page"``, ``"known id"``, ``"landing page
    link"``, ``"arXiv API title search"``, ``"OpenAlex best_oa_location"``, …
    """

    document: FetchResult
    source: str
    ident: str
    via: str

    @property
    def url(self) -> str:
        return self.document.url

    @property
    def note(self) -> str:
        """The line for the build report: ``open copy via arXiv 1910.02054 (catalog): https://…``."""
        if self.source == "arxiv":
            return f"open copy via arXiv {self.ident} ({self.via}): {self.url}"
        return f"open copy via {self.via} for DOI {self.ident}: {self.url}"


@dataclass(frozen=True)
class PaperHints:
    """What is known of a paper to look its open copy up by (see :func:`paper_hints`).

    ``arxiv_ids`` are ``(id, where from)`` pairs trusted as the paper's own; ``linked_arxiv_ids``
    need a title check first. ``search_arxiv`` is False for a paper that is itself on arXiv: a
    title search would only find the copy that already failed.
    """

    titles: tuple[str, ...] = ()
    doi: str | None = None
    arxiv_ids: tuple[tuple[str, str], ...] = ()
    linked_arxiv_ids: tuple[str, ...] = ()
    search_arxiv: bool = True


@dataclass(frozen=True)
class Search:
    """What :func:`find_open_copy` found: a copy, or why each route gave none.

    ``answered`` is False when no look-up got any answer (offline and not in the archive): then the
    paper is reported as it would be without open-access look-ups.
    """

    copy: OpenCopy | None = None
    tried: tuple[str, ...] = ()
    answered: bool = False

    @property
    def summary(self) -> str:
        return "no open copy: " + ("; ".join(self.tried) if self.tried else "nothing to look it up by")


@dataclass
class _Trail:
    tried: list[str] = field(default_factory=list)
    answered: bool = False

    def add(self, line: str) -> None:
        self.answered = True
        self.tried.append(line)

    def fail(self, what: str, exc: FetchError) -> None:
        self.tried.append(f"{what}: {exc.reason}")
        if _QUIET not in exc.reason:
            self.answered = True


@dataclass(frozen=True)
class ArxivEntry:
    """One ``<entry>`` of an arXiv API feed."""

    ident: str
    title: str
    pdf_url: str | None


# -- titles -------------------------------------------------------------------------------------


def titles_match(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` are the same title up to spelling (see :data:`TITLE_MATCH`)."""
    ka, kb = title_key(a), title_key(b)
    if ka is None or kb is None:
        return False
    return ka == kb or SequenceMatcher(None, ka, kb, autojunk=False).ratio() >= TITLE_MATCH


# -- the two APIs' formats -------------------------------------------------------------------------


def parse_arxiv_feed(body: bytes) -> list[ArxivEntry]:
    """The entries of an arXiv API answer (Atom 1.0); ValueError with a reason for anything else.

    arXiv reports a bad query as HTTP 200 with one entry titled ``Error`` whose id is under
    ``/api/errors``, and throttling as a plain-text body: both are errors here, not results. A
    document type declaration is refused before parsing (no entity expansion from a third party).
    """
    head = body[:4096].decode("utf-8", errors="replace").upper()
    if "<!DOCTYPE" in head or b"<!ENTITY" in body.upper():
        raise ValueError("the answer declares a DTD: not an arXiv Atom feed")
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        start = " ".join(body[:60].decode("utf-8", errors="replace").split())
        raise ValueError(f"the answer is not XML ({start!r})") from None
    if root.tag != f"{_ATOM}feed":
        raise ValueError("the answer is not an Atom feed")
    entries = []
    for entry in root.iter(f"{_ATOM}entry"):
        id_text = (entry.findtext(f"{_ATOM}id") or "").strip()
        title = " ".join((entry.findtext(f"{_ATOM}title") or "").split())
        if "/api/errors" in id_text:
            summary = " ".join((entry.findtext(f"{_ATOM}summary") or "").split())
            raise ValueError(f"arXiv API error: {summary or title or 'unspecified'}")
        ident = arxiv_id(id_text)
        if not ident:
            continue
        pdf_url = None
        for link in entry.iter(f"{_ATOM}link"):
            if link.get("title") == "pdf" or link.get("type") == "application/pdf":
                pdf_url = (link.get("href") or "").strip() or None
                break
        entries.append(ArxivEntry(ident=ident, title=title, pdf_url=pdf_url))
    return entries


def openalex_locations(body: bytes) -> list[tuple[str, str]]:
    """``(url, label)`` of the open copies an OpenAlex Work names, best first; ValueError if not a Work.

    ``best_oa_location.pdf_url``, then the ``pdf_url`` of other locations with ``is_oa``, then
    ``open_access.oa_url``, then the best location's ``landing_page_url`` (a page that may name its
    PDF in a citation_pdf_url tag). Anything that is not an http(s) string is skipped.
    """
    try:
        work = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("the answer is not JSON") from None
    if not isinstance(work, dict):
        raise ValueError("the answer is not a Work object")
    out: list[tuple[str, str]] = []

    def add(value: object, label: str) -> None:
        if isinstance(value, str) and value.strip().lower().startswith(("http://", "https://")):
            url = value.strip()
            if all(url != u for u, _ in out):
                out.append((url, label))

    best = work.get("best_oa_location")
    best = best if isinstance(best, dict) and best.get("is_oa", True) is not False else {}
    add(best.get("pdf_url"), "OpenAlex best_oa_location")
    locations = work.get("locations")
    for loc in locations if isinstance(locations, list) else ():
        if isinstance(loc, dict) and loc.get("is_oa") is True:
            add(loc.get("pdf_url"), "OpenAlex open location")
    oa = work.get("open_access")
    if isinstance(oa, dict):
        add(oa.get("oa_url"), "OpenAlex open_access.oa_url")
    add(best.get("landing_page_url"), "OpenAlex best_oa_location landing page")
    return out[:_MAX_OPENALEX_URLS]


def arxiv_pdf(ident: str) -> str:
    """The PDF URL of an arXiv id, in the one form the resolver and the snapshot use."""
    return f"https://arxiv.org/pdf/{ident}"


# -- what is known of a paper ----------------------------------------------------------------------


def paper_hints(
    urls: Sequence[str],
    *,
    title: str = "",
    doi: str | None = None,
    known_arxiv_ids: Iterable[str] = (),
    meta: PageMeta | None = None,
) -> PaperHints:
    """Collect what the catalog (``urls``: the address and its aliases), the caller and a landing page
    (``meta``) say about one paper. A title that only spells a URL is no title."""
    ids: list[tuple[str, str]] = []

    def add(ident: str | None, where: str) -> None:
        if ident and all(ident != i for i, _ in ids):
            ids.append((ident, where))

    for u in urls:
        add(arxiv_id(u), "catalog")
    for raw in known_arxiv_ids:
        add(bare_arxiv_id(raw), "known id")
    if meta is not None:
        for ident in meta.arxiv_ids:
            add(ident, "landing page")
    trusted = {i for i, _ in ids}
    linked = tuple(i for i in (meta.linked_arxiv_ids if meta else ()) if i not in trusted)
    found_doi = find_doi(doi or "") or next((d for d in map(url_doi, urls) if d), None)
    if found_doi is None and meta is not None:
        found_doi = meta.doi
    titles: list[str] = []
    for t in (meta.title if meta else "", title):
        t = " ".join((t or "").split())
        if t and not any(is_url_title(t, u) for u in (*urls, "")) and title_key(t) is not None:
            if all(title_key(t) != title_key(x) for x in titles):
                titles.append(t)
    on_arxiv = any(site(u) in ("arxiv.org", "export.arxiv.org") for u in urls)
    return PaperHints(
        titles=tuple(titles), doi=found_doi, arxiv_ids=tuple(ids), linked_arxiv_ids=linked,
        search_arxiv=not on_arxiv,
    )


def looks_like_paper(
    urls: Sequence[str], *, kind: str = "", meta: PageMeta | None = None, hints: PaperHints | None = None
) -> bool:
    """Whether a resource is a paper, so that an open copy of it may be looked for.

    A blog post or a project page that lost its text must not turn into some paper that shares its
    title, so: never for repositories, docs, videos or slides; yes when the catalog says paper, a
    DOI or an arXiv id names it (in its URL, its page, or from the caller), the URL is a
    publisher's or ends in .pdf (:func:`~dmlqa.catalog.urls.guess_kind`), or the page carries
    ``citation_*`` tags.
    """
    if kind in _NOT_PAPERS:
        return False
    if kind == "paper" or (meta is not None and meta.scholarly):
        return True
    if hints is not None and (hints.doi or hints.arxiv_ids):
        return True
    return any(guess_kind(u) == "paper" for u in urls)


# -- the routes --------------------------------------------------------------------------------------


def _count(fetcher: Fetcher, key: str) -> None:
    fetcher.stats[key] = fetcher.stats.get(key, 0) + 1


#: Each fetcher's API answers by URL: two catalog entries for one paper (an ACM page and a
#: USENIX page) ask the same question, and at one arXiv request per 3 s asking twice is costly.
#: Futures, not tasks: a value must not hold its fetcher, or the weak key would never die.
_ANSWERS: weakref.WeakKeyDictionary[Fetcher, dict[str, asyncio.Future[FetchResult]]] = weakref.WeakKeyDictionary()


async def _ask_once(fetcher: Fetcher, url: str) -> FetchResult:
    """:func:`paced_fetch` of an API URL, asked once per fetcher; later and concurrent callers share it."""
    answers = _ANSWERS.setdefault(fetcher, {})
    pending = answers.get(url)
    if pending is None:
        pending = answers[url] = asyncio.get_running_loop().create_future()
        _count(fetcher, "open_access_lookups")
        try:
            pending.set_result(await paced_fetch(fetcher, url, conditional=False))
        except FetchError as exc:
            pending.set_exception(exc)
        except BaseException:  # cancelled (or a bug): the others get a reason, a later caller asks again
            del answers[url]
            pending.set_exception(FetchError(url, "look-up interrupted"))
            pending.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
    return await asyncio.shield(pending)


async def _api(fetcher: Fetcher, url: str, what: str, trail: _Trail) -> FetchResult | None:
    """One API request (never conditional: a 304 has no body to read), or None with why on the trail."""
    try:
        return await _ask_once(fetcher, url)
    except FetchError as exc:
        if exc.status == 404:
            trail.add(f"{what}: not found (HTTP 404)")
        else:
            trail.fail(what, exc)
        return None


async def _get_pdf(
    fetcher: Fetcher, url: str, label: str, trail: _Trail, skip: Collection[str], *, hop: bool = True
) -> FetchResult | None:
    """The PDF at ``url``, or None with why on the trail. An HTML page naming a citation_pdf_url
    (a repository's landing page) leads one step on; URLs in ``skip`` already failed."""
    if url in skip:
        return None
    try:
        result = await paced_fetch(fetcher, url)
    except FetchError as exc:
        trail.fail(f"{label} {url}", exc)
        return None
    trail.answered = True
    if result.content_type == "application/pdf":
        return result
    if hop and not result.not_modified and result.content_type == "text/html":
        pdf_url = page_meta(result.body, result.final_url).pdf_url
        if pdf_url and pdf_url not in (url, result.final_url):
            return await _get_pdf(fetcher, pdf_url, label, trail, skip, hop=False)
    trail.add(f"{label} {url} is {result.content_type or 'of no known type'}, not a PDF")
    return None


async def _arxiv_query(fetcher: Fetcher, params: dict[str, str], what: str, trail: _Trail) -> list[ArxivEntry] | None:
    url = f"{fetcher.config.arxiv_api}?{urlencode(params)}"
    result = await _api(fetcher, url, what, trail)
    if result is None:
        return None
    try:
        return parse_arxiv_feed(result.body)
    except ValueError as exc:
        trail.add(f"{what}: {exc}")
        return None


async def _known_arxiv(fetcher: Fetcher, hints: PaperHints, trail: _Trail, skip: Collection[str]) -> OpenCopy | None:
    for ident, where in hints.arxiv_ids:
        doc = await _get_pdf(fetcher, arxiv_pdf(ident), f"arXiv {ident}", trail, skip)
        if doc is not None:
            return OpenCopy(doc, "arxiv", ident, where)
    candidates = [i for i in hints.linked_arxiv_ids if arxiv_pdf(i) not in skip]
    if not candidates or not hints.titles:
        return None
    entries = await _arxiv_query(
        fetcher, {"id_list": ",".join(candidates), "max_results": str(len(candidates))},
        "arXiv API (ids linked from the landing page)", trail,
    )
    for entry in entries or ():
        if any(titles_match(t, entry.title) for t in hints.titles):
            doc = await _get_pdf(fetcher, arxiv_pdf(entry.ident), f"arXiv {entry.ident}", trail, skip)
            if doc is not None:
                return OpenCopy(doc, "arxiv", entry.ident, "landing page link")
    if entries is not None:
        trail.add("no arXiv id linked from the landing page has the paper's title")
    return None


async def _openalex(fetcher: Fetcher, doi: str, trail: _Trail, skip: Collection[str]) -> OpenCopy | None:
    url = f"{fetcher.config.openalex_api.rstrip('/')}/works/doi:{quote(doi, safe='/:;()._-')}"
    result = await _api(fetcher, url, f"OpenAlex (DOI {doi})", trail)
    if result is None:
        return None
    try:
        locations = openalex_locations(result.body)
    except ValueError as exc:
        trail.add(f"OpenAlex (DOI {doi}): {exc}")
        return None
    if not locations:
        trail.add(f"OpenAlex (DOI {doi}): no open-access location")
    for pdf_url, label in locations:
        ident = arxiv_id(pdf_url)
        doc = await _get_pdf(fetcher, arxiv_pdf(ident) if ident else pdf_url, label, trail, skip)
        if doc is not None:
            return OpenCopy(doc, "openalex", doi, label)
    return None


async def _arxiv_by_title(fetcher: Fetcher, title: str, trail: _Trail, skip: Collection[str]) -> OpenCopy | None:
    key = title_key(title)
    if key is None:
        return None
    params = {"search_query": f'ti:"{key}"', "max_results": str(_ARXIV_RESULTS)}
    entries = await _arxiv_query(fetcher, params, "arXiv API title search", trail)
    if entries is None:
        return None
    match = next((e for e in entries if titles_match(title, e.title)), None)
    if match is None:
        nearest = f" (nearest: {entries[0].title!r})" if entries else ""
        trail.add(f"arXiv API: no entry titled {title!r}{nearest}")
        return None
    for url in dict.fromkeys(u for u in (arxiv_pdf(match.ident), match.pdf_url) if u):
        doc = await _get_pdf(fetcher, url, f"arXiv {match.ident}", trail, skip)
        if doc is not None:
            return OpenCopy(doc, "arxiv", match.ident, "arXiv API title search")
    return None


async def find_open_copy(fetcher: Fetcher, hints: PaperHints, *, skip: Collection[str] = ()) -> Search:
    """Look for an open copy of the paper ``hints`` describe, route by route (see the module doc).

    ``skip`` holds URLs that already failed on the way here (the publisher's PDF, an arXiv PDF
    tried as a listed address): they are not asked again. Nothing is asked when
    ``fetch.open_access`` is off. Never raises for a bad answer; see :class:`Search`.
    """
    if not fetcher.config.open_access:
        return Search()
    trail = _Trail()
    copy = await _known_arxiv(fetcher, hints, trail, skip)
    if copy is None and hints.doi:
        copy = await _openalex(fetcher, hints.doi, trail, skip)
    if copy is None and hints.search_arxiv:
        for title in hints.titles[:_MAX_TITLE_SEARCHES]:
            copy = await _arxiv_by_title(fetcher, title, trail, skip)
            if copy is not None:
                break
    if copy is not None:
        _count(fetcher, "open_copies")
        logger.info("%s", copy.note)
    return Search(copy=copy, tried=tuple(trail.tried), answered=trail.answered)
