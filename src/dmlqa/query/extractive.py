"""The extractive answer: the few whole sentences of the retrieved passages that state the answer.

Retrieval usually finds the evidence; the hard part is quoting the sentence that *says* it rather
than one that merely sounds like the question. Each candidate sentence (whole, from the document,
never cut at a chunk boundary; see :mod:`dmlqa.extract.sentences`) is scored by

* its similarity to the question (vectors stored with the index version: nothing is embedded here),
* the share of the question's salient terms it contains, weighted by how rare each term is among
  the candidates (a term every passage has says little; the one naming the asked-for thing says most),
* whether it holds the *kind* of answer asked for: a number or size for "how many / how much / what
  rate", a flag or setting for "which option", a year for "when", a name for "which project/paper",
* a small prior for the passage's retrieval rank.

The best sentence comes first; a sentence that leans on the one before ("This reduces ...") brings
it along, and one that announces a list brings the list. Further sentences are added only while
they are nearly as good and add terms of the question not yet covered — short beats padded. The
source's own reference markers ([12], [3, 14]) are removed from the quoted text, so the only
bracketed numbers in an answer are its own citations; sentences from one document page share one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dmlqa.extract.sentences import (
    ITEM,
    PROSE,
    ROW,
    SNIPPET,
    for_answer,
    leans_back,
    leans_forward,
    marker_subject,
    split_document,
)
from dmlqa.index.lexical import tokenize
from dmlqa.models import Citation, Hit

#: Word budget of an answer: no sentence is added past it (the best sentence is always kept), and
#: none after MIN_WORDS are reached.
MAX_WORDS = 100
MIN_WORDS = 70
#: A further sentence must score at least this close to the best one.
MARGIN = 0.6
#: Further sentences must add a question term not yet covered; the best one brings its successor.
NEW_TERMS = False
FOLLOW = True
FOLLOW_ALWAYS = True
#: The best sentence's successor may take the answer up to this many words (past MAX_WORDS).
FOLLOW_MAX_WORDS = 120
W_SIM, W_TERMS, W_KIND, W_PRIOR = 1.0, 0.8, 0.3, 0.3
#: How far back a chain of sentences leaning on their predecessors is followed.
LEAN_BACK_STEPS = 2
#: Fill the room left under MAX_WORDS with the sentences after the best one.
READ_ON = True
#: Score taken off a sentence the previous answer already quoted (follow-ups).
AVOIDED = 1.0
#: How far back from a table row its header row is looked for.
HEADER_STEPS = 12
#: A sentence that points at a table: the table's best-matching row is quoted with it.
_REFERS_TABLE = re.compile(r"\bTable\s+[\dIVX]+\b|\b(?:the )?(?:following|below) table\b|\btable below\b")


@dataclass(frozen=True)
class Candidate:
    """A quotable sentence near a retrieved passage."""

    hit: int  # index into the hits (the passage that brought it)
    doc_id: str
    ordinal: int  # position in its document (neighbours are ordinal ± 1)
    text: str  # verbatim (whitespace collapsed): what the citation quotes
    role: str
    page: int | None
    row: int | None = None  # its row in the version's sentence vectors, when stored


# -- what the question asks for ---------------------------------------------------------------------

_ASKS_NUMBER = re.compile(r"\bhow (?:many|much|large|big|long|fast|often|small)\b|\bwhat (?:\w+ )?(?:percentage|"
                          r"fraction|ratio|rate|size|number|speed ?up|throughput|utili[sz]ation|bit.?width|"
                          r"precision|value|limit|threshold|memory|bandwidth|latency)\b|\bdefault\b|\bby how\b|"
                          r"\bhow \w+ (?:is|are|was|were|does|do)\b.*\b(?:size|memory|buffer|speed)\b", re.I)
_ASKS_NUMBER_MORE = re.compile(r"\bwhat (?:[\w-]+ ){0,2}(?:percentage|fraction|ratio|rate|size|number|speed ?up|"
                               r"throughput|utili[sz]ation|bit.?width|precision|value|limit|threshold|memory|"
                               r"bandwidth|latency|version|release)\b|\b(?:which|what) (?:[\w-]+ ){0,2}"
                               r"(?:version|release)s?\b", re.I)
_ASKS_FLAG = re.compile(r"\b(?:flag|option|argument|environment variable|env var|setting|config\w*|parameter "
                        r"name|command|api|function|call|class|method|knob)\b|\bhow (?:do|can|should|would) "
                        r"(?:I|we|you)\b|\bwhat (?:must|should|do|can) (?:I|we|you) (?:set|configure|use|call|wrap|"
                        r"pass|run|change)\b|\b(?:script|file|module|decorator|wrapper|variable)s?\b", re.I)
#: "When running X, what ..." does not ask for a date: only a question opening with "when did/was ..." does.
_ASKS_YEAR = re.compile(r"^\W*when (?:did|was|were|is|will|has|have)\b|\b(?:what|which|in which) year\b|"
                        r"\bsince when\b", re.I)
_ASKS_NAME = re.compile(r"\b(?:which|what) (?:[\w-]+ ){0,3}(?:projects?|papers?|works?|librar(?:y|ies)|"
                        r"frameworks?|systems?|tools?|packages?|approach(?:es)?|techniques?|methods?|models?|"
                        r"algorithms?|compan(?:y|ies)|teams?|groups?|labs?|organi[sz]ations?|institutions?|"
                        r"universit(?:y|ies)|reports?|hardware|strateg(?:y|ies)|class(?:es)?)\b|\bwho\b|"
                        r"\bwhat is (?:it )?called\b|\bname of\b|\bwhere did\b.*\bcome from\b|"
                        r"\boriginally\b", re.I)

_HAS_NUMBER = re.compile(r"\d+(?:[.,]\d+)?\s*(?:%|x\b|×|MB|GB|KB|TB|MiB|GiB|bits?|bytes?|ms|s\b|seconds?|"
                         r"minutes?|hours?|GPUs?|nodes?|billion|million|trillion|B\b|M\b)|\b\d+(?:\.\d+)?\b|"
                         r"\b[A-Za-z]+\d+[A-Za-z]*\b", re.I)  # digits inside a token: INT4, FP8, V100
_HAS_FLAG = re.compile(r"(?:^|\s)--?[a-z][\w-]+|\b[a-z]+_[a-z_]+\b|\b[A-Z]{2,}_[A-Z_]+\b|`[^`]+`|\w+\.\w+\(|"
                       r"\b[a-z]+[A-Z]\w+\b")
_HAS_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_HAS_NAME = re.compile(r"\b[A-Z][a-z]*[A-Z]\w*\b|\b[A-Z][a-z]+(?:-[A-Z0-9][\w]*)+\b|\b[A-Z]{2,}[a-z]*\b")


def answer_kinds(question: str) -> tuple[re.Pattern[str], ...]:
    """Patterns of the kinds of answer the question asks for (a number, a flag, a year, a name)."""
    kinds = []
    if _ASKS_NUMBER.search(question) or _ASKS_NUMBER_MORE.search(question):
        kinds.append(_HAS_NUMBER)
    if _ASKS_FLAG.search(question):
        kinds.append(_HAS_FLAG)
    if _ASKS_YEAR.search(question):
        kinds.append(_HAS_YEAR)
    if _ASKS_NAME.search(question):
        kinds.append(_HAS_NAME)
    return tuple(kinds)


#: Where a question asks a second thing: "..., and what does it assume ...", "...? And how ...".
_SECOND_ASK = re.compile(r"(?:,\s*|\?\s*|\s+)(?:and|but|or|also)\s+(?=(?:what|how|which|why|who|where|when|whether|"
                         r"is|are|does|do|did|can|could|was|were|should|must|will)\b)", re.I)


#: "Besides optimizer states and gradients, what other ...": what the asker already knows.
_BESIDES = re.compile(r"\b(?:besides|apart from|aside from|other than|except(?: for)?|in addition to)\s+([^?;]+?)"
                      r"(?=,\s*(?:what|which|how|who|where|when|why|is|are|does|do|can)\b|[?;]|$)", re.I)


def known_terms(question: str) -> set[str]:
    """Terms the question names as already known ("Besides X, what other ..."): a sentence saying
    them again is no answer, so they do not count for a sentence (they still retrieve)."""
    return {t for m in _BESIDES.finditer(question) for t in tokenize(m.group(1))}


def question_parts(question: str) -> list[str]:
    """The asks of a question with more than one ("Which class launches it, and what model do the
    examples fine-tune?" → two); a question with one ask is one part.

    A part with no term of its own ("..., and why?") is no separate ask: it stays with the one before.
    """
    pieces = [p.strip(" ,;?") for p in _SECOND_ASK.split(question)]
    parts: list[str] = []
    for p in pieces:
        if parts and not question_terms_strict(p):
            parts[-1] = f"{parts[-1]} and {p}"
        elif p:
            parts.append(p)
    return parts or [question]


# -- candidates -----------------------------------------------------------------------------------------


def stored_candidates(version, hits: Sequence[Hit]) -> list[Candidate]:  # noqa: ANN001 - IndexVersion
    """The stored quotable sentences overlapping each passage (each sentence once, for its best passage)."""
    out: list[Candidate] = []
    seen: set[tuple[str, int]] = set()
    for i, h in enumerate(hits):
        if h.is_card:
            continue
        for s in version.sentences_in(h.doc_id, h.start, h.end):
            if (s.doc_id, s.ordinal) in seen or s.role == SNIPPET or marker_subject(s.text):
                continue  # a snippet is quoted only with its announcer; a marker-subject fragment never
            seen.add((s.doc_id, s.ordinal))
            out.append(Candidate(i, s.doc_id, s.ordinal, s.text, s.role, s.page, s.row))
    return out


def passage_candidates(hits: Sequence[Hit]) -> list[Candidate]:
    """Candidates split from the passages themselves (index versions built before sentences were stored)."""
    from dmlqa.models import Block, Document

    out: list[Candidate] = []
    for i, h in enumerate(hits):
        if h.is_card:
            continue
        doc = Document(doc_id=h.doc_id, url=h.url, title=h.title, blocks=(Block(h.text, h.page, h.section),),
                       content_type="text")
        out += [Candidate(i, h.doc_id, h.start + o, s.text, s.role, h.page)
                for o, s in enumerate(split_document(doc))
                if s.quotable and s.role != SNIPPET and not marker_subject(s.text)]
    return out


# -- scoring and choosing ----------------------------------------------------------------------------------


#: Words of *asking*, not of the asked-about thing: interrogatives, auxiliaries, pronouns and chat
#: fillers. The index's stop list is short (BM25 wants "how"/"can" for phrase-like matches), so they
#: survive tokenising; among candidate sentences they are rare, so their rarity weight was the highest
#: of all, and a sentence that happened to say "what" or "you" outranked the one stating the fact.
_ASKING_WORDS = frozenset(tokenize(
    "what which who whom whose when where why how whether does do did doing done can could would should "
    "shall may might must i me my mine we us our you your yours he him his she her its it's them "
    "is am are was were been being has have had having so than very just actually really exactly "
    "please tell explain say says said know mean means anyone someone something anything way ways"))


def question_terms_strict(question: str) -> set[str]:
    """The terms of a question that name what it is about; empty when it has only words of asking."""
    return set(tokenize(question)) - _ASKING_WORDS


def question_terms(question: str) -> set[str]:
    """The terms of a question that name what it is about (all its terms when none is left)."""
    return question_terms_strict(question) or set(tokenize(question))


def _term_weights(question_terms: set[str], texts: Sequence[set[str]]) -> dict[str, float]:
    """Rarer among the candidates → more telling: log(1 + N / (1 + df)), never below a floor."""
    n = max(1, len(texts))
    return {t: max(0.2, math.log(1 + n / (1 + sum(t in x for x in texts)))) for t in question_terms}


@dataclass(frozen=True)
class Choice:
    candidates: list[Candidate]  # in answer order
    best_similarity: float  # the highest sentence-question cosine (evidence strength, for refusal)
    best_terms: float  # the weighted term share of the best sentence


def _overlap(terms: set[str], cand_terms: Sequence[set[str]]) -> np.ndarray:
    """Share of the weight of ``terms`` (:func:`_term_weights`) each candidate's terms hold."""
    weights = _term_weights(terms, cand_terms)
    total = sum(weights.values()) or 1.0
    return np.array([sum(w for t, w in weights.items() if t in ct) / total for ct in cand_terms], np.float32)


def choose(
    question: str,
    qvec: np.ndarray,
    cands: Sequence[Candidate],
    vectors: np.ndarray,
    *,
    neighbour: Callable[[Candidate, int], Candidate | None] = lambda c, step: None,
    exclude_terms: set[str] = frozenset(),
    avoid: set[str] = frozenset(),
    max_sentences: int = 5,
    redundancy: float = 0.85,
    aspects: Sequence[tuple[str, np.ndarray]] = (),
) -> Choice:
    """Pick the sentences of the answer. ``vectors[i]`` is the vector of ``cands[i]``.

    ``neighbour(c, ±1)`` returns the sentence before/after ``c`` in its document (or None), for
    anaphora and announced lists. ``exclude_terms`` are terms a follow-up question shares with the
    previous one: they still retrieve, but the answer must be about what is new. ``avoid`` are
    sentences the previous answer quoted: ranked last, so they are said again only when nothing
    else answers. ``aspects`` are the further asks of a question with several (:func:`question_parts`)
    with their vectors: the sentence that best answers each comes right after the best sentence
    overall, since the whole question's ranking favours whichever ask has more words.
    """
    if not cands:
        return Choice([], 0.0, 0.0)
    terms = question_terms(question)
    focus = terms - set(exclude_terms) - known_terms(question) or terms
    cand_terms = [set(tokenize(c.text)) for c in cands]
    overlap = _overlap(focus, cand_terms)
    sims = vectors @ qvec if len(vectors) else np.zeros(len(cands), np.float32)
    kinds = answer_kinds(question)
    kind = np.array([max((1.0 if p.search(c.text) else 0.0 for p in kinds), default=0.0) for c in cands],
                    np.float32)
    prior = np.array([1.0 / (1 + c.hit) for c in cands], np.float32)
    penalty = np.array([AVOIDED if c.text in avoid else 0.0 for c in cands], np.float32)
    scores = W_SIM * sims + W_TERMS * overlap + W_KIND * kind + W_PRIOR * prior - penalty
    order = [int(i) for i in np.argsort(-scores)]
    best = order[0]
    required: set[int] = set()  # the best sentence of each further ask: kept however it scores overall
    for part, pvec in aspects:
        part_terms = question_terms_strict(part) - set(exclude_terms)
        if not part_terms or not len(vectors):
            continue
        pscores = W_SIM * (vectors @ pvec) + W_TERMS * _overlap(part_terms, cand_terms) + W_PRIOR * prior - penalty
        top = int(np.argmax(pscores))
        if top in order[:1]:
            continue
        order.remove(top)
        order.insert(1, top)
        required.add(top)

    def header_of(row: Candidate) -> Candidate | None:
        """The first row of the table ``row`` is in (its header): a row alone may not say what its
        columns are. The rows between them that are not stored (the markdown separator, an empty row)
        are skipped, two at most."""
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

    chosen: list[int] = []
    covered: set[str] = set()
    words = 0
    for idx in order:
        if len(chosen) >= max_sentences or words >= MIN_WORDS:
            break
        n_words = len(cands[idx].text.split())
        if chosen:
            if scores[idx] < scores[best] - MARGIN and idx not in required:
                break
            if float(np.max(vectors[chosen] @ vectors[idx])) > redundancy:
                continue
            if NEW_TERMS and not (cand_terms[idx] & focus) - covered and cands[idx].role != ITEM:
                continue  # adds nothing the answer does not already say
            if words + n_words > MAX_WORDS:
                continue
            if cands[idx].role == ROW and any(cands[j].role == ROW and cands[j].doc_id == cands[idx].doc_id
                                              for j in chosen):
                continue  # a row of a document, not its whole table: the rest are no better bet
            if cands[idx].role == ROW and header_of(cands[idx]) is None:
                continue  # a table's header row alone states nothing; it comes with a row of its own
        chosen.append(idx)
        covered |= cand_terms[idx] & focus
        words += n_words

    picked = [cands[i] for i in chosen]

    def items_after(c: Candidate) -> list[Candidate]:
        """The list items or code lines a sentence announces (a non-quotable line between two items is
        skipped)."""
        got: list[Candidate] = []
        for step in range(1, 7):
            nxt = neighbour(c, step)
            if nxt is None and got:
                continue
            if nxt is None or nxt.role not in (ITEM, SNIPPET) or nxt in picked:
                break
            got.append(nxt)
        return got

    def snippets_after(c: Candidate) -> list[Candidate]:
        """The code lines a sentence announces without a colon (a comment over its line, a sentence over
        a few command lines): stored as SNIPPETs only when announced, so every one right after goes."""
        got: list[Candidate] = []
        for step in range(1, 4):
            nxt = neighbour(c, step)
            if nxt is None or nxt.role != SNIPPET or nxt in picked:
                break
            got.append(nxt)
        return got

    def table_row(c: Candidate) -> list[Candidate]:
        """For a sentence pointing at a table ("... in Table 1"), the row of that document holding
        most of the question's terms (with its header): the figure asked for is in a row."""
        rows = [i for i, x in enumerate(cands) if x.role == ROW and x.doc_id == c.doc_id and cands[i] not in picked]
        heads = {i: header_of(cands[i]) for i in rows}
        rows = [i for i in rows if heads[i] is not None]  # a header row is no row of figures
        if not rows or any(x.role == ROW and x.doc_id == c.doc_id for x in picked):
            return []  # no row, or the ranking chose one already
        top = max(rows, key=lambda i: overlap[i])
        return [heads[top], cands[top]] if overlap[top] > 0 else []

    out: list[Candidate] = []
    for rank, c in enumerate(picked):
        block = [c]
        if c.role == ROW:
            head = header_of(c)
            if head is not None and head not in picked:
                block.insert(0, head)
        head = c
        for _ in range(LEAN_BACK_STEPS):  # "That is to say, ..." after "Though ..." after the fact
            if not leans_back(head.text):
                break
            prev = neighbour(head, -1)
            if prev is None or prev in picked or prev.role == SNIPPET or marker_subject(prev.text):
                break
            block.insert(0, prev)
            head = prev
        listed = items_after(c) if leans_forward(c.text) else snippets_after(c)
        block += listed
        if _REFERS_TABLE.search(c.text):
            block += table_row(c)
        if not listed and (rank == 0 or leans_forward(c.text)) and FOLLOW and words < FOLLOW_MAX_WORDS:
            # A sentence announcing what follows ("... on 8 GPUs:") says nothing without it, whatever
            # its rank; when no list follows, the next sentence is what it announced.
            # The best sentence often opens what the next one states ("MXNet is more than ...").
            nxt = neighbour(c, 1)
            if (nxt is not None and nxt not in picked and nxt.role in (PROSE, ITEM) and not marker_subject(nxt.text)
                    and words + len(nxt.text.split()) <= FOLLOW_MAX_WORDS
                    and (FOLLOW_ALWAYS or leans_back(nxt.text) or set(tokenize(nxt.text)) & focus)):
                block.append(nxt)
                words += len(nxt.text.split())
                if leans_forward(nxt.text):  # "... the most common reasons are:" brings its list
                    block += items_after(nxt)
        for b in block:
            if b not in out:
                out.append(b)
    if out and READ_ON:
        # Room left: read on after the best sentence's block. A passage often sets the problem out
        # first and states the answer next ("... would prohibit pipeline parallelism. DeepSpeed
        # provides a TiedLayerSpec ..."); any sentence the ranking chose instead is no better bet.
        total = sum(len(c.text.split()) for c in out)
        last = max((c for c in out if c.doc_id == out[0].doc_id), key=lambda c: c.ordinal)
        while True:
            nxt = neighbour(last, 1)
            if (nxt is None or nxt in out or nxt.role not in (PROSE, ITEM) or marker_subject(nxt.text)
                    or total + len(nxt.text.split()) > MAX_WORDS):
                break
            out.append(nxt)
            total += len(nxt.text.split())
            last = nxt
    return Choice(out, float(np.max(sims)) if len(sims) else 0.0, float(overlap[best]))


def arrange(chosen: Sequence[Candidate]) -> list[Candidate]:
    """Answer order: documents in the order they were first chosen, sentences in reading order."""
    first: dict[str, int] = {}
    for i, c in enumerate(chosen):
        first.setdefault(c.doc_id, i)
    return sorted(chosen, key=lambda c: (first[c.doc_id], c.ordinal))


_ASKS_RESOURCE = re.compile(r"^\W*(?:which|what)\b(?:\s+\w+){0,3}?\s+(?:paper|project|work|library|framework|"
                            r"system|tool|report|tech report|package|repo|repository|method|approach|technique)s?\b",
                            re.I)


def asks_for_resource(question: str) -> bool:
    """"Which paper/project/tool ...?": the answer is a source's name, so the answer leads with it."""
    return _ASKS_RESOURCE.search(question) is not None


def _display_title(title: str) -> str:
    return re.sub(r"^GitHub - ", "", title).strip()


def compose(chosen: Sequence[Candidate], hits: Sequence[Hit], *, question: str = "") -> tuple[str, list[Citation]]:
    """The answer text with one [n] per document page, and its citations (quotes are verbatim).

    For a question asking which paper/project/tool, the answer leads with the title of the source
    of its best sentence: the name is the answer, and the sentences say why.
    """
    numbers: dict[tuple[str, int | None], int] = {}
    quotes: dict[tuple[str, int | None], list[str]] = {}
    parts: list[str] = []
    items: list[str] = []
    by_doc = {h.doc_id: h for h in reversed(hits)}  # the best-ranked passage of each document
    if chosen and asks_for_resource(question):
        top = chosen[0]
        numbers[(top.doc_id, top.page)] = 1
        parts.append(f"{_display_title(by_doc[top.doc_id].title)} [1]:")
    said: set[str] = set()
    for c in arrange(chosen):
        if c.text in said:  # the same sentence in two copies of a page says nothing new
            continue
        said.add(c.text)
        key = (c.doc_id, c.page)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
        quotes.setdefault(key, []).append(c.text)
        text = for_answer(c.text) if c.role != SNIPPET else f"`{c.text}`"  # code is quoted as written
        if c.role == ROW:  # a table row reads as a list item, its cells apart
            text = " | ".join(cell.strip() for cell in text.strip("|").split("|"))
        if c.role in (ITEM, SNIPPET, ROW):
            items.append(f"- {text.lstrip('-*•▪●◦‣ ').strip()} [{numbers[key]}]")
            continue
        if items:
            parts.append("\n" + "\n".join(items) + "\n")
            items = []
        parts.append(f"{text} [{numbers[key]}]")
    if items:
        parts.append("\n" + "\n".join(items))
    body = " ".join(parts).replace(" \n", "\n").replace("\n ", "\n").strip()
    citations: list[Citation] = []
    for (doc_id, page), n in numbers.items():
        h = by_doc[doc_id]
        quote = quotes.get((doc_id, page), [h.title])[0]  # verbatim: a reader finds it in the source
        citations.append(Citation(n=n, url=h.url, title=h.title, page=page, quote=quote[:300], doc_id=doc_id,
                                  chunk_id=h.chunk_id, venue=h.venue, year=h.year))
    return body, citations
