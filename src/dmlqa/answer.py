"""Answering: retrieve passages, then write a short cited answer (LLM or extractive).

The extractive answerer is the offline default: it picks the 2–5 sentences of the retrieved
passages that best answer the question (semantic similarity to the question plus overlap of its
salient terms, redundancy removed), keeps them in reading order and cites each one. When the
evidence is too weak it says that the knowledge base has nothing on the question and lists the
nearest sources instead. When an LLM is configured it writes the answer from the same passages;
if it fails, the extractive answer is returned with a notice saying why.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from dmlqa.lexical import tokenize
from dmlqa.models import Answer, Citation, Hit
from dmlqa.search import Filters, Searcher, SearchOptions, undated_excluded

REFUSAL = "The knowledge base has nothing on this."
MAX_QUESTION_CHARS = 2000

# Calibrated on the development questions (bench/eval_answers.py): off-topic questions score a
# best-sentence similarity of at most 0.30, answerable ones at least 0.38. Below this, or with a
# name in the question that no document contains, the answer is refused.
MIN_EVIDENCE = 0.35
#: Sentences embedded per question (the first passages' sentences, then those sharing terms).
MAX_CANDIDATES = 24


@dataclass(frozen=True)
class AskOptions:
    filters: Filters = field(default_factory=Filters)
    passages: int = 8  # passages handed to the answerer
    per_doc: int = 2  # at most this many passages from one document
    max_sentences: int = 4
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


def _latin_share(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 1.0
    return sum(1 for ch in letters if ord(ch) < 0x250) / len(letters)


# -- retrieval ------------------------------------------------------------------------------------------


def retrieve(searcher: Searcher, question: str, options: AskOptions) -> list[Hit]:
    """Hybrid retrieval with diversity: no document fills more than ``per_doc`` of the slots."""
    pool = searcher.search(
        question, SearchOptions(k=options.passages * 5, filters=options.filters, mode=options.mode)
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
    return [
        Hit(rank=i + 1, score=h.score, doc_id=h.doc_id, url=h.url, title=h.title, page=h.page, section=h.section,
            text=h.text, chunk_id=h.chunk_id, kind=h.kind, venue=h.venue, year=h.year, is_card=h.is_card)
        for i, h in enumerate(chosen)
    ]


# -- extractive answering -------------------------------------------------------------------------------

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentences_of(text: str) -> list[str]:
    """Sentences of a passage (a light splitter: passages are already clean prose or PDF text)."""
    flat = " ".join(text.split())
    return [s.strip() for s in _SENT_END.split(flat) if s.strip()]


_CAPTION = re.compile(r"\b(?:Figure|Fig\.|Table|Algorithm)\s*\d+\s*[:.]")


def _usable(sentence: str) -> bool:
    if not 30 <= len(sentence) <= 500 or _CAPTION.search(sentence):  # PDF captions read badly out of place
        return False
    letters = sum(ch.isalpha() for ch in sentence)
    if letters < 0.55 * len(sentence):  # tables, code, reference lists
        return False
    return len(sentence.split()) >= 5


@dataclass(frozen=True)
class _Candidate:
    passage: int  # index into hits
    position: int  # sentence index within the passage
    text: str


def select_sentences(
    question_vec: np.ndarray,
    question_terms: set[str],
    hits: Sequence[Hit],
    encode: Callable[[list[str]], np.ndarray],
    *,
    max_sentences: int = 4,
    redundancy: float = 0.85,
) -> tuple[list[tuple[_Candidate, float]], float]:
    """Score candidate sentences; return the chosen ones (with scores) and the best raw similarity.

    score = cosine(sentence, question) + 0.25 · share of the question's terms it contains
            + 0.05 · passage prior (earlier retrieval rank is better).
    Sentences too similar (cosine > ``redundancy``) to an already chosen one are skipped.
    """
    cands = [
        _Candidate(i, j, s)
        for i, h in enumerate(hits)
        if not h.is_card
        for j, s in enumerate(sentences_of(h.text))
        if _usable(s)
    ]
    if not cands:
        return [], 0.0
    overlap_all = [len(question_terms & set(tokenize(c.text))) / max(1, len(question_terms)) for c in cands]
    if len(cands) > MAX_CANDIDATES:
        # Embedding every sentence of every passage costs ~5 ms a sentence on 2 cores: keep the
        # top passages' sentences and the others that share the most question terms.
        keep = sorted(range(len(cands)), key=lambda i: (cands[i].passage >= 2, -overlap_all[i], i))
        keep = sorted(keep[:MAX_CANDIDATES])
        cands = [cands[i] for i in keep]
        overlap_all = [overlap_all[i] for i in keep]
    vecs = encode([c.text for c in cands])
    sims = vecs @ question_vec
    overlap = np.array(overlap_all, dtype=np.float32)
    prior = np.array([1.0 / (1 + c.passage) for c in cands], dtype=np.float32)
    scores = sims + 0.25 * overlap + 0.05 * prior
    order = np.argsort(-scores)
    chosen: list[int] = []
    for idx in order:
        if len(chosen) == max_sentences:
            break
        if chosen and float(np.max(vecs[chosen] @ vecs[idx])) > redundancy:
            continue
        if chosen and scores[idx] < scores[chosen[0]] - 0.2:  # far weaker than the best: stop
            break
        chosen.append(int(idx))
    return [(cands[i], float(scores[i])) for i in chosen], float(np.max(sims))


_WORD = re.compile(r"\w[\w\-.]*\w|\w")
_ACRONYM = re.compile(r"[A-Z0-9]+s?")


def _name_like(part: str, sentence_start: bool) -> bool:
    """Does this word look like the name of a specific thing (a library, method, identifier)?

    All-caps acronyms are left out on purpose: users and documents spell them differently
    ("FP8" vs "8-bit floating point"), so their absence proves little.
    """
    if "_" in part:
        return True  # code identifiers: shard_map
    if _ACRONYM.fullmatch(part):
        return False
    if re.search(r"[a-z][A-Z]", part):
        return True  # CamelCase: GaLore, DiLoCo, PyTorchJob
    return part[:1].isupper() and not sentence_start


def missing_terms(searcher: Searcher, question: str) -> list[str]:
    """Names in the question that occur in no indexed text at all.

    If a user asks about "GaLore" and no document ever mentions it, the knowledge base has
    nothing on the question, however similar the rest of it sounds.
    """
    vocab = searcher.version.lexical.vocabulary()
    out: list[str] = []
    start = True
    for m in _WORD.finditer(question):
        word = m.group(0)
        for part in re.split(r"[.\-]", word):
            if part and _name_like(part, start):
                tokens = tokenize(part)
                if "_" in part:  # an identifier counts as mentioned only when written whole
                    tokens = [t for t in tokens if "_" in t]
                if not any(t in vocab for t in tokens):
                    out.append(part)
            start = False
        start = question[m.end() : m.end() + 2].strip()[:1] in {".", "?", "!"}
    return list(dict.fromkeys(out))


def extractive_answer(
    searcher: Searcher, question: str, hits: Sequence[Hit], options: AskOptions
) -> tuple[str, list[Citation], bool, list[str]]:
    """(answer text, citations, refused, flags)."""
    version = searcher.version
    encoder = searcher.encoder_for(version)
    qvec = searcher.embed_query(question, version)  # memory-cached by the search; never stored
    terms = set(tokenize(question))
    chosen, best = select_sentences(
        qvec, terms, hits, lambda xs: encoder.encode(xs, batch_size=16), max_sentences=options.max_sentences
    )
    absent = missing_terms(searcher, question)
    if not chosen or best < MIN_EVIDENCE or absent:
        why = f" (no document mentions {', '.join(absent)})" if absent else ""
        return REFUSAL.rstrip(".") + why + ".", [], True, []
    # Reading order: by passage rank, then by position within the passage.
    chosen.sort(key=lambda cs: (cs[0].passage, cs[0].position))
    numbers: dict[int, int] = {}
    citations: list[Citation] = []
    parts: list[str] = []
    for cand, _score in chosen:
        if cand.passage not in numbers:
            numbers[cand.passage] = len(numbers) + 1
            h = hits[cand.passage]
            citations.append(Citation(
                n=numbers[cand.passage], url=h.url, title=h.title, page=h.page, quote=cand.text[:300],
                doc_id=h.doc_id, chunk_id=h.chunk_id, venue=h.venue, year=h.year,
            ))
        parts.append(f"{cand.text} [{numbers[cand.passage]}]")
    return " ".join(parts), citations, False, []


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

    @property
    def result(self) -> Answer:
        for _ in self.deltas:  # drain whatever the caller did not read
            pass
        return self._result()


class Asker:
    """Answers questions over a home's index; loads model, index and LLM client once."""

    def __init__(self, searcher: Searcher, llm: object | None = None) -> None:
        self.searcher = searcher
        self.llm = llm  # dmlqa.llm.LLMBackend or None

    @classmethod
    def from_settings(cls, settings) -> Asker:  # noqa: ANN001
        from dmlqa.llm import LLMBackend, LLMConfig

        config = LLMConfig.from_settings(settings)
        return cls(Searcher(settings), LLMBackend(config) if config else None)

    def ask(self, question: str, options: AskOptions | None = None) -> Answer:
        return self.stream(question, options).result

    def stream(self, question: str, options: AskOptions | None = None) -> AskStream:
        options = options or AskOptions()
        t0 = time.perf_counter()
        text, notice = clean_question(question)
        if not text:
            answer = Answer(question=question, answer="Please ask a question.", citations=(), backend="extractive",
                            refused=True, notice="empty question")
            return AskStream(iter(()), lambda: answer)
        hits = retrieve(self.searcher, text, options)
        undated = undated_excluded(self.searcher.version, options.filters)
        notices = [notice] if notice else []
        if _latin_share(text) < 0.5:
            notices.append("the knowledge base is in English; questions in other languages match poorly")

        def extractive(extra_notice: str | None = None) -> Answer:
            body, cites, refused, flags = extractive_answer(self.searcher, text, hits, options)
            if refused:
                cites = nearest_sources(hits)
                if cites:
                    body += " Nearest sources: " + "; ".join(f"[{c.n}] {c.title}" for c in cites) + "."
            all_notices = notices + ([extra_notice] if extra_notice else [])
            return Answer(question=text, answer=body, citations=tuple(cites), backend="extractive", refused=refused,
                          retrieved=tuple(hits), seconds=time.perf_counter() - t0,
                          notice="; ".join(all_notices) or None, flags=tuple(flags), undated_excluded=undated)

        if self.llm is None or not options.use_llm or not hits:
            answer = extractive()
            return AskStream(iter([answer.answer]), lambda: answer)
        return self._llm_stream(text, hits, notices, extractive, t0, undated)

    def _llm_stream(self, text, hits, notices, extractive, t0, undated: int = 0) -> AskStream:  # noqa: ANN001
        from dmlqa.citations import check_citations
        from dmlqa.llm import LLMError

        box: dict[str, Answer] = {}
        llm = self.llm

        def gen() -> Iterator[str]:
            pieces: list[str] = []
            try:
                for delta in llm.stream(text, hits):
                    pieces.append(delta)
                    yield delta
            except LLMError as exc:
                fallback = extractive(f"LLM unavailable ({exc.reason}); showing the extractive answer")
                box["answer"] = fallback
                yield "\n\n[" + (fallback.notice or "") + "]\n" + fallback.answer
                return
            checked = check_citations("".join(pieces), hits)
            box["answer"] = Answer(
                question=text, answer=checked.text, citations=checked.citations, backend=llm.name,
                refused=checked.refused, retrieved=tuple(hits), seconds=time.perf_counter() - t0,
                notice="; ".join(notices) or None, flags=checked.flags, undated_excluded=undated,
            )

        it = gen()
        return AskStream(it, lambda: box["answer"])
