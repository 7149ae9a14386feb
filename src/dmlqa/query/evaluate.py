"""Retrieval quality measures: recall@k and MRR of gold documents, nDCG@k for graded qrels.

Pure functions over ranked lists, so the same code scores the CLI's batch output, a benchmark
and a unit test. Documents are compared by URL after normalisation (scheme, ``www.``, trailing
slash and arXiv abs/pdf/version forms do not matter).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from dmlqa.errors import InputFileError
from dmlqa.query.answer import LLM_UNAVAILABLE
from dmlqa.query.citations import without_code
from dmlqa.textsafe import replace_lone_surrogates

_Item = TypeVar("_Item")  # a Hit or a Citation (frozen dataclasses with doc_id and url)
_ARXIV = re.compile(r"arxiv\.org/(?:abs|pdf)/(\d{4}\.\d{4,5})(?:v\d+)?(?:\.pdf)?$")


def normalize_url(url: str) -> str:
    """A URL reduced to what identifies a document for matching."""
    u = re.sub(r"^https?://", "", url.strip().lower())
    u = re.sub(r"^www\.", "", u).rstrip("/")
    m = _ARXIV.match(u)
    return f"arxiv.org/abs/{m.group(1)}" if m else u


def first_relevant_rank(ranked_urls: Sequence[str], gold_urls: Iterable[str]) -> int | None:
    """1-based rank of the first retrieved document that matches a gold URL (documents deduplicated)."""
    gold = {normalize_url(g) for g in gold_urls}
    seen: set[str] = set()
    rank = 0
    for url in ranked_urls:
        n = normalize_url(url)
        if n in seen:
            continue
        seen.add(n)
        rank += 1
        if n in gold:
            return rank
    return None


def by_identity(items: Sequence[_Item], docs: Mapping[str, Any]) -> list[_Item]:
    """``items`` (hits or citations) under their documents' canonical URLs, to match gold URLs only.

    A question set names a work as lists and papers cite it (an arXiv abstract, a repository page);
    what users are shown is where the text came from (the PDF, the raw README), which a gold URL
    rarely spells. ``docs`` maps doc ids to index records (``IndexVersion.docs``); an item of a
    document it lacks keeps its URL.
    """
    return [replace(x, url=docs[x.doc_id].url) if x.doc_id in docs else x for x in items]


def gold_identities(docs: Mapping[str, Any]) -> Callable[[Iterable[str]], tuple[str, ...]]:
    """A map of gold URLs onto the canonical URLs of the documents they name (what :func:`by_identity` puts
    on hits and citations), for the documents of ``docs`` (``IndexVersion.docs``).

    A gold URL may spell a document by its identity, by an address a list gave for it (its aliases), or by
    the address its text was fetched from and users are shown: an ACM paper's ``/doi/pdf/`` link names the
    work whose identity is ``/doi/``. A URL no document answers to stays as it is.
    """
    names: dict[str, str] = {}
    for d in docs.values():
        for name in (d.source_url, *d.aliases, d.url):  # the identity last: it wins a name two records share
            if name:  # a record read from a file has no fetched address: "" names nothing
                names[normalize_url(name)] = d.url
    return lambda urls: tuple(names.get(normalize_url(u), u) for u in urls)


@dataclass(frozen=True)
class RetrievalScores:
    n: int
    recall: dict[int, float]
    mrr: float

    def to_json(self) -> dict:
        return {"questions": self.n, **{f"recall@{k}": round(v, 4) for k, v in self.recall.items()},
                "mrr": round(self.mrr, 4)}


def retrieval_scores(ranks: Sequence[int | None], ks: Sequence[int] = (1, 5, 10)) -> RetrievalScores:
    n = len(ranks)
    if n == 0:
        return RetrievalScores(0, {k: 0.0 for k in ks}, 0.0)
    recall = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in ks}
    mrr = sum(1.0 / r for r in ranks if r is not None) / n
    return RetrievalScores(n, recall, mrr)


def ndcg_at_k(ranked_ids: Sequence[str], relevance: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with graded relevance (BEIR's definition: gain = rel, discount = log2(rank + 1))."""
    dcg = sum(relevance.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked_ids[:k]))
    ideal = sorted(relevance.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# -- question sets (dmlqa eval) -------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    gold_urls: tuple[str, ...]
    answerable: bool
    keywords: tuple[str, ...]
    #: the id of the question this one follows in a conversation ("And what about stage 3?"): it is asked after
    #: that question's answer, as the chat asks it, not alone
    previous: str | None = None


def read_questions(lines: Iterable[str], source: str = "questions") -> list[EvalQuestion]:
    """Parse a question set; a malformed line raises :class:`InputFileError` naming the file and line."""
    import json

    from dmlqa.query.limits import length_problem

    out: list[EvalQuestion] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise InputFileError(f"{source}:{n}: not JSON ({exc})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str):
            raise InputFileError(f'{source}:{n}: a question needs "id" and "question"')
        if not rec["question"].strip():
            raise InputFileError(f"{source}:{n}: the question is empty")
        if (too_long := length_problem(rec["question"], "question")) is not None:
            raise InputFileError(f"{source}:{n}: {too_long}")
        previous = rec.get("previous")
        previous = replace_lone_surrogates(previous) if isinstance(previous, str) else previous  # as the ids are
        if previous is not None and (not isinstance(previous, str) or previous not in seen):
            # a conversation is asked in file order: what a follow-up leans on must have been asked before it
            raise InputFileError(f'{source}:{n}: "previous" is {json.dumps(previous)}, the id of no question '
                                 "on a line before this one")
        qid = replace_lone_surrogates(str(rec.get("id", n)))
        seen.add(qid)
        out.append(EvalQuestion(
            id=qid, question=replace_lone_surrogates(rec["question"]), gold_urls=tuple(rec.get("gold_urls") or ()),
            answerable=bool(rec.get("answerable", True)), keywords=tuple(rec.get("keywords") or ()),
            previous=previous,
        ))
    return out


def _nfkc(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFKC", text).lower()


_CITE = re.compile(r"\[(\d{1,3})\]")


def dangling_markers(answer: object) -> list[int]:
    """The ``[n]`` markers of an answer's text that name none of its citations (a reader would follow them).

    Code the answer quotes is left out: ``datasets[0]`` there indexes a list and points at no source.
    """
    have = {c.n for c in answer.citations}
    return sorted({int(n) for n in _CITE.findall(without_code(answer.answer))} - have)


def answer_words(text: str) -> int:
    """Words of an answer, its ``[n]`` markers not counted."""
    return len(re.sub(r"\s*\[\d{1,3}\]", "", text).split())


def score_answers(questions: Sequence[EvalQuestion], answers: Sequence[object], backend: str | None = None) -> dict:
    """Scores of ``answers`` (dmlqa.models.Answer, one per question) against the question set.

    Besides retrieval, citation, keyword, refusal and latency scores: the median length of the answers
    given (refusals left out), how many answers carry a ``[n]`` that is none of their citations, how many
    sentences the citation check flagged unsupported and how many invented markers it removed, and, when
    ``backend`` names the backend asked for (e.g. ``llm:qwen3``), how many answers fell back to another
    because it failed.
    """
    ranks, cited, kw, kw_all, latencies, false_ref = [], [], [], [], [], 0
    refusals = []
    words: list[float] = []
    dangling = unsupported = removed = fallbacks = 0
    for q, a in zip(questions, answers, strict=True):
        latencies.append(a.seconds * 1000)
        dangling += bool(dangling_markers(a))
        unsupported += sum(1 for f in a.flags if f.startswith("unsupported:"))
        removed += sum(1 for f in a.flags if f.startswith("removed citation"))
        # fell back: the LLM failed and the extractive answer stood in (a refusal made before either answerer,
        # by name or as off-topic, is the backend's answer too: no LLM should have been asked)
        fallbacks += backend is not None and a.backend != backend and LLM_UNAVAILABLE in (a.notice or "")
        if not a.refused:
            words.append(answer_words(a.answer))
        if not q.answerable:
            refusals.append(a.refused)
            continue
        ranks.append(first_relevant_rank([h.url for h in a.retrieved], q.gold_urls))
        gold = {normalize_url(g) for g in q.gold_urls}
        cited.append(any(normalize_url(c.url) in gold for c in a.citations) and not a.refused)
        false_ref += int(a.refused)
        if q.keywords:
            text = _nfkc(a.answer)
            hits = [k for k in q.keywords if _nfkc(k) in text]
            kw.append(len(hits) / len(q.keywords))
            kw_all.append(len(hits) == len(q.keywords))
    n_ans = len(ranks)
    scores = retrieval_scores(ranks).to_json()
    return {
        **scores,
        # Retrieval is scored on the answerable questions only, but "questions" is the whole set, as the
        # user counts the file's lines; the two kinds are counted apart.
        "questions": len(questions),
        "answerable": n_ans,
        "unanswerable": len(refusals),
        "citation_hit_rate": round(sum(cited) / n_ans, 4) if n_ans else 0.0,
        "keyword_hit_rate": round(sum(kw) / len(kw), 4) if kw else 0.0,
        "all_keywords_rate": round(sum(kw_all) / len(kw_all), 4) if kw_all else 0.0,
        "refusal_accuracy": round(sum(refusals) / len(refusals), 4) if refusals else None,
        "false_refusal_rate": round(false_ref / n_ans, 4) if n_ans else 0.0,
        "latency_ms_p50": round(percentile(latencies, 50), 1),
        "latency_ms_p95": round(percentile(latencies, 95), 1),
        "median_words": round(percentile(words, 50), 1),
        "answers_with_dangling_markers": dangling,
        "unsupported_sentences": unsupported,
        "removed_citations": removed,
        **({"fallbacks": fallbacks} if backend is not None else {}),
    }
