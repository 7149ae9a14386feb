"""Answering: retrieve passages, then write a short cited answer (LLM or extractive).

The extractive answerer is the offline default: it quotes the few sentences a learned selector
rates most likely to state the answer, best first (:mod:`dmlqa.query.extractive`), and cites each
one. When the best is rated under the selector's learned cut it says that the knowledge base has
nothing on the question and lists the nearest sources instead. When an LLM is configured it writes
the answer from the same passages; if it fails, the extractive answer is returned with a notice
saying why.
"""

from __future__ import annotations

import functools
import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from dmlqa.index.lexical import tokenize
from dmlqa.index.versions import IndexVersion
from dmlqa.models import Answer, Citation, Hit
from dmlqa.query.citations import REFUSAL_PREFIX
from dmlqa.query.names import concepts, name_refusal, not_english, unknown_names
from dmlqa.query.prompt import MAX_QUESTION_CHARS
from dmlqa.query.search import Filters, Searcher, SearchOptions, undated_excluded
from dmlqa.query.subjects import unknown_subject
from dmlqa.settings import Settings

if TYPE_CHECKING:
    import numpy as np

    from dmlqa.query.extractive import Pool

#: The extractive refusal opens with the phrase the citation check reads as a refusal in an LLM answer.
REFUSAL = REFUSAL_PREFIX + "."
#: How an answer's notice begins when the LLM failed and the extractive answer stands in for it.
LLM_UNAVAILABLE = "LLM unavailable"


@dataclass(frozen=True)
class AskOptions:
    filters: Filters = field(default_factory=Filters)
    passages: int = 8  # passages handed to the answerer
    per_doc: int = 2  # at most this many passages from one document
    max_sentences: int | None = None  # None: the answerer's own (dmlqa.query.quotes.MAX_SENTENCES)
    use_llm: bool = True
    mode: str = "hybrid"  # retrieval: hybrid | dense | bm25


# -- question hygiene ---------------------------------------------------------------------------------


def clean_question(question: str) -> tuple[str, str | None]:
    """Strip control characters, collapse whitespace, cap the length; return (text, notice)."""
    text = "".join(ch if unicodedata.category(ch)[0] != "C" or ch in "\n\t" else " " for ch in question)
    text = " ".join(text.split())
    if len(text) > MAX_QUESTION_CHARS:
        cut = text[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
        return cut, f"the question was {len(text)} characters long; only the first {len(cut)} were used"
    return text, None


#: The answer to a question in another language (:func:`dmlqa.query.names.not_english`), rather than quotes
#: matched on its names alone or a refusal listing its words as unknown names.
NOT_ENGLISH = ("The knowledge base is in English, and this question does not look like English: please ask it in "
               "English.")


# -- retrieval ------------------------------------------------------------------------------------------


def retrieve(searcher: Searcher, version: IndexVersion, question: str, options: AskOptions) -> list[Hit]:
    """Hybrid retrieval in ``version`` with diversity: no document fills more than ``per_doc`` of the slots."""
    pool = searcher.search(
        question, SearchOptions(k=options.passages * 5, filters=options.filters, mode=options.mode), version=version
    )
    chosen: list[Hit] = []
    per: dict[str, int] = {}
    for h in pool:
        if per.get(h.doc_id, 0) >= options.per_doc:
            continue
        per[h.doc_id] = per.get(h.doc_id, 0) + 1
        chosen.append(h)
        if len(chosen) == options.passages:
            break
    # Ranks renumbered after the diversity cut; every other field (offsets included) as searched.
    return [replace(h, rank=i + 1) for i, h in enumerate(chosen)]


# -- extractive answering -------------------------------------------------------------------------------

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentences_of(text: str) -> list[str]:
    """Sentences of a passage (a light splitter: passages are already clean prose or PDF text)."""
    flat = " ".join(text.split())
    return [s.strip() for s in _SENT_END.split(flat) if s.strip()]


def scored_pool(searcher: Searcher, version: IndexVersion, question: str, hits: Sequence[Hit], options: AskOptions,
                *, previous: str | None = None) -> tuple[Pool, np.ndarray]:
    """A question's candidate sentences (:func:`dmlqa.query.extractive.gather`) and the selector's score of each:
    what both answerers start from, gathered once a question (an LLM answer that fails falls back on it)."""
    from dmlqa.query.extractive import gather
    from dmlqa.query.selector import default_selector

    pool = gather(searcher, version, question, hits, options, previous=previous)
    selector, model = default_selector(), version.meta["model"]
    tuning = selector.tuned_for(model)
    tuned = searcher.embed_tuned(pool.asked, version, tuning) if tuning and pool.asked and pool.candidates else None
    return pool, selector.score_pool(pool, model, tuned)


def candidate_cosines(searcher: Searcher, version: IndexVersion, question: str) -> np.ndarray:
    """The cosines of a question's candidate sentences, retrieved and gathered as an answer's are: what the
    off-topic check measures a question and its background probes by (:mod:`dmlqa.query.topic`)."""
    import numpy as np

    from dmlqa.query.extractive import gather

    options = AskOptions(use_llm=False)
    hits = retrieve(searcher, version, question, options)
    return gather(searcher, version, question, hits, options).cosines if hits else np.zeros(0, np.float32)


def extractive_answer(
    searcher: Searcher, version: IndexVersion, question: str, hits: Sequence[Hit], options: AskOptions, *,
    previous: str | None = None, avoid: set[str] = frozenset(), scored: tuple[Pool, np.ndarray] | None = None,
) -> tuple[str, list[Citation], bool, list[str]]:
    """(answer text, citations, refused, flags): see :mod:`dmlqa.query.extractive`.

    ``version`` is the one ``hits`` were retrieved from: candidate sentences and their vectors come
    from it. ``previous`` is the question a follow-up leans on: its terms still retrieve, but the
    answer is about what is new. ``scored``: :func:`scored_pool`'s result when the caller has it. The
    answer is refused when the best sentence scores under the selector's learned threshold (a question
    naming something no document mentions never gets here: :meth:`Asker.stream` refuses it first, see
    :mod:`dmlqa.query.names`).
    """
    from dmlqa.query.compose import compose
    from dmlqa.query.quotes import MAX_SENTENCES, choose
    from dmlqa.query.selector import default_selector

    selector = default_selector()
    pool, scores = scored or scored_pool(searcher, version, question, hits, options, previous=previous)
    chosen = choose(question, pool.candidates, scores, neighbour=pool.neighbour, add_above=selector.add_above,
                    avoid=avoid, max_sentences=options.max_sentences or MAX_SENTENCES, max_words=selector.max_words,
                    read_on=selector.read_on, diversity=selector.diversity, focus=selector.focus,
                    vectors=pool.vectors_for, titles=pool.titles)
    if not chosen or float(scores.max()) < selector.refuse_below:
        return REFUSAL, [], True, []
    body, citations = compose(chosen, pool.sources, question=question)
    return body, citations, False, []


#: Sentences of one source put before its passage in the LLM's context.
QUOTES_PER_SOURCE = 3


def llm_context(pool: Pool, scores: np.ndarray, hits: Sequence[Hit], options: AskOptions) -> list[Hit]:
    """The sources an LLM answers from, at most ``options.passages``: the same candidates the extractive answer
    ranks, the passages of the best-rated sentences first, each opening with its best sentences (quotes first,
    then the passage they come from); the retrieved passages when there are none. A source found by the sentence
    index rather than retrieval is its document's passage holding the sentence, so the LLM sees the evidence even
    when its passage ranked low; the citation check reads the same texts, so quotes stay verifiable."""
    import numpy as np

    from dmlqa.extract.sentences import ROW
    from dmlqa.query.quotes import readable

    picked: dict[int, list[str]] = {}
    by_doc = {h.doc_id: i for i, h in reversed(list(enumerate(pool.sources)))}
    for i in np.argsort(-np.asarray(scores), kind="stable").tolist():
        c = pool.candidates[i]
        if not readable(c) and c.role != ROW:
            continue
        src = c.hit if c.hit is not None else by_doc.get(c.doc_id)
        if src is None or (src not in picked and len(picked) >= options.passages):
            continue
        quotes = picked.setdefault(src, [])
        if len(quotes) < QUOTES_PER_SOURCE and c.text not in quotes:
            quotes.append(c.text)
    out: list[Hit] = []
    for src, quotes in picked.items():
        h = pool.sources[src]
        out.append(replace(h, rank=len(out) + 1, text="\n".join(quotes) + "\n\n" + h.text))
    return out or list(hits)


_FOLLOW_UP = re.compile(r"^\W*(?:(?:and|but|so)\s+)?(?:what|how)\s+(?:about|of|so)\b|^\W*(?:and|also|then|so|"
                        r"but|why)\b", re.IGNORECASE)
#: Words that point back at what the previous question was about.
_POINTING = frozenset({"it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "his",
                       "her", "same", "former", "latter", "there"})


def _with_nearest(refusal: str, hits: Sequence[Hit]) -> tuple[str, list[Citation]]:
    """A refusal that lists the nearest sources, so that a user sees what the knowledge base does hold."""
    cites = nearest_sources(hits)
    if cites:
        refusal += " Nearest sources: " + "; ".join(f"[{c.n}] {c.title}" for c in cites) + "."
    return refusal, cites


def is_follow_up(question: str) -> bool:
    """Does the question lean on the one before ("what about stage 3?", "and for inference?",
    "why is it slow?")? Short questions only: a long one says what it is about."""
    words = re.findall(r"[\w'-]+", question.lower())
    if not words or len(words) > 12:
        return False
    return _FOLLOW_UP.search(question) is not None or bool(_POINTING & set(words)) or len(tokenize(question)) <= 1


def nearest_sources(hits: Sequence[Hit], n: int = 3) -> list[Citation]:
    seen: set[str] = set()
    out: list[Citation] = []
    for h in hits:
        if h.doc_id in seen:
            continue
        seen.add(h.doc_id)
        out.append(Citation(n=len(out) + 1, url=h.url, title=h.title, page=h.page, quote="", doc_id=h.doc_id,
                            chunk_id=h.chunk_id, venue=h.venue, year=h.year))
        if len(out) == n:
            break
    return out


# -- orchestration ----------------------------------------------------------------------------------------


@dataclass
class AskStream:
    """An answer being produced: iterate ``deltas`` for streamed text, then read ``result``."""

    deltas: Iterator[str]
    _result: Callable[[], Answer]

    def __iter__(self) -> Iterator[str]:
        return iter(self.deltas)

    @property
    def result(self) -> Answer:
        for _ in self.deltas:  # drain whatever the caller did not read
            pass
        return self._result()


class Asker:
    """Answers questions over a home's index; loads model, index and LLM client once."""

    def __init__(self, searcher: Searcher, llm: object | None = None) -> None:
        self.searcher = searcher
        self.llm = llm  # dmlqa.query.llm.LLMBackend or None

    @classmethod
    def from_settings(cls, settings: Settings) -> Asker:
        """The asker for a home's settings: a searcher over its index and the configured LLM, if any.

        The one constructor front ends and the library API use, so that the LLM is set up the same
        way wherever a question is asked.
        """
        from dmlqa.query.llm import LLMBackend, LLMConfig

        config = LLMConfig.from_settings(settings)
        return cls(Searcher(settings), LLMBackend(config) if config else None)

    def ask(self, question: str, options: AskOptions | None = None, *,
            previous: Answer | str | None = None, version: IndexVersion | None = None) -> Answer:
        return self.stream(question, options, previous=previous, version=version).result

    def stream(self, question: str, options: AskOptions | None = None, *,
               previous: Answer | str | None = None, version: IndexVersion | None = None) -> AskStream:
        """Answer ``question``; ``previous`` is the conversation's last answer (or question), for follow-ups.

        A follow-up that leans on the previous question ("what about stage 3?") is retrieved with
        that question's words, but answered about its own new aspect, without repeating what the
        previous answer already quoted. Passages, quotes and citations all come from one index
        version: ``version`` (a caller's pinned one), else the one published when the question arrives.
        """
        options = options or AskOptions()
        t0 = time.perf_counter()
        text, notice = clean_question(question)
        if not text:
            answer = Answer(question=question, answer="Please ask a question.", citations=(), backend="extractive",
                            refused=True, notice="empty question")
            return AskStream(iter(()), lambda: answer)
        prev_question = previous.question if isinstance(previous, Answer) else previous
        context = prev_question if prev_question and is_follow_up(text) else None
        if version is None:
            version = self.searcher.pin()
        undated = undated_excluded(version, options.filters)
        notices = [notice] if notice else []

        def refuse(body: str, cites: Sequence[Citation], why: str | None, retrieved: Sequence[Hit] = ()) -> AskStream:
            """Refused before either answerer writes anything (no selector score, no LLM call)."""
            answer = Answer(question=text, answer=body, citations=tuple(cites), backend="extractive", refused=True,
                            retrieved=tuple(retrieved), seconds=time.perf_counter() - t0, notice=why,
                            undated_excluded=undated)
            return AskStream(iter([answer.answer]), lambda: answer)

        if not_english(text, concepts(version)):  # before retrieval: English passages cannot answer it
            return refuse(NOT_ENGLISH, (), "question not in English")
        from dmlqa.query.extractive import asked_text
        from dmlqa.query.spelling import corrected

        text, fixes = corrected(version, text)  # "pipline": a typo, not a name no document mentions
        if fixes:
            notices.append("read " + ", ".join(f"'{wrote}' as '{read}'" for wrote, read in fixes))

        hits = retrieve(self.searcher, version, asked_text(text, context), options)
        unknown = unknown_names(version, text, hits) or unknown_subject(version, text, hits)
        if unknown:  # before either answerer: an LLM would answer from passages about something else
            return refuse(*name_refusal(version, unknown, hits), "; ".join(notices) or None, hits)

        from dmlqa.query.selector import default_selector
        from dmlqa.query.topic import about_a_named_work, nearness, other_field

        # gathered once for both answerers (an LLM answer that fails falls back on the extractive one)
        scored = scored_pool(self.searcher, version, text, hits, options, previous=context) if hits else None
        if scored is not None and len(scored[0].cosines):
            near = nearness(version, scored[0].cosines, functools.partial(candidate_cosines, self.searcher, version))
            # before either answerer: no sentence is about the question, only some share a word with it; or the
            # question is about another field, whose words the corpus uses ("merge conflict in git"), unless it
            # comes after another in a conversation ("Is there a head-size requirement I should respect to get the
            # most out of it?" is about the answer before, and alone reads as about nothing)
            why = ("no passage is about this question"
                   if default_selector().off_topic(near) and not about_a_named_work(version, text, hits) else
                   "the question is about another field"
                   if not prev_question and other_field(version, text, scored[0].qvec, near) else None)
            if why:
                notices.append(why)
                return refuse(*_with_nearest(REFUSAL, hits), "; ".join(notices), hits)

        def extractive(extra_notice: str | None = None) -> Answer:
            said = {c.quote for c in previous.citations} if context and isinstance(previous, Answer) else set()
            body, cites, refused, flags = extractive_answer(self.searcher, version, text, hits, options,
                                                            previous=context, avoid=said, scored=scored)
            if refused:
                body, cites = _with_nearest(body, hits)
            all_notices = notices + ([extra_notice] if extra_notice else [])
            return Answer(question=text, answer=body, citations=tuple(cites), backend="extractive", refused=refused,
                          retrieved=tuple(hits), seconds=time.perf_counter() - t0,
                          notice="; ".join(all_notices) or None, flags=tuple(flags), undated_excluded=undated)

        if self.llm is None or not options.use_llm or not hits:
            answer = extractive()
            return AskStream(iter([answer.answer]), lambda: answer)
        context_hits = llm_context(*scored, hits, options)
        return self._llm_stream(text, hits, notices, extractive, t0, undated, context_hits)

    def _llm_stream(self, text, hits, notices, extractive, t0, undated: int = 0,  # noqa: ANN001
                    sources: Sequence[Hit] = ()) -> AskStream:
        """The LLM's answer from ``sources`` (its context, :func:`llm_context`; the retrieved ``hits``
        when empty), its citations checked against the same texts."""
        from dmlqa.query.citations import check_citations
        from dmlqa.query.llm import LLMError

        box: dict[str, Answer] = {}
        llm = self.llm
        context = list(sources) or list(hits)

        def gen() -> Iterator[str]:
            pieces: list[str] = []
            try:
                for delta in llm.stream(text, context):
                    pieces.append(delta)
                    yield delta
            except LLMError as exc:
                fallback = extractive(f"{LLM_UNAVAILABLE} ({exc.reason}); showing the extractive answer")
                box["answer"] = fallback
                yield "\n\n[" + (fallback.notice or "") + "]\n" + fallback.answer
                return
            checked = check_citations("".join(pieces), context)
            box["answer"] = Answer(
                question=text, answer=checked.text, citations=checked.citations, backend=llm.name,
                refused=checked.refused, retrieved=tuple(hits), seconds=time.perf_counter() - t0,
                notice="; ".join(notices) or None, flags=checked.flags, undated_excluded=undated,
            )

        it = gen()
        return AskStream(it, lambda: box["answer"])
