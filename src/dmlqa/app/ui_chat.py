"""What each event of the chat app does with its inputs, independent of Gradio.

A chat turn (:func:`chat_steps`: the question shown at once, then the answer as it streams), the
filters read from the page's inputs (:func:`make_filters`, corrected with a notice rather than
refused), a follow-up read together with the question it leans on, a related-papers query
(:func:`related_turn`) and the HTTP ``/ask`` endpoint's body (:func:`api_answer`). They talk to
the app's service (:class:`~dmlqa.app.ui_service.ChatService`) through :class:`ChatBackend` and
turn every failure into a message for the page: nothing here raises to Gradio.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from dmlqa.api import KnowledgeBase
from dmlqa.app.ui_render import PENDING_HTML, friendly_error, message_html, question_html, shorten
from dmlqa.errors import DmlqaError
from dmlqa.models import KINDS, Answer

log = logging.getLogger(__name__)

#: The browser's textarea refuses more than this: the library's own limit (dmlqa.query.limits.MAX_TEXT_CHARS,
#: which a front end does not import; tests/test_bounded_targets.py keeps the two equal), of which an API
#: caller past it hears in one line. The answerer itself reads the first 2000 characters.
MAX_INPUT_CHARS = 20_000
#: Years outside this range are typing mistakes, not filters.
YEAR_RANGE = (1950, 2100)
#: The year filters' "no limit" choice.
ANY_YEAR = "any"


class ChatBackend(Protocol):
    """What the page's events need of the service (``filters`` are ``query.search.Filters``)."""

    def stream_html(self, question: str, filters: Any, *, extra_notice: str | None = None, use_llm: bool = True,
                    previous: str | None = None) -> Iterator[str]: ...

    def answer(self, question: str, filters: Any, *, use_llm: bool = True) -> Answer: ...

    def related_rows(self, query: str, *, k: int = 10,
                     since: int | None = None) -> tuple[list[dict[str, Any]], str]: ...


class YearSpan(Protocol):
    """The years an index spans (a :class:`~dmlqa.app.ui_examples.Facets`)."""

    years: tuple[int, int] | None


# -- follow-up questions ---------------------------------------------------------------------------


def follow_up_query(question: str, previous: Sequence[str]) -> str | None:
    """The conversation context of a follow-up that leans on the previous question, else None.

    "What about stage 3?" after "How does ZeRO partition optimizer state?" gives both together (the
    context the next follow-up leans on); a question that stands on its own gives None. The rule
    itself is the answerer's own (:meth:`dmlqa.api.KnowledgeBase.is_follow_up`).
    """
    if not previous or not KnowledgeBase.is_follow_up(question):
        return None
    return f"{previous[-1]} {' '.join(question.split())}"


# -- filters ---------------------------------------------------------------------------------------------


def _unset(value: Any) -> bool:
    return value is None or value == 0 or (isinstance(value, str) and value.strip().lower() in ("", ANY_YEAR))


def _year(value: Any) -> int | None:
    if _unset(value):
        return None
    try:
        year = int(float(value))
    except (TypeError, ValueError):
        return None
    return year if YEAR_RANGE[0] <= year <= YEAR_RANGE[1] else None


def make_filters(kinds: Iterable[str] | None = None, since: Any = None, until: Any = None,
                 topics: Iterable[str] | None = None, include_undated: Any = False) -> tuple[Any, str | None]:
    """The app's filter inputs as ``Filters``, and a notice when an input had to be corrected.

    Unknown kinds and years outside 1950–2100 are ignored; a reversed year range is swapped.
    ``include_undated`` keeps documents of unknown year when a year range is set.
    """
    notes: list[str] = []
    kind_list = [k.strip().lower() for k in (kinds or []) if isinstance(k, str) and k.strip()]
    unknown = [k for k in kind_list if k not in KINDS]
    if unknown:
        notes.append(f"unknown kind ignored: {', '.join(unknown)}")
    kind_list = [k for k in dict.fromkeys(kind_list) if k in KINDS]
    lo, hi = _year(since), _year(until)
    for raw, parsed, name in ((since, lo, "from"), (until, hi, "to")):
        if not _unset(raw) and parsed is None:
            notes.append(f"year {name} {raw!s:.20} ignored (expected a year {YEAR_RANGE[0]}–{YEAR_RANGE[1]})")
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
        notes.append(f"year range reversed: searching {lo}–{hi}")
    topic_list = list(dict.fromkeys(t.strip() for t in (topics or []) if isinstance(t, str) and t.strip()))
    return (KnowledgeBase.search_filters(kinds=kind_list, since=lo, until=hi, topics=topic_list,
                                         include_undated=bool(include_undated)), "; ".join(notes) or None)


def describe_filters(filters: Any) -> str:
    """``kind paper · 2020–2023 · topic Pipeline Parallelism`` (empty when nothing is filtered)."""
    parts = []
    if filters.kinds:
        parts.append("kind " + ", ".join(filters.kinds))
    if filters.since or filters.until:
        parts.append(f"{filters.since or '…'}–{filters.until or '…'}")
    if filters.topics:
        parts.append("topic " + ", ".join(filters.topics))
    if filters.by_year() and filters.include_undated:
        parts.append("undated kept")
    return " · ".join(parts)



def year_choices(f: YearSpan) -> list[str]:
    """The year filters' choices: "any", then the index's years, newest first."""
    if not f.years:
        return [ANY_YEAR]
    lo, hi = f.years
    return [ANY_YEAR] + [str(y) for y in range(hi, lo - 1, -1)]


def ask_about_question(row: Mapping[str, Any]) -> str:
    """The question "Ask about this paper" puts in the chat for a related-papers row."""
    return f"What is {' '.join(str(row.get('title') or '').split())} about?"


# -- one chat turn -----------------------------------------------------------------------------------------


def chat_steps(service: ChatBackend, message: str | None, history: Sequence[Any] | None, asked: Sequence[str] | None,
               filters: tuple[Any, str | None]) -> Iterator[tuple[list[Any], list[str], bool, str]]:
    """One chat turn as the page sees it: (history, asked questions, clear the input box?, input notice).

    The question is appended as the user's message and stays there: only the answer after it (a
    "searching" placeholder, then the growing answer, then the final one) is replaced as it
    streams. ``filters`` is what :func:`make_filters` returned.
    """
    history = list(history or [])
    asked = list(asked or [])
    text = message or ""
    if not text.strip():
        yield history, asked, False, message_html("Type a question first.", kind="hint")
        return
    flt, filter_notice = filters
    query = follow_up_query(text, asked)
    notices = []
    if query is not None:
        notices.append(f"read as a follow-up to “{shorten(asked[-1], 120)}”")
    if filter_notice:
        notices.append(filter_notice)
    if flt.active():
        notices.append(f"filters: {describe_filters(flt)}")
    history += [{"role": "user", "content": question_html(text)}, {"role": "assistant", "content": PENDING_HTML}]
    asked.append(query or " ".join(text.split()))
    yield history, asked, True, ""
    previous = asked[-2] if query is not None else None  # asked[-1] is this turn's own context now
    for fragment in service.stream_html(text, flt, previous=previous, extra_notice="; ".join(notices) or None):
        history[-1] = {"role": "assistant", "content": fragment}
        yield history, asked, False, ""


# -- related papers and the HTTP API ------------------------------------------------------------------------


def related_turn(service: ChatBackend, query: str | None, since: Any) -> tuple[list[dict[str, Any]], str]:
    """(rows, table HTML) for the related-papers tab's query; a message instead of an error."""
    q = (query or "").strip()
    if not q:
        return [], message_html("Type a title, a topic, a URL or an arXiv id first.", kind="hint")
    year = _year(since)
    try:
        return service.related_rows(q, since=year)
    except Exception as exc:  # noqa: BLE001
        if not isinstance(exc, DmlqaError):
            log.exception("related failed")
        return [], message_html(friendly_error(exc))


def api_answer(service: ChatBackend, question: str, kinds: list[str] | None = None, since: int | None = None,
               until: int | None = None, topics: list[str] | None = None, use_llm: bool = True) -> dict:
    """The ``/ask`` endpoint's reply: the answer's JSON (without the retrieved passages), or ``{"error"}``."""
    text = question or ""
    if not text.strip():
        return {"error": "empty question"}
    filters, filter_notice = make_filters(kinds, since, until, topics)
    try:
        answer = service.answer(text, filters, use_llm=use_llm)
    except Exception as exc:  # noqa: BLE001
        if not isinstance(exc, DmlqaError):
            log.exception("answering failed")
        return {"error": friendly_error(exc)}
    body = answer.to_json()
    body.pop("retrieved", None)
    if filter_notice:
        body["filter_notice"] = filter_notice
    if answer.undated_excluded:
        body["undated_excluded"] = answer.undated_excluded
    return body
