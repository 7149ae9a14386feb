"""``dmlqa mcp``: the knowledge base as a Model Context Protocol server, for assistants that cite.

An assistant (Claude Desktop, Cursor, any MCP client) calls six read-only tools: ``search``,
``ask``, ``related``, ``cites``, ``cited_by`` and ``status``. Each is one call on a
:class:`dmlqa.KnowledgeBase`, and each returns the JSON ``dmlqa <command> --json`` prints (the
models' own ``to_json``), wrapped in an object and trimmed where the CLI's shape is bulky (``ask``
without the retrieved passages, ``status`` without the per-list coverage), so the CLI and the
server agree and a result stays small enough for a model's context. Every result carries titles,
URLs, pages and quoted text, which is what an assistant needs to cite.

Errors are the protocol's, never a crash: arguments that miss or mistype a field fail the tool's
input schema and a :class:`~dmlqa.errors.DmlqaError` (no index yet, a paper not in the index)
becomes a tool error carrying its message; both come back as ``isError`` results and the server
keeps serving. The knowledge base is opened on the first call and kept, so the index and the
embedding model load once. Transport: stdio (the protocol owns stdout; the SDK diverts stray
writes and logs go to stderr), or streamable HTTP on ``http://HOST:PORT/mcp``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal, NotRequired

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads nested TypedDicts below 3.12 only from here

from dmlqa.api import KnowledgeBase
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
    "`related` for similar documents, `cites`/`cited_by` for the citation graph. Cite the title, URL "
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

    Tools run on worker threads. Calls are serialised so that the lazy loads (the home, then the
    index and the encoder inside the knowledge base) happen once even when an assistant fires two
    calls at once; a call takes milliseconds once loaded, so nothing worth having is lost. A failed
    open (no home yet) is not kept, so the next call tries again.
    """

    def __init__(self, factory: Callable[[], KnowledgeBase]) -> None:
        self._factory = factory
        self._kb: KnowledgeBase | None = None
        self._lock = threading.Lock()

    def call(self, work: Callable[[KnowledgeBase], dict[str, Any]]) -> CallToolResult:
        """``work(kb)`` as a tool result; a :class:`DmlqaError` becomes a tool error with its message."""
        with self._lock:
            try:
                if self._kb is None:
                    self._kb = self._factory()
                    log.info("dmlqa mcp: knowledge base %s", self._kb.home)
                return _reply(work(self._kb))
            except DmlqaError as exc:
                raise ToolError(str(exc)) from exc


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
    def search(
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
            return {"query": query, "hits": [h.to_json() for h in hits],
                    "notice": _undated_notice(kb.undated_excluded(**flt))}

        return lib.call(work)

    @server.tool(annotations=read_only)
    def ask(
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

        return lib.call(work)

    @server.tool(annotations=read_only)
    def related(
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

        return lib.call(work)

    @server.tool(annotations=read_only)
    def cites(
        target: Target,
        k: Annotated[int | None, Field(ge=1, le=MAX_K * 10, description="At most this many of each list.")] = None,
    ) -> Annotated[CallToolResult, CitationsResult]:
        """What a paper cites: the documents of the knowledge base (with the citing sentence as `context`),
        then its references that name nothing in it (`unresolved`)."""
        return lib.call(lambda kb: _citations(kb.cites(target, k)))

    @server.tool(annotations=read_only)
    def cited_by(
        target: Target,
        k: Annotated[int | None, Field(ge=1, le=MAX_K * 10, description="At most this many.")] = None,
    ) -> Annotated[CallToolResult, CitationsResult]:
        """The documents of the knowledge base that cite a paper, newest first, each with the citing sentence."""
        return lib.call(lambda kb: _citations(kb.cited_by(target, k)))

    @server.tool(annotations=read_only)
    def status() -> Annotated[CallToolResult, StatusResult]:
        """What the knowledge base holds: index version, model, counts of resources, documents and passages,
        full-text coverage and the last build run."""
        return lib.call(lambda kb: status_json(kb.status(), str(kb.home)))

    return server


def _citations(res: Any) -> dict[str, Any]:
    """``dmlqa cites/cited-by --json`` with the notice the CLI writes to stderr."""
    return {**res.to_json(), "notice": res.notice}


def run(kb_factory: Callable[[], KnowledgeBase], *, http_port: int | None = None, host: str = "127.0.0.1") -> None:
    """Serve until the client goes away (stdio) or until interrupted (HTTP on ``host:http_port``)."""
    server = build_server(kb_factory)
    try:
        if http_port is None:
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=http_port, streamable_http_path=HTTP_PATH)
    except KeyboardInterrupt:
        pass
