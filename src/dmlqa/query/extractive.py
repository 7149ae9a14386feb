"""The extractive answer: the few whole sentences of the knowledge base that state the answer.

Three steps, each its own function:

1. :func:`gather`: candidate sentences. The sentences of the retrieved passages, and (so that the
   evidence is reachable when its passage ranks low) the best few dozen sentences of the top
   documents by dense cosine (the stored sentence vectors) and by BM25 over those sentences.
2. :attr:`Pool.features` describes each (:mod:`dmlqa.query.features`) and the learned
   :mod:`dmlqa.query.selector` (fitted on ``bench/train/``) gives the probability that it states
   the answer; the best one's probability decides refusal (:func:`dmlqa.query.answer.extractive_answer`).
3. :func:`choose`: the answer leads with the best sentence; further ones follow while the model
   rates them above its learned cut and the answer stays short. What is left as rules is about
   *reading*, not relevance: no heading, caption or legend is quoted; a sentence leaning on the
   one before ("It uses ...") comes with it or not at all; a sentence announcing a list, code or a
   table comes with it; a table row comes with its header row.

Sentences are whole, from the document (never cut at a chunk boundary; see
:mod:`dmlqa.extract.sentences`); the source's reference markers are removed from the quoted text,
so the only bracketed numbers in an answer are its own citations, one per document page.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from dmlqa.extract.sentences import (
    ITEM,
    PROSE,
    ROW,
    SNIPPET,
    for_answer,
    leans_forward,
    marker_subject,
    split_document,
)
from dmlqa.index.lexical import tokenize
from dmlqa.index.versions import SentencePlace
from dmlqa.models import Citation, Hit
from dmlqa.query.features import (
    Place,
    QuestionFacts,
    asked_kinds,
    bm25,
    feature_matrix,
    furniture,
    leans,
    question_facts,
    standalone,
    title_like,
)

#: Word budget of an answer when none is given: a further sentence is added only while the answer stays
#: within it (the best sentence's block is always kept). The shipped selector carries the budget chosen
#: with it by cross-validation (:attr:`dmlqa.query.selector.Selector.max_words`).
MAX_WORDS = 90
#: Documents whose sentences are searched besides the retrieved passages', and how many of their
#: sentences each of dense cosine and BM25 brings in.
POOL_DOCS = 20
POOL_PER_MEASURE = 30
#: BM25 scores only the retrieved passages' sentences and this many more, the nearest by cosine: their texts
#: are read and tokenised, the rest of the 4,000+ only ranked by vector. Refit on bench/train, 400 rather than
#: 200 stated a key term for 3 more of 466 questions (0.738 / 0.732, folds spread 0.66-0.78) for ~10 ms more CPU.
POOL_LEXICAL = 200
#: A sentence the previous answer quoted goes last only when a new one scores at least this share of it:
#: a follow-up whose answer the last answer already held gets it again rather than a poor new sentence.
AVOID_RATIO = 0.5
#: How far back a chain of sentences leaning on their predecessors is followed.
LEAN_BACK_STEPS = 2
#: How far back from a table row its header row is looked for.
HEADER_STEPS = 12
#: A sentence that points at a table: the table's best-matching row is quoted with it.
_REFERS_TABLE = re.compile(r"\bTable\s+[\dIVX]+\b|\b(?:the )?(?:following|below) table\b|\btable below\b")


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
    _features: np.ndarray | None = None

    @property
    def features(self) -> np.ndarray:
        """One row of :data:`dmlqa.query.features.FEATURES` per candidate (computed once)."""
        if self._features is None:
            self._features = feature_matrix(self.facts, [c.text for c in self.candidates], self.places, self.cosines,
                                            self.tokens)
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


def _rrf_documents(searcher, version, query: str, qvec: np.ndarray, options) -> list[str]:  # noqa: ANN001
    """Documents in the order hybrid retrieval ranks their best passage (catalogue cards left out)."""
    from dmlqa.query.search import allowed_rows, rrf

    allowed = allowed_rows(version, options.filters)
    n = 10 * POOL_DOCS
    rankings = []
    if options.mode in ("hybrid", "dense"):
        rankings.append([r for r, _ in searcher.dense_ranking(version, qvec, n, allowed)])
    if options.mode in ("hybrid", "bm25"):
        rankings.append([r for r, _ in searcher.lexical_ranking(version, query, n, allowed)])
    docs: list[str] = []
    for row, _ in sorted(rrf(rankings).items(), key=lambda kv: -kv[1]):
        d = version.doc_of(row)
        if d is not None and d not in docs and not version.docs[d].is_card:
            docs.append(d)
    return docs


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
    scores lexically, keeps or quotes with a neighbour need their texts (each read with its passage's body)."""

    def __init__(self, version) -> None:  # noqa: ANN001 - IndexVersion
        self._version = version
        self._texts: dict[int, str] = {}

    def read(self, places: Iterable) -> None:
        missing = [p for p in places if p.row not in self._texts]
        if missing:
            self._texts.update(self._version.sentence_texts(missing))

    def __getitem__(self, place) -> str:  # noqa: ANN001 - SentencePlace
        if place.row not in self._texts:
            self.read([place])
        return self._texts[place.row]


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
    whole = f"{previous} {question}" if previous else question
    qvec = searcher.embed_query(whole, version)  # memory-cached by the search; never stored
    terms = question_terms(question) if previous else question_terms(whole)
    facts = question_facts(question, terms, lambda ts: version.lexical.lexicon.idf(
        np.array([t.encode("utf-8") for t in ts], dtype=bytes)))
    if not version.has_sentences:
        return _unstored_pool(searcher, version, hits, qvec, facts)

    docs = [h.doc_id for h in hits if not h.is_card]
    for d in _rrf_documents(searcher, version, whole, qvec, options):
        if len(dict.fromkeys(docs)) >= POOL_DOCS:
            break
        docs.append(d)
    docs = list(dict.fromkeys(docs))
    doc_rank = {d: i for i, d in enumerate(docs)}
    spans = {d: version.sentence_rows(d) for d in docs}
    if not any(spans.values()):
        return Pool([], [], np.zeros(0, np.float32), facts, list(hits), lambda c, step: None)
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
    by_cos = rows[np.argsort(-cos, kind="stable")].tolist()
    nearest: list[int] = []
    seen = 0
    while len(nearest) < POOL_LEXICAL and seen < len(by_cos):
        batch = by_cos[seen : seen + POOL_LEXICAL - len(nearest) + 16]
        seen += len(batch)
        place(batch)
        nearest += quotable(batch)[: POOL_LEXICAL - len(nearest)]
    scored = sorted(set(in_passages) | set(nearest), key=position)
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
        cands.append(Candidate(passage.get(r), d, p.ordinal, texts[p], p.role, p.page, p.row, p.section))
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
                near[key] = Candidate(None, c.doc_id, p.ordinal, texts[p], p.role, p.page, p.row, p.section)
            else:
                s = version.sentence_by_ordinal(*key)
                near[key] = None if s is None else Candidate(None, s.doc_id, s.ordinal, s.text, s.role, s.page,
                                                             s.row, s.section)
        n = near[key]
        return None if n is None else replace(n, hit=c.hit)

    return Pool(cands, where, cos[[position(r) for r in picked]], facts, sources, neighbour,
                [tokens[r] for r in picked])


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
                if s.quotable and s.role != SNIPPET and not marker_subject(s.text)]
    return out


def _unstored_pool(searcher, version, hits, qvec, facts) -> Pool:  # noqa: ANN001
    """Candidates of a version without stored sentences: the passages' own, embedded here."""
    cands = passage_candidates(hits)
    if not cands:
        return Pool([], [], np.zeros(0, np.float32), facts, list(hits), lambda c, step: None)
    vectors = searcher.encoder_for(version).encode([c.text for c in cands], batch_size=16)
    doc_rank = {d: i for i, d in enumerate(dict.fromkeys(h.doc_id for h in hits))}
    places = [Place(c.role, c.hit, doc_rank[c.doc_id], 0.0, False, c.doc_id, c.ordinal) for c in cands]
    by_key = {(c.doc_id, c.ordinal): c for c in cands}
    return Pool(cands, places, np.asarray(vectors, np.float32) @ qvec, facts, list(hits),
                lambda c, step: by_key.get((c.doc_id, c.ordinal + step)))


# -- choosing -------------------------------------------------------------------------------------------


def _readable(c: Candidate | None) -> bool:
    """Prose or a list item that is no heading, caption or legend (nor carries one glued on)."""
    return c is not None and c.role in (PROSE, ITEM) and not furniture(c.text) and not marker_subject(c.text)


def _header_of(row: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> Candidate | None:
    """The first row of the table ``row`` is in (its header): a row alone does not say what its columns
    are. Rows between them that are not stored (a markdown separator) are skipped, two at most."""
    top, gap = None, 0
    for step in range(1, HEADER_STEPS):
        prev = neighbour(row, -step)
        if prev is None:
            gap += 1
            if gap > 2:
                break
            continue
        if prev.role != ROW:
            break
        top, gap = prev, 0
    return top


#: How many list items or code lines after it a sentence may announce.
ANNOUNCED_STEPS = 6
#: A bracketed number, which in an answer is a citation marker.
_INDEX_MARK = re.compile(r"\[\d{1,3}\]")


def _announced(c: Candidate, neighbour: Callable[[Candidate, int], Candidate | None]) -> list[Candidate]:
    """What a sentence announces: the list items or code lines after it (for a sentence ending in ':'
    with no list, the next prose sentence); code lines after a comment or a short command run."""
    got: list[Candidate] = []
    for step in range(1, ANNOUNCED_STEPS + 1):
        nxt = neighbour(c, step)
        if nxt is None and got:
            continue  # a line between two items that is not stored
        if nxt is None or nxt.role not in (ITEM, SNIPPET) or (not leans_forward(c.text) and nxt.role != SNIPPET):
            break
        if nxt.role == SNIPPET and _INDEX_MARK.search(nxt.text):
            break  # code is quoted as written: its "x[1]" would read as a citation of the answer
        got.append(nxt)
    if not got and leans_forward(c.text):
        nxt = neighbour(c, 1)
        if _readable(nxt):
            got.append(nxt)
    return got


def _block(c: Candidate, question_tokens: set[str], pool: Sequence[Candidate],
           neighbour: Callable[[Candidate, int], Candidate | None]) -> list[Candidate] | None:
    """The sentences quoting ``c`` takes, in reading order, or None when it cannot be quoted readably."""
    if c.role == ROW:
        head = _header_of(c, neighbour)
        if head is not None and head.text.startswith("|") and neighbour(head, 1) is not None:
            return None  # a markdown header stands over its unstored |---| line: this "top" is a row of data
        return None if head is None else [head, c]
    if c.role == SNIPPET:  # a code line comes with the sentence announcing it, which says what it is for
        prev = c
        for step in range(1, ANNOUNCED_STEPS + 1):
            prev = neighbour(c, -step)
            if prev is None or prev.role != SNIPPET:
                break
        block = None if prev is None else _block(prev, question_tokens, pool, neighbour)
        return block if block is not None and any(b.ordinal == c.ordinal for b in block) else None
    if not _readable(c):
        return None
    block = [c]
    head = c
    for _ in range(LEAN_BACK_STEPS):  # "That is to say, ..." after "Though ..." after the fact
        if not leans(head.text):
            break
        prev = neighbour(head, -1)
        if not _readable(prev):
            break  # "However, ..." after a heading reads alone; "It ..." does not (below)
        block.insert(0, prev)
        head = prev
    if not standalone(head.text):
        return None  # leans on context further back than we carry
    announced = _announced(c, neighbour)
    if leans_forward(c.text) and not announced:
        return None
    block += announced
    if _REFERS_TABLE.search(c.text):  # the row of the table it points at that holds most question terms
        rows = [(r, h) for r in pool if r.role == ROW and r.doc_id == c.doc_id
                and (h := _header_of(r, neighbour)) is not None]  # a header row is no row of figures
        best = max(rows, key=lambda rh: len(set(tokenize(rh[0].text)) & question_tokens), default=None)
        if best is not None and set(tokenize(best[0].text)) & question_tokens:
            block += [best[1], best[0]]
    return block


#: A sentence sharing this much of its terms (Jaccard) with one already quoted says nothing new: the
#: arXiv and the proceedings copy of a paper differ in a ligature or a reference marker.
SAME_SENTENCE = 0.8


def _said(text: str, said: Sequence[set[str]]) -> bool:
    """Does a quoted sentence say this already? Not when this one holds a number or version the other
    lacks: two releases of a README ("g++-5 or above" and "g++-4.9 or above") differ in just that, and
    which one holds the answer is what the question asks. The source's reference markers ("[12]") are
    no figures: the arXiv and the proceedings copy number their references apart."""
    terms = set(tokenize(text))
    figures = {t for t in tokenize(for_answer(text)) if any(ch.isdigit() for ch in t)}
    return any(len(terms & s) >= SAME_SENTENCE * len(terms | s) and figures <= s for s in said)


def _words(block: Sequence[Candidate]) -> int:
    return sum(len(c.text.split()) for c in block)


def choose(question: str, cands: Sequence[Candidate], scores: np.ndarray, *,
           neighbour: Callable[[Candidate, int], Candidate | None] = lambda c, step: None,
           add_above: float = 0.5, avoid: set[str] = frozenset(), max_sentences: int = 5,
           max_words: int = MAX_WORDS, read_on: int = 0) -> list[Candidate]:
    """The answer's sentences, in answer order: the best-scored quotable sentence's block first (with
    the ``read_on`` readable sentences after it), then the blocks of further sentences scoring at least
    ``add_above`` while the answer stays within ``max_words`` and ``max_sentences``, grouped by
    document in reading order.

    A line written as a title (a menu entry, a heading kept as a list item) is quoted only for a question
    asking for a name or a source, which such a line may be.

    ``avoid`` are sentences the previous answer quoted: ranked last when another sentence reaches
    ``add_above`` and :data:`AVOID_RATIO` of their score, so they are said again only when nothing
    else answers.
    """
    if not len(cands):
        return []
    rank = np.asarray(scores, np.float64)
    repeated = np.array([c.text in avoid for c in cands], bool)
    if repeated.any() and (~repeated).any() and rank[~repeated].max() >= max(add_above,
                                                                            AVOID_RATIO * rank[repeated].max()):
        rank = rank - 2.0 * repeated  # something new answers nearly as well: what was said goes last
    qtokens = set(tokenize(question))
    # a line written as a title ("Smart Gradient Accumulation") answers only a question asking for a name
    titles = asks_for_resource(question) or "name" in asked_kinds(question)
    blocks: list[list[Candidate]] = []
    taken: set[tuple[str, int]] = set()
    words = 0
    said: list[set[str]] = []
    for i in np.argsort(-rank, kind="stable").tolist():
        c = cands[i]
        if (c.doc_id, c.ordinal) in taken or _said(c.text, said):
            continue  # the same sentence in a second copy of the work (arXiv and proceedings) says nothing new
        if blocks and (rank[i] < add_above or len(taken) >= max_sentences):
            break
        block = None if title_like(c.text) and not titles else _block(c, qtokens, cands, neighbour)
        if block is None:
            continue
        block = [b for b in block if (b.doc_id, b.ordinal) not in taken]
        if blocks and (words + _words(block) > max_words or any(
                b.role == ROW and x.role == ROW and b.doc_id == x.doc_id for b in block for bl in blocks for x in bl)):
            continue  # over the budget, or a second row of a table already quoted
        if not blocks and _words(block) > 2 * max_words:
            continue  # a best sentence that needs a page of context is no answer
        if not blocks:  # a passage often states the answer right after the sentence naming what was asked
            for _ in range(read_on):
                nxt = neighbour(block[-1], 1)
                if not _readable(nxt):
                    break
                more = [nxt]
                if leans_forward(nxt.text):  # "The major components are:" comes with what it announces, or not at all
                    announced = _announced(nxt, neighbour)
                    if not announced:
                        break
                    more += announced
                if _words(block) + _words(more) > max_words:
                    break
                block += more
        blocks.append(block)
        said += [set(tokenize(b.text)) for b in block]
        taken |= {(b.doc_id, b.ordinal) for b in block}
        words += _words(block)
    if not blocks:
        return []
    lead, rest = blocks[0], [b for bl in blocks[1:] for b in bl]
    first: dict[str, int] = {}
    for i, c in enumerate(rest):
        first.setdefault(c.doc_id, i)
    return lead + sorted(rest, key=lambda c: (first[c.doc_id], c.ordinal))


# -- the LLM's context -------------------------------------------------------------------------------------

#: Sentences of one source put before its passage in the LLM's context.
QUOTES_PER_SOURCE = 3


def llm_sources(pool: Pool, scores: np.ndarray, *, max_sources: int = 8) -> list[Hit]:
    """The LLM's context from the same candidates the extractive answer ranks: the passages of the
    best-rated sentences, best first, each opening with its best sentences (quotes first, then the
    passage they come from). A source found by the sentence index rather than retrieval is its
    document's passage holding the sentence, so the LLM sees the evidence even when its passage
    ranked low; the citation check reads the same texts, so quotes stay verifiable."""
    picked: dict[int, list[str]] = {}
    by_doc = {h.doc_id: i for i, h in reversed(list(enumerate(pool.sources)))}
    for i in np.argsort(-np.asarray(scores), kind="stable").tolist():
        c = pool.candidates[i]
        if not _readable(c) and c.role != ROW:
            continue
        src = c.hit if c.hit is not None else by_doc.get(c.doc_id)
        if src is None or (src not in picked and len(picked) >= max_sources):
            continue
        quotes = picked.setdefault(src, [])
        if len(quotes) < QUOTES_PER_SOURCE and c.text not in quotes:
            quotes.append(c.text)
    out = []
    for src, quotes in picked.items():
        h = pool.sources[src]
        out.append(replace(h, rank=len(out) + 1, text="\n".join(quotes) + "\n\n" + h.text))
    return out


# -- composing ---------------------------------------------------------------------------------------------

_ASKS_RESOURCE = re.compile(r"^\W*(?:which|what)\b(?:\s+\w+){0,3}?\s+(?:paper|project|work|library|framework|"
                            r"system|tool|report|tech report|package|repo|repository|method|approach|technique)s?\b",
                            re.I)


def asks_for_resource(question: str) -> bool:
    """"Which paper/project/tool ...?": the answer is a source's name, so the answer leads with it."""
    return _ASKS_RESOURCE.search(question) is not None


def _display_title(title: str) -> str:
    return re.sub(r"^GitHub - ", "", title).strip()


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _markdown_header(c: Candidate, nxt: Candidate | None) -> bool:
    """Is ``c`` the header row of a markdown table quoted for the row after it? Then the row is read
    with each cell under its column's name ("Aspect: VPP · Recommendation: ..."), not after a bare
    "Aspect | Recommendation" line. A PDF table's rows carry their headers already."""
    return (c.role == ROW and nxt is not None and nxt.role == ROW and nxt.doc_id == c.doc_id
            and c.text.startswith("|") and nxt.text.startswith("|"))


def compose(chosen: Sequence[Candidate], hits: Sequence[Hit], *, question: str = "") -> tuple[str, list[Citation]]:
    """The answer text with one [n] per document page, and its citations (quotes are verbatim).

    ``chosen`` is in answer order (:func:`choose`); ``hits`` must hold a passage of each of their
    documents. For a question asking which paper/project/tool, the answer leads with the title of the
    source of its first sentence: the name is the answer, and the sentences say why.
    """
    numbers: dict[tuple[str, int | None], int] = {}
    quotes: dict[tuple[str, int | None], list[str]] = {}
    parts: list[str] = []
    items: list[str] = []
    code: list[str] = []  # a run of code lines: one fenced block after the sentence announcing it
    by_doc = {h.doc_id: h for h in reversed(hits)}  # the best-ranked passage of each document

    def flush() -> None:
        if items:
            parts.append("\n" + "\n".join(items) + "\n")
            items.clear()
        if code:
            parts.append("\n```\n" + "\n".join(code) + "\n```\n")
            code.clear()

    if chosen and asks_for_resource(question):
        top = chosen[0]
        numbers[(top.doc_id, top.page)] = 1
        parts.append(f"{_display_title(by_doc[top.doc_id].title)} [1]:")
    said: set[str] = set()
    header: list[str] | None = None  # a table's header row, read with the row quoted after it
    for i, c in enumerate(chosen):
        if c.text in said:  # the same sentence in two copies of a page says nothing new
            continue
        said.add(c.text)
        if _markdown_header(c, chosen[i + 1] if i + 1 < len(chosen) else None):
            header = _cells(for_answer(c.text))
            continue
        key = (c.doc_id, c.page)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
        quotes.setdefault(key, []).append(c.text)
        if c.role == SNIPPET:  # code is quoted as written, cited by the sentence announcing it
            if items:
                flush()
            code.append(c.text)
            continue
        text = for_answer(c.text)
        if c.role == ROW:  # a table row reads as a list item, each cell under its column's header
            cells = _cells(text)
            if header is not None and len(header) == len(cells):
                text = " · ".join(f"{h}: {v}" if h else v for h, v in zip(header, cells, strict=True))
            else:
                text = " | ".join(cells)
            header = None
        if c.role in (ITEM, ROW):
            if code:
                flush()
            items.append(f"- {text.lstrip('-*•▪●◦‣ ').strip()} [{numbers[key]}]")
            continue
        flush()
        parts.append(f"{text} [{numbers[key]}]")
    flush()
    body = " ".join(parts).replace(" \n", "\n").replace("\n ", "\n").strip()
    citations: list[Citation] = []
    for (doc_id, page), n in numbers.items():
        h = by_doc[doc_id]
        quote = quotes.get((doc_id, page), [h.title])[0]  # verbatim: a reader finds it in the source
        citations.append(Citation(n=n, url=h.url, title=h.title, page=page, quote=quote[:300], doc_id=doc_id,
                                  chunk_id=h.chunk_id, venue=h.venue, year=h.year))
    return body, citations


