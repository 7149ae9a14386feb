"""Ordinary mistakes (issue 18, item 7): each one is said in one line with a non-zero exit and costs nothing.

* ``catalog import`` of a file without links (a system file, an empty file, binary bytes, a list of
  badges) registers nothing;
* an empty question or query is an error in the CLI, the library API and the MCP server;
* ``GET /health`` on the chat app answers JSON (200 with an index, 503 without);
* ``eval`` counts answerable and unanswerable questions apart;
* ``dmlqa remove`` takes a local document or a catalog entry out, and the next build drops only it.

CLI errors are checked on the installed ``dmlqa`` in a subprocess (a traceback shows only there);
builds and the rest go through typer's runner in-process, against real homes, a real index, a
real HTTP server on 127.0.0.1 and the real app server.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fixtures_docs import html_page, prose
from httpserver import LocalServer, Reply
from test_cli_errors import dmlqa as dmlqa_process
from test_cli_errors import one_line_error
from typer.testing import CliRunner

import dmlqa
from dmlqa.app.cli import app
from dmlqa.catalog.store import read_catalog
from dmlqa.errors import EmptyQueryError, InputFileError, UnknownTargetError

runner = CliRunner()

FUSION = ("# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger fusion buffer "
          "before it reduces them. " + prose(4, seed=11) + "\n")
ZERO = ("# ZeRO Stages\n\nZeRO stage 1 partitions optimizer states across data parallel ranks; stage 3 "
        "partitions the parameters as well. " + prose(4, seed=12) + "\n")


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def build(home: Path, *extra: str) -> dict[str, Any]:
    result = cli("--home", str(home), "build", "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def search_ids(home: Path, query: str) -> list[str]:
    result = cli("--home", str(home), "search", query, "--json", "-k", "20")
    assert result.exit_code == 0, result.output
    return [h["doc_id"] for h in json.loads(result.stdout)]


@pytest.fixture(scope="module")
def notes_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built home of two local notes (fusion.md, zero.md); tests that change it work on their own."""
    root = tmp_path_factory.mktemp("mistakes")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    for name, text in (("fusion.md", FUSION), ("zero.md", ZERO)):
        (root / name).write_text(text, encoding="utf-8")
    kb.add([root / "fusion.md", root / "zero.md"])
    assert kb.build(offline=True).index_version
    return kb.home


# -- catalog import of a file without links --------------------------------------------------------------


@pytest.mark.parametrize(("content", "reason"), [
    (b"buildhost-7\n", "no links found"),  # what /etc/hostname holds
    (b"", "the file is empty"),
    (bytes(range(256)) * 16, "binary data"),
    (b"# Badges\n\n[![build](https://img.shields.io/badge/build-passing-green.svg)](https://travis-ci.org/x/y)\n",
     "no resource links (1 link skipped"),
])
def test_importing_a_file_without_links_is_one_error_and_registers_nothing(
        tmp_path: Path, content: bytes, reason: str) -> None:
    home = tmp_path / "kb"
    dmlqa.KnowledgeBase(home, create=True)
    good = tmp_path / "good.md"
    good.write_text("# Good\n\n- [ZeRO](https://arxiv.org/abs/1910.02054)\n", encoding="utf-8")
    bad = tmp_path / "hostname"
    bad.write_bytes(content)
    before = {p.relative_to(home): p.read_bytes() for p in (home / "corpus").rglob("*") if p.is_file()}

    for files in ([bad], [good, bad]):  # beside a good list, the good one is not imported either
        message = one_line_error(dmlqa_process("--home", str(home), "catalog", "import", *map(str, files)))
        assert message.startswith(f"{bad}: {reason}") and message.endswith("nothing imported"), message
        after = {p.relative_to(home): p.read_bytes() for p in (home / "corpus").rglob("*") if p.is_file()}
        assert after == before

    assert cli("--home", str(home), "catalog", "import", str(good)).exit_code == 0  # a real list still imports
    assert [r.id for r in read_catalog(home / "corpus" / "catalog.jsonl")] == ["arxiv:1910.02054"]


# -- empty questions and queries ---------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["ask", ""], ["ask", " \t "], ["search", ""], ["search", "   "],
                                  ["related", " "], ["ask", "", "--json"]])
def test_empty_question_or_query_is_an_error_in_the_cli(notes_home: Path, args: list[str]) -> None:
    message = one_line_error(dmlqa_process("--home", str(notes_home), *args))
    what = "question" if args[0] == "ask" else "query"
    assert message == f"the {what} is empty: give some words to look for"


def test_empty_question_or_query_is_a_value_error_in_the_api(notes_home: Path, tmp_path: Path) -> None:
    kb = dmlqa.KnowledgeBase(notes_home)
    for call in (lambda: kb.ask(""), lambda: kb.ask_stream("  \n"), lambda: kb.search(" "),
                 lambda: kb.related(""), lambda: kb.related(["", " "])):
        with pytest.raises(EmptyQueryError, match="is empty") as caught:
            call()
        assert isinstance(caught.value, ValueError)
    assert kb.search("fusion buffer")[0].doc_id == "local:fusion.md"  # and the knowledge base still answers
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "1", "text": "fusion"}\n{"id": "2", "text": "  "}\n', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"queries.jsonl:2: the query text is empty"):
        kb.search_file(queries)  # refused before the first search, not halfway through the output


def test_empty_query_is_a_tool_error_in_mcp(notes_home: Path) -> None:
    from test_mcp import _serve_stdio, _text

    seen: dict[str, Any] = {}

    async def session(client: Any) -> None:
        seen["search"] = await client.call_tool("search", {"query": "   "})
        seen["ask"] = await client.call_tool("ask", {"question": "\n"})
        seen["related"] = await client.call_tool("related", {"target": " "})
        seen["after"] = await client.call_tool("search", {"query": "fusion buffer"})

    assert _serve_stdio(notes_home, session) == []
    for tool in ("search", "ask", "related"):
        assert seen[tool].is_error and "is empty" in _text(seen[tool]), (tool, _text(seen[tool]))
    assert not seen["after"].is_error and "local:fusion.md" in _text(seen["after"])


# -- GET /health ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _health(home: Path, *, password: str) -> httpx.Response:
    from dmlqa.app.ui import serve

    port = _free_port()
    demo = serve(dmlqa.KnowledgeBase(home), host="127.0.0.1", port=port, password=password, block=False,
                 say=lambda level, text: None)
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=60)
    finally:
        demo.close()


def test_health_is_a_json_route_of_the_app(notes_home: Path, tmp_path: Path) -> None:
    published = (notes_home / "index" / "CURRENT").read_text(encoding="utf-8").strip()
    # A password protects the app, not its health check: a load balancer cannot log in.
    r = _health(notes_home, password="secret")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["ok"] is True and body["version"] == published
    assert body["documents"] == 2  # the two notes added
    assert datetime.fromisoformat(body["built_at"]).tzinfo is not None

    empty = dmlqa.KnowledgeBase(tmp_path / "empty", create=True).home
    r = _health(empty, password="")
    assert r.status_code == 503
    body = r.json()
    assert body["ok"] is False and body["version"] is None and "dmlqa build" in body["error"]


# -- eval counts both kinds of question ----------------------------------------------------------------------


def test_eval_counts_answerable_and_unanswerable_questions_apart(notes_home: Path, tmp_path: Path) -> None:
    questions = [
        {"id": "a1", "question": "What does Horovod batch into a fusion buffer?", "gold_urls": ["local/fusion.md"]},
        {"id": "a2", "question": "What does ZeRO stage 1 partition?", "gold_urls": ["local/zero.md"]},
        {"id": "a3", "question": "Which ZeRO stage partitions the parameters?", "gold_urls": ["local/zero.md"]},
        {"id": "u1", "question": "How long should an egg be boiled?", "answerable": False, "gold_urls": []},
        {"id": "u2", "question": "Who painted the Mona Lisa?", "answerable": False, "gold_urls": []},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    answerable = sum(q.get("answerable", True) for q in questions)

    result = cli("--home", str(notes_home), "eval", "--questions", str(path), "--no-llm", "--json")
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert (scores["questions"], scores["answerable"], scores["unanswerable"]) == (
        len(questions), answerable, len(questions) - answerable)

    result = cli("--home", str(notes_home), "eval", "--questions", str(path), "--no-llm")
    assert result.exit_code == 0, result.output
    assert f"{len(questions)} ({answerable} answerable, {len(questions) - answerable} unanswerable)" in result.stdout


# -- dmlqa remove ----------------------------------------------------------------------------------------------


def test_remove_a_local_document_then_the_build_drops_only_it(tmp_path: Path) -> None:
    kb = dmlqa.KnowledgeBase(tmp_path / "kb", create=True)
    for name, text in (("fusion.md", FUSION), ("zero.md", ZERO)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    kb.add([tmp_path / "fusion.md", tmp_path / "zero.md"])
    first = build(kb.home, "--offline")
    assert first["documents"] == 2 and first["embedded"] > 0
    assert "local:fusion.md" in search_ids(kb.home, "fusion buffer allreduce")

    result = cli("--home", str(kb.home), "remove", "Tensor Fusion")  # by title, as `related` reads one
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == ("Removed local document local:fusion.md; the next `dmlqa build` drops it "
                                     "from the index.")
    assert not (kb.home / "corpus" / "local" / "fusion.md").exists()
    assert (kb.home / "corpus" / "local" / "zero.md").read_text(encoding="utf-8") == ZERO

    second = build(kb.home, "--offline")
    assert second["removed"] == ["local:fusion.md"] and second["documents"] == 1
    # Nothing else is lost: zero.md's passages and sentences come from the cache, none is embedded again.
    assert second["embedded"] == 0 and second["embedded_sentences"] == 0
    assert second["reused_embeddings"] == second["chunks"] > 0
    ids = search_ids(kb.home, "fusion buffer allreduce")
    assert "local:fusion.md" not in ids and "local:zero.md" in ids

    # The same target again names nothing now: one line, with what is close.
    message = one_line_error(dmlqa_process("--home", str(kb.home), "remove", "local:fusion.md"))
    assert message.startswith("'local:fusion.md' names no local document or catalog entry"), message
    message = one_line_error(dmlqa_process("--home", str(kb.home), "remove", "zero.mdx"))
    assert "closest: local:zero.md" in message, message


def test_remove_a_catalog_entry_by_the_url_its_list_gives(tmp_path: Path) -> None:
    server = LocalServer()
    server.route("/robots.txt", Reply(404, body=b""))
    pages = {
        "/fusion.html": html_page("Tensor Fusion", [("Fusion", [
            "Tensor Fusion batches small allreduce operations into one larger buffer. " + prose(5, seed=5)])]),
        "/zero.html": html_page("ZeRO notes", [("Stages", [
            "ZeRO stage 1 partitions optimizer states across data parallel ranks. " + prose(5, seed=6)])]),
    }
    for path, page in pages.items():
        server.route(path, Reply(200, body=page.encode()))
    try:
        home = tmp_path / "kb"
        dmlqa.KnowledgeBase(home, create=True)
        listing = tmp_path / "list.md"
        listing.write_text("# Notes\n\n" + "".join(f"- [{p}]({server.url(p)})\n" for p in pages), encoding="utf-8")
        assert cli("--home", str(home), "catalog", "import", str(listing)).exit_code == 0
        first = build(home, "--allow-private-hosts")
        assert first["documents"] == len(pages)

        gone_url = server.url("/fusion.html")
        catalog = read_catalog(home / "corpus" / "catalog.jsonl")
        (gone,) = [r for r in catalog if gone_url in r.aliases]
        result = cli("--home", str(home), "remove", gone_url, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["catalog"] == [{"id": gone.id, "url": gone_url, "title": gone.title}]
        assert [r.id for r in read_catalog(home / "corpus" / "catalog.jsonl")] == [
            r.id for r in catalog if r.id != gone.id]

        fetched = server.hits("/fusion.html")
        second = build(home, "--allow-private-hosts")
        assert second["removed"] == [gone.id] and second["documents"] == len(pages) - 1
        assert second["embedded"] == 0 and second["reused_embeddings"] == second["chunks"] > 0
        assert server.hits("/fusion.html") == fetched  # not fetched again
        assert gone.id not in search_ids(home, "tensor fusion allreduce buffer")
    finally:
        server.close()


def test_remove_refuses_what_it_cannot_take_out(notes_home: Path, tmp_path: Path) -> None:
    kb = dmlqa.KnowledgeBase(notes_home)
    with pytest.raises(UnknownTargetError, match=r"'Tensr Fusion' names no local document .*closest: 'Tensor Fusion'"):
        kb.remove("Tensr Fusion")
    with pytest.raises(EmptyQueryError):
        kb.remove("  ")
    # One record of a JSON Lines file cannot go on its own: the file goes whole.
    records = tmp_path / "records.jsonl"
    records.write_text('{"id": "r1", "title": "Ring allreduce", "text": "Ring allreduce passes chunks around a '
                       'ring of workers so that each link carries the same load."}\n', encoding="utf-8")
    other = dmlqa.KnowledgeBase(tmp_path / "kb", create=True)
    other.add([records])
    assert other.build(offline=True).index_version
    with pytest.raises(UnknownTargetError, match=r"record r1 of local/records.jsonl: .*dmlqa remove local:records"):
        other.remove("r1")
    assert other.remove("local:records.jsonl").files == ("records.jsonl",)
    assert not (other.home / "corpus" / "local" / "records.jsonl").exists()


def test_remove_before_any_build_by_id_title_or_folder(tmp_path: Path) -> None:
    """Without an index the catalog and corpus/local still answer: arXiv id, title, an added folder."""
    home = tmp_path / "kb"
    kb = dmlqa.KnowledgeBase(home, create=True)
    listing = tmp_path / "list.md"
    listing.write_text("# Papers\n\n- [ZeRO: Memory Optimizations](http://arxiv.org/pdf/1910.02054v3)\n"
                       "- [GPipe: Efficient Training of Giant Neural Networks](https://arxiv.org/abs/1811.06965)\n"
                       "- [Horovod](https://github.com/horovod/horovod)\n", encoding="utf-8")
    kb.import_lists([listing])
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text(FUSION, encoding="utf-8")
    (notes / "b.md").write_text(ZERO, encoding="utf-8")
    kb.add([notes])

    assert [r.id for r in kb.remove("arXiv:1910.02054").entries] == ["arxiv:1910.02054"]
    assert [r.id for r in kb.remove("gpipe: efficient training of giant neural networks").entries] == [
        "arxiv:1811.06965"]
    removed = kb.remove("notes")
    assert (removed.folder, removed.files) == ("notes", ("notes/a.md", "notes/b.md"))
    assert not (home / "corpus" / "local" / "notes").exists() and (home / "corpus" / "local").is_dir()
    assert [r.id for r in kb.catalog()] == ["github:horovod/horovod"]
    with pytest.raises(UnknownTargetError, match=r"closest: 'Horovod' \(github:horovod/horovod\)"):
        kb.remove("Horovd")
