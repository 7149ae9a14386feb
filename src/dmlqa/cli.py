"""The ``dmlqa`` command: a thin layer over the library.

Each command parses its flags, calls one library function and renders the result (a rich table
for people, ``--json`` for scripts). Heavy imports (torch, faiss, trafilatura) happen inside the
commands that need them, so ``dmlqa --help`` and ``dmlqa status`` start fast.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dmlqa.errors import DmlqaError
from dmlqa.settings import Settings, load_settings

app = typer.Typer(
    help="dmlqa: question answering with cited sources over the distributed-ML literature.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(help="Manage the catalog of resources (from awesome lists).", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

out = Console(soft_wrap=True)
err = Console(stderr=True)

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Knowledge-base home (default: $DMLQA_HOME or the current directory)."),
]


class _State:
    home: Path | None = None


def _settings(home: Path | None = None, **overrides: Any) -> Settings:
    try:
        return load_settings(home or _State.home).with_overrides(**overrides)
    except ValueError as exc:
        _fail(str(exc))
        raise  # unreachable


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


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
    from dmlqa.home import init_home

    settings = _settings(home)
    created = init_home(settings)
    out.print(f"Home ready at {settings.home}" + (f" (created {', '.join(created)})" if created else ""))


@catalog_app.command("import")
def catalog_import(
    files: Annotated[list[Path], typer.Argument(help="Awesome-list markdown files.")],
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Parse awesome-list markdown into corpus/catalog.jsonl."""
    from dmlqa.catalog import import_lists

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
    """Register your own documents; the next `dmlqa build` indexes them."""
    from dmlqa.localdocs import add_paths

    settings = _settings(home)
    rep = add_paths(paths, settings.corpus_dir)
    for path, reason in rep.skipped:
        err.print(f"[yellow]skipped[/yellow] {path}: {reason}", highlight=False)
    out.print(f"Added {len(rep.added)} file(s) to {settings.corpus_dir / 'local'}; run `dmlqa build` to index them.")
    if not rep.added:
        raise typer.Exit(1)


# -- build ---------------------------------------------------------------------------------------------


@app.command()
def build(
    home: HomeOption = None,
    archive: Annotated[
        list[Path] | None,
        typer.Option("--archive", help="Replay responses from this WARC file (repeatable)."),
    ] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Never touch the network.")] = False,
    allow_private_hosts: Annotated[
        bool | None,
        typer.Option("--allow-private-hosts", help="Allow fetching from loopback/private addresses."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Embedding model name or local path.")] = None,
    encoder: Annotated[str | None, typer.Option(help="onnx-int8 (default), onnx or torch.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
) -> None:
    """Download every catalog resource, extract, chunk, embed and publish a new index version."""
    from dmlqa.build import BuildOptions, run_build
    from dmlqa.progress import RichProgress

    settings = _settings(home, allow_private_hosts=allow_private_hosts, model=model, encoder=encoder)
    for a in archive or []:
        if not a.is_file():
            _fail(f"archive not found: {a}")
    options = BuildOptions(archives=tuple(archive or ()), offline=offline)
    try:
        with RichProgress(err, enabled=err.is_terminal) as progress:
            report = run_build(settings, options, progress=progress)
    except DmlqaError as exc:
        _fail(str(exc))
    if as_json:
        _print_json(report.to_json())
    else:
        _render_report(report)
    if report.index_version is None:
        raise typer.Exit(1)


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
    if report.failed:
        f = Table(title="Failed resources", show_header=True)
        f.add_column("stage")
        f.add_column("url", overflow="fold")
        f.add_column("reason", overflow="fold")
        for row in report.failed:
            f.add_row(row.stage, row.url, row.error)
        out.print(f)


# -- search ----------------------------------------------------------------------------------------------


def _read_queries(path: Path) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
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
    kind: Annotated[list[str] | None, typer.Option("--kind", help="Only this kind (repeatable).")] = None,
    since: Annotated[int | None, typer.Option(help="Only resources from this year on.")] = None,
    until: Annotated[int | None, typer.Option(help="Only resources up to this year.")] = None,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="Only this list topic (repeatable).")] = None,
    host: Annotated[list[str] | None, typer.Option("--host", help="Only this host (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Hybrid (dense + BM25) search over the published index."""
    from dmlqa.search import Filters, Searcher, SearchOptions

    if mode not in ("hybrid", "dense", "bm25"):
        _fail(f"--mode must be hybrid, dense or bm25 (got {mode!r})")
    if query is None and queries is None:
        _fail("give a QUERY or --queries FILE.jsonl")
    settings = _settings(home)
    filters = Filters(kinds=tuple(kind or ()), since=since, until=until, topics=tuple(topic or ()),
                      hosts=tuple(host or ()))
    options = SearchOptions(k=k, per_doc=per_doc, mode=mode, filters=filters)
    searcher = Searcher(settings)
    try:
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


# -- status ----------------------------------------------------------------------------------------------


@app.command()
def status(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What the published index holds."""
    from dmlqa.home import index_status

    settings = _settings(home)
    try:
        st = index_status(settings)
    except DmlqaError as exc:
        _fail(str(exc))
    if as_json:
        _print_json(st)
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
