"""What the ``dmlqa`` command prints: rich tables and lines for people, JSON for scripts, progress bars.

Kept apart from :mod:`dmlqa.app.cli` so the commands read as "parse flags, call the library, render":
every function here takes what a :class:`dmlqa.KnowledgeBase` method returned and only reads its
attributes. Messages and notes go to stderr (``err``), results to stdout (``out``), so ``--json`` and
``--format bibtex`` output stays valid whatever else is said.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from dmlqa.models import Answer, Hit

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)  # messages stay one greppable line

#: C0 controls but tab and newline, DEL, C1: shown as symbols, never passed to the terminal as they are.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control_picture(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


def visible(value: object) -> str:
    """``value`` as a str whose control characters are shown (ESC as ``␛``), never obeyed.

    A title holding ``ESC ]8;;URL`` would otherwise be a terminal hyperlink, ``ESC [2J`` would clear
    the screen; rich passes ESC through even in a :class:`~rich.text.Text`.
    """
    return _CONTROLS.sub(_control_picture, str(value))


def plain(value: object, style: str = "") -> Text:
    """``value`` as rich prints it literally; for everything a document or a user gave.

    Titles, URLs, quotes, authors, venues, errors and paths go into lines, tables and table titles
    through this. A str would be read as console markup: a title with ``[/bold]`` ends the command
    in a MarkupError, ``[link=https://evil.example/]GPipe[/link]`` becomes a terminal hyperlink and
    ``[pdf]`` vanishes. A :class:`~rich.text.Text` is never parsed (nor is a str that
    ``Text.assemble`` joins to it), and ``style`` applies to the whole value.
    """
    return Text(visible(value), style=style)


def _labelled(label: str, style: str, message: object) -> Text:
    """``label message``, the label styled (``error:`` red), the message plain."""
    return Text.assemble((label, style), " ", plain(message))

#: A build with no network fails every resource: a summary says more than 181 rows.
MAX_FAILED_ROWS = 25
#: Bad records of an added JSON Lines file shown by `dmlqa add` (the build lists them all).
MAX_BAD_RECORDS = 10


def fail(message: str, code: int = 1) -> None:
    """``error: message`` on stderr and exit ``code`` (1: the command failed, 2: a bad argument)."""
    err.print(_labelled("error:", "red", message), highlight=False)  # a path or value may hold [brackets]
    raise typer.Exit(code)


def print_json(obj: Any) -> None:
    """One JSON document on one line of stdout (non-ASCII kept as is)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def note(message: str) -> None:
    err.print(_labelled("note:", "yellow", message), highlight=False)  # "[arxiv:…]" is no markup


def warning(message: str) -> None:
    err.print(_labelled("warning:", "yellow", message), highlight=False)


def say(message: str) -> None:
    """A plain line on stderr (banners, "stopped"): stdout stays for results."""
    err.print(plain(message), highlight=False)


def note_undated(count: int, since: int | None, until: int | None) -> None:
    """One stderr line when a year filter left out documents of unknown year (stdout stays clean)."""
    if count <= 0:
        return
    flags = " ".join(f"--{name} {value}" for name, value in (("since", since), ("until", until)) if value)
    what = "1 document of unknown year was" if count == 1 else f"{count} documents of unknown year were"
    err.print(f"[yellow]note:[/yellow] {what} left out by {flags}; add --include-undated to keep them",
              highlight=False)


def _local_time(iso: str | None) -> str:
    """A stored ISO-8601 time (UTC, ``Z``) in the reader's local time, to the second; ``-`` when unset."""
    if not iso:
        return "-"
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return "-"
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


# -- catalog / add --------------------------------------------------------------------------------------


def import_report(rep: Any, catalog_path: Path, *, as_json: bool) -> None:
    """``dmlqa catalog import``: counts on stdout, each skipped line of a list on stderr."""
    issues = [{"list": i.list_name, "line": i.line_no, "text": i.line, "reason": i.reason} for i in rep.issues]
    if as_json:
        print_json({"lists": list(rep.lists), "added": rep.added, "updated": rep.updated,
                    "total": rep.total, "issues": issues})
        return
    out.print(plain(
        f"Imported {len(rep.lists)} list(s): {rep.added} new, {rep.updated} updated, "
        f"{rep.total} resources in {catalog_path}"
    ))
    for i in issues:
        err.print(_labelled("skipped", "yellow", f"{i['list']}:{i['line']}: {i['reason']}: {i['text'][:100]}"),
                  highlight=False)


def add_report(rep: Any, local_dir: Path) -> None:
    """``dmlqa add``: every refused path and (some) bad records on stderr, then what was added."""
    failed = set(rep.failed)
    for path, reason in rep.skipped:
        label = ("error:", "red") if path in failed else ("skipped", "yellow")
        err.print(_labelled(*label, f"{path}: {reason}"), highlight=False)
    for where, reason in rep.bad_records[:MAX_BAD_RECORDS]:
        err.print(_labelled("bad record", "yellow", f"{where}: {reason} (the build skips it)"), highlight=False)
    if len(rep.bad_records) > MAX_BAD_RECORDS:
        more = len(rep.bad_records) - MAX_BAD_RECORDS
        err.print(f"[yellow]bad record[/yellow] … and {more} more (the build lists them all)", highlight=False)
    # a library's entries: every skipped one is named (the user fixes it in the reference manager)
    for where, reason in rep.bad_entries:
        err.print(_labelled("skipped entry", "yellow", f"{where}: {reason}"), highlight=False)
    for where, reason in rep.entry_notes:
        err.print(_labelled("note:", "yellow", f"{where}: {reason}"), highlight=False)
    cataloged = set(rep.cataloged)  # two libraries may name one work: one catalog entry
    if rep.added:
        out.print(plain(f"Added {len(rep.added)} file(s) to {local_dir}; run `dmlqa build` to index them."),
                  highlight=False)
    elif not cataloged:
        out.print("Nothing added.", highlight=False, markup=False)
    if cataloged:
        lists = ", ".join(rep.catalog_lists)
        one = len(cataloged) == 1
        out.print(plain(f"Added {len(cataloged)} library entr{'y' if one else 'ies'} to the catalog (list {lists}); "
                        f"the next `dmlqa build` fetches {'it' if one else 'them'}."), highlight=False)


def removal(rem: Any, *, as_json: bool) -> None:
    """``dmlqa remove``: one line saying what was taken out and that the next build drops it."""
    if as_json:
        print_json(rem.to_json())
        return
    parts = []
    if rem.folder is not None:
        parts.append(f"folder local/{rem.folder} ({len(rem.files)} document(s))")
    else:
        parts += [f"local document local:{f}" for f in rem.files]
    parts += [f"catalog entry {r.id} {r.title!r} ({r.address})" for r in rem.entries]
    out.print(plain(f"Removed {'; '.join(parts)}; the next `dmlqa build` drops it from the index."),
              highlight=False)


# -- build ---------------------------------------------------------------------------------------------


class BuildProgress:
    """One bar per build stage on stderr; a no-op when ``enabled`` is false (pipes, CI logs, --json).

    The ``progress`` a :meth:`dmlqa.KnowledgeBase.build` call reports to: ``start(stage, total)``
    returns the function that advances the stage's bar, ``done(stage)`` fills it.
    """

    def __init__(self, console: Console = err, *, enabled: bool | None = None) -> None:
        self._enabled = console.is_terminal if enabled is None else enabled
        self._progress = Progress(
            TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> BuildProgress:
        if self._enabled:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._enabled:
            self._progress.stop()

    def start(self, stage: str, total: int) -> Callable[[int], None]:
        if not self._enabled:
            return lambda n: None
        task = self._progress.add_task(stage, total=total)
        self._tasks[stage] = task
        return lambda n: self._progress.advance(task, n)

    def done(self, stage: str) -> None:
        if self._enabled and stage in self._tasks:
            task = self._tasks[stage]
            self._progress.update(task, completed=self._progress.tasks[task].total)


def _failed_table(title: str, rows: Sequence[tuple[str, str, str]]) -> Table:
    t = Table(title=title, show_header=True)
    t.add_column("stage")
    t.add_column("url", overflow="fold")
    t.add_column("reason", overflow="fold")
    for row in rows:
        t.add_row(*(plain(cell) for cell in row))
    return t


def build_report(report: Any) -> None:
    """``dmlqa build``: the counts, the time per stage, coverage and (the first) failed resources."""
    t = Table(title=f"Build {report.index_version}", show_header=True)
    t.add_column("what")
    t.add_column("count", justify="right")
    for label, value in [
        ("resources", report.resources), ("fetched", report.fetched),
        ("not modified", report.not_modified), ("from archive", report.from_archive),
        ("documents", report.documents), ("catalog cards", report.cards),
        ("local documents", report.local_documents), ("chunks", report.chunks),
        ("embedded", report.embedded), ("reused embeddings", report.reused_embeddings),
        ("failed", len(report.failed)), ("removed", len(report.removed)),
        ("references", report.references), ("references resolved", report.references_resolved),
    ]:
        t.add_row(label, str(value))
    out.print(t)
    out.print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report.seconds.items()))
    total = report.coverage.get("total") if report.coverage else None
    if total:
        out.print(f"coverage: {total['full_text']} of {total['resources']} resources with full text, "
                  f"{total['abstract_only']} abstract only, {total['cards']} catalog cards, "
                  f"{total['duplicates']} copies merged (`dmlqa status --coverage` for lists and hosts)")
    if report.failed:
        rows = [(row.stage, row.url, row.error) for row in report.failed[:MAX_FAILED_ROWS]]
        out.print(_failed_table("Failed resources", rows))
        if len(report.failed) > MAX_FAILED_ROWS:
            out.print(f"... and {len(report.failed) - MAX_FAILED_ROWS} more (`dmlqa build --json` or "
                      "`dmlqa status --json` list them all; `dmlqa status --coverage` sums them up)")


# -- search / ask / eval / related ---------------------------------------------------------------------


def hits(found: Sequence[Hit]) -> None:
    """``dmlqa search``: rank, title, page and section, URL and a snippet of each hit."""
    if not found:
        out.print("No results.")
        return
    for h in found:
        where = f" p.{h.page}" if h.page else ""
        section = f" § {h.section}" if h.section else ""
        out.print(Text.assemble((f"{h.rank}. ", "bold"), plain(h.title, "bold"), plain(f"{where}{section}"),
                                "  ", (f"({h.score:.3f})", "dim")), highlight=False)
        out.print(Text.assemble("   ", plain(h.url, "blue")), highlight=False)
        snippet = " ".join(h.text.split())
        out.print(plain(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}"), highlight=False)


def did_you_mean(corrected: str | None) -> None:
    """One stderr line offering the query with its typos corrected (search itself matches what was typed)."""
    if corrected:
        err.print(plain(f"did you mean: {corrected}", "yellow"), highlight=False)


def answer_text(text: str) -> None:
    out.print(plain(text), highlight=False)


def checked_answer(text: str, *, streamed: bool) -> None:
    """The checked text (invented citations removed, renumbered) after a raw LLM stream that differs."""
    out.print("\n\n[bold]Checked answer[/bold]" if streamed else "", highlight=False)
    answer_text(text)


def stream_delta(delta: str) -> None:
    sys.stdout.write(visible(delta))
    sys.stdout.flush()


def end_of_stream() -> None:
    out.print()


def sources(answer: Answer) -> None:
    """Below ``dmlqa ask``'s answer: notice, sources (or the nearest ones of a refusal), flags, backend."""
    if answer.notice:
        note(answer.notice)
    if answer.citations:
        out.print("\n[bold]Nearest sources[/bold]" if answer.refused else "\n[bold]Sources[/bold]", highlight=False)
        for c in answer.citations:
            facts = ", ".join(str(x) for x in (c.venue, c.year) if x)
            page = f", p. {c.page}" if c.page else ""
            facts = f" ({facts})" if facts else ""
            out.print(plain(f"[{c.n}] {c.title}{facts}{page}"), highlight=False)
            out.print(plain(f"    {c.url}" + (f"#page={c.page}" if c.page and c.url.endswith(".pdf") else "")),
                      highlight=False)
            if c.quote:
                out.print(plain(f"    “{c.quote}”", "dim"), highlight=False)
    for flag in answer.flags:
        err.print(_labelled("flag:", "yellow", flag), highlight=False)
    out.print(plain(f"answered by {answer.backend} in {answer.seconds:.2f}s", "dim"), highlight=False)


def eval_scores(scores: dict[str, Any], name: str) -> None:
    t = Table(title=plain(f"dmlqa eval: {name}"), show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for key, value in scores.items():
        if key in ("answerable", "unanswerable"):
            continue  # shown beside the number of questions
        if key == "questions":
            value = f"{value} ({scores.get('answerable', 0)} answerable, {scores.get('unanswerable', 0)} unanswerable)"
        t.add_row(plain(key), plain(value))
    out.print(t)


def related(res: Any, query: str) -> None:
    """``dmlqa related`` as a table: score, title, year and venue, kind, URL and why it is related."""
    if not res.items:
        out.print("No related documents.")
        return
    t = Table(title=plain(f"Related to {query}"), show_header=True, show_lines=False)
    for col in ("#", "score", "title", "year/venue", "kind", "url", "why"):
        t.add_column(col, overflow="fold")
    for i, r in enumerate(res.items, start=1):
        facts = " ".join(str(x) for x in (r.year, r.venue) if x)
        t.add_row(*(plain(cell) for cell in (i, f"{r.score:.3f}", r.title, facts, r.kind, r.url, r.reason)))
    out.print(t)


def citations(res: Any, what: str) -> None:
    """``dmlqa cites`` / ``cited-by``: the documents on the other end with the citing sentence; for ``cites``
    the references that name nothing in the knowledge base after them."""
    t = res.target
    head = f"{t.title} ({t.year})" if t.year else t.title
    if not res.items:
        out.print(plain(f"No document of the knowledge base is {what} {head}."), highlight=False)
    else:
        table = Table(title=plain(f"{what.capitalize()} {head}: {len(res.items)}"), show_header=True)
        for col in ("#", "title", "year", "url", "citing sentence"):
            table.add_column(col, overflow="fold")
        for i, item in enumerate(res.items, start=1):
            table.add_row(*(plain(cell) for cell in (i, item.title, item.year or "", item.url, item.context)))
        out.print(table)
    if res.unresolved:
        table = Table(title=f"Not in the knowledge base: {len(res.unresolved)}", show_header=True)
        for col in ("#", "title", "year", "arXiv / DOI"):
            table.add_column(col, overflow="fold")
        for i, u in enumerate(res.unresolved, start=1):
            table.add_row(*(plain(cell) for cell in (i, u.title, u.year or "", u.arxiv_id or u.doi or "")))
        out.print(table)


def source_view(view: Any, quote: str | None) -> None:
    """``dmlqa show``: title, page and link, then the archived text with the quote in reverse video (the
    text is the document's: printed through :func:`plain`, never read as markup)."""
    where = f", page {view.page} of {view.pages}" if view.page and view.pages else ""
    out.print(Text.assemble(plain(view.title, "bold"), plain(f" ({view.doc_id}{where})")), highlight=False)
    out.print(plain(view.url, "blue"), highlight=False)
    body = plain(view.text)
    if view.quote_span:
        body.stylize("reverse", *view.quote_span)
    out.print(body, highlight=False)
    if quote and not view.quote_found:
        note("the quote was not found in this text")


def suggestions(res: Any) -> None:
    """``dmlqa suggest``: works several documents cite that no list names; with ``--add``, what was added."""
    if not res.items:
        out.print("No work is cited by two or more documents without being in the knowledge base.")
        return
    table = Table(title="Cited by two or more documents, in no list", show_header=True)
    for col in ("#", "cited by", "title", "year", "arXiv / DOI / URL", "citing documents"):
        table.add_column(col, overflow="fold")
    for i, s in enumerate(res.items, start=1):
        where = s.arxiv_id or s.doi or s.url or ""
        table.add_row(*(plain(cell) for cell in (i, len(s.cited_by), s.title, s.year or "", where,
                                                 ", ".join(s.cited_by))))
    out.print(table)
    if res.list_name is not None:
        out.print(plain(f"Added {len(res.added)} to the catalog under the list {res.list_name!r}; "
                        "the next `dmlqa build` fetches them."), highlight=False)
        if res.not_added:
            note(f"not added (title only, nothing to fetch): {'; '.join(res.not_added)}")


def text(value: str) -> None:
    """Raw text on stdout (BibTeX): no markup, no wrapping."""
    sys.stdout.write(value)


# -- schedule ------------------------------------------------------------------------------------------


def run_line(outcome: Any) -> dict[str, Any]:
    """One scheduled run as ``dmlqa schedule --json`` prints it (one JSON object a line)."""

    def iso(moment: Any) -> str | None:
        return moment.astimezone().isoformat(timespec="seconds") if moment else None

    return {
        "slot": iso(outcome.slot), "started_at": iso(outcome.started_at), "finished_at": iso(outcome.finished_at),
        "seconds": round(outcome.seconds, 3), "ok": outcome.ok, "skipped": outcome.skipped,
        "error": outcome.error, "next_run": iso(outcome.next_run),
        "consecutive_failures": outcome.consecutive_failures,
        "report": outcome.report.to_json() if outcome.report is not None else None,
    }


def run(outcome: Any, *, as_json: bool) -> None:
    """One scheduled run, as it ends: a JSON line or one line for people; flushed at once (a
    service's stdout is a pipe: show each run when it ends, not hours later)."""
    if as_json:
        print_json(run_line(outcome))
    else:
        _run_text(outcome)
    sys.stdout.flush()


def _run_text(outcome: Any) -> None:
    when = outcome.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    nxt = outcome.next_run.astimezone().strftime("%Y-%m-%d %H:%M:%S") if outcome.next_run else "-"
    if outcome.report is None:
        word = Text("skipped") if outcome.skipped else Text("failed", style="red")
        in_a_row = 0 if outcome.skipped else outcome.consecutive_failures
        streak = f" ({in_a_row} in a row)" if in_a_row > 1 else ""
        out.print(Text.assemble(f"{when} run ", word, f"{streak} after {outcome.seconds:.1f} s: ",
                                plain(outcome.error or ""), f"; next run {nxt}"), highlight=False)
        return
    rep = outcome.report
    ch = rep.changes
    refresh = ""
    if rep.refresh is not None:
        refresh = f"; lists: +{len(rep.refresh['added'])} -{len(rep.refresh['removed'])} resources"
        if rep.refresh["failed"]:
            refresh += f", {len(rep.refresh['failed'])} list(s) failed"
    out.print(
        f"{when} run ok in {outcome.seconds:.1f} s: published {rep.index_version}: +{len(ch.added)} added, "
        f"~{len(ch.updated)} updated, -{len(ch.removed)} removed, {len(rep.failed)} failed, "
        f"{rep.embedded} embedded{refresh}; next run {nxt}",
        highlight=False,
    )


# -- status --------------------------------------------------------------------------------------------


def status(st: dict[str, Any], home: Path) -> None:
    """``dmlqa status``: the published version's facts, what failed at its build, the run history."""
    t = Table(title=plain(f"dmlqa home {home}"), show_header=False)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    for key in ("index_version", "built_at", "model", "encoder", "index_type", "resources", "documents",
                "cards", "chunks"):
        t.add_row(key, plain(st.get(key)))
    g = st.get("graph")
    t.add_row("citation graph", "not built (run `dmlqa build`)" if g is None else
              f"{g['papers']} papers, {g['references']} references, {g['resolved']} to documents here "
              f"({', '.join(f'{k} {v}' for k, v in sorted(g.get('by', {}).items(), key=lambda kv: -kv[1]))}), "
              f"{g['skipped']} skipped")
    t.add_row("failed", str(len(st["failed"])))
    out.print(t)
    runs(st)  # the last run's failures summed up by reason: hundreds of rows would bury the cause


def coverage(cov: dict[str, Any], duplicates: list[dict[str, Any]]) -> None:
    """Coverage tables (see dmlqa.pipeline.coverage): what has full text per list and per host, and why not."""
    if not cov:
        out.print("no coverage recorded for this index version: run `dmlqa build` to record it")
        return
    for title, groups in (("Coverage by list", cov.get("by_list", {})), ("Coverage by host", cov.get("by_host", {}))):
        t = Table(title=title, show_header=True)
        for col, justify in (("group", "left"), ("resources", "right"), ("full text", "right"),
                             ("abstract only", "right"), ("cards", "right"), ("why not full text", "left")):
            t.add_column(col, justify=justify, overflow="fold")
        rows = [("total", cov["total"]), *groups.items()] if title.endswith("list") else list(groups.items())
        for name, g in rows:
            why = ", ".join(f"{k} {v}" for k, v in g.get("reasons", {}).items())
            t.add_row(*(plain(cell) for cell in (name, g["resources"], g["full_text"], g["abstract_only"],
                                                 g["cards"], why)))
        out.print(t)
    if duplicates:
        out.print(f"{len(duplicates)} catalog entries are copies of another entry's work "
                  "(merged; `dmlqa status --json` lists them)")


def failures(data: dict[str, Any], *, as_json: bool) -> None:
    """``dmlqa status --failures``: every failure of the last run, with its reason (a table, or JSON)."""
    if as_json:
        print_json(data)
        return
    rows = data.get("failed") or []
    if data.get("started_at") is None:
        out.print("No build run recorded yet.")
    elif not rows:
        out.print(f"No failures in the run started {_local_time(data['started_at'])}.", highlight=False)
    else:  # one unwrapped line each (stage, URL, reason; tab-separated): URLs stay whole for copying and grep
        out.print(f"{len(rows)} failures of the run started {_local_time(data['started_at'])}:", highlight=False)
        for r in rows:
            sys.stdout.write(visible(f"{r['stage']}\t{r['url']}\t{r['error']}") + "\n")


def _last_run(st: dict[str, Any]) -> None:
    """The last run's outcome, failed runs in a row, and its failures summed up by reason."""
    if st.get("ok") is None:
        return
    in_a_row = st.get("consecutive_failures") or 0
    if st["ok"]:
        out.print("Last run: ok", highlight=False)
    else:
        streak = f" ({in_a_row} failed runs in a row)" if in_a_row > 1 else ""
        out.print(Text.assemble("Last run: ", ("failed", "red"), f"{streak}: ",
                                plain(st.get("last_error") or "see below")), highlight=False)
    summary = st.get("last_failures") or {}
    if summary.get("total"):
        out.print(f"{summary['total']} failed at the last run, by reason (`dmlqa status --failures` lists all):",
                  highlight=False)
        for group in summary.get("by_reason") or []:
            more = ", …" if group["count"] > len(group["urls"]) else ""
            out.print(plain(f"  {group['count']:>5} {group['reason']}: {', '.join(group['urls'])}{more}"),
                      highlight=False)


def runs(st: dict[str, Any]) -> None:
    """The run history (newest first) and the scheduler's next slot, below the status table."""
    if st.get("runs"):
        t = Table(title="Last runs (+added ~updated -removed !failed)", show_header=True)
        for col in ("started", "took", "result", "changes", "by"):
            t.add_column(col, justify="right" if col == "took" else "left", no_wrap=True)
        t.add_column("version", overflow="fold", min_width=10)
        t.add_column("error / what changed", overflow="fold", min_width=20)
        for r in st["runs"]:
            counts = r.get("counts") or {}
            took = f"{r['seconds']:.1f} s" if r.get("seconds") is not None else "-"
            changes = " ".join(f"{mark}{counts.get(key, 0)}" for mark, key in
                               (("+", "added"), ("~", "updated"), ("-", "removed"), ("!", "failed")))
            what = r.get("error") or ", ".join(
                [f"+{x}" for x in r.get("added", [])[:3]] + [f"~{x}" for x in r.get("updated", [])[:3]]
                + [f"-{x}" for x in r.get("removed", [])[:3]])
            result = (Text("ok") if r.get("ok") else
                      Text("interrupted", style="yellow") if r.get("interrupted") else Text("failed", style="red"))
            t.add_row(_local_time(r.get("started_at")), took, result, changes, plain(r.get("trigger", "build")),
                      plain(r.get("index_version") or "-"), plain(what))
        out.print(t)
    sched = st.get("schedule")
    if sched and sched.get("running"):
        out.print(plain(f"Next scheduled run: {_local_time(sched.get('next_run'))} ({sched.get('spec')}, "
                        f"`dmlqa schedule` PID {sched.get('pid')})"), highlight=False)
    else:
        out.print("Next scheduled run: none (no `dmlqa schedule` is running on this home)", highlight=False)
    _last_run(st)
