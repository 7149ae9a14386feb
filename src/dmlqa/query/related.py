"""Document-level recommendations: what else in the index is like this paper, page or text.

``related`` takes a catalog URL (any spelling that canonicalises to it), an arXiv id, a DOI, a doc
id or free text. This module reads what the query names and resolves it to an indexed document; an
indexed resource is then compared with every other document through one vector per document
(:mod:`dmlqa.query.docvectors`), free text is embedded and compared both with those document
vectors and, passage by passage, through the hybrid retrievers of :mod:`dmlqa.query.search`
(:mod:`dmlqa.query.relatedness` scores both and picks the reason shown). Catalog cards are
recommended like any other document. An identifier that is not in the index is read as free text,
and the result says so.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dmlqa.catalog.urls import arxiv_id, canonicalize, doi, resource_id
from dmlqa.index.versions import IndexVersion
from dmlqa.query.docvectors import CACHE_VERSIONS, clear_vectors, doc_vectors
from dmlqa.query.relatedness import Related, rank_like_doc, rank_like_text
from dmlqa.query.search import Filters, Searcher, allowed_docs, undated_excluded


@dataclass(frozen=True)
class RelatedResult:
    """What :func:`related` returns; ``target`` is the doc id when the query named an indexed resource."""

    query: str
    target: str | None
    items: tuple[Related, ...]
    notice: str | None = None
    #: Documents the ``since`` filter left out only because their year is unknown (not in the JSON).
    undated_excluded: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "target": self.target,
            "notice": self.notice,
            "items": [r.to_json() for r in self.items],
        }


# -- what the query names -----------------------------------------------------------------------------

_ARXIV_ID_RE = re.compile(
    r"^(?:arxiv\s*:\s*)?(?P<id>\d{4}\.\d{4,5}|[a-z][a-z-]*(?:\.[a-z]{2})?/\d{7})(?:v\d+)?$", re.IGNORECASE
)
_DOI_RE = re.compile(r"^(?:doi\s*:\s*)?(?P<doi>10\.\d{4,9}/\S+)$", re.IGNORECASE)
_ARXIV_DOI_RE = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)
_SCHEMELESS_URL_RE = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)+(?::\d+)?/\S*$", re.IGNORECASE)


@dataclass(frozen=True)
class _Identity:
    """The resource a query names, as the keys the index may hold it under."""

    label: str  # "URL", "arXiv id" or "DOI": for the notice
    ids: tuple[str, ...]  # candidate doc ids
    urls: tuple[str, ...]  # candidate canonical URLs


def _arxiv_identity(aid: str, label: str) -> _Identity:
    return _Identity(label, (f"arxiv:{aid}",), (f"https://arxiv.org/abs/{aid}",))


def _doi_identity(d: str, label: str) -> _Identity:
    m = _ARXIV_DOI_RE.match(d)
    am = _ARXIV_ID_RE.match(m.group("id")) if m else None
    if am:  # arXiv's own DOIs (10.48550/arXiv.<id>) name the arXiv paper
        aid = am.group("id")
        return _Identity(label, (f"doi:{d.lower()}", f"arxiv:{aid}"),
                         (f"https://doi.org/{d}", f"https://arxiv.org/abs/{aid}"))
    return _Identity(label, (f"doi:{d.lower()}",), (f"https://doi.org/{d}",))


def identify(query: str) -> _Identity | None:
    """The resource ``query`` names (URL, arXiv id or DOI), or None when it reads as free text."""
    q = re.sub(r"^(arxiv|doi)\s*:\s*", lambda m: m.group(1) + ":", query.strip().strip("<>").strip(),
               flags=re.IGNORECASE)
    if not q or any(c.isspace() for c in q):
        return None
    m = _ARXIV_ID_RE.match(q)
    if m:
        return _arxiv_identity(m.group("id"), "arXiv id")
    m = _DOI_RE.match(q)
    if m:
        return _doi_identity(m.group("doi").rstrip("."), "DOI")
    raw = q
    if _SCHEMELESS_URL_RE.match(raw):
        raw = "https://" + raw
    try:
        canon = canonicalize(raw)
    except ValueError:
        return None
    aid = arxiv_id(canon)
    if aid:
        return _arxiv_identity(aid, "URL")
    d = doi(canon)
    if d:
        ident = _doi_identity(d, "URL")
        return _Identity("URL", ident.ids, (canon, *ident.urls))
    return _Identity("URL", (resource_id(canon),), (canon,))


_URL_MAPS: OrderedDict[tuple[str, str], dict[str, str]] = OrderedDict()
_URL_MAPS_LOCK = threading.Lock()


def _url_map(version: IndexVersion) -> dict[str, str]:
    """Canonical URL (catalog URL and source URL) → doc id, once per version."""
    key = (str(version.path), version.name)
    with _URL_MAPS_LOCK:
        found = _URL_MAPS.get(key)
        if found is not None:
            _URL_MAPS.move_to_end(key)
            return found
    out: dict[str, str] = {}
    # Source URLs first, then the aliases of merged copies (dmlqa.pipeline.works), so that a catalog URL
    # wins over another document's source URL.
    docs = list(version.docs.values())
    for u, doc_id in [(d.source_url, d.doc_id) for d in docs] + [
        (a, d.doc_id) for d in docs for a in d.aliases
    ] + [(d.url, d.doc_id) for d in docs]:
        try:
            out[canonicalize(u)] = doc_id
        except ValueError:
            if u:
                out[u] = doc_id
    with _URL_MAPS_LOCK:
        _URL_MAPS[key] = out
        while len(_URL_MAPS) > CACHE_VERSIONS:
            _URL_MAPS.popitem(last=False)
    return out


def _lookup(version: IndexVersion, query: str, ident: _Identity | None) -> str | None:
    if query.strip() in version.docs:  # a doc id, as search results and --json output show them
        return query.strip()
    if ident is None:
        return None
    for i in ident.ids:
        if i in version.docs:
            return i
        lowered = i.lower()
        if lowered != i and lowered in version.docs:
            return lowered
    urls = _url_map(version)
    for u in ident.urls:
        if u in urls:
            return urls[u]
    return None


def resolve_target(version: IndexVersion, query: str) -> str | None:
    """The doc id of the indexed resource a URL, arXiv id (``2201.12023``, ``arXiv:2201.12023v2``),
    DOI (``10.1145/…``, ``https://doi.org/…``) or doc id names; None for free text or when the
    resource is not in ``version``."""
    return _lookup(version, query, identify(query))


def _url_words(url: str) -> str:
    """Free text from a URL nobody indexed: the words of its host and path."""
    words = re.findall(r"[A-Za-z][A-Za-z0-9]+|\d{4}\.\d{4,5}", re.sub(r"^https?://", "", url))
    noise = {"www", "com", "org", "net", "io", "html", "htm", "pdf", "abs", "index", "php", "https", "http"}
    return " ".join(w for w in words if w.lower() not in noise)


def related(
    searcher: Searcher, query: str, *, k: int = 10, since: int | None = None, kinds: tuple[str, ...] = (),
    include_undated: bool = False,
) -> RelatedResult:
    """Document-level recommendations for a resource or a text.

    Args:
        searcher: an open :class:`~dmlqa.query.search.Searcher` (its current version is used throughout).
        query: a URL, arXiv id, DOI or doc id of an indexed resource, or free text.
        k: how many documents to return.
        since: keep documents from this year on; documents of unknown year are left out (and counted
            in ``undated_excluded``) unless ``include_undated``.
        kinds: keep only these kinds (``paper``, ``repo``…); empty keeps all.
        include_undated: with ``since``, keep documents whose year is unknown.

    Returns:
        A :class:`RelatedResult`; ``target`` is the resolved doc id (excluded from the items, as are
        other copies of the same work), ``notice`` says when an identifier was not in the index and
        the query was read as text instead, ``undated_excluded`` how many documents ``since`` left
        out only for want of a year.
    """
    query = query.strip()
    if not query:
        return RelatedResult(query=query, target=None, items=(), notice="empty query")
    version = searcher.version
    dv = doc_vectors(version)
    if not dv.doc_ids:
        return RelatedResult(query=query, target=None, items=(), notice="the index holds no documents")
    opts = {"since": since, "kinds": kinds, "include_undated": include_undated, "dv": dv}
    ident = identify(query)
    target = _lookup(version, query, ident)
    undated = _undated_candidates(version, Filters(kinds=tuple(kinds), since=since, include_undated=include_undated),
                                  target)
    if target is not None:
        if dv.has_vector[dv.pos[target]]:
            items = rank_like_doc(version, target, k=k, **opts)
            return RelatedResult(query=query, target=target, items=tuple(items), notice=None,
                                 undated_excluded=undated)
        # Indexed without any text: its title is all there is to compare.
        title = version.docs[target].title
        items = [r for r in rank_like_text(searcher, version, title, k=k + 1, **opts) if r.doc_id != target][:k]
        notice = f"{target} has no indexed text; related to its title instead"
        return RelatedResult(query=query, target=target, items=tuple(items), notice=notice, undated_excluded=undated)
    notice = None
    text = query
    if ident is not None:
        notice = f"{ident.label} {query} is not in the index; showing documents related to it as free text"
        if ident.label == "URL":
            text = _url_words(ident.urls[0] if ident.urls else query) or query
    items = rank_like_text(searcher, version, text, k=k, **opts)
    return RelatedResult(query=query, target=None, items=tuple(items), notice=notice, undated_excluded=undated)


def _undated_candidates(version: IndexVersion, filters: Filters, target: str | None) -> int:
    """:func:`~dmlqa.query.search.undated_excluded`, not counting the query document itself."""
    n = undated_excluded(version, filters)
    if n and target is not None and version.docs[target].year is None:
        kept = allowed_docs(version, replace(filters, include_undated=True))
        if kept is None or target in kept:
            n -= 1
    return n


def clear_cache() -> None:
    """Forget all cached document vectors and URL maps (tests, benchmarks)."""
    clear_vectors()
    with _URL_MAPS_LOCK:
        _URL_MAPS.clear()


__all__: Sequence[str] = ("Related", "RelatedResult", "clear_cache", "identify", "related", "resolve_target")
