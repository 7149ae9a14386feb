"""The ``dmlqa`` command: a thin layer over the library API.

Each command parses its flags, makes one call on a :class:`dmlqa.KnowledgeBase` and hands the
result to :mod:`dmlqa.app.render` (a rich table for people, ``--json`` for scripts). Errors a user
can cause arrive as :class:`~dmlqa.errors.DmlqaError` and become one ``error:`` line in one place,
:class:`_OneLineErrors`. Heavy imports (torch, faiss, trafilatura, gradio) happen inside the calls
that need them, so ``dmlqa --help`` and ``dmlqa status`` start fast.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dmlqa.api import KnowledgeBase
from dmlqa.app import render, servers
from dmlqa.errors import DmlqaError, IndexDamagedError, as_disk_full, quoted


class _OneLineErrors(TyperGroup):
    """The one place where errors a command lets through become one line on stderr, never a traceback.

    Every :class:`DmlqaError` (and a full disk, wherever it strikes) exits with ``error: ...``, status 1
    unless the error names another (:attr:`DmlqaError.exit_code`: 3 for a build that had no network).
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except DmlqaError as exc:
            render.fail(str(exc), exc.exit_code)
        except (OSError, RuntimeError, sqlite3.Error) as exc:
            full = as_disk_full(exc, _State.resolved or KnowledgeBase.locate(_State.home))
            if full is exc:
                raise
            render.fail(str(full), 1)


app = typer.Typer(
    help="dmlqa: question answering with cited sources over the distributed-ML literature.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_OneLineErrors,
)
catalog_app = typer.Typer(help="Manage the catalog of resources (from awesome lists).", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Knowledge-base home (default: $DMLQA_HOME or the current directory)."),
]


# Options shared by several commands, defined once so their flags and help never drift apart.
ArchiveOption = Annotated[
    list[Path] | None, typer.Option("--archive", help="Replay responses from this WARC file (repeatable).")
]
OfflineOption = Annotated[bool, typer.Option("--offline", help="Never touch the network.")]
NoOpenAccessOption = Annotated[
    bool, typer.Option("--no-open-access", help="Do not look for open copies (arXiv, OpenAlex) of paywalled papers.")
]
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

MODES = ("hybrid", "dense", "bm25")


class _State:
    home: Path | None = None
    resolved: Path | None = None  # the home a command works on, once it is named


class _Home(KnowledgeBase):
    """The library's knowledge base, telling a user without a home which command makes one."""

    create_hint = "run `dmlqa init --home {home}`"


def _open(home: Path | None = None, *, create: bool = False, **overrides: Any) -> KnowledgeBase:
    """The chosen home (the command's ``--home``, else the global one), which must exist unless ``create``."""
    chosen = home or _State.home
    _State.resolved = KnowledgeBase.locate(chosen)
    return _Home(chosen, create=create, **overrides)


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
        render.fail(f"the {what} is not valid UTF-8 text ({byte} at position {exc.start + 1}); "
                    "check your terminal's encoding", 2)
    return value


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        render.fail(f"--mode must be hybrid, dense or bm25 (got {quoted(mode)})")


def _filters(kind: list[str] | None, since: int | None, until: int | None, topic: list[str] | None,
             host: list[str] | None, include_undated: bool) -> dict[str, Any]:
    """The filter flags as the keyword arguments every KnowledgeBase query method takes."""
    return {"kinds": kind or (), "since": since, "until": until, "topics": topic or (), "hosts": host or (),
            "include_undated": include_undated}


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
    kb = _open(home, create=True)
    created = f" (created {', '.join(kb.created)})" if kb.created else ""
    render.out.print(render.plain(f"Home ready at {kb.home}{created}"))


@catalog_app.command("import")
def catalog_import(
    files: Annotated[list[Path], typer.Argument(help="Awesome-list markdown files.")],
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Parse awesome-list markdown into corpus/catalog.jsonl."""
    kb = _open(home)
    render.import_report(kb.import_lists(files), kb.settings.catalog_path, as_json=as_json)


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(
        help="Files or folders: PDF, HTML, markdown, text, JSONL; or a BibTeX / CSL-JSON library (.bib, .json).",
        readable=False)],  # click's check would end the command in a box; add names each unreadable path
    home: HomeOption = None,
) -> None:
    """Register your own documents; the next `dmlqa build` indexes them.

    Every path is tried: the good ones are copied even when another is missing or refused, and
    then the exit status is 1, naming each bad one (running it again after a fix is harmless).
    A JSON Lines file with some bad records is copied; the bad records are listed and skipped.
    """
    kb = _open(home)
    rep = kb.add(paths)
    render.add_report(rep, kb.settings.paths.local_dir)
    if not (rep.added or rep.cataloged) or rep.failed:
        raise typer.Exit(1)


@app.command()
def remove(
    target: Annotated[str, typer.Argument(
        help="A local document (its path under corpus/local, or local:PATH) or a catalog entry: URL, arXiv id, "
             "DOI, id or title.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print what was removed as JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Take a local document or a catalog entry out; the next `dmlqa build` drops it from the index."""
    kb = _open(home)
    render.removal(kb.remove(_text_arg(target, "target") or ""), as_json=as_json)


# -- build / schedule ------------------------------------------------------------------------------------


@app.command()
def build(
    home: HomeOption = None,
    archive: ArchiveOption = None,
    offline: OfflineOption = False,
    no_open_access: NoOpenAccessOption = False,
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
    kb = _open(home, allow_private_hosts=allow_private_hosts, model=model, encoder=encoder, executor=executor,
               ray_address=ray_address, open_access=False if no_open_access else None)
    try:
        with render.BuildProgress() as progress:
            report = kb.build(offline=offline, archives=archive or (), refresh_lists=refresh_lists, progress=progress,
                              handle_signals=True)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (dmlqa.errors.Interrupted): the work so far is kept
        render.say(f"interrupted: {exc or 'stopped by Ctrl-C'}; run `dmlqa build` again to continue")
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    if as_json:
        render.print_json(report.to_json())
    else:
        render.build_report(report)
    if report.notice:
        render.say(f"note: {report.notice}")
    if report.index_version is None:
        raise typer.Exit(1)


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
    no_open_access: NoOpenAccessOption = False,
    allow_private_hosts: PrivateHostsOption = None,
    model: ModelOption = None,
    encoder: EncoderOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each run as one JSON line.")] = False,
    home: HomeOption = None,
) -> None:
    """Keep running and rebuild the index on a schedule (incremental; a failed run keeps the index)."""
    kb = _open(home, allow_private_hosts=allow_private_hosts, model=model, encoder=encoder,
               open_access=False if no_open_access else None)

    def started(spec: str) -> None:
        if not as_json:
            render.say(f"dmlqa schedule: {spec} on {kb.home} (PID {os.getpid()}); stop with Ctrl-C or SIGTERM")

    stopped = kb.schedule(every=every, cron=cron, run_now=now, max_runs=max_runs, offline=offline,
                          archives=archive or (), refresh_lists=refresh_lists, on_start=started,
                          on_run=lambda outcome: render.run(outcome, as_json=as_json))
    if stopped:
        render.say(f"dmlqa schedule {stopped}")


# -- status ----------------------------------------------------------------------------------------------


@app.command()
def status(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    show_coverage: Annotated[
        bool, typer.Option("--coverage", help="Per list and per host: full text, abstract only, cards, and why.")
    ] = False,
    failures: Annotated[
        bool, typer.Option("--failures", help="Every failure of the last build run, with its reason.")
    ] = False,
) -> None:
    """What the published index holds, the last build runs, and when the next scheduled run is."""
    kb = _open(home)
    if failures:
        render.failures(kb.last_failures(), as_json=as_json)
        return
    try:
        st = kb.status()
    except DmlqaError as exc:
        if not isinstance(exc, IndexDamagedError):  # no version yet: the failed runs say why
            history = kb.run_history()
            if as_json:  # a watcher still reads "ok" and the failures; the exit status says there is no index
                render.print_json({"index_version": None, "error": str(exc), **history})
            else:
                render.runs(history)
        raise  # to the one handler: one error line
    if as_json:
        render.print_json(st)
    elif show_coverage:
        render.coverage(st.get("coverage") or {}, st.get("duplicates") or [])
    else:
        render.status(st, kb.home)


# -- search / ask / eval / related -----------------------------------------------------------------------


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
    _check_mode(mode)
    if query is None and queries is None:
        render.fail("give a QUERY or --queries FILE.jsonl")
    query = _text_arg(query, "query")
    if query is not None:
        KnowledgeBase.check_text(query, "query")  # before the index loads: an empty query is a mistake
    kb = _open(home).pinned()  # the note and the results from one index version
    filters = _filters(kind, since, until, topic, host, include_undated)
    render.note_undated(kb.undated_excluded(**filters), since, until)
    if queries is not None:
        for qid, found in kb.search_file(queries, k, per_doc=per_doc, mode=mode, what="--queries", **filters):
            render.print_json({"query_id": qid, "hits": [h.to_json() for h in found]})
        return
    hits = kb.search(query or "", k, per_doc=per_doc, mode=mode, **filters)
    if as_json:
        render.print_json([h.to_json() for h in hits])
    else:
        render.did_you_mean(kb.spelling(query or ""))
        render.hits(hits)


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
    if question is None and questions is None:
        render.fail("give a QUESTION or --questions FILE.jsonl")
    question = _text_arg(question, "question")
    if question is not None:
        KnowledgeBase.check_text(question, "question")  # before the index loads
    kb = _open(home).pinned()  # the note and the results from one index version
    filters = _filters(kind, since, until, topic, host, include_undated)
    render.note_undated(kb.undated_excluded(**filters), since, until)
    if questions is not None:
        for qid, answer in kb.ask_file(questions, use_llm=not no_llm, what="--questions", **filters):
            render.print_json({"id": qid, **answer.to_json()})
        return
    if as_json:
        render.print_json(kb.ask(question or "", use_llm=not no_llm, **filters).to_json())
        return
    stream = kb.ask_stream(question or "", use_llm=not no_llm, **filters)
    llm = kb.llm_backend is not None
    streamed = []
    for delta in stream:
        streamed.append(delta)
        if llm:
            render.stream_delta(delta)
    answer = stream.result
    if llm and "".join(streamed).strip() != answer.answer.strip():
        render.checked_answer(answer.answer, streamed=bool(streamed))
    elif not llm:
        render.answer_text(answer.answer)
    else:
        render.end_of_stream()
    render.sources(answer)


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
    kb = _open(home)
    _check_mode(mode)
    scores = kb.evaluate(questions, llm=llm, mode=mode, what="--questions")
    if as_json:
        render.print_json(scores)
    else:
        render.eval_scores(scores, questions.name)


@app.command()
def related(
    query: Annotated[list[str], typer.Argument(
        help="Free text, or papers by catalog URL, arXiv id, DOI or title; several papers give their combined "
             "neighbourhood.")],
    k: Annotated[int, typer.Option("-k", help="How many documents.", min=1, max=200)] = 10,
    since: Annotated[int | None, typer.Option(help="Only documents from this year on.")] = None,
    include_undated: IncludeUndatedOption = False,
    kind: KindOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json, bibtex, or the paper's citation map (itself, "
                                     "what it cites, what cites it, the -k most co-cited): graphml or dot.")] = "table",
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    home: HomeOption = None,
) -> None:
    """Documents related to a paper (or several), URL, arXiv id, DOI or free text, through content and citations."""
    if fmt not in ("table", "json", "bibtex", "graphml", "dot"):
        render.fail(f"--format must be table, json, bibtex, graphml or dot (got {quoted(fmt)})")
    queries = [_text_arg(q, "query") or "" for q in query]
    KnowledgeBase.check_text(" ".join(queries), "query")
    kb = _open(home)
    if fmt in ("graphml", "dot"):  # the citation neighbourhood of one paper: filters do not apply to it
        if since is not None or kind or include_undated or as_json:
            render.fail(f"--format {fmt} exports one paper's citation map: drop --since, --kind, --include-undated "
                        "and --json")
        cmap = kb.citation_map(" ".join(queries), k=k)
        if cmap.notice:
            render.note(cmap.notice)
        render.text(cmap.to_graphml() if fmt == "graphml" else cmap.to_dot())
        return
    res = kb.related(queries[0] if len(queries) == 1 else queries, k, since=since, kinds=kind or (),
                     include_undated=include_undated)
    if res.notice:
        render.note(res.notice)  # stderr: keeps json/bibtex valid
    render.note_undated(res.undated_excluded, since, None)
    if as_json or fmt == "json":
        render.print_json(res.to_json())
    elif fmt == "bibtex":
        render.text(kb.bibtex(res.items))
    else:
        render.related(res, " + ".join(queries))


# -- the citation graph ----------------------------------------------------------------------------------

TargetArgument = Annotated[str, typer.Argument(help="A paper: catalog URL, arXiv id, DOI, doc id or title.")]


@app.command()
def cites(
    target: TargetArgument,
    k: Annotated[int | None, typer.Option("-k", help="At most this many of each list.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """What a paper cites: the documents of the knowledge base (with the citing sentence), then the rest."""
    kb = _open(home)
    _show_citations(kb.cites(_text_arg(target, "target") or "", k), "cites", as_json)


@app.command("cited-by")
def cited_by(
    target: TargetArgument,
    k: Annotated[int | None, typer.Option("-k", help="At most this many.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """The papers of the knowledge base that cite a document, newest first, with the citing sentence."""
    kb = _open(home)
    _show_citations(kb.cited_by(_text_arg(target, "target") or "", k), "cited by", as_json)


def _show_citations(res: Any, what: str, as_json: bool) -> None:
    """``cites`` / ``cited-by`` output: the notice on stderr, then JSON or the table."""
    if res.notice:
        render.note(res.notice)
    if as_json:
        render.print_json(res.to_json())
    else:
        render.citations(res, what)


@app.command()
def show(
    target: TargetArgument,
    page: Annotated[int | None, typer.Option("--page", help="This page of a PDF (default: the quote's page).",
                                             min=1)] = None,
    quote: Annotated[str | None, typer.Option("--quote", help="Text to locate and highlight.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """The archived text of a source: a PDF page, or an HTML passage, with a quote located. Works offline."""
    kb = _open(home)
    view = kb.show(_text_arg(target, "target") or "", page, _text_arg(quote, "quote"))
    if view.notice:
        render.note(view.notice)  # stderr: keeps the JSON valid
    if as_json:
        render.print_json(view.to_json())
    else:
        render.source_view(view, quote)


@app.command()
def suggest(
    k: Annotated[int, typer.Option("-k", help="How many works.", min=1, max=1000)] = 15,
    add: Annotated[bool, typer.Option("--add", help='Add them to the catalog under the list "suggested" '
                                      "(the next build fetches them).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Works cited by two or more documents that no list names, most cited first: what the lists miss."""
    kb = _open(home)
    res = kb.suggest(k, add=add)
    if res.notice:
        render.note(res.notice)
    if as_json:
        render.print_json(res.to_json())
    else:
        render.suggestions(res)


# -- serve -----------------------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on; anything but loopback is reachable by others.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65535)] = 7860,
    home: HomeOption = None,
) -> None:
    """Start the chat app (Gradio) on http://127.0.0.1:7860; DMLQA_UI_PASSWORD sets a password (user dmlqa)."""
    servers.serve_chat(_open(home), host, port)


@app.command("mcp")
def mcp_cmd(
    http: Annotated[int | None, typer.Option("--http", metavar="PORT", min=1, max=65535,
                                             help="Serve streamable HTTP on this port (default: stdio).")] = None,
    host: Annotated[str, typer.Option(help="With --http: interface to listen on (loopback unless you say).")]
    = "127.0.0.1",
    home: HomeOption = None,
) -> None:
    """Model Context Protocol server (stdio, or --http PORT) with tools search, ask, related, cites, cited_by
    and status."""
    servers.serve_mcp(lambda: _open(home), http, host)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
