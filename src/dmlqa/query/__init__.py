"""Query stage: hybrid search, reranking, cited answers (extractive or LLM), related papers,
BibTeX and evaluation, all over a published index version.

It stands on ``index/`` (and the base modules) and never on ``pipeline/``: a reader of an index
version needs nothing of how it was built. Modules, in the order a question flows through them:

* :mod:`~dmlqa.query.search`: :class:`Filters`, :class:`SearchOptions`, :class:`Searcher` (dense +
  BM25 fused by RRF, following the published version); :mod:`~dmlqa.query.rerank`: the optional
  cross-encoder.
* :mod:`~dmlqa.query.answer`: :class:`Asker` (``Asker.from_settings`` is the one constructor) and
  :class:`AskOptions`; the extractive answerer is :mod:`~dmlqa.query.extractive` (candidates)
  and :mod:`~dmlqa.query.quotes` (what it quotes, how it reads); the LLM answerer
  is :mod:`~dmlqa.query.llm` (client and streaming), :mod:`~dmlqa.query.prompt` (fenced prompt) and
  :mod:`~dmlqa.query.reasoning` (drops a model's thinking); :mod:`~dmlqa.query.citations` checks
  what any answer cites.
* :mod:`~dmlqa.query.related`: :func:`related` documents, scored by :mod:`~dmlqa.query.relatedness`
  over the per-version :mod:`~dmlqa.query.docvectors`; :mod:`~dmlqa.query.bibtex` cites them.
* :mod:`~dmlqa.query.evaluate`: recall, MRR, nDCG and answer scores for ``dmlqa eval`` and benchmarks.
* :mod:`~dmlqa.query.prewarm`: embeds the quotable sentences of a version built without their vectors.
* :mod:`~dmlqa.query.show`: the archived text (and PDF page image) behind a citation, the quote located.

Every read serving one request goes through one :class:`~dmlqa.index.versions.IndexVersion`, pinned
once (:meth:`Searcher.pin`) and passed down: a publish mid-question never mixes two versions.

Modules inside the stage import each other by full path, never through this package.
"""

from dmlqa.query.answer import REFUSAL, Asker, AskOptions, AskStream, is_follow_up, sentences_of
from dmlqa.query.bibtex import citation_keys, to_bibtex
from dmlqa.query.citations import REFUSAL_PREFIX, CheckedText, check_citations
from dmlqa.query.evaluate import (
    EvalQuestion,
    RetrievalScores,
    first_relevant_rank,
    ndcg_at_k,
    normalize_url,
    percentile,
    read_questions,
    retrieval_scores,
    score_answers,
)
from dmlqa.query.graph import CitationsResult, Graph, Suggestion, Suggestions, citation_graph, cited_by, cites, suggest
from dmlqa.query.llm import LLMBackend, LLMConfig, LLMError
from dmlqa.query.related import Related, RelatedResult, related, resolve_target
from dmlqa.query.rerank import Reranker
from dmlqa.query.search import MODES, Filters, Searcher, SearchOptions, allowed_docs, undated_excluded

__all__ = [
    "CitationsResult", "Graph", "Suggestion", "Suggestions", "citation_graph", "cited_by", "cites", "suggest",
    "MODES",
    "REFUSAL",
    "REFUSAL_PREFIX",
    "AskOptions",
    "AskStream",
    "Asker",
    "CheckedText",
    "EvalQuestion",
    "Filters",
    "LLMBackend",
    "LLMConfig",
    "LLMError",
    "Related",
    "RelatedResult",
    "Reranker",
    "RetrievalScores",
    "SearchOptions",
    "Searcher",
    "allowed_docs",
    "check_citations",
    "citation_keys",
    "first_relevant_rank",
    "is_follow_up",
    "ndcg_at_k",
    "normalize_url",
    "percentile",
    "read_questions",
    "related",
    "resolve_target",
    "retrieval_scores",
    "score_answers",
    "sentences_of",
    "to_bibtex",
    "undated_excluded",
]
