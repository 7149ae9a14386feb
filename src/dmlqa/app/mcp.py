"""``dmlqa mcp``: the knowledge base as a Model Context Protocol server, for assistants that cite.

An assistant (Claude Desktop, Cursor, any MCP client) calls seven read-only tools: ``search``,
``ask``, ``related``, ``cites``, ``cited_by``, ``show`` (a source's archived text) and ``status``. Each is one call on a
:class:`dmlqa.KnowledgeBase`, and each returns the JSON ``dmlqa <command> --json`` prints (the
models' own ``to_json``), wrapped in an object and trimmed where the CLI's shape is bulky (``ask``
without the retrieved passages, ``status`` without the per-list coverage), so the CLI and the
server agree and a result stays small enough for a model's context. Every result carries titles,
URLs, pages and quoted text, which is what an assistant needs to cite.

Errors are the protocol's, never a crash: arguments that miss or mistype a field fail the tool's
input schema and a :class:`~dmlqa.errors.DmlqaError` (no index yet, a paper not in the index)
becomes a tool error carrying its message; both come back as ``isError`` results and the server
keeps serving (a line that is no JSON-RPC message gets an error reply too: :class:`AnswerMalformed`).
The knowledge base is opened on the first call and kept, so the index and the embedding model load
once; calls run side by side, each under ``mcp.call_timeout_s``. Transport: stdio (the protocol
owns stdout; the SDK diverts stray writes and logs go to stderr), or streamable HTTP on ``http://HOST:PORT/mcp``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Annotated, Any, Literal, NotRequired

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError
from typing_extensions import TypedDict  # pydantic reads nested TypedDicts below 3.12 only from here

from dmlqa.api import KnowledgeBase
from dmlqa.app.serving import HostGuard, HostRule
from dmlqa.errors import DmlqaError
from dmlqa.models import KINDS

log = logging.getLogger(__name__)

#: The largest ``k`` a tool accepts: more results than this only fill the assistant's context.
MAX_K = 50
#: The path of the streamable HTTP endpoint (the SDK's default, spelled once for the banner).
HTTP_PATH = "/mcp"

INSTRUCTIONS = (
    "dmlqa answers questions about distributed machine learning (data/tensor/pipeline parallelism, "
    "ZeRO, collective communication, training systems) from a local knowledge base of papers, docs "
    "and articles. Use `ask` for a short answer with numbered citations, `search` for passages, "
    "`related` for similar documents, `cites`/`cited_by` for the citation graph, `show` to read a cited "
    "page or passage in the archived source. Cite the title, URL "
    "and page a result gives; quotes are verbatim from the source."
)

# -- argument types: each field's description is what the assistant reads in the input schema -------

Kind = Literal[KINDS]  # type: ignore[valid-type]  # the catalog's kinds, as an enum in the schema
Kinds = Annotated[list[Kind] | None, Field(description="Only these kinds of resource.")]
Since = Annotated[int | None, Field(description="Only documents from this year on.", ge=1900, le=2100)]
Until = Annotated[int | None, Field(description="Only documents up to this year.", ge=1900, le=2100)]
Topics = Annotated[list[str] | None, Field(description="Only documents of these awesome-list topics.")]
Hosts = Annotated[list[str] | None, Field(description="Only documents from these hosts (e.g. arxiv.org).")]
IncludeUndated = Annotated[bool, Field(description="With since/until, keep documents of unknown year too.")]
Mode = Annotated[Literal["hybrid", "dense", "bm25"], Field(
    description="Retrieval: hybrid (dense + BM25, best), dense or bm25 (exact terms).")]
Target = Annotated[str, Field(min_length=1, description="A paper: catalog URL, arXiv id, DOI, doc id or title.")]

# -- result types: the JSON of ``dmlqa ... --json``, published as each tool's output schema -------------


class HitJSON(TypedDict):
    """One passage: ``text`` is quotable as is; ``page`` is the PDF page (null for web pages)."""

    rank: int
    score: float
    doc_id: str
    url: str
    title: str
    page: int | None
    section: str | None
    text: str


class SearchResult(TypedDict):
    query: str
    hits: list[HitJSON]
    notice: str | None


class CitationJSON(TypedDict):
    """Source ``[n]`` of an answer; ``quote`` is verified to occur in the cited passage."""

    n: int
    url: str
    title: str
    page: int | None
    quote: str
    view: str  # the archived view's path in the chat app (``/source/<doc_id>?page=N&q=QUOTE``)


class AskResult(TypedDict):
    question: str
    answer: str
    citations: list[CitationJSON]
    backend: str
    refused: bool
    notice: str | None
    flags: list[str]


class RelatedJSON(TypedDict):
    doc_id: str
    title: str
    url: str
    score: float
    reason: str
    authors: list[str]
    year: int | None
    venue: str | None
    kind: str
    relation: NotRequired[str]


class RelatedResult(TypedDict):
    query: str
    target: str | None
    targets: NotRequired[list[str]]
    notice: str | None
    items: list[RelatedJSON]


class DocJSON(TypedDict):
    doc_id: str
    title: str
    url: str
    year: int | None


class GraphJSON(DocJSON):
    """A document on the other end of a citation; ``context`` is the citing sentence ("" if not found)."""

    context: str


class OutsideJSON(TypedDict):
    """A reference that names no document of the knowledge base."""

    title: str
    year: int | None
    arxiv_id: str | None
    doi: str | None


class CitationsResult(TypedDict):
    target: DocJSON
    items: list[GraphJSON]
    unresolved: NotRequired[list[OutsideJSON]]
    notice: str | None


class ShowResult(TypedDict):
    """The archived text of a PDF page or of an HTML passage; ``quote_found`` says whether the quote is in it."""

    doc_id: str
    title: str
    url: str
    page: int | None
    text: str
    quote_found: bool
    view: str
    notice: str | None


class StatusResult(TypedDict):
    """``dmlqa status --json``, less the lists that grow with the corpus (failures, per-list coverage)."""

    home: str
    index_version: str
    built_at: str | None
    model: str | None
    encoder: str | None
    index_type: str | None
    resources: int
    documents: int
    cards: int
    chunks: int
    failed_count: int
    coverage: dict[str, Any]
    last_run: dict[str, Any] | None
    next_run: str | None


# -- the JSON ------------------------------------------------------------------------------------------


def _undated_notice(count: int) -> str | None:
    """What a year filter silently dropped, said where the assistant reads it (the CLI says it on stderr)."""
    if count <= 0:
        return None
    what = "1 document of unknown year was" if count == 1 else f"{count} documents of unknown year were"
    return f"{what} left out by the year filter; set include_undated to keep them"


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def status_json(st: dict[str, Any], home: str) -> dict[str, Any]:
    """The compact status: the index's facts, coverage totals and the last run without its id lists."""
    last = dict(st["runs"][0]) if st.get("runs") else None
    if last is not None:
        for bulky in ("added", "updated", "removed", "failed"):
            last.pop(bulky, None)
    return {
        "home": home, "index_version": st["index_version"], "built_at": st.get("built_at"), "model": st.get("model"),
        "encoder": st.get("encoder"), "index_type": st.get("index_type"), "resources": st.get("resources", 0),
        "documents": st.get("documents", 0), "cards": st.get("cards", 0), "chunks": st.get("chunks", 0),
        "failed_count": len(st.get("failed") or ()), "coverage": (st.get("coverage") or {}).get("total", {}),
        "last_run": last, "next_run": st.get("next_run"),
    }


def _reply(data: dict[str, Any]) -> CallToolResult:
    """The result twice, as the protocol asks: structured, and as compact JSON text for clients that
    only read text (the SDK's default text is indented, a third longer)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


# -- the server ----------------------------------------------------------------------------------------


class _Library:
    """The one knowledge base of the server, opened on first use and shared by every call.

    Each call runs on a worker thread of its own, so a slow one (a long question on a busy machine)
    never holds up the others: ``status`` answers while ``ask`` thinks. Only the open is serialised
    (two first calls must not open the home twice; the knowledge base loads its index and encoder
    under its own lock). A failed open (no home yet) is not kept, so the next call tries again.

    Each call has ``mcp.call_timeout_s`` seconds: past it the client gets a tool error saying so
    (and can go on), while the work, which a thread cannot be made to drop, ends in the background.
    Inputs are capped (:mod:`dmlqa.query.limits`), so such work is bounded too.
    """

    def __init__(self, factory: Callable[[], KnowledgeBase]) -> None:
        self._factory = factory
        self._kb: KnowledgeBase | None = None
        self._lock = threading.Lock()

    def _open(self) -> KnowledgeBase:
        with self._lock:
            if self._kb is None:
                self._kb = self._factory()
                log.info("dmlqa mcp: knowledge base %s", self._kb.home)
            return self._kb

    def _run(self, work: Callable[[KnowledgeBase], dict[str, Any]]) -> CallToolResult:
        """``work(kb)`` as a tool result, on a worker thread; a :class:`DmlqaError` becomes a tool error.

        ``kb`` is pinned to one index version for the call, so a tool that reads twice (hits, then the
        undated count) never answers from two versions when a build publishes meanwhile.
        """
        try:
            return _reply(work(self._open().pinned()))
        except DmlqaError as exc:
            raise ToolError(str(exc)) from exc

    async def call(self, work: Callable[[KnowledgeBase], dict[str, Any]]) -> CallToolResult:
        """:meth:`_run` on a worker thread, given up after the home's ``mcp.call_timeout_s`` seconds."""
        try:
            timeout = (await anyio.to_thread.run_sync(self._open)).settings.mcp.call_timeout_s
        except DmlqaError as exc:
            raise ToolError(str(exc)) from exc
        with anyio.move_on_after(timeout):
            return await anyio.to_thread.run_sync(self._run, work, abandon_on_cancel=True)
        raise ToolError(f"the call took longer than {timeout:g} s (mcp.call_timeout_s) and was given up; "
                        "other calls go on")


def _filters(kinds: list[str] | None, since: int | None, until: int | None, topics: list[str] | None,
             hosts: list[str] | None, include_undated: bool) -> dict[str, Any]:
    """The filter arguments as the keyword arguments every KnowledgeBase query method takes."""
    return {"kinds": kinds or (), "since": since, "until": until, "topics": topics or (), "hosts": hosts or (),
            "include_undated": include_undated}


def _version() -> str:
    try:
        return version("dmlqa")
    except PackageNotFoundError:  # a source tree that was never installed
        return ""


def build_server(kb_factory: Callable[[], KnowledgeBase]) -> MCPServer:
    """The MCP server over the knowledge base ``kb_factory`` opens (called once, on the first tool call)."""
    lib = _Library(kb_factory)
    server: MCPServer = MCPServer("dmlqa", title="dmlqa: distributed-ML literature", instructions=INSTRUCTIONS,
                                  version=_version(), log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    async def search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many passages.")] = 8,
        per_doc: Annotated[bool, Field(description="Each document once (its best passage).")] = False,
        mode: Mode = "hybrid",
        kinds: Kinds = None, since: Since = None, until: Until = None, topics: Topics = None, hosts: Hosts = None,
        include_undated: IncludeUndated = False,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the knowledge base for passages (hybrid dense + BM25), best first.

        Each hit has the document's title, URL, page and the passage text, quotable as is.
        """
        flt = _filters(kinds, since, until, topics, hosts, include_undated)

        def work(kb: KnowledgeBase) -> dict[str, Any]:
            hits = kb.search(query, k, per_doc=per_doc, mode=mode, **flt)
            fixed = kb.spelling(query)  # the hits match the query as typed; the client may search again
            return {"query": query, "hits": [h.to_json() for h in hits],
                    "notice": _join(_undated_notice(kb.undated_excluded(**flt)),
                                    f"did you mean: {fixed}" if fixed else None)}

        return await lib.call(work)

    @server.tool(annotations=read_only)
    async def ask(
        question: Annotated[str, Field(min_length=1, description="The question.")],
        previous: Annotated[str | None, Field(
            description="The previous answer's text, when this question follows up on it.")] = None,
        use_llm: Annotated[bool, Field(
            description="false: an extractive answer (verified quotes only) even when the server has an LLM.")]
        = True,
        mode: Mode = "hybrid",
        kinds: Kinds = None, since: Since = None, until: Until = None, topics: Topics = None, hosts: Hosts = None,
        include_undated: IncludeUndated = False,
    ) -> Annotated[CallToolResult, AskResult]:
        """Answer a question from the knowledge base: a short text with [n] markers and its numbered citations
        (title, URL, page, verbatim quote). `refused` is true when the sources do not answer it."""
        flt = _filters(kinds, since, until, topics, hosts, include_undated)

        def work(kb: KnowledgeBase) -> dict[str, Any]:
            answer = kb.ask(question, previous=previous, use_llm=use_llm, mode=mode, **flt)
            out = {k: v for k, v in answer.to_json().items() if k not in ("retrieved", "seconds")}
            out["notice"] = _join(out.get("notice"), _undated_notice(answer.undated_excluded))
            return {"question": question, **out}

        return await lib.call(work)

    @server.tool(annotations=read_only)
    async def related(
        target: Annotated[str | list[str], Field(
            description="A paper (catalog URL, arXiv id, DOI, doc id or title) or free text; a list of papers "
                        "gives their combined neighbourhood.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many documents.")] = 10,
        since: Since = None,
        kinds: Kinds = None,
        include_undated: IncludeUndated = False,
    ) -> Annotated[CallToolResult, RelatedResult]:
        """Documents related to a paper (or several) or to free text, through content and citations,
        each with the reason (a passage or the citation relation)."""
        if isinstance(target, list) and not any(t.strip() for t in target):
            raise ToolError("target: give at least one paper or some text")

        def work(kb: KnowledgeBase) -> dict[str, Any]:
            res = kb.related(target[0] if isinstance(target, list) and len(target) == 1 else target, k,
                             since=since, kinds=kinds or (), include_undated=include_undated)
            out = res.to_json()
            out["notice"] = _join(out.get("notice"), _undated_notice(res.undated_excluded))
            return out

        return await lib.call(work)

    @server.tool(annotations=read_only)
    async def cites(
        target: Target,
        k: Annotated[int | None, Field(ge=1, le=MAX_K * 10, description="At most this many of each list.")] = None,
    ) -> Annotated[CallToolResult, CitationsResult]:
        """What a paper cites: the documents of the knowledge base (with the citing sentence as `context`),
        then its references that name nothing in it (`unresolved`)."""
        return await lib.call(lambda kb: _citations(kb.cites(target, k)))

    @server.tool(annotations=read_only)
    async def cited_by(
        target: Target,
        k: Annotated[int | None, Field(ge=1, le=MAX_K * 10, description="At most this many.")] = None,
    ) -> Annotated[CallToolResult, CitationsResult]:
        """The documents of the knowledge base that cite a paper, newest first, each with the citing sentence."""
        return await lib.call(lambda kb: _citations(kb.cited_by(target, k)))

    @server.tool(annotations=read_only)
    async def show(
        target: Target,
        page: Annotated[int | None, Field(ge=1, description="This page of a PDF (default: the quote's page).")]
        = None,
        quote: Annotated[str | None, Field(description="Text to locate in the source (a citation's quote).")] = None,
    ) -> Annotated[CallToolResult, ShowResult]:
        """The archived text of a source, read offline: a PDF page, or the passage of a web page around the quote,
        with whether the quote is in it. Use it to check a citation against its source."""
        def work(kb: KnowledgeBase) -> dict[str, Any]:
            view = kb.show(target, page, quote)
            return {**view.to_json(), "view": view.view, "notice": view.notice}

        return await lib.call(work)

    @server.tool(annotations=read_only)
    async def status() -> Annotated[CallToolResult, StatusResult]:
        """What the knowledge base holds: index version, model, counts of resources, documents and passages,
        full-text coverage and the last build run."""
        return await lib.call(lambda kb: status_json(kb.status(), str(kb.home)))

    return server


def _citations(res: Any) -> dict[str, Any]:
    """``dmlqa cites/cited-by --json`` with the notice the CLI writes to stderr."""
    return {**res.to_json(), "notice": res.notice}


# -- stdio: a reply to every line ------------------------------------------------------------------------
# The SDK's stdio reader turns a line that is no JSON-RPC message (not JSON, nested past the parser's
# depth limit, a lone surrogate escape such as "\ud800", which strict JSON refuses) into an exception on
# the server's read stream; the server logs it and sends nothing, so the client waits for its own
# timeout. AnswerMalformed sits on that stream: such an item becomes a JSON-RPC error reply (-32700
# parse error, -32600 for JSON that is no JSON-RPC message) carrying the request's id when the line has
# one. Over HTTP the SDK already answers these with a 400 and a JSON-RPC error.

#: How much of the parser's complaint a reply quotes (it names the line and column, never the input).
MESSAGE_CHARS = 200

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ID_VALUE = re.compile(r'\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.)*")')


def request_id(line: str) -> int | str | None:
    """The ``"id"`` member of the outermost object of ``line``, or None when it has none to read.

    A linear scan that skips strings and counts brackets, without parsing what is nested, so a
    request nested 100,000 deep (past any parser's limit) or holding a lone surrogate still gets an
    answer its client can match. Only an integer or a string id counts, as JSON-RPC allows.
    """
    depth, i, n = 0, 0, len(line)
    while i < n:
        ch = line[i]
        if ch == '"':
            string = _STRING.match(line, i)
            if string is None:
                return None
            if depth == 1 and string.group() == '"id"':
                value = _ID_VALUE.match(line, string.end())
                return _id_value(value.group(1)) if value else None
            i = string.end()
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return None


def _id_value(text: str) -> int | str | None:
    try:
        value = json.loads(text)
        if isinstance(value, str):
            value.encode("utf-8")  # an id with a lone surrogate cannot be written back: no id
    except (ValueError, UnicodeEncodeError):
        return None
    return value


def error_reply(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the SDK could not read (``exc``: its ``ValidationError``)."""
    rid: int | str | None = None
    code, why = PARSE_ERROR, f"Parse error: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors(include_url=False)[0]
        given = first.get("input")  # the line when it is no JSON; the parsed value when it is
        if isinstance(given, bytes | bytearray):
            given = bytes(given).decode("utf-8", "replace")
        if first.get("type") == "json_invalid":
            why = f"Parse error: {first.get('msg', 'invalid JSON')}"
            rid = request_id(given) if isinstance(given, str) else None
        else:
            code, why = INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 request, notification or response"
            found = given.get("id") if isinstance(given, dict) else None
            rid = found if isinstance(found, int | str) and not isinstance(found, bool) else None
    if len(why) > MESSAGE_CHARS:
        why = why[: MESSAGE_CHARS - 1] + "…"
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=why))


class AnswerMalformed:
    """The server's read stream, less the unreadable lines, each of which is answered on ``write``.

    Behaves as the SDK's read stream does (``receive``, async iteration, ``aclose``, the sender's
    ``last_context``), so the server runs on it unchanged.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = error_reply(item)
            log.warning("dmlqa mcp: answered an unreadable request (id %r): %s", reply.id, reply.error.message)
            await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnswerMalformed:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnswerMalformed:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


async def serve_stdio(server: MCPServer) -> None:
    """What ``server.run("stdio")`` does, with :class:`AnswerMalformed` on the read side.

    The SDK offers no public hook for that stream, so this reaches its low-level server the way its
    own ``run_stdio_async`` does; tests/test_bounded_targets.py fails if that attribute goes.
    """
    lowlevel = server._lowlevel_server  # noqa: SLF001 - see the docstring
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(AnswerMalformed(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


def run(kb_factory: Callable[[], KnowledgeBase], *, http_port: int | None = None, host: str = "127.0.0.1",
        allowed_hosts: Sequence[str] = ()) -> None:
    """Serve until the client goes away (stdio) or until interrupted (HTTP on ``host:http_port``).

    Over HTTP only the names of :meth:`HostRule.serving(host, allowed_hosts) <dmlqa.app.serving.HostRule.serving>`
    are answered, by the chat app's own rule; the SDK's check (loopback only, and none at all on
    another ``--host``) is replaced by it.
    """
    server = build_server(kb_factory)
    try:
        if http_port is None:
            anyio.run(serve_stdio, server)  # the SDK's stdio, answering malformed requests
        else:
            import uvicorn
            from mcp.server.transport_security import TransportSecuritySettings

            app = server.streamable_http_app(
                streamable_http_path=HTTP_PATH, host=host,
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
            uvicorn.run(HostGuard(app, HostRule.serving(host, allowed_hosts)), host=host, port=http_port,
                        log_level="warning")
    except KeyboardInterrupt:
        pass
