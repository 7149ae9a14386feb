"""Bounded work per input (issue 19, item 5): long questions and targets are refused in one line, title
matching stays linear, MCP calls run side by side under a timeout, malformed MCP lines get a reply,
and error messages quote a long argument in short. A real home (two notes, built offline), the real
CLI, the real MCP server as a subprocess. CPU timings live in bench/hostile_targets.py, not here.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

import dmlqa
from dmlqa.app.cli import app
from dmlqa.app.mcp import request_id
from dmlqa.errors import EmptyQueryError, InputFileError, NotInIndexError, TextTooLongError, quoted
from dmlqa.query.limits import MAX_TARGET_CHARS, MAX_TEXT_CHARS, check_text
from dmlqa.query.related import TITLE_RATIO, _close, resolve_title

FUSION = ("# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger buffer. "
          "The fusion buffer is 128 MB by default.\n")
ZERO = ("# ZeRO\n\nZeRO stage 1 partitions optimizer states across data parallel ranks. Stage 2 also "
        "partitions gradients, and stage 3 partitions the parameters as well.\n")
#: 100,000 characters of words (the issue's case): a text, not one repeated letter.
LONG = " ".join(f"pipeline{i % 97} stage{i % 13}" for i in range(10_000))[:100_000]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounded")
    notes = root / "notes"
    notes.mkdir()
    (notes / "fusion.md").write_text(FUSION, encoding="utf-8")
    (notes / "zero.md").write_text(ZERO, encoding="utf-8")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    kb.add([notes])
    assert kb.build(offline=True).index_version
    return kb.home


# -- the limits ------------------------------------------------------------------------------------------


def test_the_limit_is_one_line_with_both_lengths() -> None:
    assert len(LONG) == 100_000
    assert check_text("x" * MAX_TEXT_CHARS) == "x" * MAX_TEXT_CHARS  # at the limit: taken
    with pytest.raises(TextTooLongError) as too_long:
        check_text("x" * (MAX_TEXT_CHARS + 1), "question")
    assert str(too_long.value) == f"the question is {MAX_TEXT_CHARS + 1:,} characters; the limit is {MAX_TEXT_CHARS:,}"
    assert isinstance(too_long.value, ValueError)
    with pytest.raises(TextTooLongError, match=f"the target is 100,000 characters; the limit is {MAX_TARGET_CHARS:,}"):
        check_text(LONG, "target")
    with pytest.raises(EmptyQueryError):
        check_text("   ", "question")


def test_the_chat_app_box_takes_what_the_library_takes() -> None:
    from dmlqa.app.ui_chat import MAX_INPUT_CHARS

    assert MAX_INPUT_CHARS == MAX_TEXT_CHARS


def test_the_chat_app_says_the_line_instead_of_cutting_the_text(home: Path) -> None:
    from dmlqa.app.ui_chat import related_turn
    from dmlqa.app.ui_service import ChatService

    rows, html = related_turn(ChatService(dmlqa.KnowledgeBase(home)), LONG, None)
    assert rows == [] and f"the query is 100,000 characters; the limit is {MAX_TEXT_CHARS:,}" in html


def test_api_refuses_long_texts_before_reading_the_index(tmp_path: Path) -> None:
    kb = dmlqa.KnowledgeBase(tmp_path / "empty", create=True)  # no index: anything that read it would say so
    for call in (lambda: kb.cites(LONG), lambda: kb.cited_by(LONG), lambda: kb.related(LONG),
                 lambda: kb.related([LONG[:50_000], LONG[50_000:]]), lambda: kb.search(LONG), lambda: kb.ask(LONG)):
        with pytest.raises(TextTooLongError) as exc:
            call()
        # the one line; two targets are read as one text, joined by a space
        line = r"the (target|query|question) is 100,00[01] characters; the limit is [\d,]+"
        assert re.fullmatch(line, str(exc.value))


def test_api_answers_texts_within_the_limit(home: Path) -> None:
    kb = dmlqa.KnowledgeBase(home)
    text = (ZERO * (MAX_TEXT_CHARS // len(ZERO)))[:MAX_TEXT_CHARS]
    res = kb.related(text, 2)
    assert res.target is None and res.items  # read as free text, and answered
    assert kb.cites("ZeRO").target.title == "ZeRO"


def test_cli_refuses_long_targets_in_one_line(home: Path) -> None:
    runner = CliRunner()
    for args, what, limit in ((["cites", LONG], "target", MAX_TARGET_CHARS),
                              (["cited-by", LONG], "target", MAX_TARGET_CHARS),
                              (["related", LONG], "query", MAX_TEXT_CHARS),
                              (["ask", "--no-llm", LONG], "question", MAX_TEXT_CHARS)):
        res = runner.invoke(app, ["--home", str(home), *args])
        assert res.exit_code == 1, res.output
        assert res.stderr.strip() == f"error: the {what} is 100,000 characters; the limit is {limit:,}", args[0]


def test_query_files_refuse_a_long_line_before_any_search(home: Path, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "a", "text": "ZeRO stages"}) + "\n"
                       + json.dumps({"id": "b", "text": LONG}) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"q\.jsonl:2: the query is 100,000 characters; the limit is 20,000"):
        list(dmlqa.KnowledgeBase(home).search_file(queries))
    res = CliRunner().invoke(app, ["--home", str(home), "search", "--queries", str(queries)])
    assert res.exit_code == 1 and res.stdout == ""  # nothing printed for line 1 either


# -- matching a title in linear time gives the answers ratio() gave --------------------------------------


@pytest.mark.parametrize("title", [
    "zero memory optimizations toward training trillion parameter models",
    "gpipe efficient training of giant neural networks using pipeline parallelism",
])
def test_the_linear_title_check_agrees_with_ratio(title: str) -> None:
    variants = [title, title[:-3], title + " x", title.replace("e", "a", 3), title.replace(" ", "", 2),
                title[: len(title) // 2], " ".join(reversed(title.split())), title * 2, LONG[:len(title)], "zero"]
    for words in variants:
        assert _close(words, title) == (SequenceMatcher(None, words, title).ratio() >= TITLE_RATIO), words


def test_a_long_text_is_matched_against_titles_without_error(home: Path) -> None:
    version = dmlqa.KnowledgeBase(home).pinned()._version_()
    assert resolve_title(version, "ZeRO")[0] is not None
    assert resolve_title(version, LONG) == (None, ())  # no title is like it: answered, not after minutes


# -- error messages quote a long argument in short -------------------------------------------------------


def test_quoted_shortens_long_input_and_keeps_short_input() -> None:
    assert quoted("GPipe") == "'GPipe'"
    shown = quoted(LONG)
    assert shown.endswith("… (100,000 characters)") and len(shown) < 120
    assert quoted("a\ud800") == "'a\\ud800'"  # printable, whatever it holds


def test_errors_quote_long_arguments_in_short(home: Path) -> None:
    kb = dmlqa.KnowledgeBase(home)
    target = " ".join(["no such paper"] * 100)  # 1,399 characters, within the target limit, names nothing
    with pytest.raises(NotInIndexError) as exc:
        kb.cites(target)
    assert "(1,399 characters)" in str(exc.value) and len(str(exc.value)) < 300
    res = CliRunner().invoke(app, ["--home", str(home), "search", "--mode", LONG, "zero"])
    assert res.exit_code != 0 and "(100,000 characters)" in res.stderr and len(res.stderr) < 300


# -- the MCP server ---------------------------------------------------------------------------------------

#: A server whose ``related`` never ends (until the process does): a call that is slow for any reason.
SLOW_SERVER = """
import sys, threading
from dmlqa.api import KnowledgeBase
from dmlqa.app import mcp

def never_ends(self, *args, **kwargs):
    threading.Event().wait()

KnowledgeBase.related = never_ends
mcp.run(lambda: KnowledgeBase(sys.argv[1]))
"""


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_mcp_a_slow_call_neither_blocks_others_nor_runs_forever(home: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER, encoding="utf-8")
    env = {**os.environ, "DMLQA_MCP_CALL_TIMEOUT_S": "20"}
    params = StdioServerParameters(command=sys.executable, args=[str(script), str(home)], env=env)
    seen: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(240):
            async with Client(params, read_timeout_seconds=180) as client:
                assert not (await client.call_tool("status", {})).is_error  # loaded: timing no longer matters

                async def slow() -> None:
                    seen["related"] = await client.call_tool("related", {"target": "pipeline"})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    status = await client.call_tool("status", {})  # while related is still running
                    seen["status"] = status
                    seen["related_done_first"] = "related" in seen
                    long = await client.call_tool("cites", {"target": LONG})
                    seen["long"] = long

    anyio.run(main)
    assert not seen["status"].is_error and json.loads(_text(seen["status"]))["documents"] == 2
    assert seen["related_done_first"] is False
    assert seen["related"].is_error and "took longer than 20 s" in _text(seen["related"])
    assert seen["long"].is_error
    assert _text(seen["long"]).endswith(f": the target is 100,000 characters; the limit is {MAX_TARGET_CHARS:,}")


def test_request_id_reads_the_outer_id_only() -> None:
    assert request_id('{"jsonrpc":"2.0","id":7,"method":"x"}') == 7
    assert request_id('{"params":{"id":1},"id":"b"}') == "b"  # not the nested one
    assert request_id('{"method":"x","params":' + "[" * 100_000 + "]" * 100_000 + ',"id":9}') == 9
    assert request_id("not json") is None
    assert request_id('{"id":"\\ud800"}') is None  # no id a reply could carry


def test_mcp_malformed_lines_get_error_replies_and_the_server_keeps_serving(home: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dmlqa.app.cli", "--home", str(home), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def exchange(raw: str) -> dict[str, Any]:
        proc.stdin.write(raw.encode("utf-8", "surrogatepass") + b"\n")
        proc.stdin.flush()
        return json.loads(lines.get(timeout=120))

    try:
        call = '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"search","arguments":%s}}'
        surrogate = exchange(call % (7, '{"query":"\\ud800"}'))
        deep = exchange(call % (8, "[" * 100_000 + "]" * 100_000))
        garbage = exchange("this is not JSON")
        wrong = exchange('{"hello":"world","id":5}')
        hello = exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert surrogate["id"] == 7 and surrogate["error"]["code"] == -32700
    assert "surrogate" in surrogate["error"]["message"] or "escape" in surrogate["error"]["message"]
    assert deep["id"] == 8 and deep["error"]["code"] == -32700 and "recursion" in deep["error"]["message"]
    assert garbage["id"] is None and garbage["error"]["code"] == -32700
    assert wrong["id"] == 5 and wrong["error"]["code"] == -32600
    assert all(len(r["error"]["message"]) <= 200 for r in (surrogate, deep, garbage, wrong))
    assert hello["id"] == 1 and hello["result"]["serverInfo"]["name"] == "dmlqa"
