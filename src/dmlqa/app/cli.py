"""The ``dmlqa`` command: a thin layer over the library.

Each command parses its flags, calls one library function and renders the result (a rich table
for people, ``--json`` for scripts). Heavy imports (torch, faiss, trafilatura) happen inside the
commands that need them, so ``dmlqa --help`` and ``dmlqa status`` start fast.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from dmlqa.errors import DmlqaError, HomeError, IndexDamagedError, InputFileError, is_disk_full
from dmlqa.settings import Settings, load_settings, resolve_home


class _OneLineErrors(TyperGroup):
    """The one place where errors a command lets through become one line on stderr, never a traceback.

    Every :class:`DmlqaError` (and a full disk, wherever it strikes) exits 1 with ``error: ...``.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except DmlqaError as exc:
            _fail(str(exc))
        except (OSError, RuntimeError, sqlite3.Error) as exc:
            home = _State.resolved or resolve_home(_State.home)
            if not is_disk_full(exc, home):
                raise
            where = getattr(exc, "filename", None) or f"to {home}"
            _fail(f"disk full while writing {where}: free space and run again")


app = typer.Typer(
    help="dmlqa: question answering with cited sources over the distributed-ML literature.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_OneLineErrors,
)
catalog_app = typer.Typer(help="Manage the catalog of resources (from awesome lists).", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)  # messages stay one greppable line

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Knowledge-base home (default: $DMLQA_HOME or the current directory)."),
]


# Options shared by several commands, defined once so their flags and help never drift apart.
ArchiveOption = Annotated[
    list[Path] | None, typer.Option("--archive", help="Replay responses from this WARC file (repeatable).")
]
OfflineOption = Annotated[bool, typer.Option("--offline", help="Never touch the network.")]
PrivateHostsOption = Annotated[
    bool | None, typer.Option("--allow-private-hosts", help="Allow fetching from loopback/private addresses.")
]
ModelOption = Annotated[str | None, typer.Option(help="Embedding model name or local path.")]
EncoderOption = Annotated[str | None, typer.Option(help="onnx-int8 (default), onnx or torch.")]
KindOption = Annotated[list[str] | None, typer.Option("--kind", help="Only this kind (repeatable).")]
SinceOption = Annotated[int | None, typer.Option(help="Only resources from this year on.")]
UntilOption = Annotated[int | None, typer.Option(help="Only resources up to this year.")]
IncludeUndatedOption = Annotated[
    bool, typer.Option("--include-undated", help="With --since/--until, keep documents of unknown year.")
]
TopicOption = Annotated[list[str] | None, typer.Option("--topic", help="Only this list topic (repeatable).")]
HostFilterOption = Annotated[list[str] | None, typer.Option("--host", help="Only this host (repeatable).")]


class _State:
    home: Path | None = None
    resolved: Path | None = None  # the home a command works on, once its settings are loaded


def _settings(home: Path | None = None, *, create: bool = False, **overrides: Any) -> Settings:
    """The settings of the chosen home, which must exist (``create``: ``init`` may make it)."""
    try:
        _check_home(home or _State.home, create=create)
        settings = load_settings(home or _State.home).with_overrides(**overrides)
        _State.resolved = settings.home
        return settings
    except (ValueError, DmlqaError) as exc:
        _fail(str(exc))
        raise  # unreachable


def _check_home(home: Path | None, *, create: bool = False) -> None:
    root = resolve_home(home)
    shown = home if home is not None else root
    if root.is_file() or (root.exists() and not root.is_dir()):
        raise HomeError(f"{shown} is a file, not a dmlqa home")
    if not create and not root.exists():
        raise HomeError(f"no dmlqa home at {shown} (run `dmlqa init --home {shown}`)")


def _text_arg(value: str | None, what: str) -> str | None:
    """``value`` unless the command line carried bytes that are not UTF-8 (Python keeps them as
    lone surrogates, which would fail much later and less clearly)."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        byte = f"byte {code - 0xDC00:#04x}" if 0xDC80 <= code <= 0xDCFF else f"character U+{code:04X}"
        _fail(f"the {what} is not valid UTF-8 text ({byte} at position {exc.start + 1}); "
              "check your terminal's encoding", 2)
    return value


def _read_jsonl_lines(path: Path, flag: str) -> list[str]:
    """The lines of a ``--queries``/``--questions`` file, or one clear error naming it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{flag} file {path} does not exist") from None
    except IsADirectoryError:
        raise InputFileError(f"{flag} file {path} is a folder, not a JSONL file") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {flag} file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputFileError(
            f"{flag} file {path} is not UTF-8 text (byte {data[exc.start]:#04x} on line {line})"
        ) from None
    return text.removeprefix("\ufeff").splitlines()


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)  # a path or value may hold [brackets]
    raise typer.Exit(code)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _note_undated(count: int, since: int | None, until: int | None) -> None:
    """One stderr line when a year filter left out documents of unknown year (stdout stays clean)."""
    if count <= 0:
        return
    flags = " ".join(f"--{name} {value}" for name, value in (("since", since), ("until", until)) if value)
    what = "1 document of unknown year was" if count == 1 else f"{count} documents of unknown year were"
    err.print(f"[yellow]note:[/yellow] {what} left out by {flags}; add --include-undated to keep them",
              highlight=False)


@app.callback()
def main_callback(
    home: HomeOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what happens.")] = False,
) -> None:
    _State.home = home
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "httpcore", "pypdf", "trafilatura", "bm25s", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)


# -- init / catalog / add ----------------------------------------------------------------------------


@app.command()
def init(home: HomeOption = None) -> None:
    """Create an empty knowledge-base home (corpus/, index/, dmlqa.toml)."""
    from dmlqa.pipeline.home import init_home

    settings = _settings(home, create=True)
    created = init_home(settings)
    out.print(f"Home ready at {settings.home}" + (f" (created {', '.join(created)})" if created else ""))


@catalog_app.command("import")
def catalog_import(
    files: Annotated[list[Path], typer.Argument(help="Awesome-list markdown files.")],
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Parse awesome-list markdown into corpus/catalog.jsonl."""
    from dmlqa.catalog.store import import_lists

    settings = _settings(home)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        _fail(f"no such file: {', '.join(missing)}")
    try:
        rep = import_lists(files, settings.corpus_dir)
    except DmlqaError as exc:
        _fail(str(exc))
    issues = [
        {"list": i.list_name, "line": i.line_no, "text": i.line, "reason": i.reason} for i in rep.issues
    ]
    if as_json:
        _print_json({"lists": list(rep.lists), "added": rep.added, "updated": rep.updated,
                     "total": rep.total, "issues": issues})
        return
    out.print(
        f"Imported {len(rep.lists)} list(s): {rep.added} new, {rep.updated} updated, "
        f"{rep.total} resources in {settings.catalog_path}"
    )
    for i in issues:
        err.print(f"[yellow]skipped[/yellow] {i['list']}:{i['line']}: {i['reason']}: {i['text'][:100]}",
                  highlight=False)


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders: PDF, HTML, markdown, text, JSONL.")],
    home: HomeOption = None,
) -> None:
    """Register your own documents; the next `dmlqa build` indexes them.

    Every path is tried: the good ones are copied even when another is missing or refused, and
    then the exit status is 1, naming each bad one (running it again after a fix is harmless).
    A JSON Lines file with some bad records is copied; the bad records are listed and skipped.
    """
    from dmlqa.catalog.local import add_paths

    settings = _settings(home)
    rep = add_paths(paths, settings.corpus_dir, max_bytes=settings.fetch.max_bytes)
    failed = set(rep.failed)
    for path, reason in rep.skipped:
        label = "[red]error:[/red]" if path in failed else "[yellow]skipped[/yellow]"
        err.print(f"{label} {escape(path)}: {escape(reason)}", highlight=False)
    shown = 10
    for where, reason in rep.bad_records[:shown]:
        err.print(f"[yellow]bad record[/yellow] {escape(where)}: {escape(reason)} (the build skips it)",
                  highlight=False)
    if len(rep.bad_records) > shown:
        err.print(f"[yellow]bad record[/yellow] … and {len(rep.bad_records) - shown} more (the build lists them all)",
                  highlight=False)
    out.print(f"Added {len(rep.added)} file(s) to {settings.corpus_dir / 'local'}; run `dmlqa build` to index them.",
              highlight=False, markup=False)
    if not rep.added or rep.failed:
        raise typer.Exit(1)


# -- build ---------------------------------------------------------------------------------------------


@app.command()
def build(
    home: HomeOption = None,
    archive: ArchiveOption = None,
    offline: OfflineOption = False,
    allow_private_hosts: PrivateHostsOption = None,
    model: ModelOption = None,
    encoder: EncoderOption = None,
    refresh_lists: Annotated[
        bool, typer.Option("--refresh-lists", help="Re-read the lists' upstreams into the catalog first.")
    ] = False,
    executor: Annotated[
        str | None,
        typer.Option(help='Where the stages run: "local" (default) or "ray" (needs pip install "dmlqa[ray]").'),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help='Ray cluster to join with --executor ray ("auto": the local `ray start`).'),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
) -> None:
    """Download every catalog resource, extract, chunk, embed and publish a new index version."""
    from dmlqa.pipeline.build import BuildOptions, run_build
    from dmlqa.pipeline.progress import RichProgress

    settings = _settings(
        home, allow_private_hosts=allow_private_hosts, model=model, encoder=encoder,
        executor=executor, ray_address=ray_address,
    )
    for a in archive or []:
        if not a.is_file():
            _fail(f"archive not found: {a}")
    if settings.build.executor not in ("local", "ray"):
        _fail(f"unknown executor {settings.build.executor!r}: choose local or ray")
    options = BuildOptions(
        archives=tuple(archive or ()), offline=offline, refresh_lists=refresh_lists, executor=settings.build.executor
    )
    try:
        with RichProgress(err, enabled=err.is_terminal) as progress:
            report = run_build(settings, options, progress=progress)
    except DmlqaError as exc:
        _fail(str(exc))
    if as_json:
        _print_json(report.to_json())
    else:
        _render_report(report)
    if report.notice:
        err.print(f"note: {escape(report.notice)}", soft_wrap=True)
    if report.index_version is None:
        raise typer.Exit(1)


_MAX_FAILED_ROWS = 25  # a build with no network fails every resource: a summary says more than 181 rows


def _render_report(report: Any) -> None:
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
        f = Table(title="Failed resources", show_header=True)
        f.add_column("stage")
        f.add_column("url", overflow="fold")
        f.add_column("reason", overflow="fold")
        for row in report.failed[:_MAX_FAILED_ROWS]:
            f.add_row(row.stage, row.url, row.error)
        out.print(f)
        if len(report.failed) > _MAX_FAILED_ROWS:
            out.print(f"... and {len(report.failed) - _MAX_FAILED_ROWS} more (`dmlqa build --json` or "
                      "`dmlqa status --json` list them all; `dmlqa status --coverage` sums them up)")


# -- search ----------------------------------------------------------------------------------------------


def _read_queries(path: Path) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    for n, line in enumerate(_read_jsonl_lines(path, "--queries"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            qid = str(rec.get("id", rec.get("_id")))
            text = rec.get("text", rec.get("question"))
        except (ValueError, AttributeError):
            _fail(f"{path}:{n}: not a JSON object")
        if rec.get("id", rec.get("_id")) is None or not isinstance(text, str):
            _fail(f'{path}:{n}: a query needs "id" (or "_id") and "text"')
        items.append((qid, text))
    return items


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    k: Annotated[int, typer.Option("-k", help="How many results.", min=1, max=1000)] = 10,
    per_doc: Annotated[bool, typer.Option("--per-doc", help="Each document once (its best passage).")] = False,
    queries: Annotated[
        Path | None, typer.Option("--queries", help='Batch mode: JSONL of {"id","text"} (BEIR "_id" too).')
    ] = None,
    mode: Annotated[str, typer.Option(help="hybrid (default), dense or bm25.")] = "hybrid",
    kind: KindOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    topic: TopicOption = None,
    host: HostFilterOption = None,
    include_undated: IncludeUndatedOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Hybrid (dense + BM25) search over the published index."""
    from dmlqa.query.search import Filters, Searcher, SearchOptions, undated_excluded

    if mode not in ("hybrid", "dense", "bm25"):
        _fail(f"--mode must be hybrid, dense or bm25 (got {mode!r})")
    if query is None and queries is None:
        _fail("give a QUERY or --queries FILE.jsonl")
    query = _text_arg(query, "query")
    settings = _settings(home)
    filters = Filters(kinds=tuple(kind or ()), since=since, until=until, topics=tuple(topic or ()),
                      hosts=tuple(host or ()), include_undated=include_undated)
    options = SearchOptions(k=k, per_doc=per_doc, mode=mode, filters=filters)
    searcher = Searcher(settings)
    try:
        _note_undated(undated_excluded(searcher.version, filters), since, until)
        if queries is not None:
            for qid, text in _read_queries(queries):
                hits = searcher.search(text, options)
                _print_json({"query_id": qid, "hits": [h.to_json() for h in hits]})
            return
        hits = searcher.search(query or "", options)
    except DmlqaError as exc:
        _fail(str(exc))
    if as_json:
        _print_json([h.to_json() for h in hits])
        return
    if not hits:
        out.print("No results.")
        return
    for h in hits:
        where = f" p.{h.page}" if h.page else ""
        section = f" § {h.section}" if h.section else ""
        out.print(f"[bold]{h.rank}. {h.title}[/bold]{where}{section}  [dim]({h.score:.3f})[/dim]",
                  highlight=False)
        out.print(f"   [blue]{h.url}[/blue]", highlight=False)
        snippet = " ".join(h.text.split())
        out.print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", highlight=False, markup=False)


# -- ask / eval --------------------------------------------------------------------------------------------


def _ask_options(kind, since, until, topic, host, no_llm: bool, mode: str = "hybrid",  # noqa: ANN001, ANN202
                 include_undated: bool = False):
    from dmlqa.query.answer import AskOptions
    from dmlqa.query.search import Filters

    filters = Filters(kinds=tuple(kind or ()), since=since, until=until, topics=tuple(topic or ()),
                      hosts=tuple(host or ()), include_undated=include_undated)
    if mode not in ("hybrid", "dense", "bm25"):
        _fail(f"--mode must be hybrid, dense or bm25 (got {mode!r})")
    return AskOptions(filters=filters, use_llm=not no_llm, mode=mode)


def _render_answer(answer: Any) -> None:
    if answer.notice:
        err.print(f"[yellow]note:[/yellow] {answer.notice}", highlight=False)
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


@app.command()
def ask(
    question: Annotated[str | None, typer.Argument(help="Your question.")] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help='Batch mode: JSONL of {"id","question"}.')
    ] = None,
    kind: KindOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    topic: TopicOption = None,
    host: HostFilterOption = None,
    include_undated: IncludeUndatedOption = False,
    no_llm: Annotated[bool, typer.Option("--no-llm", help="Extractive answer even if an LLM is set.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Answer a question with cited sources (LLM when configured, else extractive)."""
    from dmlqa.query.answer import Asker
    from dmlqa.query.evaluate import read_questions
    from dmlqa.query.search import undated_excluded

    if question is None and questions is None:
        _fail("give a QUESTION or --questions FILE.jsonl")
    question = _text_arg(question, "question")
    settings = _settings(home)
    options = _ask_options(kind, since, until, topic, host, no_llm, include_undated=include_undated)
    try:
        asker = Asker.from_settings(settings)
        _note_undated(undated_excluded(asker.searcher.version, options.filters), since, until)
        if questions is not None:
            try:
                items = read_questions(_read_jsonl_lines(questions, "--questions"), str(questions))
            except ValueError as exc:
                _fail(str(exc))
            for q in items:
                _print_json({"id": q.id, **asker.ask(q.question, options).to_json()})
            return
        if as_json:
            _print_json(asker.ask(question or "", options).to_json())
            return
        stream = asker.stream(question or "", options)
        streamed = []
        for delta in stream.deltas:
            streamed.append(delta)
            if asker.llm is not None:
                sys.stdout.write(delta)
                sys.stdout.flush()
        answer = stream.result
    except DmlqaError as exc:
        _fail(str(exc))
    if asker.llm is not None and "".join(streamed).strip() != answer.answer.strip():
        # The checked text (invented citations removed, renumbered) replaces the raw stream.
        out.print("\n\n[bold]Checked answer[/bold]" if streamed else "", highlight=False)
        out.print(answer.answer, highlight=False, markup=False)
    elif asker.llm is None:
        out.print(answer.answer, highlight=False, markup=False)
    else:
        out.print()
    _render_answer(answer)


@app.command("eval")
def eval_cmd(
    questions: Annotated[Path, typer.Option("--questions", help="JSONL question set with gold URLs.")],
    llm: Annotated[
        bool | None,
        typer.Option(
            "--llm/--no-llm",
            help="Score the LLM backend set by DMLQA_LLM_BASE_URL and DMLQA_LLM_MODEL (e.g. Ollama), or with "
            "--no-llm the extractive answerer. Default: the LLM when one is set.",
        ),
    ] = None,
    mode: Annotated[str, typer.Option(help="Retrieval: hybrid (default), dense or bm25.")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Score retrieval (recall@k, MRR), citations, refusals and latency on a question set."""
    from dmlqa.query.answer import Asker
    from dmlqa.query.evaluate import read_questions, score_answers

    settings = _settings(home)
    try:
        items = read_questions(_read_jsonl_lines(questions, "--questions"), str(questions))
    except (ValueError, DmlqaError) as exc:
        _fail(str(exc))
    options = _ask_options(None, None, None, None, None, llm is False, mode)
    try:
        asker = Asker.from_settings(settings)
        if llm and asker.llm is None:
            _fail("--llm needs an LLM endpoint: set DMLQA_LLM_BASE_URL and DMLQA_LLM_MODEL "
                  "(or llm_base_url and llm_model in dmlqa.toml)")
        backend = asker.llm.name if asker.llm is not None and options.use_llm else "extractive"
        # Load the encoder and index (and the LLM's weights, on servers that load on demand) before timing.
        warm = asker.ask("warm up", options)
        if backend != "extractive" and warm.retrieved and warm.backend != backend:
            _fail(f"the LLM backend failed on a first question: {warm.notice or 'no answer'}")
        answers = [asker.ask(q.question, options) for q in items]
    except DmlqaError as exc:
        _fail(str(exc))
    scores = score_answers(items, answers, backend=backend)
    scores["backend"] = backend
    scores["retrieval"] = mode
    if as_json:
        _print_json(scores)
        return
    t = Table(title=f"dmlqa eval: {questions.name}", show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for key, value in scores.items():
        t.add_row(key, str(value))
    out.print(t)


# -- related -----------------------------------------------------------------------------------------------


@app.command()
def related(
    query: Annotated[str, typer.Argument(help="Free text, a catalog URL, an arXiv id or a DOI.")],
    k: Annotated[int, typer.Option("-k", help="How many documents.", min=1, max=200)] = 10,
    since: Annotated[int | None, typer.Option(help="Only documents from this year on.")] = None,
    include_undated: IncludeUndatedOption = False,
    kind: KindOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or bibtex.")] = "table",
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    home: HomeOption = None,
) -> None:
    """Documents related to a paper, URL, arXiv id, DOI or free text."""
    from dmlqa.query.bibtex import to_bibtex
    from dmlqa.query.related import related as find_related
    from dmlqa.query.search import Searcher

    if fmt not in ("table", "json", "bibtex"):
        _fail(f"--format must be table, json or bibtex (got {fmt!r})")
    query = _text_arg(query, "query") or ""
    settings = _settings(home)
    try:
        res = find_related(Searcher(settings), query, k=k, since=since, kinds=tuple(kind or ()),
                           include_undated=include_undated)
    except DmlqaError as exc:
        _fail(str(exc))
    if res.notice:
        err.print(f"[yellow]note:[/yellow] {res.notice}", highlight=False)  # stderr: keeps json/bibtex valid
    _note_undated(res.undated_excluded, since, None)
    if as_json or fmt == "json":
        _print_json(res.to_json())
        return
    if fmt == "bibtex":
        sys.stdout.write(to_bibtex(res.items))
        return
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


# -- schedule --------------------------------------------------------------------------------------------


def _run_line(outcome: Any) -> dict[str, Any]:
    """One scheduled run as ``dmlqa schedule --json`` prints it (one JSON object a line)."""

    def iso(moment: Any) -> str | None:
        return moment.astimezone().isoformat(timespec="seconds") if moment else None

    return {
        "slot": iso(outcome.slot), "started_at": iso(outcome.started_at), "finished_at": iso(outcome.finished_at),
        "seconds": round(outcome.seconds, 3), "ok": outcome.ok, "skipped": outcome.skipped,
        "error": outcome.error, "next_run": iso(outcome.next_run),
        "report": outcome.report.to_json() if outcome.report is not None else None,
    }


def _render_run(outcome: Any) -> None:
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


@app.command()
def schedule(
    every: Annotated[
        str | None, typer.Option("--every", help="Rebuild at this interval, e.g. 24h, 90m, 1h30m.")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help='Rebuild at cron slots (local time), e.g. "0 3 * * *".')
    ] = None,
    refresh_lists: Annotated[
        bool, typer.Option("--refresh-lists", help="Re-read the lists' upstreams into the catalog before each build.")
    ] = False,
    now: Annotated[bool, typer.Option("--now", help="Also build once right away.")] = False,
    max_runs: Annotated[
        int | None, typer.Option("--max-runs", min=1, help="Stop after this many runs (default: run until stopped).")
    ] = None,
    archive: ArchiveOption = None,
    offline: OfflineOption = False,
    allow_private_hosts: PrivateHostsOption = None,
    model: ModelOption = None,
    encoder: EncoderOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each run as one JSON line.")] = False,
    home: HomeOption = None,
) -> None:
    """Keep running and rebuild the index on a schedule (incremental; a failed run keeps the index)."""
    import os
    import signal
    import threading

    from dmlqa.pipeline.build import BuildOptions
    from dmlqa.pipeline.schedule import Schedule, SchedulerStopped, run_scheduler

    settings = _settings(home, allow_private_hosts=allow_private_hosts, model=model, encoder=encoder)
    try:
        plan = Schedule.parse(every=every, cron=cron)
    except DmlqaError as exc:
        _fail(str(exc))
    for a in archive or []:
        if not a.is_file():
            _fail(f"archive not found: {a}")
    options = BuildOptions(archives=tuple(archive or ()), offline=offline, refresh_lists=refresh_lists,
                           executor=settings.build.executor)

    def on_signal(signum: int, frame: object) -> None:
        # Stop at once, even mid-build: a build is crash-safe, and the history records it interrupted.
        raise SchedulerStopped(f"stopped by {signal.Signals(signum).name}")

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    if not as_json:
        err.print(f"dmlqa schedule: {plan.spec} on {settings.home} (PID {os.getpid()}); stop with Ctrl-C or SIGTERM",
                  highlight=False)
    def report(outcome: Any) -> None:
        if as_json:
            _print_json(_run_line(outcome))
        else:
            _render_run(outcome)
        sys.stdout.flush()  # a service's stdout is a pipe: show each run when it ends, not hours later

    try:
        run_scheduler(settings, plan, options, run_now=now, max_runs=max_runs, on_run=report)
    except SchedulerStopped as exc:
        err.print(f"dmlqa schedule {exc}", highlight=False)
    except DmlqaError as exc:
        _fail(str(exc))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- status ----------------------------------------------------------------------------------------------


@app.command()
def status(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    show_coverage: Annotated[
        bool, typer.Option("--coverage", help="Per list and per host: full text, abstract only, cards, and why.")
    ] = False,
) -> None:
    """What the published index holds, the last build runs, and when the next scheduled run is."""
    from dmlqa.pipeline.home import index_status, run_history

    settings = _settings(home)
    try:
        st = index_status(settings)
    except DmlqaError as exc:
        if not as_json and not isinstance(exc, IndexDamagedError):  # no version yet: the failed runs say why
            _render_runs(run_history(settings))
        _fail(str(exc))
    if as_json:
        _print_json(st)
        return
    if show_coverage:
        _render_coverage(st.get("coverage") or {}, st.get("duplicates") or [])
        return
    t = Table(title=f"dmlqa home {settings.home}", show_header=False)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    for key in ("index_version", "built_at", "model", "encoder", "index_type", "resources", "documents",
                "cards", "chunks"):
        t.add_row(key, str(st.get(key)))
    t.add_row("failed", str(len(st["failed"])))
    out.print(t)
    if st["failed"]:
        f = Table(title="Failed at the last build", show_header=True)
        f.add_column("stage")
        f.add_column("url", overflow="fold")
        f.add_column("reason", overflow="fold")
        for row in st["failed"]:
            f.add_row(row["stage"], row["url"], row["error"])
        out.print(f)
    _render_runs(st)


def _render_coverage(cov: dict[str, Any], duplicates: list[dict[str, Any]]) -> None:
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


def _local_time(iso: str | None) -> str:
    from dmlqa.pipeline.runs import parse_time

    moment = parse_time(iso)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _render_runs(st: dict[str, Any]) -> None:
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


# -- serve -----------------------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on; anything but loopback is reachable by others.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65535)] = 7860,
    home: HomeOption = None,
) -> None:
    """Start the chat app (Gradio) on http://127.0.0.1:7860; DMLQA_UI_PASSWORD sets a password (user dmlqa)."""
    import os

    from dmlqa.app.ui import exposure_warning, launch, ui_password

    settings = _settings(home)
    _check_listen(host, port)
    password = ui_password(settings, os.environ)
    warning = exposure_warning(host, password=bool(password))
    if warning:
        err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    err.print(f"dmlqa chat app: http://{host}:{port} (home {settings.home}); stop with Ctrl-C", highlight=False)
    try:
        launch(settings, host=host, port=port, password=password)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc}")


def _check_listen(host: str, port: int) -> None:
    """Fail in one line, before Gradio starts, when ``host:port`` cannot be listened on."""
    import ipaddress
    import socket

    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not host or all(ch.isdigit() or ch == "." for ch in host) or any(ch.isspace() for ch in host):
            _fail(f"invalid --host {host!r}: not an IP address or a host name", 2)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        _fail(f"invalid --host {host!r}: {getattr(exc, 'strerror', None) or exc}", 2)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
