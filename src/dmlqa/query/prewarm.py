"""Pre-embedding the sentences an extractive answer may quote, for versions built without their vectors.

A version built before sentence vectors were stored makes the extractive answerer embed the
sentences of every retrieved passage per question (~0.1–0.5 s on 2 cores). Embedding them all once
into the encoder's cache brings an answer down to ~10–20 ms, which is what lets one process serve
many people. A long-running front end calls :func:`prewarm` when it starts and again when a new
version is published (through :meth:`dmlqa.api.KnowledgeBase.prewarm`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from dmlqa.extract.sentences import MAX_CHARS, MIN_CHARS
from dmlqa.index.versions import IndexVersion
from dmlqa.query.answer import candidate_cosines, sentences_of
from dmlqa.query.search import Searcher
from dmlqa.query.selector import default_selector
from dmlqa.query.topic import background

log = logging.getLogger(__name__)

#: Sentences embedded per step (the encoder's lock is released in between, so questions wait at most one step).
STEP = 32


@dataclass(frozen=True)
class Prewarm:
    """What :func:`prewarm` did for one index version."""

    version: str
    sentences: int  # candidate sentences embedded (0 when skipped)
    skipped: str | None = None  # why nothing was embedded, when nothing was
    seconds: float = 0.0


def quotable_sentences(text: str) -> list[str]:
    """The sentences of a passage the extractive answerer may quote (its splitter, its length bounds)."""
    return [s for s in sentences_of(text) if MIN_CHARS <= len(s) <= MAX_CHARS]


def candidate_sentences(version: IndexVersion, block: int = 2000) -> list[str]:
    """The distinct sentences the extractive answerer may quote from ``version``'s full-text documents."""
    out: dict[str, None] = {}
    for start in range(0, version.size, block):
        records = version.chunks(range(start, min(version.size, start + block)))
        for row in sorted(records):
            r = records[row]
            d = version.docs.get(r.doc_id)
            if d is None or d.is_card:
                continue
            for s in quotable_sentences(r.text):
                out.setdefault(s, None)
    return list(out)


def prewarm(searcher: Searcher, version: IndexVersion, *, step: int = STEP,
            on_progress: Callable[[int, int], None] | None = None) -> Prewarm:
    """Embed every candidate sentence of ``version`` into ``searcher``'s vector cache, after working out
    the version's off-topic background (:func:`dmlqa.query.topic.background`, for every version).

    The sentences are skipped for a version built with its sentence vectors (answering then embeds only the
    question), for an encoder without a cache, and when the sentences would not fit the cache (a
    very large index; answers then fill it as they go). ``on_progress(done, total)`` hears of each
    step, from ``(0, total)`` on, so a front end can report the warm-up while it runs.
    """
    # the off-topic check's background (16 everyday questions embedded and searched): a version's first
    # question would otherwise wait for it
    background(version, functools.partial(candidate_cosines, searcher, version))
    tuning = default_selector().tuned_for(version.meta["model"])
    if tuning is not None:  # the tuned question encoder, loaded (and written, if no build has) before a question
        searcher.embed_tuned("warm-up", version, tuning)
    if version.has_sentences:
        return Prewarm(version.name, 0, "sentence vectors in the index")
    enc = searcher.encoder_for(version)
    if getattr(enc, "max_items", None) is None:
        return Prewarm(version.name, 0, "no vector cache")
    texts = sorted(candidate_sentences(version), key=len)  # similar lengths share a batch: less padding
    if len(texts) > 0.8 * enc.max_items:
        log.info("%d sentences would not fit the vector cache; not pre-embedding them", len(texts))
        return Prewarm(version.name, 0, f"{len(texts)} sentences")
    t0 = time.perf_counter()
    if on_progress is not None:
        on_progress(0, len(texts))
    for start in range(0, len(texts), step):
        enc.encode(texts[start : start + step])
        if on_progress is not None:
            on_progress(min(len(texts), start + step), len(texts))
        time.sleep(0.002)  # let a waiting question take the encoder's lock
    seconds = time.perf_counter() - t0
    log.info("pre-embedded %d sentences of %s in %.1f s", len(texts), version.name, seconds)
    return Prewarm(version.name, len(texts), None, round(seconds, 1))
