"""The citation graph stage: every paper's reference list, resolved to the works of the knowledge base.

Runs after copies of one work are merged (:mod:`dmlqa.pipeline.works`), so that a reference to the
arXiv copy and one to the proceedings copy of a paper land on the same document. For each PDF the
parser (:mod:`dmlqa.extract.references`) gives the references and the sentences that cite them; each
reference is then resolved, strongest evidence first:

1. its **arXiv id** (arXiv's own DOIs ``10.48550/arXiv.<id>`` included) against the arXiv ids of every
   address a document is known by (catalog URL, source URL, merged copies' aliases);
2. its **DOI** against the DOIs of those addresses (``doi.org``, ACM pages, ``doi:`` catalog ids);
3. its **URL**, canonicalised, against those addresses (a repository or a docs page cited by link);
4. its **title**, normalised by :func:`~dmlqa.pipeline.works.title_key` (the rule that merges copies),
   against each document's title and, for "Name: subtitle" titles on either side, the subtitle alone
   (a list writes "DistBelief: Large Scale Distributed Deep Networks" for the paper titled "Large Scale
   Distributed Deep Networks", another "Long Sequence Training from System Perspective" for "Sequence
   Parallelism: Long Sequence Training from System Perspective"); then fuzzily, at :data:`TITLE_RATIO`
   (chosen by measurement, see there), which forgives what a PDF's text breaks ("Meshtensorflow",
   "Deepspeedinference") and small rewordings between a preprint and its proceedings version;
5. the **name** of a system ("MXNet" in "MXNet: A Flexible and Efficient Machine Learning Library ...")
   against the repositories of the knowledge base (a repository titled by its name, or ``github:owner/name``):
   lists name systems by their code, so the paper that introduced one is, for the knowledge base, that work.

Catalog cards are valid targets: the work is in the knowledge base (a list names it) even when only its
catalog facts are. A paper citing itself (its own technical report, a preprint of the same work) is
dropped and counted; cycles (A cites B's preprint, B's final version cites A) are kept, they are facts.

References that resolve to nothing are kept too (``cited`` None): ``dmlqa cites`` lists them and
``dmlqa suggest`` ranks the works several papers cite that no list names. Those are grouped into
works here, once, so that the query side never re-implements title normalisation: references that
share an arXiv id, a DOI, a URL or a normalised title are one work (union-find), keyed by the best of
them, ``arxiv:<id>``/``doi:<doi>``/``url:<url>``/``title:<key>``; a resolved reference's work is
``doc:<doc id>``.

The stage costs in proportion to change (issue 20): fuzzy matching reads candidates from a blocking index
(:class:`~dmlqa.pipeline.graph_index.TitleIndex`, exact: it finds what comparing all pairs finds), parsed
reference lists are cached by document (:class:`~dmlqa.pipeline.graph_index.ReferenceCache`), and with the
previous graph the fuzzy answers that nothing changed are reused (:class:`_Reuse`); the result is always
the one a full run gives.

Nothing here blocks a build: a document the parser fails on is logged and counted as skipped.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dmlqa.catalog.urls import arxiv_id, bare_arxiv_id, canonicalize, doi, is_url_title
from dmlqa.models import CitationLink, Document, Reference
from dmlqa.pipeline.graph_index import TITLE_RATIO as TITLE_RATIO  # the fuzzy rule's threshold, defined there
from dmlqa.pipeline.graph_index import TitleIndex, parse_all
from dmlqa.pipeline.works import title_key

if TYPE_CHECKING:
    from pathlib import Path

    from dmlqa.extract.references import ParsedReferences
    from dmlqa.index.citation_table import CitationRecord

log = logging.getLogger(__name__)

#: A fuzzy match also needs the years (when both are known) within this many years of each other.
FUZZY_YEARS = 2
#: A title matched with its spaces taken out must be this long (short ones collide: "Ray", "Petals").
COMPACT_MIN = 24
#: Subtitles ("Name: subtitle") are keys on their own only when at least this many words long.
SUBTITLE_WORDS = 4
#: System names shorter than this ("Exo", "Ray") never resolve by name alone.
MIN_NAME_CHARS = 4

_NAME_WORDS = re.compile(r"[a-z0-9]+")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class GraphResult:
    """The citation links of a build, one per reference of every PDF (self-citations dropped).

    ``works[i]`` is the work ``links[i]`` names: ``doc:<doc id>`` when resolved, else the group key of
    the references that name the same outside work (see the module docstring).
    """

    links: tuple[CitationLink, ...] = ()
    works: tuple[str, ...] = ()
    papers: int = 0  # documents whose reference lists were read
    references: int = 0  # references the parser found (self-citations included)
    resolved: int = 0  # references resolved to another document of the knowledge base
    skipped: int = 0  # entries the parser skipped, plus documents it failed on
    self_citations: int = 0
    by_how: dict[str, int] = field(default_factory=dict)  # "arxiv" | "doi" | "url" | "title" | "fuzzy" | "name"

    def rows(self) -> list[tuple[CitationLink, str]]:
        """(link, work) pairs: what the index version stores."""
        return list(zip(self.links, self.works, strict=True))


def normal_arxiv(value: str | None) -> str | None:
    """:func:`~dmlqa.catalog.urls.bare_arxiv_id`, old-style ids lower-cased: the graph's matching key."""
    ident = bare_arxiv_id(value)
    return ident.lower() if ident and "/" in ident else ident


def normal_doi(value: str | None) -> str | None:
    """A DOI lower-cased without URL prefix or trailing punctuation, else None."""
    d = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", (value or "").strip(), flags=re.IGNORECASE)
    d = d.rstrip(".,;)")
    return d.lower() if re.match(r"^10\.\d{4,9}/\S+$", d) else None


def _canonical(url: str) -> str | None:
    try:
        return canonicalize(url)
    except ValueError:
        return None


def _system_name(title: str) -> str | None:
    """The name of "Name: what it is" (or of a title of at most three words), as words; None when too short."""
    head = title.split(":", 1)[0] if ":" in title else (title if len(title.split()) <= 3 else "")
    words = " ".join(_NAME_WORDS.findall(head.lower()))
    return words if len(words) >= MIN_NAME_CHARS and len(words.split()) <= 3 else None


def _compact(title: str) -> str:
    """A title's letters and digits only, lower case (what survives a PDF that dropped the spaces)."""
    t = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    return "".join(re.findall(r"[a-z0-9]+", t))


def _subtitle(title: str) -> str | None:
    """The part of "Name: subtitle" after the name, as a title key, when long enough to name a work alone."""
    if ":" not in title:
        return None
    key = title_key(title.split(":", 1)[1])
    return key if key and len(key.split()) >= SUBTITLE_WORDS else None


class Resolver:
    """Resolves references to the documents it was made from (arXiv id, DOI, URL, title, fuzzy title, name).

    Where two documents claim one key, the first by rank keeps it: a paper before other kinds (a
    reference names the paper, not the project page that shares its title), full text before a card,
    then input order.
    """

    def __init__(self, documents: Sequence[Document]) -> None:
        self.arxiv: dict[str, str] = {}
        self.doi: dict[str, str] = {}
        self.url: dict[str, str] = {}
        self.year: dict[str, int | None] = {}
        for d in _ranked(documents):
            self.year[d.doc_id] = d.year
            kind, _, rest = d.doc_id.partition(":")
            if kind == "arxiv":
                self.arxiv.setdefault(normal_arxiv(rest) or rest, d.doc_id)
            elif kind == "doi":
                self.doi.setdefault(rest.lower(), d.doc_id)
            for u in dict.fromkeys((d.url, d.source_url, *d.aliases)):
                canon = _canonical(u) if u else None
                if canon is None:
                    continue
                self.url.setdefault(canon, d.doc_id)
                aid = arxiv_id(canon)
                if aid:
                    self.arxiv.setdefault(normal_arxiv(aid) or aid, d.doc_id)
                found = doi(canon)
                if found:
                    self.doi.setdefault(found.lower(), d.doc_id)
        self.title, self.contested = title_claims(documents)
        names: dict[str, set[str]] = {}
        for d in documents:
            if d.kind == "repo":
                repo = d.doc_id.split("/", 1)[1] if d.doc_id.startswith("github:") else ""
                for name in {_system_name(d.title), _system_name(repo)} - {None}:
                    names.setdefault(name, set()).add(d.doc_id)
        #: system name → the one repository that has it (a name two repositories share names neither)
        self.names = {n: next(iter(ids)) for n, ids in names.items() if len(ids) == 1}
        #: title keys without spaces: PDF text often loses them ("Scaling distributedmachinelearning...")
        self.compact = {_compact(k): d for k, d in reversed(self.title.items()) if len(_compact(k)) >= COMPACT_MIN}
        self.titles = TitleIndex(self.title)  # what a fuzzy match reads instead of every title

    def resolve(self, ref: Reference, *, fuzzy: Callable[[str, int | None], str | None] | None = None,
                ) -> tuple[str | None, str]:
        """The doc id ``ref`` names and how ("arxiv", "doi", "url", "title", "fuzzy", "name"), or (None, "").

        ``fuzzy`` stands in for :meth:`fuzzy` (the incremental graph passes the previous build's answer when
        nothing that could change it changed)."""
        d = normal_doi(ref.doi)
        m = _ARXIV_DOI.match(d or "")
        aid = normal_arxiv(ref.arxiv_id) or (normal_arxiv(m.group("id")) if m else None)
        canon = _canonical(ref.url) if ref.url else None
        if aid is None and canon is not None:
            aid = arxiv_id(canon)
        if aid and aid in self.arxiv:
            return self.arxiv[aid], "arxiv"
        if d is None and canon is not None:
            d = (doi(canon) or "").lower() or None
        if d and d in self.doi:
            return self.doi[d], "doi"
        if canon and canon in self.url:
            return self.url[canon], "url"
        key = title_key(ref.title) if ref.title else None
        name = _system_name(ref.title) if ref.title else None
        compact = _compact(ref.title) if ref.title else ""
        if key is None:
            if compact in self.compact:  # two "words" left of a title that lost its spaces
                return self.compact[compact], "title"
            return (self.names[name], "name") if name in self.names else (None, "")
        if key in self.title:
            return self.title[key], "title"
        sub = _subtitle(ref.title)  # "Sequence Parallelism: Long Sequence ..." listed without its name
        if sub and sub in self.title:
            return self.title[sub], "title"
        if compact in self.compact:
            return self.compact[compact], "title"
        found = (fuzzy or self.fuzzy)(key, ref.year)
        if found:
            return found, "fuzzy"
        return (self.names[name], "name") if name in self.names else (None, "")

    def fuzzy(self, key: str, year: int | None = None) -> str | None:
        """The document whose title is closest to ``key`` at :data:`TITLE_RATIO` or above (years agreeing).

        The closest title only: when its year disagrees, no other title is tried (a near-identical title
        a decade apart is a different work, and so is anything further from the reference)."""
        best = self.titles.best(key)
        if best is None:
            return None
        doc_id = self.title[best]
        known = self.year.get(doc_id)
        if year and known and abs(year - known) > FUZZY_YEARS:
            return None
        return doc_id


def _ranked(documents: Sequence[Document]) -> list[Document]:
    """Documents in the order they claim keys: papers before other kinds, full text before cards, then input order."""
    return [d for _, d in sorted(enumerate(documents), key=lambda p: (p[1].kind != "paper", p[1].is_card, p[0]))]


def title_claims(documents: Sequence[Document]) -> tuple[dict[str, str], set[str]]:
    """Title key (and subtitle key) → the document that holds it, first by rank; and the keys that more than
    one document claims, whose holder depends on input order."""
    title: dict[str, str] = {}
    contested: set[str] = set()
    for d in _ranked(documents):
        if is_url_title(d.title, d.url):
            continue
        for key in (title_key(d.title), _subtitle(d.title)):
            if key and title.setdefault(key, d.doc_id) != d.doc_id:
                contested.add(key)
    return title, contested


class _Works:
    """Union-find over the identities of unresolved references: a shared arXiv id, DOI, URL or title = one work."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        for k in keys[1:]:
            a, b = sorted((self.find(keys[0]), self.find(k)), key=_key_rank)
            if a != b:
                self.parent[b] = a


def _key_rank(key: str) -> tuple[int, str]:
    """arXiv ids name a work best, then DOIs, then titles (the group is keyed by its best identity)."""
    return ({"arxiv": 0, "doi": 1, "url": 2, "title": 3}.get(key.split(":", 1)[0], 4), key)


def _identities(ref: Reference) -> list[str]:
    d = normal_doi(ref.doi)
    m = _ARXIV_DOI.match(d or "")
    aid = normal_arxiv(ref.arxiv_id) or (normal_arxiv(m.group("id")) if m else None)
    canon = _canonical(ref.url) if ref.url else None
    if aid is None and canon:
        aid = arxiv_id(canon)
    if d is None and canon:
        d = (doi(canon) or "").lower() or None
    out = [f"arxiv:{aid}"] if aid else []
    if d and not m:
        out.append(f"doi:{d}")
    if canon and not aid and not d and urlsplit(canon).path.strip("/"):  # a site's front page names no one work
        out.append(f"url:{canon}")
    key = title_key(ref.title) if ref.title else None
    if key:
        out.append(f"title:{key}")
    return out


def _parse(doc: Document) -> ParsedReferences:
    from dmlqa.extract.references import parse_references

    return parse_references(doc)


@dataclass(frozen=True)
class PreviousGraph:
    """The last published graph and the documents it was resolved against: what :func:`citation_graph` reuses.

    ``documents`` are the previous build's merged works (only their ids, titles, kinds, URLs and years are
    read); ``records`` its ``citations`` table (:func:`dmlqa.index.citation_table.published_citations`).
    """

    documents: Sequence[Document]
    records: Sequence[CitationRecord]


class _Reuse:
    """The previous build's fuzzy-title answers, where nothing that could change them changed.

    Only the fuzzy step is worth reusing: the exact steps (arXiv id, DOI, URL, title, name) are dictionary
    look-ups, re-run for every reference against the new documents, so a new target that an identifier
    names, or a target gone, is always seen. A fuzzy answer is a function of the reference (its title key and
    year) and of the titles that pass the match rule against it, with their documents and years; the tie rule
    does not depend on order. So the previous answer stands unless a title that passes for this reference was
    added, removed, moved to another document, or its document's year changed: those *changed* titles get their
    own :class:`TitleIndex`, and a reference is matched afresh only when one of them passes for it. Titles
    that several previous documents claimed are counted as changed too: which of them held the title depended
    on the previous input order, which is not known here.
    """

    def __init__(self, previous: PreviousGraph, resolver: Resolver) -> None:
        self.resolver = resolver
        old, contested = title_claims(previous.documents)
        old_year = {d.doc_id: d.year for d in previous.documents}
        new = resolver.title
        changed = [k for k in old.keys() | new.keys()
                   if old.get(k) != new.get(k) or k in contested or old_year.get(old[k]) != resolver.year.get(new[k])]
        self.changed = TitleIndex(sorted(changed))
        self.links = {(r.link.citing, r.link.reference.ordinal): r.link for r in previous.records}
        self.reused = 0

    def fuzzy_for(self, citing: str, ref: Reference) -> Callable[[str, int | None], str | None]:
        """What :meth:`Resolver.resolve` calls for the fuzzy step of ``ref`` (cited by ``citing``)."""
        prev = self.links.get((citing, ref.ordinal))
        # "name" or "": the fuzzy step ran and found nothing (it runs after every exact step failed, and the
        # key it needs is the reference's own); any other "how" resolved before it and tells nothing about it.
        if prev is None or prev.how not in ("fuzzy", "name", "") or prev.reference != ref:
            return self.resolver.fuzzy
        answer = prev.cited if prev.how == "fuzzy" else None

        def fuzzy(key: str, year: int | None) -> str | None:
            if self.changed and self.changed.best(key) is not None:
                return self.resolver.fuzzy(key, year)
            self.reused += 1
            return answer

        return fuzzy


def citation_graph(
    documents: Sequence[Document], *, parse: Callable[[Document], ParsedReferences] | None = None,
    previous: PreviousGraph | None = None, cache: Path | None = None,
) -> GraphResult:
    """Parse every PDF's references and resolve them against ``documents`` (the merged works of a build).

    ``parse`` stands in for :func:`dmlqa.extract.references.parse_references` (tests). Every reference
    is a link, resolved or not; a self-citation is dropped and counted. With ``cache`` (a home's
    ``index/cache/references.sqlite``) a document's parsed list is kept and reused while its source, title
    and the parser are unchanged; with ``previous`` the fuzzy title matches that nothing changed are taken
    from the previous graph (see :class:`_Reuse`). Either way the result is the one a full run gives.
    """
    parse = parse or _parse
    resolver = Resolver(documents)
    reuse = _Reuse(previous, resolver) if previous is not None else None
    links: list[CitationLink] = []
    idents: list[list[str]] = []
    papers = total = resolved = skipped = selfs = 0
    by_how: dict[str, int] = {}
    for d, parsed in parse_all(documents, parse, cache):
        if isinstance(parsed, Exception):
            log.error("reading the references of %s failed: %s", d.doc_id, parsed)
            skipped += 1
            continue
        papers += 1
        skipped += parsed.skipped
        for ref in parsed.references:
            total += 1
            cited, how = resolver.resolve(ref, fuzzy=reuse.fuzzy_for(d.doc_id, ref) if reuse else None)
            if cited == d.doc_id:
                selfs += 1
                continue
            if cited is not None:
                resolved += 1
                by_how[how] = by_how.get(how, 0) + 1
            links.append(CitationLink(citing=d.doc_id, reference=ref, cited=cited,
                                      context=parsed.contexts.get(ref.ordinal, ""), how=how))
            idents.append([] if cited else _identities(ref))
    groups = _Works()
    for keys in idents:
        if keys:
            groups.join(keys)
    works = tuple(f"doc:{link.cited}" if link.cited else (groups.find(keys[0]) if keys else "")
                  for link, keys in zip(links, idents, strict=True))
    if reuse is not None:
        log.info("citation graph: %d of %d fuzzy title matches reused, %d titles changed", reuse.reused, total,
                 len(reuse.changed))
    return GraphResult(links=tuple(links), works=works, papers=papers, references=total, resolved=resolved,
                       skipped=skipped, self_citations=selfs, by_how=by_how)


# -- open copies named by citing papers ------------------------------------------------------------------


def arxiv_hints(index_dir: Path) -> dict[str, tuple[str, ...]]:
    """arXiv ids that citing papers' references give a knowledge-base work found by another route.

    A reference "Blink: Fast and Generic Collectives ... arXiv:1910.04940" that resolved by its title to
    the MLSys page tells where an open copy of that (maybe paywalled) paper is. Keyed by document id,
    which is the catalog id of the entry the work is kept under, so the next build's fetcher
    (:func:`dmlqa.acquire.fetch_resource`, ``known_arxiv_ids``) tries the copy when the publisher fails.
    Read from the published version: the fetch stage runs before this build's graph exists.
    Name matches (a system's repository) and links that resolved by the id itself give none.
    """
    from dmlqa.index.citation_table import published_citations
    from dmlqa.index.versions import current_version

    records = published_citations(index_dir, current_version(index_dir))
    by_doc: dict[str, dict[str, None]] = {}
    for rec in records:
        link = rec.link
        aid = normal_arxiv(link.reference.arxiv_id)
        if link.cited and aid and link.how not in ("arxiv", "name") and link.cited != f"arxiv:{aid}":
            by_doc.setdefault(link.cited, {})[aid] = None
    return {doc_id: tuple(ids) for doc_id, ids in by_doc.items()}
