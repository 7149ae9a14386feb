"""The chat app: ask with cited sources, explore related papers, see what the index holds (Gradio).

The module has two halves. The first is pure functions that turn the library's records into HTML
(an :class:`~dmlqa.models.Answer` with ``[n]`` links and its sources list, the related-papers table,
the index status) and the app's inputs into :class:`~dmlqa.query.search.Filters`; they are tested
without a browser. The second is :class:`ChatService` (one :class:`~dmlqa.query.answer.Asker` per
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from dmlqa.errors import DmlqaError, IndexMissingError
from dmlqa.index.embed import CachedEncoder
from dmlqa.models import KINDS, Answer, Citation
from dmlqa.query.search import Filters, Searcher

if TYPE_CHECKING:
    from dmlqa.index.versions import DocRecord, IndexVersion
    from dmlqa.query.answer import Asker
    from dmlqa.query.related import RelatedResult
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
MAX_EXAMPLE_TRIES = 6
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


#: A list item line: "- ", "* ", "• " (bullets) or "1. ", "2) " (numbered); the extractive answerer
#: writes list items it quotes as "- item [n]", one per line, and LLMs write markdown lists.
_BULLET_LINE = re.compile(r"^\s*[-*•▪●◦‣]\s+(?=\S)")
_NUMBER_LINE = re.compile(r"^\s*\d{1,2}[.)]\s+(?=\S)")


def rich_text(text: str, inline: Callable[[str], str] = esc) -> str:
    """Answer text as one line of HTML: list lines become ``<ul>``/``<ol>``, the rest paragraphs.

    Lines starting with ``- ``/``* ``/``• `` are bullets (one line is enough); two or more
    consecutive ``1. ``/``2) `` lines are a numbered list (a single one is ordinary text); a blank
    line separates paragraphs and other line breaks stay breaks. ``inline`` escapes the text of
    each line (and may add links); nothing in ``text`` is ever read as markup.
    """
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kinds = []
    for line in lines:
        if not line.strip():
            kinds.append("blank")
        elif _BULLET_LINE.match(line):
            kinds.append("ul")
        elif _NUMBER_LINE.match(line):
            kinds.append("ol")
        else:
            kinds.append("text")
    for i, kind in enumerate(kinds):  # a lone numbered line ("2019. The …") is text
        if kind == "ol" and "ol" not in (kinds[i - 1] if i else None, kinds[i + 1] if i + 1 < len(kinds) else None):
            kinds[i] = "text"
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    open_list: str | None = None

    def close() -> None:
        nonlocal open_list
        if para:
            out.append(f'<p class="dmlqa-p">{"<br>".join(para)}</p>')
            para.clear()
        if open_list:
            out.append(f"<{open_list}>{''.join(items)}</{open_list}>")
            items.clear()
            open_list = None

    for line, kind in zip(lines, kinds, strict=True):
        if kind == "blank":
            close()
        elif kind == "text":
            if open_list:
                close()
            para.append(inline(line.strip()))
        else:
            if para or (open_list and open_list != kind):
                close()
            open_list = kind
            pattern = _BULLET_LINE if kind == "ul" else _NUMBER_LINE
            items.append(f"<li>{inline(pattern.sub('', line, count=1).strip())}</li>")
    close()
    return "".join(out)


def text_with_links(text: str, citations: Sequence[Citation], hrefs: Mapping[int, str | None]) -> str:
    """Escape ``text``, turn each ``[n]`` that names a citation into a link to its source, and
    render its lists as lists (see :func:`rich_text`)."""
    titles = {c.n: c.title for c in citations}

    def marker(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n not in titles:
            return m.group(0)
        return link(hrefs.get(n), f"[{n}]", cls="dmlqa-cite", title=f"[{n}] {titles[n]}")

    # escaping leaves "[", digits and "]" alone, so markers survive it
    return rich_text(text, lambda line: _MARKER.sub(marker, esc(line)))


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
    undated = undated_note(answer.undated_excluded,
                           hint=" (tick “keep documents of unknown year” under Filters to include them)")
    for notice in (extra_notice, answer.notice, undated):
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
    """An answer still arriving: escaped text (lists as lists) and a cursor."""
    body = rich_text(text) or '<p class="dmlqa-p"></p>'
    cursor = '<span class="dmlqa-cursor">▍</span>'
    body = body[: -len("</p>")] + cursor + "</p>" if body.endswith("</p>") else body + cursor
    return _one_line(f'<div class="dmlqa-answer dmlqa-streaming"><div class="dmlqa-text">{body}</div></div>')


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

def follow_up_query(question: str, previous: Sequence[str]) -> str | None:
    """The conversation context of a follow-up that leans on the previous question, else None.

    "What about stage 3?" after "How does ZeRO partition optimizer state?" gives both together (the
    context the next follow-up leans on); a question that stands on its own gives None. The rule
    itself is :func:`dmlqa.query.answer.is_follow_up`, the one the answerer uses.
    """
    from dmlqa.query.answer import is_follow_up

    if not previous or not is_follow_up(question):
        return None
    return f"{previous[-1]} {' '.join(question.split())}"


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
                 topics: Iterable[str] | None = None, include_undated: Any = False) -> tuple[Filters, str | None]:
    """The app's filter inputs as :class:`Filters`, and a notice when an input had to be corrected.

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
    return (Filters(kinds=tuple(kind_list), since=lo, until=hi, topics=tuple(topic_list),
                    include_undated=bool(include_undated)), "; ".join(notes) or None)


def describe_filters(filters: Filters) -> str:
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


def undated_note(count: int, *, what: str = "the year filter", hint: str = "") -> str | None:
    """Why fewer documents were searched: ``count`` documents of unknown year left out by a year filter."""
    if count <= 0:
        return None
    docs = "1 document of unknown year was" if count == 1 else f"{count:,} documents of unknown year were"
    return f"{docs} left out by {what}{hint}"


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


@dataclass(frozen=True)
class Example:
    """A candidate example question, the document it was made from, and the name it asks about."""

    question: str
    doc_id: str | None = None
    subject: str | None = None


#: List sections that name a kind of resource, not a subject ("Papers", "Horovod documentation").
_GENERIC_TOPIC_WORDS = {
    "papers", "paper", "resources", "resource", "references", "reference", "code", "frameworks", "framework",
    "projects", "project", "documentation", "docs", "tools", "libraries", "library", "misc", "miscellaneous",
    "other", "others", "general", "blogs", "blog", "tutorials", "videos", "courses", "talks", "books", "links",
    "related", "awesome", "contents", "contributing", "license", "news", "surveys", "survey", "open", "source",
}
#: Page titles that say what kind of page it is, not what it is about ("Getting Started", "Overview").
_GENERIC_TITLE_WORDS = {
    "overview", "introduction", "intro", "concepts", "concept", "features", "started", "start", "quickstart",
    "installation", "install", "installing", "faq", "api", "examples", "example", "tutorial", "tutorials", "guide",
    "guides", "summary", "contents", "index", "home", "readme", "documentation", "docs", "changelog", "release",
    "notes", "contributing", "license", "next", "steps", "welcome", "exercises", "reference", "references",
}
#: Words dropped in front of a nominal ("Efficient Training of …", "Auto Parallelization for …").
_ADJECTIVES = {
    "a", "an", "the", "and", "efficient", "fast", "faster", "easy", "simple", "scalable", "automatic", "automated",
    "auto", "high-performance", "high-throughput", "extremely", "flexible", "general", "generalized", "practical",
    "unified", "new", "novel", "dynamic", "adaptive", "optimal", "system", "systems",
}
#: Nouns of action a title is built on, and their verbs ("Memory Optimizations" → "optimize memory").
_NOMINALS = {
    "optimization": "optimize", "optimizations": "optimize", "management": "manage", "parallelization": "parallelize",
    "partitioning": "partition", "scheduling": "schedule", "compression": "compress", "rematerialization":
    "rematerialize", "offloading": "offload", "sharding": "shard", "checkpointing": "checkpoint", "swapping": "swap",
    "tuning": "tune", "training": "train", "placement": "place", "synchronization": "synchronize",
    "recomputation": "recompute", "quantization": "quantize", "pruning": "prune", "caching": "cache",
    "balancing": "balance", "acceleration": "accelerate",
}
_NOT_GERUNDS = {"learning", "computing", "processing", "programming", "networking", "getting", "string", "during",
                "everything", "nothing", "something", "thing", "things", "king", "spring", "ring", "bring"}
_IRREGULAR = {"us": "use", "reus": "reuse", "mak": "make", "tak": "take", "hav": "have", "giv": "give", "sav": "save",
              "tun": "tune", "scal": "scale", "schedul": "schedule", "shar": "share", "stor": "store", "fus": "fuse",
              "writ": "write", "compar": "compare", "achiev": "achieve", "improv": "improve", "mov": "move",
              "remov": "remove", "leverag": "leverage", "manag": "manage", "overcom": "overcome", "prun": "prune",
              "pipelin": "pipeline", "cach": "cache", "combin": "combine", "serv": "serve", "solv": "solve",
              "resolv": "resolve", "increas": "increase", "decreas": "decrease", "encod": "encode", "decod": "decode",
              "releas": "release", "rul": "rule", "rethink": "rethink"}
#: Imperative page titles ("Run Horovod", "Analyze Performance") become "How do I …?".
_IMPERATIVES = {"run", "analyze", "analyse", "install", "use", "configure", "deploy", "launch", "restore", "debug",
                "monitor", "train", "tune", "scale", "profile", "choose", "save", "load", "enable", "migrate"}
#: Where an object phrase ends ("… giant neural networks using pipeline parallelism" → "giant neural networks").
_CUT_WORDS = {"for", "via", "using", "with", "through", "toward", "towards", "at", "on", "in", "into", "from", "by",
              "without", "that", "which"}
_GITHUB_TITLE = re.compile(r"^GitHub\s*-\s*[\w.-]+/([\w.-]+)\s*(?::\s*(.*))?$", re.IGNORECASE)
_NAME_RE = re.compile(r"[A-Za-z][\w+.\-]*(?: [A-Z0-9][\w+.\-]*){0,2}")
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*(?:-[A-Za-z][a-z]*)*|\d[A-Z]|[a-z]+")
#: Characters an example never contains: markup, and markdown's emphasis and links.
_MARKUP = re.compile(r"[<>\"`*_\[\]{}|\\]")
_URLISH = re.compile(r"/|\bwww\.|\.(?:com|org|io|ai|net|html?|md)\b", re.IGNORECASE)


def _base_verb(word: str) -> str | None:
    """``Breaking`` → ``break``, ``Democratizing`` → ``democratize``; None when not a verb in -ing form."""
    w = word.lower().strip(",;:.")
    if not w.endswith("ing") or not w.isalpha() or w in _NOT_GERUNDS:
        return None
    stem = w[:-3]
    if len(stem) < 2 or not re.search(r"[aeiouy]", stem):
        return None
    if stem in _IRREGULAR:
        return _IRREGULAR[stem]
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsfz":  # running → run
        return stem[:-1]
    if stem.endswith(("iz", "yz", "at", "ut", "uc", "ac", "ic", "bl", "pl", "tl", "dl", "gl", "kl", "rg", "rv", "iv",
                      "av", "ov", "ag", "ur")):  # reducing → reduce, handling → handle
        return stem + "e"
    return stem


def _is_plural(word: str) -> bool:
    w = word.lower()
    return w.endswith("s") and not w.endswith(("ss", "is", "us", "ism", "ics"))


def _lower(words: Sequence[str], keep: set[str]) -> str:
    """Title Case words in lower case, as a person types them; names, acronyms and numbers kept."""
    out = []
    for w in words:
        parts = w.split("-")
        if (w in keep or any(p in keep for p in parts)
                or any(ch.isupper() or ch.isdigit() for p in parts for ch in p[1:]) or any(c.isdigit() for c in w)):
            out.append(w)
        else:
            out.append(w.lower())
    return " ".join(out)


def _object(words: Sequence[str], keep: set[str], *, cut: bool = True, max_words: int = 8) -> str | None:
    """The phrase a verb takes: up to a comma, a preposition (with ``cut``), at most ``max_words``."""
    out: list[str] = []
    for w in words:
        bare = w.strip(",;:.!?()\"'")
        if not bare:
            break
        if cut and out and bare.lower() in _CUT_WORDS:
            break
        if bare.lower() in ("your", "you"):
            bare = {"your": "my", "you": "me"}[bare.lower()]
        out.append(bare)
        if w.rstrip().endswith((",", ";", ":")):
            break
    while out and out[-1].lower() in ("and", "or", "of", "the", "a", "an", "to", "with", "for", "in", "on"):
        out.pop()
    if not out or len(out) > max_words:
        return None
    return _lower(out, keep)


def _split_title(title: str) -> tuple[str | None, str]:
    """(name, description) of ``Name: description`` or ``GitHub - owner/name: description`` titles."""
    t = " ".join(title.split())
    m = _GITHUB_TITLE.match(t)
    if m:
        return m.group(1), (m.group(2) or "").strip()
    for sep in (":", " - ", " – ", " — "):
        head, found, tail = t.partition(sep)
        if found:
            head = re.sub(r"^(?:Meet|Introducing|Announcing)\s+", "", head.strip())
            if (_NAME_RE.fullmatch(head) and any(ch.isupper() for ch in head)
                    and not {w.lower() for w in re.findall(r"[A-Za-z]+", head)} & _GENERIC_TITLE_WORDS):
                return head, tail.strip()
            break
    return None, t


def _named_question(name: str, desc: str, keep: set[str]) -> str | None:
    """A question about what the system ``name`` does, from its title's description (None: no pattern fits)."""
    does = "do" if " " in name and _is_plural(name.split()[-1]) else "does"
    words = desc.split()
    if not words:
        return None
    verb = _base_verb(words[0])
    if verb and verb != "get":  # "breaking the GPU memory wall for …" → "break the GPU memory wall"
        obj = _object(words[1:], keep)
        return f"How {does} {name} {verb} {obj}?" if obj else None
    for i, w in enumerate(words[:5]):  # "Memory Optimizations Toward …" → "optimize memory"
        verb = _NOMINALS.get(w.lower().strip(",;"))
        if verb is None:
            continue
        mods = [m for m in words[:i] if m.lower() not in _ADJECTIVES]
        rest = words[i + 1 :]
        obj = None
        if rest and rest[0].lower() == "of":
            obj = _object(rest[1:], keep)
        elif mods and (not rest or rest[0].lower() in _CUT_WORDS):
            obj = _lower(mods[-2:], keep)
        elif not mods and rest and rest[0].lower() in ("for", "toward", "towards"):
            obj = _object(rest[1:], keep)
        if obj:
            return f"How {does} {name} {verb} {obj}?"
        break
    m = re.search(r"\b(?:using|via)\s+(.+)$", desc, re.IGNORECASE)
    obj = _object(m.group(1).split(), keep, max_words=4) if m else None
    return f"How {does} {name} use {obj}?" if obj else None


def _framework(d: DocRecord) -> str | None:
    """The project a documentation page belongs to, from its list section ("Horovod documentation")."""
    for t in d.topics:
        m = re.fullmatch(r"\s*(.+?)\s+(?:documentation|docs)\s*", t, re.IGNORECASE)
        if m and len(m.group(1).split()) <= 3:
            return m.group(1)
    return None


def _docs_question(title: str, fw: str, keep: set[str]) -> str | None:
    """A question from a documentation page's title, asked about its project ``fw``."""
    t = " ".join(title.split())
    words = t.split()
    lowered = {w.lower() for w in re.findall(r"[A-Za-z]+", t)}
    if not words or len(words) > 8 or lowered & _GENERIC_TITLE_WORDS or _URLISH.search(t) or ":" in t:
        return None
    has_fw = fw.lower() in t.lower()
    m = re.fullmatch(r"(\S+(?: \S+){0,2}) (with|on) (\S+(?: \S+){0,2})", t)
    if m and not _base_verb(words[0]):  # "Horovod with PyTorch", "AdaSum with Horovod", "Horovod on Ray"
        return f"How do I use {m.group(1)} {m.group(2)} {m.group(3)}?"
    verb = _base_verb(words[0])
    if verb and verb != "get":  # "Handling Failures and Node Preemption"
        obj = _object(words[1:], keep, cut=not has_fw)
        if not obj:
            return None
        return f"How can I {verb} {obj}?" if has_fw else f"How does {fw} {verb} {obj}?"
    if words[0].lower() in _IMPERATIVES:  # "Run Horovod", "Analyze Performance"
        obj = _object(words[1:], keep, cut=False)
        if not obj:
            return None
        return f"How do I {words[0].lower()} {obj}?" if has_fw else f"How do I {words[0].lower()} {obj} in {fw}?"
    if has_fw:  # "Elastic Horovod"
        return f"What is {t}?" if len(words) <= 4 else None
    if len(words) == 1:
        if t in keep:  # another project's name: "Horovod" in the Ray Train docs
            return f"How do I use {t} with {fw}?"
        return f"What is {t} in {fw}?" if re.fullmatch(r"[A-Za-z][\w+\-]*", t) else None
    if len(words) > 5 or not all(_PLAIN_WORD.fullmatch(w) for w in words):
        return None
    head = words[words.index("of") - 1] if "of" in words[1:] else words[-1]
    return f"What {'are' if _is_plural(head) else 'is'} {_lower(words, keep)} in {fw}?"


def _topic_question(topic: str) -> str | None:
    """``Pipeline Parallelism`` → ``What is pipeline parallelism?`` (only sections that name a technique)."""
    words = re.findall(r"[A-Za-z]+", topic)
    if (len(words) < 2 or len(words) > 3 or "/" in topic or "&" in topic
            or {w.lower() for w in words} & (_GENERIC_TOPIC_WORDS | {"and", "or", "training", "learning"})):
        return None
    if not words[-1].lower().endswith(("ism", "tion", "ing")):
        return None
    return f"What is {' '.join(w if w.isupper() and len(w) > 1 else w.lower() for w in topic.split())}?"


def example_candidates(docs: Iterable[DocRecord]) -> list[Example]:
    """Questions a person would ask that the index should answer, made from its documents, best first.

    * a title ``Name: description`` gives a question about what ``Name`` does, read from the
      description (``ZeRO: Memory Optimizations Toward …`` → "How does ZeRO optimize memory?",
      ``GPipe: Efficient Training of Giant Neural Networks …`` → "How does GPipe train giant neural
      networks?"), else "How does Name work?";
    * a documentation page's title, asked about its project ("Tensor Fusion" in the Horovod docs →
      "What is tensor fusion in Horovod?", "Handling Failures …" in the Ray Train docs → "How does
      Ray Train handle failures …?");
    * a paper title that opens with a verb ("Reducing Activation Recomputation in …" → "How can I
      reduce activation recomputation in …?");
    * a list section naming a technique that several documents share ("What is pipeline parallelism?").

    The four kinds alternate so that the first few candidates cover different documents; catalog
    cards (no text) and titles that are URLs or file paths give nothing. Pure: no index access.
    """
    full = sorted((d for d in docs if not d.is_card), key=lambda d: (d.kind != "paper", -(d.n_chunks or 0), d.title))
    names: dict[str, DocRecord] = {}
    for d in full:
        name, _ = _split_title(d.title)
        if name:
            names.setdefault(name.lower(), d)
    # Words kept as written (case-sensitive): the names, their first words ("Megatron" of
    # Megatron-LM) and the projects; every other Title Case word is lower-cased.
    keep = {n for d in full if (n := _split_title(d.title)[0] or _framework(d))}
    keep |= {re.split(r"[-\s]", n)[0] for n in keep}

    specific: list[Example] = []
    plain: list[Example] = []
    titled: list[Example] = []
    by_fw: dict[str, list[Example]] = {}
    used: set[str] = set()
    for d in full:
        fw = _framework(d)
        name, desc = _split_title(d.title)
        if name and name.lower() not in used:
            used.add(name.lower())
            q = _named_question(name, desc, keep)
            if q:
                specific.append(Example(q, d.doc_id, name))
            elif len(name) <= 30:
                does = "do" if " " in name and _is_plural(name.split()[-1]) else "does"
                plain.append(Example(f"How {does} {name} work?", d.doc_id, name))
            continue
        if name:
            continue
        if fw and d.kind == "docs":
            q = _docs_question(d.title, fw, keep)
            if q and not _MARKUP.search(q):
                by_fw.setdefault(fw, []).append(Example(q, d.doc_id, fw))
            continue
        words = d.title.split()
        verb = _base_verb(words[0]) if words and not _URLISH.search(d.title) else None
        if verb and verb != "get" and d.kind == "paper":
            obj = _object(words[1:], keep, cut=False, max_words=7)
            if obj:
                titled.append(Example(f"How can I {verb} {obj}?", d.doc_id))
        elif d.kind == "paper" and 2 <= len(words) <= 4 and all(_PLAIN_WORD.fullmatch(w) for w in words) and (
                words[-1].lower() in _NOMINALS or words[-1].lower().endswith(("ism", "tion", "ing"))):
            titled.append(Example(f"What is {_lower(words, keep)}?", d.doc_id))  # "Dynamic Tensor Rematerialization"

    docs_qs: list[Example] = []  # one page per project in turn: the largest projects first
    queues = sorted(by_fw.values(), key=len, reverse=True)
    while any(queues):
        for queue in queues:
            if queue:
                docs_qs.append(queue.pop(0))

    counts = Counter(t.strip() for d in full for t in dict.fromkeys(d.topics) if t.strip())
    topic_qs = [Example(q) for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))
                if n >= 2 and (q := _topic_question(t))]

    groups = [[e for e in g if not _MARKUP.search(e.question)] for g in (specific + plain, docs_qs, titled, topic_qs)]
    out: list[Example] = []
    seen: set[str] = set()
    for i in range(max(map(len, groups), default=0)):
        for group in groups:
            if i < len(group) and group[i].question.lower() not in seen:
                seen.add(group[i].question.lower())
                out.append(group[i])
    return out


def answers_example(example: Example, answer: Answer) -> bool:
    """Whether ``answer`` answers the example question: not refused, cited, and about its subject."""
    if answer.refused or not answer.citations:
        return False
    if example.doc_id is None and example.subject is None:
        return True
    if any(c.doc_id == example.doc_id for c in answer.citations):
        return True
    subject = (example.subject or "").lower()
    return bool(subject) and (subject in answer.answer.lower() or any(subject in (c.title or "").lower()
                                                                      for c in answer.citations))


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
    return settings.ui.password or env.get("DMLQA_UI_PASSWORD") or None


# -- the service behind the app -----------------------------------------------------------------------


def candidate_sentences(version: IndexVersion, block: int = 2000) -> list[str]:
    """The distinct sentences the extractive answerer may quote from ``version`` (full-text documents)."""
    from dmlqa.extract.sentences import MAX_CHARS, MIN_CHARS  # the answerer's bounds of a quotable sentence
    from dmlqa.query.answer import sentences_of

    out: dict[str, None] = {}
    for start in range(0, version.size, block):
        records = version.chunks(range(start, min(version.size, start + block)))
        for row in sorted(records):
            r = records[row]
            d = version.docs.get(r.doc_id)
            if d is None or d.is_card:
                continue
            for s in sentences_of(r.text):
                if MIN_CHARS <= len(s) <= MAX_CHARS:
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
        self._examples_thread: threading.Thread | None = None
        #: How long the last computation of example questions took (seconds), for the log and tests.
        self.examples_seconds: float | None = None
        self._warm: dict[str, Any] = {}

    @property
    def asker(self) -> Asker:
        with self._lock:
            if self._asker is None:
                from dmlqa.query.answer import Asker
                from dmlqa.query.llm import LLMBackend, LLMConfig

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
        from dmlqa.pipeline.home import index_status

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
            from dmlqa.index.versions import current_version

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
        from dmlqa.index.versions import current_version

        name = current_version(self.settings.index_dir)
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
        from dmlqa.query.answer import AskOptions

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
                    if answers_example(ex, self.asker.ask(ex.question, AskOptions(use_llm=False))):
                        chosen.append(ex.question)
                except Exception:  # noqa: BLE001 - an example is optional
                    log.warning("example question %r failed", ex.question, exc_info=True)
                if len(chosen) == N_EXAMPLES:
                    break
            self.examples_seconds = time.perf_counter() - t0
            log.info("%d example questions for %s in %.2f s", len(chosen), version.name, self.examples_seconds)
            self._examples = {version.name: chosen}
            return chosen

    def answer(self, question: str, filters: Filters, *, use_llm: bool = True) -> Answer:
        """A complete answer (the HTTP API); transient failures while the index is swapped are retried once."""
        from dmlqa.query.answer import AskOptions

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
                    use_llm: bool = True, previous: str | None = None) -> Iterator[str]:
        """The HTML of the answer as it grows; the last item is the final answer with its sources."""
        from dmlqa.query.answer import AskOptions

        options = AskOptions(filters=filters, use_llm=use_llm)
        for attempt in (1, 2):
            streamed: list[str] = []
            try:
                stream = self.asker.stream(question, options, previous=previous)
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
        from dmlqa.query.related import related

        searcher = self.asker.searcher
        result = related(searcher, query, k=k, since=since)
        target = None
        if result.target:
            d = searcher.version.docs.get(result.target)
            target = {"title": d.title, "url": d.url} if d else None
        rows = related_rows(result)
        notes = [result.notice, undated_note(result.undated_excluded, what=f"“since {since}”")]
        return rows, related_html(rows, "; ".join(n for n in notes if n) or None, target=target)


# -- one chat turn -----------------------------------------------------------------------------------------


def chat_steps(service: ChatService, message: str | None, history: Sequence[Any] | None, asked: Sequence[str] | None,
               filters: tuple[Filters, str | None]) -> Iterator[tuple[list[Any], list[str], bool, str]]:
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


# -- the Gradio app ---------------------------------------------------------------------------------------

CSS = """
.dmlqa-answer .dmlqa-text { line-height: 1.5; }
.dmlqa-answer .dmlqa-text p.dmlqa-p { margin: 0 0 .45em 0; }
.dmlqa-answer .dmlqa-text ul { list-style: disc outside; padding-left: 1.5em; margin: .2em 0 .5em 0; }
.dmlqa-answer .dmlqa-text ol { list-style: decimal outside; padding-left: 1.7em; margin: .2em 0 .5em 0; }
.dmlqa-answer .dmlqa-text li { margin: .15em 0; display: list-item; }
.dmlqa-question { white-space: normal; overflow-wrap: anywhere; }
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

#: The chat scrolls as a chat does: to the newest message as it arrives, but never so far that the
#: newest question leaves the top of the view (a long answer is then read from its start). Gradio's
#: own autoscroll (always to the bottom) is off; scrolling by hand stops the following until the
#: next question.
CHAT_JS = """
() => {
  const PAD = 8;
  let count = -1, userMoved = false, queued = false;
  const scroller = (chat, from) => {
    for (let e = from; e && e !== chat.parentElement; e = e.parentElement) {
      const oy = getComputedStyle(e).overflowY;
      if ((oy === 'auto' || oy === 'scroll') && e.scrollHeight > e.clientHeight + 1) return e;
    }
    return null;
  };
  const follow = () => {
    queued = false;
    const chat = document.getElementById('dmlqa-chat');
    if (!chat) return;
    const questions = chat.querySelectorAll('.dmlqa-question');
    if (questions.length !== count) { count = questions.length; userMoved = false; }
    if (!questions.length || userMoved) return;
    const question = questions[questions.length - 1];
    const row = question.closest('.message-row') || question;
    const box = scroller(chat, row);
    if (!box) return;
    const top = row.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop - PAD;
    const target = Math.max(0, Math.min(top, box.scrollHeight - box.clientHeight));
    if (Math.abs(box.scrollTop - target) > 1) box.scrollTop = target;
  };
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(follow); } };
  window.dmlqaFollow = follow;
  new MutationObserver(later).observe(document.body, {childList: true, subtree: true, characterData: true});
  const byHand = (event) => {
    if (event.target && event.target.closest && event.target.closest('#dmlqa-chat')) userMoved = true;
  };
  document.addEventListener('wheel', byHand, {passive: true});
  document.addEventListener('touchmove', byHand, {passive: true});
  window.addEventListener('resize', later);
}
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
    def respond(message: str | None, history: list | None, asked: list | None, kinds, since, until, topics,  # noqa: ANN001, ANN202
                undated=False):  # noqa: ANN001
        filters = make_filters(kinds, since, until, topics, undated)
        for turns, questions, clear_box, notice in chat_steps(service, message, history, asked, filters):
            yield turns, questions, ("" if clear_box else gr.update()), notice

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
        years = year_choices(f)
        return (
            gr.update(choices=list(f.kinds)),
            gr.update(choices=list(f.topics)),
            gr.update(choices=years), gr.update(choices=years), gr.update(choices=years),
            service.status(),
        )

    def load_examples():  # noqa: ANN202
        # Its own event: the page, its filters and status never wait for the examples, which are
        # computed once per index version (in the background from the app's start).
        return gr.update(examples=_examples_value(service.examples()))

    with gr.Blocks(title="dmlqa: distributed ML Q&A", analytics_enabled=False) as demo:
        gr.Markdown("## dmlqa: distributed machine learning, with sources")
        with gr.Tabs(selected="chat") as tabs:
            with gr.Tab("Chat", id="chat"):
                # No fixed height: the conversation grows with its messages up to the window's height
                # (less the input row), then scrolls inside (CHAT_JS keeps the newest question in view).
                chatbot = gr.Chatbot(
                    label="Answers", show_label=False, elem_id="dmlqa-chat", height=None, min_height=360,
                    max_height="max(360px, calc(100vh - 300px))", autoscroll=False, placeholder=PLACEHOLDER,
                    examples=_examples_value(service.examples(wait=False)), latex_delimiters=[],
                    feedback_options=None, buttons=["copy"],
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
                        undated = gr.Checkbox(False, label="keep documents of unknown year", scale=1,
                                              elem_id="dmlqa-undated")
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

        chat_inputs = [box, chatbot, asked, kinds, since, until, topics, undated]
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
        demo.load(on_load, None, [kinds, topics, since, until, rel_since, status], api_visibility="private")
        demo.load(load_examples, None, chatbot, api_visibility="private")

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
            if answer.undated_excluded:
                body["undated_excluded"] = answer.undated_excluded
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
        theme=_theme(gr), css=CSS, js=CHAT_JS, footer_links=["api"], run_history=False,
    )
    return demo
