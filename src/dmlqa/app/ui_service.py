"""The service behind the chat app: one knowledge base per process, shared by Gradio's worker threads.

:class:`ChatService` stands on :class:`~dmlqa.api.KnowledgeBase` alone: it asks, streams, finds
related papers and reads the status through it, and turns what comes back into the page's HTML
(:mod:`dmlqa.app.ui_render`). Beyond answering, it keeps the app quick on small machines: example
questions are computed once per index version, in the background, and the sentences the extractive
answerer may quote are embedded ahead of the first question (:meth:`ChatService.prewarm`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dmlqa.api import KnowledgeBase
from dmlqa.app.ui_examples import Facets, answers_example, example_candidates, facets
from dmlqa.app.ui_render import (
    answer_html,
    friendly_error,
    message_html,
    related_html,
    related_rows,
    status_html,
    streaming_html,
    undated_note,
)
from dmlqa.errors import DmlqaError, IndexMissingError

if TYPE_CHECKING:
    from dmlqa.api import Answer, Settings

log = logging.getLogger(__name__)

#: How many example questions the empty chat offers, and how many candidates are tried for them.
N_EXAMPLES = 4
MAX_EXAMPLE_TRIES = 6
#: Sentences embedded per step of the background pre-warm (the encoder's lock is released in between,
#: so questions wait at most one step).
PREWARM_STEP = 32
#: How often the background thread looks for a newly published index version (seconds).
WATCH_EVERY = 30.0


def candidate_sentences(version: Any, block: int = 2000) -> list[str]:
    """The distinct sentences the extractive answerer may quote from ``version`` (an ``IndexVersion``:
    its full-text documents), by the answerer's own rule (:meth:`KnowledgeBase.quotable_sentences`)."""
    out: dict[str, None] = {}
    for start in range(0, version.size, block):
        records = version.chunks(range(start, min(version.size, start + block)))
        for row in sorted(records):
            r = records[row]
            d = version.docs.get(r.doc_id)
            if d is None or d.is_card:
                continue
            for s in KnowledgeBase.quotable_sentences(r.text):
                out.setdefault(s, None)
    return list(out)


def _options(filters: Any) -> dict[str, Any]:
    # The API takes a ``Filters``' fields as keyword options, under the same names: a field the API
    # does not take fails loudly here instead of being dropped.
    return dataclasses.asdict(filters)


class ChatService:
    """What the app does, independent of Gradio: one knowledge base (one Asker) per process, shared by all sessions.

    Made from a :class:`~dmlqa.api.KnowledgeBase`, or from settings (and optionally the ``Asker`` to
    use, as tests do with a stand-in LLM). The Asker's Searcher follows the published index version,
    so a new build is picked up on the next request while requests in flight finish on the version
    they started with.
    """

    def __init__(self, source: KnowledgeBase | Settings, asker: Any = None) -> None:
        if isinstance(source, KnowledgeBase):
            if asker is not None:
                raise ValueError("pass the asker with settings, not with a KnowledgeBase (it has its own)")
            self.kb = source
        else:
            self.kb = KnowledgeBase.from_settings(source, asker=asker)
        self.settings = self.kb.settings
        self._lock = threading.Lock()
        self._examples: dict[str, list[str]] = {}
        self._examples_lock = threading.Lock()
        self._examples_thread: threading.Thread | None = None
        #: How long the last computation of example questions took (seconds), for the log and tests.
        self.examples_seconds: float | None = None
        self._warm: dict[str, Any] = {}

    @property
    def asker(self):  # noqa: ANN201 - dmlqa.query.answer.Asker
        """The knowledge base's Asker, made once even when the first requests arrive together.

        Every request takes it here first, so the API's own ``ask``/``related`` then find it made.
        """
        with self._lock:
            return self.kb.asker

    def docs(self) -> Mapping[str, Any] | None:
        """The published version's documents, or None when there is no index (yet)."""
        try:
            return self.asker.searcher.version.docs
        except IndexMissingError:
            return None

    def facets(self) -> Facets:
        """What the filters offer now (none before the first build)."""
        try:
            docs = self.docs()
        except Exception:  # a version being replaced: empty choices now, full ones on the next load
            log.exception("reading the index for the filters failed")
            return Facets()
        return facets(docs.values()) if docs else Facets()

    def status(self) -> str:
        """The Status tab: the index's facts, or how to build one."""
        try:
            return status_html(self.kb.status())
        except IndexMissingError as exc:
            return status_html(None, str(exc))
        except Exception as exc:  # noqa: BLE001 - the page shows a message, the log the details
            log.exception("reading the index status failed")
            return status_html(None, friendly_error(exc))

    def warm_up(self) -> None:
        """Load the model and index, compute example questions, then pre-embed the candidate sentences."""
        try:
            if self.docs() is not None:
                self.examples()
                self.prewarm()
        except Exception:  # noqa: BLE001 - warming up is best effort
            log.warning("warm-up failed", exc_info=True)

    def watch(self, stop: threading.Event, every: float = WATCH_EVERY) -> None:
        """Warm up now, and again whenever a new index version is published (a daemon thread's loop)."""
        seen: str | None = None
        while True:
            try:
                name = self.kb.published_version()
            except OSError:
                name = None
            if name is not None and name != seen:
                self.warm_up()
                seen = name
            if stop.wait(every):
                return

    def prewarm(self) -> int:
        """Embed every candidate sentence of the current version into the vector cache; returns how many.

        With the sentences' vectors at hand an extractive answer costs ~10–20 ms instead of
        ~0.1–0.5 s, which is what lets one process serve many people on 2 cores. Skipped for a
        version built with its sentence vectors (answering then embeds only the question), and when
        the sentences would not fit the cache (a very large index); answers then fill it as they go.
        """
        searcher = self.asker.searcher
        version = searcher.version
        if getattr(version, "has_sentences", False):  # built with its sentence vectors: nothing to embed
            self._warm = {"version": version.name, "warming": False, "skipped": "sentence vectors in the index"}
            return 0
        enc = searcher.encoder_for(version)
        if getattr(enc, "max_items", None) is None:  # not a caching encoder: nothing to fill
            self._warm = {"version": version.name, "warming": False, "skipped": "no vector cache"}
            return 0
        texts = sorted(candidate_sentences(version), key=len)  # similar lengths share a batch: less padding
        if len(texts) > 0.8 * enc.max_items:
            log.info("%d sentences would not fit the vector cache; not pre-embedding them", len(texts))
            self._warm = {"version": version.name, "warming": False, "skipped": f"{len(texts)} sentences"}
            return 0
        self._warm = {"version": version.name, "sentences": len(texts), "done": 0, "warming": True}
        t0 = time.perf_counter()
        for start in range(0, len(texts), PREWARM_STEP):
            enc.encode(texts[start : start + PREWARM_STEP])
            self._warm["done"] = min(len(texts), start + PREWARM_STEP)
            time.sleep(0.002)  # let a waiting question take the encoder's lock
        self._warm.update(warming=False, seconds=round(time.perf_counter() - t0, 1))
        log.info("pre-embedded %d sentences of %s in %.1f s", len(texts), version.name, time.perf_counter() - t0)
        return len(texts)

    def health(self) -> dict[str, Any]:
        """What a load balancer or a benchmark wants to know: the version served and the warm-up's progress."""
        name = self.kb.published_version()
        warm = dict(self._warm)
        ready = name is not None and warm.get("version") == name and not warm.get("warming")
        return {"index_version": name, "ready": ready, "warming": bool(warm.get("warming")),
                "sentences": warm.get("sentences"), "embedded": warm.get("done"), "seconds": warm.get("seconds"),
                "skipped": warm.get("skipped")}

    def examples(self, *, wait: bool = True) -> list[str]:
        """Up to :data:`N_EXAMPLES` questions the current index answers, cached per index version.

        The first :data:`MAX_EXAMPLE_TRIES` of :func:`example_candidates` are asked (extractive, no
        LLM) and those answered about their subject are kept (see :func:`answers_example`). With
        ``wait=False`` this never blocks: it returns the cached questions, or ``[]`` and starts
        computing them in a background thread (the page asks again when it loads).
        """
        try:
            version = self.asker.searcher.version
        except IndexMissingError:
            return []
        cached = self._examples.get(version.name)
        if cached is not None:
            return cached
        if not wait:
            with self._lock:
                if self._examples_thread is None or not self._examples_thread.is_alive():
                    self._examples_thread = threading.Thread(target=self._compute_examples, name="dmlqa-examples",
                                                             daemon=True)
                    self._examples_thread.start()
            return []
        return self._compute_examples()

    def _compute_examples(self) -> list[str]:
        try:
            version = self.asker.searcher.version
        except IndexMissingError:
            return []
        with self._examples_lock:
            if version.name in self._examples:
                return self._examples[version.name]
            t0 = time.perf_counter()
            chosen: list[str] = []
            for ex in example_candidates(version.docs.values())[:MAX_EXAMPLE_TRIES]:
                try:
                    if answers_example(ex, self.kb.ask(ex.question, use_llm=False)):
                        chosen.append(ex.question)
                except Exception:  # noqa: BLE001 - an example is optional
                    log.warning("example question %r failed", ex.question, exc_info=True)
                if len(chosen) == N_EXAMPLES:
                    break
            self.examples_seconds = time.perf_counter() - t0
            log.info("%d example questions for %s in %.2f s", len(chosen), version.name, self.examples_seconds)
            self._examples = {version.name: chosen}
            return chosen

    def answer(self, question: str, filters: Any, *, use_llm: bool = True) -> Answer:
        """A complete answer (the HTTP API); transient failures while the index is swapped are retried once.

        ``filters`` is a ``query.search.Filters`` (see :func:`dmlqa.app.ui_chat.make_filters`).
        """
        _ = self.asker  # made once, under the lock, before the API asks with it
        options = _options(filters)
        try:
            return self.kb.ask(question, use_llm=use_llm, **options)
        except DmlqaError:
            raise
        except Exception:  # noqa: BLE001
            log.warning("answering failed; retrying once on the current index version", exc_info=True)
            time.sleep(0.2)
            return self.kb.ask(question, use_llm=use_llm, **options)

    def stream_html(self, question: str, filters: Any, *, extra_notice: str | None = None,
                    use_llm: bool = True, previous: str | None = None) -> Iterator[str]:
        """The HTML of the answer as it grows; the last item is the final answer with its sources.

        ``previous`` is the conversation's context a follow-up leans on (see :func:`~dmlqa.app.ui_chat.chat_steps`).
        """
        options = _options(filters)
        for attempt in (1, 2):
            streamed: list[str] = []
            try:
                asker = self.asker
                stream = self.kb.ask_stream(question, previous=previous, use_llm=use_llm, **options)
                for delta in stream.deltas:
                    streamed.append(delta)
                    if asker.llm is not None and use_llm:
                        yield streaming_html("".join(streamed))
                answer = stream.result
                docs = None
                try:
                    docs = asker.searcher.version.docs
                except Exception:  # noqa: BLE001 - links then point at the canonical URL
                    pass
                yield answer_html(answer, docs, extra_notice=extra_notice)
                return
            except Exception as exc:  # noqa: BLE001 - the page gets a message, never a traceback
                transient = not isinstance(exc, DmlqaError)
                if attempt == 1 and transient and not streamed:
                    log.warning("answering failed; retrying once on the current index version", exc_info=True)
                    time.sleep(0.2)
                    continue
                if transient:
                    log.exception("answering failed")
                partial = f"{''.join(streamed)}\n\n" if streamed else ""
                yield message_html(partial + friendly_error(exc))
                return

    def related_rows(self, query: str, *, k: int = 10, since: int | None = None) -> tuple[list[dict[str, Any]], str]:
        """(rows, table HTML) for a free-text, URL, arXiv id or DOI query."""
        searcher = self.asker.searcher
        result = self.kb.related(query, k=k, since=since)
        target = None
        if result.target:
            d = searcher.version.docs.get(result.target)
            target = {"title": d.title, "url": d.url} if d else None
        rows = related_rows(result)
        notes = [result.notice, undated_note(result.undated_excluded, what=f"“since {since}”")]
        graph = self.citations(result.target) if target else None
        return rows, related_html(rows, "; ".join(n for n in notes if n) or None, target=target, graph=graph)

    def citations(self, doc_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """What the paper cites and what cites it, in the knowledge base (None: no citation graph)."""
        try:
            cites, cited_by = self.kb.cites(doc_id), self.kb.cited_by(doc_id)
        except DmlqaError:  # an index built before the graph, or a document that is no paper
            return None
        return {"cites": [i.to_json() for i in cites.items], "cited_by": [i.to_json() for i in cited_by.items]}
