"""The chat app: ask with cited sources, explore related papers, see what the index holds (Gradio).

The module has two halves. The first is pure functions that turn the library's records into HTML
(an :class:`~dmlqa.models.Answer` with ``[n]`` links and its sources list, the related-papers table,
the index status) and the app's inputs into :class:`~dmlqa.search.Filters`; they are tested
without a browser. The second is :class:`ChatService` (one :class:`~dmlqa.answer.Asker` per
process, shared by Gradio's worker threads) and :func:`build_app`, the Gradio Blocks glue.

Everything that reaches the page is escaped here: document titles, passages and error messages
come from the web, and a question may contain markup. Links are emitted only for ``http(s)`` URLs.
Gradio is imported lazily (and with its analytics switched off), so importing this module for its
formatting functions costs nothing.
"""

from __future__ import annotations

import html
import logging
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from dmlqa.embed import CachedEncoder
from dmlqa.errors import DmlqaError, IndexMissingError
from dmlqa.models import KINDS, Answer, Citation
from dmlqa.search import Filters, Searcher

if TYPE_CHECKING:
    from dmlqa.answer import Asker
    from dmlqa.index import DocRecord, IndexVersion
    from dmlqa.related import RelatedResult
    from dmlqa.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
#: The browser's textarea refuses more than this; the answerer itself reads the first 2000 characters.
MAX_INPUT_CHARS = 20_000
#: A pasted question is shown in the chat up to this many characters.
MAX_SHOWN_QUESTION = 600
#: Quotes under an answer are cut to about this many characters.
QUOTE_CHARS = 260
#: Years outside this range are typing mistakes, not filters.
YEAR_RANGE = (1950, 2100)
#: How many example questions the empty chat offers, and how many candidates are tried for them.
N_EXAMPLES = 4
MAX_EXAMPLE_TRIES = 10
#: Sentences embedded per step of the background pre-warm (the encoder's lock is released in between,
#: so questions wait at most one step).
PREWARM_STEP = 32
#: How often the background thread looks for a newly published index version (seconds).
WATCH_EVERY = 30.0
#: Gradio events of one kind that may run at once (answering is CPU-bound and serialised by the
#: encoder's lock anyway; LLM answers mostly wait on the network, so several may stream together).
CONCURRENCY = 8

NO_INDEX_MESSAGE = (
    "No index has been built yet. Build one with <code>dmlqa build</code> (or "
    "<code>dmlqa --home DIR build</code>), see the README's Quick start; the app picks it up "
    "without a restart."
)


# -- escaping and links ---------------------------------------------------------------------------


def esc(text: object) -> str:
    """HTML-escape anything for element content or a quoted attribute."""
    return html.escape("" if text is None else str(text), quote=True)


def safe_url(url: str | None) -> str | None:
    """``url`` when it is an absolute http(s) URL with a host (whitespace and controls refused), else None."""
    if not url or not isinstance(url, str):
        return None
    url = url.strip()
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url


def source_href(url: str | None, page: int | None = None, *, source_url: str | None = None,
                content_type: str | None = None) -> str | None:
    """Where a citation opens: the original URL, at the page (``#page=N``) for a PDF passage.

    A paper's canonical URL is often its landing page (arXiv's ``/abs/``); the PDF the text came
    from is ``source_url``, and only a PDF viewer understands ``#page=N``.
    """
    base = safe_url(url)
    if page and content_type == "pdf":
        pdf = safe_url(source_url) or base
        if pdf:
            s = urlsplit(pdf)
            return urlunsplit((s.scheme, s.netloc, s.path, s.query, f"page={int(page)}"))
    return base


def link(href: str | None, text_html: str, *, cls: str = "", title: str = "") -> str:
    """An ``<a>`` opening in a new tab when ``href`` is a safe http(s) URL, else a plain ``<span>``.

    ``text_html`` must already be escaped; ``title`` is escaped here.
    """
    attrs = f' class="{esc(cls)}"' if cls else ""
    attrs += f' title="{esc(title)}"' if title else ""
    safe = safe_url(href)
    if safe is None:
        return f"<span{attrs}>{text_html}</span>"
    return f'<a href="{esc(safe)}" target="_blank" rel="noopener noreferrer"{attrs}>{text_html}</a>'


def shorten(text: str, limit: int) -> str:
    """Collapse whitespace and cut to about ``limit`` characters on a word boundary."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.") + "…"


def _one_line(fragment: str) -> str:
    # Gradio's chat renders messages as markdown; an HTML block without blank lines (here: without
    # any newline) is passed through as HTML and never read as markdown.
    return fragment.replace("\r", " ").replace("\n", " ")


# -- answers -------------------------------------------------------------------------------------------

_MARKER = re.compile(r"\[(\d{1,3})\]")


def citation_hrefs(citations: Sequence[Citation], docs: Mapping[str, DocRecord] | None = None) -> dict[int, str | None]:
    """``n`` → the link of citation ``n`` (see :func:`source_href`); ``docs`` gives PDF source URLs."""
    out: dict[int, str | None] = {}
    for c in citations:
        d = docs.get(c.doc_id) if docs and c.doc_id else None
        out[c.n] = source_href(c.url, c.page, source_url=d.source_url if d else None,
                               content_type=d.content_type if d else None)
    return out


def text_with_links(text: str, citations: Sequence[Citation], hrefs: Mapping[int, str | None]) -> str:
    """Escape ``text`` and turn each ``[n]`` that names a citation into a link to its source."""
    titles = {c.n: c.title for c in citations}

    def marker(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n not in titles:
            return m.group(0)
        return link(hrefs.get(n), f"[{n}]", cls="dmlqa-cite", title=f"[{n}] {titles[n]}")

    escaped = esc(text)  # escaping leaves "[", digits and "]" alone, so markers survive it
    return _MARKER.sub(marker, escaped).replace("\n", "<br>")


def backend_label(backend: str) -> str:
    """What answered, in words: ``llm:llama3.1`` → ``LLM llama3.1``."""
    if backend.startswith("llm:"):
        return f"LLM {backend[4:]}"
    if backend == "extractive":
        return "extractive (sentences quoted from the sources, no LLM)"
    return backend


def facts(venue: str | None, year: int | None, page: int | None = None) -> str:
    """``NeurIPS 2020 · p. 3`` (empty parts left out)."""
    parts = [" ".join(str(x) for x in (venue, year) if x)]
    if page:
        parts.append(f"p. {page}")
    return " · ".join(p for p in parts if p)


def sources_html(citations: Sequence[Citation], hrefs: Mapping[int, str | None], *, heading: str = "Sources") -> str:
    """The numbered sources: title (linked), venue/year, page and a short quoted passage."""
    if not citations:
        return ""
    items = []
    for c in citations:
        title = link(hrefs.get(c.n), esc(c.title or c.url), cls="dmlqa-source-title")
        meta = facts(c.venue, c.year, c.page)
        quote = shorten(c.quote, QUOTE_CHARS)
        items.append(
            f'<li class="dmlqa-source" data-n="{c.n}"><span class="dmlqa-n">[{c.n}]</span> {title}'
            + (f' <span class="dmlqa-facts">{esc(meta)}</span>' if meta else "")
            + (f'<blockquote class="dmlqa-quote">“{esc(quote)}”</blockquote>' if quote else "")
            + "</li>"
        )
    return f'<div class="dmlqa-sources"><strong>{esc(heading)}</strong><ul>{"".join(items)}</ul></div>'


def answer_html(answer: Answer, docs: Mapping[str, DocRecord] | None = None, *, extra_notice: str | None = None) -> str:
    """One chat answer: text with linked ``[n]`` markers, notices, sources, and who answered."""
    hrefs = citation_hrefs(answer.citations, docs)
    body = text_with_links(answer.answer, answer.citations, hrefs)
    parts = [f'<div class="dmlqa-answer"><div class="dmlqa-text">{body}</div>']
    for notice in (extra_notice, answer.notice):
        if notice:
            parts.append(f'<div class="dmlqa-notice">⚠ {esc(notice)}</div>')
    parts.append(sources_html(answer.citations, hrefs, heading="Nearest sources" if answer.refused else "Sources"))
    if answer.flags:
        flags = "".join(f"<li>{esc(f)}</li>" for f in answer.flags)
        parts.append(f'<details class="dmlqa-flags"><summary>{len(answer.flags)} citation check(s)</summary>'
                     f"<ul>{flags}</ul></details>")
    parts.append(f'<div class="dmlqa-meta">Answered by <span class="dmlqa-backend">{esc(backend_label(answer.backend))}'
                 f"</span> in {answer.seconds:.2f} s</div></div>")
    return _one_line("".join(parts))


def streaming_html(text: str) -> str:
    """An answer still arriving: escaped text and a cursor."""
    body = esc(text).replace("\n", "<br>")
    return _one_line(f'<div class="dmlqa-answer dmlqa-streaming"><div class="dmlqa-text">{body}▍</div></div>')


PENDING_HTML = '<div class="dmlqa-answer dmlqa-pending"><div class="dmlqa-text">Searching the sources…</div></div>'


def message_html(message: str, *, kind: str = "error") -> str:
    """A message from the app itself (bad input, no index, a failure), escaped."""
    body = esc(message).replace("\n", "<br>")
    return _one_line(f'<div class="dmlqa-answer dmlqa-{esc(kind)}"><div class="dmlqa-text">⚠ {body}</div></div>')


def question_html(question: str) -> str:
    """The user's question as the chat shows it: escaped text, a huge paste shortened."""
    shown = question.strip()
    if len(shown) > MAX_SHOWN_QUESTION:
        shown = shown[:MAX_SHOWN_QUESTION].rstrip() + f"… ({len(question):,} characters in all)"
    return _one_line(f'<div class="dmlqa-question">{esc(shown).replace(chr(10), "<br>")}</div>')


# -- follow-up questions ---------------------------------------------------------------------------

_FOLLOW_OPENERS = ("and ", "what about", "how about", "also", "then ", "so ", "but ", "why", "how so")
_FOLLOW_WORDS = {"it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "his",
                 "her", "same", "former", "latter", "there"}


def follow_up_query(question: str, previous: Sequence[str]) -> str | None:
    """The retrieval text for a short follow-up that leans on the previous question, else None.

    "What about stage 3?" after "How does ZeRO partition optimizer state?" is searched as both
    together; a question that stands on its own (long, or without a pronoun or a follow-up opener)
    is searched alone.
    """
    if not previous:
        return None
    q = " ".join(question.split())
    words = re.findall(r"[\w'-]+", q.lower())
    if not words or len(words) > 12:
        return None
    lowered = q.lower()
    if not (lowered.startswith(_FOLLOW_OPENERS) or _FOLLOW_WORDS & set(words)):
        return None
    return f"{previous[-1]} {q}"


# -- filters ---------------------------------------------------------------------------------------------


#: The year filters' "no limit" choice.
ANY_YEAR = "any"


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
                 topics: Iterable[str] | None = None) -> tuple[Filters, str | None]:
    """The app's filter inputs as :class:`Filters`, and a notice when an input had to be corrected.

    Unknown kinds and years outside 1950–2100 are ignored; a reversed year range is swapped.
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
    return Filters(kinds=tuple(kind_list), since=lo, until=hi, topics=tuple(topic_list)), "; ".join(notes) or None


def describe_filters(filters: Filters) -> str:
    """``kind paper · 2020–2023 · topic Pipeline Parallelism`` (empty when nothing is filtered)."""
    parts = []
    if filters.kinds:
        parts.append("kind " + ", ".join(filters.kinds))
    if filters.since or filters.until:
        parts.append(f"{filters.since or '…'}–{filters.until or '…'}")
    if filters.topics:
        parts.append("topic " + ", ".join(filters.topics))
    return " · ".join(parts)


@dataclass(frozen=True)
class Facets:
    """What the filters can offer, read from the published index."""

    kinds: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()  # most documents first
    years: tuple[int, int] | None = None


def year_choices(f: Facets) -> list[str]:
    """The year filters' choices: "any", then the index's years, newest first."""
    if not f.years:
        return [ANY_YEAR]
    lo, hi = f.years
    return [ANY_YEAR] + [str(y) for y in range(hi, lo - 1, -1)]


def facets(docs: Iterable[DocRecord]) -> Facets:
    docs = list(docs)
    kinds = {d.kind for d in docs}
    topic_counts = Counter(t.strip() for d in docs for t in dict.fromkeys(d.topics) if t.strip())
    years = [d.year for d in docs if d.year]
    return Facets(
        kinds=tuple(k for k in KINDS if k in kinds) + tuple(sorted(kinds - set(KINDS))),
        topics=tuple(t for t, _ in sorted(topic_counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))),
        years=(min(years), max(years)) if years else None,
    )


# -- example questions -----------------------------------------------------------------------------------

#: List sections that name a kind of resource, not a subject ("Papers", "Horovod documentation").
_GENERIC_TOPIC_WORDS = {
    "papers", "paper", "resources", "resource", "references", "reference", "code", "frameworks", "framework",
    "projects", "project", "documentation", "docs", "tools", "libraries", "library", "misc", "miscellaneous",
    "other", "others", "general", "blogs", "blog", "tutorials", "videos", "courses", "talks", "books", "links",
    "related", "awesome", "contents", "contributing", "license", "news", "surveys", "survey", "open", "source",
}


def _topic_phrase(topic: str) -> str:
    words = topic.split()
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)


def example_candidates(docs: Iterable[DocRecord]) -> list[str]:
    """Questions the index should be able to answer, built from its contents, best first.

    Subjects come from the lists' sections (topics shared by at least two documents with text) and
    from paper titles that start with a name (``GPipe: Efficient Training …`` → ``How does GPipe
    work?``); the two kinds alternate.
    """
    full = [d for d in docs if not d.is_card]
    counts = Counter(t.strip() for d in full for t in dict.fromkeys(d.topics) if t.strip())
    topic_qs = []
    for topic, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].lower())):
        words = re.findall(r"[A-Za-z]+", topic)
        if n < 2 or "/" in topic or len(words) < 2 or {w.lower() for w in words} & _GENERIC_TOPIC_WORDS:
            continue
        topic_qs.append(f"What is {_topic_phrase(topic)}?" if len(words) <= 3 else
                        f"What do the sources say about {_topic_phrase(topic)}?")
    names: dict[str, None] = {}
    for d in sorted(full, key=lambda d: (d.kind != "paper", -(d.n_chunks or 0), d.title)):
        head, sep, _ = d.title.partition(":")
        head = head.strip()
        if sep and 1 <= len(head.split()) <= 2 and re.fullmatch(r"[A-Za-z][\w\-. ]*[\w]", head):
            names.setdefault(head, None)
    name_qs = [f"How does {name} work?" for name in names]
    out: list[str] = []
    for i in range(max(len(topic_qs), len(name_qs))):
        for group in (name_qs, topic_qs):
            if i < len(group) and group[i] not in out:
                out.append(group[i])
    return out


# -- related papers and status ------------------------------------------------------------------------


def related_rows(result: RelatedResult) -> list[dict[str, Any]]:
    """The related items as plain rows (kept per session for "ask about this paper")."""
    return [
        {"doc_id": r.doc_id, "title": r.title, "url": r.url, "year": r.year, "venue": r.venue, "kind": r.kind,
         "reason": r.reason, "score": round(float(r.score), 4)}
        for r in result.items
    ]


def related_html(rows: Sequence[Mapping[str, Any]], notice: str | None = None, *,
                 target: Mapping[str, Any] | None = None) -> str:
    """The related-papers table: linked title, year/venue, kind, why, and an ask button per row.

    ``target`` is the indexed document the query named (its title and URL head the table).
    """
    head = f'<div class="dmlqa-notice">⚠ {esc(notice)}</div>' if notice else ""
    if target:
        title = link(target.get("url"), esc(target.get("title") or target.get("url")))
        head += f'<p class="dmlqa-target">Related to {title}</p>'
    if not rows:
        return _one_line(head + '<p class="dmlqa-empty">No related documents.</p>')
    body = []
    for i, r in enumerate(rows):
        title = link(r.get("url"), esc(r.get("title") or r.get("url")), cls="dmlqa-related-title")
        body.append(
            f'<tr data-row="{i}"><td>{i + 1}</td><td>{title}</td><td>{esc(facts(r.get("venue"), r.get("year")))}</td>'
            f'<td>{esc(r.get("kind") or "")}</td><td class="dmlqa-why">{esc(r.get("reason") or "")}</td>'
            f'<td><button type="button" class="dmlqa-ask-about" data-row="{i}">Ask about this paper</button></td></tr>'
        )
    table = ('<table class="dmlqa-related"><thead><tr><th>#</th><th>title</th><th>year / venue</th><th>kind</th>'
             f'<th>why</th><th></th></tr></thead><tbody>{"".join(body)}</tbody></table>')
    return _one_line(head + table)


def ask_about_question(row: Mapping[str, Any]) -> str:
    return f"What is {' '.join(str(row.get('title') or '').split())} about?"


def status_html(status: Mapping[str, Any] | None, error: str | None = None) -> str:
    """The index's facts; with no index, how to build one."""
    if status is None:
        return _one_line(f'<div class="dmlqa-status dmlqa-no-index"><p>{NO_INDEX_MESSAGE}</p>'
                         + (f'<p class="dmlqa-facts">{esc(error)}</p>' if error else "") + "</div>")
    rows = [
        ("index version", status.get("index_version")), ("built", status.get("built_at")),
        ("documents with full text", status.get("documents")),
        ("catalog cards (catalog facts only)", status.get("cards")),
        ("chunks", status.get("chunks")), ("resources in the catalog", status.get("resources")),
        ("embedding model", f"{status.get('model')} ({status.get('encoder')})"),
    ]
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    failed = list(status.get("failed") or [])
    if failed:
        items = "".join(
            f"<tr><td>{esc(f.get('stage'))}</td><td>{link(f.get('url'), esc(f.get('url')))}</td>"
            f"<td>{esc(f.get('error'))}</td></tr>" for f in failed
        )
        fail = (f'<details class="dmlqa-failed"><summary>{len(failed)} resource(s) failed at the last build</summary>'
                f"<table><thead><tr><th>stage</th><th>url</th><th>reason</th></tr></thead><tbody>{items}"
                "</tbody></table></details>")
    else:
        fail = "<p>No resource failed at the last build.</p>"
    return _one_line(f'<div class="dmlqa-status"><table class="dmlqa-status-table">{table}</table>{fail}</div>')


# -- binding ------------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, *, password: bool) -> str | None:
    """The warning to print when the app listens beyond this machine (None on loopback)."""
    if is_loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::", "[::]") else host
    msg = f"the app listens on {where}: anyone who can reach this machine on that port can use it"
    if not password:
        msg += "; set DMLQA_UI_PASSWORD to require a password"
    return msg


def ui_password(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The app's password: the ``ui_password`` setting (dmlqa.toml or ``DMLQA_UI_PASSWORD``)."""
    return settings.ui_password or env.get("DMLQA_UI_PASSWORD") or None


# -- the service behind the app -----------------------------------------------------------------------


def candidate_sentences(version: IndexVersion, block: int = 2000) -> list[str]:
    """The distinct sentences the extractive answerer may quote from ``version`` (full-text documents)."""
    from dmlqa.answer import sentences_of

    out: dict[str, None] = {}
    for start in range(0, version.size, block):
        records = version.chunks(range(start, min(version.size, start + block)))
        for row in sorted(records):
            r = records[row]
            d = version.docs.get(r.doc_id)
            if d is None or d.is_card:
                continue
            for s in sentences_of(r.text):
                if 30 <= len(s) <= 500:  # the answerer's own length bounds for a quotable sentence
                    out.setdefault(s, None)
    return list(out)


def friendly_error(exc: BaseException) -> str:
    """A message for the page (never a traceback)."""
    if isinstance(exc, IndexMissingError):
        return "No index has been built yet: run `dmlqa build`, then ask again (no restart needed)."
    if isinstance(exc, DmlqaError):
        return str(exc)
    if isinstance(exc, sqlite3.Error | OSError):
        return "The index was being replaced while answering; please ask again in a moment."
    return f"Something went wrong while answering ({type(exc).__name__}); the details are in the server log."


class ChatService:
    """What the app does, independent of Gradio: one Asker per process, shared by all sessions.

    The Asker's Searcher follows the published index version, so a new build is picked up on the
    next request while requests in flight finish on the version they started with.
    """

    def __init__(self, settings: Settings, asker: Asker | None = None) -> None:
        self.settings = settings
        self._asker = asker
        self._lock = threading.Lock()
        self._examples: dict[str, list[str]] = {}
        self._examples_lock = threading.Lock()
        self._warm: dict[str, Any] = {}

    @property
    def asker(self) -> Asker:
        with self._lock:
            if self._asker is None:
                from dmlqa.answer import Asker
                from dmlqa.llm import LLMBackend, LLMConfig

                config = LLMConfig.from_settings(self.settings)
                self._asker = Asker(Searcher(self.settings), LLMBackend(config) if config else None)
            return self._asker

    def docs(self) -> Mapping[str, DocRecord] | None:
        """The published version's documents, or None when there is no index (yet)."""
        try:
            return self.asker.searcher.version.docs
        except IndexMissingError:
            return None

    def facets(self) -> Facets:
        try:
            docs = self.docs()
        except Exception:  # a version being replaced: empty choices now, full ones on the next load
            log.exception("reading the index for the filters failed")
            return Facets()
        return facets(docs.values()) if docs else Facets()

    def status(self) -> str:
        from dmlqa.home import index_status

        try:
            return status_html(index_status(self.settings))
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
            from dmlqa.index import current_version

            try:
                name = current_version(self.settings.index_dir)
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
        ~0.1–0.5 s, which is what lets one process serve many people on 2 cores. Skipped when the
        sentences would not fit the cache (a very large index); answers then fill it as they go.
        """
        searcher = self.asker.searcher
        version = searcher.version
        enc = searcher.encoder_for(version)
        if not isinstance(enc, CachedEncoder):
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
        from dmlqa.index import current_version

        name = current_version(self.settings.index_dir)
        warm = dict(self._warm)
        ready = name is not None and warm.get("version") == name and not warm.get("warming")
        return {"index_version": name, "ready": ready, "warming": bool(warm.get("warming")),
                "sentences": warm.get("sentences"), "embedded": warm.get("done"), "seconds": warm.get("seconds"),
                "skipped": warm.get("skipped")}

    def examples(self) -> list[str]:
        """Up to :data:`N_EXAMPLES` questions the current index answers (not refused), cached per version."""
        from dmlqa.answer import AskOptions

        try:
            version = self.asker.searcher.version
        except IndexMissingError:
            return []
        with self._examples_lock:
            if version.name in self._examples:
                return self._examples[version.name]
            chosen: list[str] = []
            for q in example_candidates(version.docs.values())[:MAX_EXAMPLE_TRIES]:
                try:
                    if not self.asker.ask(q, AskOptions(use_llm=False)).refused:
                        chosen.append(q)
                except Exception:  # noqa: BLE001
                    log.warning("example question %r failed", q, exc_info=True)
                if len(chosen) == N_EXAMPLES:
                    break
            self._examples = {version.name: chosen}
            return chosen

    def answer(self, question: str, filters: Filters, *, use_llm: bool = True) -> Answer:
        """A complete answer (the HTTP API); transient failures while the index is swapped are retried once."""
        from dmlqa.answer import AskOptions

        options = AskOptions(filters=filters, use_llm=use_llm)
        try:
            return self.asker.ask(question, options)
        except DmlqaError:
            raise
        except Exception:  # noqa: BLE001
            log.warning("answering failed; retrying once on the current index version", exc_info=True)
            time.sleep(0.2)
            return self.asker.ask(question, options)

    def stream_html(self, question: str, filters: Filters, *, extra_notice: str | None = None,
                    use_llm: bool = True) -> Iterator[str]:
        """The HTML of the answer as it grows; the last item is the final answer with its sources."""
        from dmlqa.answer import AskOptions

        options = AskOptions(filters=filters, use_llm=use_llm)
        for attempt in (1, 2):
            streamed: list[str] = []
            try:
                stream = self.asker.stream(question, options)
                for delta in stream.deltas:
                    streamed.append(delta)
                    if self.asker.llm is not None and use_llm:
                        yield streaming_html("".join(streamed))
                answer = stream.result
                docs = None
                try:
                    docs = self.asker.searcher.version.docs
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
        from dmlqa.related import related

        searcher = self.asker.searcher
        result = related(searcher, query, k=k, since=since)
        target = None
        if result.target:
            d = searcher.version.docs.get(result.target)
            target = {"title": d.title, "url": d.url} if d else None
        rows = related_rows(result)
        return rows, related_html(rows, result.notice, target=target)


# -- the Gradio app ---------------------------------------------------------------------------------------

CSS = """
.dmlqa-answer .dmlqa-text { line-height: 1.5; }
.dmlqa-cite { font-weight: 600; text-decoration: none; }
.dmlqa-notice { margin-top: .5em; padding: .3em .6em; border-left: 3px solid #d97706; background: rgba(217,119,6,.08); }
.dmlqa-sources { margin-top: .6em; font-size: .92em; }
.dmlqa-sources ul { list-style: none; padding-left: 0; margin: .3em 0; }
.dmlqa-source { margin: .35em 0; }
.dmlqa-n { font-weight: 600; }
.dmlqa-facts, .dmlqa-meta { opacity: .75; font-size: .9em; }
.dmlqa-answer blockquote.dmlqa-quote { margin: .1em 0 .4em 1.6em !important; padding: 0 0 0 .6em !important;
  border-left: 2px solid #9ca3af; font-style: italic; }
.dmlqa-meta { margin-top: .5em; }
.dmlqa-related { width: 100%; border-collapse: collapse; font-size: .92em; }
.dmlqa-related td, .dmlqa-related th { padding: .35em .5em; border-bottom: 1px solid rgba(127,127,127,.25);
  text-align: left; vertical-align: top; }
.dmlqa-ask-about { white-space: nowrap; font-size: .85em; font-weight: 400 !important; padding: .2em .6em;
  border: 1px solid rgba(127,127,127,.5); border-radius: 6px;
  cursor: pointer; background: transparent; }
.dmlqa-status-table th { text-align: left; padding-right: 1.5em; font-weight: 500; }
.dmlqa-failed table { font-size: .88em; width: 100%; table-layout: fixed; }
.dmlqa-failed th:nth-child(1) { width: 7em; }
.dmlqa-failed th:nth-child(3) { width: 40%; }
.dmlqa-failed td, .dmlqa-failed th { padding: .2em .5em !important; word-break: break-word; vertical-align: top; }
"""

#: Delegated clicks on the related table's buttons become a ``select`` event carrying the row.
RELATED_JS = """
element.addEventListener('click', (event) => {
  const button = event.target.closest('button.dmlqa-ask-about');
  if (!button) return;
  const row = Number(button.dataset.row);
  trigger('select', {index: row, value: row});
});
"""

PLACEHOLDER = (
    "<strong>Ask about distributed machine learning.</strong><br>Answers cite the paper, page or doc they "
    "come from; every <code>[n]</code> opens its source."
)


def _gradio():  # noqa: ANN202
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # no look-ups of external hosts at start
    import gradio as gr

    return gr


def _theme(gr):  # noqa: ANN001, ANN202
    # System fonts: the default theme loads Google Fonts, which an offline machine cannot reach.
    return gr.themes.Default(font=["system-ui", "Segoe UI", "Helvetica", "Arial", "sans-serif"],
                             font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"])


def build_app(service: ChatService):  # noqa: ANN201 - gradio.Blocks
    """The Gradio Blocks app over ``service``: Chat, Related papers and Status tabs, plus an ``ask`` API."""
    gr = _gradio()

    def _examples_value(items: Sequence[str]) -> list[dict[str, str]] | None:
        return [{"text": q} for q in items] or None

    # -- chat --------------------------------------------------------------------------------------------
    def respond(message: str | None, history: list | None, asked: list | None, kinds, since, until, topics):  # noqa: ANN001, ANN202
        history = list(history or [])
        asked = list(asked or [])
        text = message or ""
        if not text.strip():
            yield history, asked, gr.update(), message_html("Type a question first.", kind="hint")
            return
        filters, filter_notice = make_filters(kinds, since, until, topics)
        query = follow_up_query(text, asked)
        notices = []
        if query is not None:
            notices.append(f"read as a follow-up to “{shorten(asked[-1], 120)}”")
        if filter_notice:
            notices.append(filter_notice)
        if filters.active():
            notices.append(f"filters: {describe_filters(filters)}")
        history += [{"role": "user", "content": question_html(text)}, {"role": "assistant", "content": PENDING_HTML}]
        asked.append(query or " ".join(text.split()))
        yield history, asked, "", ""
        for fragment in service.stream_html(query or text, filters, extra_notice="; ".join(notices) or None):
            history[-1] = {"role": "assistant", "content": fragment}
            yield history, asked, gr.update(), ""

    def clear():  # noqa: ANN202
        return [], [], "", ""

    def pick_example(evt):  # noqa: ANN001, ANN202
        value = evt.value
        return value.get("text", "") if isinstance(value, dict) else str(value or "")

    # -- related -----------------------------------------------------------------------------------------
    def find_related(query: str | None, since):  # noqa: ANN001, ANN202
        q = (query or "").strip()
        if not q:
            return [], message_html("Type a title, a topic, a URL or an arXiv id first.", kind="hint")
        if len(q) > MAX_INPUT_CHARS:
            q = q[:MAX_INPUT_CHARS]
        year = _year(since)
        try:
            return service.related_rows(q, since=year)
        except Exception as exc:  # noqa: BLE001
            if not isinstance(exc, DmlqaError):
                log.exception("related failed")
            return [], message_html(friendly_error(exc))

    def ask_about(rows, evt):  # noqa: ANN001, ANN202
        rows = rows or []
        try:
            row = rows[int(evt.index)]
        except (TypeError, ValueError, IndexError):
            return gr.update(), gr.update()
        return ask_about_question(row), gr.Tabs(selected="chat")

    # Gradio passes event data to a parameter annotated with its class; string annotations (this
    # module's ``from __future__ import annotations``) cannot name the lazily imported gradio.
    pick_example.__annotations__ = {"evt": gr.SelectData}
    ask_about.__annotations__ = {"evt": gr.SelectData}

    # -- page load ---------------------------------------------------------------------------------------
    def on_load():  # noqa: ANN202
        f = service.facets()
        examples = service.examples()
        years = year_choices(f)
        return (
            gr.update(examples=_examples_value(examples)),
            gr.update(choices=list(f.kinds)),
            gr.update(choices=list(f.topics)),
            gr.update(choices=years), gr.update(choices=years), gr.update(choices=years),
            service.status(),
        )

    with gr.Blocks(title="dmlqa: distributed ML Q&A", analytics_enabled=False) as demo:
        gr.Markdown("## dmlqa: distributed machine learning, with sources")
        with gr.Tabs(selected="chat") as tabs:
            with gr.Tab("Chat", id="chat"):
                chatbot = gr.Chatbot(
                    label="Answers", elem_id="dmlqa-chat", height=520, placeholder=PLACEHOLDER,
                    examples=_examples_value(service.examples()), latex_delimiters=[], feedback_options=None,
                    buttons=["copy"],
                )
                notice = gr.HTML("", elem_id="dmlqa-input-notice", js_on_load=None)
                with gr.Row():
                    box = gr.Textbox(placeholder="Ask a question, e.g. how does ZeRO-3 partition the model?",
                                     show_label=False, lines=1, max_lines=6, max_length=MAX_INPUT_CHARS, scale=8,
                                     elem_id="dmlqa-question", autofocus=True, submit_btn=False)
                    send = gr.Button("Ask", variant="primary", scale=1, elem_id="dmlqa-ask")
                    clear_btn = gr.Button("New chat", scale=1)
                f0 = service.facets()
                with gr.Accordion("Filters (applied to retrieval)", open=False):
                    with gr.Row():
                        kinds = gr.CheckboxGroup(list(f0.kinds), label="kind", scale=3)
                        since = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="from year", scale=1)
                        until = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="to year", scale=1)
                    topics = gr.Dropdown(list(f0.topics), multiselect=True, label="topic (list section)",
                                         allow_custom_value=False)
                asked = gr.State([])
            with gr.Tab("Related papers", id="related"):
                with gr.Row():
                    rel_box = gr.Textbox(placeholder="Free text, a URL or an arXiv id (e.g. 1910.02054)",
                                         show_label=False, scale=8, max_length=MAX_INPUT_CHARS,
                                         elem_id="dmlqa-related-query")
                    rel_since = gr.Dropdown(year_choices(f0), value=ANY_YEAR, label="since year", scale=1,
                                            min_width=120)
                    rel_btn = gr.Button("Find related", variant="primary", scale=1, elem_id="dmlqa-related-go")
                rel_rows = gr.State([])
                rel_out = gr.HTML("", elem_id="dmlqa-related-results", js_on_load=RELATED_JS)
            with gr.Tab("Status", id="status"):
                status = gr.HTML(service.status(), elem_id="dmlqa-status")
                refresh = gr.Button("Refresh")

        chat_inputs = [box, chatbot, asked, kinds, since, until, topics]
        chat_outputs = [chatbot, asked, box, notice]
        box.submit(respond, chat_inputs, chat_outputs, api_visibility="private")
        send.click(respond, chat_inputs, chat_outputs, api_visibility="private")
        clear_btn.click(clear, None, [chatbot, asked, box, notice], api_visibility="private")
        chatbot.example_select(pick_example, None, box, api_visibility="private").then(
            respond, chat_inputs, chat_outputs, api_visibility="private")
        rel_btn.click(find_related, [rel_box, rel_since], [rel_rows, rel_out], api_visibility="private")
        rel_box.submit(find_related, [rel_box, rel_since], [rel_rows, rel_out], api_visibility="private")
        rel_out.select(ask_about, [rel_rows], [box, tabs], api_visibility="private").then(
            respond, chat_inputs, chat_outputs, api_visibility="private")
        refresh.click(service.status, None, status, api_visibility="private")
        gr.Timer(30).tick(service.status, None, status, api_visibility="private")
        demo.load(on_load, None, [chatbot, kinds, topics, since, until, rel_since, status], api_visibility="private")

        def ask(question: str, kinds: list[str] | None = None, since: int | None = None, until: int | None = None,
                topics: list[str] | None = None, use_llm: bool = True) -> dict:
            """Answer a question with cited sources: {"answer", "citations", "backend", "refused", ...}."""
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
            return body

        gr.api(ask, api_name="ask")

        def health() -> dict:
            """The index version served and the warm-up's progress: {"index_version", "warming", ...}."""
            return service.health()

        gr.api(health, api_name="health", concurrency_limit=None)
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=512)
    return demo


def launch(settings: Settings, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, password: str | None = None,
           block: bool = True):  # noqa: ANN201
    """Build the app over ``settings`` and serve it (never through a share tunnel)."""
    gr = _gradio()
    service = ChatService(settings)
    threading.Thread(target=service.watch, args=(threading.Event(),), name="dmlqa-warm-up", daemon=True).start()
    demo = build_app(service)
    auth = ("dmlqa", password) if password else None
    demo.launch(
        server_name=host, server_port=port, share=False, auth=auth, show_error=False, quiet=True,
        ssr_mode=False, mcp_server=False, pwa=False, enable_monitoring=False, prevent_thread_lock=not block,
        theme=_theme(gr), css=CSS, footer_links=["api"], run_history=False,
    )
    return demo
