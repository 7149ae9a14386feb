"""The service behind the chat app: one knowledge base per process, shared by Gradio's worker threads.

:class:`ChatService` stands on :class:`~dmlqa.api.KnowledgeBase` alone: it asks, streams, finds
related papers and reads the status through it, and turns what comes back into the page's HTML
(:mod:`dmlqa.app.ui_render`). Each request reads one index version through a pinned view of the
knowledge base (:meth:`~dmlqa.api.KnowledgeBase.pinned`), so an answer and the links drawn under it
never come from two versions. Beyond answering, it keeps the app quick on small machines: example
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
    SOURCE_HEADERS,
    answer_html,
    citation_map_html,
    friendly_error,
    message_html,
    related_html,
    related_rows,
    source_error_html,
    source_html,
    status_html,
    streaming_html,
    undated_note,
    year_chart_html,
)
from dmlqa.errors import DmlqaError, EmptyQueryError, IndexMissingError, NotInIndexError, TextTooLongError

if TYPE_CHECKING:
    from dmlqa.api import Answer, Settings

log = logging.getLogger(__name__)

#: How many example questions the empty chat offers, and how many candidates are tried for them.
N_EXAMPLES = 4
MAX_EXAMPLE_TRIES = 6
#: How often the background thread looks for a newly published index version (seconds).
WATCH_EVERY = 30.0


def _options(filters: Any) -> dict[str, Any]:
    # The API takes a ``Filters``' fields as keyword options, under the same names: a field the API
    # does not take fails loudly here instead of being dropped.
    return dataclasses.asdict(filters)


class ChatService:
    """What the app does, independent of Gradio: one knowledge base (one Asker) per process, shared by all sessions.

    Made from a :class:`~dmlqa.api.KnowledgeBase`, or from settings (and optionally the ``Asker`` to
    use, as tests do with a stand-in LLM). Each request reads the version published when it starts,
    so a new build is picked up on the next request while requests in flight finish on theirs.
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

    def docs(self) -> Mapping[str, Any] | None:
        """The published version's documents, or None when there is no index (yet)."""
        try:
            return self.kb.documents()
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
            return status_html(None, str(exc), self.kb.run_history())  # the failed runs say why there is none
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
        ~0.1–0.5 s, which is what lets one process serve many people on 2 cores (see
        :meth:`~dmlqa.api.KnowledgeBase.prewarm` for when it is skipped). :meth:`health` reports
        its progress meanwhile.
        """
        view = self.kb.pinned()
        name = view.index_version()

        def progress(done: int, total: int) -> None:
            self._warm = {"version": name, "sentences": total, "done": done, "warming": True}

        result = view.prewarm(on_progress=progress)
        if result.skipped:
            self._warm = {"version": result.version, "warming": False, "skipped": result.skipped}
        else:
            self._warm = {"version": result.version, "sentences": result.sentences, "done": result.sentences,
                          "warming": False, "seconds": result.seconds}
        return result.sentences

    def health(self) -> dict[str, Any]:
        """What a load balancer or a benchmark wants to know (``GET /health``): ``ok`` (an index is
        published and readable), its ``version``, ``documents`` and ``built_at``, and the warm-up's progress."""
        try:
            facts: dict[str, Any] = {"ok": True, **self.kb.health()}
        except DmlqaError as exc:  # no index yet, or its description cannot be read
            facts = {"ok": False, "version": None, "documents": 0, "built_at": None, "error": str(exc)}
        name = facts["version"]
        warm = dict(self._warm)
        ready = name is not None and warm.get("version") == name and not warm.get("warming")
        return {**facts, "index_version": name, "ready": ready, "warming": bool(warm.get("warming")),
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
            name = self.kb.index_version()
        except IndexMissingError:
            return []
        cached = self._examples.get(name)
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
        view = self.kb.pinned()  # the examples are asked of the version they are cached for
        try:
            name = view.index_version()
        except IndexMissingError:
            return []
        with self._examples_lock:
            if name in self._examples:
                return self._examples[name]
            t0 = time.perf_counter()
            chosen: list[str] = []
            for ex in example_candidates(view.documents().values())[:MAX_EXAMPLE_TRIES]:
                try:
                    if answers_example(ex, view.ask(ex.question, use_llm=False)):
                        chosen.append(ex.question)
                except Exception:  # noqa: BLE001 - an example is optional
                    log.warning("example question %r failed", ex.question, exc_info=True)
                if len(chosen) == N_EXAMPLES:
                    break
            self.examples_seconds = time.perf_counter() - t0
            log.info("%d example questions for %s in %.2f s", len(chosen), name, self.examples_seconds)
            self._examples = {name: chosen}
            return chosen

    def answer(self, question: str, filters: Any, *, use_llm: bool = True) -> Answer:
        """A complete answer (the HTTP API), read from the version published when it was asked.

        ``filters`` is a ``query.search.Filters`` (see :func:`dmlqa.app.ui_chat.make_filters`).
        """
        return self.kb.ask(question, use_llm=use_llm, **_options(filters))

    def stream_html(self, question: str, filters: Any, *, extra_notice: str | None = None,
                    use_llm: bool = True, previous: str | None = None) -> Iterator[str]:
        """The HTML of the answer as it grows; the last item is the final answer with its sources.

        ``previous`` is the conversation's context a follow-up leans on (see :func:`~dmlqa.app.ui_chat.chat_steps`).
        """
        streamed: list[str] = []
        try:
            view = self.kb.pinned()  # the answer and the documents its links come from: one version
            stream = view.ask_stream(question, previous=previous, use_llm=use_llm, **_options(filters))
            live = use_llm and view.llm_backend is not None
            for delta in stream.deltas:
                streamed.append(delta)
                if live:
                    yield streaming_html("".join(streamed))
            answer = stream.result
            yield answer_html(answer, view.documents(), extra_notice=extra_notice)
        except Exception as exc:  # noqa: BLE001 - the page gets a message, never a traceback
            if not isinstance(exc, DmlqaError):
                log.exception("answering failed")
            partial = f"{''.join(streamed)}\n\n" if streamed else ""
            yield message_html(partial + friendly_error(exc))

    def related_rows(self, query: str, *, k: int = 10, since: int | None = None) -> tuple[list[dict[str, Any]], str]:
        """(rows, table HTML) for a free-text, URL, arXiv id or DOI query."""
        view = self.kb.pinned()  # the list, its target and the target's citations: one version
        result = view.related(query, k=k, since=since)
        target = None
        if result.target:
            d = view.document(result.target)
            target = {"title": d.title, "url": d.link} if d else None
        rows = related_rows(result)
        notes = [result.notice, undated_note(result.undated_excluded, what=f"“since {since}”")]
        graph = self.citations(result.target, view) if target else None
        return rows, related_html(rows, "; ".join(n for n in notes if n) or None, target=target, graph=graph)

    def citations(self, doc_id: str, view: KnowledgeBase | None = None) -> dict[str, list[dict[str, Any]]] | None:
        """What the paper cites and what cites it, in the knowledge base (None: no citation graph).

        ``view`` is the request's pinned knowledge base, when the caller has one.
        """
        view = view or self.kb.pinned()
        try:
            cites, cited_by = view.cites(doc_id), view.cited_by(doc_id)
        except DmlqaError:  # an index built before the graph, or a document that is no paper
            return None
        return {"cites": [i.to_json() for i in cites.items], "cited_by": [i.to_json() for i in cited_by.items]}

    def citation_map(self, query: str | None) -> str:
        """The Related tab's citation map of the paper ``query`` names ("" for free text, or no graph)."""
        q = (query or "").strip()
        if not q:
            return ""
        try:
            return citation_map_html(self.kb.citation_map(q).to_json())
        except DmlqaError:  # free text names no one paper: the table answers it, with no map
            return ""
        except Exception:  # noqa: BLE001 - the map is an extra: the table above still answers
            log.exception("drawing the citation map failed")
            return ""

    def year_chart(self) -> str:
        """The Status tab's chart: documents per year for each list section ("" before the first build)."""
        try:
            docs = self.docs()
        except Exception:  # noqa: BLE001 - a version being replaced: the next refresh draws it
            log.exception("reading the index for the year chart failed")
            return ""
        return year_chart_html(docs.values()) if docs else ""

    #: The headers the source view is served with (a policy that runs no script: see ui_render).
    source_headers = SOURCE_HEADERS

    def source_page(self, doc_id: str, page: str | None = None, quote: str | None = None, *,
                    logged_in: bool = True) -> tuple[int, str]:
        """(HTTP status, page) of ``GET /source/<doc_id>?page=N&q=QUOTE``: the archived view of a source
        (:meth:`~dmlqa.api.KnowledgeBase.show`, the page image included), or a page saying why not
        (404: a doc id or page the index does not hold; 400: a quote past its limit; 401: not logged in
        to an app with a password)."""
        if not logged_in:
            return 401, source_error_html(401, "This app has a password: open the chat page and log in.")
        if page not in (None, "") and not (page.isdigit() and 0 < int(page) < 1_000_000):
            return 404, source_error_html(404, f"{page[:40]!r} is not a page number")
        view = self.kb.pinned()
        try:
            if doc_id not in view.documents():  # an exact doc id: a link names one document, never title words
                return 404, source_error_html(404, f"no document {doc_id[:200]!r} in the knowledge base")
            found = view.show(doc_id, int(page) if page else None, quote, image=True)
        except NotInIndexError as exc:
            return 404, source_error_html(404, str(exc))
        except (EmptyQueryError, TextTooLongError) as exc:
            return 400, source_error_html(400, str(exc))
        except DmlqaError as exc:  # no index yet, or a damaged one
            return 503, source_error_html(503, friendly_error(exc))
        return 200, source_html(found, quote)

