"""``dmlqa mcp``: the real server process, driven by the MCP SDK's own clients, over a real index.

The home is built once per module from two markdown notes (as in test_api.py). Every test starts
``dmlqa ... mcp`` as a subprocess, over stdio or streamable HTTP, and talks to it the way an
assistant would: list the tools, call them, send bad arguments and keep going.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import dmlqa

TOOLS = {"search", "ask", "related", "cites", "cited_by", "show", "status"}
FUSION = ("# Tensor Fusion\n\nHorovod batches small allreduce operations into one larger buffer. "
          "The fusion buffer is 128 MB by default.\n\n## Timeline\n\nThe Horovod timeline records what each "
          "worker does over time; open it in chrome://tracing to find slow reductions.\n")
ZERO = ("# ZeRO\n\nZeRO stage 1 partitions optimizer states across data parallel ranks. Stage 2 also "
        "partitions gradients, and stage 3 partitions the parameters as well.\n")
NOTES = {"fusion.md": FUSION, "zero.md": ZERO}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp")
    notes = root / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    kb = dmlqa.KnowledgeBase(root / "kb", create=True)
    kb.add([notes])
    assert kb.build(offline=True).index_version
    return kb.home


def _command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "dmlqa.app.cli", "--home", str(home), "mcp", *args]


def _serve_stdio(home: Path, session: Callable[[Client], Awaitable[None]]) -> list[Exception]:
    """Run ``session`` against ``dmlqa --home HOME mcp`` over stdio; what the client could not parse
    (anything on the server's stdout that is not the protocol) is returned."""
    command = _command(home)
    # The whole environment: the SDK passes only a few variables on by default, and the server needs
    # the test session's (the encoder cache, no open-access lookups, offline Hugging Face).
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    stray: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    async def main() -> None:
        with anyio.fail_after(120):
            async with Client(params, read_timeout_seconds=60, message_handler=on_message) as client:
                await session(client)

    anyio.run(main)
    return stray


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_lists_the_tools_with_typed_schemas(home: Path) -> None:
    tools: dict[str, Any] = {}

    async def session(client: Client) -> None:
        tools.update({t.name: t for t in (await client.list_tools()).tools})

    assert _serve_stdio(home, session) == []
    assert set(tools) == TOOLS
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["type"] == "string"
    assert search["properties"]["k"]["type"] == "integer" and search["properties"]["k"]["minimum"] == 1
    assert set(search["properties"]) >= {"kinds", "since", "until", "topics", "hosts", "include_undated", "mode"}
    assert "paper" in search["properties"]["kinds"]["anyOf"][0]["items"]["enum"]
    assert tools["ask"].input_schema["required"] == ["question"]
    assert tools["related"].input_schema["required"] == ["target"]
    for name in ("cites", "cited_by"):
        assert tools[name].input_schema["required"] == ["target"]
    assert tools["status"].input_schema.get("required", []) == []
    for tool in tools.values():
        assert tool.description and tool.output_schema and tool.output_schema["type"] == "object"
        assert tool.annotations and tool.annotations.read_only_hint


def test_search_ask_related_status_and_citations(home: Path) -> None:
    results: dict[str, Any] = {}
    schemas: dict[str, Any] = {}

    async def session(client: Client) -> None:
        schemas.update({t.name: t.output_schema for t in (await client.list_tools()).tools})
        results["search"] = await client.call_tool("search", {"query": "How does ZeRO partition optimizer states?",
                                                              "k": 3})
        results["ask"] = await client.call_tool(
            "ask", {"question": "What is the default size of the Horovod fusion buffer?"})
        results["related"] = await client.call_tool("related", {"target": "ZeRO", "k": 5})
        results["status"] = await client.call_tool("status", {})
        zero = results["search"].structured_content["hits"][0]["doc_id"]
        results["cites"] = await client.call_tool("cites", {"target": zero})
        results["cited_by"] = await client.call_tool("cited_by", {"target": "Tensor Fusion", "k": 5})
        results["filtered"] = await client.call_tool("search", {"query": "ZeRO", "kinds": ["paper"]})
        results["misspelt"] = await client.call_tool("search", {"query": "ZeRO partiton optimizer states", "k": 1})

    assert _serve_stdio(home, session) == []
    for name, result in results.items():
        assert not result.is_error, (name, _text(result))
        tool = "search" if name in ("filtered", "misspelt") else name
        jsonschema.validate(result.structured_content, schemas[tool])
        assert _text(result).startswith("{")  # the same result as JSON text, for clients that read only text

    hits = results["search"].structured_content["hits"]
    assert hits[0]["title"] == "ZeRO" and "optimizer states" in hits[0]["text"]
    assert hits[0]["url"].startswith("file://") and hits[0]["url"].endswith("zero.md") and "page" in hits[0]

    answer = results["ask"].structured_content
    assert not answer["refused"] and "128 MB" in answer["answer"]
    assert answer["citations"] and "128 MB" in answer["citations"][0]["quote"]
    assert answer["citations"][0]["url"].endswith("fusion.md") and "retrieved" not in answer  # compact

    related = results["related"].structured_content
    assert related["target"] and related["target"].endswith("zero.md")
    assert [i["url"] for i in related["items"]] and all(not i["url"].endswith("zero.md") for i in related["items"])

    status = results["status"].structured_content
    assert status["documents"] == len(NOTES) and status["index_version"] and status["home"] == str(home)

    cites = results["cites"].structured_content
    assert cites["target"]["title"] == "ZeRO" and "not a PDF" in cites["notice"]
    assert results["cited_by"].structured_content["target"]["title"] == "Tensor Fusion"
    assert results["filtered"].structured_content["hits"] == []  # notes are articles, not papers
    assert results["search"].structured_content["notice"] is None
    # the hits match the query as typed; the notice offers it corrected
    assert results["misspelt"].structured_content["notice"] == "did you mean: ZeRO partition optimizer states"


def test_bad_calls_are_tool_errors_and_the_server_keeps_serving(home: Path) -> None:
    results: list[tuple[str, Any]] = []

    async def session(client: Client) -> None:
        for label, name, args in [
            ("missing", "search", {}),
            ("wrong type", "search", {"query": "ZeRO", "k": "many"}),
            ("out of range", "related", {"target": "ZeRO", "k": 0}),
            ("unknown kind", "ask", {"question": "ZeRO?", "kinds": ["podcast"]}),
            ("unknown paper", "cites", {"target": "2101.99999"}),
            ("after the errors", "search", {"query": "fusion buffer", "k": 1}),
        ]:
            results.append((label, await client.call_tool(name, args)))

    assert _serve_stdio(home, session) == []
    by_label = dict(results)
    for label in ("missing", "wrong type", "out of range", "unknown kind", "unknown paper"):
        assert by_label[label].is_error, label
    assert "query" in _text(by_label["missing"]) and "required" in _text(by_label["missing"]).lower()
    assert "k" in _text(by_label["wrong type"]) and "integer" in _text(by_label["wrong type"])
    assert "names no document" in _text(by_label["unknown paper"])  # the DmlqaError's own message
    last = by_label["after the errors"]
    assert not last.is_error and last.structured_content["hits"][0]["title"] == "Tensor Fusion"


def test_a_home_without_an_index_or_without_a_home_gives_clear_tool_errors(tmp_path: Path) -> None:
    empty = dmlqa.KnowledgeBase(tmp_path / "empty", create=True).home
    results: dict[str, Any] = {}

    async def no_index(client: Client) -> None:
        results["search"] = await client.call_tool("search", {"query": "ZeRO"})
        results["status"] = await client.call_tool("status", {})

    async def no_home(client: Client) -> None:
        results["no home"] = await client.call_tool("ask", {"question": "What is ZeRO?"})
        results["no home, again"] = await client.call_tool("status", {})

    assert _serve_stdio(empty, no_index) == []
    assert _serve_stdio(tmp_path / "missing", no_home) == []
    for name in ("search", "status"):
        assert results[name].is_error and "no index" in _text(results[name]) and "dmlqa build" in _text(results[name])
    for name in ("no home", "no home, again"):
        assert results[name].is_error and "no dmlqa home" in _text(results[name])
        assert "dmlqa init --home" in _text(results[name])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dmlqa mcp --http exited with {proc.returncode}: {proc.stderr.read().decode()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"dmlqa mcp --http did not listen on 127.0.0.1:{port} within {seconds}s")


def test_streamable_http_on_loopback(home: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(_command(home, "--http", str(port)), env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results: dict[str, Any] = {}
    try:
        _wait_listening(port, proc)

        async def main() -> None:
            with anyio.fail_after(120):
                async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                    results["tools"] = {t.name for t in (await client.list_tools()).tools}
                    results["ask"] = await client.call_tool("ask", {"question": "How large is the fusion buffer?"})
                    results["bad"] = await client.call_tool("related", {"k": 3})
                    results["search"] = await client.call_tool("search", {"query": "ZeRO stage 3", "k": 2})

        anyio.run(main)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert results["tools"] == TOOLS
    assert not results["ask"].is_error and "128 MB" in results["ask"].structured_content["answer"]
    assert results["bad"].is_error and "target" in _text(results["bad"])
    assert results["search"].structured_content["hits"][0]["title"] == "ZeRO"
    assert f"http://127.0.0.1:{port}/mcp" in proc.stderr.read().decode()
