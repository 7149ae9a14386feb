"""Relatedness: how alike two documents, or a text and a document, are, and the passage that shows why.

A document is ranked against an indexed document by the cosine of their document vectors
(:mod:`dmlqa.query.docvectors`) plus a small bonus for the rarest topic they share, plus what the
citation graph says of the pair (:func:`dmlqa.query.graph.relations`: a direct citation, bibliographic
coupling, co-citation); against free text by the document-vector cosine blended with its best passage's
cosine, over candidates from both the vectors and hybrid passage search (so a rare exact term still
brings its document in). Measured on the snapshot index (nDCG@10): documents 0.64 centred, plus the
shared-topic bonus 0.66; free text (10 judged queries) hybrid per-document search 0.65, this blend 0.73.
Several documents at once are compared through the centroid of their vectors and the mean of their
graph relations.

Each recommendation carries a reason a reader can check: the relation through references when it
counts ("cites it", "cited by it", "both cite GPipe and PipeDream", "co-cited with it in 5 papers"),
else the passage closest to the query that is not a reference list, else the shared topic, else the
document's opening. Copies of one work (the arXiv and the proceedings version of a paper) are shown
once, and never for each other.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlqa.index.versions import IndexVersion
from dmlqa.query.docvectors import DocVectors, doc_vectors, normalise, read_block
from dmlqa.query.graph import citation_graph, relations
from dmlqa.query.search import Filters, Searcher, allowed_docs, allowed_rows, rrf

#: Added to a candidate's score for the rarest topic it shares with the query document, times that
#: topic's rarity in [0, 1]; small, so that list sections ("Papers", "Frameworks") cannot outvote text.
TOPIC_BONUS = 0.1
#: A topic counts as specific (can be given as a reason) when its rarity weight is at least this.
SPECIFIC_TOPIC = 0.4
#: Free text: weight of the document-vector cosine against the best passage's cosine.
TEXT_DOC_WEIGHT = 0.5
#: How many documents' passages free text is compared with (by doc vector and by hybrid search).
TEXT_CANDIDATES = 50
#: First-chunk cosine above which two same-titled documents are copies of one work.
SAME_OPENING = 0.95
#: Reasons are passages shortened to about this many characters.
REASON_CHARS = 160


# -- results ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Related:
    """One recommended document and why."""

    doc_id: str
    title: str
    url: str
    score: float
    reason: str
    authors: tuple[str, ...] = ()
    year: int | None = None
    venue: str | None = None
    kind: str = "article"
    #: the relation through references the reason names ("cites", "cited_by", "coupling", "cocitation"),
    #: "" when the reason is a passage (then the JSON has no "relation" key, as before the graph)
    relation: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {
            "doc_id": self.doc_id,
            "title": self.title,
            "url": self.url,
            "score": round(float(self.score), 6),
            "reason": self.reason,
            "authors": list(self.authors),
            "year": self.year,
            "venue": self.venue,
            "kind": self.kind,
        }
        if self.relation:
            out["relation"] = self.relation
        return out


def _shared_topic(a: Iterable[str], b: Iterable[str], weights: dict[str, float]) -> tuple[str | None, float]:
    """The rarest topic two documents share (as spelled on ``b``) and its weight."""
    mine = {t.strip().lower() for t in a}
    best, best_w = None, 0.0
    for t in b:
        w = weights.get(t.strip().lower(), 0.0)
        if t.strip().lower() in mine and w > best_w:
            best, best_w = t.strip(), w
    return best, best_w


def title_words(title: str) -> str:
    """A title's lower-case words, NFKC-normalised, space-separated: what "the same title" compares."""
    return " ".join(re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKC", title).lower()))


def _same_work(version: IndexVersion, dv: DocVectors, i: int, j: int) -> bool:
    """Two entries for one work: the arXiv and the proceedings copy of a paper, a moved repository.

    Same title, and either the title is long enough to name one work or the documents open with the
    same text (``Horovod`` the repository and ``Horovod`` the Ray Train page are different things).
    A paper's code is not a copy of the paper.
    """
    a, b = version.docs[dv.doc_ids[i]], version.docs[dv.doc_ids[j]]
    ta = title_words(a.title)
    if not ta or ta != title_words(b.title) or (a.kind == "repo") != (b.kind == "repo"):
        return False
    return len(ta.split()) >= 4 or float(dv.first[i] @ dv.first[j]) > SAME_OPENING


def _shorten(text: str, limit: int = REASON_CHARS) -> str:
    # NFKC turns PDF math italics (𝑝𝑎𝑟𝑡𝑖𝑡𝑖𝑜𝑛) and ligatures back into plain letters for display.
    text = " ".join(unicodedata.normalize("NFKC", text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.") + "…"


# -- ranking ------------------------------------------------------------------------------------------


def _doc_rows(version: IndexVersion, doc_id: str) -> list[int]:
    """Rows of a document: its contiguous run when the build wrote one (it does), else from the store."""
    d = version.docs[doc_id]
    if d.first_row is not None and d.n_chunks and d.first_row + d.n_chunks <= version.size:
        rows = list(range(d.first_row, d.first_row + d.n_chunks))
        if all(version.doc_of(r) == doc_id for r in rows):
            return rows
    return version.doc_rows(doc_id)


def _doc_chunk_vectors(version: IndexVersion, rows: list[int]) -> np.ndarray:
    if rows and rows == list(range(rows[0], rows[0] + len(rows))):
        return read_block(version, rows[0], len(rows))
    return version.vectors(rows)


def _best_passage(version: IndexVersion, doc_id: str, probe: np.ndarray) -> tuple[int | None, float]:
    """The row of ``doc_id``'s passage closest to ``probe`` and its cosine."""
    rows = _doc_rows(version, doc_id)
    if not rows:
        return None, 0.0
    sims = _doc_chunk_vectors(version, rows) @ probe
    i = int(np.argmax(sims))
    return rows[i], float(sims[i])


_REF_ENTRY = re.compile(r"\[\d{1,3}\]\s*[A-Z]")
_REF_YEAR = re.compile(r"\b(?:19|20)\d\d[a-z]?\b")
_REF_VENUE = re.compile(
    r"\b(?:Proceedings|Proc\.|arXiv|CoRR|abs/|pp\.|pages \d|Conference|Symposium|Workshop|Journal|Transactions|"
    r"Advances in|et al\.)"
)
_REF_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z]\.?)? [A-Z][a-z]+,")
_BIB_FIELD = re.compile(r"@[a-z]+\s*\{|\b(?:title|author|year|doi|booktitle|journal|abstract)\s*=\s*[{\"]", re.I)


def looks_like_references(text: str) -> bool:
    """True for a passage of a bibliography: a poor reason even when its vector matches best.

    Reference lists name the works a paper builds on, so they sit close to related documents in
    embedding space while saying nothing a reader can use ("[14] P. Goyal, P. Dollár, …").
    """
    words = len(text.split())
    entries, years = len(_REF_ENTRY.findall(text)), len(_REF_YEAR.findall(text))
    if entries >= 2 or (entries and years >= 2) or len(_REF_NAME.findall(text)) >= 5:
        return True
    if len(_BIB_FIELD.findall(text)) >= 2:  # a README's "cite us" BibTeX block
        return True
    return words >= 30 and (years + len(_REF_VENUE.findall(text))) / words > 0.06


def _reason_passage(
    version: IndexVersion, doc_id: str, probe: np.ndarray, center: np.ndarray | None, prefer: int | None = None
) -> str:
    """The passage of ``doc_id`` to show as the reason: the closest to ``probe`` that is not a reference list.

    With ``center``, passages are compared after subtracting it (as the document vectors are), which
    favours what is specific to this pair of documents over what every paper in the field says.
    """
    rows = _doc_rows(version, doc_id)
    if not rows:
        return ""
    if prefer is not None and prefer in rows:
        ordered = [prefer]
    else:
        vecs = _doc_chunk_vectors(version, rows)
        if center is not None:
            vecs = normalise(vecs - center)
        ordered = [rows[i] for i in np.argsort(-(vecs @ probe))[:8]]
    texts = version.chunks(ordered)
    for r in ordered:
        if r in texts and not looks_like_references(texts[r].text):
            return _shorten(texts[r].text)
    if prefer is not None:
        return _reason_passage(version, doc_id, probe, center)
    return _shorten(texts[ordered[0]].text) if ordered[0] in texts else ""


def _allowed_mask(
    version: IndexVersion, dv: DocVectors, since: int | None, kinds: tuple[str, ...], include_undated: bool = False
) -> np.ndarray:
    mask = dv.has_vector.copy()
    allowed = allowed_docs(version, Filters(kinds=tuple(kinds), since=since, include_undated=include_undated))
    if allowed is not None:
        mask &= np.fromiter((d in allowed for d in dv.doc_ids), dtype=bool, count=len(dv.doc_ids))
    return mask


def _pick(
    version: IndexVersion, dv: DocVectors, scores: np.ndarray, mask: np.ndarray, k: int,
    query: int | Sequence[int] | None = None,
) -> list[int]:
    """The best ``k`` allowed positions, one per work, none a copy of a ``query`` document."""
    queries = [query] if isinstance(query, int) else list(query or ())
    order = np.argsort(-np.where(mask, scores, -np.inf), kind="stable")
    out: list[int] = []
    for i in order:
        if not mask[i] or len(out) >= k:
            break
        i = int(i)
        if any(_same_work(version, dv, q, i) for q in queries):
            continue
        if any(_same_work(version, dv, j, i) for j in out):
            continue
        out.append(i)
    return out


def _item(version: IndexVersion, doc_id: str, score: float, reason: str, relation: str = "") -> Related:
    d = version.docs[doc_id]
    return Related(doc_id=doc_id, title=d.title, url=d.link, score=float(score), reason=reason or d.title,
                   authors=tuple(d.authors), year=d.year, venue=d.venue, kind=d.kind, relation=relation)


def rank_like_doc(
    version: IndexVersion, target: str, *, k: int = 10, since: int | None = None, kinds: tuple[str, ...] = (),
    dv: DocVectors | None = None, topic_bonus: float | None = None, include_undated: bool = False,
    graph: bool = True,
) -> list[Related]:
    """Documents most like the indexed document ``target`` (itself and its other copies excluded)."""
    return rank_like_docs(version, [target], k=k, since=since, kinds=kinds, dv=dv, topic_bonus=topic_bonus,
                          include_undated=include_undated, graph=graph)


def rank_like_docs(
    version: IndexVersion, targets: Sequence[str], *, k: int = 10, since: int | None = None,
    kinds: tuple[str, ...] = (), dv: DocVectors | None = None, topic_bonus: float | None = None,
    include_undated: bool = False, graph: bool = True,
) -> list[Related]:
    """Documents most like the indexed documents ``targets`` together (they and their copies excluded).

    Content: the cosine with the normalised sum of the targets' vectors (those that have one), plus the
    topic bonus of the rarest topic shared with any target; with ``graph``, plus what the citation graph
    adds (:func:`dmlqa.query.graph.relations`, averaged over the targets).
    """
    dv = dv or doc_vectors(version)
    bonus_w = TOPIC_BONUS if topic_bonus is None else topic_bonus
    ts = [dv.pos[t] for t in targets]
    with_vector = [t for t in ts if dv.has_vector[t]]
    probe = normalise(dv.rep[with_vector].sum(axis=0)) if with_vector else np.zeros(dv.rep.shape[1], np.float32)
    topics = {x.strip().lower() for t in targets for x in version.docs[t].topics}
    bonus = np.zeros(len(dv.doc_ids), dtype=np.float32)
    for topic in topics:
        pos = dv.topic_pos.get(topic)
        if pos is not None:
            bonus[pos] = np.maximum(bonus[pos], dv.topic_weight.get(topic, 0.0))
    scores = dv.rep @ probe + bonus_w * bonus
    mask = _allowed_mask(version, dv, since, kinds, include_undated)
    related = {}
    if graph:
        related = relations(citation_graph(version), list(targets), {t: version.docs[t].title for t in targets})
        for doc_id, rel in related.items():
            if doc_id in dv.pos:
                scores[dv.pos[doc_id]] += rel.score
    mask[ts] = False
    picked = _pick(version, dv, scores, mask, k, query=ts)
    my_topics = [x for t in targets for x in version.docs[t].topics]
    center = dv.center if np.any(dv.center) else None
    items: list[Related] = []
    for i in picked:
        doc_id = dv.doc_ids[i]
        d = version.docs[doc_id]
        rel = related.get(doc_id)
        if rel is not None and rel.kind:
            items.append(_item(version, doc_id, float(scores[i]), rel.reason, rel.kind))
            continue
        topic, w = _shared_topic(my_topics, d.topics, dv.topic_weight)
        reason = ""
        if not d.is_card and with_vector:
            reason = _reason_passage(version, doc_id, probe, center)
        if not reason and topic and w >= SPECIFIC_TOPIC:
            reason = f"shared topic: {topic}"
        if not reason:
            rows = _doc_rows(version, doc_id)
            reason = _shorten(version.chunks(rows[:1])[rows[0]].text) if rows else d.title
        items.append(_item(version, doc_id, float(scores[i]), reason))
    return items


def rank_like_text(
    searcher: Searcher, version: IndexVersion, text: str, *, k: int = 10, since: int | None = None,
    kinds: tuple[str, ...] = (), dv: DocVectors | None = None, doc_weight: float | None = None,
    include_undated: bool = False,
) -> list[Related]:
    """Documents most like free ``text``: document-vector cosine blended with the best passage's cosine.

    The candidates are the best documents by vector and the best by hybrid (dense + BM25) passage
    search, so a rare exact term still brings its document in; the reason is the hybrid search's
    passage when there is one, else the passage closest to the text.
    """
    dv = dv or doc_vectors(version)
    w = TEXT_DOC_WEIGHT if doc_weight is None else doc_weight
    qvec = np.asarray(searcher.embed_query(text, version), dtype=np.float32)
    mask = _allowed_mask(version, dv, since, kinds, include_undated)
    centered = bool(np.any(dv.center))
    probe_rep = normalise(qvec - dv.center) if centered else qvec
    doc_sims = dv.rep @ probe_rep
    n = max(TEXT_CANDIDATES, 3 * k)
    by_vector = [int(i) for i in np.argsort(-np.where(mask, doc_sims, -np.inf))[:n] if mask[i]]

    # one row mask for both rankings (a set of doc ids would be turned into a mask by each)
    allowed = allowed_rows(version, Filters(kinds=tuple(kinds), since=since, include_undated=include_undated))
    rows_n = max(100, 10 * n)
    dense = searcher.dense_ranking(version, qvec, rows_n, allowed)
    lexical = searcher.lexical_ranking(version, text, rows_n, allowed)
    hybrid_row: dict[str, int] = {}
    for row, _ in sorted(rrf([[r for r, _ in dense], [r for r, _ in lexical]]).items(), key=lambda kv: -kv[1]):
        doc_id = version.doc_of(row)
        if doc_id in dv.pos and mask[dv.pos[doc_id]] and doc_id not in hybrid_row:
            hybrid_row[doc_id] = row
            if len(hybrid_row) >= n:
                break

    scores = np.full(len(dv.doc_ids), -np.inf, dtype=np.float32)
    for doc_id in dict.fromkeys([dv.doc_ids[i] for i in by_vector] + list(hybrid_row)):
        i = dv.pos[doc_id]
        _, passage = _best_passage(version, doc_id, qvec)
        scores[i] = w * float(doc_sims[i]) + (1 - w) * passage
    picked = _pick(version, dv, scores, np.isfinite(scores), k)
    items = []
    for i in picked:
        doc_id = dv.doc_ids[i]
        reason = _reason_passage(version, doc_id, qvec, None, prefer=hybrid_row.get(doc_id))
        items.append(_item(version, doc_id, float(scores[i]), reason))
    return items
