"""Hybrid retrieval over the published index: dense (FAISS) + BM25, fused.

Fusion is reciprocal rank fusion by default: it needs no score calibration between a cosine and
a BM25 score, and measured on the dev questions and BEIR SciFact it beats both retrievers alone
(numbers in bench/README.md). :class:`Searcher` follows the published version: when ``CURRENT``
changes, the next :meth:`Searcher.pin` opens the new version, while requests in flight finish on
the one they pinned. A request pins once and passes that version down to every read it makes, so
a publish in the middle of a question never mixes two versions in one answer.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dmlqa.catalog.urls import site
from dmlqa.errors import EncoderError, EncoderMismatchError
from dmlqa.index.embed import CachedEncoder, EmbeddingCache, Encoder, load_encoder
from dmlqa.index.versions import DocRecord, IndexVersion, current_version, open_current
from dmlqa.models import Hit
from dmlqa.query.tuning import QuestionTuning, TuningError, question_encoder
from dmlqa.settings import Settings

log = logging.getLogger(__name__)

#: Measured (bench/README.md): k=20 vs the customary 60 gives SciFact nDCG@10 0.7207 vs 0.7189 and
#: dev MRR 0.817 vs 0.802; weighted RRF and min-max convex combinations (alpha 0.4-0.7) were no
#: better than 0.721 / 0.828 on either set, so plain RRF stays (no scores to calibrate).
RRF_K = 20


@dataclass(frozen=True)
class Filters:
    """Restrict retrieval to some documents (all conditions must hold)."""

    kinds: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None
    topics: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    #: With ``since``/``until``: keep documents whose year is unknown (by default they are left out,
    #: and :func:`undated_excluded` says how many).
    include_undated: bool = False

    @classmethod
    def from_options(
        cls, *, kinds: Iterable[str] | None = None, since: int | None = None, until: int | None = None,
        topics: Iterable[str] | None = None, hosts: Iterable[str] | None = None, include_undated: bool = False,
    ) -> Filters:
        """Filters from a front end's options as they arrive (lists or None for "not given").

        The one place the CLI, the chat app and the library API turn their keyword options into
        filters, so that a new condition is added once.
        """
        return cls(kinds=tuple(kinds or ()), since=since, until=until, topics=tuple(topics or ()),
                   hosts=tuple(hosts or ()), include_undated=bool(include_undated))

    def active(self) -> bool:
        return bool(self.kinds or self.since or self.until or self.topics or self.hosts)

    def by_year(self) -> bool:
        """True when a year range is set."""
        return bool(self.since or self.until)


#: Retrieval modes: both retrievers fused, or one alone (for comparisons and debugging).
MODES = ("hybrid", "dense", "bm25")


@dataclass(frozen=True)
class SearchOptions:
    k: int = 10
    per_doc: bool = False
    mode: str = "hybrid"  # one of MODES
    filters: Filters = field(default_factory=Filters)
    candidates: int = 100  # per retriever, before fusion
    rerank: bool = True  # apply the configured cross-encoder, if any


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None) -> dict[int, float]:
    """Reciprocal rank fusion: score(row) = Σ w / (k + rank), rank from 1."""
    weights = weights or [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for w, ranking in zip(weights, rankings, strict=True):
        for rank, row in enumerate(ranking, start=1):
            fused[row] = fused.get(row, 0.0) + w / (k + rank)
    return fused


def _host(url: str) -> str:
    return site(url)


def allowed_docs(version: IndexVersion, filters: Filters) -> set[str] | None:
    """The doc ids that pass ``filters`` (None when nothing is filtered)."""
    mask = _doc_mask(version, filters)
    return None if mask is None else {d for d, ok in zip(version.doc_ids, mask.tolist(), strict=True) if ok}


def allowed_rows(version: IndexVersion, filters: Filters) -> np.ndarray | None:
    """A bool per row of ``version``: live and passing ``filters`` (None when nothing is filtered).

    Kind and year are tested on the version's per-document arrays and spread to rows by one gather, so a
    filtered query costs no Python work per row (42 ms at 1M rows with the per-row mask it replaces).
    """
    mask = _doc_mask(version, filters)
    return None if mask is None else version.row_mask(mask)


def _doc_mask(version: IndexVersion, filters: Filters) -> np.ndarray | None:
    if not filters.active():
        return None
    mask = version.doc_mask(kinds=filters.kinds, since=filters.since, until=filters.until,
                            undated=filters.include_undated)
    if filters.topics or filters.hosts:  # rarer conditions, tested per document (never per row)
        match = _matcher(Filters(topics=filters.topics, hosts=filters.hosts))
        rest = np.fromiter((match(version.docs[d], undated=True) for d in version.doc_ids), dtype=bool,
                           count=len(version.doc_ids))
        mask &= rest
    return mask


def _row_mask(version: IndexVersion, allowed: set[str] | np.ndarray | None) -> np.ndarray | None:
    if allowed is None or isinstance(allowed, np.ndarray):
        return allowed
    return version.row_mask(version.doc_mask(allowed))


def undated_excluded(version: IndexVersion, filters: Filters) -> int:
    """How many documents ``filters`` leave out only because their year is unknown.

    0 unless a ``since``/``until`` range is set without ``include_undated``; documents that another
    condition (kind, topic, host) excludes anyway are not counted. Front ends show it so that a
    year filter never drops documents silently.
    """
    if not filters.by_year() or filters.include_undated:
        return 0
    match = _matcher(filters)
    return sum(1 for d in version.docs.values() if d.year is None and match(d, undated=True))


def _matcher(filters: Filters) -> Callable[..., bool]:
    """``match(doc, undated=...)``: whether a document passes ``filters``; ``undated`` says whether
    a document of unknown year passes the year range (the one copy of the filtering rule)."""
    kinds = {k.lower() for k in filters.kinds}
    topics = {t.lower() for t in filters.topics}
    hosts = {h.lower().removeprefix("www.") for h in filters.hosts}

    def match(d: DocRecord, *, undated: bool) -> bool:
        if kinds and d.kind.lower() not in kinds:
            return False
        if filters.by_year():
            if d.year is None:
                if not undated:
                    return False
            elif (filters.since and d.year < filters.since) or (filters.until and d.year > filters.until):
                return False
        if topics and not topics & {t.lower() for t in d.topics}:
            return False
        return not hosts or any(_host(d.url) == h or _host(d.url).endswith("." + h) for h in hosts)

    return match


class Searcher:
    """Loads the encoder and the current index version once; answers many queries."""

    def __init__(self, settings: Settings, *, vector_store: bool = True) -> None:
        self.settings = settings
        self._use_store = vector_store
        self._lock = threading.Lock()
        self._version: IndexVersion | None = None
        self._encoders: dict[str, CachedEncoder] = {}
        self._tuned: dict[str, CachedEncoder | None] = {}  # tuned question encoders (None: could not be had)
        self._store: EmbeddingCache | None = None
        self._reranker = None  # dmlqa.query.rerank.Reranker, loaded on first use

    # -- version following ------------------------------------------------------------------
    def pin(self) -> IndexVersion:
        """The published version, for one request to read throughout (reopened when ``CURRENT`` has moved).

        A method, not a property, because each call may return a different version: call it once
        when a request starts and pass the result to every read that serves the request.
        """
        name = current_version(self.settings.index_dir)
        with self._lock:
            if self._version is None or (name is not None and name != self._version.name):
                self._version = open_current(self.settings.index_dir)
            return self._version

    def encoder_for(self, version: IndexVersion) -> CachedEncoder:
        """The encoder that built ``version`` (queries must use the same one), remembering vectors.

        Vectors of passages' sentences are kept in the home's embedding cache, so an app's
        warm-up and a CLI's answers survive restarts; a store that cannot be opened only costs speed.
        """
        meta = version.meta
        key = meta["encoder_key"]
        with self._lock:
            if key not in self._encoders:
                enc: Encoder = load_encoder(meta["model"], meta["encoder"], self.settings.encoders_dir)
                if enc.key != key:
                    raise EncoderMismatchError(
                        f"the index was built with encoder {key} but {enc.key} is installed now; "
                        "rebuild the index (`dmlqa build`)", expected=key, found=enc.key,
                    )
                if self._store is None and self._use_store:
                    try:
                        self._store = EmbeddingCache(self.settings.paths.embeddings_cache)
                    except (OSError, sqlite3.Error):
                        self._store = None
                self._encoders[key] = CachedEncoder(enc, store=self._store)
            return self._encoders[key]

    def embed_query(self, query: str, version: IndexVersion) -> np.ndarray:
        return self.encoder_for(version).encode([query], persist=False)[0]

    def embed_tuned(self, query: str, version: IndexVersion, tuning: QuestionTuning) -> np.ndarray | None:
        """``query``'s vector by the selector's tuned question encoder (:mod:`dmlqa.query.tuning`), of the kind
        that built ``version``; None when it cannot be had (the answer then measures the plain cosines twice).

        Written and exported once under the encoder cache; a failure is logged once and not tried again."""
        key = f"tuned-{tuning.digest}/{version.meta['encoder']}"
        with self._lock:
            if key not in self._tuned:
                try:
                    enc = question_encoder(tuning, version.meta["encoder"], self.settings.encoders_dir)
                except (TuningError, EncoderError, OSError) as exc:
                    log.warning("the tuned question encoder is unavailable; answers do without it (%s)", exc)
                    enc = None
                self._tuned[key] = None if enc is None else CachedEncoder(enc)
            tuned = self._tuned[key]
        return None if tuned is None else tuned.encode([query], persist=False)[0]

    # -- retrieval ---------------------------------------------------------------------------
    def dense_ranking(
        self, version: IndexVersion, qvec: np.ndarray, n: int, allowed: set[str] | np.ndarray | None
    ) -> list[tuple[int, float]]:
        """The ``n`` rows nearest ``qvec``; ``allowed``: doc ids, or a bool per row (:func:`allowed_rows`)."""
        if version.size == 0:
            return []
        return version.dense_search(qvec, n, _row_mask(version, allowed))

    def lexical_ranking(
        self, version: IndexVersion, query: str, n: int, allowed: set[str] | np.ndarray | None
    ) -> list[tuple[int, float]]:
        scores = version.lexical.scores(query)
        mask = _row_mask(version, allowed)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        return version.top_lexical(scores, n)

    def _rerank(
        self, version: IndexVersion, query: str, ordered: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """The first ``rerank_candidates`` results reordered by the cross-encoder; the rest follow."""
        from dmlqa.query.rerank import Reranker

        with self._lock:
            if self._reranker is None:
                self._reranker = Reranker(self.settings.answer.reranker)
        head = ordered[: self.settings.answer.rerank_candidates]
        records = version.chunks([r for r, _ in head])
        scores = self._reranker.scores(query, [records[r].text for r, _ in head])
        reranked = sorted(zip([r for r, _ in head], scores.tolist(), strict=True), key=lambda kv: -kv[1])
        return reranked + ordered[len(head) :]

    def search(self, query: str, options: SearchOptions | None = None, *,
               version: IndexVersion | None = None) -> list[Hit]:
        """The best passages for ``query`` in ``version`` (the request's pinned one; None: pin one now)."""
        options = options or SearchOptions()
        query = " ".join(query.split())
        if not query:
            return []
        version = version if version is not None else self.pin()
        allowed = allowed_rows(version, options.filters)
        n = max(options.candidates, options.k * 5)
        rankings: list[list[int]] = []
        raw: dict[int, float] = {}
        if options.mode in ("hybrid", "dense"):
            dense = self.dense_ranking(version, self.embed_query(query, version), n, allowed)
            rankings.append([r for r, _ in dense])
            raw.update(dense)
        if options.mode in ("hybrid", "bm25"):
            lex = self.lexical_ranking(version, query, n, allowed)
            rankings.append([r for r, _ in lex])
            if options.mode == "bm25":
                raw.update(lex)
        if options.mode == "hybrid":
            fused = rrf(rankings)
        else:
            fused = raw
        ordered = sorted(fused.items(), key=lambda kv: -kv[1])
        if self.settings.answer.reranker and options.rerank and ordered:
            ordered = self._rerank(version, query, ordered)
        if options.per_doc:
            seen: set[str] = set()
            best: list[tuple[int, float]] = []
            for row, score in ordered:
                doc = version.doc_of(row)
                if doc not in seen:
                    seen.add(doc)
                    best.append((row, score))
            ordered = best
        ordered = ordered[: options.k]
        records = version.chunks([r for r, _ in ordered])
        hits: list[Hit] = []
        for rank, (row, score) in enumerate(ordered, start=1):
            c = records[row]
            d = version.docs[c.doc_id]
            hits.append(
                Hit(
                    rank=rank, score=score, doc_id=c.doc_id, url=d.link, title=d.title, page=c.page,
                    section=c.section, text=c.text, chunk_id=c.chunk_id, kind=d.kind, venue=d.venue,
                    year=d.year, is_card=d.is_card, start=c.start, end=c.end,
                )
            )
        return hits

