"""What the ``dmlqa`` command prints: rich tables and lines for people, JSON for scripts, progress bars.

Kept apart from :mod:`dmlqa.app.cli` so the commands read as "parse flags, call the library, render":
every function here takes what a :class:`dmlqa.KnowledgeBase` method returned and only reads its
attributes. Messages and notes go to stderr (``err``), results to stdout (``out``), so ``--json`` and
``--format bibtex`` output stays valid whatever else is said.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from dmlqa.models import Answer, Hit

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)  # messages stay one greppable line

#: A build with no network fails every resource: a summary says more than 181 rows.
MAX_FAILED_ROWS = 25
#: Bad records of an added JSON Lines file shown by `dmlqa add` (the build lists them all).
MAX_BAD_RECORDS = 10


def fail(message: str, code: int = 1) -> None:
    """``error: message`` on stderr and exit ``code`` (1: the command failed, 2: a bad argument)."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)  # a path or value may hold [brackets]
    raise typer.Exit(code)


def print_json(obj: Any) -> None:
    """One JSON document on one line of stdout (non-ASCII kept as is)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def note(message: str) -> None:
    err.print(f"[yellow]note:[/yellow] {escape(message)}", highlight=False)  # "[arxiv:…]" is no markup


def warning(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def say(message: str) -> None:
    """A plain line on stderr (banners, "stopped"): stdout stays for results."""
    err.print(message, highlight=False)


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
    out.print(
        f"Imported {len(rep.lists)} list(s): {rep.added} new, {rep.updated} updated, "
        f"{rep.total} resources in {catalog_path}"
    )
    for i in issues:
        err.print(f"[yellow]skipped[/yellow] {i['list']}:{i['line']}: {i['reason']}: {i['text'][:100]}",
                  highlight=False)


def add_report(rep: Any, local_dir: Path) -> None:
    """``dmlqa add``: every refused path and (some) bad records on stderr, then what was added."""
    failed = set(rep.failed)
    for path, reason in rep.skipped:
        label = "[red]error:[/red]" if path in failed else "[yellow]skipped[/yellow]"
        err.print(f"{label} {escape(path)}: {escape(reason)}", highlight=False)
    for where, reason in rep.bad_records[:MAX_BAD_RECORDS]:
        err.print(f"[yellow]bad record[/yellow] {escape(where)}: {escape(reason)} (the build skips it)",
                  highlight=False)
    if len(rep.bad_records) > MAX_BAD_RECORDS:
        more = len(rep.bad_records) - MAX_BAD_RECORDS
        err.print(f"[yellow]bad record[/yellow] … and {more} more (the build lists them all)", highlight=False)
    # a library's entries: every skipped one is named (the user fixes it in the reference manager)
    for where, reason in rep.bad_entries:
        err.print(f"[yellow]skipped entry[/yellow] {escape(where)}: {escape(reason)}", highlight=False)
    for where, reason in rep.entry_notes:
        err.print(f"[yellow]note:[/yellow] {escape(where)}: {escape(reason)}", highlight=False)
    cataloged = set(rep.cataloged)  # two libraries may name one work: one catalog entry
    if rep.added:
        out.print(f"Added {len(rep.added)} file(s) to {local_dir}; run `dmlqa build` to index them.",
                  highlight=False, markup=False)
    elif not cataloged:
        out.print("Nothing added.", highlight=False, markup=False)
    if cataloged:
        lists = ", ".join(rep.catalog_lists)
        one = len(cataloged) == 1
        out.print(f"Added {len(cataloged)} library entr{'y' if one else 'ies'} to the catalog (list {lists}); "
                  f"the next `dmlqa build` fetches {'it' if one else 'them'}.", highlight=False, markup=False)


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
        t.add_row(*row)
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
        out.print(f"[bold]{h.rank}. {h.title}[/bold]{where}{section}  [dim]({h.score:.3f})[/dim]",
                  highlight=False)
        out.print(f"   [blue]{h.url}[/blue]", highlight=False)
        snippet = " ".join(h.text.split())
        out.print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", highlight=False, markup=False)


def answer_text(text: str) -> None:
    out.print(text, highlight=False, markup=False)


def checked_answer(text: str, *, streamed: bool) -> None:
    """The checked text (invented citations removed, renumbered) after a raw LLM stream that differs."""
    out.print("\n\n[bold]Checked answer[/bold]" if streamed else "", highlight=False)
    answer_text(text)


def stream_delta(delta: str) -> None:
    sys.stdout.write(delta)
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
            out.print(f"[{c.n}] {c.title}{facts}{page}", highlight=False, markup=False)
            out.print(f"    {c.url}" + (f"#page={c.page}" if c.page and c.url.endswith(".pdf") else ""),
                      highlight=False, markup=False)
            if c.quote:
                out.print(f"    “{c.quote}”", highlight=False, markup=False, style="dim")
    for flag in answer.flags:
        err.print(f"[yellow]flag:[/yellow] {flag}", highlight=False)
    out.print(f"[dim]answered by {answer.backend} in {answer.seconds:.2f}s[/dim]", highlight=False)


def eval_scores(scores: dict[str, Any], name: str) -> None:
    t = Table(title=f"dmlqa eval: {name}", show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for key, value in scores.items():
        t.add_row(key, str(value))
    out.print(t)


def related(res: Any, query: str) -> None:
    """``dmlqa related`` as a table: score, title, year and venue, kind, URL and why it is related."""
    if not res.items:
        out.print("No related documents.")
        return
    t = Table(title=f"Related to {query}", show_header=True, show_lines=False)
    for col in ("#", "score", "title", "year/venue", "kind", "url", "why"):
        t.add_column(col, overflow="fold")
    for i, r in enumerate(res.items, start=1):
        facts = " ".join(str(x) for x in (r.year, r.venue) if x)
        t.add_row(str(i), f"{r.score:.3f}", r.title, facts, r.kind, r.url, r.reason)
    out.print(t)


def citations(res: Any, what: str) -> None:
    """``dmlqa cites`` / ``cited-by``: the documents on the other end with the citing sentence; for ``cites``
    the references that name nothing in the knowledge base after them."""
    t = res.target
    head = f"{t.title} ({t.year})" if t.year else t.title
    if not res.items:
        out.print(f"No document of the knowledge base is {what} {head}.", highlight=False, markup=False)
    else:
        table = Table(title=f"{what.capitalize()} {escape(head)}: {len(res.items)}", show_header=True)
        for col in ("#", "title", "year", "url", "citing sentence"):
            table.add_column(col, overflow="fold")
        for i, item in enumerate(res.items, start=1):
            table.add_row(str(i), escape(item.title), str(item.year or ""), escape(item.url), escape(item.context))
        out.print(table)
    if res.unresolved:
        table = Table(title=f"Not in the knowledge base: {len(res.unresolved)}", show_header=True)
        for col in ("#", "title", "year", "arXiv / DOI"):
            table.add_column(col, overflow="fold")
        for i, u in enumerate(res.unresolved, start=1):
            table.add_row(str(i), escape(u.title), str(u.year or ""), escape(u.arxiv_id or u.doi or ""))
        out.print(table)


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
        table.add_row(str(i), str(len(s.cited_by)), escape(s.title), str(s.year or ""), escape(where),
                      escape(", ".join(s.cited_by)))
    out.print(table)
    if res.list_name is not None:
        out.print(f"Added {len(res.added)} to the catalog under the list {res.list_name!r}; "
                  "the next `dmlqa build` fetches them.", highlight=False, markup=False)
        if res.not_added:
            err.print(f"[yellow]note:[/yellow] not added (title only, nothing to fetch): "
                      f"{escape('; '.join(res.not_added))}", highlight=False)


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
        word = "skipped" if outcome.skipped else "[red]failed[/red]"
        out.print(f"{when} run {word} after {outcome.seconds:.1f} s: {outcome.error}; next run {nxt}",
                  highlight=False)
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
    t = Table(title=f"dmlqa home {home}", show_header=False)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    for key in ("index_version", "built_at", "model", "encoder", "index_type", "resources", "documents",
                "cards", "chunks"):
        t.add_row(key, str(st.get(key)))
    g = st.get("graph")
    t.add_row("citation graph", "not built (run `dmlqa build`)" if g is None else
              f"{g['papers']} papers, {g['references']} references, {g['resolved']} to documents here "
              f"({', '.join(f'{k} {v}' for k, v in sorted(g.get('by', {}).items(), key=lambda kv: -kv[1]))}), "
              f"{g['skipped']} skipped")
    t.add_row("failed", str(len(st["failed"])))
    out.print(t)
    if st["failed"]:
        rows = [(row["stage"], row["url"], row["error"]) for row in st["failed"]]
        out.print(_failed_table("Failed at the last build", rows))
    runs(st)


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
            t.add_row(escape(name), str(g["resources"]), str(g["full_text"]), str(g["abstract_only"]),
                      str(g["cards"]), escape(why))
        out.print(t)
    if duplicates:
        out.print(f"{len(duplicates)} catalog entries are copies of another entry's work "
                  "(merged; `dmlqa status --json` lists them)")


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
            t.add_row(_local_time(r.get("started_at")), took, "ok" if r.get("ok") else "[red]failed[/red]",
                      changes, r.get("trigger", "build"), r.get("index_version") or "-", what)
        out.print(t)
    sched = st.get("schedule")
    if sched and sched.get("running"):
        out.print(f"Next scheduled run: {_local_time(sched.get('next_run'))} ({sched.get('spec')}, "
                  f"`dmlqa schedule` PID {sched.get('pid')})", highlight=False)
    else:
        out.print("Next scheduled run: none (no `dmlqa schedule` is running on this home)", highlight=False)
