"""The chat app's HTML: answers with ``[n]`` links and their sources, messages, related papers, status.

Pure functions from the library's records (:class:`~dmlqa.models.Answer`, the index's document
records, the related items, the status dictionary) to HTML, tested without a browser. Everything
that reaches the page is escaped here: document titles, passages and error messages come from the
web, and a question may contain markup. Links are emitted only for ``http(s)`` URLs. Each fragment
is one line: Gradio's chat renders messages as markdown, and an HTML block without a newline is
passed through as HTML, never read as markdown.
"""

from __future__ import annotations

import base64
import html
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

# The charts are drawn by their own module; the service takes them from here with the rest of the HTML.
from dmlqa.app.ui_map import citation_map_html, year_chart_html  # noqa: F401
from dmlqa.errors import DmlqaError, IndexMissingError
from dmlqa.models import Answer, Citation, is_linkable, view_path

#: A pasted question is shown in the chat up to this many characters.
MAX_SHOWN_QUESTION = 600
#: Quotes under an answer are cut to about this many characters.
QUOTE_CHARS = 260

NO_INDEX_MESSAGE = (
    "No index has been built yet. Build one with <code>dmlqa build</code> (or "
    "<code>dmlqa --home DIR build</code>), see the README's Quick start; the app picks it up "
    "without a restart."
)


class SourceDoc(Protocol):
    """What a citation's link needs of its document (an index ``DocRecord``): where its text came from."""

    source_url: str
    content_type: str


# -- escaping and links ---------------------------------------------------------------------------


def esc(text: object) -> str:
    """HTML-escape anything for element content or a quoted attribute."""
    return html.escape("" if text is None else str(text), quote=True)


def safe_url(url: str | None) -> str | None:
    """``url`` (stripped) when it may be a link (:func:`dmlqa.models.is_linkable`), else None."""
    return url.strip() if url and is_linkable(url) else None


def source_href(url: str | None, page: int | None = None, *, source_url: str | None = None,
                content_type: str | None = None) -> str | None:
    """Where a citation opens: its link, at the page (``#page=N``) for a PDF passage.

    ``url`` is the document's link (:func:`dmlqa.models.shown_url`), the address its text came from,
    the same as ``source_url`` for a fetched document; only a PDF viewer understands ``#page=N``.
    """
    base = safe_url(url)
    if page and content_type == "pdf":
        pdf = safe_url(source_url) or base
        if pdf:
            s = urlsplit(pdf)
            return urlunsplit((s.scheme, s.netloc, s.path, s.query, f"page={int(page)}"))
    return base


#: The app's own archived view (:func:`dmlqa.models.view_path`, percent-encoded): the one relative link.
_VIEW_PATH = re.compile(r"/source/[!#-~]+")


def link(href: str | None, text_html: str, *, cls: str = "", title: str = "") -> str:
    """An ``<a>`` opening in a new tab when ``href`` is a safe http(s) URL or the app's archived view of a
    source (``/source/...``), else a plain ``<span>``.

    ``text_html`` must already be escaped; ``title`` is escaped here.
    """
    attrs = f' class="{esc(cls)}"' if cls else ""
    attrs += f' title="{esc(title)}"' if title else ""
    safe = href if href and _VIEW_PATH.fullmatch(href) else safe_url(href)
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


def citation_hrefs(citations: Sequence[Citation], docs: Mapping[str, SourceDoc] | None = None) -> dict[int, str | None]:
    """``n`` → the address of citation ``n`` (see :func:`source_href`); ``docs`` gives PDF source URLs."""
    out: dict[int, str | None] = {}
    for c in citations:
        d = docs.get(c.doc_id) if docs and c.doc_id else None
        out[c.n] = source_href(c.url, c.page, source_url=d.source_url if d else None,
                               content_type=d.content_type if d else None)
    return out


def view_hrefs(citations: Sequence[Citation], originals: Mapping[int, str | None]) -> dict[int, str | None]:
    """``n`` → where citation ``n`` opens: the app's archived view of its page with the quote marked
    (:func:`dmlqa.models.view_path`); a citation without a doc id keeps its address (``originals``)."""
    return {c.n: view_path(c.doc_id, c.page, c.quote) if c.doc_id else originals.get(c.n) for c in citations}


#: A list item line: "- ", "* ", "• " (bullets) or "1. ", "2) " (numbered); the extractive answerer
#: writes list items it quotes as "- item [n]", one per line, and LLMs write markdown lists.
_BULLET_LINE = re.compile(r"^\s*[-*•▪●◦‣]\s+(?=\S)")
_NUMBER_LINE = re.compile(r"^\s*\d{1,2}[.)]\s+(?=\S)")
#: A line that opens or closes a fenced code block: the extractive answerer quotes code between them.
_FENCE_LINE = re.compile(r"^\s*```")
#: An inline code span: shown as code, its brackets never read as citation markers.
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


def _code_block(lines: Sequence[str]) -> str:
    # One line of HTML (see _one_line): the block's line breaks are written as character references,
    # which <pre> shows as breaks; indentation is kept, and nothing in it is linked.
    return f'<pre class="dmlqa-code"><code>{"&#10;".join(esc(line) for line in lines)}</code></pre>'


def rich_text(text: str, inline: Callable[[str], str] = esc) -> str:
    """Answer text as one line of HTML: list lines become ``<ul>``/``<ol>``, the rest paragraphs.

    Lines starting with ``- ``/``* ``/``• `` are bullets (one line is enough); two or more
    consecutive ``1. ``/``2) `` lines are a numbered list (a single one is ordinary text); a blank
    line separates paragraphs and other line breaks stay breaks. Lines between ````` fences are a
    code block, shown as they are (indentation kept, never linked). ``inline`` escapes the text of
    each other line (and may add links); nothing in ``text`` is ever read as markup.
    """
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kinds = []
    fenced = False
    for line in lines:
        if _FENCE_LINE.match(line):
            kinds.append("fence")
            fenced = not fenced
        elif fenced:
            kinds.append("code")
        elif not line.strip():
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

    code: list[str] | None = None  # the lines of the code block being read
    for line, kind in zip(lines, kinds, strict=True):
        if kind == "fence":
            close()
            if code is None:
                code = []
            else:
                out.append(_code_block(code))
                code = None
        elif kind == "code":
            code.append(line)  # type: ignore[union-attr]
        elif kind == "blank":
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
    if code:  # a block still open when the text ends (an answer still streaming)
        out.append(_code_block(code))
    return "".join(out)


def text_with_links(text: str, citations: Sequence[Citation], hrefs: Mapping[int, str | None]) -> str:
    """Escape ``text``, turn each ``[n]`` that names a citation into a link to its source, and
    render its lists as lists and its code as code (see :func:`rich_text`): ``datasets[0]`` in code stays text."""
    titles = {c.n: c.title for c in citations}

    def marker(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n not in titles:
            return m.group(0)
        return link(hrefs.get(n), f"[{n}]", cls="dmlqa-cite", title=f"[{n}] {titles[n]}")

    def inline(line: str) -> str:
        # escaping leaves "[", digits, "]" and backticks alone, so markers and code spans survive it
        out, pos = [], 0
        line = esc(line)
        for m in _INLINE_CODE.finditer(line):
            out += [_MARKER.sub(marker, line[pos : m.start()]), f"<code>{m.group(1)}</code>"]
            pos = m.end()
        return "".join([*out, _MARKER.sub(marker, line[pos:])])

    return rich_text(text, inline)


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


def sources_html(citations: Sequence[Citation], hrefs: Mapping[int, str | None], *, heading: str = "Sources",
                 originals: Mapping[int, str | None] | None = None) -> str:
    """The numbered sources: title (linked to ``hrefs``: the archived view), the original address
    (``originals``, when it differs), venue/year, page and a short quoted passage."""
    if not citations:
        return ""
    items = []
    for c in citations:
        title = link(hrefs.get(c.n), esc(c.title or c.url), cls="dmlqa-source-title")
        original = (originals or {}).get(c.n)
        if original and original != hrefs.get(c.n):  # the archived view above, the live address here
            title += " " + link(original, "(original)", cls="dmlqa-original")
        meta = facts(c.venue, c.year, c.page)
        quote = shorten(c.quote, QUOTE_CHARS)
        items.append(
            f'<li class="dmlqa-source" data-n="{c.n}"><span class="dmlqa-n">[{c.n}]</span> {title}'
            + (f' <span class="dmlqa-facts">{esc(meta)}</span>' if meta else "")
            + (f'<blockquote class="dmlqa-quote">“{esc(quote)}”</blockquote>' if quote else "")
            + "</li>"
        )
    return f'<div class="dmlqa-sources"><strong>{esc(heading)}</strong><ul>{"".join(items)}</ul></div>'


def answer_html(answer: Answer, docs: Mapping[str, SourceDoc] | None = None, *, extra_notice: str | None = None) -> str:
    """One chat answer: text with linked ``[n]`` markers, notices, sources, and who answered."""
    originals = citation_hrefs(answer.citations, docs)
    hrefs = view_hrefs(answer.citations, originals)
    body = text_with_links(answer.answer, answer.citations, hrefs)
    parts = [f'<div class="dmlqa-answer"><div class="dmlqa-text">{body}</div>']
    undated = undated_note(answer.undated_excluded,
                           hint=" (tick “keep documents of unknown year” under Filters to include them)")
    for notice in (extra_notice, answer.notice, undated):
        if notice:
            parts.append(f'<div class="dmlqa-notice">⚠ {esc(notice)}</div>')
    parts.append(sources_html(answer.citations, hrefs, heading="Nearest sources" if answer.refused else "Sources",
                              originals=originals))
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


def undated_note(count: int, *, what: str = "the year filter", hint: str = "") -> str | None:
    """Why fewer documents were searched: ``count`` documents of unknown year left out by a year filter."""
    if count <= 0:
        return None
    docs = "1 document of unknown year was" if count == 1 else f"{count:,} documents of unknown year were"
    return f"{docs} left out by {what}{hint}"


# -- related papers and status ------------------------------------------------------------------------


def related_rows(result: Any) -> list[dict[str, Any]]:
    """A ``RelatedResult``'s items as plain rows (kept per session for "ask about this paper")."""
    return [
        {"doc_id": r.doc_id, "title": r.title, "url": r.url, "year": r.year, "venue": r.venue, "kind": r.kind,
         "reason": r.reason, "score": round(float(r.score), 4)}
        for r in result.items
    ]


CITATIONS_SHOWN = 8  # links per "cites" / "cited by" line; the count says how many there are


def citations_html(graph: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Two lines under the target: "Cites N in the knowledge base: …" and "Cited by M: …", linked;
    the citing sentence is each link's tooltip."""
    lines = []
    for key, label in (("cites", "Cites"), ("cited_by", "Cited by")):
        items = list(graph.get(key) or ())
        shown = ", ".join(
            link(i.get("url"), esc(i.get("title") or i.get("url")), title=i.get("context") or "")
            + (f" ({esc(i.get('year'))})" if i.get("year") else "")
            for i in items[:CITATIONS_SHOWN]
        )
        more = f", and {len(items) - CITATIONS_SHOWN} more" if len(items) > CITATIONS_SHOWN else ""
        lines.append(f'<p class="dmlqa-{key.replace("_", "-")}"><strong>{label} {len(items)}</strong>'
                     f' in the knowledge base{": " + shown + more if items else ""}</p>')
    return "".join(lines)


def related_html(rows: Sequence[Mapping[str, Any]], notice: str | None = None, *,
                 target: Mapping[str, Any] | None = None,
                 graph: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> str:
    """The related-papers table: linked title, year/venue, kind, why, and an ask button per row.

    ``target`` is the indexed document the query named (its title and URL head the table);
    ``graph`` its citations in the knowledge base (``cites`` and ``cited_by`` items), shown under it.
    """
    head = f'<div class="dmlqa-notice">⚠ {esc(notice)}</div>' if notice else ""
    if target:
        title = link(target.get("url"), esc(target.get("title") or target.get("url")))
        head += f'<p class="dmlqa-target">Related to {title}</p>'
        if graph is not None:
            head += citations_html(graph)
    if not rows:
        return _one_line(head + '<p class="dmlqa-empty">No related documents.</p>')
    body = []
    for i, r in enumerate(rows):
        title = link(r.get("url"), esc(r.get("title") or r.get("url")), cls="dmlqa-related-title")
        if r.get("doc_id"):
            title += " " + link(view_path(r["doc_id"]), "(archived)", cls="dmlqa-view")
        body.append(
            f'<tr data-row="{i}"><td>{i + 1}</td><td>{title}</td><td>{esc(facts(r.get("venue"), r.get("year")))}</td>'
            f'<td>{esc(r.get("kind") or "")}</td><td class="dmlqa-why">{esc(r.get("reason") or "")}</td>'
            f'<td><button type="button" class="dmlqa-ask-about" data-row="{i}">Ask about this paper</button></td></tr>'
        )
    table = ('<table class="dmlqa-related"><thead><tr><th>#</th><th>title</th><th>year / venue</th><th>kind</th>'
             f'<th>why</th><th></th></tr></thead><tbody>{"".join(body)}</tbody></table>')
    return _one_line(head + table)


def last_run_html(history: Mapping[str, Any] | None) -> str:
    """The last build run's outcome and how many failed in a row (what a person watching a schedule needs),
    from :meth:`dmlqa.KnowledgeBase.run_history` (or the status, which carries the same keys)."""
    if not history or history.get("ok") is None:
        return ""
    if history["ok"]:
        return '<p class="dmlqa-last-run">Last build run: ok.</p>'
    in_a_row = int(history.get("consecutive_failures") or 0)
    streak = f" ({in_a_row} failed runs in a row)" if in_a_row > 1 else ""
    groups = (history.get("last_failures") or {}).get("by_reason") or []
    reasons = "; ".join(f"{g['count']} {g['reason']}" for g in groups)
    return (f'<p class="dmlqa-last-run dmlqa-failed-run">Last build run failed{esc(streak)}: '
            f'{esc(history.get("last_error") or "")}' + (f"<br>Failures: {esc(reasons)}" if reasons else "") + "</p>")


def status_html(status: Mapping[str, Any] | None, error: str | None = None,
                history: Mapping[str, Any] | None = None) -> str:
    """The index's facts and the last run; with no index, how to build one (and ``history``'s last run)."""
    if status is None:
        return _one_line(f'<div class="dmlqa-status dmlqa-no-index"><p>{NO_INDEX_MESSAGE}</p>'
                         + (f'<p class="dmlqa-facts">{esc(error)}</p>' if error else "")
                         + last_run_html(history) + "</div>")
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
    return _one_line(f'<div class="dmlqa-status"><table class="dmlqa-status-table">{table}</table>'
                     f"{last_run_html(status)}{fail}</div>")


def friendly_error(exc: BaseException) -> str:
    """A message for the page (never a traceback)."""
    if isinstance(exc, IndexMissingError):
        return "No index has been built yet: run `dmlqa build`, then ask again (no restart needed)."
    if isinstance(exc, DmlqaError):
        return str(exc)
    if isinstance(exc, sqlite3.Error | OSError):
        return "The index was being replaced while answering; please ask again in a moment."
    return f"Something went wrong while answering ({type(exc).__name__}); the details are in the server log."


# -- the archived view of a source (GET /source/<doc_id>) -------------------------------------------------
# A plain page, not a Gradio one: the image of the archived PDF page with the quote painted over, beside
# the page's text with the quote in <mark>. The document is third-party content: everything from it is
# escaped, and the page is served under SOURCE_HEADERS, whose policy runs no script at all.

#: No script, frame or plugin, nothing fetched from elsewhere: the page image is a data URI, the style inline.
SOURCE_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
              "form-action 'none'; frame-ancestors 'self'")
SOURCE_HEADERS = {"Content-Security-Policy": SOURCE_CSP, "X-Content-Type-Options": "nosniff",
                  "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
_SOURCE_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}"
    "h1{font-size:1.25rem;margin:0 0 .25rem}.dmlqa-facts{color:#555;margin:0 0 1rem}.dmlqa-notice{color:#8a5a00}"
    ".dmlqa-source-view{display:flex;gap:1.5rem;align-items:flex-start;flex-wrap:wrap}"
    ".dmlqa-page-image{max-width:min(100%,800px);border:1px solid #ccc;background:#fff}"
    ".dmlqa-page-text{flex:1;min-width:20rem;max-width:60rem;white-space:pre-wrap;line-height:1.45;"
    "background:#fff;border:1px solid #ddd;padding:1rem;font-family:Georgia,serif}"
    "mark{background:#ffe066;padding:0 .1em}"
)


def _source_page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_SOURCE_STYLE}</style>'
            f"</head><body>{body}</body></html>")


def marked_text(text: str, span: tuple[int, int] | None) -> str:
    """``text`` escaped with ``span`` of it in ``<mark>``, escaped piece by piece (the offsets are the text's)."""
    if not span:
        return esc(text)
    start, end = span
    return f'{esc(text[:start])}<mark id="quote">{esc(text[start:end])}</mark>{esc(text[end:])}'


def source_html(view: Any, quote: str | None) -> str:
    """The archived view of a source (a ``dmlqa.query.show.SourceView``), its page image when it has one."""
    where = f" · page {view.page} of {view.pages}" if view.page and view.pages else ""
    original = safe_url(view.url)
    address = (f'<a href="{esc(original)}" rel="noopener noreferrer nofollow">original address</a>' if original
               else esc(view.url))
    notes = [view.notice] if view.notice else []
    if quote and not view.quote_found:
        notes.append("the quote was not found in this text")
    head = (f"<h1>{esc(view.title)}</h1><p class=\"dmlqa-facts\">archived copy of {esc(view.doc_id)}{esc(where)} · "
            f"{address}</p>" + "".join(f'<p class="dmlqa-notice">⚠ {esc(n)}</p>' for n in notes))
    image = ""
    if view.image:
        data = base64.b64encode(view.image).decode("ascii")
        image = (f'<img class="dmlqa-page-image" alt="page {esc(view.page)} of the archived PDF" '
                 f'src="data:image/png;base64,{data}">')
    text = (f'<div class="dmlqa-page-text" data-quote-found="{str(view.quote_found).lower()}">'
            f"{marked_text(view.text, view.quote_span)}</div>")
    return _source_page(f"{view.title}{where}", f'{head}<div class="dmlqa-source-view">{image}{text}</div>')


def source_error_html(status: int, message: str) -> str:
    """The page of a source view that cannot be shown (404: no such document or page)."""
    heading = {404: "Not in the knowledge base", 400: "Bad request", 401: "Log in first"}.get(status, "Unavailable")
    return _source_page(heading, f"<h1>{esc(heading)}</h1><p>{esc(message)}</p>")

