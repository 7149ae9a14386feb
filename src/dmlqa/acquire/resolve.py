"""Resolvers: from the URL a reading list gives to the document worth reading.

Lists link landing pages (arXiv abstracts, OpenReview forums, publisher pages, DOIs, GitHub
repositories) whose own text is a title and an abstract; the full text sits one step away.
:func:`candidate_urls` knows the sites whose full-text URL follows from the link alone;
:func:`citation_pdf_url` reads the ``<meta name="citation_pdf_url">`` tag that publisher pages
carry (Google Scholar's inclusion guidelines ask for it); :func:`fetch_resource` combines the
two with fallbacks, so a missing PDF degrades to the landing page's abstract instead of nothing.
When a paper's page fails or is only a landing page, :func:`fetch_resource` first looks for an open
copy (:mod:`dmlqa.acquire.openaccess`: arXiv, OpenAlex), so a paywall costs the full text only when
no legal copy exists; :attr:`Resolved.open_copy` says where the copy came from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import parse_qs, quote, urlsplit

from dmlqa.acquire.fetch import Fetcher
from dmlqa.acquire.openaccess import OpenCopy, Search, find_open_copy, looks_like_paper, paper_hints
from dmlqa.acquire.pagemeta import PageMeta, page_meta
from dmlqa.catalog.urls import arxiv_id, github_repo, site
from dmlqa.errors import FetchError
from dmlqa.models import FetchResult

logger = logging.getLogger(__name__)

#: Files under github.com/<o>/<r>/blob/ whose raw bytes are the document itself.
_GITHUB_RAW_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".pdf")


def _resolved_url(url: str) -> str | None:
    """The full-text URL a link leads to by the site's URL pattern alone, or None."""
    parts = urlsplit(url.strip())
    host = site(url) if parts.netloc else ""  # a link without a scheme and host names no site's path
    ident = arxiv_id(url)
    if ident is not None:
        # The version is dropped: arxiv.org/pdf/<id> is the latest, and the snapshot stores it.
        return f"https://arxiv.org/pdf/{ident}"
    if host == "openreview.net" and parts.path.rstrip("/") in ("/forum", "/pdf"):
        ids = parse_qs(parts.query).get("id")
        if ids and ids[0]:
            return f"https://openreview.net/pdf?id={quote(ids[0], safe='')}"
        return None
    if host == "github.com":
        segments = [s for s in parts.path.split("/") if s]
        if github_repo(url) is None:
            return None
        owner, repo = segments[0], segments[1]
        if repo.endswith(".git"):
            repo = repo[:-4]
        if len(segments) == 2:
            return f"https://raw.githubusercontent.com/{owner}/{repo}/HEAD/README.md"
        rest = "/".join(segments[3:])
        if segments[2] == "blob" and rest and rest.lower().endswith(_GITHUB_RAW_SUFFIXES):
            return f"https://raw.githubusercontent.com/{owner}/{repo}/{rest}"
        if segments[2] == "tree" and rest:
            return f"https://raw.githubusercontent.com/{owner}/{repo}/{rest}/README.md"
    return None


def candidate_urls(url: str) -> list[str]:
    """The URLs to try for ``url``, best first, the original last, without duplicates.

    * arXiv ``abs``/``pdf`` links (any version, http or https) → ``https://arxiv.org/pdf/<id>``;
    * OpenReview ``forum?id=X`` → ``https://openreview.net/pdf?id=X``;
    * a GitHub repository root → its README on raw.githubusercontent.com (``HEAD``), a
      ``blob`` link to a document → its raw file, a ``tree`` link → that folder's README.md;
    * anything else (doi.org included: its redirect leads to the landing page) → itself.
    """
    url = url.strip()
    out: list[str] = []
    resolved = _resolved_url(url)
    if resolved:
        out.append(resolved)
    if url not in out:
        out.append(url)
    return out


def citation_pdf_url(html: bytes, base_url: str) -> str | None:
    """The absolute http(s) URL named by ``<meta name="citation_pdf_url">``, else None.

    Relative values are resolved against ``<base href>`` if the page has one, else ``base_url``
    (the page's final URL after redirects).
    """
    return page_meta(html, base_url).pdf_url


@dataclass(frozen=True)
class Resolved:
    """What :func:`fetch_resource` found for one resource URL."""

    url: str  # the resource URL asked for
    document: FetchResult  # what to extract (the PDF, README, or the page itself)
    landing: FetchResult | None  # the landing page when `document` was reached through it
    notes: tuple[str, ...]  # what did not work on the way, for the build report
    #: Set when `document` is an open copy found because the listed page failed or had no PDF
    #: (its `.note` is the report's line: "open copy via arXiv 1910.02054 (catalog): https://…").
    open_copy: OpenCopy | None = None


def _informativeness(error: FetchError) -> int:
    """Rank failures: a server's answer says more than a refusal, which says more than absence."""
    if error.reason.startswith("not in the archive") or ": not in the archive" in error.reason:
        return 0
    if error.status is not None:
        return 3
    if error.reason.startswith("refused") or "robots.txt" in error.reason:
        return 1
    return 2


async def _page_body(fetcher: Fetcher, page: FetchResult) -> FetchResult | None:
    """A page with its body: itself, or for a 304 the stored copy (or a fresh unconditional GET)."""
    if not page.not_modified:
        return page
    previous = await fetcher.previous(page.url)
    if previous is not None:
        return previous
    try:
        return await fetcher.fetch(page.url, conditional=False)
    except FetchError as exc:
        logger.info("cannot re-read %s: %s", page.url, exc.reason)
        return None


@dataclass(frozen=True)
class _Landing:
    """A landing page whose document is itself (no PDF to be had): its readable copy and what it says."""

    page: FetchResult
    meta: PageMeta


async def _through_landing(
    fetcher: Fetcher, url: str, page: FetchResult, notes: list[str], failed: dict[str, FetchError]
) -> tuple[Resolved, _Landing | None]:
    """If ``page`` is HTML naming a citation_pdf_url, try that PDF; else the page is the document.

    ``failed`` holds candidates that already failed, so a PDF link back to one of them (an
    OpenReview forum naming its pdf?id= URL) is not fetched, and retried, twice; a PDF link that
    fails here is added to it. The second value is set when the result is only the landing page
    (no PDF named, or the PDF failed): the page an open copy may then be looked for with.
    """
    if page.content_type != "text/html":
        return Resolved(url=url, document=page, landing=None, notes=tuple(notes)), None
    readable = await _page_body(fetcher, page)
    if readable is None:
        return Resolved(url=url, document=page, landing=None, notes=tuple(notes)), None
    meta = page_meta(readable.body, readable.final_url or page.final_url)
    pdf_url = meta.pdf_url
    if not pdf_url or pdf_url in (page.url, page.final_url):
        return Resolved(url=url, document=page, landing=None, notes=tuple(notes)), _Landing(readable, meta)
    try:
        if pdf_url in failed:
            raise failed[pdf_url]
        pdf = await fetcher.fetch(pdf_url)
    except FetchError as exc:
        failed.setdefault(pdf_url, exc)
        notes.append(f"citation_pdf_url {pdf_url} failed: {exc.reason}; using the landing page")
        return Resolved(url=url, document=readable, landing=None, notes=tuple(notes)), _Landing(readable, meta)
    if not pdf.not_modified and pdf.content_type != "application/pdf":
        reason = f"is {pdf.content_type}, not a PDF"
        failed.setdefault(pdf_url, FetchError(pdf_url, reason))
        notes.append(f"citation_pdf_url {pdf_url} {reason}; using the landing page")
        return Resolved(url=url, document=readable, landing=None, notes=tuple(notes)), _Landing(readable, meta)
    return Resolved(url=url, document=pdf, landing=readable, notes=tuple(notes)), None


@dataclass(frozen=True)
class _Paper:
    """What the caller knows of the resource, for the open-access look-ups."""

    urls: tuple[str, ...]
    title: str
    kind: str
    doi: str | None
    known_arxiv_ids: tuple[str, ...]


async def _look_for_open_copy(
    fetcher: Fetcher, paper: _Paper, meta: PageMeta | None, failed: dict[str, FetchError]
) -> Search | None:
    """An open copy's search for a paper, or None when it is off or the resource is no paper.

    The look-ups are an extra: a bug in them is logged and costs only the open copy, never the
    landing page already fetched.
    """
    if not fetcher.config.open_access:
        return None
    hints = paper_hints(
        paper.urls, title=paper.title, doi=paper.doi, known_arxiv_ids=paper.known_arxiv_ids, meta=meta
    )
    if not looks_like_paper(paper.urls, kind=paper.kind, meta=meta, hints=hints):
        return None
    try:
        return await find_open_copy(fetcher, hints, skip=set(failed))
    except Exception:  # noqa: BLE001 - see the docstring
        logger.exception("open-access look-up failed for %s", paper.urls[0])
        return None


async def fetch_resource(
    fetcher: Fetcher,
    url: str,
    *,
    aliases: Sequence[str] = (),
    title: str = "",
    kind: str = "",
    doi: str | None = None,
    known_arxiv_ids: Sequence[str] = (),
) -> Resolved:
    """Fetch the best document for a resource, falling back step by step.

    ``url`` is the address a list gave (requested as written); ``aliases`` are other addresses
    lists gave for the same resource, tried when ``url`` yields nothing. For each address,
    :func:`candidate_urls` is tried in order (resolved full-text URL first, the address itself
    last); an HTML result naming a citation_pdf_url leads on to that PDF, and when the PDF cannot
    be had the landing page itself is the document.

    When a paper (``kind``, or what its URL and page say) ends as only a landing page, or nothing
    could be fetched, an open copy is looked for (``fetch.open_access``): by an arXiv id from the
    addresses, the page or ``known_arxiv_ids``; OpenAlex by ``doi`` (or the addresses' or page's
    DOI); the arXiv API by ``title`` (or the page's citation_title). A copy found becomes the
    document, with :attr:`Resolved.open_copy` and a note saying where it came from. Raises
    :class:`FetchError` carrying ``url`` and the most informative of the failures only when
    nothing was fetched and no open copy found.
    """
    notes: list[str] = []
    failures: list[tuple[str, FetchError]] = []
    failed: dict[str, FetchError] = {}
    paper = _Paper(
        urls=tuple(dict.fromkeys(u.strip() for u in (url, *aliases) if u.strip())),
        title=title, kind=kind, doi=doi, known_arxiv_ids=tuple(known_arxiv_ids),
    )
    candidates = list(dict.fromkeys(c for u in (url, *aliases) for c in candidate_urls(u)))
    for i, candidate in enumerate(candidates):
        try:
            result = await fetcher.fetch(candidate)
        except FetchError as exc:
            failures.append((candidate, exc))
            failed[candidate] = exc
            if i + 1 < len(candidates):
                notes.append(f"{candidate} failed: {exc.reason}; trying {candidates[i + 1]}")
            continue
        resolved, landing = await _through_landing(fetcher, url, result, notes, failed)
        if landing is None:
            return resolved
        search = await _look_for_open_copy(fetcher, paper, landing.meta, failed)
        if search is None:
            return resolved
        if search.copy is not None:
            copy = search.copy
            return Resolved(url, document=copy.document, landing=landing.page, notes=(*notes, copy.note),
                            open_copy=copy)
        return replace(resolved, notes=(*resolved.notes, search.summary)) if search.answered else resolved
    # The original's own failure wins ties: it is the URL the user listed.
    best_url, best = max(reversed(failures), key=lambda f: _informativeness(f[1]))
    reason = best.reason if best_url == url.strip() else f"{best.reason} (at {best_url})"
    search = await _look_for_open_copy(fetcher, paper, None, failed)
    if search is not None and search.copy is not None:
        copy = search.copy
        return Resolved(url, document=copy.document, landing=None, notes=(*notes, f"{url} failed: {reason}",
                                                                         copy.note), open_copy=copy)
    if search is not None and search.answered:
        logger.info("%s: %s", url, search.summary)
    raise FetchError(url, reason, status=best.status)
