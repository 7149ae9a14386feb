"""The citation graph at query time: what a paper cites, what cites it, what the lists miss, and how two
documents are related through references.

The graph is the version's ``citations`` table (written by :mod:`dmlqa.pipeline.graph`), read once per
index version and kept in memory (a few thousand links for the snapshot). A version built before the
graph existed reads as one with no links: every command still answers, with nothing to show.

Relatedness through references, as bibliometrics measures it:

* a **direct link**: one cites the other;
* **bibliographic coupling**: both cite the same works (Kessler 1963). Works are weighted by rarity
  (``log(1 + papers / citers)``), so that sharing GPipe says more than sharing Adam, and two documents
  are compared by the cosine of their weighted reference sets;
* **co-citation**: other papers cite both (Small 1973), as the number of papers citing both over the
  geometric mean of each one's citers (+1 each, so that one shared citer among few is not a certainty).

Coupling needs references (full-text papers); co-citation works for every document others cite, catalog
cards included: a work the knowledge base holds only as a card is still placed by the papers citing it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dmlqa.index.versions import CitationRecord, DocRecord, IndexVersion
from dmlqa.query.docvectors import VersionCache

#: Names of works in reasons: a title's "Name:" part when it is at most this many words, else the title cut.
NAME_WORDS = 3
NAME_CHARS = 48


@dataclass(frozen=True)
class Graph:
    """The citation links of one index version, indexed both ways."""

    version: str
    records: tuple[CitationRecord, ...]
    #: doc id → documents of the knowledge base it cites (list order, each once)
    cites: dict[str, tuple[str, ...]]
    #: doc id → documents of the knowledge base citing it
    cited_by: dict[str, tuple[str, ...]]
    #: doc id → {work: rarity weight} over every reference it makes, resolved or not
    works: dict[str, dict[str, float]]
    #: doc id → squared norm of its weighted reference set (coupling's denominator)
    norms: dict[str, float]
    #: work → a name to show for it (short title)
    names: dict[str, str] = field(default_factory=dict)
    #: work → documents citing it
    citers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: (citing, cited) → the first sentence of ``citing`` that cites ``cited``
    contexts: dict[tuple[str, str], str] = field(default_factory=dict)

    def first_context(self, citing: str, cited: str) -> str:
        """The first sentence of ``citing`` that cites ``cited`` ("" when no marker was tied to it)."""
        return self.contexts.get((citing, cited), "")

    def direct(self, a: str, b: str) -> bool:
        return b in self.cites.get(a, ()) or a in self.cites.get(b, ())

    def coupling(self, a: str, b: str) -> tuple[float, list[str]]:
        """Cosine of the two documents' weighted reference sets, and the shared works, rarest first."""
        wa, wb = self.works.get(a), self.works.get(b)
        if not wa or not wb:
            return 0.0, []
        shared = [w for w in wa if w in wb]
        if not shared:
            return 0.0, []
        score = sum(wa[w] * wb[w] for w in shared) / math.sqrt(self.norms[a] * self.norms[b])
        shared.sort(key=lambda w: (-wa[w], self.names.get(w, w)))
        return score, shared

    def cocitation(self, a: str, b: str) -> tuple[float, int]:
        """Papers citing both, over the geometric mean of each one's citers (+1), and that count."""
        ca, cb = self.cited_by.get(a, ()), self.cited_by.get(b, ())
        if not ca or not cb:
            return 0.0, 0
        n = len(set(ca) & set(cb))
        return n / math.sqrt((len(ca) + 1) * (len(cb) + 1)), n


def short_name(title: str) -> str:
    """What a reason calls a work: "GPipe" for "GPipe: Efficient Training of ...", else the title, cut."""
    title = " ".join(title.split())
    head = title.split(":", 1)[0].strip()
    if ":" in title and head and len(head.split()) <= NAME_WORDS:
        return head
    if len(title) <= NAME_CHARS:
        return title
    cut = title[: NAME_CHARS - 1]
    return (cut[: cut.rindex(" ")] if " " in cut else cut).rstrip(" ,;:.") + "…"


def _build(version: IndexVersion) -> Graph:
    records = tuple(version.citations())
    cites: dict[str, dict[str, None]] = {}
    cited_by: dict[str, dict[str, None]] = {}
    refs: dict[str, set[str]] = {}
    titles: dict[str, Counter] = {}
    contexts: dict[tuple[str, str], str] = {}
    for rec in records:
        link = rec.link
        if link.cited:
            cites.setdefault(link.citing, {})[link.cited] = None
            cited_by.setdefault(link.cited, {})[link.citing] = None
            if link.context:
                contexts.setdefault((link.citing, link.cited), link.context)
        if rec.work:
            refs.setdefault(link.citing, set()).add(rec.work)
            if not link.cited and link.reference.title:
                titles.setdefault(rec.work, Counter())[link.reference.title.strip()] += 1
    papers = max(len(refs), 1)
    citers = Counter(w for ws in refs.values() for w in ws)
    weight = {w: math.log(1 + papers / n) for w, n in citers.items()}
    works = {d: {w: weight[w] for w in ws} for d, ws in refs.items()}
    names: dict[str, str] = {}
    for w in citers:
        if w.startswith("doc:"):
            doc = version.docs.get(w[4:])
            names[w] = short_name(doc.title) if doc else w[4:]
        elif w in titles:
            names[w] = short_name(titles[w].most_common(1)[0][0])
        else:
            names[w] = w.split(":", 1)[-1]
    return Graph(
        version=version.name, records=records,
        cites={d: tuple(x) for d, x in cites.items()}, cited_by={d: tuple(x) for d, x in cited_by.items()},
        works=works, norms={d: sum(v * v for v in ws.values()) for d, ws in works.items()}, names=names,
        citers=_invert(refs), contexts=contexts,
    )


def _invert(refs: dict[str, set[str]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for d in sorted(refs):
        for w in refs[d]:
            out.setdefault(w, []).append(d)
    return {w: tuple(ds) for w, ds in out.items()}


_GRAPHS: VersionCache[Graph] = VersionCache()


def citation_graph(version: IndexVersion) -> Graph:
    """The graph of ``version``, read once and kept for the last few versions (like the document vectors)."""
    return _GRAPHS.get((str(version.path), version.name), lambda: _build(version))


def clear_graphs() -> None:
    _GRAPHS.clear()


# -- cites / cited-by ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphItem:
    """A document of the knowledge base on the other end of a citation, with the sentence that makes it."""

    doc_id: str
    title: str
    url: str
    year: int | None
    context: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "title": self.title, "url": self.url, "year": self.year,
                "context": self.context}


@dataclass(frozen=True)
class OutsideWork:
    """A reference that names no document of the knowledge base."""

    title: str
    year: int | None
    arxiv_id: str | None
    doi: str | None

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "year": self.year, "arxiv_id": self.arxiv_id, "doi": self.doi}


@dataclass(frozen=True)
class CitationsResult:
    """What ``cites`` and ``cited_by`` return; ``unresolved`` only for ``cites``."""

    target: GraphItem
    items: tuple[GraphItem, ...]
    unresolved: tuple[OutsideWork, ...] | None = None
    notice: str | None = None

    def to_json(self) -> dict[str, Any]:
        target = {k: v for k, v in self.target.to_json().items() if k != "context"}
        out: dict[str, Any] = {"target": target, "items": [i.to_json() for i in self.items]}
        if self.unresolved is not None:
            out["unresolved"] = [u.to_json() for u in self.unresolved]
        return out


def _item(doc: DocRecord, context: str = "") -> GraphItem:
    return GraphItem(doc.doc_id, doc.title, doc.link, doc.year, context)


def _no_graph_notice(version: IndexVersion, doc: DocRecord, what: str) -> str | None:
    if not version.has_citations:
        return f"index version {version.name} was built before citations were read; run `dmlqa build`"
    if what == "cites" and doc.is_card:
        return f"{doc.doc_id} is a catalog card (no full text): its references are unknown"
    if what == "cites" and doc.content_type != "pdf":
        return f"{doc.doc_id} is not a PDF: only papers' reference lists are read"
    return None


def _raw_title(raw: str) -> str:
    text = " ".join(raw.split())
    return text if len(text) <= 120 else text[:119].rstrip() + "…"


def cites(version: IndexVersion, target: str, *, k: int | None = None) -> CitationsResult:
    """The documents ``target`` (a doc id of ``version``) cites, in its reference order, and the
    references that name nothing in the knowledge base (each at most ``k``)."""
    doc = version.docs[target]
    items: dict[str, GraphItem] = {}
    outside: list[OutsideWork] = []
    for rec in version.citations(citing=target):
        link, ref = rec.link, rec.link.reference
        if link.cited and link.cited in version.docs:
            if link.cited not in items or (link.context and not items[link.cited].context):
                items[link.cited] = _item(version.docs[link.cited], link.context)
        elif not link.cited:
            outside.append(OutsideWork(ref.title or _raw_title(ref.raw), ref.year, ref.arxiv_id, ref.doi))
    found = list(items.values())[:k] if k else list(items.values())
    return CitationsResult(_item(doc), tuple(found), tuple(outside[:k] if k else outside),
                           notice=_no_graph_notice(version, doc, "cites"))


def cited_by(version: IndexVersion, target: str, *, k: int | None = None) -> CitationsResult:
    """The documents citing ``target``, newest first, each with its citing sentence."""
    doc = version.docs[target]
    items: dict[str, GraphItem] = {}
    for rec in version.citations(cited=target):
        link = rec.link
        if link.citing not in version.docs:
            continue
        if link.citing not in items or (link.context and not items[link.citing].context):
            items[link.citing] = _item(version.docs[link.citing], link.context)
    found = sorted(items.values(), key=lambda i: (-(i.year or 0), i.title.lower()))
    return CitationsResult(_item(doc), tuple(found[:k] if k else found), notice=_no_graph_notice(version, doc, "by"))


# -- suggest --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suggestion:
    """A work several documents cite that no list names; ``url`` is where it can be fetched (None: title only)."""

    title: str
    year: int | None
    arxiv_id: str | None
    doi: str | None
    cited_by: tuple[str, ...]
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "year": self.year, "arxiv_id": self.arxiv_id, "doi": self.doi,
                "url": self.url, "cited_by": list(self.cited_by)}


@dataclass(frozen=True)
class Suggestions:
    """What ``suggest`` returns; with ``--add``, the catalog ids added and the titles that had no URL."""

    items: tuple[Suggestion, ...]
    added: tuple[str, ...] = ()
    not_added: tuple[str, ...] = ()
    list_name: str | None = None  # the catalog list they were added under, when added
    notice: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"items": [s.to_json() for s in self.items]}
        if self.list_name is not None:
            out.update(list=self.list_name, added=list(self.added), not_added=list(self.not_added))
        return out


def _most_common(values: Sequence[Any]) -> Any:
    found = Counter(v for v in values if v)
    return found.most_common(1)[0][0] if found else None


def suggest(version: IndexVersion, *, k: int = 15, min_citers: int = 2) -> list[Suggestion]:
    """Works cited by at least ``min_citers`` documents that resolve to no document of the knowledge base,
    most cited first, then newest.

    The grouping into works (shared arXiv id, DOI, URL or normalised title) was done by the build.
    """
    groups: dict[str, list[CitationRecord]] = {}
    for rec in citation_graph(version).records:
        if rec.work and not rec.link.cited:
            groups.setdefault(rec.work, []).append(rec)
    out: list[Suggestion] = []
    for recs in groups.values():
        citing = sorted({r.link.citing for r in recs})
        if len(citing) < min_citers:
            continue
        refs = [r.link.reference for r in recs]
        aid, d = _most_common([r.arxiv_id for r in refs]), _most_common([r.doi for r in refs])
        url = (f"https://arxiv.org/abs/{aid}" if aid else f"https://doi.org/{d}" if d
               else _most_common([r.url for r in refs]))
        title = _most_common([" ".join(r.title.split()) for r in refs]) or _raw_title(refs[0].raw)
        out.append(Suggestion(title, _most_common([r.year for r in refs]), aid, d, tuple(citing), url))
    out.sort(key=lambda s: (-len(s.cited_by), -(s.year or 0), s.title.lower()))
    return out[:k]


# -- relatedness through references ----------------------------------------------------------------------

_AND = re.compile(r", (?=[^,]*$)")


def names(items: Sequence[str], more: int = 0) -> str:
    """"A", "A and B", "A, B and 3 more"."""
    if more:
        return f"{', '.join(items)} and {more} more"
    return _AND.sub(" and ", ", ".join(items))


#: What a relation adds to the content score of :mod:`dmlqa.query.relatedness` (per target, averaged over
#: the targets): a direct link, and the coupling and co-citation cosines (each in [0, 1]) times these.
#: No judged neighbours are stored to tune them on; they were set on the snapshot so that a paper linked
#: by citation (graph part 0.15-0.4) passes content-only neighbours of similar text (cosines 0.4-0.55:
#: for GPipe, docs pages on "pipeline parallelism" give way to ZeRO and Megatron-LM, which cite it), while
#: a neighbour far closer in text (Checkmate for Dynamic Tensor Rematerialization, 0.81) stays first.
DIRECT_WEIGHT = 0.15
COUPLING_WEIGHT = 0.3
COCITATION_WEIGHT = 0.3
#: A relation becomes the reason shown when it adds at least this much (else the matching passage does).
REASON_MIN = 0.03
#: Citing sentences quoted in reasons are cut to about this many characters.
CONTEXT_CHARS = 140


@dataclass(frozen=True)
class Relation:
    """How a document is related to the targets through references: what it adds to the score, and why."""

    score: float
    kind: str = ""  # "cites" | "cited_by" | "coupling" | "cocitation"; "" when too weak to be the reason
    reason: str = ""


def _quote(context: str) -> str:
    text = " ".join(context.split())
    if len(text) > CONTEXT_CHARS:
        cut = text[: CONTEXT_CHARS - 1]
        text = (cut[: cut.rindex(" ")] if " " in cut else cut).rstrip(" ,;:.") + "…"
    return f": “{text}”" if text else ""


def relations(graph: Graph, targets: Sequence[str], title_of: dict[str, str]) -> dict[str, Relation]:
    """Every document related to any of ``targets`` through the graph (targets themselves excluded).

    ``title_of`` gives the targets' titles, for reasons naming them when there are several; one target
    is "it".
    """
    tset = set(targets)
    candidates: set[str] = set()
    for t in targets:
        candidates.update(graph.cites.get(t, ()), graph.cited_by.get(t, ()))
        for w in graph.works.get(t, {}):
            candidates.update(graph.citers.get(w, ()))
            if w.startswith("doc:"):
                candidates.add(w[4:])
        for p in graph.cited_by.get(t, ()):
            candidates.update(graph.cites.get(p, ()))
    candidates -= tset

    def it(ts: Sequence[str]) -> str:
        return "it" if len(targets) == 1 else names([short_name(title_of.get(t, t)) for t in ts])

    out: dict[str, Relation] = {}
    for c in sorted(candidates):
        total, coupled, cocited = 0.0, (0.0, "", []), (0.0, "", 0)
        for t in targets:
            cp, shared = graph.coupling(t, c)
            cc, n = graph.cocitation(t, c)
            total += DIRECT_WEIGHT * graph.direct(t, c) + COUPLING_WEIGHT * cp + COCITATION_WEIGHT * cc
            if COUPLING_WEIGHT * cp > coupled[0]:
                coupled = (COUPLING_WEIGHT * cp, t, shared)
            if COCITATION_WEIGHT * cc > cocited[0]:
                cocited = (COCITATION_WEIGHT * cc, t, n)
        total /= len(targets)
        if total <= 0:
            continue
        cited = [t for t in targets if t in graph.cites.get(c, ())]
        citing = [t for t in targets if c in graph.cites.get(t, ())]
        if cited:
            out[c] = Relation(total, "cites", f"cites {it(cited)}{_quote(graph.first_context(c, cited[0]))}")
        elif citing:
            out[c] = Relation(total, "cited_by",
                              f"cited by {it(citing)}{_quote(graph.first_context(citing[0], c))}")
        elif max(coupled[0], cocited[0]) < REASON_MIN:
            out[c] = Relation(total)
        elif coupled[0] >= cocited[0]:
            shared = [graph.names.get(w, w) for w in coupled[2]]
            with_whom = "" if len(targets) == 1 else f" (with {it([coupled[1]])})"
            reason = f"both cite {names(shared[:2], max(0, len(shared) - 2))}{with_whom}"
            out[c] = Relation(total, "coupling", reason)
        else:
            n = cocited[2]
            out[c] = Relation(total, "cocitation",
                              f"co-cited with {it([cocited[1]])} in {n} paper{'s' if n != 1 else ''}")
    return out
