"""Document-level recommendations: what else in the index is like this paper, page or text.

``related`` takes a catalog URL (any spelling that canonicalises to it), an arXiv id, a DOI, a doc
id, the title (or the "Name" of a "Name: subtitle" title) of an indexed document, or free text; or
several of them, for their combined neighbourhood. This module reads what the query names and
resolves it to an indexed document; an indexed resource is then compared with every other document
through one vector per document (:mod:`dmlqa.query.docvectors`) and the citation graph
(:mod:`dmlqa.query.graph`), free text is embedded and compared both with those document vectors
and, passage by passage, through the hybrid retrievers of :mod:`dmlqa.query.search`
(:mod:`dmlqa.query.relatedness` scores both and picks the reason shown). Catalog cards are
recommended like any other document. An identifier that is not in the index is read as free text,
and the result says so; so is a title the query only resembles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Any

from dmlqa.catalog.urls import arxiv_id, canonicalize, doi, resource_id
from dmlqa.index.versions import IndexVersion
from dmlqa.query.docvectors import VersionCache, clear_vectors, doc_vectors
from dmlqa.query.graph import citation_graph, clear_graphs
from dmlqa.query.relatedness import Related, rank_like_docs, rank_like_text, title_words
from dmlqa.query.search import Filters, Searcher, allowed_docs, undated_excluded


@dataclass(frozen=True)
class RelatedResult:
    """What :func:`related` returns; ``target`` is the doc id when the query named an indexed resource.

    ``targets`` are all the doc ids the query named (several for ``related A B C``; ``target`` is the
    first of them).
    """

    query: str
    target: str | None
    items: tuple[Related, ...]
    notice: str | None = None
    #: Documents the ``since`` filter left out only because their year is unknown (not in the JSON).
    undated_excluded: int = 0
    targets: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query": self.query, "target": self.target}
        if len(self.targets) > 1:  # several targets (`related A B C`); one target keeps the earlier shape
            out["targets"] = list(self.targets)
        out.update(notice=self.notice, items=[r.to_json() for r in self.items])
        return out


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


_URL_MAPS: VersionCache[dict[str, str]] = VersionCache()


def _url_map(version: IndexVersion) -> dict[str, str]:
    """Canonical URL (catalog URL and source URL) → doc id, once per version."""
    return _URL_MAPS.get((str(version.path), version.name), lambda: _build_url_map(version))


def _build_url_map(version: IndexVersion) -> dict[str, str]:
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


#: A query of at least this many words names the document whose title it matches at :data:`TITLE_RATIO`.
TITLE_MIN_WORDS = 4
#: Fuzzy title match for queries (the citation graph's rule for references, :mod:`dmlqa.pipeline.graph`).
TITLE_RATIO = 0.9


def _name(title: str) -> str:
    """The "Name" of a "Name: subtitle" title, as title words ("" when the title has no such name)."""
    head = title.split(":", 1)[0] if ":" in title else ""
    return title_words(head) if 0 < len(head.split()) <= 4 else ""


def _close(words: str, title: str) -> bool:
    """Whether ``words`` and ``title`` match at :data:`TITLE_RATIO`, in time linear in their lengths.

    ``ratio()`` alone is quadratic: a 100 KB text took a third of a second per title, minutes over an
    index. Its two upper bounds go first: the lengths (a ratio of 0.9 needs lengths within about 20%
    of each other) and the shared characters, each linear; only a near-equal pair reaches ``ratio()``.
    """
    matcher = SequenceMatcher(None, words, title)
    return (matcher.real_quick_ratio() >= TITLE_RATIO and matcher.quick_ratio() >= TITLE_RATIO
            and matcher.ratio() >= TITLE_RATIO)


def resolve_title(version: IndexVersion, query: str) -> tuple[str | None, tuple[str, ...]]:
    """The indexed document a title names, and the other documents it could also name.

    The query's words must be a document's whole title, its "Name" ("GPipe", "ZeRO-Offload"), or, from
    :data:`TITLE_MIN_WORDS` words on, the start of its title or nearly all of it (:data:`TITLE_RATIO`).
    Several matches: full text before a card, a paper before other kinds, the most cited in the
    knowledge base, the newest.
    """
    words = title_words(query)
    if not words or identify(query) is not None:
        return None, ()
    n = len(words.split())
    found = []
    for d in version.docs.values():
        title = title_words(d.title)
        if words in (title, _name(d.title)) or (n >= TITLE_MIN_WORDS and (
                title.startswith(words + " ") or _close(words, title))):
            found.append(d)
    if not found:
        return None, ()
    cited = citation_graph(version).cited_by
    found.sort(key=lambda d: (d.is_card, d.kind != "paper", -len(cited.get(d.doc_id, ())), -(d.year or 0),
                              d.doc_id))
    return found[0].doc_id, tuple(d.doc_id for d in found[1:])


def resolve_target(version: IndexVersion, query: str) -> str | None:
    """The doc id of the indexed resource a URL, arXiv id (``2201.12023``, ``arXiv:2201.12023v2``),
    DOI (``10.1145/…``, ``https://doi.org/…``), doc id or title (:func:`resolve_title`) names; None
    for free text or when the resource is not in ``version``."""
    return _lookup(version, query, identify(query)) or resolve_title(version, query)[0]


def _title_notice(version: IndexVersion, query: str, doc_id: str, others: Sequence[str]) -> str:
    also = f" (also {', '.join(others[:3])}{' …' if len(others) > 3 else ''}: name it by id)" if others else ""
    return f"read {query!r} as {version.docs[doc_id].title} ({doc_id}){also}"


def _url_words(url: str) -> str:
    """Free text from a URL nobody indexed: the words of its host and path."""
    words = re.findall(r"[A-Za-z][A-Za-z0-9]+|\d{4}\.\d{4,5}", re.sub(r"^https?://", "", url))
    noise = {"www", "com", "org", "net", "io", "html", "htm", "pdf", "abs", "index", "php", "https", "http"}
    return " ".join(w for w in words if w.lower() not in noise)


def related(
    searcher: Searcher, query: str | Sequence[str], *, k: int = 10, since: int | None = None,
    kinds: tuple[str, ...] = (), include_undated: bool = False, version: IndexVersion | None = None,
) -> RelatedResult:
    """Document-level recommendations for a resource, several resources, or a text.

    Args:
        searcher: an open :class:`~dmlqa.query.search.Searcher` (its encoder embeds free text).
        query: a URL, arXiv id, DOI, doc id or title of an indexed resource, or free text; or several,
            for the documents related to all of them (their combined neighbourhood, themselves excluded).
            Several that name nothing indexed are read together as one free text.
        k: how many documents to return.
        since: keep documents from this year on; documents of unknown year are left out (and counted
            in ``undated_excluded``) unless ``include_undated``.
        kinds: keep only these kinds (``paper``, ``repo``…); empty keeps all.
        include_undated: with ``since``, keep documents whose year is unknown.
        version: the index version to read throughout (a request's pinned one); None: the one
            published now, pinned once for the whole call.

    Returns:
        A :class:`RelatedResult`; ``target`` is the resolved doc id (excluded from the items, as are
        other copies of the same work; ``targets`` all of them), ``notice`` says when an identifier was
        not in the index and the query was read as text instead (or which document a title was read
        as), ``undated_excluded`` how many documents ``since`` left out only for want of a year.
    """
    queries = [q.strip() for q in ([query] if isinstance(query, str) else query) if q.strip()]
    query = queries[0] if queries else ""
    if not query:
        return RelatedResult(query=query, target=None, items=(), notice="empty query")
    if version is None:
        version = searcher.pin()
    if len(queries) > 1:
        return _related_to_several(searcher, version, queries, k=k, since=since, kinds=kinds,
                                   include_undated=include_undated)
    dv = doc_vectors(version)
    if not dv.doc_ids:
        return RelatedResult(query=query, target=None, items=(), notice="the index holds no documents")
    opts = {"since": since, "kinds": kinds, "include_undated": include_undated, "dv": dv}
    ident = identify(query)
    target = _lookup(version, query, ident)
    notice = None
    if target is None and ident is None:
        target, others = resolve_title(version, query)
        notice = _title_notice(version, query, target, others) if target else None
    undated = _undated_candidates(version, Filters(kinds=tuple(kinds), since=since, include_undated=include_undated),
                                  target)
    if target is not None:
        if dv.has_vector[dv.pos[target]]:
            items = rank_like_docs(version, [target], k=k, **opts)
            return RelatedResult(query=query, target=target, items=tuple(items), notice=notice,
                                 undated_excluded=undated, targets=(target,))
        # Indexed without any text: its title is all there is to compare.
        title = version.docs[target].title
        items = [r for r in rank_like_text(searcher, version, title, k=k + 1, **opts) if r.doc_id != target][:k]
        notice = f"{target} has no indexed text; related to its title instead"
        return RelatedResult(query=query, target=target, items=tuple(items), notice=notice, undated_excluded=undated,
                             targets=(target,))
    text = query
    if ident is not None:
        notice = f"{ident.label} {query} is not in the index; showing documents related to it as free text"
        if ident.label == "URL":
            text = _url_words(ident.urls[0] if ident.urls else query) or query
    items = rank_like_text(searcher, version, text, k=k, **opts)
    return RelatedResult(query=query, target=None, items=tuple(items), notice=notice, undated_excluded=undated)


def _related_to_several(
    searcher: Searcher, version: IndexVersion, queries: Sequence[str], *, k: int, since: int | None,
    kinds: tuple[str, ...], include_undated: bool,
) -> RelatedResult:
    """:func:`related` for several queries: the documents they name, together; the rest left out (said)."""
    joined = " ".join(queries)
    found: list[str] = []
    missing: list[str] = []
    read_as: list[str] = []  # which document each title was read as
    for q in queries:
        ident = identify(q)
        doc_id = _lookup(version, q, ident)
        if doc_id is None and ident is None:
            doc_id, others = resolve_title(version, q)
            if doc_id:
                read_as.append(_title_notice(version, q, doc_id, others))
        (found if doc_id else missing).append(doc_id or q)
    found = list(dict.fromkeys(found))
    if not found:  # words of one text, split by the shell
        res = related(searcher, joined, k=k, since=since, kinds=kinds, include_undated=include_undated,
                      version=version)
        return replace(res, query=joined)
    if len(found) == 1:
        res = related(searcher, found[0], k=k, since=since, kinds=kinds, include_undated=include_undated,
                      version=version)
        res = replace(res, query=joined, notice=None)
    else:
        items = rank_like_docs(version, found, k=k, since=since, kinds=kinds, include_undated=include_undated)
        undated = _undated_candidates(
            version, Filters(kinds=tuple(kinds), since=since, include_undated=include_undated), found)
        res = RelatedResult(query=joined, target=found[0], items=tuple(items), undated_excluded=undated,
                            targets=tuple(found))
    notes = [*read_as, *([f"not in the index, left out: {', '.join(missing)}"] if missing else [])]
    return replace(res, notice="; ".join(notes) or None)


def _undated_candidates(version: IndexVersion, filters: Filters, target: str | Sequence[str] | None) -> int:
    """:func:`~dmlqa.query.search.undated_excluded`, not counting the query documents themselves."""
    n = undated_excluded(version, filters)
    targets = [target] if isinstance(target, str) else list(target or ())
    undated = [t for t in targets if version.docs[t].year is None]
    if n and undated:
        kept = allowed_docs(version, replace(filters, include_undated=True))
        n -= sum(1 for t in undated if kept is None or t in kept)
    return n


def clear_cache() -> None:
    """Forget all cached document vectors and URL maps (tests, benchmarks)."""
    clear_vectors()
    clear_graphs()
    _URL_MAPS.clear()


__all__: Sequence[str] = (
    "Related", "RelatedResult", "clear_cache", "identify", "related", "resolve_target", "resolve_title",
)
