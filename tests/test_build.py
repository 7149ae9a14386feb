"""The whole build through the CLI against a real HTTP server on 127.0.0.1.

Covers what only shows when the stages run together: the report, catalog cards for dead links,
the archive + manifest, incremental rebuilds (304s, reused documents and embeddings), a resource
that fails after having worked keeping its text, removal from the catalog, offline replay of the
build's own WARC, and local documents beside the catalog.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures_docs import build_pdf, html_page, landing_page, prose
from httpserver import LocalServer, Reply
from typer.testing import CliRunner

from dmlqa.app.cli import app
from dmlqa.catalog.store import write_catalog
from dmlqa.models import Resource

runner = CliRunner()

ZERO_HTML = html_page(
    "ZeRO notes",
    [("Stages", ["ZeRO stage 1 partitions optimizer states across data parallel ranks.",
                 "Stage 2 also partitions gradients, and stage 3 partitions the parameters too. " + prose(6)]),
     ("Offload", ["ZeRO-Offload moves optimizer states to CPU memory. " + prose(6, seed=1)])],
)
PAPER = build_pdf([
    "GPipe: pipeline parallelism. " + prose(10, seed=2),
    "The bubble overhead is amortised when the number of micro-batches is at least four times the number "
    "of stages. " + prose(10, seed=3),
    "Conclusion. " + prose(5, seed=4),
])
FLAKY_HTML = html_page("Horovod tensor fusion", [("Fusion", [
    "Tensor Fusion batches small allreduce operations into one larger buffer to cut latency. " + prose(5, seed=5)])])


def dmlqa(*args: str) -> object:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result


@pytest.fixture()
def server() -> LocalServer:
    s = LocalServer()
    s.route("/robots.txt", Reply(404, body=b""))
    etag = '"zero-v1"'
    s.route("/zero.html", lambda r: Reply(304) if r.headers.get("If-None-Match") == etag else Reply(
        200, body=ZERO_HTML.encode(), headers=[("ETag", etag)]))
    s.route("/landing", Reply(200, body=landing_page("GPipe", "We pipeline micro-batches.", "/gpipe.pdf").encode()))
    s.route("/gpipe.pdf", Reply(200, body=PAPER, content_type="application/octet-stream"))
    s.route("/dead", Reply(404, body=b"gone"))
    s.route("/empty.html", Reply(200, body=b"<html><body><nav>Home</nav></body></html>"))
    s.route("/flaky", Reply(200, body=FLAKY_HTML.encode()))
    yield s
    s.close()


def resources(server: LocalServer) -> list[Resource]:
    return [
        Resource(id="web:zero", url=server.url("/zero.html"), title="ZeRO notes", kind="docs", topics=("Memory",)),
        Resource(id="web:gpipe", url=server.url("/landing"), title="GPipe", kind="paper", year=2019,
                 authors=("Yanping Huang",), venue="NeurIPS", topics=("Pipeline Parallelism",)),
        Resource(id="web:dead", url=server.url("/dead"), title="A dead blog post about Horovod", kind="article"),
        Resource(id="web:empty", url=server.url("/empty.html"), title="Empty page", kind="article"),
        Resource(id="web:flaky", url=server.url("/flaky"), title="Tensor Fusion", kind="docs"),
    ]


def build(home: Path, *extra: str) -> dict:
    result = dmlqa("--home", str(home), "build", "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def search(home: Path, query: str, *extra: str) -> list[dict]:
    result = dmlqa("--home", str(home), "search", query, "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_build_search_rebuild_and_replay(tmp_path: Path, server: LocalServer) -> None:
    home = tmp_path / "kb"
    assert dmlqa("--home", str(home), "init").exit_code == 0
    write_catalog(home / "corpus" / "catalog.jsonl", resources(server))
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n\nSequence parallelism splits the sequence dimension across GPUs. " + prose(4))
    assert dmlqa("--home", str(home), "add", str(notes)).exit_code == 0

    # Private addresses are refused unless allowed explicitly.
    refused = build(home)
    assert refused["documents"] == 1 and refused["cards"] == 5  # only the local file has text
    assert all("loopback" in f["error"] for f in refused["failed"]) and server.hits("/zero.html") == 0

    first = build(home, "--allow-private-hosts")
    assert first["resources"] == 5
    assert first["documents"] == 4 and first["cards"] == 2  # zero, gpipe, flaky, notes | dead, empty
    failed = {f["url"]: f for f in first["failed"]}
    assert failed[server.url("/dead")]["stage"] == "fetch" and failed[server.url("/dead")]["error"] == (
        "HTTP 404 Not Found")
    assert failed[server.url("/empty.html")]["stage"] == "extract"
    # The local notes and the cards were embedded by the refused build already.
    assert first["embedded"] > 0 and first["embedded"] + first["reused_embeddings"] == first["chunks"]
    assert list((home / "corpus" / "archive").glob("*.warc.gz"))
    assert set(first["seconds"]) >= {"fetch", "extract", "chunk", "embed", "index"}
    ua = server.seen("/zero.html")[0].headers.get("User-Agent", "")
    assert ua.startswith("dmlqa/")

    # The PDF behind the landing page is indexed, cited with its page, at the PDF's address (where its text is).
    hits = search(home, "how many micro-batches amortise the pipeline bubble", "-k", "3")
    assert hits[0]["url"] == server.url("/gpipe.pdf") and hits[0]["page"] == 2
    assert hits[0]["title"] == "GPipe"
    # A dead link is still findable as a catalog card.
    card = search(home, "dead blog post Horovod", "-k", "10", "--per-doc")
    assert any(h["url"] == server.url("/dead") for h in card)
    # Local documents are searchable beside the catalog.
    assert search(home, "sequence dimension split across GPUs", "-k", "1")[0]["doc_id"] == "local:notes.md"

    # Rebuild: the flaky page now fails; it keeps its text. zero.html answers 304.
    server.route("/flaky", Reply(500, body=b"oops"))
    second = build(home, "--allow-private-hosts")
    assert second["not_modified"] >= 1
    assert second["embedded"] == 0 and second["reused_embeddings"] == second["chunks"] == first["chunks"]
    assert second["documents"] == 4
    assert any(f["url"] == server.url("/flaky") and "HTTP 500" in f["error"] for f in second["failed"])
    assert search(home, "tensor fusion batches small allreduce", "-k", "1")[0]["url"] == server.url("/flaky")
    assert any(r.headers.get("If-None-Match") == '"zero-v1"' for r in server.seen("/zero.html"))

    # Dropped from the catalog → dropped from the next version.
    write_catalog(home / "corpus" / "catalog.jsonl", resources(server)[:2])
    third = build(home, "--allow-private-hosts")
    assert "web:flaky" in third["removed"] and third["resources"] == 2
    assert all(h["doc_id"] != "web:flaky" for h in search(home, "tensor fusion allreduce", "-k", "20"))

    # Offline replay of the build's own archive: no server needed.
    archives = sorted((home / "corpus" / "archive").glob("*.warc.gz"))
    server.close()
    fresh = tmp_path / "replayed"
    dmlqa("--home", str(fresh), "init")
    write_catalog(fresh / "corpus" / "catalog.jsonl", resources(server)[:2])
    args = [a for p in archives for a in ("--archive", str(p))]
    replayed = build(fresh, "--offline", *args)
    assert replayed["from_archive"] == 2 and replayed["documents"] == 2 and not replayed["failed"]

    status = dmlqa("--home", str(home), "status", "--json")
    st = json.loads(status.stdout)
    assert st["index_version"] == third["index_version"] and st["chunks"] == third["chunks"]
    assert set(st) >= {"index_version", "built_at", "model", "resources", "documents", "cards", "chunks", "failed"}


def test_search_without_an_index_says_how_to_build(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--home", str(tmp_path), "search", "zero"])
    assert result.exit_code == 1
    assert "dmlqa build" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["--home", str(tmp_path), "status"])
    assert result.exit_code == 1 and "dmlqa build" in result.output


def test_batch_search_reads_beir_and_plain_queries(tmp_path: Path, server: LocalServer) -> None:
    home = tmp_path / "kb"
    dmlqa("--home", str(home), "init")
    write_catalog(home / "corpus" / "catalog.jsonl", resources(server)[:2])
    build(home, "--allow-private-hosts")
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"_id": "b1", "text": "pipeline bubble micro-batches"}) + "\n\n"
                 + json.dumps({"id": "p2", "text": "ZeRO stage 3 partitions parameters"}) + "\n")
    result = dmlqa("--home", str(home), "search", "--queries", str(q), "-k", "2", "--per-doc")
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert [x["query_id"] for x in lines] == ["b1", "p2"]
    assert lines[0]["hits"][0]["doc_id"] == "web:gpipe" and lines[1]["hits"][0]["doc_id"] == "web:zero"
    assert len({h["doc_id"] for h in lines[1]["hits"]}) == len(lines[1]["hits"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no id"}\n')
    result = runner.invoke(app, ["--home", str(home), "search", "--queries", str(bad)])
    assert result.exit_code == 1 and "needs \"id\"" in result.output


def test_second_concurrent_build_is_refused(tmp_path: Path) -> None:
    from dmlqa.pipeline.lock import WriterLock

    home = tmp_path / "kb"
    dmlqa("--home", str(home), "init")
    with WriterLock(home.resolve(), "build"):
        result = runner.invoke(app, ["--home", str(home), "build"])
    assert result.exit_code == 1 and "another dmlqa build is running" in result.output


# -- the stage functions on their own ----------------------------------------------------------------


def test_a_stage_returns_its_result_and_the_report_is_made_from_it() -> None:
    """extract_one touches nothing shared; its result crosses a process (Ray) unchanged, and the
    report's counts come from adding results, as both executors do."""
    from dmlqa.errors import FetchError
    from dmlqa.models import Block, Document
    from dmlqa.pipeline.report import BuildReport, ExtractResult, FetchBatch, Fetched
    from dmlqa.pipeline.stages import extract_one

    res = Resource(id="web:x", url="https://example.org/x", title="https://example.org/x", kind="docs",
                   lists=("awesome",), aliases=("http://example.org/x",))
    previous = Document(doc_id="web:x", url=res.url, title="A real title", sha256="abc",
                        blocks=(Block(text="Stored text about pipeline parallelism."),))
    failed = Fetched(res, None, FetchError(res.address, "HTTP 503"))
    kept = extract_one(failed, previous)
    assert (kept.kept_previous, kept.extracted, [f.to_json() for f in kept.failed]) == (
        1, 0, [{"url": "http://example.org/x", "stage": "fetch", "error": "HTTP 503"}])
    doc = kept.documents[0]
    assert doc.title == "A real title"  # a catalog title that only spells the URL never replaces a real one
    assert doc.text == previous.text and doc.lists == ("awesome",)
    assert doc.aliases == ("https://example.org/x", "http://example.org/x")
    card = extract_one(failed, None)
    assert card.documents[0].is_card and card.kept_previous == 0 and len(card.failed) == 1

    assert ExtractResult.from_json(json.loads(json.dumps(kept.to_json()))) == kept
    both = ExtractResult.combine([kept, card])
    assert [d.is_card for d in both.documents] == [False, True] and len(both.failed) == 2
    rows = FetchBatch.combine([FetchBatch.from_json(FetchBatch.of([failed], {"requests": 2}).to_json())] * 3)
    assert (rows.fetched, rows.not_modified, rows.from_archive, rows.stats) == (0, 0, 0, {"requests": 6})
    report = BuildReport()
    report.add_fetch(rows)
    report.add_extract(both)
    assert (report.kept_previous, len(report.failed), report.fetched_ok) == (1, 2, 0)
