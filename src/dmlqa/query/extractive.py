"""The extractive answer: the few whole sentences of the knowledge base that state the answer.

Three steps, each its own function:

1. :func:`gather`: candidate sentences. The sentences of the retrieved passages, and (so that the
   evidence is reachable when its passage ranks low) the best few dozen sentences of the top
   documents by dense cosine (the stored sentence vectors) and by BM25 over those sentences.
2. :attr:`Pool.features` describes each (:mod:`dmlqa.query.features`) and the learned
   :mod:`dmlqa.query.selector` (fitted on ``bench/train/``) gives the probability that it states
   the answer, after measuring the candidates' cosines once more with the question as its adapter turns
   it (:meth:`Pool.adapt`); the best one's probability decides refusal
   (:func:`dmlqa.query.answer.extractive_answer`).
3. :func:`dmlqa.query.quotes.choose` picks the quotes and :func:`dmlqa.query.compose.compose` writes
   them out with their citations.

Sentences are whole, from the document (never cut at a chunk boundary; see
:mod:`dmlqa.extract.sentences`); the source's reference markers are removed from the quoted text,
so the only bracketed numbers in an answer are its own citations, one per document page.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from dmlqa.extract.leaning import marker_subject
from dmlqa.extract.sentences import QUOTED_CODE, split_document
from dmlqa.index.lexical import tokenize
from dmlqa.index.versions import SentencePlace
from dmlqa.models import Hit
from dmlqa.query.features import (
    Place,
    QuestionFacts,
    bm25,
    feature_matrix,
    question_facts,
)

#: Documents whose sentences are searched besides the retrieved passages', and how many of their
#: sentences each of dense cosine and BM25 brings in.
POOL_DOCS = 20
POOL_PER_MEASURE = 30
#: BM25 scores only the retrieved passages' sentences and this many more, the nearest by cosine: their texts
#: are read and tokenised, the rest of the 4,000+ only ranked by vector. Refit on bench/train, 400 rather than
#: 200 stated a key term for 3 more of 466 questions (0.738 / 0.732, folds spread 0.66-0.78) for ~10 ms more CPU.
POOL_LEXICAL = 200
#: BM25 also scores the sentences of the passages of those documents it ranks best, this many.
LEXICAL_PASSAGES = 10


@dataclass(frozen=True)
class Candidate:
    """A quotable sentence of a document near the question."""

    hit: int | None  # index into the hits of the passage holding it; None: found by the sentence index
    doc_id: str
    ordinal: int  # position in its document (neighbours are ordinal ± 1)
    text: str  # verbatim (whitespace collapsed): what the citation quotes
    role: str
    page: int | None
    row: int | None = None  # its row in the version's sentence vectors, when stored
    section: str | None = None
    indent: int = 0  # a code line's indentation in its block: how an answer quotes it, not part of ``text``
    #: the heading it is quoted under, which the answer names before it: the first sentence of a section leaning on
    #: its heading ("This test strong scales ..." under "Strong Scaling Results"), or a code line right under it
    under: str | None = None


@dataclass
class Pool:
    """The candidates of a question with what their features are computed from, and the sources a
    citation of each names. Kept apart from the scores so that a refit (bench/train_selector.py) can
    cache pools and recompute features and scores without retrieving again."""

    candidates: list[Candidate]
    places: list[Place]
    cosines: np.ndarray  # sentence-question cosine per candidate (stored sentence vectors)
    facts: QuestionFacts
    sources: list[Hit]  # the retrieved hits, then one hit per further document a candidate comes from
    neighbour: Callable[[Candidate, int], Candidate | None]
    tokens: list[list[str]] | None = None  # each candidate's BM25 tokens, when gathering made them
    qvec: np.ndarray | None = None  # the question's vector the cosines were measured with
    #: the candidates' cosines with another vector (the question turned by the selector's adapter)
    cosines_for: Callable[[np.ndarray], np.ndarray] | None = None
    adapted: np.ndarray | None = None  # the cosines with the adapted question (:meth:`adapt`)
    tuned: np.ndarray | None = None  # the cosines with the question as the tuned encoder reads it (:meth:`adapt`)
    asked: str = ""  # what the question's vector is of: the question, after the one it follows up
    #: the sentence vectors of some candidates, by index: what :func:`dmlqa.query.quotes.choose` tells alike
    #: sentences apart by (read for the few it weighs, not for the whole pool)
    vectors_for: Callable[[Sequence[int]], np.ndarray] | None = None
    _features: np.ndarray | None = None

    def adapt(self, turned: np.ndarray | None, tuned: np.ndarray | None = None) -> None:
        """Measure the candidates' cosines with ``turned``, the question's vector as the selector's adapter
        turns it (:meth:`dmlqa.query.selector.Selector.adapt`), and with ``tuned``, the question as the tuned
        question encoder reads it (:mod:`dmlqa.query.tuning`); None, or no way to measure: the cosines."""
        def measured(v: np.ndarray | None) -> np.ndarray:
            return (self.cosines if v is None or self.cosines_for is None or not len(self.candidates)
                    else np.asarray(self.cosines_for(v), np.float32))
        self.adapted, self.tuned = measured(turned), measured(tuned)
        self._features = None

    @property
    def titles(self) -> dict[str, str]:
        """Each source document's title by id: what :func:`dmlqa.query.quotes.choose` tells a title line by."""
        return {h.doc_id: h.title for h in self.sources}

    @property
    def features(self) -> np.ndarray:
        """One row of :data:`dmlqa.query.features.FEATURES` per candidate (computed once)."""
        if self._features is None:
            self._features = feature_matrix(self.facts, [c.text for c in self.candidates], self.places, self.cosines,
                                            self.tokens, self.adapted, self.tuned)
        return self._features


# -- what the question is about ---------------------------------------------------------------------

#: Words of *asking*, not of the asked-about thing: interrogatives, auxiliaries, pronouns and chat
#: fillers, and the words that frame a comparison ("the difference between X and Y": the answer is
#: about X and Y, and seldom says "difference"). The index's stop list is short, so they survive
#: tokenising, and their rarity among sentences would make a sentence that happens to say "what" or
#: "you" look like the answer.
_ASKING_WORDS = frozenset(tokenize(
    "what which who whom whose when where why how whether does do did doing done can could would should "
    "shall may might must i me my mine we us our you your yours he him his she her its it's them "
    "is am are was were been being has have had having so than very just actually really exactly "
    "differ difference differences between compare compared comparison versus vs "
    "please tell explain say says said know mean means anyone someone something anything way ways"))


def question_terms(question: str) -> list[str]:
    """The terms of a question that name what it is about (all its terms when none is left)."""
    tokens = tokenize(question)
    return list(dict.fromkeys(t for t in tokens if t not in _ASKING_WORDS)) or list(dict.fromkeys(tokens))


# -- candidates -----------------------------------------------------------------------------------------


def _rrf_documents(searcher, version, query: str, qvec: np.ndarray, options) -> tuple[list[str], list[int]]:  # noqa: ANN001
    """Documents in the order hybrid retrieval ranks their best passage (catalogue cards left out), and the
    passage rows in the order BM25 ranks them (none in dense mode)."""
    from dmlqa.query.search import allowed_rows, rrf

    allowed = allowed_rows(version, options.filters)
    n = 10 * POOL_DOCS
    rankings = []
    if options.mode in ("hybrid", "dense"):
        rankings.append([r for r, _ in searcher.dense_ranking(version, qvec, n, allowed)])
    lexical: list[int] = []
    if options.mode in ("hybrid", "bm25"):
        lexical = [r for r, _ in searcher.lexical_ranking(version, query, n, allowed)]
        rankings.append(lexical)
    docs: list[str] = []
    for row, _ in sorted(rrf(rankings).items(), key=lambda kv: -kv[1]):
        d = version.doc_of(row)
        if d is not None and d not in docs and not version.docs[d].is_card:
            docs.append(d)
    return docs, lexical


def _source_hit(version, doc_id: str, chunk: int, rank: int) -> Hit:  # noqa: ANN001 - IndexVersion
    """A hit for passage row ``chunk`` of ``doc_id`` (the one storing a sentence's text, which starts at or
    before it): what a citation of a sentence found by the sentence index names (its passage was not
    among the retrieved ones)."""
    c = version.chunks([chunk])[chunk]
    d = version.docs[doc_id]
    return Hit(rank=rank, score=0.0, doc_id=doc_id, url=d.link, title=d.title, page=c.page, section=c.section,
               text=c.text, chunk_id=c.chunk_id, kind=d.kind, venue=d.venue, year=d.year, start=c.start, end=c.end)


class _Texts:
    """Sentence texts read on demand: a question ranks ~4,500 sentences by their vectors, and only those it
    scores lexically, keeps or quotes with a neighbour need their texts (each read with its passage's body).
    A code line's stored indentation is kept apart (:meth:`indent`): what is scored is its text."""

    def __init__(self, version) -> None:  # noqa: ANN001 - IndexVersion
        self._version = version
        self._texts: dict[int, str] = {}
        self._indents: dict[int, int] = {}

    def read(self, places: Iterable) -> None:
        missing = [p for p in places if p.row not in self._texts]
        if missing:
            for row, text in self._version.sentence_texts(missing).items():
                self._texts[row], self._indents[row] = unindented(text)

    def indent(self, place) -> int:  # noqa: ANN001 - SentencePlace
        self[place]
        return self._indents[place.row]

    def __getitem__(self, place) -> str:  # noqa: ANN001 - SentencePlace
        if place.row not in self._texts:
            self.read([place])
        return self._texts[place.row]


def unindented(text: str) -> tuple[str, int]:
    """A stored sentence's text and its indentation (a code line's columns in its block, kept by
    :func:`dmlqa.extract.sentences.split_document`)."""
    body = text.lstrip(" ")
    return body, len(text) - len(body)


def asked_text(question: str, previous: str | None = None) -> str:
    """What a question's vectors are of: a follow-up after the question it leans on (``previous``)."""
    return f"{previous} {question}" if previous else question


def gather(searcher, version, question: str, hits: Sequence[Hit], options, *,  # noqa: ANN001
           previous: str | None = None) -> Pool:
    """The candidate sentences for ``question`` in ``version`` (``hits``: its retrieved passages).

    ``previous`` is the question a follow-up leans on: the question's vector and retrieval include
    it, but the terms it shares only with the previous question do not count as the new ask's.

    Every sentence of the :data:`POOL_DOCS` documents is ranked by its stored vector before anything else
    is read: where a sentence stands, and its text, are read only for the retrieved passages' sentences
    and the :data:`POOL_LEXICAL` nearest (BM25 scores those; reading all ~4,500 first was most of an
    answer's time), then for the few a candidate's features or quote need besides.
    """
    whole = asked_text(question, previous)
    qvec = searcher.embed_query(whole, version)  # memory-cached by the search; never stored
    terms = question_terms(question) if previous else question_terms(whole)
    facts = question_facts(question, terms, lambda ts: version.lexical.lexicon.idf(
        np.array([t.encode("utf-8") for t in ts], dtype=bytes)))
    if not version.has_sentences:
        return replace(_unstored_pool(searcher, version, hits, qvec, facts), asked=whole)

    docs = [h.doc_id for h in hits if not h.is_card]
    ranked, lexical_rows = _rrf_documents(searcher, version, whole, qvec, options)
    for d in ranked:
        if len(dict.fromkeys(docs)) >= POOL_DOCS:
            break
        docs.append(d)
    docs = list(dict.fromkeys(docs))
    doc_rank = {d: i for i, d in enumerate(docs)}
    spans = {d: version.sentence_rows(d) for d in docs}
    if not any(spans.values()):
        return Pool([], [], np.zeros(0, np.float32), facts, list(hits), lambda c, step: None, qvec=qvec, asked=whole)
    rows = np.concatenate([np.arange(spans[d].start, spans[d].stop, dtype=np.int64) for d in docs])
    firsts = sorted((spans[d].start, d) for d in docs if spans[d])
    at = dict(zip(docs, np.cumsum([0] + [len(spans[d]) for d in docs]).tolist(), strict=False))

    def owner(r: int) -> str:  # the document of sentence row r (a document's rows are contiguous)
        return firsts[bisect.bisect_right(firsts, (r, "\uffff")) - 1][1]

    def position(r: int) -> int:  # its place in ``rows``: documents by rank, each in document order
        d = owner(r)
        return at[d] + r - spans[d].start

    cos = version.sentence_cosines(rows, qvec)
    places: dict[int, SentencePlace] = {}
    texts = _Texts(version)

    def place(needed: Iterable[int]) -> None:
        places.update(version.sentence_places(r for r in needed if r not in places))

    passage: dict[int, int] = {}  # sentence row -> the first retrieved passage it overlaps
    for i, h in enumerate(hits):
        if not h.is_card and h.doc_id in doc_rank:
            for p in version.sentence_places_in(h.doc_id, h.start, h.end):
                places[p.row] = p
                passage.setdefault(p.row, i)

    def quotable(rs: Iterable[int]) -> list[int]:  # no sentence whose subject is a reference marker
        ps = [places[r] for r in rs]
        texts.read(ps)
        return [p.row for p in ps if not marker_subject(texts[p])]

    in_passages = quotable(passage)
    # the passages of these documents BM25 ranks best, retrieved or not: a sentence holding the question's
    # rare terms ("hvd.broadcast_parameters") may be far from it by cosine, in a passage fusion ranked low
    worded: list[int] = []
    more = [r for r in lexical_rows if version.doc_of(r) in doc_rank][:LEXICAL_PASSAGES]
    for c in version.chunks(more).values():
        for p in version.sentence_places_in(c.doc_id, c.start, c.end):
            places.setdefault(p.row, p)
            worded.append(p.row)
    worded = quotable(dict.fromkeys(worded))
    by_cos = rows[np.argsort(-cos, kind="stable")].tolist()
    nearest: list[int] = []
    seen = 0
    while len(nearest) < POOL_LEXICAL and seen < len(by_cos):
        batch = by_cos[seen : seen + POOL_LEXICAL - len(nearest) + 16]
        seen += len(batch)
        place(batch)
        nearest += quotable(batch)[: POOL_LEXICAL - len(nearest)]
    scored = sorted(set(in_passages) | set(nearest) | set(worded), key=position)
    tokens = {r: tokenize(texts[places[r]]) for r in scored}
    lexical = bm25(list(tokens.values()), facts.weights)
    best_lexical = [scored[j] for j in np.argsort(-lexical, kind="stable")[:POOL_PER_MEASURE].tolist()]
    picked = sorted(set(in_passages) | set(nearest[:POOL_PER_MEASURE]) | set(best_lexical), key=position)

    # the stored sentence before each (is it the first of its section?) and each document's last (its length)
    place([r - 1 for r in picked if r > spans[owner(r)].start] + [spans[owner(r)].stop - 1 for r in picked])
    cands, where = [], []
    for r in picked:
        d, p = owner(r), places[r]
        span = spans[d]
        first = r == span.start or places[r - 1].section != p.section
        cands.append(Candidate(passage.get(r), d, p.ordinal, texts[p], p.role, p.page, p.row, p.section,
                               texts.indent(p)))
        where.append(Place(p.role, passage.get(r), doc_rank[d], p.ordinal / (places[span.stop - 1].ordinal or 1),
                           first, d, p.ordinal))

    sources = list(hits)
    have = {h.doc_id for h in hits}
    for c in sorted(cands, key=lambda c: doc_rank[c.doc_id]):
        if c.doc_id not in have:
            have.add(c.doc_id)
            sources.append(_source_hit(version, c.doc_id, places[c.row].chunk, len(sources) + 1))

    by_key = {(owner(r), p.ordinal): p for r, p in places.items()}
    near: dict[tuple[str, int], Candidate | None] = {}

    def neighbour(c: Candidate, step: int) -> Candidate | None:
        key = (c.doc_id, c.ordinal + step)
        if key not in near:
            p = by_key.get(key)
            if p is not None:
                near[key] = Candidate(None, c.doc_id, p.ordinal, texts[p], p.role, p.page, p.row, p.section,
                                      texts.indent(p))
            else:
                s = version.sentence_by_ordinal(*key)
                if s is None:
                    near[key] = None
                else:
                    text, indent = unindented(s.text)
                    near[key] = Candidate(None, s.doc_id, s.ordinal, text, s.role, s.page, s.row, s.section, indent)
        n = near[key]
        return None if n is None else replace(n, hit=c.hit)

    return Pool(cands, where, cos[[position(r) for r in picked]], facts, sources, neighbour,
                [tokens[r] for r in picked], qvec, lambda v: version.sentence_cosines(picked, v),
                vectors_for=lambda idx: version.sentence_vectors([picked[i] for i in idx]), asked=whole)


def passage_candidates(hits: Sequence[Hit]) -> list[Candidate]:
    """Candidates split from the passages themselves (a version that stores no sentences)."""
    from dmlqa.models import Block, Document

    out: list[Candidate] = []
    for i, h in enumerate(hits):
        if h.is_card:
            continue
        doc = Document(doc_id=h.doc_id, url=h.url, title=h.title, blocks=(Block(h.text, h.page, h.section),),
                       content_type="text")
        out += [Candidate(i, h.doc_id, h.start + o, s.text, s.role, h.page, None, h.section)
                for o, s in enumerate(split_document(doc))
                if s.quotable and s.role not in QUOTED_CODE and not marker_subject(s.text)]
    return out


def _unstored_pool(searcher, version, hits, qvec, facts) -> Pool:  # noqa: ANN001
    """Candidates of a version without stored sentences: the passages' own, embedded here."""
    cands = passage_candidates(hits)
    if not cands:
        return Pool([], [], np.zeros(0, np.float32), facts, list(hits), lambda c, step: None, qvec=qvec)
    vectors = np.asarray(searcher.encoder_for(version).encode([c.text for c in cands], batch_size=16), np.float32)
    doc_rank = {d: i for i, d in enumerate(dict.fromkeys(h.doc_id for h in hits))}
    places = [Place(c.role, c.hit, doc_rank[c.doc_id], 0.0, False, c.doc_id, c.ordinal) for c in cands]
    by_key = {(c.doc_id, c.ordinal): c for c in cands}
    return Pool(cands, places, vectors @ qvec, facts, list(hits),
                lambda c, step: by_key.get((c.doc_id, c.ordinal + step)), qvec=qvec, cosines_for=lambda v: vectors @ v,
                vectors_for=lambda idx: vectors[list(idx)])
